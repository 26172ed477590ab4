#!/usr/bin/env bash
# Runs the README's set-up block as written in a fresh clone, so that the front door cannot
# break unnoticed (issue 52): its packages are installed (the block's apt-get line is checked
# against dpkg, not run: it needs root and the network), its build command gives build/redsem
# and builds nothing a user does not need (no test program, no previous release), and the
# demo it names runs. ccache serves the compiler through its links in /usr/lib/ccache when
# they exist (the command itself names no launcher); CCACHE_DISABLE=1 measures a cold build.
# Prints the time the build took. CI runs it as a stage of its own (.ci/run).
# Usage: check_setup.sh SOURCE_DIR [CLONE_DIR]
set -uo pipefail
source_dir=$(cd "$1" && pwd)
clone=${2:-}
if [ -z "$clone" ]; then
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
    clone=$scratch/redsem
fi
unset REDSEM_URL REDIS_URL REDSEM_PASSWORD REDSEM_PASSWORD_FILE REDSEM_PREFIX REDSEM_LOSS_GRACE

failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }

git clone -q "$source_dir" "$clone" || { echo "FAIL git clone $source_dir"; exit 1; }
cd "$clone" || exit 1

# The README's first sh block, its continued lines joined, comments left out.
setup=$(awk '$0 == "```sh" { inside = 1; next } inside && $0 == "```" { exit } inside' README.md |
    sed -e '/^ *#/d' | sed -e ':a' -e '/\\$/N; s/\\\n//; ta')
install=$(grep -m 1 'apt-get install' <<<"$setup")
build=${install#*apt-get install*&& }
[ -n "$install" ] && [ "$build" != "$install" ] || fail "README: no 'apt-get install ... && build' line"
demo=$(grep -v 'apt-get' <<<"$setup" | grep -m 1 .)

# Every package the line names is installed here (CI installed them in its first stage).
packages=$(sed -e 's/.*apt-get install//' -e 's/&&.*//' <<<"$install" | tr ' ' '\n' | grep -v '^-' | grep .)
missing=$(for package in $packages; do
    dpkg-query -W -f='${Status}\n' "$package" 2>/dev/null | grep -q 'install ok installed' ||
        echo "$package"
done)
if [ -z "$packages" ]; then
    fail "README: no packages named"
elif [ -n "$missing" ]; then
    fail "README names packages that are not installed: $missing"
else
    ok "README's packages are installed ($(wc -w <<<"$packages") of them)"
fi

if [ -d /usr/lib/ccache ]; then
    export PATH="/usr/lib/ccache:$PATH" CCACHE_BASEDIR="$clone" CCACHE_NOHASHDIR=true
fi
start=$SECONDS
if bash -c "$build" >"$clone.build.log" 2>&1; then
    ok "set-up build as written: '$build' ($((SECONDS - start))s)"
else
    fail "set-up build '$build' failed; its log:"; tail -n 40 "$clone.build.log"
fi
if [ -x build/redsem ] && build/redsem --version >/dev/null; then
    ok "build/redsem runs"
else
    fail "no working build/redsem"
fi
built=$(find build -type f \( -name unit_tests -o -name integration_tests -o -name redsem-next \
    -o -name 'redsem-*bench' -o -name redsem-soak \) -perm -u+x; ls build/tests/redsem-0.1.0/build/redsem 2>/dev/null)
if [ -z "$built" ]; then
    ok "the set-up built no test program, benchmark or previous release"
else
    fail "the set-up built what only the tests need: $built"
fi
rm -f "$clone.build.log"

out=$(bash -c "$demo" 2>&1)
status=$?
if [ "$status" = 0 ] && [ "$(grep -c ' done$' <<<"$out")" = 5 ]; then
    ok "demo: '$demo' ran its five jobs"
else
    fail "demo '$demo': exit $status: $out"
fi

echo "$failures failed"
[ "$failures" = 0 ]
