"""Blocking acquires: wait budget, wake-up on release, GIL released while waiting."""
import threading
import time

import distlock


def test_blocking_wait_times_out(server, client, key):
    with distlock.Client(server.uri) as other, other.lock(key, ttl=30):
        lk = client.lock(key, ttl=10, wait=0.4)
        t0 = time.monotonic()
        assert lk.acquire() is False
        took = time.monotonic() - t0
        assert 0.35 <= took < 3.0, took
        t0 = time.monotonic()
        assert lk.acquire(timeout=0.2) is False  # timeout overrides wait
        took = time.monotonic() - t0
        assert 0.15 <= took < 3.0, took


def test_with_waits_then_raises(server, client, key):
    with distlock.Client(server.uri) as other, other.lock(key, ttl=30):
        t0 = time.monotonic()
        try:
            with client.lock(key, ttl=10, wait=0.3):
                raise AssertionError("must not get the lock")
        except distlock.LockNotAcquired:
            pass
        assert time.monotonic() - t0 >= 0.25


def test_blocking_wait_acquires_once_released(server, client, r, key):
    holder_client = distlock.Client(server.uri)
    holder = holder_client.lock(key, ttl=30)
    assert holder.acquire(blocking=False)
    got = threading.Event()
    result = {}

    def waiter():
        lk = client.lock(key, ttl=10, wait=20)
        result["ok"] = lk.acquire()
        result["token"] = lk.token
        got.set()
        if result["ok"]:
            lk.release()

    t = threading.Thread(target=waiter)
    t.start()
    # The waiter must really be waiting (not done) while the holder holds it.
    assert not got.wait(0.3)
    t0 = time.monotonic()
    holder.release()
    assert got.wait(10)
    woke = time.monotonic() - t0
    t.join(10)
    holder_client.close()
    assert result["ok"] is True and len(result["token"]) == 32
    assert woke < 5.0, woke


def test_lock_expiring_is_picked_up_by_waiter(client, r, key):
    r.set(key, "foreign-owner", px=300)  # a foreign lock that sends no notification
    lk = client.lock(key, ttl=10, wait=10)
    t0 = time.monotonic()
    assert lk.acquire()
    took = time.monotonic() - t0
    lk.release()
    assert 0.2 <= took < 5.0, took


def test_threads_wait_concurrently_gil_released(server, client, key):
    """Four threads each wait 1 s on a held key. If a waiting thread kept the
    GIL, the waits would run one after another (~4 s) and the main thread
    would stall for a whole second at a time."""
    keys = ["%s:%d" % (key, i) for i in range(4)]
    with distlock.Client(server.uri) as other:
        held = [other.lock(k, ttl=30) for k in keys]
        assert all(h.acquire(blocking=False) for h in held)
        results = []

        def waiter(k):
            results.append(client.lock(k, ttl=10, wait=1.0).acquire())

        threads = [threading.Thread(target=waiter, args=(k,)) for k in keys]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        last = time.monotonic()
        max_gap = 0.0
        spins = 0
        while any(t.is_alive() for t in threads):
            now = time.monotonic()
            max_gap = max(max_gap, now - last)
            last = now
            spins += 1
            if now - t0 > 30:
                break
        took = time.monotonic() - t0
        for t in threads:
            t.join(10)
        for h in held:
            h.release()
    assert results == [False] * 4
    assert 0.9 <= took < 2.5, took     # concurrent, not 4 x 1 s
    assert max_gap < 0.5, max_gap      # the main thread kept running
    assert spins > 100
