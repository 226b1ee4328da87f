#!/usr/bin/python3
"""Two builds of the Python package side by side: uncontended pairs against the floor.

    /usr/bin/python3 bench/python/pairs_ab.py --uris URI1,...,URI5 --floor FLOOR \
        [--distlock-c [NAME=]DISTLOCK_BENCH ...] [--bare] [--reps 12] [--cycles 10] NAME=VENV NAME=VENV ...

Each NAME=VENV is a venv made by python/build.sh (e.g. one from main, one from
a branch); --distlock-c may be given twice as NAME=BIN, two builds of the C
driver side by side too. Per repetition, on the first node and then on the first 5 nodes,
the floor (bench/c/floor.c), distlock C if given and every venv's package run
bench/python/driver.py's pair (a new Lock, acquire(blocking=False), release();
with --bare also the same pair as the extension's calls alone, NAME-bare, which
bounds what any change to the package's Python code can reach) in one round-robin group of bench.py (run_group: 100 ms windows, taking
turns, so a noisy second hits every member alike); the group's order is
reversed every other repetition. Prints, per node count and member, the
medians over the repetitions of pairs/s, of its ratio to the floor within a
repetition, and of the client CPU per pair (the driver's getrusage, user +
system, inside its windows) and its ratio to the floor's; both also against
the first NAME=VENV (the A of an A/B), within each repetition; and each
repetition's ratio to the floor and the CPU's min..max, so the noise shows.

Run it pinned like bench/run.sh: servers on CPU 0 (`taskset -c 0 bash
tests/harness/redis.sh start DIR 5`), this on CPU 1 (`taskset -c 1`).
"""
import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from bench import Impl, run_group  # noqa: E402  (bench/bench.py)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uris", required=True, help="comma list of at least 5 redis:// URIs")
    ap.add_argument("--floor", required=True, help="the floor binary (cc bench/c/floor.c -lhiredis)")
    ap.add_argument("--distlock-c", action="append", default=[], metavar="[NAME=]BIN",
                    help="bench/c/distlock_bench.c built (optional; repeat with NAME= for two "
                         "builds of the core, e.g. main=A branch=B)")
    ap.add_argument("--bare", action="store_true",
                    help="also each venv's pair as bare extension calls (distlock_bare_adapter.py): "
                         "the interpreter's and SWIG's share without the package's Python layer")
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--cycles", type=int, default=10, help="windows per member per repetition")
    ap.add_argument("venvs", nargs="+", metavar="NAME=VENV")
    a = ap.parse_args()
    uris = a.uris.split(",")
    if len(uris) < 5:
        ap.error("--uris needs 5 nodes")
    drv = os.path.join(HERE, "driver.py")
    impls = [Impl("floor", "floor", "floor", [a.floor])]
    for nb in a.distlock_c:
        name, eq, binary = nb.partition("=")
        if not eq:
            name, binary = "distlock-c", nb
        impls.append(Impl(name, name if eq else "distlock C", "distlock", [binary]))
    for nv in a.venvs:
        name, _, venv = nv.partition("=")
        if not venv:
            ap.error("expected NAME=VENV, got %r" % nv)
        py = os.path.join(venv, "bin", "python")
        impls.append(Impl(name, name, "distlock", [py, drv, "distlock"]))
        if a.bare:
            impls.append(Impl(name + "-bare", name + " bare", "distlock", [py, drv, "distlock-bare"]))
    res = {}  # (name, nodes) -> [(median pairs/s of the repetition, cpu us/pair)]
    for rep in range(a.reps):
        for n in (1, 5):
            members = [("pairs", (im.name, str(n)), im, ",".join(uris[:n])) for im in impls]
            out, why = run_group(members[::-1] if rep % 2 else members, 0.1, a.cycles)
            if why:
                sys.exit("not run: %s" % why)
            for (_, (name, _)), cyc in out.items():
                rates = [c["rate"] for c in cyc if c["rate"] == c["rate"]]
                res.setdefault((name, n), []).append((statistics.median(rates), cyc[0]["cpu_us"]))
        print("repetition %d of %d done" % (rep + 1, a.reps), file=sys.stderr, flush=True)
    first = impls[1 + len(a.distlock_c)].name  # the first venv: the A of A/B
    for n in (1, 5):
        floor, base = res[("floor", n)], res[(first, n)]
        print("%d node%s, %d repetitions x %d windows of 100 ms" % (n, "s" if n > 1 else "", a.reps, a.cycles))
        for im in impls:
            r = res[(im.name, n)]
            ratios = [x[0] / f[0] for x, f in zip(r, floor)]
            cpus = [x[1] for x in r]
            print("  %-12s pairs/s %6.0f  x floor %.3f  x %s %.3f  |  client CPU us/pair %6.1f (%.1f..%.1f)"
                  "  x floor %.3f  x %s %.3f  |  pairs/s x floor per repetition: %s" % (
                      im.name, statistics.median([x[0] for x in r]), statistics.median(ratios),
                      first, statistics.median([x[0] / b[0] for x, b in zip(r, base)]),
                      statistics.median(cpus), min(cpus), max(cpus),
                      statistics.median([x[1] / f[1] for x, f in zip(r, floor)]),
                      first, statistics.median([x[1] / b[1] for x, b in zip(r, base)]),
                      " ".join("%.2f" % q for q in ratios)))


if __name__ == "__main__":
    main()
