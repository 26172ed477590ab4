-- renew.lua: extends a held lease to now + ttl, by the server's clock; never shortens it.
-- KEYS: see lib/call.lua.   Arguments (ARGV[1], ARGV[2] and the encoding: see there):
--- @args token ttl_ms replicas claimed
--   token     the holder's
--   ttl_ms    the new ttl, or '' for the lease's own ttl
--   replicas  '1' when the caller then WAITs for replicas (--replicas): the holder's record is
--             written even when unchanged, so that the caller's connection has written the
--             lease and WAIT covers it, also when another client's release granted it (a
--             hand-over).
--   claimed   'claimed' when the caller cannot know that the token ever held a slot (`redsem
--             renew` of a token it was given): a token this semaphore does not have is then no
--             lease that was lost (it may never have existed), and logs no `lost`. A process
--             that was granted the lease (run's heartbeat, a keeper) sends ''.
-- A lease acquired with --max-hold (the record's max_hold_ms) is never renewed past its grant
-- plus that bound: the reply then adds capped 1.
-- Reply, by kind: renewed, with deadline_ms, now_ms, ttl_ms (the longer of ttl_ms and the
-- lease's own ttl); lost: the token holds nothing (its lease had run out, it was released, or
-- it never existed), so the caller has lost its slot, with why ('expired': its deadline had
-- passed by the server's clock; 'gone': the semaphore has no state, its keys are gone;
-- 'unknown': the token is not there), now_ms, and the latest possible loss of data the epoch
-- knows of, lost_at_ms (0: none) and cause (see epoch.lua), noticed now if INFO shows it;
-- queued: the token waits for a slot (nothing is lost, nothing changes).
--- @include "state"
--- @include "records"
--- @include "lifetime"
--- @include "history"
--- @include "expiry"
--- @include "epoch"

local state, bad = load_state(call)
if not state then
    return bad
end
local token = args.token
local now = server_now(call)

-- The reply to a caller whose lease is lost for reason `why`, with what the epoch knows of a
-- loss of data (a call without INFO that proves nothing learns none: lost_at 0).
local function lost(why)
    local read, epoch = pcall(read_epoch, call, now) -- (a foreign key there only hides it)
    if not read then
        epoch = {}
    end
    return {'kind', 'lost', 'why', why, 'now_ms', now, 'lost_at_ms', epoch.lost_at or 0,
            'cause', epoch.cause or ''}
end

local deadline = tonumber(redis.call('ZSCORE', call.k_holders, token))
if not deadline then
    if redis.call('ZSCORE', call.k_queue, token) then
        return {'kind', 'queued'}
    end
    if args.claimed ~= 'claimed' then
        log_entry(call, state, now, 'lost', token, nil, nil)
    end
    return lost(state.raw_limit and 'unknown' or 'gone')
end
if deadline <= now then
    -- Expired, not yet pruned: it is lost; pass its slot on now.
    local info = state.history > 0 and parse_info(redis.call('HGET', call.k_info, token))
    expire_holder(call, state, token, deadline, now)
    log_entry(call, state, now, 'lost', token, info or nil, info and info.since and now - info.since)
    return lost('expired')
end
local info = parse_info(redis.call('HGET', call.k_info, token))
local kept_ttl = (info and info.ttl) or DEFAULT_TTL_MS
local ttl = tonumber(args.ttl_ms) or kept_ttl
-- Never shortens: a renew with a short --ttl from inside `run`, or of a keeper's token, would
-- otherwise let another holder in while the process that renews it counts on the deadline it
-- was given. Neither the deadline nor the ttl later renewals use ever moves back.
local capped = nil
local bound = info and info.since and max_hold_of(info.json)
if bound and now + ttl > info.since + bound then
    capped = math.max(deadline, info.since + bound) -- (never shorter than it was)
end
deadline = capped or math.max(deadline, now + ttl)
ttl = math.max(ttl, kept_ttl)
redis.call('ZADD', call.k_holders, 'XX', deadline, token)
note_deadline(call, state, deadline)
if info and info.kind == 'h' and info.slots and (info.ttl ~= ttl or args.replicas == '1') then
    redis.call('HSET', call.k_info, token, holder_info(info.slots, tonumber(info.fence), info.since, ttl, info.json))
end
touch(call, state, deadline)
if capped then
    return {'kind', 'renewed', 'deadline_ms', deadline, 'now_ms', now, 'ttl_ms', ttl, 'capped', 1}
end
return {'kind', 'renewed', 'deadline_ms', deadline, 'now_ms', now, 'ttl_ms', ttl}
