"""redis-py's Lock API, locking through distlock: a one-line switch.

    import redis
    import distlock.redis_py

    r = redis.Redis(host="127.0.0.1", port=6379)
    with r.lock("job:42", timeout=30, lock_class=distlock.redis_py.Lock):
        ...

:class:`Lock` has the signature and methods of redis-py 4.3's
``redis.lock.Lock`` and raises redis-py's own exception classes (ours
subclass them and :class:`distlock.Error`), so code written for redis-py
keeps working. :class:`AsyncLock` is the same for ``redis.asyncio.Redis``.

The redis client is only read for its connection settings (host, port, db,
username, password, TLS files, Unix socket); the locking itself goes through
a distlock client made from them, one per distinct setting (and process,
and event loop for :class:`AsyncLock`), shared by every lock made from
such redis clients. What differs from redis-py is listed in docs/redis-py.md:
above all, ``timeout=None`` is a lease of :data:`RENEWED_LEASE` seconds
renewed in the background while held (redis-py's key never expires), and a
blocked acquire waits for the release notification instead of polling every
``sleep`` seconds (``sleep`` is accepted and ignored).
"""
import asyncio
import importlib
import os
import threading
from types import SimpleNamespace
from typing import Any, Awaitable, Dict, Optional, Tuple, Union

# redis-py 4.3 ships no type information: its modules are used as Any, so
# mypy --strict asks for no stubs (and no per-line ignores that depend on
# the order mypy meets the imports in).
_rx: Any = importlib.import_module("redis.exceptions")
_conn: Any = importlib.import_module("redis.connection")
_aconn: Any = importlib.import_module("redis.asyncio.connection")

from . import _errors
from . import aio as _aio
from ._client import Client as _Client
from ._client import Lock as _NativeLock

__all__ = ["Lock", "AsyncLock", "LockError", "LockNotOwnedError", "RENEWED_LEASE"]

RENEWED_LEASE = 30.0
"""Seconds of the lease of a lock made with ``timeout=None`` (redis-py: no
expiry): renewed every third of it while held, so it outlives its holder by
at most this long when the process dies."""

Name = Union[str, bytes, memoryview]


class _ThreadToken(threading.local):
    """Per-thread ``local`` whose ``token`` is None in every thread until
    that thread acquires (redis-py 4.3's is unset outside the thread that
    made the Lock, so reading it there raises AttributeError)."""

    def __init__(self) -> None:
        self.token: Optional[bytes] = None
Settings = Tuple[str, Tuple[Tuple[str, Any], ...]]


class LockError(_rx.LockError, _errors.Error):  # type: ignore[misc]
    """redis-py's ``redis.exceptions.LockError``, and a :class:`distlock.Error`:
    an acquire that failed under ``with``, a release, extend or reacquire of
    a lock this object does not hold, extend of a lock without timeout."""

    def __init__(self, message: str, lock_name: Optional[Name] = None) -> None:
        _errors.Error.__init__(self, message)
        self.lock_name = lock_name  # as redis-py 5 names it


class LockNotOwnedError(_rx.LockNotOwnedError, LockError):  # type: ignore[misc]
    """redis-py's ``redis.exceptions.LockNotOwnedError``, and a
    :class:`distlock.Error`: the lock expired or another owner took it."""


_flavours: Dict[type, type] = {}


def _redis_flavour(cls: type) -> type:
    """distlock's exception class cls as a subclass of redis-py's counterpart
    too (made once per class): the servers' errors reach code written for
    redis-py as redis-py's (``except redis.exceptions.ConnectionError``,
    ``except redis.RedisError``) and as distlock's (``except distlock.NoQuorum``)."""
    with _clients_mu:
        got = _flavours.get(cls)
        if got is None:
            if issubclass(cls, _errors.TimeoutError):
                base = _rx.TimeoutError
            elif issubclass(cls, _errors.ConnectionError):
                base = _rx.ConnectionError
            else:
                base = _rx.RedisError
            got = _flavours[cls] = type(cls.__name__, (base, cls),
                                        {"__module__": __name__, "__doc__": cls.__doc__})
        return got


