"""distlock for asyncio: the blocking API's Client and Lock, awaitable.

    import distlock.aio
    async with distlock.aio.Client("redis://127.0.0.1:6379") as client:
        async with client.lock("job:42", ttl=30):
            ...

How the event loop is kept free (never blocked, no polling sleeps, no
thread per call):
 - acquires (waiting or not), releases and extends of locks, read locks and
   semaphores are operations of the client's ``distlock_multi`` (the C
   library's non-blocking API), driven by the loop itself: it watches the
   multi's one descriptor (``loop.add_reader``), calls its ``perform`` when
   that is readable or when the multi's next timeout is due
   (``loop.call_at``), and wakes each awaiting task through a future keyed
   by the finished operation's id. Waiters of one client on one key queue in
   the library (one attempt on the wire; a release through the client hands
   over to the next at once). Cancelling the awaiting task
   (``task.cancel()``, ``asyncio.timeout()``, ``wait_for``) cancels its
   operation at once; the task waits the few ms until a lock won meanwhile
   is given back, so a cancelled acquire never leaves a key behind;
 - what the multi does not take (reentrant locks, several keys at once, the
   token-carrying and administrative calls, close) runs in a small thread
   pool of the client, started on first use, with the GIL released in C; a
   waiting reentrant or several-key acquire has a thread of its own, as
   before, sleeping in the core;
 - lost leases: the C client's lost eventfd is watched by the loop itself
   (``loop.add_reader``); a lost lock calls its ``on_lost`` and, with
   ``cancel_on_lost=True``, cancels the task running under ``async with``.

A Client belongs to the event loop it is first used in.
"""
import asyncio
import functools
import inspect
import os
import threading
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from time import monotonic as _monotonic
from typing import (Any, Awaitable, Callable, Coroutine, Dict, List, Optional, Sequence, Set,
                    Tuple, Type, TypeVar, Union, cast)
from types import TracebackType

from . import _core
from ._client import Client as _SyncClient
from ._client import (Holder, KeyType, Servers, _MultiLockWords, _SemaphoreWords, _additional_ms,
                      _c_long, _check_key, _keys, _long_detail, _permits, _ttl_ms, _wait_ms,
                      _warn_unreleased)
from ._errors import (ClosedError, ConnectionError, Error, InvalidArgument, LockLost,
                      LockNotAcquired, NotHeld, RenewalFailed)
from ._lost import report_callback_error

__all__ = ["Client", "Lock", "MultiLock", "Semaphore"]

_OK = _core.DISTLOCK_OK
_ECANCELED = _core.DISTLOCK_ECANCELED
_FOREVER = _core.DISTLOCK_WAIT_FOREVER
_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])
OnLost = Callable[["Lock"], Any]


async def _settled(fut: "asyncio.Future[Any]") -> None:
    """Wait until fut is done, whatever cancels the awaiting task meanwhile
    (the cleanup after a cancel is short and must not be cut)."""
    while not fut.done():
        try:
            await asyncio.wait({fut})
        except asyncio.CancelledError:
            continue


class _CallCancel:
    """One acquire's distlock_cancel, shared by the awaiting coroutine and the
    thread that runs the C call: each lets go of it once (drop), and the last
    one frees it. The loop may close, or the coroutine be collected, while
    the call runs on; and the call may end after the coroutine gave up."""

    __slots__ = ("ptr", "_refs", "_mu")

    def __init__(self) -> None:
        self.ptr = _core.distlock_cancel_new()
        self._refs = 2
        self._mu = threading.Lock()

    def drop(self) -> None:
        with self._mu:
            self._refs -= 1
            last = self._refs == 0
        if last:
            _core.distlock_cancel_free(self.ptr)


