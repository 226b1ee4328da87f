"""A Client's Locks (Client._locks: each Lock links itself into its client
when made and out when finalized) and what close() does with them, under
threads, collection, resurrection and interpreter exit; the keyword
arguments of Client.lock() and Lock.acquire() however their names are made.
A real redis-server."""
import gc
import os
import subprocess
import sys
import threading
import warnings

import pytest

import distlock
from distlock import ClosedError


def _prefixed(r, prefix):
    return sorted(r.scan_iter(match=prefix + "*"))


def test_close_from_another_thread_releases_every_lock_still_held(server, r, key):
    # Workers make, acquire, release and drop Locks in a loop and keep
    # some held; another thread closes the client meanwhile. Every lock
    # still held then is released by close(), each worker ends with
    # ClosedError, and no key is left behind.
    c = distlock.Client(server.uri)
    kept = []  # Locks held when close() ran, owned by the workers
    started = threading.Barrier(5)
    errors = []

    def work(w):
        started.wait()
        i = 0
        try:
            while True:
                i += 1
                lk = c.lock("%s:%d:%d" % (key, w, i % 7), ttl=30)
                if not lk.acquire(blocking=False):
                    continue
                _ = (lk.validity, lk.token, lk.held, lk.fence)
                if i % 5 == 0:
                    kept.append(lk)  # held until close()
                else:
                    lk.release()
        except ClosedError:
            return
        except Exception as e:  # anything else is a defect
            errors.append(e)

    ts = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in ts:
        t.start()
    started.wait()
    while len(kept) < 40:
        threading.Event().wait(0.001)
    c.close()
    for t in ts:
        t.join(30)
        assert not t.is_alive()
    assert errors == []
    assert all(lk._h is None for lk in kept)
    assert _prefixed(r, key) == []
    assert c._locks == [] or all(lk._h is None for lk in c._locks)


def test_reads_racing_release_see_the_lock_held_or_not(client, key):
    # validity, token, held, fence and lost read the handle under the
    # handle mutex while another thread acquires and releases (the release
    # frees the handle without the GIL): each read is of a live handle.
    lk = client.lock(key, ttl=30, fencing=True)
    stop = threading.Event()
    seen = {"held": 0, "free": 0}
    bad = []

    def read():
        while not stop.is_set():
            tok, v, f = lk.token, lk.validity, lk.fence
            if tok is None:
                seen["free"] += 1
            else:
                seen["held"] += 1
                if not (len(tok) > 0 and v >= 0 and (f is None or f > 0)):
                    bad.append((tok, v, f))
            _ = lk.held, lk.lost

    readers = [threading.Thread(target=read) for _ in range(3)]
    for t in readers:
        t.start()
    for _ in range(300):
        assert lk.acquire()
        lk.release()
    stop.set()
    for t in readers:
        t.join()
    assert bad == []
    assert seen["held"] + seen["free"] > 0


def test_reentrant_inner_and_outer_releases_free_each_handle_once(client, r, key):
    lk = client.lock(key, ttl=30, reentrant=True)
    for _ in range(50):
        assert lk.acquire()
        tok = lk.token
        assert lk.acquire()
        assert lk.acquire()
        lk.release()
        lk.release()
        assert lk.held and lk.token == tok
        assert r.get(key) == tok
        lk.release()
        assert not lk.held and r.get(key) is None
    with pytest.raises(distlock.NotHeld):
        lk.release()


def test_thousands_of_locks_are_listed_once_each_and_close_releases_the_held(server, r, key):
    c = distlock.Client(server.uri)
    locks = [c.lock("%s:%d" % (key, i), ttl=30) for i in range(3000)]
    listed = c._locks
    assert len(listed) == 3000 and {id(x) for x in listed} == {id(x) for x in locks}
    del listed
    for lk in locks[::100]:
        assert lk.acquire(blocking=False)
    del locks[1::100]  # never acquired: out of the list when collected
    gc.collect()
    assert len(c._locks) == 3000 - 30
    c.close()
    assert _prefixed(r, key) == []
    assert all(lk._h is None for lk in locks)


class _Resurrecting(distlock.Lock):
    kept = []

    def __del__(self):
        super().__del__()
        _Resurrecting.kept.append(self)


def test_a_lock_resurrected_by_its_del_and_acquired_again_is_released_by_close(server, r, key):
    # LockBase's finalizer takes the Lock out of its client's list; a
    # subclass's __del__ that keeps it alive hands the client a Lock it
    # no longer lists. Acquired again, close() must still release its key.
    c = distlock.Client(server.uri)
    lk = _Resurrecting(c, key, ttl=30)
    del lk
    gc.collect()
    lk = _Resurrecting.kept.pop()
    assert lk.acquire(blocking=False)
    assert r.get(key) is not None
    c.close()
    assert r.get(key) is None
    with pytest.raises(ClosedError):
        lk.release()


