"""Type-checked by run.sh with mypy --strict against the installed package:
user code written against distlock.aio (and the lost-lease API) must check
cleanly. Not run; not a pytest module."""
import asyncio
from typing import List, Optional

import distlock
import distlock.aio


async def use(servers: str) -> Optional[int]:
    seen: List[distlock.aio.Lock] = []
    async with distlock.aio.Client(servers, connect_timeout=0.5, pool_size=4) as c:
        lk: distlock.aio.Lock = c.lock("k", ttl=3, wait=1.0, fencing=True, auto_renew=True,
                                       reentrant=True, on_lost=seen.append,
                                       cancel_on_lost=True)
        if not await lk.acquire(blocking=False):
            return None
        try:
            validity: float = await lk.extend(5)
            lk.check()
            fence: Optional[int] = lk.fence
            token: Optional[str] = lk.token
            return fence if validity > 0 and token is not None and not lk.lost else None
        except distlock.RenewalFailed as e:
            status: Optional[int] = e.status
            return status
        except distlock.LockLost:
            return None
        finally:
            await lk.release()


async def guarded(c: distlock.aio.Client) -> int:
    @c.lock("job", ttl=10)
    async def job(x: int) -> int:
        return x * 2

    async with asyncio.timeout(1.0):
        async with c.lock("other", ttl=5, cancel_on_lost=True):
            pass
    holder: distlock.Holder = await c.holder("job")
    return await job(21) + holder.nodes


def sync_lost(c: distlock.Client) -> str:
    def on_lost(lock: distlock.Lock) -> None:
        print("lost", lock.key)

    def work(a: str) -> str:
        return a + "!"

    lk = c.lock("k", ttl=3, auto_renew=True, on_lost=on_lost)
    with lk:
        lk.check()
        return lk.run(work, "done")


async def primitives(c: distlock.aio.Client) -> int:
    sem: distlock.aio.Semaphore = c.semaphore("pool", 3, ttl=10, cancel_on_lost=True)
    many: distlock.aio.MultiLock = c.lock_many(["a", "b"], fencing=True)
    reader: distlock.aio.Lock = c.lock("doc", 10, shared=True)
    async with sem, reader:
        pass
    if await many.acquire(timeout=1.0):
        fences = many.fences
        await many.release()
        return sem.permits + len(many.keys) + (0 if fences is None else len(fences))
    return 0
