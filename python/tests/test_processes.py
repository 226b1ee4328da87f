"""Two processes contending for one key."""
import os
import subprocess
import sys

CHILD = os.path.join(os.path.dirname(__file__), "_child.py")


def run_child(uri, key, mode, **kw):
    return subprocess.Popen([sys.executable, CHILD, uri, key, mode], text=True,
                            stdout=subprocess.PIPE, **kw)


def test_other_process_holds_then_releases(server, client, r, key):
    child = run_child(server.uri, key, "hold", stdin=subprocess.PIPE)
    try:
        line = child.stdout.readline().split()
        assert line[0] == "held", line
        assert r.get(key) == line[1]
        lk = client.lock(key, ttl=10)
        assert lk.acquire(blocking=False) is False
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "released"
        assert child.wait(30) == 0
        assert lk.acquire(blocking=False) is True
        lk.release()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_this_process_holds_other_is_refused(server, client, key):
    with client.lock(key, ttl=10):
        child = run_child(server.uri, key, "try")
        out, _ = child.communicate(timeout=60)
        assert child.returncode == 0
        assert out.strip() == "busy"
    child = run_child(server.uri, key, "try")
    out, _ = child.communicate(timeout=60)
    assert out.strip() == "acquired"
