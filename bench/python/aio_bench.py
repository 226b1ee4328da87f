"""distlock.aio under load, from one event loop (bench/aio.sh runs it).

    python aio_bench.py queue URIS [TASKS]        TASKS (10,000) tasks wait on one key
    python aio_bench.py arrival asyncio|redis-py URI [TASKS]
                                                  the queue's arrival through an
                                                  asyncio.Lock / redis-py's asyncio Lock
    python aio_bench.py pairs URI [TASKS] [SECS] [ROUNDS]
                                                  TASKS (1,000) tasks, each on its own key:
                                                  acquire + release pairs/s, distlock.aio
                                                  against redis-py's asyncio Lock

queue: every task waits (no limit) on one key through one aio.Client and
holds it for a turn of the loop; they arrive 100 per turn of the loop and
are served one after the other. It
prints the threads of the process besides the loop's (the most seen, from
/proc/self/task, sampled every 1 ms), the connections per node (the most
seen: INFO clients of each node, sampled every 50 ms by a separate process,
less its own connection), the errors, the loop's worst lag (a 1 ms timer,
as test_aio's ticker; while they are served, and apart while they arrive;
also less the time the kernel kept the loop's thread waiting for a CPU, and
that counting only ticks without a pause of Python's cyclic garbage
collector, whose worst pause is shown, with the objects it tracks per
waiting task: it walks all of them) and the gap from one holder's release
call to the next holder's acquire returning (p50/p99/max, CLOCK_MONOTONIC in
this process), and the SUBSCRIBE and UNSUBSCRIBE commands each node ran
while they were served (INFO commandstats, read between the windows). The
harness's own gather() over the 10,000 tasks (a callback on each) is made
between the two windows and is in neither: its time is shown apart.

arrival: the same arrival through an asyncio.Lock (no network: what 10,000
waiting tasks cost the loop whatever the lock) or redis-py's asyncio Lock,
the same figures while they arrive (see arrival_peer).

pairs: TASKS tasks, each acquire (try once) + release on its own key in a
loop, for SECS seconds; distlock.aio and redis-py's asyncio Lock
(``redis.asyncio.Redis.lock(key, timeout=30)``, its defaults) alternate,
ROUNDS rounds each; the medians, the ratio of the medians and the errors
(counted; the task goes on).

One line per figure ("name: value"), last a summary. Standard library, the
distlock package and redis-py (Debian's python3-redis).
"""
import asyncio
import gc
import os
import statistics
import subprocess
import sys
import threading
import time

import distlock.aio as aio

SAMPLER = r'''
import sys, time, redis
uris = sys.argv[1].split(",")
cs = [redis.Redis.from_url(u) for u in uris]
most = [0] * len(cs)
sys.stdout.write("ready\n"); sys.stdout.flush()
import select
while not select.select([sys.stdin], [], [], 0.05)[0]:
    for i, c in enumerate(cs):
        most[i] = max(most[i], c.info("clients")["connected_clients"] - 1)
print(",".join(map(str, most)))
'''


def runqueue_wait_s() -> float:
    """Seconds this thread has spent runnable but not running (waiting for a
    CPU on a shared machine): /proc/self/task/TID/schedstat, as test_aio."""
    with open("/proc/self/task/%d/schedstat" % threading.get_native_id()) as f:
        return int(f.read().split()[1]) / 1e9


def threads_now() -> int:
    return len(os.listdir("/proc/self/task"))


