-- acquire.lua: takes a slot, or queues the caller in FIFO order.
-- KEYS: see lib/call.lua.
-- Arguments (ARGV[1], ARGV[2] and the encoding: see lib/call.lua):
--- @args token limit ttl_ms mode liveness_ms meta known grace_ms wants first_answer_ms
--- @args once_per_ms at_most_once attempts keeper max_hold_ms collects supersede max_waiting
--   token            the caller's (caller-generated, 128 random bits)
--   limit            the limit, or '' for the stored one (1 for a new semaphore)
--   ttl_ms           the lease's ttl
--   mode             'wait' (queue if full) or 'try' (never queue)
--   liveness_ms      a queued caller at the head must call again within it, one further back
--                    within it plus its refresh_extra_ms (lib/waiting.lua)
--   meta             metadata JSON {host, pid, user, label}
--   known            '1' when this token may be known already (a retry, or a queued waiter
--                    refreshing its place), '0' for a token never sent before (skips the
--                    look-ups)
--   grace_ms         the loss grace for the caller's own admission (see epoch.lua), kept with
--                    its place in the queue and never stored with the semaphore; '' for
--                    LOSS_GRACE_MS
--   wants            how many slots the caller asks for (a count; 'x': all of them,
--                    --exclusive, as many as the limit when they are granted)
--   first_answer_ms  '' or, for a caller that was answered before, the server time of its
--                    first answer: the client keeps it across a place it lost (a waiter
--                    stopped for longer than its liveness is dropped, and queues again), so
--                    that it still belongs to the occurrence in force when it started (run
--                    --once-per)
--   once_per_ms      '' or the window of a caller that asks for one run per occurrence (run
--                    --once-per): it claims the occurrence when granted, and skips while
--                    another claim is in force (see lib/occurrence.lua)
--   at_most_once     '1' (with once_per_ms): also skip where a run's outcome is unknown
--   attempts         '' or (with once_per_ms) how many runs of one occurrence may fail
--   keeper           '1' when a keeper process renews the lease (acquire --while-pid)
--   max_hold_ms      '' or how long after its grant the lease may last at most, however
--                    often it is renewed (acquire --max-hold; see renew.lua)
--   collects         '1' when the caller collects a hand-over itself (COLLECTS_FIELD)
--   supersede        '1': a newcomer that queues takes the place of the waiter queued with
--                    it before, which leaves (lib/supersede.lua)
--   max_waiting      '' or how many may wait at most: a newcomer that would be one more is
--                    refused (full)
-- The record stores the caller's metadata (for people) with the fields these give
-- (occurrence_fields(), caller_fields()), as the releases before this one read them.
-- Reply, by kind:
--   ok: fence, slot, deadline_ms, limit, now_ms, slots: the caller holds its slots (slot the
--     lowest, slots all: "0,3,4").
--   toolarge: limit: the caller asks for more slots than the limit (or asked, and the limit
--     was lowered while it waited: its place is gone).
--   wait: position, held, limit, next_expiry_in_ms, queued, now_ms, refresh_extra_ms: queued
--     (position 0 = next; held: the slots in use); next_expiry_in_ms: when a lease or liveness
--     may run out, for a waiter that may take that slot, else -1; refresh_extra_ms: how much
--     later than usual to refresh (lib/waiting.lua).
--   busy: held, limit, queued: full, and mode 'try' (logged as skipped, with the holders).
--   skipped: why, token, since_ms, until_ms, by, now_ms: another run claims the occurrence:
--     why 'ran' (it succeeded) or 'running'; token, since_ms, by (its metadata): the claim's;
--     until_ms: when the window ends.
--   wait and busy add, while admission is closed, closed_for_ms, cause, lost_ms_ago: closed
--     for that long after a possible loss of data of `cause` ('start', 'change', 'unproven',
--     'evicted' or 'declared', see epoch.lua) lost_ms_ago ms ago; and while paused, pause,
--     paused_ms_ago, pause_ends_in_ms: the pause in force, for any waiter (pause_ends_in_ms
--     -1: until resumed; see lib/pause.lua).
--   conflict: stored_limit, held, queued: another limit is in force (change it with
--     limit.lua; stored_limit -1: not a number, -2: state lost while in use).
--   wrongtype: key, found, wanted: a foreign key is in the way.
--   left: the caller's place in the queue ended with a note in its ":left" list, which the
--     client reads: released by somebody else (release.lua), or superseded (lib/supersede.lua);
--     it holds nothing.
--   full: queued, max_waiting: as many wait as max_waiting allows; nothing changed but the
--     history (a skip, why 'full').
--   prove: marker: without INFO, call again proving this epoch marker (see epoch.lua);
--     nothing changed.
-- Calling again with the same token is safe: a holder gets its lease back (and so collects a
-- hand-over), a waiter keeps its place in the queue.
--- @include "call"
--- @include "cluster"
--- @include "state"
--- @include "slots"
--- @include "records"
--- @include "lifetime"
--- @include "history"
--- @include "epoch"
--- @include "queue"
--- @include "taken"
--- @include "expiry"
--- @include "pause"
--- @include "occurrence"
--- @include "skips"
--- @include "grant"
--- @include "waiting"
--- @include "supersede"
--- @include "caller_limit"

