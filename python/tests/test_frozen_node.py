"""One meaning per status: frozen nodes tell the same, correct
story in Python as in C (tests/test_frozen_node.c), PHP
(php-ext/tests/072_frozen_node.phpt) and the CLI (cli/tests/run.sh
t_frozen_*), following docs/errors.md "Statuses in each front end".

Three real redis-servers behind the fault-injecting proxy
(tests/harness/faultproxy.py); a frozen node is a listener whose traffic the
proxy holds both ways: connections stay open and nothing ever answers.
"""
import os
import re
import sys
import time

import pytest

import distlock
from conftest import wait_until
from distlock import _core, _errors

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "harness"))
from faultproxy import FaultProxy  # noqa: E402

CMD = 0.3       # per-node command timeout of these clients (s)
BOUND = 2.0     # "about the command timeout" on a busy machine


@pytest.fixture(scope="module")
def three(server_factory):
    return [server_factory() for _ in range(3)]


@pytest.fixture
def fp(three):
    for s in three:
        s.redis().flushall()
    with FaultProxy([s.port for s in three]) as p:
        yield p


def client_on(fp, mask=None, **kw):
    kw.setdefault("command_timeout", CMD)
    kw.setdefault("connect_timeout", CMD)
    c = distlock.Client(fp.uris(mask), **kw)
    # Connect to every node (and load the scripts) before anything freezes.
    warm = c.lock("frozen:warm:%d" % id(c), ttl=5, wait=0)
    assert warm.acquire()
    warm.release()
    return c


def holders(three, key):
    return sum(1 for s in three if s.redis().get(key) is not None)


def not_held_story(e):
    text = str(e).lower()
    assert "another owner" not in text and "held by" not in text, text
    assert not isinstance(e, distlock.LockNotAcquired)


def test_one_of_three_frozen(fp, three, key):
    a, b = client_on(fp), client_on(fp)
    try:
        fp.cmd("hold 2")
        la = a.lock(key, ttl=10, wait=0)
        t0 = time.monotonic()
        assert la.acquire() is True
        assert time.monotonic() - t0 < BOUND
        assert la.validity > 0
        assert holders(three[:2], key) == 2 and three[2].redis().get(key) is None

        # Another owner: "held", which is not an exception -- False, or
        # LockNotAcquired from `with` -- at once and after waiting.
        lb = b.lock(key, ttl=10, wait=0)
        assert lb.acquire() is False
        t0 = time.monotonic()
        assert lb.acquire(timeout=0.4) is False
        assert 0.35 <= time.monotonic() - t0 < 0.4 + BOUND
        with pytest.raises(distlock.LockNotAcquired, match="held by another owner"):
            with b.lock(key, ttl=10, wait=0):
                pass

        la.release()
        assert holders(three, key) == 0
        assert lb.acquire() is True
        lb.release()
    finally:
        a.close()
        b.close()


def test_only_node_frozen(fp, key):
    c = client_on(fp, mask=0x1)
    try:
        held = c.lock(key + ":held", ttl=10, wait=0)
        assert held.acquire()
        fp.cmd("hold 0")
        for i, wait in enumerate((0, 3.0)):
            t0 = time.monotonic()
            with pytest.raises(distlock.ConnectionError) as ei:
                c.lock("%s:%d" % (key, i), ttl=10, wait=wait).acquire()
            took = time.monotonic() - t0
            e = ei.value
            assert type(e) is distlock.ConnectionError, repr(e)
            assert e.status == _core.DISTLOCK_ECONN
            assert "127.0.0.1:%d" % fp.ports[0] in e.detail
            not_held_story(e)
            # The first call waits out the command timeout; the core may fail
            # later ones at once (the node owes replies past it).
            assert (i > 0 or took >= CMD - 0.05) and took < BOUND, took
        with pytest.raises(distlock.ConnectionError) as ei:
            held.release()
        assert ei.value.status == _core.DISTLOCK_ECONN
        not_held_story(ei.value)
    finally:
        c.close()


def test_two_of_three_frozen(fp, three, key):
    c = client_on(fp)
    try:
        fp.cmd("hold 1")
        fp.cmd("hold 2")
        for i, wait in enumerate((0, 3.0)):
            k = "%s:%d" % (key, i)
            t0 = time.monotonic()
            with pytest.raises(distlock.NoQuorum) as ei:
                c.lock(k, ttl=10, wait=wait).acquire()
            assert time.monotonic() - t0 < BOUND
            assert ei.value.status == _core.DISTLOCK_ENOQUORUM
            assert isinstance(ei.value, distlock.ConnectionError)
            not_held_story(ei.value)
            # The live node's grant was undone.
            assert wait_until(lambda: holders(three, k) == 0, 3.0)
    finally:
        c.close()


def test_granted_after_ttl(fp, three, key):
    c = client_on(fp, command_timeout=None, connect_timeout=None)   # 1.0 / 0.5 s
    try:
        fp.cmd("delay * 300 up")    # grants of a 0.1 s lease arrive after it ended
        for wait in (0, 5.0):
            t0 = time.monotonic()
            with pytest.raises(distlock.TimeoutError) as ei:
                c.lock(key, ttl=0.1, wait=wait).acquire()
            assert time.monotonic() - t0 < 3.0
            e = ei.value
            assert e.status == _core.DISTLOCK_ETIMEDOUT
            assert "ttl" in str(e)
            not_held_story(e)
            doc = " ".join((type(e).__doc__ or "").split())
            assert "ttl was used up: nothing is held" in doc and "never \"held" in doc
        fp.cmd("delay * 0 up")
        # Undone (the undo may still be on its way through the delay).
        assert wait_until(lambda: holders(three, key) == 0, 3.0)
    finally:
        c.close()


def test_status_table_matches_readme():
    """docs/errors.md's table names the exception of every status; the mapping
    handed to the C layer is exactly that."""
    with open(os.path.join(REPO, "docs", "errors.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("## Statuses in each front end", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in section.splitlines() if re.match(r"\| `[A-Z]+` \(-?\d+\)", r)]
    seen = set()
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        name = re.match(r"`([A-Z]+)`", cells[0]).group(1)
        status = getattr(_core, "DISTLOCK_" + name)
        assert "(%d)" % status in cells[0]
        py = re.match(r"`([A-Za-z]+)", cells[-2]).group(1)
        if status < 0:
            assert _errors.STATUS_ERRORS[status].__name__ == py, row
            assert getattr(distlock, py) is _errors.STATUS_ERRORS[status]
        else:
            assert py == "False"   # NOTACQUIRED: acquire() returns False
        seen.add(status)
    assert seen == set(range(_core.DISTLOCK_STATUS_MIN, 2)) - {0}
    assert set(_errors.STATUS_ERRORS) == {s for s in seen if s < 0}
    # ConnectionError is "the servers gave no usable answer", never "held".
    for s in (_core.DISTLOCK_ECONN, _core.DISTLOCK_ETIMEDOUT, _core.DISTLOCK_ENOQUORUM,
              _core.DISTLOCK_EPROTO):
        assert issubclass(_errors.STATUS_ERRORS[s], distlock.ConnectionError)
    assert issubclass(distlock.ResourceError, OSError)
    assert not issubclass(distlock.CancelledError, distlock.ConnectionError)
