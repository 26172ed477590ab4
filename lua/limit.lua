-- limit.lua: reads or changes a semaphore's limit while it is in use.
-- KEYS: see lib.lua.   ARGV[1] wake-list prefix
-- ARGV[2] the new limit, or '' to only read it
-- Reply: {limit, stored, held, queued}: the limit in force now (1 for a new semaphore), stored
-- 1 when the semaphore has one (0: new), and how many hold and wait.
-- A higher limit hands the new slots to the queue at once, in FIFO order. A lower one takes
-- no slot away: holders keep theirs, and nobody is admitted until fewer than the limit hold
-- (see fill_free_slots()). New holders always get a slot below the limit.

local state, bad = load_state()
if not state then
    return bad
end
local wanted = tonumber(ARGV[2])
if not wanted then
    return {state.limit or 1, state.limit and 1 or 0, redis.call('ZCARD', K_HOLDERS),
            redis.call('ZCARD', K_QUEUE)}
end
local now = server_now()
-- The new limit first: pruning hands freed slots on, and must do so under it.
redis.call('HSET', K_STATE, 'limit', wanted)
state.limit = wanted
prune(state, now)
touch(state, now) -- a new semaphore's state expires like the rest
local held = redis.call('ZCARD', K_HOLDERS)
fill_free_slots(state, held, now)
return {wanted, 1, redis.call('ZCARD', K_HOLDERS), redis.call('ZCARD', K_QUEUE)}
