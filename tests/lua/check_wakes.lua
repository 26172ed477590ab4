-- Run after the modules (modules.lua, cmake/embed_lua.cmake) in one chunk by
-- check_records.sh: writes each payload of tests/fixtures/wakes.txt (arg[1]) again from its
-- fields with lib/queue.lua's formatters, as the scripts push it, and checks that it is the
-- payload the fixture holds (which src/semaphore/wire.cpp is held to decode). Payloads marked
-- written=older are an earlier release's, which nothing here writes. Prints one line per
-- disagreement; exits 1 when there is any.
local function fields_of(rest)
    local fields = {}
    for key, value in string.gmatch(rest, '([%w_]+)=(%S*)') do
        fields[key] = value
    end
    return fields
end

local function slots_of(listed)
    local slots = {}
    for slot in string.gmatch(listed, '[^,]+') do
        slots[#slots + 1] = slot
    end
    return slots
end

-- The payload the scripts push to `list` for `fields`; nil for a list nothing here writes.
local function written(list, fields, payload)
    if list == 'grant' then
        return hand_over_note(tonumber(fields.fence), slots_of(fields.slots), tonumber(fields.deadline),
                              tonumber(fields.now), tonumber(fields.limit))
    elseif list == 'left' and fields.released == 'true' then
        return RELEASED_NOTE
    elseif list == 'left' then
        -- The claim's JSON is the metadata the claim keeps, as stored: the payload's last field.
        local json = string.match(payload, '(%{.*%})$')
        return skipped_note(fields.skipped, {since = tonumber(fields['since']), till = tonumber(fields['until']),
                                             token = fields.token, json = json})
    elseif list == 'nudge' then
        return nudge_note(fields.due ~= '-' and tonumber(fields.due) or nil)
    elseif list == 'toolarge' then
        return too_large_note(tonumber(fields.limit))
    end
    return nil
end

local failures, payloads, list, payload = 0, 0, nil, nil
for line in io.lines(arg[1]) do
    local what, rest = string.match(line, '^(%a+) (.*)$')
    if what == 'wake' then
        list, payload = string.match(rest, '^(%S+) (.*)$')
    elseif what == 'expect' then
        local fields = fields_of(rest)
        if fields.written ~= 'older' then
            payloads = payloads + 1
            local ours = written(list, fields, payload)
            if ours ~= payload then
                failures = failures + 1
                print(string.format('%s: written as %s, not %s', list, tostring(ours), payload))
            end
        end
    end
end
if payloads == 0 then
    print('no payloads read from ' .. tostring(arg[1]))
    os.exit(1)
end
print(string.format('%d payloads, %d differ', payloads, failures))
os.exit(failures > 0 and 1 or 0)
