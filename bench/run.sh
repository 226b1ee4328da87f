#!/usr/bin/env bash
# distlock benchmarks against its peers, side by side, in one run.
#
#   bash bench/run.sh            full run (3 interleaved repetitions, 2 s windows)
#   bash bench/run.sh --quick    development run (1 repetition, 0.5 s windows)
#   bash bench/run.sh --only adapters   the adapters against the backends they replace, alone
#
# Installs what it needs (Debian packages through scripts/deps.sh, node-redlock
# and ioredis with `npm ci` into bench/node/), builds the floors and every
# distlock front end into bench/build/, starts 7 throwaway redis-servers on
# loopback (tests/harness/redis.sh), runs bench/bench.py, stops the servers,
# prints the table and writes bench/results/DATE.md and DATE.png.
# A front end that cannot be built or run is reported as "not run: reason".
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bench=$repo/bench
quick=""
only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=--quick; shift ;;
    --only) only=(--only "$2"); shift 2 ;;   # development: some sections only
    *) echo "usage: bash bench/run.sh [--quick] [--only SECTION,...]" >&2; exit 2 ;;
  esac
done
build=$bench/build
mkdir -p "$build"
log=$build/build.log
: > "$log"
say() { echo "bench: $*" >&2; }

say "checking Debian packages"
# php-illuminate-redis: Laravel's RedisStore/RedisLock, the backend the Laravel adapter replaces
bash "$repo/scripts/deps.sh" gnuplot-nox php-illuminate-redis

args=()
# Last meaningful line of the build log, for "not run: reason".
why_from_log() { grep -v '^\s*$' "$log" | tail -n 1 | cut -c1-150; }

# ---- node-redlock peer
node_ok=""
if ! command -v npm >/dev/null && command -v node >/dev/null \
   && dpkg-query -W -f='${Version}' nodejs 2>/dev/null | grep -vq nodesource; then
  say "installing Debian's npm (node is Debian's)"
  bash "$repo/scripts/deps.sh" npm || true
fi
if ! command -v node >/dev/null; then
  args+=(--why-node "node not installed")
elif ! command -v npm >/dev/null; then
  args+=(--why-node "npm not installed (node is not Debian's nodejs, so Debian's npm would not match)")
elif (cd "$bench/node" && { [ -d node_modules/redlock ] && [ -d node_modules/ioredis ] \
        || npm ci --no-audit --no-fund >> "$log" 2>&1; }); then
  node_ok=1
  args+=(--node-ok)
else
  args+=(--why-node "npm ci failed: $(why_from_log)")
fi

# ---- floor (hiredis only)
say "building the floor"
if cc -O2 -Wall -o "$build/floor" "$bench/c/floor.c" -lhiredis >> "$log" 2>&1; then
  args+=(--floor "$build/floor")
else
  args+=(--why-floor "floor build failed: $(why_from_log)")
fi

# ---- distlock core, C driver and CLI
say "building libdistlock and the C driver"
core=$build/core
if cmake -S "$repo" -B "$core" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTLOCK_BUILD_TESTS=OFF \
       -DDISTLOCK_BUILD_CLI=ON -DDISTLOCK_BUILD_PHP=OFF >> "$log" 2>&1 \
   && cmake --build "$core" --target distlock_static -j "$(nproc)" >> "$log" 2>&1; then
  if cc -O2 -Wall -o "$build/distlock_bench" "$bench/c/distlock_bench.c" -I "$repo/core/include" \
       "$core/core/libdistlock.a" -lhiredis -lssl -lcrypto -lpthread >> "$log" 2>&1; then
    args+=(--distlock-c "$build/distlock_bench")
  else
    args+=(--why-distlock-c "C driver build failed: $(why_from_log)")
  fi
  if [ -f "$repo/cli/CMakeLists.txt" ] && cmake --build "$core" -j "$(nproc)" >> "$log" 2>&1 \
     && cli=$(find "$core/cli" -maxdepth 2 -type f -name distlock -perm -u+x | head -n 1) && [ -n "$cli" ]; then
    args+=(--cli "$cli")
  else
    args+=(--why-cli "CLI build failed or absent: $(why_from_log)")
  fi
else
  r="libdistlock build failed: $(why_from_log)"
  args+=(--why-distlock-c "$r" --why-cli "$r")
fi

# ---- PHP extension (php-ext/build.sh prints the .so path last)
say "building the PHP extension"
if [ -x "$repo/php-ext/build.sh" ] || [ -f "$repo/php-ext/build.sh" ]; then
  if so=$(bash "$repo/php-ext/build.sh" --out "$build/php" 2>> "$log" | tail -n 1) && [ -f "$so" ]; then
    args+=(--php-ext "$so")
  else
    args+=(--why-php-ext "php-ext/build.sh failed: $(why_from_log)")
  fi
else
  args+=(--why-php-ext "php-ext/build.sh not in this checkout")
fi

# ---- Python package (python/build.sh VENV)
say "building the Python package"
if [ -f "$repo/python/build.sh" ]; then
  if bash "$repo/python/build.sh" "$build/venv" >> "$log" 2>&1 \
     && "$build/venv/bin/python" -c "import distlock" >> "$log" 2>&1; then
    args+=(--venv "$build/venv")
    # the redis-py adapter (python/distlock/redis_py.py), run against Debian's redis-py
    "$build/venv/bin/python" -c "import distlock.redis_py" >> "$log" 2>&1 \
      || args+=(--why-redis-py-adapter "distlock.redis_py does not import: $(why_from_log)")
  else
    args+=(--why-venv "python/build.sh failed: $(why_from_log)")
  fi
