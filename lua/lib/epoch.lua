-- lib/epoch.lua: the epoch and admission after a possible loss of data: whether this server
-- is the Redis process that last checked the epoch key (KEYS[7]), when it may have lost
-- data, and until when nobody new is admitted.
-- Provides: admission_opens(call, state, now, ttl), check_identity_at_end(call); within:
--   read_epoch(call, state, now), loss_grace(state, ttl).
-- Needs: call.lua (call.k_epoch, call.sent_by_eval, call.own_epoch; keeps call.lost_at),
--   cluster.lua (came_by_migration()), state.lua (server_now(), KEEP_STEP_MS).
--
-- Lost data: Redis may come back from a restart without the latest writes (no persistence, an
-- older RDB snapshot, appendfsync everysec), or be flushed, or be another server (a promoted
-- replica). A lease it forgot may still be running. The epoch key notices: it is missing, or
-- names another Redis process. Then nobody is admitted to a semaphore until its loss grace
-- has passed since the possible loss (see admission_opens()). The other modules ask only
-- admission_opens() (and finish() check_identity_at_end()): the rule lives here alone.

-- The loss grace when neither the caller nor the semaphore names one: at least this, and at
-- least the lease ttl of whoever is to be admitted.
local DEFAULT_LOSS_GRACE_MS = 60000
-- The server's identity (INFO) is checked by a script sent with EVAL, which is how each script
-- first runs in a new server process (the script cache does not survive a restart), and at
-- least this often otherwise.
local IDENTITY_CHECK_MS = 1000

-- The latest possible loss of data (server ms, 0: none), as the epoch key (KEYS[7]) says,
-- checking the server's identity when the key asks for it (a script sent with EVAL, or a
-- check older than IDENTITY_CHECK_MS). Read once per call, into call.lost_at.
local function read_epoch(call, state, now)
    if call.lost_at then
        return call.lost_at
    end
    local k_epoch = call.k_epoch
    local epoch = redis.call('HMGET', k_epoch, 'run', 'lost_at', 'checked_at', 'node')
    local since_check = now - (tonumber(epoch[3]) or 0)
    if epoch[1] and not call.sent_by_eval and since_check >= 0 and since_check < IDENTITY_CHECK_MS then
        call.lost_at = tonumber(epoch[2]) or 0
        return call.lost_at
    end
    local server = redis.call('INFO', 'server')
    -- (A server that does not report these is taken as one process that never restarted.)
    local run_id = string.match(server, 'run_id:(%x+)') or 'unknown'
    local uptime_ms = (tonumber(string.match(server, 'uptime_in_seconds:(%d+)')) or 0) * 1000
    local lost_at
    if epoch[1] == run_id then
        lost_at = tonumber(epoch[2]) or 0
        redis.call('HSET', k_epoch, 'checked_at', int_str(now))
    else
        -- Written by another Redis process: this one restarted (from an older snapshot,
        -- perhaps), or is a replica promoted by a failover, which lost what it had not
        -- received by now, however long it has run. Missing: a server that started less
        -- than the default grace ago lost its data at its start (no persistence); one that
        -- has run longer was never used by redsem (or this prefix). (A FLUSHALL is not
        -- noticed on such a server: do not flush a live Redis.) uptime_in_seconds is the
        -- difference of two whole-second clocks, so the server started up to 1s later
        -- than now - uptime: take the latest possible start.
        local own_epoch = call.own_epoch
        local myself = own_epoch and redis.call('CLUSTER', 'MYID') or nil
        if own_epoch and epoch[1] and came_by_migration(epoch[4], myself) then
            lost_at = tonumber(epoch[2]) or 0
        elseif epoch[1] then
            lost_at = now
        elseif uptime_ms < DEFAULT_LOSS_GRACE_MS then
            lost_at = math.min(now, now - uptime_ms + 1000)
        else
            lost_at = 0
        end
        redis.call('HSET', k_epoch, 'run', run_id, 'lost_at', int_str(lost_at), 'checked_at',
                   int_str(now))
        if own_epoch then
            redis.call('HSET', k_epoch, 'node', myself)
            -- Outlives the semaphore's keys, and the loss grace (gc leaves it).
            redis.call('PEXPIREAT', k_epoch, int_str(math.max(state.keep, now + KEEP_STEP_MS)))
        end
    end
    call.lost_at = lost_at
    return lost_at
end

-- The loss grace for admitting a holder whose lease ttl is `ttl`: the semaphore's own (state
-- field loss_grace, which acquire stores when the caller names one), else the longer of the
-- ttl and DEFAULT_LOSS_GRACE_MS.
local function loss_grace(state, ttl)
    return state.loss_grace or math.max(ttl, DEFAULT_LOSS_GRACE_MS)
end

-- Admission after a possible loss of data. Returns the server time before which nobody new
-- may take a slot, for a caller whose lease ttl is `ttl` ms; 0 when admission is open.
-- The epoch key is read once per call, only on paths that admit someone.
local function admission_opens(call, state, now, ttl)
    local lost_at = read_epoch(call, state, now)
    local grace = loss_grace(state, ttl)
    if lost_at > 0 and now < lost_at + grace then
        return lost_at + grace
    end
    return 0
end

-- At the end of a call (finish()): a script sent with EVAL checks the server's identity even
-- when it admitted nobody: it may be the first script this server process runs (after a
-- restart from an older snapshot), and the scripts after it, sent with EVALSHA, trust an epoch
-- checked less than IDENTITY_CHECK_MS ago. (Not in a script that only reads, which sets
-- call.read_only, nor in one that stopped before it read the state.)
local function check_identity_at_end(call)
    if call.sent_by_eval and not call.lost_at and call.state and not call.read_only then
        read_epoch(call, call.state, server_now(call))
    end
end
