"""Client.semaphore() (blocking and asyncio) against real redis-servers, on one
node and on three independent nodes: at most `permits` holders at once under
contention, a release wakes a waiter, a SIGKILLed holder's permit comes back
by its TTL, bad input is the library's InvalidArgument / ProtocolError, and a
collected Semaphore abandons its permit (as a Lock does)."""
import asyncio
import gc
import signal
import threading
import time
import warnings

import pytest

import distlock
import distlock.aio as aio
from conftest import node_uris, spawn_holder, subscribers, wait_until

MARKER = "__distlock_semaphore__"


def live_tokens(nodes, key):
    """The permit tokens each node stores for key (the marker left out)."""
    return [set(m for m in s.redis().zrange(key, 0, -1) if m != MARKER) for s in nodes]


def test_permits_admit_p_holders_and_refuse_the_next(nodes, key):
    with distlock.Client(node_uris(nodes)) as c:
        sems = [c.semaphore(key, 3, ttl=30) for _ in range(4)]
        assert [s.acquire(blocking=False) for s in sems[:3]] == [True] * 3
        assert sems[3].acquire(blocking=False) is False
        assert not sems[3].held and sems[3].token is None
        tokens = {s.token for s in sems[:3]}
        assert len(tokens) == 3
        # wire format: a sorted set, tokens scored by expiry, the marker scored P
        for s in nodes:
            r = s.redis()
            if r.exists(key):
                assert r.type(key) == "zset"
                assert r.zscore(key, MARKER) == 3
        assert wait_until(lambda: all(t == tokens for t in live_tokens(nodes, key)), 3.0)
        sems[0].release()
        assert sems[3].acquire(blocking=False) is True
        for s in sems[1:]:
            s.release()
        assert wait_until(lambda: all(t == set() for t in live_tokens(nodes, key)), 3.0)


