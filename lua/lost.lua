-- lost.lua: declares that Redis may have lost data (`redsem lost`): nobody new is admitted
-- for the loss grace, as after a restart (see declare_loss() in lib/epoch.lua), to every
-- semaphore this call's epoch key vouches for: all of the prefix on one server, this
-- semaphore on a Redis Cluster.
-- KEYS: see lib/call.lua.   Arguments: ARGV[1], ARGV[2] (see there), and none of its own.
--- @args
-- Reply: lost_at_ms, opens_at_ms: the loss declared, and when admission opens again for a
-- client with the loss grace every client has.
--- @include "state"
--- @include "epoch"

local state, bad = load_state(call)
if not state then
    return bad
end
local now = server_now(call)
declare_loss(call, now)
return {'lost_at_ms', now, 'opens_at_ms', now + LOSS_GRACE_MS}
