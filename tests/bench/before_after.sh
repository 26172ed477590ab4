#!/usr/bin/env bash
# An older build against this one, side by side against one private redis-server: the
# whole-process time of `redsem run bench -- true` (one hyperfine run, both commands), and
# contended cycles/s and Redis time per cycle of redsem-bench (50 clients, limit 5), by FCALL
# and by EVALSHA, the two builds taking turns.
#   tests/bench/before_after.sh OLD_BUILD [BUILD_DIR] [RUNS] [ROUNDS]
set -euo pipefail
old=${1:?usage: $0 OLD_BUILD [BUILD_DIR] [RUNS] [ROUNDS]}
build=${2:-build}
runs=${3:-300}
rounds=${4:-3}
source "$(dirname "$0")/lib.sh"
url="redis://127.0.0.1:$port"

hyperfine -N --warmup 20 --runs "$runs" --export-json "$dir/result.json" \
    "$old/redsem run bench -u $url -- true" "$build/redsem run bench -u $url -- true"
python3 - "$dir/result.json" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
base = results[0]["median"]
for r in results:
    print(f"run -- true: {r['median']*1e3:7.2f} ms  {r['median']/base:5.2f}x  {r['command']}")
PY

# Contended cycles/s of BUILD's redsem-bench (50 clients, limit 5, its scripts as functions or,
# with --eval, by EVALSHA) and Redis's time per cycle: every command's time from INFO
# commandstats, a script's inner calls counted twice, as tests/bench/all.sh counts it.
contended() { # BUILD NAME [--eval]
    redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
    local out cycles rate
    out=$("$1/tests/bench/redsem-bench" --url "$url" --clients 50 --limit 5 --seconds 5 \
        --name "$2" ${3:-})
    cycles=$(awk -F': ' '/"cycles"/ {gsub(",", "", $2); print $2}' <<<"$out")
    rate=$(awk -F': ' '/cycles_per_second/ {gsub(",", "", $2); print $2}' <<<"$out")
    redis-cli -p "$port" INFO commandstats | tr -d '\r' | awk -F'[:,=]' -v cycles="$cycles" \
        -v rate="$rate" '/^cmdstat_/ && $1 !~ /config|info/ { total += $5 }
        END { printf "%.0f %.1f", rate, total / cycles }'
}
for round in $(seq "$rounds"); do
    for way in FCALL EVALSHA; do
        flag=$([ "$way" = EVALSHA ] && echo --eval || true)
        read -r old_rate old_us <<<"$(contended "$old" "old$way$round" $flag)"
        read -r new_rate new_us <<<"$(contended "$build" "new$way$round" $flag)"
        awk -v r="$round" -v w="$way" -v br="$old_rate" -v ar="$new_rate" -v bu="$old_us" \
            -v au="$new_us" 'BEGIN { printf "redsem-bench round %d, %s: old %.0f cycles/s and %.1f us of Redis time per cycle, new %.0f and %.1f: new/old %.3f and %.3f\n", r, w, br, bu, ar, au, ar / br, au / bu }'
    done
done
