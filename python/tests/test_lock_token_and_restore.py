"""client.lock(key, token=T) takes the key with the caller's token (strict,
SET NX: a key already holding T is held), and client.restore(key, T) gives
a Lock for an ownership taken elsewhere: its release compare-and-deletes T,
its extend resets the TTL where T still holds the key, nothing is sent
before. Blocking and asyncio, on one node and on three (Redlock). The
library's rules (token bytes, which flags take a token) raise its errors."""
import asyncio

import pytest

import distlock
import distlock.aio as aio
from conftest import aconnect_every_node, await_until, connect_every_node, node_uris, wait_until


@pytest.fixture
def c(nodes):
    with distlock.Client(node_uris(nodes)) as cl:
        connect_every_node(cl, nodes)  # the tests check every node
        yield cl


def on_nodes(nodes, key):
    return [s.redis().get(key) for s in nodes]


# A grant returns once a quorum granted, a release or an extend once a
# quorum did it: the last node's write may still be on its way. A check of
# every node waits (bounded) for it.
def settles(nodes, key, want):
    return wait_until(lambda: on_nodes(nodes, key) == want, 3.0)


async def asettles(nodes, key, want):
    return await await_until(lambda: on_nodes(nodes, key) == want, 3.0)


def test_lock_sets_the_callers_token(c, nodes, key):
    lk = c.lock(key, ttl=10, token="owner-1")
    assert lk.acquire(blocking=False)
    assert lk.token == "owner-1" and lk.validity > 5
    assert settles(nodes, key, ["owner-1"] * len(nodes)), on_nodes(nodes, key)
    # strict: the same token does not take a key it already holds
    assert not c.lock(key, ttl=10, token="owner-1").acquire(blocking=False)
    assert not c.lock(key, ttl=10, token="owner-2").acquire(blocking=False)
    lk.release()
    assert settles(nodes, key, [None] * len(nodes)), on_nodes(nodes, key)
    with c.lock(key, ttl=10, token=b"bytes-token") as lk2:  # bytes too; again after release
        assert settles(nodes, key, ["bytes-token"] * len(nodes)), on_nodes(nodes, key)
        assert lk2.token == "bytes-token"


def test_lock_token_waits_for_the_key(c, nodes, key):
    with distlock.Client(node_uris(nodes)) as other:
        held = other.lock(key, ttl=0.3)
        assert held.acquire(blocking=False)
        # waits until the other owner's lease runs out, then sets our token
        lk = c.lock(key, ttl=10, wait=10, token="waiting-owner")
        assert lk.acquire()
        # on a quorum, what a grant promises: the other owner's key may
        # outlive the quorum's on a node its grant reached late (its TTL runs
        # from there), and that node then refuses ours
        assert on_nodes(nodes, key).count("waiting-owner") >= len(nodes) // 2 + 1, \
            on_nodes(nodes, key)
        lk.release()


def test_lock_token_rules_are_the_librarys(c, key):
    with pytest.raises(TypeError, match="token"):
        c.lock(key, ttl=10, token=42)
    for bad in ("", "a\0b", "t" * (distlock.TOKEN_MAX + 1)):
        with pytest.raises(distlock.InvalidArgument):
            c.lock(key, ttl=10, token=bad).acquire(blocking=False)
    with pytest.raises(distlock.InvalidArgument, match="SHARED"):
        c.lock(key, ttl=10, token="t", shared=True).acquire(blocking=False)
    with pytest.raises(distlock.InvalidArgument, match="REENTRANT"):
        c.lock(key, ttl=10, token="t", reentrant=True).acquire(blocking=False)


def test_restore_releases_an_ownership_taken_elsewhere(c, nodes, key):
    with distlock.Client(node_uris(nodes)) as elsewhere:
        connect_every_node(elsewhere, nodes)
        tok = elsewhere.generate_token()
        assert elsewhere.acquire_token(key, tok, ttl=10) is not None
    lk = c.restore(key, tok)
    assert lk.token == tok and lk.key == key
    assert lk.validity == 0 and not lk.held          # nothing checked yet
    assert settles(nodes, key, [tok] * len(nodes)), on_nodes(nodes, key)
    lk.release()                                     # sent although validity is 0
    assert settles(nodes, key, [None] * len(nodes)), on_nodes(nodes, key)
    with pytest.raises(distlock.NotHeld):
        lk.release()


def test_restore_extend_then_release(c, nodes, key):
    with c.lock(key, ttl=10, token="from-a-request") as _:
        pass
    assert c.lock(key, ttl=2, token="from-a-request").acquire(blocking=False)  # dropped: abandoned
    lk = c.restore(key, "from-a-request", ttl=20)
    v = lk.extend()                                  # the restore's ttl
    assert 15 < v <= 20 and lk.held
    assert wait_until(lambda: all(15000 < s.redis().pttl(key) <= 20000 for s in nodes), 3.0), \
        [s.redis().pttl(key) for s in nodes]
    lk.release()
    assert settles(nodes, key, [None] * len(nodes)), on_nodes(nodes, key)


def test_restore_of_a_token_that_does_not_hold_the_key(c, nodes, key):
    for s in nodes:
        s.redis().set(key, "someone-else", px=10000)
    lk = c.restore(key, "not-the-holder")
    with pytest.raises(distlock.LockLost):
        lk.extend(5)
    lk2 = c.restore(key, "not-the-holder")
    with pytest.raises(distlock.LockLost):
        lk2.release()
    assert on_nodes(nodes, key) == ["someone-else"] * len(nodes)   # never touched
    for bad in ("", "t" * (distlock.TOKEN_MAX + 1)):
        with pytest.raises(distlock.InvalidArgument):
            c.restore(key, bad)
    with pytest.raises(TypeError, match="token"):
        c.restore(key, None)
    for s in nodes:
        s.redis().delete(key)


def test_aio_token_and_restore(nodes, key):
    async def main():
        async with aio.Client(node_uris(nodes)) as ac:
            await aconnect_every_node(ac, nodes)
            lk = ac.lock(key, ttl=10, token="aio-owner")
            assert await lk.acquire(blocking=False)
            assert lk.token == "aio-owner"
            assert await asettles(nodes, key, ["aio-owner"] * len(nodes)), on_nodes(nodes, key)
            assert not await ac.lock(key, ttl=10, token="aio-owner").acquire(blocking=False)
            r = ac.restore(key, "aio-owner", ttl=20)         # no I/O: not awaited
            assert r.validity == 0
            v = await r.extend()
            assert 15 < v <= 20
            # another task queues on the restored object until it is released
            waiter = asyncio.ensure_future(r.acquire(timeout=10))
            await asyncio.sleep(0)
            assert not waiter.done()
            await r.release()                                # deletes "aio-owner"
            assert await waiter                              # then takes it afresh
            assert r.token is not None and r.token != "aio-owner"
            # on a quorum, what a grant promises: the release returned once a
            # quorum deleted, and the new grant's request may reach the last
            # node before the release's does, and be refused there
            assert await await_until(
                lambda: on_nodes(nodes, key).count(r.token) >= len(nodes) // 2 + 1, 3.0), \
                on_nodes(nodes, key)
            await r.release()
            assert await asettles(nodes, key, [None] * len(nodes)), on_nodes(nodes, key)
            with pytest.raises(distlock.LockLost):           # lk's token is gone
                await lk.release()
    asyncio.run(main())
