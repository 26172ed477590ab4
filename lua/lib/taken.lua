-- lib/taken.lua: the books of the slots in use, kept with the holders' records: the bitmap
-- (KEYS[6]), and the state's extra_slots (slots beyond the first of holders of several) and
-- exclusive (the token of an --exclusive holder).
-- Provides: mark_exclusive(call, state, token), take_slots(call, state, token, weight, limit,
--   exclusive), untake_slots(call, state, token, info, others), recount_slots(call, state,
--   held); within: store_extra(call, state, extra).
--- @include "call"
--- @include "state"
--- @include "records"
--- @include "lifetime"

-- Records holder `token` as exclusive (--exclusive): while it holds, every slot counts as in
-- use, also the ones a raised limit adds (see used_slots()).
local function mark_exclusive(call, state, token)
    state.exclusive = token
    redis.call('HSET', call.k_state, 'exclusive', token)
end

-- Takes `weight` free slots below `limit`, lowest first, for holder `token` (all of them for
-- an `exclusive` one): sets their bits and counts the extra ones (state field extra_slots).
-- Returns them as a list, or nil, taking none, when the bitmap has fewer free below the limit
-- (keys changed by hand).
local function take_slots(call, state, token, weight, limit, exclusive)
    local slots = {}
    local from = 0 -- the byte to look from: the slots below the last one taken are all set
    for i = 1, weight do
        local slot = redis.call('BITPOS', call.k_slots, 0, from)
        if slot < 0 or slot >= limit then
            for _, taken in ipairs(slots) do
                redis.call('SETBIT', call.k_slots, taken, 0)
            end
            return nil
        end
        redis.call('SETBIT', call.k_slots, slot, 1)
        slots[i] = slot
        from = math.floor(slot / 8)
    end
    if weight > 1 then
        state.extra = state.extra + weight - 1
        redis.call('HSET', call.k_state, 'extra_slots', state.extra)
    end
    if exclusive then
        mark_exclusive(call, state, token)
    end
    return slots
end

-- Stores how many extra slots holders of several hold (state field extra_slots), when it
-- changed. (Shrinks by HDEL: a release must run on a full Redis, where a script sent by EVAL
-- is refused at its first write that may grow memory.)
local function store_extra(call, state, extra)
    if extra ~= state.extra then
        state.extra = extra
        if extra == 0 then
            redis.call('HDEL', call.k_state, 'extra_slots')
        else
            redis.call('HSET', call.k_state, 'extra_slots', extra)
        end
    end
end

-- Gives back what take_slots() counted for holder `token`, whose record is `info`.
-- (Writes only what changes, and shrinks by HDEL: a release must run on a full Redis, where a
-- script sent by EVAL is refused at its first write that may grow memory.)
local function untake_slots(call, state, token, info, others)
    -- Nobody else holds: none, whatever the count says (an older redsem that removes a holder
    -- of several leaves its extra slots counted).
    local extra = others == 0 and 0 or math.max(state.extra - (#info.slots - 1), 0)
    store_extra(call, state, extra)
    if state.exclusive == token or (state.exclusive and others == 0) then
        state.exclusive = nil
        redis.call('HDEL', call.k_state, 'exclusive')
    end
end

-- Brings the books of the slots in use (the bitmap, and the state's extra_slots and
-- exclusive) back to the holders' records of `held` holders, where they disagree: an older
-- redsem cannot read a record of several slots ("0,1,2"), so when its gc or prune removes
-- such a holder it clears neither its bits nor its extra slots, which would then stay in use
-- while anybody holds (docs/ARCHITECTURE.md, "Several slots"). Only a semaphore with extra
-- slots or an exclusive holder on its books can be wrong so: one HGET a holder then. A record
-- that names no slots (edited by hand) leaves the books as they are. Returns true when it
-- changed them.
local function recount_slots(call, state, held)
    if held == 0 or (state.extra == 0 and not state.exclusive) then
        return false
    end
    local taken, extra, exclusive = {}, 0, nil
    for _, token in ipairs(redis.call('ZRANGE', call.k_holders, 0, -1)) do
        local info = parse_info(redis.call('HGET', call.k_info, token))
        if not info or info.kind ~= 'h' or not info.slots then
            return false
        end
        for _, slot in ipairs(info.slots) do
            taken[#taken + 1] = slot
        end
        extra = extra + #info.slots - 1
        if token == state.exclusive then
            exclusive = token
        end
    end
    if extra == state.extra and exclusive == state.exclusive then
        return false
    end
    redis.call('DEL', call.k_slots)
    for _, slot in ipairs(taken) do
        redis.call('SETBIT', call.k_slots, slot, 1)
    end
    expire_new(call, state, call.k_slots)
    store_extra(call, state, extra)
    if exclusive ~= state.exclusive then
        state.exclusive = nil
        redis.call('HDEL', call.k_state, 'exclusive')
    end
    return true
end
