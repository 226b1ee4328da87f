"""Bad input gets a clear exception, never a crash."""
import math
import re

import pytest

import distlock


@pytest.mark.parametrize("bad", [123, None, 1.5, ["k"]])
def test_key_wrong_type(client, bad):
    with pytest.raises(TypeError, match="key"):
        client.lock(bad)


@pytest.mark.parametrize("bad", ["", "a\0b", b"a\0", "k" * (distlock.KEY_MAX + 1)])
def test_key_invalid(client, bad):
    with pytest.raises(distlock.InvalidArgument) as ei:
        client.lock(bad, ttl=5).acquire(blocking=False)
    assert isinstance(ei.value, ValueError)
    assert ei.value.status == -1
    assert "invalid argument" in str(ei.value)


def test_key_bytes_and_max_length_accepted(client, r):
    k = "k" * distlock.KEY_MAX
    with client.lock(k, ttl=5) as lk:
        assert r.get(k) == lk.token
    with client.lock(b"bytes:key", ttl=5) as lk:
        assert r.get("bytes:key") == lk.token


@pytest.mark.parametrize("ttl", [0, -1, math.nan, math.inf, 10 ** 10])
def test_ttl_invalid(client, key, ttl):
    with pytest.raises(distlock.InvalidArgument, match="ttl"):
        client.lock(key, ttl=ttl)


@pytest.mark.parametrize("ttl", ["30", True, None])
def test_ttl_wrong_type(client, key, ttl):
    with pytest.raises(TypeError, match="ttl"):
        client.lock(key, ttl=ttl)


def test_ttl_true_is_refused_after_ttl_1_was_taken(client, key):
    # True == 1 and hash(True) == hash(1): a TTL taken once is not taken
    # again in a type that compares equal to it
    assert client.lock(key, ttl=1).ttl == 1.0
    with pytest.raises(TypeError, match="ttl"):
        client.lock(key, ttl=True)


def test_ttl_rounding_is_the_same_for_a_number_taken_before(client, key):
    # a TTL seen before gets the library's answer again: whole ms, rounded up
    for _ in range(2):
        assert client.lock(key, ttl=0.0011).ttl == 0.002
        assert client.lock(key, ttl=2).ttl == 2.0
        assert client.lock(key, ttl=2.0).ttl == 2.0
    with pytest.raises(distlock.InvalidArgument, match="ttl"):
        client.lock(key, ttl=0)
    with pytest.raises(distlock.InvalidArgument, match="ttl"):
        client.lock(key, ttl=0)


@pytest.mark.parametrize("wait", [-1, math.nan])
def test_wait_invalid(client, key, wait):
    with pytest.raises(distlock.InvalidArgument, match="wait"):
        client.lock(key, wait=wait)


@pytest.mark.parametrize("servers", [
    "", "http://127.0.0.1:1", "redis://", "redis://127.0.0.1:99999",
    "redis://127.0.0.1:7000,redis://127.0.0.1:7000", [], ["redis://127.0.0.1:1", ""],
])
def test_bad_server_uris(servers):
    with pytest.raises(distlock.InvalidArgument):
        distlock.Client(servers)


@pytest.mark.parametrize("servers", [None, 6379, [1, 2]])
def test_servers_wrong_type(servers):
    with pytest.raises(TypeError, match="servers"):
        distlock.Client(servers)


def test_bad_options():
    with pytest.raises(distlock.InvalidArgument):
        distlock.Client("redis://127.0.0.1:1", connect_timeout=-1)
    with pytest.raises(distlock.InvalidArgument):
        distlock.Client("redis://127.0.0.1:1", drift_factor=2)
    with pytest.raises(distlock.InvalidArgument, match="command_timeout=0"):
        distlock.Client("redis://127.0.0.1:1", command_timeout=0)  # range checked in C
    with pytest.raises(distlock.InvalidArgument, match='"password" takes a string'):
        distlock.Client("redis://127.0.0.1:1", password=123)
    with pytest.raises(TypeError, match="Python spells it connect_timeout"):
        distlock.Client("redis://127.0.0.1:1", connect_timeout_ms=100)


# The option rules are the library's: its table names the options, and its
# message (naming the option) is what each kind of mistake raises.
def test_unknown_option_gets_the_library_message():
    with pytest.raises(TypeError, match=re.escape('unknown option "nope"')):
        distlock.Client("redis://127.0.0.1:1", nope=1)
    with pytest.raises(TypeError, match=re.escape(
            'unknown option "wait_replica" (did you mean "wait_replicas"?)')):
        distlock.Client("redis://127.0.0.1:1", wait_replica=1)


def test_option_out_of_range_gets_the_library_message():
    with pytest.raises(distlock.InvalidArgument, match=re.escape(
            'wait_replicas=65: option "wait_replicas": value 65 out of range 0..64')):
        distlock.Client("redis://127.0.0.1:1", wait_replicas=65)
    with pytest.raises(distlock.InvalidArgument, match=re.escape(
            'wait_timeout=61: option "wait_timeout_ms": value 61000 out of range 1..60000')):
        distlock.Client("redis://127.0.0.1:1", wait_timeout=61)


def test_string_for_integer_option_gets_the_library_message():
    with pytest.raises(distlock.InvalidArgument, match=re.escape(
            'wait_replicas=\'x\': option "wait_replicas" takes an integer, got "x"')):
        distlock.Client("redis://127.0.0.1:1", wait_replicas="x")
    # text that is an integer is one (as from a config file)
    with distlock.Client("redis://127.0.0.1:1", wait_replicas="2", stats=False):
        pass


def test_options_lists_the_library_table():
    rows = {r[0]: r for r in distlock.options()}
    assert rows["connect_timeout_ms"][5] == 1000
    assert rows["wait_replicas"][3:5] == (0, 64)
    assert all((r[1] < 100) == (r[2] == 1) for r in rows.values())


def test_unreachable_server_raises_connection_error(server_factory, key):
    srv = server_factory()
    uri = srv.uri
    srv.stop()  # nothing listens there now
    c = distlock.Client(uri, connect_timeout=0.5, command_timeout=0.5)
    try:
        with pytest.raises(distlock.ConnectionError) as ei:
            c.lock(key, ttl=5).acquire(blocking=False)
        assert isinstance(ei.value, distlock.Error)
        assert ei.value.status in (-3, -4, -5)
        assert str(ei.value)  # a message naming the problem
    finally:
        c.close()


def test_use_after_close(server, key):
    c = distlock.Client(server.uri)
    c.close()
    assert c.closed
    with pytest.raises(distlock.ClosedError):
        c.lock(key).acquire()
    with pytest.raises(distlock.ClosedError):
        c.inspect(key)


def test_token_args_validated(client, key):
    with pytest.raises(TypeError, match="token"):
        client.acquire_token(key, 42)
    with pytest.raises(distlock.InvalidArgument):
        client.acquire_token(key, "")
    with pytest.raises(distlock.InvalidArgument):
        client.acquire_token(key, "t" * (distlock.TOKEN_MAX + 1))
    with pytest.raises(distlock.InvalidArgument):
        client.inspect(key, node=5)


def test_hierarchy():
    for cls in (distlock.InvalidArgument, distlock.OutOfMemory, distlock.ConnectionError,
                distlock.TimeoutError, distlock.NoQuorum, distlock.LockLost,
                distlock.ProtocolError, distlock.ClosedError, distlock.LockNotAcquired,
                distlock.NotHeld):
        assert issubclass(cls, distlock.Error)
    assert issubclass(distlock.NoQuorum, distlock.ConnectionError)
    assert issubclass(distlock.NotHeld, RuntimeError)
