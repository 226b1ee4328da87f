#!/usr/bin/env python3
"""faultproxy.py -- a fault-injecting TCP proxy for the distlock tests.

Real redis-servers stay real; this process sits between the code under test
and them and breaks individual TCP connections on command: a slow connection,
a held request, a partition, a reset in the middle of a reply, a slow accept.
Python 3 standard library only (asyncio), one process, one thread.

RUNNING
    python3 faultproxy.py --target 127.0.0.1:P1 [--target 127.0.0.1:P2 ...]

It listens on one free 127.0.0.1 port per target ("listener" L = 0, 1, ... in
--target order) and on one control port, then prints exactly one line on
stdout and flushes it:

    ready control=CP listen=LP0,LP1,...

It exits, closing every socket, when its stdin reaches EOF (so it dies with
the test process holding the other end of the pipe) or on SIGTERM/SIGINT.

CONTROL PROTOCOL
    TCP on 127.0.0.1:CP, any number of clients. One request per line, one
    response per line: "ok ..." or "err <reason>". A client's requests are
    answered in order. A command has taken effect BEFORE its "ok" is sent
    (held bytes are already written to the kernel on "unhold", a reset socket
    is already closed, ...), so tests never need to sleep.

    Connections get a global id C = 1, 2, 3, ... in accept order.
    TARGET is one of
        L        listener L: every current connection AND every future one
                 (the setting is remembered by the listener until changed/heal)
        L:C      connection C (accepted on listener L)
        L:next   the next connection accepted on L, and only it
        *        every listener (like L, for all of them)
    DIR is up (client -> redis), down (redis -> client) or both (default).

    ping                                  -> ok pong
    accepted [L]                          -> ok N   connections accepted so far (on L)
    conns [L]                             -> ok L:C:state:up_bytes:down_bytes:held_up:held_down ...
        One word per connection that is not fully closed. state is
        connecting (upstream not connected yet, e.g. slow-accept), open,
        detached (client side closed by detach, upstream still open),
        closing (an EOF is on its way through). up_bytes/down_bytes count
        bytes RECEIVED from the client / from redis; held_* are bytes
        currently held.
    delay TARGET MS [DIR]                 -> ok
        Every chunk read afterwards is forwarded MS ms after it was read,
        order preserved. MS = 0 turns it off.
    hold TARGET [DIR]                     -> ok
        Stop forwarding; bytes (and an EOF) are buffered in order, including
        chunks already waiting out a delay.
    unhold TARGET [DIR]                   -> ok
        Forward the held bytes in order (to the kernel before the ok when no
        delay is set) and resume normal forwarding.
    hold-match TARGET DIR HEX [COUNT]     -> ok
        Arm a trigger: the first chunk in DIR whose bytes contain the bytes
        HEX (hex-encoded, e.g. 5345540d0a for "SET\\r\\n"; matched across
        chunk boundaries) and everything after it in that direction of that
        connection are held, starting at (and including) the start of the
        chunk that completes the match. COUNT (default 1) = how many matches
        (connections) the trigger arms; with L:C or L:next it is always 1.
        DIR both: whichever direction matches first is held.
    inject TARGET DIR HEX                 -> ok | err no connection
        DIR up or down: the bytes HEX (hex-encoded) go to that direction's
        receiver of each current connection of TARGET (L:C, L, *) as if the
        sender had sent them next: in front of bytes held there (so "hold",
        "wait-held", "inject", "unhold" puts them before a held reply), else
        right away. For a broken or hostile node's bytes.
    rewrite TARGET DIR FROM_HEX TO_HEX    -> ok
        Every chunk read afterwards in DIR (up, down or both) has each
        occurrence of the bytes FROM_HEX replaced by TO_HEX, of the same
        length (so RESP lengths stay right), before anything else sees it.
        Only matches inside one chunk are replaced. Makes a real server look
        like another version (INFO's redis_version) or refuse a syntax.
        Removed by heal.
    disarm TARGET                         -> ok
        Remove armed hold-match triggers (with L or *: also the pending
        L:next actions of those listeners).
    wait-held TARGET DIR NBYTES TIMEOUT_MS -> ok | err timeout
        Returns once at least NBYTES are held in DIR (both: up+down) on one
        connection matching TARGET (not L:next).
    wait-conns L N TIMEOUT_MS             -> ok | err timeout
        Returns once listener L has accepted at least N connections in total.
    wait-closed TARGET TIMEOUT_MS          -> ok | err timeout
        Returns once every connection matching TARGET (L:C, L, *) is fully
        closed on both sides (at once for an L:C already closed).
    detach TARGET                         -> ok
        Close the CLIENT side (plain close: FIN) but keep the upstream side
        open with whatever is held: it is delivered on a later unhold/heal,
        and the upstream is then closed (half-close after the bytes; redis
        executes them, then closes). Nothing held: the upstream gets its EOF
        right away (after bytes still waiting out a delay). Reproduces "the client dropped a slow connection but its
        request still reaches the server later".
    reset TARGET                          -> ok
        Abort the client side with RST (SO_LINGER 0) and close the upstream,
        dropping held bytes.
    reset-after TARGET DIR N              -> ok
        Forward N more bytes in DIR (up or down; a chunk is split), then RST
        the client side and close the upstream: a reset mid-request or
        mid-reply. With L, every future connection of L gets it too (N bytes
        counted per connection).
    partition TARGET on|off               -> ok
        Black hole: bytes in both directions are silently dropped (not
        buffered) on existing and new connections; new connections are still
        accepted (connect succeeds, nothing ever answers). An EOF is not
        dropped but waits for the partition to end. off: new bytes flow again.
        With L:C / L:next only that connection.
        NOTE: bytes dropped mid-stream leave a connection that was in use
        desynchronised (a request without its reply); real TCP would instead
        retransmit them when the network heals. Clients must abandon such
        connections. For a partition that TCP survives (everything arrives
        late, in order) use "hold L" then "unhold L" / "heal".
    slow-accept L MS                      -> ok
        Connections accepted on L afterwards are accepted at once, but the
        upstream connect and all forwarding start MS ms later (the client's
        bytes wait in order). MS = 0 turns it off.
    blackhole-accept L on|off             -> ok
        Connections accepted on L while on are black-holed for their whole
        life (until heal); existing ones are unaffected.
    close-upstream TARGET                 -> ok
        Close the upstream side (as if redis closed the connection): pending
        bytes towards the client are delivered, then the client gets a FIN.
    heal [L]                              -> ok
        Clear every fault (of L, or everywhere): unhold everything, delays 0,
        partitions/blackholes off, slow-accept 0 (waiting connections start
        now), reset-after and hold-match triggers removed, L:next actions
        dropped. Detached connections get their held bytes delivered, then
        their upstream is closed.
    stats                                 -> ok conns=N resets=N held_bytes=N delayed_chunks=N dropped_bytes=N live=N
        conns = accepted in total, live = not fully closed, resets = client
        sides reset, held_bytes = held now, delayed_chunks = chunks that
        waited out a delay, dropped_bytes = bytes dropped by partitions and
        blackholes (and by resets, of held data).

USE FROM TESTS
    C (cmocka):  tests/harness/faultproxy.h -- fp_start(ports, n) / fp_front(rc),
                 fp_uris(p), fp_cmd(p, reply, size, "hold 0:%d up", c), fp_stop(p).
    Python:      from faultproxy import FaultProxy   (tests/harness on sys.path)
                     with FaultProxy(["127.0.0.1:%d" % port]) as fp:
                         uri = fp.uris(); fp.cmd("delay 0 200")
    PHP / shell: start "python3 faultproxy.py --target ... " with its stdin on a
                 pipe you keep open (it exits at EOF), read the ready line, then
                     python3 tests/harness/faultproxy.py ctl CP 'partition 0 on'
                 (prints the response; exit status 1 on err), or talk to
                 127.0.0.1:CP directly (fsockopen, bash /dev/tcp).
"""

