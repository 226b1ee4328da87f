"""distlock.aio against a real redis-server: the event loop is never blocked
(a ticker keeps turning while calls wait on a node whose replies are
delayed), cancellation is prompt and leaves no key,
asyncio.timeout()/wait_for, loss handling (cancel_on_lost, on_lost), per-task
reentrancy and fencing."""
import asyncio
import os
import sys
import time

import pytest

import distlock
import distlock.aio as aio
from conftest import connect_every_node

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tests", "harness"))
from faultproxy import FaultProxy  # noqa: E402

REPLY_DELAY = 0.4      # the slow node's delay per reply, seconds
CANCEL_BUDGET = 0.050  # cancel -> the awaiting task is done, seconds


def _runqueue_wait_s() -> float:
    """Seconds this thread has spent runnable but not running (waiting for a
    CPU): the second field of /proc/self/task/TID/schedstat."""
    import threading
    with open("/proc/self/task/%d/schedstat" % threading.get_native_id()) as f:
        return int(f.read().split()[1]) / 1e9


class Ticker:
    """Measures how late the loop runs a 1 ms timer: its worst lag, raw, and
    with the time the kernel kept the loop's thread waiting for a CPU taken
    out (what the library controls: a loop blocked in a call or waiting for
    the GIL is not waiting for a CPU)."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.worst_own = 0.0
        self.ticks = 0
        self._stop = False

    def reset(self) -> None:
        self.worst = self.worst_own = 0.0

    async def fresh(self) -> None:
        """Reset once a tick that started after this call has ended: no
        stall from before counts."""
        n = self.ticks + 1
        while self.ticks <= n:
            await asyncio.sleep(0)
        self.reset()

    async def run(self) -> None:
        while not self._stop:
            q = _runqueue_wait_s()
            t = time.monotonic()
            await asyncio.sleep(0.001)
            lag = time.monotonic() - t - 0.001
            own = lag - (_runqueue_wait_s() - q)
            self.worst = max(self.worst, lag)
            self.worst_own = max(self.worst_own, own)
            self.ticks += 1

    def stop(self) -> None:
        self._stop = True


def run(coro):
    return asyncio.run(coro)


async def _numsub(r, key):
    ch = "distlock:" + key
    return dict(r.pubsub_numsub(ch)).get(ch, 0)


def _lock_attempts(r):
    """Lock attempts the server has run so far (the acquire script's calls,
    however it is sent), from INFO commandstats."""
    stats = r.info("commandstats")
    return sum(v["calls"] for k, v in stats.items()
               if k.split("|")[0] in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_fcall", "cmdstat_set"))


async def _until(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await pred():
            return True
        await asyncio.sleep(0.01)
    return False


def test_loop_turns_while_acquires_wait_on_a_slow_node(server, r, key):
    """No distlock.aio call blocks the event loop: the node sits behind the
    fault proxy, which delays each of its replies by REPLY_DELAY (400 ms), and
    a ticker task must keep turning while an acquire, an extend, a release, a
    contended wait and a burst of 20 acquires each wait on it.

    Not a timing budget for the library: a call made in the loop's thread
    stops the ticker for at least one delayed reply (400 ms); an awaited one
    stops it for nothing. The bound, a quarter of the delay, is measured
    without the time the kernel kept the loop's thread waiting for a CPU (a
    loaded machine), and each phase is checked to have waited on the slow
    node (so a phase that skipped it would not pass unnoticed)."""
    holder = distlock.Client(server.uri)  # straight to the node: not slowed
    held = holder.lock(key + ":waited", ttl=30)
    delay_ms = int(REPLY_DELAY * 1000)

    async def main():
        ticker = Ticker()
        tick = asyncio.ensure_future(ticker.run())
        # (name, seconds it took, ticks during it, worst lag, the same less
        # the waits for a CPU): only while the library's calls are awaited,
        # not the test's own blocking calls to the node in between
        phases = []

        async def phase(name, start):
            await ticker.fresh()
            n, t0 = ticker.ticks, time.monotonic()
            result = await start()
            phases.append((name, time.monotonic() - t0, ticker.ticks - n, ticker.worst,
                           ticker.worst_own))
            return result

        with FaultProxy([server.port]) as fp:
            # the handshake before the delay: the phases wait on replies only
            async with aio.Client(fp.uris(), command_timeout=10) as c:
                warm = c.lock(key + ":warm", ttl=5)
                assert await warm.acquire(blocking=False)
                await warm.release()
                fp.cmd("delay 0 %d down" % delay_ms)
                lk = c.lock(key, ttl=10)
                assert await phase("acquire", lambda: lk.acquire(blocking=False))
                assert r.get(key) == lk.token
                assert await phase("extend", lambda: lk.extend(20)) > 10
                await phase("release", lk.release)
                assert r.exists(key) == 0

                assert held.acquire(blocking=False)
                waiter = c.lock(key + ":waited", ttl=10)
                t = asyncio.ensure_future(waiter.acquire(timeout=30))
                assert await _until(lambda: _numsub(r, key + ":waited")), \
                    "the waiter never subscribed"
                held.release()
                assert await phase("contended wait", lambda: t)
                await waiter.release()

                async def one(i):
                    async with c.lock("%s:%d" % (key, i), ttl=10):
                        pass
                await phase("20 acquires at once",
                            lambda: asyncio.gather(*(one(i) for i in range(20))))
        ticker.stop()
        await tick
        return phases

    try:
        phases = run(main())
    finally:
        holder.close()
    print("\n# aio, replies delayed %d ms: %s" % (delay_ms, "; ".join(
        "%s %.0f ms, %d ticks, worst lag %.1f ms (%.1f less the waits for a CPU)"
        % (n, d * 1e3, k, w * 1e3, o * 1e3) for n, d, k, w, o in phases)))
    for name, took, ticks, _, worst_own in phases:
        assert took >= REPLY_DELAY, "%s did not wait on the slow node (%.3f s)" % (name, took)
        assert ticks >= 3, "the loop stood still during the %s (%d ticks)" % (name, ticks)
        assert worst_own < REPLY_DELAY / 4, (
            "the loop stood still for %.0f ms (less the waits for a CPU) during the %s while "
            "replies took %d ms: a call blocked it" % (worst_own * 1e3, name, delay_ms))
    assert r.keys(key + "*") == []


def test_cancel_is_prompt_and_leaves_no_key(server, r, key):
    holder = distlock.Client(server.uri)
    held = holder.lock(key, ttl=30)
    assert held.acquire(blocking=False)

    async def main():
        async with aio.Client(server.uri, retry_min=5, retry_max=5) as c:
            lk = c.lock(key, ttl=30)
            other = c.lock(key, ttl=30)  # a second waiter of the same client
            before = _lock_attempts(r)
            t1 = asyncio.ensure_future(lk.acquire())
            t2 = asyncio.ensure_future(other.acquire(timeout=20))
            assert await _until(lambda: _numsub(r, key)), "the waiters never subscribed"

            async def both_refused():
                return _lock_attempts(r) - before >= 2
            # Both have been refused once: they sleep in the core (re-check every 5 s).
            assert await _until(both_refused), "the waiters never tried the key"
            t0 = time.monotonic()
            t1.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t1
            latency = time.monotonic() - t0
            assert not t2.done()  # the other waiter waits on
            assert r.get(key) == held.token
            held.release()  # the other waiter is woken and wins
            assert await asyncio.wait_for(t2, 5)
            assert r.get(key) == other.token
            await other.release()
            assert not lk.held and lk.token is None
            return latency

    latency = run(main())
    print("\n# aio: cancel -> task done in %.2f ms" % (latency * 1e3))
    holder.close()
    assert latency <= CANCEL_BUDGET
    assert r.exists(key) == 0
    assert _numsub_sync(r, key) == 0


def test_cancel_delivered_after_the_acquire_won_gives_the_lock_back(server, r, key):
    """The acquire wins in the same turn of the loop as its task is
    cancelled, after the cancel (the future the task awaits is cancelled
    with it, before the task's own cancel handling runs): the grant is kept
    for that handling, which gives it back before the CancelledError goes
    on. Made deterministic with the fault proxy holding the grant's reply
    and the test driving the client's multi itself between the cancel and
    the task's next step."""
    async def main():
        with FaultProxy([server.port]) as fp:
            async with aio.Client(fp.uris()) as c:
                warm = c.lock(key + ":warm", ttl=5)  # connections and scripts ready
                assert await warm.acquire(blocking=False)
                await warm.release()
                multi = c._multi
                fp.cmd("hold 0 down")
                lk = c.lock(key, ttl=30)
                t = asyncio.ensure_future(lk.acquire())
                # the grant is on its way back (the loop runs meanwhile)
                await asyncio.get_running_loop().run_in_executor(
                    None, fp.cmd, "wait-held 0 down 1 10000")
                assert r.get(key) is not None
                (oid,) = multi._acquires
                t.cancel()  # the task's step with CancelledError is scheduled ...
                fp.cmd("unhold 0")
                deadline = time.monotonic() + 10
                while oid in multi._ops:  # ... and the grant is read before it runs
                    assert time.monotonic() < deadline, "the grant never arrived"
                    multi.perform()
                kept = oid in multi._late  # won, for the task's cancel handling
                with pytest.raises(asyncio.CancelledError):
                    await t
                assert r.exists(key) == 0, "the grant won after the cancel was left held"
                assert kept and not multi._late and not lk.held
                # the client goes on
                assert await lk.acquire(blocking=False)
                await lk.release()

    run(main())
    assert r.exists(key) == 0


def test_cancelling_one_waiter_leaves_the_other_call_alone(server, r, key):
    """Two tasks wait on one aio client; cancelling one ends its C call
    only: the other's call is never interrupted (the client counts one
    cancelled acquire, not two), it gets the lock on the release, and the
    cancelled one holds nothing."""
    holder = distlock.Client(server.uri)
    held = holder.lock(key, ttl=60)
    assert held.acquire(blocking=False)

    async def main():
        # re-checks 30 s apart: within the test only a release or a cancel
        # ends a sleep
        async with aio.Client(server.uri, retry_min=30, retry_max=30) as c:
            lk = c.lock(key, ttl=30)
            other = c.lock(key, ttl=30)
            before = _lock_attempts(r)
            t1 = asyncio.ensure_future(lk.acquire())
            t2 = asyncio.ensure_future(other.acquire())
            assert await _until(lambda: _numsub(r, key)), "the waiters never subscribed"

            async def asleep():
                # the first waiter's try, then its try after subscribing;
                # the second waits behind it in the client (one attempt of a
                # client's waiters on a key is on the wire at a time)
                return _lock_attempts(r) - before >= 2
            assert await _until(asleep), "the waiters never tried the key"
            t1.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t1
            assert not t2.done()
            assert r.get(key) == held.token and not lk.held
            held.release()
            assert await asyncio.wait_for(t2, 10)
            assert r.get(key) == other.token
            stats = c._sync.stats()
            await other.release()
            assert not lk.held and lk.token is None
            return stats

    stats = run(main())
    holder.close()
    cancelled = stats.get('acquire_failed_total{status="ECANCELED"}', 0)
    print("\n# aio: two waiters, one cancelled: cancelled C acquires %d, granted %d"
          % (cancelled, stats.get("acquire_granted_total", 0)))
    assert cancelled == 1  # the cancelled task's call, and no other
    assert r.exists(key) == 0


def _numsub_sync(r, key):
    ch = "distlock:" + key
    return dict(r.pubsub_numsub(ch)).get(ch, 0)


def test_cancel_while_the_lock_is_being_won_leaves_no_key(server, r, key):
    """Cancel at the moment the holder releases (the waiter may win at the
    same time): whichever comes first, nothing is left held by the waiter."""
    holder = distlock.Client(server.uri)

    async def main():
        async with aio.Client(server.uri) as c:
            for i in range(20):
                k = "%s:%d" % (key, i)
                held = holder.lock(k, ttl=30)
                assert held.acquire(blocking=False)
                lk = c.lock(k, ttl=30)
                t = asyncio.ensure_future(lk.acquire())
                assert await _until(lambda: _numsub(r, k))
                held.release()
                t.cancel()
                try:
                    got = await t
                except asyncio.CancelledError:
                    got = False
                if got:
                    await lk.release()
                assert r.exists(k) == 0, "iteration %d left the key" % i

    run(main())
    holder.close()


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is Python 3.11+")
def test_asyncio_timeout_and_wait_for(server, r, key):
    holder = distlock.Client(server.uri)
    held = holder.lock(key, ttl=30)
    assert held.acquire(blocking=False)

    async def main():
        async with aio.Client(server.uri) as c:
            lk = c.lock(key, ttl=30)
            t0 = time.monotonic()
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.3):
                    await lk.acquire()
            d1 = time.monotonic() - t0
            t0 = time.monotonic()
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(lk.acquire(), 0.3)
            d2 = time.monotonic() - t0
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    async with c.lock(key, ttl=30):
                        pytest.fail("entered a lock held by another owner")
            # the task is not left cancelling: it can go on awaiting
            await asyncio.sleep(0)
            assert asyncio.current_task().cancelling() == 0
            return d1, d2

    d1, d2 = run(main())
    assert 0.3 <= d1 < 0.3 + CANCEL_BUDGET + 0.1 and 0.3 <= d2 < 0.3 + CANCEL_BUDGET + 0.1
    assert r.get(key) == held.token
    held.release()
    holder.close()


