-- acquire.lua: takes a slot, or queues the caller in FIFO order.
-- KEYS: see lib/call.lua.
-- Arguments (ARGV[1], ARGV[2] and the encoding: see lib/call.lua):
--- @args token limit ttl_ms mode liveness_ms meta known grace_ms wants first_answer_ms
--- @args once_per_ms at_most_once attempts keeper collects
--   token            the caller's (caller-generated, 128 random bits)
--   limit            the limit, or '' for the stored one (1 for a new semaphore)
--   ttl_ms           the lease's ttl
--   mode             'wait' (queue if full) or 'try' (never queue)
--   liveness_ms      a queued caller at the head must call again within it, one further back
--                    within it plus its refresh_extra_ms (see below)
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
--   collects         '1' when the caller collects a hand-over itself (COLLECTS_FIELD)
-- The record stores the caller's metadata (for people) with the fields these give
-- (occurrence_fields(), caller_fields()), as the releases before this one read them.
-- Reply, by kind:
--   ok: fence, slot, deadline_ms, limit, now_ms, slots      the caller holds its slots: slot
--                                                         the lowest, slots all ("0,3,4")
--   toolarge: limit                                       the caller asks for more slots than
--                                                         the limit (or asked, and the limit
--                                                         was lowered while it waited: its
--                                                         place is gone)
--   wait: position, held, limit, next_expiry_in_ms, queued, now_ms, refresh_extra_ms
--                                                         queued (position 0 = next; held:
--                                                         the slots in use); next_expiry_in_ms:
--                                                         when a lease or liveness may run
--                                                         out, for a waiter that may take that
--                                                         slot, else -1; refresh_extra_ms: how
--                                                         much later than usual to refresh
--   busy: held, limit, queued                             full, and mode 'try'
--                                                         (logged as skipped, with the holders)
--   skipped: why, token, since_ms, until_ms, by, now_ms   another run claims the occurrence:
--                                                         why 'ran' (it succeeded) or
--                                                         'running'; token, since_ms, by (its
--                                                         metadata): the claim's; until_ms:
--                                                         when the window ends
--   wait and busy add, while admission is closed, closed_for_ms, cause, lost_ms_ago: closed
--   for that long after a possible loss of data of `cause` ('start', 'change', 'unproven',
--   'evicted' or 'declared', see epoch.lua) lost_ms_ago ms ago; and while paused, pause,
--   paused_ms_ago, pause_ends_in_ms: the pause in force, for any waiter (pause_ends_in_ms -1:
--   until resumed; see lib/pause.lua).
--   conflict: stored_limit, held, queued                  another limit is in force (change
--                                                         it with limit.lua; stored_limit -1:
--                                                         not a number, -2: state lost while
--                                                         in use)
--   wrongtype: key, found, wanted                         a foreign key is in the way
--   released                                              the caller's place in the queue was
--                                                         released by somebody else
--                                                         (release.lua): it holds nothing
--   prove: marker                                         without INFO: call again proving
--                                                         this epoch marker (see epoch.lua);
--                                                         nothing changed
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

local state, bad = load_state(call)
if not state then
    return bad
end
local token, ttl = args.token, tonumber(args.ttl_ms)
local limit = tonumber(args.limit) or state.limit or 1
local mode, liveness, known = args.mode, tonumber(args.liveness_ms), args.known == '1'
local asks = asked_occurrence(args.once_per_ms, args.at_most_once == '1', args.attempts)
local json = with_fields(args.meta, occurrence_fields(asks) ..
                                    caller_fields(args.keeper == '1', args.collects == '1'))
local now = server_now(call)
-- A newcomer behind a queue, when nothing can have run out (prune() has nothing to do) and
-- the limit is the stored one, admits nobody: it queues (or is busy), as FIFO wants. Such a
-- call need not judge the epoch nor the eviction policy (INFO: about a quarter of what a
-- queueing call costs Redis); its first refresh of its place does, before it can take a slot.
local queued = nil
local admits = true
if not known and now < state.due and state.limit == limit and
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
local grace = tonumber(args.grace_ms)
prune(call, state, now)
settle_pause(call, state, now)
local window = asks and asks.window

local function granted_reply(fence, slot, deadline, limit_now, listed)
    return {'kind', 'ok', 'fence', fence, 'slot', slot, 'deadline_ms', deadline, 'limit', limit_now,
            'now_ms', now, 'slots', listed}
