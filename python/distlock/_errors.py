"""Exception hierarchy of distlock, rooted at :class:`Error`.

The C statuses map to these classes in one place: ``STATUS_ERRORS`` below is
handed to the SWIG module at import, and its ``distlock_py_raise()`` raises
the class registered for a status, with the library's per-thread detail.
"""
from typing import Iterable, Optional

from . import _core
from ._mask import mask_text

__all__ = [
    "Error", "InvalidArgument", "OutOfMemory", "ConnectionError", "TimeoutError",
    "NoQuorum", "LockLost", "ProtocolError", "ClosedError", "LockNotAcquired", "NotHeld",
]


class Error(Exception):
    """Base of every distlock exception.

    ``status`` is the C library's status code (a negative ``DISTLOCK_E*``
    value, or ``None`` for errors raised by the Python layer itself) and
    ``detail`` the library's detail message (may be empty); ``message`` is
    the text without the detail. Passwords of server URIs in either are
    replaced by ``***`` (see _mask.py), also in ``args`` and ``str()``.
    """

    def __init__(self, message: str, status: Optional[int] = None, detail: str = "") -> None:
        self.message = mask_text(message)
        self.status = status
        self.detail = mask_text(detail)
        super().__init__(self._text())

    def _text(self) -> str:
        return "%s: %s" % (self.message, self.detail) if self.detail else self.message

    def _hide(self, secrets: Iterable[str]) -> None:
        """Mask these known secrets too (a Client's passwords, where they are
        at hand)."""
        secrets = tuple(secrets)
        self.message = mask_text(self.message, secrets)
        self.detail = mask_text(self.detail, secrets)
        self.args = (self._text(),)


class InvalidArgument(Error, ValueError):
    """A bad key, TTL, URI, option or token (DISTLOCK_EINVAL)."""


class OutOfMemory(Error, MemoryError):
    """The library ran out of memory (DISTLOCK_ENOMEM); the client stays usable."""


class ConnectionError(Error):  # noqa: A001 - deliberately distlock.ConnectionError
    """A node could not be reached or the connection broke (DISTLOCK_ECONN)."""


class TimeoutError(ConnectionError):  # noqa: A001
    """A time budget ran out (DISTLOCK_ETIMEDOUT)."""


class NoQuorum(ConnectionError):
    """Fewer than a quorum of nodes answered (DISTLOCK_ENOQUORUM)."""


class LockLost(Error):
    """The lock is no longer ours: it expired, was deleted or taken over
    (DISTLOCK_ENOTOWNER). Another owner's key is never touched."""


class ProtocolError(Error):
    """Server error or unexpected reply: auth, WRONGTYPE... (DISTLOCK_EPROTO)."""


class ClosedError(Error):
    """Use after close, or a handle inherited across fork (DISTLOCK_ECLOSED)."""


class LockNotAcquired(Error):
    """Raised by ``with lock:`` / the decorator when the lock is held by
    someone else once the wait budget is spent. ``acquire()`` returns False
    instead, like :class:`threading.Lock`."""


class NotHeld(Error, RuntimeError):
    """release()/extend() on a Lock object that does not hold the lock
    (threading.Lock raises RuntimeError in the same case)."""


STATUS_ERRORS = {
    _core.DISTLOCK_EINVAL: InvalidArgument,
    _core.DISTLOCK_ENOMEM: OutOfMemory,
    _core.DISTLOCK_ECONN: ConnectionError,
    _core.DISTLOCK_ETIMEDOUT: TimeoutError,
    _core.DISTLOCK_ENOQUORUM: NoQuorum,
    _core.DISTLOCK_ENOTOWNER: LockLost,
    _core.DISTLOCK_EPROTO: ProtocolError,
    _core.DISTLOCK_ECLOSED: ClosedError,
}

_core.distlock_py_set_errors(Error, STATUS_ERRORS)
