-- lib/occurrence.lua: one run per occurrence (`run --once-per WINDOW`): the claim in the
-- state hash's field `occurrence`, and whether it makes a caller skip (lib/skips.lua answers
-- and logs the skips).
-- Provides: asked_occurrence(window, at_most_once, attempts), occurrence_fields(asks),
--   occurrence_asks(json), parse_claim(call, state),
--   occurrence_taken(call, state, now, token, started, asks),
--   occurrence_doubt(call, state, now, token, started, asks),
--   skip_of_note(call, state, now, token, asks),
--   claim_occurrence(call, state, now, token, json, asks, started, handed) (returns the JSON a
--   grant logs), begin_occurrence(call, state, token),
--   settle_occurrence(call, state, token, status), settle_late_success(call, state, token).
-- Uses the protocol's ONCE_PER_FIELD, AT_MOST_ONCE_FIELD and ATTEMPTS_FIELD.
--- @include "call"
--- @include "state"
--- @include "lifetime"
--- @include "records"
--- @include "history"
--- @include "epoch"
--
-- The claim: the state's field `occurrence`, "SINCE_MS UNTIL_MS TOKEN STAGE ATTEMPT JSON"
-- (parse_claim()): UNTIL_MS the grant plus the WINDOW by the server's clock; STAGE 'given' (a
-- hand-over not yet collected), 'run', 'done' (released with status 0), 'failed' (JSON then
-- has "exit") or 'lapsed' (left without a release of its own); ATTEMPT which run of the
-- occurrence it is (absent before attempts were counted: 1); JSON the run's record, with
-- "attempt" and "after" from the second attempt on, when the claim it follows is kept in
-- `occurrence_prior`. A caller's record stores what it asks ("once_per":MS,
-- occurrence_fields()), so that a hand-over judges a waiter as a grant here does. Who skips,
-- waits or runs, at most once, attempts, late successes and lifetimes: docs/DESIGN.md, "One
-- run per occurrence".

local ONCE_PATTERN = '"' .. ONCE_PER_FIELD .. '":(%d+)'
local AT_MOST_ONCE_MARK = '"' .. AT_MOST_ONCE_FIELD .. '":true'
local ATTEMPTS_PATTERN = '"' .. ATTEMPTS_FIELD .. '":(%d+)'
-- The state's field that keeps the claim a second or later attempt followed, until that run
-- begins (see settle_occurrence()).
local PRIOR_CLAIM_FIELD = 'occurrence_prior'
local MAX_ATTEMPT = 1000000

