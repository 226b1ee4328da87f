"""A node that refuses a request (an ACL user without GET: the extend
script cannot read the key) is a renewal failure, never a loss: extend()
raises RenewalFailed, not LockLost; the auto-renewal keeps the lock and does
not call on_lost while its key still holds the token. And a malformed
server list never shows its password in the exception."""
import pytest

import distlock
from conftest import wait_until

USER, PASS = "pyacl", "py-acl-pw"


@pytest.fixture
def refusing(server, r):
    """A client logged in as a user allowed everything but GET."""
    r.execute_command("ACL", "SETUSER", USER, "reset", "on", ">" + PASS, "~*", "&*", "+@all",
                      "-get")
    c = distlock.Client(server.uri.replace("redis://", "redis://%s:%s@" % (USER, PASS)))
    yield c
    c.close()
    r.execute_command("ACL", "DELUSER", USER)


def test_extend_refused_is_a_renewal_failure(refusing, r, key):
    lk = refusing.lock(key, ttl=30)
    assert lk.acquire(blocking=False)
    with pytest.raises(distlock.RenewalFailed) as e:
        lk.extend(30)
    assert not isinstance(e.value, distlock.LockLost)
    assert "can't run this command" in str(e.value)
    assert not lk.lost
    lk.check()  # still valid: no exception
    assert r.get(key) == lk.token
    r.delete(key)


def test_refused_renewal_does_not_call_on_lost(refusing, r, key):
    calls = []
    # ttl 6 s: the first renewal is due at 2 s, the lease ends at ~5.9 s
    lk = refusing.lock(key, ttl=6, auto_renew=True, on_lost=calls.append)
    assert lk.acquire(blocking=False)
    assert wait_until(lambda: refusing.stats()["renewal_failed_total"] >= 1 or lk.lost, 5)
    assert not lk.lost and calls == []
    assert refusing.stats()["lost_total"] == 0
    lk.check()
    assert r.get(key) == lk.token
    r.delete(key)


@pytest.mark.parametrize("servers", [
    "redis://u:S3/CRET@host:1",
    "redis-sentinel://h:26379/m?Sentinel_Password=S3CRET",
    "redis://u:S3,,CRET@h:1",
])
def test_malformed_server_list_hides_its_password(servers):
    with pytest.raises(distlock.InvalidArgument) as e:
        distlock.Client(servers)
    assert "S3" not in str(e.value) and "CRET" not in str(e.value)
