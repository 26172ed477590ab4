-- lib/queue.lua: the queue of waiters (KEYS[4]) and the hand-over of slots to it.
-- Provides: tell_drainer(call), nudge_near_head_entrant(call, state, now),
--   remove_waiter(call, state, token, now), refuse_too_large(...), skip_waiter(...),
--   hand_over(call, state, slot, now, bit_set, room), fill_free_slots(call, state, held, now),
--   remove_holder(call, state, token, info, now, in_holders), the constants NUDGE_KEEP_MS and
--   RELEASED_NOTE; within, the payloads of the wake lists: hand_over_note(...), nudge_note(due_in),
--   too_large_note(limit), skipped_note(why, claim).
-- Uses the protocol's CLAIM_MS, NEAR_HEAD, and the wake lists' names (src/semaphore/protocol.hpp).
--- @include "call"
--- @include "cluster"
--- @include "state"
--- @include "slots"
--- @include "taken"
--- @include "records"
--- @include "lifetime"
--- @include "history"
--- @include "epoch"
--- @include "occurrence"
--- @include "skips"

-- A nudge list nobody popped (its waiter died) expires after this.
local NUDGE_KEEP_MS = 60000

-- The payloads pushed to a waiter's lists, in the shapes src/semaphore/wire.cpp decodes
-- (tests/fixtures/wakes.txt has each, and holds both sides to it). Its wake list: the
-- hand-over, "FENCE SLOT DEADLINE_MS NOW_MS LIMIT SLOTS" (SLOTS: all of them, "0,3,4").
local function hand_over_note(fence, slots, deadline, now, limit)
    return int_str(fence) .. ' ' .. slots[1] .. ' ' .. int_str(deadline) .. ' ' .. int_str(now) ..
           ' ' .. limit .. ' ' .. table.concat(slots, ',')
end

-- Its ":nudge" list: the time until a lease may run out (nil: none is due), or -1.
local function nudge_note(due_in)
    return due_in and int_str(due_in) or '-1'
end

-- Its ":toolarge" list: the limit that it asks for more slots than.
local function too_large_note(limit)
    return int_str(limit)
end

-- Its ":left" list: RELEASED_NOTE (ended by `redsem release`), or the claim of the run it was
-- passed over for, "skipped WHY SINCE_MS UNTIL_MS TOKEN JSON".
local RELEASED_NOTE = '1'

local function skipped_note(why, claim)
    return SKIPPED_NOTE .. ' ' .. why .. ' ' .. int_str(claim.since) .. ' ' .. int_str(claim.till) ..
           ' ' .. claim.token .. ' ' .. claim.json
end

-- Tells a draining client (`redsem drain`, waiting on "<wake prefix>drained") to look again:
-- a holder left the paused semaphore, or the pause ended. (Not pushed on a Cluster node
-- importing the slot, as nudges are not: see lib/cluster.lua.)
local function tell_drainer(call)
    if not call.asked then
        local drained = call.wake_prefix .. DRAINED_LIST
        redis.call('RPUSH', drained, '1')
        redis.call('PEXPIRE', drained, NUDGE_KEEP_MS)
    end
end

-- The queue moved up (a waiter near the head left it): the waiter that moved up to the last
-- place near the head (position limit + NEAR_HEAD - 1) may have last refreshed its place far
-- back, and so sleep long (see acquire.lua). If it does (its liveness deadline is more than
-- WAITER_LIVENESS_MS off), its nudge list ("<wake list>:nudge", which it watches with its wake
-- list) gets the time until `due`, when a lease may run out: it looks again then, or within
-- the head's refresh interval. One that looks within that interval anyway (it has not
-- refreshed since it queued, as in a queue that moves fast) is left alone: waking it would
-- cost Redis a request per hand-over.
local function nudge_near_head_entrant(call, state, now)
    local limit = state.limit or 0
    if limit < 1 or call.asked then
        return
    end
    local last_near = limit + NEAR_HEAD - 1
    local entrant = redis.call('ZRANGE', call.k_queue, last_near, last_near)[1]
    local alive = entrant and tonumber(redis.call('ZSCORE', call.k_alive, entrant))
    if entrant and entrant ~= PAUSE_MARK and (not alive or alive > now + WAITER_LIVENESS_MS) then
        local nudge = call.wake_prefix .. entrant .. NUDGE_SUFFIX
        redis.call('RPUSH', nudge, nudge_note(state.due < NOTHING_DUE and math.max(state.due - now, 0)
                                              or nil))
        redis.call('PEXPIRE', nudge, NUDGE_KEEP_MS)
    end
