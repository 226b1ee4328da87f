"""A release that fails without the servers saying "not the owner" (here: the
node refuses the release script to the lock's ACL user) keeps the Lock's
handle: release() can be called again and deletes the key once the node
answers. Blocking and asyncio Lock alike."""
import asyncio

import pytest

import distlock
import distlock.aio as aio

USER, PASS = "pyrelretry", "py-release-retry-pw"


@pytest.fixture
def user_uri(server, r):
    r.execute_command("ACL", "SETUSER", USER, "reset", "on", ">" + PASS, "~*", "&*", "+@all")
    yield server.uri.replace("redis://", "redis://%s:%s@" % (USER, PASS))
    r.execute_command("ACL", "DELUSER", USER)


def _refuse_scripts(r) -> None:
    # Applies to the user's open connections at once: the release script is
    # refused ("can't run this command"), an error that is not "not the owner".
    r.execute_command("ACL", "SETUSER", USER, "-evalsha", "-eval")


def _allow_scripts(r) -> None:
    r.execute_command("ACL", "SETUSER", USER, "+evalsha", "+eval")


def test_failed_release_can_be_retried(user_uri, r, key):
    with distlock.Client(user_uri) as c:
        lk = c.lock(key, ttl=30)
        assert lk.acquire(blocking=False)
        token = lk.token
        _refuse_scripts(r)
        with pytest.raises(distlock.Error) as e:
            lk.release()
        assert not isinstance(e.value, (distlock.LockLost, distlock.NotHeld))
        print(type(e.value).__name__, str(e.value))
        assert r.get(key) == token, "the refused release deleted the key"
        assert lk.token == token, "the handle was dropped by a failed release"
        _allow_scripts(r)
        lk.release()  # the retry
        assert r.get(key) is None, "the retried release left the key"
        assert lk.token is None and not lk.lost
        with pytest.raises(distlock.NotHeld):
            lk.release()
        # The Lock object is usable again at once (nothing waits for the TTL).
        assert lk.acquire(blocking=False)
        lk.release()
        assert r.get(key) is None


def test_acquire_after_a_failed_release_drops_the_old_handle(user_uri, r, key):
    with distlock.Client(user_uri) as c:
        lk = c.lock(key, ttl=30)
        assert lk.acquire(blocking=False)
        _refuse_scripts(r)
        with pytest.raises(distlock.Error):
            lk.release()
        _allow_scripts(r)
        # Not retried: the key keeps the old token, so a new acquire is refused
        # (it does not wait on the Lock object itself).
        assert lk.acquire(blocking=False) is False
        assert r.get(key) is not None
        lk.release()  # the old ownership's release, retried
        assert r.get(key) is None


def test_failed_aio_release_can_be_retried(user_uri, r, key):
    async def main() -> None:
        async with aio.Client(user_uri) as c:
            lk = c.lock(key, ttl=30)
            assert await lk.acquire(blocking=False)
            token = lk.token
            _refuse_scripts(r)
            with pytest.raises(distlock.Error) as e:
                await lk.release()
            assert not isinstance(e.value, (distlock.LockLost, distlock.NotHeld))
            assert r.get(key) == token
            assert lk.token == token, "the handle was dropped by a failed release"
            _allow_scripts(r)
            await lk.release()
            assert r.get(key) is None
            assert lk.token is None
            with pytest.raises(distlock.NotHeld):
                await lk.release()
            assert await lk.acquire(blocking=False)
            await lk.release()
    asyncio.run(main())
