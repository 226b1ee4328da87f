"""WAIT for replicas: Client(wait_replicas=, wait_timeout=) against a real
master and its replica (REPLICAOF, link polled up); a SIGSTOPped replica
never acknowledges."""
import os
import signal
import time

import pytest

import distlock
from conftest import wait_until


@pytest.fixture(scope="module")
def pair(server_factory):
    master, replica = server_factory(), server_factory()
    replica.redis().replicaof("127.0.0.1", master.port)

    def online() -> bool:
        slaves = [v for k, v in master.redis().info("replication").items()
                  if k.startswith("slave") and isinstance(v, dict)]
        return (replica.redis().info("replication").get("master_link_status") == "up"
                and any(s.get("port") == replica.port and s.get("state") == "online"
                        for s in slaves))
    assert wait_until(online, 20)
    yield master, replica
    replica.redis().replicaof("NO", "ONE")


def test_wait_replicas(pair, key):
    master, replica = pair
    # generous where the replica is alive: a loaded machine may be slow to run it
    with distlock.Client(master.uri, wait_replicas=1, wait_timeout=5) as c:
        with c.lock(key, ttl=30) as lk:
            # acknowledged: on the replica when the call returns, no polling
            assert replica.redis().get(key) == lk.token
    with distlock.Client(master.uri, wait_replicas=1, wait_timeout=0.1) as c:
        os.kill(replica.proc.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            with pytest.raises(distlock.NoQuorum) as ei:
                c.lock(key, ttl=30, wait=0).acquire()
            took = time.monotonic() - t0
        finally:
            os.kill(replica.proc.pid, signal.SIGCONT)
        assert "%s: 0 of 1 replicas acknowledged within 100 ms" % master.uri in str(ei.value)
        assert 0.1 <= took < 1.6
        assert master.redis().get(key) is None  # undone: fail-closed


def test_wait_options_checked(pair):
    master, _ = pair
    with pytest.raises(distlock.InvalidArgument, match='"wait_replicas" takes an integer, got "one"'):
        distlock.Client(master.uri, wait_replicas="one")
    with pytest.raises(distlock.InvalidArgument) as ei:
        distlock.Client(master.uri, wait_replicas=65)
    assert "wait_replicas=65" in str(ei.value) and "0..64" in str(ei.value)
