"""Client.lock_many() (blocking and asyncio) against real redis-servers on one
node and on three independent nodes: all keys or none, one lease (one token,
extend and release cover every key), one fence per key, no key held twice
under contention, a release wakes a waiter, a SIGKILLed holder's keys come
back by their TTL, bad key lists are the library's InvalidArgument, and a
collected MultiLock abandons its keys."""
import asyncio
import gc
import signal
import threading
import time
import warnings

import pytest

import distlock
import distlock.aio as aio
from conftest import (aconnect_every_node, connect_every_node, node_uris, spawn_holder, subscribers,
                      wait_until)


def keyset(key, n):
    return ["%s:%d" % (key, i) for i in range(n)]


def test_all_keys_or_none(nodes, key):
    a, b, cc = keyset(key, 3)
    with distlock.Client(node_uris(nodes)) as c:
        connect_every_node(c, nodes)  # the set is checked on every node
        other = c.lock(b, ttl=30)
        assert other.acquire(blocking=False)
        many = c.lock_many([a, b, cc], ttl=30)
        assert many.acquire(blocking=False) is False
        assert not many.held and many.token is None
        # nothing of the set is held: the free keys were not written (or undone)
        assert wait_until(lambda: all(s.redis().exists(a, cc) == 0 for s in nodes), 3.0)
        with pytest.raises(distlock.LockNotAcquired) as e:
            with c.lock_many([a, b, cc], ttl=30, wait=0):
                pass
        assert b in str(e.value), "the refusal does not name the held key: %s" % e.value
        other.release()
        assert many.acquire(blocking=False) is True
        # one lease: the same token on every key, each a plain lock
        assert wait_until(lambda: all(s.redis().mget(a, b, cc) == [many.token] * 3
                                      for s in nodes), 3.0)
        assert c.lock(cc, ttl=5).acquire(blocking=False) is False
        many.release()
        # the release returns once a quorum deleted the set
        assert wait_until(lambda: all(s.redis().exists(a, b, cc) == 0 for s in nodes), 3.0)


def test_one_lease_extend_and_surface(client, r, key):
    keys = keyset(key, 3)
    many = client.lock_many(keys, ttl=5)
    assert many.keys == tuple(keys) and many.key == keys[0]
    assert "not held" in repr(many) and keys[1] in repr(many)
    assert many.fences is None
    with many:
        assert many.held and 0 < many.validity <= 5 and many.fences is None
        assert many.extend(30) > 5
        assert all(r.pttl(k) > 20000 for k in keys)
    assert not many.held and not many.lost
    with pytest.raises(distlock.NotHeld):
        many.release()

    @many
    def under_all():
        return [r.get(k) for k in keys]
    tokens = under_all()
    assert len(set(tokens)) == 1 and tokens[0] is not None


def test_one_fence_per_key(nodes, key):
    keys = keyset(key, 3)
    with distlock.Client(node_uris(nodes)) as c:
        many = c.lock_many(keys, ttl=10, fencing=True)
        with many:
            first = many.fences
        assert first is not None and len(first) == 3 and all(f > 0 for f in first)
        with c.lock(keys[1], ttl=10, fencing=True) as single:
            between = single.fence  # a plain lock of one key shares its fence counter
        assert between > first[1]
        with many:
            again = many.fences
        assert again[0] > first[0] and again[1] > between and again[2] > first[2]
        assert many.fences is None  # released


def test_no_key_held_twice_under_contention_of_threads(nodes, key):
    keys = keyset(key, 4)
    holders = {k: 0 for k in keys}
    errors = []
    mu = threading.Lock()
    with distlock.Client(node_uris(nodes)) as c:
        def worker(i):
            mine = [keys[i % 4], keys[(i + 1) % 4]]  # overlapping pairs
            lk = c.lock_many(mine, ttl=10, wait=60)
            try:
                for _ in range(5):
                    with lk:
                        with mu:
                            for k in mine:
                                holders[k] += 1
                                if holders[k] > 1:
                                    errors.append("%s held twice" % k)
                        time.sleep(0.005)  # the work under the locks
                        with mu:
                            for k in mine:
                                holders[k] -= 1
            except Exception as e:
                errors.append(repr(e))
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
    assert errors == []


