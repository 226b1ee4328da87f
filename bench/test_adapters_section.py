"""Tests of the bench's adapters section: the wait-to-wake measurement
(bench.py run_wake) and its report (report.py adapters_section, read by
check-results.py), against a real redis-server of tests/harness/redis.sh.

    python3 -m pytest -q bench/test_adapters_section.py

The waiters here are small drivers of the bench's wake protocol written for
the test, on Debian's redis-py: one that polls with a known period, and one
that takes the key while it is held (a broken lock), so each figure has a
known right answer.
"""
import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench  # noqa: E402
import report  # noqa: E402

spec = importlib.util.spec_from_file_location("check_results", os.path.join(HERE, "check-results.py"))
check_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_results)

# A driver of the wake protocol (see bench/python/driver.py wake_loop): KIND is
# a poll period in ms (SET NX, then sleep that long, until it holds the key),
# or "cheat" (SET without NX: it holds the key while the holder does).
FAKE_DRIVER = textwrap.dedent('''
    import sys, time, redis
    kind, mode, uri, key, role = sys.argv[1:6]
    r = redis.Redis(host="127.0.0.1", port=int(uri.rsplit(":", 1)[1]))
    r.ping()
    RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
    print("ready held=0", flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "hold":
            print("held" if r.set(key, "h", nx=True, px=30000) else "failed: not free", flush=True)
        elif cmd == "release":
            t = time.monotonic_ns()
            print("released t_ns=%d ok=%d" % (t, r.eval(RELEASE, 1, key, "h")), flush=True)
        elif cmd == "wait":
            print("waiting", flush=True)
            if kind == "cheat":
                r.set(key, "w", px=30000)
            else:
                while not r.set(key, "w", nx=True, px=30000):
                    time.sleep(float(kind) / 1000)
            t = time.monotonic_ns()
            print("acquired t_ns=%d ok=%d" % (t, r.eval(RELEASE, 1, key, "w")), flush=True)
        elif cmd == "quit":
            break
''')


@pytest.fixture(scope="module")
def server():
    d = tempfile.mkdtemp(prefix="bench-test-redis.")
    subprocess.run(["bash", os.path.join(REPO, "tests/harness/redis.sh"), "start", d, "1"], check=True,
                   stdout=subprocess.DEVNULL)
    try:
        yield subprocess.run(["bash", os.path.join(REPO, "tests/harness/redis.sh"), "uris", d], check=True,
                             capture_output=True, text=True).stdout.strip().split(",")[0]
    finally:
        subprocess.run(["bash", os.path.join(REPO, "tests/harness/redis.sh"), "stop", d], check=False)


@pytest.fixture(scope="module")
def fake_driver():
    d = tempfile.mkdtemp(prefix="bench-test-driver.")
    path = os.path.join(d, "fake_driver.py")
    with open(path, "w") as f:
        f.write(FAKE_DRIVER)
    yield path
    os.unlink(path)
    os.rmdir(d)


def fake(name, path, kind):
    return bench.Impl(name, name, "peer", ["/usr/bin/python3", path, kind])


def test_wake_latency_follows_the_waiters_poll_period(server, fake_driver):
    # The release lands anywhere in a poller's period (the random hold), so a
    # 300 ms poller's waits spread over 0..300 ms, a 2 ms poller's stay near 0.
    slow, quick = fake("poll-300ms", fake_driver, "300"), fake("poll-2ms", fake_driver, "2")
    out, why = bench.run_wake([slow, quick], server, 8)
    assert why == {}
    s = [x["lat_ms"] for x in out["poll-300ms"]]
    q = [x["lat_ms"] for x in out["poll-2ms"]]
    assert len(s) == 8 and len(q) == 8
    assert all(0 <= x for x in s + q)
    # release -> hold can never exceed one period plus the machine's delays
    assert max(s) < 300 + 150, s
    assert statistics.median(q) < 50, q
    # the random hold moves the release across the period: not all at one phase
    assert max(s) - min(s) > 50, s
    assert statistics.median(s) > statistics.median(q), (s, q)


def test_wake_refuses_a_waiter_that_holds_the_key_before_the_release(server, fake_driver):
    cheat, ok = fake("cheat", fake_driver, "cheat"), fake("poll-2ms", fake_driver, "2")
    out, why = bench.run_wake([cheat, ok], server, 2)
    assert "cheat" not in out
    assert "mutual exclusion broken" in why["cheat"], why
    # the other implementation's figures are unaffected
    assert len(out["poll-2ms"]) == 2 and "poll-2ms" not in why


