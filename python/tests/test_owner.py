"""Owner metadata: Client(owner_info=True, owner_label=...) stores who holds
a lock in the hash {key}:owner beside it with the lock's TTL (read here with
redis-py from the real server); off by default; the release deletes it."""
import os
import re
import socket

import pytest

import distlock


def owner_key(key: str) -> str:
    return "{%s}:owner" % key


def test_owner_stored_renewed_deleted(server, r, key):
    label = 'job "42" caf\u00e9\n'
    with distlock.Client(server.uri, owner_label=label) as c:
        with c.lock(key, ttl=30) as lk:
            h = r.hgetall(owner_key(key))
            assert h["token"] == lk.token
            assert h["host"] == socket.gethostname()
            assert int(h["pid"]) == os.getpid()
            with open("/proc/self/cmdline", "rb") as f:  # the C argv[0]
                argv0 = f.read().split(b"\0")[0].decode()
            assert h["program"] == os.path.basename(argv0)
            assert h["label"] == label
            assert 20000 < r.pttl(owner_key(key)) <= 30000
            lk.extend(90)
            assert r.pttl(owner_key(key)) > 60000
        assert r.exists(owner_key(key)) == 0
        assert r.exists(key) == 0


def test_owner_off_by_default(client, r, key):
    with client.lock(key, ttl=30):
        assert r.exists(key) == 1
        assert r.exists(owner_key(key)) == 0


def test_owner_bad_label(server):
    with pytest.raises(distlock.InvalidArgument, match="at most 256"):
        distlock.Client(server.uri, owner_label="x" * 257)
    with pytest.raises(distlock.InvalidArgument, match=re.escape(
            'option "owner_info": value 2 out of range 0..1')):
        distlock.Client(server.uri, owner_info=2)
