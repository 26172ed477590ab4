-- admission.lua: whether admission is closed after a possible loss of data, by the rule of
-- lib/epoch.lua, for the loss grace every client has; writes nothing but the removal of its
-- proof (status, limit --json).
-- KEYS: see lib/call.lua.   ARGV[1] wake-list prefix
-- Reply: opens_at_ms, cause, lost_at_ms, noticed, now_ms: opens_at_ms 0 when admission is
-- open; cause 'start', 'change' or 'unproven' (see epoch.lua; '' when open); lost_at_ms the latest
-- possible loss (0: none); noticed 0 when the loss is not in the epoch key yet (the next call
-- that may admit writes it); or, where INFO is denied, kind prove: call again proving
-- this epoch marker (see epoch.lua). A client that finds the server lacks the marker's
-- script knows a loss is not noticed yet, and does not declare a fresh marker: that would
-- write one.
--- @include "state"
--- @include "epoch"

local now = server_now(call)
local admission = admission_now(call, now)
if not admission then
    return {'kind', 'prove', 'marker', redis.call('HGET', call.k_epoch, 'cache_marker') or ''}
end
return {'opens_at_ms', admission.opens_at, 'cause', admission.cause, 'lost_at_ms', admission.lost_at,
        'noticed', admission.noticed and 1 or 0, 'now_ms', now}
