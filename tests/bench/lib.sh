# Sourced by the benchmark scripts: starts a private redis-server on a free loopback port in a
# temporary directory, stopped when the script exits. Sets $dir and $port.
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 16379)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir" --maxclients 20000 \
    --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
trap 'kill "$(cat "$dir/redis.pid")" 2>/dev/null; rm -rf "$dir"' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
# A brand-new Redis: nobody used it, so no lease can have been lost (see --loss-grace).
export REDSEM_LOSS_GRACE=0
