"""No password is ever shown: repr/str of a Client, its nodes, the text and
args of every exception (good, bad and unreachable servers; password in the
URI or the keyword), and a Client or Lock can't be pickled. A real ACL user
makes the good cases connect. The password is built, never written whole, so
that source lines quoted in tracebacks can't contain it. The package has no
masking of its own: what these tests see is the library's masking."""
import copy
import os
import pickle
import socket
import traceback

import pytest

import distlock

SECRET = "S3cret" + "Passw0rd"
PIECES = ("S3cret", "Passw0rd")


def hidden(text: str, want: str = "***") -> None:
    for piece in PIECES:
        assert piece not in text, "password shown: %r" % (text,)
    assert want in text, "%r not in %r" % (want, text)


def everything(e: BaseException) -> str:
    """All an exception shows: str, repr, args, its attributes, a traceback."""
    return "\n".join([str(e), repr(e), repr(e.args), repr(getattr(e, "message", "")),
                      repr(getattr(e, "detail", "")),
                      "".join(traceback.format_exception(type(e), e, e.__traceback__))])


def raised(fn, *args, **kw) -> str:
    with pytest.raises(distlock.Error) as ei:
        fn(*args, **kw)
    return everything(ei.value)


@pytest.fixture(scope="module")
def acl_user(server):
    user = "dlsec%d" % os.getpid()
    r = server.redis()
    r.execute_command("ACL", "SETUSER", user, "on", ">" + SECRET, "~*", "&*", "+@all")
    yield user
    r.execute_command("ACL", "DELUSER", user)


@pytest.fixture
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_good_uri_connects_and_is_masked(server, acl_user, key):
    uri = "redis://%s:%s@127.0.0.1:%d" % (acl_user, SECRET, server.port)
    with distlock.Client(uri) as c:
        with c.lock(key, ttl=10) as lk:
            assert lk.held
            assert "user=%s" % acl_user in str(server.redis().execute_command("CLIENT", "LIST"))
            hidden(repr(lk) + str(lk), key)
        want = "redis://%s:***@127.0.0.1:%d" % (acl_user, server.port)
        hidden(repr(c), want)
        hidden(str(c), want)
        hidden(",".join(c.nodes), want)
        # the client's attributes, and the state kept in its CallCount
        hidden(repr(vars(c)) + repr(c._h), "_inflight")
        hidden(repr(c._h), "distlock_client")


def test_good_keyword_password(server, acl_user, key):
    with distlock.Client(server.uri, username=acl_user, password=SECRET) as c:
        lk = c.lock(key, ttl=10)
        assert lk.acquire(blocking=False)
        hidden(repr(c) + repr(vars(c)), "127.0.0.1:%d" % server.port)
        lk.release()


def test_bad_port(acl_user):
    bad = "redis://%s:%s@127.0.0.1:99999" % (acl_user, SECRET)
    # the core's message masks everything between "://" and the entry's last '@'
    hidden(raised(distlock.Client, bad), "'redis://***@127.0.0.1:99999'")
    hidden(raised(distlock.Client, bad, password=SECRET), "***@127.0.0.1:99999")
    hidden(raised(distlock.Client, ["redis://127.0.0.1:1", bad]), "***@127.0.0.1:99999")


def test_unreachable(acl_user, free_port, key):
    down = "redis://%s:%s@127.0.0.1:%d" % (acl_user, SECRET, free_port)
    with distlock.Client(down, connect_timeout=0.3) as c:
        hidden(repr(c), "%s:***@" % acl_user)
        hidden(raised(c.lock(key).acquire, blocking=False),
               "redis://%s:***@127.0.0.1:%d" % (acl_user, free_port))
        hidden(raised(c.acquire_token, key, "tok"), "%s:***@" % acl_user)
        hidden(raised(c.inspect, key), "%s:***@" % acl_user)
    unroutable = "redis://%s:%s@192.0.2.1:6379" % (acl_user, SECRET)
    with distlock.Client(unroutable, connect_timeout=0.2) as c:
        hidden(raised(c.lock(key).acquire, blocking=False), "redis://%s:***@192.0.2.1" % acl_user)
    with distlock.Client("redis://127.0.0.1:%d" % free_port, username=acl_user,
                         password=SECRET, connect_timeout=0.3) as c:
        hidden(raised(c.force_release, key), "127.0.0.1:%d" % free_port)


def test_wrong_password(server, acl_user, key):
    uri = "redis://%s:%sx@127.0.0.1:%d" % (acl_user, SECRET, server.port)
    with distlock.Client(uri) as c:
        hidden(raised(c.lock(key).acquire, blocking=False),
               "redis://%s:***@127.0.0.1:%d" % (acl_user, server.port))


@pytest.mark.parametrize("sep", ["%40", ",", " ", "@", "/"])
def test_passwords_the_parser_cuts_up(acl_user, sep):
    """The list parser quotes a piece of such a password, or stops at it."""
    pw = PIECES[0] + sep + PIECES[1]
    hidden(raised(distlock.Client, "redis://%s:%s@127.0.0.1:99999" % (acl_user, pw)),
           "***@127.0.0.1:99999")


def test_sentinel_style_and_whole_list(server, acl_user, free_port):
    sentinel = ("redis-sentinel://%s:%s@h1,h2/mymaster?sentinel_password=%s&password=%s"
                % (acl_user, SECRET, SECRET, SECRET))
    hidden(raised(distlock.Client, sentinel),
           "'redis-sentinel://***@h1,h2/mymaster?sentinel_password=***'")
    listed = "%s,redis://%s:%s@127.0.0.1:%d,,redis://h:3" % (server.uri, acl_user, SECRET, free_port)
    hidden(raised(distlock.Client, listed), "***@127.0.0.1:%d" % free_port)


def test_not_picklable(server, key):
    uri = "redis://u:%s@127.0.0.1:%d" % (SECRET, server.port)
    c = distlock.Client(uri)
    lk = c.lock(key)
    for obj, name in ((c, "distlock.Client"), (lk, "distlock.Lock")):
        for dump in (pickle.dumps, copy.copy, copy.deepcopy):
            with pytest.raises(TypeError) as ei:
                dump(obj)
            hidden(everything(ei.value), "cannot pickle or copy a " + name)
    c.close()
