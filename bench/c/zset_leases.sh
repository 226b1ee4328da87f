#!/usr/bin/env bash
# Semaphore permits and read locks against plain locks (bench/c/zset_leases.c):
# acquire/release pairs/s of a lock, a read lock and a permit in alternating
# slices of one run; the hand-over from a release to a waiting permit (and
# from the last reader to a waiting writer); and a writer's wait behind
# readers that keep arriving. One line per node count (1 and 3). Builds
# libdistlock and the program into BUILD (default /tmp/distlock-zsetleases),
# starts 3 throwaway redis-servers (tests/harness/redis.sh). Servers on CPU 0
# and clients on CPU 1, as bench/run.sh does (BENCH_PIN=0: not pinned).
#
#   bash bench/c/zset_leases.sh [SECONDS=6]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${DISTLOCK_ZSETLEASES_BUILD:-/tmp/distlock-zsetleases}
secs=${1:-6}
mkdir -p "$build"
cmake -S "$repo" -B "$build/core" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTLOCK_BUILD_TESTS=OFF \
  -DDISTLOCK_BUILD_CLI=OFF -DDISTLOCK_BUILD_PHP=OFF > "$build/build.log" 2>&1
cmake --build "$build/core" --target distlock_static -j2 >> "$build/build.log" 2>&1
cc -O2 -Wall -o "$build/zset_leases" "$here/zset_leases.c" -I "$repo/core/include" \
  "$build/core/core/libdistlock.a" -lhiredis -lssl -lcrypto -lpthread
pin_srv=(); pin_cli=()
if [ "${BENCH_PIN:-1}" != 0 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin_srv=(taskset -c 0); pin_cli=(taskset -c 1)
fi
work=$(mktemp -d /tmp/distlock-zsetleases.XXXXXX)
trap 'bash "$repo/tests/harness/redis.sh" stop "$work" >/dev/null 2>&1; rm -rf "$work"' EXIT
"${pin_srv[@]}" bash "$repo/tests/harness/redis.sh" start "$work" 3 >/dev/null
IFS=, read -r -a uri <<< "$(bash "$repo/tests/harness/redis.sh" uris "$work")"
echo "distlock git $(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo '?');" \
  "$(redis-server --version | cut -d' ' -f1-3); ${secs} s of pairs per row; ${pin_cli[*]:-not pinned}"
for n in 1 3; do
  uris=$(IFS=,; echo "${uri[*]:0:$n}")
  echo "nodes=$n"
  "${pin_cli[@]}" "$build/zset_leases" "$uris" "$secs" | sed 's/^/  /'
done
