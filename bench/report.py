"""Markdown table and gnuplot chart of one bench.py run (see bench.py)."""
import datetime
import math
import os
import shutil
import statistics
import subprocess
import tempfile

NAN = float("nan")


def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else NAN


def fmt(x, nd=0):
    if x is None or x != x:
        return "—"
    if nd == 0:
        return "{:,.0f}".format(x)
    return "{:.{}f}".format(x, nd)


def ratio(x):
    return "—" if x is None or x != x else "%.2f×" % x


class Results:
    def __init__(self, res, why, impls):
        self.res, self.why, self.impls = res, why, impls

    def runs(self, section, cfg):
        return self.res.get((section, cfg))

    def value(self, section, cfg, key="rate"):
        r = self.runs(section, cfg)
        return med([x[key] for x in r]) if r else NAN

    def paired(self, a, b, key="rate"):
        """Median over repetitions of a/b, both from the same repetition."""
        ra, rb = self.runs(*a), self.runs(*b)
        if not ra or not rb:
            return NAN
        return med([x[key] / y[key] for x, y in zip(ra, rb) if y[key]])

    def reason(self, section, cfg):
        return self.why.get((section, cfg), "not run")

    def best_peer(self, section, cfgs):
        best, bv = None, -1
        for c in cfgs:
            if self.impls[c[0]].role == "peer":
                v = self.value(section, c)
                if v == v and v > bv:
                    best, bv = c, v
        return best


def pairs_table(R, nodes, names, out):
    sec = "pairs"
    floor = ("floor", nodes)
    cfgs = [(n, nodes) for n in names]
    best = R.best_peer(sec, cfgs)
    out.append("| implementation | lock+unlock pairs/s | × floor | × best peer | acquire p50 µs | acquire p99 µs "
               "| client CPU µs / pair | CPU × floor |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for c in cfgs:
        label = R.impls[c[0]].label + (" *(best peer)*" if c == best else "")
        if not R.runs(sec, c):
            out.append("| %s | not run: %s | | | | | | |" % (label, R.reason(sec, c)))
            continue
        errs = sum(x["errors"] for x in R.runs(sec, c))
        late = sum(x["late"] for x in R.runs(sec, c))
        note = (" (errors: %d)" % errs if errs else "") + (" (late start)" if late else "")
        cpu = R.value(sec, c, "cpu_us") if "cpu_us" in R.runs(sec, c)[0] else NAN
        fcpu = R.value(sec, floor, "cpu_us") if R.runs(sec, floor) and "cpu_us" in R.runs(sec, floor)[0] else NAN
        out.append("| %s%s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, note, fmt(R.value(sec, c)), ratio(R.paired((sec, c), (sec, floor))),
            ratio(R.paired((sec, c), (sec, best))) if best else "—",
            fmt(R.value(sec, c, "p50"), 1), fmt(R.value(sec, c, "p99"), 1), fmt(cpu, 1),
            ratio(cpu / fcpu) if fcpu == fcpu and fcpu else "—"))
    return best


