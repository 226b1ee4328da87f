"""A reentrant distlock.aio.Lock counts per task (python/README.md,
asyncio): as the blocking API refuses a release from a thread that does not
hold a reentrant lock (NotHeld), a task that does not hold it must not count
down the owner task's acquisitions, or the owner's own releases delete the
key while it is still inside its outer block."""
import asyncio

import pytest

import distlock
import distlock.aio as aio


def test_release_from_another_task_raises_not_held_and_keeps_the_owners_count(server, r, key):
    async def main():
        async with aio.Client(server.uri) as c:
            lk = c.lock(key, ttl=30, reentrant=True)
            await lk.acquire()                       # the owner task's outer block
            await lk.acquire()                       # and its inner one, counted
            token = r.get(key)

            async def intruder():
                try:
                    await lk.release()
                except distlock.NotHeld as e:
                    return e
            raised = await asyncio.create_task(intruder())
            await lk.release()                       # the owner leaves its inner block
            # its outer block still holds the key
            assert (r.get(key), raised.__class__) == (token, distlock.NotHeld)
            await lk.release()
            assert r.get(key) is None
    asyncio.run(main())


def test_release_from_another_task_of_a_single_acquisition_keeps_the_key(server, r, key):
    async def main():
        async with aio.Client(server.uri) as c:
            lk = c.lock(key, ttl=30, reentrant=True)
            assert await lk.acquire()
            token = r.get(key)

            async def intruder():
                await lk.release()
            with pytest.raises(distlock.NotHeld):
                await asyncio.create_task(intruder())
            assert r.get(key) == token
            await lk.release()
        assert r.get(key) is None
    asyncio.run(main())
