"""A Lock garbage-collected while held is NOT released (blocking and asyncio):
the key keeps its token and runs to its TTL, the renewal stops, and a
ResourceWarning names the key. Real redis-server; the GC is forced with
gc.collect() (CPython frees an unreferenced Lock at once anyway)."""
import asyncio
import gc
import subprocess
import sys
import warnings

import distlock
import distlock.aio as aio

from conftest import wait_until


def _warned_about(seen, key):
    return [w for w in seen if issubclass(w.category, ResourceWarning) and key in str(w.message)]


def test_unreferenced_lock_protects_the_work_after_it(server, r, key):
    # The one-liner people write: the Lock object is dropped as soon as
    # acquire() returns, before do_work() runs.
    c = distlock.Client(server.uri)
    during_work = []
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if c.lock(key, ttl=60).acquire(blocking=False):
            gc.collect()
            during_work.append(r.get(key))
    assert during_work and during_work[0] is not None, "the key was deleted under do_work()"
    assert len(_warned_about(seen, key)) == 1, [str(w.message) for w in seen]
    # Nobody else gets it meanwhile, and closing the client does not release it.
    other = distlock.Client(server.uri)
    try:
        assert not other.lock(key, ttl=5).acquire(blocking=False)
    finally:
        other.close()
    c.close()
    assert r.get(key) == during_work[0]
    r.delete(key)


def test_collected_lock_keeps_token_and_ttl_runs_down(server, r, key):
    c = distlock.Client(server.uri)
    lk = c.lock(key, ttl=30)
    assert lk.acquire(blocking=False)
    token = lk.token
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        del lk
        gc.collect()
    assert r.get(key) == token
    msgs = [str(w.message) for w in _warned_about(seen, key)]
    assert len(msgs) == 1 and "garbage-collected while held" in msgs[0], msgs
    p0 = r.pttl(key)
    assert 0 < p0 <= 30000
    assert wait_until(lambda: r.pttl(key) < p0 - 100, 5.0)  # it keeps running down
    assert r.get(key) == token
    assert c.stats()["release_total"] == 0
    c.close()
    r.delete(key)


def test_collected_auto_renewed_lock_stops_renewing(server, r, key):
    c = distlock.Client(server.uri)
    lk = c.lock(key, ttl=1.0, auto_renew=True)
    assert lk.acquire(blocking=False)
    token = lk.token
    assert wait_until(lambda: c.stats()["renewal_total"] >= 1, 10.0)  # it was renewed
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        del lk
        gc.collect()
    renewed = c.stats()["renewal_total"]
    assert r.get(key) == token
    assert len(_warned_about(seen, key)) == 1
    # No renewal any more: the key expires by its 1 s TTL.
    assert wait_until(lambda: r.get(key) is None, 5.0), "still renewed after collection"
    assert c.stats()["renewal_total"] <= renewed + 1  # at most one under way
    assert c.stats()["release_total"] == 0
    c.close()


def test_with_and_release_still_release(client, r, key):
    with client.lock(key, ttl=30):
        assert r.exists(key)
    assert r.get(key) is None
    lk = client.lock(key, ttl=30)
    assert lk.acquire(blocking=False)
    lk.release()
    assert r.get(key) is None


def test_collected_locks_leave_nothing_behind_in_their_client(client, key):
    # The client keeps its Locks by weak reference (close() releases the
    # ones still held); a Lock that is gone takes its entry with it: released,
    # never acquired, collected while held, or collected in a cycle.
    for i in range(50):
        with client.lock("%s:%d" % (key, i), ttl=30):
            pass
        client.lock(key, ttl=30)
    held = client.lock(key + ":held", ttl=30)
    assert held.acquire(blocking=False)
    cyclic = client.lock(key + ":cycle", ttl=30)
    cyclic.self_ref = cyclic
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        del held, cyclic
        gc.collect()
    assert len(client._locks) == 0


