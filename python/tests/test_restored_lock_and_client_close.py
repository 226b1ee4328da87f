"""client.restore(key, T) sends nothing and its Lock is not held until an
extend succeeds (python/README.md, "Reentrancy, your own token, restore"):
closing the client must not delete an ownership taken elsewhere that this
client only restored. Blocking and asyncio."""
import asyncio

import distlock
import distlock.aio as aio


def test_close_keeps_an_ownership_restored_but_never_extended(server, r, key):
    r.set(key, "T-elsewhere", px=30000)   # another process holds the key with T
    c = distlock.Client(server.uri)
    lk = c.restore(key, "T-elsewhere")
    assert not lk.held and lk.validity == 0.0
    c.close()
    assert r.get(key) == "T-elsewhere"


def test_with_client_block_keeps_an_ownership_restored_but_never_extended(server, r, key):
    r.set(key, "T-elsewhere", px=30000)
    with distlock.Client(server.uri) as c:
        lk = c.restore(key, "T-elsewhere")
        assert lk.token == "T-elsewhere" and not lk.held
    assert r.get(key) == "T-elsewhere"


def test_aio_close_keeps_an_ownership_restored_but_never_extended(server, r, key):
    r.set(key, "T-elsewhere", px=30000)

    async def main():
        async with aio.Client(server.uri) as c:
            lk = c.restore(key, "T-elsewhere")
            assert not lk.held
            await c.locked(key)  # the client is used in this loop
    asyncio.run(main())
    assert r.get(key) == "T-elsewhere"
