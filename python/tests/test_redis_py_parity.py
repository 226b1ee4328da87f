"""redis-py's documented Lock behaviour, checked on redis-py's own Lock and on
distlock.redis_py.Lock by the same test body: a test passing for both is a
behaviour matched (docs/redis-py.md counts them). Real redis-server, the
redis-py of the system (Debian's python3-redis)."""
import threading
import time
import uuid

import pytest
import redis
from redis.exceptions import LockError, LockNotOwnedError

import distlock.redis_py
from conftest import wait_until

CLASSES = {"redis-py": redis.lock.Lock, "distlock": distlock.redis_py.Lock}


@pytest.fixture(params=sorted(CLASSES))
def impl(request):
    return CLASSES[request.param]


@pytest.fixture
def rp(server):
    """A redis-py client returning bytes, as redis-py's own tests use."""
    c = redis.Redis(port=server.port)
    yield c
    c.close()


@pytest.fixture
def name():
    return "rp:" + uuid.uuid4().hex


def get_lock(rp, impl, name, **kwargs):
    return rp.lock(name, lock_class=impl, **kwargs)


def test_acquire_sets_the_key_to_the_token_and_release_deletes_it(rp, impl, name):
    lock = get_lock(rp, impl, name, timeout=30)
    assert lock.acquire(blocking=False) is True
    assert isinstance(lock.local.token, bytes)
    assert rp.get(name) == lock.local.token
    lock.release()
    assert rp.get(name) is None
    assert lock.local.token is None


def test_acquire_with_a_token_holds_the_key_with_it_as_bytes(rp, impl, name):
    lock = get_lock(rp, impl, name, timeout=30)
    assert lock.acquire(blocking=False, token="test-token")
    assert rp.get(name) == b"test-token"
    assert lock.local.token == b"test-token"
    lock.release()
    assert rp.get(name) is None


def test_acquire_with_the_token_already_holding_the_key_is_refused(rp, impl, name):
    first = get_lock(rp, impl, name, timeout=30)
    assert first.acquire(blocking=False, token=b"same")
    assert rp.get(name) == b"same"
    again = get_lock(rp, impl, name, timeout=30)
    assert again.acquire(blocking=False, token=b"same") is False  # SET NX: held is held
    assert again.local.token is None
    first.release()
    assert again.acquire(blocking=False, token=b"same") is True
    assert rp.get(name) == b"same"
    again.release()


def test_competing_locks_exclude_each_other(rp, impl, name):
    lock1 = get_lock(rp, impl, name, timeout=30)
    lock2 = get_lock(rp, impl, name, timeout=30)
    assert lock1.acquire(blocking=False)
    assert not lock2.acquire(blocking=False)
    lock1.release()
    assert lock2.acquire(blocking=False)
    assert not lock1.acquire(blocking=False)
    lock2.release()


def test_locked_is_true_for_anyones_lock(rp, impl, name):
    lock = get_lock(rp, impl, name, timeout=30)
    other = get_lock(rp, impl, name, timeout=30)
    assert lock.locked() is False
    assert other.acquire(blocking=False)
    assert lock.locked() is True
    assert other.locked() is True
    other.release()
    assert lock.locked() is False


def test_owned_compares_the_tokens(rp, impl, name):
    lock = get_lock(rp, impl, name, timeout=30)
    other = get_lock(rp, impl, name, timeout=30)
    assert lock.owned() is False
    assert lock.acquire(blocking=False)
    assert lock.owned() is True
    assert other.owned() is False
    rp.set(name, b"someone-else")
    assert lock.owned() is False
    rp.delete(name)


def test_owned_with_a_decoding_client(server, impl, name):
    rd = redis.Redis(port=server.port, decode_responses=True)
    lock = rd.lock(name, lock_class=impl, timeout=30)
    assert lock.acquire(blocking=False)
    assert isinstance(lock.local.token, bytes)
    assert lock.owned() is True
    lock.release()
    assert lock.owned() is False
    rd.close()


def test_timeout_is_the_keys_ttl(rp, impl, name):
    lock = get_lock(rp, impl, name, timeout=10)
    assert lock.acquire(blocking=False)
    assert 8000 < rp.pttl(name) <= 10000
    lock.release()


def test_float_timeout(rp, impl, name):
    lock = get_lock(rp, impl, name, timeout=9.5)
    assert lock.acquire(blocking=False)
    assert 8000 < rp.pttl(name) <= 9500
    lock.release()