class _Translated:
    """``with _Translated():`` re-raises a distlock error (other than the
    adapter's own) as its redis-py flavour, same message, status and
    detail; the original is its __cause__."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, tp: Any, e: Any, tb: Any) -> None:
        if e is None or not isinstance(e, _errors.Error) or isinstance(e, _rx.RedisError):
            return
        raise _redis_flavour(type(e))(e.message, e.status, e.detail) from e


def _is_conn(cls: Any, name: str) -> bool:
    """cls is (a subclass of) redis-py's sync or asyncio connection class `name`."""
    return any(isinstance(base, type) and issubclass(cls, base)
               for base in (getattr(_conn, name, None), getattr(_aconn, name, None)))


def _settings(r: Any) -> Settings:
    """The distlock URI and options of a redis client's connection pool:
    where it connects (TCP, TLS or Unix socket, with its db) and as whom."""
    pool: Any = getattr(r, "connection_pool", None)
    kw = getattr(pool, "connection_kwargs", None)
    if not isinstance(kw, dict):
        raise TypeError("distlock.redis_py needs a redis.Redis (or redis.asyncio.Redis) client, "
                        "not %s" % type(r).__name__)
    if type(pool).__name__.startswith("Sentinel"):
        raise TypeError("distlock.redis_py: a Sentinel-managed redis client is not supported; "
                        "use distlock.Client('redis-sentinel://...') (docs/sentinel.md)")
    cls = pool.connection_class
    db = int(kw.get("db") or 0)
    opts: Dict[str, Any] = {}
    if _is_conn(cls, "UnixDomainSocketConnection"):
        uri = "unix://%s?db=%d" % (kw["path"], db)
    else:
        host = str(kw.get("host", "localhost"))
        if ":" in host and not host.startswith("["):
            host = "[%s]" % host  # an IPv6 address
        tls = _is_conn(cls, "SSLConnection")
        uri = "%s://%s:%d/%d" % ("rediss" if tls else "redis", host, int(kw.get("port", 6379)), db)
        if tls:
            if kw.get("ssl_ca_data") is not None or kw.get("ssl_password") is not None:
                raise TypeError("distlock.redis_py: ssl_ca_data and ssl_password are not "
                                "supported; give ssl_ca_certs and an unencrypted ssl_keyfile")
            for theirs, ours in (("ssl_ca_certs", "tls_ca_file"), ("ssl_ca_path", "tls_ca_dir"),
                                 ("ssl_certfile", "tls_cert"), ("ssl_keyfile", "tls_key")):
                if kw.get(theirs) is not None:
                    opts[ours] = str(kw[theirs])
            reqs = kw.get("ssl_cert_reqs", "required")
            if reqs is None or str(reqs).lower() in ("none", "cert_none", "verifymode.cert_none",
                                                     "0"):
                opts["tls_verify"] = False
    # As options, not in the URI: a password needs no URI escaping there.
    if kw.get("username"):
        opts["username"] = kw["username"]
    if kw.get("password"):
        opts["password"] = kw["password"]
    return uri, tuple(sorted(opts.items()))


_clients: Dict[Tuple[int, Settings], _Client] = {}
_clients_mu = threading.Lock()


def _client_for(r: Any) -> _Client:
    """The distlock client for redis client r's settings, made on first use.
    Per process: a client inherited across fork can't be used in the child."""
    key = (os.getpid(), _settings(r))
    with _clients_mu:
        c = _clients.get(key)
        if c is None or c.closed:
            c = _clients[key] = _Client(key[1][0], **dict(key[1][1]))
        return c


_aio_clients: Dict[Tuple[int, Settings], Tuple[asyncio.AbstractEventLoop, _aio.Client]] = {}


