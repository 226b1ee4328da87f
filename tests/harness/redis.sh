#!/usr/bin/env bash
# Throwaway redis-server processes on free loopback ports, for the shell, PHP
# and Python test drivers and the demo (the C tests have their own harness in
# redis_harness.c with the same settings).
#
#   redis.sh start DIR COUNT   start COUNT servers; prints their ports, one line
#   redis.sh stop DIR          stop every server started in DIR
#   redis.sh uris DIR          comma list redis://127.0.0.1:P,... of DIR's servers
#   redis.sh tls-uris DIR      comma list rediss://127.0.0.1:T,... (servers started with TLS)
#
# TLS: with DISTLOCK_TLS_CERTS=CERTDIR (made by certs.sh) `start` gives each
# server a TLS port T too (CERTDIR/server.crt, trusting CERTDIR/ca.crt for
# client certificates, not requiring them; DISTLOCK_TLS_AUTH_CLIENTS=yes
# requires them); the plain port stays, for the drivers' own checks.
#   redis.sh sentinels DIR [ARGS]  a Sentinel group (sentinels.py: 1 master,
#                              2 replicas, 3 sentinels; ARGS are its options);
#                              prints its redis-sentinel:// URI once ready;
#                              `stop DIR` stops it too
#   redis.sh cluster DIR [MASTERS [REPLICAS]]
#                              a Redis Cluster: 6 servers (cluster-enabled, bus port
#                              = port + 10000), `redis-cli --cluster create
#                              --cluster-replicas 1`: 3 masters + 3 replicas (or
#                              MASTERS >= 3 with REPLICAS each, e.g. `3 0`: 3 servers);
#                              prints its redis-cluster://... URI once every node
#                              reports cluster_state:ok; `stop DIR` stops it
#   redis.sh replicate DIR     (WAIT for replicas) DIR's second server becomes a
#                              replica of its first (REPLICAOF); returns once the
#                              link is up (polled); prints "MASTER_PORT REPLICA_PORT
#                              REPLICA_PID"
#
# Each server: no persistence, bound to 127.0.0.1, a Unix socket DIR/redis-P.sock,
# logs in DIR/redis-P.log, pid in DIR/redis-P.pid.
set -euo pipefail

# Ports outside the kernel's ephemeral range: one in it can be taken as the
# local port of an outgoing connection while its server is down, and a
# restart on the same port would then fail.
port_lo=10000 port_span=22768
if read -r elo ehi < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null; then
  if [ $((elo - 10000)) -ge 2000 ]; then port_span=$((elo - 10000))
  else port_lo=$((ehi + 1)) port_span=$((65535 - ehi)); fi
fi

# --enable-debug-command is Redis 7.0+ (older servers allow DEBUG anyway):
# left out for the older servers scripts/server-matrix.sh puts on PATH.
debug_opt=()
if [[ $(redis-server --version 2>/dev/null) =~ \ v=([0-9]+)\. ]] && [ "${BASH_REMATCH[1]}" -ge 7 ]; then
  debug_opt=(--enable-debug-command local)
fi

