-- admission.lua: whether admission is closed after a possible loss of data, by the rule of
-- lib/epoch.lua, for the loss grace every client has; writes nothing (status, limit --json).
-- KEYS: see lib/call.lua.   ARGV[1] wake-list prefix
-- Reply: {opens_at_ms, cause, lost_at_ms, noticed, now_ms}: opens_at_ms 0 when admission is
-- open; cause 'start', 'change' or 'unproven' (see epoch.lua; '' when open); lost_at_ms the latest
-- possible loss (0: none); noticed 0 when the loss is not in the epoch key yet (the next call
-- that may admit writes it); or, where INFO is denied, {'prove', marker}: call again with the
-- variant naming this epoch marker (see epoch.lua). A client that finds the server lacks that
-- variant knows a loss is not noticed yet, and does not call by EVAL: that would write one.

local now = server_now(call)
local admission = admission_now(call, now)
if not admission then
    return {'prove', redis.call('HGET', call.k_epoch, 'marker') or ''}
end
return {admission.opens_at, admission.cause, admission.lost_at, admission.noticed and 1 or 0, now}
