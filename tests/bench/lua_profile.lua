-- lua_profile.lua: where the scripts' Lua work goes, function by function, in the contended
-- cycle (a release that hands the slot to the head of the queue, and the released caller
-- queueing again at the back). Prints numbers; asserts nothing.
--
--   lua5.1 tests/bench/lua_profile.lua LIBRARY.lua PORT [CYCLES]
--
-- LIBRARY.lua is the Functions library the build generates (build/lua/library.lua). It runs
-- here in lua5.1, Redis's Lua, with each redis.call sent to a private redis-server on
-- 127.0.0.1:PORT (flushed first) by a small RESP client over LuaSocket (Debian's
-- lua-socket): the same script, the same data, one call at a time. A count hook samples the
-- interpreter every SAMPLE virtual-machine instructions, and charges each sample to the
-- function running (self) and to every function on the stack (inclusive). So the figures
-- count the Lua work alone: the commands' own work inside Redis, and the C functions a
-- script calls (acl_check_cmd, string.format, ...), are not in them.
local socket = require('socket')

local library_file, port, cycles = arg[1], tonumber(arg[2]), tonumber(arg[3] or '200')
assert(library_file and port, 'usage: lua5.1 lua_profile.lua LIBRARY.lua PORT [CYCLES]')
local SAMPLE = 10

-- A RESP2 client: replies as Redis hands them to a script.
local connection = assert(socket.connect('127.0.0.1', port))
connection:settimeout(10)

local function read_reply()
    local line = assert(connection:receive('*l'))
    local kind, rest = string.sub(line, 1, 1), string.sub(line, 2)
    if kind == '+' then
        return {ok = rest}
    elseif kind == '-' then
        return {err = rest}
    elseif kind == ':' then
        return tonumber(rest)
    elseif kind == '$' then
        local size = tonumber(rest)
        if size < 0 then
            return false
        end
        local data = assert(connection:receive(size + 2))
        return string.sub(data, 1, size)
    elseif kind == '*' then
        local count = tonumber(rest)
        if count < 0 then
            return false
        end
        local items = {}
        for i = 1, count do
            items[i] = read_reply()
        end
        return items
    end
    error('unexpected reply: ' .. line)
end

local function send(...)
    local parts = {'*' .. select('#', ...) .. '\r\n'}
    for i = 1, select('#', ...) do
        local value = select(i, ...)
        if type(value) == 'number' then
            value = string.format('%.17g', value)
            if string.find(value, '^%-?%d+$') == nil and math.floor(tonumber(value)) == tonumber(value) then
                value = string.format('%d', tonumber(value))
            end
        end
        value = tostring(value)
        parts[#parts + 1] = '$' .. #value .. '\r\n' .. value .. '\r\n'
    end
    assert(connection:send(table.concat(parts)))
    return read_reply()
end

-- What the script sees of the server.
local functions = {}
redis = {
    call = function(...)
        local reply = send(...)
        if type(reply) == 'table' and reply.err then
            error(reply)
        end
        return reply
    end,
    pcall = function(...) return send(...) end,
    error_reply = function(text) return {err = text} end,
    status_reply = function(text) return {ok = text} end,
    acl_check_cmd = function() return true end,
    register_function = function(spec) functions[spec.function_name] = spec.callback end,
}

local text = assert(io.open(library_file)):read('*a')
text = string.gsub(text, '^#![^\n]*\n', '')
local library = assert(loadstring(text, '=library'))
library()
local prefix = nil
for name in pairs(functions) do
    prefix = prefix or string.match(name, '^(.*)_acquire$')
end
assert(prefix, 'no acquire function in ' .. library_file)

-- The contended cycle on semaphore q, limit 1: a holder and one waiter; the holder releases
-- (its slot goes to the waiter), then queues again with a new token.
local KEYS = {}
for _, part in ipairs({'state', 'holders', 'info', 'queue', 'alive', 'slots'}) do
    KEYS[#KEYS + 1] = 'redsem:{q}:' .. part
end
KEYS[7], KEYS[8] = 'redsem:epoch', 'redsem:{q}:log'
local META = '{"host":"bench","label":"","pid":1,"pid_of":"caller","user":"bench"}'
local serial = 0
local function new_token()
    serial = serial + 1
    return string.format('%032x', serial)
end
local function acquire(token)
    return functions[prefix .. '_acquire'](KEYS, {'redsem:{q}:wake:', '', 'token', token, 'limit', '1',
        'ttl_ms', '60000', 'mode', 'wait', 'liveness_ms', '600000', 'meta', META, 'known', '0',
        'grace_ms', '0', 'wants', '1', 'first_answer_ms', '', 'once_per_ms', '', 'at_most_once', '',
        'attempts', '', 'keeper', '', 'max_hold_ms', '', 'collects', '1', 'supersede', '',
        'max_waiting', '', 'flags', '4'})
end
local function release(token)
    return functions[prefix .. '_release'](KEYS, {'redsem:{q}:wake:', '', 'token', token, 'who', 'own',
        'status', '0', 'once', '', 'signal', '0', 'timed_out_ms', '', 'flags', '4'})
end

send('FLUSHALL')
local holder, waiter = new_token(), new_token()
assert(acquire(holder)[2] == 'ok', 'the first acquire got no slot')
assert(acquire(waiter)[2] == 'wait', 'the second acquire did not queue')
local function cycle()
    assert(release(holder)[2] == 'released', 'a release failed')
    send('DEL', 'redsem:{q}:wake:' .. waiter) -- the waiter collects its grant (BLPOP)
    local next_token = new_token()
    assert(acquire(next_token)[2] == 'wait', 'a newcomer did not queue')
    holder, waiter = waiter, next_token
end
for _ = 1, 20 do
    cycle() -- warm up: the first calls read INFO server, the policy, ...
end

local self_count, inclusive, names, total = {}, {}, {}, 0
local function where(info)
    return info.short_src .. ':' .. info.linedefined
end
local here = debug.getinfo(1, 'S').short_src
debug.sethook(function()
    local info = debug.getinfo(2, 'Sn')
    if not info or info.what == 'C' or info.short_src == here then
        return -- this file's own work: the RESP client stands for Redis's C code
    end
    total = total + 1
    local at = where(info)
    self_count[at] = (self_count[at] or 0) + 1
    local seen = {}
    for level = 2, 40 do
        local frame = debug.getinfo(level, 'Sn')
        if not frame then
            break
        end
        if frame.what ~= 'C' and frame.short_src ~= here then
            local key = where(frame)
            if not seen[key] then
                seen[key] = true
                inclusive[key] = (inclusive[key] or 0) + 1
                if frame.name and not names[key] then
                    names[key] = frame.name
                end
            end
        end
    end
end, '', SAMPLE)
for _ = 1, cycles do
    cycle()
end
debug.sethook()

-- The library's line numbers named by its function, as the generated file has them.
local rows = {}
for key, count in pairs(inclusive) do
    rows[#rows + 1] = {key = key, inclusive = count, self = self_count[key] or 0}
end
table.sort(rows, function(a, b) return a.inclusive > b.inclusive end)
print(string.format('VM instructions per cycle (sampled every %d): %.0f', SAMPLE,
                    total * SAMPLE / cycles))
print(string.format('%-28s %-34s %12s %12s', 'function', 'defined at', 'inclusive', 'self'))
for i = 1, math.min(#rows, 60) do
    local row = rows[i]
    print(string.format('%-28s %-34s %12.0f %12.0f', names[row.key] or '?', row.key,
                        row.inclusive * SAMPLE / cycles, row.self * SAMPLE / cycles))
end
