-- lib/main.lua: how every script runs: run() makes the call's context, refuses the call while
-- its Cluster slot migrates away, runs the script's body, and ends with finish().
-- Provides: finish(call, reply), run(keys, argv, body).
-- Needs: call.lua (new_call()), cluster.lua (refuse_while_migrating()), history.lua
--   (write_history()).
--
-- The build (cmake/embed_lua.cmake) ends each script with
--     local function script_body(call) <the script> end
--     return run(KEYS, ARGV, script_body)
-- so a script's body sees its call context as `call`, and every return it takes goes
-- through finish().

-- Every script call ends here, whichever return its body takes: writes the events the call
-- logged, and returns its reply.
local function finish(call, reply)
    return write_history(call, reply)
end

-- Runs `body` (a script's body, a function of the call context) for KEYS `keys` and ARGV
-- `argv`; returns its reply.
local function run(keys, argv, body)
    local call = new_call(keys, argv)
    local refused = refuse_while_migrating(call)
    if refused then
        return refused
    end
    return finish(call, body(call))
end
