"""Client and Lock: the Pythonic layer over the SWIG module distlock._core.

Times are seconds (float or int) here and milliseconds in C. Errors from C
arrive already as distlock exceptions (see _errors.py); this layer only adds
the Python-side checks (types, NaN...) and the threading.Lock-like behaviour.
"""
import contextlib
import math
import os
import sys
import threading
import warnings
import weakref
from typing import (Any, Callable, List, NamedTuple, NoReturn, Optional, Sequence,
                    SupportsIndex, Tuple, TypeVar, Union)

from . import _core
from ._errors import (ClosedError, ConnectionError, InvalidArgument, LockLost,
                      LockLostInterrupt, LockNotAcquired, NotHeld, RenewalFailed)
from ._lost import LostWatcher, report_callback_error

__all__ = ["Client", "Holder", "Lock", "MultiLock", "Semaphore", "options"]

Servers = Union[str, Sequence[str]]
KeyType = Union[str, bytes]
OnLost = Callable[["Lock"], Any]
_R = TypeVar("_R")

_OK = _core.DISTLOCK_OK
_EINVAL = _core.DISTLOCK_EINVAL
_FOREVER = _core.DISTLOCK_WAIT_FOREVER
_WAIT_FOREVER_ABOVE_MS = 10 ** 12  # ~31 years: treat as "forever"


def _invalid(detail: str) -> InvalidArgument:
    return InvalidArgument(_core.distlock_strerror(_EINVAL), _EINVAL, detail)


def _seconds_to_ms(value: Any, what: str) -> int:
    """Seconds (int/float) to whole milliseconds, rounded up; the range is
    the library's to check."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("%s must be a number of seconds, not %s" % (what, type(value).__name__))
    if math.isnan(value) or math.isinf(value):
        raise _invalid("%s must be finite, got %r" % (what, value))
    return int(math.ceil(value * 1000))


# Every live Client, for the fork handler below.
_CLIENTS: "weakref.WeakSet[Client]" = weakref.WeakSet()


def _forget_calls_of_vanished_threads() -> None:
    """In a forked child: the threads that were inside a client's calls at
    the fork do not exist here, so those calls never end and leave the
    count; without this the child's close() would wait for them forever.
    The forking thread's own calls stay counted: they do end here."""
    for client in list(_CLIENTS):
        inflight = vars(client).get("_inflight")
        if inflight is not None:
            inflight.forget_other_threads()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_calls_of_vanished_threads)

# The library's answers of _ttl_ms() for plain int and float values it took
# (a program uses a few TTLs, a Lock made per acquisition asks each time):
# a memo of the rule's results, the rule stays the library's.
_TTL_MS_MEMO: "dict[float, int]" = {}
_TTL_MS_MEMO_MAX = 64


def _ttl_ms(ttl: Any) -> int:
    """The library's one TTL rule (distlock_ttl_from_seconds): rounded up to
    whole ms, 1 ms .. DISTLOCK_TTL_MAX; else InvalidArgument naming the value."""
    t = type(ttl)
    if t is float or t is int:  # not bool, nor a subclass with its own __float__
        ms = _TTL_MS_MEMO.get(ttl)
        if ms is not None:
            return ms
    elif isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise TypeError("ttl must be a number of seconds, not %s" % type(ttl).__name__)
    try:
        ms = int(_core.distlock_ttl_from_seconds(float(ttl)))
        if (t is float or t is int) and len(_TTL_MS_MEMO) < _TTL_MS_MEMO_MAX:
            _TTL_MS_MEMO[ttl] = ms
        return ms
    except OverflowError:  # an int beyond any double: the largest double of its sign
        pass               # breaks the same rule; the detail names the int given
    try:
        return int(_core.distlock_ttl_from_seconds(sys.float_info.max if ttl > 0 else -sys.float_info.max))
    except InvalidArgument as e:
        raise InvalidArgument(e.message, e.status,
                              "%s, got %r" % (e.detail.rsplit(", got ", 1)[0], ttl)) from None


def _wait_ms(wait: Any, what: str) -> int:
    if wait is None:
        return _FOREVER
    ms = _seconds_to_ms(wait, what)
    if ms < 0:  # C reads -1 as "forever": a negative wait is a mistake, not that
        raise _invalid("%s must be >= 0 seconds or None, got %r" % (what, wait))
    return _FOREVER if ms > _WAIT_FOREVER_ABOVE_MS else ms


def _additional_ms(ttl: Any, additional: Any) -> Optional[int]:
    """extend(additional=...): the seconds to add as whole ms (the TTL rule:
    > 0, rounded up), None when not given; TypeError with ttl as well. The
    new TTL is the validity left plus this, taken under the handle's lock."""
    if additional is None:
        return None
    if ttl is not None:
        raise TypeError("extend() takes ttl or additional, not both")
    return _ttl_ms(additional)


def _not_picklable(what: str) -> NoReturn:
    raise TypeError("cannot pickle or copy a %s: it stands for live connections "
                    "(and their credentials), which can't be transferred" % what)


def _check_key(key: Any, what: str = "key") -> None:
    if not isinstance(key, (str, bytes)):
        raise TypeError("%s must be str or bytes, not %s" % (what, type(key).__name__))


def options() -> List[Tuple[str, int, int, int, int, int, str]]:
    """The library's option table: (name, id, type, min, max, default,
    summary) per option; type is DISTLOCK_OPTION_LONG or _STRING, min/max/
    default are in the C unit (ms for a name ending in ``_ms``)."""
    return _core.distlock_py_options()


