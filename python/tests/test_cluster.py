"""A redis-cluster:// server list works from Python like a plain one: the
front end passes the list to the core, which routes by hash slot (a Redis
Cluster of 3 masters + 3 replicas from tests/harness/redis.sh cluster)."""
import os
import shutil
import subprocess
import tempfile
import threading
import uuid

import pytest
from redis.cluster import RedisCluster

import distlock
from conftest import wait_until

REDIS_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                        "harness", "redis.sh")


@pytest.fixture(scope="module")
def cluster():
    d = tempfile.mkdtemp(prefix="distlock-pycluster.")
    try:
        uri = subprocess.run(["bash", REDIS_SH, "cluster", d], check=True, capture_output=True,
                             text=True, timeout=120).stdout.strip()
        assert uri.startswith("redis-cluster://"), uri
        yield uri
    finally:
        subprocess.run(["bash", REDIS_SH, "stop", d], check=False, timeout=60)
        shutil.rmtree(d, ignore_errors=True)


def test_lock_on_slot_owner_and_wait(cluster):
    host, port = cluster[len("redis-cluster://"):].split(",")[0].split(":")
    rc = RedisCluster(host=host, port=int(port), decode_responses=True)
    c = distlock.Client(cluster)
    try:
        for k in range(20):  # keys over several slots / masters
            key = "py:%d:%s" % (k, uuid.uuid4().hex)
            with c.lock(key, ttl=10) as lk:
                assert rc.get(key) == lk.token
            assert rc.get(key) is None
        key = "py:{tag}:" + uuid.uuid4().hex
        with c.lock(key, ttl=10, fencing=True) as lk:
            assert lk.fence == 1
            assert int(rc.get(key + ":fence")) == 1  # beside the key, in its slot
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
        rc.close()


def test_key_without_tag_refused_for_fencing(cluster):
    c = distlock.Client(cluster)
    try:
        with pytest.raises(distlock.InvalidArgument, match="hash tag"):
            c.lock("a}b", ttl=10, fencing=True).acquire()
    finally:
        c.close()


@pytest.fixture
def small_cluster():
    """A second cluster: 3 masters, no replicas (3 processes)."""
    d = tempfile.mkdtemp(prefix="distlock-pycluster2.")
    try:
        uri = subprocess.run(["bash", REDIS_SH, "cluster", d, "3", "0"], check=True,
                             capture_output=True, text=True, timeout=120).stdout.strip()
        assert uri.startswith("redis-cluster://"), uri
        yield uri, d
    finally:
        subprocess.run(["bash", REDIS_SH, "stop", d], check=False, timeout=60)
        shutil.rmtree(d, ignore_errors=True)


def _cluster_client(uri):
    host, port = uri[len("redis-cluster://"):].split(",")[0].split(":")
    return RedisCluster(host=host, port=int(port), decode_responses=True)


def test_redlock_over_clusters(cluster, small_cluster, server):
    """A Redlock of two clusters and a plain master (quorum 2): the lock is on
    each cluster's slot master and on the plain one; with the second cluster
    gone (every server stopped) it is still granted on the other two, and a
    release leaves nothing."""
    uri2, dir2 = small_cluster
    servers = "%s,%s,%s" % (cluster, uri2, server.uri)
    c = distlock.Client(servers, connect_timeout=5, command_timeout=5)
    other = distlock.Client(servers, connect_timeout=5, command_timeout=5)
    rc1, rc2, plain = _cluster_client(cluster), _cluster_client(uri2), server.redis()
    try:
        for k in range(5):
            key = "pyrl:%d:%s" % (k, uuid.uuid4().hex)
            # A round ends once a quorum answered; a call still waiting for a
            # new connection (a master this client has not used yet) is then
            # not sent: a fresh client's first lock may be on 2 of the 3.
            for _ in range(50):
                lk = c.lock(key, ttl=10, fencing=True)
                assert lk.acquire(blocking=False)
                if wait_until(lambda: rc1.get(key) == lk.token and rc2.get(key) == lk.token
                              and plain.get(key) == lk.token, 1):
                    break
                lk.release()
            else:
                pytest.fail("%s never on all three nodes" % key)
            assert isinstance(lk.fence, int) and lk.fence >= 1
            assert other.lock(key, ttl=10).acquire(blocking=False) is False
            assert lk.extend(20) > 10
            lk.release()
            assert wait_until(lambda: rc1.get(key) is None and rc2.get(key) is None
                              and plain.get(key) is None, 3)
        rc2.close()
        subprocess.run(["bash", REDIS_SH, "stop", dir2], check=True, timeout=60)
        key = "pyrl:down:" + uuid.uuid4().hex
        with c.lock(key, ttl=10) as lk:
            # granted: so on both live nodes (quorum 2 of 3)
            assert wait_until(lambda: rc1.get(key) == lk.token and plain.get(key) == lk.token, 3)
            assert other.lock(key, ttl=10).acquire(blocking=False) is False
        assert wait_until(lambda: rc1.get(key) is None and plain.get(key) is None, 3)
    finally:
        c.close()
        other.close()
        rc1.close()
