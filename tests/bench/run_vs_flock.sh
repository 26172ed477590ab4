#!/usr/bin/env bash
# Whole-process time of `redsem run NAME -- true` against `flock FILE true`, side by side in
# one hyperfine run, against a private redis-server on a free loopback port.
#   tests/bench/run_vs_flock.sh [BUILD_DIR] [RUNS]
set -euo pipefail
build=${1:-build}
runs=${2:-300}
source "$(dirname "$0")/lib.sh"

export REDSEM_URL="redis://127.0.0.1:$port"
hyperfine -N --warmup 20 --runs "$runs" --export-json "$dir/result.json" \
    "flock $dir/lock true" "$build/redsem run bench -- true"
python3 - "$dir/result.json" <<'PY' 2>/dev/null || true
import json, sys
r = json.load(open(sys.argv[1]))["results"]
f, s = r[0]["median"], r[1]["median"]
print(f"median: flock {f*1e3:.2f} ms, redsem run {s*1e3:.2f} ms, ratio {s/f:.2f} (target <= 1.5)")
PY
