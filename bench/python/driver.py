"""Python bench driver: the same protocol as bench/c/common.h.

    python driver.py IMPL pairs   URIS START_NS SLICE_NS PERIOD_NS COUNT KEY
    python driver.py IMPL contend URIS START_NS END_NS KEY HOLD_US THINK_US LOG MARKER ID
    python driver.py IMPL hold    URIS COUNT TTL_MS
    python driver.py redis-py renew URIS COUNT TTL_MS
    python driver.py IMPL wake    URIS KEY ROLE    (ROLE holder | waiter; see wake_loop())

IMPL: redis-py (redis.lock.Lock, timeout 30 s, its default 0.1 s polling when
waiting; run with Debian's /usr/bin/python3) | distlock (the distlock package,
run with the interpreter of the venv python/build.sh made) | distlock-redis-py
(the same redis-py calls with lock_class=distlock.redis_py.Lock, the adapter;
run with the venv's interpreter, which sees Debian's redis-py too) |
distlock-bare (pairs only: the extension's calls without the package's Lock,
bench/python/distlock_bare_adapter.py).
"""
import os
import resource
import struct
import sys
import time
from urllib.parse import urlparse

now = time.monotonic_ns   # CLOCK_MONOTONIC, as in the C, PHP and Node drivers


def make_impl(impl, uris):
    """Reduce an implementation to try(key, ttl_ms) / wait(key, ttl_ms) / release(h)."""
    nodes = [urlparse(u) for u in uris.split(",")]
    if impl in ("redis-py", "distlock-redis-py"):
        # The adapter is the one-line switch its docs give: the same redis
        # client, the same lock() call, lock_class= added.
        import redis
        r = redis.Redis(host=nodes[0].hostname, port=nodes[0].port)
        kw = {}
        if impl == "distlock-redis-py":
            import distlock.redis_py
            kw["lock_class"] = distlock.redis_py.Lock

        def try_(key, ttl):
            lk = r.lock(key, timeout=ttl / 1000.0, **kw)
            return lk if lk.acquire(blocking=False) else None

        def wait(key, ttl):
            lk = r.lock(key, timeout=ttl / 1000.0, **kw)
            lk.acquire(blocking=True)
            return lk

        def release(lk):
            lk.release()
            return True
        return try_, wait, release
    if impl == "distlock":
        from distlock_adapter import make_distlock
        return make_distlock(uris)
    if impl == "distlock-bare":
        from distlock_bare_adapter import make_distlock_bare
        return make_distlock_bare(uris)
    raise SystemExit("unknown impl " + impl)


def cpu_ns():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return int((r.ru_utime + r.ru_stime) * 1e9)


def pct(v, p):
    if not v:
        return -1.0
    v.sort()
    return v[int(round(p * (len(v) - 1)))] / 1000.0


def wait_until(t):
    n = now()
    if n > t:
        return 1
    time.sleep((t - n) / 1e9)
    return 0


def wake_loop(try_, wait, release, key, role):
    """Wait-to-wake latency, one process per role, driven line by line on
    stdin by bench.py (run_wake):
      holder: "hold"    -> takes KEY (one attempt), prints "held"
              "release" -> prints "released t_ns=T ok=0|1", T read just before release()
      waiter: "wait"    -> prints "waiting", then blocks in wait(KEY) as the
                           library does by default; once it holds KEY it reads
                           the clock, releases, prints "acquired t_ns=T ok=0|1"
    Both first take and release KEY:warm:ROLE once, so every connection (and the
    library's own setup) exists before the first measured wait."""
    w = try_(key + ":warm:" + role, 30000)
    if w is None or not release(w):
        raise SystemExit("warm-up pair on %s:warm:%s failed" % (key, role))
    print("ready held=0", flush=True)
    h = None
    for line in sys.stdin:
        cmd = line.strip()
        if role == "holder" and cmd == "hold":
            h = try_(key, 30000)
            print("held" if h is not None else "failed: %s not free" % key, flush=True)
        elif role == "holder" and cmd == "release":
            t = now()
            ok = int(bool(h is not None and release(h)))
            h = None
            print("released t_ns=%d ok=%d" % (t, ok), flush=True)
        elif role == "waiter" and cmd == "wait":
            print("waiting", flush=True)
            g = wait(key, 30000)
            t = now()
            ok = int(bool(release(g)))
            print("acquired t_ns=%d ok=%d" % (t, ok), flush=True)
        elif cmd == "quit":
            return
        else:
            print("failed: unknown command %r for %s" % (cmd, role), flush=True)


