#!/usr/bin/env bash
# Whole-process time of `redsem run NAME -- true` over plain TCP and over TLS (rediss://), side
# by side in one hyperfine run against one private redis-server that listens on both, with
# certificates made here by openssl. With OLD_BUILD, also that build's plain run (before/after).
#   tests/bench/tls_vs_plain.sh [BUILD_DIR] [RUNS] [OLD_BUILD]
set -euo pipefail
build=${1:-build}
runs=${2:-300}
old=${3:-}
dir=$(mktemp -d)
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
port=$(free_port)
tls_port=$(free_port)
(
    cd "$dir"
    key="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
    openssl req -x509 $key -keyout ca.key -out ca.crt -days 2 -subj /CN=bench-ca
    openssl req $key -keyout server.key -out server.csr -subj /CN=localhost
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 \
        -out server.crt -extfile server.ext
) >/dev/null 2>&1
redis-server --port "$port" --bind 127.0.0.1 --tls-port "$tls_port" \
    --tls-cert-file "$dir/server.crt" --tls-key-file "$dir/server.key" \
    --tls-ca-cert-file "$dir/ca.crt" --tls-auth-clients no --save "" --appendonly no \
    --dir "$dir" --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
trap 'kill "$(cat "$dir/redis.pid")" 2>/dev/null; rm -rf "$dir"' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
export REDSEM_LOSS_GRACE=0 REDSEM_CACERT="$dir/ca.crt"

commands=()
if [ -n "$old" ]; then
    commands+=("$old/redsem run bench -u redis://127.0.0.1:$port -- true")
fi
commands+=("$build/redsem run bench -u redis://127.0.0.1:$port -- true"
           "$build/redsem run bench -u rediss://127.0.0.1:$tls_port -- true")
hyperfine -N --warmup 20 --runs "$runs" --export-json "$dir/result.json" "${commands[@]}"
python3 - "$dir/result.json" <<'PY' 2>/dev/null || true
import json, sys
results = json.load(open(sys.argv[1]))["results"]
base = results[0]["median"]
for r in results:
    print(f"{r['median']*1e3:7.2f} ms  {r['median']/base:5.2f}x  {r['command']}")
PY
