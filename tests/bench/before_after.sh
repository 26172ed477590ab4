#!/usr/bin/env bash
# An older build against this one, side by side against one private redis-server: the
# whole-process time of `redsem run bench -- true` (one hyperfine run, both commands), and
# contended cycles/s of redsem-bench (50 clients, limit 5), the two builds taking turns.
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

cycles() {
    "$1/tests/bench/redsem-bench" --url "$url" --clients 50 --limit 5 --seconds 5 --name "cycles$2" |
        awk -F': ' '/cycles_per_second/ {gsub(",","",$2); print $2}'
}
for round in $(seq "$rounds"); do
    before=$(cycles "$old" "$round")
    after=$(cycles "$build" "$round")
    awk -v b="$before" -v a="$after" -v r="$round" \
        'BEGIN { printf "redsem-bench round %d: old %.0f cycles/s, new %.0f cycles/s, new/old %.3f\n", r, b, a, a / b }'
done
