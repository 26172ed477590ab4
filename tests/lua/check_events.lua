-- Run after the modules (modules.lua, cmake/embed_lua.cmake) in one chunk by
-- check_records.sh: writes each event of tests/fixtures/events.txt (arg[1]) again with
-- lib/history.lua's formatters, from its parts, and checks that it is the value the fixture
-- holds (which src/semaphore/history.cpp is held to read), and that the parts are the ones its
-- "expect" line names. Values kept as stored (raw=true) are nobody's to write. Prints one line
-- per disagreement; exits 1 when there is any.
local ENTRY = {acquired = true, queued = true, released = true, expired = true, unclaimed = true,
               lost = true, left = true, dropped = true, gc = true, skipped = true}

local function number(text)
    return text ~= '-' and tonumber(text) or nil
end

-- The value the scripts write for `kind` with the parts of `value`, and those parts by the
-- fixture's names; nil for a kind no formatter writes.
local function written(kind, value)
    if ENTRY[kind] then
        local token, slots, fence, duration, json = string.match(value, '^(%S+) (%S+) (%S+) (%S+) (.*)$')
        if not token then
            return nil
        end
        return entry_value(token, slots, fence, number(duration), json),
               {token = token, slots = slots, fence = fence, duration = duration}
    elseif kind == 'limit' then
        local from, to = string.match(value, '^(%S+) (%S+)$')
        return limit_value(number(from), tonumber(to)), {from = from, to = to}
    elseif kind == 'closed' then
        local cause, lost_at, opens_at = string.match(value, '^(%S+) (%S+) (%S+)$')
        return closed_value(cause, tonumber(lost_at), tonumber(opens_at)),
               {cause = cause, lost_at = lost_at, opens_at = opens_at}
    elseif kind == 'paused' then
        local until_ms, json = string.match(value, '^(%S+) (.*)$')
        return paused_value(number(until_ms) or 0, json), {['until'] = until_ms}
    elseif kind == 'resumed' then
        local paused_for, json = string.match(value, '^(%S+) (.*)$')
        return resumed_value(tonumber(paused_for), json), {duration = paused_for}
    end
    return nil
end

local failures, events, kind, value = 0, 0, nil, nil
local function fail(text)
    failures = failures + 1
    print(text)
end
for line in io.lines(arg[1]) do
    local what, rest = string.match(line, '^(%a+) (.*)$')
    if what == 'event' then
        kind, value = string.match(rest, '^(%S+) (.*)$')
    elseif what == 'expect' and not string.find(rest, 'raw=true', 1, true) then
        events = events + 1
        local ours, parts = written(kind, value)
        if ours ~= value then
            fail(string.format('%s: written as %s, not %s', kind, tostring(ours), value))
        end
        for key, wanted in string.gmatch(rest, '([%w_]+)=(%S*)') do
            if parts and parts[key] and parts[key] ~= wanted then
                fail(string.format('%s %s: %s is %s, not %s', kind, value, key, parts[key], wanted))
            end
        end
    end
end
if events == 0 then
    print('no events read from ' .. tostring(arg[1]))
    os.exit(1)
end
print(string.format('%d events, %d differ', events, failures))
os.exit(failures > 0 and 1 or 0)
