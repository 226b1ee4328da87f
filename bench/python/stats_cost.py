"""Metrics' cost in Python: uncontended acquire/release pairs/s of a client
with counting on (the default) against one with DISTLOCK_OPT_STATS = 0, in
alternating slices of one run (bench/c/stats_cost.sh runs it when given a
python with the package installed).

    python3 stats_cost.py URI [SLICE_S=1.0] [ROUNDS=9]
"""
import statistics
import sys
import time

import distlock
from distlock import _core


def slice_rate(client: distlock.Client, key: str, seconds: float) -> float:
    pairs, t0 = 0, time.monotonic()
    end = t0 + seconds
    while time.monotonic() < end:
        lk = client.lock(key, ttl=30)
        if not lk.acquire(blocking=False):
            raise SystemExit("pair refused: is another process using %s?" % key)
        lk.release()
        pairs += 1
    return pairs / (time.monotonic() - t0)


def main() -> None:
    uri = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 9
    on, off = distlock.Client(uri), distlock.Client(uri)
    _core.distlock_client_set(off._h, _core.DISTLOCK_OPT_STATS, 0)
    key = "bench:statscost:py"
    slice_rate(on, key, 0.2), slice_rate(off, key, 0.2)  # warm-up
    a, b = [], []
    for _ in range(rounds):  # alternate, so drift hits both alike
        a.append(slice_rate(off, key, seconds))
        b.append(slice_rate(on, key, seconds))
    ma, mb = statistics.median(a), statistics.median(b)
    print("python stats=0 pairs/s median %.0f (min %.0f max %.0f)" % (ma, min(a), max(a)))
    print("python stats=1 pairs/s median %.0f (min %.0f max %.0f)" % (mb, min(b), max(b)))
    print("python ratio stats/no-stats %.3f over %d slices of %.1f s each" % (mb / ma, rounds,
                                                                              seconds))
    assert on.stats()["acquire_granted_total"] > 0 and off.stats()["acquire_granted_total"] == 0
    on.close()
    off.close()


if __name__ == "__main__":
    main()
