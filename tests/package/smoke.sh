#!/usr/bin/env bash
# What a user of the installed package does first, against a private redis-server: the
# installed binary (default /usr/bin/redsem) in a shell script, as the README shows it.
# Usage: smoke.sh [REDSEM]
set -euo pipefail
redsem=${1:-/usr/bin/redsem}
dir=$(mktemp -d)
redis-server --port 0 --unixsocket "$dir/r.sock" --save "" --appendonly no --dir "$dir" \
    --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
trap 'kill "$(cat "$dir/redis.pid")" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -S "$dir/r.sock" ] && break; sleep 0.05; done
export REDSEM_URL="unix://$dir/r.sock" REDSEM_LOSS_GRACE=0
fail() { echo "smoke: FAIL: $*" >&2; exit 1; }

# run takes the command's options as the command's.
[ "$("$redsem" run job echo -n 3)" = 3 ] || fail "run job echo -n 3"
[ "$("$redsem" limit job)" = 1 ] || fail "the limit of job changed"
# Live limits.
"$redsem" limit pool 2
[ "$("$redsem" limit pool)" = 2 ] || fail "limit pool 2"
# A slot held for the life of a process, released when it ends.
sh -c "$redsem acquire pool --while-pid \$\$ > '$dir/token'; $redsem status pool > '$dir/status'"
grep -q '/2 held' "$dir/status" || fail "status while held"
for _ in $(seq 100); do
    [ "$("$redsem" status pool --json | grep -o '"held":[0-9]*')" = '"held":0' ] && break
    sleep 0.05
done
[ "$("$redsem" status pool --json | grep -o '"held":[0-9]*')" = '"held":0' ] ||
    fail "the slot outlived its process"
# 127 before queueing.
set +e
"$redsem" run pool no-such-command-for-redsem 2>/dev/null
[ $? -eq 127 ] || fail "run of a missing command"
set -e
man -w redsem >/dev/null
echo "smoke: the installed redsem works"