def _aio_client_for(r: Any) -> _aio.Client:
    """The asyncio distlock client for r's settings in the running loop
    (an aio client belongs to one loop). The clients of closed loops are
    dropped here: they only abandon what they still hold (to its TTL)."""
    loop = asyncio.get_running_loop()
    settings = _settings(r)
    with _clients_mu:
        for k in [k for k, (lp, _) in _aio_clients.items() if lp.is_closed()]:
            del _aio_clients[k]
        got = _aio_clients.get((id(loop), settings))
        if got is None or got[0] is not loop or got[1].closed:
            got = _aio_clients[(id(loop), settings)] = (
                loop, _aio.Client(settings[0], **dict(settings[1])))
        return got[1]


def _key(name: Any) -> Any:
    if isinstance(name, memoryview):
        return name.tobytes()
    return name


class _Base:
    """What the blocking and the asyncio Lock share: redis-py's attributes,
    the checks made before any I/O, and the tokens' distlock handles."""

    def __init__(self, redis: Any, name: Name, timeout: Optional[float] = None,
                 sleep: float = 0.1, blocking: bool = True,
                 blocking_timeout: Optional[float] = None, thread_local: bool = True) -> None:
        _settings(redis)  # a client it can't read: TypeError now, not at the first acquire
        self.redis = redis
        self.name = name
        self.timeout = timeout
        self.sleep = sleep  # accepted for redis-py's signature: we never poll
        self.blocking = blocking
        self.blocking_timeout = blocking_timeout
        self.thread_local = bool(thread_local)
        self.local: Any = _ThreadToken() if self.thread_local else SimpleNamespace()
        self.local.token = None
        # The distlock handle of each token this object acquired and has not
        # released: release()/extend() find theirs by the token in
        # self.local, which callers may also set themselves (a token from
        # another process); a token without a handle is restored.
        self._handles: Dict[bytes, Any] = {}
        self._handles_mu = threading.Lock()

    def _token(self, token: Any) -> Optional[bytes]:
        if token is None:
            return None
        return bytes(self.redis.connection_pool.get_encoder().encode(token))

    def _wait(self, blocking: Optional[bool], blocking_timeout: Optional[float]) -> Optional[float]:
        """The wait of one acquire, in seconds (None: without limit)."""
        if blocking is None:
            blocking = self.blocking
        if blocking_timeout is None:
            blocking_timeout = self.blocking_timeout
        if not blocking:
            return 0.0
        if blocking_timeout is None:
            return None
        return max(0.0, float(blocking_timeout))  # redis-py tries once when it is <= 0

    def _lock_args(self) -> Dict[str, Any]:
        """ttl and auto_renew of a distlock lock for this object's timeout."""
        if self.timeout:
            return {"ttl": self.timeout}
        return {"ttl": RENEWED_LEASE, "auto_renew": True}

    def _held(self, native: Any, token: Optional[bytes]) -> bytes:
        got = token if token is not None else str(native.token).encode()
        with self._handles_mu:
            self._handles[got] = native
        self.local.token = got
        return got

    def _take(self, token: bytes) -> Any:
        with self._handles_mu:
            return self._handles.pop(token, None)

    def _peek(self, token: bytes) -> Any:
        with self._handles_mu:
            return self._handles.get(token)

    def _keep(self, token: bytes, native: Any) -> None:
        with self._handles_mu:
            self._handles.setdefault(token, native)

    def _check_extend(self, what: str) -> bytes:
        token = self.local.token
        if token is None:
            raise LockError("Cannot %s an unlocked lock" % what, self.name)
        if self.timeout is None:
            raise LockError("Cannot %s a lock with no timeout" % what, self.name)
        return bytes(token)

    def _release_token(self) -> bytes:
        token = self.local.token
        if token is None:
            raise LockError("Cannot release an unlocked lock", self.name)
        self.local.token = None  # as redis-py: cleared whatever the release finds
        return bytes(token)

    def _not_owned(self, what: str) -> LockNotOwnedError:
        return LockNotOwnedError("Cannot %s a lock that's no longer owned" % what, self.name)

    @staticmethod
    def _owns(holder: Any, token: Any) -> bool:
        return bool(token is not None and holder.held and holder.token is not None
                    and holder.token.encode() == token)


