"""Metrics: client.stats() is the C core's
distlock_client_stats() as a dict, and its counters move exactly as the
scenario says: grants, refusals, failures by status, releases, the wait and
hold histograms, and a node that does not answer (its timeouts)."""
import os
import re
import sys

import distlock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "harness"))
from faultproxy import FaultProxy  # noqa: E402

NAME = re.compile(r'^[a-z_]+(\{[a-z]+="[^"]+"\})?$')


def delta(before, after):
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


def test_stats_move_as_the_scenario_says(server, key):
    refusals = 3
    with distlock.Client(server.uri) as a, distlock.Client(server.uri) as b:
        s = a.stats()
        assert all(NAME.match(k) and isinstance(v, int) for k, v in s.items())
        assert s["node_errors_total{node=\"0\"}"] == 0
        a0, b0 = a.stats(), b.stats()
        lk = a.lock(key, ttl=10)
        assert lk.acquire(blocking=False)
        for _ in range(refusals):
            assert not b.lock(key, ttl=10).acquire(blocking=False)
        lk.release()
        d = delta(a0, a.stats())
        hist = {k: v for k, v in d.items() if k.startswith(("acquire_wait_us", "hold_us"))}
        assert {k: v for k, v in d.items() if k not in hist} == {
            "acquire_granted_total": 1, "release_total": 1}
        assert hist["acquire_wait_us_count"] == 1 and hist["hold_us_count"] == 1
        assert hist["acquire_wait_us_bucket{le=\"+Inf\"}"] == 1
        d = delta(b0, b.stats())
        assert d["acquire_refused_total"] == refusals
        assert d["acquire_wait_us_count"] == refusals
        assert "acquire_granted_total" not in d


def test_a_frozen_node_counts_its_timeout(server_factory, key):
    s = server_factory()
    with FaultProxy([s.port]) as fp:
        c = distlock.Client(fp.uris(), command_timeout=0.3, connect_timeout=0.3)
        try:
            with c.lock(key + ":warm", ttl=10):
                pass
            before = c.stats()
            fp.cmd("hold 0")
            try:
                c.lock(key, ttl=10).acquire(blocking=False)
                raise AssertionError("acquire on a frozen node succeeded")
            except distlock.ConnectionError:
                pass
            d = delta(before, c.stats())
            # The attempt timed out; its undo then found the node still owing
            # that reply past its timeout and failed at once: two timeouts.
            assert d["acquire_failed_total{status=\"ECONN\"}"] == 1
            assert d["node_timeouts_total{node=\"0\"}"] == 2
            assert d["node_errors_total{node=\"0\"}"] == 2
        finally:
            fp.cmd("heal")
            c.close()
    s.stop()
