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
differ=()
for file in $files; do
    "$format" --dry-run --Werror "$file" >/dev/null 2>&1 || differ+=("$file")
done
if [ ${#differ[@]} -gt 0 ]; then
    echo "not as .clang-format writes them (fix: clang-format-14 -i FILE...):"
    printf '  %s\n' "${differ[@]}"
    exit 1
fi
echo "$(echo "$files" | wc -w) C++ files, all formatted"