def test_aio_collected_lock_is_not_released(server, r, key):
    async def main():
        async with aio.Client(server.uri) as c:
            lk = c.lock(key, ttl=30)
            assert await lk.acquire(blocking=False)
            token = lk.token
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                del lk
                gc.collect()
            assert r.get(key) == token
            assert len(_warned_about(seen, key)) == 1, [str(w.message) for w in seen]
            p0 = r.pttl(key)
            assert 0 < p0 <= 30000
            deadline = asyncio.get_running_loop().time() + 5.0
            while r.pttl(key) >= p0 - 100:
                assert asyncio.get_running_loop().time() < deadline, "PTTL not running down"
                await asyncio.sleep(0.01)
            # An async with still releases.
            async with c.lock(key + ":with", ttl=30):
                assert r.exists(key + ":with")
            assert not r.exists(key + ":with")
            return token
    token = asyncio.run(main())
    assert r.get(key) == token  # the client's close did not release it either
    r.delete(key)


def test_aio_collected_auto_renewed_lock_stops_renewing(server, r, key):
    async def main():
        async with aio.Client(server.uri) as c:
            lk = c.lock(key, ttl=1.0, auto_renew=True)
            assert await lk.acquire(blocking=False)
            token = lk.token
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10.0
            while c._sync.stats()["renewal_total"] < 1:
                assert loop.time() < deadline, "never renewed"
                await asyncio.sleep(0.01)
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                del lk
                gc.collect()
            renewed = c._sync.stats()["renewal_total"]
            assert r.get(key) == token
            assert len(_warned_about(seen, key)) == 1
            deadline = loop.time() + 5.0
            while r.get(key) is not None:
                assert loop.time() < deadline, "still renewed after collection"
                await asyncio.sleep(0.01)
            assert c._sync.stats()["renewal_total"] <= renewed + 1
    asyncio.run(main())


class _Job:
    """An application object holding its client and its lock, in a reference
    cycle (a back-reference, a bound method kept as a callback...): the
    cyclic collector frees the Client and the Lock in one batch, in no
    order the user chooses."""

    def __init__(self, uri, key):
        self.client = distlock.Client(uri)
        self.lock = self.client.lock(key, ttl=60)
        self.me = self


def test_lock_collected_with_its_client_in_a_cycle_is_not_released(server, r, key):
    job = _Job(server.uri, key)
    assert job.lock.acquire(blocking=False)
    token = job.lock.token
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        del job
        gc.collect()
    assert r.get(key) == token, "the cyclic GC released the key (the Client's finalizer)"
    assert len(_warned_about(seen, key)) == 1, [str(w.message) for w in seen]
    r.delete(key)


_AT_EXIT_SCRIPT = r"""
import sys
import distlock

def report(lock):  # any module-level function puts __main__'s globals in a cycle
    print("held", lock.token, flush=True)

client = distlock.Client(sys.argv[1])
lock = client.lock(sys.argv[2], ttl=60)
assert lock.acquire(blocking=False)
report(lock)
"""


def test_lock_held_at_interpreter_exit_is_not_released(server, r, key):
    # A script that ends while its lock is held: the lock is collected at
    # exit, which is no release either (the lease runs to its TTL).
    out = subprocess.run([sys.executable, "-W", "always", "-c", _AT_EXIT_SCRIPT, server.uri,
                          key], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    token = out.stdout.split()[1]
    assert r.get(key) == token, "released at interpreter exit; stderr: " + out.stderr
    r.delete(key)


def test_aio_reentrant_lock_collected_under_an_inner_one_keeps_the_key(server, r, key):
    # One task, two reentrant Lock objects on one key (one ownership, counted).
    # The outer one is collected while the inner one holds: the collected
    # one's lease must still run to its TTL, so the inner release may drop
    # the inner count but must not delete the key.
    async def main():
        async with aio.Client(server.uri) as c:
            outer = c.lock(key, ttl=60, reentrant=True)
            assert await outer.acquire(blocking=False)
            token = outer.token
            inner = c.lock(key, ttl=60, reentrant=True)
            assert await inner.acquire(blocking=False)
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                del outer
                gc.collect()
            assert len(_warned_about(seen, key)) == 1, [str(w.message) for w in seen]
            await inner.release()
            assert r.get(key) == token, "the collected outer Lock's key was deleted"
    asyncio.run(main())
    r.delete(key)
