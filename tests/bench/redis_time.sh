#!/usr/bin/env bash
# What a contended cycle costs Redis, an older build against this one and against npm's
# redis-semaphore: redsem-bench (50 clients, limit 5) of each build, and the peer's contended
# benchmark (tests/bench/peers, when node and its packages are at hand), taking turns against
# one private redis-server, its counters reset before each run. Prints per run the cycles/s,
# the hand-off p50 (redsem only), the Redis time per cycle by INFO commandstats (usec of every
# command, scripts and BLPOPs, over the cycles) and by the server's own CPU time (INFO cpu:
# also the requests' reading, parsing and replying), then the medians with their ranges, the
# ratios new/old (of the medians, and paired: the median and range of each round's ratio) and
# new/peer.
#   tests/bench/redis_time.sh OLD_BUILD [BUILD_DIR] [ROUNDS] [SECONDS]
set -euo pipefail
old=${1:?usage: $0 OLD_BUILD [BUILD_DIR] [ROUNDS] [SECONDS]}
build=${2:-build}
rounds=${3:-5}
seconds=${4:-6}
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
url="redis://127.0.0.1:$port"

# The server's CPU time so far, in microseconds.
cpu_usec() {
    redis-cli -p "$port" info cpu | tr -d '\r' |
        awk -F: '/^used_cpu_(sys|user):/ {sum += $2} END {printf "%.0f", sum * 1e6}'
}

# Prints "cycles/s handoff_p50_ms usec_per_cycle cpu_usec_per_cycle" for one run of the build
# in $1, or of the peer when $1 is "peer" ("-" for its hand-off).
measure() {
    redis-cli -p "$port" flushall >/dev/null
    redis-cli -p "$port" config resetstat >/dev/null
    local cpu_before result usec cpu
    cpu_before=$(cpu_usec)
    if [ "$1" = peer ]; then
        result=$("$here/peers/run.sh" contended --url "$url" --clients 50 --limit 5 \
            --seconds "$seconds" | awk -F': ' '
                $1 == "cycles" {c = $2} $1 == "cycles_per_second" {s = $2}
                END {printf "{\"cycles\": %d, \"cycles_per_second\": %d}", c, s}')
    else
        result=$("$1/tests/bench/redsem-bench" --url "$url" --clients 50 --limit 5 \
            --seconds "$seconds" --name "wire$2")
    fi
    cpu=$(($(cpu_usec) - cpu_before))
    usec=$(redis-cli -p "$port" info commandstats | tr -d '\r' |
        awk -F'[=,]' '/^cmdstat_/ && !/^cmdstat_(config|info|flushall)/ {sum += $4} END {print sum}')
    echo "$result" | python3 -c '
import json, sys
r = json.load(sys.stdin)
p50 = "%.3f" % r["handoff_p50_ms"] if "handoff_p50_ms" in r else "-"
print("%.0f %s %.1f %.1f" % (r["cycles_per_second"], p50, int(sys.argv[1]) / r["cycles"],
                             int(sys.argv[2]) / r["cycles"]))
' "$usec" "$cpu"
}

sides="old new"
if [ "$("$here/peers/run.sh" contended --url "$url" --clients 1 --limit 1 --seconds 1 |
    grep -c '^cycles:')" = 1 ]; then
    sides="old new peer"
else
    echo "(npm redis-semaphore is not at hand: comparing the two builds only)"
fi
printf '%-6s %-5s %10s %14s %14s %14s\n' round side cycles/s 'handoff p50 ms' 'Redis us/cycle' \
    'CPU us/cycle'
for side in $sides; do : >"$dir/$side"; done
for round in $(seq "$rounds"); do
    for side in $sides; do
        path=$side
        [ "$side" = old ] && path=$old
        [ "$side" = new ] && path=$build
        read -r cycles p50 usec cpu < <(measure "$path" "$round")
        printf '%-6s %-5s %10s %14s %14s %14s\n' "$round" "$side" "$cycles" "$p50" "$usec" "$cpu"
        echo "$cycles $p50 $usec $cpu" >>"$dir/$side"
    done
done
python3 - "$dir" $sides <<'PY'
import statistics, sys
where, sides = sys.argv[1], sys.argv[2:]
def columns(side):
    rows = [line.split() for line in open(f"{where}/{side}")]
    out = []
    for col in zip(*rows):
        if "-" in col:
            out.append(None)
            continue
        values = list(map(float, col))
        out.append((statistics.median(values), min(values), max(values)))
    return out
got = {side: columns(side) for side in sides}
rows = {side: list(zip(*[line.split() for line in open(f"{where}/{side}")])) for side in sides}
for i, what in enumerate(["cycles/s", "hand-off p50 ms", "Redis us/cycle", "CPU us/cycle"]):
    line = f"{what:16}"
    for side in sides:
        m = got[side][i]
        line += f"  {side} " + ("-" if m is None else f"{m[0]:.2f} [{m[1]:.2f}..{m[2]:.2f}]")
    new, old = got["new"][i], got["old"][i]
    line += f"  new/old {new[0] / old[0]:.3f}"
    # The same, round by round (the builds ran seconds apart): the median and range.
    paired = [float(n) / float(o) for n, o in zip(rows["new"][i], rows["old"][i])]
    line += f" (paired {statistics.median(paired):.3f} [{min(paired):.3f}..{max(paired):.3f}])"
    if "peer" in got and got["peer"][i] is not None:
        line += f"  new/peer {new[0] / got['peer'][i][0]:.2f}"
    print(line)
PY
