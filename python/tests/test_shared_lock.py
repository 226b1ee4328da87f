"""Client.lock(key, shared=True), read locks (blocking and asyncio), against
real redis-servers on one node and on three independent nodes: readers share
a key, a writer (a plain lock of the key) excludes them and they exclude it,
the last reader's release wakes a waiting writer, a SIGKILLed reader's lease
comes back by its TTL, the library's errors for bad combinations, and a
collected read lock abandons its lease."""
import asyncio
import gc
import signal
import threading
import time
import warnings

import pytest

import distlock
import distlock.aio as aio
from conftest import connect_every_node, node_uris, spawn_holder, subscribers, wait_until


def readers(nodes, key):
    """The reader tokens each node stores for key (a sorted set)."""
    return [set(m for m in s.redis().zrange(key, 0, -1) if m != "__write__") for s in nodes]


def test_readers_share_and_exclude_a_writer(nodes, key):
    with distlock.Client(node_uris(nodes)) as c:
        connect_every_node(c, nodes)  # the readers are checked on every node
        r1 = c.lock(key, ttl=30, shared=True)
        r2 = c.lock(key, ttl=30, shared=True)
        writer = c.lock(key, ttl=30)
        assert r1.shared and not writer.shared
        assert r1.acquire(blocking=False) and r2.acquire(blocking=False)
        assert r1.token != r2.token
        assert writer.acquire(blocking=False) is False
        # wire format: symfony/lock's, a sorted set of reader tokens
        assert wait_until(lambda: all(t == {r1.token, r2.token} for t in readers(nodes, key)), 3.0)
        assert all(s.redis().type(key) == "zset" for s in nodes)
        r1.release()
        assert writer.acquire(blocking=False) is False  # r2 still reads
        r2.release()
        assert writer.acquire(blocking=False) is True
        # a writer is a plain lock; node 0's grant may come after the quorum's,
        # behind r2's release there (until then the key is the readers' zset)
        r0 = nodes[0].redis()
        assert wait_until(lambda: r0.type(key) == "string" and r0.get(key) == writer.token, 3.0), \
            r0.type(key)
        assert r1.acquire(blocking=False) is False       # the writer excludes readers
        writer.release()
        assert r1.acquire(blocking=False) is True
        r1.release()


