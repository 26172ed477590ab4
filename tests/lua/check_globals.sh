#!/usr/bin/env bash
# Each script and the library, as the build assembles them (cmake/embed_lua.cmake writes them
# to DIR too), names no global but Redis's and Lua's own: a function used without including
# its module (`--- @include`) compiles as a global, which Redis refuses only when that line
# runs. Nor does any set a global (Redis refuses that too). Uses luac5.1 (Debian's lua5.1,
# Redis's Lua); without it it skips (77), and under CI, which installs it, fails.
# Usage: check_globals.sh DIR
set -euo pipefail
dir=$1
luac=$(command -v luac5.1 || true)
if [ -z "$luac" ]; then
    echo "luac5.1 is not installed (Debian: apt-get install lua5.1)"
    [ "${CI:-}" = true ] && exit 1
    exit 77
fi
allowed=' redis KEYS ARGV tonumber tostring type string math table ipairs pairs next select unpack error pcall assert cjson bit '
# The name a listing's GETGLOBAL or SETGLOBAL line ends with: "12 [27] GETGLOBAL 3 -1 ; tonumber".
names() {
    sed -n "s/.*$1.*; \\([A-Za-z_][A-Za-z0-9_]*\\)\$/\\1/p" | sort -u
}
status=0
count=0
for file in "$dir"/*.lua; do
    [ -e "$file" ] || break
    count=$((count + 1))
    listing=$("$luac" -p -l "$file")
    for name in $(names GETGLOBAL <<<"$listing"); do
        if [[ "$allowed" != *" $name "* ]]; then
            echo "$(basename "$file"): uses '$name', which nothing it includes defines"
            status=1
        fi
    done
    for name in $(names SETGLOBAL <<<"$listing"); do
        echo "$(basename "$file"): sets the global '$name'"
        status=1
    done
done
if [ "$count" -eq 0 ]; then
    echo "no scripts in $dir"
    exit 1
fi
[ "$status" -eq 0 ] && echo "$count scripts: no global but Redis's and Lua's own"
exit $status
