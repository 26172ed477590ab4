-- lib/waiting.lua: what acquire.lua does for a caller that gets no slot: its place in the
-- queue kept until its next refresh, and the wait and busy replies, which say why admission is
-- closed and when a slot may free up.
-- Provides: closed_admission(call, req), keep_waiting(call, state, req, position, first),
--   wait_reply(state, req, position, held, queued, extra), busy_reply(state, req, held, queued).
-- `req` is the caller's request (lib/grant.lua says what it holds), and here also liveness
-- (how long a waiter's place lasts without a refresh) and `closed`: {for_ms, cause, lost_ago},
-- admission closed for that long after a possible loss of data of `cause` that long ago, as
-- closed_admission() found it; for_ms 0: open, or not asked (only where a slot could have been
-- granted; elsewhere the queue is served by hand-overs).
--- @include "call"
--- @include "state"
--- @include "lifetime"
--- @include "epoch"
--- @include "pause"
--
-- Waiters far back refresh their place less often: from its first refresh on, one at position
-- P beyond the NEAR_HEAD waiters behind the limit waits P - (limit + NEAR_HEAD) + 1 seconds
-- longer than the caller's own interval (at most REFRESH_EXTRA_MAX_MS), and its liveness
-- deadline moves out as much. So an idle queue costs Redis about the log of its length in
-- calls, not its length. A newcomer first looks again after the caller's own interval, as the
-- head does: a queue that moves fast carries it to the head before then, and need not nudge
-- it. A waiter that moves up near the head while it sleeps longer is nudged
-- (nudge_near_head_entrant()), so the waiters near the head always refresh as often as the
-- head, and those that may take the next free slot look again when a lease may run out. A
-- waiter that died far back in the queue is still handed its slot when it gets to the head,
-- and loses it CLAIM_MS later (see hand_over()).
local REFRESH_EXTRA_PER_POSITION_MS = 1000
local REFRESH_EXTRA_MAX_MS = 15 * 60 * 1000

-- Admission for the caller of `req` after a possible loss of data, as `req.closed` holds it.
local function closed_admission(call, req)
    local opens, epoch = admission(call, req.now, req.grace)
    if opens == 0 then
        return {for_ms = 0}
    end
    return {for_ms = opens - req.now, cause = epoch.cause, lost_ago = req.now - epoch.lost_at}
end

-- `reply` (wait or busy) with why admission is closed, when it is, and the pause in force
-- (see lib/pause.lua): its JSON, how long ago it began, and how long it lasts yet (-1: until
-- resumed). Neither when admission is open: the common reply stays short.
local function with_admission(state, req, reply)
    local n, closed, now = #reply, req.closed, req.now
    if closed.for_ms > 0 then
        reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4] = 'closed_for_ms', closed.for_ms,
                                                                 'cause', closed.cause
        reply[n + 5], reply[n + 6] = 'lost_ms_ago', closed.lost_ago
        n = n + 6
    end
    if pause_active(state, now) then
        reply[n + 1], reply[n + 2] = 'pause', state.paused
        reply[n + 3], reply[n + 4] = 'paused_ms_ago', now - state.paused_since
        reply[n + 5] = 'pause_ends_in_ms'
        reply[n + 6] = state.paused_until > 0 and state.paused_until - now or -1
    end
    return reply
end

-- When a waiter at `position` should look again: for one that may take the next free slot,
-- when the earliest lease or liveness may run out (that slot may be free then), or when a
-- closed admission opens; -1 otherwise.
local function next_expiry_in(state, req, position)
    if position >= req.limit then
        return -1
    end
    local expiry = state.due < NOTHING_DUE and math.max(state.due - req.now, 0) or -1
    local closed_for = req.closed.for_ms
    if closed_for > 0 and (expiry < 0 or closed_for < expiry) then
        return closed_for
    end
    return expiry
end

-- The wait reply to a caller at `position` while `held` slots are in use and `queued` wait,
-- who refreshes its place `extra` ms later than its own interval (keep_waiting()).
local function wait_reply(state, req, position, held, queued, extra)
    return with_admission(state, req, {'kind', 'wait', 'position', position, 'held', held,
                                       'limit', req.limit, 'next_expiry_in_ms',
                                       next_expiry_in(state, req, position), 'queued', queued,
                                       'now_ms', req.now, 'refresh_extra_ms', extra})
end

local function busy_reply(state, req, held, queued)
    return with_admission(state, req, {'kind', 'busy', 'held', held, 'limit', req.limit,
                                       'queued', queued})
end

-- Queues the caller at `position`, or refreshes its place there, until its next refresh is
-- due (for a newcomer, `first`, after the caller's own interval wherever it queues). Returns
-- how much later than that interval it is due.
local function keep_waiting(call, state, req, position, first)
    local beyond = first and 0 or math.max(position - (req.limit + NEAR_HEAD) + 1, 0)
    local extra = math.min(beyond * REFRESH_EXTRA_PER_POSITION_MS, REFRESH_EXTRA_MAX_MS)
    local deadline = req.now + req.liveness + extra
    redis.call('ZADD', call.k_alive, deadline, req.token)
    note_deadline(call, state, deadline)
    touch(call, state, deadline)
    return extra
end