def test_basic_api(server, r, key):
    async def main():
        async with aio.Client(server.uri) as c:
            lk = c.lock(key, ttl=10, fencing=True)
            assert await lk.acquire(blocking=False)
            assert lk.held and r.get(key) == lk.token and lk.fence is not None
            f1 = lk.fence
            assert 9 < await lk.extend(20) <= 20
            assert 15 < r.pttl(key) / 1000 <= 20
            lk.check()
            other = c.lock(key, ttl=10)
            assert not await other.acquire(blocking=False)
            assert not await other.acquire(timeout=0.1)
            await lk.release()
            assert r.exists(key) == 0 and not lk.held
            with pytest.raises(distlock.NotHeld):
                await lk.release()
            with pytest.raises(distlock.NotHeld):
                lk.check()
            async with other:
                assert other.fence is None
            async with c.lock(key, fencing=True) as again:
                assert again.fence > f1

            @c.lock(key, ttl=5)
            async def job(x):
                return r.get(key) is not None and x

            assert await job(7) == 7
            assert r.exists(key) == 0

    run(main())


def test_tasks_sharing_one_lock_object_queue_on_it(server, r, key):
    """Tasks sharing one Lock object queue on it, as threads do on the
    blocking Lock: while one task holds it, or waits for its key, another's
    try is refused and its wait waits, sending nothing; the release lets the
    waiting task in. A restored Lock is held by its ownership the same way.
    (A fresh object for each case: the first contention gives an object its
    asyncio.Lock.)"""
    holder = distlock.Client(server.uri)

    async def main():
        async with aio.Client(server.uri) as c:
            def in_task(lk, **kw):
                return asyncio.ensure_future(lk.acquire(**kw))

            def queued(lk):
                async def pred():
                    return lk._local is not None and bool(lk._local._waiters)
                return pred

            # held by a task
            lk = c.lock(key, ttl=30)
            assert await lk.acquire()
            before = _lock_attempts(r)
            assert not await in_task(lk, blocking=False)
            assert not await in_task(lk, timeout=0.1)
            waiting = in_task(lk)
            assert await _until(queued(lk)), "the third task never queued on the object"
            assert _lock_attempts(r) == before, "a task sent an acquire while another held it"
            token = lk.token
            await lk.release()
            assert await asyncio.wait_for(waiting, 10)
            assert r.get(key) == lk.token != token
            await lk.release()
            assert r.exists(key) == 0

            # a task waits for the key (held by another owner)
            held = holder.lock(key, ttl=30)
            assert held.acquire(blocking=False)
            lk = c.lock(key, ttl=30)
            first = in_task(lk)
            assert await _until(lambda: _numsub(r, key)), "the first task never waited"
            assert not await in_task(lk, blocking=False)
            second = in_task(lk)
            assert await _until(queued(lk)), "the second task never queued on the object"
            assert len(c._multi._acquires) == 1  # one acquire of the object on its way
            held.release()
            assert await asyncio.wait_for(first, 10)
            assert not second.done()
            await lk.release()
            assert await asyncio.wait_for(second, 10)
            await lk.release()
            assert r.exists(key) == 0

            # a restored ownership
            held = holder.lock(key, ttl=30)
            assert held.acquire(blocking=False)
            restored = c.restore(key, held.token)
            assert not await in_task(restored, blocking=False)
            await restored.release()
            assert r.exists(key) == 0
            assert await in_task(restored, blocking=False)
            await restored.release()

    run(main())
    holder.close()
    assert r.exists(key) == 0