class Lock(_Base):
    """redis-py's ``redis.lock.Lock`` (4.3), locking through distlock.

    ``Lock(redis, name, timeout=None, sleep=0.1, blocking=True,
    blocking_timeout=None, thread_local=True)``, or
    ``redis.lock(name, ..., lock_class=distlock.redis_py.Lock)``: see
    redis-py's documentation for each argument. ``timeout=None``: a lease of
    :data:`RENEWED_LEASE` seconds renewed while held; ``sleep`` is ignored
    (a blocked acquire wakes on the release notification). The servers'
    errors are distlock's classes that are also redis-py's
    (``redis.exceptions.ConnectionError``...)."""

    def __init__(self, redis: Any, name: Name, timeout: Optional[float] = None,
                 sleep: float = 0.1, blocking: bool = True,
                 blocking_timeout: Optional[float] = None, thread_local: bool = True) -> None:
        super().__init__(redis, name, timeout, sleep, blocking, blocking_timeout, thread_local)
        self._client = _client_for(redis)

    def __enter__(self) -> "Lock":
        """Acquire (as ``acquire()`` with the object's settings); LockError
        "Unable to acquire lock within the time specified" if it was not."""
        if self.acquire():
            return self
        raise LockError("Unable to acquire lock within the time specified", self.name)

    def __exit__(self, *exc: Any) -> None:
        """Release (:meth:`release`), whatever the block raised."""
        self.release()

    def acquire(self, sleep: Optional[float] = None, blocking: Optional[bool] = None,
                blocking_timeout: Optional[float] = None, token: Any = None) -> bool:
        """Take the lock: True once acquired, False if another owner still
        holds it when the wait is over (``blocking=False``: try once;
        ``blocking_timeout``: seconds to wait, None: without limit).
        ``token``: the token to hold it with (str or bytes, encoded as the
        redis client encodes values); default a fresh random one.
        ``self.local.token`` is the token held, as bytes."""
        tok = self._token(token)
        wait = self._wait(blocking, blocking_timeout)
        extra: Dict[str, Any] = {} if tok is None else {"token": tok}
        with _Translated():
            native = self._client.lock(_key(self.name), wait=wait, **self._lock_args(), **extra)
            if not native.acquire():
                return False
        self._held(native, tok)
        return True

    def locked(self) -> bool:
        """True if the key is locked by anyone (this object or another)."""
        with _Translated():
            return self._client.locked(_key(self.name))

    def owned(self) -> bool:
        """True if the key is locked with this object's token (``local.token``)."""
        token = self.local.token
        if token is None:
            return False
        with _Translated():
            return self._owns(self._client.holder(_key(self.name)), token)

    def _native(self, token: bytes) -> Any:
        """The handle of token: this object's, or one restored for a token
        set in ``local.token`` by the caller."""
        native = self._peek(token)
        if native is None:
            native = self._client.restore(_key(self.name), token)
            self._keep(token, native)
        return native

    def release(self) -> None:
        """Release the lock (compare-and-delete). LockError if this object
        (this thread, with ``thread_local``) holds no token;
        LockNotOwnedError if the key no longer holds it (expired, taken)."""
        token = self._release_token()
        with _Translated():
            native = self._take(token)
            if native is None:
                native = self._client.restore(_key(self.name), token)
            try:
                native.release()
            except _errors.LockLost:
                raise self._not_owned("release") from None

    def extend(self, additional_time: float, replace_ttl: bool = False) -> bool:
        """Add ``additional_time`` seconds to the lock's TTL (``replace_ttl``:
        set the TTL to it). LockError if not held or made without timeout;
        LockNotOwnedError if no longer held."""
        token = self._check_extend("extend")
        with _Translated():
            native = self._native(token)
            try:
                if replace_ttl:
                    native.extend(additional_time)
                else:
                    native.extend(additional=additional_time)
            except _errors.LockLost:
                raise self._not_owned("extend") from None
        return True

    def reacquire(self) -> bool:
        """Reset the lock's TTL to its ``timeout``. LockError if not held or
        made without timeout; LockNotOwnedError if no longer held."""
        token = self._check_extend("reacquire")
        with _Translated():
            native = self._native(token)
            try:
                native.extend(self.timeout)
            except _errors.LockLost:
                raise self._not_owned("reacquire") from None
        return True


