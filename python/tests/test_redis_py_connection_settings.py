"""distlock.redis_py locks where the redis client connects, as it connects:
TCP with its db, a Unix socket, an ACL user, TLS; one distlock client per
distinct setting; a clear error for clients it can't read."""
import os
import uuid

import pytest
import redis
import redis.sentinel

import distlock
import distlock.redis_py
from distlock import redis_py
from test_tls import tls_server  # noqa: F401 - the module's TLS redis-server fixture

USER, PASS = "rpyuser", "rpy-secret-pw"


@pytest.fixture
def name():
    return "rps:" + uuid.uuid4().hex


def test_the_db_of_the_client_holds_the_key(server, name):
    r5 = redis.Redis(port=server.port, db=5)
    r0 = redis.Redis(port=server.port)
    lock = r5.lock(name, timeout=30, lock_class=redis_py.Lock)
    assert lock.acquire(blocking=False)
    assert r5.get(name) == lock.local.token
    assert r0.get(name) is None
    lock.release()
    assert r5.get(name) is None


def test_a_unix_socket_client_locks_through_the_socket(server, name):
    ru = redis.Redis(unix_socket_path=server.sock, db=2)
    lock = ru.lock(name, timeout=30, lock_class=redis_py.Lock)
    assert lock.acquire(blocking=False)
    assert redis.Redis(port=server.port, db=2).get(name) == lock.local.token
    lock.release()
    assert ru.get(name) is None


@pytest.fixture
def acl_user(server):
    admin = redis.Redis(port=server.port)
    admin.execute_command("ACL", "SETUSER", USER, "reset", "on", ">" + PASS, "~*", "&*", "+@all")
    yield admin
    admin.execute_command("ACL", "DELUSER", USER)


def test_an_acl_user_of_the_client_is_the_user_that_locks(server, acl_user, name):
    ra = redis.Redis(port=server.port, username=USER, password=PASS)
    lock = ra.lock(name, timeout=30, lock_class=redis_py.Lock)
    assert lock.acquire(blocking=False)
    assert acl_user.get(name) == lock.local.token
    # distlock's connection (kept open by the shared client) is logged in as the user
    assert any(c.get("user") == USER for c in acl_user.client_list())
    lock.release()


def test_a_wrong_password_is_a_connection_error_that_hides_it(server, acl_user, name):
    ra = redis.Redis(port=server.port, username=USER, password="not-" + PASS)
    with pytest.raises(distlock.ConnectionError) as e:
        ra.lock(name, timeout=30, lock_class=redis_py.Lock).acquire(blocking=False)
    assert isinstance(e.value, redis.exceptions.ConnectionError)  # as redis-py's would be
    assert isinstance(e.value.__cause__, distlock.ProtocolError)
    assert "not-" + PASS not in str(e.value)
    assert acl_user.get(name) is None


def test_a_tls_client_locks_over_tls(tls_server, name):  # noqa: F811
    uri, certs, r = tls_server
    port = int(uri.rsplit(":", 1)[1])
    rs = redis.Redis(port=port, ssl=True, ssl_ca_certs=os.path.join(certs, "ca.crt"))
    lock = rs.lock(name, timeout=30, lock_class=redis_py.Lock)
    assert lock.acquire(blocking=False)
    assert r.get(name) == lock.local.token.decode()
    lock.release()
    assert r.get(name) is None


def test_a_tls_client_with_its_ca_missing_is_refused(tls_server, name):  # noqa: F811
    uri, certs, r = tls_server
    port = int(uri.rsplit(":", 1)[1])
    rs = redis.Redis(port=port, ssl=True)
    with pytest.raises(distlock.ConnectionError, match="certificate verify failed"):
        rs.lock(name, timeout=30, lock_class=redis_py.Lock).acquire(blocking=False)


def test_a_tls_client_without_verification_locks_without_the_ca(tls_server, name):  # noqa: F811
    uri, certs, r = tls_server
    port = int(uri.rsplit(":", 1)[1])
    rs = redis.Redis(port=port, ssl=True, ssl_cert_reqs="none")
    lock = rs.lock(name, timeout=30, lock_class=redis_py.Lock)
    assert lock.acquire(blocking=False)
    lock.release()
    assert r.get(name) is None


def test_clients_with_the_same_settings_share_one_distlock_client(server):
    a = redis.Redis(port=server.port, db=1)
    b = redis.Redis(port=server.port, db=1)
    c = redis.Redis(port=server.port, db=3)
    assert redis_py._client_for(a) is redis_py._client_for(b)
    assert redis_py._client_for(a) is not redis_py._client_for(c)
    assert redis_py._client_for(a).nodes == ["redis://localhost:%d/1" % server.port]


def test_a_password_is_not_in_the_shared_clients_nodes(server, acl_user):
    ra = redis.Redis(port=server.port, username=USER, password=PASS)
    assert PASS not in repr(redis_py._client_for(ra))


@pytest.mark.parametrize("cls", [redis_py.Lock, redis_py.AsyncLock])
def test_not_a_redis_client_is_a_type_error_when_made(cls, name):
    with pytest.raises(TypeError, match="needs a redis.Redis"):
        cls(object(), name)


def test_a_sentinel_managed_client_is_a_type_error(name):
    master = redis.sentinel.Sentinel([("127.0.0.1", 1)]).master_for("mymaster")
    with pytest.raises(TypeError, match="Sentinel-managed"):
        master.lock(name, lock_class=redis_py.Lock)
