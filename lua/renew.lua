-- renew.lua: extends a held lease to now + ttl, by the server's clock.
-- KEYS: see lib.lua.   ARGV[1] wake-list prefix   ARGV[2] token   ARGV[3] ttl in ms
-- Reply: {1, deadline_ms, now_ms} renewed; {0} the token holds nothing (its lease had expired,
-- it was released, or it never existed), so the caller has lost its slot.

local bad = check_types()
if bad then
    return bad
end

local token, ttl = ARGV[2], tonumber(ARGV[3])
local now = server_now()
if prune(now) then
    notify(stored_limit())
end

if not redis.call('ZSCORE', K_HOLDERS, token) then
    touch(now)
    return {0}
end
local deadline = now + ttl
redis.call('ZADD', K_HOLDERS, 'XX', deadline, token)
local info = decode_info(token)
if info then
    info.ttl_ms = ttl
    info.renewed_ms = now
    redis.call('HSET', K_INFO, token, cjson.encode(info))
end
touch(now)
return {1, deadline, now}
