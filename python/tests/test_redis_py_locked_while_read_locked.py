"""docs/redis-py.md: distlock.redis_py's locked() is True for anyone's lock,
and a distlock lock of the name excludes a distlock.redis_py one. While
distlock read locks hold the key, acquire() is refused, so locked() must
say the key is locked (python/README.md: the native client's locked() is
False for read locks, holder().kind says "readers"; the redis-py adapter
answers redis-py's question: can't I take it?)."""
import uuid

import redis

import distlock
import distlock.redis_py


def test_locked_is_true_while_a_read_lock_refuses_the_acquire(server):
    name = "rpl:" + uuid.uuid4().hex
    rp = redis.Redis(port=server.port)
    with distlock.Client(server.uri) as c, c.lock(name, ttl=30, shared=True):
        lock = rp.lock(name, timeout=30, lock_class=distlock.redis_py.Lock)
        refused = lock.acquire(blocking=False) is False
        assert (refused, lock.locked()) == (True, True)
    rp.close()
