"""client.lock(key, reentrant=True) in the blocking API: the thread that
holds the key through this client acquires it again, counted (each acquire
needs its release; only the last one deletes the key; a nested acquire
refreshes the TTL), across the Lock objects of the client, as the asyncio
client does per task. Other threads wait, and cannot release it. One node
and three (Redlock)."""
import threading

import pytest

import distlock
from conftest import connect_every_node, node_uris, wait_until


@pytest.fixture
def c(nodes):
    with distlock.Client(node_uris(nodes)) as cl:
        connect_every_node(cl, nodes)  # the tests check every node
        yield cl


def on_nodes(nodes, key):
    return [s.redis().get(key) for s in nodes]


# An acquire returns once a quorum granted, a release once a quorum deleted:
# the last node's write may still be on its way. A check of every node waits
# (bounded) for it.
def settles(nodes, key, want):
    return wait_until(lambda: on_nodes(nodes, key) == want, 3.0)


def in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(_call(fn)))
    t.start()
    t.join()
    return out[0]


def _call(fn):
    try:
        return fn()
    except Exception as e:  # handed back to the test's thread
        return e


def test_owner_thread_acquires_again_counted(c, nodes, key):
    lk = c.lock(key, ttl=10, reentrant=True)
    assert lk.acquire(blocking=False)
    tok = lk.token
    lk.extend(1)
    assert lk.acquire(blocking=False)          # again, same thread: counted
    assert lk.token == tok
    assert wait_until(lambda: all(s.redis().pttl(key) > 5000 for s in nodes), 3.0), \
        [s.redis().pttl(key) for s in nodes]  # refreshed to 10 s
    with distlock.Client(node_uris(nodes)) as other:
        assert not other.lock(key, ttl=10).acquire(blocking=False)
    lk.release()                               # the inner one: still held
    assert lk.held and on_nodes(nodes, key) == [tok] * len(nodes)
    lk.release()                               # the outer one: deleted
    assert not lk.held and settles(nodes, key, [None] * len(nodes)), on_nodes(nodes, key)
    with pytest.raises(distlock.NotHeld):
        lk.release()


def test_nested_with_blocks(c, nodes, key):
    lk = c.lock(key, ttl=10, reentrant=True)
    with lk:
        tok = lk.token
        with lk:
            assert lk.token == tok
        assert settles(nodes, key, [tok] * len(nodes)), on_nodes(nodes, key)
    assert settles(nodes, key, [None] * len(nodes)), on_nodes(nodes, key)


def test_one_thread_counts_across_lock_objects(c, nodes, key):
    a, b = c.lock(key, ttl=10, reentrant=True), c.lock(key, ttl=10, reentrant=True)
    assert a.acquire(blocking=False) and b.acquire(blocking=False)
    assert a.token == b.token
    a.release()
    assert settles(nodes, key, [b.token] * len(nodes)), on_nodes(nodes, key)
    b.release()
    assert settles(nodes, key, [None] * len(nodes)), on_nodes(nodes, key)


def test_another_thread_neither_acquires_nor_releases(c, nodes, key):
    lk = c.lock(key, ttl=10, reentrant=True)
    assert lk.acquire(blocking=False)
    tok = lk.token
    # the same object from another thread: queued behind the owner
    assert in_thread(lambda: lk.acquire(blocking=False)) is False
    # another object of the client, another thread: another owner
    assert in_thread(lambda: c.lock(key, ttl=10, reentrant=True).acquire(blocking=False)) is False
    e = in_thread(lk.release)
    assert isinstance(e, distlock.NotHeld) and "owner thread" in str(e)
    assert lk.held and settles(nodes, key, [tok] * len(nodes)), on_nodes(nodes, key)
    lk.release()
    assert settles(nodes, key, [None] * len(nodes)), on_nodes(nodes, key)
    # free again: another thread takes it
    assert in_thread(lambda: lk.acquire(blocking=False)) is True
    assert lk.token is not None and lk.token != tok


def test_not_reentrant_unless_asked(c, key):
    lk = c.lock(key, ttl=10)
    with lk:
        assert not lk.acquire(blocking=False)   # as threading.Lock: waits for itself
        assert not c.lock(key, ttl=10).acquire(blocking=False)
