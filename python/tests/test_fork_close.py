"""fork() safety and close() while other threads are inside calls."""
import os
import signal
import threading
import time

import pytest
import redis

import distlock


def test_child_after_fork_uses_own_connections(server, client, r, key):
    parent_lock = client.lock(key + ":parent", ttl=30)
    assert parent_lock.acquire(blocking=False)  # the parent's socket is open
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        code = 1
        try:
            with client.lock(key + ":child", ttl=30) as lk:
                ok = redis.Redis(port=server.port).get(key + ":child") == lk.token.encode()
            try:
                parent_lock.release()  # the parent's lock is not the child's to release
                code = 2
            except distlock.ClosedError:
                code = 0 if ok else 3
        except BaseException:
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    # The parent's lock is intact and the parent's connection still works.
    assert r.get(key + ":parent") == parent_lock.token
    assert r.get(key + ":child") is None
    with client.lock(key + ":after", ttl=30) as lk:
        assert r.get(key + ":after") == lk.token
    parent_lock.release()


def test_close_waits_for_a_thread_inside_a_blocking_acquire(server, r, key):
    holder = distlock.Client(server.uri)
    h = holder.lock(key + ":h", ttl=30)
    assert h.acquire(blocking=False)
    c = distlock.Client(server.uri)
    started = threading.Event()
    result = {}

    def waiter():
        started.set()
        try:
            result["ok"] = c.lock(key + ":h", ttl=10, wait=0.5).acquire()
        except BaseException as e:  # pragma: no cover - reported below
            result["err"] = e

    t = threading.Thread(target=waiter)
    t.start()
    assert started.wait(5)
    # Wait until the waiter is inside the C call (it holds no GIL there).
    deadline = time.monotonic() + 5
    while c._busy == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert c._busy == 1
    c.close()  # must wait for the waiter's call, then free
    t.join(10)
    assert result == {"ok": False}
    with pytest.raises(distlock.ClosedError):
        c.lock(key).acquire(blocking=False)
    h.release()
    holder.close()


def test_binary_key(server, client):
    raw = redis.Redis(port=server.port)
    k = b"bin:\xff\xfe\x01"
    with client.lock(k, ttl=5) as lk:
        assert raw.get(k) == lk.token.encode()
        assert client.inspect(k)[0] == lk.token
    assert raw.get(k) is None


def test_child_forked_while_another_thread_is_inside_acquire_can_close(server, r, key):
    # The thread inside acquire() at the fork does not exist in the child,
    # so the call it counted never ends there: the child's close() must not
    # wait for it.
    holder = distlock.Client(server.uri)
    h = holder.lock(key + ":h", ttl=30)
    assert h.acquire(blocking=False)
    c = distlock.Client(server.uri)
    result = {}
    t = threading.Thread(
        target=lambda: result.update(ok=c.lock(key + ":h", ttl=10, wait=1.0).acquire()))
    t.start()
    deadline = time.monotonic() + 5
    while c._busy == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert c._busy == 1
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        code = 1
        try:
            signal.alarm(10)  # a close() that hangs ends the child with SIGALRM
            with c.lock(key + ":child", ttl=30):
                pass
            c.close()
            code = 0 if c._busy == 0 else 2
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    t.join(10)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert result == {"ok": False}
    c.close()
    assert c._busy == 0
    h.release()
    holder.close()
