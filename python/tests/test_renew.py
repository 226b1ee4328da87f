"""Auto-renewal (watchdog), lost detection and fencing tokens."""
import time

import pytest

import distlock
from conftest import wait_until


def test_auto_renew_keeps_lock_past_ttl_then_lost_when_deleted(client, r, key):
    lk = client.lock(key, ttl=0.6, auto_renew=True)
    assert lk.acquire(blocking=False)
    token = lk.token
    t0 = time.monotonic()
    # Three TTLs pass: the key must hold our token the whole time.
    while time.monotonic() - t0 < 1.8:
        assert r.get(key) == token
        assert not lk.lost
        time.sleep(0.05)
    assert lk.held
    r.delete(key)  # removed behind its back
    assert wait_until(lambda: lk.lost, timeout=5)
    assert not lk.held
    with pytest.raises(distlock.LockLost):
        lk.release()
    assert lk.lost  # stays visible after release


def test_without_auto_renew_lock_expires(client, r, key):
    lk = client.lock(key, ttl=0.3)
    assert lk.acquire(blocking=False)
    assert wait_until(lambda: r.get(key) is None, timeout=5)
    assert lk.validity == 0.0
    with pytest.raises(distlock.LockLost):
        lk.extend()
    assert lk.lost
    with pytest.raises(distlock.LockLost):
        lk.release()


def test_fencing_tokens_increase_across_owners(server, client, key):
    fences = []
    with distlock.Client(server.uri) as other:
        for c in (client, other, client, other):
            with c.lock(key, ttl=10, fencing=True) as lk:
                assert isinstance(lk.fence, int)
                fences.append(lk.fence)
    assert fences == sorted(fences) and len(set(fences)) == 4
    with client.lock(key, ttl=10) as lk:
        assert lk.fence is None
