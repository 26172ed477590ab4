#!/usr/bin/env bash
# CLI11 is header-only, and each file that includes it takes 10-15 s longer to compile (the
# validators it defines in every translation unit are generated in each): of the binary's
# sources, only the ones that declare or parse options include it (issue 52; the subcommands'
# own files get their arguments typed, src/cli/command_args.hpp), and the option table. Reads what the compiler
# itself recorded: the dependency files of redsem_core's objects. A generator that keeps no
# such files (Ninja folds them into its log) skips (77); under CI, which uses make, that
# is a failure instead.
# Usage: check_cli11_files.sh OBJECT_DIR (CMakeFiles/redsem_core.dir of the build)
set -euo pipefail
objects=$1
# option_table.cpp reads the declarations back for the completions (src/completions/).
allowed=(src/cli/app.cpp src/cli/command_options.cpp src/cli/help_format.cpp src/cli/option_table.cpp
    src/cli/pre_parse.cpp)

depfiles=$(find "$objects" -name '*.o.d' | sort)
if [ -z "$depfiles" ]; then
    echo "no dependency files under $objects (a generator other than make?)"
    [ "${CI:-}" = true ] && exit 1
    exit 77
fi
including=$(grep -l 'CLI/CLI\.hpp' $depfiles | sed -e "s|^$objects/||" -e 's|\.o\.d$||' || true)
unexpected=$(comm -23 <(echo "$including" | grep . | sort) <(printf '%s\n' "${allowed[@]}" | sort))
if [ -n "$unexpected" ]; then
    echo "these files include CLI11 (directly or through a header); declare their options in"
    echo "src/cli/command_options.cpp and keep CLI11 out of them:"
    echo "$unexpected" | sed 's/^/  /'
    exit 1
fi
echo "$(echo "$depfiles" | wc -l) objects; CLI11 only in: $(echo $including)"
