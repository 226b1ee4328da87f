#!/usr/bin/env python3
"""Lock+unlock pairs per second: distlock vs redis-py's Lock, same server, one run.

    python bench_pairs.py [-n PAIRS] [--rounds R] [--servers URI]

Without --servers it starts a throwaway redis-server on a free loopback port
(and stops it). Each pair is one uncontended acquire and one release on the
same key, sequential, from one thread: distlock's Lua acquire + compare-and-
delete release (2 round trips) against redis-py's SET NX PX + Lua release
(2 round trips), with ttl/timeout 30 s. Rounds alternate the two; the best
round of each is reported (least disturbed by the rest of the machine).
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

# Run from python/, the source package would shadow the installed one.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]

import redis  # noqa: E402

import distlock  # noqa: E402


def start_redis(workdir):
    for _ in range(20):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", workdir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if redis.Redis(port=port, socket_timeout=0.5).ping():
                    return proc, "redis://127.0.0.1:%d" % port
            except redis.exceptions.ConnectionError:
                time.sleep(0.02)
        proc.kill()
        proc.wait()
    raise RuntimeError("could not start redis-server")


def bench_distlock(client, key, n):
    lk = client.lock(key, ttl=30)
    t0 = time.perf_counter()
    for _ in range(n):
        if not lk.acquire(blocking=False):
            raise RuntimeError("distlock: key unexpectedly held")
        lk.release()
    return n / (time.perf_counter() - t0)


def bench_redis_py(r, key, n):
    lk = r.lock(key, timeout=30)
    t0 = time.perf_counter()
    for _ in range(n):
        if not lk.acquire(blocking=False):
            raise RuntimeError("redis-py: key unexpectedly held")
        lk.release()
    return n / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=20000, help="pairs per round (default 20000)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each (default 3)")
    ap.add_argument("--servers", help="a redis:// URI (default: start a throwaway server)")
    args = ap.parse_args()

    proc = workdir = None
    uri = args.servers
    if uri is None:
        workdir = tempfile.mkdtemp(prefix="distlock-bench-")
        proc, uri = start_redis(workdir)
    try:
        client = distlock.Client(uri)
        r = redis.Redis.from_url(uri)
        key = "bench:pairs:%d" % os.getpid()
        bench_distlock(client, key, 500)  # warm up: connect, load scripts
        bench_redis_py(r, key, 500)
        ours, theirs = [], []
        for _ in range(args.rounds):
            ours.append(bench_distlock(client, key, args.n))
            theirs.append(bench_redis_py(r, key, args.n))
        if r.exists(key):
            raise RuntimeError("key left behind")
        client.close()
        best_ours, best_theirs = max(ours), max(theirs)
        print("server: %s, %d pairs x %d rounds each, best round reported" % (uri, args.n, args.rounds))
        print("distlock %s (Python %s): %.0f pairs/s   rounds: %s" % (
            distlock.__version__, sys.version.split()[0], best_ours,
            " ".join("%.0f" % x for x in ours)))
        print("redis-py %s Lock:          %.0f pairs/s   rounds: %s" % (
            redis.__version__, best_theirs, " ".join("%.0f" % x for x in theirs)))
        print("ratio distlock / redis-py: %.2f" % (best_ours / best_theirs))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
