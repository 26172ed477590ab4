-- lib/records.lua: the info entries (KEYS[3]) of holders and waiters, whose format
-- lib/call.lua describes.
-- Provides: parse_info(raw), holder_info(slots, fence, now, ttl, json),
--   weight_of(info, limit), handover_collected(call, token, json), with_fields(json, text),
--   caller_fields(keeper, collects, max_hold), max_hold_of(json), and the constant KEEPER_MARK.
-- Uses the protocol's COLLECTS_FIELD.
--- @include "call"
--- @include "slots"

-- In a holder's stored JSON: a keeper process holds the slot (acquire --while-pid); and the
-- caller collects a hand-over itself (see handover_collected()). acquire.lua adds them to the
-- client's metadata (caller_fields()), as an older release's client wrote them into it; inside
-- a string a quote would be escaped, so only the field itself matches.
local KEEPER_MARK = '"keeper":true'
local COLLECTS_MARK = '"' .. COLLECTS_FIELD .. '":true'
-- The longest a lease may last after its grant, however often it is renewed (acquire
-- --max-hold; renew.lua), in ms. Older releases do not know it: their renew ignores it.
local MAX_HOLD_FIELD = 'max_hold_ms'

-- `json` with `text` (',"name":value...') added to its fields (none to a JSON that is not an
-- object: edited by hand).
local function with_fields(json, text)
    if json == '{}' then
        return '{' .. string.sub(text, 2) .. '}'
    end
    if string.sub(json, 1, 1) ~= '{' or string.sub(json, -1) ~= '}' then
        return json
    end
    return string.sub(json, 1, -2) .. text .. '}'
end

-- The fields (with_fields()'s text) a caller's record stores for a caller that is a keeper,
-- one that collects its hand-overs, and one whose lease lasts at most `max_hold` ms (nil: no
-- bound).
local function caller_fields(keeper, collects, max_hold)
    return (keeper and ',' .. KEEPER_MARK or '') .. (collects and ',' .. COLLECTS_MARK or '') ..
           (max_hold and ',"' .. MAX_HOLD_FIELD .. '":' .. int_str(max_hold) or '')
end

-- The bound in ms that the record's JSON `json` puts on its lease after the grant, nil for none.
local function max_hold_of(json)
    return tonumber(string.match(json, '"' .. MAX_HOLD_FIELD .. '":(%d+)'))
end

-- An info entry (KEYS[3]) as a table {kind, slot, slots, fence, since, ttl, json}, and for a
-- waiter `grace`, the loss grace it asked for (nil: the default), and `weight`: how many slots
-- it asks for ('-': 1, 'x': all of them, --exclusive: exclusive is true and weight nil); nil
-- when missing or malformed. slot: a holder's lowest slot, slots: all of them (nil when the
-- record was edited by hand into something else).
local function parse_info(raw)
    if not raw then
        return nil
    end
    local kind, field, fence, since, ttl, json = string.match(raw, '^(%a) (%S+) (%S+) (%S+) (%S+) (.*)$')
    if not kind then
        return nil
    end
    local info = {kind = kind, fence = fence, since = tonumber(since), ttl = tonumber(ttl), json = json}
    if kind == 'w' then
        info.grace = tonumber(fence)
        info.exclusive = field == 'x'
        info.weight = field == '-' and 1 or tonumber(field)
    else
        info.slots = parse_slots(field)
        info.slot = info.slots and info.slots[1]
    end
    return info
end

-- How many slots the waiter `info` asks for under `limit` (all of them for --exclusive).
local function weight_of(info, limit)
    if info.exclusive then
        return limit
    end
    return info.weight or 1
end

-- A holder's info entry; `slots` is a list (ascending).
local function holder_info(slots, fence, now, ttl, json)
    return 'h ' .. table.concat(slots, ',') .. ' ' .. int_str(fence) .. ' ' .. int_str(now) .. ' ' ..
           ttl .. ' ' .. json
end

-- Whether holder `token`, with metadata `json`, collected the slot a hand-over gave it: its
-- grant is in its wake list until its BLPOP takes it, and a caller that says so in its
-- metadata (COLLECTS_FIELD) then removes its claim deadline from the alive set. So a grant
-- that a BLPOP took into the socket of a process that died or was stopped meanwhile counts as
-- uncollected too. For a caller of an earlier build the BLPOP is all there is to go by.
local function handover_collected(call, token, json)
    if redis.call('EXISTS', call.wake_prefix .. token) == 1 then
        return false
    end
    return not string.find(json or '', COLLECTS_MARK, 1, true) or
           not redis.call('ZSCORE', call.k_alive, token)
end