else
  args+=(--why-venv "python/build.sh not in this checkout")
fi

# ---- versions of everything
versions=$build/versions.txt
{
  echo "distlock: git $(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(git -C "$repo" diff --quiet HEAD -- core php-ext python bindings cli 2>/dev/null || echo ' (with uncommitted changes)'), library $(sed -n 's/^#define DISTLOCK_VERSION_STRING "\(.*\)"/\1/p' "$repo/core/include/distlock.h")"
  echo "redis-server: $(redis-server --version | sed 's/^Redis server //')"
  echo "hiredis: $(dpkg-query -W -f='${Version}' libhiredis-dev 2>/dev/null)"
  echo "php: $(php -r 'echo PHP_VERSION;')"
  echo "phpredis: $(php -r 'echo phpversion("redis");')"
  echo "symfony/lock: $(dpkg-query -W -f='${Version}' php-symfony-lock 2>/dev/null)"
  echo "illuminate/cache, illuminate/redis (Laravel): $(dpkg-query -W -f='${Version}' php-illuminate-cache 2>/dev/null), $(dpkg-query -W -f='${Version}' php-illuminate-redis 2>/dev/null)"
  echo "python (redis-py peer): $(/usr/bin/python3 -c 'import sys; print(sys.version.split()[0])')"
  echo "redis-py: $(/usr/bin/python3 -c 'import redis; print(redis.__version__)' 2>&1 | tail -n 1)"
  [ -x "$build/venv/bin/python" ] && echo "python (distlock package venv): $("$build/venv/bin/python" -c 'import sys; print(sys.version.split()[0])')"
  if [ -n "$node_ok" ]; then
    echo "node: $(node --version)"
    echo "redlock: $(cd "$bench/node" && node -p "require('redlock/package.json').version")"
    echo "ioredis: $(cd "$bench/node" && node -p "require('ioredis/package.json').version")"
  fi
  echo "cc: $(cc --version | head -n 1)"
  echo "gnuplot: $(gnuplot --version)"
  echo "machine: $(uname -sr), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
} > "$versions"
args+=(--versions "$versions")

# ---- CPU placement: a ping-pong between a client and redis-server is ~8 us
# when the scheduler happens to put both on one CPU and ~60 us across CPUs;
# which one a run gets is luck, and it would swamp the comparison. So servers
# go on CPU 0 and every driver on CPU 1 (BENCH_PIN=0 to let them float).
pin_srv=(); pin_cli=(); pinning="not pinned (BENCH_PIN=0 or fewer than 2 CPUs)"
if [ "${BENCH_PIN:-1}" != 0 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin_srv=(taskset -c 0); pin_cli=(taskset -c 1)
  pinning="redis-servers pinned to CPU 0, every client/driver process to CPU 1 (taskset)"
fi

# ---- servers
rdir=$(mktemp -d /tmp/distlock-bench-redis.XXXXXX)
cleanup() {
  bash "$repo/tests/harness/redis.sh" stop "$rdir/cluster" > /dev/null 2>&1 || true
  bash "$repo/tests/harness/redis.sh" stop "$rdir/cluster-r" > /dev/null 2>&1 || true
  bash "$repo/tests/harness/redis.sh" stop "$rdir" || true; rm -rf "$rdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# TLS row: every server also has a TLS port, with certificates made now.
bash "$repo/tests/harness/certs.sh" "$rdir/certs"
DISTLOCK_TLS_CERTS=$rdir/certs "${pin_srv[@]}" bash "$repo/tests/harness/redis.sh" start "$rdir" 7 > /dev/null
uris=$(bash "$repo/tests/harness/redis.sh" uris "$rdir")
tls_uri=$(bash "$repo/tests/harness/redis.sh" tls-uris "$rdir" | cut -d, -f1)?tls_ca_file=$rdir/certs/ca.crt
args+=(--tls-uri "$tls_uri")
# Cluster row, on the servers' CPU too: 3 masters without replicas (like
# for like with the plain master, which has none: what routing costs), and
# 3 masters + 3 replicas (what a production shape costs on this one CPU,
# where each replica's work comes out of its master's time).
cluster_uri=$("${pin_srv[@]}" bash "$repo/tests/harness/redis.sh" cluster "$rdir/cluster" 3 0) \
  && args+=(--cluster-uri "$cluster_uri") || say "no cluster row: the cluster did not start"
cluster_r_uri=$("${pin_srv[@]}" bash "$repo/tests/harness/redis.sh" cluster "$rdir/cluster-r" 3 1) \
  && args+=(--cluster-replicas-uri "$cluster_r_uri") || say "no cluster+replicas column: that cluster did not start"

say "running (build log: $log)"
cmdline="bash bench/run.sh${quick:+ $quick}${only[1]:+ --only ${only[1]}}"
"${pin_cli[@]}" /usr/bin/python3 "$bench/bench.py" --uris "$uris" $quick --command "$cmdline" \
  --pinning "$pinning" "${only[@]}" "${args[@]}"
