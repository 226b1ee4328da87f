"""Inputs redis-py's Lock takes, and what it does with them, that
docs/redis-py.md neither lists as a difference nor matches: each body runs
on redis-py's own Lock and on distlock.redis_py.Lock against a real
redis-server (as test_redis_py_parity.py does); "what differs" is a closed
list there, so each of these should match or be listed."""
import math
import threading
import uuid

import pytest
import redis
from redis.exceptions import LockError

import distlock.redis_py
from conftest import wait_until

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


def test_a_key_of_another_type_ends_a_blocking_wait_with_false(rp, impl, name):
    rp.rpush(name, "job")
    lock = rp.lock(name, timeout=30, lock_class=impl)
    assert lock.acquire(blocking_timeout=0.2, sleep=0.05) is False
    assert lock.local.token is None
    assert rp.lrange(name, 0, -1) == [b"job"]


def _tries_seen(rp, impl):
    """How many acquires the server refused so far: redis-py's SET NX calls,
    distlock's WRONGTYPE errors (its script reads the key's type)."""
    if impl is redis.lock.Lock:
        return rp.info("commandstats").get("cmdstat_set", {}).get("calls", 0)
    got = rp.info("errorstats").get("errorstat_WRONGTYPE", "count=0")  # redis-py 4.3: a str
    return int(got["count"] if isinstance(got, dict) else got.split("=", 1)[1])


def test_a_blocked_acquire_takes_the_key_once_the_value_of_another_type_is_gone(rp, impl, name):
    """As redis-py: a key of another type is tried again every `sleep`
    seconds (no release will notify its end), and taken once deleted."""
    rp.rpush(name, "job")
    before = _tries_seen(rp, impl)
    lock = rp.lock(name, timeout=30, thread_local=False, lock_class=impl)  # token read here
    got = []
    t = threading.Thread(target=lambda: got.append(lock.acquire(blocking_timeout=30, sleep=0.02)))
    t.start()
    try:
        assert wait_until(lambda: _tries_seen(rp, impl) > before, 10)
        assert not got  # refused, still waiting
    finally:
        rp.delete(name)
        t.join(30)
    assert got == [True]
    assert rp.get(name) == lock.local.token
    lock.release()


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


def _socket_in_a_dir_named(server, tmp_path, dirname):
    """A path to the server's socket through a directory named dirname; a
    dirname ending in ':' is followed by '//' (the system reads it as '/')."""
    odd = tmp_path / dirname
    odd.mkdir()
    (odd / "redis.sock").symlink_to(server.sock)
    return str(odd) + ("//" if dirname.endswith(":") else "/") + "redis.sock"


def test_a_unix_socket_path_with_a_question_mark_locks_through_it_in_redis_py(server, name,
                                                                               tmp_path):
    ru = redis.Redis(unix_socket_path=_socket_in_a_dir_named(server, tmp_path, "run?x"))
    lock = ru.lock(name, timeout=30, lock_class=redis.lock.Lock)
    assert lock.acquire(blocking=False)
    assert ru.get(name) == lock.local.token
    lock.release()
    ru.close()


@pytest.mark.parametrize("dirname", ["run?x", "run?db=3&tls_insecure=1", "a,redis:"],
                         ids=["question-mark", "options", "node-separator"])
def test_a_unix_socket_path_distlocks_uri_cant_carry_is_refused_not_read_as_options(
        server, name, tmp_path, dirname):
    """docs/redis-py.md, Differences: distlock's unix:// URI takes the path
    unescaped up to a '?' (its options) or a node separator, so such a path
    is refused by name at the Lock's construction; nothing is locked."""
    ru = redis.Redis(unix_socket_path=_socket_in_a_dir_named(server, tmp_path, dirname))
    with pytest.raises(TypeError, match="unix_socket_path with a '\\?'.*not supported"):
        ru.lock(name, timeout=30, lock_class=distlock.redis_py.Lock)
    assert ru.get(name) is None
    ru.close()


def test_a_unix_socket_path_with_a_space_or_a_comma_inside_locks_through_it(server, impl, name,
                                                                              tmp_path):
    ru = redis.Redis(unix_socket_path=_socket_in_a_dir_named(server, tmp_path, "my run, 2"))
    lock = ru.lock(name, timeout=30, lock_class=impl)
    assert lock.acquire(blocking=False)
    assert ru.get(name) == lock.local.token
    lock.release()
    ru.close()


def test_extend_by_less_than_the_ttl_left_deletes_the_key(rp, impl, name):
    """redis-py's PEXPIRE of a time <= 0 deletes the key; the token stays,
    and the release finds the lock no longer owned."""
    lock = rp.lock(name, timeout=30, lock_class=impl)
    assert lock.acquire(blocking=False)
    assert lock.extend(-60) is True
    assert rp.get(name) is None
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        lock.release()


def test_extend_by_zero_of_a_token_set_by_hand_keeps_the_ttl(rp, impl, name):
    first = rp.lock(name, timeout=30, lock_class=impl)
    assert first.acquire(blocking=False)
    later = rp.lock(name, timeout=30, lock_class=impl)
    later.local.token = first.local.token
    assert later.extend(0) is True
    assert 27000 < rp.pttl(name) <= 30000
    later.release()
    assert rp.get(name) is None
