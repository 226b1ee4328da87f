#!/usr/bin/python3
"""Orchestrator of bench/run.sh: runs every driver against the redis-servers
run.sh started, repeats each measurement, and writes the table and the chart.

Every figure is the median of --reps repetitions; the repetitions are
interleaved (rep 1 of everything, then rep 2 ...) so that a noisy stretch on
this shared machine hits every implementation alike, and every ratio is taken
between runs of the same repetition, then the median of those ratios is shown.

Standard library only (Debian's /usr/bin/python3).
"""
import argparse
import datetime
import json
import os
import resource
import select
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
now = time.monotonic_ns


class NotRun(Exception):
    """A configuration that could not be measured; the reason goes in the table."""


# --------------------------------------------------------------------- redis
def port_of(uri):
    return uri.rsplit(":", 1)[1].split("/")[0]


def rcli(uri, *args):
    p = subprocess.run(["redis-cli", "-p", port_of(uri)] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise NotRun("redis-cli %s: %s" % (" ".join(map(str, args)), p.stderr.strip()))
    return p.stdout.strip()


def info(uri):
    out = {}
    for line in rcli(uri, "INFO", "everything").splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v.strip()
    return out


# ------------------------------------------------------------ implementations
class Impl:
    """One front end: argv prefix, role (floor / peer / distlock), extra args
    appended after the protocol's args, or the reason it cannot run."""

    def __init__(self, name, label, role, argv=None, extra=(), why=None, env=None):
        self.name, self.label, self.role = name, label, role
        self.argv, self.extra, self.why, self.env = argv, list(extra), why, env

    def cmd(self, mode, args):
        if self.why:
            raise NotRun(self.why)
        return self.argv + [mode] + [str(a) for a in args] + self.extra


def build_impls(a):
    php_drv = os.path.join(HERE, "php", "driver.php")
    py_drv = os.path.join(HERE, "python", "driver.py")
    node_drv = os.path.join(HERE, "node", "driver.js")
    floor = [a.floor] if a.floor else None
    dlc = [a.distlock_c] if a.distlock_c else None
    php_ext = ["php", "-d", "extension=" + a.php_ext, php_drv] if a.php_ext else None
    venv_py = [os.path.join(a.venv, "bin", "python"), py_drv] if a.venv else None
    node = ["node", node_drv] if a.node_ok else None

    # The adapters (php-adapters/, python/distlock/redis_py.py) and Laravel's
    # RedisStore (Debian php-illuminate-redis, which run.sh installs)
    def missing(*paths):
        gone = [p for p in paths if not os.path.exists(p)]
        return "not in this checkout / not installed: " + ", ".join(
            os.path.relpath(p, REPO) if p.startswith(REPO) else p for p in gone) if gone else None
    adapters = os.path.join(REPO, "php-adapters")
    why_laravel = missing("/usr/share/php/Illuminate/Cache/RedisStore.php",
                          "/usr/share/php/Illuminate/Redis/autoload.php")
    why_sym_adapter = a.why_php_ext or missing(os.path.join(adapters, "autoload.php"),
                                               os.path.join(adapters, "src", "Symfony", "DistlockStore.php"))
    why_lar_adapter = a.why_php_ext or missing(os.path.join(adapters, "autoload.php"),
                                               os.path.join(adapters, "src", "Laravel", "DistlockStore.php"))

    def mk(name, label, role, argv, tail, why, extra=()):
        if argv is None:
            return Impl(name, label, role, why=why or "not available")
        return Impl(name, label, role, argv + tail, extra)

    I = {}
    for x in [
        mk("floor", "floor: hiredis SET NX PX + EVALSHA", "floor", floor, [], a.why_floor),
        mk("floor-all", "floor waiting for every node's reply (not just a quorum)", "floor-variant", floor, [],
           a.why_floor, ["all"]),
        mk("floor-notify", "notify floor: hiredis + PUBLISH/SUBSCRIBE", "floor", floor, [], a.why_floor),
        mk("seed", "seed PHP pair on phpredis", "peer", ["php", php_drv], ["seed"], None),
        mk("symfony", "symfony/lock RedisStore", "peer", ["php", php_drv], ["symfony"], None),
        mk("symfony-combined", "symfony/lock CombinedStore+ConsensusStrategy", "peer",
           ["php", php_drv], ["symfony-combined"], None),
        mk("redis-py", "redis-py Lock (timeout 30 s)", "peer", ["/usr/bin/python3", py_drv], ["redis-py"], None),
        mk("laravel", "Laravel RedisLock (Illuminate cache, phpredis)", "peer",
           None if why_laravel else ["php", php_drv], ["laravel"], why_laravel),
        mk("distlock-symfony", "distlock Symfony store (Distlock\\Symfony\\DistlockStore)", "distlock",
           None if why_sym_adapter else php_ext, ["distlock-symfony"], why_sym_adapter),
        mk("distlock-laravel", "distlock Laravel lock store (Distlock\\Laravel\\DistlockStore)", "distlock",
           None if why_lar_adapter else php_ext, ["distlock-laravel"], why_lar_adapter),
        mk("distlock-redis-py", "distlock redis-py Lock (lock_class=distlock.redis_py.Lock)", "distlock",
           None if a.why_redis_py_adapter else venv_py, ["distlock-redis-py"],
           a.why_redis_py_adapter or a.why_venv),
        mk("redlock", "node-redlock 4 + ioredis", "peer", node, ["redlock"], a.why_node),
        mk("distlock-c", "distlock C (acquire/release)", "distlock", dlc, [], a.why_distlock_c),
        mk("distlock-c-token", "distlock C (token pair)", "distlock", dlc, [], a.why_distlock_c, ["token"]),
        mk("distlock-c-fair", "distlock C, DISTLOCK_FAIR", "distlock", dlc, [], a.why_distlock_c, ["fair"]),
        mk("distlock-php-compat", "distlock PHP distributedLock/Unlock", "distlock", php_ext,
           ["distlock-compat"], a.why_php_ext),
        mk("distlock-php-oo", "distlock PHP Distlock\\Client", "distlock", php_ext, ["distlock-oo"], a.why_php_ext),
        mk("distlock-py", "distlock Python package", "distlock", venv_py, ["distlock"], a.why_venv),
    ]:
        I[x.name] = x
    cli = Impl("distlock-cli", "distlock CLI (`distlock run KEY -- true`)", "distlock",
               why=None if a.cli else (a.why_cli or "not available"))
    cli.path = a.cli
    I[cli.name] = cli
    return I


# --------------------------------------------------------------- measurements
def parse_kv(line):
    out = {}
    for tok in line.split():
        if "=" in tok:
            k, v = tok.split("=", 1)
            out[k] = v
    return out


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else ""


def margin_ns(nproc, contended=True):
    """Time every process gets for its setup before the common start instant.
    A late single process only shortens its own window (rates use the real
    window); late contenders would start alone, so they get more."""
    return int(((0.6 if contended else 0.3) + 0.1 * nproc) * 1e9)


RUN_SEQ = [0]


def run_group(members, slice_s, cycles, gap_s=0.02):
    """Uncontended pairs, round robin: every member of the group runs as its
    own process, all started together, and they take turns: member i is
    active in windows [T0 + i*(slice+gap) + k*period, +slice), k < cycles, and
    sleeps otherwise. So each ratio compares windows a fraction of a second
    apart, and a noisy second on this shared machine hits one cycle of every
    member instead of one member's whole run.
    members: [(section, cfg, impl, uris)]. Returns ({(section, cfg): [per-cycle
    dicts]}, {(section, cfg): reason})."""
    RUN_SEQ[0] += 1
    n = len(members)
    step = int((slice_s + gap_s) * 1e9)
    period = n * step
    slice_ns = int(slice_s * 1e9)
    t0 = now() + int((1.0 + 0.25 * n) * 1e9)
    procs, out, why, cli = [], {}, {}, None
    for i, (sec, cfg, impl, uris) in enumerate(members):
        key = "bench:u:%s:%s:%d" % (impl.name, cfg[1], RUN_SEQ[0])
        if impl.name == "distlock-cli":
            cli = (i, sec, cfg, impl, uris, key)
            continue
        try:
            argv = impl.cmd("pairs", [uris, t0 + i * step, slice_ns, period, cycles, key])
        except NotRun as e:
            why[(sec, cfg)] = str(e)
            continue
        procs.append(((sec, cfg), subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                    text=True, env=impl.env)))
    if cli:
        i, sec, cfg, impl, uris, key = cli
        try:
            out[(sec, cfg)] = cli_slices(impl, uris, key, t0 + i * step, slice_ns, period, cycles)
        except NotRun as e:
            why[(sec, cfg)] = str(e)
    deadline = time.monotonic() + (t0 - now()) / 1e9 + cycles * period / 1e9 + 60
    for k, p in procs:
        try:
            o, e = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
            why[k] = "timed out"
            continue
        kv = parse_kv(last_line(o))
        if p.returncode != 0 or "pairs" not in kv:
            why[k] = "failed: " + (last_line(e) or last_line(o) or "exit %d" % p.returncode)[:160]
            continue
        out[k] = slices_to_cycles(kv, slice_s)
    return out, why


