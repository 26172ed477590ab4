#!/usr/bin/env bash
# Every C++ file of the tree is as .clang-format writes it (clang-format 14, Debian's
# clang-format-14). Prints the files that differ and how to fix them. Without clang-format 14
# it skips (77); under CI, which installs it, that is a failure instead.
# Usage: check_format.sh SOURCE_DIR
set -euo pipefail
cd "$1"
format=$(command -v clang-format-14 || true)
if [ -z "$format" ]; then
    echo "clang-format-14 is not installed (Debian: apt-get install clang-format-14)"
    [ "${CI:-}" = true ] && exit 1
    exit 77
fi
files=$(git ls-files '*.cpp' '*.hpp' 2>/dev/null || find src tests -name '*.cpp' -o -name '*.hpp')
# One clang-format for all the files (one per file costs a minute on a loaded machine).
# shellcheck disable=SC2086
if report=$("$format" --dry-run --Werror $files 2>&1); then
    echo "$(echo "$files" | wc -w) C++ files, all formatted"
    exit 0
fi
echo "not as .clang-format writes them (fix: clang-format-14 -i FILE...):"
echo "$report" | grep -oE '^[^: ]+:[0-9]+:[0-9]+: (warning|error)' | cut -d: -f1 | sort -u |
    sed 's/^/  /'
exit 1
