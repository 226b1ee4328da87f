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