def run_group_both_ways(members, slice_s, cycles):
    """run_group for the first half of the cycles, then again with the
    group's order reversed for the rest (as pairs_ab.py reverses it every
    other repetition): a window starts right after the previous member's,
    in whatever state that one left the machine (caches, the CLI's exiting
    processes), and in a fixed order each member would always follow the
    same one. Each member's cycles are the first run's, then the second's,
    so cycle j of every member comes from the same run. A member missing
    from either run is not run."""
    first = cycles // 2
    if first == 0:
        return run_group(members, slice_s, cycles)
    out1, why1 = run_group(members, slice_s, first)
    out2, why2 = run_group(list(reversed(members)), slice_s, cycles - first)
    out, why = {}, {}
    for k in set(out1) | set(out2) | set(why1) | set(why2):
        if k in out1 and k in out2:
            out[k] = out1[k] + out2[k]
        else:
            why[k] = why1.get(k) or why2.get(k) or "ran in one half of the cycles only"
    return out, why


def slices_to_cycles(kv, slice_s):
    counts = [int(x) for x in kv["pairs"].split(",")]
    done = sum(c for c in counts if c > 0)
    cpu_us = float(kv.get("cpu_ns", "nan")) / 1000.0 / done if done else float("nan")
    cyc = []
    for j, c in enumerate(counts):
        cyc.append({"rate": c / slice_s if c >= 0 else float("nan"), "p50": float(kv["p50_us"]),
                    "p99": float(kv["p99_us"]), "cpu_us": cpu_us,
                    "errors": int(kv["errors"]) if j == 0 else 0,
                    "late": int(kv["late"]) if j == 0 else 0})
    return cyc


