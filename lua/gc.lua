-- gc.lua: removes what is dead from one semaphore, atomically, and deletes its keys when
-- nothing is left.
-- KEYS: see lib.lua.   ARGV[1] wake-list prefix   ARGV[2] '1' for a dry run (change nothing)
-- Dead: holders whose lease ran out, waiters that stopped refreshing, hand-overs nobody
-- collected, and records no holder or waiter owns (keys edited by hand). A live holder is
-- never touched, even one renewing right now: this runs atomically, by the server's clock.
-- Reply: {deleted, entry, entry, ...}; deleted is 1 when the semaphore's keys were (or, in a
-- dry run, would be) deleted; each entry is {kind, token, record, dead_for_ms} with kind
-- 'holder', 'waiter', 'handover' or 'orphan', record the raw info entry ('' if none), and
-- dead_for_ms how long ago the lease or liveness ran out (0 for orphans).

local state, bad = load_state()
if not state then
    return bad
end
local dry_run = ARGV[2] == '1'
local now = server_now()
local removed = {}
local gone = {} -- tokens removed (or that would be), so a dry run counts what is left

local function note(kind, token, dead_since)
    removed[#removed + 1] = {kind, token, redis.call('HGET', K_INFO, token) or '',
                             dead_since and math.max(0, now - dead_since) or 0}
    gone[token] = true
end

-- Dead waiters first, so that no freed slot is handed to one of them. WITHSCORES replies
-- interleave members and scores.
local lapsed = redis.call('ZRANGEBYSCORE', K_ALIVE, '-inf', now, 'WITHSCORES')
local handovers = {}
for i = 1, #lapsed, 2 do
    local token, since = lapsed[i], tonumber(lapsed[i + 1])
    if redis.call('ZSCORE', K_HOLDERS, token) then
        handovers[#handovers + 1] = {token, since}
    else
        note('waiter', token, since)
        if not dry_run then
            remove_waiter(token)
        end
    end
end
for _, handover in ipairs(handovers) do
    local token, since = handover[1], handover[2]
    local wake = WAKE_PREFIX .. token
    if redis.call('EXISTS', wake) == 1 then
        note('handover', token, since)
        if not dry_run then
            redis.call('DEL', wake)
            redis.call('ZREM', K_ALIVE, token)
            remove_holder(state, token, nil, now)
        end
    elseif not dry_run then
        redis.call('ZREM', K_ALIVE, token) -- collected: nothing to report
    end
end
local expired = redis.call('ZRANGEBYSCORE', K_HOLDERS, '-inf', now, 'WITHSCORES')
for i = 1, #expired, 2 do
    local token = expired[i]
    if not gone[token] then
        note('holder', token, tonumber(expired[i + 1]))
        if not dry_run then
            remove_holder(state, token, nil, now)
        end
    end
end
for _, token in ipairs(redis.call('HKEYS', K_INFO)) do
    if not gone[token] and not redis.call('ZSCORE', K_HOLDERS, token) and
        not redis.call('ZSCORE', K_QUEUE, token) then
        note('orphan', token, nil)
        if not dry_run then
            redis.call('HDEL', K_INFO, token)
        end
    end
end

-- What is left alive?
local holders_left = 0
for _, token in ipairs(redis.call('ZRANGE', K_HOLDERS, 0, -1)) do
    if not gone[token] then
        holders_left = holders_left + 1
    end
end
local waiters_left = 0
for _, token in ipairs(redis.call('ZRANGE', K_QUEUE, 0, -1)) do
    if not gone[token] then
        waiters_left = waiters_left + 1
    end
end
local deleted = 0
if holders_left == 0 and waiters_left == 0 and redis.call('EXISTS', unpack(KEYS)) > 0 then
    deleted = 1
    if not dry_run then
        redis.call('DEL', unpack(KEYS))
    end
end
local reply = {deleted}
for _, entry in ipairs(removed) do
    reply[#reply + 1] = entry
end
return reply
