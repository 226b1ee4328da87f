"""Many tasks of one distlock.aio client waiting on one key: no thread per
waiting task (the loop drives the client's multi), one attempt of theirs on
the wire at a time (they queue in the client), and each release through the
client hands the key to the next task, every one served, never two at once."""
import asyncio
import os
import time

import distlock
import distlock.aio as aio

WAITERS = 200


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _lock_attempts(r):
    """Lock attempts the server has run so far (the acquire script's calls,
    however it is sent), from INFO commandstats."""
    stats = r.info("commandstats")
    return sum(v["calls"] for k, v in stats.items()
               if k.split("|")[0] in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_fcall",
                                      "cmdstat_set"))


async def _until(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(0.01)
    return False


def test_waiting_tasks_take_no_thread_and_queue_in_the_client(server, r, key):
    holder = distlock.Client(server.uri)
    held = holder.lock(key, ttl=60)
    assert held.acquire(blocking=False)
    ch = "distlock:" + key

    async def main():
        threads_before = _threads()
        # re-checks 30 s apart: within the test only the release ends a wait
        async with aio.Client(server.uri, retry_min=30, retry_max=30) as c:
            order = []
            inside = [0, 0]  # now, most at once

            async def one(i):
                async with c.lock(key, ttl=30):
                    inside[0] += 1
                    inside[1] = max(inside[1], inside[0])
                    order.append(i)
                    await asyncio.sleep(0)
                    inside[0] -= 1

            before = _lock_attempts(r)
            tasks = [asyncio.ensure_future(one(i)) for i in range(WAITERS)]
            assert await _until(lambda: dict(r.pubsub_numsub(ch)).get(ch, 0) >= 1), \
                "no waiter subscribed"
            # the first waiter's try and its try once subscribed
            assert await _until(lambda: _lock_attempts(r) - before >= 2)
            for _ in range(20):  # the loop turns: any other attempt would be sent by now
                await asyncio.sleep(0.005)
            attempts = _lock_attempts(r) - before
            threads = _threads() - threads_before
            numsub = dict(r.pubsub_numsub(ch)).get(ch, 0)
            t0 = time.monotonic()
            held.release()
            await asyncio.wait_for(asyncio.gather(*tasks), 60)
            served_s = time.monotonic() - t0
            return attempts, threads, numsub, order, inside[1], served_s

    attempts, threads, numsub, order, most, served_s = asyncio.run(main())
    holder.close()
    print("\n# aio: %d waiting tasks: %d lock attempts on the wire, %d new threads, %d "
          "subscriptions; served in %.2f s" % (WAITERS, attempts, threads, numsub, served_s))
    # the C client's own background threads (subscriber, lease clock...) at most
    assert threads <= 4, threads
    assert attempts <= 3, attempts
    assert numsub == 1
    assert sorted(order) == list(range(WAITERS)) and most == 1
    assert r.exists(key) == 0
