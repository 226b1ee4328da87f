#!/usr/bin/env python3
"""A Sentinel-managed Redis group for tests: 1 master, 2 replicas, 3 sentinels.

Real redis-server processes (Debian's; `redis-server --sentinel conf` is the
sentinel), on free loopback ports, in a throwaway directory. Started with

    python3 sentinels.py [--data-pass P] [--sentinel-user U --sentinel-pass P]
                         [--down-after-ms 1000] [--failover-timeout-ms 3000]
                         [--name mymaster] [--replicas 2] [--sentinels 3] [--quorum 2]
                         [--tls-dir DIR [--data-ip IP] [--data-cert NAME]] [--resync-delay-s N]

--tls-dir DIR (certificates made by certs.sh DIR): every server, data node and
sentinel, listens on TLS only (`port 0`, `tls-port`), replicates and is
monitored over TLS (`tls-replication yes`, the client certificate for the
servers' own connections) and requires a client certificate signed by the
test CA (`tls-auth-clients yes`); the printed uri is rediss-sentinel://.
--resync-delay-s N makes a failover end seconds after its promotion: the
replicas (so the one a failover promotes) start a full sync only N s after a
replica asks (`repl-diskless-sync yes`, `repl-diskless-sync-delay N`), and
data[1] has the better `replica-priority`, so it is the one promoted and the
other replica's resync to it (a full one once the old master wrote past the
promotion) is what Sentinel waits for, until `failover-timeout`.
--data-ip IP (e.g. 127.0.0.2; loopback is all of 127.0.0.0/8): the data nodes
listen there only and the sentinels name them by it (the sentinels stay at
127.0.0.1); --data-cert NAME: they serve DIR/NAME.crt (default server.crt),
e.g. certs.sh's ip2.crt, valid for 127.0.0.2 only. The harness's own
connections to them check the chain, not the name.
Smaller groups (--replicas 0, --sentinels 1 --quorum 1) keep a Redlock over
several groups within a small machine.

it prints one line once the group is ready (the replicas are in sync and
every sentinel knows the master, both replicas and the two other sentinels:
polled, never slept on):

    ready name=N data=P0:PID0,P1:PID1,P2:PID2 sentinels=S0:PID,S1:PID,S2:PID uri=redis-sentinel://...

data[0] is the master at start. Then it reads commands on stdin, one per line,
answering one line each (`ok ...` or `err ...`) after the fact is true:

    master                -> ok PORT          (what the sentinels say, confirmed by ROLE)
    failover              -> ok PORT          SENTINEL FAILOVER; waits for a new master
    failover-notice       -> ok PORT          SENTINEL FAILOVER to the first sentinel; waits
                                              for its +switch-master message (new master)
    wait-master-not PORT MS -> ok PORT        waits until the sentinels name another master
    kill PORT             -> ok               SIGKILL of that data node
    stop PORT / cont PORT -> ok               SIGSTOP / SIGCONT of that data node
    has PORT KEY VALUE    -> ok 1 / 2 / 0     KEY on that data node: VALUE / another / absent
    channels PORT         -> ok N             PUBSUB CHANNELS on that data node: how many

The servers listen on ports below the kernel's ephemeral range. A start
whose server exits (its port taken by a parallel test meanwhile) or that is
not ready within READY_S is stopped and made again on fresh ports, up to
ATTEMPTS times, with a note on stderr; the last failure is the `err` line.

It stops everything when stdin closes (or on SIGTERM); the servers die with it
(PR_SET_PDEATHSIG) even if it is killed.
"""
import argparse
import ctypes
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

PR_SET_PDEATHSIG = 1

# Group.start: how many starts on fresh ports, and how long each may take to
# become ready (servers up, replicas in sync, every sentinel knowing the rest;
# a few seconds on an idle machine).
ATTEMPTS = 3
READY_S = 40


def _pdeathsig():
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def port_range():
    """Ports for the servers, outside the kernel's ephemeral range (as
    redis_harness.c's port_range does): a port found free by a bind to port 0
    is in that range, and any outgoing connection on the machine (a parallel
    test's client, a sentinel's own links) can take it as its local port
    before our server binds it; that server then exits at start-up."""
    lo, hi = 32768, 60999
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split()[:2])
    except (OSError, ValueError):
        pass
    if lo - 10000 >= 2000:
        return 10000, lo - 1
    return hi + 1, 65535


