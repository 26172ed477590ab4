#!/usr/bin/env bash
# What a contended cycle costs Redis, an older build against this one: redsem-bench (50
# clients, limit 5) of each build taking turns against one private redis-server, INFO
# commandstats reset before each run. Prints per run the cycles/s, the hand-off p50, and the
# Redis time per cycle (usec of every command, scripts and BLPOPs, over the cycles), then the
# ratios new/old of the medians.
#   tests/bench/redis_time.sh OLD_BUILD [BUILD_DIR] [ROUNDS] [SECONDS]
set -euo pipefail
old=${1:?usage: $0 OLD_BUILD [BUILD_DIR] [ROUNDS] [SECONDS]}
build=${2:-build}
rounds=${3:-5}
seconds=${4:-6}
source "$(dirname "$0")/lib.sh"
url="redis://127.0.0.1:$port"

# Prints "cycles/s handoff_p50_ms usec_per_cycle" for one run of the build in $1.
measure() {
    redis-cli -p "$port" config resetstat >/dev/null
    local result
    result=$("$1/tests/bench/redsem-bench" --url "$url" --clients 50 --limit 5 \
        --seconds "$seconds" --name "wire$2")
    local usec
    usec=$(redis-cli -p "$port" info commandstats | tr -d '\r' |
        awk -F'[=,]' '/^cmdstat_/ && !/^cmdstat_(config|info)/ {sum += $4} END {print sum}')
    echo "$result" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("%.0f %.3f %.1f" % (r["cycles_per_second"], r["handoff_p50_ms"], int(sys.argv[1]) / r["cycles"]))
' "$usec"
}

printf '%-6s %-4s %10s %14s %14s\n' round build cycles/s 'handoff p50 ms' 'Redis us/cycle'
: >"$dir/old" && : >"$dir/new"
for round in $(seq "$rounds"); do
    for side in old new; do
        path=$old
        [ "$side" = new ] && path=$build
        read -r cycles p50 usec < <(measure "$path" "$round")
        printf '%-6s %-4s %10s %14s %14s\n' "$round" "$side" "$cycles" "$p50" "$usec"
        echo "$cycles $p50 $usec" >>"$dir/$side"
    done
done
python3 - "$dir/old" "$dir/new" <<'PY'
import statistics, sys
def columns(path):
    rows = [list(map(float, line.split())) for line in open(path)]
    return [statistics.median(col) for col in zip(*rows)], [(min(c), max(c)) for c in zip(*rows)]
(old, old_range), (new, new_range) = columns(sys.argv[1]), columns(sys.argv[2])
for i, what in enumerate(["cycles/s", "hand-off p50 ms", "Redis us/cycle"]):
    print(f"{what:16} median old {old[i]:9.2f} [{old_range[i][0]:.2f}..{old_range[i][1]:.2f}]"
          f"  new {new[i]:9.2f} [{new_range[i][0]:.2f}..{new_range[i][1]:.2f}]  new/old {new[i] / old[i]:.3f}")
PY
