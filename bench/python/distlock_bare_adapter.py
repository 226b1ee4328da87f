"""distlock's pair as the extension's own calls, no Lock object: what the
interpreter and the SWIG calls cost without the package's Python layer
(bench/python/pairs_ab.py --bare). Not an API: the calls are the ones
Lock.acquire(blocking=False) and Lock.release() make."""
from distlock import Client, _core


def make_distlock_bare(uris):
    client = Client(uris)
    h0 = client._h  # the client stays alive in the closures below
    acq, rel, free = _core.distlock_py_acquire_with, _core.distlock_py_release, _core.distlock_lock_free

    def try_(key, ttl):
        status, h = acq(h0, key, ttl, 0, 0, None, None, None)
        return h if status == _core.DISTLOCK_OK else None

    def wait(key, ttl):
        raise SystemExit("distlock-bare runs pairs only")

    def release(h):
        rel(h)
        free(h)
        return client is not None
    return try_, wait, release
