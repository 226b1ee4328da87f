"""redis.sh start never takes another test's server for its own: a server
whose port is taken exits, and the next port is tried, even though the
server that holds the port answers there. Real redis-servers (ctest
test_redis_sh_py)."""
import os
import subprocess
import tempfile

import pytest

REDIS_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "redis.sh")


def redis_sh(*args, env=None):
    return subprocess.run(["bash", REDIS_SH, *args], check=True, capture_output=True,
                          text=True, timeout=120, env=env).stdout.strip()


def process_id(port):
    out = subprocess.run(["redis-cli", "-p", str(port), "INFO", "server"], check=True,
                         capture_output=True, text=True, timeout=10).stdout
    return int(next(x for x in out.splitlines() if x.startswith("process_id:")).split(":")[1])


@pytest.fixture
def dirs():
    made = []

    def make():
        made.append(tempfile.mkdtemp(prefix="distlock-redis-sh."))
        return made[-1]
    yield make
    for d in made:
        subprocess.run(["bash", REDIS_SH, "stop", d], check=False, timeout=60)


def test_a_taken_port_is_not_taken_for_ours(dirs):
    other = dirs()
    taken = int(redis_sh("start", other, "1"))   # another test's server
    mine = dirs()
    for _ in range(3):   # each time: the other's port first
        env = dict(os.environ, REDIS_SH_TRY_PORT=str(taken))
        port = int(redis_sh("start", mine, "1", env=env))
        assert port != taken
        with open(os.path.join(mine, "redis-%d.pid" % port)) as f:
            assert process_id(port) == int(f.read())
    with open(os.path.join(other, "redis-%d.pid" % taken)) as f:
        assert process_id(taken) == int(f.read())   # the other one is untouched
