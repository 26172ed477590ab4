#!/usr/bin/env bash
# Runs redis-benchmark's PING and redsem-bench side by side against one private redis-server
# (loopback, a free port) and prints both with their ratio.
#   tests/bench/compare.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
build=${1:-build}
seconds=${2:-10}
source "$(dirname "$0")/lib.sh"

ping=$(redis-benchmark -p "$port" -c 50 -n 200000 -t ping --csv | awk -F'","' '/PING_MBULK/ {print $2}')
echo "redis-benchmark -q -c 50 -n 200000 -t ping (PING_MBULK): $ping requests/s"
result=$("$build/tests/bench/redsem-bench" --url "redis://127.0.0.1:$port" --clients 50 --limit 5 --seconds "$seconds")
echo "$result"
cycles=$(echo "$result" | awk -F': ' '/cycles_per_second/ {gsub(",","",$2); print $2}')
awk -v c="$cycles" -v p="$ping" 'BEGIN { printf "cycles/s over PING/s: %.3f (target >= 0.35)\n", c / p }'
