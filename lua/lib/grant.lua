-- lib/grant.lua: what acquire.lua does for a caller that gets its slots or finds its place
-- gone: the grant itself, a hand-over collected, and the replies that say so.
-- Provides: granted_reply(req, fence, slot, deadline, limit, listed), too_large_reply(limit),
--   collected(call, state, req, deadline), left_queue(call, state, req),
--   grant(call, state, req, held, waited), serve_free_slots(call, state, req, held),
--   skip_for_claim(call, state, req, known, mode, first).
-- `req` is the caller's request as acquire.lua reads it: token, ttl, limit, json (the record's
-- metadata), asks (what it asks of the occurrence, lib/occurrence.lua; nil: nothing), started
-- (when it started: the occurrence it belongs to), grace (its loss grace, nil: the default),
-- weight and exclusive (the slots it asks for), and now (the server clock).
--- @include "call"
--- @include "state"
--- @include "slots"
--- @include "records"
--- @include "lifetime"
--- @include "history"
--- @include "epoch"
--- @include "queue"
--- @include "taken"
--- @include "occurrence"
--- @include "skips"

local function granted_reply(req, fence, slot, deadline, limit, listed)
    return {'kind', 'ok', 'fence', fence, 'slot', slot, 'deadline_ms', deadline, 'limit', limit,
            'now_ms', req.now, 'slots', listed}
end

local function too_large_reply(limit)
    return {'kind', 'toolarge', 'limit', limit}
end

-- The reply to a caller that holds its slots: a lost reply retried, or a hand-over collected
-- here (its wake list and claim deadline go).
local function collected(call, state, req, deadline)
    local token, now = req.token, req.now
    local info = parse_info(redis.call('HGET', call.k_info, token)) or {}
    del_keys(call, call.wake_prefix .. token, call.wake_prefix .. token .. NUDGE_SUFFIX)
    redis.call('ZREM', call.k_alive, token)
    if req.asks then
        -- Handed over while another run claims the occurrence (by an older redsem, which
        -- does not judge it, or while a run holds another slot): given back.
        local claim = occurrence_taken(call, state, now, token, nil, req.asks)
        if claim then
            remove_holder(call, state, token, info, now, true)
            log_skip(call, state, now, token, req.json, skip_why(claim), claim)
            return skip_reply(claim, now)
        end
        if string.match(state.occurrence or '', '^%d+ %d+ (%S+)') ~= token then
            claim_occurrence(call, state, now, token, req.json, req.asks)
        else
            begin_occurrence(call, state, token)
        end
    end
    return granted_reply(req, tonumber(info.fence) or 0, info.slot or 0, deadline,
                         state.limit or req.limit, table.concat(info.slots or {info.slot or 0}, ','))
end

-- The reply to a caller whose place in the queue is gone because somebody ended it: released
-- by `redsem release`, or superseded by a newer waiter (left: see lib/supersede.lua), or
-- refused as asking for more slots than a lowered limit (toolarge; see refuse_too_large()), or,
-- for one that asks for one run per occurrence, passed over by a hand-over because another run
-- claims it (skipped; see skip_waiter()); nil when none of these.
local function left_queue(call, state, req)
    for _, why in ipairs({LEFT_SUFFIX, TOO_LARGE_SUFFIX}) do
        local note = call.wake_prefix .. req.token .. why
        if redis.call('EXISTS', note) == 1 then
            if why == TOO_LARGE_SUFFIX then
                redis.call('DEL', note)
                return too_large_reply(state.limit or req.limit)
            end
            local skip = req.asks and skip_of_note(call, state, req.now, req.token, req.asks)
            if skip then
                redis.call('DEL', note)
                return skip_reply(skip, req.now)
            end
            -- Released, or superseded: the note says which, and the client reads it (no
            -- script reads lists: the ACL rules name no such command).
            return {'kind', 'left'}
        end
    end
    return nil
end

-- Free slots, `held` others holding, go to the queue from its head, the caller of `req`
-- (queued) perhaps among them: its reply when it got them (or its place ended), then its
-- place in the queue (nil: gone) and how many hold now.
local function serve_free_slots(call, state, req, held)
    fill_free_slots(call, state, held, req.now)
    local deadline = tonumber(redis.call('ZSCORE', call.k_holders, req.token))
    if deadline then
        return collected(call, state, req, deadline)
    end
    return nil, redis.call('ZRANK', call.k_queue, req.token), redis.call('ZCARD', call.k_holders)