def cli_slices(impl, uris, key, start, slice_ns, period, cycles):
    """The CLI costs a process per lock: `distlock run KEY -- true` in a loop,
    run by this orchestrator itself in the CLI's windows."""
    argv = [impl.path, "run", "--servers", uris, key, "--", "true"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise NotRun("failed: %s: %s" % (" ".join(argv[:2]), last_line(p.stderr)[:160]))
    lat, counts, errors, cpu = [], [], 0, 0.0
    for k in range(cycles):
        ws = start + k * period
        we = ws + slice_ns
        if now() >= we:
            counts.append(-1)
            continue
        if now() < ws:
            time.sleep((ws - now()) / 1e9)
        c = 0
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        while now() < we:
            t = now()
            if subprocess.run(argv, capture_output=True).returncode != 0:
                errors += 1
            else:
                c += 1
            lat.append(now() - t)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu += (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
        counts.append(c)
    lat.sort()
    kv = {"pairs": ",".join(map(str, counts)), "p50_us": lat[len(lat) // 2] / 1000.0 if lat else -1,
          "p99_us": lat[int(0.99 * (len(lat) - 1))] / 1000.0 if lat else -1, "errors": errors, "late": 0,
          "cpu_ns": cpu * 1e9}
    return slices_to_cycles(kv, slice_ns / 1e9)


def run_contend(impl, uri, nproc, hold_us, think_us, window_s):
    RUN_SEQ[0] += 1
    key = "bench:c:%s:%d" % (impl.name, RUN_SEQ[0])
    tmp = tempfile.mkdtemp(prefix="bench-contend-")
    marker = os.path.join(tmp, "marker")
    with open(marker, "wb") as f:
        f.write(b"\0" * 8)
    start = now() + margin_ns(nproc)
    end = start + int(window_s * 1e9)
    logs = [os.path.join(tmp, "log%d" % i) for i in range(nproc)]
    procs = []
    for i in range(nproc):
        argv = impl.cmd("contend", [uri, start, end, key, hold_us, think_us, logs[i], marker, i + 1])
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=impl.env))
    outs, fail = [], None
    deadline = time.monotonic() + window_s + 60 + nproc
    for p in procs:
        try:
            o, e = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
            fail = fail or "timed out"
        if p.returncode != 0 and not fail:
            fail = "failed: " + (last_line(e) or "exit %d" % p.returncode)[:160]
        outs.append(parse_kv(last_line(o)))
    if fail:
        raise NotRun(fail)
    ev = []
    for i, path in enumerate(logs):
        with open(path) as f:
            for line in f:
                treq, tacq, trel = map(int, line.split())
                if start <= tacq < end:
                    ev.append((tacq, treq, trel, i))
        os.unlink(path)
    os.unlink(marker)
    os.rmdir(tmp)
    ev.sort()
    n = len(ev)
    changes, waits, gaps, iv_overlaps, max_rel = 0, [], [], 0, 0
    for j, (tacq, treq, trel, who) in enumerate(ev):
        if j and tacq < max_rel:
            iv_overlaps += 1
        if j and who != ev[j - 1][3]:
            changes += 1
            waits.append(tacq - treq)
            gaps.append(tacq - ev[j - 1][2])
        max_rel = max(max_rel, trel)
    counts = [sum(1 for e in ev if e[3] == i) for i in range(nproc)]
    return {
        "rate": n / window_s,
        "changes": changes / window_s,
        "change_frac": changes / (n - 1) if n > 1 else 0.0,
        "wait_ms": statistics.median(waits) / 1e6 if waits else float("nan"),
        "gap_ms": statistics.median(gaps) / 1e6 if gaps else float("nan"),
        "minority": min(counts) / n if n and nproc > 1 else float("nan"),
        "overlaps": iv_overlaps + sum(int(o.get("overlaps", 0)) for o in outs),
        "late": max(int(o.get("late", 0)) for o in outs),
        "errors": sum(int(o.get("errors", 0)) for o in outs),
    }


def wait_ready(p, timeout_s):
    """First stdout line of a hold/renew driver ("ready held=N")."""
    r, _, _ = select.select([p.stdout], [], [], timeout_s)
    if not r:
        raise NotRun("no 'ready' within %d s" % timeout_s)
    line = p.stdout.readline()
    kv = parse_kv(line)
    if "held" not in kv:
        raise NotRun("failed: " + (last_line(p.stderr.read()) or line.strip() or "no output")[:160])
    return int(kv["held"])


def stop(p):
    """Tell a hold/renew driver to finish (a line on stdin) and collect its output."""
    try:
        out, err = p.communicate(input="stop\n", timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return out, err


def wait_rehashed(uri):
    """Redis grows its key tables incrementally; while a rehash is under way
    both tables are allocated. Wait (bounded) until no table is rehashing so
    every implementation is measured in the same state."""
    for _ in range(100):
        if "Hash table 1" not in rcli(uri, "DEBUG", "HTSTATS", 0):
            return
        time.sleep(0.02)
    raise NotRun("redis kept rehashing for 2 s")


def run_hold(impl, uri, count):
    """Redis memory per held lock: used_memory with COUNT locks held minus before."""
    rcli(uri, "FLUSHALL")

    def used(i):
        # client query/output buffers are not the lock's cost (a pipelining
        # driver would otherwise pay for its pipeline)
        return int(i["used_memory"]) - int(i.get("mem_clients_normal", 0))
    before = used(info(uri))
    p = subprocess.Popen(impl.cmd("hold", [uri, count, 60000]), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=impl.env)
    try:
        held = wait_ready(p, 120)
        wait_rehashed(uri)
        after = used(info(uri))
        keys = int(rcli(uri, "DBSIZE"))
    finally:
        stop(p)
        rcli(uri, "FLUSHALL")
    if held != count:
        raise NotRun("held only %d of %d" % (held, count))
    return {"bytes": (after - before) / count, "keys": keys / count}


def proc_cpu_s(pid):
    """CPU time of every thread of pid, in seconds (schedstat: ns, not 10 ms ticks)."""
    total = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total / 1e9


def run_renew(impl, uri, count, ttl_ms, periods):
    """COUNT locks kept alive for `periods` renewal periods (ttl/3 each); per
    period: commands and read events at the server, CPU of client and server."""
    rcli(uri, "FLUSHALL")
    p = subprocess.Popen(impl.cmd("renew", [uri, count, ttl_ms]), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=impl.env)
    try:
        held = wait_ready(p, 120)
        if held != count:
            raise NotRun("held only %d of %d" % (held, count))
        # start half a period in, so that batch renewals never sit on the window's edges
        time.sleep(ttl_ms / 6 / 1000.0)
        i0, c0, t0 = info(uri), proc_cpu_s(p.pid), now()
        time.sleep(periods * ttl_ms / 3 / 1000.0)   # the measurement window itself
        i1, c1, t1 = info(uri), proc_cpu_s(p.pid), now()
        alive = int(rcli(uri, "EVAL", "return #redis.call('keys', ARGV[1])", 0, "bench:renew:*"))
    finally:
        out, err = stop(p)
        rcli(uri, "FLUSHALL")
    if p.returncode not in (0, None):
        raise NotRun("failed: " + last_line(err)[:160])
    k = (t1 - t0) / 1e6 / (ttl_ms / 3)

    def d(key):
        return (float(i1.get(key, 0)) - float(i0.get(key, 0))) / k

    def calls(inf):
        n = 0
        for c in ("evalsha", "eval", "fcall"):
            v = inf.get("cmdstat_" + c, "")
            if v.startswith("calls="):
                n += int(v.split(",")[0][6:])
        return n
    return {
        "script_calls": (calls(i1) - calls(i0)) / k,
        "cmds": d("total_commands_processed"),
        "reads": d("total_reads_processed"),
        "client_cpu_ms": (c1 - c0) * 1000 / k,
        "server_cpu_ms": (d("used_cpu_user") + d("used_cpu_sys")) * 1000,
        "alive": alive / count,
        "final": last_line(out),
    }


# ------------------------------------------------------ wait-to-wake latency
class Lines:
    """Line reader of a driver's stdout with a timeout (os.read on the fd: a
    buffered reader would hide a line already read from select())."""

    def __init__(self, p):
        self.p, self.buf = p, b""

    def read(self, timeout_s, what):
        end = time.monotonic() + timeout_s
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            r, _, _ = select.select([self.p.stdout], [], [], max(0.0, left))
            if not r:
                raise NotRun("no '%s' within %d s" % (what, timeout_s))
            chunk = os.read(self.p.stdout.fileno(), 4096)
            if not chunk:
                raise NotRun("driver exited (%s expected): %s" % (
                    what, last_line(self.p.stderr.read().decode(errors="replace"))[:160]))
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        line = line.decode()
        if not line.startswith(what):
            raise NotRun("expected '%s', got: %s" % (what, line[:160]))
        return parse_kv(line)

    def send(self, cmd):
        self.p.stdin.write((cmd + "\n").encode())
        self.p.stdin.flush()


def lock_commands(uri):
    """Commands the server has run, except the orchestrator's own INFO (and
    connection chatter: PING, CLIENT, HELLO): from INFO commandstats."""
    n = 0
    for line in rcli(uri, "INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_"):
            name, rest = line[8:].split(":", 1)
            if name.split("|")[0] not in ("info", "ping", "client", "hello", "command"):
                n += int(rest.split(",")[0].split("=")[1])
    return n


def wake_trial(uri, holder, waiter, delay_s):
    """One wait: the holder takes the key; the waiter starts waiting; once the
    server has run the waiter's first command (it is inside its wait), the
    holder keeps the lock delay_s longer, then releases. Returns
    release-call → waiter-holds in ms."""
    holder.send("hold")
    holder.read(30, "held")
    base = lock_commands(uri)
    waiter.send("wait")
    waiter.read(30, "waiting")
    deadline = time.monotonic() + 30
    while lock_commands(uri) == base:
        if time.monotonic() > deadline:
            raise NotRun("the waiter sent no command to the server within 30 s")
    # The random hold spreads the release over the peers' poll periods
    # (100 ms, 250 ms), so a polling waiter's figure is what a user sees on
    # average, not one lucky or unlucky phase.
    time.sleep(delay_s)
    holder.send("release")
    rel = holder.read(30, "released")
    acq = waiter.read(60, "acquired")
    t_rel, t_acq = int(rel["t_ns"]), int(acq["t_ns"])
    # first: a waiter that got the key while it was held also makes the
    # holder's release fail, and that is the lesser news
    if t_acq < t_rel:
        raise NotRun("the waiter held the key before the holder released it (mutual exclusion broken)")
    if rel.get("ok") != "1" or acq.get("ok") != "1":
        raise NotRun("a release failed (holder ok=%s, waiter ok=%s)" % (rel.get("ok"), acq.get("ok")))
    return (t_acq - t_rel) / 1e6


def run_wake(impls_, uri, trials, seed=1):
    """Wait-to-wake latency of each implementation: a holder process and a
    waiter process per implementation, trials interleaved across
    implementations (trial 0 of each is a warm-up, not counted).
    Returns ({name: [{"lat_ms": x}, ...]}, {name: reason})."""
    import random
    rng = random.Random(seed)
    RUN_SEQ[0] += 1
    out, why, live = {}, {}, {}
    try:
        for impl in impls_:
            key = "bench:w:%s:%d" % (impl.name, RUN_SEQ[0])
            try:
                pp = []
                for role in ("holder", "waiter"):
                    p = subprocess.Popen(impl.cmd("wake", [uri, key, role]), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=impl.env)
                    pp.append(Lines(p))
                    live.setdefault(impl.name, []).append(p)
                for x in pp:
                    x.read(120, "ready")
                live[impl.name] = pp
            except NotRun as e:
                why[impl.name] = str(e)
        for t in range(trials + 1):
            for impl in impls_:
                if impl.name in why:
                    continue
                holder, waiter = live[impl.name]
                try:
                    ms = wake_trial(uri, holder, waiter, rng.uniform(0.05, 0.55))
                except NotRun as e:
                    why[impl.name] = str(e)
                    continue
                if t:
                    out.setdefault(impl.name, []).append({"lat_ms": ms})
    finally:
        for pp in live.values():
            for x in pp:
                p = x.p if isinstance(x, Lines) else x
                if p.poll() is None:
                    p.kill()
                p.wait()
    for n in list(out):
        if n in why:
            del out[n]
    return out, why


# ------------------------------------------------------------------ the plan
# (adapter, the backend it replaces, the native front end under it)
ADAPTERS = [("distlock-symfony", "symfony", "distlock-php-oo"),
            ("distlock-laravel", "laravel", "distlock-php-oo"),
            ("distlock-redis-py", "redis-py", "distlock-py")]
ADAPTER_ROWS = ["symfony", "distlock-symfony", "laravel", "distlock-laravel", "redis-py",
                "distlock-redis-py", "distlock-php-oo", "distlock-py"]
WAKE_ROWS = ["symfony", "distlock-symfony", "laravel", "distlock-laravel", "redis-py", "distlock-redis-py"]


def groups(args):
    """Round-robin groups of the uncontended runs: [(title, [(section, cfg, impl name, uris)])]."""
    U = args.uris.split(",")
    u1, u5 = U[0], ",".join(U[:5])
    g1 = [("pairs", (n, 1), n, u1) for n in
          ["floor", "seed", "symfony", "redis-py", "redlock", "distlock-c", "distlock-c-token",
           "distlock-php-compat", "distlock-php-oo", "distlock-py", "distlock-cli"]]
    g1.append(("nodes", ("symfony-combined", 1), "symfony-combined", u1))
    g5 = [("pairs", (n, 5), n, u5) for n in
          ["floor", "floor-all", "symfony-combined", "redlock", "distlock-c", "distlock-c-token",
           "distlock-php-compat", "distlock-php-oo", "distlock-py"]]
    G = [("1 node", g1), ("5 nodes", g5)]
    # The adapters next to the backends they replace (and the native front
    # end each one sits on), one group so that every ratio is within a cycle.
    G.append(("adapters", [("adapters", (n, 1), n, u1) for n in ADAPTER_ROWS]))
    for k in (3, 7):
        G.append(("%d nodes" % k, [("nodes", (n, k), n, ",".join(U[:k])) for n in
                                   ["floor", "symfony-combined", "redlock", "distlock-c"]]))
    if args.tls_uri:   # TLS row: the same server over redis:// and rediss://, same run
        G.append(("TLS 1 node", [("tls", ("distlock-c", 1), "distlock-c", u1),
                                 ("tls", ("distlock-c", "tls"), "distlock-c", args.tls_uri)]))
    if getattr(args, "cluster_uri", ""):   # cluster row: a single master and 3-master clusters, same run
        g = [("cluster", ("distlock-c", 1), "distlock-c", u1),
             ("cluster", ("distlock-c", "cluster"), "distlock-c", args.cluster_uri)]
        if getattr(args, "cluster_replicas_uri", ""):
            g.append(("cluster", ("distlock-c", "cluster+replicas"), "distlock-c",
                      args.cluster_replicas_uri))
        G.append(("cluster", g))
    return G


def run_connect(impl, uri, count):
    """TLS row: microseconds for a new client's first pair (connect + handshake + pair)."""
    p = subprocess.run(impl.cmd("connect", [uri, count, "bench:connect"]), capture_output=True,
                       text=True, timeout=300)
    if p.returncode != 0:
        raise NotRun(last_line(p.stderr) or "exit %d" % p.returncode)
    kv = parse_kv(last_line(p.stdout))
    return {"mean_us": float(kv["mean_us"]), "p50_us": float(kv["p50_us"])}


def plan(args):
    """Contended runs: (section, config id, impl name, (uri, processes, think_us)), in order."""
    u1 = args.uris.split(",")[0]
    P = []
    for think in (0, 1000):
        for name in ["floor-notify", "seed", "symfony", "redis-py", "redlock", "distlock-c",
                     "distlock-c-fair", "distlock-php-oo", "distlock-py"]:
            P.append(("contend", (name, think), name, (u1, 2, think)))
    for n in (1, 8, 32):
        for name in ["floor-notify", "redis-py", "distlock-c", "distlock-c-fair"]:
            P.append(("contenders", (name, n), name, (u1, n, 1000)))
    return P


def median(xs):
    xs = [x for x in xs if x == x]   # drop NaN
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uris", required=True, help="comma list of 7 redis:// URIs")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--command", default="bash bench/run.sh")
    for k in ["floor", "distlock_c", "php_ext", "venv", "cli", "redis_py_adapter"]:
        ap.add_argument("--" + k.replace("_", "-"), default="")
        ap.add_argument("--why-" + k.replace("_", "-"), default="")
    ap.add_argument("--tls-uri", default="", help="rediss:// URI of the first server (TLS row)")
    ap.add_argument("--cluster-uri", default="",
                    help="redis-cluster:// URI of a 3-master cluster without replicas (cluster row)")
    ap.add_argument("--cluster-replicas-uri", default="",
                    help="redis-cluster:// URI of a 3-master cluster with one replica each (cluster row)")
    ap.add_argument("--node-ok", action="store_true")
    ap.add_argument("--why-node", default="")
    ap.add_argument("--versions", default="", help="file of 'name: version' lines from run.sh")
    ap.add_argument("--only", default="", help="comma list of sections (development): "
                    "pairs,contend,contenders,nodes,memory,renew,tls,cluster,adapters (adapters: "
                    "the adapters' pairs/s and wait-to-wake latency against the backends they replace)")
    ap.add_argument("--pinning", default="", help="how run.sh placed servers and drivers on CPUs")
    args = ap.parse_args()

    reps = 1 if args.quick else 3             # contended runs
    cwin = 0.5 if args.quick else 2.0         # contended window: enough owner changes for polling peers
    slice_s = 0.1                             # uncontended: round-robin windows of 100 ms ...
    cycles = 5 if args.quick else 30          # ... this many per implementation
    hold_n = 2000 if args.quick else 10000
    renew_ttl, renew_periods = (1500, 4) if args.quick else (3000, 6)
    impls = build_impls(args)
    U = args.uris.split(",")
    t_begin = time.monotonic()
    load_begin = open("/proc/loadavg").read().split()[0]

    res = {}      # (section, cfg) -> [dict per repetition / per cycle]
    why = {}      # (section, cfg) -> reason it was not run
    only = set(args.only.split(",")) if args.only else None
    wake_trials = 8 if args.quick else 20     # wait-to-wake trials per implementation
    if not only or only & {"pairs", "nodes", "tls", "cluster", "adapters"}:
        for title, members in groups(args):
            if only and not any(m[0] in only for m in members):
                continue
            impls_ = [(sec, cfg, impls[name], uris) for sec, cfg, name, uris in members]
            out, bad = run_group_both_ways(impls_, slice_s, cycles)
            res.update(out)
            why.update(bad)
            for sec, cfg, name, uris in members:
                if (sec, cfg) in out:
                    v = [x["rate"] for x in out[(sec, cfg)] if x["rate"] == x["rate"]]
                    summary = "median %.0f pairs/s over %d windows, p50 %.1f us" % (
                        median(v), len(v), out[(sec, cfg)][0]["p50"])
                else:
                    summary = "not run: %s" % bad.get((sec, cfg))
                print("[%5.0fs] uncontended %-8s %-20s %s" % (time.monotonic() - t_begin, title, name, summary),
                      flush=True)
    if not only or "adapters" in only:
        out, bad = run_wake([impls[n] for n in WAKE_ROWS], U[0], wake_trials)
        for n in WAKE_ROWS:
            if n in out:
                res[("wake", (n, 1))] = out[n]
                v = [x["lat_ms"] for x in out[n]]
                summary = "release -> waiter holds: median %.2f ms, max %.2f ms over %d waits" % (
                    median(v), max(v), len(v))
            else:
                why[("wake", (n, 1))] = bad.get(n, "not run")
                summary = "not run: %s" % why[("wake", (n, 1))]
            print("[%5.0fs] wake %-20s %s" % (time.monotonic() - t_begin, n, summary), flush=True)
    P = [x for x in plan(args) if not only or x[0] in only]
    for rep in range(reps):
        for section, cfg, name, (uri, nproc, think) in P:
            if (section, cfg) in why:
                continue
            try:
                r = run_contend(impls[name], uri, nproc, 1000, think, cwin)
                res.setdefault((section, cfg), []).append(r)
                summary = " ".join("%s=%.4g" % (k, v) for k, v in r.items() if isinstance(v, (int, float)))
            except NotRun as e:
                why[(section, cfg)] = str(e)
                summary = "not run: %s" % e
            print("[rep %d/%d %5.0fs] %-10s %-16s %-5s %s" % (rep + 1, reps, time.monotonic() - t_begin,
                  section, name, cfg[1], summary), flush=True)

    # TLS row: a new connection's cost, plain vs TLS, interleaved repetitions
    for rep in range(reps if args.tls_uri and (not only or "tls" in only) else 0):
        for cfg, uri in (("plain", U[0]), ("tls", args.tls_uri)):
            try:
                r = run_connect(impls["distlock-c"], uri, 50 if args.quick else 200)
                res.setdefault(("connect", ("distlock-c", cfg)), []).append(r)
                summary = "new client + first pair: median %.0f us" % r["p50_us"]
            except NotRun as e:
                why[("connect", ("distlock-c", cfg))] = str(e)
                summary = "not run: %s" % e
            print("[rep %d/%d] connect %-6s %s" % (rep + 1, reps, cfg, summary), flush=True)

    mem, renew = {}, {}
    for name in ["floor", "seed", "symfony", "redis-py", "redlock", "distlock-c", "distlock-php-oo",
                 "distlock-py"] if not only or "memory" in only else []:
        try:
            mem[name] = run_hold(impls[name], U[0], hold_n)
            print("[memory] %-20s %.1f bytes/lock" % (name, mem[name]["bytes"]), flush=True)
        except NotRun as e:
            mem[name] = str(e)
            print("[memory] %-20s not run: %s" % (name, e), flush=True)
    for rep in range(reps if not only or "renew" in only else 0):
        for name in ["floor", "redis-py", "redlock", "distlock-c"]:
            try:
                r = run_renew(impls[name], U[0], hold_n, renew_ttl, renew_periods)
                if isinstance(renew.get(name, []), list):
                    renew.setdefault(name, []).append(r)
                print("[renew %d/%d] %-12s %s" % (rep + 1, reps, name, r), flush=True)
            except NotRun as e:
                if not isinstance(renew.get(name), list):
                    renew[name] = str(e)
                print("[renew] %-12s not run: %s" % (name, e), flush=True)
    elapsed = time.monotonic() - t_begin

    meta = dict(reps=reps, slice=slice_s, cycles=cycles, cwin=cwin, hold_n=hold_n, renew_ttl=renew_ttl,
                wake_trials=wake_trials,
                renew_periods=renew_periods, elapsed=elapsed,
                load=(load_begin, open("/proc/loadavg").read().split()[0]))
    # The raw measurements, so the report can be re-rendered without re-running.
    raw = os.path.join(HERE, "build", "last-run.json")
    os.makedirs(os.path.dirname(raw), exist_ok=True)
    with open(raw, "w") as f:
        json.dump({"args": vars(args), "meta": meta, "mem": mem, "renew": renew,
                   "res": [[list(k[:1]) + list(k[1]), v] for k, v in res.items()],
                   "why": [[list(k[:1]) + list(k[1]), v] for k, v in why.items()]}, f)
    from report import write_report
    write_report(args, impls, res, why, mem, renew, meta)


def report_only(path):
    """Re-render the table and chart of a saved run (development)."""
    with open(path) as f:
        d = json.load(f)
    args = argparse.Namespace(**d["args"])
    key = lambda k: (k[0], (k[1], k[2]))
    from report import write_report
    write_report(args, build_impls(args), {key(k): v for k, v in d["res"]},
                 {key(k): v for k, v in d["why"]}, d["mem"], d["renew"], d["meta"])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--report-only":
        report_only(sys.argv[2])
    else:
        main()