class GcPauses:
    """Python's cyclic garbage collector's pauses (gc.callbacks): the worst,
    and a count of collections, so a lag can be told apart from them."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.count = 0
        self._t = 0.0
        gc.callbacks.append(self._cb)

    def close(self) -> None:
        gc.callbacks.remove(self._cb)

    def _cb(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t = time.perf_counter()
        else:
            self.worst = max(self.worst, time.perf_counter() - self._t)
            self.count += 1


class Ticker:
    """The loop's worst lag on a 1 ms timer (also counting only the ticks
    no collection of the garbage collector fell in), and the most threads
    seen."""

    def __init__(self, gcp: GcPauses) -> None:
        self.worst = 0.0
        self.worst_own = 0.0  # less the time the kernel kept the thread waiting for a CPU
        self.worst_no_gc = 0.0  # own, in ticks without a garbage collection
        self.threads = 0
        self.ticks = 0
        self.stop = False
        self._gc = gcp

    def reset(self) -> None:
        self.worst = self.worst_own = self.worst_no_gc = 0.0

    async def run(self) -> None:
        while not self.stop:
            n = self._gc.count
            q = runqueue_wait_s()
            t = time.monotonic()
            await asyncio.sleep(0.001)
            lag = time.monotonic() - t - 0.001
            own = lag - (runqueue_wait_s() - q)
            self.worst = max(self.worst, lag)
            self.worst_own = max(self.worst_own, own)
            if self._gc.count == n:
                self.worst_no_gc = max(self.worst_no_gc, own)
            self.threads = max(self.threads, threads_now())
            self.ticks += 1

    async def next_tick(self) -> None:
        """Until a tick that started after this call has ended."""
        n = self.ticks + 1
        while self.ticks <= n:
            await asyncio.sleep(0)


def pubsub_calls(uris: str) -> list:
    """(SUBSCRIBE, UNSUBSCRIBE) calls each node has run so far (INFO
    commandstats; a blocking call: made between the lag windows)."""
    import redis
    out = []
    for u in uris.split(","):
        r = redis.Redis.from_url(u)
        try:
            st = r.info("commandstats")
        finally:
            r.close()
        out.append(tuple(st.get("cmdstat_" + n, {}).get("calls", 0)
                         for n in ("subscribe", "unsubscribe")))
    return out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


async def queue(uris: str, tasks: int) -> int:
    key = "bench:aio:queue:%d" % os.getpid()
    sampler = subprocess.Popen([sys.executable, "-c", SAMPLER, uris], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert sampler.stdout is not None and sampler.stdin is not None
    assert sampler.stdout.readline().strip() == "ready"
    base_threads = threads_now()  # the loop's thread (and the interpreter's own, if any)
    gcp = GcPauses()
    ticker = Ticker(gcp)
    tick = asyncio.ensure_future(ticker.run())
    errors = []
    got = []      # (acquired_ns, release_call_ns) per holder, in the order served
    held = [0]
    overlap = [0]
    t0 = time.monotonic()
    async with aio.Client(uris) as c:
        async def one(i: int) -> None:
            try:
                async with c.lock(key, ttl=30):
                    a = time.monotonic_ns()
                    held[0] += 1
                    if held[0] != 1:
                        overlap[0] += 1
                    await asyncio.sleep(0)  # a turn of the loop under the lock
                    held[0] -= 1
                    got.append((a, time.monotonic_ns()))
            except Exception as e:  # counted, the first few shown
                errors.append(repr(e))

        # The tasks arrive 100 per turn of the loop (a server's requests
        # come over time; 10,000 coroutines started in one turn would be the
        # loop's own lag, not the library's); the first one takes the key at
        # once, the others wait.
        started = []
        objects = len(gc.get_objects())
        for i in range(0, tasks, 100):
            started += [asyncio.ensure_future(one(k)) for k in range(i, min(tasks, i + 100))]
            await asyncio.sleep(0)
        start_lag = (ticker.worst, ticker.worst_own, ticker.worst_no_gc)
        gc_arrival, gc_arrival_n = gcp.worst, gcp.count
        per_task = (len(gc.get_objects()) - objects) / tasks
        # The harness's own wait for the tasks: gather() puts a callback on
        # each of them, 4-8 ms for 10,000 (with the garbage collections it
        # sets off), which is no serving; made here, its tick is in no
        # figure of the ticker, as the count's above is, and its time shown.
        g0 = time.perf_counter()
        done = asyncio.gather(*started)
        gather_s = time.perf_counter() - g0
        subs0 = pubsub_calls(uris)
        await ticker.next_tick()  # the count and the gather are in no figure of the ticker
        ticker.reset()
        gcp.worst = 0.0
        await done
        served_s = time.monotonic() - t0
        subs1 = pubsub_calls(uris)
        ticker.stop = True
        await tick
    gcp.close()
    sampler.stdin.close()
    conns = sampler.stdout.read().strip()
    sampler.wait()
    gaps = [(got[i + 1][0] - got[i][1]) / 1e6 for i in range(len(got) - 1)]
    nodes = len(uris.split(","))
    print("queue tasks: %d on 1 key, %d node%s" % (tasks, nodes, "" if nodes == 1 else "s"))
    print("queue served: %d in %.2f s" % (len(got), served_s))
    print("queue threads besides the loop's: %d (most seen; the process had %d before the client)"
          % (ticker.threads - 1, base_threads))
    print("queue connections per node: %s (most seen, INFO clients)" % conns)
    print("queue errors: %d%s" % (len(errors), (" e.g. " + errors[0]) if errors else ""))
    print("queue overlaps: %d" % overlap[0])
    print("queue worst loop lag: %.2f ms while served (%.2f ms while the tasks arrived)"
          % (ticker.worst * 1e3, start_lag[0] * 1e3))
    print("queue worst loop lag less the waits for a CPU: %.2f ms while served (%.2f ms while "
          "the tasks arrived)" % (ticker.worst_own * 1e3, start_lag[1] * 1e3))
    print("queue the same in ticks without a garbage collection: %.2f ms while served "
          "(%.2f ms while the tasks arrived)" % (ticker.worst_no_gc * 1e3, start_lag[2] * 1e3))
    print("queue worst pause of Python's garbage collector: %.2f ms while served (%.2f ms "
          "while the tasks arrived, %d collections)" % (gcp.worst * 1e3, gc_arrival * 1e3,
                                                        gc_arrival_n))
    print("queue objects Python's garbage collector tracks, per waiting task: %.1f (after "
          "the arrival)" % per_task)
    print("queue the harness's gather() over the tasks: %.2f ms (in no lag figure)"
          % (gather_s * 1e3))
    print("queue SUBSCRIBE / UNSUBSCRIBE per node while served: %s (INFO commandstats)"
          % ", ".join("%d / %d" % (b[0] - a[0], b[1] - a[1]) for a, b in zip(subs0, subs1)))
    print("queue release->next acquire: p50 %.3f ms, p99 %.3f ms, max %.3f ms"
          % (pct(gaps, 0.5), pct(gaps, 0.99), max(gaps) if gaps else float("nan")))
    return 1 if errors or overlap[0] or len(got) != tasks else 0


async def arrival_peer(uri: str, tasks: int, kind: str) -> int:
    """The queue's arrival (TASKS tasks on one key, 100 per turn of the
    loop, the first takes it at once) through another lock, for the loop's
    worst lag and the collector's pauses while they arrive: ``asyncio`` (an
    asyncio.Lock: no network, the floor of any lock's waiting tasks) or
    ``redis-py`` (``redis.asyncio.Redis.lock(key, timeout=30)``, its
    defaults: a waiter retries every 0.1 s; a BlockingConnectionPool of 100
    connections, as 10,000 concurrent commands would otherwise open 10,000
    connections, the server's maxclients). Only the arrival is measured:
    the waiters are then cancelled (redis-py's would poll for minutes)."""
    gcp = GcPauses()
    ticker = Ticker(gcp)
    tick = asyncio.ensure_future(ticker.run())
    errors: list = []
    r = None
    if kind == "redis-py":
        import redis.asyncio as aredis
        r = aredis.Redis(connection_pool=aredis.BlockingConnectionPool.from_url(
            uri, max_connections=100))
        key = "bench:aio:arrival-r:%d" % os.getpid()

        def lock():
            return r.lock(key, timeout=30)
    else:
        alock = asyncio.Lock()

        def lock():
            return alock

    async def one(i: int) -> None:
        try:
            async with lock():
                await asyncio.sleep(0)  # a turn of the loop under the lock
        except asyncio.CancelledError:
            raise
        except Exception as e:  # counted, the first few shown
            errors.append(repr(e))

    await asyncio.sleep(0.01)  # the ticker runs
    ticker.reset()
    gcp.worst, gcp.count = 0.0, 0
    started = []
    objects = len(gc.get_objects())
    for i in range(0, tasks, 100):
        started += [asyncio.ensure_future(one(k)) for k in range(i, min(tasks, i + 100))]
        await asyncio.sleep(0)
    lag = (ticker.worst, ticker.worst_own, ticker.worst_no_gc)
    worst_gc, n_gc = gcp.worst, gcp.count
    per_task = (len(gc.get_objects()) - objects) / tasks
    for t in started:
        t.cancel()
    await asyncio.gather(*started, return_exceptions=True)
    ticker.stop = True
    await tick
    gcp.close()
    if r is not None:
        await r.delete(key)
        await r.aclose() if hasattr(r, "aclose") else await r.close()
        import redis
        name = "redis-py %s asyncio Lock" % redis.__version__
    else:
        name = "asyncio.Lock"
    print("arrival %s: worst loop lag %.2f ms (%.2f ms less the waits for a CPU, %.2f ms in "
          "ticks without a garbage collection); worst pause of the garbage collector %.2f ms "
          "(%d collections); %.1f objects it tracks per waiting task; errors %d%s"
          % (name, lag[0] * 1e3, lag[1] * 1e3, lag[2] * 1e3, worst_gc * 1e3, n_gc, per_task,
             len(errors), (" e.g. " + errors[0]) if errors else ""))
    return 1 if errors else 0


async def pairs_distlock(uri: str, tasks: int, secs: float, errors: list) -> float:
    n = [0]
    async with aio.Client(uri) as c:
        async def one(i: int, stop: float) -> None:
            lk = c.lock("bench:aio:pairs:%d:%d" % (os.getpid(), i), ttl=30)
            while time.monotonic() < stop:
                try:
                    if not await lk.acquire(blocking=False):
                        raise RuntimeError("own key refused")
                    await lk.release()
                    n[0] += 1
                except Exception as e:  # counted, the task goes on
                    errors.append(repr(e))
        t0 = time.monotonic()
        await asyncio.gather(*(one(i, t0 + secs) for i in range(tasks)))
        return n[0] / (time.monotonic() - t0)


async def pairs_redis_py(uri: str, tasks: int, secs: float, errors: list) -> float:
    import redis.asyncio as aredis
    n = [0]
    r = aredis.Redis.from_url(uri)
    try:
        async def one(i: int, stop: float) -> None:
            lk = r.lock("bench:aio:pairs-r:%d:%d" % (os.getpid(), i), timeout=30)
            while time.monotonic() < stop:
                try:
                    if not await lk.acquire(blocking=False):
                        raise RuntimeError("own key refused")
                    await lk.release()
                    n[0] += 1
                except Exception as e:  # counted, the task goes on
                    errors.append(repr(e))
        t0 = time.monotonic()
        await asyncio.gather(*(one(i, t0 + secs) for i in range(tasks)))
        return n[0] / (time.monotonic() - t0)
    finally:
        await r.aclose() if hasattr(r, "aclose") else await r.close()


def pairs(uri: str, tasks: int, secs: float, rounds: int) -> int:
    import redis
    d, p = [], []
    de: list = []
    pe: list = []
    for k in range(rounds):
        d.append(asyncio.run(pairs_distlock(uri, tasks, secs, de)))
        p.append(asyncio.run(pairs_redis_py(uri, tasks, secs, pe)))
        print("pairs round %d: distlock.aio %.0f/s, redis-py asyncio Lock %.0f/s (errors so far "
              "%d, %d)" % (k + 1, d[-1], p[-1], len(de), len(pe)))
    md, mp = statistics.median(d), statistics.median(p)
    print("pairs tasks: %d, each on its own key, 1 node, %g s x %d rounds each, alternating"
          % (tasks, secs, rounds))
    print("pairs distlock.aio: %.0f/s (median)" % md)
    print("pairs redis-py %s asyncio Lock: %.0f/s (median)" % (redis.__version__, mp))
    print("pairs ratio: %.2fx" % (md / mp))
    for name, errs in (("distlock.aio", de), ("redis-py", pe)):
        print("pairs errors %s: %d%s" % (name, len(errs), (" e.g. " + errs[0]) if errs else ""))
    return 1 if de or pe else 0


def main() -> int:
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "queue" and len(sys.argv) >= 3:
        return asyncio.run(queue(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 10000))
    if what == "arrival" and len(sys.argv) >= 4:
        return asyncio.run(arrival_peer(sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4
                                        else 10000, sys.argv[2]))
    if what == "pairs" and len(sys.argv) >= 3:
        a = sys.argv[3:]
        return pairs(sys.argv[2], int(a[0]) if a else 1000, float(a[1]) if len(a) > 1 else 3.0,
                     int(a[2]) if len(a) > 2 else 3)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
