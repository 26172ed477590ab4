-- limit.lua: reads or changes a semaphore's limit, and the length of its history, while it is
-- in use.
-- KEYS: see lib/call.lua.   Arguments (ARGV[1], ARGV[2] and the encoding: see there):
--- @args limit history
--   limit    the new limit, '' to keep it, or 'unset' to give up the operator's settings
--   history  how many events the history keeps from now on (0: none), or '' to keep it
-- Reply: limit, stored, held, queued, history, set_by: the limit in force now (1 for a new
-- semaphore), stored 1 when the semaphore has one (0: new), how many hold and wait, the
-- history's length, and who set the limit: 'operator' (this script, `redsem limit NAME N`),
-- 'caller' (the first acquire's -n, or the default 1, on a new or idle semaphore), '' (not
-- known: stored by an older redsem, or none stored). Kind prove without INFO, for a
-- new limit: call again proving this epoch marker (see epoch.lua); nothing changed.
-- What an operator sets here stays (the state's field kept: see expiring_keys() in
-- lifetime.lua): gc leaves the state hash, and it has no expiry, so an idle semaphore keeps its
-- limit and history length until 'unset' gives them up: the limit becomes a caller's (an idle
-- semaphore is then deleted, as gc would), the history length the default.
-- A higher limit hands the new slots to the queue at once, in FIFO order. A lower one takes
-- no slot away: holders keep theirs, and nobody is admitted until fewer than the limit hold
-- (see fill_free_slots()). New holders always get a slot below the limit.
--- @include "call"
--- @include "cluster"
--- @include "state"
--- @include "lifetime"
--- @include "history"
--- @include "epoch"
--- @include "queue"
--- @include "expiry"
--- @include "pause"

local function limit_reply(limit, stored, held, queued, history, set_by)
    return {'limit', limit, 'stored', stored, 'held', held, 'queued', queued, 'history', history,
            'set_by', set_by}
end

local state, bad = load_state(call)
if not state then
    return bad
end
if state.paused then
    settle_pause(call, state, server_now(call)) -- one whose --for ran out keeps nothing
end

if args.limit == 'unset' then
    local held, queued = redis.call('ZCARD', call.k_holders), queue_length(call, state)
    if not state.raw_limit and not state.kept then
        return limit_reply(1, 0, held, queued, state.history, '')
    end
    redis.call('HDEL', call.k_state, 'history')
    state.history = DEFAULT_HISTORY
    if state.paused then
        -- Kept while the pause lasts, and no longer (see lib/pause.lua).
        redis.call('HSET', call.k_state, 'pause_kept', '1')
        state.pause_kept = true
    else
        redis.call('HDEL', call.k_state, 'kept')
        state.kept = false
    end
    if held == 0 and queued == 0 and not state.paused then
        -- Idle: deleted as gc deletes an empty semaphore (its history and epoch expire).
        unpin_keys(call, state)
        del_keys(call, unpack(call.keys, 1, SEMAPHORE_KEYS))
        state.raw_limit = nil -- nothing left to settle (see settle_expiry())
        return limit_reply(1, 0, 0, 0, DEFAULT_HISTORY, '')
    end
    -- In use: the limit stays in force, as a caller's; the keys expire again once idle.
    redis.call('HSET', call.k_state, 'limit_by', 'caller')
    return limit_reply(state.limit or 1, state.limit and 1 or 0, held, queued, state.history,
                       state.limit and 'caller' or '')
end

local wanted = tonumber(args.limit)
local now
if wanted then
    now = server_now(call)
    local proof = demand_proof(call, now)
    if proof then
        return proof
    end
end
local history = tonumber(args.history)
if history then
    keep_state(call, state, false)
end
if history and history ~= state.history then
    store_setting(call, state, 'history', history)
    state.history = history
    redis.pcall('XTRIM', call.k_log, 'MAXLEN', history) -- shorter at once, not at the next event
end
if not wanted then
    return limit_reply(state.limit or 1, state.limit and 1 or 0, redis.call('ZCARD', call.k_holders),
                       queue_length(call, state), state.history,
                       state.limit and redis.call('HGET', call.k_state, 'limit_by') or '')
end
local from = state.limit
-- The new limit first: pruning hands freed slots on, and must do so under it.
store_limit(call, state, wanted, 'operator')
keep_state(call, state, false)
prune(call, state, now)
touch(call, state, now) -- a new semaphore's state expires like the rest
if from ~= wanted then
    log_limit(call, state, now, from, wanted)
end
local held = redis.call('ZCARD', call.k_holders)
fill_free_slots(call, state, held, now)
return limit_reply(wanted, 1, redis.call('ZCARD', call.k_holders), queue_length(call, state),
                   state.history, 'operator')