def contend_table(R, think, names, out):
    sec = "contend"
    cfgs = [(n, think) for n in names]
    floor = ("floor-notify", think)
    best = R.best_peer(sec, cfgs)
    out.append("| implementation | critical sections/s | × notify floor | × best peer | owner changes/s "
               "| changes per release | waiter's median wait at a change, ms | release→next acquire at a change, ms "
               "| minority share | overlaps |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in cfgs:
        label = R.impls[c[0]].label + (" *(best peer)*" if c == best else "")
        rr = R.runs(sec, c)
        if not rr:
            out.append("| %s | not run: %s | | | | | | | | |" % (label, R.reason(sec, c)))
            continue
        late = " (late start)" if sum(x["late"] for x in rr) else ""
        errs = sum(x["errors"] for x in rr)
        note = late + (" (release errors: %d)" % errs if errs else "")
        out.append("| %s%s | %s | %s | %s | %s | %s | %s | %s | %s | **%d** |" % (
            label, note, fmt(R.value(sec, c)), ratio(R.paired((sec, c), (sec, floor))),
            ratio(R.paired((sec, c), (sec, best))) if best else "—",
            fmt(R.value(sec, c, "changes")), fmt(R.value(sec, c, "change_frac"), 2),
            fmt(R.value(sec, c, "wait_ms"), 2), fmt(R.value(sec, c, "gap_ms"), 2),
            fmt(R.value(sec, c, "minority"), 2), sum(x["overlaps"] for x in rr)))


def cs_at(R, name, n):
    """Critical sections/s with n contenders (n = 2 is the think-1 ms contended run)."""
    return ("contend", (name, 1000)) if n == 2 else ("contenders", (name, n))


def nodes_at(name, n):
    if n in (1, 5) and name != "symfony-combined":
        return ("pairs", (name, n))
    if n == 5:
        return ("pairs", (name, 5))
    return ("nodes", (name, n))


ADAPTERS = [("distlock-symfony", "symfony", "distlock-php-oo"),
            ("distlock-laravel", "laravel", "distlock-php-oo"),
            ("distlock-redis-py", "redis-py", "distlock-py")]
# How each waits by default (the wait-to-wake table says it next to the figure)
WAITS = {"symfony": "`acquire(true)`: RedisStore cannot block, so Lock retries every 100 ± 10 ms",
         "laravel": "`block()`: `usleep(250 ms)` between attempts",
         "redis-py": "`acquire(blocking=True)`: `time.sleep(0.1)` between attempts",
         "distlock-symfony": "`acquire(true)`: the store's `waitAndSave()`, distlock's wait",
         "distlock-laravel": "`block()`: distlock's wait",
         "distlock-redis-py": "`acquire(blocking=True)`: distlock's wait (`sleep` ignored)"}


def pct(xs, p):
    xs = sorted(x for x in xs if x == x)
    return xs[int(round(p * (len(xs) - 1)))] if xs else NAN


def adapters_section(R, meta, o):
    """Each adapter against the backend it replaces: pairs/s in one round-robin
    group, and the wait-to-wake latency of a waiter blocked on a held lock."""
    if not any(R.runs("adapters", (n, 1)) or R.runs("wake", (n, 1)) for a in ADAPTERS for n in a):
        if not any((k[0] in ("adapters", "wake")) for k in R.why):
            return
    o.append("## Adapters against the backends they replace (1 node)")
    o.append("")
    o.append("The one-line switches of docs/symfony.md, docs/laravel.md and docs/redis-py.md: the same "
             "framework calls (Symfony `LockFactory::createLock()` + `acquire()`/`release()`, Laravel "
             "`Repository::lock()` + `get()`/`release()` as `Cache::lock()` runs them, redis-py "
             "`Redis.lock()` + `acquire()`/`release()`) on the backend they replace and on the distlock "
             "adapter, in one round-robin group with the native front end each adapter sits on. "
             "*× backend* and *× native* are medians of ratios within a cycle.")
    o.append("")
    o.append("| adapter | pairs/s | backend it replaces | backend pairs/s | × backend | × native front end |")
    o.append("|---|---:|---|---:|---:|---:|")
    sec = "adapters"
    for ad, peer, native in ADAPTERS:
        a, b, n = (sec, (ad, 1)), (sec, (peer, 1)), (sec, (native, 1))
        if not R.runs(*a):
            o.append("| %s | not run: %s | %s | %s | | |" % (R.impls[ad].label, R.reason(*a), R.impls[peer].label,
                                                            fmt(R.value(*b)) if R.runs(*b) else "not run: " + R.reason(*b)))
            continue
        if not R.runs(*b):
            o.append("| %s | %s | %s | not run: %s | | |" % (R.impls[ad].label, fmt(R.value(*a)), R.impls[peer].label,
                                                            R.reason(*b)))
            continue
        errs = sum(x["errors"] for x in R.runs(*a)) + sum(x["errors"] for x in R.runs(*b))
        o.append("| %s%s | %s | %s | %s | %s | %s (%s) |" % (
            R.impls[ad].label, " (errors: %d)" % errs if errs else "", fmt(R.value(*a)), R.impls[peer].label,
            fmt(R.value(*b)), ratio(R.paired(a, b)),
            ratio(R.paired(a, n)) if R.runs(*n) else "not run", R.impls[native].label))
    o.append("")
    o.append("### Wait-to-wake latency")
    o.append("")
    o.append("A waiter blocks on a held lock, each library waiting the way it does by default; the holder "
             "releases; the figure is the time from the holder's release call to the waiter holding the lock "
             "(CLOCK_MONOTONIC in both processes). The holder releases once the server has run the waiter's "
             "first command (it is inside its wait) plus a random 50–550 ms, so a polling waiter's figure "
             "is what a user gets on average over its poll period, not one phase of it. %d waits per "
             "implementation (after one warm-up), interleaved across implementations."
             % meta.get("wake_trials", 0))
    o.append("")
    o.append("| implementation | how it waits (defaults) | waits | median ms | p90 ms | max ms | mean ms |")
    o.append("|---|---|---:|---:|---:|---:|---:|")
    for ad, peer, _ in ADAPTERS:
        for nm in (peer, ad):
            rr = R.runs("wake", (nm, 1))
            if not rr:
                o.append("| %s | %s | not run: %s | | | | |" % (R.impls[nm].label, WAITS[nm], R.reason("wake", (nm, 1))))
                continue
            v = [x["lat_ms"] for x in rr]
            o.append("| %s | %s | %d | %s | %s | %s | %s |" % (R.impls[nm].label, WAITS[nm], len(v), fmt(med(v), 2),
                     fmt(pct(v, 0.9), 2), fmt(max(v), 2), fmt(sum(v) / len(v), 2)))
    o.append("")
    o.append("| adapter | backend's median ÷ adapter's median | backend's mean ÷ adapter's mean |")
    o.append("|---|---:|---:|")
    for ad, peer, _ in ADAPTERS:
        ra, rb = R.runs("wake", (ad, 1)), R.runs("wake", (peer, 1))
        if not ra or not rb:
            o.append("| %s | not run: %s | |" % (R.impls[ad].label,
                                               R.reason("wake", (ad, 1)) if not ra else R.reason("wake", (peer, 1))))
            continue
        va, vb = [x["lat_ms"] for x in ra], [x["lat_ms"] for x in rb]
        o.append("| %s | %s | %s |" % (R.impls[ad].label, ratio(med(vb) / med(va)),
                                       ratio((sum(vb) / len(vb)) / (sum(va) / len(va)))))
    o.append("")


def write_report(args, impls, res, why, mem, renew, meta):
    R = Results(res, why, impls)
    day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    os.makedirs(args.out, exist_ok=True)
    # Only a full run writes DATE.md (bench/check-results.py reads the newest
    # one); a quick or partial run must never overwrite it.
    suffix = ("-quick" if args.quick else "") + ("-partial" if getattr(args, "only", "") else "")
    md_path = os.path.join(args.out, day + suffix + ".md")
    png_path = md_path[:-3] + ".png"
    o = []
    o.append("# distlock benchmarks, %s%s%s" % (day, " (--quick)" if args.quick else "",
                                               " (--only %s)" % args.only if getattr(args, "only", "") else ""))
    o.append("")
    o.append("Produced by `%s` on this machine at %s UTC, in %.0f s of measurement. This machine is shared and "
             "noisy, so compare ratios, not absolute figures, and every ratio is taken between runs close in "
             "time:" % (args.command, datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M"),
                        meta["elapsed"]))
    o.append("")
    o.append("- *Uncontended* runs go in round-robin groups (all implementations of a group run at once as "
             "separate processes and take turns in %d ms windows, one active at a time, %d windows each): a "
             "figure is the median of its windows, a ratio the median of the ratios between windows of the same "
             "cycle (at most %.1f s apart). The group takes its turns in one order for the first half of the "
             "cycles and in the reverse order for the second, so no implementation always follows the same one."
             % (meta["slice"] * 1000, meta["cycles"], 12 * (meta["slice"] + 0.02)))
    o.append("- *Contended* runs: %d repetitions of %.1f s, interleaved across implementations; a figure is "
             "the median of the repetitions, a ratio the median of the ratios within a repetition."
             % (meta["reps"], meta["cwin"]))
    o.append("- Redis servers: the project's `tests/harness/redis.sh` (loopback TCP, no persistence), "
             "started and stopped by the run.")
    if args.pinning:
        o.append("")
        o.append("CPU placement: %s." % args.pinning)
    if meta.get("load"):
        o.append("")
        o.append("Load average (1 min) of the machine when the measurements started: %s, when they ended: %s "
                 "(the machine is shared; other work ran alongside)." % tuple(meta["load"]))
    o.append("")
    o.append("![chart](%s)" % os.path.basename(png_path))
    o.append("")

    # ---- targets
    tg, tdata = [], []

    def target(what, value, goal, ok, why_txt="", short=None, score=None):
        status = "—" if value != value else ("met" if ok else "**missed**")
        tg.append("| %s | %s | %s | %s |" % (what, fmt(value, 2) if value == value else why_txt or "not measured",
                                               goal, status))
        if short:
            tdata.append((short, score if score is not None else NAN))
    P = "pairs"
    v = R.paired((P, ("distlock-c", 1)), (P, ("floor", 1)))
    target("C uncontended, × floor (1 node)", v, "≥ 0.95", v >= 0.95, R.reason(P, ("distlock-c", 1)),
           "C", v / 0.95)
    v = R.paired((P, ("distlock-php-compat", 1)), (P, ("seed", 1)))
    target("PHP extension compat pair, × seed userland (1 node)", v, "≥ 1.00", v >= 1.0,
           R.reason(P, ("distlock-php-compat", 1)), "PHP compat", v)
    v = R.paired((P, ("distlock-php-oo", 1)), (P, ("seed", 1)))
    target("PHP extension OO API, × seed userland (1 node)", v, "≥ 1.00", v >= 1.0,
           R.reason(P, ("distlock-php-oo", 1)), "PHP OO", v)
    v = R.paired((P, ("distlock-py", 1)), (P, ("redis-py", 1)))
    target("Python package, × redis-py Lock (1 node)", v, "≥ 1.60", v >= 1.6, R.reason(P, ("distlock-py", 1)),
           "Python", v / 1.6)
    v = R.paired((P, ("distlock-c", 5)), (P, ("floor", 5)))
    target("C on 5 nodes, × parallel floor", v, "≥ 0.90", v >= 0.9, R.reason(P, ("distlock-c", 5)),
           "C 5 nodes", v / 0.9)

    C = "contend"
    for nm, sh in (("distlock-c", "C"), ("distlock-c-fair", "C fair"), ("distlock-php-oo", "PHP OO"),
                   ("distlock-py", "Python")):
        v = R.paired((C, (nm, 1000)), (C, ("floor-notify", 1000)))
        target("%s contended (think 1 ms), × notify floor" % impls[nm].label, v, "≥ 0.90", v >= 0.9,
               R.reason(C, (nm, 1000)), sh + " contended", v / 0.9)
        v = R.value(C, (nm, 1000), "wait_ms")
        target("%s contended (think 1 ms), waiter's median wait at a change, ms" % impls[nm].label, v, "≤ 1.00",
               v <= 1.0, R.reason(C, (nm, 1000)), sh + " wait", 1.0 / v if v else NAN)
    v = R.value(C, ("distlock-c-fair", 0), "change_frac")
    target("fair mode (C, DISTLOCK_FAIR), think 0: owner changes per release", v, "> 0.50 (most releases)",
           v > 0.5, R.reason(C, ("distlock-c-fair", 0)), "fair handoff", v / 0.5)
    total_ov = sum(x["overlaps"] for k, rr in res.items() if k[0] in ("contend", "contenders") for x in rr)
    tg.append("| mutual exclusion: overlaps over every contended run | %d | 0 | %s |"
              % (total_ov, "met" if total_ov == 0 else "**missed**"))
    o.append("## Targets")
    o.append("")
    o.append("| target | measured | goal | status |")
    o.append("|---|---:|---|---|")
    o += tg
    o.append("")

    # ---- uncontended
    o.append("## (a) Uncontended lock+unlock, one process, one key")
    o.append("")
    o.append("Each pair: one acquire attempt that never waits, then release. Acquire latency is the acquire "
             "call alone. *Client CPU* is the driver process's user+system CPU time (all threads, `getrusage`) "
             "inside its windows divided by its pairs: the figure the noise of a shared machine moves least "
             "(the interpreters' own per-call cost is included: PHP, Python and Node drivers run a small "
             "loop around the library). The floor is a hiredis loop (`SET NX PX` + `EVALSHA` compare-and-delete); on N "
             "nodes it writes each command to all N connections, then polls them and ends the round once a "
             "quorum said yes (one parallel round trip; late replies are read and dropped by the next round "
             "on that connection). The second 5-node floor waits for every node's reply instead.")
    o.append("")
    o.append("### 1 node")
    o.append("")
    pairs_table(R, 1, ["floor", "seed", "symfony", "redis-py", "redlock", "distlock-c", "distlock-c-token",
                       "distlock-php-compat", "distlock-php-oo", "distlock-py", "distlock-cli"], o)
    o.append("")
    o.append("### 5 nodes (Redlock, quorum 3)")
    o.append("")
    pairs_table(R, 5, ["floor", "floor-all", "symfony-combined", "redlock", "distlock-c", "distlock-c-token",
                       "distlock-php-compat", "distlock-php-oo", "distlock-py"], o)
    o.append("")
    a, q, al = R.value("pairs", ("distlock-c", 5), "p50"), R.value("pairs", ("floor", 5), "p50"), \
        R.value("pairs", ("floor-all", 5), "p50")
    if a == a and q == q and al == al:
        o.append("Acquire p50 on 5 nodes: distlock C %.1f µs = %.2f× the quorum floor's, %.2f× the floor that "
                 "waits for every reply." % (a, a / q, a / al))
        o.append("")

    # ---- contended
    o.append("## (b) Contended: two processes, one key, each holding 1 ms")
    o.append("")
    o.append("Each process loops: wait for the lock (as the library waits by default), check-and-set a shared "
             "marker file, hold 1 ms, check the marker again, release, then think. *Waiter's wait* is, at each "
             "owner change, the new owner's time from the start of its acquire call to getting the lock; "
             "*release→next acquire* is the gap between the previous owner's release and that acquisition. "
             "*Minority share* is the share of critical sections of the less lucky process (0.50 = even). "
             "*Overlaps* counts marker violations plus overlapping [acquired, released] intervals across "
             "processes (CLOCK_MONOTONIC in every language), summed over all repetitions: it must be 0. "
             "How the peers wait: seed — the caller retries after `usleep(100 ms)` (the seed cannot wait); "
             "symfony — `acquire(true)`, which polls every 100±10 ms; redis-py — `acquire(blocking=True)`, "
             "polling every 0.1 s; node-redlock — retryDelay 200 ms ± 100 ms jitter, retryCount -1. "
             "The notify floor publishes on release (inside the release script) and the waiter blocks on "
             "its SUBSCRIBE connection.")
    names = ["floor-notify", "seed", "symfony", "redis-py", "redlock", "distlock-c", "distlock-c-fair",
             "distlock-php-oo", "distlock-py"]
    for think, title in ((1000, "think time 1 ms after release"), (0, "think time 0 (re-acquire at once)")):
        o.append("")
        o.append("### " + title)
        o.append("")
        contend_table(R, think, names, o)
    o.append("")

    # ---- scaling
    # ---- TLS row
    if R.runs("tls", ("distlock-c", "tls")) or R.runs("connect", ("distlock-c", "tls")):
        o.append("## TLS (rediss://), 1 node")
        o.append("")
        o.append("The same server over `redis://` and `rediss://` (its TLS port, certificates made by "
                 "`tests/harness/certs.sh`, verification on), in the same round-robin group: pairs/s once "
                 "connected, and the ratio TLS / plain (goal ≥ 0.9×). Then the cost of a new connection: a new "
                 "client's first pair (TCP connect, TLS handshake, AUTH/SCRIPT LOAD, acquire + release), "
                 "median over the clients of a run, median of the repetitions.")
        o.append("")
        o.append("| | plain `redis://` | TLS `rediss://` | TLS / plain |")
        o.append("|---|---:|---:|---:|")
        a, b = ("tls", ("distlock-c", 1)), ("tls", ("distlock-c", "tls"))
        o.append("| distlock C pairs/s | %s | %s | %s |" % (fmt(R.value(*a)), fmt(R.value(*b)),
                                                          ratio(R.paired(b, a))))
        ca, cb = ("connect", ("distlock-c", "plain")), ("connect", ("distlock-c", "tls"))
        pa, pb = R.value(*ca, key="p50_us"), R.value(*cb, key="p50_us")
        o.append("| new client + first pair, µs | %s | %s | +%s µs |" % (
            fmt(pa), fmt(pb), fmt(pb - pa) if pa == pa and pb == pb else "—"))
        o.append("")
    # ---- cluster row
    if R.runs("cluster", ("distlock-c", "cluster")):
        o.append("## Redis Cluster")
        o.append("")
        o.append("Uncontended pairs/s of one key, in the same round-robin group: a single plain master "
                 "(`redis://`, not cluster-enabled, no replica), a cluster of 3 masters without replicas "
                 "(`tests/harness/redis.sh cluster DIR 3 0`) and one of 3 masters with a replica each "
                 "(`… 3 1`), both as `redis-cluster://` with every node as a seed. The key is routed to "
                 "the master of its slot; releases wake waiters with `SPUBLISH` in the key's slot. The "
                 "goal (≥ 0.95×: routing costs nothing measurable) is the like-for-like ratio, cluster "
                 "without replicas / single master. With replicas, each master also replicates every "
                 "write, and its replica runs on the same pinned CPU as the masters: that column shows "
                 "what the production shape costs here, not what routing costs.")
        o.append("")
        o.append("| | single master | 3-master cluster | cluster / single (goal ≥ 0.95×) "
                 "| 3 masters + 3 replicas | with replicas / single |")
        o.append("|---|---:|---:|---:|---:|---:|")
        a = ("cluster", ("distlock-c", 1))
        b = ("cluster", ("distlock-c", "cluster"))
        c = ("cluster", ("distlock-c", "cluster+replicas"))
        o.append("| distlock C pairs/s | %s | %s | %s | %s | %s |" % (
            fmt(R.value(*a)), fmt(R.value(*b)), ratio(R.paired(b, a)),
            fmt(R.value(*c)) if R.runs(*c) else "—", ratio(R.paired(c, a)) if R.runs(*c) else "—"))
        o.append("")
    adapters_section(R, meta, o)
    o.append("## (c) Scaling")
    o.append("")
    o.append("### Contenders on one key (hold 1 ms, think 1 ms): critical sections/s")
    o.append("")
    o.append("Each cell: critical sections/s, then its ratio to the notify floor and to the peer (redis-py) "
             "with as many contenders (same repetition).")
    o.append("")
    o.append("| implementation | 1 | 2 | 8 | 32 | overlaps |")
    o.append("|---|---:|---:|---:|---:|---:|")
    for nm in ["floor-notify", "redis-py", "distlock-c", "distlock-c-fair"]:
        cells, ov = [], 0
        for n in (1, 2, 8, 32):
            sec, cfg = cs_at(R, nm, n)
            rr = R.runs(sec, cfg)
            if rr:
                fsec, fcfg = cs_at(R, "floor-notify", n)
                c = "%s (%s floor" % (fmt(R.value(sec, cfg)), ratio(R.paired((sec, cfg), (fsec, fcfg))))
                psec, pcfg = cs_at(R, "redis-py", n)
                if impls[nm].role == "distlock" and R.runs(psec, pcfg):
                    c += ", %s peer" % ratio(R.paired((sec, cfg), (psec, pcfg)))
                cells.append(c + ")")
            else:
                cells.append("not run: " + R.reason(sec, cfg))
            ov += sum(x["overlaps"] for x in rr or [])
        o.append("| %s | %s | %d |" % (impls[nm].label, " | ".join(cells), ov))
    o.append("")
    o.append("### Nodes (uncontended lock+unlock pairs/s; quorum N/2+1)")
    o.append("")
    o.append("Each cell: pairs/s, then its ratio to the parallel floor on as many nodes, and to the best "
             "peer there (same repetition).")
    o.append("")
    o.append("| implementation | 1 | 3 | 5 | 7 |")
    o.append("|---|---:|---:|---:|---:|")
    for nm in ["floor", "symfony-combined", "redlock", "distlock-c"]:
        cells = []
        for n in (1, 3, 5, 7):
            sec, cfg = nodes_at(nm, n)
            if not R.runs(sec, cfg):
                cells.append("not run: " + R.reason(sec, cfg))
                continue
            c = "%s (%s floor" % (fmt(R.value(sec, cfg)), ratio(R.paired((sec, cfg), nodes_at("floor", n))))
            peers = [nodes_at(p, n) for p in ("symfony-combined", "redlock")]
            peers = [p for p in peers if R.runs(*p)]
            if peers and impls[nm].role != "peer":
                best = max(peers, key=lambda p: R.value(*p))
                c += ", %s best peer" % ratio(R.paired((sec, cfg), best))
            cells.append(c + ")")
        o.append("| %s | %s |" % (impls[nm].label, " | ".join(cells)))
    o.append("")
    o.append("### Keeping %s held locks renewed (TTL %d ms, renewed every TTL/3; %d periods measured)"
             % ("{:,}".format(meta["hold_n"]), meta["renew_ttl"], meta["renew_periods"]))
    o.append("")
    o.append("Per renewal period: renewal script calls (`EVALSHA`/`EVAL`/`FCALL`), all "
             "commands the server executed (including those run inside the scripts), read events it processed (≈ client round "
             "trips: a pipelined batch is read in 16 KiB chunks), CPU of the client process (all threads) "
             "and of redis-server. *Alive* is the share of the locks still present after the window "
             "(longer than the TTL, so a lock that was not renewed is gone). The floor renews with one "
             "pipelined batch of `EVALSHA` compare-and-`PEXPIRE` per period on one connection. redis-py and "
             "node-redlock have no watchdog, so their rows are the loop a user would write.")
    o.append("")
    o.append("| implementation | renewal calls / period | all commands / period | server read events / period "
             "| client CPU ms / period | server CPU ms / period | alive |")
    o.append("|---|---:|---:|---:|---:|---:|---:|")
    for nm in ["floor", "redis-py", "redlock", "distlock-c"]:
        rr = renew.get(nm)
        label = impls[nm].label + {"distlock-c": " + DISTLOCK_AUTO_RENEW",
                                   "redis-py": ": `reacquire()` per lock per period",
                                   "redlock": ": `lock.extend()` of every lock at once per period"}.get(nm, "")
        if not isinstance(rr, list):
            o.append("| %s | not run: %s | | | | | |" % (label, rr or "not run"))
            continue
        o.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            label, fmt(med([x["script_calls"] for x in rr])), fmt(med([x["cmds"] for x in rr])),
            fmt(med([x["reads"] for x in rr])),
            fmt(med([x["client_cpu_ms"] for x in rr]), 1), fmt(med([x["server_cpu_ms"] for x in rr]), 1),
            fmt(min(x["alive"] for x in rr), 3)))
    fr, dr = renew.get("floor"), renew.get("distlock-c")
    if isinstance(fr, list) and isinstance(dr, list):
        def rr_(k):
            return ratio(med([x[k] / y[k] for x, y in zip(dr, fr) if y[k]]))
        o.append("| distlock ÷ floor (same repetition) | %s | %s | %s | %s | %s | |" % (
            rr_("script_calls"), rr_("cmds"), rr_("reads"), rr_("client_cpu_ms"), rr_("server_cpu_ms")))
    peers_ok = [renew[p] for p in ("redis-py", "redlock") if isinstance(renew.get(p), list)]
    if peers_ok and isinstance(dr, list):
        bp = min(peers_ok, key=lambda rr: med([x["client_cpu_ms"] for x in rr]))
        def rp_(k):
            return ratio(med([x[k] / y[k] for x, y in zip(dr, bp) if y[k]]))
        o.append("| distlock ÷ best peer (least client CPU; same repetition) | %s | %s | %s | %s | %s | |" % (
            rp_("script_calls"), rp_("cmds"), rp_("reads"), rp_("client_cpu_ms"), rp_("server_cpu_ms")))
    o.append("")
    o.append("### Redis memory per held lock (%s locks `bench:hold:I`, 1 node, delta of `used_memory` "
             "minus `mem_clients_normal`)"
             % "{:,}".format(meta["hold_n"]))
    o.append("")
    o.append("Every implementation stores one plain string key with a TTL. Token length drives the big "
             "differences: the seed's `mt_rand` integer is stored as an integer, symfony's token is 44 base64 "
             "characters, the others 32 hex characters; the spread among those storing the same lengths "
             "comes from Redis's allocations, not from the lock protocol. Measured once the key tables are "
             "not rehashing. *Best peer* is the peer with the fewest bytes.")
    o.append("")
    o.append("| implementation | bytes per lock | keys per lock | × floor | × best peer |")
    o.append("|---|---:|---:|---:|---:|")
    fl = mem.get("floor")
    peers = [m["bytes"] for nm, m in mem.items() if isinstance(m, dict) and impls[nm].role == "peer"]
    bp = min(peers) if peers else None
    for nm, m in mem.items():
        if isinstance(m, dict):
            o.append("| %s | %s | %s | %s | %s |" % (impls[nm].label, fmt(m["bytes"], 1), fmt(m["keys"], 2),
                     ratio(m["bytes"] / fl["bytes"]) if isinstance(fl, dict) else "—",
                     ratio(m["bytes"] / bp) if bp else "—"))
        else:
            o.append("| %s | not run: %s | | | |" % (impls[nm].label, m))
    o.append("")

    # ---- versions
    o.append("## Versions")
    o.append("")
    if args.versions and os.path.exists(args.versions):
        with open(args.versions) as f:
            for line in f:
                if line.strip():
                    o.append("- " + line.strip())
    o.append("")
    with open(md_path, "w") as f:
        f.write("\n".join(o) + "\n")
    chart(R, png_path, day, args.quick, tdata)
    print("\n".join(o))
    print("\nbench: wrote %s and %s" % (md_path, png_path))


