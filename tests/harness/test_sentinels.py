"""sentinels.py starts a Sentinel group again, on fresh ports, when a start
fails for reasons that are the machine's and not the group's: a server whose
port was taken before it could bind it, a server that dies during start-up, a
group that does not converge in time. Real redis-servers (ctest
test_sentinels_py)."""
import argparse
import os
import signal
import socket
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sentinels  # noqa: E402


def options():
    return argparse.Namespace(
        name="mymaster", data_pass=None, sentinel_user=None, sentinel_pass=None,
        down_after_ms=1000, failover_timeout_ms=3000, replicas=2, sentinels=3, quorum=2,
        tls_dir=None, resync_delay_s=0, data_ip=None, data_cert=None)


def assert_ready(g):
    """The group works: the master the sentinels name is a master (ROLE), and
    it has its two replicas."""
    master = g.confirmed_master()
    assert master in g.data
    c = g.data_conn(master)
    try:
        assert "connected_slaves:2" in c.cmd("INFO", "replication")
    finally:
        c.close()


@pytest.fixture
def make_group():
    """A group not started yet (made after the test's monkeypatching), stopped
    after the test."""
    made = []

    def make():
        made.append(sentinels.Group(options()))
        return made[-1]
    yield make
    for g in made:
        g.stop()


def test_a_sentinel_whose_port_is_taken_gets_a_fresh_set_of_ports(make_group, monkeypatch):
    # The port the last sentinel is given is bound (not listening) by this
    # test, as an outgoing connection's local port would be: that sentinel
    # cannot bind it and exits, and the first one never counts two others.
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    held = holder.getsockname()[1]
    real, calls = sentinels.free_port, []

    def free_port(*args, **kwargs):
        calls.append(1)
        # 1 master, 2 replicas, then the sentinels: the 6th is the last sentinel
        return held if len(calls) == 6 else real(*args, **kwargs)
    monkeypatch.setattr(sentinels, "free_port", free_port)
    group = make_group()
    try:
        group.start()
        assert group.attempts == 2
        assert held not in group.sent + group.data
        assert_ready(group)
    finally:
        holder.close()


def test_a_sentinel_that_dies_during_start_up_is_replaced(make_group, monkeypatch):
    real_spawn, killed = sentinels.Group.spawn, []

    def spawn(self, port, argv):
        real_spawn(self, port, argv)
        if "--sentinel" in argv and not killed:
            killed.append(port)
            self.procs[port].send_signal(signal.SIGKILL)
    monkeypatch.setattr(sentinels.Group, "spawn", spawn)
    group = make_group()
    group.start()
    assert group.attempts == 2
    assert killed and killed[0] not in group.sent
    assert_ready(group)


def test_a_group_that_does_not_converge_is_started_again(make_group, monkeypatch):
    # The third sentinel of the first start is stopped once it answers: it
    # never says hello, so the other two never count two other sentinels.
    real_own, stopped = sentinels.Group.own, []

    def own(self, port, conn):
        ours = real_own(self, port, conn)
        if ours and port == self.sent[-1] and not stopped:
            stopped.append(self.procs[port])
            self.procs[port].send_signal(signal.SIGSTOP)
        return ours
    monkeypatch.setattr(sentinels.Group, "own", own)
    # A shorter wait for readiness: the first start is known not to converge;
    # the second one has the same time as a start in the full suite would
    # (READY_S is a bound for the start, not something this test measures).
    monkeypatch.setattr(sentinels, "READY_S", 20)
    group = make_group()
    group.start()
    assert group.attempts == 2
    assert stopped[0].poll() is not None   # killed with its start, though stopped
    assert_ready(group)


def test_the_last_failed_start_is_reported(make_group, monkeypatch):
    # Every start loses a server: after ATTEMPTS starts, the error names it.
    real_spawn = sentinels.Group.spawn

    def spawn(self, port, argv):
        real_spawn(self, port, argv)
        if port == self.data[0]:
            self.procs[port].send_signal(signal.SIGKILL)
    monkeypatch.setattr(sentinels.Group, "spawn", spawn)
    group = make_group()
    with pytest.raises(sentinels.GroupFailed) as e:
        group.start()
    assert group.attempts == sentinels.ATTEMPTS
    assert "exited" in str(e.value) and "attempt 3 of 3" in str(e.value)
    assert group.procs == {}