import asyncio
import collections
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

DIRS = ("up", "down")
EOF = object()          # in-band end-of-stream marker in a pipe's queue
MAX_PATTERN = 4096


class CmdError(Exception):
    pass


class FaultProxyError(RuntimeError):
    """A control command answered err."""


# --------------------------------------------------------------------------
# the proxy


class Stats:
    def __init__(self):
        self.conns = 0
        self.resets = 0
        self.delayed_chunks = 0
        self.dropped_bytes = 0


class MatchRule:
    def __init__(self, dirs, pattern, count):
        self.dirs = dirs
        self.pattern = pattern
        self.count = count


class Pipe:
    """One direction of one connection: read side -> policy -> write side."""

    def __init__(self, conn, d):
        self.conn = conn
        self.d = d
        self.held = False
        self.heldbuf = collections.deque()
        self.held_bytes = 0
        self.queue = collections.deque()  # (due monotonic time, bytes | EOF)
        self.last_due = 0.0
        self.delay_ms = 0
        self.reset_after = None
        self.rules = []                    # conn-specific MatchRules
        self.rewrites = []                 # (from, to) byte pairs
        self.tail = b""
        self.rx = 0
        self.tx = 0
        self.timer = None
        self.eof_done = False

    @property
    def proxy(self):
        return self.conn.proxy

    def dst(self):
        """The transport this pipe writes to, None when not connected yet,
        False when gone."""
        c = self.conn
        if self.d == "up":
            if c.up_state == "pending":
                return None
            return c.upstream if c.up_state == "open" else False
        return c.client if c.client_state == "open" else False

    def blackholed(self):
        return self.conn.blackholed or self.conn.listener.partition

    def feed(self, data):
        self.rx += len(data)
        for old, new in self.rewrites:
            data = data.replace(old, new)
        if self.blackholed():
            self.proxy.stats.dropped_bytes += len(data)
            return
        if not self.held and self.check_match(data):
            self.held = True
        self.tail = (self.tail + data)[-MAX_PATTERN:]
        if self.held:
            self.heldbuf.append(data)
            self.held_bytes += len(data)
            self.proxy.changed()
            return
        self.enqueue(data)
        self.pump()

    def check_match(self, data):
        rules = [r for r in self.rules if self.d in r.dirs]
        rules += [r for r in self.conn.listener.rules if self.d in r.dirs and r.count > 0]
        if not rules:
            return False
        buf = self.tail + data
        for r in rules:
            start = max(0, len(self.tail) - len(r.pattern) + 1)
            if buf.find(r.pattern, start) >= 0:
                r.count -= 1
                if r in self.rules:
                    self.rules.remove(r)
                if r.count <= 0 and r in self.conn.listener.rules:
                    self.conn.listener.rules.remove(r)
                # A conn-specific rule armed for both directions is spent.
                for p in self.conn.pipes.values():
                    if r in p.rules:
                        p.rules.remove(r)
                return True
        return False

    def feed_eof(self):
        if self.held:
            self.heldbuf.append(EOF)
        else:
            self.enqueue(EOF)
            self.pump()

    def enqueue(self, item):
        now = time.monotonic()
        due = now
        if self.delay_ms > 0 and item is not EOF:
            due = now + self.delay_ms / 1000.0
            self.proxy.stats.delayed_chunks += 1
        due = max(due, self.last_due)
        self.last_due = due
        self.queue.append((due, item))

    def hold(self):
        if self.held:
            return
        self.held = True
        # Chunks still waiting out a delay are not forwarded either.
        items = [item for _, item in self.queue]
        self.queue.clear()
        if self.timer:
            self.timer.cancel()
            self.timer = None
        for item in reversed(items):
            self.heldbuf.appendleft(item)
            if item is not EOF:
                self.held_bytes += len(item)
        self.proxy.changed()

    def unhold(self):
        if not self.held:
            return
        self.held = False
        items = list(self.heldbuf)
        self.heldbuf.clear()
        self.held_bytes = 0
        for item in items:
            self.enqueue(item)
        self.pump()
        self.proxy.changed()

    def inject(self, data):
        """Bytes of our own, as if they came next from the sender: in front
        of what is held (a reply held back is then preceded by them), else
        forwarded now."""
        if self.held:
            self.heldbuf.appendleft(data)
            self.held_bytes += len(data)
        else:
            self.enqueue(data)
            self.pump()

    def drop_held(self):
        for item in self.heldbuf:
            if item is not EOF:
                self.proxy.stats.dropped_bytes += len(item)
        self.heldbuf.clear()
        self.held_bytes = 0
        self.queue.clear()
        if self.timer:
            self.timer.cancel()
            self.timer = None

    def pump(self):
        if self.timer:
            self.timer.cancel()
            self.timer = None
        loop = self.proxy.loop
        while self.queue:
            dst = self.dst()
            if dst is None:
                return              # upstream not connected yet
            due, item = self.queue[0]
            now = time.monotonic()
            if due > now:
                self.timer = loop.call_at(loop.time() + (due - now), self.pump)
                return
            if item is EOF:
                if self.blackholed() and dst is not False:
                    return          # waits for the partition to end
                self.queue.popleft()
                self.eof_done = True
                self.conn.pipe_eof(self.d)
                return
            self.queue.popleft()
            if dst is False:
                continue            # the other side is gone
            if self.blackholed():
                self.proxy.stats.dropped_bytes += len(item)
                continue
            if self.reset_after is not None and len(item) >= self.reset_after:
                part = item[:self.reset_after]
                self.reset_after = None
                if part:
                    dst.write(part)
                    self.tx += len(part)
                self.queue.clear()
                self.conn.reset_when_flushed(dst)
                return
            if self.reset_after is not None:
                self.reset_after -= len(item)
            dst.write(item)
            self.tx += len(item)