start_one() {
  local dir=$1 port pid tries
  for tries in $(seq 1 50); do
    port=$(( port_lo + (RANDOM * 32768 + RANDOM) % port_span ))
    # REDIS_SH_TRY_PORT: the first try's port (a test makes it a taken one)
    [ "$tries" = 1 ] && [ -n "${REDIS_SH_TRY_PORT:-}" ] && port=$REDIS_SH_TRY_PORT
    [ -e "$dir/redis-$port.pid" ] && continue
    local tls=()
    if [ -n "${cluster_mode:-}" ]; then
      # the bus port (port + 10000) must be free too, and below the ephemeral range
      port=$(( port_lo + (RANDOM * 32768 + RANDOM) % (port_span - 10000) ))
      [ -e "$dir/redis-$port.pid" ] && continue
      tls=(--cluster-enabled yes --cluster-config-file "redis-$port-nodes.conf"
           --cluster-node-timeout 2000)
    fi
    if [ -n "${DISTLOCK_TLS_CERTS:-}" ]; then
      local c=$DISTLOCK_TLS_CERTS tport=$(( port_lo + (RANDOM * 32768 + RANDOM) % port_span ))
      [ "$tport" = "$port" ] && continue
      tls=(--tls-port "$tport" --tls-cert-file "$c/server.crt" --tls-key-file "$c/server.key"
           --tls-ca-cert-file "$c/ca.crt" --tls-auth-clients "${DISTLOCK_TLS_AUTH_CLIENTS:-no}")
    fi
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no "${tls[@]}" \
      --dir "$dir" --logfile "$dir/redis-$port.log" \
      --unixsocket "$dir/redis-$port.sock" --unixsocketperm 700 \
      "${debug_opt[@]}" --daemonize no >/dev/null 2>&1 &
    pid=$!
    # Ready when it answers PING on its own Unix socket (it listens there
    # only once every listener, the TCP port too, is bound); gone when the
    # port was taken. Not a PING on the port: while ours is still exiting,
    # the server that took the port (a parallel test's) would answer it.
    for _ in $(seq 1 200); do
      if ! kill -0 "$pid" 2>/dev/null; then break; fi
      if redis-cli -s "$dir/redis-$port.sock" ping 2>/dev/null | grep -q PONG; then
        echo "$pid" > "$dir/redis-$port.pid"
        [ -z "${tport:-}" ] || echo "$tport" > "$dir/redis-$port.tlsport"
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
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: redis.sh start|stop|uris|replicate DIR [COUNT]" >&2; exit 2; }
case "$cmd" in
  start)
    mkdir -p "$dir"
    ports=()
    for _ in $(seq 1 "${3:-1}"); do ports+=("$(start_one "$dir")"); done
    echo "${ports[*]}"
    ;;
  cluster)
    mkdir -p "$dir"
    cluster_mode=1
    masters=${3:-3} replicas=${4:-1}
    nservers=$((masters * (1 + replicas)))
    ports=()
    for _ in $(seq 1 "$nservers"); do ports+=("$(start_one "$dir")"); done
    addrs=() uri=""
    for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); uri="${uri:+$uri,}127.0.0.1:$p"; done
    redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$replicas" --cluster-yes >"$dir/cluster-create.log" 2>&1 \
      || { cat "$dir/cluster-create.log" >&2; exit 1; }
    for _ in $(seq 1 1000); do
      ok=1
      for p in "${ports[@]}"; do
        redis-cli -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || ok=0
        [ "$(redis-cli -p "$p" cluster info 2>/dev/null | sed -n 's/^cluster_known_nodes:\([0-9]*\).*/\1/p')" = "$nservers" ] || ok=0
      done
      if [ $ok = 1 ]; then echo "redis-cluster://$uri"; exit 0; fi
      sleep 0.02
    done
    echo "redis.sh: the cluster did not become ok" >&2
    exit 1
    ;;
  sentinels)
    mkdir -p "$dir"
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    rm -f "$dir/sentinels.in" "$dir/sentinels.out"
    mkfifo "$dir/sentinels.in"
    shift 2
    python3 "$here/sentinels.py" "$@" <"$dir/sentinels.in" >"$dir/sentinels.out" 2>&1 &
    echo $! > "$dir/sentinels-py.pid"
    # Its stdin stays open while this holder lives: EOF stops the group.
    sleep infinity >"$dir/sentinels.in" &
    echo $! > "$dir/sentinels-hold.pid"
    # up to 150 s: sentinels.py starts the group again on fresh ports
    # (up to 3 times, 40 s each at most) when a start fails
    end=$((SECONDS + 150))
    while [ $SECONDS -lt $end ]; do
      if grep -q '^ready ' "$dir/sentinels.out" 2>/dev/null; then
        sed -n 's/^ready .* uri=//p' "$dir/sentinels.out"
        exit 0
      fi
      if grep -q '^err ' "$dir/sentinels.out" 2>/dev/null ||
         ! kill -0 "$(cat "$dir/sentinels-py.pid")" 2>/dev/null; then
        break
      fi
      sleep 0.02
    done
    echo "redis.sh: the Sentinel group did not start:" >&2
    cat "$dir/sentinels.out" >&2
    exit 1
    ;;
  stop)
    if [ -e "$dir/sentinels-hold.pid" ]; then
      kill "$(cat "$dir/sentinels-hold.pid")" 2>/dev/null || true
      pid=$(cat "$dir/sentinels-py.pid")
      for _ in $(seq 1 500); do kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$dir/sentinels-hold.pid" "$dir/sentinels-py.pid" "$dir/sentinels.in"
    fi
    for f in "$dir"/redis-*.pid; do
      [ -e "$f" ] || continue
      pid=$(cat "$f")
      kill -CONT "$pid" 2>/dev/null || true
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$f" "${f%.pid}.tlsport"
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
  tls-uris)
    out=""
    for f in "$dir"/redis-*.tlsport; do
      [ -e "$f" ] || continue
      out="${out:+$out,}rediss://127.0.0.1:$(cat "$f")"
    done
    echo "$out"
    ;;
  replicate)
    ports=()
    for f in "$dir"/redis-*.pid; do
      [ -e "$f" ] || continue
      p=${f##*/redis-}; ports+=("${p%.pid}")
    done
    [ ${#ports[@]} -ge 2 ] || { echo "redis.sh: replicate needs two servers in $dir" >&2; exit 1; }
    m=${ports[0]} r=${ports[1]}
    redis-cli -p "$r" replicaof 127.0.0.1 "$m" >/dev/null
    for _ in $(seq 1 1000); do
      if redis-cli -p "$r" info replication | grep -q 'master_link_status:up' &&
         redis-cli -p "$m" info replication | grep -q "port=$r,state=online"; then
        echo "$m $r $(cat "$dir/redis-$r.pid")"
        exit 0
      fi
      sleep 0.02
    done
    echo "redis.sh: 127.0.0.1:$r did not become a replica of 127.0.0.1:$m" >&2
    exit 1
    ;;
  *) echo "redis.sh: unknown command $cmd" >&2; exit 2 ;;
esac
