-- lib/epoch.lua: the epoch and admission after a possible loss of data: whether this server
-- is the Redis process, in the replication history, that last wrote the epoch key (KEYS[7]);
-- when it may have lost data; and until when nobody new is admitted.
-- Provides: admission(call, now, grace), admission_now(call, now),
--   demand_proof(call, now), declare_loss(call, now), LOSS_GRACE_MS, and through its
--   includes refuse_if_evicting(call) (lib/eviction.lua);
--   within: judge_by_marker(call, now), judge_identity(call, now, me, stored),
--   judge_epoch(call, now, me), read_epoch(call, now), log_closed(call, state, now, epoch).
-- Reads the call's k_epoch and own_epoch, keeps call.epoch, and the state's closed_logged.
-- Uses the protocol's LOSS_GRACE_MS.
--- @include "call"
--- @include "cluster"
--- @include "state"
--- @include "lifetime"
--- @include "history"
--- @include "server"
--- @include "eviction"
--
-- Why, the cases, and what is not covered: docs/DESIGN.md, "Admission after lost data". The
-- other modules ask only admission(): the rule lives here alone.

-- Without INFO, judges the epoch key by the marker the call proves or declares (see
-- identify()); nil when it cannot: the call offered no marker, or not the one the key holds
-- (another client declared a new one since this client last looked), or the marker's script
-- did not run (this process lacks it: the client declares a fresh marker next).
local function judge_by_marker(call, now)
    local marker = call.marker
    if not marker or not marker_ran(call) then
        return nil
    end
    local stored = redis.call('HMGET', call.k_epoch, 'lost_at', 'cause', 'cache_marker')
    if marker.expected ~= (stored[3] or '') then
        return nil
    end
    if not marker.new then
        -- This process has the marker's script cached: it ran it, and checked this epoch then.
        return {lost_at = tonumber(stored[1]) or 0, cause = stored[2] or 'change', changed = false}
    end
    -- Nothing proves that this process ever saw this epoch: a possible loss, now (cause
    -- 'unproven'; without INFO there is no uptime either, so a missing key counts from now,
    -- the latest possible start).
    return {lost_at = now, cause = 'unproven', changed = true, marker = marker.new}
end

-- Judges the epoch key against this server's identity `me`, changing nothing: returns
-- {lost_at, cause, changed}, with lost_at the server time of the latest possible loss of data
-- (0: none), cause 'start' (no epoch key: the server may have started without its data at
-- lost_at) or 'change' (the key names another server process or replication history, or
-- none: only calls without INFO wrote it), and
-- changed true when the key must be written anew (a loss noticed now, or a first check of an
-- epoch that an older redsem wrote).
local function judge_identity(call, now, me, stored)
    local run, replid, stored_lost_at, cause, node = stored[1], stored[2], tonumber(stored[3]) or 0,
                                                   stored[4] or 'change', stored[5]
    if not run and stored[6] then
        -- Written by calls without INFO only: nothing names the process that wrote it, but
        -- the marker's proof can (nil: this call offered none). Proved, the key is written
        -- anew to name this process, at no loss.
        local epoch = judge_by_marker(call, now)
        if epoch and not epoch.changed then
            epoch.changed = true
        end
        return epoch
    end
    -- The same process. Its replication history is the same, or drawn anew by a master that
    -- followed nobody (creating its backlog: a first replica, or the first after
    -- repl-backlog-ttl; it then has no replid2), or not known (an epoch an older redsem
    -- wrote names no replid: its run_id check stands, once). A promotion (REPLICAOF NO ONE,
    -- a failover back to this node) keeps the history it followed as its replid2.
    if run == me.run and (replid == me.replid or not replid or not me.promoted) then
        return {lost_at = stored_lost_at, cause = cause, changed = replid ~= me.replid}
    end
    if run and call.own_epoch and replid ~= me.replid2 and
       came_by_migration(node, redis.call('CLUSTER', 'MYID')) then
        -- Moved here intact from another primary (a slot migration), not by a failover: a
        -- promoted replica keeps its old master's replid as its replid2.
        return {lost_at = stored_lost_at, cause = cause, changed = true}
    end
    if run then
        -- Written by another Redis process or replication history: this one restarted (from
        -- an older snapshot, perhaps), or is a replica promoted by a failover, or was promoted
        -- back: it lost what it did not receive by now, however long it has run.
        return {lost_at = now, cause = 'change', changed = true}
    end
    -- No epoch: the server may have started without its data (no persistence). uptime is the
    -- difference of two whole-second clocks, so it started up to 1 s later than now - uptime:
    -- take the latest possible start. On a server that has run for longer than any grace this
    -- admits at once. (A FLUSHALL of a running server is not noticed: do not flush a live
    -- Redis.)
    -- A loss an operator declared in the key (see declare_loss()) without INFO still counts.
    local started = math.min(now, now - me.uptime_ms + 1000)
    if stored_lost_at > started then
        return {lost_at = stored_lost_at, cause = cause, changed = true}
    end
    return {lost_at = started, cause = 'start', changed = true}