local state, bad = load_state(call)
if not state then
    return bad
end
local now = server_now(call)
local asks = asked_occurrence(args.once_per_ms, args.at_most_once == '1', args.attempts)
-- The caller's request, as lib/grant.lua and lib/waiting.lua take it.
local req = {
    token = args.token, ttl = tonumber(args.ttl_ms), limit = tonumber(args.limit) or state.limit or 1,
    liveness = tonumber(args.liveness_ms), grace = tonumber(args.grace_ms), asks = asks, now = now,
    json = with_fields(args.meta, occurrence_fields(asks) ..
                                  caller_fields(args.keeper == '1', args.collects == '1',
                                                tonumber(args.max_hold_ms))),
    started = now, closed = {for_ms = 0}
}
local token, limit, json = req.token, req.limit, req.json
local mode, known = args.mode, args.known == '1'
local supersedes, most = args.supersede == '1', tonumber(args.max_waiting)
-- A newcomer behind a queue, when nothing can have run out (prune() has nothing to do) and
-- the limit is the stored one, admits nobody: it queues (or is busy), as FIFO wants. Such a
-- call need not judge the epoch nor the eviction policy (INFO: about a quarter of what a
-- queueing call costs Redis); its first refresh of its place does, before it can take a slot.
local queued = nil
local admits = true
if not known and not supersedes and now < state.due and state.limit == limit and
   (not state.paused or pause_active(state, now)) then -- (a pause that ran out hands slots on)
    queued = queue_length(call, state)
    admits = queued == 0
end
if admits then
    local proof = demand_proof(call, now)
    if proof then
        return proof
    end
    local evicting = refuse_if_evicting(call)
    if evicting then
        return evicting
    end
elseif call.marker then
    marker_ran(call) -- the proof its transaction wrote is removed, as every call removes it
end
prune(call, state, now)
settle_pause(call, state, now)

if asks then
    local skipped = skip_for_claim(call, state, req, known, mode, tonumber(args.first_answer_ms))
    if skipped then
        return skipped
    end
end

local position
if known then
    local deadline = tonumber(redis.call('ZSCORE', call.k_holders, token))
    if deadline and deadline <= now then
        -- Expired, and not pruned yet (prune takes 100 at a time): not the caller's any more.
        expire_holder(call, state, token, deadline, now)
        deadline = nil
    end
    if deadline then
        return collected(call, state, req, deadline)
    end
    position = redis.call('ZRANK', call.k_queue, token)
    if not position then
        local ended = left_queue(call, state, req)
        if ended then
            return ended
        end
    end
end

queued = queued or queue_length(call, state)
local held, conflict = adopt_limit(call, state, req, position and 1 or 0, queued)
if conflict then
    return conflict
end

-- How many slots the caller asks for: a count, or 'x' for every slot of the limit (--exclusive).
req.exclusive = args.wants == 'x'
req.weight = req.exclusive and limit or tonumber(args.wants) or 1
local weight = req.weight
if weight > limit and not position then
    return too_large_reply(limit) -- (a queued one is refused when its turn comes: hand_over())
end
if weight > 1 or req.exclusive then
    mark_weighted(call, state) -- an older redsem would count this holder as one
end

