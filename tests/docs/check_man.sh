#!/usr/bin/env bash
# Keeps man/redsem.1 clean and in step with the binary:
# - mandoc -T lint and man --warnings report nothing;
# - every long option that any `--help` prints appears in the man page, and every long option
#   the man page names exists in some `--help`.
# Usage: check_man.sh REDSEM_BINARY MAN_PAGE
set -euo pipefail
redsem=$1
page=$2
status=0

lint=$(mandoc -T lint -W warning "$page" 2>&1 || true)
if [ -n "$lint" ]; then
    echo "mandoc -T lint found:"; echo "$lint"; status=1
fi
# At the widths terminals have: a line that cannot be adjusted at 100 columns was once missed.
for width in 80 100 120; do
    warnings=$(LC_ALL=C.UTF-8 MANWIDTH=$width man --warnings -E UTF-8 -l "$page" 2>&1 >/dev/null || true)
    if [ -n "$warnings" ]; then
        echo "man --warnings found at MANWIDTH=$width:"; echo "$warnings"; status=1
    fi
done

# The subcommands as `redsem --help` lists them: each has its section under COMMANDS.
subcommands=$("$redsem" --help | sed -n '/^Subcommands:/,$p' | grep -oE '^  [a-z]+' | tr -d ' ')
for sub in $subcommands; do
    grep -q "^\.SS \"redsem $sub " "$page" || { echo "no section for subcommand $sub"; status=1; }
done
help_options=$(for sub in "" $subcommands; do
    "$redsem" $sub --help
done | grep -o -- '--[a-z][a-z-]*' | sort -u)
page_options=$(sed 's/\\-/-/g' "$page" | grep -o -- '--[a-z][a-z-]*' | sort -u)
missing=$(comm -23 <(echo "$help_options") <(echo "$page_options"))
unknown=$(comm -13 <(echo "$help_options") <(echo "$page_options"))
if [ -n "$missing" ]; then
    echo "options in --help but not in the man page:"; echo "$missing"; status=1
fi
if [ -n "$unknown" ]; then
    echo "options in the man page that the binary does not have:"; echo "$unknown"; status=1
fi

# Every exit code of the published table (printed by --help) is listed under EXIT STATUS.
help_codes=$("$redsem" --help | tr '\n' ' ' | grep -o 'Exit status:[^;]*;' | grep -oE '[0-9]+' | sort -u)
page_codes=$(sed -n '/^\.SH EXIT STATUS/,/^\.SH /p' "$page" | grep -oE '^\.B [0-9]+$' | grep -oE '[0-9]+' | sort -u)
missing_codes=$(comm -23 <(echo "$help_codes") <(echo "$page_codes"))
if [ -z "$help_codes" ] || [ -n "$missing_codes" ]; then
    echo "exit codes in --help but not under EXIT STATUS:"; echo "${missing_codes:-(none found in --help)}"; status=1
fi

[ "$status" -eq 0 ] && echo "man page clean; $(echo "$help_options" | wc -l) options and $(echo "$help_codes" | wc -l) exit codes in step"
exit "$status"
