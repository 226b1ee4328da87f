"""Wire compatibility with redis-py's Lock on the same key: each excludes the other."""
import redis


def test_redis_py_lock_excludes_us_and_we_exclude_it(server, client, key):
    rp = redis.Redis(port=server.port)
    theirs = rp.lock(key, timeout=30)
    ours = client.lock(key, ttl=30)

    assert theirs.acquire(blocking=False)
    assert ours.acquire(blocking=False) is False
    theirs.release()

    assert ours.acquire(blocking=False) is True
    assert rp.lock(key, timeout=30).acquire(blocking=False) is False
    assert rp.get(key).decode() == ours.token  # the same plain string key
    ours.release()

    again = rp.lock(key, timeout=30)
    assert again.acquire(blocking=False)
    again.release()


def test_redis_py_cannot_release_ours_and_we_cannot_release_theirs(server, client, r, key):
    rp = redis.Redis(port=server.port)
    with client.lock(key, ttl=30) as ours:
        stranger = rp.lock(key, timeout=30)
        stranger.local.token = b"not-the-owner"
        try:
            stranger.release()
            raised = False
        except redis.exceptions.LockError:
            raised = True
        assert raised
        assert r.get(key) == ours.token
    theirs = rp.lock(key, timeout=30)
    assert theirs.acquire(blocking=False)
    assert client.release_token(key, "not-the-owner") is False
    assert r.get(key) == theirs.local.token.decode()
    theirs.release()
