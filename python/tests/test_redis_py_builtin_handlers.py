"""Handlers code around a redis-py Lock already has for its own work: with
redis-py, a Redis failure of the lock is a redis.exceptions.RedisError and
nothing else, so `except ConnectionError:` / `except OSError:` (built-in:
an HTTP call, a file, a socket in the locked block) never catch it, and
the failure propagates. The switch to distlock.redis_py is documented as
"nothing else changes" (docs/redis-py.md); each body runs on both Locks."""
import builtins
import socket
import uuid

import pytest
import redis

import distlock.redis_py

CLASSES = {"redis-py": redis.lock.Lock, "distlock": distlock.redis_py.Lock}


@pytest.fixture(params=sorted(CLASSES))
def impl(request):
    return CLASSES[request.param]


def _unreachable_lock(impl, s):
    s.bind(("127.0.0.1", 0))  # bound, never listening: the connect is refused
    down = redis.Redis(port=s.getsockname()[1])
    return down.lock("rpb:" + uuid.uuid4().hex, timeout=30, lock_class=impl)


@pytest.mark.parametrize("builtin", [builtins.ConnectionError, OSError],
                         ids=["ConnectionError", "OSError"])
def test_a_builtin_handler_for_the_locked_work_does_not_catch_the_locks_failure(impl, builtin):
    with socket.socket() as s:
        lock = _unreachable_lock(impl, s)
        try:
            try:
                with lock:
                    pass  # the work, whose own socket errors the handler is for
            except builtin:
                caught = "the handler for the work's own %s" % builtin.__name__
        except redis.exceptions.ConnectionError:
            caught = "redis.exceptions.ConnectionError, past the handler"
    assert caught == "redis.exceptions.ConnectionError, past the handler"
