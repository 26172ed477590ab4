#!/usr/bin/env bash
# docs/ARCHITECTURE.md's source map is the tree's (issue 53): a row for every folder of src/
# and no row for a folder that is gone, every module of lua/lib/ in the lua/ row's list and
# nothing else there, no file of lua/ over 300 lines, and every file the map names in
# backquotes (`run.cpp`, `cmake/embed_lua.cmake`) found in the tree. Prints each difference.
# Usage: check_architecture.sh SOURCE_DIR
set -uo pipefail
cd "$1" || exit 1
map=docs/ARCHITECTURE.md
failures=0
differ() { # WHAT IN_TREE IN_MAP: each line of either that the other lacks
    local only_tree only_map
    only_tree=$(comm -23 <(sort -u <<<"$2" | grep .) <(sort -u <<<"$3" | grep .))
    only_map=$(comm -13 <(sort -u <<<"$2" | grep .) <(sort -u <<<"$3" | grep .))
    [ -n "$only_tree" ] && { echo "FAIL $1 in the tree, not in $map: $(echo $only_tree)"; failures=$((failures + 1)); }
    [ -n "$only_map" ] && { echo "FAIL $1 in $map, not in the tree: $(echo $only_map)"; failures=$((failures + 1)); }
    [ -z "$only_tree$only_map" ] && echo "ok   $1: $(grep -c . <<<"$2")"
}

# The rows of the source map's table: "| `src/cli/` | ...".
tree_folders=$(find src -mindepth 1 -maxdepth 1 -type d -printf '%f\n')
map_folders=$(sed -n 's/^| `src\/\([a-z_]*\)\/` |.*/\1/p' "$map")
differ "folders of src/" "$tree_folders" "$map_folders"

# The lua/ row: the backquoted words from "modules they share:" to ". Each script", leaving
# out what is in parentheses (what each module holds).
tree_modules=$(find lua/lib -name '*.lua' -printf '%f\n' | sed 's/\.lua$//')
map_modules=$(grep '^| `lua/` |' "$map" | sed -e 's/.*modules they share://' -e 's/\. Each script.*//' |
    sed -e 's/()//g' -e 's/([^()]*([^()]*)[^()]*)//g' -e 's/([^()]*)//g' | grep -o '`[a-z_]*`' | tr -d '`')
differ "modules of lua/lib/" "$tree_modules" "$map_modules"

# Rooms of a readable size: no file of lua/ over 300 lines (split it by the stories it holds).
long=$(find lua -name '*.lua' -exec awk 'END { if (NR > 300) print FILENAME " (" NR ")" }' {} \;)
if [ -n "$long" ]; then
    echo "FAIL files of lua/ over 300 lines: $(echo $long)"
    failures=$((failures + 1))
else
    echo "ok   no file of lua/ over 300 lines"
fi

# Files named in backquotes, by their name or their path.
files=$(git ls-files 2>/dev/null || find . -type f | sed 's|^\./||')
missing=""
for named in $(grep -o '`[A-Za-z0-9_./-]*\.\(cpp\|hpp\|lua\|sh\|cmake\|md\)`' "$map" | tr -d '`' | sort -u); do
    grep -q -e "^$named\$" -e "/$named\$" <<<"$files" || missing="$missing $named"
done
if [ -n "$missing" ]; then
    echo "FAIL files named in $map that the tree lacks:$missing"
    failures=$((failures + 1))
else
    echo "ok   every file $map names exists"
fi
exit $((failures > 0))
