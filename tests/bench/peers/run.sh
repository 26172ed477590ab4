#!/usr/bin/env bash
# Optional peer benchmark: npm redis-semaphore, side by side with redsem.
# usage: tests/bench/peers/run.sh contended|idle --url redis://HOST:PORT [args...]
# Never run in CI; skips (exit 0) when node or the npm packages are unavailable.
set -u
if ! command -v node >/dev/null 2>&1; then
    echo "node not found: skipping the redis-semaphore peer benchmark"
    exit 0
fi
script=${BASH_SOURCE[0]}
case $script in */*) here=${script%/*} ;; *) here=. ;; esac
here=$(cd "$here" && pwd)
if [ ! -d "$here/node_modules" ]; then
    if ! command -v npm >/dev/null 2>&1 || ! (cd "$here" && npm ci --silent >/dev/null 2>&1); then
        echo "npm ci failed in $here: skipping the redis-semaphore peer benchmark"
        rm -rf "$here/node_modules"
        exit 0
    fi
fi
exec node "$here/redis_semaphore_bench.js" "$@"