def test_reentrant_per_task(server, r, key):
    async def main():
        async with aio.Client(server.uri) as c:
            async with c.lock(key, ttl=10, reentrant=True) as a:
                async with c.lock(key, ttl=10, reentrant=True) as b:
                    assert a.token == b.token == r.get(key)

                async def other_task():
                    return await c.lock(key, ttl=10, reentrant=True).acquire(blocking=False)
                assert not await asyncio.ensure_future(other_task())
                assert r.get(key) == a.token  # the inner release kept it
            assert r.exists(key) == 0

    run(main())


def test_cancel_on_lost_raises_lock_lost(server, r, key):
    async def main():
        seen = []
        async with aio.Client(server.uri) as c:
            lk = c.lock(key, ttl=0.6, auto_renew=True, cancel_on_lost=True,
                        on_lost=seen.append)
            t0 = time.monotonic()
            with pytest.raises(distlock.LockLost) as ei:
                async with lk:
                    r.delete(key)  # lost behind its back
                    await asyncio.sleep(30)  # cancelled on loss, not finished
            took = time.monotonic() - t0
            assert isinstance(ei.value.__cause__, asyncio.CancelledError)
            assert asyncio.current_task().cancelling() == 0
            assert seen == [lk] and lk.lost
            return took

    took = run(main())
    assert took < 2.0  # found at the next renewal (ttl/3), not after the 30 s sleep


