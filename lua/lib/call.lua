-- lib/call.lua: the context of one script call, which every function of lua/lib/ that needs
-- it takes as its first argument (`call`), and the KEYS and ARGV every script shares.
-- Provides: new_call(keys, argv, args), named_args(argv, params, script), int_str(n),
-- SEMAPHORE_KEYS.
--
-- Each module and script names the modules of lua/lib/ it needs (`--- @include "NAME"`); the
-- build puts them ahead of it, each after those it needs, and refuses a cycle
-- (cmake/embed_lua.cmake). The modules hold functions and constants only: whatever a call reads
-- or learns as it runs (its keys and flags, the server clock, the epoch, the events to log)
-- lives in the table new_call() makes, and passes as an argument. So no flag one script sets
-- can change what a shared function does in another, and the modules are also one Redis
-- Functions library, loaded once and shared by all calls (cmake/embed_lua.cmake). The one
-- exception is what the server process tells of itself: its run_id, which no call can change,
-- and a sparing eviction policy, trusted for a second (PROCESS, see epoch.lua). main.lua runs
-- each script's body (see run()).
--
-- KEYS, the same for every script; all share the hash tag {name}, so a script stays on one
-- Redis Cluster slot:
--   KEYS[1] state    hash    limit, limit_by ('operator' or 'caller', see limit.lua), format
--                            (STATE_FORMAT, see load_state()), fence, ticket, keep, or while
--                            pinned horizon, and pinned (see touch(), settle_expiry()), due (see prune()), history,
--                            counters (see state.lua, history.lua), closed_logged (see
--                            epoch.lua), extra_slots, exclusive and weighted (holders of
--                            several slots: see used_slots(), WEIGHTED_SUFFIX), kept and
--                            pause_kept (see keep_state()), paused, paused_since and
--                            paused_until (see lib/pause.lua), occurrence (run --once-per:
--                            see lib/occurrence.lua), superseder (the superseding waiter
--                            that queued last: lib/supersede.lua); redsem 0.1 also stored a loss_grace,
--                            which nothing here reads
--   KEYS[2] holders  zset    token -> lease deadline (server ms)
--   KEYS[3] info     hash    token -> "h SLOTS FENCE ACQUIRED_MS TTL_MS JSON" for a holder
--                            (SLOTS: "3", or "0,3,4" for a holder of several: --slots),
--                            "w WANTS GRACE SINCE_MS TTL_MS JSON" for a waiter (WANTS: '-' for
--                            one slot, a count, or 'x' for all of them: --exclusive; GRACE: the
--                            loss grace in ms it asked for itself, '-' for none; JSON: the
--                            client's metadata, host, pid, pid_of, user, label, ci, and the
--                            fields acquire.lua adds, keeper, collects, once_per, at_most_once,
--                            attempts); tests/fixtures/records.txt has every kind, which both
--                            readers are held to
--   KEYS[4] queue    zset    waiter token -> ticket (arrival order, assigned here)
--   KEYS[5] alive    zset    token -> deadline: a waiter's liveness, or for a slot handed to a
--                            waiter, the time by which it must have collected the grant
--   KEYS[6] slots    string  bitmap, bit N set while slot N is held
--   KEYS[7] epoch    hash    run and replid (the run_id and master_replid of the Redis
--                            process that wrote it), cache_marker (written by a call without
--                            INFO) and proof (a nonce, for one transaction: see epoch.lua),
--                            lost_at (server ms of the latest possible loss of data, 0: none),
--                            cause ('start', 'change', 'unproven', 'evicted' or 'declared',
--                            see epoch.lua), evicted and config_sets (the eviction counters
--                            last seen, see eviction_since()) and checked_at (when it was
--                            written; redsem 0.1 reads it). On one server
--                            "<prefix>:epoch", one per prefix and database, never expires; on a
--                            Redis Cluster, where a script's keys must share a slot, the
--                            semaphore's own "<prefix>:{name}:epoch", which expires with it,
--                            and also names the cluster node (node: its CLUSTER MYID), so that
--                            keys that came by a slot migration are told from a failover
--                            (see epoch.lua).
--   KEYS[8] log      stream  the semaphore's history (see history.lua)
-- ARGV, the same for every script at both ends (Keys::script_args() builds the first two):
--   ARGV[1]  the name prefix of the per-waiter wake lists, "<prefix>:{name}:wake:"
--   ARGV[2]  '' or, for a call that proves the epoch marker without INFO (see epoch.lua),
--            "EXPECTED NONCE NEW": the marker the client expects the epoch key to hold ('-':
--            none), the nonce the marker's script wrote to the epoch's field proof just
--            before, in the same transaction, and the fresh marker the call declares ('-':
--            none; its script is the one that ran)
--   ARGV[3..] the script's own arguments as names and values, each name one its `--- @args`
--            line declares (see its header), and last "flags" and the flags the client
--            library adds (Connection::eval), a sum of: 1 when it was sent with EVAL (its
--            text, not its SHA1); 2 when it was sent to a Cluster node after ASKING (the node
--            is importing the slot: see cluster.lua); 4 when its keys hash to several Cluster
--            slots (a Cluster refuses such a script, so this server is not one). The body
--            reads them by name (`args.NAME`); the build's reader takes them in the declared
--            order, and named_args() in any other (cmake/embed_lua.cmake).
-- Wake lists are the one kind of key built here rather than passed in; they carry the same
-- hash tag, so they live on the same Cluster slot.
--
-- Invariants: time is the server's (TIME), never a client's, and a lease is valid while
-- now < deadline. While anybody is queued and admission is open, fewer slots are free than
-- the head of the queue asks for (one, or K with --slots): a freed slot goes straight to a
-- head that asks for one (hand_over()), or the slots wait until the head's K are free, so
-- FIFO needs no wake-and-race and nobody passes a heavy request.
-- Fences only grow, also across a restart that lost data: each is at least the server clock
-- in microseconds at its grant (next_fence()).
--
-- Every redis.call costs microseconds, and these scripts run on every acquire and release:
-- the hot paths keep the number of calls small on purpose. So does each call's start: sent by
-- EVAL, every function of these modules is created anew on each call (EVAL runs the whole
-- text), and Lua pays for each local a function captures; the call table keeps those few. As
-- a function (FCALL), the library's functions are created once, when it is loaded.

