-- lib/caller_limit.lua: the limit a caller of acquire.lua names, taken on by a semaphore that is
-- new or idle under a caller's limit, and otherwise refused as a conflict.
-- Provides: adopt_limit(call, state, req, own_place, queued).
--- @include "call"
--- @include "state"
--- @include "lifetime"
--- @include "history"

local function conflict_reply(stored_limit, held, queued)
    return {'kind', 'conflict', 'stored_limit', stored_limit, 'held', held, 'queued', queued}
end

-- The limit of `req` (req.limit) against the stored one, `queued` waiting (`own_place`: 1 when
-- the caller is one of them, else 0). Returns how many hold when it had to count them (nil:
-- not counted), then the conflict reply when the caller's limit may not apply (nil: it does).
local function adopt_limit(call, state, req, own_place, queued)
    local limit = req.limit
    if state.raw_limit and not state.limit then
        return nil, conflict_reply(-1, redis.call('ZCARD', call.k_holders), queued)
    end
    if state.limit == limit then
        return nil, nil
    end
    local held = redis.call('ZCARD', call.k_holders)
    local others_waiting = queued - own_place
    if state.limit and (held > 0 or others_waiting > 0 or state.limit_by == 'operator') then
        -- In use, or an operator's limit: only `redsem limit` changes it.
        return held, conflict_reply(state.limit, held, queued)
    end
    if not state.limit and (held > 0 or others_waiting > 0) then
        -- Holders without a state hash: it was deleted or evicted. Guessing the limit could
        -- admit too many, so refuse until gc or the leases clear the semaphore.
        return held, conflict_reply(-2, held, queued)
    end
    -- New, or idle under a caller's limit: the caller's limit applies from now on, as a
    -- caller's, not an operator's (limit_by; see limit.lua).
    local from = state.limit
    store_limit(call, state, limit, 'caller')
    redis.call('DEL', call.k_slots)
    if not state.kept then
        expire_new(call, state, call.k_state)
    end
    log_limit(call, state, req.now, from, limit)
    return held, nil
end
