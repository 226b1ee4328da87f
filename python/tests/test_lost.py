"""Lost leases in the blocking API: on_lost= (called once, in the watcher
thread), Lock.check(), Lock.run() interrupting its function in the owner's
thread, and the three error classes: acquire failure, renewal failure, loss."""
import threading
import time

import pytest

import distlock


def _wait_for(event: threading.Event, timeout: float) -> bool:
    return event.wait(timeout)


def test_on_lost_called_once_from_the_watcher_thread(client, r, key):
    calls = []
    fired = threading.Event()

    def on_lost(lk):
        calls.append((lk, threading.current_thread().name, lk.lost, lk.held))
        fired.set()

    lk = client.lock(key, ttl=0.6, auto_renew=True, on_lost=on_lost)
    assert lk.acquire(blocking=False)
    lk.check()  # held: no exception
    r.delete(key)  # lost behind its back
    assert fired.wait(5), "on_lost was not called"
    assert calls == [(lk, "distlock-lost-watcher", True, False)]
    with pytest.raises(distlock.LockLost):
        lk.check()
    with pytest.raises(distlock.LockLost):
        lk.release()
    assert lk.lost
    with pytest.raises(distlock.LockLost):
        lk.check()  # released after the loss: still reported as lost
    # a new ownership is watched afresh, and its loss reported again
    fired.clear()
    assert lk.acquire(blocking=False)
    r.delete(key)
    assert fired.wait(5)
    assert len(calls) == 2
    with pytest.raises(distlock.LockLost):
        lk.release()


def test_on_lost_not_called_for_a_healthy_lock(client, r, key):
    calls = []
    lk = client.lock(key, ttl=1.0, auto_renew=True, on_lost=calls.append)
    with lk:
        deadline = time.monotonic() + 2.5  # past the ttl: renewed ~7 times
        while time.monotonic() < deadline:
            lk.check()
            time.sleep(0.05)
        assert r.get(key) == lk.token
    assert calls == [] and not lk.lost
    with pytest.raises(distlock.NotHeld):
        lk.check()


def test_on_lost_errors_are_reported_not_raised(client, r, key):
    fired = threading.Event()
    seen = []
    old = threading.excepthook

    def boom(lk):
        fired.set()
        raise RuntimeError("callback failed")

    import sys
    hook = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(u.exc_value)
    try:
        lk = client.lock(key, ttl=0.6, auto_renew=True, on_lost=boom)
        assert lk.acquire(blocking=False)
        r.delete(key)
        assert fired.wait(5)
        deadline = time.monotonic() + 2
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        sys.unraisablehook = hook
        threading.excepthook = old
    assert [str(e) for e in seen] == ["callback failed"]
    # the watcher carries on: a second lock's loss is still reported
    fired2 = threading.Event()
    lk2 = client.lock(key + ":2", ttl=0.6, auto_renew=True, on_lost=lambda _: fired2.set())
    assert lk2.acquire(blocking=False)
    r.delete(key + ":2")
    assert fired2.wait(5)


def test_on_lost_error_under_the_default_unraisable_hook_leaves_the_watcher_running(
        client, r, key, capfd):
    # Programs run with the interpreter's own sys.unraisablehook (pytest
    # puts a Python one in its place, which takes any object): that hook
    # takes only its UnraisableHookArgs. The callback's error must reach it
    # and the watcher must carry on, or every later loss on this client goes
    # unreported: no on_lost, and no run() interrupted.
    import sys
    fired = threading.Event()

    def boom(lk):
        fired.set()
        raise RuntimeError("callback failed under the default hook")

    hook = sys.unraisablehook
    sys.unraisablehook = sys.__unraisablehook__
    try:
        lk = client.lock(key, ttl=0.6, auto_renew=True, on_lost=boom)
        assert lk.acquire(blocking=False)
        r.delete(key)
        assert fired.wait(5)
        fired2 = threading.Event()
        lk2 = client.lock(key + ":2", ttl=0.6, auto_renew=True,
                          on_lost=lambda _: fired2.set())
        assert lk2.acquire(blocking=False)
        r.delete(key + ":2")
        reported = fired2.wait(5)
    finally:
        sys.unraisablehook = hook
    err = capfd.readouterr().err
    assert reported, "the watcher stopped after a callback raised:\n" + err
    assert "RuntimeError: callback failed under the default hook" in err, err
    assert "Exception ignored in the on_lost callback of <distlock.Lock" in err, err


def test_run_interrupts_the_owner_thread(client, r, key):
    lk = client.lock(key, ttl=0.6, auto_renew=True)
    progress = []

    def work():
        r.delete(key)  # lost behind its back, while work() runs
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < 30:
                progress.append(1)   # pure Python: interruptible anywhere
                try:
                    time.sleep(0.005)
                except Exception:     # user code swallowing errors can't stop it
                    pass
        finally:
            progress.append(time.monotonic() - t0)
        return "finished"

    assert lk.acquire(blocking=False)
    t0 = time.monotonic()
    with pytest.raises(distlock.LockLost) as ei:
        lk.run(work)
    took = time.monotonic() - t0
    with pytest.raises(distlock.LockLost):
        lk.release()  # the key is gone: release says so, as with: would
    # found at the next renewal (ttl/3 = 0.2 s), not after 30 s
    assert took < 3, took
    assert "work" in str(ei.value)
    assert progress[-1] < 3
    # nothing is left pending in this thread: plain code runs on
    for _ in range(1000):
        pass
    assert lk.lost


def test_run_returns_when_not_lost(client, r, key):
    lk = client.lock(key, ttl=5, auto_renew=True)
    with pytest.raises(distlock.NotHeld):
        lk.run(lambda: None)
    with lk:
        assert lk.run(lambda a, b=0: a + b, 40, b=2) == 42
        assert lk.run(lambda: r.get(key)) == lk.token
    # an exception of fn goes through unchanged
    with lk:
        with pytest.raises(KeyError):
            lk.run(lambda: {}["x"])


def test_three_error_classes(server_factory, key):
    """acquire failure, renewal failure and loss: three classes."""
    srv = server_factory()
    c = distlock.Client(srv.uri, connect_timeout=0.3, command_timeout=0.3)
    lk = c.lock(key, ttl=30)
    assert lk.acquire(blocking=False)
    lost = c.lock(key + ":lost", ttl=30)
    assert lost.acquire(blocking=False)
    srv.redis().delete(key + ":lost")
    with pytest.raises(distlock.LockLost) as e_lost:
        lost.extend()
    srv.stop()  # the server goes away while lk is held
    with pytest.raises(distlock.RenewalFailed) as e_renew:
        lk.extend()
    with pytest.raises(distlock.ConnectionError) as e_acq:
        c.lock(key + ":2", ttl=30).acquire(blocking=False)
    c.close()
    assert type(e_acq.value) is distlock.ConnectionError
    assert isinstance(e_renew.value, distlock.ConnectionError)  # what extend raised before
    assert not isinstance(e_renew.value, distlock.LockLost)
    assert not isinstance(e_lost.value, distlock.ConnectionError)
    assert e_renew.value.status == distlock._core.DISTLOCK_ECONN
    assert isinstance(e_renew.value.__cause__, distlock.ConnectionError)
    assert len({type(e_acq.value), type(e_renew.value), type(e_lost.value)}) == 3
