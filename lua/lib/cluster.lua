-- lib/cluster.lua: what a Redis Cluster asks of a script: commands on several keys that work
-- on a node importing the slot, the probe that refuses a call while its slot migrates away,
-- and telling keys that came by a slot migration from a failover.
-- Provides: del_keys(call, ...), exist_count(call, ...), came_by_migration(recorded, myself),
--   refuse_while_migrating(call).
-- Reads the call's asked, not_a_cluster, wake_prefix and k_state (lib/call.lua).
--
-- Cluster slot migrations: a key built here is not checked by Redis before the script runs.
-- While its slot is migrating away, such a key that is not on this node any more (or not yet
-- created) fails the script where it is touched, after earlier writes: so every script first
-- probes one such key (refuse_while_migrating()), and a node that cannot serve it answers
-- TRYAGAIN before anything is written (the client retries, as for Redis's own TRYAGAIN). On the
-- node importing the slot (after ASKING: call.asked) the declared keys have all arrived, but
-- lists built here may still be on the other node: there no nudge list is pushed to (one may
-- exist there, and a MIGRATE of it would then fail; see queue.lua); a grant's wake list cannot
-- exist yet anywhere; and no command names several keys (see del_keys()).

-- DEL and EXISTS of several keys. On a Cluster node importing the slot (call.asked), a command
-- on several keys of which some are missing here fails with TRYAGAIN, which inside a script
-- ends it after its earlier writes: there each key goes alone.
local function del_keys(call, ...)
    if call.asked then
        for _, key in ipairs({...}) do
            redis.call('DEL', key)
        end
    else
        redis.call('DEL', ...)
    end
end

local function exist_count(call, ...)
    if not call.asked then
        return redis.call('EXISTS', ...)
    end
    local count = 0
    for _, key in ipairs({...}) do
        count = count + redis.call('EXISTS', key)
    end
    return count
end

-- On a Redis Cluster a semaphore's keys, its epoch key with them, may have come from another
-- primary by a slot migration (MIGRATE), intact. Then the epoch names (`recorded`) a node other
-- than this one that is still a primary and not failing. Anything else counts as a possible
-- loss: this node itself restarted, or it took over as a replica from the node named (which is
-- then failing, or a replica), or the cluster forgot that node.
local function came_by_migration(recorded, myself)
    if not recorded or recorded == myself then
        return false
    end
    for line in string.gmatch(redis.call('CLUSTER', 'NODES'), '[^\n]+') do
        local id, flags = string.match(line, '^(%x+) %S+ (%S+)')
        if id == recorded then
            return string.find(flags, 'master', 1, true) ~= nil and not string.find(flags, 'fail', 1, true)
        end
    end
    return false
end

-- Before anything is written: can this node serve the keys built here? Returns the TRYAGAIN
-- error reply when it cannot, else nil. (On a server that is not a cluster this never fails,
-- and is skipped when the keys show that it is not one.)
local function refuse_while_migrating(call)
    if call.not_a_cluster then
        return nil
    end
    local probe = redis.pcall('EXISTS', call.wake_prefix)
    if type(probe) == 'table' and probe.err then
        return redis.error_reply('TRYAGAIN the slot of ' .. call.k_state .. ' is migrating (' .. probe.err .. ')')
    end
    return nil
end
