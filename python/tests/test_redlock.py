"""N nodes (Redlock) and Unix-socket URIs."""
import pytest

import distlock
from conftest import connect_every_node, wait_until


@pytest.fixture
def three(server_factory):
    return [server_factory() for _ in range(3)]


def test_three_nodes_quorum_and_same_token_everywhere(three, key):
    with distlock.Client([s.uri for s in three], connect_timeout=0.5,
                         command_timeout=0.5) as c:
        assert c.node_count == 3 and c.quorum == 2
        connect_every_node(c, three)  # the token is checked on every node
        with c.lock(key, ttl=10) as lk:
            # the acquire returns once a quorum granted: the third node's
            # grant may still be on the way
            assert wait_until(lambda: [s.redis().get(key) for s in three] == [lk.token] * 3, 3.0), \
                [s.redis().get(key) for s in three]
        # ... and the release once a quorum deleted it
        assert wait_until(lambda: [s.redis().get(key) for s in three] == [None] * 3, 3.0), \
            [s.redis().get(key) for s in three]

        three[0].stop()  # one node down: a quorum still lives
        with c.lock(key, ttl=10) as lk:
            assert [s.redis().get(key) for s in three[1:]] == [lk.token] * 2

        three[1].stop()  # quorum lost
        with pytest.raises(distlock.ConnectionError):
            c.lock(key, ttl=10).acquire(blocking=False)


def test_minority_holder_blocks_nothing_majority_holder_blocks(three, key):
    uris = ",".join(s.uri for s in three)
    with distlock.Client(uris) as c:
        three[0].redis().set(key, "foreign")
        with c.lock(key, ttl=10) as lk:  # 2 of 3 is a quorum
            assert three[1].redis().get(key) == lk.token
        assert three[0].redis().get(key) == "foreign"
        three[1].redis().set(key, "foreign")
        assert c.lock(key, ttl=10).acquire(blocking=False) is False
        # a failed acquire released what it took: node 2 is clean again
        assert three[2].redis().get(key) is None


def test_unix_socket_uri(server, r, key):
    with distlock.Client("unix://" + server.sock) as c:
        with c.lock(key, ttl=10) as lk:
            assert r.get(key) == lk.token


def test_fencing_increases_across_owners_on_three_nodes(three, key):
    uris = [s.uri for s in three]
    fences = []
    with distlock.Client(uris) as a, distlock.Client(uris) as b:
        for c in (a, b, a, b, a):
            with c.lock(key, ttl=10, fencing=True) as lk:
                fences.append(lk.fence)
    assert all(isinstance(f, int) for f in fences)
    assert all(x < y for x, y in zip(fences, fences[1:])), fences
