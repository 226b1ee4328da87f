"""Inputs redis-py's Lock takes, and what it does with them, that
docs/redis-py.md neither lists as a difference nor matches: each body runs
on redis-py's own Lock and on distlock.redis_py.Lock against a real
redis-server (as test_redis_py_parity.py does); "what differs" is a closed
list there, so each of these should match or be listed."""
import math
import uuid

import pytest
import redis
from redis.exceptions import LockError

import distlock.redis_py

CLASSES = {"redis-py": redis.lock.Lock, "distlock": distlock.redis_py.Lock}
USER, PASS = "rpyinputs", "rpy-inputs-pw"


@pytest.fixture(params=sorted(CLASSES))
def impl(request):
    return CLASSES[request.param]


@pytest.fixture
def rp(server):
    c = redis.Redis(port=server.port)
    yield c
    c.close()


@pytest.fixture
def name():
    return "rpi:" + uuid.uuid4().hex


def test_an_infinite_blocking_timeout_waits_without_limit(rp, impl, name):
    lock = rp.lock(name, timeout=30, lock_class=impl)
    assert lock.acquire(blocking_timeout=math.inf) is True
    assert rp.get(name) == lock.local.token
    lock.release()


def test_an_infinite_blocking_timeout_in_the_constructor(rp, impl, name):
    lock = rp.lock(name, timeout=30, blocking_timeout=float("inf"), lock_class=impl)
    with lock:
        assert rp.get(name) == lock.local.token
    assert rp.get(name) is None


def test_an_int_name_locks_the_key_of_its_digits(rp, impl):
    n = int(uuid.uuid4().int % 10**12)
    lock = rp.lock(n, timeout=30, lock_class=impl)
    assert lock.acquire(blocking=False)
    assert rp.get(str(n)) == lock.local.token
    lock.release()
    assert rp.get(str(n)) is None


def test_a_key_of_another_type_is_not_acquired_without_blocking(rp, impl, name):
    """SET NX finds the key taken whatever its type: False, and the value stays."""
    rp.rpush(name, "job")
    assert rp.lock(name, timeout=30, lock_class=impl).acquire(blocking=False) is False
    assert rp.lrange(name, 0, -1) == [b"job"]


@pytest.fixture
def acl_user(server):
    admin = redis.Redis(port=server.port)
    admin.execute_command("ACL", "SETUSER", USER, "reset", "on", ">" + PASS, "~*", "&*", "+@all")
    yield admin
    admin.execute_command("ACL", "DELUSER", USER)


def test_a_bytes_password_of_the_client_logs_in(server, acl_user, impl, name):
    ra = redis.Redis(port=server.port, username=USER, password=PASS.encode())
    lock = ra.lock(name, timeout=30, lock_class=impl)
    assert lock.acquire(blocking=False)
    assert acl_user.get(name) == lock.local.token
    lock.release()


def test_a_zero_timeout_lock_is_one_without_timeout_for_extend_and_reacquire(rp, name):
    """docs/redis-py.md: timeout=None "(and 0)" is the renewed lease, and
    extend()/reacquire() of a lock without timeout raise LockError. With 0,
    extend() succeeds and reacquire() raises InvalidArgument, which an
    `except redis.exceptions.LockError` clause misses."""
    lock = rp.lock(name, timeout=0, lock_class=distlock.redis_py.Lock)
    assert lock.acquire(blocking=False)
    try:
        with pytest.raises(LockError, match="no timeout"):
            lock.reacquire()
        with pytest.raises(LockError, match="no timeout"):
            lock.extend(5)
    finally:
        lock.release()


@pytest.mark.parametrize("seconds", [0, -1], ids=["zero", "negative"])
def test_extend_by_zero_or_a_negative_time_moves_the_ttl_by_it(rp, impl, name, seconds):
    lock = rp.lock(name, timeout=30, lock_class=impl)
    assert lock.acquire(blocking=False)
    assert lock.extend(seconds) is True
    assert 27000 < rp.pttl(name) <= 30000 + seconds * 1000
    lock.release()


def test_a_unix_socket_path_with_a_question_mark_locks_through_it(server, impl, name, tmp_path):
    odd = tmp_path / "run?x"
    odd.mkdir()
    (odd / "redis.sock").symlink_to(server.sock)
    ru = redis.Redis(unix_socket_path=str(odd / "redis.sock"))
    lock = ru.lock(name, timeout=30, lock_class=impl)
    assert lock.acquire(blocking=False)
    assert ru.get(name) == lock.local.token
    lock.release()
    ru.close()