def free_port(ip="127.0.0.1", taken=()):
    """A port nobody holds on ip right now, not in taken. A hint only: another
    harness may still take it first (then our server exits, and Group.start
    starts the group again on fresh ports)."""
    lo, hi = port_range()
    for _ in range(200):
        p = random.randint(lo, hi)
        if p in taken:
            continue
        s = socket.socket()
        try:
            s.bind((ip, p))
        except OSError:
            continue
        finally:
            s.close()
        return p
    raise RuntimeError("no free port in %d..%d" % (lo, hi))


def debug_command_option():
    """--enable-debug-command is Redis 7.0+ (older servers allow DEBUG
    anyway): left out for the older servers scripts/server-matrix.sh runs."""
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    v = out.split(" v=", 1)[1] if " v=" in out else "0"
    return ["--enable-debug-command", "local"] if int(v.split(".")[0] or 0) >= 7 else []


class Conn:
    """A minimal blocking RESP client (the harness must not depend on a
    Python Redis package)."""

    def __init__(self, port, user=None, password=None, timeout=2.0, tls=None, host="127.0.0.1"):
        self.s = socket.create_connection((host, port), timeout=timeout)
        if tls is not None:
            self.s = tls.wrap_socket(self.s, server_hostname=host)
        self.f = self.s.makefile("rb")
        if password is not None:
            r = self.cmd("AUTH", *([user] if user else []), password)
            if isinstance(r, Exception):
                raise r

    def close(self):
        self.f.close()
        self.s.close()

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self._read()

    def _read(self):
        line = self.f.readline()
        if not line:
            raise ConnectionError("closed")
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data.decode(errors="replace")
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise ConnectionError("bad reply %r" % line)


class GroupFailed(Exception):
    """This start of the group cannot become ready (a process exited, or
    the group did not converge in time); another one on fresh ports may."""


def poll_until(what, fn, timeout_s, check=None):
    """fn() until it is true, within timeout_s; check() first on every turn
    (it raises to give up at once, e.g. when a server of the group exited)."""
    end = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < end:
        if check is not None:
            check()
        try:
            v = fn()
            if v:
                return v
        except (OSError, ConnectionError) as e:
            last = e
        time.sleep(0.02)  # polling interval, not a synchronisation
    raise TimeoutError("%s: not within %.0f s (%s)" % (what, timeout_s, last))


