"""redis-py's asyncio Lock behaviour, checked on redis.asyncio's own Lock and
on distlock.redis_py.AsyncLock by the same test body (as
test_redis_py_parity.py does for the blocking Lock), through
redis.asyncio.Redis.lock(lock_class=...)."""
import asyncio
import uuid

import pytest
import redis
import redis.asyncio
import redis.asyncio.lock
from redis.exceptions import LockError, LockNotOwnedError

import distlock
from distlock import redis_py
from conftest import subscribers, wait_until

CLASSES = {"redis-py": redis.asyncio.lock.Lock, "distlock": redis_py.AsyncLock}


@pytest.fixture(params=sorted(CLASSES))
def impl(request):
    return CLASSES[request.param]


@pytest.fixture
def name():
    return "rpa:" + uuid.uuid4().hex


def run(server, body):
    """body(ar) in a fresh event loop, ar a redis.asyncio client (bytes)."""
    async def main():
        ar = redis.asyncio.Redis(port=server.port)
        try:
            return await body(ar)
        finally:
            await ar.close()
    return asyncio.run(main())


def test_acquire_and_release(server, impl, name):
    async def body(ar):
        lock = ar.lock(name, timeout=30, lock_class=impl)
        assert await lock.acquire(blocking=False) is True
        assert isinstance(lock.local.token, bytes)
        assert await ar.get(name) == lock.local.token
        assert 20000 < await ar.pttl(name) <= 30000
        await lock.release()
        assert await ar.get(name) is None
        assert lock.local.token is None
    run(server, body)


def test_acquire_with_a_token(server, impl, name):
    async def body(ar):
        lock = ar.lock(name, timeout=30, lock_class=impl)
        assert await lock.acquire(blocking=False, token="async-token")
        assert await ar.get(name) == b"async-token"
        assert lock.local.token == b"async-token"
        await lock.release()
    run(server, body)


def test_competing_locks_locked_and_owned(server, impl, name):
    async def body(ar):
        lock1 = ar.lock(name, timeout=30, lock_class=impl)
        lock2 = ar.lock(name, timeout=30, lock_class=impl)
        assert await lock1.locked() is False
        assert await lock1.acquire(blocking=False)
        assert await lock2.acquire(blocking=False) is False
        assert await lock2.locked() is True
        assert await lock1.owned() is True
        assert await lock2.owned() is False
        await lock1.release()
        assert await lock2.locked() is False
        assert await lock1.owned() is False
    run(server, body)


def test_blocking_timeout_zero_tries_once(server, impl, name):
    async def body(ar):
        holder = ar.lock(name, timeout=30, lock_class=impl)
        assert await holder.acquire(blocking=False)
        assert await ar.lock(name, timeout=30, lock_class=impl).acquire(blocking_timeout=0) is False
        await holder.release()
    run(server, body)


def test_a_blocked_task_gets_the_lock_once_released(server, impl, name):
    async def body(ar):
        holder = ar.lock(name, timeout=30, lock_class=impl)
        assert await holder.acquire(blocking=False)
        waiter = ar.lock(name, timeout=30, sleep=0.01, blocking_timeout=30, lock_class=impl)
        task = asyncio.ensure_future(waiter.acquire())
        await holder.release()
        assert await asyncio.wait_for(task, 60) is True
        assert await ar.get(name) == waiter.local.token
        await waiter.release()
    run(server, body)


def test_context_manager_and_its_lock_error(server, impl, name):
    async def body(ar):
        async with ar.lock(name, timeout=30, blocking_timeout=0.2, lock_class=impl) as lock:
            assert await ar.get(name) == lock.local.token
        assert await ar.get(name) is None
        await ar.set(name, "bar")
        with pytest.raises(LockError, match="Unable to acquire lock within the time specified"):
            async with ar.lock(name, timeout=30, blocking_timeout=0.1, lock_class=impl):
                pass
        await ar.delete(name)
    run(server, body)