def test_blocking_timeout_gives_up_after_waiting_that_long(rp, impl, name):
    holder = get_lock(rp, impl, name, timeout=30)
    assert holder.acquire(blocking=False)
    waiter = get_lock(rp, impl, name, timeout=30, blocking_timeout=0.2)
    start = time.monotonic()
    assert waiter.acquire() is False
    # redis-py gives up when its next try (``sleep`` later) would be past
    # the deadline, here after one sleep of 0.1 s; distlock waits it all
    assert time.monotonic() - start >= 0.1
    assert rp.get(name) == holder.local.token
    holder.release()


def test_blocking_timeout_zero_tries_once(rp, impl, name):
    holder = get_lock(rp, impl, name, timeout=30)
    assert holder.acquire(blocking=False)
    assert get_lock(rp, impl, name, timeout=30).acquire(blocking_timeout=0) is False
    holder.release()
    assert get_lock(rp, impl, name, timeout=30).acquire(blocking_timeout=0) is True
    rp.delete(name)


def test_blocking_false_in_the_constructor_and_overridden_by_acquire(rp, impl, name):
    holder = get_lock(rp, impl, name, timeout=30)
    assert holder.acquire(blocking=False)
    nonblocking = get_lock(rp, impl, name, timeout=30, blocking=False)
    assert nonblocking.acquire() is False
    blocking = get_lock(rp, impl, name, timeout=30, blocking_timeout=60)
    assert blocking.acquire(blocking=False) is False
    holder.release()


def test_blocking_acquire_gets_the_lock_once_released(rp, impl, name):
    holder = get_lock(rp, impl, name, timeout=30)
    assert holder.acquire(blocking=False)
    got = []
    waiter = get_lock(rp, impl, name, timeout=30, sleep=0.01, blocking_timeout=30)
    t = threading.Thread(target=lambda: got.append(waiter.acquire()))
    t.start()
    holder.release()
    t.join(60)
    assert got == [True]
    assert rp.get(name) is not None
    rp.delete(name)


def test_context_manager_acquires_and_releases(rp, impl, name):
    with get_lock(rp, impl, name, timeout=30, blocking_timeout=0.2) as lock:
        assert rp.get(name) == lock.local.token
    assert rp.get(name) is None


def test_context_manager_raises_lock_error_when_not_acquired(rp, impl, name):
    rp.set(name, "bar")
    with pytest.raises(LockError, match="Unable to acquire lock within the time specified"):
        with get_lock(rp, impl, name, timeout=30, blocking_timeout=0.1):
            pass
    assert rp.get(name) == b"bar"
    rp.delete(name)


def test_releasing_an_unlocked_lock_raises_lock_error(rp, impl, name):
    with pytest.raises(LockError, match="Cannot release an unlocked lock"):
        get_lock(rp, impl, name, timeout=30).release()


def test_releasing_a_lock_taken_over_raises_not_owned_and_clears_the_token(rp, impl, name):
    lock = get_lock(rp, impl, name, timeout=30)
    assert lock.acquire(blocking=False)
    rp.set(name, "a")
    with pytest.raises(LockNotOwnedError, match="Cannot release a lock that's no longer owned"):
        lock.release()
    assert lock.local.token is None
    assert rp.get(name) == b"a"  # the other owner's key is untouched
    rp.delete(name)


def test_releasing_an_expired_lock_raises_not_owned(rp, impl, name):
    lock = get_lock(rp, impl, name, timeout=0.05)
    assert lock.acquire(blocking=False)
    assert wait_until(lambda: rp.exists(name) == 0, 10)
    with pytest.raises(LockNotOwnedError):
        lock.release()


def test_extend_adds_to_the_ttl(rp, impl, name):
    lock = get_lock(rp, impl, name, timeout=10)
    assert lock.acquire(blocking=False)
    assert 8000 < rp.pttl(name) <= 10000
    assert lock.extend(10) is True
    assert 16000 < rp.pttl(name) <= 20000
    lock.release()


def test_extend_with_replace_ttl_sets_the_ttl(rp, impl, name):
    lock = get_lock(rp, impl, name, timeout=10)
    assert lock.acquire(blocking=False)
    assert lock.extend(60, replace_ttl=True) is True
    assert 50000 < rp.pttl(name) <= 60000
    lock.release()


def test_extending_an_unlocked_lock_raises_lock_error(rp, impl, name):
    with pytest.raises(LockError, match="Cannot extend an unlocked lock"):
        get_lock(rp, impl, name, timeout=10).extend(10)


def test_extending_a_lock_without_timeout_raises_lock_error(rp, impl, name):
    lock = get_lock(rp, impl, name)
    assert lock.acquire(blocking=False)
    with pytest.raises(LockError, match="Cannot extend a lock with no timeout"):
        lock.extend(10)
    lock.release()


def test_extending_a_lock_taken_over_raises_not_owned(rp, impl, name):
    lock = get_lock(rp, impl, name, timeout=10)
    assert lock.acquire(blocking=False)
    rp.set(name, "a")
    with pytest.raises(LockNotOwnedError, match="no longer owned"):
        lock.extend(10)
    assert rp.get(name) == b"a"
    rp.delete(name)


