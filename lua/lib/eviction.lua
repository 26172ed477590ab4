-- lib/eviction.lua: whether this server may evict a semaphore's keys, now or since the epoch
-- key was last written (a possible loss of data, judged in lib/epoch.lua).
-- Provides: evicting_policy(call), eviction_since(call, stored), refuse_if_evicting(call);
--   within: info_counter(section, field, pattern).
-- Keeps a sparing policy in PROCESS (lib/server.lua), and call.me.evicting.
-- Uses the protocol's POLICY_FRESH_MS.
--- @include "call"
--- @include "state"
--- @include "server"
--
-- A sighting of a policy that may evict any key (allkeys-*, with a maxmemory), and any
-- eviction that a sparing policy cannot explain, count as a possible loss of data (cause
-- 'evicted'). Explained: evictions while the settings stayed as they are, told by the counters
-- the epoch key keeps (evicted, config_sets: INFO stats and commandstats). Why, and what
-- cannot be seen without INFO: docs/DESIGN.md, "Admission after lost data".

-- The maxmemory-policy when this server may evict any key (allkeys-*, with a maxmemory),
-- else false; nil where INFO is denied. Read at most once per call, and only by calls that
-- admit; a function library keeps a sparing policy in PROCESS for POLICY_FRESH_MS (a script
-- sent by EVAL reads it every time). An evicting one is read again by every call, so that
-- admission opens as soon as an operator sets the policy back (the evictions it allowed still
-- close it for the loss grace: eviction_since()).
local function evicting_policy(call)
    local me = identify(call)
    if me.evicting == nil and me.run then
        local now = call.now_us and math.floor(call.now_us / 1000) or server_now(call)
        local seen = PROCESS.policy
        if seen and not seen.evicting and seen.run == me.run and now >= seen.at and
           now < seen.at + POLICY_FRESH_MS then
            me.evicting = seen.evicting
            return me.evicting
        end
        local memory = redis.pcall('INFO', 'memory')
        if type(memory) == 'table' and memory.err then
            memory = '' -- an ACL that allows other sections only: the policy cannot be seen
        end
        local policy = info_field(memory, 'maxmemory_policy', '^[%w-]+') or ''
        me.evicting = (tonumber(info_field(memory, 'maxmemory', '^%d+')) or 0) > 0 and
                      string.sub(policy, 1, 8) == 'allkeys-' and policy
        PROCESS.policy = {run = me.run, at = now, evicting = me.evicting}
    end
    return me.evicting
end

-- A counter of INFO `section`, on the line of `field` where `pattern` captures it from the
-- value's start (0 where the line is missing), or nil where that section is denied.
local function info_counter(section, field, pattern)
    local text = redis.pcall('INFO', section)
    if type(text) == 'table' and text.err then
        return nil
    end
    return tonumber(info_field(text, field, pattern)) or 0
end

-- Whether this server may have evicted a semaphore's keys since the epoch key `stored` (its
-- fields as judge_epoch() reads them) was written, and the counters to store
-- ({evicted, config_sets}; nil: nothing new to store).
local function eviction_since(call, stored)
    local policy = evicting_policy(call)
    local evicted = call.me.run and info_counter('stats', 'evicted_keys', '^%d+')
    if not evicted then
        return policy and true or false, nil
    end
    if not policy and evicted == tonumber(stored[7]) then
        return false, nil -- the common case: no eviction since the last look
    end
    -- Redis 7 counts CONFIG SET on its own; 6.2 counts every CONFIG subcommand together.
    local sets = info_counter('commandstats', 'cmdstat_config|set', '^calls=(%d+)')
    if sets == 0 then
        sets = info_counter('commandstats', 'cmdstat_config', '^calls=(%d+)')
    end
    local counts = {evicted, sets or -1}
    if policy then
        return true, counts
    end
    if evicted == 0 then
        return false, counts -- none since the start, or since CONFIG RESETSTAT
    end
    -- Evictions, under the policy in force now. Had it been in force throughout, they spared
    -- every semaphore in use; a CONFIG SET since the last look (before the first look: ever)
    -- may have changed it meanwhile.
    return sets == nil or sets ~= (tonumber(stored[8]) or 0), counts
end

-- For an acquire, before it writes anything: nil, or the error that refuses it on a Redis
-- that may evict any key (INFO shows a maxmemory and an allkeys-* policy): an evicted
-- semaphore would let a second holder in. (Without INFO this cannot be seen: README, "Least
-- privilege".) Under volatile-* the keys in use have no expiry (lifetime.lua), so none of them
-- is evicted; under noeviction a full Redis refuses writes (OOM).
local function refuse_if_evicting(call)
    local policy = evicting_policy(call)
    if not policy then
        return nil
    end
    return redis.error_reply('EVICTING Redis may evict any key (maxmemory-policy ' .. policy ..
                             ' with a maxmemory): set maxmemory-policy to noeviction or ' ..
                             'volatile-lru, or give redsem a Redis of its own')
end
