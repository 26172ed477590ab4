#!/usr/bin/env bash
# A fixture of tests/fixtures held to the Lua that reads or writes it, under lua5.1 (Redis's
# Lua; Debian's lua5.1): the modules as the build assembles them (DIR/modules.lua,
# cmake/embed_lua.cmake) and CHECK (default tests/lua/check_records.lua: the records as
# lua/lib/records.lua and lib/occurrence.lua read them; check_wakes.lua: the wake payloads as
# lib/queue.lua writes them; check_events.lua: the history's events as lib/history.lua's
# formatters write them) in one chunk, since the modules' functions are locals. Without
# lua5.1 it skips (77), and under CI, which installs it, fails.
# Usage: check_records.sh DIR FIXTURE [CHECK]
set -euo pipefail
dir=$1
fixture=$2
check=${3:-$(dirname "$0")/check_records.lua}
lua=$(command -v lua5.1 || true)
if [ -z "$lua" ]; then
    echo "lua5.1 is not installed (Debian: apt-get install lua5.1)"
    [ "${CI:-}" = true ] && exit 1
    exit 77
fi
chunk=$(mktemp)
trap 'rm -f "$chunk"' EXIT
# The check in a function of its own: Lua 5.1 allows a function 200 locals in scope at once,
# and the modules take most of the chunk's.
{
    cat "$dir/modules.lua"
    echo "(function(...)"
    cat "$check"
    echo "end)(...)"
} >"$chunk"
"$lua" "$chunk" "$fixture"