def adapter_impls():
    a = argparse.Namespace(floor="", distlock_c="", php_ext="/x.so", venv="/v", cli="", node_ok=False,
                           why_floor="", why_distlock_c="", why_php_ext="", why_venv="", why_cli="",
                           why_node="", why_redis_py_adapter="")
    return bench.build_impls(a)


def synthetic(rates, waits):
    """res and why of a run where each implementation had these pairs/s and waits."""
    res, why = {}, {}
    for n, v in rates.items():
        if v is None:
            why[("adapters", (n, 1))] = "failed: synthetic"
        else:
            res[("adapters", (n, 1))] = [{"rate": v, "p50": 1.0, "p99": 2.0, "cpu_us": 1.0, "errors": 0,
                                          "late": 0}] * 3
    for n, v in waits.items():
        res[("wake", (n, 1))] = [{"lat_ms": x} for x in v]
    return res, why


RATES = {"symfony": 100.0, "distlock-symfony": 150.0, "laravel": 200.0, "distlock-laravel": 300.0,
         "redis-py": 400.0, "distlock-redis-py": 800.0, "distlock-php-oo": 600.0, "distlock-py": 1000.0}
WAITS = {"symfony": [50.0, 40.0, 60.0], "distlock-symfony": [0.5, 0.4, 0.6],
         "laravel": [125.0, 100.0, 250.0], "distlock-laravel": [0.5, 0.5, 0.5],
         "redis-py": [50.0, 50.0, 50.0], "distlock-redis-py": [1.0, 1.0, 1.0]}


def render(rates, waits):
    res, why = synthetic(rates, waits)
    o = []
    report.adapters_section(report.Results(res, why, adapter_impls()), {"wake_trials": 3}, o)
    return o


def row(lines, start):
    hits = [l for l in lines if l.startswith("| " + start)]
    assert hits, (start, lines)
    return [c.strip() for c in hits[0].strip("|").split("|")]


def test_report_gives_each_adapter_its_ratios_to_the_backend_and_to_the_native_front_end():
    o = render(RATES, WAITS)
    sym = row(o, "distlock Symfony store")
    assert sym[1:5] == ["150", "symfony/lock RedisStore", "100", "1.50×"]
    assert sym[5].startswith("0.25×")          # 150 / 600, distlock PHP Distlock\Client
    lar = row(o, "distlock Laravel lock store")
    assert lar[4] == "1.50×" and lar[5].startswith("0.50×")
    rp = row(o, "distlock redis-py Lock")
    assert rp[4] == "2.00×" and rp[5].startswith("0.80×")   # 800 / 1000, distlock Python package


def test_report_gives_wait_to_wake_figures_and_the_backends_median_over_the_adapters():
    o = render(RATES, WAITS)
    lar = row(o, "Laravel RedisLock")
    assert lar[2:7] == ["3", "125.00", "250.00", "250.00", "158.33"]   # waits, median, p90, max, mean
    # the last table: backend's median / adapter's median, then the means
    ratios = [l for l in o[o.index("| adapter | backend's median ÷ adapter's median "
                                   "| backend's mean ÷ adapter's mean |"):] if l.startswith("| distlock")]
    cells = [[c.strip() for c in l.strip("|").split("|")] for l in ratios]
    assert [c[1:] for c in cells] == [["100.00×", "100.00×"], ["250.00×", "316.67×"], ["50.00×", "50.00×"]]


def test_check_results_refuses_a_results_file_whose_adapter_was_not_run():
    rates = dict(RATES, **{"distlock-laravel": None})
    o = ["Produced by `bash bench/run.sh` on this machine"] + render(rates, WAITS)
    d = tempfile.mkdtemp(prefix="bench-test-results.")
    md = os.path.join(d, "2030-01-01.md")
    with open(md, "w") as f:
        f.write("\n".join(o) + "\n")
    open(md[:-3] + ".png", "w").close()
    found = check_results.problems(md)
    assert any("a row without figures" in p and "distlock Laravel lock store" in p for p in found), found
    with open(md, "w") as f:
        f.write("\n".join(["Produced by `bash bench/run.sh` on this machine"] + render(RATES, WAITS)) + "\n")
    assert check_results.problems(md) == []
    for p in (md, md[:-3] + ".png"):
        os.unlink(p)
    os.rmdir(d)
