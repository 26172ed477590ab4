-- lib/main.lua: how every script runs: run() makes the call's context, refuses the call when
-- the user may not run a command the scripts need, or while its Cluster slot migrates away,
-- runs the script's body, and ends with finish().
-- Provides: finish(call, reply), run(keys, argv, body, read); within:
--   refuse_without_permission(call).
--- @include "call"
--- @include "cluster"
--- @include "lifetime"
--- @include "history"
--
-- The build (cmake/embed_lua.cmake) ends each script sent by EVAL with
--     local function <script>_args(argv) <reads its arguments by name> end
--     local function script_body(call, KEYS, args) <the script> end
--     return run(KEYS, ARGV, script_body, <script>_args)
-- and registers each as a function of the library (FCALL) that calls run(keys, argv, <its
-- body>, <its reader>); so a script's body sees its call context as `call`, KEYS as its own
-- local (a function has no such globals), its arguments by name as `args`, and every return
-- it takes goes through finish().

-- The commands the scripts run (SCRIPT_COMMANDS, src/semaphore/protocol.hpp) are checked
-- against the user's ACL before anything is written: a script that a refusal stopped half-way
-- would leave its first writes behind (Redis does not roll a script back). INFO, XADD and
-- XTRIM run by pcall: a refusal only turns off what they give (INFO's check of the server, the
-- history). On a Redis Cluster also CLUSTER MYID and CLUSTER NODES.

-- nil when the user may run every command the scripts need, else the error that names the
-- first it may not. (Redis 6.2 has no redis.acl_check_cmd: there a refusal stops the script
-- where it happens.)
local function refuse_without_permission(call)
    local allowed = redis.acl_check_cmd
    if not allowed then
        return nil
    end
    local missing = nil
    for _, command in ipairs(SCRIPT_COMMANDS) do
        if not allowed(command) then
            missing = command
            break
        end
    end
    if not missing and call.own_epoch then
        missing = (not allowed('cluster', 'myid') and 'cluster|myid') or
                  (not allowed('cluster', 'nodes') and 'cluster|nodes') or nil
    end
    if missing then
        return redis.error_reply("NOPERM this user has no permissions to run the '" .. missing ..
                                 "' command, which redsem's scripts need")
    end
    return nil
end

-- Every script call ends here, whichever return its body takes: writes the events the call
-- logged, settles the keys' expiry (lifetime.lua), and returns its reply.
local function finish(call, reply)
    reply = write_history(call, reply)
    if call.state then
        settle_expiry(call, call.state)
    end
    return reply
end

-- Runs `body` (a script's body, a function of the call context) for KEYS `keys` and ARGV
-- `argv`, whose arguments `read` reads by name; returns its reply.
local function run(keys, argv, body, read)
    local args, wrong = read(argv)
    if not args then
        return wrong
    end
    local call = new_call(keys, argv, args)
    local refused = refuse_without_permission(call) or refuse_while_migrating(call)
    if refused then
        return refused
    end
    return finish(call, body(call, keys, args))
end