def test_bound_holds_under_contention_of_threads(nodes, key):
    permits, workers, rounds = 2, 6, 5
    inside, worst, errors = [0], [0], []
    mu = threading.Lock()
    with distlock.Client(node_uris(nodes)) as c:
        def worker():
            sem = c.semaphore(key, permits, ttl=10, wait=60)
            try:
                for _ in range(rounds):
                    with sem:
                        with mu:
                            inside[0] += 1
                            worst[0] = max(worst[0], inside[0])
                        # the servers agree: never more than P live tokens
                        held = max(len(t) for t in live_tokens(nodes, key))
                        if held > permits:
                            errors.append("a node holds %d permits" % held)
                        time.sleep(0.005)  # the work under the permit
                        with mu:
                            inside[0] -= 1
            except Exception as e:  # reported by the main thread
                errors.append(repr(e))
        threads = [threading.Thread(target=worker) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert worst[0] <= permits, "%d holders at once with %d permits" % (worst[0], permits)


def test_release_wakes_a_waiter(nodes, key):
    # The waiter retries only every 5 s: getting the permit well before that
    # is the release's notification waking it.
    with distlock.Client(node_uris(nodes)) as c, \
            distlock.Client(node_uris(nodes), retry_min=5, retry_max=5) as waiting:
        holder = c.semaphore(key, 1, ttl=30)
        assert holder.acquire(blocking=False)
        waiter = waiting.semaphore(key, 1, ttl=30)
        got = []
        t = threading.Thread(target=lambda: got.append((waiter.acquire(timeout=30),
                                                         time.monotonic())))
        t.start()
        assert wait_until(lambda: subscribers(nodes, key) >= 1, 10.0), "the waiter never waited"
        t0 = time.monotonic()
        holder.release()
        t.join(30)
        assert got and got[0][0] is True
        assert got[0][1] - t0 < 2.0, "woken %.3f s after the release" % (got[0][1] - t0)
        waiter.release()


def test_killed_holders_permit_comes_back_after_its_ttl(nodes, key):
    ttl = 2.5  # long enough that the first check comes while it is still held, under load
    uris = node_uris(nodes)
    t_spawn = time.monotonic()
    proc, token = spawn_holder(uris, ttl, "semaphore", key, "1")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with distlock.Client(uris) as c:
        sem = c.semaphore(key, 1, ttl=10)
        assert sem.acquire(blocking=False) is False  # still its permit
        assert any(token in t for t in live_tokens(nodes, key))
        assert sem.acquire(timeout=15) is True
        t_got = time.monotonic()
        assert t_got - t_spawn >= ttl, "granted before the dead holder's TTL ran out"
        # the acquire that found the permit expired drops it from each node it
        # runs on, and returns once a quorum granted: wait (bounded) for the last
        assert wait_until(lambda: all(token not in t for t in live_tokens(nodes, key)), 3.0), \
            live_tokens(nodes, key)
        sem.release()


def test_bad_permits_are_the_librarys_invalid_argument(client, key):
    for permits in (0, -1, distlock.PERMITS_MAX + 1, 10 ** 30):
        with pytest.raises(distlock.InvalidArgument) as e:
            client.semaphore(key, permits).acquire(blocking=False)
        assert "permits" in e.value.detail, e.value
        assert str(permits) in e.value.detail, e.value
    with pytest.raises(TypeError):
        client.semaphore(key, "3")
    with pytest.raises(TypeError):
        client.semaphore(key, True)


def test_semaphore_on_a_lock_key_and_lock_on_a_semaphore_key_are_refused(client, r, key):
    with client.lock(key, ttl=10):
        with pytest.raises(distlock.ProtocolError) as e:
            client.semaphore(key, 2).acquire(blocking=False)
        assert "holds a lock, not a semaphore" in str(e.value)
    with client.semaphore(key, 2, ttl=10):
        with pytest.raises(distlock.ProtocolError) as e:
            client.lock(key, ttl=10, shared=True).acquire(blocking=False)
        assert "semaphore" in str(e.value)
    assert r.exists(key) == 0


def test_semaphore_surface_extend_validity_repr(client, r, key):
    sem = client.semaphore(key, 2, ttl=5)
    assert sem.permits == 2 and sem.key == key and not sem.shared
    assert "permits=2" in repr(sem) and "not held" in repr(sem)
    with sem:
        assert sem.held and not sem.lost and 0 < sem.validity <= 5
        assert "held" in repr(sem)
        assert sem.extend(20) > 5
        assert r.zscore(key, sem.token) > time.time() * 1000 + 15000
    assert not sem.held and sem.validity == 0.0
    with pytest.raises(distlock.NotHeld):
        sem.release()

    @sem
    def under_permit():
        return sem.held
    assert under_permit() is True


def test_collected_semaphore_abandons_its_permit(server, r, key):
    c = distlock.Client(server.uri)
    sem = c.semaphore(key, 1, ttl=30)
    assert sem.acquire(blocking=False)
    token = sem.token
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        del sem
        gc.collect()
    assert r.zscore(key, token) is not None, "the collector released the permit"
    assert any(issubclass(w.category, ResourceWarning) and key in str(w.message) for w in seen)
    assert c.stats()["release_total"] == 0
    c.close()
    assert r.zscore(key, token) is not None
    r.delete(key)


# -- asyncio

def test_aio_bound_holds_under_contention_of_tasks(nodes, key):
    permits = 2

    async def main():
        inside, worst = [0], [0]
        async with aio.Client(node_uris(nodes)) as c:
            async def worker():
                sem = c.semaphore(key, permits, ttl=10, wait=60)
                for _ in range(4):
                    async with sem:
                        inside[0] += 1
                        worst[0] = max(worst[0], inside[0])
                        await asyncio.sleep(0.005)  # the work under the permit
                        inside[0] -= 1
            await asyncio.wait_for(asyncio.gather(*(worker() for _ in range(6))), 120)
        return worst[0]
    worst = asyncio.run(main())
    assert 1 <= worst <= permits


def test_aio_release_wakes_a_waiter_and_refusal_is_false(nodes, key):
    async def main():
        async with aio.Client(node_uris(nodes)) as c, \
                aio.Client(node_uris(nodes), retry_min=5, retry_max=5) as waiting:
            holder = c.semaphore(key, 1, ttl=30)
            assert await holder.acquire(blocking=False)
            assert await waiting.semaphore(key, 1).acquire(blocking=False) is False
            with pytest.raises(distlock.LockNotAcquired):
                async with waiting.semaphore(key, 1, wait=0):
                    pass
            waiter = waiting.semaphore(key, 1, ttl=30)
            task = asyncio.ensure_future(waiter.acquire(timeout=30))
            deadline = time.monotonic() + 10
            while subscribers(nodes, key) < 1:
                assert time.monotonic() < deadline, "the waiter never waited"
                await asyncio.sleep(0.01)
            t0 = time.monotonic()
            await holder.release()
            assert await asyncio.wait_for(task, 30) is True
            woke = time.monotonic() - t0
            assert waiter.held and waiter.permits == 1
            assert "distlock.aio.Semaphore" in repr(waiter)
            await waiter.release()
            return woke
    woke = asyncio.run(main())
    assert woke < 2.0, "woken %.3f s after the release" % woke


def test_aio_bad_permits_are_the_librarys_invalid_argument(server, key):
    async def main():
        async with aio.Client(server.uri) as c:
            with pytest.raises(distlock.InvalidArgument) as e:
                await c.semaphore(key, 0).acquire(blocking=False)
            return e.value
    e = asyncio.run(main())
    assert "permits" in e.detail


def test_aio_collected_semaphore_abandons_its_permit(server, r, key):
    async def main():
        c = aio.Client(server.uri)
        sem = c.semaphore(key, 1, ttl=30)
        assert await sem.acquire(blocking=False)
        token = sem.token
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            del sem
            gc.collect()
        assert r.zscore(key, token) is not None, "the collector released the permit"
        assert any(issubclass(w.category, ResourceWarning) for w in seen)
        await c.close()
        return token
    token = asyncio.run(main())
    assert r.zscore(key, token) is not None
    r.delete(key)



def test_aio_cancelled_waiting_acquire_leaves_no_permit(nodes, key):
    async def main():
        async with aio.Client(node_uris(nodes)) as c:
            holder = c.semaphore(key, 1, ttl=30)
            assert await holder.acquire(blocking=False)
            waiter = c.semaphore(key, 1, ttl=30)
            task = asyncio.ensure_future(waiter.acquire(timeout=30))
            deadline = time.monotonic() + 10
            while subscribers(nodes, key) < 1:
                assert time.monotonic() < deadline, "the waiter never waited"
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 10)
            assert not waiter.held
            tokens, token = live_tokens(nodes, key), holder.token
            await holder.release()
            return token, tokens
    token, tokens = asyncio.run(main())
    assert all(t <= {token} for t in tokens), tokens
