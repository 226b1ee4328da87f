"""distlock's Python package reduced to driver.py's try / wait / release.

A new Lock object per acquisition, as `with client.lock(key): ...` does (the
redis-py driver likewise creates r.lock(...) each time)."""
from distlock import Client


def make_distlock(uris):
    client = Client(uris)

    def try_(key, ttl):
        lk = client.lock(key, ttl=ttl / 1000.0)
        return lk if lk.acquire(blocking=False) else None

    def wait(key, ttl):
        lk = client.lock(key, ttl=ttl / 1000.0)
        if not lk.acquire(blocking=True, timeout=10.0):
            raise RuntimeError("distlock: not acquired within 10 s")
        return lk

    def release(lk):
        lk.release()
        return True
    return try_, wait, release