class Conn:
    def __init__(self, proxy, listener, cid):
        self.proxy = proxy
        self.listener = listener
        self.cid = cid
        self.client = None
        self.upstream = None
        self.client_state = "open"     # open | closed
        self.up_state = "pending"      # pending | open | closed
        self.blackholed = False
        self.detached = False
        self.resetting = False
        self.pipes = {"up": Pipe(self, "up"), "down": Pipe(self, "down")}
        self.start_handle = None

    # --- lifecycle

    def state(self):
        if self.detached:
            return "detached"
        if self.up_state == "pending":
            return "connecting"
        if self.pipes["up"].eof_done or self.pipes["down"].eof_done:
            return "closing"
        return "open"

    def start_upstream(self):
        self.start_handle = None
        if self.up_state != "pending" or self.resetting:
            return
        host, port = self.listener.target
        self.proxy.loop.create_task(self._connect(host, port))

    async def _connect(self, host, port):
        try:
            await self.proxy.loop.create_connection(lambda: UpstreamProto(self), host, port)
        except OSError:
            self.up_state = "closed"
            # Nothing to talk to: close the client like a dead server would.
            self.pipes["up"].drop_held()
            self.pipes["down"].feed_eof()
            self.maybe_done()

    def upstream_made(self, transport):
        if self.resetting or self.up_state != "pending":
            transport.abort()
            return
        self.upstream = transport
        self.up_state = "open"
        self.pipes["up"].pump()
        self.maybe_done()

    def pipe_eof(self, d):
        """An EOF reached the write side of pipe d."""
        if d == "up":
            if self.up_state == "open":
                try:
                    if self.upstream.can_write_eof():
                        self.upstream.write_eof()
                    else:
                        self.upstream.close()
                except OSError:
                    self.upstream.close()
            elif self.up_state == "pending":
                self.up_state = "closed"
                if self.start_handle:
                    self.start_handle.cancel()
                    self.start_handle = None
                self.pipes["down"].feed_eof()
        else:
            if self.client_state == "open":
                self.client.close()
                self.client_state = "closed"
            if self.up_state == "open" and self.upstream is not None:
                self.upstream.close()
        self.maybe_done()

    def client_eof(self):
        self.pipes["up"].feed_eof()

    def client_lost(self):
        was_open = self.client_state == "open"
        self.client_state = "closed"
        if was_open and not self.pipes["up"].eof_done:
            # Unless an EOF was already queued (client_eof) queue one now.
            if not any(item is EOF for item in self.pipes["up"].heldbuf) and \
               not any(item is EOF for _, item in self.pipes["up"].queue):
                self.pipes["up"].feed_eof()
        self.maybe_done()

    def upstream_eof(self):
        self.pipes["down"].feed_eof()

    def upstream_lost(self):
        was = self.up_state
        self.up_state = "closed"
        if was == "open" and not self.pipes["down"].eof_done:
            if not any(item is EOF for item in self.pipes["down"].heldbuf) and \
               not any(item is EOF for _, item in self.pipes["down"].queue):
                self.pipes["down"].feed_eof()
        self.maybe_done()

    def maybe_done(self):
        if self.client_state == "closed" and self.up_state == "closed":
            for p in self.pipes.values():
                if p.timer:
                    p.timer.cancel()
                    p.timer = None
            self.listener.conns.pop(self.cid, None)
        self.proxy.changed()

    # --- faults

    def detach(self):
        if self.client_state != "open":
            return
        self.detached = True
        sock = self.client.get_extra_info("socket")
        try:
            sock.shutdown(socket.SHUT_RDWR)     # FIN now, before the ok
        except OSError:
            pass
        self.client.close()
        self.client_state = "closed"
        up = self.pipes["up"]
        if not up.eof_done:
            up.feed_eof()
        self.pipes["down"].drop_held()
        self.maybe_done()

    def reset(self):
        if self.resetting:
            return
        self.resetting = True
        self.proxy.stats.resets += 1
        for p in self.pipes.values():
            p.drop_held()
            p.held = False
        if self.client_state == "open":
            sock = self.client.get_extra_info("socket")
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            self.client.abort()
            self.client_state = "closed"
        if self.start_handle:
            self.start_handle.cancel()
            self.start_handle = None
        if self.up_state == "open":
            self.upstream.abort()
        self.up_state = "closed"
        self.maybe_done()

    def reset_when_flushed(self, dst, deadline=None):
        """reset-after: RST once the bytes written to dst are in the kernel."""
        loop = self.proxy.loop
        if deadline is None:
            deadline = loop.time() + 2.0
        if dst.get_write_buffer_size() > 0 and loop.time() < deadline and not dst.is_closing():
            loop.call_later(0.001, self.reset_when_flushed, dst, deadline)
            return
        self.reset()

    def close_upstream(self):
        if self.up_state == "open":
            self.upstream.close()
        elif self.up_state == "pending":
            self.up_state = "closed"
            if self.start_handle:
                self.start_handle.cancel()
                self.start_handle = None
            self.pipes["down"].feed_eof()
        self.maybe_done()

    def heal(self):
        self.blackholed = False
        for p in self.pipes.values():
            p.delay_ms = 0
            p.reset_after = None
            p.rules = []
            p.rewrites = []
            p.unhold()
            p.pump()
        if self.up_state == "pending" and self.start_handle:
            self.start_handle.cancel()
            self.start_handle = None
            self.start_upstream()


