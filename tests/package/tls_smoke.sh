#!/usr/bin/env bash
# A TLS connection with a given redsem binary, against a private redis-server with a TLS port
# and certificates made here by openssl: the certificate is verified (a wrong CA fails with
# 69), and `run` works through it.
# Usage: tls_smoke.sh REDSEM
set -euo pipefail
redsem=$(realpath "$1")
dir=$(mktemp -d)
trap 'kill "$(cat "$dir/redis.pid" 2>/dev/null)" 2>/dev/null; rm -rf "$dir"' EXIT
cd "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=smoke-ca 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem \
    -days 2 -extfile ext 2>/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port 0 --tls-port "$port" --bind 127.0.0.1 --tls-cert-file server.pem \
    --tls-key-file server.key --tls-ca-cert-file ca.pem --tls-auth-clients no --save "" \
    --appendonly no --dir "$dir" --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
fail() { echo "tls_smoke: FAIL: $*" >&2; exit 1; }
export REDSEM_URL="rediss://localhost:$port" REDSEM_LOSS_GRACE=0
for _ in $(seq 100); do
    "$redsem" --cacert ca.pem status >/dev/null 2>&1 && break
    sleep 0.05
done
[ "$("$redsem" --cacert ca.pem run job echo through-tls)" = through-tls ] || fail "run over TLS"
set +e
"$redsem" --cacert server.pem status 2>"$dir/err"
code=$?
set -e
[ "$code" = 69 ] || fail "a wrong CA exited $code, not 69"
grep -q 'failed verification' "$dir/err" || fail "a wrong CA: $(cat "$dir/err")"
echo "tls_smoke: ok"