class Client:
    """An asyncio client: the same servers and options as
    :class:`distlock.Client` (see there), and ``async with``/``await close()``.
    ``pool_size``: threads for the calls that do not go through the
    library's non-blocking API (see the module doc)."""

    def __init__(self, servers: Servers, *, pool_size: int = 4, **options: Any) -> None:
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise TypeError("pool_size must be an int >= 1")
        self._sync = _SyncClient(servers, **options)
        try:
            self._lost_fd: int = self._sync._call(_core.distlock_client_lost_fd)
        except BaseException:
            self._sync.close()
            raise
        # Started on first use (ThreadPoolExecutor starts its threads on
        # demand): a client whose calls all go through the multi has none.
        self._pool = ThreadPoolExecutor(max_workers=pool_size,
                                        thread_name_prefix="distlock-aio")
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._watched: "weakref.WeakSet[Lock]" = weakref.WeakSet()
        self._locks: "weakref.WeakSet[Lock]" = weakref.WeakSet()
        self._calls: Dict[int, Any] = {}  # pool acquires under way: id -> their cancel
        self._multi: Optional[_Multi] = None  # made in the loop by _bind()
        self._owners: "weakref.WeakKeyDictionary[asyncio.Task[Any], str]" = \
            weakref.WeakKeyDictionary()
        self._closing = False

    # -- information (no network)
    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (or the client was collected). No I/O."""
        return self._closing or self._sync.closed

    @property
    def node_count(self) -> int:
        """Number of nodes N given to the constructor. No I/O."""
        return self._sync.node_count

    @property
    def quorum(self) -> int:
        """Nodes that must grant a lock: N/2+1 of N. No I/O."""
        return self._sync.quorum

    @property
    def nodes(self) -> List[str]:
        """Node URIs, with any password replaced by ``***`` (by the library). No I/O."""
        return self._sync.nodes

    def __repr__(self) -> str:
        return repr(self._sync).replace("distlock.Client", "distlock.aio.Client", 1)

    # -- lifetime
    async def close(self) -> None:
        r"""Release the locks still held through this client and free it
        (in a thread: the releases are network calls); not a
        :meth:`restore`\ d Lock, whose key only its ``release()`` deletes.
        Idempotent."""
        if self._closing:
            return
        self._closing = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._lost_fd)
        self._loop = None
        # Waiting acquires end now (ClosedError), not when their wait would
        # (the blocking client's close() waits for the calls under way).
        for cancel in list(self._calls.values()):
            _core.distlock_cancel_fire(cancel)
        multi, self._multi = self._multi, None
        if multi is not None:
            await multi.close(loop)
        fut = asyncio.get_running_loop().run_in_executor(self._pool, self._sync.close)
        await _settled(fut)
        self._pool.shutdown(wait=False)
        for lk in list(self._locks):  # the C client released them: free the handles
            lk._drop()
        fut.result()

    async def __aenter__(self) -> "Client":
        """The client itself; leaving the ``async with`` block closes it (:meth:`close`)."""
        return self

    async def __aexit__(self, *exc: Any) -> None:
        """Close the client (``await close()``): locks still held through it are released."""
        await self.close()

    def __del__(self) -> None:
        # Collected, not closed: the locks still held are abandoned, not
        # released (distlock.Client._close). The loop's reader goes first:
        # the fd closes with the C client, and a number the loop still
        # watches would be reused by the next socket opened.
        try:
            loop = getattr(self, "_loop", None)
            if loop is not None and not loop.is_closed() and not self._closing:
                loop.remove_reader(self._lost_fd)
        except Exception:  # interpreter shutdown
            pass
        try:
            multi = getattr(self, "_multi", None)
            if multi is not None:
                multi.free_now()  # before the C client it belongs to
        except Exception:  # interpreter shutdown
            pass
        try:
            self._pool.shutdown(wait=False)
            self._sync._close(release=False)
        except Exception:  # interpreter shutdown
            pass

    # -- locks
    def lock(self, key: KeyType, ttl: float = 30.0, *, wait: Optional[float] = None,
             auto_renew: bool = False, fencing: bool = False, reentrant: bool = False,
             shared: bool = False, on_lost: Optional[OnLost] = None,
             cancel_on_lost: bool = False, token: Optional[KeyType] = None) -> "Lock":
        """A :class:`Lock` on ``key`` (nothing is sent until acquired).
        As :meth:`distlock.Client.lock` (``shared=True``: a read lock),
        plus ``reentrant`` (a task that holds ``key`` through this client
        acquires it again, counted: per task, not per thread),
        ``on_lost(lock)`` (called in the event loop once per ownership found
        lost; a coroutine function is scheduled as a task) and
        ``cancel_on_lost`` (cancel the task running under ``async with
        lock:`` when the lease is found lost; the block then ends with
        :class:`distlock.LockLost`); ``token`` as for
        :meth:`distlock.Client.lock` (the caller's token, strict)."""
        return Lock(self, key, ttl, wait=wait, auto_renew=auto_renew, fencing=fencing,
                    reentrant=reentrant, shared=shared, on_lost=on_lost,
                    cancel_on_lost=cancel_on_lost, token=token)

    def restore(self, key: KeyType, token: KeyType, ttl: float = 30.0) -> "Lock":
        """A held :class:`Lock` for ``token`` holding ``key``, taken
        elsewhere (see :meth:`distlock.Client.restore`). No I/O: not a
        coroutine; ``await lock.release()`` / ``extend()`` act on the servers.
        Never released implicitly: :meth:`close` and the collector keep its key."""
        _check_key(key)
        _check_key(token, "token")
        lk = Lock(self, key, ttl)
        lk._took(self._sync._call(_core.distlock_lock_restore, key, token))
        return lk

    def semaphore(self, key: KeyType, permits: int, ttl: float = 30.0, *,
                  wait: Optional[float] = None, auto_renew: bool = False,
                  on_lost: Optional[OnLost] = None,
                  cancel_on_lost: bool = False) -> "Semaphore":
        """A :class:`Semaphore`: one permit of the semaphore ``key`` with
        ``permits`` permits (see :meth:`distlock.Client.semaphore`);
        ``on_lost`` and ``cancel_on_lost`` as for :meth:`lock`."""
        return Semaphore(self, key, permits, ttl, wait=wait, auto_renew=auto_renew,
                         on_lost=on_lost, cancel_on_lost=cancel_on_lost)

    def lock_many(self, keys: Sequence[KeyType], ttl: float = 30.0, *,
                  wait: Optional[float] = None, auto_renew: bool = False,
                  fencing: bool = False, on_lost: Optional[OnLost] = None,
                  cancel_on_lost: bool = False) -> "MultiLock":
        """A :class:`MultiLock` on every key of ``keys``, all or none, one
        lease (see :meth:`distlock.Client.lock_many`); ``on_lost`` and
        ``cancel_on_lost`` as for :meth:`lock`."""
        return MultiLock(self, keys, ttl, wait=wait, auto_renew=auto_renew, fencing=fencing,
                         on_lost=on_lost, cancel_on_lost=cancel_on_lost)

    async def holder(self, key: KeyType) -> Holder:
        """Who holds ``key`` (see :meth:`distlock.Client.holder`)."""
        return await self._in_pool(self._sync.holder, key)

    async def locked(self, key: KeyType) -> bool:
        """True when one token holds ``key`` on a quorum (see
        :meth:`distlock.Client.locked`)."""
        return await self._in_pool(self._sync.locked, key)

    # -- the token-carrying pair (the caller keeps the token), as the
    #    blocking Client's: each runs in the client's thread pool
    async def acquire_token(self, key: KeyType, token: KeyType, ttl: float = 30.0, *,
                            strict: bool = False) -> Optional[float]:
        """Take ``key`` with a caller-chosen ``token``: the validity in
        seconds, or None if another owner holds it (see
        :meth:`distlock.Client.acquire_token`)."""
        return await self._in_pool(functools.partial(self._sync.acquire_token, strict=strict),
                                   key, token, ttl)

    async def release_token(self, key: KeyType, token: KeyType) -> bool:
        """Compare-and-delete: True if ``token`` held ``key`` and it is now
        deleted, False if it did not hold it (see
        :meth:`distlock.Client.release_token`)."""
        return await self._in_pool(self._sync.release_token, key, token)

    async def extend_token(self, key: KeyType, token: KeyType, ttl: float) -> float:
        """Reset the TTL where ``token`` still holds ``key``: the new
        validity in seconds; LockLost if it no longer holds it (see
        :meth:`distlock.Client.extend_token`)."""
        return await self._in_pool(self._sync.extend_token, key, token, ttl)

    @staticmethod
    def generate_token() -> str:
        """A fresh 128-bit token (32 lowercase hex characters). No I/O."""
        return _SyncClient.generate_token()

    async def inspect(self, key: KeyType, node: int = 0
                      ) -> Optional[Tuple[str, Optional[float]]]:
        """Who holds ``key`` on node ``node`` alone: None, or ``(token,
        seconds_left)`` (see :meth:`distlock.Client.inspect`)."""
        return await self._in_pool(self._sync.inspect, key, node)

    def stats(self) -> Dict[str, int]:
        """This client's counters and histograms by name (see
        :meth:`distlock.Client.stats`). No I/O: not a coroutine."""
        return self._sync.stats()

    async def force_release(self, key: KeyType) -> int:
        """Delete ``key`` on every node, whoever holds it (administrative
        override; see :meth:`distlock.Client.force_release`): the number of
        nodes it was deleted on. Runs in the client's thread pool; raises
        the errors of the blocking call."""
        return await self._in_pool(self._sync.force_release, key)

    # -- machinery
    def _bind(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._closing:
            raise ClosedError("client is closed", _core.DISTLOCK_ECLOSED)
        if self._loop is None:
            # Made in the loop that drives it (a multi is used by one thread).
            multi = _Multi(self._sync._call(_core.distlock_multi_new), loop)
            # A weak reference: the loop must not keep an unreferenced client
            # alive (its __del__ removes the reader).
            loop.add_reader(self._lost_fd, _lost_fd_ready, weakref.ref(self))
            self._loop, self._multi = loop, multi
        elif self._loop is not loop:
            raise RuntimeError("a distlock.aio.Client is used from the event loop it was "
                               "first used in; make one per loop")
        return loop

    async def _in_pool(self, fn: Callable[..., _T], *args: Any) -> _T:
        loop = self._bind()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args))

    def _owner(self, task: "Optional[asyncio.Task[Any]]") -> str:
        if task is None:
            raise RuntimeError("reentrant locks need a task")
        owner = self._owners.get(task)
        if owner is None:
            owner = self._owners[task] = "aio:%d:%s" % (os.getpid(), uuid.uuid4().hex)
        return owner

    def _lost_fd_ready(self) -> None:
        try:
            os.read(self._lost_fd, 8)  # reset the eventfd
        except BlockingIOError:
            pass
        for lk in list(self._watched):
            lk._lost_event()

    def _driver(self) -> "_Multi":
        self._bind()
        assert self._multi is not None
        return self._multi

    async def _acquire(self, shown: Any, wait_ms: int,
                       call: Callable[[int, Any], Tuple[int, Any]]) -> Tuple[Any, str]:
        """(the C handle, "") or, when still held by another owner after
        wait_ms, (None, the library's detail of the refusal). ``call(budget,
        cancel)`` is the C acquire (a lock's, a semaphore's, several keys'),
        run in pool threads. Cancelling the awaiting task cancels the call
        (see the module doc) and gives back anything it won before re-raising."""
        loop = self._bind()
        k = _CallCancel()
        cancel = k.ptr
        done: "asyncio.Future[Tuple[int, Any, str]]" = loop.create_future()
        # ``call`` is bound to the lock: the pool thread lets go of it before
        # the awaiting task resumes, so that a lock dropped right after its
        # acquire is collected there and then (and warns if held).
        calls = [call]

        def settle(result: Optional[Tuple[int, Any, str]], exc: Optional[BaseException]) -> None:
            if exc is not None:
                done.set_exception(exc)
            else:
                done.set_result(cast(Tuple[int, Any, str], result))

        def deliver(result: Optional[Tuple[int, Any, str]],
                    exc: Optional[BaseException]) -> None:
            calls.clear()
            try:
                loop.call_soon_threadsafe(settle, result, exc)
            except RuntimeError:  # the loop is closed: nobody will take it
                if result is not None and result[1] is not None:
                    _core.distlock_lock_free(result[1])
            finally:
                k.drop()  # the call is over

        def attempt(budget: int
                    ) -> Tuple[Optional[Tuple[int, Any, str]], Optional[BaseException]]:
            try:
                status, h = calls[0](budget, cancel)
                # the refusal's detail, read in this thread before any other call
                return (status, h, _core.distlock_last_error() if status != _OK else ""), None
            except BaseException as e:  # delivered to the awaiting task
                return None, e

        def wait_work(budget: int) -> None:
            deliver(*attempt(budget))

        def first_try() -> None:
            # In a pool thread: one try. Refused and allowed to wait: the wait
            # gets a thread of its own (started here: Thread.start() waits for
            # the new thread, which must not hold up the event loop). A cancel
            # fired meanwhile ends the waiting call at once (it is sticky).
            t0 = _monotonic()
            result, exc = attempt(0)
            if (exc is None and result is not None and result[0] == _core.DISTLOCK_NOTACQUIRED
                    and wait_ms != 0):
                left = wait_ms if wait_ms == _FOREVER else \
                    max(0, wait_ms - int((_monotonic() - t0) * 1000))
                if left != 0:
                    try:
                        threading.Thread(target=wait_work, args=(left,),
                                         name="distlock-aio-wait", daemon=True).start()
                        return
                    except RuntimeError as e:  # can't start a thread
                        result, exc = None, e
            deliver(result, exc)

        # Listed (for close()) while this coroutine holds its share of it.
        self._calls[id(cancel)] = cancel
        self._pool.submit(first_try)
        try:
            status, h, detail = await asyncio.shield(done)
        except asyncio.CancelledError:
            _core.distlock_cancel_fire(cancel)
            await _settled(done)
            self._calls.pop(id(cancel), None)
            k.drop()
            if not done.cancelled() and done.exception() is None:
                st, won, _ = done.result()
                if won is not None:  # won just before the cancel came: give it back
                    await _settled(loop.run_in_executor(self._pool, _release_free, won))
            raise
        except BaseException:
            # an error of the call, or this coroutine closed under it (the
            # loop closed, then the task collected): end the call, if it
            # still runs, with nothing held
            _core.distlock_cancel_fire(cancel)
            self._calls.pop(id(cancel), None)
            k.drop()
            raise
        self._calls.pop(id(cancel), None)
        k.drop()
        if status == _ECANCELED:  # ours, and the task was not cancelled: close()
            raise ClosedError("client closed while waiting for %r" % (shown,),
                              _core.DISTLOCK_ECLOSED)
        return (h, "") if status == _OK else (None, detail)