end

local function too_large_reply(limit_now)
    return {'kind', 'toolarge', 'limit', limit_now}
end

local function conflict_reply(stored_limit, held_now, queued_now)
    return {'kind', 'conflict', 'stored_limit', stored_limit, 'held', held_now, 'queued', queued_now}
end

-- The reply to a caller that holds its slots: a lost reply retried, or a hand-over collected
-- here (its wake list and claim deadline go).
local function collected(deadline)
    local info = parse_info(redis.call('HGET', call.k_info, token)) or {}
    del_keys(call, call.wake_prefix .. token, call.wake_prefix .. token .. NUDGE_SUFFIX)
    redis.call('ZREM', call.k_alive, token)
    if window then
        -- Handed over while another run claims the occurrence (by an older redsem, which
        -- does not judge it, or while a run holds another slot): given back.
        local claim = occurrence_taken(call, state, now, token, nil, asks)
        if claim then
            remove_holder(call, state, token, info, now, true)
            log_skip(call, state, now, token, json, skip_why(claim), claim)
            return skip_reply(claim, now)
        end
        if string.match(state.occurrence or '', '^%d+ %d+ (%S+)') ~= token then
            claim_occurrence(call, state, now, token, json, asks)
        else
            begin_occurrence(call, state, token)
        end
    end
    return granted_reply(tonumber(info.fence) or 0, info.slot or 0, deadline, state.limit or limit,
                         table.concat(info.slots or {info.slot or 0}, ','))
end

-- The reply to a caller whose place in the queue is gone because somebody ended it: released
-- by `redsem release` (released), or refused as asking for more slots than a lowered limit
-- (toolarge; see refuse_too_large()), or, for one that asks for one run per occurrence, passed
-- over by a hand-over because another run claims it (skipped; see skip_waiter()); nil when
-- none of these.
local function left_queue()
    for _, why in ipairs({LEFT_SUFFIX, TOO_LARGE_SUFFIX}) do
        local note = call.wake_prefix .. token .. why
        if redis.call('EXISTS', note) == 1 then
            redis.call('DEL', note)
            if why == TOO_LARGE_SUFFIX then
                return too_large_reply(state.limit or limit)
            end
            local skip = window and skip_of_note(call, state, now, token, asks)
            return skip and skip_reply(skip, now) or {'kind', 'released'}
        end
    end
    return nil
end

-- When the caller started, the earliest of: its first answer (first_answer_ms), for a waiter
-- refreshing its place when it queued (its record's since, which a waiter of a window queues
-- with), and now. It belongs to the occurrence in force then (see lib/occurrence.lua).
local started = now
if window then
    local first = tonumber(args.first_answer_ms)
    if first and first < started then
        started = first
    end
    local record = known and parse_info(redis.call('HGET', call.k_info, token))
    if record and record.kind == 'w' and record.since and record.since < started then
        started = record.since
    end
end