def test_release_wakes_a_waiter(nodes, key):
    a, b = keyset(key, 2)
    with distlock.Client(node_uris(nodes)) as c, \
            distlock.Client(node_uris(nodes), retry_min=5, retry_max=5) as waiting:
        holder = c.lock(b, ttl=30)
        assert holder.acquire(blocking=False)
        many = waiting.lock_many([a, b], ttl=30)
        got = []
        t = threading.Thread(target=lambda: got.append((many.acquire(timeout=30),
                                                         time.monotonic())))
        t.start()
        assert wait_until(lambda: subscribers(nodes, b) >= 1, 10.0), "the waiter never waited"
        # it waits holding nothing: an attempt that won both keys on a node
        # where the holder's key had not landed yet (its acquire returns at
        # a quorum) is undone, and that undo may still be on its way
        assert wait_until(lambda: all(s.redis().exists(a) == 0 for s in nodes), 5.0), \
            "the waiter holds %s" % a
        t0 = time.monotonic()
        holder.release()
        t.join(30)
        assert got and got[0][0] is True
        assert got[0][1] - t0 < 2.0, "woken %.3f s after the release" % (got[0][1] - t0)

        # and the set's release wakes a waiter of any of its keys
        single = waiting.lock(a, ttl=30)  # the slow retrier: only a wake is fast
        got.clear()
        t = threading.Thread(target=lambda: got.append((single.acquire(timeout=30),
                                                         time.monotonic())))
        t.start()
        assert wait_until(lambda: subscribers(nodes, a) >= 1, 10.0), "the waiter never waited"
        t0 = time.monotonic()
        many.release()
        t.join(30)
        assert got and got[0][0] is True
        assert got[0][1] - t0 < 2.0, "woken %.3f s after the release" % (got[0][1] - t0)
        single.release()


def test_killed_holders_keys_come_back_after_their_ttl(nodes, key):
    ttl = 2.5  # long enough that the first check comes while it is still held, under load
    keys = keyset(key, 2)
    uris = node_uris(nodes)
    t_spawn = time.monotonic()
    proc, token = spawn_holder(uris, ttl, "many", *keys)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with distlock.Client(uris) as c:
        many = c.lock_many(keys, ttl=10)
        assert many.acquire(blocking=False) is False
        assert many.acquire(timeout=15) is True
        assert time.monotonic() - t_spawn >= ttl, "granted before the dead holder's TTL ran out"
        assert many.token != token
        many.release()


def test_bad_key_lists_are_the_librarys_invalid_argument(client, key):
    cases = [([], "key"), ([key, key], "appears twice"), ([key, ""], "key"),
             (keyset(key, distlock.KEYS_MAX + 1), "key"),
             ([key, "x" * (distlock.KEY_MAX + 1)], "key")]
    for keys, text in cases:
        with pytest.raises(distlock.InvalidArgument) as e:
            client.lock_many(keys).acquire(blocking=False)
        assert text in e.value.detail, (keys[:3], e.value)
    with pytest.raises(distlock.InvalidArgument) as e:
        client.lock_many([key, "a\0b"]).acquire(blocking=False)
    assert "NUL" in str(e.value)
    for bad in ("ab", b"ab", 3, [key, 3], None):
        with pytest.raises(TypeError):
            client.lock_many(bad)


def test_collected_multilock_abandons_its_keys(server, r, key):
    keys = keyset(key, 2)
    c = distlock.Client(server.uri)
    many = c.lock_many(keys, ttl=30)
    assert many.acquire(blocking=False)
    token = many.token
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        del many
        gc.collect()
    assert r.mget(keys) == [token, token], "the collector released the keys"
    assert any(issubclass(w.category, ResourceWarning) and keys[0] in str(w.message)
               for w in seen)
    c.close()
    assert r.mget(keys) == [token, token]
    r.delete(*keys)


# -- asyncio