# A Lock that never held a handle has no mutex nor list of its own (see
# Lock.__init__): these, never written to, stand in for them.
_LOOP_MUTEX = threading.Lock()
_NO_HANDLES = cast(List[Any], ())


def _lost_fd_ready(ref: "weakref.ReferenceType[Client]") -> None:
    client = ref()
    if client is not None:
        client._lost_fd_ready()


def _release_free(h: Any) -> None:
    try:
        _core.distlock_release(h)
    except Exception:
        pass
    finally:
        _core.distlock_lock_free(h)


_Outcome = Tuple[int, Any, Any]  # (status, lock handle or None, error / refusal detail / None)


class _Multi:
    """A client's ``distlock_multi``, driven by one event loop: the loop
    watches its descriptor and its timeout and calls perform; each finished
    operation settles the future (or runs the function) registered under
    its id. Loop thread only."""

    def __init__(self, m: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._m: Any = m
        self._loop = loop
        try:
            self._fd: int = _core.distlock_multi_fd(m)
        except BaseException:
            _core.distlock_multi_free(m)
            raise
        # Per running operation, by id: the op; what to do with its outcome
        # (a future to settle, or a function); the arguments it points at
        # (kept alive until it is done; an acquire's are copied by the
        # library). Dicts of the id rather than a tuple per op: thousands of
        # waiting acquires are that many fewer objects for Python's cyclic
        # garbage collector to walk (bench/aio.sh's arrival).
        self._ops: Dict[int, Any] = {}
        self._then: Dict[int, Any] = {}
        self._keep: Dict[int, Any] = {}
        # The outcomes of acquires that finished after the awaiting task was
        # cancelled (its future with it) but before the task's cancel
        # handling ran (recall() takes them): id -> outcome.
        self._late: Dict[int, _Outcome] = {}
        self._timer: Optional[asyncio.TimerHandle] = None
        self._due: Optional[float] = None
        self._soon: Optional[asyncio.Handle] = None
        self._acquires: Set[int] = set()  # the ids of the acquires among them
        self._idle: Optional["asyncio.Future[None]"] = None  # close(): every op done
        # A weak reference: the loop must not keep the client alive.
        loop.add_reader(self._fd, _multi_ready, weakref.ref(self))

    # -- starting, cancelling
    def start(self, start: Callable[[Any], Any], acquire: bool = False
              ) -> Tuple[int, "asyncio.Future[_Outcome]"]:
        """Start an operation (``start(multi)`` returns it; its errors
        raise here): its id and the future of its outcome. ``acquire``:
        Client.close() cancels it (a release or an extend runs to its end)."""
        fut: "asyncio.Future[_Outcome]" = self._loop.create_future()
        return self.start_then(start, fut, start, acquire), fut

    def start_then(self, start: Callable[[Any], Any],
                   then: "Union[Callable[[_Outcome], None], asyncio.Future[_Outcome]]",
                   keep: Any, acquire: bool = False) -> int:
        """Start an operation; ``then`` (a future to settle or a function)
        gets its outcome; ``keep`` is kept alive until it is done."""
        if self._m is None or self._idle is not None:
            raise ClosedError("client is closed", _core.DISTLOCK_ECLOSED)
        return self._add(start(self._m), then, keep, acquire)

    def start_acquire(self, lock: "Lock", wait_ms: int
                      ) -> Tuple[int, "asyncio.Future[_Outcome]"]:
        """Start ``lock``'s acquire (``lock._c_start``): its id and the
        future of its outcome. One future per waiting task and nothing
        else (no closure): see _ops."""
        if self._m is None or self._idle is not None:
            raise ClosedError("client is closed", _core.DISTLOCK_ECLOSED)
        op = lock._c_start(wait_ms, self._m)
        fut: "asyncio.Future[_Outcome]" = self._loop.create_future()
        return self._add(op, fut, None, True), fut

    def _add(self, op: Any, then: Any, keep: Any, acquire: bool) -> int:
        oid = int(_core.distlock_op_id(op))
        self._ops[oid] = op
        self._then[oid] = then
        if keep is not None:
            self._keep[oid] = keep
        if acquire:
            self._acquires.add(oid)
        self._kick()
        return oid

    async def given_back(self, oid: int, fut: "asyncio.Future[_Outcome]") -> None:
        """The task awaiting the acquire oid (on fut) was cancelled: the
        operation is cancelled (the multi's rule: a lock it wins meanwhile
        is released) and awaited, and a lock it won before the cancel came
        is released, whatever cancels this meanwhile."""
        if fut.cancelled() or not fut.done():
            fut = self._recall(oid)
        await _settled(fut)
        won = fut.result()[1]
        if won is not None:  # won just before the cancel came: give it back
            await _settled(self.release_and_free(won))

    def _recall(self, oid: int) -> "asyncio.Future[_Outcome]":
        """Cancel the acquire oid; a new future of its outcome."""
        fut: "asyncio.Future[_Outcome]" = self._loop.create_future()
        late = self._late.pop(oid, None)
        op = self._ops.get(oid) if self._m is not None else None
        if late is not None:  # it finished after the task's cancel
            fut.set_result(late)
        elif op is None:  # freed with the multi (closed from another loop): nothing won
            fut.set_result((_ECANCELED, None, None))
        else:
            self._then[oid] = fut
            _core.distlock_op_cancel(op)
            self._kick()
        return fut

    def orphan(self, oid: int) -> None:
        """Nobody awaits the acquire oid any more (its coroutine was
        closed): cancel it if it still runs; a lock it still hands over is
        released and freed here."""
        late = self._late.pop(oid, None)
        if late is not None:
            self._orphaned(late)
            return
        op = self._ops.get(oid) if self._m is not None else None
        if op is None:  # done (and freed) already
            return
        _core.distlock_op_cancel(op)
        self._then[oid] = self._orphaned
        self._kick()

    def _orphaned(self, outcome: _Outcome) -> None:
        if outcome[1] is not None:
            self.release_and_free(outcome[1])

    def release_and_free(self, h: Any) -> "asyncio.Future[None]":
        """Release h through the multi, then free it (a lock nobody holds
        any more: its outcome is nobody's)."""
        done: "asyncio.Future[None]" = self._loop.create_future()

        def then(outcome: _Outcome) -> None:
            _core.distlock_lock_free(h)
            if not done.done():
                done.set_result(None)
        try:
            self.start_then(lambda m: _core.distlock_multi_release(m, h), then, h)
        except Exception:  # the multi is closing: the blocking release, in a thread
            return cast("asyncio.Future[None]", self._loop.run_in_executor(None, _release_free, h))
        return done

    # -- driving
    def _kick(self) -> None:
        """perform soon: a new op's first requests, a cancel's end."""
        if self._soon is None:
            self._soon = self._loop.call_soon(self.perform)

    def perform(self) -> None:
        self._soon = None
        m = self._m
        if m is None:
            return
        try:
            _core.distlock_multi_perform(m)
        except Error as e:  # the multi itself failed (its epoll): say so, go on
            self._loop.call_exception_handler({
                "message": "distlock: distlock_multi_perform failed", "exception": e})
        while True:
            op = _core.distlock_multi_done(m)
            if op is None:
                break
            try:
                outcome = _core.distlock_py_op_outcome(op)
                oid = int(_core.distlock_op_id(op))
                then = self._then.pop(oid, None)
                self._ops.pop(oid, None)
                self._keep.pop(oid, None)
                acquire = oid in self._acquires
                self._acquires.discard(oid)
            finally:
                _core.distlock_op_free(op)
            if then is None:  # not ours (cannot happen): give a lock back
                if outcome[1] is not None:
                    self.release_and_free(outcome[1])
                continue
            if isinstance(then, asyncio.Future):
                if not then.done():
                    then.set_result(outcome)
                elif acquire and then.cancelled():  # for the task's cancel handling
                    self._late[oid] = outcome
                continue
            try:
                then(outcome)
            except Exception as e:
                self._loop.call_exception_handler({
                    "message": "distlock: an operation's completion failed", "exception": e})
        if self._idle is not None and not self._ops and not self._idle.done():
            self._idle.set_result(None)
        self._arm()

    def _arm(self) -> None:
        """The timer for the multi's next due time (the loop's clock)."""
        ms = _core.distlock_multi_timeout(self._m) if self._m is not None else -1
        due = None if ms < 0 else self._loop.time() + ms / 1000.0
        if self._timer is not None:
            if due is not None and self._due is not None and abs(due - self._due) < 0.0005:
                return  # the same deadline: keep the timer
            self._timer.cancel()
            self._timer = None
        self._due = due
        if due is not None:
            self._timer = self._loop.call_at(due, self._timed)

    def _timed(self) -> None:
        self._timer = None
        self.perform()

    # -- the end
    async def close(self, loop: Optional[asyncio.AbstractEventLoop]) -> None:
        """Client.close(): every operation still running is cancelled (an
        awaiting acquire ends with ClosedError) and awaited when this is the
        multi's loop; then the multi is freed. From another loop (the
        multi's is closed) it is freed in a thread: its free cancels what
        runs and releases what was won."""
        if self._m is None:
            return
        if loop is self._loop and loop is asyncio.get_running_loop():
            # grants kept for cancelled tasks that have not come for them
            # yet: given back now (those tasks then find nothing won)
            for oid in list(self._late):
                won = self._late.pop(oid)[1]
                if won is not None:
                    self.release_and_free(won)
            self._idle = loop.create_future()
            for oid in list(self._acquires):
                _core.distlock_op_cancel(self._ops[oid])
            self._kick()
            if self._ops:
                await _settled(self._idle)
            self._remove()
            m, self._m = self._m, None
            _core.distlock_multi_free(m)
        else:
            m, self._m = self._m, None
            await _settled(asyncio.get_running_loop().run_in_executor(
                None, _free_multi, m, self._clear()))

    def _remove(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None
        if not self._loop.is_closed():
            self._loop.remove_reader(self._fd)

    def free_now(self) -> None:
        """The client is collected: free the multi (nothing awaits its
        operations any more)."""
        if self._m is None:
            return
        self._remove()
        m, self._m = self._m, None
        _free_multi(m, self._clear())

    def _clear(self) -> List[Any]:
        """Forget every operation: the locks won by acquires whose task was
        cancelled and never came for them (to be freed, which releases them)."""
        won = [o[1] for o in self._late.values() if o[1] is not None]
        for d in (self._ops, self._then, self._keep, self._late):
            d.clear()
        self._acquires.clear()
        return won


def _free_multi(m: Any, won: List[Any]) -> None:
    _core.distlock_multi_free(m)  # before the client: the handles stay valid
    for h in won:
        _core.distlock_lock_free(h)


def _multi_ready(ref: "weakref.ReferenceType[_Multi]") -> None:
    multi = ref()
    if multi is not None:
        multi.perform()


class Lock:
    """A distributed lock for asyncio, made by :meth:`Client.lock`.

    ``await acquire()`` / ``await release()`` / ``await extend()``,
    ``async with lock:`` and ``@lock`` on a coroutine function. Tasks sharing
    one Lock object queue on a local asyncio.Lock first (as threads do on the
    blocking Lock); with ``reentrant=True`` the task holding it may acquire it
    again (counted; each acquire needs its release). Garbage collection is not
    a release: see :class:`distlock.Lock`.
    """

    def __init__(self, client: Client, key: KeyType, ttl: float = 30.0, *,
                 wait: Optional[float] = None, auto_renew: bool = False,
                 fencing: bool = False, reentrant: bool = False, shared: bool = False,
                 on_lost: Optional[OnLost] = None, cancel_on_lost: bool = False,
                 token: Optional[KeyType] = None) -> None:
        if not isinstance(client, Client):
            raise TypeError("client must be a distlock.aio.Client")
        _check_key(key)
        if token is not None:
            _check_key(token, "token")  # its bytes are the library's to check
        self._token = token
        if on_lost is not None and not callable(on_lost):
            raise TypeError("on_lost must be callable, not %s" % type(on_lost).__name__)
        self._client = client
        self._key = key
        self._ttl_ms = _ttl_ms(ttl)
        self._wait_ms = _wait_ms(wait, "wait")
        # Which flags go with which primitive is the library's rule: a
        # combination it does not take fails the acquire with its detail.
        self._flags = ((_core.DISTLOCK_AUTO_RENEW if auto_renew else 0)
                       | (_core.DISTLOCK_FENCING if fencing else 0)
                       | (_core.DISTLOCK_REENTRANT if reentrant else 0)
                       | (_core.DISTLOCK_SHARED if shared else 0))
        self._refused_detail = ""  # the library's detail of the last refusal
        self._reentrant = reentrant
        self._on_lost = on_lost
        self._cancel_on_lost = bool(cancel_on_lost)
        # The local lock (tasks sharing this object queue on it): a flag
        # while one task at a time uses the object, an asyncio.Lock (made in
        # the loop, Python < 3.10) once a second task comes while it is taken.
        self._local: Optional[asyncio.Lock] = None
        self._busy = False
        # The handles vs. pool threads: a mutex of its own from its first
        # handle (pool threads touch only a held Lock's); until then the
        # loop's shared one. And the handles, a stack (reentrant acquires
        # of one task): a list from the first. Fewer objects per waiting
        # task (test_aio_waiting_task_objects).
        self._hm = _LOOP_MUTEX
        self._handles: List[Any] = _NO_HANDLES
        # The handle of a release that failed without the servers saying "not
        # the owner" (see distlock.Lock._retry): release() tries again through
        # it; the next acquire frees it (which tries once more).
        self._unreleased: Any = None
        self._owner_task: "Optional[asyncio.Task[Any]]" = None
        self._was_lost = False
        self._lost_seen = False
        # the tasks running under ``async with`` (made by the first one)
        self._bodies: "Optional[List[Tuple[Optional[asyncio.Task[Any]], List[bool]]]]" = None
        # extends of the multi on the wire, by handle (id): count; and the
        # handles released meanwhile, freed when the last of them ends
        self._extending: Dict[int, int] = {}
        self._free_later: Dict[int, Any] = {}
        # (listed in client._locks, for close(), once it holds a handle)

    @property
    def key(self) -> KeyType:
        """The key this lock is for (as given: str or bytes)."""
        return self._key

    @property
    def shared(self) -> bool:
        """True for a read lock (``shared=True``; see :meth:`distlock.Client.lock`)."""
        return bool(self._flags & _core.DISTLOCK_SHARED)

    @property
    def ttl(self) -> float:
        """The TTL each acquire asks for, in seconds (whole milliseconds)."""
        return self._ttl_ms / 1000.0

    # -- what the subclasses (Semaphore, MultiLock) change: the C acquire
    #    (run in the client's threads) and how messages name the lease
    def _c_acquire(self, budget: int, cancel: Any, owner: Optional[str]) -> Tuple[int, Any]:
        status, h = self._client._sync._call(_core.distlock_py_acquire_with, self._key,
                                             self._ttl_ms, budget, self._flags, owner, cancel,
                                             self._token)
        return int(status), h

    # Through the client's multi (the library's non-blocking API): every
    # lock but a reentrant one (the multi refuses DISTLOCK_REENTRANT: the
    # owner is a task, counted in the library) and a set of keys (no
    # operation of the multi for several keys).
    _by_multi = True

    def _c_start(self, wait_ms: int, m: Any) -> Any:
        return _core.distlock_py_multi_acquire(m, self._key, self._ttl_ms, wait_ms, self._flags,
                                               self._token)

    def _fix_error(self, e: Error) -> Error:
        return e

    def _shown(self) -> Any:
        return self._key

    def _what(self) -> str:
        return "%s %r" % ("read lock" if self.shared else "lock", self._key)

    def _repr_extra(self) -> str:
        return " shared" if self.shared else ""

    def _refused_text(self) -> str:
        return "%s is held by another owner" % (self._what(),)

    def _top(self) -> Any:
        return self._handles[-1] if self._handles else self._unreleased

    async def acquire(self, blocking: bool = True, timeout: Optional[float] = None) -> bool:
        """Take the lock: True when acquired, False when another owner still
        holds it once the wait is over (``blocking=False``: try once;
        ``timeout``: seconds, overrides the lock's ``wait``; None or -1 keeps
        it). Raises on errors. Never blocks the event loop; cancelling the
        task cancels the wait at once, with nothing held."""
        return bool(await self._acquired(blocking, timeout, False))

    async def _acquired(self, blocking: bool, timeout: Optional[float], enter: bool) -> Any:
        """acquire()'s work; with ``enter`` that of ``async with`` (see
        __aenter__): the Lock itself, LockNotAcquired when refused."""
        if not blocking:
            if timeout is not None and timeout != -1:
                raise ValueError("can't specify a timeout for a non-blocking call")
            wait_ms = 0
        elif timeout is None or timeout == -1:
            wait_ms = self._wait_ms
        else:
            wait_ms = _wait_ms(timeout, "timeout")
        task = asyncio.current_task()
        owner = self._client._owner(task) if self._reentrant else None
        # One coroutine from ``async with`` to the operation's future (this
        # one): no helper coroutine, closure, shield or asyncio.Lock per
        # waiting task, whose objects Python's cyclic garbage collector
        # would walk while thousands wait (test_aio_waiting_task_objects).
        local = False  # taken here: given back on failure
        if not (self._reentrant and self._handles and self._owner_task is task):
            # (else: counted, same task)
            lk = self._local
            if lk is None and not self._busy and not self._handles:
                self._busy = True
            else:
                if lk is None:
                    lk = self._local = asyncio.Lock()
                    # the task holding the flag's, or a restored ownership's
                    # (Client.restore): taken for it at once
                    await lk.acquire()
                if wait_ms == 0:
                    if lk.locked():
                        return self._refused(enter)
                    await lk.acquire()
                elif wait_ms == _FOREVER:
                    await lk.acquire()
                else:
                    t0 = _monotonic()
                    try:
                        await asyncio.wait_for(lk.acquire(), wait_ms / 1000.0)
                    except asyncio.TimeoutError:
                        return self._refused(enter)
                    wait_ms = max(0, wait_ms - int((_monotonic() - t0) * 1000))
            local = True
        try:
            if self._on_lost is not None or self._cancel_on_lost:
                self._client._bind()  # the lost fd is watched before any loss
            if self._by_multi and not self._reentrant:
                # The acquire as an operation of the client's multi.
                # Cancelling the awaiting task cancels the operation and
                # gives back anything it won before re-raising.
                multi = self._client._driver()
                try:
                    oid, fut = multi.start_acquire(self, wait_ms)
                except Error as e:
                    raise self._fix_error(e) from None
                try:
                    status, h, err = await fut
                except asyncio.CancelledError:
                    await multi.given_back(oid, fut)
                    raise
                except BaseException:
                    # this coroutine closed under it (the loop closed, then
                    # the task collected): the operation ends, if it still
                    # runs, with nothing held
                    multi.orphan(oid)
                    raise
                if status == _ECANCELED:  # ours, and the task was not cancelled: close()
                    if h is not None:
                        await _settled(multi.release_and_free(h))
                    raise ClosedError("client closed while waiting for %r" % (self._shown(),),
                                      _core.DISTLOCK_ECLOSED)
                if status < 0:
                    raise self._fix_error(err)
                h, self._refused_detail = (h, "") if status == _OK else (None, err)
            else:
                h, self._refused_detail = await self._client._acquire(
                    self._shown(), wait_ms, functools.partial(self._c_acquire, owner=owner))
        except BaseException:
            if local:
                self._local_release()
            raise
        if h is None:
            if local:
                self._local_release()
            return self._refused(enter)
        self._took(h)
        if local:
            self._owner_task = task
        if not enter:
            return True
        if self._bodies is None:
            self._bodies = []
        self._bodies.append((task, [False]))
        return self

    def _refused(self, enter: bool) -> bool:
        if enter:
            # the library's detail of the refusal (which key, after how long)
            raise LockNotAcquired(self._refused_text(), None, self._refused_detail)
        return False

    def _local_release(self) -> None:
        if self._local is not None and self._local.locked():
            self._local.release()
        self._busy = False

    def _took(self, h: Any) -> None:
        """An acquire won h: this object holds it (on top of the stack)."""
        if self._hm is _LOOP_MUTEX:
            self._hm = threading.Lock()
        with self._hm:
            old = None
            if not self._handles:
                self._was_lost = False
                self._lost_seen = False
                old, self._unreleased = self._unreleased, None
                self._handles = [h]
            else:
                self._handles.append(h)
        self._client._locks.add(self)  # close() frees its handles
        if old is not None:  # a failed release never retried: no network
            _core.distlock_lock_free(old)
        if self._on_lost is not None or self._cancel_on_lost:
            self._client._watched.add(self)
            self._lost_event()  # a loss before we watched

    async def release(self) -> None:
        """Release (compare-and-delete). Raises LockLost if the lock had
        expired or was taken meanwhile (another owner's key is untouched),
        NotHeld if this object does not hold it."""
        with self._hm:
            retry = not self._handles and self._unreleased is not None
            if retry:
                h, self._unreleased = self._unreleased, None
                last = False  # the local lock and the loss watch went with the failed release
            elif not self._handles:
                if self._client.closed:
                    raise ClosedError("client is closed", _core.DISTLOCK_ECLOSED)
                raise NotHeld("release of %r, which this %s object does not hold"
                              % (self._shown(), type(self).__name__))
            elif self._reentrant and self._owner_task is not asyncio.current_task():
                # the count is the owner task's: another task popping it would
                # make the owner's own releases delete the key under its block
                raise NotHeld("release of %r from a task that does not hold it (a "
                              "reentrant lock is released by its owner task)"
                              % (self._shown(),))
            else:
                h = self._handles.pop()
                last = not self._handles
        if last:
            self._client._watched.discard(self)
            self._owner_task = None
            self._local_release()
        if self._by_multi and not self._reentrant:
            await self._release_op(h)
            return
        fut = asyncio.get_running_loop().run_in_executor(self._client._pool,
                                                         self._release_blocking, h)
        await _settled(fut)  # finish even if cancelled: the handle is freed or kept
        fut.result()

    async def _release_op(self, h: Any) -> None:
        """The release through the client's multi: a release of a key that
        tasks of this client wait for hands it to the next one at once."""
        try:
            _, fut = self._client._driver().start(
                lambda m: _core.distlock_multi_release(m, h))
        except BaseException as e:
            self._released(h, e)
            raise
        await _settled(fut)  # finish even if cancelled: the handle is freed or kept
        status, _, err = fut.result()
        self._released(h, err if status < 0 else None)
        if status < 0:
            raise err

    def _released(self, h: Any, e: Optional[BaseException]) -> None:
        """After a release through the multi (e: its error, None when it
        succeeded): what _release_blocking does after its call."""
        if isinstance(e, LockLost) or (e is None and _core.distlock_lock_lost(h)):
            self._was_lost = True
            self._free(h)
        elif e is None:
            self._free(h)
        else:
            with self._hm:  # kept for a retry, unless a new acquire came meanwhile
                if self._handles or self._unreleased is not None:
                    self._free(h)
                else:
                    self._unreleased = h

    def _free(self, h: Any) -> None:
        """Free a handle nobody holds, once no extend of the multi uses it
        (an extend whose task was cancelled runs on to its end)."""
        if id(h) in self._extending:
            self._free_later[id(h)] = h
        else:
            _core.distlock_lock_free(h)

    def _release_blocking(self, h: Any) -> None:
        try:
            # A retry goes through the same handle: the core sends the
            # release again when the last one got no verdict.
            self._client._sync._call_handle(_core.distlock_release, h)
        except LockLost:
            self._was_lost = True
            _core.distlock_lock_free(h)
            raise
        except BaseException:
            with self._hm:  # kept for a retry, unless a new acquire came meanwhile
                if self._handles or self._unreleased is not None:
                    _core.distlock_lock_free(h)
                else:
                    self._unreleased = h
            raise
        if _core.distlock_lock_lost(h):
            self._was_lost = True
        _core.distlock_lock_free(h)

    async def extend(self, ttl: Optional[float] = None, *,
                     additional: Optional[float] = None) -> float:
        """Reset the TTL (default: the lock's) on every node where it is
        still ours; returns the new validity in seconds. ``additional``:
        add that many seconds to the validity left instead (not with
        ``ttl``). LockLost if it was lost, RenewalFailed if no quorum
        answered, NotHeld if not held."""
        add_ms = _additional_ms(ttl, additional)
        ms = self._ttl_ms if ttl is None else _ttl_ms(ttl)
        if not self._handles:
            raise NotHeld("extend of %r, which this %s object does not hold"
                          % (self._shown(), type(self).__name__))
        if not (self._by_multi and not self._reentrant):
            return await self._client._in_pool(self._extend_blocking, ms, add_ms)
        h = self._top()
        if add_ms is not None:  # the validity left when the extend goes out
            ms = _core.distlock_lock_validity_ms(h) + add_ms
        multi = self._client._driver()
        fut: "asyncio.Future[_Outcome]" = asyncio.get_running_loop().create_future()
        hid = id(h)

        def then(outcome: _Outcome) -> None:
            n = self._extending.pop(hid) - 1
            if n:
                self._extending[hid] = n
            elif hid in self._free_later:  # released meanwhile: the handle is free now
                _core.distlock_lock_free(self._free_later.pop(hid))
            if not fut.done():
                fut.set_result(outcome)
        multi.start_then(lambda m: _core.distlock_multi_extend(m, h, ms), then, h)
        self._extending[hid] = self._extending.get(hid, 0) + 1
        # A cancel of the awaiting task ends the wait, not the extend.
        status, _, err = await asyncio.shield(fut)
        if status >= 0:
            return _core.distlock_lock_validity_ms(h) / 1000.0
        if isinstance(err, ConnectionError) and not isinstance(err, (LockLost, RenewalFailed)):
            raise RenewalFailed("renewal of %r failed: %s" % (self._shown(), err.message),
                                err.status, err.detail) from err
        raise err

    def _extend_blocking(self, ms: int, add_ms: Optional[int] = None) -> float:
        with self._hm:
            h = self._top()
            if h is None:
                raise NotHeld("extend of %r, which this %s object does not hold"
                              % (self._shown(), type(self).__name__))
            if add_ms is not None:  # the validity left when the extend goes out
                ms = _core.distlock_lock_validity_ms(h) + add_ms
            try:
                self._client._sync._call_handle(_core.distlock_extend, h, ms)
            except (LockLost, RenewalFailed):
                raise
            except ConnectionError as e:
                raise RenewalFailed("renewal of %r failed: %s" % (self._shown(), e.message),
                                    e.status, e.detail) from e
            return _core.distlock_lock_validity_ms(h) / 1000.0

    # -- state (no network, never blocks)
    @property
    def held(self) -> bool:
        """True while acquired, not found lost and its validity not run out. No I/O."""
        h = self._top()
        return (h is not None and not _core.distlock_lock_lost(h)
                and _core.distlock_lock_validity_ms(h) > 0)

    @property
    def token(self) -> Optional[str]:
        """The token the key holds while this lock is ours; None when not held. No I/O."""
        h = self._top()
        return None if h is None else _core.distlock_lock_token(h)

    @property
    def fence(self) -> Optional[int]:
        """The fencing token of this ownership (``fencing=True``), else None. No I/O."""
        h = self._top()
        if h is None:
            return None
        v = _core.distlock_lock_fence(h)
        return None if v < 0 else v

    @property
    def validity(self) -> float:
        """Seconds of validity left; 0.0 when not held, lost or expired. No I/O."""
        h = self._top()
        return 0.0 if h is None else _core.distlock_lock_validity_ms(h) / 1000.0

    @property
    def lost(self) -> bool:
        """True once the lock was found lost (by auto-renewal, extend or
        release); stays True after release until the next acquire."""
        h = self._top()
        return self._was_lost if h is None else bool(_core.distlock_lock_lost(h))

    def check(self) -> None:
        """Raise LockLost if the lease was found lost or ran out, NotHeld if
        not held. No network."""
        h = self._top()
        if h is None:
            if self._was_lost:
                raise LockLost("%s was lost" % (self._what(),), _core.DISTLOCK_ENOTOWNER)
            raise NotHeld("check of %r, which this %s object does not hold"
                          % (self._shown(), type(self).__name__))
        if _core.distlock_lock_lost(h) or _core.distlock_lock_validity_ms(h) <= 0:
            raise LockLost("%s was lost" % (self._what(),), _core.DISTLOCK_ENOTOWNER)

    # -- loss (the event loop, through Client._lost_fd_ready)
    def _lost_event(self) -> None:
        h = self._top()
        if h is None or self._lost_seen or not _core.distlock_lock_lost(h):
            return
        self._lost_seen = True
        if self._cancel_on_lost:
            for task, flag in self._bodies or ():
                if task is not None and not task.done():
                    flag[0] = True
                    task.cancel()
        cb = self._on_lost
        if cb is not None:
            try:
                res = cb(self)
                if inspect.isawaitable(res):
                    asyncio.ensure_future(res)
            except Exception as e:
                report_callback_error("the on_lost callback of %r" % (self,), e, cb)

    # -- async with / decorator
    def __aenter__(self) -> "Coroutine[Any, Any, Lock]":
        """Acquire (waiting as the Lock's ``wait`` says); the Lock itself.

        Raises LockNotAcquired when another owner still holds it after the
        wait, and the errors of :meth:`acquire`."""
        # the acquire's own coroutine, not one awaiting it: one object fewer
        # per waiting task
        return cast("Coroutine[Any, Any, Lock]", self._acquired(True, None, True))

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        """Release the lock. Raises LockLost when the lease was found lost
        while the block ran (with ``cancel_on_lost``, the task was cancelled
        and the block ends with LockLost instead of CancelledError)."""
        task, flag = (self._bodies or []).pop()
        cancelled_by_loss = flag[0]
        lost: Optional[LockLost] = None
        if cancelled_by_loss or self.lost:
            lost = LockLost("%s was lost while held%s" % (
                self._what(), "; the task was cancelled" if cancelled_by_loss else ""),
                _core.DISTLOCK_ENOTOWNER)
        try:
            await self.release()
        except LockLost as e:
            lost = lost or e
        except Error:
            # Already lost (its lease ran out unconfirmed: servers not
            # replying): the release failing too is no news; the block ends
            # with LockLost, as documented, and our cancel is taken back.
            if lost is None:
                raise
        if cancelled_by_loss and task is not None:
            uncancel = getattr(task, "uncancel", None)
            if uncancel is not None:  # Python >= 3.11: the cancel was ours
                uncancel()
        if lost is not None:
            raise lost from (exc if isinstance(exc, asyncio.CancelledError) else None)

    def __call__(self, fn: _F) -> _F:
        """Decorate a coroutine function: each call runs under ``async with
        self``. TypeError for a function that is not a coroutine function."""
        if not inspect.iscoroutinefunction(fn):
            raise TypeError("a distlock.aio.Lock decorates coroutine functions")

        @functools.wraps(fn)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            async with self:
                return await fn(*args, **kwargs)
        return cast(_F, wrapper)

    def __repr__(self) -> str:
        state = "held" if self._handles else "not held"
        return "<distlock.aio.%s %r%s ttl=%gs %s>" % (type(self).__name__, self._shown(),
                                                     self._repr_extra(), self.ttl, state)

    def _drop(self) -> None:
        """Client.close(): the C client released the locks; free the handles."""
        with self._hm:
            handles, self._handles = list(self._handles), _NO_HANDLES
            if self._unreleased is not None:
                handles.append(self._unreleased)
                self._unreleased = None
            # released during an extend the multi's end finished (from another loop)
            handles.extend(self._free_later.values())
            self._free_later.clear()
            self._extending.clear()
        for h in handles:
            _core.distlock_lock_free(h)

    def __del__(self) -> None:
        # Garbage-collected while held: NOT released (see distlock.Lock's
        # __del__): the lease runs to its TTL, its renewal stops, and a
        # ResourceWarning names the key.
        handles = getattr(self, "_handles", None)
        unreleased = getattr(self, "_unreleased", None)
        if unreleased is not None:  # a failed release, never retried
            handles = [unreleased] + (handles or [])
            self._unreleased = None
        if not handles:
            return
        self._handles = _NO_HANDLES
        _warn_unreleased("distlock.aio." + type(self).__name__, self._shown(), self._ttl_ms,
                         self)
        sync = self._client._sync
        while handles:
            try:
                sync._call_handle(_core.distlock_lock_abandon, handles[-1])
            except Exception:  # client closed or shutdown
                # Collected with its client, whose finalizer ran first: the
                # C client abandoned the locks and is gone; free memory only.
                if getattr(sync, "_freed", False):
                    for h in handles:
                        _core.distlock_lock_free(h)
                return
            handles.pop()


class Semaphore(_SemaphoreWords, Lock):
    """One permit of a distributed semaphore for asyncio, made by
    :meth:`Client.semaphore` (see :class:`distlock.Semaphore`): Lock's whole
    surface (``await acquire()``, ``async with``, ``@sem``...) plus
    ``permits``. Tasks sharing one object queue on it; make one object per
    concurrent holder."""

    def __init__(self, client: Client, key: KeyType, permits: int, ttl: float = 30.0, *,
                 wait: Optional[float] = None, auto_renew: bool = False,
                 on_lost: Optional[OnLost] = None, cancel_on_lost: bool = False) -> None:
        self._permits = _permits(permits)
        Lock.__init__(self, client, key, ttl, wait=wait, auto_renew=auto_renew,
                      on_lost=on_lost, cancel_on_lost=cancel_on_lost)

    def _c_acquire(self, budget: int, cancel: Any, owner: Optional[str]) -> Tuple[int, Any]:
        try:
            status, h = self._client._sync._call(_core.distlock_py_semaphore_acquire, self._key,
                                                 _c_long(self._permits), self._ttl_ms, budget,
                                                 self._flags, cancel)
            return int(status), h
        except InvalidArgument as e:
            raise _long_detail(e, self._permits) from None

    def _c_start(self, wait_ms: int, m: Any) -> Any:
        return _core.distlock_multi_semaphore_acquire(m, self._key, _c_long(self._permits),
                                                      self._ttl_ms, wait_ms, self._flags, None)

    def _fix_error(self, e: Error) -> Error:
        return _long_detail(e, self._permits) if isinstance(e, InvalidArgument) else e


class MultiLock(_MultiLockWords, Lock):
    """Several keys locked all or none as one lease, for asyncio, made by
    :meth:`Client.lock_many` (see :class:`distlock.MultiLock`): Lock's whole
    surface plus ``keys`` and ``fences``."""

    def __init__(self, client: Client, keys: Sequence[KeyType], ttl: float = 30.0, *,
                 wait: Optional[float] = None, auto_renew: bool = False,
                 fencing: bool = False, on_lost: Optional[OnLost] = None,
                 cancel_on_lost: bool = False) -> None:
        self._keys = _keys(keys)
        Lock.__init__(self, client, self._keys[0] if self._keys else "", ttl, wait=wait,
                      auto_renew=auto_renew, fencing=fencing, on_lost=on_lost,
                      cancel_on_lost=cancel_on_lost)

    @property
    def fences(self) -> Optional[List[int]]:
        """One fencing token per key, in the order of :attr:`keys`
        (``fencing=True`` and held), else None. No I/O."""
        h = self._top()
        if h is None or not self._flags & _core.DISTLOCK_FENCING:
            return None
        return [int(_core.distlock_lock_fence_at(h, i))
                for i in range(_core.distlock_lock_key_count(h))]

    _by_multi = False  # the multi has no operation for several keys

    def _c_acquire(self, budget: int, cancel: Any, owner: Optional[str]) -> Tuple[int, Any]:
        status, h = self._client._sync._call(_core.distlock_py_acquire_many, self._keys,
                                             self._ttl_ms, budget, self._flags, cancel)
        return int(status), h
