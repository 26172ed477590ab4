-- release.lua: gives a slot back (handing it to the head of the queue), or takes a waiter
-- out of the queue.
-- KEYS: see lib/call.lua.   Arguments (ARGV[1], ARGV[2] and the encoding: see there):
--- @args token who status once signal timed_out_ms
--   token         the holder's or the waiter's
--   who           'own' when the waiter itself leaves the queue (it gave up, or was
--                 interrupted); otherwise ('other') somebody else released a waiting token,
--                 and the waiter is told so
--   status        '' or the exit status of `run`'s command, kept as "exit" in the released
--                 event; a run that claimed its occurrence (run --once-per) and releases it
--                 itself ('own') is done when it is 0, and gives the occurrence back otherwise
--                 (see lib/occurrence.lua)
--   once          '' or 'once' for the release of a `run --once-per`: one with status 0 whose
--                 lease ran out before it came marks the occurrence done all the same, when
--                 nobody claimed it since (settle_late_success())
--   signal        '' or, with a status: the signal that ended the command, 0 when it exited
--                 with that status; kept as "signal" beside "exit", so that readers tell an
--                 `exit 143` from a SIGTERM (an event without it: the release did not say)
--   timed_out_ms  '' or, with a status: how long the command had run when `run --max-run`
--                 stopped it; kept as "timed_out_ms"
-- Reply, by kind: released (the token held a slot and released it), left_queue (it was queued
-- and left the queue), not_found (unknown here: expired, released already, never acquired;
-- for a late release of a successful `run --once-per`, with occurrence: 'done', 'taken' or
-- 'gone', what became of its claim, also logged as a released event with "late");
-- prove without INFO: call again proving this epoch marker (see epoch.lua); nothing changed.
-- Touches nothing but the token's own entries and the hand-over, and for a holder kept by a
-- keeper process (acquire --while-pid), pushes to "<wake prefix><token>:released", which the
-- keeper watches. A waiting token released by somebody else leaves a note in
-- "<wake prefix><token>:left", which the waiter watches with its wake list (and acquire.lua
-- reads when it refreshes its place): its acquire ends instead of queueing again.
--- @include "call"
--- @include "state"
--- @include "records"
--- @include "history"
--- @include "epoch"
--- @include "queue"
--- @include "expiry"
--- @include "pause"
--- @include "occurrence"

local RELEASED = {'kind', 'released'}
local LEFT_QUEUE = {'kind', 'left_queue'}
local NOT_FOUND = {'kind', 'not_found'}

local state, bad = load_state(call)
if not state then
    return bad
end
local token = args.token
local now = server_now(call)
local proof = demand_proof(call, now)
if proof then
    return proof
end
settle_pause(call, state, now) -- a pause whose --for ran out hands slots on (see lib/pause.lua)
local info = parse_info(redis.call('HGET', call.k_info, token))

-- The reply to a release that found the token holding nothing: a `run --once-per` whose
-- command succeeded after its lease ran out still marks its occurrence done if it can, and
-- is on record either way (its stderr and exit status say when it could not).
local function not_found()
    if args.once ~= 'once' or args.status ~= '0' then
        return NOT_FOUND
    end
    local outcome = settle_late_success(call, state, token)
    local claim = parse_claim(call, state)
    -- Who ran it: its record, or once pruned, the claim that names it.
    local json = info and info.json or (claim and claim.token == token and claim.json) or '{}'
    if string.sub(json, -1) == '}' then
        log_event(call, state, now, 'released',
                  entry_value(token, '-', '-', nil, string.sub(json, 1, -2) ..
                              (json == '{}' and '' or ',') .. '"exit":0,"late":"' .. outcome .. '"}'))
    end
    return {'kind', 'not_found', 'occurrence', outcome}
end

if info and info.kind == 'h' then
    local deadline = tonumber(redis.call('ZSCORE', call.k_holders, token))
    if deadline and deadline <= now then
        -- A lease that ran out but was not pruned yet is not the caller's any more (a late
        -- success settles the claim first: expiring gives the occurrence back).
        local reply = not_found()
        expire_holder(call, state, token, deadline, now)
        return reply
    end
    if state.history > 0 and deadline then
        local status = string.match(args.status, '^%d+$')
        if status and string.sub(info.json, -1) == '}' then
            local json = info.json
            local signal = string.match(args.signal, '^%d+$')
            local timed_out = string.match(args.timed_out_ms, '^%d+$')
            info.json = string.sub(json, 1, -2) .. (json == '{}' and '' or ',') .. '"exit":' ..
                        status .. (signal and (',"signal":' .. signal) or '') ..
                        (timed_out and (',"timed_out_ms":' .. timed_out) or '') .. '}'
        end
        log_entry(call, state, now, 'released', token, info, now - (info.since or now))
    end
    if deadline then
        -- Before the slot is handed on. Only the run's own release knows its outcome: one by
        -- somebody else (an operator, the guard of a run that died, whose command's status it
        -- cannot see) leaves the occurrence lapsed.
        settle_occurrence(call, state, token, args.who == 'own' and args.status or '')
    end
    if remove_holder(call, state, token, info, now, deadline ~= nil) then
        if string.find(info.json, KEEPER_MARK, 1, true) then
            -- Tell the holder's keeper (acquire --while-pid) that it can stop at once.
            local ended = call.wake_prefix .. token .. RELEASED_SUFFIX
            redis.call('RPUSH', ended, '1')
            redis.call('PEXPIRE', ended, CLAIM_MS)
        end
        return RELEASED
    end
    return not_found()
end
if info and info.kind == 'w' then
    local alive_until = tonumber(redis.call('ZSCORE', call.k_alive, token)) or now
    remove_waiter(call, state, token, now)
    log_entry(call, state, now, 'left', token, info, now - (info.since or now))
    if args.who ~= 'own' and not call.asked then
        -- Kept until the waiter must have refreshed its place, and then some: one stopped for
        -- longer lost its place anyway, and queues again when it wakes. (Not pushed on a
        -- Cluster node importing the slot, as nudges are not: see lib/cluster.lua.)
        local left = call.wake_prefix .. token .. LEFT_SUFFIX
        redis.call('RPUSH', left, RELEASED_NOTE)
        redis.call('PEXPIREAT', left, int_str(math.max(alive_until, now) + NUDGE_KEEP_MS))
    end
    return LEFT_QUEUE
end
-- No metadata (hand-edited keys): still never leave the token holding a slot.
if redis.call('ZREM', call.k_holders, token) == 1 then
    return RELEASED
end
if redis.call('ZREM', call.k_queue, token) == 1 then
    redis.call('ZREM', call.k_alive, token)
    return LEFT_QUEUE
end
return not_found()
