#!/usr/bin/env bash
# Five jobs share a semaphore of limit 2: at most two run at once, each in its own slot.
# Uses $REDSEM_URL if set; otherwise starts a private redis-server on a Unix socket in a
# temporary directory and stops it at the end.
set -euo pipefail
redsem=${REDSEM:-$(dirname "$0")/../build/redsem}

if [ -z "${REDSEM_URL:-}" ]; then
    dir=$(mktemp -d)
    redis-server --port 0 --unixsocket "$dir/redis.sock" --save "" --appendonly no \
        --dir "$dir" --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
    trap 'kill "$(cat "$dir/redis.pid")"; rm -rf "$dir"' EXIT
    export REDSEM_URL="unix://$dir/redis.sock"
    # A brand-new Redis has lost no lease: skip the wait after a possible loss of data.
    export REDSEM_LOSS_GRACE=0
    until [ -S "$dir/redis.sock" ]; do sleep 0.05; done
fi

job() {
    local lease token slot
    lease=$("$redsem" acquire demo -n 2 --ttl 30s --label "job $1" --json)
    token=$(sed 's/.*"token":"\([0-9a-f]*\)".*/\1/' <<<"$lease")
    slot=$(sed 's/.*"slot":\([0-9]*\).*/\1/' <<<"$lease")
    echo "$(date +%T.%N | cut -c1-12) job $1 runs in slot $slot"
    sleep 1
    "$redsem" release demo "$token"
    echo "$(date +%T.%N | cut -c1-12) job $1 done"
}
for i in 1 2 3 4 5; do job "$i" & sleep 0.05; done
wait
