-- lib/slots.lua: slot numbers, the slots of a holder's record, and how many are in use.
-- Provides: slot_number(text), parse_slots(text), used_slots(state, held).
-- Uses the protocol's MAX_LIMIT.

-- A slot number from a record, or nil for anything else (a record edited by hand).
local function slot_number(text)
    local slot = tonumber(text)
    if not slot or slot < 0 or slot >= MAX_LIMIT or slot ~= math.floor(slot) then
        return nil
    end
    return slot
end

-- The slots of a holder's record: "3", or "0,3,4" for a holder of several (ascending); nil
-- when any is no slot number (a record edited by hand: never a bit to set or clear).
local function parse_slots(text)
    if not string.find(text, ',', 1, true) then
        local slot = slot_number(text) -- one slot: the common case, without a pattern
        return slot and {slot}
    end
    local slots = {}
    for piece in string.gmatch(text, '[^,]+') do
        local slot = slot_number(piece)
        if not slot then
            return nil
        end
        slots[#slots + 1] = slot
    end
    return #slots > 0 and slots or nil
end

-- How many slots are in use, with `held` holders: every slot while an exclusive holder holds
-- (a limit raised meanwhile gives nobody the new ones), else one per holder and the extra
-- slots of holders of several (state field extra_slots).
local function used_slots(state, held)
    if state.exclusive and held > 0 then
        return math.max(held + state.extra, state.limit or 0)
    end
    return held + state.extra
end
