-- lib/skips.lua: what a caller that skips is answered, and the skipped event the history
-- keeps: because another run claims the occurrence (lib/occurrence.lua), or because the
-- semaphore was full, closed or paused for a caller that would not wait.
-- Provides: skip_why(claim), skip_reply(claim, now), holders_of(call),
--   log_skip(call, state, now, token, json, why, by, cause).
--- @include "call"
--- @include "records"
--- @include "history"

-- How many holders a skip because the semaphore was full names in the history.
local SKIP_NAMES_HOLDERS = 3

-- Why a caller skips because of `claim` (occurrence_taken(), occurrence_doubt()): 'ran',
-- 'running', 'attempts', 'lapsed' or 'lost'.
local function skip_why(claim)
    return claim.why or (claim.done and 'ran' or 'running')
end

-- The reply to a caller that skips because of `claim` (occurrence_taken(), occurrence_doubt();
-- cause: a loss's).
local function skip_reply(claim, now)
    return {'kind', 'skipped', 'why', skip_why(claim), 'token', claim.token, 'since_ms', claim.since,
            'until_ms', claim.till, 'by', claim.json, 'now_ms', now, 'cause', claim.cause or ''}
end

-- The holders whose leases end first, SKIP_NAMES_HOLDERS at most, as log_skip() takes them.
local function holders_of(call)
    local holders = {}
    for _, token in ipairs(redis.call('ZRANGE', call.k_holders, 0, SKIP_NAMES_HOLDERS - 1)) do
        local info = parse_info(redis.call('HGET', call.k_info, token))
        if info then
            holders[#holders + 1] = {token = token, since = info.since, json = info.json}
        end
    end
    return holders
end

-- Logs that `token` (metadata `json`) skipped: `why` is 'ran', 'running', 'attempts' or
-- 'lapsed' (`by` is the claim), 'lost' (`by` is occurrence_doubt()'s), 'busy' (`by` is a list of holders'
-- {token, since, json}), or 'closed' or 'paused' (a slot was free, but admission was closed for
-- `cause`, or paused; `by` is empty). The event's JSON is the caller's, with "skipped" (why),
-- "by": the claim's or the holders' metadata, each with its token and since_ms, and for a
-- claim its until_ms; for 'closed' and 'lost', "cause"; and for 'lost' "lost_at_ms".
local function log_skip(call, state, now, token, json, why, by, cause)
    if state.history <= 0 or string.sub(json, -1) ~= '}' then
        return
    end
    local whom = {}
    local claimed = why == 'ran' or why == 'running' or why == 'attempts' or why == 'lapsed'
    if why == 'lost' then
        -- No claim to name: when the loss was, and its cause.
        json = with_fields(json, ',"lost_at_ms":' .. int_str(by.since or 0))
        by, cause = {}, by.cause
    end
    for _, one in ipairs(claimed and {by} or by) do
        if string.sub(one.json, 1, 1) == '{' and string.sub(one.json, -1) == '}' then
            whom[#whom + 1] = with_fields(one.json, ',"token":"' .. one.token .. '","since_ms":' ..
                                          int_str(one.since or 0) ..
                                          (one.till and ',"until_ms":' .. int_str(one.till) or ''))
        end
    end
    local fields = ',"skipped":"' .. why .. '","by":[' .. table.concat(whom, ',') .. ']'
    if (why == 'closed' or why == 'lost') and cause then
        fields = fields .. ',"cause":"' .. cause .. '"'
    end
    log_event(call, state, now, 'skipped', entry_value(token, '-', '-', nil, with_fields(json, fields)))
end