class Group:
    def __init__(self, a):
        self.a = a
        self.dir = None
        self.procs = {}
        self.data = []
        self.sent = []
        self.attempts = 0
        self.tls = self.data_tls = None
        self.data_ip = a.data_ip or "127.0.0.1"
        if a.tls_dir:
            self.tls = ssl.create_default_context(cafile=self.cert("ca.crt"))
            self.tls.load_cert_chain(self.cert("client.crt"), self.cert("client.key"))
            self.data_tls = self.tls
            if a.data_ip:
                self.data_tls = ssl.create_default_context(cafile=self.cert("ca.crt"))
                self.data_tls.load_cert_chain(self.cert("client.crt"), self.cert("client.key"))
                self.data_tls.check_hostname = False

    def cert(self, name):
        return os.path.join(self.a.tls_dir, name)

    def tls_args(self, port, name="server"):
        """The TLS settings of a server (data node or sentinel), as
        (name, value) pairs; the plain port otherwise."""
        if not self.a.tls_dir:
            return [("port", str(port))]
        return [("port", "0"), ("tls-port", str(port)),
                ("tls-cert-file", self.cert(name + ".crt")),
                ("tls-key-file", self.cert(name + ".key")),
                ("tls-client-cert-file", self.cert("client.crt")),
                ("tls-client-key-file", self.cert("client.key")),
                ("tls-ca-cert-file", self.cert("ca.crt")),
                ("tls-auth-clients", "yes"), ("tls-replication", "yes")]

    def spawn(self, port, argv):
        log = open(os.path.join(self.dir, "out-%d.log" % port), "wb")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             preexec_fn=_pdeathsig, cwd=self.dir)
        self.procs[port] = p

    def data_conn(self, port):
        return Conn(port, None, self.a.data_pass, tls=self.data_tls, host=self.data_ip)

    def sent_conn(self, port):
        return Conn(port, self.a.sentinel_user, self.a.sentinel_pass, tls=self.tls)

    def start(self):
        """Starts the group and waits until it is ready. A start whose server
        exits (its port taken between free_port() and its bind, by another
        harness on a shared machine) or that does not converge within
        READY_S (under load, a sentinel that never hears of the others) is
        stopped and made again on a fresh set of ports, up to ATTEMPTS
        times: what failed is the start, not what the tests check."""
        for attempt in range(1, ATTEMPTS + 1):
            self.attempts = attempt
            taken = set()
            self.data = []
            for _ in range(1 + self.a.replicas):
                self.data.append(free_port(self.data_ip, taken))
                taken.add(self.data[-1])
            self.sent = []
            for _ in range(self.a.sentinels):
                self.sent.append(free_port("127.0.0.1", taken))
                taken.add(self.sent[-1])
            self.dir = tempfile.mkdtemp(prefix="distlock-sentinel-")
            try:
                self.spawn_all()
                self.wait_ready(time.monotonic() + READY_S)
                return
            except (GroupFailed, TimeoutError) as e:
                self.stop()
                if attempt == ATTEMPTS:
                    raise GroupFailed("%s (attempt %d of %d)" % (e, attempt, ATTEMPTS)) from e
                print("sentinels.py: start %d of %d failed (%s); again on fresh ports"
                      % (attempt, ATTEMPTS, e), file=sys.stderr, flush=True)

    def check_alive(self):
        """Raises GroupFailed if a server of this start has exited (the last
        line of its log says why, e.g. its port was taken)."""
        for port, p in self.procs.items():
            if p.poll() is not None:
                why = ""
                for name in ("redis-%d.log" % port, "sentinel-%d.log" % port, "out-%d.log" % port):
                    try:
                        with open(os.path.join(self.dir, name), errors="replace") as f:
                            lines = [x.strip() for x in f if x.strip()]
                        why = lines[-1] if lines else why
                    except OSError:
                        continue
                    if why:
                        break
                raise GroupFailed("server %d exited (%s): %s" % (port, p.returncode, why))

    def spawn_all(self):
        a = self.a
        for k, port in enumerate(self.data):
            argv = ["redis-server", "--bind", self.data_ip, "--save", "",
                    "--appendonly", "no", "--dir", self.dir, "--daemonize", "no",
                    "--logfile", os.path.join(self.dir, "redis-%d.log" % port)]
            argv += debug_command_option()
            for name, value in self.tls_args(port, a.data_cert or "server"):
                argv += ["--" + name, value]
            if a.data_pass:
                argv += ["--requirepass", a.data_pass, "--masterauth", a.data_pass]
            if k > 0:
                argv += ["--replicaof", self.data_ip, str(self.data[0]),
                         "--replica-announce-ip", self.data_ip]
            if k > 0 and a.resync_delay_s:
                # not on data[0]: the group's first sync stays quick
                argv += ["--repl-diskless-sync", "yes",
                         "--repl-diskless-sync-delay", str(a.resync_delay_s),
                         "--replica-priority", "10" if k == 1 else "100"]
            self.spawn(port, argv)
        for port in self.sent:
            conf = os.path.join(self.dir, "sentinel-%d.conf" % port)
            lines = [
                "bind 127.0.0.1", "daemonize no", "dir %s" % self.dir,
                "logfile %s" % os.path.join(self.dir, "sentinel-%d.log" % port),
                "sentinel monitor %s %s %d %d" % (a.name, self.data_ip, self.data[0], a.quorum),
                "sentinel down-after-milliseconds %s %d" % (a.name, a.down_after_ms),
                "sentinel failover-timeout %s %d" % (a.name, a.failover_timeout_ms),
                "sentinel parallel-syncs %s 1" % a.name,
            ] + ["%s %s" % kv for kv in self.tls_args(port)]
            if a.data_pass:
                lines.append("sentinel auth-pass %s %s" % (a.name, a.data_pass))
            if a.sentinel_pass:
                if a.sentinel_user:
                    # the sentinels' own ACL user; the default user is off
                    lines.append("user default off")
                    lines.append("user %s on >%s allchannels allkeys +@all"
                                 % (a.sentinel_user, a.sentinel_pass))
                    lines.append("sentinel sentinel-user %s" % a.sentinel_user)
                else:
                    lines.append("requirepass %s" % a.sentinel_pass)
                lines.append("sentinel sentinel-pass %s" % a.sentinel_pass)
            with open(conf, "w") as f:
                f.write("\n".join(lines) + "\n")
            self.spawn(port, ["redis-server", conf, "--sentinel"])

    def own(self, port, conn):
        """The server on port is the one this start spawned, not another
        harness's that holds the port (ours then exits, or has not bound yet)."""
        try:
            c = conn(port)
        except RuntimeError:  # refused our AUTH: not ours
            return False
        try:
            info = c.cmd("INFO", "server")
        finally:
            c.close()
        return isinstance(info, str) and ("process_id:%d\r" % self.procs[port].pid) in info

    def wait_ready(self, deadline):
        def left():
            return max(0.0, deadline - time.monotonic())
        for port in self.data:
            poll_until("data node %d answers as ours" % port,
                       lambda port=port: self.own(port, self.data_conn), left(), self.check_alive)
        for port in self.sent:
            poll_until("sentinel %d answers as ours" % port,
                       lambda port=port: self.own(port, self.sent_conn), left(), self.check_alive)
        for port in self.data[1:]:
            def synced(port=port):
                c = self.data_conn(port)
                try:
                    return "master_link_status:up" in c.cmd("INFO", "replication")
                finally:
                    c.close()
            poll_until("replica %d in sync" % port, synced, left(), self.check_alive)
        for port in self.sent:
            def knows(port=port):
                c = self.sent_conn(port)
                try:
                    m = c.cmd("SENTINEL", "MASTER", self.a.name)
                    if not isinstance(m, list):
                        return False
                    d = dict(zip(m[::2], m[1::2]))
                    return (d.get("flags") == "master"
                            and d.get("num-slaves") == str(self.a.replicas)
                            and d.get("num-other-sentinels") == str(len(self.sent) - 1))
                finally:
                    c.close()
            poll_until("sentinel %d knows the group" % port, knows, left(), self.check_alive)

    def sentinel_master(self):
        for port in self.sent:
            if self.procs[port].poll() is not None:
                continue
            try:
                c = self.sent_conn(port)
                try:
                    r = c.cmd("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.a.name)
                finally:
                    c.close()
                if isinstance(r, list):
                    return int(r[1])
            except (OSError, ConnectionError):
                continue
        return None

    def confirmed_master(self):
        p = self.sentinel_master()
        if p is None:
            return None
        c = self.data_conn(p)
        try:
            role = c.cmd("ROLE")
        finally:
            c.close()
        return p if isinstance(role, list) and role[0] == "master" else None

    def wait_master_not(self, old, timeout_s):
        def other():
            p = self.confirmed_master()
            return p if p is not None and p != old else None
        return poll_until("a master other than %d" % old, other, timeout_s)

    def failover(self):
        old = poll_until("a master", self.confirmed_master, 10)
        c = self.sent_conn(self.sent[0])
        try:
            r = poll_until("SENTINEL FAILOVER accepted",
                           lambda: (lambda x: x if x == "OK" else None)(
                               c.cmd("SENTINEL", "FAILOVER", self.a.name)), 10)
        finally:
            c.close()
        del r
        return self.wait_master_not(old, 30)

    def failover_notice(self):
        """SENTINEL FAILOVER, answered once the first sentinel has published
        +switch-master (a subscriber on it sees the message)."""
        poll_until("a master", self.confirmed_master, 10)
        sub = self.sent_conn(self.sent[0])
        try:
            r = sub.cmd("SUBSCRIBE", "+switch-master")
            if isinstance(r, Exception):
                raise r
            c = self.sent_conn(self.sent[0])
            try:
                poll_until("SENTINEL FAILOVER accepted",
                           lambda: c.cmd("SENTINEL", "FAILOVER", self.a.name) == "OK", 10)
            finally:
                c.close()
            sub.s.settimeout(60)
            while True:
                m = sub._read()
                if isinstance(m, list) and m[0] == "message" and m[2].split()[0] == self.a.name:
                    return int(m[2].split()[4])
        finally:
            sub.close()

    def kill(self, port):
        p = self.procs[port]
        p.send_signal(signal.SIGKILL)
        p.wait()

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
        for p in self.procs.values():
            p.wait()
        self.procs = {}
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        self.dir = None

    def uri(self):
        a = self.a
        scheme = "rediss-sentinel" if a.tls_dir else "redis-sentinel"
        cred = ":%s@" % a.data_pass if a.data_pass else ""
        hosts = ",".join("127.0.0.1:%d" % p for p in self.sent)
        q = []
        if a.sentinel_user:
            q.append("sentinel_user=" + a.sentinel_user)
        if a.sentinel_pass:
            q.append("sentinel_password=" + a.sentinel_pass)
        return "%s://%s%s/%s%s" % (scheme, cred, hosts, a.name, ("?" + "&".join(q)) if q else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", default="mymaster")
    ap.add_argument("--data-pass")
    ap.add_argument("--sentinel-user")
    ap.add_argument("--sentinel-pass")
    ap.add_argument("--down-after-ms", type=int, default=1000)
    ap.add_argument("--failover-timeout-ms", type=int, default=3000)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--sentinels", type=int, default=3)
    ap.add_argument("--quorum", type=int, default=2)
    ap.add_argument("--tls-dir")
    ap.add_argument("--resync-delay-s", type=int, default=0)
    ap.add_argument("--data-ip")
    ap.add_argument("--data-cert")
    a = ap.parse_args()
    g = Group(a)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        try:
            g.start()
        except Exception as e:  # noqa: BLE001 - reported to the driver
            print("err %s" % e, flush=True)
            return 1
        print("ready name=%s data=%s sentinels=%s uri=%s" % (
            a.name,
            ",".join("%d:%d" % (p, g.procs[p].pid) for p in g.data),
            ",".join("%d:%d" % (p, g.procs[p].pid) for p in g.sent),
            g.uri()), flush=True)
        for line in sys.stdin:
            w = line.split()
            try:
                if not w:
                    continue
                if w[0] == "master":
                    print("ok %d" % poll_until("a master", g.confirmed_master, 10), flush=True)
                elif w[0] == "failover-notice":
                    print("ok %d" % g.failover_notice(), flush=True)
                elif w[0] == "failover":
                    print("ok %d" % g.failover(), flush=True)
                elif w[0] == "wait-master-not":
                    print("ok %d" % g.wait_master_not(int(w[1]), int(w[2]) / 1000.0), flush=True)
                elif w[0] in ("stop", "cont"):
                    g.procs[int(w[1])].send_signal(
                        signal.SIGSTOP if w[0] == "stop" else signal.SIGCONT)
                    print("ok", flush=True)
                elif w[0] == "has":
                    c = g.data_conn(int(w[1]))
                    try:
                        v = c.cmd("GET", w[2])
                    finally:
                        c.close()
                    if isinstance(v, Exception):
                        raise v
                    print("ok %d" % (0 if v is None else 1 if v == w[3] else 2), flush=True)
                elif w[0] == "channels":
                    c = g.data_conn(int(w[1]))
                    try:
                        v = c.cmd("PUBSUB", "CHANNELS")
                    finally:
                        c.close()
                    if isinstance(v, Exception):
                        raise v
                    print("ok %d" % len(v), flush=True)
                elif w[0] == "kill":
                    g.kill(int(w[1]))
                    print("ok", flush=True)
                else:
                    print("err unknown command", flush=True)
            except Exception as e:  # noqa: BLE001 - reported to the driver
                print("err %s" % e, flush=True)
        return 0
    finally:
        g.stop()


if __name__ == "__main__":
    sys.exit(main())
