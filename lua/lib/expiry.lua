-- lib/expiry.lua: what ran out by the server's clock: waiters that stopped refreshing,
-- hand-overs nobody collected, and holders whose lease ran out; their slots go to the queue.
-- Provides: settle_lapsed(call, state, lapsed, now, act, visit), log_lapsed(call, state, now),
--   expire_holder(call, state, token, deadline, now), earliest_deadline(call),
--   prune(call, state, now).
--- @include "call"
--- @include "state"
--- @include "records"
--- @include "lifetime"
--- @include "history"
--- @include "queue"

-- prune() looks at most at this many entries of each set per call.
local PRUNE_BATCH = 100

-- Settles the entries of the alive set whose time ran out; `lapsed` lists them as {token,
-- deadline, token, deadline, ...} (ZRANGE WITHSCORES). A token that holds no slot is a waiter
-- that stopped refreshing: it leaves the queue. One that holds a slot was handed it: unless it
-- collected the grant (handover_collected()), the waiter died or was stopped, and the slot goes
-- on; otherwise only the claim entry goes. Dead waiters go first, so that no slot is handed to
-- one of them. Calls visit(kind, token, deadline) for each, kind 'waiter', 'handover' or
-- 'collected', before acting on it; with `act` false changes nothing (gc's dry run).
local function settle_lapsed(call, state, lapsed, now, act, visit)
    local handovers = {}
    for i = 1, #lapsed, 2 do
        local token, deadline = lapsed[i], tonumber(lapsed[i + 1])
        if redis.call('ZSCORE', call.k_holders, token) then
            handovers[#handovers + 1] = {token, deadline}
        else
            visit('waiter', token, deadline)
            if act then
                remove_waiter(call, state, token, now)
            end
        end
    end
    for _, entry in ipairs(handovers) do
        local token, deadline = entry[1], entry[2]
        local info = parse_info(redis.call('HGET', call.k_info, token))
        if not handover_collected(call, token, info and info.json) then
            visit('handover', token, deadline)
            if act then
                remove_holder(call, state, token, info, now, true)
            end
        else
            visit('collected', token, deadline)
            if act then
                redis.call('ZREM', call.k_alive, token)
            end
        end
    end
end

-- settle_lapsed()'s visit for prune(): logs the dead waiters and the uncollected hand-overs.
local function log_lapsed(call, state, now)
    return function(kind, token, deadline)
        if state.history <= 0 or kind == 'collected' then
            return
        end
        local info = parse_info(redis.call('HGET', call.k_info, token))
        -- (An unclaimed slot was never held: no duration.)
        log_entry(call, state, now, kind == 'waiter' and 'dropped' or 'unclaimed', token, info,
                  kind == 'waiter' and info and info.since and deadline - info.since or nil)
    end
end

-- Removes holder `token`, whose lease ran out at `deadline` (server ms), logging it as expired,
-- or as unclaimed when it was a hand-over nobody collected (a lease shorter than the time to
-- collect it), which was never held; its slot goes on as remove_holder() hands it.
local function expire_holder(call, state, token, deadline, now)
    local info = parse_info(redis.call('HGET', call.k_info, token))
    if state.history > 0 then
        if not handover_collected(call, token, info and info.json) then
            log_entry(call, state, now, 'unclaimed', token, info, nil)
        else
            log_entry(call, state, now, 'expired', token, info, info and info.since and deadline - info.since)
        end
    end
    return remove_holder(call, state, token, info, now, true)
end

-- The earliest deadline in the holders and alive sets, NOTHING_DUE when both are empty.
local function earliest_deadline(call)
    local due = NOTHING_DUE
    for _, key in ipairs({call.k_alive, call.k_holders}) do
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
local function prune(call, state, now)
    if now < state.due then
        return
    end
    local lapsed = redis.call('ZRANGEBYSCORE', call.k_alive, '-inf', now, 'WITHSCORES', 'LIMIT', 0,
                              PRUNE_BATCH)
    settle_lapsed(call, state, lapsed, now, true, log_lapsed(call, state, now))
    local expired = redis.call('ZRANGEBYSCORE', call.k_holders, '-inf', now, 'WITHSCORES', 'LIMIT', 0,
                               PRUNE_BATCH)
    for i = 1, #expired, 2 do
        expire_holder(call, state, expired[i], tonumber(expired[i + 1]), now)
    end
    if #expired > 0 or #lapsed > 0 then
        -- Hand-overs may have re-created keys; give them the common expiry.
        expire_new(call, state, call.k_holders)
        expire_new(call, state, call.k_info)
    end
    if #lapsed < PRUNE_BATCH * 2 and #expired < PRUNE_BATCH * 2 then
        state.due = earliest_deadline(call)
        if state.raw_limit then
            redis.call('HSET', call.k_state, 'due', int_str(state.due))
        end
    end
end
