"""Ctrl-C during a waiting Semaphore / MultiLock acquire(), as test_cancel.py
does for a Lock: a real SIGINT to a child that waits without limit (re-checking
only every 5 s) raises KeyboardInterrupt promptly and leaves nothing held."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import distlock
from conftest import subscribers, wait_until

CHILD = textwrap.dedent("""
    import signal, sys, time
    import distlock
    signal.signal(signal.SIGINT, signal.default_int_handler)
    uri, kind, key = sys.argv[1:4]
    c = distlock.Client(uri, retry_min=5, retry_max=5)
    lk = c.semaphore(key, 1, ttl=30) if kind == "semaphore" else \\
        c.lock_many([key + ":free", key], ttl=30)
    try:
        print("waiting", flush=True)
        got = lk.acquire()   # no limit
        print("returned", got, flush=True)
    except KeyboardInterrupt:
        print("interrupted %.6f" % time.monotonic(), flush=True)
        c.close()
        sys.exit(42)
""")


@pytest.mark.parametrize("kind", ["semaphore", "many"])
def test_ctrl_c_interrupts_a_waiting_acquire_with_nothing_held(server, r, key, kind):
    with distlock.Client(server.uri) as c:
        held = c.semaphore(key, 1, ttl=30) if kind == "semaphore" else c.lock(key, ttl=30)
        assert held.acquire(blocking=False)
        child = subprocess.Popen([sys.executable, "-c", CHILD, server.uri, kind, key],
                                 text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert child.stdout.readline().strip() == "waiting"
            assert wait_until(lambda: subscribers([server], key) >= 1, 10), \
                "the child never waited"
            t_kill = time.monotonic()
            os.kill(child.pid, signal.SIGINT)
            out, err = child.communicate(timeout=10)
            assert child.returncode == 42, (child.returncode, out, err)
            words = out.split()
            assert words[0] == "interrupted", (out, err)
            latency = float(words[1]) - t_kill
            assert latency < 0.1, "KeyboardInterrupt %.1f ms after SIGINT" % (latency * 1000)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        # nothing of the child's is left: the holder's lease only
        if kind == "semaphore":
            assert set(r.zrange(key, 0, -1)) == {held.token, "__distlock_semaphore__"}
        else:
            assert r.get(key) == held.token and r.exists(key + ":free") == 0
        held.release()