end

local function remove_waiter(call, state, token, now)
    local position = redis.call('ZRANK', call.k_queue, token)
    redis.call('ZREM', call.k_queue, token)
    redis.call('ZREM', call.k_alive, token)
    redis.call('HDEL', call.k_info, token)
    del_keys(call, call.wake_prefix .. token, call.wake_prefix .. token .. NUDGE_SUFFIX)
    if position and position < (state.limit or 0) + NEAR_HEAD then
        nudge_near_head_entrant(call, state, now)
    end
end

-- Takes waiter `token`, whose record is `waiter`, out of the queue because it asks for more
-- slots than the limit now allows (lowered since it queued): its acquire ends with an error
-- (its ":toolarge" list, which its wait watches and acquire.lua answers; it holds the limit).
local function refuse_too_large(call, state, token, waiter, now)
    local alive_until = tonumber(redis.call('ZSCORE', call.k_alive, token)) or now
    remove_waiter(call, state, token, now)
    log_entry(call, state, now, 'left', token, waiter, now - (waiter.since or now))
    if not call.asked then
        local note = call.wake_prefix .. token .. TOO_LARGE_SUFFIX
        redis.call('RPUSH', note, too_large_note(state.limit or 0))
        redis.call('PEXPIREAT', note, int_str(math.max(alive_until, now) + NUDGE_KEEP_MS))
    end
end

-- Takes waiter `token`, whose record is `waiter`, out of the queue because another run claims
-- the occurrence it asks for one run of (`claim`, see lib/occurrence.lua): its acquire ends,
-- told by its ":left" list, with the claim.
local function skip_waiter(call, state, token, waiter, now, claim)
    local alive_until = tonumber(redis.call('ZSCORE', call.k_alive, token)) or now
    local why = skip_why(claim)
    call.skipped[token] = claim -- (see skip_of_note())
    remove_waiter(call, state, token, now)
    log_skip(call, state, now, token, waiter.json, why, claim)
    if not call.asked then
        local note = call.wake_prefix .. token .. LEFT_SUFFIX
        redis.call('RPUSH', note, skipped_note(why, claim))
        redis.call('PEXPIREAT', note, int_str(math.max(alive_until, now) + NUDGE_KEEP_MS))
    end
end

