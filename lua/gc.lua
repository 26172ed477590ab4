-- gc.lua: removes what is dead from one semaphore, a bounded batch per call, and deletes its
-- keys when nothing is left. The client calls again with the returned cursor until it is done,
-- so no single call blocks Redis for long, however big the semaphore.
-- KEYS: see lib/call.lua.
-- Arguments (ARGV[1], ARGV[2] and the encoding: see lib/call.lua):
--- @args dry_run phase position budget
--   dry_run   '1' for a dry run (change nothing)
--   phase     'alive' (start), 'holders' or 'orphans'
--   position  where in the phase (a rank in the zset in a dry run, where nothing leaves it;
--             an HSCAN cursor for 'orphans')
--   budget    how many entries to examine in this call
-- Each entry removed is logged as a 'gc' event in the semaphore's history, which stays when the
-- semaphore's keys are deleted (it expires as they would have).
-- Dead: holders whose lease ran out, waiters that stopped refreshing, hand-overs nobody
-- collected, and records no holder or waiter owns (keys edited by hand). A live holder is
-- never touched, even one renewing right now: each call runs atomically, by the server's clock.
-- Reply: next_phase, next_position, deleted, holders, queued, removed (a list of entries);
--   next_phase '' when done. On the last call, deleted is 1 when the semaphore's keys were
--   deleted (never in a dry run), -1 when an operator's settings keep it (see limit.lua: only
--   its empty keys go), and holders/queued count what is there now (in a dry run the
--   caller subtracts what it would have removed). Each entry has kind, token, record and
--   dead_for_ms, with kind 'holder', 'waiter', 'handover' or 'orphan', record the raw info
--   entry ('' if none), and dead_for_ms how long ago the lease or liveness ran out (0 for
--   orphans).
--- @include "call"
--- @include "cluster"
--- @include "state"
--- @include "records"
--- @include "lifetime"
--- @include "history"
--- @include "queue"
--- @include "taken"
--- @include "expiry"
--- @include "pause"

local state, bad = load_state(call)
if not state then
    return bad
end
local dry_run = args.dry_run == '1'
if dry_run then
    call.state = nil -- changes nothing, not even the keys' expiry (finish() settles it)
end
local phase, position, budget = args.phase, args.position, tonumber(args.budget)
local now = server_now(call)
if not dry_run then
    settle_pause(call, state, now) -- a pause whose --for ran out leaves nothing to keep
end
local removed = {}

-- Reports `token` as removed (and, unless in a dry run, logs it as removed by gc, with how
-- long it held or waited until its lease or liveness ran out at `dead_since`).
local function note(kind, token, dead_since)
    local record = redis.call('HGET', call.k_info, token)
    removed[#removed + 1] = {'kind', kind, 'token', token, 'record', record or '', 'dead_for_ms',
                             dead_since and math.max(0, now - dead_since) or 0}
    budget = budget - 1
    if not dry_run and state.history > 0 then
        local info = parse_info(record)
        log_entry(call, state, now, 'gc', token, info,
                  info and info.since and dead_since and dead_since - info.since)
        if (kind == 'holder' or kind == 'handover') and state.raw_limit then
            redis.pcall('HINCRBY', call.k_state, 'expired_total', 1) -- a lease that ran out, too
        end
    end
end

-- A holder whose hand-over lapsed uncollected (settle_lapsed() in the 'alive' phase).
local function uncollected(token, claim_by)
    if not claim_by or tonumber(claim_by) > now then
        return false
    end
    local info = parse_info(redis.call('HGET', call.k_info, token))
    return not handover_collected(call, token, info and info.json)
end

-- Entries removed in this call leave the zset; in a dry run nothing leaves, so the rank
-- moves past what was examined.
local function next_offset(examined)
    return dry_run and tonumber(position) + examined or 0
end

