"""pytest for the Python side of faultproxy.py (FaultProxy class, ctl mode)
against a real redis-server; raw sockets speak RESP, so no client library is
needed. Run: python3 -m pytest -q tests/harness/test_faultproxy.py"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from faultproxy import FaultProxy, FaultProxyError  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("redis-server") is None,
                                reason="redis-server not installed")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def redis_port():
    d = tempfile.mkdtemp(prefix="fptest-")
    for _ in range(20):
        port = free_port()
        p = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--dir", d],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and p.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                time.sleep(0.02)
        if p.poll() is None:
            break
    else:
        pytest.fail("could not start redis-server")
    yield port
    p.terminate()
    p.wait()
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def fp(redis_port):
    with FaultProxy([redis_port]) as proxy:
        yield proxy


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Conn:
    def __init__(self, port, timeout=5.0):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def send(self, *args):
        self.s.sendall(resp(*args))

    def _fill(self):
        d = self.s.recv(1 << 20)
        if not d:
            raise EOFError
        self.buf += d

    def line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self.line()
        if line[:1] == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self._fill()
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v
        return line

    def call(self, *args):
        self.send(*args)
        return self.reply()

    def close(self):
        self.s.close()


def new_conn(fp, l=0, timeout=5.0):
    n = int(fp.cmd("accepted %d" % l).split()[1])
    c = Conn(fp.ports[l], timeout)
    fp.cmd("wait-conns %d %d 5000" % (l, n + 1))
    cid = int(fp.cmd("conns %d" % l).split()[-1].split(":")[1])
    return c, cid


def test_ready_ports_uris_and_errors(fp):
    assert len(fp.ports) == 1
    assert fp.uris() == "redis://127.0.0.1:%d" % fp.ports[0]
    assert fp.cmd("ping") == "ok pong"
    with pytest.raises(FaultProxyError, match="unknown command"):
        fp.cmd("frobnicate")
    with pytest.raises(FaultProxyError, match="no listener"):
        fp.cmd("hold 3")


def test_delay_hold_detach(fp, redis_port):
    c, cid = new_conn(fp)
    assert c.call("PING") == b"+PONG"
    fp.cmd("delay 0:%d 200 up" % cid)
    t0 = time.monotonic()
    assert c.call("PING") == b"+PONG"
    assert time.monotonic() - t0 >= 0.2
    fp.cmd("delay 0:%d 0" % cid)

    fp.cmd("hold 0:%d up" % cid)
    c.send("SET", "pykey", "v")
    fp.cmd("wait-held 0:%d up %d 5000" % (cid, len(resp("SET", "pykey", "v"))))
    fp.cmd("detach 0:%d" % cid)
    with pytest.raises((EOFError, ConnectionError)):
        c.reply()
    c.close()
    direct = Conn(redis_port)
    assert direct.call("GET", "pykey") is None
    fp.cmd("unhold 0:%d" % cid)
    fp.cmd("wait-closed 0:%d 5000" % cid)
    assert direct.call("GET", "pykey") == b"v"
    direct.call("DEL", "pykey")
    direct.close()


def test_inject_before_a_held_reply(fp):
    """inject: our bytes go in front of a held reply, or at once."""
    c, cid = new_conn(fp)
    fp.cmd("hold 0:%d down" % cid)
    c.send("PING")
    fp.cmd("wait-held 0:%d down 7 5000" % cid)
    fp.cmd("inject 0:%d down %s" % (cid, b":42\r\n".hex()))
    fp.cmd("unhold 0:%d down" % cid)
    assert c.reply() == b":42"
    assert c.reply() == b"+PONG"
    fp.cmd("inject 0 down %s" % b"+hi\r\n".hex())   # nothing held: right away
    assert c.reply() == b"+hi"
    with pytest.raises(FaultProxyError, match="bad hex"):
        fp.cmd("inject 0 down zz")
    with pytest.raises(FaultProxyError, match="up or down"):
        fp.cmd("inject 0 both 00")
    c.close()


def test_big_value_round_trip(fp):
    """Flow control: 8 MB each way through the proxy, byte for byte."""
    c, _ = new_conn(fp, timeout=30)
    big = os.urandom(8 << 20)
    assert c.call("SET", "pybig", big) == b"+OK"
    assert c.call("GET", "pybig") == big
    c.call("DEL", "pybig")
    c.close()


def test_ctl_cli_and_stdin_eof(fp):
    script = os.path.join(HERE, "faultproxy.py")
    ok = subprocess.run([sys.executable, script, "ctl", str(fp.control_port), "stats"],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.startswith("ok conns=")
    bad = subprocess.run([sys.executable, script, "ctl", str(fp.control_port), "partition 0 maybe"],
                         capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stdout.startswith("err ")
    # The process exits when its stdin is closed.
    fp.proc.stdin.close()
    assert fp.proc.wait(10) == 0
