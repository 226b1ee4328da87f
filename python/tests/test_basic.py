"""Lock objects: context manager, decorator, threading.Lock-like acquire."""
import threading

import pytest

import distlock


def test_context_manager_holds_and_releases(client, r, key):
    lk = client.lock(key, ttl=10)
    with lk as held:
        assert held is lk
        assert lk.held
        assert r.get(key) == lk.token  # plain string key holding the token
        assert len(lk.token) == 32 and int(lk.token, 16) >= 0
        assert 0 < r.pttl(key) <= 10000
        assert 0 < lk.validity <= 10
    assert r.get(key) is None
    assert not lk.held and lk.token is None and lk.validity == 0.0 and not lk.lost


def test_with_raises_lock_not_acquired_when_held(client, key):
    with client.lock(key, ttl=10):
        other = client.lock(key, ttl=10, wait=0)
        with pytest.raises(distlock.LockNotAcquired) as ei:
            with other:
                pytest.fail("body must not run")
        assert key in str(ei.value)
        assert isinstance(ei.value, distlock.Error)


def test_body_exception_propagates_and_lock_is_released(client, r, key):
    with pytest.raises(KeyError):
        with client.lock(key, ttl=10):
            raise KeyError("boom")
    assert r.get(key) is None


def test_decorator(client, r, key):
    seen = []

    @client.lock(key, ttl=10)
    def job(x):
        seen.append(r.get(key))
        return x * 2

    assert job(21) == 42
    assert job(1) == 2  # reusable: acquired and released on every call
    assert len(seen) == 2 and all(t is not None and len(t) == 32 for t in seen)
    assert seen[0] != seen[1]  # a fresh token per ownership
    assert r.get(key) is None


def test_acquire_nonblocking_returns_false_on_contention(client, key):
    a = client.lock(key, ttl=10)
    b = client.lock(key, ttl=10)
    assert a.acquire(blocking=False) is True
    assert b.acquire(blocking=False) is False
    assert b.token is None
    a.release()
    assert b.acquire(blocking=False) is True
    b.release()


def test_nonblocking_with_timeout_is_rejected(client, key):
    with pytest.raises(ValueError):
        client.lock(key).acquire(blocking=False, timeout=1)


def test_release_when_not_held_raises_not_held(client, key):
    lk = client.lock(key, ttl=10)
    with pytest.raises(distlock.NotHeld):
        lk.release()
    assert lk.acquire(blocking=False)
    lk.release()
    with pytest.raises(RuntimeError):  # like threading.Lock
        lk.release()
    with pytest.raises(distlock.NotHeld):
        lk.extend()


def test_extend_resets_ttl(client, r, key):
    with client.lock(key, ttl=1) as lk:
        v = lk.extend(20)
        assert 15 < v <= 20
        assert r.pttl(key) > 15000
        assert lk.validity > 15


def test_release_after_key_taken_over_raises_lock_lost(client, r, key):
    lk = client.lock(key, ttl=10)
    assert lk.acquire(blocking=False)
    r.set(key, "someone-else")  # our key expired and another owner took it
    with pytest.raises(distlock.LockLost):
        lk.release()
    assert r.get(key) == "someone-else"  # another owner's key is never deleted
    assert lk.lost
    r.delete(key)


def test_close_releases_held_locks(server, r, key):
    c = distlock.Client(server.uri)
    lk = c.lock(key, ttl=30)
    assert lk.acquire(blocking=False)
    c.close()
    assert r.get(key) is None
    with pytest.raises(distlock.ClosedError):
        lk.acquire(blocking=False)
    with pytest.raises(distlock.ClosedError):
        lk.release()
    c.close()  # idempotent


def test_threads_sharing_one_lock_object_exclude_each_other(client, key):
    lk = client.lock(key, ttl=10)
    inside = []
    overlap = []
    done = []

    def worker():
        for _ in range(20):
            with lk:
                inside.append(1)
                if len(inside) > 1:
                    overlap.append(1)
                inside.pop()
        done.append(1)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(done) == 4
    assert overlap == []


def test_token_pair_and_admin(client, r, key):
    tok = client.generate_token()
    assert len(tok) == 32 and tok != client.generate_token()
    v = client.acquire_token(key, tok, ttl=10)
    assert v is not None and 0 < v <= 10
    assert r.get(key) == tok
    assert client.acquire_token(key, "other-token", ttl=10) is None
    # idempotent retry with the same token succeeds unless strict
    assert client.acquire_token(key, tok, ttl=10) is not None
    assert client.acquire_token(key, tok, ttl=10, strict=True) is None
    held = client.inspect(key)
    assert held is not None and held[0] == tok and 0 < held[1] <= 10
    assert 15 < client.extend_token(key, tok, 20) <= 20
    assert client.release_token(key, "other-token") is False
    assert r.get(key) == tok
    assert client.release_token(key, tok) is True
    assert client.inspect(key) is None
    r.set(key, "foreign")
    assert client.force_release(key) == 1
    assert r.get(key) is None


def test_client_info(server, client):
    assert client.node_count == 1
    assert client.quorum == 1
    assert client.nodes == [server.uri] or client.nodes[0].startswith(server.uri)
    assert distlock.__version__.count(".") == 2