def test_cancel_on_lost_raises_lock_lost_when_the_servers_stop_replying(server, r, key):
    """The lease clock: the only server stops replying (SIGSTOP), so the
    lease's validity ends unconfirmed and the lock is lost; the block under
    ``async with`` is cancelled and, as documented, ends with LockLost. The
    release in __aexit__ then fails too (the server still does not reply):
    that must not replace the LockLost, nor leave the task's cancel
    pending."""
    import os
    import signal

    async def main():
        seen = []
        async with aio.Client(server.uri) as c:
            lk = c.lock(key, ttl=1.0, auto_renew=True, cancel_on_lost=True,
                        on_lost=seen.append)
            t0 = time.monotonic()
            try:
                with pytest.raises(distlock.LockLost) as ei:
                    async with lk:
                        os.kill(server.proc.pid, signal.SIGSTOP)
                        await asyncio.sleep(30)  # cancelled on loss
            finally:
                os.kill(server.proc.pid, signal.SIGCONT)
            assert isinstance(ei.value.__cause__, asyncio.CancelledError)
            assert asyncio.current_task().cancelling() == 0
            assert seen == [lk] and lk.lost
            return time.monotonic() - t0

    took = run(main())
    assert took < 5.0


def test_lost_without_cancel_raises_on_exit(server, r, key):
    async def main():
        async with aio.Client(server.uri) as c:
            lk = c.lock(key, ttl=0.6, auto_renew=True)
            with pytest.raises(distlock.LockLost):
                async with lk:
                    r.delete(key)
                    deadline = time.monotonic() + 5
                    while not lk.lost and time.monotonic() < deadline:
                        await asyncio.sleep(0.02)
                    assert lk.lost  # the body ran on: not cancelled
                    with pytest.raises(distlock.LockLost):
                        lk.check()

    run(main())


