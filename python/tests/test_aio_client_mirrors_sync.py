"""distlock.aio.Client mirrors distlock.Client (python/README.md, "asyncio"):
every public name of the blocking client is on the asyncio one; the calls
that do network I/O are coroutines there, the others (stats(),
generate_token(), node_count...) are not; and the token pair, inspect() and
stats() do what the blocking ones do, against a real redis-server."""
import asyncio
import inspect
import re

import distlock
import distlock.aio as aio

# The blocking client's names that have no asyncio twin by design:
# the context manager protocol is `async with` there (__aenter__/__aexit__).
NOT_MIRRORED = set()
NO_IO = {"generate_token", "stats", "closed", "node_count", "quorum", "nodes", "close",
         "lock", "semaphore", "lock_many", "restore"}


def public(cls):
    return {n for n in dir(cls) if not n.startswith("_")}


def test_every_public_name_of_the_blocking_client_is_mirrored():
    missing = public(distlock.Client) - public(aio.Client) - NOT_MIRRORED
    assert not missing, "distlock.aio.Client lacks %s" % sorted(missing)
    for name in public(distlock.Client) - NO_IO:
        # every call that talks to the servers is awaited in asyncio
        assert inspect.iscoroutinefunction(getattr(aio.Client, name)), name
    for name in ("generate_token", "stats"):
        assert not inspect.iscoroutinefunction(getattr(aio.Client, name)), name


def test_token_pair_inspect_and_stats(server, r, key):
    async def main():
        async with aio.Client(server.uri) as c:
            tok = c.generate_token()
            assert re.fullmatch(r"[0-9a-f]{32}", tok) and tok != aio.Client.generate_token()
            before = c.stats()["acquire_granted_total"]
            v = await c.acquire_token(key, tok, ttl=10)
            assert v is not None and 5 < v <= 10
            assert r.get(key) == tok
            assert c.stats()["acquire_granted_total"] == before + 1
            # another token is refused; the same one refreshes (not strict) ...
            assert await c.acquire_token(key, "other-token", ttl=10) is None
            assert await c.acquire_token(key, tok, ttl=10) is not None
            # ... unless strict
            assert await c.acquire_token(key, tok, ttl=10, strict=True) is None
            got = await c.inspect(key)
            assert got is not None and got[0] == tok and 5 < got[1] <= 10
            v = await c.extend_token(key, tok, 60)
            assert 30 < v <= 60 and r.pttl(key) > 30000
            try:
                await c.extend_token(key, "other-token", 60)
            except distlock.LockLost:
                pass
            else:
                raise AssertionError("extend_token of a token that does not hold the key")
            assert await c.release_token(key, "other-token") is False
            assert r.get(key) == tok
            assert await c.release_token(key, tok) is True
            assert r.get(key) is None
            assert await c.inspect(key) is None
    asyncio.run(main())