def test_unlocked_release_extend_reacquire_raise_at_the_call(server, impl, name):
    """redis-py's asyncio release()/extend()/reacquire() raise LockError when
    called, before anything is awaited."""
    async def body(ar):
        lock = ar.lock(name, timeout=30, lock_class=impl)
        with pytest.raises(LockError, match="Cannot release an unlocked lock"):
            lock.release()
        with pytest.raises(LockError, match="Cannot extend an unlocked lock"):
            lock.extend(10)
        with pytest.raises(LockError, match="Cannot reacquire an unlocked lock"):
            lock.reacquire()
        no_timeout = ar.lock(name, lock_class=impl)
        assert await no_timeout.acquire(blocking=False)
        with pytest.raises(LockError, match="Cannot extend a lock with no timeout"):
            no_timeout.extend(10)
        await no_timeout.release()
    run(server, body)


def test_not_owned_release_extend_reacquire(server, impl, name):
    async def body(ar):
        lock = ar.lock(name, timeout=30, lock_class=impl)
        assert await lock.acquire(blocking=False)
        await ar.set(name, "a")
        with pytest.raises(LockNotOwnedError):
            await lock.extend(10)
        with pytest.raises(LockNotOwnedError):
            await lock.reacquire()
        with pytest.raises(LockNotOwnedError):
            await lock.release()
        assert lock.local.token is None
        assert await ar.get(name) == b"a"
        await ar.delete(name)
    run(server, body)


def test_extend_and_reacquire(server, impl, name):
    async def body(ar):
        lock = ar.lock(name, timeout=10, lock_class=impl)
        assert await lock.acquire(blocking=False)
        assert await lock.extend(10) is True
        assert 16000 < await ar.pttl(name) <= 20000
        assert await lock.extend(60, replace_ttl=True) is True
        assert 50000 < await ar.pttl(name) <= 60000
        assert await ar.pexpire(name, 5000)
        assert await lock.reacquire() is True
        assert 8000 < await ar.pttl(name) <= 10000
        await lock.release()
    run(server, body)


def test_distlock_async_errors_are_distlock_errors(server, name):
    async def body(ar):
        lock = ar.lock(name, timeout=30, lock_class=redis_py.AsyncLock)
        with pytest.raises(distlock.Error):
            lock.release()
    run(server, body)


def test_distlock_async_waiter_wakes_on_the_release_not_after_sleep(server, name):
    async def body(ar):
        holder = ar.lock(name, timeout=60, lock_class=redis_py.AsyncLock)
        assert await holder.acquire(blocking=False)
        waiter = ar.lock(name, timeout=60, sleep=30, blocking_timeout=20,
                         lock_class=redis_py.AsyncLock)
        task = asyncio.ensure_future(waiter.acquire())
        loop = asyncio.get_running_loop()
        waited = await loop.run_in_executor(
            None, lambda: wait_until(lambda: subscribers([server], name) >= 1, 10))
        assert waited, "the waiter never waited"
        await holder.release()
        assert await asyncio.wait_for(task, 30) is True
        await waiter.release()
    run(server, body)


def test_each_event_loop_has_its_client_and_a_closed_loops_is_dropped(server, name):
    async def body(ar):
        lock = ar.lock(name, timeout=30, lock_class=redis_py.AsyncLock)
        assert await lock.acquire(blocking=False)
        await lock.release()
        return redis_py._aio_client_for(ar)

    first = run(server, body)
    second = run(server, body)  # a new loop: the first one's client is no use there
    assert first is not second
    clients = [c for (_, settings), (_, c) in redis_py._aio_clients.items()
               if settings == redis_py._settings(redis.Redis(port=server.port))]
    assert clients == [second]


def test_a_token_set_in_local_extends_and_releases_the_lock_it_names(server, impl, name):
    async def body(ar):
        first = ar.lock(name, timeout=10, lock_class=impl)
        assert await first.acquire(blocking=False)
        later = ar.lock(name, timeout=10, lock_class=impl)
        later.local.token = first.local.token
        assert await later.owned() is True
        assert await later.extend(50, replace_ttl=True)
        assert 40000 < await ar.pttl(name) <= 50000
        await later.release()
        assert await ar.get(name) is None
    run(server, body)