class ClientProto(asyncio.Protocol):
    def __init__(self, proxy, listener):
        self.proxy = proxy
        self.listener = listener
        self.conn = None

    def connection_made(self, transport):
        self.conn = self.proxy.accept(self.listener, transport)

    def data_received(self, data):
        if self.conn.client_state == "open":
            self.conn.pipes["up"].feed(data)

    def eof_received(self):
        self.conn.client_eof()
        return True         # half-close: replies may still go to the client

    def connection_lost(self, exc):
        self.conn.client_lost()

    # Flow control: a client that does not read slows the reading from redis.
    def pause_writing(self):
        if self.conn.up_state == "open":
            self.conn.upstream.pause_reading()

    def resume_writing(self):
        if self.conn.up_state == "open":
            self.conn.upstream.resume_reading()


class UpstreamProto(asyncio.Protocol):
    def __init__(self, conn):
        self.conn = conn

    def connection_made(self, transport):
        self.conn.upstream_made(transport)

    def data_received(self, data):
        if self.conn.up_state == "open":
            self.conn.pipes["down"].feed(data)

    def eof_received(self):
        self.conn.upstream_eof()
        return True

    def connection_lost(self, exc):
        if self.conn.upstream is not None:
            self.conn.upstream_lost()

    def pause_writing(self):
        if self.conn.client_state == "open":
            self.conn.client.pause_reading()

    def resume_writing(self):
        if self.conn.client_state == "open":
            self.conn.client.resume_reading()