if position then
    -- A queued waiter refreshing its place. Slots reach the queue by hand-overs; slots free
    -- while it waits (admission was closed, or paused; keys changed by hand) go to the queue
    -- here, from its head, this caller perhaps among them.
    held = held or redis.call('ZCARD', call.k_holders)
    if used_slots(state, held) >= limit then
        recount_slots(call, state, held) -- blocked while somebody waits: are the books true?
    end
    if used_slots(state, held) < limit then
        local served
        served, position, held = serve_free_slots(call, state, req, held)
        if served then
            return served
        end
        if not position then
            local ended = left_queue(call, state, req) -- released, or refused as too large
            if ended then
                return ended
            end
        else
            queued = queue_length(call, state)
            if used_slots(state, held) < limit then
                req.closed = closed_admission(call, req)
            end
        end
    end
    if position then
        local extra = keep_waiting(call, state, req, position)
        return wait_reply(state, req, position, used_slots(state, held), queued, extra)
    end
    -- Its place went with nobody's note: its record was gone when its turn came (evicted, or
    -- deleted by hand), and the hand-over dropped it. It queues again, at the back, below.
    held, queued = nil, queue_length(call, state)
end

-- While anybody is queued and admission is open, the slots free are fewer than the head asks
-- for, so a newcomer can only queue behind them.
if queued == 0 then
    held = held or redis.call('ZCARD', call.k_holders)
    if used_slots(state, held) + weight > limit then
        recount_slots(call, state, held) -- blocked: are the books true?
    end
    if used_slots(state, held) + weight <= limit then
        local granted = grant(call, state, req, held, 0)
        if granted then
            return granted
        end
        req.closed = closed_admission(call, req)
    end
end

if mode ~= 'wait' then
    touch(call, state, now) -- a new semaphore's state (limit, history) expires like the rest
    local cause = req.closed.cause
    if state.history > 0 and req.closed.for_ms > 0 then
        -- A slot was free: admission closed (or a pause) refused it, not the holders.
        log_skip(call, state, now, token, json, cause == 'paused' and 'paused' or 'closed', {},
                 cause)
    elseif state.history > 0 then
        log_skip(call, state, now, token, json, 'busy', holders_of(call))
    end
    return busy_reply(state, req, used_slots(state, held or redis.call('ZCARD', call.k_holders)),
                      queued)
end
-- Newest wins, when asked (lib/supersede.lua): the superseding waiter before this one leaves,
-- and this one takes its place; or a newcomer that would be one too many is refused.
local last = supersedes and last_superseder(call, token)
if last and known then
    local superseded = superseded_meanwhile(call, state, req, last, tonumber(args.first_answer_ms))
    if superseded then
        return superseded
    end
end
local older = last and last.ticket and last or nil
if most and queued - (older and 1 or 0) >= most then
    touch(call, state, now)
    log_skip(call, state, now, token, json, 'full', {})
    return full_reply(queued, most)
end
local ticket
if older then
    ticket = supersede(call, state, req, older)
    queued = queued - 1
else
    ticket = redis.call('HINCRBY', call.k_state, 'ticket', 1)
end
redis.call('ZADD', call.k_queue, ticket, token)
call.occupies = true
if supersedes then
    mark_superseder(call, req)
end
local weight_field = req.exclusive and 'x' or (weight > 1 and tostring(weight) or '-')
redis.call('HSET', call.k_info, token, 'w ' .. weight_field .. ' ' ..
           (req.grace and int_str(req.grace) or '-') .. ' ' .. int_str(req.started) .. ' ' ..
           req.ttl .. ' ' .. json)
local extra = keep_waiting(call, state, req, queued, true)
if queued == 0 then
    expire_new(call, state, call.k_queue)
    expire_new(call, state, call.k_alive)
end
log_entry(call, state, now, 'queued', token, {kind = 'w', json = json}, nil)
position = queued
if older then
    -- In the place of the one it superseded, perhaps the head, which may ask for fewer slots
    -- than were free: they go to the queue from its head now, this caller perhaps among them.
    position = redis.call('ZRANK', call.k_queue, token)
    held = held or redis.call('ZCARD', call.k_holders)
    if used_slots(state, held) < limit then
        local served
        served, position, held = serve_free_slots(call, state, req, held)
        if served then
            return served
        end
    end
end
return wait_reply(state, req, position, held and used_slots(state, held) or limit, queued + 1, extra)
