#!/usr/bin/env bash
# Redis Cluster routing: what it costs. Starts a single master and a cluster
# of 3 masters + 3 replicas (tests/harness/redis.sh start / cluster), builds
# libdistlock and bench/c/distlock_bench into BUILD (default
# /tmp/distlock-clustercost), and runs `distlock_bench vs`: acquire+release
# pairs/s of one key on the single master (A) against the cluster (B), in
# alternating slices of one run, and the ratio B/A; then the same with A =
# the cluster master that owns the key, as a plain redis:// node: the same
# server work, without the client's routing (what routing costs).
#
#   bash bench/c/cluster_cost.sh [SLICE_MS=1000] [ROUNDS=9]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${DISTLOCK_CLUSTERCOST_BUILD:-/tmp/distlock-clustercost}
slice=${1:-1000} rounds=${2:-9}
mkdir -p "$build"
cmake -S "$repo" -B "$build/core" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTLOCK_BUILD_TESTS=OFF \
  -DDISTLOCK_BUILD_CLI=OFF -DDISTLOCK_BUILD_PHP=OFF > "$build/build.log" 2>&1
cmake --build "$build/core" --target distlock_static -j2 >> "$build/build.log" 2>&1
cc -O2 -Wall -o "$build/distlock_bench" "$here/distlock_bench.c" -I "$repo/core/include" \
  "$build/core/core/libdistlock.a" -lhiredis -lssl -lcrypto -lpthread
work=$(mktemp -d /tmp/distlock-clustercost.XXXXXX)
trap 'bash "$repo/tests/harness/redis.sh" stop "$work/single" >/dev/null 2>&1;
      bash "$repo/tests/harness/redis.sh" stop "$work/cluster" >/dev/null 2>&1; rm -rf "$work"' EXIT
single=$(bash "$repo/tests/harness/redis.sh" start "$work/single" 1)
cluster=$(bash "$repo/tests/harness/redis.sh" cluster "$work/cluster")
echo "A: redis://127.0.0.1:$single; B: $cluster; $(redis-server --version | cut -d' ' -f1-3)"
"$build/distlock_bench" vs "redis://127.0.0.1:$single" "$cluster" "$slice" "$rounds" "bench:clustercost"
p0=${cluster#redis-cluster://127.0.0.1:}; p0=${p0%%,*}
slot=$(redis-cli -p "$p0" cluster keyslot bench:clustercost)
owner=$(redis-cli -p "$p0" cluster nodes | awk -v s="$slot" '$3 ~ /master/ {
  for (f = 9; f <= NF; f++) { n = split($f, r, "-"); lo = r[1]; hi = n > 1 ? r[2] : r[1];
    if (s >= lo + 0 && s <= hi + 0) { split($2, a, "@"); print a[1]; exit } } }')
echo "A: the key's master as a plain node, redis://$owner; B: the cluster"
"$build/distlock_bench" vs "redis://$owner" "$cluster" "$slice" "$rounds" "bench:clustercost"
