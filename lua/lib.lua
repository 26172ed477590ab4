-- lib.lua: helpers shared by every redsem script. The build prepends this file to each script.
--
-- KEYS, the same for every script; all share the hash tag {name}, so a script stays on one
-- Redis Cluster slot:
--   KEYS[1] state    hash  limit, fence, ticket, next_slot
--   KEYS[2] holders  zset  token -> lease deadline (server ms)
--   KEYS[3] info     hash  token -> JSON metadata of a holder or a waiter
--   KEYS[4] queue    zset  token -> ticket (arrival order, assigned here)
--   KEYS[5] alive    zset  waiter token -> liveness deadline (server ms)
--   KEYS[6] slots    zset  free slot numbers below next_slot (score = slot)
-- ARGV[1] is always the name prefix of the per-waiter wake lists, "<prefix>:{name}:wake:".
-- Wake lists are the one kind of key built here rather than passed in; they carry the same
-- hash tag, so they live on the same Cluster slot.
--
-- Time is the server's (TIME), never a client's: a lease is valid while now < deadline.

if redis.replicate_commands then
    redis.replicate_commands()
end

local K_STATE, K_HOLDERS, K_INFO = KEYS[1], KEYS[2], KEYS[3]
local K_QUEUE, K_ALIVE, K_SLOTS = KEYS[4], KEYS[5], KEYS[6]
local WAKE_PREFIX = ARGV[1]

-- Keys outlive the last lease by a day, so an abandoned semaphore disappears by itself.
local IDLE_KEEP_MS = 86400000
-- A wake list is read within one waiter refresh; a minute is plenty.
local WAKE_KEEP_MS = 60000

local KEY_TYPES = {'hash', 'zset', 'hash', 'zset', 'zset', 'zset'}

-- Returns an error reply table when a key exists with a type redsem did not create; run first,
-- before any write, so a foreign key is never overwritten.
local function check_types()
    for i, expected in ipairs(KEY_TYPES) do
        local actual = redis.call('TYPE', KEYS[i]).ok
        if actual ~= 'none' and actual ~= expected then
            return {'wrongtype', KEYS[i], actual, expected}
        end
    end
    return nil
end

-- Server time: milliseconds as a number, and microseconds as an exact decimal string.
local function server_now()
    local t = redis.call('TIME')
    local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    return ms, t[1] .. string.format('%06d', tonumber(t[2]))
end

-- Integers above 1e14 lose digits in tostring() and cjson; format them exactly.
local function int_str(n)
    return string.format('%.0f', n)
end

local function decode_info(token)
    local raw = redis.call('HGET', K_INFO, token)
    if not raw then
        return nil
    end
    local ok, info = pcall(cjson.decode, raw)
    if ok and type(info) == 'table' then
        return info
    end
    return nil
end

local function stored_limit()
    return tonumber(redis.call('HGET', K_STATE, 'limit'))
end

-- Removes one holder and returns its slot to the free set.
local function remove_holder(token)
    local info = decode_info(token)
    redis.call('ZREM', K_HOLDERS, token)
    redis.call('HDEL', K_INFO, token)
    if info and tonumber(info.slot) then
        redis.call('ZADD', K_SLOTS, info.slot, info.slot)
    end
end

-- With no holders left every slot is free: restart numbering from 0.
local function reset_slots_if_empty()
    if redis.call('ZCARD', K_HOLDERS) == 0 then
        redis.call('DEL', K_SLOTS)
        redis.call('HSET', K_STATE, 'next_slot', 0)
    end
end

local function remove_waiter(token)
    redis.call('ZREM', K_QUEUE, token)
    redis.call('ZREM', K_ALIVE, token)
    redis.call('HDEL', K_INFO, token)
    redis.call('DEL', WAKE_PREFIX .. token)
end

-- Drops holders whose lease deadline has passed and waiters that stopped refreshing.
-- Returns true when anything was removed (so waiters may have to be woken).
local function prune(now)
    local changed = false
    local expired = redis.call('ZRANGEBYSCORE', K_HOLDERS, '-inf', now)
    for _, token in ipairs(expired) do
        remove_holder(token)
        changed = true
    end
    if changed then
        reset_slots_if_empty()
    end
    local dead = redis.call('ZRANGEBYSCORE', K_ALIVE, '-inf', now)
    for _, token in ipairs(dead) do
        remove_waiter(token)
        changed = true
    end
    return changed
end

-- Lowest free slot number in 0..limit-1.
local function take_slot(limit)
    local popped = redis.call('ZPOPMIN', K_SLOTS)
    if popped[1] then
        return tonumber(popped[1])
    end
    local slot = redis.call('HINCRBY', K_STATE, 'next_slot', 1) - 1
    if slot < limit then
        return slot
    end
    -- Only reachable when holder metadata was lost by hand: rebuild from the holders' slots.
    local used = {}
    for _, token in ipairs(redis.call('ZRANGE', K_HOLDERS, 0, -1)) do
        local info = decode_info(token)
        if info and tonumber(info.slot) then
            used[tonumber(info.slot)] = true
        end
    end
    for candidate = 0, limit - 1 do
        if not used[candidate] then
            return candidate
        end
    end
    return limit
end

-- Wakes the waiters at the head of the queue that now fit under the limit. Each one then
-- claims its slot with the acquire script; FIFO holds because only the first `free` waiters
-- in ticket order are eligible.
local function notify(limit)
    if not limit then
        return
    end
    local free = limit - redis.call('ZCARD', K_HOLDERS)
    if free <= 0 then
        return
    end
    for _, token in ipairs(redis.call('ZRANGE', K_QUEUE, 0, free - 1)) do
        local key = WAKE_PREFIX .. token
        redis.call('LPUSH', key, '1')
        redis.call('PEXPIRE', key, WAKE_KEEP_MS)
    end
end

-- Earliest lease deadline, or nil when nobody holds a slot.
local function next_deadline()
    local first = redis.call('ZRANGE', K_HOLDERS, 0, 0, 'WITHSCORES')
    return tonumber(first[2])
end

-- Sets every key's TTL to outlive the last lease and the last waiter by IDLE_KEEP_MS.
local function touch(now)
    local last = now
    local holder = redis.call('ZRANGE', K_HOLDERS, -1, -1, 'WITHSCORES')
    if holder[2] then
        last = math.max(last, tonumber(holder[2]))
    end
    local waiter = redis.call('ZRANGE', K_ALIVE, -1, -1, 'WITHSCORES')
    if waiter[2] then
        last = math.max(last, tonumber(waiter[2]))
    end
    local keep = last - now + IDLE_KEEP_MS
    for i = 1, #KEYS do
        redis.call('PEXPIRE', KEYS[i], keep)
    end
end
