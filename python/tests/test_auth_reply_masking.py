"""A server's error reply may quote the password the library sent: Redis
answers a command it does not know with "ERR unknown command 'AUTH', with
args beginning with: 'user' 'PASSWORD'" (AUTH disabled with
`rename-command AUTH ""`). No exception text or repr may show it."""
import os
import socket
import subprocess
import time

import pytest
import redis

import distlock

PASSWORD = "S3CRETPW9"


@pytest.fixture
def no_auth_server(workdir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--dir", workdir, "--logfile", os.path.join(workdir, "authecho-%d.log" % port),
         "--rename-command", "AUTH", ""],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            if redis.Redis(port=port, socket_timeout=0.5).ping():
                break
        except redis.exceptions.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    yield port
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("userinfo", ["dlu:" + PASSWORD, ":" + PASSWORD])
def test_auth_reply_quoting_the_password_is_masked(no_auth_server, userinfo):
    c = distlock.Client("redis://%s@127.0.0.1:%d" % (userinfo, no_auth_server))
    try:
        with pytest.raises(distlock.Error) as e:
            c.lock("authecho", ttl=30).acquire(blocking=False)
        print(type(e.value).__name__, str(e.value))
        assert PASSWORD not in str(e.value)
        assert PASSWORD not in repr(e.value)
        assert PASSWORD not in (e.value.detail or "")
    finally:
        c.close()
