#!/usr/bin/env bash
# Owner metadata: what DISTLOCK_OPT_OWNER_INFO costs the
# uncontended path when it is OFF (it must cost nothing), and when on.
# Starts one redis-server (tests/harness/redis.sh), builds libdistlock and
# bench/c/distlock_bench of this tree, and of a base tree (default: the
# `main` branch of this repository, exported with git archive: the code
# before owner metadata), into BUILD (default /tmp/distlock-ownercost), then
# counts with callgrind the instructions of exactly PAIRS acquire/release
# pairs on 1 node (run_pairs() only, --toggle-collect):
#   base tree; this tree, option off (the default); this tree, option on.
#
#   bash bench/c/owner_cost.sh [PAIRS=2000]
#   DISTLOCK_OWNERCOST_BASE=REV picks another base revision.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${DISTLOCK_OWNERCOST_BUILD:-/tmp/distlock-ownercost}
pairs=${1:-2000}
base_rev=${DISTLOCK_OWNERCOST_BASE:-main}
mkdir -p "$build/this" "$build/base" "$build/base-src"

build_tree() {  # SRC DIR: libdistlock.a of SRC, and this tree's bench driver linked with it
  cmake -S "$1" -B "$2/core" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTLOCK_BUILD_TESTS=OFF \
    -DDISTLOCK_BUILD_CLI=OFF -DDISTLOCK_BUILD_PHP=OFF -DDISTLOCK_SANITIZE= > "$2/build.log" 2>&1
  cmake --build "$2/core" --target distlock_static -j2 >> "$2/build.log" 2>&1
  cc -O2 -g -Wall -o "$2/distlock_bench" "$here/distlock_bench.c" -I "$1/core/include" \
    "$2/core/core/libdistlock.a" -lhiredis -lssl -lcrypto -lpthread
}
rm -rf "$build/base-src" && mkdir -p "$build/base-src"
git -C "$repo" archive "$base_rev" | tar -x -C "$build/base-src"
build_tree "$repo" "$build/this"
build_tree "$build/base-src" "$build/base"

work=$(mktemp -d /tmp/distlock-ownercost.XXXXXX)
trap 'bash "$repo/tests/harness/redis.sh" stop "$work" >/dev/null 2>&1; rm -rf "$work"' EXIT
port=$(bash "$repo/tests/harness/redis.sh" start "$work" 1 | head -n1)
uri="redis://127.0.0.1:$port"
echo "1 node: $uri; $(redis-server --version | cut -d' ' -f1-3); base $base_rev ($(git -C "$repo" rev-parse --short "$base_rev"))"

instructions() {  # BENCH OWNER: Ir of run_pairs (both calls: 200 warm-up + PAIRS)
  valgrind --tool=callgrind --toggle-collect=run_pairs --callgrind-out-file="$work/cg.out" \
    "$1" count "$uri" "$pairs" "bench:ownercost" - "$2" > /dev/null 2> "$work/cg.log"
  awk '/^summary:/ { print $2 }' "$work/cg.out"
}
base=$(instructions "$build/base/distlock_bench" 0)
off=$(instructions "$build/this/distlock_bench" 0)
on=$(instructions "$build/this/distlock_bench" 1)
echo "callgrind, $pairs pairs (+200 warm-up) on 1 node:"
echo "  base $base Ir; owner info off $off Ir (off/base $(awk -v a="$off" -v b="$base" 'BEGIN { printf "%.4f", a / b }'));" \
  "on $on Ir (on/off $(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.4f", a / b }'))"