def _option_setting(name: str, value: Any) -> Tuple[int, Union[int, str], str, Any]:
    """Client's keyword `name` = `value` as (option id, value for C, name,
    value as given): the row comes from the library's table; this only
    converts Python's units (seconds, a fraction, bool) to the table's.
    The library checks ranges and types when the value is set."""
    if name == "drift_factor":
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or math.isnan(value) or math.isinf(value):
            raise TypeError("drift_factor must be a finite number, not %r" % (value,))
        return _core.DISTLOCK_OPT_DRIFT_PPM, int(round(value * 1e6)), name, value
    row = None
    if not name.endswith("_ms"):
        try:
            row = _core.distlock_py_option(name + "_ms")
        except InvalidArgument:
            pass
    if row is not None:
        return row[1], _seconds_to_ms(value, name), name, value
    if name == "drift_ppm" or name.endswith("_ms"):
        raise TypeError("%s: Python spells it %s" % (
            name, "drift_factor (a fraction)" if name == "drift_ppm"
            else "%s (seconds)" % name[:-3]))
    try:
        row = _core.distlock_py_option(name)
    except InvalidArgument as e:  # an unknown keyword argument: Python's TypeError
        raise TypeError("Client(): %s" % e.detail) from None
    if isinstance(value, (int, str)):  # bool is an int: True is 1
        return row[1], int(value) if isinstance(value, int) else value, name, value
    raise TypeError("%s must be %s, not %s" % (
        name, "int or str" if row[2] == _core.DISTLOCK_OPTION_LONG else "str",
        type(value).__name__))


