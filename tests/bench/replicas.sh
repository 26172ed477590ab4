#!/usr/bin/env bash
# What --replicas and Sentinel cost: whole-process time of `redsem run NAME -- true` and of
# `redsem acquire` + `redsem release`, with --replicas 0 and 1, straight to the master and
# through three sentinels, side by side in one hyperfine run. Starts a master, one replica and
# three sentinels (redis-server --sentinel) on free loopback ports in a temporary directory.
#   tests/bench/replicas.sh [BUILD_DIR] [RUNS]
set -euo pipefail
build=${1:-build}
runs=${2:-300}
redsem="$(cd "$build" && pwd)/redsem"
dir=$(mktemp -d)
pids=()
cleanup() {
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
start_redis() { # PORT NAME [ARGS...]
    local port=$1 name=$2
    shift 2
    mkdir -p "$dir/$name"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir/$name" \
        --logfile "$dir/$name/redis.log" "$@" &
    pids+=($!)
    until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
}
master=$(free_port)
replica=$(free_port)
start_redis "$master" master
start_redis "$replica" replica --replicaof 127.0.0.1 "$master"
until redis-cli -p "$replica" info replication | grep -q 'master_link_status:up'; do sleep 0.05; done
sentinels=()
for i in 1 2 3; do
    port=$(free_port)
    mkdir -p "$dir/s$i"
    printf 'port %s\nbind 127.0.0.1\ndir %s\nsentinel monitor bench 127.0.0.1 %s 2\n' \
        "$port" "$dir/s$i" "$master" >"$dir/s$i/sentinel.conf"
    redis-server "$dir/s$i/sentinel.conf" --sentinel --logfile "$dir/s$i/sentinel.log" &
    pids+=($!)
    sentinels+=("127.0.0.1:$port")
done
for s in "${sentinels[@]}"; do
    until redis-cli -p "${s##*:}" sentinel get-master-addr-by-name bench 2>/dev/null | grep -q .; do
        sleep 0.05
    done
done
export REDSEM_LOSS_GRACE=0
direct="redis://127.0.0.1:$master"
sentinel="redis-sentinel://$(IFS=,; echo "${sentinels[*]}")#bench"

commands=()
for url in "$direct" "$sentinel"; do
    for n in 0 1; do
        commands+=("$redsem run bench -u $url --replicas $n -- true")
    done
done
for n in 0 1; do
    commands+=("sh -c '$redsem release bench -u $direct \$($redsem acquire bench -u $direct --replicas $n)'")
done
hyperfine -N --warmup 20 --runs "$runs" --export-json "$dir/result.json" "${commands[@]}"
python3 - "$dir/result.json" <<'PY' 2>/dev/null || true
import json, sys
results = json.load(open(sys.argv[1]))["results"]
base = results[0]["median"]
for r in results:
    print(f"{r['median']*1e3:7.2f} ms  {r['median']/base:5.2f}x  {r['command']}")
PY
