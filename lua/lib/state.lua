-- lib/state.lua: the semaphore's state hash (KEYS[1]) and its records: reading and checking
-- the keys, the server clock, fences, the keys' expiry, the lower bound of deadlines, settings,
-- and the info entries of holders and waiters.
-- Provides: load_state(call), server_now(call), next_fence(call, state),
--   touch(call, state, deadline), settle_expiry(call, state), unpin_keys(call, state),
--   note_deadline(call, state, deadline), expire_new(state, key),
--   store_setting(call, state, field, value), parse_info(raw), holder_info(...),
--   queue_length(call, state), and the constants PAUSE_MARK_TICKET, KEEP_MIN_MS,
--   KEEP_STEP_MS, NOTHING_DUE, KEEPER_MARK.
-- Uses the protocol's MAX_LIMIT, DEFAULT_HISTORY, DEFAULT_TTL_MS and PAUSE_MARK.
-- Needs: call.lua (the call's keys; server_now() sets call.now_us, load_state() call.state).
--
-- `state` is the table load_state() returns: the state hash's fields as this call knows them,
-- changed by the functions that write them.

-- Keys outlive the last lease or waiter by at least KEEP_MIN_MS, so an abandoned semaphore
-- disappears by itself; touch() moves the horizon forward in steps of KEEP_STEP_MS. While
-- anybody holds or waits, the keys have no expiry at all (settle_expiry()): a Redis that
-- evicts only keys with one (maxmemory-policy volatile-*, the default of managed services)
-- then cannot evict a semaphore in use, which would let a second holder in.
local KEEP_MIN_MS = 12 * 3600 * 1000
local KEEP_STEP_MS = 24 * 3600 * 1000
local KEY_TYPES = {'hash', 'zset', 'hash', 'zset', 'zset', 'string'}
-- The state's `due` when the holders and alive sets are empty (see prune()).
local NOTHING_DUE = 2 ^ 52
-- In a holder's metadata JSON: a keeper process holds the slot (acquire --while-pid). The
-- client writes the JSON compactly; inside a string a quote would be escaped, so only the
-- field itself matches.
local KEEPER_MARK = '"keeper":true'

-- Words after the number in the state's field `limit` ("3 paused", "3 weighted", "3 paused
-- weighted"): while the semaphore is paused (lib/pause.lua), and while a request for several
-- slots (--slots, --exclusive) holds or waits, until the semaphore is next idle (see
-- settle_expiry()). Every redsem before these refuses a limit that is not a number
-- (acquire.lua: conflict -1), so an older redsem sharing the semaphore during an upgrade can
-- neither admit anybody while it is paused nor count a holder of several slots as one.
local PAUSED_SUFFIX = ' paused'
local WEIGHTED_SUFFIX = ' weighted'

-- While the semaphore is paused its queue holds PAUSE_MARK, behind every waiter (its ticket
-- is above any a waiter gets): every redsem's gc, also one from before pauses, deletes only a
-- semaphore with nobody in its holders and queue, and would take the pause with it; so a
-- paused semaphore never looks empty. It is nobody's token (those are 32 hex digits), and
-- redsem from before pauses hand it nothing while the limit reads "N paused". The queue key
-- is kept with the state hash while paused (see expiring_keys()). Counted as nobody
-- (queue_length()); written by start_pause() (lib/pause.lua), and again by settle_expiry()
-- should an older redsem have dropped it.
local PAUSE_MARK_TICKET = 2 ^ 52

-- How many wait in the queue (the pause's mark is nobody).
local function queue_length(call, state)
    local queued = redis.call('ZCARD', call.k_queue)
    if queued > 0 and state.paused and redis.call('ZSCORE', call.k_queue, PAUSE_MARK) then
        return queued - 1
    end
    return queued
end

-- The limit that the state's field `limit` holds ("3", or with the words above); nil for
-- anything else.
local function parse_limit(raw)
    if not raw then
        return nil
    end
    local plain = tonumber(raw)
    if plain then
        return plain
    end
    local number, words = string.match(raw, '^(%d+)(.*)$')
    if words == '' or words == PAUSED_SUFFIX or words == WEIGHTED_SUFFIX or
       words == PAUSED_SUFFIX .. WEIGHTED_SUFFIX then
        return tonumber(number)
    end
    return tonumber(raw)
end

-- Stores `limit` as the semaphore's, set by `by` ('caller' or 'operator'), marked while it is
-- paused or weighted (see PAUSED_SUFFIX).
local function store_limit(call, state, limit, by)
    local text = limit .. (state.paused and PAUSED_SUFFIX or '') .. (state.weighted and WEIGHTED_SUFFIX or '')
    redis.call('HSET', call.k_state, 'limit', text, 'limit_by', by, 'format', STATE_FORMAT)
    state.limit, state.raw_limit = limit, text
end

-- Marks the stored limit again when an older redsem's `redsem limit N` wrote a plain number
-- over its words while the semaphore is paused or weighted: older clients admit by it.
local function remark_limit(call, state)
    if (state.paused or state.weighted) and state.limit and
       state.raw_limit ~= state.limit .. (state.paused and PAUSED_SUFFIX or '') ..
                          (state.weighted and WEIGHTED_SUFFIX or '') then
        store_limit(call, state, state.limit, state.limit_by or 'caller')
    end
end

-- Marks the semaphore as weighted (a request for several slots came): older redsem refuse it
-- until it is next idle (see settle_expiry()).
local function mark_weighted(call, state, limit_by)
    if not state.weighted then
        state.weighted = true
        redis.call('HSET', call.k_state, 'weighted', '1')
        store_limit(call, state, state.limit, limit_by or state.limit_by or 'caller')
    end
end

-- Whether the semaphore is paused at server time `now` (`redsem pause`; see lib/pause.lua): a
-- pause with --for ends by itself at paused_until.
local function pause_active(state, now)
    return state.paused ~= nil and (state.paused_until == 0 or now < state.paused_until)
end

-- The reply when `key` holds a `found` where redsem keeps a `wanted`.
local function wrong_type(key, found, wanted)
    return {'kind', 'wrongtype', 'key', key, 'found', found, 'wanted', wanted}
end

-- Reads limit, fence seed and keep horizon. Returns (state table) or (nil, error reply) when
-- a key holds a type redsem did not create. All keys are checked only when the state hash is
-- missing (a new semaphore); a foreign key appearing later still fails with WRONGTYPE.
-- Remembers the state in call.state (for finish()).
local function load_state(call)
    local k_state, k_log = call.k_state, call.k_log
    local got = redis.pcall('HMGET', k_state, 'limit', 'fence', 'keep', 'due', 'history',
                            'acquired_total', 'closed_logged', 'limit_by', 'pinned', 'kept',
                            'paused', 'paused_since', 'paused_until', 'pause_kept',
                            'extra_slots', 'exclusive', 'weighted', 'format')
    if got.err then
        return nil, wrong_type(k_state, redis.call('TYPE', k_state).ok, 'hash')
    end
    local format = tonumber(got[18])
    if format and format > STATE_FORMAT then
        -- Stored by a newer redsem, in a form this one may misread: touch nothing.
        return nil, {'kind', 'newer', 'format', format}
    end
    if not got[1] and not got[2] then
        for i = 2, #KEY_TYPES do
            local actual = redis.call('TYPE', call.keys[i]).ok
            if actual ~= 'none' and actual ~= KEY_TYPES[i] then
                return nil, wrong_type(call.keys[i], actual, KEY_TYPES[i])
            end
        end
        local actual = k_log and redis.call('TYPE', k_log).ok or 'none'
        if actual ~= 'none' and actual ~= 'stream' then
            return nil, wrong_type(k_log, actual, 'stream')
        end
    end
    local state = {raw_limit = got[1], limit = parse_limit(got[1]), fence = got[2],
                   keep = tonumber(got[3]) or 0, due = tonumber(got[4]) or 0,
                   history = tonumber(got[5]) or DEFAULT_HISTORY, acquired_total = tonumber(got[6]) or 0,
                   closed_logged = tonumber(got[7]), limit_by = got[8], pinned = got[9] == '1',
                   kept = got[10] == '1', paused = got[11] or nil,
                   paused_since = tonumber(got[12]) or 0, paused_until = tonumber(got[13]) or 0,
                   pause_kept = got[14] == '1', extra = tonumber(got[15]) or 0,
                   exclusive = got[16] or nil, weighted = got[17] == '1'}
    call.state = state
    return state
end

-- Server time in milliseconds; also remembers it in microseconds in call.now_us, for
-- next_fence(). (Both stay below 2^53, so Lua's doubles hold them exactly.)
local function server_now(call)
    local t = redis.call('TIME')
    call.now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The next fencing token: one more than the last, and never below the server clock in
-- microseconds. So fences keep increasing when the semaphore's keys expired in between, and
-- when Redis lost them (a restart from an older snapshot): a fence handed out before the
-- loss was at most the server clock then, plus the grants of that one script.
local function next_fence(call, state)
    local fence = math.max((tonumber(state.fence) or 0) + 1, call.now_us)
    state.fence = fence
    if state.history > 0 and state.raw_limit then
        -- Counted with the fence: no call of its own (see log_event()).
        state.acquired_total = state.acquired_total + 1
        redis.call('HSET', call.k_state, 'fence', int_str(fence), 'acquired_total', state.acquired_total)
    else
        redis.call('HSET', call.k_state, 'fence', int_str(fence))
    end
    return fence
end

-- The semaphore's keys that expire together: its own six, its history (when it is one: never
-- a foreign key), and on a Redis Cluster its own epoch key. Settings an operator stored
-- (`redsem limit`: the state's field kept is '1') never expire: the state hash, and the epoch
-- key that vouches for it, stay until the operator unsets them (see limit.lua); nor does the
-- queue, with the pause's mark, while paused (see PAUSE_MARK).
local function expiring_keys(call, state)
    local keys = {}
    for i = state.kept and 2 or 1, SEMAPHORE_KEYS do
        if i ~= 4 or not state.paused then
            keys[#keys + 1] = call.keys[i]
        end
    end
    if call.k_log and redis.call('TYPE', call.k_log).ok == 'stream' then
        keys[#keys + 1] = call.k_log
    end
    if call.own_epoch and not state.kept then
        keys[#keys + 1] = call.k_epoch
    end
    return keys
end

-- Makes sure every key outlives `deadline` by KEEP_MIN_MS. Cheap when nothing is due. (While
-- the keys are pinned, only the horizon moves: settle_expiry() applies it.)
local function touch(call, state, deadline)
    if deadline + KEEP_MIN_MS <= state.keep then
        return
    end
    state.keep = deadline + KEEP_STEP_MS
    local keep = int_str(state.keep)
    redis.call('HSET', call.k_state, 'keep', keep)
    if not state.pinned then
        for _, key in ipairs(expiring_keys(call, state)) do
            redis.call('PEXPIREAT', key, keep)
        end
    end
end

-- Gives the pinned keys (see settle_expiry()) their expiry again: the horizon, at least
-- KEEP_MIN_MS from now.
local function unpin_keys(call, state)
    state.pinned = false
    redis.call('HDEL', call.k_state, 'pinned')
    local now = call.now_us and math.floor(call.now_us / 1000) or server_now(call)
    state.keep = math.max(state.keep, now + KEEP_MIN_MS)
    local keep = int_str(state.keep)
    redis.call('HSET', call.k_state, 'keep', keep)
    for _, key in ipairs(expiring_keys(call, state)) do
        redis.call('PEXPIREAT', key, keep)
    end
    if state.paused and state.pause_kept and state.paused_until > 0 then
        -- Kept for a pause with an end alone, until KEEP_MIN_MS after it (see start_pause()).
        local ends = int_str(state.paused_until + KEEP_MIN_MS)
        redis.call('PEXPIREAT', call.k_state, ends)
        redis.call('PEXPIREAT', call.k_queue, ends)
    end
end

-- Keeps the state hash (and on a Cluster the epoch key that vouches for it) with no expiry:
-- for an operator's settings (`redsem limit`), or, `by_pause`, only while a pause lasts (field
-- pause_kept; see lib/pause.lua). gc leaves a kept state hash (see expiring_keys()).
local function keep_state(call, state, by_pause)
    if state.kept then
        if state.pause_kept and not by_pause then
            redis.call('HDEL', call.k_state, 'pause_kept') -- the operator's now: it stays
            state.pause_kept = false
        end
        return
    end
    redis.call('HSET', call.k_state, 'kept', '1')
    if by_pause then
        redis.call('HSET', call.k_state, 'pause_kept', '1')
    end
    redis.call('PERSIST', call.k_state)
    if call.own_epoch then
        redis.pcall('PERSIST', call.k_epoch)
    end
    state.kept, state.pause_kept = true, by_pause
end

-- Gives up keeping the state hash (see keep_state()): the keys expire again at the horizon once
-- nobody holds or waits (settle_expiry() pins them again at the call's end while somebody does).
local function stop_keeping_state(call, state)
    redis.call('HDEL', call.k_state, 'kept', 'pause_kept')
    state.kept, state.pause_kept = false, false
    unpin_keys(call, state)
end

-- At the end of a call: while anybody holds or waits, the keys have no expiry (pinned: the
-- state's field pinned is '1'); once nobody does, they expire at the horizon again, and a
-- weighted semaphore is plain again (see WEIGHTED_SUFFIX). An older
-- redsem's touch() sets an expiry without knowing of pins: a pinned state with one is pinned
-- anew. Costs one ZCARD on most calls, two when nobody holds.
local function settle_expiry(call, state)
    if not state.raw_limit then
        return -- no semaphore here (refused, or only read)
    end
    remark_limit(call, state)
    if state.paused and not redis.call('ZSCORE', call.k_queue, PAUSE_MARK) then
        -- An older redsem dropped it (after its `limit` wrote a plain number: it handed it a
        -- slot, found no record, and took it out as a queue entry edited by hand).
        redis.call('ZADD', call.k_queue, PAUSE_MARK_TICKET, PAUSE_MARK)
    end
    local occupied = redis.call('ZCARD', call.k_holders) > 0 or queue_length(call, state) > 0
    if occupied then
        -- Nothing of a semaphore in use may expire (see KEEP_MIN_MS). An older redsem's touch()
        -- gives every key an expiry, the state hash too, which is looked at first (an
        -- operator's kept state never has one: the holders tell then); so does a pause with
        -- --for, to the state hash and the queue (see start_pause()). And an older redsem gives
        -- a key it creates one (its first waiter's queue, say): so the semaphore's other keys
        -- are pinned at every call (a PERSIST of a key without an expiry changes nothing, and is
        -- not replicated).
        local probe = (state.kept and not state.pause_kept) and call.k_holders or call.k_state
        if state.pinned and redis.call('PTTL', probe) == -1 then
            for i = 2, SEMAPHORE_KEYS do
                redis.call('PERSIST', call.keys[i])
            end
            return
        end
        for _, key in ipairs(expiring_keys(call, state)) do
            redis.call('PERSIST', key)
        end
        if state.pause_kept then
            redis.call('PERSIST', call.k_state)
        end
        if state.paused then
            redis.call('PERSIST', call.k_queue)
        end
        redis.call('HSET', call.k_state, 'pinned', '1')
        state.pinned = true
        return
    end
    if state.weighted then
        -- Idle: nobody holds several slots any more; an older redsem may share it again.
        state.weighted, state.extra, state.exclusive = false, 0, nil
        redis.call('HDEL', call.k_state, 'weighted', 'extra_slots', 'exclusive')
        if state.limit then
            store_limit(call, state, state.limit, state.limit_by or 'caller')
        end
    end
    if state.pinned then
        unpin_keys(call, state)
    end
end

-- Records that an entry of the holders or alive set now runs out at `deadline`: the state's
-- `due` is a time before which no entry of those sets runs out (0 when unknown), so prune()
-- need not look before it.
-- Every ZADD to those sets goes with a call to this.
-- (Stored only in a state hash that has a limit: a hash created here would have no expiry.)
local function note_deadline(call, state, deadline)
    if deadline < state.due then
        state.due = deadline
        if state.raw_limit then
            redis.call('HSET', call.k_state, 'due', int_str(deadline))
        end
    end
end

-- Gives a key created after the last touch() the same expiry as the others (none while they
-- are pinned).
local function expire_new(state, key)
    if state.keep > 0 and not state.pinned then
        redis.call('PEXPIREAT', key, int_str(state.keep))
    end
end

-- Stores a setting the caller gave (history) in the state hash. A state hash made
-- here, before the semaphore's first touch() (or while it refuses a caller, its state lost),
-- expires after KEEP_MIN_MS unless touch() moves it on.
local function store_setting(call, state, field, value)
    redis.call('HSET', call.k_state, field, value)
    if state.keep == 0 and not state.kept then
        redis.call('PEXPIRE', call.k_state, KEEP_MIN_MS)
    end
end

-- A slot number from a record, or nil for anything else (a record edited by hand).
local function slot_number(text)
    local slot = tonumber(text)
    if not slot or slot < 0 or slot >= MAX_LIMIT or slot ~= math.floor(slot) then
        return nil
    end
    return slot
end

-- The slots of a holder's record: "3", or "0,3,4" for a holder of several (ascending); nil
-- when any is no slot number (a record edited by hand: never a bit to set or clear).
local function parse_slots(text)
    if not string.find(text, ',', 1, true) then
        local slot = slot_number(text) -- one slot: the common case, without a pattern
        return slot and {slot}
    end
    local slots = {}
    for piece in string.gmatch(text, '[^,]+') do
        local slot = slot_number(piece)
        if not slot then
            return nil
        end
        slots[#slots + 1] = slot
    end
    return #slots > 0 and slots or nil
end

-- An info entry (KEYS[3]) as a table {kind, slot, slots, fence, since, ttl, json}, and for a
-- waiter `grace`, the loss grace it asked for (nil: the default), and `weight`: how many slots
-- it asks for ('-': 1, 'x': all of them, --exclusive: exclusive is true and weight nil); nil
-- when missing or malformed. slot: a holder's lowest slot, slots: all of them (nil when the
-- record was edited by hand into something else).
local function parse_info(raw)
    if not raw then
        return nil
    end
    local kind, field, fence, since, ttl, json = string.match(raw, '^(%a) (%S+) (%S+) (%S+) (%S+) (.*)$')
    if not kind then
        return nil
    end
    local info = {kind = kind, fence = fence, since = tonumber(since), ttl = tonumber(ttl), json = json}
    if kind == 'w' then
        info.grace = tonumber(fence)
        info.exclusive = field == 'x'
        info.weight = field == '-' and 1 or tonumber(field)
    else
        info.slots = parse_slots(field)
        info.slot = info.slots and info.slots[1]
    end
    return info
end

-- How many slots the waiter `info` asks for under `limit` (all of them for --exclusive).
local function weight_of(info, limit)
    if info.exclusive then
        return limit
    end
    return info.weight or 1
end

-- How many slots are in use, with `held` holders: every slot while an exclusive holder holds
-- (a limit raised meanwhile gives nobody the new ones), else one per holder and the extra
-- slots of holders of several (state field extra_slots).
local function used_slots(state, held)
    if state.exclusive and held > 0 then
        return math.max(held + state.extra, state.limit or 0)
    end
    return held + state.extra
end

-- A holder's info entry; `slots` is a list (ascending).
local function holder_info(slots, fence, now, ttl, json)
    return 'h ' .. table.concat(slots, ',') .. ' ' .. int_str(fence) .. ' ' .. int_str(now) .. ' ' ..
           ttl .. ' ' .. json
end