class Listener:
    def __init__(self, index, target):
        self.index = index
        self.target = target
        self.server = None
        self.port = 0
        self.conns = {}              # cid -> Conn (not fully closed)
        self.accepted = 0
        # sticky policy for future connections
        self.delay = {"up": 0, "down": 0}
        self.hold = {"up": False, "down": False}
        self.reset_after = {"up": None, "down": None}
        self.rewrites = {"up": [], "down": []}
        self.rules = []
        self.partition = False
        self.slow_accept_ms = 0
        self.blackhole_accept = False
        self.next_actions = []       # callables(conn) for L:next

    def clear(self):
        self.delay = {"up": 0, "down": 0}
        self.hold = {"up": False, "down": False}
        self.reset_after = {"up": None, "down": None}
        self.rewrites = {"up": [], "down": []}
        self.rules = []
        self.partition = False
        self.slow_accept_ms = 0
        self.blackhole_accept = False
        self.next_actions = []


class Waiter:
    def __init__(self, pred, fut):
        self.pred = pred
        self.fut = fut


class Proxy:
    def __init__(self, loop, targets):
        self.loop = loop
        self.listeners = [Listener(i, t) for i, t in enumerate(targets)]
        self.next_cid = 1
        self.stats = Stats()
        self.waiters = []
        self.control = None
        self.control_port = 0
        self.control_clients = set()

    # --- plumbing

    async def start(self):
        for lst in self.listeners:
            lst.server = await self.loop.create_server(
                lambda lst=lst: ClientProto(self, lst), "127.0.0.1", 0, reuse_address=True)
            lst.port = lst.server.sockets[0].getsockname()[1]
        self.control = await asyncio.start_server(self.control_client, "127.0.0.1", 0)
        self.control_port = self.control.sockets[0].getsockname()[1]

    def accept(self, lst, transport):
        cid = self.next_cid
        self.next_cid += 1
        conn = Conn(self, lst, cid)
        conn.client = transport
        lst.conns[cid] = conn
        lst.accepted += 1
        self.stats.conns += 1
        for d in DIRS:
            conn.pipes[d].delay_ms = lst.delay[d]
            conn.pipes[d].held = lst.hold[d]
            conn.pipes[d].reset_after = lst.reset_after[d]
            conn.pipes[d].rewrites = list(lst.rewrites[d])
        if lst.blackhole_accept:
            conn.blackholed = True
        actions, lst.next_actions = lst.next_actions, []
        for act in actions:
            act(conn)
        if not conn.resetting:
            if lst.slow_accept_ms > 0:
                conn.start_handle = self.loop.call_later(lst.slow_accept_ms / 1000.0,
                                                         conn.start_upstream)
            else:
                conn.start_upstream()
        self.changed()
        return conn

    def changed(self):
        if not self.waiters:
            return
        keep = []
        for w in self.waiters:
            if w.fut.done():
                continue
            try:
                ok = w.pred()
            except Exception as e:   # pragma: no cover - defensive
                w.fut.set_exception(e)
                continue
            if ok:
                w.fut.set_result(True)
            else:
                keep.append(w)
        self.waiters = keep

    async def wait_for(self, pred, timeout_ms):
        if pred():
            return True
        fut = self.loop.create_future()
        self.waiters.append(Waiter(pred, fut))
        try:
            await asyncio.wait_for(fut, timeout_ms / 1000.0)
            return True
        except asyncio.TimeoutError:
            return False

    def close_all(self):
        for lst in self.listeners:
            if lst.server:
                lst.server.close()
            for conn in list(lst.conns.values()):
                for p in conn.pipes.values():
                    if p.timer:
                        p.timer.cancel()
                if conn.client is not None:
                    conn.client.abort()
                if conn.upstream is not None:
                    conn.upstream.abort()
                if conn.start_handle:
                    conn.start_handle.cancel()
        if self.control:
            self.control.close()
        for w in self.control_clients:
            w.close()

    # --- targets

    def listener(self, s):
        try:
            i = int(s)
        except ValueError:
            raise CmdError("bad listener %r" % s)
        if i < 0 or i >= len(self.listeners):
            raise CmdError("no listener %d" % i)
        return self.listeners[i]

    def parse_target(self, s):
        """-> (kind, listeners, conn): kind in listener | conn | next."""
        if s == "*":
            return "listener", list(self.listeners), None
        if ":" in s:
            ls, cs = s.split(":", 1)
            lst = self.listener(ls)
            if cs == "next":
                return "next", [lst], None
            try:
                cid = int(cs)
            except ValueError:
                raise CmdError("bad target %r" % s)
            conn = lst.conns.get(cid)
            if conn is None:
                raise CmdError("no connection %s" % s)
            return "conn", [lst], conn
        return "listener", [self.listener(s)], None

    def apply(self, target, on_conn, on_listener=None):
        """Run on_conn(conn) on the target's connections; on_listener(lst)
        for listener targets (sticky policy); for L:next queue on_conn."""
        kind, lsts, conn = self.parse_target(target)
        if kind == "conn":
            on_conn(conn)
        elif kind == "next":
            lsts[0].next_actions.append(on_conn)
        else:
            for lst in lsts:
                if on_listener:
                    on_listener(lst)
                for c in list(lst.conns.values()):
                    on_conn(c)
        self.changed()

    def conns_of(self, target):
        kind, lsts, conn = self.parse_target(target)
        if kind == "next":
            raise CmdError("L:next is not allowed here")
        if kind == "conn":
            return [conn]
        return [c for lst in lsts for c in lst.conns.values()]

    # --- control

    async def control_client(self, reader, writer):
        self.control_clients.add(writer)
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                text = line.decode("utf-8", "replace").strip()
                if not text:
                    continue
                try:
                    resp = await self.command(text)
                    resp = "ok" + (" " + resp if resp else "")
                except CmdError as e:
                    resp = "err " + str(e)
                except Exception as e:     # a bug here must not kill the proxy
                    resp = "err internal %s: %s" % (type(e).__name__, e)
                # Let callbacks scheduled by the command (socket closes of an
                # abort/close) run before the answer goes out.
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                writer.write((resp.replace("\n", " ") + "\n").encode())
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self.control_clients.discard(writer)
            writer.close()

    @staticmethod
    def dirs(s):
        if s is None or s == "both":
            return DIRS
        if s in DIRS:
            return (s,)
        raise CmdError("bad direction %r" % s)

    @staticmethod
    def num(s, what):
        try:
            v = int(s)
        except (TypeError, ValueError):
            raise CmdError("bad %s %r" % (what, s))
        if v < 0:
            raise CmdError("bad %s %r" % (what, s))
        return v

    @staticmethod
    def onoff(s):
        if s not in ("on", "off"):
            raise CmdError("expected on|off, got %r" % s)
        return s == "on"

    async def command(self, text):
        words = text.split()
        name, args = words[0], words[1:]
        fn = getattr(self, "cmd_" + name.replace("-", "_"), None)
        if fn is None:
            raise CmdError("unknown command %s" % name)
        r = fn(*args) if not asyncio.iscoroutinefunction(fn) else await fn(*args)
        return r or ""

    def argc(self, args, lo, hi):
        if not lo <= len(args) <= hi:
            raise CmdError("wrong number of arguments")

    def cmd_ping(self, *args):
        return "pong"

    def cmd_accepted(self, *args):
        self.argc(args, 0, 1)
        lsts = [self.listener(args[0])] if args else self.listeners
        return str(sum(lst.accepted for lst in lsts))

    def cmd_conns(self, *args):
        self.argc(args, 0, 1)
        lsts = [self.listener(args[0])] if args else self.listeners
        out = []
        for lst in lsts:
            for c in sorted(lst.conns.values(), key=lambda c: c.cid):
                up, down = c.pipes["up"], c.pipes["down"]
                out.append("%d:%d:%s:%d:%d:%d:%d" % (lst.index, c.cid, c.state(), up.rx, down.rx,
                                                     up.held_bytes, down.held_bytes))
        return " ".join(out)

    def cmd_delay(self, *args):
        self.argc(args, 2, 3)
        ms = self.num(args[1], "ms")
        dirs = self.dirs(args[2] if len(args) > 2 else None)

        def on_conn(c):
            for d in dirs:
                c.pipes[d].delay_ms = ms

        def on_lst(lst):
            for d in dirs:
                lst.delay[d] = ms
        self.apply(args[0], on_conn, on_lst)

    def cmd_hold(self, *args):
        self.argc(args, 1, 2)
        dirs = self.dirs(args[1] if len(args) > 1 else None)

        def on_conn(c):
            for d in dirs:
                c.pipes[d].hold()

        def on_lst(lst):
            for d in dirs:
                lst.hold[d] = True
        self.apply(args[0], on_conn, on_lst)

    def cmd_unhold(self, *args):
        self.argc(args, 1, 2)
        dirs = self.dirs(args[1] if len(args) > 1 else None)

        def on_conn(c):
            for d in dirs:
                c.pipes[d].unhold()

        def on_lst(lst):
            for d in dirs:
                lst.hold[d] = False
            # unholding a listener also ends its L:next holds not yet used
        self.apply(args[0], on_conn, on_lst)

    def cmd_hold_match(self, *args):
        self.argc(args, 3, 4)
        dirs = self.dirs(args[1])
        try:
            pattern = bytes.fromhex(args[2])
        except ValueError:
            raise CmdError("bad hex %r" % args[2])
        if not pattern or len(pattern) > MAX_PATTERN:
            raise CmdError("pattern length must be 1..%d" % MAX_PATTERN)
        count = self.num(args[3], "count") if len(args) > 3 else 1
        kind, lsts, conn = self.parse_target(args[0])
        if kind == "listener":
            for lst in lsts:
                lst.rules.append(MatchRule(dirs, pattern, count))
            return
        rule = MatchRule(dirs, pattern, 1)

        def on_conn(c):
            for d in dirs:
                c.pipes[d].rules.append(rule)
        self.apply(args[0], on_conn)

    def cmd_rewrite(self, *args):
        self.argc(args, 4, 4)
        dirs = self.dirs(args[1])
        try:
            old, new = bytes.fromhex(args[2]), bytes.fromhex(args[3])
        except ValueError:
            raise CmdError("bad hex")
        if not old or len(old) != len(new):
            raise CmdError("FROM and TO must be non-empty and of the same length")

        def on_conn(c):
            for d in dirs:
                c.pipes[d].rewrites.append((old, new))

        def on_lst(lst):
            for d in dirs:
                lst.rewrites[d].append((old, new))
        self.apply(args[0], on_conn, on_lst)

    def cmd_inject(self, *args):
        self.argc(args, 3, 3)
        if args[1] not in DIRS:
            raise CmdError("inject needs up or down")
        try:
            data = bytes.fromhex(args[2])
        except ValueError:
            raise CmdError("bad hex %r" % args[2])
        if not data:
            raise CmdError("nothing to inject")
        conns = self.conns_of(args[0])
        if not conns:
            raise CmdError("no connection on %s" % args[0])
        for c in conns:
            c.pipes[args[1]].inject(data)
        self.changed()

    def cmd_disarm(self, *args):
        self.argc(args, 1, 1)

        def on_conn(c):
            for p in c.pipes.values():
                p.rules = []

        def on_lst(lst):
            lst.rules = []
            lst.next_actions = []
        self.apply(args[0], on_conn, on_lst)

    async def cmd_wait_held(self, *args):
        self.argc(args, 4, 4)
        dirs = self.dirs(args[1])
        n = self.num(args[2], "nbytes")
        timeout = self.num(args[3], "timeout")
        target = args[0]
        self.conns_of(target)       # validates

        def pred():
            try:
                conns = self.conns_of(target)
            except CmdError:
                return False
            return any(sum(c.pipes[d].held_bytes for d in dirs) >= n for c in conns)
        if not await self.wait_for(pred, timeout):
            raise CmdError("timeout")

    async def cmd_wait_conns(self, *args):
        self.argc(args, 3, 3)
        lst = self.listener(args[0])
        n = self.num(args[1], "count")
        timeout = self.num(args[2], "timeout")
        if not await self.wait_for(lambda: lst.accepted >= n, timeout):
            raise CmdError("timeout")

    async def cmd_wait_closed(self, *args):
        self.argc(args, 2, 2)
        timeout = self.num(args[1], "timeout")
        target = args[0]
        if ":" in target and not target.endswith(":next"):
            ls, cs = target.split(":", 1)
            lst = self.listener(ls)
            cid = self.num(cs, "connection")
            if cid >= self.next_cid:
                raise CmdError("no connection %s" % target)
            if not await self.wait_for(lambda: cid not in lst.conns, timeout):
                raise CmdError("timeout")
            return
        kind, lsts, conn = self.parse_target(target)
        if kind == "next":
            raise CmdError("L:next is not allowed here")
        if kind == "conn":
            def pred():
                return conn.cid not in conn.listener.conns
        else:
            def pred():
                return all(not lst.conns for lst in lsts)
        if not await self.wait_for(pred, timeout):
            raise CmdError("timeout")

    def cmd_detach(self, *args):
        self.argc(args, 1, 1)
        self.apply(args[0], lambda c: c.detach())

    def cmd_reset(self, *args):
        self.argc(args, 1, 1)
        self.apply(args[0], lambda c: c.reset())

    def cmd_close_upstream(self, *args):
        self.argc(args, 1, 1)
        self.apply(args[0], lambda c: c.close_upstream())

    def cmd_reset_after(self, *args):
        self.argc(args, 3, 3)
        if args[1] not in DIRS:
            raise CmdError("reset-after needs up or down")
        d = args[1]
        n = self.num(args[2], "nbytes")

        def on_conn(c):
            p = c.pipes[d]
            p.reset_after = n
            if n == 0 or p.queue:
                p.pump()
            if n == 0 and not c.resetting:
                c.reset()

        def on_lst(lst):
            lst.reset_after[d] = n
        self.apply(args[0], on_conn, on_lst)

    def cmd_partition(self, *args):
        self.argc(args, 2, 2)
        on = self.onoff(args[1])

        def on_conn(c):
            c.blackholed = on
            for p in c.pipes.values():
                p.pump()

        def on_lst(lst):
            lst.partition = on
        kind, lsts, conn = self.parse_target(args[0])
        if kind == "listener":
            for lst in lsts:
                lst.partition = on
                for c in list(lst.conns.values()):
                    for p in c.pipes.values():
                        p.pump()
            self.changed()
        else:
            self.apply(args[0], on_conn)

    def cmd_slow_accept(self, *args):
        self.argc(args, 2, 2)
        ms = self.num(args[1], "ms")
        kind, lsts, _ = self.parse_target(args[0])
        if kind != "listener":
            raise CmdError("slow-accept takes L or *")
        for lst in lsts:
            lst.slow_accept_ms = ms

    def cmd_blackhole_accept(self, *args):
        self.argc(args, 2, 2)
        on = self.onoff(args[1])
        kind, lsts, _ = self.parse_target(args[0])
        if kind != "listener":
            raise CmdError("blackhole-accept takes L or *")
        for lst in lsts:
            lst.blackhole_accept = on

    def cmd_heal(self, *args):
        self.argc(args, 0, 1)
        lsts = [self.listener(args[0])] if args else self.listeners
        for lst in lsts:
            lst.clear()
            for c in list(lst.conns.values()):
                c.heal()
        self.changed()

    def cmd_stats(self, *args):
        s = self.stats
        live = sum(len(lst.conns) for lst in self.listeners)
        held = sum(p.held_bytes for lst in self.listeners for c in lst.conns.values()
                   for p in c.pipes.values())
        return "conns=%d resets=%d held_bytes=%d delayed_chunks=%d dropped_bytes=%d live=%d" % (
            s.conns, s.resets, held, s.delayed_chunks, s.dropped_bytes, live)


