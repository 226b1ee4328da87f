"""A Lock's calls as a Python class's would be (its common path runs in C,
bindings/distlock.i): arguments checked as a def checks them, a subclass
that adds nothing locks as a Lock does, the local mutexes behave as
threading.Lock, and taking and releasing locks, refused or not, leaves no
Python object behind."""
import gc
import sys
import threading

import pytest

import distlock
from distlock import _core


def test_acquire_arguments_are_checked_as_a_def_checks_them(client, key):
    lk = client.lock(key, ttl=10)
    with pytest.raises(TypeError, match="unexpected keyword argument 'wait'"):
        lk.acquire(wait=1)
    with pytest.raises(TypeError, match="takes from 1 to 3 positional arguments but 4 were given"):
        lk.acquire(True, 1, 2)
    with pytest.raises(TypeError, match="multiple values for argument 'blocking'"):
        lk.acquire(True, blocking=False)
    with pytest.raises(TypeError, match=r"release\(\) takes 1 positional argument but 2 were"):
        lk.release(1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'force'"):
        lk.release(force=True)
    with pytest.raises(ValueError, match="non-blocking call"):
        lk.acquire(False, 1)
    assert lk.acquire(timeout=-1) is True  # -1: the Lock's own wait, as None
    assert lk.acquire(blocking=False) is False  # held through this object
    lk.release()
    assert lk.acquire(False) is True and lk.acquire(False, None) is False
    lk.release()


def test_client_lock_binds_its_arguments_as_its_def_says(client, r, key):
    # Client.lock runs in C; its signature and docstring are the Python def's.
    import inspect
    assert str(inspect.signature(distlock.Client.lock)) == (
        "(self, /, key, ttl=30.0, *, wait=None, auto_renew=False, fencing=False, "
        "reentrant=False, shared=False, on_lost=None, token=None)")
    assert "nothing is sent until it is acquired" in distlock.Client.lock.__doc__
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'key'"):
        client.lock()
    with pytest.raises(TypeError, match="takes from 2 to 3 positional arguments but 4 were"):
        client.lock(key, 10, 1)  # wait is keyword-only
    with pytest.raises(TypeError, match="multiple values for argument 'ttl'"):
        client.lock(key, 10, ttl=5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'timeout'"):
        client.lock(key, timeout=5)
    assert client.lock(key).ttl == 30.0
    lk = client.lock(ttl=2.5, key=key, token="tok-1", wait=0)
    assert (lk.ttl, lk.key) == (2.5, key)
    assert lk.acquire() is True
    assert r.get(key) == "tok-1" and 0 < r.pttl(key) <= 2500
    lk.release()
    assert r.get(key) is None


def test_subclass_that_adds_nothing_locks_as_a_lock(client, r, key):
    class Job(distlock.Lock):
        pass

    lk = Job(client, key, ttl=10)
    assert lk.acquire(blocking=False)
    assert r.get(key) == lk.token
    assert not client.lock(key).acquire(blocking=False)
    with pytest.raises(distlock.LockNotAcquired):
        with Job(client, key, wait=0):
            pass
    lk.release()
    assert r.exists(key) == 0
    with Job(client, key) as held:
        assert isinstance(held, Job) and r.get(key) == held.token


def test_local_mutex_behaves_as_threading_lock():
    for make in (threading.Lock, _core.Mutex):
        m = make()
        assert m.acquire(False) is True and m.locked()
        assert m.acquire(False) is False
        assert m.acquire(True, 0.01) is False
        assert m.acquire(timeout=0) is False
        with pytest.raises(ValueError, match="can't specify a timeout for a non-blocking call"):
            m.acquire(False, 1)
        with pytest.raises(ValueError, match="timeout value must be positive"):
            m.acquire(True, -2)
        with pytest.raises(OverflowError):
            m.acquire(True, 1e300)
        m.release()
        assert not m.locked()
        with pytest.raises(RuntimeError, match="release unlocked lock"):
            m.release()
        with pytest.raises(ValueError, match="NaN"):
            m.acquire(True, float("nan"))  # free: not taken for a NaN wait either
        assert not m.locked()
        with m:
            assert m.locked()
        assert not m.locked()
        got = []
        m.acquire()
        t = threading.Thread(target=lambda: got.append(m.acquire(timeout=10)))
        t.start()
        m.release()
        t.join(15)
        assert got == [True] and m.locked(), make
        m.release()


def _blocks_after(run, rounds):
    run(rounds)  # warm: caches, the memo of TTLs, the client's connection
    gc.collect()
    before = sys.getallocatedblocks()
    run(rounds)
    gc.collect()
    return sys.getallocatedblocks() - before


def test_locks_taken_refused_and_released_leave_no_objects_behind(server, client, key):
    other = distlock.Client(server.uri)
    holder = other.lock(key + ":held", ttl=30)
    assert holder.acquire(blocking=False)

    def run(n):
        for _ in range(n):
            with client.lock(key, ttl=30) as lk:  # taken, released
                assert lk.held
            refused = client.lock(key + ":held", ttl=30)
            assert refused.acquire(blocking=False) is False  # refused
            with pytest.raises(distlock.LockNotAcquired):
                with client.lock(key + ":held", wait=0):
                    pass
            with pytest.raises(distlock.NotHeld):
                refused.release()
            with pytest.raises(TypeError):
                refused.acquire(nope=1)
    grown = _blocks_after(run, 300)
    holder.release()
    other.close()
    # a leak of one object per call would be hundreds of blocks
    assert grown < 100, "%d blocks more after 300 rounds" % grown


def test_with_calls_the_objects_own_acquire_and_release(client, r, key):
    """`with lk:` goes through lk.acquire and lk.release, as the Python
    __enter__/__exit__ did: a patched instance (mock.patch.object) sees them."""
    lk = client.lock(key, ttl=10)
    calls = []
    acquire, release = lk.acquire, lk.release
    lk.acquire = lambda *a, **k: calls.append("acquire") or acquire(*a, **k)
    lk.release = lambda: calls.append("release") or release()
    with lk:
        assert r.get(key) == lk.token
    assert calls == ["acquire", "release"]
    assert r.exists(key) == 0


def test_a_lock_is_initialised_once(client, key):
    """Its mutexes may have waiters: __init__ again, or replacing them, is refused."""
    lk = client.lock(key, ttl=10)
    with pytest.raises(TypeError, match="initialised once"):
        lk.__init__(client, key)
    with pytest.raises(AttributeError):
        lk._local = _core.Mutex()
    assert lk.acquire(blocking=False)
    lk.release()


def test_a_lock_made_before_close_sees_its_client_closed(server, r, key):
    # A Lock reads its client's closed flag and handle where the client
    # keeps them (its CallCount), not a copy taken when it was made.
    c = distlock.Client(server.uri)
    early = c.lock(key + ":early", ttl=10)
    held = c.lock(key + ":held", ttl=10)
    assert held.acquire(blocking=False)
    c.close()  # releases what is held
    assert c.closed and c._h is None and r.get(key + ":held") is None
    with pytest.raises(distlock.ClosedError):
        early.acquire(blocking=False)
    assert r.get(key + ":early") is None
    with pytest.raises(distlock.ClosedError):
        held.release()
    assert len(c._inflight) == 0  # every call that backed out left the count


def test_a_client_is_initialised_once_so_its_locks_see_its_close(server, r, key):
    # A Lock keeps the CallCount its client had when the Lock was made; a
    # second __init__ would give the client a new one, and close() would
    # then mark and wait on that one while the older Locks kept acquiring
    # through the old C client, after close().
    c = distlock.Client(server.uri)
    lk = c.lock(key, ttl=10)
    with pytest.raises(TypeError, match="initialised once"):
        c.__init__(server.uri)
    c.close()
    with pytest.raises(distlock.ClosedError):
        lk.acquire(blocking=False)
    assert r.get(key) is None
    assert len(c._inflight) == 0


def test_a_call_count_never_falls_below_zero():
    # A forked child forgets the calls of its parent's other threads; the
    # call its forking thread was in still ends there, and must not take
    # the count below 0 (len() would then raise, close() would not wait).
    count = _core.CallCount()
    count.append(None)
    count.pop()
    count.pop()
    assert len(count) == 0
    count.append(None)
    assert len(count) == 1