-- A caller that asks for one run per occurrence skips while another run claims it: at once
-- when that run is done, or when the caller would not wait; a waiter waits for the run's end
-- (a hand-over then judges the claim again). Its place in the queue goes.
if window then
    local claim = occurrence_taken(call, state, now, token, started, asks)
    if claim and (claim.done or mode ~= 'wait') and
       not (known and redis.call('ZSCORE', call.k_holders, token)) then -- (see collected())
        if known and redis.call('ZSCORE', call.k_queue, token) then
            remove_waiter(call, state, token, now)
        elseif known then
            -- A place that somebody ended tells how (a hand-over's skip, logged then).
            local ended = left_queue()
            if ended then
                return ended
            end
        end
        log_skip(call, state, now, token, json, skip_why(claim), claim)
        return skip_reply(claim, now)
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
        return collected(deadline)
    end
    position = redis.call('ZRANK', call.k_queue, token)
    if not position then
        local ended = left_queue()
        if ended then
            return ended
        end
    end
end

queued = queued or queue_length(call, state)
local held
if state.raw_limit and not state.limit then
    return conflict_reply(-1, redis.call('ZCARD', call.k_holders), queued)
end
if state.limit ~= limit then
    held = redis.call('ZCARD', call.k_holders)
    local others_waiting = queued - (position and 1 or 0)
    if state.limit and (held > 0 or others_waiting > 0 or state.limit_by == 'operator') then
        -- In use, or an operator's limit: only `redsem limit` changes it.
        return conflict_reply(state.limit, held, queued)
    end
    if not state.limit and (held > 0 or others_waiting > 0) then
        -- Holders without a state hash: it was deleted or evicted. Guessing the limit could
        -- admit too many, so refuse until gc or the leases clear the semaphore.
        return conflict_reply(-2, held, queued)
    end
    -- New, or idle under a caller's limit: the caller's limit applies from now on, as a
    -- caller's, not an operator's (limit_by; see limit.lua).
    local from = state.limit
    store_limit(call, state, limit, 'caller')
    redis.call('DEL', call.k_slots)
    if not state.kept then
        expire_new(call, state, call.k_state)
    end
    log_limit(call, state, now, from, limit)
end

-- How many slots the caller asks for: a count, or 'x' for every slot of the limit (--exclusive).
local exclusive = args.wants == 'x'
local weight = exclusive and limit or tonumber(args.wants) or 1
if weight > limit and not position then
    return too_large_reply(limit) -- (a queued one is refused when its turn comes: hand_over())
end
if weight > 1 or exclusive then
    mark_weighted(call, state) -- an older redsem would count this holder as one
end

-- Takes the lowest free slots for `token`, which waited `waited` ms for them; nil when
-- admission is closed, when another run of the occurrence the caller asks for one run of
-- holds a slot, or when the bitmap and the holders disagree beyond repair.
local function grant(held, waited)
    if admission(call, now, grace) > 0 then
        return nil
    end
    if window and occurrence_taken(call, state, now, token, started, asks) then
        -- A run of the occurrence holds another slot (a limit above 1): this caller waits for
        -- its end in the queue (see hand_over()); one that would not wait skipped above.
        return nil
    end
    local doubt = window and occurrence_doubt(call, state, now, token, started, asks)
    if doubt then
        -- At most once: a run whose outcome is unknown may have done the work.
        log_skip(call, state, now, token, json, doubt.why, doubt)
        return skip_reply(doubt, now)
    end
    if held == 0 then
        redis.call('DEL', call.k_slots) -- all slots are free: forget any stale bits
        if state.extra > 0 or state.exclusive then
            state.extra, state.exclusive = 0, nil
            redis.call('HDEL', call.k_state, 'extra_slots', 'exclusive')
        end
    end
    local slots = take_slots(call, state, token, weight, limit, exclusive)
    if not slots then
        -- Only after hand-edited keys: rebuild the bitmap from the holders' records.
        redis.call('DEL', call.k_slots)
        for _, other in ipairs(redis.call('ZRANGE', call.k_holders, 0, -1)) do
            local info = parse_info(redis.call('HGET', call.k_info, other))
            for _, slot in ipairs(info and info.slots or {}) do
                redis.call('SETBIT', call.k_slots, slot, 1)
            end
        end
        expire_new(call, state, call.k_slots)
        slots = take_slots(call, state, token, weight, limit, exclusive)
        if not slots then
            return nil
        end
    end
    local listed = table.concat(slots, ',')
    local fence = next_fence(call, state)
    local deadline = now + ttl
    redis.call('ZADD', call.k_holders, deadline, token)
    call.occupies = true
    note_deadline(call, state, deadline)
    redis.call('HSET', call.k_info, token, holder_info(slots, fence, now, ttl, json))
    if held == 0 then
        expire_new(call, state, call.k_holders)
        expire_new(call, state, call.k_info)
        expire_new(call, state, call.k_slots)
    end
    touch(call, state, deadline)
    log_grant(call, state, now, token, listed, fence, waited,
              claim_occurrence(call, state, now, token, json, asks, started))
    return granted_reply(fence, slots[1], deadline, limit, listed)
end

-- How long admission stays closed after a possible loss of data (0: open), why, and how long
-- ago that loss may have been. Only asked where a slot could have been granted; elsewhere the
-- queue is served by hand-overs.
local closed_for, cause, lost_ago = 0, '', 0
local function closed_for_ms()
    local opens, epoch = admission(call, now, grace)
    if opens == 0 then
        return 0
    end
    cause, lost_ago = epoch.cause, now - epoch.lost_at
    return opens - now
end

-- `reply` (wait or busy) with why admission is closed, when it is, and the pause in force
-- (see lib/pause.lua): its JSON, how long ago it began, and how long it lasts yet (-1: until
-- resumed). Neither when admission is open: the common reply stays short.
local function with_admission(reply)
    local n = #reply
    if closed_for > 0 then
        reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4] = 'closed_for_ms', closed_for, 'cause', cause
        reply[n + 5], reply[n + 6] = 'lost_ms_ago', lost_ago
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

