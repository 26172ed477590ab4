#!/usr/bin/env bash
# What history (redsem log) costs the contended cycle: redsem-bench (50 clients, limit 5)
# with history off (--history 0) and on (the default, 10000 events), taking turns against one
# private redis-server, with the Redis time per script call (INFO commandstats) of each run.
#   tests/bench/history.sh [BUILD_DIR] [ROUNDS] [SECONDS]
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
seconds=${3:-8}
source "$(dirname "$0")/lib.sh"
url="redis://127.0.0.1:$port"

# Prints "cycles/s handoff_p50_ms usec_per_evalsha" for one run with history $1.
measure() {
    redis-cli -p "$port" config resetstat >/dev/null
    local result
    result=$("$build/tests/bench/redsem-bench" --url "$url" --clients 50 --limit 5 \
        --seconds "$seconds" --name "history$1" --history "$1")
    local usec
    usec=$(redis-cli -p "$port" info commandstats | tr -d '\r' |
        awk -F'[=,]' '/^cmdstat_evalsha:/ {print $6}')
    local cycles p50
    cycles=$(echo "$result" | awk -F': ' '/cycles_per_second/ {gsub(",","",$2); printf "%.0f", $2}')
    p50=$(echo "$result" | awk -F': ' '/handoff_p50_ms/ {gsub(",","",$2); printf "%.3f", $2}')
    echo "$cycles $p50 $usec"
}

printf '%-6s %-8s %10s %14s %18s\n' round history cycles/s 'handoff p50 ms' 'usec/EVALSHA'
on_total=0
off_total=0
for round in $(seq "$rounds"); do
    read -r off_cycles off_p50 off_usec < <(measure 0)
    read -r on_cycles on_p50 on_usec < <(measure 10000)
    printf '%-6s %-8s %10s %14s %18s\n' "$round" off "$off_cycles" "$off_p50" "$off_usec"
    printf '%-6s %-8s %10s %14s %18s\n' "$round" on "$on_cycles" "$on_p50" "$on_usec"
    on_total=$((on_total + on_cycles))
    off_total=$((off_total + off_cycles))
done
awk -v on="$on_total" -v off="$off_total" \
    'BEGIN { printf "cycles/s with history over without, all rounds: %.3f\n", on / off }'