def test_reacquire_resets_the_ttl_to_the_timeout(rp, impl, name):
    lock = get_lock(rp, impl, name, timeout=10)
    assert lock.acquire(blocking=False)
    assert rp.pexpire(name, 5000)
    assert rp.pttl(name) <= 5000
    assert lock.reacquire() is True
    assert 8000 < rp.pttl(name) <= 10000
    lock.release()


def test_reacquiring_an_unlocked_lock_raises_lock_error(rp, impl, name):
    with pytest.raises(LockError, match="Cannot reacquire an unlocked lock"):
        get_lock(rp, impl, name, timeout=10).reacquire()


def test_reacquiring_a_lock_without_timeout_raises_lock_error(rp, impl, name):
    lock = get_lock(rp, impl, name)
    assert lock.acquire(blocking=False)
    with pytest.raises(LockError, match="Cannot reacquire a lock with no timeout"):
        lock.reacquire()
    lock.release()


def test_reacquiring_a_lock_taken_over_raises_not_owned(rp, impl, name):
    lock = get_lock(rp, impl, name, timeout=10)
    assert lock.acquire(blocking=False)
    rp.set(name, "a")
    with pytest.raises(LockNotOwnedError, match="no longer owned"):
        lock.reacquire()
    rp.delete(name)


def _in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(60)
    return out[0]


def test_thread_local_token_is_not_seen_by_another_thread(rp, impl, name):
    lock = get_lock(rp, impl, name, timeout=30)
    assert lock.acquire(blocking=False)

    def other_thread():
        try:
            lock.release()
        except (LockError, AttributeError) as e:  # redis-py 4.3: no token attribute there
            return type(e)
        return "released"

    assert _in_thread(other_thread) != "released"
    assert rp.get(name) == lock.local.token
    lock.release()


def test_without_thread_local_another_thread_releases_it(rp, impl, name):
    lock = get_lock(rp, impl, name, timeout=30, thread_local=False)
    assert lock.acquire(blocking=False)
    _in_thread(lock.release)
    assert rp.get(name) is None
    assert lock.local.token is None


def test_a_token_set_in_local_releases_the_lock_it_names(rp, impl, name):
    """A token handed over (another process, a later request): setting
    local.token on a fresh Lock makes release() act for its owner."""
    first = get_lock(rp, impl, name, timeout=30)
    assert first.acquire(blocking=False)
    later = get_lock(rp, impl, name, timeout=30)
    later.local.token = first.local.token
    assert later.owned() is True
    later.release()
    assert rp.get(name) is None


def test_a_token_set_in_local_extends_the_lock_it_names(rp, impl, name):
    first = get_lock(rp, impl, name, timeout=10)
    assert first.acquire(blocking=False)
    later = get_lock(rp, impl, name, timeout=10)
    later.local.token = first.local.token
    assert later.extend(50, replace_ttl=True)
    assert 40000 < rp.pttl(name) <= 50000
    later.release()
    assert rp.get(name) is None


def test_bytes_name(rp, impl, name):
    lock = get_lock(rp, impl, name.encode(), timeout=30)
    assert lock.acquire(blocking=False)
    assert rp.get(name) == lock.local.token
    lock.release()
    assert rp.get(name) is None


def test_lock_class_argument_builds_that_class_with_the_arguments(rp, impl, name):
    lock = rp.lock(name, timeout=7, sleep=0.5, blocking=False, blocking_timeout=3,
                   lock_class=impl, thread_local=False)
    assert type(lock) is impl
    assert (lock.redis, lock.name, lock.timeout, lock.sleep, lock.blocking,
            lock.blocking_timeout, lock.thread_local) == (rp, name, 7, 0.5, False, 3, False)


def test_an_unreachable_server_is_redis_pys_connection_error(impl, name):
    import socket
    with socket.socket() as s:  # a port nobody listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        down = redis.Redis(port=s.getsockname()[1])
        with pytest.raises(redis.exceptions.ConnectionError):
            down.lock(name, timeout=30, lock_class=impl).acquire(blocking=False)
        with pytest.raises(redis.exceptions.RedisError):
            down.lock(name, timeout=30, lock_class=impl).locked()


def test_a_collected_lock_object_leaves_its_key_to_its_ttl(rp, impl, name):
    import gc
    import warnings
    lock = get_lock(rp, impl, name, timeout=30)
    assert lock.acquire(blocking=False)
    token = lock.local.token
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # distlock names the key in one
        del lock
        gc.collect()
    assert rp.get(name) == token
    assert 0 < rp.pttl(name) <= 30000
    rp.delete(name)