local function wait_reply(position, held_slots, expiry_in, queued_now, extra)
    return with_admission({'kind', 'wait', 'position', position, 'held', held_slots, 'limit', limit,
                           'next_expiry_in_ms', expiry_in, 'queued', queued_now, 'now_ms', now,
                           'refresh_extra_ms', extra})
end

-- When a waiter at `position` should look again: for one that may take the next free slot,
-- when the earliest lease or liveness may run out (that slot may be free then), or when a
-- closed admission opens; -1 otherwise.
local function next_expiry_in(position)
    if position >= limit then
        return -1
    end
    local expiry = state.due < NOTHING_DUE and math.max(state.due - now, 0) or -1
    if closed_for > 0 and (expiry < 0 or closed_for < expiry) then
        return closed_for
    end
    return expiry
end

-- Queues `token` at `position`, or refreshes its place there, until its next refresh is due
-- (for a newcomer, `first`, after the caller's own interval wherever it queues).
local function keep_waiting(position, first)
    local beyond = first and 0 or math.max(position - (limit + NEAR_HEAD) + 1, 0)
    local extra = math.min(beyond * REFRESH_EXTRA_PER_POSITION_MS, REFRESH_EXTRA_MAX_MS)
    local deadline = now + liveness + extra
    redis.call('ZADD', call.k_alive, deadline, token)
    note_deadline(call, state, deadline)
    touch(call, state, deadline)
    return extra
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
        fill_free_slots(call, state, held, now)
        local deadline = tonumber(redis.call('ZSCORE', call.k_holders, token))
        if deadline then
            return collected(deadline)
        end
        position = redis.call('ZRANK', call.k_queue, token)
        if not position then
            local ended = left_queue() -- released, or refused as asking for too many
            if ended then
                return ended
            end
        else
            held = redis.call('ZCARD', call.k_holders)
            queued = queue_length(call, state)
            if used_slots(state, held) < limit then
                closed_for = closed_for_ms()
            end
        end
    end
    if position then
        local extra = keep_waiting(position)
        return wait_reply(position, used_slots(state, held), next_expiry_in(position), queued, extra)
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
        local granted = grant(held, 0)
        if granted then
            return granted
        end
        closed_for = closed_for_ms()
    end
end

if mode ~= 'wait' then
    touch(call, state, now) -- a new semaphore's state (limit, history) expires like the rest
    if state.history > 0 and closed_for > 0 then
        -- A slot was free: admission closed (or a pause) refused it, not the holders.
        log_skip(call, state, now, token, json, cause == 'paused' and 'paused' or 'closed', {},
                 cause)
    elseif state.history > 0 then
        log_skip(call, state, now, token, json, 'busy', holders_of(call))
    end
    return with_admission({'kind', 'busy', 'held',
                           used_slots(state, held or redis.call('ZCARD', call.k_holders)),
                           'limit', limit, 'queued', queued})
end
local ticket = redis.call('HINCRBY', call.k_state, 'ticket', 1)
redis.call('ZADD', call.k_queue, ticket, token)
call.occupies = true
local weight_field = exclusive and 'x' or (weight > 1 and tostring(weight) or '-')
redis.call('HSET', call.k_info, token, 'w ' .. weight_field .. ' ' .. (grace and int_str(grace) or '-') ..
           ' ' .. int_str(started) .. ' ' .. ttl .. ' ' .. json)
local extra = keep_waiting(queued, true)
if queued == 0 then
    expire_new(call, state, call.k_queue)
    expire_new(call, state, call.k_alive)
end
log_entry(call, state, now, 'queued', token, {kind = 'w', json = json}, nil)
return wait_reply(queued, held and used_slots(state, held) or limit, next_expiry_in(queued), queued + 1,
                  extra)
