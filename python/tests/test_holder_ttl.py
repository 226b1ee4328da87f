"""Client.holder() (the library's one-round verdict: who holds a key, on how
many nodes, for how long) and the one TTL rule (distlock_ttl_from_seconds)."""
import math
import os
import re
import signal

import pytest

import distlock


# ------------------------------------------------------------ the TTL rule

@pytest.mark.parametrize("ttl, ms", [(0.0001, 1), (1.0005, 1001), (0.07, 70), (1, 1000),
                                     (30, 30000), (2147483.647, 2147483647)])
def test_ttl_rounded_up_to_whole_ms(client, key, ttl, ms):
    assert client.lock(key, ttl=ttl).ttl == ms / 1000.0


def test_ttl_lease_on_the_server(client, r, key):
    client.acquire_token(key, "tok", ttl=1.0005)
    assert 500 < r.pttl(key) <= 1001
    # 0.0001 s reaches the library as 1 ms (rounded up, not down to 0), which
    # it then refuses as not above its clock-drift allowance.
    with pytest.raises(distlock.InvalidArgument, match="ttl_ms 1 is not above"):
        client.acquire_token(key + "x", "tok", ttl=0.0001)


@pytest.mark.parametrize("ttl, named", [
    (0, "got 0"), (-1, "got -1"), (-0.5, "got -0.5"), (math.nan, "got nan"),
    (math.inf, "got inf"), (-math.inf, "got -inf"), (10 ** 10, "got 1e+10"),
    (2147483.648, "got 2147483.648"), (10 ** 400, "got 1000000"),
])
def test_ttl_invalid_names_the_value(client, key, ttl, named):
    named = re.escape(named)
    with pytest.raises(distlock.InvalidArgument, match=named) as e:
        client.lock(key, ttl=ttl)
    assert isinstance(e.value, ValueError)
    with pytest.raises(ValueError, match=named):
        client.acquire_token(key, "tok", ttl=ttl)
    with pytest.raises(ValueError, match=named):
        client.extend_token(key, "tok", ttl=ttl)


# ------------------------------------------------------------ holder

@pytest.fixture
def three(server_factory):
    return [server_factory() for _ in range(3)]


def test_holder_one_node(client, r, key):
    h = client.holder(key)
    assert h == distlock.Holder(held=False, token=None, nodes=0, ttl=None, answered=1, taken=0,
                                kind="free", holders=0)
    with client.lock(key, ttl=10) as lk:
        h = client.holder(key)
        assert h.held and h.token == lk.token and h.nodes == 1 and h.answered == 1
        assert 5 < h.ttl <= 10
    r.set(key, "foreign")  # no expiry
    h = client.holder(key)
    assert h.held and h.token == "foreign" and h.ttl is None
    r.delete(key)
    r.hset(key, "f", "v")  # another type: taken by someone else, not an error
    h = client.holder(key)
    assert not h.held and h.token is None and h.taken == 1 and h.answered == 1


def test_holder_three_nodes(three, key):
    with distlock.Client([s.uri for s in three], connect_timeout=0.5,
                         command_timeout=0.5) as c:
        assert not c.holder(key).held
        three[0].redis().set(key, "A", px=30000)
        three[1].redis().set(key, "A", px=20000)
        h = c.holder(key)
        assert h.held and h.token == "A" and h.nodes == 2 and h.answered == 3
        assert 10 < h.ttl <= 20
        three[2].redis().set(key, "B")
        three[1].redis().set(key, "C")
        h = c.holder(key)  # split: the first in node order is named
        assert (h.held, h.token, h.nodes, h.taken) == (False, "A", 1, 3)

        three[1].redis().set(key, "A")
        stopped = []
        try:
            os.kill(three[2].proc.pid, signal.SIGSTOP)
            stopped.append(three[2])
            h = c.holder(key)  # a verdict from 2 of 3
            assert h.held and h.nodes == 2 and h.answered == 2
            os.kill(three[1].proc.pid, signal.SIGSTOP)
            stopped.append(three[1])
            with pytest.raises(distlock.NoQuorum, match="1 of 3 nodes answered"):
                c.holder(key)
        finally:
            for s in stopped:
                os.kill(s.proc.pid, signal.SIGCONT)
