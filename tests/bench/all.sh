#!/usr/bin/env bash
# Every performance figure of redsem, each side by side with what it is compared to, against
# one private redis-server (loopback, a free port). Prints four sections with their ratios:
#   1. startup: `redsem run bench -- true` against `flock FILE true` (hyperfine), for the
#      default build and, when given, a REDSEM_STATIC=ON build;
#   2. contended throughput: redsem-bench (50 clients, limit 5) against redis-benchmark's PING
#      and npm's redis-semaphore (when node is present), with Redis calls and time per cycle;
#   3. idle waiters: commands/s and Redis CPU of 100 and of 10,000 waiting redsem clients,
#      and of 100 redis-semaphore ones;
#   4. scale: each script's Redis time and round trip at 10 and at 10,000 holders and waiters.
#
#   tests/bench/all.sh [BUILD_DIR] [STATIC_BUILD_DIR]
#
# RUNS (hyperfine runs, default 300), CONTENDED_SECONDS (10) and IDLE_SECONDS (120) set the
# lengths (IDLE_SECONDS=0 leaves section 3 out). A waiter far back refreshes about every
# 1.5s + (P-9)s, at most every 15 minutes, so IDLE_SECONDS below 960 undercounts the far end of
# the 10,000: use 1000 for that figure.
set -euo pipefail
build=${1:-build}
static_build=${2:-}
runs=${RUNS:-300}
contended_seconds=${CONTENDED_SECONDS:-10}
idle_seconds=${IDLE_SECONDS:-120}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
url="redis://127.0.0.1:$port"
ulimit -n "$(ulimit -Hn)"

field() { # field NAME < JSON: a number from redsem-bench's or the idle bench's JSON
    python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

echo "== 1. Startup: redsem run bench -- true against flock FILE true (hyperfine medians)"
commands=("flock $dir/lock true" "$build/redsem run bench -- true")
if [ -n "$static_build" ]; then
    commands+=("$static_build/redsem run bench -- true")
fi
REDSEM_URL=$url hyperfine -N --warmup 20 --runs "$runs" --export-json "$dir/startup.json" \
    "${commands[@]}" >/dev/null
python3 - "$dir/startup.json" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
flock = results[0]["median"]
print(f"flock: {flock * 1e3:.2f} ms")
for name, result in zip(["default build", "REDSEM_STATIC build"], results[1:]):
    target = 1.3 if name == "default build" else 1.0
    print(f"redsem run, {name}: {result['median'] * 1e3:.2f} ms, "
          f"{result['median'] / flock:.2f}x flock (target <= {target})")
PY

echo
echo "== 2. Contended throughput: 50 clients, limit 5"
ping=$(redis-benchmark -p "$port" -c 50 -n 200000 -t ping --csv | awk -F'","' '/PING_MBULK/ {print $2}')
echo "redis-benchmark -c 50 -n 200000 -t ping: $ping requests/s"
redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
bench=$("$build/tests/bench/redsem-bench" --url "$url" --clients 50 --limit 5 --seconds "$contended_seconds")
cycles=$(field cycles_per_second <<<"$bench")
total_cycles=$(field cycles <<<"$bench")
echo "redsem-bench: $(printf '%.0f' "$cycles") cycles/s, hand-off p50 $(field handoff_p50_ms <<<"$bench") ms," \
    "p99 $(field handoff_p99_ms <<<"$bench") ms, at most $(field max_concurrent_holders <<<"$bench") holders at once"
redis-cli -p "$port" INFO commandstats | tr -d '\r' | awk -F'[:,=]' -v cycles="$total_cycles" '
    /^cmdstat_/ && $1 !~ /config|info/ {
        name = substr($1, 9); calls[name] = $3; usec[name] = $5
        if (name != "evalsha" && name != "blpop") { inner += $3 }
        total_usec += $5
    }
    END {
        printf "per cycle: %.2f EVALSHA (%.1f us each, inner calls included), %.2f BLPOP, %.1f calls inside scripts, %.1f us of Redis time\n",
            calls["evalsha"] / cycles, usec["evalsha"] / calls["evalsha"], calls["blpop"] / cycles,
            inner / cycles, total_usec / cycles
    }'
echo "redsem over PING: $(ratio "$cycles" "$ping") (target >= 0.35)"
peer=$("$here/peers/run.sh" contended --url "$url" --clients 50 --limit 5 --seconds "$contended_seconds")
echo "npm redis-semaphore: $peer" | tr '\n' ' '
echo
if peer_cycles=$(awk '/^cycles_per_second:/ {print $2}' <<<"$peer") && [ -n "$peer_cycles" ]; then
    echo "redsem over redis-semaphore: $(ratio "$cycles" "$peer_cycles") (target >= 1.0)"
fi

echo
echo "== 4. Scale: each script at 10 and at 10,000 holders and waiters"
"$build/tests/bench/redsem-cost-bench" --url "$url" --sizes 10,10000 --cycles 1000 >"$dir/cost.json"
python3 - "$dir/cost.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def line(label, name, s):
    print(f"{label}, {name:8}: {s['redis_us_p50']:6.1f} us in Redis (p50), "
          f"{s['redis_calls_per_script']:4.1f} calls inside, round trip {s['round_trip_us_p50']:6.1f} us")
for size in d["sizes"]:
    for name, s in size["scripts"].items():
        line(f"{size['holders']:>6} holders and waiters", name, s)
for name, s in d["free"]["scripts"].items():
    line("      nobody waiting", name, s)
for name, g in d["largest_over_smallest"].items():
    print(f"10,000 over 10, {name}: Redis time {g['redis_us_p50']:.2f}x, "
          f"round trip {g['round_trip_us_p50']:.2f}x (target <= 2)")
PY

if [ "$idle_seconds" = 0 ]; then
    exit 0
fi
echo
echo "== 3. Idle waiters (window ${idle_seconds}s)"
for waiters in 100 10000; do
    idle=$("$build/tests/bench/redsem-idle-bench" --url "$url" --waiters "$waiters" \
        --seconds "$idle_seconds" --baseline-seconds 60 --name "idle$waiters")
    printf 'redsem, %s waiters: %.1f commands/s, %.2f%% of a core (%s connections that only connect: %.2f%%)\n' \
        "$waiters" "$(field commands_per_second <<<"$idle")" "$(field redis_cpu_percent <<<"$idle")" \
        "$waiters" "$(python3 -c 'import json, sys; print(json.load(sys.stdin)["connections_alone"]["redis_cpu_percent"])' <<<"$idle")"
    if [ "$waiters" = 100 ]; then
        redsem_100=$(field commands_per_second <<<"$idle")
    fi
done
peer=$("$here/peers/run.sh" idle --url "$url" --waiters 100 --seconds 10)
echo "npm redis-semaphore, 100 waiters: $peer" | tr '\n' ' '
echo
if peer_commands=$(awk '/^commands_per_second:/ {print $2}' <<<"$peer") && [ -n "$peer_commands" ]; then
    echo "redis-semaphore's commands over redsem's, 100 waiters: $(ratio "$peer_commands" "$redsem_100")x (target >= 100)"
fi
echo "(targets for 10,000 waiters: <= 200 commands/s and <= 2% of a core)"