def parse_hostport(s):
    host, sep, port = s.rpartition(":")
    if not sep or not host:
        raise ValueError("target must be HOST:PORT, got %r" % s)
    return host.strip("[]"), int(port)


async def serve(targets):
    loop = asyncio.get_running_loop()
    proxy = Proxy(loop, targets)
    await proxy.start()
    stop = loop.create_future()

    def request_stop(*_):
        if not stop.done():
            stop.set_result(None)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, request_stop)

    stdin_fd = sys.stdin.fileno() if sys.stdin else -1
    if stdin_fd >= 0:
        def on_stdin():
            try:
                data = os.read(stdin_fd, 4096)
            except OSError:
                data = b""
            if not data:
                loop.remove_reader(stdin_fd)
                request_stop()
        try:
            loop.add_reader(stdin_fd, on_stdin)
        except (OSError, ValueError, PermissionError):
            # stdin is a regular file or /dev/null: a file's EOF is immediate
            # and means nothing; rely on signals then.
            pass

    sys.stdout.write("ready control=%d listen=%s\n" % (
        proxy.control_port, ",".join(str(lst.port) for lst in proxy.listeners)))
    sys.stdout.flush()
    await stop
    proxy.close_all()
    await asyncio.sleep(0)


def ctl(port, command, timeout=30.0):
    """One command over a fresh control connection; returns the response."""
    with socket.create_connection(("127.0.0.1", int(port)), timeout=timeout) as s:
        s.sendall(command.encode() + b"\n")
        f = s.makefile("rb")
        line = f.readline()
    if not line:
        raise FaultProxyError("control connection closed")
    return line.decode().rstrip("\r\n")


