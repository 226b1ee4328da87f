#!/usr/bin/env python3
"""Each primitive from Python, one run, one node: acquire+release pairs per
second, and the hand-over from a release to a waiter.

    python bench_primitives.py [-n PAIRS] [--handovers H] [--servers URI] [--kinds K,...]

Without --servers it starts a throwaway redis-server on a free loopback port
(and stops it). Pairs: one uncontended acquire (try once) and its release, on
one key, sequential, from one thread; the best of 3 rounds. Hand-over: a
holder releases while a waiter (of another client, whose retry backoff is
5 s, so only the release's notification wakes it) waits for it in a thread;
the time from the release call to the waiter's acquire returning. Kinds: a
lock; a permit of a semaphore of 3 (the waiter behind 3 holders); a read lock
(the waiter behind a writer); lock_many of 2 keys (the waiter behind a lock
of one of them).
"""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

# Run from python/, the source package would shadow the installed one.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

import importlib.util  # noqa: E402

import redis  # noqa: E402

import distlock  # noqa: E402

# bench_pairs.py's throwaway redis-server, loaded by path (python/ is off sys.path)
_spec = importlib.util.spec_from_file_location("bench_pairs", os.path.join(_here, "bench_pairs.py"))
_pairs_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pairs_mod)
start_redis = _pairs_mod.start_redis

KINDS = ("lock", "semaphore", "read", "many2")


def make(kind, client, key):
    if kind == "semaphore":
        return client.semaphore(key, 3, ttl=30)
    if kind == "read":
        return client.lock(key, ttl=30, shared=True)
    if kind == "many2":
        return client.lock_many([key + ":a", key + ":b"], ttl=30)
    return client.lock(key, ttl=30)


def blockers(kind, client, key):
    """What a waiter of `kind` on `key` waits behind; the first one is released."""
    if kind == "semaphore":
        return [client.semaphore(key, 3, ttl=30) for _ in range(3)]
    if kind == "many2":
        return [client.lock(key + ":b", ttl=30)]
    return [client.lock(key, ttl=30)]  # a writer: a lock's or a read lock's waiter


def pairs(lk, n):
    t0 = time.perf_counter()
    for _ in range(n):
        if not lk.acquire(blocking=False):
            raise RuntimeError("%r unexpectedly held" % (lk,))
        lk.release()
    return n / (time.perf_counter() - t0)


def handover_ms(kind, client, slow, r, key):
    held = blockers(kind, client, key)
    for h in held:
        if not h.acquire(blocking=False):
            raise RuntimeError("%r unexpectedly held" % (h,))
    waiter = make(kind, slow, key)
    got = []
    t = threading.Thread(target=lambda: got.append((waiter.acquire(timeout=30),
                                                     time.perf_counter())))
    t.start()
    channel = "distlock:" + (key + ":b" if kind == "many2" else key)
    deadline = time.monotonic() + 10
    while dict(r.pubsub_numsub(channel)).get(channel.encode(), 0) < 1:
        if time.monotonic() > deadline:
            raise RuntimeError("the waiter never subscribed")
        time.sleep(0.001)
    time.sleep(0.02)  # a measurement, not a synchronization: let it settle into its wait
    t0 = time.perf_counter()
    held[0].release()
    t.join()
    if not got or not got[0][0]:
        raise RuntimeError("the waiter did not get it")
    waiter.release()
    for h in held[1:]:
        h.release()
    return (got[0][1] - t0) * 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5000, help="pairs per round (default 5000)")
    ap.add_argument("--handovers", type=int, default=50, help="hand-overs per kind (default 50)")
    ap.add_argument("--servers", help="a redis:// URI (default: a throwaway redis-server)")
    ap.add_argument("--kinds", default=",".join(KINDS),
                    help="comma list of %s (default: all)" % ", ".join(KINDS))
    args = ap.parse_args()
    workdir = proc = None
    uri = args.servers
    if uri is None:
        if shutil.which("redis-server") is None:
            sys.exit("redis-server not found (or pass --servers)")
        workdir = tempfile.mkdtemp(prefix="distlock-bench-")
        proc, uri = start_redis(workdir)
    try:
        r = redis.Redis.from_url(uri)
        with distlock.Client(uri) as client, \
                distlock.Client(uri, retry_min=5, retry_max=5) as slow:
            print("%-10s %10s %28s" % ("kind", "pairs/s", "hand-over ms: median p90 max"))
            for kind in args.kinds.split(","):
                lk = make(kind, client, "bench:%s" % kind)
                best = max(pairs(lk, args.n) for _ in range(3))
                lat = sorted(handover_ms(kind, client, slow, r, "bench:hand:%s:%d" % (kind, i))
                             for i in range(args.handovers))
                print("%-10s %10.0f %14.2f %6.2f %6.2f" % (
                    kind, best, statistics.median(lat), lat[int(len(lat) * 0.9) - 1], lat[-1]))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
