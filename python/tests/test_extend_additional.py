"""Lock.extend(additional=s) adds s seconds to the validity left (redis-py's
extend(additional_time)), blocking and asyncio, on one node and on three;
extend(ttl) still resets it; both at once is a TypeError."""
import asyncio

import pytest

import distlock
import distlock.aio as aio
from conftest import aconnect_every_node, await_until, connect_every_node, node_uris, wait_until


def pttls(nodes, key):
    return [s.redis().pttl(key) for s in nodes]


# An extend returns once a quorum extended: the last node's PEXPIRE may
# still be on its way. A check of every node's TTL waits (bounded) for it.
def ttls_settle(nodes, key, lo, hi):
    return wait_until(lambda: all(lo < p <= hi for p in pttls(nodes, key)), 3.0)


def test_extend_adds_to_the_validity_left(nodes, key):
    with distlock.Client(node_uris(nodes)) as c:
        connect_every_node(c, nodes)  # every node's TTL is checked
        with c.lock(key, ttl=10) as lk:
            v = lk.extend(additional=20)
            assert 25 < v <= 30, v          # ~10 left + 20, not 20
            assert ttls_settle(nodes, key, 25000, 30000), pttls(nodes, key)
            v = lk.extend(additional=5)
            assert 30 < v <= 35, v
            v = lk.extend(4)                 # ttl: a reset, not an addition
            assert v <= 4 and ttls_settle(nodes, key, 0, 4000), pttls(nodes, key)


def test_extend_takes_ttl_or_additional(client, key):
    with client.lock(key, ttl=10) as lk:
        with pytest.raises(TypeError, match="ttl or additional"):
            lk.extend(5, additional=5)
        with pytest.raises(distlock.InvalidArgument, match="ttl"):
            lk.extend(additional=0)
        with pytest.raises(TypeError):
            lk.extend(additional="5")
    with pytest.raises(distlock.NotHeld):
        lk.extend(additional=5)


def test_aio_extend_adds_to_the_validity_left(nodes, key):
    async def main():
        async with aio.Client(node_uris(nodes)) as c:
            await aconnect_every_node(c, nodes)  # every node's TTL is checked
            async with c.lock(key, ttl=10) as lk:
                v = await lk.extend(additional=20)
                assert 25 < v <= 30, v
                assert await await_until(lambda: all(25000 < p <= 30000 for p in pttls(nodes, key)),
                                         3.0), pttls(nodes, key)
                with pytest.raises(TypeError, match="ttl or additional"):
                    await lk.extend(5, additional=5)
                v = await lk.extend(4)
                assert v <= 4
    asyncio.run(main())