def test_no_reader_while_a_writer_holds_under_contention(nodes, key):
    state = {"readers": 0, "writers": 0}
    errors = []
    mu = threading.Lock()
    with distlock.Client(node_uris(nodes)) as c:
        def worker(shared):
            lk = c.lock(key, ttl=10, wait=60, shared=shared)
            try:
                for _ in range(5):
                    with lk:
                        with mu:
                            state["readers" if shared else "writers"] += 1
                            if state["writers"] > 1 or (state["writers"] and state["readers"]):
                                errors.append(dict(state))
                        time.sleep(0.005)  # the work under the lock
                        with mu:
                            state["readers" if shared else "writers"] -= 1
            except Exception as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=worker, args=(i % 3 != 0,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
    assert errors == []


def test_last_readers_release_wakes_a_waiting_writer(nodes, key):
    with distlock.Client(node_uris(nodes)) as c, \
            distlock.Client(node_uris(nodes), retry_min=5, retry_max=5) as waiting:
        reader = c.lock(key, ttl=30, shared=True)
        assert reader.acquire(blocking=False)
        writer = waiting.lock(key, ttl=30)
        got = []
        t = threading.Thread(target=lambda: got.append((writer.acquire(timeout=30),
                                                         time.monotonic())))
        t.start()
        assert wait_until(lambda: subscribers(nodes, key) >= 1, 10.0), "the writer never waited"
        # a waiting writer refuses new readers (it is not starved)
        assert wait_until(lambda: c.lock(key, ttl=5, shared=True).acquire(blocking=False)
                          is False, 5.0)
        t0 = time.monotonic()
        reader.release()
        t.join(30)
        assert got and got[0][0] is True
        assert got[0][1] - t0 < 2.0, "woken %.3f s after the release" % (got[0][1] - t0)
        writer.release()


def test_killed_readers_lease_comes_back_after_its_ttl(nodes, key):
    ttl = 2.5  # long enough that the first check comes while it is still held, under load
    uris = node_uris(nodes)
    t_spawn = time.monotonic()
    proc, token = spawn_holder(uris, ttl, "shared", key)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with distlock.Client(uris) as c:
        writer = c.lock(key, ttl=10)
        assert writer.acquire(blocking=False) is False  # the dead reader still reads
        assert writer.acquire(timeout=15) is True
        assert time.monotonic() - t_spawn >= ttl, "granted before the dead reader's TTL ran out"
        writer.release()


def test_bad_combinations_are_the_librarys_errors(client, key):
    with pytest.raises(distlock.InvalidArgument) as e:
        client.lock(key, ttl=10, shared=True, fencing=True).acquire(blocking=False)
    assert e.value.detail
    with client.semaphore(key, 2, ttl=10):
        with pytest.raises(distlock.ProtocolError) as e:
            client.lock(key, ttl=10, shared=True).acquire(blocking=False)
        assert "is a semaphore, not a lock" in str(e.value)


def test_read_lock_surface(client, r, key):
    lk = client.lock(key, ttl=5, shared=True)
    assert "shared" in repr(lk) and "not held" in repr(lk)
    with pytest.raises(distlock.NotHeld):
        lk.extend()
    with lk:
        assert lk.held and 0 < lk.validity <= 5
        assert lk.extend(20) > 5
        assert r.zscore(key, lk.token) > time.time() * 1000 + 15000
        assert r.pttl(key) > 15000
    assert not lk.held and not lk.lost
    assert r.exists(key) == 0

    @lk
    def reading():
        return lk.held
    assert reading() is True


def test_collected_read_lock_abandons_its_lease(server, r, key):
    c = distlock.Client(server.uri)
    lk = c.lock(key, ttl=30, shared=True)
    assert lk.acquire(blocking=False)
    token = lk.token
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        del lk
        gc.collect()
    assert r.zscore(key, token) is not None, "the collector released the read lock"
    assert any(issubclass(w.category, ResourceWarning) and key in str(w.message) for w in seen)
    c.close()
    assert r.zscore(key, token) is not None
    r.delete(key)


# -- asyncio

def test_aio_readers_share_writer_waits_for_them(nodes, key):
    async def main():
        async with aio.Client(node_uris(nodes)) as c, \
                aio.Client(node_uris(nodes), retry_min=5, retry_max=5) as waiting:
            r1 = c.lock(key, ttl=30, shared=True)
            r2 = c.lock(key, ttl=30, shared=True)
            assert await r1.acquire(blocking=False) and await r2.acquire(blocking=False)
            assert r1.shared and "distlock.aio.Lock" in repr(r1) and "shared" in repr(r1)
            assert await waiting.lock(key, ttl=5).acquire(blocking=False) is False
            writer = waiting.lock(key, ttl=30)
            task = asyncio.ensure_future(writer.acquire(timeout=30))
            deadline = time.monotonic() + 10
            while subscribers(nodes, key) < 1:
                assert time.monotonic() < deadline, "the writer never waited"
                await asyncio.sleep(0.01)
            await r1.release()
            assert await c.lock(key, ttl=5).acquire(blocking=False) is False  # r2 still reads
            assert not task.done()
            t0 = time.monotonic()
            await r2.release()
            assert await asyncio.wait_for(task, 30) is True
            woke = time.monotonic() - t0
            with pytest.raises(distlock.LockNotAcquired):
                async with c.lock(key, ttl=5, shared=True, wait=0):
                    pass
            await writer.release()
            return woke
    woke = asyncio.run(main())
    assert woke < 2.0, "woken %.3f s after the last reader's release" % woke


def test_aio_collected_read_lock_abandons_its_lease(server, r, key):
    async def main():
        c = aio.Client(server.uri)
        lk = c.lock(key, ttl=30, shared=True)
        assert await lk.acquire(blocking=False)
        token = lk.token
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            del lk
            gc.collect()
        assert r.zscore(key, token) is not None
        assert any(issubclass(w.category, ResourceWarning) for w in seen)
        await c.close()
        return token
    token = asyncio.run(main())
    assert r.zscore(key, token) is not None
    r.delete(key)