def test_close_releases_what_is_held(server, r, key):
    async def main():
        c = aio.Client(server.uri)
        lk = c.lock(key, ttl=30)
        assert await lk.acquire(blocking=False)
        assert r.get(key) == lk.token
        await c.close()
        assert r.exists(key) == 0
        assert not lk.held and lk.token is None
        with pytest.raises(distlock.ClosedError):
            await c.lock(key).acquire()
        await c.close()  # idempotent

    run(main())


def test_close_ends_waiting_acquires(server, r, key):
    holder = distlock.Client(server.uri)
    held = holder.lock(key, ttl=30)
    assert held.acquire(blocking=False)

    async def main():
        c = aio.Client(server.uri, retry_min=5, retry_max=5)
        waiter = asyncio.ensure_future(c.lock(key, ttl=30).acquire())  # no limit
        assert await _until(lambda: _numsub(r, key))
        t0 = time.monotonic()
        await asyncio.wait_for(c.close(), 5)
        with pytest.raises(distlock.ClosedError):
            await asyncio.wait_for(waiter, 5)
        return time.monotonic() - t0

    took = run(main())
    assert took < 1.0  # not the 5 s re-check, not the wait without limit
    assert r.get(key) == held.token
    held.release()
    holder.close()


def test_redlock_cancel_leaves_no_key_on_any_node(server_factory, key):
    """Three nodes (quorum 2): a waiter cancelled while the holder's lock
    goes away leaves nothing on any node, whichever way the race goes."""
    servers = [server_factory() for _ in range(3)]
    uris = ",".join(s.uri for s in servers)
    rs = [s.redis() for s in servers]
    holder = distlock.Client(uris)
    connect_every_node(holder, servers)  # its locks are checked on every node

    async def main():
        async with aio.Client(uris) as c:
            for i in range(10):
                k = "%s:%d" % (key, i)
                held = holder.lock(k, ttl=30)
                assert held.acquire(blocking=False)

                # The acquire returns once a quorum granted; its request to
                # the last node may still be on the way.
                async def on_all(k=k, token=held.token):
                    return [r.get(k) for r in rs] == [token] * 3

                assert await _until(on_all, 3.0), "iteration %d: %s" % (
                    i, [r.get(k) for r in rs])
                t = asyncio.ensure_future(c.lock(k, ttl=30).acquire())
                assert await _until(lambda: _numsub(rs[0], k))
                t0 = time.monotonic()
                if i % 2:
                    held.release()
                t.cancel()
                try:
                    got = await t
                except asyncio.CancelledError:
                    got = None
                took = time.monotonic() - t0
                assert got is None, "iteration %d: the acquire was not cancelled" % i
                assert took <= CANCEL_BUDGET + (0.05 if i % 2 else 0), took
                if not i % 2:
                    assert [r.get(k) for r in rs] == [held.token] * 3
                    held.release()
                # A release or undo returns once a quorum answered; its
                # request to the last node may still be on the way.
                async def gone(k=k):
                    return [r.exists(k) for r in rs] == [0, 0, 0]

                assert await _until(gone, 3.0), "iteration %d: %s" % (
                    i, [r.exists(k) for r in rs])

    run(main())
    holder.close()


