#!/usr/bin/env bash
# What the scripts cost Redis in instructions, an older build against this one: the same
# workload (redsem-cost-bench: acquire and release of a free semaphore, then release with a
# hand-over, a queued acquire and a renew on 5 holders and 5 waiters) against a redis-server
# run under callgrind, counting only inside FCALL (the script's work and its reply). Steady
# to about 0.1%, where wall-clock figures on a shared machine swing by 10%.
#   tests/bench/script_instructions.sh OLD_BUILD [BUILD_DIR] [CYCLES]
set -euo pipefail
old=${1:?usage: $0 OLD_BUILD [BUILD_DIR] [CYCLES]}
build=${2:-build}
cycles=${3:-300}
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)"; exit 1; }

count() {
    local dir port pid
    dir=$(mktemp -d)
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    valgrind --tool=callgrind --toggle-collect='fcallCommand*' --callgrind-out-file="$dir/out" \
        redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
        >/dev/null 2>&1 &
    pid=$!
    until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.2; done
    REDSEM_LOSS_GRACE=0 "$1/tests/bench/redsem-cost-bench" --url "redis://127.0.0.1:$port" \
        --sizes 5 --cycles "$cycles" >/dev/null
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" || true
    callgrind_annotate "$dir/out" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
    rm -rf "$dir"
}

before=$(count "$old")
after=$(count "$build")
awk -v b="$before" -v a="$after" -v c="$cycles" 'BEGIN {
    printf "instructions inside FCALL, %d cycles: old %d, new %d, new/old %.4f\n", c, b, a, a / b }'
