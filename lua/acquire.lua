-- acquire.lua: takes a slot, or queues the caller in FIFO order.
-- KEYS: see lib.lua.
-- ARGV[1] wake-list prefix        ARGV[2] token (caller-generated, 128 random bits)
-- ARGV[3] limit                   ARGV[4] lease ttl in ms
-- ARGV[5] 'wait' (queue if full) or 'try' (never queue)
-- ARGV[6] waiter liveness in ms (a queued caller must call again within it)
-- ARGV[7] metadata JSON {host, pid, user, label}
-- Reply, by first element:
--   {'ok', fence, slot, deadline_ms, limit, now_ms}      the caller holds a slot
--   {'wait', position, held, limit, next_expiry_in_ms, queued}  queued; next_expiry_in_ms is -1
--                                                        when nobody holds a slot
--   {'busy', held, limit, queued}                        full and ARGV[5] == 'try'
--   {'conflict', stored_limit, held, queued}             another limit is in force
--   {'wrongtype', key, actual_type, expected_type}       a foreign key is in the way
-- Calling again with the same token is safe: a holder gets its existing lease back, a waiter
-- keeps its place in the queue.

local bad = check_types()
if bad then
    return bad
end

local token, limit, ttl = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local mode, liveness = ARGV[5], tonumber(ARGV[6])
local now, now_us = server_now()
local changed = prune(now)

local deadline = tonumber(redis.call('ZSCORE', K_HOLDERS, token))
if deadline then
    local info = decode_info(token) or {}
    return {'ok', tonumber(info.fence) or 0, tonumber(info.slot) or 0, deadline, limit, now}
end

local held = redis.call('ZCARD', K_HOLDERS)
local queued = redis.call('ZCARD', K_QUEUE)
local rank = redis.call('ZRANK', K_QUEUE, token)
local raw_limit = redis.call('HGET', K_STATE, 'limit')
local current = tonumber(raw_limit)
if raw_limit and not current then
    return {'conflict', -1, held, queued}
end
if current ~= limit then
    local others_waiting = queued - (rank and 1 or 0)
    if current and (held > 0 or others_waiting > 0) then
        if changed then
            notify(current)
            touch(now)
        end
        return {'conflict', current, held, queued}
    end
    redis.call('HSET', K_STATE, 'limit', limit)
    redis.call('DEL', K_SLOTS)
    redis.call('HSET', K_STATE, 'next_slot', 0)
end
if not redis.call('HGET', K_STATE, 'fence') then
    -- Seeding from the server clock in microseconds keeps fences increasing even when the
    -- semaphore's keys expired in between and the counter starts over.
    redis.call('HSET', K_STATE, 'fence', now_us)
end

local position = rank or queued
if position < limit - held then
    if rank then
        remove_waiter(token)
    end
    local fence = redis.call('HINCRBY', K_STATE, 'fence', 1)
    local slot = take_slot(limit)
    deadline = now + ttl
    local ok, info = pcall(cjson.decode, ARGV[7])
    if not ok or type(info) ~= 'table' then
        info = {}
    end
    info.state = 'holding'
    info.fence = int_str(fence)
    info.slot = slot
    info.ttl_ms = ttl
    info.acquired_ms = now
    info.renewed_ms = now
    redis.call('ZADD', K_HOLDERS, deadline, token)
    redis.call('HSET', K_INFO, token, cjson.encode(info))
    if changed then
        notify(limit)
    end
    touch(now)
    return {'ok', fence, slot, deadline, limit, now}
end

if mode ~= 'wait' then
    if changed then
        notify(limit)
        touch(now)
    end
    return {'busy', held, limit, queued}
end

if not rank then
    local ticket = redis.call('HINCRBY', K_STATE, 'ticket', 1)
    redis.call('ZADD', K_QUEUE, ticket, token)
    local ok, info = pcall(cjson.decode, ARGV[7])
    if not ok or type(info) ~= 'table' then
        info = {}
    end
    info.state = 'waiting'
    info.since_ms = now
    redis.call('HSET', K_INFO, token, cjson.encode(info))
    queued = queued + 1
end
redis.call('ZADD', K_ALIVE, now + liveness, token)
if changed then
    notify(limit)
end
touch(now)
local next_expiry = next_deadline()
return {'wait', position, held, limit, next_expiry and (next_expiry - now) or -1, queued}