-- Gives free slots to the head of the queue, `room` of them at most: `slot` when the caller
-- passes one straight on (room 1; its bit is set here unless `bit_set` says it still is),
-- else the lowest free ones. The new holder learns of it from its wake list ("FENCE SLOT
-- DEADLINE NOW LIMIT SLOTS", SLOTS: all of them, "0,3,4"), and must collect it within CLAIM_MS;
-- the list lives as long as the lease, so prune() can always tell a grant nobody collected.
-- Returns how many slots it gave: 0, leaving them free, when nobody waits, when the head asks
-- for more than `room` (FIFO: nobody behind it goes first), or while admission is closed
-- (after a loss of data, or paused: the head of the queue is served when admission opens).
-- A head that asks for more than the limit is refused (refuse_too_large()), and the next one
-- served.
local function hand_over(call, state, slot, now, bit_set, room)
    local k_queue, k_info = call.k_queue, call.k_info
    local limit = state.limit or 0
    while true do
        local head = redis.call('ZPOPMIN', k_queue)
        local token = head[1]
        if not token then
            return 0
        end
        if token == PAUSE_MARK then
            -- Nobody real waits (the mark is behind everybody); it stays while paused.
            if state.paused then
                redis.call('ZADD', k_queue, head[2], token)
            end
            return 0
        end
        local waiter = parse_info(redis.call('HGET', k_info, token))
        local weight = waiter and waiter.kind == 'w' and weight_of(waiter, limit)
        -- (What it asks of the occurrence, as its record stores it: also an older release's.)
        local asks = weight and occurrence_asks(waiter.json)
        local claim = asks and occurrence_taken(call, state, now, token, waiter.since, asks)
        local doubt = asks and not claim and
                      occurrence_doubt(call, state, now, token, waiter.since, asks)
        if (claim and claim.done) or doubt then
            skip_waiter(call, state, token, waiter, now, claim or doubt)
        elseif claim then
            -- Another run of the occurrence holds a slot (a limit above 1): the head waits for
            -- its end, when that run's release hands it the slot or passes it over. FIFO: nobody
            -- behind it goes first.
            redis.call('ZADD', k_queue, head[2], token)
            return 0
        elseif weight and weight > limit then
            refuse_too_large(call, state, token, waiter, now)
        elseif weight and (weight > room or admission(call, now, waiter.grace) > 0) then
            redis.call('ZADD', k_queue, head[2], token) -- back in its place
            return 0
        elseif weight then
            local slots = {slot}
            if not slot then
                slots = take_slots(call, state, token, weight, limit, waiter.exclusive)
                if not slots then
                    redis.call('ZADD', k_queue, head[2], token)
                    return 0
                end
            else
                if not bit_set then
                    redis.call('SETBIT', call.k_slots, slot, 1)
                end
                if waiter.exclusive then
                    mark_exclusive(call, state, token) -- all of a limit of 1
                end
            end
            local fence = next_fence(call, state)
            local deadline = now + waiter.ttl
            local listed = table.concat(slots, ',')
            redis.call('ZADD', call.k_holders, deadline, token)
            call.occupies = true
            redis.call('HSET', k_info, token, holder_info(slots, fence, now, waiter.ttl, waiter.json))
            redis.call('ZADD', call.k_alive, now + CLAIM_MS, token)
            note_deadline(call, state, math.min(deadline, now + CLAIM_MS))
            local wake = call.wake_prefix .. token
            redis.call('RPUSH', wake, hand_over_note(fence, slots, deadline, now, limit))
            redis.call('PEXPIREAT', wake, int_str(math.max(deadline, now + CLAIM_MS)))
            touch(call, state, deadline)
            nudge_near_head_entrant(call, state, now)
            log_grant(call, state, now, token, listed, fence, now - (waiter.since or now),
                      claim_occurrence(call, state, now, token, waiter.json, asks, waiter.since,
                                       true))
            return weight
        else
            -- A queue entry without waiter metadata (changed by hand): drop it, try the next.
            remove_waiter(call, state, token, now)
        end
    end
end

-- Hands free slots to the queue in FIFO order, lowest first, while the head's request fits
-- under the limit. `held` counts the holders that stay. Every slot given is below the limit:
-- with fewer slots in use than the limit, as many of the slots 0..limit-1 are free.
local function fill_free_slots(call, state, held, now)
    local room = (state.limit or 0) - used_slots(state, held)
    while room > 0 do
        local given = hand_over(call, state, nil, now, false, room)
        if given == 0 then
            return
        end
        room = room - given
    end
end

-- Removes holder `token`, passing a slot on when the limit allows (after a lower limit, not
-- before fewer than the limit hold). Returns true when it was a holder. Its wake list and
-- claim deadline go too: a hand-over it never collected must not be read later as a new
-- grant, nor reported as a waiter. The new holder is written before the old one leaves, so
-- the holders key never empties (and never loses its expiry) on a hand-over. `in_holders`
-- says whether the token is in the holders set, when the caller knows (nil: look it up).
local function remove_holder(call, state, token, info, now, in_holders)
    local k_holders = call.k_holders
    info = info or parse_info(redis.call('HGET', call.k_info, token))
    -- A run of an occurrence that leaves without a release of its own (its lease ran out, a
    -- hand-over nobody collected, gc) gives the occurrence back (lapsed) before its slot is
    -- handed on.
    settle_occurrence(call, state, token, '')
    if info and info.kind == 'h' and info.slots then
        local limit = state.limit or 0
        local others = redis.call('ZCARD', k_holders)
        if in_holders == nil then
            in_holders = redis.call('ZSCORE', k_holders, token) ~= false
        end
        if in_holders then
            others = others - 1
        end
        untake_slots(call, state, token, info, others)
        local free = used_slots(state, others) < limit
        -- A single slot goes straight to the head of the queue when the limit allows and the
        -- head asks for one (the hot path: its bit stays set); otherwise the slots are freed,
        -- and the queue served from its head.
        if #info.slots == 1 and info.slot < limit and free and
           hand_over(call, state, info.slot, now, true, 1) > 0 then
            fill_free_slots(call, state, others + 1, now)
        else
            for _, slot in ipairs(info.slots) do
                redis.call('SETBIT', call.k_slots, slot, 0)
            end
            if free and queue_length(call, state) > 0 then
                fill_free_slots(call, state, others, now)
            end
        end
    end
    redis.call('HDEL', call.k_info, token)
    del_keys(call, call.wake_prefix .. token, call.wake_prefix .. token .. NUDGE_SUFFIX)
    redis.call('ZREM', call.k_alive, token)
    if state.paused then
        tell_drainer(call)
    end
    return redis.call('ZREM', k_holders, token) == 1
end
