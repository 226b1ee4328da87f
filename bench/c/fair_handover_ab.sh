#!/usr/bin/env bash
# Two builds of bench/c/fair_handover (e.g. without and with a change) on the
# same 5 redis-servers, taking turns: ROUNDS alternating slices of SECS
# seconds per node count (1, 3, 5), so the machine's changing load falls on
# both alike. Prints every slice, then per build and node count the median
# p50/p99, the p99 range, the hand-overs over 20 ms in total and the median
# max. Build each binary with bench/c/fair_handover.sh (it leaves
# BUILD/fair_handover), e.g. from a checkout of the older commit.
#
#   bash bench/c/fair_handover_ab.sh A_BINARY B_BINARY [ROUNDS=8] [SECS=6]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
a=$1 b=$2 rounds=${3:-8} secs=${4:-6}
pin_srv=(); pin_cli=()
if [ "${BENCH_PIN:-1}" != 0 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
  pin_srv=(taskset -c 0); pin_cli=(taskset -c 1)
fi
work=$(mktemp -d /tmp/distlock-fairhandover-ab.XXXXXX)
trap 'bash "$repo/tests/harness/redis.sh" stop "$work" >/dev/null 2>&1; rm -rf "$work"' EXIT
"${pin_srv[@]}" bash "$repo/tests/harness/redis.sh" start "$work" 5 >/dev/null
IFS=, read -r -a uri <<< "$(bash "$repo/tests/harness/redis.sh" uris "$work")"
echo "A=$a B=$b; $rounds x $secs s per build and node count; ${pin_cli[*]:-not pinned}"
for n in 1 3 5; do
  uris=$(IFS=,; echo "${uri[*]:0:$n}")
  for r in $(seq "$rounds"); do
    for v in A B; do
      bin=$a; [ "$v" = B ] && bin=$b
      printf 'nodes=%d %s ' "$n" "$v"
      "${pin_cli[@]}" "$bin" "$uris" "$secs" 8 2 1000 "bench:fairhandover-ab:$n:$r:$v" 2>/dev/null \
        || echo "(slice not valid: exit $?)"
    done
  done
done | tee "$work/slices.txt"
python3 - "$work/slices.txt" <<'PY'
import re, statistics as st, sys
rows, skipped = {}, {}
for line in open(sys.argv[1]):
    m = re.match(r'nodes=(\d) ([AB]) handovers=(\d+) p50_ms=([\d.]+) p99_ms=([\d.]+) max_ms=([\d.]+) over_20ms=(\d+)', line)
    if not m:
        continue
    # a slice with errors (a server starved past the command timeout) or
    # overlaps is not a measurement of the hand-over: left out, counted
    if not re.search(r' overlaps=0 timeouts=0 errors=0 failed_procs=0', line):
        skipped[(int(m[1]), m[2])] = skipped.get((int(m[1]), m[2]), 0) + 1
        continue
    rows.setdefault((int(m[1]), m[2]), []).append([float(x) for x in m.groups()[2:]])
for (n, v), s in sorted(rows.items()):
    col = lambda i: [x[i] for x in s]
    print(f"nodes={n} {v}: slices={len(s)} handovers={int(sum(col(0)))} median_p50_ms={st.median(col(1)):.2f} "
          f"median_p99_ms={st.median(col(2)):.2f} p99_ms={min(col(2)):.2f}..{max(col(2)):.2f} "
          f"over_20ms={int(sum(col(4)))} median_max_ms={st.median(col(3)):.1f} "
          f"slices_left_out={skipped.get((n, v), 0)}")
PY