-- Up to `count` entries of zset `key` from rank `from` on whose score is at most now, as
-- {member, score, member, score, ...}. By rank, not ZRANGEBYSCORE ... LIMIT, whose offset
-- costs as much as the entries it skips.
local function lapsed_from(key, from, count)
    local entries = redis.call('ZRANGE', key, from, from + count - 1, 'WITHSCORES')
    local lapsed = {}
    for i = 1, #entries, 2 do
        if tonumber(entries[i + 1]) > now then
            break
        end
        lapsed[#lapsed + 1] = entries[i]
        lapsed[#lapsed + 1] = entries[i + 1]
    end
    return lapsed, #lapsed < #entries
end

local function reply(next_phase, next_position, deleted)
    return {'next_phase', next_phase, 'next_position', tostring(next_position), 'deleted', deleted,
            'holders', redis.call('ZCARD', call.k_holders), 'queued', queue_length(call, state),
            'removed', removed}
end

-- Dead waiters and uncollected hand-overs first, as prune() does.
if phase == 'alive' then
    local lapsed, ended = lapsed_from(call.k_alive, tonumber(position), budget)
    settle_lapsed(call, state, lapsed, now, not dry_run, function(kind, token, deadline)
        if kind == 'collected' then
            budget = budget - 1 -- nothing to report
        else
            note(kind, token, deadline)
        end
    end)
    if not ended and #lapsed / 2 == tonumber(args.budget) then
        return reply('alive', next_offset(#lapsed / 2), 0)
    end
    phase, position = 'holders', '0'
end

if phase == 'holders' then
    local expired, ended = lapsed_from(call.k_holders, tonumber(position), math.max(budget, 1))
    for i = 1, #expired, 2 do
        local token = expired[i]
        if dry_run and uncollected(token, redis.call('ZSCORE', call.k_alive, token)) then
            budget = budget - 1 -- reported as a hand-over already
        else
            note('holder', token, tonumber(expired[i + 1]))
            if not dry_run then
                remove_holder(call, state, token, nil, now)
            end
        end
    end
    if not ended and budget <= 0 then
        return reply('holders', next_offset(#expired / 2), 0)
    end
    phase, position = 'orphans', '0'
end

if phase == 'orphans' then
    local scan = redis.call('HSCAN', call.k_info, position, 'COUNT', math.max(budget, 10))
    for i = 1, #scan[2], 2 do
        local token = scan[2][i]
        if not redis.call('ZSCORE', call.k_holders, token) and not redis.call('ZSCORE', call.k_queue, token) then
            note('orphan', token, nil)
            if not dry_run then
                redis.call('HDEL', call.k_info, token)
            end
        end
    end
    if scan[1] ~= '0' then
        return reply('orphans', scan[1], 0)
    end
end

-- Slots an older redsem left on the books when it removed a holder of several come back (see
-- recount_slots(); waiters take them at their next refresh of their place).
if not dry_run then
    recount_slots(call, state, redis.call('ZCARD', call.k_holders))
end

-- Done: delete the semaphore when nobody holds or waits; one whose settings an operator
-- stored (`redsem limit`) keeps its state hash, and so stays.
local deleted = 0
-- (A dry run ends no pause: one whose --for ran out keeps nothing here either.)
local kept = state.kept and not (state.pause_kept and state.paused and not pause_active(state, now))
-- The claim of an occurrence stays until its window ends (see lib/occurrence.lua).
local claimed_until = claim_until(state)
kept = kept or (claimed_until ~= nil and now < claimed_until)
local first = kept and 2 or 1
local doomed = {}
for i = first, SEMAPHORE_KEYS do
    if i ~= 4 or not kept or not state.paused then -- (the queue holds the pause's mark)
        doomed[#doomed + 1] = call.keys[i]
    end
end
if not dry_run and redis.call('ZCARD', call.k_holders) == 0 and queue_length(call, state) == 0 and
    exist_count(call, unpack(doomed)) > 0 then
    if state.pinned then
        unpin_keys(call, state) -- the history and epoch that outlive the keys expire again
    end
    del_keys(call, unpack(doomed))
    if not kept then
        state.raw_limit = nil -- nothing left to settle (see settle_expiry())
        deleted = 1
    end
end
if kept then
    deleted = -1 -- (also in a dry run: it would not be deleted either)
end
return reply('', 0, deleted)
