"""Where distlock.redis_py.Lock deliberately differs from redis-py's Lock
(docs/redis-py.md, "Differences"): each difference as it behaves."""
import threading
import time
import uuid

import pytest
import redis
from redis.exceptions import LockError, LockNotOwnedError

import distlock
from distlock import redis_py
from conftest import subscribers, wait_until


@pytest.fixture
def rp(server):
    c = redis.Redis(port=server.port)
    yield c
    c.close()


@pytest.fixture
def name():
    return "rpd:" + uuid.uuid4().hex


def test_errors_are_redis_pys_and_distlocks(rp, name):
    lock = rp.lock(name, timeout=30, lock_class=redis_py.Lock)
    with pytest.raises(LockError) as e:
        lock.release()
    assert isinstance(e.value, distlock.Error)
    assert isinstance(e.value, redis_py.LockError)
    assert e.value.lock_name == name
    assert lock.acquire(blocking=False)
    rp.set(name, "taken")
    with pytest.raises(LockNotOwnedError) as e2:
        lock.release()
    assert isinstance(e2.value, distlock.Error)
    assert isinstance(e2.value, redis_py.LockNotOwnedError)
    assert isinstance(e2.value, redis_py.LockError)
    rp.delete(name)


def test_no_timeout_is_a_lease_renewed_while_held(rp, name, monkeypatch):
    """redis-py's key has no TTL; ours has RENEWED_LEASE seconds, renewed
    every third of it: here a 3 s lease (long enough for a loaded machine's
    renewal thread), seen renewed twice, still ours."""
    monkeypatch.setattr(redis_py, "RENEWED_LEASE", 3.0)
    lock = rp.lock(name, lock_class=redis_py.Lock)
    assert lock.acquire(blocking=False)
    first = rp.pttl(name)
    assert 0 < first <= 3000
    low = [first]

    def renewed():
        t = rp.pttl(name)
        low[0] = min(low[0], t)
        return t > low[0] + 100  # the TTL went back up: a renewal

    assert wait_until(renewed, 10)
    low[0] = rp.pttl(name)
    assert wait_until(renewed, 10)  # and again
    assert rp.get(name) == lock.local.token
    lock.release()
    assert rp.get(name) is None


def test_no_timeout_lease_is_the_documented_default(rp, name):
    assert redis_py.RENEWED_LEASE == 30.0
    lock = rp.lock(name, lock_class=redis_py.Lock)
    assert lock.acquire(blocking=False)
    assert 20000 < rp.pttl(name) <= 30000
    lock.release()


def test_a_waiter_wakes_on_the_release_not_after_sleep(server, rp, name):
    """sleep=30 with blocking_timeout=20: redis-py gives up after its first
    try (its next one would be past the deadline); ours waits for the release
    notification and gets the lock once it is released."""
    holder = rp.lock(name, timeout=60, lock_class=redis_py.Lock)
    assert holder.acquire(blocking=False)
    waiter = rp.lock(name, timeout=60, sleep=30, blocking_timeout=20, lock_class=redis_py.Lock)
    got = []
    t = threading.Thread(target=lambda: got.append(waiter.acquire()))
    t.start()
    assert wait_until(lambda: subscribers([server], name) >= 1, 10), "the waiter never waited"
    start = time.monotonic()
    holder.release()
    t.join(30)
    assert got == [True]
    assert time.monotonic() - start < 20
    rp.delete(name)


def test_blocking_timeout_is_waited_in_full(rp, name):
    holder = rp.lock(name, timeout=30, lock_class=redis_py.Lock)
    assert holder.acquire(blocking=False)
    waiter = rp.lock(name, timeout=30, blocking_timeout=0.2, lock_class=redis_py.Lock)
    start = time.monotonic()
    assert waiter.acquire() is False
    assert time.monotonic() - start >= 0.2
    holder.release()


def test_another_threads_token_is_none_and_release_is_a_lock_error(rp, name):
    """redis-py 4.3 leaves local.token unset in threads other than the one
    that made the Lock (AttributeError); ours is None there."""
    lock = rp.lock(name, timeout=30, lock_class=redis_py.Lock)
    assert lock.acquire(blocking=False)
    out = []

    def other():
        out.append(lock.local.token)
        try:
            lock.release()
        except LockError as e:
            out.append(str(e))

    t = threading.Thread(target=other)
    t.start()
    t.join(30)
    assert out == [None, "Cannot release an unlocked lock"]
    assert rp.get(name) == lock.local.token
    lock.release()


def test_additive_extend_of_a_token_set_by_hand_sets_the_ttl(rp, name):
    """redis-py adds to the key's PTTL; distlock adds to the validity this
    process counts, which a token set in local.token (no acquire here) does
    not have: the TTL becomes the time added."""
    first = rp.lock(name, timeout=10, lock_class=redis_py.Lock)
    assert first.acquire(blocking=False)
    later = rp.lock(name, timeout=10, lock_class=redis_py.Lock)
    later.local.token = first.local.token
    assert later.extend(20) is True
    assert 15000 < rp.pttl(name) <= 20000  # redis-py: about 30000
    later.release()
    assert rp.get(name) is None


def test_a_token_beyond_distlocks_limit_is_invalid_and_nothing_is_held(rp, name):
    """redis-py stores any token; distlock's are 1..TOKEN_MAX bytes: a longer
    one is its InvalidArgument (a ValueError), also a redis-py RedisError."""
    lock = rp.lock(name, timeout=30, lock_class=redis_py.Lock)
    with pytest.raises(distlock.InvalidArgument) as e:
        lock.acquire(blocking=False, token=b"t" * (distlock.TOKEN_MAX + 1))
    assert isinstance(e.value, ValueError)
    assert isinstance(e.value, redis.exceptions.RedisError)
    assert lock.local.token is None
    assert rp.get(name) is None
    assert lock.acquire(blocking=False, token=b"t" * distlock.TOKEN_MAX)
    assert rp.get(name) == b"t" * distlock.TOKEN_MAX
    lock.release()
