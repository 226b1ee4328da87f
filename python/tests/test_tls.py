"""rediss:// nodes against a real redis-server with a TLS port, with a CA and
certificates made for this session by tests/harness/certs.sh."""
import os
import socket
import subprocess
import time

import pytest
import redis

import distlock

HARNESS = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "harness")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tls_server(workdir):
    certs = os.path.join(workdir, "certs")
    subprocess.run(["bash", os.path.join(HARNESS, "certs.sh"), certs], check=True)
    for _ in range(20):
        port, tport = _free_port(), _free_port()
        if port == tport:
            continue
        proc = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", workdir, "--tls-port", str(tport),
             "--tls-cert-file", os.path.join(certs, "server.crt"),
             "--tls-key-file", os.path.join(certs, "server.key"),
             "--tls-ca-cert-file", os.path.join(certs, "ca.crt"), "--tls-auth-clients", "no",
             "--logfile", os.path.join(workdir, "redis-tls-%d.log" % port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if redis.Redis(port=port, socket_timeout=0.5).ping():
                    yield ("rediss://127.0.0.1:%d" % tport, certs,
                           redis.Redis(port=port, decode_responses=True))
                    proc.terminate()
                    proc.wait(10)
                    return
            except redis.exceptions.ConnectionError:
                time.sleep(0.02)
        proc.kill()
        proc.wait()
    raise RuntimeError("could not start redis-server with TLS")


def test_tls_lock_with_ca_keyword(tls_server, key):
    uri, certs, r = tls_server
    with distlock.Client(uri, tls_ca_file=os.path.join(certs, "ca.crt")) as c:
        lk = c.lock(key, ttl=10)
        with lk:
            assert r.get(key) == lk.token
        assert r.get(key) is None
        assert c.nodes == [uri]


def test_tls_mutual_and_server_name_keywords(tls_server, key):
    uri, certs, r = tls_server
    with distlock.Client(uri, tls_ca_file=os.path.join(certs, "ca.crt"),
                         tls_cert=os.path.join(certs, "client.crt"),
                         tls_key=os.path.join(certs, "client.key"),
                         tls_server_name="localhost") as c:
        lk = c.lock(key, ttl=10)
        assert lk.acquire(blocking=False)
        assert r.get(key) == lk.token
        lk.release()


def test_tls_verification_on_by_default(tls_server, key):
    uri, certs, r = tls_server
    with distlock.Client(uri) as c:
        with pytest.raises(distlock.ConnectionError) as e:
            c.lock(key, ttl=10).acquire(blocking=False)
    assert uri in str(e.value)
    assert "certificate verify failed" in str(e.value)
    assert r.get(key) is None


def test_tls_wrong_name(tls_server, key):
    uri, certs, r = tls_server
    with distlock.Client(uri, tls_ca_file=os.path.join(certs, "ca.crt"),
                         tls_server_name="wrong.example") as c:
        with pytest.raises(distlock.ConnectionError, match="hostname mismatch"):
            c.lock(key, ttl=10).acquire(blocking=False)


def test_tls_keyword_types(tls_server):
    uri, certs, r = tls_server
    # the library's checks: tls_verify is an integer (0/1, a bool), tls_ca_file a string
    with pytest.raises(distlock.InvalidArgument, match='"tls_verify" takes an integer, got "no"'):
        distlock.Client(uri, tls_verify="no")
    with pytest.raises(distlock.InvalidArgument, match='"tls_ca_file" takes a string'):
        distlock.Client(uri, tls_ca_file=1)
