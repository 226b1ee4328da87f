#!/usr/bin/env bash
# DISTLOCK_FAIR hand-over latency (release -> the next waiter's acquire),
# 8 processes x 2 threads on one key, on 1, 3 and 5 nodes. Builds libdistlock
# and bench/c/fair_handover into BUILD (default /tmp/distlock-fairhandover),
# starts 5 throwaway redis-servers (tests/harness/redis.sh) and prints one
# line per node count: hand-overs, p50/p99/max in ms, overlaps (must be 0).
# Servers on CPU 0 and clients on CPU 1, as bench/run.sh does (BENCH_PIN=0
# to let the scheduler place them).
#
#   bash bench/c/fair_handover.sh [SECONDS=10] [PROCS=8] [THREADS=2] [HOLD_US=1000]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${DISTLOCK_FAIRHANDOVER_BUILD:-/tmp/distlock-fairhandover}
secs=${1:-10} procs=${2:-8} threads=${3:-2} hold=${4:-1000}
mkdir -p "$build"
cmake -S "$repo" -B "$build/core" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTLOCK_BUILD_TESTS=OFF \
  -DDISTLOCK_BUILD_CLI=OFF -DDISTLOCK_BUILD_PHP=OFF > "$build/build.log" 2>&1
cmake --build "$build/core" --target distlock_static -j2 >> "$build/build.log" 2>&1
cc -O2 -Wall -o "$build/fair_handover" "$here/fair_handover.c" -I "$repo/core/include" \
  "$build/core/core/libdistlock.a" -lhiredis -lssl -lcrypto -lpthread
pin_srv=(); pin_cli=()
if [ "${BENCH_PIN:-1}" != 0 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin_srv=(taskset -c 0); pin_cli=(taskset -c 1)
fi
work=$(mktemp -d /tmp/distlock-fairhandover.XXXXXX)
trap 'bash "$repo/tests/harness/redis.sh" stop "$work" >/dev/null 2>&1; rm -rf "$work"' EXIT
"${pin_srv[@]}" bash "$repo/tests/harness/redis.sh" start "$work" 5 >/dev/null
IFS=, read -r -a uri <<< "$(bash "$repo/tests/harness/redis.sh" uris "$work")"
if [ "$(git -C "$repo" rev-parse --show-toplevel 2>/dev/null)" = "$repo" ]; then
  version="git $(git -C "$repo" rev-parse --short=12 HEAD)$(git -C "$repo" diff --quiet HEAD -- core || echo ' (with uncommitted changes)')"
else
  version="$repo (not a git checkout)"
fi
echo "distlock $version; $(redis-server --version | cut -d' ' -f1-3); ${procs} processes x ${threads} threads, hold ${hold} us, ${secs} s per row; ${pin_cli[*]:-not pinned}"
for n in 1 3 5; do
  uris=$(IFS=,; echo "${uri[*]:0:$n}")
  printf 'nodes=%d ' "$n"
  # a row with errors (a node starved past the command timeout on a loaded
  # machine) is reported as such; the other rows still run
  "${pin_cli[@]}" "$build/fair_handover" "$uris" "$secs" "$procs" "$threads" "$hold" \
    "bench:fairhandover:$n" || echo "nodes=$n: this row is not valid (exit $?)"
done
