#!/usr/bin/env bash
# Throwaway redis-server processes on free loopback ports, for the shell, PHP
# and Python test drivers and the demo (the C tests have their own harness in
# redis_harness.c with the same settings).
#
#   redis.sh start DIR COUNT   start COUNT servers; prints their ports, one line
#   redis.sh stop DIR          stop every server started in DIR
#   redis.sh uris DIR          comma list redis://127.0.0.1:P,... of DIR's servers
#
# Each server: no persistence, bound to 127.0.0.1, a Unix socket DIR/redis-P.sock,
# logs in DIR/redis-P.log, pid in DIR/redis-P.pid.
set -euo pipefail

start_one() {
  local dir=$1 port pid tries
  for tries in $(seq 1 50); do
    port=$(( 20000 + RANDOM % 40000 ))
    [ -e "$dir/redis-$port.pid" ] && continue
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
      --dir "$dir" --logfile "$dir/redis-$port.log" \
      --unixsocket "$dir/redis-$port.sock" --unixsocketperm 700 \
      --enable-debug-command local --daemonize no >/dev/null 2>&1 &
    pid=$!
    # Ready when it answers PING; gone when the port was taken.
    for _ in $(seq 1 200); do
      if ! kill -0 "$pid" 2>/dev/null; then break; fi
      if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
        echo "$pid" > "$dir/redis-$port.pid"
        echo "$port"
        return 0
      fi
      sleep 0.02
    done
    kill "$pid" 2>/dev/null || true
  done
  echo "redis.sh: could not start redis-server in $dir" >&2
  return 1
}

cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: redis.sh start|stop|uris DIR [COUNT]" >&2; exit 2; }
case "$cmd" in
  start)
    mkdir -p "$dir"
    ports=()
    for _ in $(seq 1 "${3:-1}"); do ports+=("$(start_one "$dir")"); done
    echo "${ports[*]}"
    ;;
  stop)
    for f in "$dir"/redis-*.pid; do
      [ -e "$f" ] || continue
      pid=$(cat "$f")
      kill -CONT "$pid" 2>/dev/null || true
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$f"
    done
    ;;
  uris)
    out=""
    for f in "$dir"/redis-*.pid; do
      [ -e "$f" ] || continue
      p=${f##*/redis-}; p=${p%.pid}
      out="${out:+$out,}redis://127.0.0.1:$p"
    done
    echo "$out"
    ;;
  *) echo "redis.sh: unknown command $cmd" >&2; exit 2 ;;
esac
