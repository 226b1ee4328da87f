"""Client.close() from a signal handler that interrupts a waiting acquire()
of the same client in the same (main) thread: the usual
`signal.signal(SIGTERM, lambda *a: (client.close(), sys.exit(0)))`.

close() must not wait for the call the handler interrupted (it is on the
handler's own stack and can't end before the handler returns): it marks the
client closed, cancels its waiting calls and returns; the close is finished
by the interrupted call when it leaves. That call ends without the lock: it
raises the handler's exception, or ClosedError when the handler returns.

A child process waits (without limit) for a key that a plain redis-py SET
holds; the child is sent SIGTERM once it waits (its subscriber shows up in
PUBSUB NUMSUB distlock:<key>). A close() that waits for its own thread's
call hangs; the child is killed 15 s after the signal. (An alarm in the
child would not end it: the library's interrupt hook, which runs the
handler, runs with the thread's signals blocked.)"""
import os
import signal
import subprocess
import sys
import textwrap

from conftest import wait_until

CHILD = textwrap.dedent("""
    import signal, sys, time
    import redis
    import distlock
    uri, key, mode = sys.argv[1:4]
    c = distlock.Client(uri, retry_min=5, retry_max=5)
    lk = c.lock(key, ttl=30)

    def on_term(signum, frame):
        c.close()
        print("handler closed", c.closed, flush=True)
        if mode == "exit":
            sys.exit(42)
        # The key is free from now on: an acquire that were not cancelled
        # would win it (at its next re-check) and return True.
        redis.Redis.from_url(uri).delete(key)

    signal.signal(signal.SIGTERM, on_term)
    print("waiting", flush=True)
    try:
        got = lk.acquire()   # no limit
        print("returned", got, lk.held, flush=True)
    except distlock.ClosedError:
        print("ClosedError", lk.held, flush=True)
    t0 = time.monotonic()
    c.close()  # finished already: returns at once
    print("second close %.3f closed %s freed %s busy %d"
          % (time.monotonic() - t0, c.closed, c._freed, c._busy), flush=True)
""")


def _numsub(r, key):
    return dict(r.pubsub_numsub("distlock:" + key)).get("distlock:" + key, 0)


def _terminate_waiting_child(script, args, ready, r, key):
    """(returncode, stdout lines after the ready ones, stderr) of a child
    running `script` with `args`, sent SIGTERM once it printed the `ready`
    lines and its acquire waits (subscribed)."""
    child = subprocess.Popen([sys.executable, "-c", script, *args], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for line in ready:
            assert child.stdout.readline().strip() == line
        assert wait_until(lambda: _numsub(r, key) >= 1, 10), "the child never subscribed"
        os.kill(child.pid, signal.SIGTERM)
        try:
            out, err = child.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
            raise AssertionError("still running 15 s after SIGTERM (close() in the handler "
                                 "waits for or does not cancel the call it interrupted): "
                                 "%r %r" % (out, err))
        return child.returncode, out.splitlines(), err
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_handler_that_closes_and_exits_ends_the_waiting_acquire(server, r, key):
    r.set(key, "held-by-another", px=30000)
    code, lines, err = _terminate_waiting_child(CHILD, [server.uri, key, "exit"], ["waiting"],
                                                r, key)
    assert code == 42, (code, lines, err)
    assert lines == ["handler closed True"], (lines, err)
    # The holder's key is untouched, and the child left nothing of its own.
    assert r.get(key) == "held-by-another"
    assert wait_until(lambda: _numsub(r, key) == 0, 5)
    assert sorted(r.keys("*" + key + "*")) == [key]


def test_handler_that_closes_and_returns_makes_the_acquire_raise_closed_error(server, r, key):
    r.set(key, "held-by-another", px=30000)
    code, lines, err = _terminate_waiting_child(CHILD, [server.uri, key, "return"], ["waiting"],
                                                r, key)
    assert code == 0, (code, lines, err)
    assert lines[:2] == ["handler closed True", "ClosedError False"], (lines, err)
    words = lines[2].split()
    assert words[0:2] == ["second", "close"] and float(words[2]) < 0.5, lines
    assert words[3:] == ["closed", "True", "freed", "True", "busy", "0"], lines
    # The key the handler freed was not taken by the cancelled acquire.
    assert r.exists(key) == 0
    assert wait_until(lambda: _numsub(r, key) == 0, 5)
    assert r.keys("*" + key + "*") == []


def test_call_count_tells_whether_this_thread_is_inside_a_call_of_its_client():
    """CallCount.inside (what close() asks): this thread's calls only, by
    client, right when calls end in another order than they began; a forked
    child's reset keeps the forking thread's own calls."""
    import threading
    from distlock import _core

    a, b = _core.CallCount(), _core.CallCount()
    assert not a.inside and not b.inside
    a.append(None)
    b.append(None)
    a.append(None)
    assert a.inside and b.inside
    seen = {}
    t = threading.Thread(target=lambda: seen.update(a=a.inside, b=b.inside))
    t.start()
    t.join(10)
    assert seen == {"a": False, "b": False}
    b.pop()  # b's call ends before the a call that began after it
    assert a.inside and not b.inside
    a.pop()
    assert a.inside
    # Another thread's call that never ends here (as in a forked child,
    # where that thread does not exist): forgotten, this thread's kept.
    t = threading.Thread(target=lambda: a.append(None))
    t.start()
    t.join(10)
    assert len(a) == 2
    a.forget_other_threads()
    assert len(a) == 1 and a.inside
    a.pop()
    assert len(a) == 0 and not a.inside


CHILD_WITH_CLOSING_THREAD = textwrap.dedent("""
    import signal, sys, threading, time
    import distlock
    uri, key = sys.argv[1:3]
    c = distlock.Client(uri, retry_min=5, retry_max=5)
    lk = c.lock(key, ttl=30)

    def on_term(signum, frame):
        c.close()
        print("handler closed", c.closed, flush=True)

    def report_closing():
        # Another thread's close() has begun once the client shows closed;
        # it waits for the main thread's acquire, which waits for the key.
        while not c.closed:
            time.sleep(0.01)
        print("closing", flush=True)

    signal.signal(signal.SIGTERM, on_term)
    threading.Thread(target=report_closing, daemon=True).start()
    closer = threading.Thread(target=c.close, daemon=True)
    threading.Timer(0.05, closer.start).start()
    print("waiting", flush=True)
    try:
        print("returned", lk.acquire(), flush=True)   # no limit
    except distlock.ClosedError:
        print("ClosedError", lk.held, flush=True)
    closer.join(10)
    print("closer done", not closer.is_alive(), "freed", c._freed, flush=True)
""")


def test_handler_close_while_another_thread_closes_still_cancels_the_waiting_acquire(
        server, r, key):
    """A close() already begun in another thread waits for the main thread's
    acquire; the handler's close() in that acquire must still cancel it (it
    can't wait for it either), else both wait for a key that never frees."""
    r.set(key, "held-by-another", px=30000)
    code, lines, err = _terminate_waiting_child(CHILD_WITH_CLOSING_THREAD, [server.uri, key],
                                                ["waiting", "closing"], r, key)
    assert code == 0, (code, lines, err)
    assert lines == ["handler closed True", "ClosedError False",
                     "closer done True freed True"], (lines, err)
    assert r.get(key) == "held-by-another"
    assert wait_until(lambda: _numsub(r, key) == 0, 5)
    assert sorted(r.keys("*" + key + "*")) == [key]
