"""Ctrl-C during a waiting acquire(): a real SIGINT sent to a child process
that waits (without limit) for a key another client holds. The child must
raise KeyboardInterrupt within 100 ms of the signal and leave nothing on the
server: the holder's key is untouched and the child holds nothing.

The child re-checks only every 5 s, so a prompt end can only come from the
signal. "The child waits" is observed on the server: its subscriber shows up
in PUBSUB NUMSUB distlock:<key> (a waiter subscribes before it sleeps)."""
import os
import signal
import subprocess
import sys
import textwrap
import time

from conftest import wait_until

CHILD = textwrap.dedent("""
    import signal, sys, time
    import distlock
    # A background job of a non-interactive shell inherits SIGINT ignored,
    # and Python then leaves it so: give it the usual handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    uri, key = sys.argv[1:3]
    c = distlock.Client(uri, retry_min=5, retry_max=5)
    lk = c.lock(key, ttl=30)
    try:
        print("waiting", flush=True)
        got = lk.acquire()   # no limit
        print("returned", got, flush=True)
    except KeyboardInterrupt:
        print("interrupted %.6f" % time.monotonic(), flush=True)
        c.close()
        sys.exit(42)
""")


def _numsub(r, key):
    return dict(r.pubsub_numsub("distlock:" + key)).get("distlock:" + key, 0)


def _interrupt_waiting_child(server, r, key):
    child = subprocess.Popen([sys.executable, "-c", CHILD, server.uri, key], text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert child.stdout.readline().strip() == "waiting"
        assert wait_until(lambda: _numsub(r, key) >= 1, 10), "the child never subscribed"
        t_kill = time.monotonic()
        os.kill(child.pid, signal.SIGINT)
        try:
            out, err = child.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
            raise AssertionError("still blocked 10 s after SIGINT: %r %r" % (out, err))
        assert child.returncode == 42, (child.returncode, out, err)
        words = out.split()
        assert words[0] == "interrupted", (out, err)
        latency = float(words[1]) - t_kill
        print("KeyboardInterrupt %.1f ms after SIGINT" % (latency * 1000))
        assert latency < 0.1, "KeyboardInterrupt %.1f ms after SIGINT" % (latency * 1000)
        return latency
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_ctrl_c_interrupts_waiting_acquire(server, client, r, key):
    with client.lock(key, ttl=30) as held:
        token = held.token
        _interrupt_waiting_child(server, r, key)
        # Untouched: the holder's token, its TTL still running.
        assert r.get(key) == token
        assert r.pttl(key) > 0
        # The child's subscription is gone with it; nothing else of it is left.
        assert wait_until(lambda: _numsub(r, key) == 0, 5)
        assert sorted(r.keys("*" + key + "*")) == [key]
    assert r.exists(key) == 0


def test_ctrl_c_repeatedly(server, client, r, key):
    """The race "signal just before the sleep" has no window: every one of
    several interrupts, sent as soon as the child waits, is prompt."""
    with client.lock(key, ttl=30) as held:
        worst = max(_interrupt_waiting_child(server, r, key) for _ in range(5))
        print("worst of 5: %.1f ms" % (worst * 1000))
        assert r.get(key) == held.token
