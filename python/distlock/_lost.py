"""Lost leases for the blocking API: one watcher thread per Client.

The C core marks a lock lost when its auto-renewal (or an extend) finds it
gone, and then makes the client's lost eventfd readable
(``distlock_client_lost_fd``). The C lost callback is not used from Python:
it runs on the core's renewal thread, which would then have to take the GIL
(and must never do so while the interpreter shuts down). Instead a plain
Python thread sleeps in ``poll()`` on that fd -- no polling -- and, when it
fires, asks each watched Lock to check its own flag; a Lock found lost calls
its ``on_lost`` callback and interrupts a ``Lock.run()`` under way.

The thread exists only for clients that asked for it (a lock made with
``on_lost=``, or ``Lock.run()``); ``Client.close()`` stops it before the C
client (and its fd) is freed.
"""
import os
import select
import threading
import weakref
from typing import Any, Protocol


class Watched(Protocol):
    """What the watcher needs of a lock (the blocking Lock, the asyncio one):
    a check of its own lost flag. A protocol, so this module imports no lock
    module (they import it)."""

    def _lost_event(self) -> None: ...


class LostWatcher:
    """poll() on the client's lost fd and a stop pipe; see the module doc."""

    def __init__(self, lost_fd: int) -> None:
        self._fd = lost_fd
        self._stop_r, self._stop_w = os.pipe()
        self._mu = threading.Lock()
        self._locks: "weakref.WeakSet[Watched]" = weakref.WeakSet()
        self._thread = threading.Thread(target=self._main, name="distlock-lost-watcher",
                                        daemon=True)
        self._thread.start()

    def watch(self, lock: Watched) -> None:
        """Watch lock from now on; a loss that happened before (before the
        fd existed, or while unwatched) is reported at once."""
        with self._mu:
            self._locks.add(lock)
        lock._lost_event()

    def unwatch(self, lock: Watched) -> None:
        with self._mu:
            self._locks.discard(lock)

    def _main(self) -> None:
        poller = select.poll()  # not select(): descriptors above FD_SETSIZE work too
        poller.register(self._fd, select.POLLIN)
        poller.register(self._stop_r, select.POLLIN)
        while True:
            ready = [fd for fd, _ in poller.poll()]
            if self._stop_r in ready:
                return
            try:
                os.read(self._fd, 8)  # reset the eventfd (non-blocking)
            except BlockingIOError:
                pass
            with self._mu:
                locks = list(self._locks)
            for lk in locks:
                lk._lost_event()

    def stop(self) -> None:
        """Stop the thread (idempotent). Called by Client.close() before the
        C client closes the fd."""
        if self._stop_w < 0:
            return
        try:
            os.write(self._stop_w, b"x")
        except OSError:  # pragma: no cover
            pass
        if self._thread is not threading.current_thread():
            self._thread.join()
        for fd in (self._stop_r, self._stop_w):
            try:
                os.close(fd)
            except OSError:  # pragma: no cover
                pass
        self._stop_r = self._stop_w = -1


def report_callback_error(what: str, exc: BaseException, obj: Any) -> None:
    """An on_lost callback raised: it has nowhere to go (it runs in the
    watcher thread or the event loop), so it goes where Python reports such
    errors (sys.unraisablehook, "Exception ignored in <what>"), and the
    watcher carries on. The interpreter makes the hook's argument: its own
    hook, the one programs run with, takes no other (an object of the same
    shape raised TypeError there, which ended the watcher thread)."""
    from . import _core
    _core.distlock_py_report_unraisable(exc, what, obj)
