"""Exception hierarchy of distlock, rooted at :class:`Error`.

The C statuses map to these classes in one place: ``STATUS_ERRORS`` below is
handed to the SWIG module at import, and its ``distlock_py_raise()`` raises
the class registered for a status, with the library's per-thread detail.
The same table, with the PHP extension's classes and the CLI's exit
statuses, is in docs/errors.md ("Statuses in each front end"): the three agree.

Only DISTLOCK_NOTACQUIRED means "held by another owner", and it is not an
exception: ``Lock.acquire()`` returns False, ``with lock:`` raises
:class:`LockNotAcquired`. Every :class:`ConnectionError` (a node unreachable
or silent, no quorum, a refusing node, a grant that came too late) means the
servers gave no usable answer, never that the lock is held.

Names shared with Python's own classes: :class:`ConnectionError` and
:class:`TimeoutError` are subclasses of the built-in ``ConnectionError`` and
``TimeoutError`` (so ``except ConnectionError:`` written for sockets catches a
node that gave no usable answer, and ``except TimeoutError:`` around an
asyncio wait catches a grant that came too late: nothing is held either
way), and they are left out of ``__all__`` so that ``from distlock import *``
does not rebind the built-in names. :class:`CancelledError` is NOT
``asyncio.CancelledError``: that is a BaseException whose meaning is "this
task is being cancelled", and a status of one call must not cancel the task
(``except Exception`` would stop seeing it, ``TaskGroup`` would read it as a
cancel); a cancelled task gets asyncio's own CancelledError from distlock.aio.
"""
import builtins
from typing import Optional

from . import _core

# Without ConnectionError, TimeoutError, CancelledError: a star-import must
# not rebind Python's names (they stay reachable as distlock.ConnectionError...).
__all__ = [
    "Error", "InvalidArgument", "OutOfMemory",
    "NoQuorum", "LockLost", "ProtocolError", "ClosedError", "ResourceError",
    "LockNotAcquired", "NotHeld", "RenewalFailed", "LockLostInterrupt",
]


class Error(Exception):
    """Base of every distlock exception.

    ``status`` is the C library's status code (a negative ``DISTLOCK_E*``
    value, or ``None`` for errors raised by the Python layer itself) and
    ``detail`` the library's detail message (may be empty); ``message`` is
    the text without the detail. The library masks the passwords in its
    detail (docs/errors.md); the package adds no text that holds one.
    """

    def __init__(self, message: str, status: Optional[int] = None, detail: str = "") -> None:
        self.message = message
        self.status = status
        self.detail = detail
        super().__init__(self._text())

    def _text(self) -> str:
        return "%s: %s" % (self.message, self.detail) if self.detail else self.message


class InvalidArgument(Error, ValueError):
    """A bad key, TTL, URI, option or token (DISTLOCK_EINVAL)."""


class OutOfMemory(Error, MemoryError):
    """The library ran out of memory (DISTLOCK_ENOMEM); the client stays usable."""


class ConnectionError(Error, builtins.ConnectionError):  # noqa: A001 - distlock.ConnectionError
    """The servers gave no usable answer. Itself: the node of a one-node
    client could not be reached, or did not reply within the command timeout
    (DISTLOCK_ECONN); the subclasses say more. Never "held by another owner".
    Also the built-in ConnectionError (an OSError, ``errno`` None): code
    that catches that for network failures catches this one too, and never
    a lock held by another owner, a lost lease or a bad argument."""


class TimeoutError(ConnectionError, builtins.TimeoutError):  # noqa: A001
    """A quorum granted (or renewed) only after the ttl was used up: nothing is
    held, an acquire was undone (DISTLOCK_ETIMEDOUT). Servers too slow for the
    ttl; never "held by another owner" (that is ``acquire()`` returning False).
    Also the built-in TimeoutError (asyncio.TimeoutError since Python 3.11):
    like a wait cut by ``asyncio.timeout()``, it means "not acquired in time"."""


class NoQuorum(ConnectionError):
    """Fewer than a quorum of nodes answered (DISTLOCK_ENOQUORUM); the nodes
    that did not answer were unreachable or silent past the command timeout."""


class LockLost(Error):
    """The lock is no longer ours: it expired, was deleted or taken over
    (DISTLOCK_ENOTOWNER). Another owner's key is never touched."""


class ProtocolError(ConnectionError):
    """A node refused or answered unexpectedly: auth, ACL, WRONGTYPE, a
    malformed reply (DISTLOCK_EPROTO). A ConnectionError, as the PHP
    extension's ConnectionException and the CLI's exit 69 treat it."""


class ClosedError(Error):
    """Use after close, or a handle inherited across fork (DISTLOCK_ECLOSED)."""


class CancelledError(Error):
    """A blocking call was cancelled (DISTLOCK_ECANCELED); nothing is held.
    A cancel that came from Ctrl-C surfaces as KeyboardInterrupt instead.
    Not asyncio.CancelledError (a BaseException meaning "this task is being
    cancelled", see the module doc): a task cancelled while it awaits
    distlock.aio gets asyncio's own."""


class ResourceError(Error, OSError):
    """The system refused a resource: the random source, a thread, a file
    descriptor (DISTLOCK_ESYS); the detail names it."""


class LockNotAcquired(Error):
    """Raised by ``with lock:`` / the decorator when the lock is held by
    someone else once the wait budget is spent. ``acquire()`` returns False
    instead, like :class:`threading.Lock`."""


class NotHeld(Error, RuntimeError):
    """release()/extend() on a Lock object that does not hold the lock
    (threading.Lock raises RuntimeError in the same case)."""


class RenewalFailed(ConnectionError):
    """``extend()`` got no usable answer from a quorum (unreachable or silent
    nodes, a renewal granted too late): the lease was NOT found lost, it may
    still be ours until its validity ends (``lock.validity``). One of the
    three errors a lock's life can end with, each its own class: acquire
    failures (:class:`LockNotAcquired` for a lock held by another owner, a
    plain :class:`ConnectionError` / :class:`NoQuorum` / :class:`TimeoutError`
    when the servers gave no usable answer), renewal failures (this class;
    ``status`` is the C status and ``__cause__`` the original error) and
    loss (:class:`LockLost`). A ConnectionError subclass, as extend() raised
    ConnectionError before this class existed."""


class LockLostInterrupt(BaseException):
    """Raised INSIDE the function run by ``Lock.run()`` (in the owner's
    thread, at its next Python instruction) when the lease is found lost.
    A BaseException, like KeyboardInterrupt, so that ``except Exception:``
    in the interrupted code does not swallow it; ``Lock.run()`` turns it into
    :class:`LockLost` for its caller."""


STATUS_ERRORS = {
    _core.DISTLOCK_EINVAL: InvalidArgument,
    _core.DISTLOCK_ENOMEM: OutOfMemory,
    _core.DISTLOCK_ECONN: ConnectionError,
    _core.DISTLOCK_ETIMEDOUT: TimeoutError,
    _core.DISTLOCK_ENOQUORUM: NoQuorum,
    _core.DISTLOCK_ENOTOWNER: LockLost,
    _core.DISTLOCK_EPROTO: ProtocolError,
    _core.DISTLOCK_ECLOSED: ClosedError,
    _core.DISTLOCK_ECANCELED: CancelledError,
    _core.DISTLOCK_ESYS: ResourceError,
}

_core.distlock_py_set_errors(Error, STATUS_ERRORS)
