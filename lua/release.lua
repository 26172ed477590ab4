-- release.lua: gives a slot back, or takes a waiter out of the queue.
-- KEYS: see lib.lua.   ARGV[1] wake-list prefix   ARGV[2] token
-- Reply: 1 the token held a slot and released it; 2 the token was queued and left the queue;
--        0 the token is unknown here (expired, released already, never acquired).
-- Touches nothing but the token's own entries; wakes the waiters that now fit.

local bad = check_types()
if bad then
    return bad
end

local token = ARGV[2]
local now = server_now()
prune(now)

local result = 0
if redis.call('ZSCORE', K_HOLDERS, token) then
    remove_holder(token)
    reset_slots_if_empty()
    result = 1
elseif redis.call('ZSCORE', K_QUEUE, token) then
    remove_waiter(token)
    result = 2
end
-- Even when the token is unknown, the prune above may have freed slots for waiters.
notify(stored_limit())
touch(now)
return result
