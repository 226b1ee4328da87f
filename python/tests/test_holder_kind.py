"""Client.holder() names what holds a key (``kind``, ``holders``: the
library's distlock_holder_info.kind / .holders, the names PHP's
Client::holder() uses) and Client.locked() is its quorum verdict, on one node
and on three (Redlock), blocking and asyncio."""
import asyncio

import pytest

import distlock
import distlock.aio as aio
from conftest import node_uris


@pytest.fixture
def c(nodes):
    with distlock.Client(node_uris(nodes)) as cl:
        yield cl


def test_holder_names_a_free_key_and_a_lock(c, key):
    h = c.holder(key)
    assert (h.held, h.kind, h.holders) == (False, "free", 0)
    assert c.locked(key) is False
    with c.lock(key, ttl=30) as lk:
        h = c.holder(key)
        assert (h.held, h.kind, h.holders, h.token) == (True, "lock", 0, lk.token)
        assert c.locked(key) is True
    assert c.locked(key) is False


def test_holder_counts_read_locks(c, key):
    r1, r2 = c.lock(key, ttl=30, shared=True), c.lock(key, ttl=30, shared=True)
    with r1, r2:
        h = c.holder(key)
        # read locks hold no single token: not "locked", two live readers
        assert (h.held, h.kind, h.holders, h.token) == (False, "readers", 2, None)
        assert c.locked(key) is False
    assert c.holder(key).kind == "free"


def test_holder_counts_semaphore_permits(c, key):
    s1, s2, s3 = (c.semaphore(key, 5, ttl=30) for _ in range(3))
    with s1, s2, s3:
        h = c.holder(key)
        assert (h.held, h.kind, h.holders) == (False, "semaphore", 3)
        assert c.locked(key) is False


def test_holder_names_a_value_of_another_type(c, nodes, key):
    for s in nodes:
        s.redis().hset(key, "f", "v")
    try:
        h = c.holder(key)
        assert (h.held, h.kind, h.holders, h.taken) == (False, "other", 0, len(nodes))
        assert c.locked(key) is False
    finally:
        for s in nodes:
            s.redis().delete(key)


def test_aio_locked_and_holder_kind(nodes, key):
    async def main():
        async with aio.Client(node_uris(nodes)) as ac:
            assert await ac.locked(key) is False
            async with ac.lock(key, ttl=30) as lk:
                assert await ac.locked(key) is True
                h = await ac.holder(key)
                assert (h.kind, h.token) == ("lock", lk.token)
            assert await ac.locked(key) is False
    asyncio.run(main())
