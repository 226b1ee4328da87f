"""Threads of one process sharing one Lock object queue on its local mutex
(distlock._core.Mutex) before any request: a thread that waits there can
be interrupted by Ctrl-C as a waiting threading.Lock can, its wait counts
against its timeout, and the thread that holds the lock keeps it."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

CHILD = textwrap.dedent("""
    import signal, sys, threading
    import distlock
    signal.signal(signal.SIGINT, signal.default_int_handler)
    uri, key = sys.argv[1:3]
    c = distlock.Client(uri)
    lk = c.lock(key, ttl=30)
    held, done = threading.Event(), threading.Event()

    def holder():
        lk.acquire()
        held.set()
        done.wait()
        lk.release()

    t = threading.Thread(target=holder)
    t.start()
    held.wait()
    main = threading.main_thread().ident

    def at_the_acquire():
        f = sys._current_frames()[main]
        while f is not None and not (f.f_code.co_filename == "<string>" and f.f_lineno == LINE):
            f = f.f_back
        return f is not None

    def announce():
        # "waiting" once the main thread is inside the acquire() below
        # (this frame stays on that line while the call blocks)
        while not at_the_acquire():
            threading.Event().wait(0.001)
        print("waiting", flush=True)

    threading.Thread(target=announce, daemon=True).start()
    try:
        lk.acquire()  # the local mutex: held by the other thread
        print("returned", flush=True)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent's next ones
        print("interrupted", lk.held, flush=True)
        done.set()
        t.join()
        print("released by its holder", lk.held, flush=True)
        c.close()
        sys.exit(42)
""")


def _child_source():
    line = next(i for i, text in enumerate(CHILD.splitlines(), 1)
                if text.strip().startswith("lk.acquire()  # the local mutex"))
    return CHILD.replace("== LINE)", "== %d)" % line)


def test_ctrl_c_interrupts_a_thread_waiting_for_its_lock_object(server, r, key):
    child = subprocess.Popen([sys.executable, "-c", _child_source(), server.uri, key], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    watchdog = threading.Timer(30, child.kill)  # a child that never waits: no output
    watchdog.start()
    try:
        assert child.stdout.readline().strip() == "waiting"
        assert r.get(key) is not None, "the holder thread took the key"
        # A signal that lands between the line and the wait is seen only at
        # the next one: send them until the child reacts.
        deadline = time.monotonic() + 10
        while child.poll() is None and time.monotonic() < deadline:
            os.kill(child.pid, signal.SIGINT)
            try:
                child.wait(0.1)
            except subprocess.TimeoutExpired:
                pass
        out, err = child.communicate(timeout=10)
        assert child.returncode == 42, (child.returncode, out, err)
        lines = out.splitlines()
        # the holder thread still held the lock then, and released it itself
        assert lines[0] == "interrupted True", (out, err)
        assert lines[1] == "released by its holder False", (out, err)
        assert r.exists(key) == 0
    finally:
        watchdog.cancel()
        if child.poll() is None:
            child.kill()
            child.wait()


def test_wait_for_another_thread_of_the_object_ends_at_the_timeout(client, r, key):
    lk = client.lock(key, ttl=30)
    held, done = threading.Event(), threading.Event()

    def holder():
        with lk:
            held.set()
            done.wait(30)

    t = threading.Thread(target=holder)
    t.start()
    try:
        assert held.wait(10)
        token = r.get(key)
        t0 = time.monotonic()
        assert lk.acquire(timeout=0.3) is False
        assert time.monotonic() - t0 >= 0.3
        assert lk.acquire(blocking=False) is False
        assert r.get(key) == token  # still the holder thread's
    finally:
        done.set()
        t.join(10)
    assert not t.is_alive()
    assert r.exists(key) == 0
    assert lk.acquire(timeout=1) is True  # free again for this thread
    lk.release()


def test_waiting_thread_gets_the_object_once_its_holder_releases(client, r, key):
    lk = client.lock(key, ttl=30)
    assert lk.acquire(blocking=False)
    got = []
    t = threading.Thread(target=lambda: got.append((lk.acquire(timeout=10), lk.token)))
    t.start()
    first = lk.token
    lk.release()
    t.join(15)
    assert got and got[0][0] is True
    assert got[0][1] != first and r.get(key) == got[0][1]
    lk.release()
