"""Type-checked by run.sh with mypy --strict against the installed package
(py.typed, _core.pyi): user code written against the public API must check
cleanly. Not run; not a pytest module."""
from typing import List, Optional, Tuple, Union

import distlock


def use(servers: str) -> Optional[int]:
    with distlock.Client([servers], connect_timeout=0.5, retry_max=0.05) as c:
        lk: distlock.Lock = c.lock("k", ttl=3, wait=1.0, fencing=True, auto_renew=True)
        if not lk.acquire(blocking=False):
            return None
        try:
            token: Optional[str] = lk.token
            validity: float = lk.extend(5)
            lost: bool = lk.lost or lk.held or validity > 0 or token is None
            fence: Optional[int] = lk.fence
            return fence if not lost else None
        except distlock.LockLost as e:
            status: Optional[int] = e.status
            return status
        finally:
            lk.release()


def decorated(c: distlock.Client) -> int:
    @c.lock("job", ttl=10)
    def job(x: int) -> int:
        return x * 2

    held = c.inspect("job")
    left: Optional[float] = held[1] if held is not None else None
    return job(21) + (0 if left is None else 1) + c.force_release("job")


def primitives(c: distlock.Client) -> int:
    sem: distlock.Semaphore = c.semaphore("pool", 3, ttl=10, wait=1.0, auto_renew=True)
    permits: int = sem.permits
    reader: distlock.Lock = c.lock("doc", 10, shared=True)
    shared: bool = reader.shared
    many: distlock.MultiLock = c.lock_many(["a", b"b"], ttl=5, fencing=True)
    with many:
        fences: Optional[List[int]] = many.fences
        keys: Tuple[Union[str, bytes], ...] = many.keys
    with sem, reader:
        pass
    return permits + int(shared) + len(keys) + (0 if fences is None else len(fences))
