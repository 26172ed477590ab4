-- lib/supersede.lua: newest wins, when callers ask for it (acquire and run --supersede,
-- --max-waiting N). A newcomer with --supersede takes the place in the queue of the waiter
-- that asked for it before, which leaves told by whom; so at most one superseding waiter is
-- queued at a time, and a queue that keeps receiving newer ones still moves (each is served
-- where the first of them queued). A newcomer with --max-waiting N that would make more than
-- N wait is refused at once. Nobody else is touched: holders, a slot handed over and not
-- collected yet, and waiters that did not ask.
-- Provides: last_superseder(call, token), superseded_meanwhile(call, state, req, last, first),
--   full_reply(queued, most),
--   supersede(call, state, req, older), mark_superseder(call, req).
-- The state's field SUPERSEDER_FIELD names the superseding waiter that queued last; it may
-- name one that has left the queue since (granted, gone, or by an older redsem, which does not
-- know the field), which is then no waiter to supersede, but still the newer one for a waiter
-- that queued before it and comes back.
--- @include "call"
--- @include "records"
--- @include "queue"
--- @include "skips"

local SUPERSEDER_FIELD = 'superseder'

-- The superseding waiter that queued last, as SUPERSEDER_FIELD holds it ("TOKEN SINCE_MS JSON":
-- when it queued, and its metadata): {token, since, json, ticket}, ticket nil when it is no
-- longer queued; nil when there is none, or it is `token` itself.
local function last_superseder(call, token)
    local raw = redis.call('HGET', call.k_state, SUPERSEDER_FIELD)
    local last, since, json = string.match(raw or '', '^(%S+) (%d+) (.*)$')
    if not last or last == token then
        return nil
    end
    return {token = last, since = tonumber(since), json = json,
            ticket = redis.call('ZSCORE', call.k_queue, last) or nil}
end

-- When the caller of `req`, queueing again after it lost its place (stopped for longer than
-- its liveness, or not told on a Cluster node importing the slot), first queued at `first` (its
-- first answer) before `last` (last_superseder()) did: `last` is the newer one, queued or
-- served since, and the caller is the one superseded. Returns the skip reply it ends with
-- (logged), else nil.
local function superseded_meanwhile(call, state, req, last, first)
    if not (first and last.since > first) then
        return nil
    end
    local by = {why = SUPERSEDED_WHY, token = last.token, since = last.since, till = 0,
                json = last.json}
    log_skip(call, state, req.now, req.token, req.json, SUPERSEDED_WHY,
             {{token = by.token, since = by.since, json = by.json}})
    return skip_reply(by, req.now)
end

-- The reply to a newcomer refused because `queued` wait, and its --max-waiting is `most`.
local function full_reply(queued, most)
    return {'kind', 'full', 'queued', queued, 'max_waiting', most}
end

-- Takes `older` (last_superseder(), queued) out of the queue for the caller of `req`, who is
-- now the superseding waiter: its acquire ends, told by its ":left" list (the skipped note, why
-- 'superseded', with the caller's token and metadata), and the history has it as skipped.
-- Returns the ticket the caller queues with: `older`'s place.
local function supersede(call, state, req, older)
    local now = req.now
    local waiter = parse_info(redis.call('HGET', call.k_info, older.token))
    local alive_until = tonumber(redis.call('ZSCORE', call.k_alive, older.token)) or now
    remove_waiter(call, state, older.token, now)
    log_skip(call, state, now, older.token, waiter and waiter.json or '{}', SUPERSEDED_WHY,
             {{token = req.token, since = now, json = req.json}})
    if not call.asked then
        local note = call.wake_prefix .. older.token .. LEFT_SUFFIX
        redis.call('RPUSH', note, skipped_note(SUPERSEDED_WHY,
                                                {since = now, till = 0, token = req.token,
                                                 json = req.json}))
        redis.call('PEXPIREAT', note, int_str(math.max(alive_until, now) + NUDGE_KEEP_MS))
    end
    return older.ticket
end

-- The caller of `req`, queued with --supersede, is the one the next superseding newcomer
-- takes the place of, and that any waiter that queued before it and comes back yields to.
local function mark_superseder(call, req)
    redis.call('HSET', call.k_state, SUPERSEDER_FIELD,
               req.token .. ' ' .. int_str(req.now) .. ' ' .. req.json)
end
