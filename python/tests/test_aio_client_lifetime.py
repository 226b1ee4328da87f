"""An aio.Client that watches its lost-lease fd in the event loop is not kept
alive by the loop: once unreferenced it is collected (and its reader
removed), while a live client's on_lost callbacks still fire."""
import asyncio
import gc
import weakref

import distlock.aio as aio


def test_unreferenced_client_is_collected_while_its_loop_runs(server, r, key):
    async def main() -> None:
        loop = asyncio.get_running_loop()
        readers_before = len(loop._selector.get_map())  # type: ignore[attr-defined]
        c = aio.Client(server.uri, pool_size=1)
        lk = c.lock(key, ttl=30, on_lost=lambda lock: None)
        assert await lk.acquire(blocking=False)  # binds the client: add_reader
        await lk.release()
        # its two: the lost-lease fd and its multi's fd
        assert len(loop._selector.get_map()) == readers_before + 2  # type: ignore[attr-defined]
        ref = weakref.ref(c)
        del c, lk
        # Whatever ran the release may drop its last reference to the Lock
        # (so the client) only after the awaited future is done: poll until
        # that reference is gone, with a deadline.
        deadline = loop.time() + 5
        while True:
            gc.collect()
            if ref() is None or loop.time() > deadline:
                break
            await asyncio.sleep(0.01)
        assert ref() is None, "the event loop keeps an unreferenced aio.Client alive"
        # Its readers went with it: the loop watches no fd of a freed client.
        assert len(loop._selector.get_map()) == readers_before  # type: ignore[attr-defined]

    asyncio.run(main())


def test_live_client_still_reports_lost_leases(server, r, key):
    async def main() -> None:
        c = aio.Client(server.uri)
        seen = asyncio.Event()
        lk = c.lock(key, ttl=0.6, auto_renew=True, on_lost=lambda lock: seen.set())
        assert await lk.acquire(blocking=False)
        gc.collect()
        r.delete(key)  # lost behind its back: found by the next renewal (ttl/3)
        await asyncio.wait_for(seen.wait(), 5)
        assert lk.lost
        await c.close()

    asyncio.run(main())
