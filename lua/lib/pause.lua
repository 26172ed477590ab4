-- lib/pause.lua: a pause of admission (`redsem pause`, `redsem drain`) and its end.
-- Provides: start_pause(call, state, now, json, until_ms), end_pause(call, state, now, json),
--   settle_pause(call, state, now).
--- @include "call"
--- @include "state"
--- @include "lifetime"
--- @include "history"
--- @include "queue"
--
-- While a semaphore is paused nobody new is admitted (admission() in epoch.lua says so to
-- every grant and hand-over); holders keep their slots and renew, waiters keep their places.
-- The state hash holds the pause: paused (JSON: who paused, and why), paused_since and
-- paused_until (server ms; 0: until resumed). It is kept with no expiry while paused
-- (keep_state()), so gc and key expiry leave it, and its `limit` is marked (PAUSED_SUFFIX in
-- state.lua), which every older redsem refuses. When the pause ends (end_pause(), or by
-- itself at paused_until), the slots freed meanwhile go to the queue in FIFO order. A holder
-- that leaves while paused tells a draining client (remove_holder() in queue.lua).

-- Pauses admission for `json` (who pauses, and why) until server time `until_ms` (0: until
-- resumed). Pausing again replaces who and why, and never shortens the pause in force (the
-- later end of the two counts); the pause keeps its start.
local function start_pause(call, state, now, json, until_ms)
    if pause_active(state, now) then
        local current = state.paused_until
        until_ms = (current == 0 or until_ms == 0) and 0 or math.max(current, until_ms)
    else
        state.paused_since = now
    end
    state.paused, state.paused_until = json, until_ms
    redis.call('HSET', call.k_state, 'paused', json, 'paused_since', int_str(state.paused_since),
               'paused_until', int_str(until_ms))
    -- Marks the limit for older redsem (a new semaphore gets the default, as a caller's).
    store_limit(call, state, state.limit or 1, state.limit_by or 'caller')
    keep_state(call, state, true)
    -- Keeps every gc from taking the semaphore for empty (see PAUSE_MARK in state.lua); the
    -- queue is kept as the state is.
    redis.call('ZADD', call.k_queue, PAUSE_MARK_TICKET, PAUSE_MARK)
    if state.pause_kept then
        -- Kept for the pause alone: a pause with an end is kept until KEEP_MIN_MS after it,
        -- so that it goes even when no call comes to settle it.
        for _, key in ipairs({call.k_state, call.k_queue}) do
            if until_ms > 0 then
                redis.call('PEXPIREAT', key, int_str(until_ms + KEEP_MIN_MS))
            else
                redis.call('PERSIST', key)
            end
        end
    else
        redis.call('PERSIST', call.k_queue)
    end
    log_event(call, state, now, 'paused', paused_value(until_ms, json))
end

-- Ends the pause: `json` names who resumed it ('{}': it ran out by itself). The slots freed
-- while paused go to the queue at once.
local function end_pause(call, state, now, json)
    local since = state.paused_since
    -- (One that ran out lasted until its end, whenever a call comes to settle it.)
    local ended = json == '{}' and state.paused_until > 0 and math.min(state.paused_until, now) or now
    redis.call('HDEL', call.k_state, 'paused', 'paused_since', 'paused_until')
    state.paused, state.paused_since, state.paused_until = nil, 0, 0
    redis.call('ZREM', call.k_queue, PAUSE_MARK)
    -- The queue expires with the other keys again (none while pinned: settle_expiry()).
    if state.pinned then
        redis.call('PERSIST', call.k_queue)
    else
        expire_new(call, state, call.k_queue)
    end
    if state.limit then
        store_limit(call, state, state.limit, state.limit_by or 'caller') -- unmarked
    end
    if state.pause_kept then
        stop_keeping_state(call, state)
    end
    log_event(call, state, now, 'resumed', resumed_value(ended - since, json))
    tell_drainer(call) -- it learns at once that the pause it waits in ended
    fill_free_slots(call, state, redis.call('ZCARD', call.k_holders), now)
end

-- Ends a pause whose --for ran out (nobody resumed it): at the first call that writes after
-- it, which may be long after.
local function settle_pause(call, state, now)
    if state.paused and not pause_active(state, now) then
        end_pause(call, state, now, '{}')
    end
end
