#!/usr/bin/env bash
# Whole-process time of `redsem run NAME -- true` against `flock FILE true`, side by side in
# one hyperfine run, against a private redis-server on a free loopback port.
#   tests/bench/run_vs_flock.sh [BUILD_DIR] [RUNS]
set -euo pipefail
build=${1:-build}
runs=${2:-300}
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 16380)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" \
    --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
trap 'kill "$(cat "$dir/redis.pid")" 2>/dev/null; rm -rf "$dir"' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done

export REDSEM_URL="redis://127.0.0.1:$port"
hyperfine -N --warmup 20 --runs "$runs" --export-json "$dir/result.json" \
    "flock $dir/lock true" "$build/redsem run bench -- true"
python3 - "$dir/result.json" <<'PY' 2>/dev/null || true
import json, sys
r = json.load(open(sys.argv[1]))["results"]
f, s = r[0]["median"], r[1]["median"]
print(f"median: flock {f*1e3:.2f} ms, redsem run {s*1e3:.2f} ms, ratio {s/f:.2f} (target <= 1.5)")
PY
