#!/usr/bin/env bash
# distlock.aio under load (not part of run.sh): 10,000 tasks waiting on one
# key through one aio.Client, on 1 and 3 nodes (and their arrival through an
# asyncio.Lock and redis-py's asyncio Lock, for the loop's lag while they
# arrive), and 1,000 tasks each taking its own key against redis-py's asyncio
# Lock on 1 node, in one run
# (bench/python/aio_bench.py says what each figure is). Builds the package
# into BUILD/venv with python/build.sh (Debian's python3, with redis-py),
# starts three redis-servers (tests/harness/redis.sh); servers on CPU 0, the
# client on CPU 1 (taskset), as bench/run.sh places them.
#
#   bash bench/aio.sh [TASKS=10000] [PAIR_TASKS=1000] [SECS=3] [ROUNDS=3]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
build=${DISTLOCK_AIO_BENCH_BUILD:-/tmp/distlock-aio-bench}
tasks=${1:-10000} pair_tasks=${2:-1000} secs=${3:-3} rounds=${4:-3}
mkdir -p "$build"
bash "$repo/python/build.sh" "$build/venv" > "$build/build.log" 2>&1 \
  || { tail -n 20 "$build/build.log" >&2; exit 1; }
work=$(mktemp -d /tmp/distlock-aio-bench.XXXXXX)
trap 'bash "$repo/tests/harness/redis.sh" stop "$work" >/dev/null 2>&1; rm -rf "$work"' EXIT
pin_srv=() pin_cli=()
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  pin_srv=(taskset -c 0) pin_cli=(taskset -c 1)
fi
read -r -a ports < <("${pin_srv[@]}" bash "$repo/tests/harness/redis.sh" start "$work" 3)
one="redis://127.0.0.1:${ports[0]}"
three="$one,redis://127.0.0.1:${ports[1]},redis://127.0.0.1:${ports[2]}"
py=$build/venv/bin/python
echo "$(redis-server --version | cut -d' ' -f1-3); $("$py" -c 'import sys, distlock; print("python", sys.version.split()[0], "distlock", distlock.__version__)'); git $(git -C "$repo" rev-parse --short=12 HEAD)"
rc=0
echo "-- 1 node"
(cd "$work" && "${pin_cli[@]}" "$py" "$here/python/aio_bench.py" queue "$one" "$tasks") || rc=1
echo "-- 3 nodes"
(cd "$work" && "${pin_cli[@]}" "$py" "$here/python/aio_bench.py" queue "$three" "$tasks") || rc=1
echo "-- the same arrival through an asyncio.Lock and redis-py's asyncio Lock, 1 node"
(cd "$work" && "${pin_cli[@]}" "$py" "$here/python/aio_bench.py" arrival asyncio "$one" "$tasks") || rc=1
(cd "$work" && "${pin_cli[@]}" "$py" "$here/python/aio_bench.py" arrival redis-py "$one" "$tasks") || rc=1
echo "-- own keys, 1 node"
(cd "$work" && "${pin_cli[@]}" "$py" "$here/python/aio_bench.py" pairs "$one" "$pair_tasks" "$secs" "$rounds") || rc=1
exit $rc