def chart(R, png, day, quick, tdata):
    if not shutil.which("gnuplot"):
        print("bench: gnuplot missing, no chart")
        return
    d = tempfile.mkdtemp(prefix="bench-chart-")

    def bars(path, rows):
        with open(path, "w") as f:
            for label, v in rows:
                f.write('"%s" %s\n' % (label, "%.3f" % v if v == v else "0"))

    short = {"floor": "floor", "floor-all": "floor, all replies", "floor-notify": "notify floor", "seed": "seed PHP", "symfony": "symfony",
             "symfony-combined": "symfony Combined", "redis-py": "redis-py", "redlock": "node-redlock",
             "distlock-c": "distlock C", "distlock-c-token": "distlock C token",
             "distlock-c-fair": "distlock C fair", "distlock-php-compat": "distlock PHP compat",
             "distlock-php-oo": "distlock PHP OO", "distlock-py": "distlock Python", "distlock-cli": "distlock CLI"}
    bars(os.path.join(d, "p1.dat"), [(short[n], R.value("pairs", (n, 1))) for n in
         ["floor", "seed", "symfony", "redis-py", "redlock", "distlock-c", "distlock-c-token",
          "distlock-php-compat", "distlock-php-oo", "distlock-py"]])
    bars(os.path.join(d, "p5.dat"), [(short[n], R.value("pairs", (n, 5))) for n in
         ["floor", "floor-all", "symfony-combined", "redlock", "distlock-c", "distlock-c-token", "distlock-php-compat",
          "distlock-php-oo", "distlock-py"]])
    bars(os.path.join(d, "c1.dat"), [(short[n], R.value("contend", (n, 1000))) for n in
         ["floor-notify", "seed", "symfony", "redis-py", "redlock", "distlock-c", "distlock-c-fair",
          "distlock-php-oo", "distlock-py"]])
    bars(os.path.join(d, "t.dat"), [(lab, min(s, 3.0) if s == s else NAN) for lab, s in tdata])
    with open(os.path.join(d, "nodes.dat"), "w") as f:
        for n in (1, 3, 5, 7):
            f.write("%d %s\n" % (n, " ".join("%.1f" % R.value(*nodes_at(nm, n)) for nm in
                                             ["floor", "symfony-combined", "redlock", "distlock-c"])))
    with open(os.path.join(d, "cont.dat"), "w") as f:
        for n in (1, 2, 8, 32):
            f.write("%d %s\n" % (n, " ".join("%.1f" % R.value(*cs_at(R, nm, n)) for nm in
                                             ["floor-notify", "redis-py", "distlock-c", "distlock-c-fair"])))
    gp = """
set terminal pngcairo size 1600,1100 font ",10"
set output '{png}'
set datafile missing 'nan'
set multiplot layout 2,3 title "distlock benchmarks {day}{q} (medians; same-run comparison)"
set style fill solid 0.8 border -1
set boxwidth 0.7
set grid ytics
set xtics rotate by -40 left
set yrange [0:*]
set title "uncontended, 1 node: lock+unlock pairs/s"
plot '{d}/p1.dat' using 0:2:xtic(1) with boxes lc rgb '#4477aa' notitle
set title "uncontended, 5 nodes: pairs/s"
plot '{d}/p5.dat' using 0:2:xtic(1) with boxes lc rgb '#228833' notitle
set title "contended, 2 processes, hold 1 ms, think 1 ms: critical sections/s"
plot '{d}/c1.dat' using 0:2:xtic(1) with boxes lc rgb '#cc6677' notitle
set xtics norotate
set title "nodes: uncontended pairs/s"
set xlabel "nodes"
set xtics (1,3,5,7)
set key top right
plot for [i=2:5] '{d}/nodes.dat' using 1:i with linespoints lw 2 title word("floor symfony-Combined node-redlock distlock-C", i-1)
set title "contenders on one key: critical sections/s"
set xlabel "processes"
set logscale x 2
set xtics (1,2,8,32)
plot for [i=2:5] '{d}/cont.dat' using 1:i with linespoints lw 2 title word("notify-floor redis-py distlock-C distlock-C-fair", i-1)
unset logscale x
unset xlabel
set xtics rotate by -40 left
set title "targets: measured ÷ goal (≥ 1 met; wait: goal ÷ measured; capped at 3)"
set yrange [0:3]
plot '{d}/t.dat' using 0:2:xtic(1) with boxes lc rgb '#ddaa33' notitle, 1 with lines lc rgb 'black' dt 2 notitle
unset multiplot
""".format(png=png, day=day, q=" --quick" if quick else "", d=d)
    p = subprocess.run(["gnuplot"], input=gp, capture_output=True, text=True)
    if p.returncode != 0:
        print("bench: gnuplot failed: " + p.stderr.strip()[-400:])
    shutil.rmtree(d, ignore_errors=True)
