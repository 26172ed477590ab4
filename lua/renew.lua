-- renew.lua: extends a held lease to now + ttl, by the server's clock.
-- KEYS: see lib.lua.   ARGV[1] wake-list prefix   ARGV[2] token
-- ARGV[3] ttl in ms, or '' for the lease's own ttl
-- ARGV[4] '1' when the caller then WAITs for replicas (--replicas): the holder's record is
--         written even when unchanged, so that the caller's connection has written the lease
--         and WAIT covers it, also when another client's release granted it (a hand-over).
-- Reply: {1, deadline_ms, now_ms, ttl_ms} renewed; {0} the token holds nothing (its lease had run
-- out, it was released, or it never existed), so the caller has lost its slot; {2} the token is
-- queued, waiting for a slot (nothing is lost, nothing changes).

local state, bad = load_state()
if not state then
    return bad
end
local token = ARGV[2]
local now = server_now()
local deadline = tonumber(redis.call('ZSCORE', K_HOLDERS, token))
if not deadline then
    if redis.call('ZSCORE', K_QUEUE, token) then
        return {2}
    end
    log_entry(state, now, 'lost', token, nil, nil)
    return {0}
end
if deadline <= now then
    -- Expired, not yet pruned: it is lost; pass its slot on now.
    local info = state.history > 0 and parse_info(redis.call('HGET', K_INFO, token))
    expire_holder(state, token, deadline, now)
    log_entry(state, now, 'lost', token, info or nil, info and info.since and now - info.since)
    return {0}
end
local info = parse_info(redis.call('HGET', K_INFO, token))
local ttl = tonumber(ARGV[3]) or (info and info.ttl) or DEFAULT_TTL_MS
deadline = now + ttl
redis.call('ZADD', K_HOLDERS, 'XX', deadline, token)
note_deadline(state, deadline) -- a shorter ttl may bring it forward
if info and info.kind == 'h' and (info.ttl ~= ttl or ARGV[4] == '1') then
    redis.call('HSET', K_INFO, token, holder_info(info.slot, tonumber(info.fence), info.since, ttl, info.json))
end
touch(state, deadline)
return {1, deadline, now, ttl}
