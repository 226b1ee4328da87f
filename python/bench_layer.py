#!/usr/bin/env python3
"""Client CPU per uncontended pair: the package's Lock against the bare C calls.

    python bench_layer.py URI [PAIRS]
    python bench_layer.py URI PAIRS package|bare|with    (one loop of PAIRS pairs, nothing printed)

A pair as bench/python/distlock_adapter.py makes it (a new Lock, acquire
with blocking=False, release) against the same pair as the extension's own
calls (distlock_acquire, distlock_release, distlock_lock_free); 7 rounds,
alternating, thread CPU time; prints the medians and their difference: what
the package's Python code costs per pair beyond the C calls.

With a third argument it runs that loop alone, once (after 50 pairs of
warm-up): for an instruction count that the machine's load does not move,
run it under callgrind for two PAIRS and divide the difference, e.g.

    valgrind --tool=callgrind --callgrind-out-file=/dev/null python bench_layer.py URI 500 package
    valgrind --tool=callgrind --callgrind-out-file=/dev/null python bench_layer.py URI 2500 package

("I refs" of the second minus the first, / 2000: instructions per pair).
"with" is `with client.lock(key, ttl=30): pass`.
"""
import os
import statistics
import sys
import time

# Run from python/, the source package would shadow the installed one.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

from distlock import Client, _core  # noqa: E402


def main() -> None:
    uri = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    client = Client(uri)
    key = "bench:layer:%d" % os.getpid()

    def package(n: int) -> None:
        for _ in range(n):
            lk = client.lock(key, ttl=30)
            if not lk.acquire(blocking=False):
                raise SystemExit("key unexpectedly held")
            lk.release()

    def with_(n: int) -> None:
        for _ in range(n):
            with client.lock(key, ttl=30):
                pass

    def bare(n: int) -> None:
        h0 = client._h
        for _ in range(n):
            st, h = _core.distlock_acquire(h0, key, 30000, 0, 0)
            if st != _core.DISTLOCK_OK:
                raise SystemExit("key unexpectedly held")
            _core.distlock_release(h)
            _core.distlock_lock_free(h)

    if len(sys.argv) > 3:
        f = {"package": package, "bare": bare, "with": with_}[sys.argv[3]]
        f(50)
        f(n)
        client.close()
        return
    res = {"package": [], "bare": []}
    for _ in range(7):
        for name, f in (("package", package), ("bare", bare)):
            f(100)
            t = time.thread_time()
            f(n)
            res[name].append((time.thread_time() - t) / n * 1e6)
    p, b = statistics.median(res["package"]), statistics.median(res["bare"])
    print("client CPU us/pair: package %.2f, bare C calls %.2f, Python layer %.2f" % (p, b, p - b))
    client.close()


if __name__ == "__main__":
    main()