class Client:
    """A connection to N >= 1 independent Redis masters (quorum N/2+1).

    ``servers`` is one URI, a comma-separated list, or a list of URIs, each
    ``redis://``, ``rediss://`` (TLS), ``unix://``, ``redis-sentinel://``,
    ``rediss-sentinel://``, ``redis-cluster://`` or ``rediss-cluster://``,
    in the C library's grammar (``distlock_client_new`` in ``distlock.h``),
    e.g. ``redis://[user[:password]@]host[:port][/db]`` or
    ``unix:///path/to.sock[?db=N]``. Connections are made lazily.

    Options are keyword arguments named as in the library's option table
    (``distlock.options()`` lists them, with their ranges and defaults; None
    keeps the library default), in Python's units: an option whose C name
    ends in ``_ms`` drops the suffix and takes seconds, rounded up to whole
    ms (``connect_timeout=2.5`` sets ``connect_timeout_ms`` 2500), and
    ``drift_factor`` is ``drift_ppm`` as a fraction (0.02 is 20000 ppm). Integer options
    take an int (or a bool: ``tls_verify``, ``owner_info``, ``stats``),
    string options a str. The library checks every value: an unknown name
    raises TypeError, a value out of range or of the wrong type
    InvalidArgument, each with the library's message naming the option.
    Among them: ``connect_timeout`` / ``command_timeout`` per node;
    ``drift_factor`` / ``drift_min`` for the Redlock clock drift;
    ``retry_min`` / ``retry_max`` for the backoff of waiting acquires;
    ``username`` / ``password`` for every node (ACL).
    WAIT for replicas: ``wait_replicas`` (0 = off) and ``wait_timeout``:
    each node's grant, extend or fence counts only once that many of its
    replicas acknowledged it within ``wait_timeout``; otherwise it is undone
    and the error says "<node>: 0 of 1 replicas acknowledged within 100 ms".

    Owner metadata: ``owner_info=True`` makes every acquire also store who
    holds the lock (host, pid, program, since, and ``owner_label`` if given;
    giving a label turns it on) in the hash ``{key}:owner`` beside it, with
    the lock's TTL; ``distlock status KEY`` shows it. Off by default: nothing
    else is written.

    TLS (``rediss://`` nodes; a node's URI options win): ``tls_ca_file`` /
    ``tls_ca_dir`` (trusted CAs; default: the system store), ``tls_cert`` /
    ``tls_key`` (client certificate, mutual TLS), ``tls_server_name`` (name
    checked and sent as SNI; default: the URI's host) and ``tls_verify``
    (True; False turns certificate checks OFF and warns on stderr).

    A client may be shared by any number of threads. ``close()`` (or leaving
    ``with Client(...) as c:``) waits for calls in progress, releases every
    lock still held through it and closes its sockets. Called from inside a
    call of the client (a signal handler that interrupts a waiting
    ``acquire()``), it cancels that call instead of waiting for it.

    Passwords are never shown: ``repr()``, ``nodes`` and exception texts
    show ``***`` in their place, and a client can't be pickled.
    """

    def __init__(self, servers: Servers, **options: Any) -> None:
        # Each Lock keeps the CallCount below, made once: a second __init__
        # would give the client another one, whose close() the Locks made
        # before it would never see (they would go on acquiring through the
        # old C client, which nothing frees).
        if "_inflight" in vars(self):
            raise TypeError("a distlock.Client is initialised once: make a new one")
        # The calls in progress (see _call): append() and pop() are each
        # atomic (a counter in C, with a deque's two methods), so a call's
        # accounting is two C calls instead of two blocks under self._mutex.
        # It also holds _closed, _h and _locks (the properties below), which
        # Lock's C methods read there, beside the count, directly.
        self._inflight = _core.CallCount()
        _CLIENTS.add(self)
        self._mutex = threading.Lock()
        self._idle = threading.Condition(self._mutex)
        self._freed = False  # the C client is gone: its handles are only memory
        # A close() made inside a call of this client (see _close): True
        # until the last call in progress finishes it.
        self._close_deferred = False
        self._watcher: Optional[LostWatcher] = None
        if isinstance(servers, (list, tuple)):
            for s in servers:
                if not isinstance(s, str):
                    raise TypeError("servers must be str or a list of str, found %s"
                                    % type(s).__name__)
            servers = ",".join(servers)
        elif not isinstance(servers, str):
            raise TypeError("servers must be str or a list of str, not %s"
                            % type(servers).__name__)
        # Every name is looked up before the client exists: a typo costs nothing.
        settings = [_option_setting(name, value) for name, value in options.items()
                    if value is not None]
        # (the library's detail quotes the configuration masked)
        self._h = _core.distlock_client_new(servers)
        try:
            # Ctrl-C (any signal whose handler raises) ends a waiting
            # acquire() in the main thread promptly; nothing is left held.
            _core.distlock_py_catch_signals(self._h, threading.main_thread().ident or 0)
            label = False
            for opt, value, what, given in settings:
                self._set(opt, value, what, given)
                label = label or (opt == _core.DISTLOCK_OPT_OWNER_LABEL and value != "")
            if label and options.get("owner_info") is None:  # a label turns it on
                _core.distlock_client_set(self._h, _core.DISTLOCK_OPT_OWNER_INFO, 1)
        except BaseException:
            h, self._h = self._h, None
            _core.distlock_client_free(h)
            raise

    def _set(self, opt: int, value: Union[int, str], what: str, given: Any) -> None:
        try:
            if isinstance(value, str):
                _core.distlock_client_set_str(self._h, opt, value)
            else:
                _core.distlock_client_set(self._h, opt, value)
        except InvalidArgument as e:  # name the Python option and its value, as given
            shown = "***" if what == "password" else repr(given)
            raise InvalidArgument(e.message, e.status,
                                  "%s=%s: %s" % (what, shown, e.detail)) from None

    @property
    def _h(self) -> Any:
        """The C client's handle; None before it is made and once closed."""
        return self._inflight.h

    @_h.setter
    def _h(self, h: Any) -> None:
        self._inflight.h = h

    @property
    def _closed(self) -> bool:
        return self._inflight.closed

    @_closed.setter
    def _closed(self, closed: bool) -> None:
        self._inflight.closed = closed

    @property
    def _locks(self) -> "List[Lock]":
        """Every Lock made on this client and not yet finalized (a new
        list): each links itself into the CallCount when made and out in
        its __del__, with no allocation (a set of weak references cost a
        weakref, an add and a discard per Lock)."""
        locks: "List[Lock]" = self._inflight.locks
        return locks

    # -- in-flight accounting: close() must not free the C client under a
    #    call that another thread is making with the GIL released. A call
    #    enters (appends to _inflight) and then reads _closed; close() sets
    #    _closed and then waits for _inflight to empty. Whichever comes
    #    second sees the other: the call backs out with ClosedError, or
    #    close() waits for it (and self._h stays valid meanwhile).
    @property
    def _busy(self) -> int:
        """Calls in progress."""
        return len(self._inflight)

    def _enter(self) -> Any:
        self._inflight.append(None)
        if self._closed:
            self._leave()
            raise ClosedError("client is closed", _core.DISTLOCK_ECLOSED)
        return self._h

    def _leave(self) -> None:
        self._inflight.pop()
        if self._closed:  # close() may be waiting for this call
            self._wake_closer()

    # _call and _call_handle are _enter(), the call, _leave(), written out:
    # a pair of acquire and release runs them twice, and each Python call
    # less is measurable there. Lock._c_acquire and Lock.release write
    # them out once more around their C call: a frame and an *args tuple
    # less each, ~0.25 us of a pair's ~1 us in this layer.
    def _call(self, fn: Any, *args: Any) -> Any:
        inflight = self._inflight
        inflight.append(None)
        try:
            if self._closed:
                raise ClosedError("client is closed", _core.DISTLOCK_ECLOSED)
            return fn(self._h, *args)
        finally:
            inflight.pop()
            if self._closed:  # close() may be waiting for this call
                self._wake_closer()

    def _call_handle(self, fn: Any, *args: Any) -> Any:
        """A call on a lock handle: no client argument, but the client must
        stay alive (not freed by close()) until it returns."""
        inflight = self._inflight
        inflight.append(None)
        try:
            if self._closed:
                raise ClosedError("client is closed", _core.DISTLOCK_ECLOSED)
            return fn(*args)
        finally:
            inflight.pop()
            if self._closed:
                self._wake_closer()

    def _wake_closer(self) -> None:
        """A call that ended after close() began (see _leave): close() may be
        waiting for it, or, when it was made inside a call, have left its
        end to the last call in progress (Lock's C methods call this)."""
        with self._mutex:
            self._idle.notify_all()
            if not self._close_deferred or self._inflight:
                return
            self._close_deferred = False
        self._finish_close(release=True)

    def close(self) -> None:
        r"""Release the locks still held through this client and free it
        (not a :meth:`restore`\ d Lock: its key may be another process's
        lock, deleted only by its own ``release()``). Waits for calls in
        progress in other threads. Idempotent.

        Called inside a call of this client in this thread (a signal
        handler that runs while ``acquire()`` waits), it can't wait for
        that call, which ends only after the handler returns: it marks the
        client closed, cancels its waiting calls and returns; the last call
        in progress to end finishes the close. The interrupted
        ``acquire()`` holds nothing: it raises the handler's exception, or
        :class:`ClosedError` if the handler returns."""
        self._close(release=True)

    def _close(self, release: bool) -> None:
        """close(), or (release=False) the garbage collector's end of the
        client: every lock still held through it is abandoned, not released
        (distlock_client_abandon): the collector is not the holder. When the
        client and its locks die in one collection (a cycle, interpreter
        exit) the locks' weak entries are already cleared and their own
        finalizers may run after this one, so the C library, which knows
        every lock held through the client, leaves them all to their TTL."""
        with self._mutex:
            if self._closed or self._h is None:
                self._closed = True
                if release and self._h is not None and self._inflight.inside:
                    # A close already begun (another thread's, which waits
                    # for this thread's call) and this one made inside that
                    # call: it must still cancel the call, or both wait.
                    _core.distlock_client_cancel(self._h)
                return
            self._closed = True
            if release and self._inflight.inside:
                # This thread is inside a call of this client (close() from
                # a signal handler run in a waiting acquire): waiting for
                # that call would wait for ourselves. Cancel the waiting
                # calls instead (the ones under way see the closed flag when
                # they end and hand nothing out); the last one to leave
                # finishes the close (_wake_closer), with self._h valid
                # until then.
                self._close_deferred = True
                _core.distlock_client_cancel(self._h)
                return
            while self._inflight:
                self._idle.wait()
        self._finish_close(release)

    def _finish_close(self, release: bool) -> None:
        """The end of _close, once no call is in progress: the lost watcher
        stopped, the locks dropped, the C client freed (or abandoned)."""
        with self._mutex:
            h, self._h = self._h, None
            watcher, self._watcher = self._watcher, None
        if h is None:
            return
        if watcher is not None:  # before the C client closes its lost fd
            watcher.stop()
        if release:
            for lk in self._locks:
                lk._drop()
            _core.distlock_client_free(h)
        else:
            _core.distlock_client_abandon(h)
        self._freed = True

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (or the client was collected)."""
        return self._closed

    def _lost_watcher(self) -> LostWatcher:
        """The thread that reports lost leases (started on first need)."""
        with self._mutex:
            if self._closed:
                raise ClosedError("client is closed", _core.DISTLOCK_ECLOSED)
            if self._watcher is None:
                self._watcher = LostWatcher(_core.distlock_client_lost_fd(self._h))
            return self._watcher

    def __enter__(self) -> "Client":
        """The client itself; leaving the ``with`` block closes it (:meth:`close`)."""
        return self

    def __exit__(self, *exc: Any) -> None:
        """Close the client (:meth:`close`): locks still held through it are released."""
        self.close()

    def __del__(self) -> None:
        # Collected, not closed: abandon what is still held (see _close).
        try:
            self._close(release=False)
        except Exception:  # interpreter shutdown: nothing sensible to do
            pass

    def __repr__(self) -> str:
        if self._closed:
            return "<distlock.Client closed>"
        return "<distlock.Client %s quorum=%d>" % (",".join(self.nodes), self.quorum)

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        _not_picklable("distlock.Client")

    # -- information
    @property
    def node_count(self) -> int:
        """Number of nodes N given to the constructor (no I/O)."""
        return int(self._call(_core.distlock_client_node_count))

    @property
    def quorum(self) -> int:
        """Nodes that must grant a lock: N/2+1 of N (no I/O)."""
        return int(self._call(_core.distlock_client_quorum))

    @property
    def nodes(self) -> List[str]:
        """Node URIs, with any password replaced by ``***`` (by the library)."""
        return [self._call(_core.distlock_client_node_uri, i) for i in range(self.node_count)]

    def stats(self) -> "dict[str, int]":
        """This client's counters and histograms since it was made, by name
        (as in C's distlock_client_stats(): e.g. ``acquire_granted_total``,
        ``acquire_failed_total{status="ECONN"}``, cumulative
        ``acquire_wait_us_bucket{le="1000"}``, ``node_errors_total{node="0"}``).
        Does no I/O."""
        return dict(self._call(_core.distlock_py_stats))

    # -- locks
    def lock(self, key: KeyType, ttl: float = 30.0, *, wait: Optional[float] = None,
             auto_renew: bool = False, fencing: bool = False, reentrant: bool = False,
             shared: bool = False, on_lost: Optional[OnLost] = None,
             token: Optional[KeyType] = None) -> "Lock":
        """A :class:`Lock` on ``key`` (nothing is sent until it is acquired).

        ``ttl``: seconds the lock lives unless released or extended.
        ``wait``: default wait budget of a blocking acquire, in seconds
        (None: wait without limit; 0: try once).
        ``auto_renew``: renew in the background at ttl/3 while held.
        ``fencing``: get a fencing token (``lock.fence``) with each acquire.
        ``reentrant``: a thread that holds ``key`` through this client
        acquires it again, counted (each acquire needs its release; only the
        last one reaches Redis; one round trip refreshes the TTL): per
        thread, as threading.RLock, across the Lock objects of this client.
        ``shared``: a read lock: it shares ``key`` with other readers and
        excludes writers (a plain lock of the same key); symfony/lock's
        shared locks interoperate (docs/shared-locks.md). Not with
        ``fencing`` (the acquire raises InvalidArgument).
        ``on_lost``: ``on_lost(lock)`` is called once per ownership when the
        lease is found lost (by the auto-renewal or an extend), in the
        client's lost-watcher thread (see :meth:`Lock.run` to interrupt the
        owner instead).
        ``token``: the token every acquire of this Lock sets (str or bytes,
        1..TOKEN_MAX bytes) instead of a fresh random one, for an owner
        string known elsewhere (:meth:`restore`, another process). The
        acquire is strict (SET NX): a key already holding this very token
        is held, as in redis-py. Not with ``shared`` or ``reentrant`` (the
        acquire raises InvalidArgument, the library's rule).
        """
        # What this method does. _core.lock_setup (below the Lock class)
        # replaces it with a C method of the same signature and docstring,
        # which skips this Python frame: Lock.__new__ + _init in one call.
        return _core.new_lock(Lock, self, key, ttl, wait, auto_renew, fencing, reentrant,
                              shared, on_lost, token)

    def restore(self, key: KeyType, token: KeyType, ttl: float = 30.0) -> "Lock":
        """A held :class:`Lock` for an ownership taken elsewhere: ``token``
        holding ``key`` (another process, :meth:`acquire_token`, a
        ``lock(token=...)``). No I/O: nothing is checked on the servers
        (distlock_lock_restore). ``release()`` compare-and-deletes that
        token (LockLost, key untouched, when it does not hold it);
        ``extend()`` resets the TTL where it still holds the key (``ttl``
        is extend()'s default). Until an extend succeeds, ``validity`` is 0
        and ``held`` False (the lease's age is unknown here); no renewal,
        no fence. Never released implicitly: :meth:`close` and the garbage
        collector keep its key; only ``release()`` deletes."""
        _check_key(key)
        _check_key(token, "token")
        lk = Lock(self, key, ttl)
        lk._adopt(self._call(_core.distlock_lock_restore, key, token))
        return lk

    def semaphore(self, key: KeyType, permits: int, ttl: float = 30.0, *,
                  wait: Optional[float] = None, auto_renew: bool = False,
                  on_lost: Optional[OnLost] = None) -> "Semaphore":
        """A :class:`Semaphore`: one permit of the semaphore ``key`` with
        ``permits`` permits (1..DISTLOCK_PERMITS_MAX, checked by the library
        when acquired). ``ttl``, ``wait``, ``auto_renew`` and ``on_lost`` as
        for :meth:`lock`: each permit is a lease."""
        return Semaphore(self, key, permits, ttl, wait=wait, auto_renew=auto_renew,
                         on_lost=on_lost)

    def lock_many(self, keys: Sequence[KeyType], ttl: float = 30.0, *,
                  wait: Optional[float] = None, auto_renew: bool = False,
                  fencing: bool = False, on_lost: Optional[OnLost] = None) -> "MultiLock":
        """A :class:`MultiLock` on every key of ``keys`` (1..DISTLOCK_KEYS_MAX
        distinct keys, checked by the library when acquired): all or none,
        one lease. ``fencing``: one fence per key (``fences``). The other
        arguments as for :meth:`lock`."""
        return MultiLock(self, keys, ttl, wait=wait, auto_renew=auto_renew, fencing=fencing,
                         on_lost=on_lost)

    # -- the token-carrying pair (caller keeps the token)
    def acquire_token(self, key: KeyType, token: KeyType, ttl: float = 30.0, *,
                      strict: bool = False) -> Optional[float]:
        """Take ``key`` with a caller-chosen ``token``. Returns the validity
        in seconds, or None if another owner holds it. Without ``strict``, a
        key already holding this very token is refreshed (idempotent retry)."""
        _check_key(key)
        _check_key(token, "token")
        flags = _core.DISTLOCK_STRICT if strict else 0
        status, validity_ms = self._call(_core.distlock_acquire_token, key, _ttl_ms(ttl),
                                         token, flags)
        return validity_ms / 1000.0 if status == _OK else None

    def release_token(self, key: KeyType, token: KeyType) -> bool:
        """Compare-and-delete. True if ``token`` held ``key`` and it is now
        deleted, False if it did not hold it (nothing is deleted then)."""
        _check_key(key)
        _check_key(token, "token")
        try:
            self._call(_core.distlock_release_token, key, token)
        except LockLost:
            return False
        return True

    def extend_token(self, key: KeyType, token: KeyType, ttl: float) -> float:
        """Reset the TTL where ``token`` still holds ``key``; returns the new
        validity in seconds. Raises LockLost if it no longer holds it."""
        _check_key(key)
        _check_key(token, "token")
        return float(self._call(_core.distlock_extend_token, key, token, _ttl_ms(ttl))) / 1000.0

    @staticmethod
    def generate_token() -> str:
        """A fresh 128-bit token (32 lowercase hex characters) from the OS CSPRNG."""
        return _core.distlock_token_generate()

    # -- admin
    def inspect(self, key: KeyType, node: int = 0) -> Optional[Tuple[str, Optional[float]]]:
        """Who holds ``key`` on node ``node`` (0..N-1) alone: None if no
        token holds it there, else ``(token, seconds_left)`` (seconds_left
        None: no expiry). holder() gives the verdict of every node."""
        _check_key(key)
        if isinstance(node, bool) or not isinstance(node, int):
            raise TypeError("node must be int, not %s" % type(node).__name__)
        if node < 0:
            # the core reads -1 as "every node" (holder()); here it is a node number
            raise _invalid("node %d out of range 0..%d" % (node, self.node_count - 1))
        held, token, _nodes, pttl, _answered, _taken, _kind, _holders = self._call(
            _core.distlock_admin_holder, key, node)
        if not held:
            return None
        return token, (None if pttl < 0 else pttl / 1000.0)

    def holder(self, key: KeyType) -> "Holder":
        """Who holds ``key``: every node asked in one parallel round, the
        verdict is the library's (distlock_admin_holder). ``Holder.held`` is True
        when one token holds it on a quorum; ``token`` is the token on the
        most nodes (None if no node holds one), ``nodes`` how many hold it,
        ``ttl`` the shortest lease left among them in seconds (None: no
        expiry), ``answered`` / ``taken`` how many nodes answered / have the
        key at all. ``kind`` says what the key is on the nodes counted:
        ``"free"``, ``"lock"`` (a token), ``"readers"`` (read locks),
        ``"semaphore"`` or ``"other"`` (a value of another type), and
        ``holders`` the live read locks or permits (0 for the others).
        Raises NoQuorum when the nodes that did not answer could change the
        verdict (one node: its own error)."""
        _check_key(key)
        st, token, nodes, pttl, answered, taken, kind, holders = self._call(
            _core.distlock_admin_holder, key, -1)
        return Holder(held=st == 1, token=token if nodes else None, nodes=nodes,
                      ttl=(None if pttl < 0 else pttl / 1000.0) if nodes else None,
                      answered=answered, taken=taken,
                      kind=_core.distlock_holder_kind_name(kind), holders=holders)

    def locked(self, key: KeyType) -> bool:
        """True when one token holds ``key`` on a quorum: the verdict of
        :meth:`holder` (``holder(key).held``), one round to every node.
        Read locks and semaphore permits hold no single token: see
        ``holder(key).kind`` and ``holders`` for those. Raises NoQuorum as
        holder() does."""
        return self.holder(key).held

    def force_release(self, key: KeyType) -> int:
        """Delete ``key`` on every node whoever holds it (administrative
        override). Returns the number of nodes it was deleted on."""
        _check_key(key)
        return int(self._call(_core.distlock_admin_force_release, key))


def _warn_unreleased(kind: str, key: KeyType, ttl_ms: int, source: Any) -> None:
    """The ResourceWarning of a Lock garbage-collected while held (the one
    text for the blocking and the asyncio Lock)."""
    try:
        warnings.warn("%s %r was garbage-collected while held: not released, its lease "
                      "runs out by its ttl (%gs) and is no longer renewed; release() it or "
                      "use 'with'" % (kind, key, ttl_ms / 1000.0), ResourceWarning,
                      stacklevel=2, source=source)
    except Exception:  # interpreter shutdown: warnings may be gone
        pass


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


class Holder(NamedTuple):
    """What :meth:`Client.holder` found (see there)."""
    held: bool
    token: Optional[str]
    nodes: int
    ttl: Optional[float]
    answered: int
    taken: int
    kind: str
    holders: int


class Lock(_core.LockBase, contextlib.ContextDecorator):
    """A distributed lock on one key, made by :meth:`Client.lock`.

    Behaves like :class:`threading.Lock` across processes and hosts:
    ``acquire()`` / ``release()``, ``with lock:``, and ``@lock`` as a
    decorator. Threads of one process sharing one Lock object queue on a
    local mutex first, so at most one of them holds it at a time (not
    reentrant: a thread acquiring it twice waits for itself, as with
    threading.Lock; with ``reentrant=True`` it acquires it again, counted,
    as with threading.RLock, and only that thread releases it).

    Garbage collection is not a release: a Lock collected while held leaves
    the key to run out by its TTL (its renewal stops) and emits a
    ResourceWarning naming the key, as redis-py's Lock leaves its key.
    """

    # The state every Lock has is LockBase's (bindings/distlock.i), read
    # and written here as attributes. Besides what _init sets: _h, the C
    # handle of the current ownership (None when not held); _retry: a release
    # of _h failed without the servers saying "not the owner", so the
    # handle is kept for release() to try again (the core re-sends a
    # release that got no verdict) and the local mutex is free again (a
    # new acquire drops the old handle); _was_lost; _lost_seen (this
    # ownership's loss was reported); _owner_ident; _refused_detail (the
    # library's detail of the last refusal). _local and _hm are
    # _core.Mutex, which behaves as threading.Lock. LockBase has _init,
    # acquire, release, __enter__, __exit__, _c_acquire and the finalizer;
    # it calls back the methods below for what is Python's (messages, the
    # lost watcher, a reentrant lock's nested acquire, a Lock collected
    # while held).
    # Lock.run(): _run_mu guards the two below; made by the first run()
    _run_mu: Optional[threading.Lock] = None
    _run_ident: Optional[int] = None  # thread to interrupt on loss
    _run_raised = False

    def __init__(self, client: Client, key: KeyType, ttl: float = 30.0, *,
                 wait: Optional[float] = None, auto_renew: bool = False,
                 fencing: bool = False, reentrant: bool = False, shared: bool = False,
                 on_lost: Optional[OnLost] = None, token: Optional[KeyType] = None) -> None:
        self._init(client, key, ttl, wait, auto_renew, fencing, reentrant, shared, on_lost, token)

    @property
    def key(self) -> KeyType:
        """The key this lock is for (as given: str or bytes)."""
        return self._key

    @property
    def shared(self) -> bool:
        """True for a read lock (``shared=True``): it shares the key with
        other readers and excludes writers (plain locks of the same key)."""
        return bool(self._flags & _core.DISTLOCK_SHARED)

    @property
    def ttl(self) -> float:
        """The TTL each acquire asks for, in seconds (whole milliseconds)."""
        return self._ttl_ms / 1000.0

    # -- what the subclasses (Semaphore, MultiLock) change: the C acquire
    #    (_c_acquire: LockBase's, theirs in Python) and how messages name
    #    the lease
    def _shown(self) -> Any:
        """The key(s) as messages quote them."""
        return self._key

    def _what(self) -> str:
        return "%s %r" % ("read lock" if self.shared else "lock", self._key)

    def _repr_extra(self) -> str:
        return " shared" if self.shared else ""

    def _refused_text(self) -> str:
        return "%s is held by another owner" % (self._what(),)

    def _adopt(self, h: Any) -> None:
        """Client.restore(): this new object holds the restored handle."""
        got = self._local.acquire(False)
        assert got, "a new Lock's local mutex is free"
        with self._hm:
            self._h = h
            self._owner_ident = threading.get_ident()

    def _acquire_again(self, wait_ms: int) -> bool:
        """The owner's nested acquire: the core checks the lease is still
        ours (one extend) and returns a counted handle of the same ownership."""
        status, h = self._c_acquire(wait_ms)
        if status != _OK:
            self._refused_detail = _core.distlock_last_error()
            return False
        with self._hm:
            self._outer.append(self._h)
            self._h = h
        return True

    def _release_refused(self) -> NoReturn:
        """release() (LockBase's) of a lock this object does not hold, or of
        a reentrant one from a thread that does not hold it: the error."""
        if self._h is None:
            if self._client.closed:
                raise ClosedError("client is closed", _core.DISTLOCK_ECLOSED)
            raise NotHeld("release of %r, which this %s object does not hold"
                          % (self._shown(), type(self).__name__))
        # the core would answer "not the owner", which reads as a loss
        raise NotHeld("release of %r from a thread that does not hold it (a "
                      "reentrant lock is released by its owner thread)" % (self._shown(),))

    def extend(self, ttl: Optional[float] = None, *,
               additional: Optional[float] = None) -> float:
        """Reset the TTL to ``ttl`` seconds (default: the lock's ttl) on every
        node where it is still ours; returns the new validity in seconds.
        ``additional``: add that many seconds to the validity left instead
        (redis-py's ``extend(additional_time)``); not with ``ttl``.
        Raises LockLost if it was lost, NotHeld if this object does not hold it."""
        add_ms = _additional_ms(ttl, additional)
        ms = self._ttl_ms if ttl is None else _ttl_ms(ttl)
        with self._hm:
            if self._h is None:
                raise NotHeld("extend of %r, which this %s object does not hold"
                              % (self._shown(), type(self).__name__))
            if add_ms is not None:
                ms = _core.distlock_lock_validity_ms(self._h) + add_ms
            try:
                self._client._call_handle(_core.distlock_extend, self._h, ms)
            except (LockLost, RenewalFailed):
                raise
            except ConnectionError as e:  # no usable answer: not lost, not an acquire error
                raise RenewalFailed("renewal of %r failed: %s" % (self._shown(), e.message),
                                    e.status, e.detail) from e
            return _core.distlock_lock_validity_ms(self._h) / 1000.0

    @property
    def held(self) -> bool:
        """True while this object holds the lock (acquired, not released,
        not found lost, validity left)."""
        with self._hm:
            h = self._h
            return (h is not None and not _core.distlock_lock_lost(h)
                    and _core.distlock_lock_validity_ms(h) > 0)

    @property
    def token(self) -> Optional[str]:
        """The random token of the current ownership (None when not held)."""
        with self._hm:
            return None if self._h is None else _core.distlock_lock_token(self._h)

    @property
    def fence(self) -> Optional[int]:
        """Fencing token of the current ownership (``fencing=True``), else None."""
        with self._hm:
            if self._h is None:
                return None
            v = _core.distlock_lock_fence(self._h)
            return None if v < 0 else v

    @property
    def validity(self) -> float:
        """Seconds of validity left (0.0 when not held, lost or expired)."""
        with self._hm:
            return 0.0 if self._h is None else _core.distlock_lock_validity_ms(self._h) / 1000.0

    @property
    def lost(self) -> bool:
        """True once the lock was found lost (by auto-renewal, extend or
        release); stays True after release until the next acquire."""
        with self._hm:
            if self._h is None:
                return self._was_lost
            return bool(_core.distlock_lock_lost(self._h))

    def check(self) -> None:
        """Raise :class:`LockLost` if the lease was found lost or its
        validity ran out (no network: the flag the auto-renewal, extend and
        release keep, and the local clock); :class:`NotHeld` if this object
        does not hold the lock. Cheap: call it at safe points of long work."""
        with self._hm:
            h = self._h
            if h is None:
                if self._was_lost:
                    raise LockLost("%s was lost" % (self._what(),),
                                   _core.DISTLOCK_ENOTOWNER)
                raise NotHeld("check of %r, which this %s object does not hold"
                              % (self._shown(), type(self).__name__))
            if _core.distlock_lock_lost(h):
                raise LockLost("%s was lost (found by renewal or extend)" % (self._what(),),
                               _core.DISTLOCK_ENOTOWNER)
            if _core.distlock_lock_validity_ms(h) <= 0:
                raise LockLost("%s: its validity ran out" % (self._what(),),
                               _core.DISTLOCK_ENOTOWNER)

    def run(self, fn: Callable[..., _R], *args: Any, **kwargs: Any) -> _R:
        """Call ``fn(*args, **kwargs)`` in this thread while the lock is held,
        interrupting it if the lease is found lost: :class:`LockLostInterrupt`
        (a BaseException) is raised inside ``fn`` at its next Python
        instruction, and run() raises :class:`LockLost`. Opt-in, per call.

        Loss is found by the auto-renewal (``auto_renew=True``) or by an
        extend. The interrupt is asynchronous (``PyThreadState_SetAsyncExc``):
        code blocked in C (a socket read, ``time.sleep``) sees it only when it
        returns to Python. Returns fn's result; NotHeld if not held."""
        self.check()
        ident = threading.get_ident()
        with self._hm:
            if self._run_mu is None:
                self._run_mu = threading.Lock()
            run_mu = self._run_mu
        with run_mu:
            if self._run_ident is not None:
                raise RuntimeError("%s.run() of %r is already running"
                                   % (type(self).__name__, self._shown()))
            self._run_ident, self._run_raised = ident, False
        try:
            try:
                self._client._lost_watcher().watch(self)  # a loss before now: at once
                return fn(*args, **kwargs)
            finally:
                with run_mu:  # disarm; clear an interrupt not yet delivered
                    self._run_ident = None
                    raised = self._run_raised
                    if raised:
                        _core.distlock_py_async_raise(ident, None)
                if raised:
                    raise LockLostInterrupt()
        except LockLostInterrupt:
            with run_mu:  # in case it landed inside the disarming block
                self._run_ident = None
            raise LockLost("%s was lost while %s ran" % (self._what(), _name(fn)),
                           _core.DISTLOCK_ENOTOWNER) from None
        finally:
            if self._on_lost is None:
                w = self._client._watcher
                if w is not None:
                    w.unwatch(self)

    def _lost_event(self) -> None:
        """The lost watcher's thread: the client's lost fd fired (or this lock
        was just watched). Report this ownership's loss once."""
        with self._hm:
            h = self._h
            if h is None or self._lost_seen or not _core.distlock_lock_lost(h):
                return
            self._lost_seen = True
            cb = self._on_lost
            run_mu = self._run_mu  # None: no run() has started, none to interrupt
        if run_mu is not None:
            with run_mu:
                if self._run_ident is not None and not self._run_raised:
                    self._run_raised = True
                    _core.distlock_py_async_raise(self._run_ident, LockLostInterrupt)
        if cb is not None:
            try:
                cb(self)
            except Exception as e:  # nowhere to raise it: report and carry on
                report_callback_error("the on_lost callback of %r" % (self,), e, cb)

    def _not_acquired(self) -> NoReturn:
        """__enter__ (LockBase's): acquire() said False."""
        # the library's detail of the refusal (which key, after how long)
        raise LockNotAcquired(self._refused_text(), None, self._refused_detail)

    def _drop(self) -> None:
        """Client.close(): release and free the handle without the client."""
        with self._hm:
            h, self._h = self._h, None
            outer, self._outer, self._owner_ident = self._outer, [], None
            if h is not None:
                _core.distlock_lock_free(h)
                for o in reversed(outer):  # a reentrant ownership's outer handles
                    _core.distlock_lock_free(o)
                if not self._retry:  # else released when the release failed
                    self._local.release()
                self._retry = False

    def _finalize_held(self) -> None:
        # LockBase's finalizer, once this Lock is out of the client's
        # Locks, for a Lock garbage-collected while held: NOT released. The collector is not
        # the holder: `if client.lock("job", ttl=60).acquire(blocking=False):
        # do_work()` drops the Lock at once, and a release here would let
        # another owner in while do_work() runs. As with redis-py, the lease
        # runs to its TTL (its renewal stops: nobody can use it any more);
        # a ResourceWarning says so, as an unclosed file's does.
        h = self._h
        if h is None:
            return
        handles = [h] + list(reversed(getattr(self, "_outer", [])))
        self._h, self._outer = None, []
        _warn_unreleased("distlock." + type(self).__name__, self._shown(), self._ttl_ms, self)
        try:
            self._client._enter()
        except Exception:  # client closed or shutdown
            # Collected with its client, whose finalizer ran first: the C
            # client abandoned the lock and is gone; free the memory only.
            if getattr(self._client, "_freed", False):
                for x in handles:
                    _core.distlock_lock_free(x)
            return
        try:
            for x in handles:
                _core.distlock_lock_abandon(x)
        finally:
            self._client._leave()

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        _not_picklable("distlock.Lock")

    def __repr__(self) -> str:
        state = "held" if self._h is not None else "not held"
        return "<distlock.%s %r%s ttl=%gs %s>" % (type(self).__name__, self._shown(),
                                                 self._repr_extra(), self.ttl, state)



# LockBase's C code calls these (once, here): the Python rules it follows.
_core.lock_setup(Client, Lock, _TTL_MS_MEMO, _ttl_ms, _wait_ms, _check_key, LockLost)


def _permits(permits: Any) -> int:
    """A semaphore's permits as given (an int; its range is the library's
    rule, checked when it is acquired)."""
    if isinstance(permits, bool) or not isinstance(permits, int):
        raise TypeError("permits must be int, not %s" % type(permits).__name__)
    return permits


def _c_long(value: int) -> int:
    """An int C's long can carry: one beyond it becomes the nearest long,
    which breaks the library's range just the same (see _long_detail)."""
    return max(-sys.maxsize - 1, min(sys.maxsize, value))


def _long_detail(e: InvalidArgument, given: int) -> InvalidArgument:
    """The library's detail about a clamped value (_c_long), naming the value given."""
    shown = _c_long(given)
    if shown == given:
        return e
    return InvalidArgument(e.message, e.status, e.detail.replace(str(shown), str(given)))


def _keys(keys: Any) -> Tuple[KeyType, ...]:
    """The keys of lock_many() as a tuple, in the order given; how many and
    which (empty, duplicates, too long) is the library's rule."""
    if isinstance(keys, (str, bytes)):
        raise TypeError("keys must be a list of str or bytes, not a single %s key"
                        % type(keys).__name__)
    try:
        got = tuple(keys)
    except TypeError:
        raise TypeError("keys must be a list of str or bytes, not %s"
                        % type(keys).__name__) from None
    for k in got:
        _check_key(k)
    return got


class _SemaphoreWords:
    """A semaphore's ``permits`` and the words of its messages and repr: one
    copy for the blocking and the asyncio Semaphore (each puts it before its
    Lock base)."""
    _key: KeyType
    _permits: int

    @property
    def permits(self) -> int:
        """The permits P this object asks for (as given)."""
        return self._permits

    def _what(self) -> str:
        return "semaphore %r" % (self._key,)

    def _repr_extra(self) -> str:
        return " permits=%d" % self._permits

    def _refused_text(self) -> str:
        return "semaphore %r: all %d permits are held" % (self._key, self._permits)


class _MultiLockWords:
    """A set of keys' ``key`` / ``keys`` and the words of its messages: one
    copy for the blocking and the asyncio MultiLock (each puts it before its
    Lock base)."""
    _key: KeyType
    _keys: Tuple[KeyType, ...]

    @property
    def key(self) -> KeyType:
        """The first key (as given)."""
        return self._key

    @property
    def keys(self) -> Tuple[KeyType, ...]:
        """Every key, in the order given (as given: str or bytes)."""
        return self._keys

    def _shown(self) -> Any:
        return list(self._keys)

    def _what(self) -> str:
        return "locks %r" % (list(self._keys),)

    def _refused_text(self) -> str:
        return "locks %r: a key is held by another owner" % (list(self._keys),)


class Semaphore(_SemaphoreWords, Lock):
    """One permit of a distributed semaphore, made by :meth:`Client.semaphore`.

    At most ``permits`` holders at once across processes and hosts; each
    permit is a lease like a lock (ttl, extend, auto-renew, lost), so a
    crashed holder's permit comes back when its TTL ends. Lock's whole
    surface: ``acquire()`` (False when every permit stays taken) /
    ``release()``, ``with``, ``@sem``. One object holds at most one permit
    at a time (threads sharing it queue on it, as on a Lock); make one
    object per concurrent holder. On N nodes a permit needs grants on more
    than N*P/(P+1) of them (docs/semaphores.md).
    """

    def __init__(self, client: Client, key: KeyType, permits: int, ttl: float = 30.0, *,
                 wait: Optional[float] = None, auto_renew: bool = False,
                 on_lost: Optional[OnLost] = None) -> None:
        self._permits = _permits(permits)
        Lock.__init__(self, client, key, ttl, wait=wait, auto_renew=auto_renew,
                      on_lost=on_lost)

    def _c_acquire(self, wait_ms: int) -> Tuple[int, Any]:
        try:
            status, h = self._client._call(_core.distlock_py_semaphore_acquire, self._key,
                                           _c_long(self._permits), self._ttl_ms, wait_ms,
                                           self._flags, None)
            return int(status), h
        except InvalidArgument as e:
            raise _long_detail(e, self._permits) from None


class MultiLock(_MultiLockWords, Lock):
    """Several keys locked all or none, as one lease, made by
    :meth:`Client.lock_many`: one token and one ttl for every key;
    ``release()``, ``extend()`` and the auto-renewal cover them all, and it
    is lost when any key is lost. Each key is a plain lock that other
    clients see as today's. Lock's whole surface, plus ``keys`` and
    ``fences`` (``fencing=True``: one fence per key)."""

    def __init__(self, client: Client, keys: Sequence[KeyType], ttl: float = 30.0, *,
                 wait: Optional[float] = None, auto_renew: bool = False,
                 fencing: bool = False, on_lost: Optional[OnLost] = None) -> None:
        self._keys = _keys(keys)
        Lock.__init__(self, client, self._keys[0] if self._keys else "", ttl, wait=wait,
                      auto_renew=auto_renew, fencing=fencing, on_lost=on_lost)

    @property
    def fences(self) -> Optional[List[int]]:
        """One fencing token per key, in the order of :attr:`keys`
        (``fencing=True`` and held), else None."""
        with self._hm:
            h = self._h
            if h is None or not self._flags & _core.DISTLOCK_FENCING:
                return None
            return [int(_core.distlock_lock_fence_at(h, i))
                    for i in range(_core.distlock_lock_key_count(h))]

    def _c_acquire(self, wait_ms: int) -> Tuple[int, Any]:
        status, h = self._client._call(_core.distlock_py_acquire_many, self._keys, self._ttl_ms,
                                       wait_ms, self._flags, None)
        return int(status), h