# --------------------------------------------------------------------------
# Python API


class FaultProxy:
    """A faultproxy.py process in front of `targets` ("host:port" or port ints).

        with FaultProxy([6379, 6380]) as fp:
            fp.ports            # [LP0, LP1]
            fp.uris()           # "redis://127.0.0.1:LP0,redis://127.0.0.1:LP1"
            fp.cmd("delay 0 100")   # -> "ok", raises FaultProxyError on err
    """

    def __init__(self, targets, start_timeout=15.0):
        args = [sys.executable, os.path.abspath(__file__)]
        for t in targets:
            args += ["--target", t if isinstance(t, str) else "127.0.0.1:%d" % t]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._lock = threading.Lock()
        self._sock = None
        self._file = None
        line = self._read_ready(start_timeout)
        if not line.startswith("ready "):
            self.close()
            raise FaultProxyError("faultproxy did not start: %r" % line)
        fields = dict(w.split("=", 1) for w in line.split()[1:])
        self.control_port = int(fields["control"])
        self.ports = [int(p) for p in fields["listen"].split(",")]

    def _read_ready(self, timeout):
        result = []
        t = threading.Thread(target=lambda: result.append(self.proc.stdout.readline()),
                             daemon=True)
        t.start()
        t.join(timeout)
        if not result:
            self.proc.kill()
            self.proc.wait()
            raise FaultProxyError("faultproxy: no ready line within %.0f s" % timeout)
        return result[0].decode(errors="replace").strip()

    def uris(self, mask=None):
        return ",".join("redis://127.0.0.1:%d" % p for i, p in enumerate(self.ports)
                        if mask is None or mask & (1 << i))

    def cmd(self, line, timeout=60.0):
        with self._lock:
            if self._sock is None:
                self._sock = socket.create_connection(("127.0.0.1", self.control_port))
                self._file = self._sock.makefile("rb")
            self._sock.settimeout(timeout)
            self._sock.sendall(line.encode() + b"\n")
            resp = self._file.readline().decode().rstrip("\r\n")
        if not resp:
            raise FaultProxyError("faultproxy: control connection closed")
        if not resp.startswith("ok"):
            raise FaultProxyError("faultproxy %r: %s" % (line, resp))
        return resp

    def close(self):
        if self._file:
            self._file.close()
            self._file = None
        if self._sock:
            self._sock.close()
            self._sock = None
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def main(argv):
    if len(argv) >= 1 and argv[0] == "ctl":
        if len(argv) != 3:
            sys.stderr.write("usage: faultproxy.py ctl CONTROL_PORT 'command ...'\n")
            return 2
        try:
            resp = ctl(argv[1], argv[2])
        except (OSError, FaultProxyError) as e:
            sys.stderr.write("faultproxy ctl: %s\n" % e)
            return 1
        print(resp)
        return 0 if resp.startswith("ok") else 1
    targets = []
    it = iter(argv)
    for a in it:
        if a == "--target":
            try:
                targets.append(parse_hostport(next(it)))
            except (StopIteration, ValueError) as e:
                sys.stderr.write("faultproxy: %s\n" % e)
                return 2
        elif a.startswith("--target="):
            targets.append(parse_hostport(a.split("=", 1)[1]))
        else:
            sys.stderr.write("usage: faultproxy.py --target HOST:PORT [--target ...]\n"
                             "       faultproxy.py ctl CONTROL_PORT 'command ...'\n")
            return 2
    if not targets:
        sys.stderr.write("faultproxy: at least one --target\n")
        return 2
    asyncio.run(serve(targets))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
