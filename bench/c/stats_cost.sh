#!/usr/bin/env bash
# Metrics: what counting costs the uncontended path.
# Starts one redis-server (tests/harness/redis.sh), builds libdistlock and
# bench/c/distlock_bench into BUILD (default /tmp/distlock-statscost), then:
#  1. callgrind: instructions of exactly PAIRS acquire/release pairs on 1 node
#     (run_pairs() only, --toggle-collect), stats on and off; with
#     DISTLOCK_STATSCOST_BASE=DIR (another checkout, e.g. the main branch
#     before metrics) also that tree's library, built the same way;
#  2. pairs/s with DISTLOCK_OPT_STATS = 1 against 0, alternating slices of
#     one run (distlock_bench statscost);
#  3. with DISTLOCK_STATSCOST_PYTHON=PY (a python with the distlock package,
#     e.g. a venv made by python/build.sh), the same in Python
#     (bench/python/stats_cost.py).
#
#   bash bench/c/stats_cost.sh [PAIRS=2000] [SLICE_MS=1000] [ROUNDS=9]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${DISTLOCK_STATSCOST_BUILD:-/tmp/distlock-statscost}
pairs=${1:-2000} slice=${2:-1000} rounds=${3:-9}
mkdir -p "$build"

# build SRC DIR: libdistlock.a of SRC and the bench driver linked with it
build_tree() {
  cmake -S "$1" -B "$2/core" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTLOCK_BUILD_TESTS=OFF \
    -DDISTLOCK_BUILD_CLI=OFF -DDISTLOCK_BUILD_PHP=OFF -DDISTLOCK_SANITIZE= > "$2/build.log" 2>&1
  cmake --build "$2/core" --target distlock_static -j2 >> "$2/build.log" 2>&1
  cc -O2 -g -Wall -o "$2/distlock_bench" "$here/distlock_bench.c" -I "$1/core/include" \
    "$2/core/core/libdistlock.a" -lhiredis -lssl -lcrypto -lpthread
}
build_tree "$repo" "$build"
if [ -n "${DISTLOCK_STATSCOST_BASE:-}" ]; then
  mkdir -p "$build/base"
  build_tree "$DISTLOCK_STATSCOST_BASE" "$build/base"
fi

work=$(mktemp -d /tmp/distlock-statscost.XXXXXX)
trap 'bash "$repo/tests/harness/redis.sh" stop "$work" >/dev/null 2>&1; rm -rf "$work"' EXIT
port=$(bash "$repo/tests/harness/redis.sh" start "$work" 1 | head -n1)
uri="redis://127.0.0.1:$port"
echo "1 node: $uri; $(redis-server --version | cut -d' ' -f1-3)"

# instructions BENCH STATS: Ir of run_pairs (both calls: 200 warm-up + PAIRS)
instructions() {
  valgrind --tool=callgrind --toggle-collect=run_pairs --callgrind-out-file="$work/cg.out" \
    "$1" count "$uri" "$pairs" "bench:statscost" "$2" > /dev/null 2> "$work/cg.log"
  awk '/^summary:/ { print $2 }' "$work/cg.out"
}
on=$(instructions "$build/distlock_bench" 1)
off=$(instructions "$build/distlock_bench" 0)
echo "callgrind, $pairs pairs (+200 warm-up) on 1 node: stats on $on Ir, off $off Ir," \
  "on/off $(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.4f", a / b }')"
if [ -n "${DISTLOCK_STATSCOST_BASE:-}" ]; then
  base=$(instructions "$build/base/distlock_bench" -)
  echo "callgrind, base tree $DISTLOCK_STATSCOST_BASE: $base Ir; this tree (stats on) / base" \
    "$(awk -v a="$on" -v b="$base" 'BEGIN { printf "%.4f", a / b }')"
fi
"$build/distlock_bench" statscost "$uri" "$slice" "$rounds" "bench:statscost"
if [ -n "${DISTLOCK_STATSCOST_PYTHON:-}" ]; then
  "$DISTLOCK_STATSCOST_PYTHON" "$repo/bench/python/stats_cost.py" "$uri" "$(awk -v s="$slice" 'BEGIN { print s / 1000 }')" "$rounds"
fi
