-- lib/state.lua: the semaphore's state hash (KEYS[1]): reading and checking the keys, the
-- limit and its marks, the server clock and fences.
-- Provides: load_state(call), server_now(call), next_fence(call, state),
--   queue_length(call, state), store_limit(call, state, limit, by), remark_limit(call, state),
--   mark_weighted(call, state, limit_by), pause_active(state, now), claim_until(state), and
--   the constants
--   PAUSE_MARK_TICKET, NOTHING_DUE.
-- Uses the protocol's PAUSE_MARK, DEFAULT_HISTORY and STATE_FORMAT.
--- @include "call"
--
-- `state` is the table load_state() returns: the state hash's fields as this call knows them,
-- changed by the functions that write them. pause_active() is here, not in lib/pause.lua,
-- because epoch.lua's admission needs it and lib/pause.lua needs the queue, which needs
-- admission.

-- The types of a semaphore's keys (KEYS[1..6]), as TYPE names them.
local KEY_TYPES = {'hash', 'zset', 'hash', 'zset', 'zset', 'string'}
-- The state's `due` when the holders and alive sets are empty (see prune()).
local NOTHING_DUE = 2 ^ 52

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
                            'extra_slots', 'exclusive', 'weighted', 'format', 'occurrence',
                            'horizon')
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
                   keep = math.max(tonumber(got[3]) or 0, tonumber(got[20]) or 0),
                   keep_stored = got[3] ~= false, due = tonumber(got[4]) or 0,
                   history = tonumber(got[5]) or DEFAULT_HISTORY, acquired_total = tonumber(got[6]) or 0,
                   closed_logged = tonumber(got[7]), limit_by = got[8], pinned = got[9] == '1',
                   kept = got[10] == '1', paused = got[11] or nil,
                   paused_since = tonumber(got[12]) or 0, paused_until = tonumber(got[13]) or 0,
                   pause_kept = got[14] == '1', extra = tonumber(got[15]) or 0,
                   exclusive = got[16] or nil, weighted = got[17] == '1', occurrence = got[19] or nil}
    call.state = state
    return state
end

-- The server ms at which the occurrence's claim (the state's field `occurrence`, see
-- lib/occurrence.lua) ends; nil when there is none.
local function claim_until(state)
    return tonumber(string.match(state.occurrence or '', '^%d+ (%d+) '))
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
