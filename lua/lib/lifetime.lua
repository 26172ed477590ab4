-- lib/lifetime.lua: how long the semaphore's keys live: an expiry while nobody holds or
-- waits, none (pinned) while anybody does, and the lower bound of the leases' deadlines.
-- Provides: touch(call, state, deadline), settle_expiry(call, state), unpin_keys(call, state),
--   keep_state(call, state, by_pause), stop_keeping_state(call, state),
--   note_deadline(call, state, deadline), expire_new(call, state, key),
--   store_setting(call, state, field, value), and the constants KEEP_MIN_MS, KEEP_STEP_MS.
-- Uses the protocol's PAUSE_MARK.
--- @include "call"
--- @include "state"

-- Keys outlive the last lease or waiter by at least KEEP_MIN_MS, so an abandoned semaphore
-- disappears by itself; touch() moves the horizon forward in steps of KEEP_STEP_MS. While
-- anybody holds or waits, the keys have no expiry at all (settle_expiry()): a Redis that
-- evicts only keys with one (maxmemory-policy volatile-*, the default of managed services)
-- then cannot evict a semaphore in use, which would let a second holder in.
local KEEP_MIN_MS = 12 * 3600 * 1000
local KEEP_STEP_MS = 24 * 3600 * 1000

-- The semaphore's keys that expire together: its own six, its history (when it is one: never
-- a foreign key), and on a Redis Cluster its own epoch key. Settings an operator stored
-- (`redsem limit`: the state's field kept is '1') never expire: the state hash, and the epoch
-- key that vouches for it, stay until the operator unsets them (see limit.lua); nor does the
-- queue, with the pause's mark, while paused (see PAUSE_MARK).
local function expiring_keys(call, state)
    local keys = {}
    for i = state.kept and 2 or 1, SEMAPHORE_KEYS do
        if i ~= 4 or not state.paused then
            keys[#keys + 1] = call.keys[i]
        end
    end
    if call.k_log and redis.call('TYPE', call.k_log).ok == 'stream' then
        keys[#keys + 1] = call.k_log
    end
    if call.own_epoch and not state.kept then
        keys[#keys + 1] = call.k_epoch
    end
    return keys
end

-- Whether the keys have no expiry at the end of this call: they are pinned now, or the call
-- added a holder or waiter (call.occupies), and settle_expiry() pins them then. An expiry set
-- before that would only be taken away again.
local function pinned_at_end(call, state)
    return state.pinned or call.occupies
end

-- Makes sure every key outlives `deadline` by KEEP_MIN_MS. Cheap when nothing is due. (While
-- the keys are pinned, only the horizon moves: settle_expiry() applies it when they are not.)
local function touch(call, state, deadline)
    if deadline + KEEP_MIN_MS <= state.keep then
        return
    end
    state.keep = deadline + KEEP_STEP_MS
    local keep = int_str(state.keep)
    if pinned_at_end(call, state) then
        redis.call('HSET', call.k_state, 'horizon', keep) -- (see settle_expiry())
        return
    end
    redis.call('HSET', call.k_state, 'keep', keep)
    for _, key in ipairs(expiring_keys(call, state)) do
        redis.call('PEXPIREAT', key, keep)
    end
end

-- Gives the pinned keys (see settle_expiry()) their expiry again: the horizon, at least
-- KEEP_MIN_MS from now.
local function unpin_keys(call, state)
    state.pinned = false
    redis.call('HDEL', call.k_state, 'pinned', 'horizon')
    local now = call.now_us and math.floor(call.now_us / 1000) or server_now(call)
    state.keep = math.max(state.keep, now + KEEP_MIN_MS)
    state.keep_stored = true
    local keep = int_str(state.keep)
    redis.call('HSET', call.k_state, 'keep', keep)
    for _, key in ipairs(expiring_keys(call, state)) do
        redis.call('PEXPIREAT', key, keep)
    end
    if state.paused and state.pause_kept and state.paused_until > 0 then
        -- Kept for a pause with an end alone, until KEEP_MIN_MS after it (see start_pause()).
        local ends = int_str(state.paused_until + KEEP_MIN_MS)
        redis.call('PEXPIREAT', call.k_state, ends)
        redis.call('PEXPIREAT', call.k_queue, ends)
    end
end

-- Keeps the state hash (and on a Cluster the epoch key that vouches for it) with no expiry:
-- for an operator's settings (`redsem limit`), or, `by_pause`, only while a pause lasts (field
-- pause_kept; see lib/pause.lua). gc leaves a kept state hash (see expiring_keys()).
local function keep_state(call, state, by_pause)
    if state.kept then
        if state.pause_kept and not by_pause then
            redis.call('HDEL', call.k_state, 'pause_kept') -- the operator's now: it stays
            state.pause_kept = false
        end
        return
    end
    redis.call('HSET', call.k_state, 'kept', '1')
    if by_pause then
        redis.call('HSET', call.k_state, 'pause_kept', '1')
    end
    redis.call('PERSIST', call.k_state)
    if call.own_epoch then
        redis.pcall('PERSIST', call.k_epoch)
    end
    state.kept, state.pause_kept = true, by_pause
end

-- Gives up keeping the state hash (see keep_state()): the keys expire again at the horizon once
-- nobody holds or waits (settle_expiry() pins them again at the call's end while somebody does).
local function stop_keeping_state(call, state)
    redis.call('HDEL', call.k_state, 'kept', 'pause_kept')
    state.kept, state.pause_kept = false, false
    unpin_keys(call, state)
end

-- Whether the occurrence's claim (run --once-per) has not ended yet by the server's clock. The
-- claim lives in the state hash: while it is in force the keys stay pinned as for a holder,
-- done or running, so that no policy evicts a done claim of an idle semaphore (the next host
-- would run the occurrence again). The first call after the claim ends gives the keys their
-- expiry back (gc too: it deletes the idle keys then).
local function claim_in_force(call, state)
    local till = claim_until(state)
    if not till then
        return false
    end
    local now = call.now_us and math.floor(call.now_us / 1000) or server_now(call)
    return now < till
end

-- At the end of a call: while anybody holds or waits, or an occurrence's claim is in force
-- (claim_in_force()), the keys have no expiry (pinned: the state's field pinned is '1'); once
-- not, they expire at the horizon again. Once nobody holds or waits, a weighted semaphore is
-- plain again (see WEIGHTED_SUFFIX). An older redsem's touch() sets an
-- expiry without knowing of pins: a pinned state with one is pinned anew. Costs one ZCARD on
-- most calls (none after a call that added a holder or waiter), two when nobody holds, and
-- while pinned one PTTL.
local function settle_expiry(call, state)
    if not state.raw_limit then
        return -- no semaphore here (refused, or only read)
    end
    remark_limit(call, state)
    if state.paused and not redis.call('ZSCORE', call.k_queue, PAUSE_MARK) then
        -- An older redsem drops it: once its `limit` writes a plain number, it hands the mark
        -- a slot, finds no record, and removes it as a queue entry edited by hand.
        redis.call('ZADD', call.k_queue, PAUSE_MARK_TICKET, PAUSE_MARK)
    end
    local occupied = call.occupies or redis.call('ZCARD', call.k_holders) > 0 or
                     queue_length(call, state) > 0
    if not occupied and state.weighted then
        -- Idle: nobody holds several slots any more; an older redsem may share it again.
        state.weighted, state.extra, state.exclusive = false, 0, nil
        redis.call('HDEL', call.k_state, 'weighted', 'extra_slots', 'exclusive')
        if state.limit then
            store_limit(call, state, state.limit, state.limit_by or 'caller')
        end
    end
    if occupied or claim_in_force(call, state) then
        -- Nothing of a semaphore in use may expire (see KEEP_MIN_MS). While pinned, the
        -- horizon is stored as `horizon`, not as `keep`, which redsem 0.1.0 reads: its
        -- expire_new() then gives a key it creates (its first waiter's queue, say) no expiry,
        -- and the only expiry it gives is its touch()'s, to every key, the state hash too,
        -- which is looked at here (an operator's kept state never has one: the holders tell
        -- then), with the `keep` it writes. So does a pause with --for, to the state hash and
        -- the queue (see start_pause()). Either found, every key is pinned anew.
        local probe = (state.kept and not state.pause_kept) and call.k_holders or call.k_state
        if state.pinned and not state.keep_stored and redis.call('PTTL', probe) == -1 then
            return
        end
        for _, key in ipairs(expiring_keys(call, state)) do
            redis.call('PERSIST', key)
        end
        if state.pause_kept then
            redis.call('PERSIST', call.k_state)
        end
        if state.paused then
            redis.call('PERSIST', call.k_queue)
        end
        redis.call('HSET', call.k_state, 'pinned', '1', 'horizon', int_str(state.keep))
        if state.keep_stored then
            redis.call('HDEL', call.k_state, 'keep')
            state.keep_stored = false
        end
        state.pinned = true
        return
    end
    if state.pinned then
        unpin_keys(call, state)
    end
end

-- Records that an entry of the holders or alive set now runs out at `deadline`: the state's
-- `due` is a time before which no entry of those sets runs out (0 when unknown), so prune()
-- need not look before it.
-- Every ZADD to those sets goes with a call to this.
-- (Stored only in a state hash that has a limit: a hash created here would have no expiry.)
local function note_deadline(call, state, deadline)
    if deadline < state.due then
        state.due = deadline
        if state.raw_limit then
            redis.call('HSET', call.k_state, 'due', int_str(deadline))
        end
    end
end

-- Gives a key created after the last touch() the same expiry as the others (none while they
-- are pinned, or will be at the end of the call).
local function expire_new(call, state, key)
    if state.keep > 0 and not pinned_at_end(call, state) then
        redis.call('PEXPIREAT', key, int_str(state.keep))
    end
end

-- Stores a setting the caller gave (history) in the state hash. A state hash made
-- here, before the semaphore's first touch() (or while it refuses a caller, its state lost),
-- expires after KEEP_MIN_MS unless touch() moves it on.
local function store_setting(call, state, field, value)
    redis.call('HSET', call.k_state, field, value)
    if state.keep == 0 and not state.kept then
        redis.call('PEXPIRE', call.k_state, KEEP_MIN_MS)
    end
end