def test_aio_all_or_none_wake_and_fences(nodes, key):
    a, b, cc = keyset(key, 3)

    async def main():
        async with aio.Client(node_uris(nodes)) as c, \
                aio.Client(node_uris(nodes), retry_min=5, retry_max=5) as waiting:
            await aconnect_every_node(waiting, nodes)  # its set is checked on node 0
            other = c.lock(b, ttl=30)
            assert await other.acquire(blocking=False)
            many = waiting.lock_many([a, b, cc], ttl=30, fencing=True)
            assert await many.acquire(blocking=False) is False
            assert all(s.redis().exists(a, cc) == 0 for s in nodes)
            with pytest.raises(distlock.LockNotAcquired) as e:
                async with waiting.lock_many([a, b], wait=0):
                    pass
            assert b in str(e.value)
            task = asyncio.ensure_future(many.acquire(timeout=30))
            deadline = time.monotonic() + 10
            while subscribers(nodes, b) < 1:
                assert time.monotonic() < deadline, "the waiter never waited"
                await asyncio.sleep(0.01)
            t0 = time.monotonic()
            await other.release()
            assert await asyncio.wait_for(task, 30) is True
            woke = time.monotonic() - t0
            assert many.keys == (a, b, cc) and len(many.fences) == 3
            assert "distlock.aio.MultiLock" in repr(many)
            assert all(s.redis().mget(a, b, cc) == [many.token] * 3 for s in nodes[:1])
            await many.release()
            assert many.fences is None
            return woke
    woke = asyncio.run(main())
    assert woke < 2.0, "woken %.3f s after the release" % woke


def test_aio_bad_key_list_and_no_key_held_twice(nodes, key):
    keys = keyset(key, 3)

    async def main():
        async with aio.Client(node_uris(nodes)) as c:
            with pytest.raises(distlock.InvalidArgument) as e:
                await c.lock_many([keys[0], keys[0]]).acquire(blocking=False)
            assert "appears twice" in e.value.detail
            holders = {k: 0 for k in keys}
            worst = [0]

            async def worker(i):
                mine = [keys[i % 3], keys[(i + 1) % 3]]
                lk = c.lock_many(mine, ttl=10, wait=60)
                for _ in range(3):
                    async with lk:
                        for k in mine:
                            holders[k] += 1
                            worst[0] = max(worst[0], holders[k])
                        await asyncio.sleep(0.005)  # the work under the locks
                        for k in mine:
                            holders[k] -= 1
            await asyncio.wait_for(asyncio.gather(*(worker(i) for i in range(5))), 120)
            return worst[0]
    assert asyncio.run(main()) == 1


def test_aio_collected_multilock_abandons_its_keys(server, r, key):
    keys = keyset(key, 2)

    async def main():
        c = aio.Client(server.uri)
        many = c.lock_many(keys, ttl=30)
        assert await many.acquire(blocking=False)
        token = many.token
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            del many
            gc.collect()
        assert r.mget(keys) == [token, token]
        assert any(issubclass(w.category, ResourceWarning) for w in seen)
        await c.close()
        return token
    token = asyncio.run(main())
    assert r.mget(keys) == [token, token]
    r.delete(*keys)


def test_aio_cancelled_waiting_acquire_leaves_no_key(nodes, key):
    a, b = keyset(key, 2)

    async def main():
        async with aio.Client(node_uris(nodes)) as c:
            holder = c.lock(b, ttl=30)
            assert await holder.acquire(blocking=False)
            many = c.lock_many([a, b], ttl=30)
            task = asyncio.ensure_future(many.acquire(timeout=30))
            deadline = time.monotonic() + 10
            while subscribers(nodes, b) < 1:
                assert time.monotonic() < deadline, "the waiter never waited"
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 10)
            assert not many.held
            left = [s.redis().exists(a) for s in nodes]
            await holder.release()
            return left
    assert asyncio.run(main()) == [0] * len(nodes)


def test_a_semaphore_key_is_an_error_a_read_locked_key_is_held(client, r, key):
    a, b = keyset(key, 2)
    with client.semaphore(b, 2, ttl=10) as sem:
        with pytest.raises(distlock.ProtocolError) as e:
            client.lock_many([a, b], ttl=10).acquire(blocking=False)
        assert b in str(e.value), e.value
        assert r.exists(a) == 0 and r.zscore(b, sem.token) is not None
    # each key of a set is taken as a writer: read locks hold it off
    with client.lock(b, ttl=10, shared=True) as reader:
        assert client.lock_many([a, b], ttl=10).acquire(blocking=False) is False
        assert r.exists(a) == 0 and r.zscore(b, reader.token) is not None
    with client.lock_many([a, b], ttl=10) as many:
        with pytest.raises(distlock.ProtocolError) as e:
            client.semaphore(b, 2).acquire(blocking=False)
        assert "holds a lock, not a semaphore" in str(e.value)
        assert r.get(b) == many.token