def main():
    impl, mode, uris = sys.argv[1], sys.argv[2], sys.argv[3]
    try_, wait, release = make_impl(impl, uris)
    a = sys.argv[4:]
    if mode == "pairs":
        # windows k: [START + k*PERIOD, +SLICE), taking turns with the other
        # implementations of the group (see bench/c/common.h)
        start, slc, period, count, key = int(a[0]), int(a[1]), int(a[2]), int(a[3]), a[4]
        for _ in range(100):
            release(try_(key, 30000))
        lat, counts, errors, late, cpu = [], [], 0, 0, 0
        for k in range(count):
            ws = start + k * period
            we = ws + slc
            if now() >= we:
                counts.append(-1)
                late = 1
                continue
            wait_until(ws)
            pairs = 0
            c0 = cpu_ns()
            while True:
                t = now()
                if t >= we:
                    break
                h = try_(key, 30000)
                lat.append(now() - t)
                if h is None or not release(h):
                    errors += 1
                    continue
                pairs += 1
            cpu += cpu_ns() - c0
            counts.append(pairs)
        print("impl=%s slice_s=%.6f p50_us=%.1f p99_us=%.1f late=%d errors=%d cpu_ns=%d pairs=%s"
              % (impl, slc / 1e9, pct(lat, .5), pct(lat, .99), late, errors, cpu, ",".join(map(str, counts))))
    elif mode == "contend":
        start, end, key = int(a[0]), int(a[1]), a[2]
        hold, think, logf, markf, myid = int(a[3]) / 1e6, int(a[4]) / 1e6, a[5], a[6], int(a[7])
        fd = os.open(markf, os.O_RDWR | os.O_CREAT, 0o600)
        overlaps = errors = 0
        log = []
        late = wait_until(start)
        while now() < end:
            treq = now()
            h = wait(key, 10000)
            tacq = now()
            v = os.pread(fd, 8, 0)
            if len(v) == 8 and struct.unpack("q", v)[0] != 0:
                overlaps += 1
            os.pwrite(fd, struct.pack("q", myid), 0)
            time.sleep(hold)
            if struct.unpack("q", os.pread(fd, 8, 0))[0] != myid:
                overlaps += 1
            os.pwrite(fd, struct.pack("q", 0), 0)
            trel = now()
            if not release(h):
                errors += 1
            log.append("%d %d %d\n" % (treq, tacq, trel))
            if think > 0:
                time.sleep(think)
        with open(logf, "w") as f:
            f.writelines(log)
        print("impl=%s cs=%d overlaps=%d late=%d errors=%d" % (impl, len(log), overlaps, late, errors))
    elif mode == "hold":
        count, ttl = int(a[0]), int(a[1])
        held = [h for h in (try_("bench:hold:%d" % i, ttl) for i in range(count)) if h is not None]
        print("ready held=%d" % len(held), flush=True)
        sys.stdin.readline()
        os._exit(0)   # keep the locks: the orchestrator flushes the servers
    elif mode == "renew" and impl == "redis-py":
        # redis-py has no watchdog: the caller renews every lock itself, one
        # reacquire() (compare-and-PEXPIRE, one round trip) per lock per period
        import select
        count, ttl = int(a[0]), int(a[1])
        locks = [try_("bench:renew:%d" % i, ttl) for i in range(count)]
        locks = [lk for lk in locks if lk is not None]
        print("ready held=%d" % len(locks), flush=True)
        period = ttl / 3 / 1000.0
        nxt = time.monotonic() + period
        lost = rounds = 0
        while True:
            r, _, _ = select.select([sys.stdin], [], [], max(0.0, nxt - time.monotonic()))
            if r:
                break
            for lk in locks:
                try:
                    lk.reacquire()
                except Exception:
                    lost += 1
            rounds += 1
            nxt += period
        print("impl=redis-py rounds=%d lost=%d" % (rounds, lost), flush=True)
        os._exit(0)
    elif mode == "wake":
        wake_loop(try_, wait, release, a[0], a[1])
    else:
        raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
