"""Client.acquire_token() without strict refreshes a key that already holds
this very token (idempotent retry). When that refresh is refused (an ACL
user without TYPE: SET NX GET works, the refresh -- the acquire script,
whose first call is TYPE -- does not), the call fails, a refusal is "an
error, not a loss", and the lock the caller held before the call must still
be there."""
import pytest

import distlock

USER, PASS = "pyrefresh", "py-refresh-pw"
TOKEN = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def no_type(server, r):
    r.execute_command("ACL", "SETUSER", USER, "reset", "on", ">" + PASS, "~*", "&*", "+@all",
                      "-type")
    c = distlock.Client(server.uri.replace("redis://", "redis://%s:%s@" % (USER, PASS)))
    yield c
    c.close()
    r.execute_command("ACL", "DELUSER", USER)


def test_refused_refresh_keeps_the_held_lock(no_type, r, key):
    assert no_type.acquire_token(key, TOKEN, ttl=30) is not None
    assert r.get(key) == TOKEN
    with pytest.raises(distlock.Error) as e:
        no_type.acquire_token(key, TOKEN, ttl=30)
    print(type(e.value).__name__, str(e.value))
    assert r.get(key) == TOKEN, "the held lock was deleted by a refused refresh"
    r.delete(key)