-- What a caller asks of each occurrence, `asks` below: {window (ms), at_most_once (true: skip
-- where a run's outcome is unknown), attempts (nil: no bound)}, from acquire.lua's arguments
-- (strings, '' for none); nil for a caller without a window.
local function asked_occurrence(window, at_most_once, attempts)
    window = tonumber(window)
    if not window or window <= 0 then
        return nil
    end
    return {window = window, at_most_once = at_most_once, attempts = tonumber(attempts)}
end

-- The fields (with_fields()'s text) a caller's record stores for `asks`, as occurrence_asks()
-- and the releases before this one read them there.
local function occurrence_fields(asks)
    if not asks then
        return ''
    end
    return ',"' .. ONCE_PER_FIELD .. '":' .. int_str(asks.window) ..
           (asks.at_most_once and ',' .. AT_MOST_ONCE_MARK or '') ..
           (asks.attempts and ',"' .. ATTEMPTS_FIELD .. '":' .. int_str(asks.attempts) or '')
end

-- What the caller whose record stores `json` asks (see occurrence_fields()); nil for none.
local function occurrence_asks(json)
    return asked_occurrence(string.match(json, ONCE_PATTERN),
                            string.find(json, AT_MOST_ONCE_MARK, 1, true) ~= nil,
                            string.match(json, ATTEMPTS_PATTERN))
end

-- The claim, as a table {since, till, token, stage, attempt, json}; nil when there is none. A
-- hand-over's claim ('given') that its waiter collected is read as 'run': a BLPOP collects it
-- without a call that could write so (begin_occurrence()).
local function parse_claim(call, state)
    local text = state.occurrence or ''
    local since, till, owner, stage, attempt, json =
        string.match(text, '^(%d+) (%d+) (%S+) (%a+) (%d+) (.*)$')
    if not owner then
        since, till, owner, stage, json = string.match(text, '^(%d+) (%d+) (%S+) (%a+) (.*)$')
        attempt = 1 -- (written before attempts were counted)
    end
    if not owner then
        return nil
    end
    if stage == 'given' and handover_collected(call, owner, json) then
        stage = 'run'
    end
    -- (An attempt edited by hand is taken as one from 1 to MAX_ATTEMPT.)
    return {since = tonumber(since), till = tonumber(till), token = owner, stage = stage,
            attempt = math.min(math.max(tonumber(attempt), 1), MAX_ATTEMPT), json = json}
end

-- Stores `claim` (parse_claim()'s table) in the state.
local function write_claim(call, state, claim)
    state.occurrence = int_str(claim.since) .. ' ' .. int_str(claim.till) .. ' ' .. claim.token ..
                       ' ' .. claim.stage .. ' ' .. int_str(claim.attempt) .. ' ' .. claim.json
    redis.call('HSET', call.k_state, 'occurrence', state.occurrence)
end

-- Whether `claim`, of a run that failed or left without finishing, used up the attempts that a
-- caller who `asks` allows the occurrence (none said: no bound). If so the claim, marked, keeps
-- the caller out as a success would (skip_why(): 'attempts').
local function attempts_used(claim, asks)
    local allowed = asks.attempts
    if not allowed or claim.attempt < allowed then
        return false
    end
    claim.done, claim.why = true, 'attempts'
    return true
end

-- The claim in force for a caller who `asks` and started at server time `started`
-- (nil: `now`, a newcomer) that is not `token`'s, as a table {since, till, token, done, json,
-- attempt, why}; nil when nobody claims the occurrence, when its window had ended when the
-- caller started, when `token` claimed it, or when the run that claimed it failed or lost its
-- slot and the caller's attempts are not used up (attempts_used()).
local function occurrence_taken(call, state, now, token, started, asks)
    local claim = parse_claim(call, state)
    if not claim or (started or now) >= claim.till or claim.token == token then
        return nil
    end
    if claim.stage == 'run' or claim.stage == 'given' then
        local deadline = tonumber(redis.call('ZSCORE', call.k_holders, claim.token))
        if not deadline or deadline <= now then
            -- The run lost its slot (lapsed), or was handed one it never collected (then it
            -- ran nothing, and counts for nothing).
            return claim.stage == 'run' and attempts_used(claim, asks) and claim or nil
        end
        claim.stage = 'run' -- (as callers see it)
    elseif claim.stage ~= 'done' then
        return attempts_used(claim, asks) and claim or nil
    end
    claim.done = claim.stage == 'done'
    return claim
end

-- For a caller that started at `started` (nil: `now`) and `asks` for at most one run per
-- occurrence, and that no claim in force keeps out (occurrence_taken() found
-- none): why it skips all the same, as a claim-like table {why, since, till, token, json,
-- cause}: 'lapsed' (the claim in force is of a run that left without finishing: it may have
-- done its work), or 'lost' (the epoch records a possible loss of data, of `cause`, at `since`,
-- after the window could have begun; the next run may start at `till`). nil when neither, for
-- a caller that did not ask, and when this call cannot tell the epoch (no INFO, no proof: its
-- admission waits for one).
local function occurrence_doubt(call, state, now, token, started, asks)
    if not asks.at_most_once then
        return nil
    end
    local window = asks.window
    local claim = parse_claim(call, state)
    if claim and claim.token ~= token and (started or now) < claim.till and
       (claim.stage == 'run' or claim.stage == 'lapsed') then
        claim.why = 'lapsed'
        return claim
    end
    local epoch = read_epoch(call, now)
    if epoch.unknown or epoch.lost_at == 0 or epoch.lost_at <= now - window then
        return nil
    end
    return {why = 'lost', since = epoch.lost_at, till = epoch.lost_at + window, token = '-',
            json = '{}', cause = epoch.cause}
end

-- Why waiter `token`, who `asks` of the occurrence, whose place ended with a note in its ":left"
-- list, was passed over by a hand-over (skip_waiter()), as skip_reply() takes it; nil when it
-- was not (its place was released by somebody else). Told by the hand-over itself when it
-- came in this call (the caller's own refresh handed the slot on); otherwise judged again from
-- the claim as it stands: the note's text is for the client, whose BLPOP reads it, and no
-- script reads lists (the ACL rules name no such command).
local function skip_of_note(call, state, now, token, asks)
    local told = call.skipped[token]
    if told then
        return told
    end
    local claim = parse_claim(call, state)
    if claim and claim.token ~= token and
       (claim.stage == 'done' or
        ((claim.stage == 'failed' or claim.stage == 'lapsed') and attempts_used(claim, asks))) then
        claim.done = true
        return claim
    end
    return occurrence_doubt(call, state, now, token, nil, asks)
end

-- A claim of a hand-over that nobody collected (stage 'given'): it ran nothing, so the claim it
-- followed comes back (kept in PRIOR_CLAIM_FIELD), or none for a first attempt.
local function give_back(call, state, claim)
    local prior = claim.attempt > 1 and redis.call('HGET', call.k_state, PRIOR_CLAIM_FIELD)
    if prior then
        state.occurrence = prior
        redis.call('HSET', call.k_state, 'occurrence', prior)
    else
        state.occurrence = nil
        redis.call('HDEL', call.k_state, 'occurrence')
    end
    redis.call('HDEL', call.k_state, PRIOR_CLAIM_FIELD)
end

-- `token`, granted at `now` with stored JSON `json` (a caller that started at `started`, nil:
-- now), claims the occurrence when it `asks` for one; the keys then outlive the window
-- (touch()), so the claim does. `handed`: by a hand-over, which the waiter has yet to collect
-- (stage 'given' until begin_occurrence()). A claim of a run that failed or lapsed, of the
-- occurrence the caller belongs to, makes this the next attempt. Returns the metadata the grant
-- logs: `json`, with "attempt" and "after" from the second attempt on.
local function claim_occurrence(call, state, now, token, json, asks, started, handed)
    if not asks then
        return json
    end
    local window = asks.window
    local before = parse_claim(call, state)
    if before and before.stage == 'given' and before.token ~= token then
        give_back(call, state, before) -- (a dead hand-over not pruned yet)
        before = parse_claim(call, state)
    end
    local attempt = 1
    if before and (started or now) < before.till and before.token ~= token and
       before.stage ~= 'done' then
        attempt = before.attempt + 1
        json = with_fields(json, ',"attempt":' .. int_str(attempt) .. ',"after":"' ..
                           before.token .. '"')
        redis.call('HSET', call.k_state, PRIOR_CLAIM_FIELD, state.occurrence)
    end
    write_claim(call, state, {since = now, till = now + window, token = token,
                              stage = handed and 'given' or 'run', attempt = attempt, json = json})
    touch(call, state, now + window)
    return json
end

-- `token` collected the hand-over that claimed its occurrence: its run begins.
local function begin_occurrence(call, state, token)
    local claim = parse_claim(call, state)
    if claim and claim.token == token and claim.stage == 'given' then
        claim.stage = 'run'
        write_claim(call, state, claim)
    end
end

-- Holder `token` leaves with exit `status` ('' when it was not its own `run` that released it,
-- or when it leaves without a release): a claim of its own is done when the status is 0,
-- failed when it is another, and lapsed when there is none; a claim already done stays.
local function settle_occurrence(call, state, token, status)
    local claim = parse_claim(call, state)
    if not claim or claim.token ~= token or (claim.stage ~= 'run' and claim.stage ~= 'given') then
        return
    end
    if claim.stage == 'given' and status == '' then
        give_back(call, state, claim) -- no run began: this attempt does not count
        return
    end
    if claim.attempt > 1 then
        redis.call('HDEL', call.k_state, PRIOR_CLAIM_FIELD) -- (the run began)
    end
    if status == '0' then
        claim.stage = 'done'
    elseif status == '' then
        claim.stage = 'lapsed'
    else
        claim.stage = 'failed'
        if string.match(status, '^%d+$') then
            claim.json = with_fields(claim.json, ',"exit":' .. status)
        end
    end
    write_claim(call, state, claim)
end

-- The release with exit status 0 of a run of `token` that no longer holds its slot (its lease
-- ran out before the release came: Redis was out of reach, or redsem stopped). Its success
-- marks the occurrence done when the claim still names `token` and nobody claimed it since.
-- Returns what became of the claim: 'done', or 'taken' (another run claimed the occurrence
-- since), or 'gone' (no claim of `token`'s is left: Redis lost it with its data, somebody
-- cleared it, or a failure gave it back).
local function settle_late_success(call, state, token)
    local claim = parse_claim(call, state)
    if not claim then
        return 'gone'
    end
    if claim.token ~= token then
        return 'taken'
    end
    if claim.stage ~= 'done' then
        claim.stage = 'done'
        write_claim(call, state, claim)
    end
    return 'done'
end
