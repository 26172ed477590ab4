-- pause.lua: pauses admission to a semaphore, resumes it, or looks at a pause while draining
-- (`redsem pause`, `resume`, `drain`; see lib/pause.lua).
-- KEYS: see lib/call.lua.   Arguments (ARGV[1], ARGV[2] and the encoding: see there):
--- @args action by duration_ms
--   action       'pause', 'resume', or 'look' (a draining client: changes nothing but what
--                ran out)
--   by           JSON {host, pid, user, label}: who pauses or resumes (label: the reason)
--   duration_ms  pause: how long it lasts, '' until resumed
-- Reply, kind ok: held, queued, limit, now_ms, pause, since_ms, until_ms, due_in_ms: the
-- pause in force after the call (resume: before it) as its JSON, since and until (0: until
-- resumed; '' and 0 when none); held and queued after the call; due_in_ms when a lease or
-- liveness may run out next (-1: none). Kind prove without INFO, for a resume: call again
-- proving this epoch marker (see epoch.lua); nothing changed. Kind conflict: the stored
-- limit is not one this redsem reads; nothing changed.
-- A pause of a new semaphore stores it, with the default limit 1 as a caller's (the first
-- acquire's -n applies). Resuming a semaphore that is not paused changes nothing.
--- @include "state"
--- @include "epoch"
--- @include "expiry"
--- @include "pause"

local state, bad = load_state(call)
if not state then
    return bad
end
local action = args.action
local now = server_now(call)
if action == 'resume' then
    local proof = demand_proof(call, now) -- the queue may be served at once
    if proof then
        return proof
    end
end
if state.raw_limit and not state.limit then
    return {'kind', 'conflict'} -- (a limit edited by hand, or of a newer redsem: left as it is)
end
prune(call, state, now)
settle_pause(call, state, now)

local was = {state.paused or '', state.paused_since, state.paused_until}
if action == 'pause' then
    local for_ms = tonumber(args.duration_ms)
    start_pause(call, state, now, args.by, for_ms and now + for_ms or 0)
    was = {state.paused, state.paused_since, state.paused_until}
elseif action == 'resume' and state.paused then
    end_pause(call, state, now, args.by)
end
return {'kind', 'ok', 'held', redis.call('ZCARD', call.k_holders), 'queued', queue_length(call, state),
        'limit', state.limit or 1, 'now_ms', now, 'pause', was[1], 'since_ms', was[2] or 0,
        'until_ms', was[3] or 0,
        'due_in_ms', state.due < NOTHING_DUE and math.max(state.due - now, 0) or -1}
