"""distlock.ConnectionError and distlock.TimeoutError are Python's own
ConnectionError / TimeoutError too; distlock.CancelledError is not asyncio's.

What a handler written for the built-in names catches, from real servers:
a node that gave no usable answer (ConnectionError) and a grant that came
after the ttl (TimeoutError, nothing held), and never a lock held by another
owner, a lost lease, a bad argument or a closed client. A star-import does
not rebind the built-in names (python/README.md, "Exceptions and Python's
own names").
"""
import asyncio
import builtins
import os
import sys

import pytest

import distlock
from distlock import _core

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "harness"))
from faultproxy import FaultProxy  # noqa: E402


def test_builtin_connection_error_catches_an_unreachable_node(key):
    # port 1: nothing listens there, the connect is refused at once
    with distlock.Client("redis://127.0.0.1:1", connect_timeout=2) as c:
        try:
            c.lock(key, ttl=5).acquire(blocking=False)
        except builtins.ConnectionError as e:  # the handler a socket user writes
            caught = e
        else:
            pytest.fail("an unreachable node was not a built-in ConnectionError")
    assert isinstance(caught, distlock.ConnectionError)
    assert caught.status == _core.DISTLOCK_ECONN
    assert isinstance(caught, OSError) and caught.errno is None
    assert "127.0.0.1:1" in str(caught)


def test_builtin_timeout_error_catches_a_grant_after_the_ttl(server, r, key):
    r.delete(key)
    with FaultProxy([server.port]) as fp:
        with distlock.Client(fp.uris(), command_timeout=2, connect_timeout=2) as c:
            warm = c.lock(key + ":warm", ttl=5)
            assert warm.acquire(blocking=False)  # connected before the delay
            warm.release()
            fp.cmd("delay * 300 up")  # the grant of a 0.1 s lease arrives after it ended
            try:
                c.lock(key, ttl=0.1).acquire(blocking=False)
            except builtins.TimeoutError as e:
                caught = e
            else:
                pytest.fail("a grant after the ttl was not a built-in TimeoutError")
            fp.cmd("delay * 0 up")
    assert isinstance(caught, distlock.TimeoutError)
    assert isinstance(caught, asyncio.TimeoutError)  # the same class since Python 3.11
    assert caught.status == _core.DISTLOCK_ETIMEDOUT


def test_builtin_names_catch_no_held_lost_or_bad_input_error(client, key):
    other = distlock.Client(client.nodes[0])
    try:
        seen = []
        held = other.lock(key, ttl=30)
        assert held.acquire(blocking=False)
        with pytest.raises(distlock.LockNotAcquired) as ei:  # held by another owner
            with client.lock(key, ttl=30, wait=0):
                pass
        seen.append(ei.value)
        other.force_release(key)
        with pytest.raises(distlock.LockLost) as ei:  # the lease is gone
            held.release()
        seen.append(ei.value)
        with pytest.raises(distlock.NotHeld) as ei:
            client.lock(key, ttl=30).release()
        seen.append(ei.value)
        with pytest.raises(distlock.InvalidArgument) as ei:
            client.lock("", ttl=30).acquire()
        seen.append(ei.value)
    finally:
        other.close()
    with pytest.raises(distlock.ClosedError) as ei:
        other.lock(key, ttl=30).acquire()
    seen.append(ei.value)
    for e in seen:
        assert not isinstance(e, (builtins.ConnectionError, builtins.TimeoutError)), repr(e)
        assert not isinstance(e, distlock.ConnectionError), repr(e)


def test_cancelled_error_is_an_error_not_a_task_cancel():
    # asyncio.CancelledError is a BaseException meaning "this task is being
    # cancelled": a status of one call must stay an ordinary exception.
    assert issubclass(distlock.CancelledError, distlock.Error)
    assert issubclass(distlock.CancelledError, Exception)
    assert not issubclass(distlock.CancelledError, asyncio.CancelledError)
    assert distlock.CancelledError is not asyncio.CancelledError


def test_star_import_keeps_pythons_names():
    ns: dict = {}
    exec("from distlock import *", ns)
    for name in ("ConnectionError", "TimeoutError", "CancelledError"):
        assert name not in ns, name
        assert hasattr(distlock, name)
    exec("from distlock.aio import *", ns)
    assert "ConnectionError" not in ns and "TimeoutError" not in ns
    assert ns["Error"] is distlock.Error and ns["NoQuorum"] is distlock.NoQuorum
