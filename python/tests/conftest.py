"""Fixtures: real redis-server processes on free loopback ports (never 6379),
each also listening on a Unix socket; stopped at the end of the session."""
import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid

import pytest
import redis

import distlock


class RedisServer:
    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.proc = None
        self.port = 0
        self.sock = ""

    def start(self) -> "RedisServer":
        for _ in range(20):
            with socket.socket() as s:  # a free port, then hand it to redis
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port == 6379:
                continue
            sock = os.path.join(self.workdir, "redis-%d.sock" % port)
            proc = subprocess.Popen(
                ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no", "--dir", self.workdir,
                 "--unixsocket", sock, "--unixsocketperm", "700",
                 "--logfile", os.path.join(self.workdir, "redis-%d.log" % port)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Ready when it answers on its own Unix socket (bound after its
            # port): on the port, while ours exits for want of it, the server
            # of a parallel test that took it would answer.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    if redis.Redis(unix_socket_path=sock, socket_timeout=0.5).ping():
                        self.proc, self.port, self.sock = proc, port, sock
                        return self
                except redis.exceptions.ConnectionError:
                    time.sleep(0.02)
            proc.kill()
            proc.wait()
        raise RuntimeError("could not start redis-server")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    @property
    def uri(self) -> str:
        return "redis://127.0.0.1:%d" % self.port

    def redis(self) -> redis.Redis:
        return redis.Redis(port=self.port, decode_responses=True)


@pytest.fixture(scope="session")
def workdir():
    d = tempfile.mkdtemp(prefix="distlock-pytest-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def server_factory(workdir):
    started = []

    def start() -> RedisServer:
        srv = RedisServer(workdir).start()
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()


@pytest.fixture(scope="session")
def server(server_factory) -> RedisServer:
    return server_factory()


@pytest.fixture
def r(server) -> redis.Redis:
    return server.redis()


@pytest.fixture
def client(server):
    c = distlock.Client(server.uri)
    yield c
    c.close()


@pytest.fixture
def key() -> str:
    return "test:" + uuid.uuid4().hex


def wait_until(cond, timeout: float, interval: float = 0.01) -> bool:
    """Poll cond() until it is true or timeout seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


async def await_until(cond, timeout: float, interval: float = 0.01) -> bool:
    """wait_until for a coroutine: the event loop turns between the polls
    (cond is a plain function, e.g. a redis-py read)."""
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(interval)


def _on_every_node(nodes, key: str, token: str) -> bool:
    return all(s.redis().get(key) == token for s in nodes)


def connect_every_node(client, nodes, timeout: float = 5.0) -> None:
    """Connect client to every node of nodes before a test checks what a
    lock wrote on each of them: a fresh client's first rounds may end at the
    quorum before its connection to the last node is ready, and that request
    is then never sent (the lock is held on a quorum, as promised). Takes and
    releases a lock of its own key until one lands on every node."""
    warm = "connect-every-node:" + uuid.uuid4().hex
    deadline = time.monotonic() + timeout
    while True:
        w = client.lock(warm, ttl=5)
        assert w.acquire(blocking=False)
        everywhere = _on_every_node(nodes, warm, w.token)
        w.release()
        if everywhere:
            return
        assert time.monotonic() < deadline, "a lock never reached all %d nodes" % len(nodes)


async def aconnect_every_node(client, nodes, timeout: float = 5.0) -> None:
    """connect_every_node for a distlock.aio.Client."""
    warm = "connect-every-node:" + uuid.uuid4().hex
    deadline = time.monotonic() + timeout
    while True:
        w = client.lock(warm, ttl=5)
        assert await w.acquire(blocking=False)
        everywhere = _on_every_node(nodes, warm, w.token)
        await w.release()
        if everywhere:
            return
        assert time.monotonic() < deadline, "a lock never reached all %d nodes" % len(nodes)


@pytest.fixture(scope="module", params=[1, 3], ids=["1node", "3nodes"])
def nodes(request, server_factory):
    """One node, then three independent nodes (Redlock), for a module's
    tests of the primitives: the servers are started once per module."""
    return [server_factory() for _ in range(request.param)]


def node_uris(nodes) -> str:
    return ",".join(s.uri for s in nodes)


HOLDER = os.path.join(os.path.dirname(__file__), "_primitive_holder.py")


def spawn_holder(uris: str, ttl: float, kind: str, *args: str):
    """A process that holds a primitive (_primitive_holder.py) until it is
    killed: (the process, its token)."""
    import sys
    proc = subprocess.Popen([sys.executable, HOLDER, uris, str(ttl), kind, *args], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    words = proc.stdout.readline().split()
    if not words or words[0] != "held":
        proc.kill()
        proc.wait()
        raise AssertionError("holder process did not get it: %r" % (words,))
    return proc, words[1]


def subscribers(nodes, key: str) -> int:
    """Waiters subscribed to the release channel of key, over every node."""
    return sum(s.redis().pubsub_numsub("distlock:" + key)[0][1] for s in nodes)
