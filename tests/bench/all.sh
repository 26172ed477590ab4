#!/usr/bin/env bash
# Every performance figure of redsem, each side by side with what it is compared to, against
# one private redis-server (loopback, a free port). Prints four sections with their ratios:
#   1. startup: `redsem run bench -- true` against `flock FILE true` (hyperfine), for the
#      default build and, when given, a REDSEM_STATIC=ON build;
#   2. contended throughput: redsem-bench (50 clients, limit 5), its scripts as functions
#      (FCALL) and by EVALSHA, against redis-benchmark's PING and npm's redis-semaphore (when
#      node is present), with Redis calls and time per cycle;
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
# Redis's time per cycle, from INFO commandstats over `cycles` cycles (less CONFIG and INFO
# calls from outside): every command's time, a script's inner calls counted twice (within the
# script's time and as themselves), for redsem and redis-semaphore alike, as the issue that set
# the targets measured it.
redis_us_per_cycle() {
    redis-cli -p "$port" INFO commandstats | tr -d '\r' | awk -F'[:,=]' -v cycles="$1" '
        /^cmdstat_/ && $1 !~ /config|info/ { total += $5 } END { printf "%.1f", total / cycles }'
}
# Redis's own CPU time (user + system, INFO cpu) in microseconds: what bounds its throughput,
# network and parsing included, each command counted once.
redis_cpu_us() {
    redis-cli -p "$port" INFO cpu | tr -d '\r' | awk -F: '
        /^used_cpu_(user|sys):/ { total += $2 } END { printf "%.0f", total * 1e6 }'
}
for way in FCALL EVALSHA; do
    redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
    cpu_before=$(redis_cpu_us)
    bench=$("$build/tests/bench/redsem-bench" --url "$url" --clients 50 --limit 5 \
        --seconds "$contended_seconds" $([ "$way" = EVALSHA ] && echo --eval) --name "bench$way")
    total_cycles=$(field cycles <<<"$bench")
    cpu_us=$(awk -v a="$cpu_before" -v b="$(redis_cpu_us)" -v n="$total_cycles" \
        'BEGIN { printf "%.1f", (b - a) / n }')
    printf -v "cpu_us_$way" '%s' "$cpu_us"
    printf -v "cycles_$way" '%s' "$(field cycles_per_second <<<"$bench")"
    printf -v "redis_us_$way" '%s' "$(redis_us_per_cycle "$total_cycles")"
    echo "redsem-bench, scripts by $way: $(printf '%.0f' "$(field cycles_per_second <<<"$bench")") cycles/s," \
        "hand-off p50 $(field handoff_p50_ms <<<"$bench") ms (target <= 0.35)," \
        "p99 $(field handoff_p99_ms <<<"$bench") ms, at most $(field max_concurrent_holders <<<"$bench") holders at once"
    redis-cli -p "$port" INFO commandstats | tr -d '\r' | awk -F'[:,=]' -v cycles="$total_cycles" '
        /^cmdstat_/ && $1 !~ /config|info/ {
            name = substr($1, 9); calls[name] = $3; usec[name] = $5
            if (name != "fcall" && name != "evalsha" && name != "eval" && name != "blpop") { inner += $3 }
            total_usec += $5
        }
        END {
            scripts = calls["fcall"] + calls["evalsha"] + calls["eval"]
            printf "  per cycle: %.2f scripts (%.1f us each, inner calls included), %.2f BLPOP, %.1f calls inside scripts, %.1f us of Redis time,",
                scripts / cycles, (usec["fcall"] + usec["evalsha"] + usec["eval"]) / scripts,
                calls["blpop"] / cycles, inner / cycles, total_usec / cycles
        }'
    echo " $cpu_us us of Redis CPU"
done
echo "redsem over PING: $(ratio "$cycles_FCALL" "$ping") (target >= 0.35)"
echo "FCALL over EVALSHA: cycles/s $(ratio "$cycles_FCALL" "$cycles_EVALSHA"), Redis time per cycle $(ratio "$redis_us_FCALL" "$redis_us_EVALSHA")"
redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
cpu_before=$(redis_cpu_us)
peer=$("$here/peers/run.sh" contended --url "$url" --clients 50 --limit 5 --seconds "$contended_seconds")
cpu_after=$(redis_cpu_us)
echo "npm redis-semaphore: $peer" | tr '\n' ' '
echo
if peer_cycles=$(awk '/^cycles_per_second:/ {print $2}' <<<"$peer") && [ -n "$peer_cycles" ]; then
    peer_total=$(awk '/^cycles:/ {print $2}' <<<"$peer")
    peer_redis_us=$(redis_us_per_cycle "$peer_total")
    peer_cpu_us=$(awk -v a="$cpu_before" -v b="$cpu_after" -v n="$peer_total" 'BEGIN { printf "%.1f", (b - a) / n }')
    echo "  per cycle: $peer_redis_us us of Redis time, $peer_cpu_us us of Redis CPU"
    echo "redsem (FCALL) over redis-semaphore: cycles/s $(ratio "$cycles_FCALL" "$peer_cycles") (target >= 0.6)," \
        "Redis time per cycle $(ratio "$redis_us_FCALL" "$peer_redis_us") (target <= 4)," \
        "Redis CPU per cycle $(ratio "$cpu_us_FCALL" "$peer_cpu_us")"
fi

echo
echo "== 4. Scale: each script at 10 and at 10,000 holders and waiters"
"$build/tests/bench/redsem-cost-bench" --url "$url" --sizes 10,10000 --cycles 1000 >"$dir/cost.json"
redis-cli -p "$port" FLUSHALL >/dev/null # the same semaphores again, by EVALSHA
"$build/tests/bench/redsem-cost-bench" --url "$url" --sizes 10 --cycles 1000 --eval >"$dir/cost-eval.json"
python3 - "$dir/cost.json" "$dir/cost-eval.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
by_eval = json.load(open(sys.argv[2]))
for name, s in by_eval["sizes"][0]["scripts"].items():
    f = d["sizes"][0]["scripts"][name]
    print(f"    10 holders and waiters, {name:8}: {s['redis_us_p50']:6.1f} us in Redis by EVALSHA, "
          f"{f['redis_us_p50']:6.1f} us by FCALL ({f['redis_us_p50'] / s['redis_us_p50']:.2f}x)")
def line(label, name, s):
    print(f"{label}, {name:8}: {s['redis_us_p50']:6.1f} us in Redis (p50), "
          f"{s['redis_calls_per_script']:4.1f} calls inside, round trip {s['round_trip_us_p50']:6.1f} us")
for size in d["sizes"]:
    for name, s in size["scripts"].items():
        line(f"{size['holders']:>6} holders and waiters", name, s)
for name, s in d["free"]["scripts"].items():
    line("      nobody waiting", name, s)
for way, b in d["bare"].items():
    print(f"      a script that returns 1, by {way:7}: {b['redis_us_p50']:6.1f} us in Redis (p50)")
print(f"renew (10 holders) over a bare EVALSHA: {d['renew_over_bare_evalsha']:.1f}x (target <= 20)")
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
