-- lib/server.lua: the Redis process this call runs in, as INFO names it (run_id, replication
-- history, uptime) or, where INFO is denied, as the epoch marker's proof shows (below).
-- Provides: identify(call), marker_ran(call), info_field(text, field, pattern), PROCESS;
--   within: server_identity(denied_ok, now).
-- Reads the call's k_epoch, marker and now_us, and keeps call.me.
--- @include "call"
--- @include "state"
--
-- Without INFO (an ACL user without @dangerous), nothing a script can read names the server
-- process. There the epoch key also holds a marker (cache_marker, a random id) and the proof
-- is the script cache, which lives exactly as long as a process: the process that checked
-- the epoch last ran the marker's script, a fixed text that names the marker (see
-- src/semaphore/epoch_proof.hpp). A call that may admit runs in one transaction (MULTI) that
-- script by EVALSHA, which writes a nonce to the epoch's field proof, and then its own script,
-- told the nonce: the proof is there only where this process has the marker's script cached,
-- so it ran it before, in the call that wrote the marker by EVAL and checked the epoch then.
-- Where the process lacks it (a restart, another server, SCRIPT FLUSH), the client runs a
-- fresh marker's script by EVAL, which caches it, and its call declares that marker: a
-- possible loss, and the epoch's marker from then on. The marker script's text never changes
-- between releases, so an upgrade proves what the release before it proved. Redis 7 neither
-- persists nor replicates scripts, so a promoted replica or a restarted server lacks the
-- marker's script (what this cannot see, such as Redis 6.2, which does both: docs/DESIGN.md,
-- "Admission after lost data"). INFO, where allowed, decides.

-- The server process this code runs in, as INFO server named it to an earlier call:
-- {run, started_ms}. Only a function library (FCALL) keeps it from one call to the next: it
-- lives in the process's memory, so a restarted server (a new run_id) never has it, nor does
-- a library loaded anew (FUNCTION FLUSH, a replica's full sync); a script sent by EVAL runs
-- this file anew at each call, and so starts without it every time. A process's run_id never
-- changes while it runs, so a call that finds it here skips INFO server; the replication
-- history can change under a running process (a promotion), so INFO replication is read at
-- every call. PROCESS also keeps a sparing eviction policy last read, for a second (see
-- evicting_policy()). (The one value these modules keep between calls.)
local PROCESS = {}

-- What INFO's line "`field`:VALUE" in `text` holds, as `pattern` captures it from VALUE's
-- start; nil where the line is missing. Found by a plain search: an unanchored pattern is
-- tried at every byte of INFO's text, which made parsing INFO a large part of a call.
local function info_field(text, field, pattern)
    local at = string.find(text, '\n' .. field .. ':', 1, true)
    return at and string.match(text, pattern, at + #field + 2)
end

-- {run, replid, replid2, promoted, uptime_ms} of this server process, from INFO (or PROCESS);
-- promoted: its replid2 names a replication history it followed before this one. (A server
-- that does not report them gives '': taken as one process that never restarted nor changed
-- role.) nil when INFO is denied (a Redis 7 ACL may allow some of its sections only: either
-- section denied counts) and `denied_ok`; else a denial fails the call as INFO's error.
-- `now`: the server time (ms).
local function server_identity(denied_ok, now)
    local function denied(reply)
        if type(reply) == 'table' and reply.err then
            if denied_ok then
                return true
            end
            error(reply)
        end
        return false
    end
    local replication = redis.pcall('INFO', 'replication')
    if denied(replication) then
        return nil
    end
    if not PROCESS.run then
        local server = redis.pcall('INFO', 'server')
        if denied(server) then
            return nil
        end
        PROCESS.run = info_field(server, 'run_id', '^%x+') or ''
        PROCESS.started_ms = now - (tonumber(info_field(server, 'uptime_in_seconds', '^%d+')) or 0) * 1000
    end
    local replid2 = info_field(replication, 'master_replid2', '^%x+') or ''
    return {run = PROCESS.run,
            replid = info_field(replication, 'master_replid', '^%x+') or '',
            replid2 = replid2, promoted = string.match(replid2, '^0*$') == nil,
            uptime_ms = now - PROCESS.started_ms}
end

-- Whether the marker's script ran just before this call, in its transaction (see the top):
-- the proof it wrote holds the call's nonce. Removes the proof, once per call.
local function marker_ran(call)
    local marker = call.marker
    if marker.ran == nil then
        local proof = redis.call('HGET', call.k_epoch, 'proof')
        if proof then
            redis.call('HDEL', call.k_epoch, 'proof')
        end
        marker.ran = proof == marker.nonce
    end
    return marker.ran
end

-- This server process as the call can name it, read once per call (call.me): from INFO, or,
-- where INFO is denied, {marker = call.marker}: the epoch marker the call proves or declares
-- (nil: the call offered none). A proof is checked (and removed) here, whichever decides.
local function identify(call)
    if not call.me then
        if call.marker then
            marker_ran(call)
        end
        local now = call.now_us and math.floor(call.now_us / 1000) or server_now(call)
        call.me = server_identity(true, now) or {marker = call.marker}
    end
    return call.me
end
