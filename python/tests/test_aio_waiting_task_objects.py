"""What a task waiting in ``async with client.lock(key)`` costs Python's
cyclic garbage collector: the objects it tracks per waiting task, against
the same tasks waiting on an asyncio.Lock (no network). Thousands of tasks
arriving at once are that many objects each collection of the oldest
generation walks, and that pause is the event loop's lag (bench/aio.sh's
arrival figures). A count, not a timing: the same on any machine."""
import asyncio
import gc
import time

import distlock
import distlock.aio as aio

TASKS = 500
# distlock's objects per waiting task beyond an asyncio.Lock waiter's. Both
# are the task's own (the task, its coroutine, context, entry in asyncio's
# task set, wake-up method, the bound __aexit__ of ``async with``) plus the
# lock's: its acquire coroutine, the future it awaits and the iterator
# awaiting it; distlock adds the Lock object (asyncio's lock is shared here).
# 10 against 10 on Python 3.11; 38 before (a shield, closures, a partial, a
# tuple per operation, a coroutine per layer, a mutex, a list and an
# asyncio.Lock per Lock object).
OWN_BUDGET = 2


async def _until(pred, what):
    deadline = time.monotonic() + 10
    while not pred():
        assert time.monotonic() < deadline, "never " + what
        await asyncio.sleep(0)


async def _per_task(make_lock, wait_until_waiting):
    async def one():
        async with make_lock():
            await asyncio.sleep(0)

    gc.collect()
    before = len(gc.get_objects())
    tasks = [asyncio.ensure_future(one()) for _ in range(TASKS)]
    await wait_until_waiting()
    gc.collect()
    per_task = (len(gc.get_objects()) - before) / TASKS
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return per_task


def test_a_waiting_task_costs_few_collected_objects(server, r, key):
    holder = distlock.Client(server.uri)
    held = holder.lock(key, ttl=60)
    assert held.acquire(blocking=False)

    async def main():
        local = asyncio.Lock()
        await local.acquire()

        def local_waiting():
            return _until(lambda: len(local._waiters or ()) == TASKS,
                          "were the tasks all waiting on the asyncio.Lock")
        floor = await _per_task(lambda: local, local_waiting)

        async with aio.Client(server.uri) as c:
            async with c.lock(key + ":warm", ttl=5):  # the multi and its connections
                pass
            multi = c._multi

            def distlock_waiting():  # every acquire is an operation of the multi
                return _until(lambda: len(multi._acquires) == TASKS,
                              "were the tasks all waiting on distlock.aio")
            ours = await _per_task(lambda: c.lock(key, ttl=30), distlock_waiting)
            assert not multi._acquires  # the cancels ended every operation
        return floor, ours

    floor, ours = asyncio.run(main())
    print("\n# objects the collector tracks per waiting task: asyncio.Lock %.1f, "
          "distlock.aio %.1f" % (floor, ours))
    assert r.get(key) == held.token
    held.release()
    holder.close()
    assert ours - floor <= OWN_BUDGET, (
        "a task waiting on distlock.aio costs %.1f objects, %.1f more than on an asyncio.Lock"
        % (ours, ours - floor))