class AsyncLock(_Base):
    """redis-py's ``redis.asyncio.lock.Lock`` (4.3), locking through distlock:
    ``redis.asyncio.Redis(...).lock(name, lock_class=distlock.redis_py.AsyncLock)``.
    As :class:`Lock`, awaitable; the distlock client belongs to the running
    event loop (one per loop)."""

    async def __aenter__(self) -> "AsyncLock":
        """Acquire; LockError "Unable to acquire lock within the time
        specified" if it was not."""
        if await self.acquire():
            return self
        raise LockError("Unable to acquire lock within the time specified", self.name)

    async def __aexit__(self, *exc: Any) -> None:
        """Release (:meth:`release`), whatever the block raised."""
        await self.release()

    async def acquire(self, blocking: Optional[bool] = None,
                      blocking_timeout: Optional[float] = None, token: Any = None) -> bool:
        """As :meth:`Lock.acquire` (redis-py's asyncio Lock has no ``sleep``
        argument here); never blocks the event loop."""
        tok = self._token(token)
        wait = self._wait(blocking, blocking_timeout)
        extra: Dict[str, Any] = {} if tok is None else {"token": tok}
        with _Translated():
            native = _aio_client_for(self.redis).lock(_key(self.name), wait=wait,
                                                      **self._lock_args(), **extra)
            if not await native.acquire():
                return False
        self._held(native, tok)
        return True

    async def locked(self) -> bool:
        """True if the key is locked by anyone."""
        with _Translated():
            return await _aio_client_for(self.redis).locked(_key(self.name))

    async def owned(self) -> bool:
        """True if the key is locked with this object's token."""
        token = self.local.token
        if token is None:
            return False
        with _Translated():
            return self._owns(await _aio_client_for(self.redis).holder(_key(self.name)), token)

    def _native(self, token: bytes) -> Any:
        native = self._peek(token)
        if native is None:
            native = _aio_client_for(self.redis).restore(_key(self.name), token)
            self._keep(token, native)
        return native

    def release(self) -> Awaitable[None]:
        """As :meth:`Lock.release`; LockError (unlocked) is raised at the
        call, before awaiting, as redis-py does."""
        token = self._release_token()
        return self._do_release(token)

    async def _do_release(self, token: bytes) -> None:
        with _Translated():
            native = self._take(token)
            if native is None:
                native = _aio_client_for(self.redis).restore(_key(self.name), token)
            try:
                await native.release()
            except _errors.LockLost:
                raise self._not_owned("release") from None

    def extend(self, additional_time: float, replace_ttl: bool = False) -> Awaitable[bool]:
        """As :meth:`Lock.extend`; LockError is raised at the call."""
        token = self._check_extend("extend")
        return self._do_extend(token, additional_time, replace_ttl)

    async def _do_extend(self, token: bytes, additional_time: float, replace_ttl: bool) -> bool:
        with _Translated():
            native = self._native(token)
            try:
                if replace_ttl:
                    await native.extend(additional_time)
                else:
                    await native.extend(additional=additional_time)
            except _errors.LockLost:
                raise self._not_owned("extend") from None
        return True

    def reacquire(self) -> Awaitable[bool]:
        """As :meth:`Lock.reacquire`; LockError is raised at the call."""
        token = self._check_extend("reacquire")
        return self._do_reacquire(token)

    async def _do_reacquire(self, token: bytes) -> bool:
        with _Translated():
            native = self._native(token)
            try:
                await native.extend(self.timeout)
            except _errors.LockLost:
                raise self._not_owned("reacquire") from None
        return True
