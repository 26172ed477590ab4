-- lib.lua: helpers shared by every redsem script; the build prepends this file to each one.
--
-- KEYS, the same for every script; all share the hash tag {name}, so a script stays on one
-- Redis Cluster slot:
--   KEYS[1] state    hash    limit, fence, ticket, keep (see touch()), loss_grace, due (see
--                            prune())
--   KEYS[2] holders  zset    token -> lease deadline (server ms)
--   KEYS[3] info     hash    token -> "h SLOT FENCE ACQUIRED_MS TTL_MS JSON" for a holder,
--                            "w - - SINCE_MS TTL_MS JSON" for a waiter (JSON: host, pid,
--                            user, label)
--   KEYS[4] queue    zset    waiter token -> ticket (arrival order, assigned here)
--   KEYS[5] alive    zset    token -> deadline: a waiter's liveness, or for a slot handed to a
--                            waiter, the time by which it must have collected the grant
--   KEYS[6] slots    string  bitmap, bit N set while slot N is held
--   KEYS[7] epoch    hash    run (the run_id of the Redis process that last checked it),
--                            lost_at (server ms of the latest possible loss of data, 0: none)
--                            and checked_at (server ms of that check). On one server
--                            "<prefix>:epoch", one per prefix and database, never expires; on a
--                            Redis Cluster, where a script's keys must share a slot, the
--                            semaphore's own "<prefix>:{name}:epoch", which expires with it,
--                            and also names the cluster node (node: its CLUSTER MYID), so that
--                            keys that came by a slot migration are told from a failover.
--   KEYS[8] log      stream  the semaphore's history (see log_event())
-- ARGV[1] is always the name prefix of the per-waiter wake lists, "<prefix>:{name}:wake:",
-- and the last ARGV is always flags the client library adds (Connection::eval), a sum of: 1 when
-- the client sent the script with EVAL because the server did not have it cached (a new server
-- process, or SCRIPT FLUSH), else 0 (EVALSHA); 2 when it was sent to a Cluster node after
-- ASKING (the node is importing the slot: see below); 4 when its keys hash to several Cluster
-- slots (a Cluster refuses such a script, so this server is not one: see the probe at the end).
-- Wake lists are the one kind of key built here rather than passed in; they carry the same
-- hash tag, so they live on the same Cluster slot.
--
-- Cluster slot migrations: a key built here is not checked by Redis before the script runs.
-- While its slot is migrating away, such a key that is not on this node any more (or not yet
-- created) fails the script where it is touched, after earlier writes: so every script first
-- probes one such key, and a node that cannot serve it answers TRYAGAIN before anything is
-- written (the client retries, as for Redis's own TRYAGAIN). On the node importing the slot
-- (after ASKING) the declared keys have all arrived, but lists built here may still be on the
-- other node: there no nudge list is pushed to (one may exist there, and a MIGRATE of it would
-- then fail); a grant's wake list cannot exist yet anywhere; and no command names several keys
-- (see del_keys()).
--
-- Invariants: time is the server's (TIME), never a client's, and a lease is valid while
-- now < deadline. While anybody is queued and admission is open, every slot is held: a freed
-- slot goes straight to the head of the queue (hand_over), so FIFO needs no wake-and-race.
-- Fences only grow, also across a restart that lost data: each is at least the server clock
-- in microseconds at its grant.
--
-- Lost data: Redis may come back from a restart without the latest writes (no persistence, an
-- older RDB snapshot, appendfsync everysec), or be flushed, or be another server (a promoted
-- replica). A lease it forgot may still be running. The epoch key notices: it is missing, or
-- names another Redis process. Then nobody is admitted to a semaphore until its loss grace
-- has passed since the possible loss (see admission_opens()).
--
-- Every redis.call costs microseconds, and these scripts run on every acquire and release:
-- the hot paths keep the number of calls small on purpose.

local K_STATE, K_HOLDERS, K_INFO = KEYS[1], KEYS[2], KEYS[3]
local K_QUEUE, K_ALIVE, K_SLOTS, K_EPOCH, K_LOG = KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local SEMAPHORE_KEYS = 6 -- KEYS[1..6] belong to the semaphore; the epoch key may be shared
-- "<prefix>:{name}:state" -> "<prefix>:{name}:epoch": the semaphore's own (on a Cluster).
local OWN_EPOCH = K_EPOCH == string.sub(K_STATE, 1, -6) .. 'epoch'
local WAKE_PREFIX = ARGV[1]
local FLAGS = tonumber(ARGV[#ARGV]) or 0
local SENT_BY_EVAL = FLAGS % 2 == 1
local ASKED = math.floor(FLAGS / 2) % 2 == 1
local NOT_A_CLUSTER = FLAGS >= 4

-- Keys outlive the last lease or waiter by at least KEEP_MIN_MS, so an abandoned semaphore
-- disappears by itself; touch() moves the horizon forward in steps of KEEP_STEP_MS.
local KEEP_MIN_MS = 12 * 3600 * 1000
local KEEP_STEP_MS = 24 * 3600 * 1000
-- A waiter that was handed a slot must collect it within this time, or the slot is taken
-- back and handed on (the waiter died between its last refresh and the hand-over).
local CLAIM_MS = 3000
-- The loss grace when neither the caller nor the semaphore names one: at least this, and at
-- least the lease ttl of whoever is to be admitted.
local DEFAULT_LOSS_GRACE_MS = 60000
-- In a holder's metadata JSON: a keeper process holds the slot (acquire --while-pid). The
-- client writes the JSON compactly; inside a string a quote would be escaped, so only the
-- field itself matches.
local KEEPER_MARK = '"keeper":true'
-- The lease ttl of a holder whose record lacks one (keys changed by hand).
local DEFAULT_TTL_MS = 60000
-- The server's identity (INFO) is checked by a script sent with EVAL, which is how each script
-- first runs in a new server process (the script cache does not survive a restart), and at
-- least this often otherwise.
local IDENTITY_CHECK_MS = 1000
local KEY_TYPES = {'hash', 'zset', 'hash', 'zset', 'zset', 'string'}
-- prune() looks at most at this many entries of each set per call.
local PRUNE_BATCH = 100
-- The state's `due` when the holders and alive sets are empty (see prune()).
local NOTHING_DUE = 2 ^ 52
-- A nudge list nobody popped (its waiter died) expires after this.
local NUDGE_KEEP_MS = 60000
-- The waiters that may take the next free slot (fewer than the limit ahead of them) and this
-- many behind them refresh their place as often as the head: as long as one of them is alive,
-- somebody looks again within the head's refresh interval, so up to this many dead waiters in
-- a row at the head are each passed over within about CLAIM_MS (see acquire.lua).
local NEAR_HEAD = 8
-- How many entries (script calls' events) the history keeps when the semaphore names no other
-- length (state field `history`; 0 keeps none). At or above EXACT_TRIM_BELOW the stream is
-- trimmed a block at a time, now and then (see finish(): cheaper, keeps up to a few hundred
-- more); below it, exactly.
local DEFAULT_HISTORY = 10000
local EXACT_TRIM_BELOW = 1000
local TRIM_EVERY = 16
-- Events counted in the state hash (for `status --format prometheus`) while history is on.
-- (Grants are counted in next_fence().)
local COUNTERS = {expired = 'expired_total', unclaimed = 'expired_total', lost = 'lost_total'}

-- Integers above 1e14 lose digits in tostring(); format them exactly.
local function int_str(n)
    return string.format('%.0f', n)
end

-- DEL and EXISTS of several keys. On a Cluster node importing the slot (ASKED), a command on
-- several keys of which some are missing here fails with TRYAGAIN, which inside a script ends
-- it after its earlier writes: there each key goes alone.
local function del_keys(...)
    if ASKED then
        for _, key in ipairs({...}) do
            redis.call('DEL', key)
        end
    else
        redis.call('DEL', ...)
    end
end

local function exist_count(...)
    if not ASKED then
        return redis.call('EXISTS', ...)
    end
    local count = 0
    for _, key in ipairs({...}) do
        count = count + redis.call('EXISTS', key)
    end
    return count
end

-- Reads limit, fence seed and keep horizon. Returns (state table) or (nil, error reply) when
-- a key holds a type redsem did not create. All keys are checked only when the state hash is
-- missing (a new semaphore); a foreign key appearing later still fails with WRONGTYPE.
local loaded_state -- what it returned, for finish()
local function load_state()
    local got = redis.pcall('HMGET', K_STATE, 'limit', 'fence', 'keep', 'loss_grace', 'due', 'history',
                            'acquired_total')
    if got.err then
        return nil, {'wrongtype', K_STATE, redis.call('TYPE', K_STATE).ok, 'hash'}
    end
    if not got[1] and not got[2] then
        for i = 2, #KEY_TYPES do
            local actual = redis.call('TYPE', KEYS[i]).ok
            if actual ~= 'none' and actual ~= KEY_TYPES[i] then
                return nil, {'wrongtype', KEYS[i], actual, KEY_TYPES[i]}
            end
        end
        local actual = K_LOG and redis.call('TYPE', K_LOG).ok or 'none'
        if actual ~= 'none' and actual ~= 'stream' then
            return nil, {'wrongtype', K_LOG, actual, 'stream'}
        end
    end
    loaded_state = {raw_limit = got[1], limit = tonumber(got[1]), fence = got[2],
                    keep = tonumber(got[3]) or 0, loss_grace = tonumber(got[4]),
                    due = tonumber(got[5]) or 0, history = tonumber(got[6]) or DEFAULT_HISTORY,
                    acquired_total = tonumber(got[7]) or 0}
    return loaded_state
end

-- Server time in milliseconds; also remembers it in microseconds for next_fence(). (Both
-- stay below 2^53, so Lua's doubles hold them exactly.)
local now_us
local function server_now()
    local t = redis.call('TIME')
    now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The next fencing token: one more than the last, and never below the server clock in
-- microseconds. So fences keep increasing when the semaphore's keys expired in between, and
-- when Redis lost them (a restart from an older snapshot): a fence handed out before the
-- loss was at most the server clock then, plus the grants of that one script.
local function next_fence(state)
    local fence = math.max((tonumber(state.fence) or 0) + 1, now_us)
    state.fence = fence
    if state.history > 0 and state.raw_limit then
        -- Counted with the fence: no call of its own (see log_event()).
        state.acquired_total = state.acquired_total + 1
        redis.call('HSET', K_STATE, 'fence', int_str(fence), 'acquired_total', state.acquired_total)
    else
        redis.call('HSET', K_STATE, 'fence', int_str(fence))
    end
    return fence
end

-- Makes sure every key outlives `deadline` by KEEP_MIN_MS. Cheap when nothing is due.
local function touch(state, deadline)
    if deadline + KEEP_MIN_MS <= state.keep then
        return
    end
    state.keep = deadline + KEEP_STEP_MS
    redis.call('HSET', K_STATE, 'keep', int_str(state.keep))
    for i = 1, SEMAPHORE_KEYS do
        redis.call('PEXPIREAT', KEYS[i], int_str(state.keep))
    end
    if K_LOG and redis.call('TYPE', K_LOG).ok == 'stream' then -- (never a foreign key)
        redis.call('PEXPIREAT', K_LOG, int_str(state.keep))
    end
    if OWN_EPOCH then
        redis.call('PEXPIREAT', K_EPOCH, int_str(state.keep))
    end
end

-- Records that an entry of the holders or alive set now runs out at `deadline`: the state's
-- `due` is a time before which no entry of those sets runs out (0 when unknown), so prune()
-- need not look before it.
-- Every ZADD to those sets goes with a call to this.
-- (Stored only in a state hash that has a limit: a hash created here would have no expiry.)
local function note_deadline(state, deadline)
    if deadline < state.due then
        state.due = deadline
        if state.raw_limit then
            redis.call('HSET', K_STATE, 'due', int_str(deadline))
        end
    end
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

-- Admission after a possible loss of data. Returns the server time before which nobody new
-- may take a slot, for a caller whose loss grace is `grace` ms; 0 when admission is open.
-- The epoch key is read once per script, only on paths that admit someone.
local lost_at
local function admission_opens(state, now, grace)
    if not lost_at then
        local epoch = redis.call('HMGET', K_EPOCH, 'run', 'lost_at', 'checked_at', 'node')
        local since_check = now - (tonumber(epoch[3]) or 0)
        if epoch[1] and not SENT_BY_EVAL and since_check >= 0 and since_check < IDENTITY_CHECK_MS then
            lost_at = tonumber(epoch[2]) or 0
            return admission_opens(state, now, grace)
        end
        local server = redis.call('INFO', 'server')
        -- (A server that does not report these is taken as one process that never restarted.)
        local run_id = string.match(server, 'run_id:(%x+)') or 'unknown'
        local uptime_ms = (tonumber(string.match(server, 'uptime_in_seconds:(%d+)')) or 0) * 1000
        if epoch[1] == run_id then
            lost_at = tonumber(epoch[2]) or 0
            redis.call('HSET', K_EPOCH, 'checked_at', int_str(now))
        else
            -- Written by another Redis process: this one restarted (from an older snapshot,
            -- perhaps), or is a replica promoted by a failover, which lost what it had not
            -- received by now, however long it has run. Missing: a server that started less
            -- than the default grace ago lost its data at its start (no persistence); one that
            -- has run longer was never used by redsem (or this prefix). (A FLUSHALL is not
            -- noticed on such a server: do not flush a live Redis.) uptime_in_seconds is the
            -- difference of two whole-second clocks, so the server started up to 1s later
            -- than now - uptime: take the latest possible start.
            local myself = OWN_EPOCH and redis.call('CLUSTER', 'MYID') or nil
            if OWN_EPOCH and epoch[1] and came_by_migration(epoch[4], myself) then
                lost_at = tonumber(epoch[2]) or 0
            elseif epoch[1] then
                lost_at = now
            elseif uptime_ms < DEFAULT_LOSS_GRACE_MS then
                lost_at = math.min(now, now - uptime_ms + 1000)
            else
                lost_at = 0
            end
            redis.call('HSET', K_EPOCH, 'run', run_id, 'lost_at', int_str(lost_at), 'checked_at',
                       int_str(now))
            if OWN_EPOCH then
                redis.call('HSET', K_EPOCH, 'node', myself)
                -- Outlives the semaphore's keys, and the loss grace (gc leaves it).
                redis.call('PEXPIREAT', K_EPOCH, int_str(math.max(state.keep, now + KEEP_STEP_MS)))
            end
        end
    end
    if lost_at > 0 and now < lost_at + grace then
        return lost_at + grace
    end
    return 0
end

-- The loss grace for admitting a holder whose lease ttl is `ttl`.
local function loss_grace(state, ttl)
    return state.loss_grace or math.max(ttl, DEFAULT_LOSS_GRACE_MS)
end

-- Gives a key created after the last touch() the same expiry as the others.
local function expire_new(state, key)
    if state.keep > 0 then
        redis.call('PEXPIREAT', key, int_str(state.keep))
    end
end

-- Stores a setting the caller gave (loss_grace, history) in the state hash. A state hash made
-- here, before the semaphore's first touch() (or while it refuses a caller, its state lost),
-- expires after KEEP_MIN_MS unless touch() moves it on.
local function store_setting(state, field, value)
    redis.call('HSET', K_STATE, field, value)
    if state.keep == 0 then
        redis.call('PEXPIRE', K_STATE, KEEP_MIN_MS)
    end
end

local function parse_info(raw)
    if not raw then
        return nil
    end
    local kind, slot, fence, since, ttl, json = string.match(raw, '^(%a) (%S+) (%S+) (%S+) (%S+) (.*)$')
    if not kind then
        return nil
    end
    return {kind = kind, slot = tonumber(slot), fence = fence, since = tonumber(since),
            ttl = tonumber(ttl), json = json}
end

local function holder_info(slot, fence, now, ttl, json)
    return 'h ' .. slot .. ' ' .. int_str(fence) .. ' ' .. int_str(now) .. ' ' .. ttl .. ' ' .. json
end

-- History: the events of one script call are one stream entry (ID: the server time, in ms),
-- written at its end by finish(); each event is one field of it, the event's kind, whose value
-- is "TOKEN SLOT FENCE DURATION_MS JSON" ('-' where a part does not apply; JSON: the holder's
-- or waiter's metadata), or for 'limit', "FROM TO". One XADD per call, not one per event or
-- per part: a release and the hand-over it makes cost one (see the README for what it costs).
-- Kinds: acquired (directly, or by hand-over; DURATION: how long it waited), queued,
-- released (DURATION: how long it held the slot), expired (a lease ran out by the server's
-- clock; DURATION: from the grant to the deadline), unclaimed (a hand-over nobody collected
-- in time), lost (a renewal found no lease), left (a waiter left the queue: released, by a
-- signal or at the end of --wait; DURATION: how long it waited), dropped (a waiter stopped
-- refreshing its place), gc (removed by redsem gc) and limit.
-- The stream keeps the latest `history` entries, and is created only for a semaphore that has
-- a state, with the same expiry as its other keys (see touch()). A key of another type in
-- its place stops a new semaphore (load_state(), as for its other keys); appearing later, it
-- only stops the history: writing history never fails a script that changed something. Grants are counted in the state's acquired_total with the fence (see
-- next_fence()), expiries and losses here.
local pending_events = {}
local log_state, log_now
local function log_event(state, now, event, value)
    if not K_LOG or state.history <= 0 then
        return
    end
    pending_events[#pending_events + 1] = event
    pending_events[#pending_events + 1] = value
    log_state, log_now = state, now
    local counter = COUNTERS[event]
    if counter and state.raw_limit then
        redis.pcall('HINCRBY', K_STATE, counter, 1) -- (a field edited by hand stays as it is)
    end
end

-- Every script ends here: the build wraps each one's body as `return finish(body())`. Writes
-- the events the call logged, and returns its reply.
-- A script sent with EVAL checks the server's identity even when it admitted nobody: it may be
-- the first script this server process runs (after a restart from an older snapshot), and the
-- scripts after it, sent with EVALSHA, trust an epoch checked less than IDENTITY_CHECK_MS ago.
-- (Not in a script that only reads: it sets read_only.)
local read_only = false
local function finish(reply)
    if SENT_BY_EVAL and not lost_at and loaded_state and not read_only then
        admission_opens(loaded_state, server_now(), 0)
    end
    if #pending_events == 0 then
        return reply
    end
    local state, cap = log_state, log_state.history
    local id
    if cap < EXACT_TRIM_BELOW then
        id = redis.pcall('XADD', K_LOG, 'NOMKSTREAM', 'MAXLEN', cap, '*', unpack(pending_events))
    else
        -- Trimming a block at a time can only drop whole blocks of 100 entries: it is asked
        -- for on about one call in TRIM_EVERY (by the entry's millisecond), which saves a
        -- fifth of an XADD's cost on the others.
        id = redis.pcall('XADD', K_LOG, 'NOMKSTREAM', '*', unpack(pending_events))
        if type(id) == 'string' and tonumber(string.match(id, '^%d+')) % TRIM_EVERY == 0 then
            redis.pcall('XTRIM', K_LOG, 'MAXLEN', '~', cap)
        end
    end
    if id == false and state.raw_limit then
        redis.pcall('XADD', K_LOG, 'MAXLEN', cap, '*', unpack(pending_events))
        redis.call('PEXPIREAT', K_LOG, int_str(state.keep > log_now and state.keep or log_now + KEEP_STEP_MS))
    end
    return reply
end

-- Logs `event` for `token`, whose record is `info` (parse_info(); nil when unknown), with
-- `duration` in ms (nil: none).
local function log_entry(state, now, event, token, info, duration)
    local slot, fence, json = '-', '-', '{}'
    if info then
        json = info.json
        if info.kind == 'h' then
            slot, fence = info.slot or '-', info.fence or '-'
        end
    end
    log_event(state, now, event, token .. ' ' .. slot .. ' ' .. fence .. ' ' ..
              (duration and int_str(math.max(duration, 0)) or '-') .. ' ' .. json)
end

local function log_grant(state, now, token, slot, fence, waited, json)
    if state.history > 0 then
        log_event(state, now, 'acquired', token .. ' ' .. slot .. ' ' .. int_str(fence) .. ' ' ..
                  int_str(waited) .. ' ' .. json)
    end
end

local function log_limit(state, now, from, to)
    log_event(state, now, 'limit', (from and tostring(from) or '-') .. ' ' .. tostring(to))
end

-- The queue moved up (a waiter near the head left it): the waiter that moved up to the last
-- place near the head (position limit + NEAR_HEAD - 1) may have last refreshed its place far
-- back, and so sleep long (see acquire.lua). Its nudge list ("<wake list>:nudge", which it
-- watches with its wake list) gets the time until `due`, when a lease may run out: it looks
-- again then, or within the head's refresh interval. (A waiter of an older redsem does not
-- watch it; it refreshes often anyway, and the list expires.)
local function nudge_near_head_entrant(state, now)
    local limit = state.limit or 0
    if limit < 1 or ASKED then
        return
    end
    local last_near = limit + NEAR_HEAD - 1
    local entrant = redis.call('ZRANGE', K_QUEUE, last_near, last_near)[1]
    if entrant then
        local nudge = WAKE_PREFIX .. entrant .. ':nudge'
        local due_in = state.due < NOTHING_DUE and int_str(math.max(state.due - now, 0)) or '-1'
        redis.call('RPUSH', nudge, due_in)
        redis.call('PEXPIRE', nudge, NUDGE_KEEP_MS)
    end
end

local function remove_waiter(state, token, now)
    local position = redis.call('ZRANK', K_QUEUE, token)
    redis.call('ZREM', K_QUEUE, token)
    redis.call('ZREM', K_ALIVE, token)
    redis.call('HDEL', K_INFO, token)
    del_keys(WAKE_PREFIX .. token, WAKE_PREFIX .. token .. ':nudge')
    if position and position < (state.limit or 0) + NEAR_HEAD then
        nudge_near_head_entrant(state, now)
    end
end

-- Gives free slot `slot` to the head of the queue; its bit is set here unless `bit_set` says
-- it still is (a holder's slot passed straight on). The new holder learns of it from its wake
-- list ("FENCE SLOT DEADLINE NOW LIMIT"), and must collect it within CLAIM_MS; the list lives
-- as long as the lease, so prune() can always tell a grant nobody collected.
-- Returns false, leaving the slot free, when nobody waits, or while admission is closed after
-- a loss of data (the head of the queue takes the slot when it next refreshes its place after
-- admission opens).
local function hand_over(state, slot, now, bit_set)
    while true do
        local head = redis.call('ZPOPMIN', K_QUEUE)
        local token = head[1]
        if not token then
            return false
        end
        local waiter = parse_info(redis.call('HGET', K_INFO, token))
        if waiter and waiter.kind == 'w' and admission_opens(state, now, loss_grace(state, waiter.ttl)) > 0 then
            redis.call('ZADD', K_QUEUE, head[2], token) -- back in its place
            return false
        end
        if waiter and waiter.kind == 'w' then
            local fence = next_fence(state)
            local deadline = now + waiter.ttl
            if not bit_set then
                redis.call('SETBIT', K_SLOTS, slot, 1)
            end
            redis.call('ZADD', K_HOLDERS, deadline, token)
            redis.call('HSET', K_INFO, token, holder_info(slot, fence, now, waiter.ttl, waiter.json))
            redis.call('ZADD', K_ALIVE, now + CLAIM_MS, token)
            note_deadline(state, math.min(deadline, now + CLAIM_MS))
            local wake = WAKE_PREFIX .. token
            redis.call('RPUSH', wake, int_str(fence) .. ' ' .. slot .. ' ' .. int_str(deadline) .. ' ' .. int_str(now) .. ' ' .. state.limit)
            redis.call('PEXPIREAT', wake, int_str(math.max(deadline, now + CLAIM_MS)))
            touch(state, deadline)
            nudge_near_head_entrant(state, now)
            log_grant(state, now, token, slot, fence, now - (waiter.since or now), waiter.json)
            return true
        end
        -- A queue entry without waiter metadata (changed by hand): drop it, try the next.
        remove_waiter(state, token, now)
    end
end

-- Hands free slots to the queue, lowest first, while fewer than the limit hold one. `held`
-- counts the holders that stay. Every slot given is below the limit: with fewer holders than
-- the limit, one of the slots 0..limit-1 is free.
local function fill_free_slots(state, held, now)
    local limit = state.limit or 0
    while held < limit do
        local slot = redis.call('BITPOS', K_SLOTS, 0)
        if slot >= limit or not hand_over(state, slot, now) then
            return
        end
        held = held + 1
    end
end

-- Removes holder `token`, passing a slot on when the limit allows (after a lower limit, not
-- before fewer than the limit hold). Returns true when it was a holder. Its wake list and
-- claim deadline go too: a hand-over it never collected must not be read later as a new
-- grant, nor reported as a waiter. The new holder is written before the old one leaves, so
-- the holders key never empties (and never loses its expiry) on a hand-over. `in_holders`
-- says whether the token is in the holders set, when the caller knows (nil: look it up).
local function remove_holder(state, token, info, now, in_holders)
    info = info or parse_info(redis.call('HGET', K_INFO, token))
    if info and info.kind == 'h' and info.slot then
        local limit = state.limit or 0
        local others = redis.call('ZCARD', K_HOLDERS)
        if in_holders == nil then
            in_holders = redis.call('ZSCORE', K_HOLDERS, token) ~= false
        end
        if in_holders then
            others = others - 1
        end
        -- The slot goes straight to the head of the queue when the limit allows (the hot
        -- path: its bit stays set); otherwise it is freed, and the lowest free ones filled.
        if info.slot < limit and others < limit and hand_over(state, info.slot, now, true) then
            fill_free_slots(state, others + 1, now)
        else
            redis.call('SETBIT', K_SLOTS, info.slot, 0)
            if others < limit and redis.call('ZCARD', K_QUEUE) > 0 then
                fill_free_slots(state, others, now)
            end
        end
    end
    redis.call('HDEL', K_INFO, token)
    del_keys(WAKE_PREFIX .. token, WAKE_PREFIX .. token .. ':nudge')
    redis.call('ZREM', K_ALIVE, token)
    return redis.call('ZREM', K_HOLDERS, token) == 1
end

-- Settles the entries of the alive set whose time ran out; `lapsed` lists them as {token,
-- deadline, token, deadline, ...} (ZRANGE WITHSCORES). A token that holds no slot is a waiter
-- that stopped refreshing: it leaves the queue. One that holds a slot was handed it: while its
-- wake list is there nobody collected the grant (the waiter died) and the slot goes on;
-- otherwise only the claim entry goes. Dead waiters go first, so that no slot is handed to one
-- of them. Calls visit(kind, token, deadline) for each, kind 'waiter', 'handover' or
-- 'collected', before acting on it; with `act` false changes nothing (gc's dry run).
local function settle_lapsed(state, lapsed, now, act, visit)
    local handovers = {}
    for i = 1, #lapsed, 2 do
        local token, deadline = lapsed[i], tonumber(lapsed[i + 1])
        if redis.call('ZSCORE', K_HOLDERS, token) then
            handovers[#handovers + 1] = {token, deadline}
        else
            visit('waiter', token, deadline)
            if act then
                remove_waiter(state, token, now)
            end
        end
    end
    for _, entry in ipairs(handovers) do
        local token, deadline = entry[1], entry[2]
        -- Collected when its wake list is gone (the list lives as long as the lease).
        if redis.call('EXISTS', WAKE_PREFIX .. token) == 1 then
            visit('handover', token, deadline)
            if act then
                remove_holder(state, token, nil, now)
            end
        else
            visit('collected', token, deadline)
            if act then
                redis.call('ZREM', K_ALIVE, token)
            end
        end
    end
end

-- settle_lapsed()'s visit for prune(): logs the dead waiters and the uncollected hand-overs.
local function log_lapsed(state, now)
    return function(kind, token, deadline)
        if state.history <= 0 or kind == 'collected' then
            return
        end
        local info = parse_info(redis.call('HGET', K_INFO, token))
        -- (An unclaimed slot was never held: no duration.)
        log_entry(state, now, kind == 'waiter' and 'dropped' or 'unclaimed', token, info,
                  kind == 'waiter' and info and info.since and deadline - info.since or nil)
    end
end

-- Removes holder `token`, whose lease ran out at `deadline` (server ms), logging it as expired;
-- its slot goes on as remove_holder() hands it.
local function expire_holder(state, token, deadline, now)
    local info = parse_info(redis.call('HGET', K_INFO, token))
    if state.history > 0 then
        log_entry(state, now, 'expired', token, info, info and info.since and deadline - info.since)
    end
    return remove_holder(state, token, info, now, true)
end

-- The earliest deadline in the holders and alive sets, NOTHING_DUE when both are empty.
local function earliest_deadline()
    local due = NOTHING_DUE
    for _, key in ipairs({K_ALIVE, K_HOLDERS}) do
        local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
        if first[2] then
            due = math.min(due, tonumber(first[2]))
        end
    end
    return due
end

-- Drops waiters that stopped refreshing, hand-overs nobody collected, and holders whose lease
-- has run out; their slots go to the queue. At most PRUNE_BATCH of each per call, so that no
-- script runs long; the rest go on the next call. Nothing is looked at before the state's
-- `due` (most calls), and `due` moves to the earliest deadline left after a complete pass.
-- (An older redsem's scripts do not keep `due`: while they share a semaphore with this one,
-- a lease they grant that runs out before `due` is pruned at `due`, late but never early.)
local function prune(state, now)
    if now < state.due then
        return
    end
    local lapsed = redis.call('ZRANGEBYSCORE', K_ALIVE, '-inf', now, 'WITHSCORES', 'LIMIT', 0,
                              PRUNE_BATCH)
    settle_lapsed(state, lapsed, now, true, log_lapsed(state, now))
    local expired = redis.call('ZRANGEBYSCORE', K_HOLDERS, '-inf', now, 'WITHSCORES', 'LIMIT', 0,
                               PRUNE_BATCH)
    for i = 1, #expired, 2 do
        expire_holder(state, expired[i], tonumber(expired[i + 1]), now)
    end
    if #expired > 0 or #lapsed > 0 then
        -- Hand-overs may have re-created keys; give them the common expiry.
        expire_new(state, K_HOLDERS)
        expire_new(state, K_INFO)
    end
    if #lapsed < PRUNE_BATCH * 2 and #expired < PRUNE_BATCH * 2 then
        state.due = earliest_deadline()
        if state.raw_limit then
            redis.call('HSET', K_STATE, 'due', int_str(state.due))
        end
    end
end

-- Before anything is written: can this node serve the keys built here? (See "Cluster slot
-- migrations" above; on a server that is not a cluster this never fails, and is skipped when
-- the keys show that it is not one.)
if not NOT_A_CLUSTER then
    local probe = redis.pcall('EXISTS', WAKE_PREFIX)
    if type(probe) == 'table' and probe.err then
        return redis.error_reply('TRYAGAIN the slot of ' .. K_STATE .. ' is migrating (' .. probe.err .. ')')
    end
end