end

-- Judges the epoch key against this server's identity `me`, changing nothing: as
-- judge_identity(), and also a possible loss by eviction (see eviction_since(); cause
-- 'evicted', lost_at now: a policy seen now closes admission for the grace after the last
-- call that saw it). Returns {lost_at, cause, changed, counts}: counts, the eviction counters
-- to store, or nil.
local function judge_epoch(call, now, me)
    local stored = redis.call('HMGET', call.k_epoch, 'run', 'replid', 'lost_at', 'cause', 'node',
                              'cache_marker', 'evicted', 'config_sets')
    local epoch = judge_identity(call, now, me, stored)
    if epoch and me.run then
        local evicted, counts = eviction_since(call, stored)
        if evicted then
            epoch = {lost_at = now, cause = 'evicted', changed = true}
        end
        epoch.counts = counts
    end
    return epoch
end

-- The epoch as this call sees it, after checking the server's identity, written anew when it
-- changed: {lost_at, cause} (see judge_epoch()), or {unknown = true} when the call cannot tell
-- (no INFO, and no proof offered: see judge_by_marker()). Read once per call, into call.epoch.
local function read_epoch(call, now)
    if call.epoch then
        return call.epoch
    end
    local me = identify(call)
    local epoch
    if me.run then
        epoch = judge_epoch(call, now, me)
    else
        epoch = judge_by_marker(call, now)
    end
    epoch = epoch or {unknown = true}
    if epoch.counts then
        redis.call('HSET', call.k_epoch, 'evicted', epoch.counts[1], 'config_sets', epoch.counts[2])
    end
    if epoch.changed then
        local k_epoch = call.k_epoch
        -- checked_at: read by redsem 0.1, which trusts an epoch checked less than 1 s ago.
        redis.call('HSET', k_epoch, 'lost_at', int_str(epoch.lost_at), 'cause', epoch.cause,
                   'checked_at', int_str(now))
        -- A loss that INFO shows stays in lost_at, which a call that proves the marker (on
        -- a node that has it cached: a failback) reads too; so the marker stays.
        if me.run then
            redis.call('HSET', k_epoch, 'run', me.run, 'replid', me.replid)
        end
        if epoch.marker then
            redis.call('HSET', k_epoch, 'cache_marker', epoch.marker)
        end
        if call.own_epoch then
            redis.call('HSET', k_epoch, 'node', redis.call('CLUSTER', 'MYID'))
            -- Outlives the semaphore's keys, and the loss grace (gc leaves it).
            -- (None while the semaphore's keys are pinned, see settle_expiry(), nor while an
            -- operator's settings keep its state, see expiring_keys().)
            if not call.state.pinned and not call.state.kept then
                redis.call('PEXPIREAT', k_epoch, int_str(math.max(call.state.keep, now + KEEP_STEP_MS)))
            end
        end
    end
    call.epoch = epoch
    return epoch
end

-- Logs, once per loss, that admission to the call's semaphore is closed (event 'closed',
-- "CAUSE LOST_AT_MS OPENS_AT_MS", with the grace every client has); the state's field
-- closed_logged names the loss logged last.
local function log_closed(call, state, now, epoch)
    if state.history <= 0 or not state.raw_limit or state.closed_logged == epoch.lost_at then
        return
    end
    state.closed_logged = epoch.lost_at
    redis.call('HSET', call.k_state, 'closed_logged', int_str(epoch.lost_at))
    log_event(call, state, now, 'closed',
              closed_value(epoch.cause, epoch.lost_at, epoch.lost_at + LOSS_GRACE_MS))