local SEMAPHORE_KEYS = 6 -- KEYS[1..6] belong to the semaphore; the epoch key may be shared

-- Integers above 1e14 lose digits in tostring(); format them exactly.
local function int_str(n)
    return string.format('%.0f', n)
end

-- The arguments of a call of `script` whose ARGV is `argv` (see above) as the script's body
-- reads them: ARGV as it would be with the names in the order of `params` (the names the
-- script declares, and flags last), each given once in `argv` in any order. Returns nil and an
-- error reply when a name is unknown, repeated or missing, before anything is read or written:
-- the caller and the script disagree (another release's client, or a hand-made call).
local function named_args(argv, params, script)
    local function wrongly(what)
        return nil, redis.error_reply('ERR redsem script called wrongly: ' .. script .. ': ' .. what)
    end
    if #argv % 2 ~= 0 then
        return wrongly('its arguments are not names and values')
    end
    local given = {}
    for _, name in ipairs(params) do
        given[name] = false
    end
    for at = 3, #argv, 2 do
        local name = argv[at]
        if given[name] == nil then
            return wrongly("no argument is named '" .. name .. "'")
        end
        if given[name] then
            return wrongly("the argument '" .. name .. "' is given twice")
        end
        given[name] = argv[at + 1]
    end
    local args = {argv[1], argv[2]}
    for i, name in ipairs(params) do
        if not given[name] then
            return wrongly("the argument '" .. name .. "' is missing")
        end
        args[2 * i + 1], args[2 * i + 2] = name, given[name]
    end
    return args
end

-- The context of one script call with `keys` and `argv` (KEYS and ARGV), whose arguments are
-- `args` (named_args()'s order: flags last).
local function new_call(keys, argv, args)
    local expected, nonce, new = string.match(argv[2], '^(%S+) (%S+) (%S+)$')
    local flags = tonumber(args[#args]) or 0
    local marker = nil
    if nonce then
        marker = {expected = expected == '-' and '' or expected, nonce = nonce,
                  new = new ~= '-' and new or nil}
    end
    local k_state, k_epoch = keys[1], keys[7]
    return {
        keys = keys,
        k_state = k_state, k_holders = keys[2], k_info = keys[3], k_queue = keys[4],
        k_alive = keys[5], k_slots = keys[6], k_epoch = k_epoch, k_log = keys[8],
        -- "<prefix>:{name}:state" -> "<prefix>:{name}:epoch": the semaphore's own (on a Cluster).
        own_epoch = k_epoch == string.sub(k_state, 1, -6) .. 'epoch',
        wake_prefix = argv[1],
        asked = math.floor(flags / 2) % 2 == 1,
        not_a_cluster = flags >= 4,
        marker = marker,  -- the epoch marker this call proves or declares (epoch.lua), or nil
        -- Learnt as the call runs (nil until then):
        state = nil,      -- the semaphore's state as load_state() read it (state.lua)
        occupies = false, -- the call added a holder or waiter that stays (see lifetime.lua)
        now_us = nil,     -- the server clock in microseconds at the last server_now() (state.lua)
        me = nil,         -- this server process, as identify() names it (epoch.lua)
        epoch = nil,      -- the epoch, once read and checked: {lost_at, cause} (epoch.lua)
        skipped = {},     -- waiters a hand-over passed over: token -> the claim (skip_waiter())
        events = {},      -- the history events logged so far, written at the end (history.lua)
        log_now = nil     -- the server time they were logged at (history.lua)
    }
end
