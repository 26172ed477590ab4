-- view.lua: one semaphore as its readers see it (status, the overview, --watch, Prometheus,
-- doctor, the holders a waiting line names), judged by the rules the other scripts act on:
-- the limit and its marks, a pause and its end, leases that ran out, hand-overs nobody
-- collected, waiters that stopped refreshing, holders of several slots and of all of them,
-- and admission after a possible loss of data. Changes nothing: the library registers it
-- no-writes (FCALL_RO, and on a replica). Sent by EVALSHA or EVAL, in a transaction after the
-- epoch marker's script (Semaphore::run()), it proves the epoch without INFO, and then removes
-- the proof (see epoch.lua): the one write a reader makes.
-- KEYS: see lib/call.lua.   Arguments (ARGV[1], ARGV[2] and the encoding: see there):
--- @args read first_holder first_waiter page
--   read          what to read besides the clock, the limit, the pause and the pages of
--                 entries: a list of 'counts', 'oldest' and 'admission', joined by commas (''
--                 for none). 'admission' alone asks for nothing else, and a proof where it is
--                 needed.
--   first_holder  the first holder to list (by slot: a rank in the holders set)
--   first_waiter  the first waiter to list (in queue order)
--   page          how many of each to list (0: none). A reader of a big semaphore calls again
--                 for the next page, so no single call is long.
-- Reply (names and values; the wire's decoder is src/semaphore/wire.cpp): now_ms; limit
--   (absent when none is stored, or one this redsem does not read), exclusive (the token of
--   an --exclusive holder, '' none), and while a pause is in force paused (who, as JSON),
--   paused_since_ms, paused_until_ms (0: until resumed); while the window of an occurrence's
--   claim lasts (run --once-per, see lib/occurrence.lua) claim_token, claim_stage ('run',
--   'done', 'failed', or 'lapsed': also a run whose lease ran out, not pruned yet),
--   claim_since_ms, claim_until_ms, claim_by (the run's metadata JSON) and claim_attempt;
--   with 'counts': holders, held (slots, as the scripts count them: used_slots()), expired
--   (dead holders: lease ran out, or hand-over lapsed; not pruned yet), waiting, stale
--   (waiters past their liveness), history, acquired_total, expired_total, lost_total, and
--   oldest_wait_since_ms (the live waiter that queued first) when there is one;
--   with 'oldest': oldest, the entry of the live holder that has held longest (this reads
--   every holder's record), when there is one;
--   with 'admission': opens_at_ms (0: open), cause, lost_at_ms, noticed (see admission_now()
--   in epoch.lua), or, where INFO is denied and no proof came, unproven 1 (asked alone: kind
--   prove, see epoch.lua), with the closure a call that could tell recorded, while it is in
--   force: recorded_opens_at_ms, recorded_cause, recorded_lost_at_ms;
--   with a page: holder_entries and waiter_entries, each entry a list of token, dead (1:
--   lease ran out, hand-over lapsed, or stopped refreshing), deadline_ms (holders) or
--   position (waiters, 1: next), and record, its info entry as stored, when it has one (see
--   entry()).
--   Also kind wrongtype or newer (see state.lua).
--- @include "call"
--- @include "cluster"
--- @include "state"
--- @include "records"
--- @include "expiry"
--- @include "epoch"
--- @include "occurrence"

local wants = {}
for part in string.gmatch(args.read, '[^,]+') do
    wants[part] = true
end
local state, bad = load_state(call)
if not state then
    return bad
end
call.state = nil -- read-only: finish() settles no expiry
local now = server_now(call)
local reply = {'kind', 'view', 'now_ms', now}

local function add(...)
    for _, value in ipairs({...}) do
        reply[#reply + 1] = value
    end
end

-- Admission as admission_now() judged it (nil: unproven: then the closure on record, if one
-- is in force, as recorded_opens_at_ms and recorded_cause, for a reader that may not prove).
local function add_admission(admission)
    if not admission then
        add('unproven', 1)
        local recorded = redis.call('HMGET', call.k_epoch, 'lost_at', 'cause')
        local lost_at = tonumber(recorded[1]) or 0
        if lost_at > 0 and now < lost_at + LOSS_GRACE_MS then
            add('recorded_opens_at_ms', lost_at + LOSS_GRACE_MS, 'recorded_cause', recorded[2] or '',
                'recorded_lost_at_ms', lost_at)
        end
    else
        add('opens_at_ms', admission.opens_at, 'cause', admission.cause, 'lost_at_ms',
            admission.lost_at, 'noticed', admission.noticed and 1 or 0)
    end
end

if args.read == 'admission' then
    local admission = admission_now(call, now)
    if not admission then
        -- (A client that finds the server lacks the marker's script knows a loss is not
        -- noticed yet, and does not declare a fresh marker: that would write one.)
        return {'kind', 'prove', 'marker', redis.call('HGET', call.k_epoch, 'cache_marker') or ''}
    end
    add_admission(admission)
    return reply
end

-- A time a sorted set holds as a score (edited by hand it may be -inf or 1e300), as a whole
-- number of milliseconds that time arithmetic can take.
local function time_ms(score)
    local ms = tonumber(score) or 0
    return math.floor(math.max(-LATEST_TIME_MS, math.min(LATEST_TIME_MS, ms)))
end

-- An entry of holder_entries or waiter_entries: `fields`, then its info entry `raw` as it is
-- stored (records.lua's format), when there is one. The client parses it (parse_record() in
-- src/semaphore/record.cpp, as for gc's entries): parsing a page of a thousand records here
-- took three times as long as the rest of the call.
local function entry(fields, raw)
    if raw then
        fields[#fields + 1] = 'record'
        fields[#fields + 1] = raw
    end
    return fields
end

-- The info entries of `tokens`, in order (false: none), a thousand at a time (unpack() has
-- a limit).
local function records_of(tokens)
    local records = {}
    for first = 1, #tokens, 1000 do
        local got = redis.call('HMGET', call.k_info, unpack(tokens, first, math.min(#tokens, first + 999)))
        for i = 1, #got do
            records[first + i - 1] = got[i]
        end
    end
    return records
end

-- Who is dead but not pruned yet, judged as prune() and gc judge it: holders whose lease ran
-- out, hand-overs nobody collected (settle_lapsed()), waiters that stopped refreshing.
local dead_holders, stale_waiters = {}, {}
local expired_count, stale_count = 0, 0
for _, token in ipairs(redis.call('ZRANGE', call.k_holders, '-inf', now, 'BYSCORE')) do
    dead_holders[token] = true
    expired_count = expired_count + 1
end
settle_lapsed(call, state, redis.call('ZRANGE', call.k_alive, '-inf', now, 'BYSCORE', 'WITHSCORES'),
              now, false, function(kind, token)
    if kind == 'waiter' then
        stale_waiters[token] = true
        stale_count = stale_count + 1
    elseif kind == 'handover' and not dead_holders[token] then
        dead_holders[token] = true
        expired_count = expired_count + 1
    end
end)

if state.limit then
    add('limit', state.limit)
end
add('exclusive', state.exclusive or '')
if pause_active(state, now) then
    add('paused', state.paused, 'paused_since_ms', state.paused_since, 'paused_until_ms',
        state.paused_until)
end
local claim = parse_claim(call, state)
if claim and now < claim.till then
    local stage = claim.stage == 'given' and 'run' or claim.stage -- (collected or not)
    if stage == 'run' then
        local deadline = tonumber(redis.call('ZSCORE', call.k_holders, claim.token))
        if not deadline or deadline <= now then
            stage = 'lapsed' -- as occurrence_taken() judges it
        end
    end
    add('claim_token', claim.token, 'claim_stage', stage, 'claim_since_ms', claim.since,
        'claim_until_ms', claim.till, 'claim_by', claim.json, 'claim_attempt', claim.attempt)
end

if wants.counts then
    -- Held slots as the scripts count them (used_slots()), less those of dead holders.
    local holders = redis.call('ZCARD', call.k_holders) - expired_count
    local held, exclusive_held = holders + state.extra, false
    for token in pairs(dead_holders) do
        local info = parse_info(redis.call('HGET', call.k_info, token))
        if info and info.kind == 'h' and info.slots then
            held = held - (#info.slots - 1)
        end
    end
    if state.exclusive and holders > 0 and not dead_holders[state.exclusive] and
       redis.call('ZSCORE', call.k_holders, state.exclusive) then
        -- It uses every slot, also those a raised limit added (nobody else gets them).
        held = math.max(held, state.limit or 0)
    end
    local queued = queue_length(call, state)
    stale_count = math.min(stale_count, queued)
    add('holders', holders, 'held', held, 'expired', expired_count, 'waiting', queued - stale_count,
        'stale', stale_count, 'history', state.history)
    local totals = redis.call('HMGET', call.k_state, 'expired_total', 'lost_total')
    add('acquired_total', state.acquired_total, 'expired_total', tonumber(totals[1]) or 0,
        'lost_total', tonumber(totals[2]) or 0)
    -- The first live waiter in the queue, which is in arrival order.
    for first = 0, queued - 1, 100 do
        local since = nil
        for _, token in ipairs(redis.call('ZRANGE', call.k_queue, first, first + 99)) do
            local info = not stale_waiters[token] and token ~= PAUSE_MARK and
                         parse_info(redis.call('HGET', call.k_info, token))
            if info and info.kind == 'w' and info.since then
                since = info.since
                break
            end
        end
        if since then
            add('oldest_wait_since_ms', time_ms(since))
            break
        end
    end
end

if wants.oldest then
    local listed = redis.call('ZRANGE', call.k_holders, 0, -1, 'WITHSCORES')
    local holders = {}
    for i = 1, #listed, 2 do
        holders[#holders + 1] = listed[i]
    end
    local records = records_of(holders)
    local oldest, oldest_entry = nil, nil
    for i, token in ipairs(holders) do
        local info = not dead_holders[token] and parse_info(records[i])
        if info and info.kind == 'h' and info.slots and info.since and
           (not oldest or info.since < oldest.since) then
            oldest = info
            oldest_entry = entry({'token', token, 'dead', 0, 'deadline_ms', time_ms(listed[2 * i])},
                                 records[i])
        end
    end
    if oldest_entry then
        add('oldest', oldest_entry)
    end
end

if wants.admission then
    add_admission(admission_now(call, now))
end

local first_holder, first_waiter, page = tonumber(args.first_holder), tonumber(args.first_waiter),
                                        tonumber(args.page)
if page > 0 then
    local entries = {}
    local page_of = redis.call('ZRANGE', call.k_holders, first_holder, first_holder + page - 1, 'WITHSCORES')
    local tokens = {}
    for i = 1, #page_of, 2 do
        tokens[#tokens + 1] = page_of[i]
    end
    local records = records_of(tokens)
    for i, token in ipairs(tokens) do
        entries[i] = entry({'token', token, 'dead', dead_holders[token] and 1 or 0, 'deadline_ms',
                            time_ms(page_of[2 * i])}, records[i])
    end
    add('holder_entries', entries)
    entries = {}
    tokens = {}
    for _, token in ipairs(redis.call('ZRANGE', call.k_queue, first_waiter, first_waiter + page - 1)) do
        if token ~= PAUSE_MARK then
            tokens[#tokens + 1] = token
        end
    end
    records = records_of(tokens)
    for i, token in ipairs(tokens) do
        entries[i] = entry({'token', token, 'dead', stale_waiters[token] and 1 or 0, 'position',
                            first_waiter + i}, records[i])
    end
    add('waiter_entries', entries)
end
return reply
