-- Run after the modules (modules.lua, cmake/embed_lua.cmake) in one chunk by
-- check_records.sh: parses each record of tests/fixtures/records.txt (arg[1]) with
-- parse_info() and occurrence_asks(), as the scripts do, and checks what the fixture expects of
-- the keys the scripts read. Prints one line per disagreement; exits 1 when there is any.
local READS = {kind = true, slots = true, fence = true, wants = true, grace = true, since = true,
               ttl = true, keeper = true, once_per = true, at_most_once = true, attempts = true,
               collects = true, max_hold = true}
-- Read by src/semaphore/record.cpp only (tests/unit/test_stored_formats.cpp checks them).
local READ_ELSEWHERE = {host = true, pid = true, pid_of = true, user = true, label = true}

local function bool(yes)
    return yes and 'true' or 'false'
end

-- What the scripts make of record `raw`, as the fixture's keys name it.
local function read(raw)
    local info = parse_info(raw)
    if not info then
        return {kind = 'malformed'}
    end
    local asks = occurrence_asks(info.json)
    local seen = {kind = info.kind, fence = info.fence, since = int_str(info.since),
                  ttl = int_str(info.ttl),
                  keeper = bool(string.find(info.json, KEEPER_MARK, 1, true)),
                  collects = bool(string.find(info.json, '"' .. COLLECTS_FIELD .. '":true', 1, true)),
                  once_per = asks and int_str(asks.window) or '-',
                  at_most_once = bool(asks and asks.at_most_once),
                  attempts = asks and asks.attempts and int_str(asks.attempts) or '-',
                  max_hold = max_hold_of(info.json) and int_str(max_hold_of(info.json)) or '-'}
    if info.kind == 'h' then
        seen.slots = info.slots and table.concat(info.slots, ',') or 'bad'
    else
        seen.wants = info.exclusive and 'x' or tostring(weight_of(info, 0))
        seen.grace = info.grace and int_str(info.grace) or '-'
    end
    return seen
end

local failures, records, raw = 0, 0, nil
for line in io.lines(arg[1]) do
    local what, rest = string.match(line, '^(%a+) (.*)$')
    if what == 'record' then
        raw = rest
    elseif what == 'expect' then
        records = records + 1
        local seen = read(raw)
        for key, value in string.gmatch(rest, '([%w_]+)=(%S*)') do
            if READS[key] then
                if seen[key] ~= value then
                    failures = failures + 1
                    print(string.format('%s: %s is %s, not %s', raw, key, tostring(seen[key]), value))
                end
            elseif not READ_ELSEWHERE[key] then
                failures = failures + 1
                print(string.format('%s: no reader knows the key %s', raw, key))
            end
        end
    end
end
if records == 0 then
    print('no records in ' .. arg[1])
    os.exit(1)
end
print(string.format('%d records, %d disagreements', records, failures))
os.exit(failures == 0 and 0 or 1)