end

-- Admission after a possible loss of data, for a caller whose own loss grace is `grace` ms
-- (nil: LOSS_GRACE_MS), and while the semaphore is paused. Returns the server time before
-- which nobody with that grace may take a slot (0: admission is open), and the epoch
-- ({lost_at, cause}; while paused {cause = 'paused', lost_at = when it was paused}). The epoch
-- key is read, and the server's identity checked, once per call, only on paths that admit
-- someone.
local function admission(call, now, grace)
    local state = call.state
    if state and pause_active(state, now) then
        -- Nobody is admitted while paused: until the pause ends, or for ever (NOTHING_DUE).
        local ends = state.paused_until > 0 and state.paused_until or NOTHING_DUE
        return ends, {cause = 'paused', lost_at = state.paused_since}
    end
    local epoch = read_epoch(call, now)
    if evicting_policy(call) then
        return now + 1, epoch -- nobody is admitted (see refuse_if_evicting())
    end
    if epoch.unknown then
        -- Not this call's to judge: the head of the queue takes the slot when it next asks,
        -- with a proof of its own.
        return now + 1, epoch
    end
    local opens = epoch.lost_at + (grace or LOSS_GRACE_MS)
    if epoch.lost_at > 0 and now < epoch.lost_at + LOSS_GRACE_MS then
        log_closed(call, call.state, now, epoch)
    end
    if epoch.lost_at > 0 and now < opens then
        return opens, epoch
    end
    return 0, epoch
end

-- Admission as every client without a grace of its own sees it now, changing nothing (for
-- status and limit): {opens_at (0: open), cause, lost_at, noticed}; noticed false when the
-- loss is not written in the epoch yet (the next call that may admit will), and nil when INFO
-- is denied and the call offered no marker, or not the key's (see judge_by_marker()).
local function admission_now(call, now)
    local me = identify(call)
    local epoch
    if me.run then
        epoch = judge_epoch(call, now, me)
    else
        epoch = judge_by_marker(call, now)
    end
    if not epoch then
        return nil
    end
    local opens = epoch.lost_at + LOSS_GRACE_MS
    if epoch.lost_at == 0 or now >= opens then
        return {opens_at = 0, cause = '', lost_at = epoch.lost_at, noticed = not epoch.changed}
    end
    return {opens_at = opens, cause = epoch.cause, lost_at = epoch.lost_at,
            noticed = not epoch.changed}
end

-- For a call that may admit, before it writes anything: nil when it can judge the epoch,
-- else the reply of kind prove whose marker names the marker the epoch key holds ('' for none),
-- which the client proves (or disproves) by calling again (see identify()). Without INFO, a
-- loss this call's proof shows is written at once, so that the client learns the marker in
-- force from any other reply.
local function demand_proof(call, now)
    local epoch = read_epoch(call, now)
    if epoch.unknown then
        return {'kind', 'prove', 'marker', redis.call('HGET', call.k_epoch, 'cache_marker') or ''}
    end
    return nil
end

-- Declares a possible loss of data at server time `now` (`redsem lost`: an operator knows of
-- one that nothing here can see, such as a replica promoted by hand, a backup restored, or a
-- clock stepped): the epoch's lost_at, cause 'declared', so admission closes for the loss
-- grace as after a restart, for every semaphore the epoch key vouches for. With INFO the key
-- first names this process, so that no later call takes it for another's; without, a later
-- call either proves the marker the key holds and reads the loss, or declares a fresh one.
local function declare_loss(call, now)
    if identify(call).run then
        read_epoch(call, now)
    end
    redis.call('HSET', call.k_epoch, 'lost_at', int_str(now), 'cause', 'declared',
               'checked_at', int_str(now))
    if call.own_epoch and not call.state.pinned and not call.state.kept then
        redis.call('PEXPIREAT', call.k_epoch, int_str(math.max(call.state.keep, now + KEEP_STEP_MS)))
    end
end
