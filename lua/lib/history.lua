-- lib/history.lua: the semaphore's history (KEYS[8], a stream) and the event counters.
-- Provides: log_event(call, state, now, event, value), log_entry(...), log_grant(...),
--   log_limit(...), write_history(call, reply), and the events' values: entry_value(...),
--   limit_value(from, to), closed_value(...), paused_value(until_ms, json),
--   resumed_value(paused_for, json).
--- @include "call"
--- @include "lifetime"
--
-- The events of one script call are one stream entry (ID: the server time, in ms), written
-- at its end by write_history() (from finish()); each event is one field of it, the event's
-- kind, whose value is "TOKEN SLOT FENCE DURATION_MS JSON" ('-' where a part does not apply;
-- JSON: the holder's or waiter's metadata), or for 'limit', "FROM TO". One XADD per call, not
-- one per event or per part: a release and the hand-over it makes cost one (docs/BENCHMARKS.md
-- has what it costs).
-- Kinds: acquired (directly, or by hand-over; DURATION: how long it waited), queued,
-- released (DURATION: how long it held the slot), expired (a lease ran out by the server's
-- clock; DURATION: from the grant to the deadline), unclaimed (a hand-over nobody collected
-- in time), lost (a renewal found no lease; see renew.lua), left (a waiter left the queue:
-- released, by a signal, at the end of --wait, or refused as asking for more than a lowered
-- limit; DURATION: how long it waited), dropped (a waiter stopped refreshing its place), gc
-- (removed by redsem gc), skipped (see log_skip() in lib/skips.lua), limit, paused
-- ("UNTIL_MS JSON", '-': until resumed) and resumed ("DURATION_MS JSON"; see lib/pause.lua),
-- and closed ("CAUSE LOST_AT_MS OPENS_AT_MS": admission closed after a possible loss of data;
-- see epoch.lua).
-- The stream keeps the latest `history` entries (state field; DEFAULT_HISTORY in protocol.hpp),
-- and is created only for a semaphore that has a state, with the same expiry as its other
-- keys (see touch()). A key of another type in its place stops a new semaphore (load_state(),
-- as for its other keys); appearing later, it only stops the history: writing history never
-- fails a script that changed something. Grants are counted in the state's acquired_total
-- with the fence (see next_fence()), expiries and losses here.

-- At or above EXACT_TRIM_BELOW entries the stream is trimmed a block at a time, now and then
-- (see write_history(): cheaper, keeps up to a few hundred more); below it, exactly.
local EXACT_TRIM_BELOW = 1000
local TRIM_EVERY = 16
-- Events counted in the state hash (for `status --format prometheus`) while history is on.
-- (Grants are counted in next_fence().)
local COUNTERS = {expired = 'expired_total', unclaimed = 'expired_total', lost = 'lost_total'}

-- The value of each kind of event, in the shapes src/semaphore/history.cpp reads
-- (tests/fixtures/events.txt has each, and holds both sides to it). A holder's or a waiter's:
-- "TOKEN SLOTS FENCE DURATION_MS JSON" (SLOTS "0,3,4"; '-' for a part that does not apply;
-- `duration` nil for none).
local function entry_value(token, slots, fence, duration, json)
    return token .. ' ' .. slots .. ' ' .. fence .. ' ' ..
           (duration and int_str(math.max(duration, 0)) or '-') .. ' ' .. json
end

-- A change of the limit: "FROM TO" (FROM '-' for a new semaphore).
local function limit_value(from, to)
    return (from and tostring(from) or '-') .. ' ' .. tostring(to)
end

-- Admission closed after a possible loss of data: "CAUSE LOST_AT_MS OPENS_AT_MS".
local function closed_value(cause, lost_at, opens_at)
    return cause .. ' ' .. int_str(lost_at) .. ' ' .. int_str(opens_at)
end

-- A pause: "UNTIL_MS JSON" ('-': until resumed); its end: "PAUSED_FOR_MS JSON".
local function paused_value(until_ms, json)
    return (until_ms > 0 and int_str(until_ms) or '-') .. ' ' .. json
end

local function resumed_value(paused_for, json)
    return int_str(math.max(paused_for, 0)) .. ' ' .. json
end

-- Adds `event` with `value` to the entry this call writes at its end.
local function log_event(call, state, now, event, value)
    if not call.k_log or state.history <= 0 then
        return
    end
    local events = call.events
    events[#events + 1] = event
    events[#events + 1] = value
    call.log_now = now
    local counter = COUNTERS[event]
    if counter and state.raw_limit then
        redis.pcall('HINCRBY', call.k_state, counter, 1) -- (a field edited by hand stays as it is)
    end
end

-- Writes the events the call logged (to the history of call.state), and returns `reply`.
local function write_history(call, reply)
    local events = call.events
    if #events == 0 then
        return reply
    end
    local state, k_log, log_now = call.state, call.k_log, call.log_now
    local cap = state.history
    local id
    if cap < EXACT_TRIM_BELOW then
        id = redis.pcall('XADD', k_log, 'NOMKSTREAM', 'MAXLEN', cap, '*', unpack(events))
    else
        -- Trimming a block at a time can only drop whole blocks of 100 entries: it is asked
        -- for on about one call in TRIM_EVERY (by the entry's millisecond), which saves a
        -- fifth of an XADD's cost on the others.
        id = redis.pcall('XADD', k_log, 'NOMKSTREAM', '*', unpack(events))
        if type(id) == 'string' and tonumber(string.match(id, '^%d+')) % TRIM_EVERY == 0 then
            redis.pcall('XTRIM', k_log, 'MAXLEN', '~', cap)
        end
    end
    if id == false and state.raw_limit then
        redis.pcall('XADD', k_log, 'MAXLEN', cap, '*', unpack(events))
        if not state.pinned then -- (else settle_expiry() gives it the others' expiry)
            redis.call('PEXPIREAT', k_log, int_str(state.keep > log_now and state.keep or log_now + KEEP_STEP_MS))
        end
    end
    return reply
end

-- Logs `event` for `token`, whose record is `info` (parse_info(); nil when unknown), with
-- `duration` in ms (nil: none).
local function log_entry(call, state, now, event, token, info, duration)
    local slot, fence, json = '-', '-', '{}'
    if info then
        json = info.json
        if info.kind == 'h' then
            slot, fence = info.slots and table.concat(info.slots, ',') or '-', info.fence or '-'
        end
    end
    log_event(call, state, now, event, entry_value(token, slot, fence, duration, json))
end

local function log_grant(call, state, now, token, slot, fence, waited, json)
    if state.history > 0 then
        log_event(call, state, now, 'acquired', entry_value(token, slot, int_str(fence), waited, json))
    end
end

local function log_limit(call, state, now, from, to)
    log_event(call, state, now, 'limit', limit_value(from, to))
end
