"""A redis-sentinel:// server list works the same as a plain one: lock,
release, wait and the sentinels' own credentials (a Sentinel group of
1 master, 2 replicas and 3 sentinels from tests/harness/sentinels.py)."""
import os
import subprocess
import sys
import threading
import uuid

import pytest
import redis

import distlock

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                       "harness", "sentinels.py")


@pytest.fixture(scope="module")
def group():
    p = subprocess.Popen([sys.executable, HARNESS, "--data-pass", "data-pw",
                          "--sentinel-user", "sent", "--sentinel-pass", "sentinel-pw"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdin is not None and p.stdout is not None
    line = p.stdout.readline()
    assert line.startswith("ready "), line
    fields = dict(w.split("=", 1) for w in line.split()[1:])
    p.stdin.write("master\n")
    p.stdin.flush()
    master = int(p.stdout.readline().split()[1])
    yield fields["uri"], master
    p.stdin.close()
    p.wait(timeout=30)


def test_lock_release_wait(group):
    uri, master = group
    key = "test:" + uuid.uuid4().hex
    r = redis.Redis(port=master, password="data-pw", decode_responses=True)
    c = distlock.Client(uri)
    try:
        shown = repr(c)
        assert "sentinel-pw" not in shown and "data-pw" not in shown
        with c.lock(key, ttl=10) as lk:
            assert r.get(key) == lk.token  # written on the sentinels' master
            got = []

            def waiter() -> None:
                lk2 = c.lock(key, ttl=10, wait=10)
                got.append(lk2.acquire())
                lk2.release()
            t = threading.Thread(target=waiter)
            t.start()
        t.join(15)
        assert got == [True]
    finally:
        c.close()


def test_wrong_sentinel_password(group):
    uri, _ = group
    bad = uri.replace("sentinel_password=sentinel-pw", "sentinel_password=wrong-one")
    c = distlock.Client(bad)
    try:
        with pytest.raises(distlock.ConnectionError) as ei:
            with c.lock("test:" + uuid.uuid4().hex, ttl=10, wait=0):
                pass
        assert "authentication failed" in str(ei.value)
        assert "wrong-one" not in str(ei.value)
    finally:
        c.close()


@pytest.fixture(scope="module")
def tls_group(workdir):
    """A TLS-only group (sentinels.py --tls-dir): rediss-sentinel://."""
    certs = os.path.join(workdir, "sentinel-certs")
    subprocess.run(["bash", os.path.join(os.path.dirname(HARNESS), "certs.sh"), certs],
                   check=True)
    p = subprocess.Popen([sys.executable, HARNESS, "--tls-dir", certs],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdin is not None and p.stdout is not None
    line = p.stdout.readline()
    assert line.startswith("ready "), line
    fields = dict(w.split("=", 1) for w in line.split()[1:])
    p.stdin.write("master\n")
    p.stdin.flush()
    master = int(p.stdout.readline().split()[1])
    yield fields["uri"], master, certs
    p.stdin.close()
    p.wait(timeout=30)


def test_rediss_sentinel_lock(tls_group):
    uri, master, certs = tls_group
    assert uri.startswith("rediss-sentinel://")
    key = "test:" + uuid.uuid4().hex
    r = redis.Redis(port=master, ssl=True, ssl_ca_certs=os.path.join(certs, "ca.crt"),
                    ssl_certfile=os.path.join(certs, "client.crt"),
                    ssl_keyfile=os.path.join(certs, "client.key"), decode_responses=True)
    with distlock.Client(uri, tls_ca_file=os.path.join(certs, "ca.crt"),
                         tls_cert=os.path.join(certs, "client.crt"),
                         tls_key=os.path.join(certs, "client.key")) as c:
        with c.lock(key, ttl=10) as lk:
            assert r.get(key) == lk.token  # on the master, reached over TLS
        assert r.get(key) is None


def test_rediss_sentinel_wrong_ca(tls_group):
    uri, master, certs = tls_group
    first = uri.split("://", 1)[1].split(",", 1)[0]
    with distlock.Client(uri, tls_ca_file=os.path.join(certs, "otherca.crt"),
                         tls_cert=os.path.join(certs, "client.crt"),
                         tls_key=os.path.join(certs, "client.key")) as c:
        with pytest.raises(distlock.ConnectionError) as ei:
            c.lock("test:" + uuid.uuid4().hex, ttl=10).acquire(blocking=False)
    assert "sentinel %s: TLS: certificate verify failed" % first in str(ei.value)