_LOOP_CLOSED_CHILD = r'''
import asyncio, gc, sys, threading, time
import distlock, distlock.aio, redis

uri, port, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = redis.Redis(port=port)

def until(pred):
    deadline = time.monotonic() + 10
    while not pred():
        if time.monotonic() > deadline:
            sys.exit("timed out")
        time.sleep(0.01)

holder = distlock.Client(uri)
hl = holder.lock(key, 30)
assert hl.acquire(blocking=False)
client = distlock.aio.Client(uri)
loop = asyncio.new_event_loop()
task = loop.create_task(client.lock(key, 30).acquire())
ch = "distlock:" + key

async def until_waiting():  # the loop runs while the acquire starts
    deadline = time.monotonic() + 10
    while r.pubsub_numsub(ch)[0][1] < 1:  # waiting in C
        if time.monotonic() > deadline:
            sys.exit("timed out")
        await asyncio.sleep(0.01)

loop.run_until_complete(until_waiting())
loop.close()  # with the task pending: never resumed
hl.release()  # nobody drives the waiter of the closed loop: it must win nothing
until(lambda: not any(t.name == "distlock-aio-wait" for t in threading.enumerate()))
assert not r.exists(key), "a lock was won for the closed loop and kept"
asyncio.run(client.close())  # from another loop: frees the multi, cancelling the acquire
del task
gc.collect()  # the pending coroutine is closed
holder.close()
print("clean")
'''


def test_loop_closed_with_a_waiter_then_client_closed(server, r, key):
    """The loop closes while an acquire waits; nothing is won for nobody
    (no key left), the client is closed on another loop (its multi freed
    there, which cancels the acquire) and the pending task collected: the
    coroutine's end touches no freed operation (no crash)."""
    import subprocess
    p = subprocess.run([sys.executable, "-c", _LOOP_CLOSED_CHILD, server.uri,
                        str(server.port), key], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "clean", (p.returncode, p.stdout,
                                                                  p.stderr[-2000:])


def test_release_during_a_cancelled_extend(server, r, key):
    """An extend whose task is cancelled runs on in the client; a release
    started meanwhile deletes the key, and the handle is freed only once
    both are done (the extend still uses it)."""
    async def main():
        async with aio.Client(server.uri) as c:
            for i in range(20):
                k = "%s:%d" % (key, i)
                lk = c.lock(k, ttl=10)
                assert await lk.acquire(blocking=False)
                t = asyncio.ensure_future(lk.extend(20))
                await asyncio.sleep(0)  # the extend has started
                t.cancel()
                await lk.release()
                assert r.exists(k) == 0 and not lk.held
                with pytest.raises(asyncio.CancelledError):
                    await t
            assert await c.lock(key, ttl=10).acquire(blocking=False)

    run(main())