end

-- The skip of a caller that asks for one run per occurrence (req.asks) while another run
-- claims it, or nil. `known`: it may have called before; `mode`: 'wait' or 'try'; `first`:
-- its first answer's time (first_answer_ms), or nil. It belongs to the occurrence in force
-- when it started (req.started, moved here): the earliest of its first answer, for a waiter
-- refreshing its place when it queued (its record's since, which a waiter of a window queues
-- with), and now (see lib/occurrence.lua).
local function skip_for_claim(call, state, req, known, mode, first)
    local token, now = req.token, req.now
    if first and first < req.started then
        req.started = first
    end
    local record = known and parse_info(redis.call('HGET', call.k_info, token))
    if record and record.kind == 'w' and record.since and record.since < req.started then
        req.started = record.since
    end
    -- It skips at once when that run is done, or when the caller would not wait; a waiter
    -- waits for the run's end (a hand-over then judges the claim again). Its place goes.
    local claim = occurrence_taken(call, state, now, token, req.started, req.asks)
    if not claim or not (claim.done or mode ~= 'wait') or
       (known and redis.call('ZSCORE', call.k_holders, token)) then -- (see collected())
        return nil
    end
    if known and redis.call('ZSCORE', call.k_queue, token) then
        remove_waiter(call, state, token, now)
    elseif known then
        -- A place that somebody ended tells how (a hand-over's skip, logged then).
        local ended = left_queue(call, state, req)
        if ended then
            return ended
        end
    end
    log_skip(call, state, now, token, req.json, skip_why(claim), claim)
    return skip_reply(claim, now)
end

-- The slots of the bitmap rebuilt from the holders' records (only after hand-edited keys).
local function rebuild_slots(call, state)
    redis.call('DEL', call.k_slots)
    for _, other in ipairs(redis.call('ZRANGE', call.k_holders, 0, -1)) do
        local info = parse_info(redis.call('HGET', call.k_info, other))
        for _, slot in ipairs(info and info.slots or {}) do
            redis.call('SETBIT', call.k_slots, slot, 1)
        end
    end
    expire_new(call, state, call.k_slots)
end

-- Takes the lowest free slots for the caller, which waited `waited` ms for them while `held`
-- others hold; nil when admission is closed, when another run of the occurrence the caller
-- asks for one run of holds a slot, or when the bitmap and the holders disagree beyond repair.
local function grant(call, state, req, held, waited)
    local token, now, asks, limit = req.token, req.now, req.asks, req.limit
    if admission(call, now, req.grace) > 0 then
        return nil
    end
    if asks and occurrence_taken(call, state, now, token, req.started, asks) then
        -- A run of the occurrence holds another slot (a limit above 1): this caller waits for
        -- its end in the queue (see hand_over()); one that would not wait skipped before.
        return nil
    end
    local doubt = asks and occurrence_doubt(call, state, now, token, req.started, asks)
    if doubt then
        -- At most once: a run whose outcome is unknown may have done the work.
        log_skip(call, state, now, token, req.json, doubt.why, doubt)
        return skip_reply(doubt, now)
    end
    if held == 0 then
        redis.call('DEL', call.k_slots) -- all slots are free: forget any stale bits
        if state.extra > 0 or state.exclusive then
            state.extra, state.exclusive = 0, nil
            redis.call('HDEL', call.k_state, 'extra_slots', 'exclusive')
        end
    end
    local slots = take_slots(call, state, token, req.weight, limit, req.exclusive)
    if not slots then
        rebuild_slots(call, state)
        slots = take_slots(call, state, token, req.weight, limit, req.exclusive)
        if not slots then
            return nil
        end
    end
    local listed = table.concat(slots, ',')
    local fence = next_fence(call, state)
    local deadline = now + req.ttl
    redis.call('ZADD', call.k_holders, deadline, token)
    call.occupies = true
    note_deadline(call, state, deadline)
    redis.call('HSET', call.k_info, token, holder_info(slots, fence, now, req.ttl, req.json))
    if held == 0 then
        expire_new(call, state, call.k_holders)
        expire_new(call, state, call.k_info)
        expire_new(call, state, call.k_slots)
    end
    touch(call, state, deadline)
    log_grant(call, state, now, token, listed, fence, waited,
              claim_occurrence(call, state, now, token, req.json, asks, req.started))
    return granted_reply(req, fence, slots[1], deadline, limit, listed)
end