def test_a_lock_collected_held_while_close_runs_leaves_nothing_to_the_close(server, r, key):
    # Locks collected while held (not released: their TTL ends them) and
    # close() in another thread: neither sees a freed handle; the locks
    # still referenced are released.
    c = distlock.Client(server.uri)
    live = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        for i in range(200):
            lk = c.lock("%s:%d" % (key, i), ttl=30)
            assert lk.acquire(blocking=False)
            if i % 2:
                live.append(lk)
            else:
                lk.self_ref = lk  # a cycle: collected by gc below
        del lk
        closer = threading.Thread(target=c.close)
        closer.start()
        gc.collect()
        closer.join(30)
    assert not closer.is_alive()
    left = set(_prefixed(r, key))
    assert left.isdisjoint("%s:%d" % (key, i) for i in range(1, 200, 2))


def test_keyword_names_that_are_not_interned_bind_as_the_interned_ones(client, key):
    ttl = "".join(["tt", "l"])
    assert ttl is not sys.intern("ttl") or ttl == "ttl"
    lk = client.lock(key, **{ttl: 5, "".join(["wa", "it"]): 0.25})
    assert lk.ttl == 5
    blocking = "".join(["block", "ing"])
    assert lk.acquire(**{blocking: False})
    assert not client.lock(key, ttl=5).acquire(**{"".join(["time", "out"]): 0.05})
    lk.release()
    with pytest.raises(TypeError, match="multiple values|got multiple"):
        client.lock(key, 5, **{ttl: 5})
    with pytest.raises(TypeError, match="unexpected keyword"):
        client.lock(key, **{"".join(["tt", "x"]): 5})
    with pytest.raises(TypeError, match="multiple values|got multiple"):
        lk.acquire(False, **{blocking: False})
    with pytest.raises(TypeError, match="unexpected keyword"):
        lk.acquire(**{"".join(["block", "s"]): False})


def test_keys_and_tokens_of_every_length_up_to_80_bytes(client, r, key):
    # The ordering tag hashes a key and a token eight bytes at a time, the
    # tail with its length: every length and a tail of high bytes.
    for n in range(1, 81):
        k = (key + ":" + "\u00e9x" * 80)[:n] if n > len(key) else key[:n]
        tok = ("t\u00ff" * 80)[:n]
        lk = client.lock(k, ttl=30, token=tok)
        assert lk.acquire(blocking=False), n
        assert lk.token == tok and r.get(k) == tok
        lk.release()
        assert r.get(k) is None


def test_interpreter_exit_with_live_locks_and_clients_ends_cleanly(server):
    code = (
        "import distlock, sys\n"
        "c = distlock.Client(sys.argv[1])\n"
        "d = distlock.Client(sys.argv[1])\n"
        "held = [c.lock('exit:%d' % i, ttl=5) for i in range(50)]\n"
        "for lk in held[::2]: lk.acquire(blocking=False)\n"
        "cyc = d.lock('exit:cycle', ttl=5); cyc.me = cyc; cyc.acquire(blocking=False)\n"
        "d.me = d\n"
        "print('ok', len(c._locks), flush=True)\n"
    )
    p = subprocess.run([sys.executable, "-W", "ignore", "-c", code, server.uri],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONFAULTHANDLER="1"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "ok 50"


def test_a_lock_being_deallocated_is_not_listed_by_its_client(server, r, key):
    # A subclass's __del__ that does not call LockBase's finalizer leaves
    # the Lock linked until its memory goes; before that its weak
    # references' callbacks run. One of them that reads client._locks, or
    # closes the client (close() drops every listed Lock), must not be
    # handed the dying Lock: a new reference to it outlives its memory.
    code = (
        "import gc, sys, weakref, distlock\n"
        "c = distlock.Client(sys.argv[1])\n"
        "class Logged(distlock.Lock):\n"
        "    def __del__(self):\n"
        "        pass\n"
        "seen = []\n"
        "for i in range(3):\n"
        "    lk = Logged(c, sys.argv[2] + str(i), ttl=5)\n"
        "    weakref.finalize(lk, lambda: seen.extend(c._locks))\n"
        "    del lk\n"
        "lk = Logged(c, sys.argv[2], ttl=5)\n"
        "weakref.finalize(lk, c.close)\n"
        "del lk\n"
        "gc.collect()\n"
        "print('listed while dying:', len(seen), 'closed:', c.closed, flush=True)\n"
    )
    p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code, server.uri, key],
                       capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout.strip()) == (0, "listed while dying: 0 closed: True"), p.stderr
