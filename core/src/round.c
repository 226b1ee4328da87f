/* round.c -- one round trip to N nodes in parallel, from one thread.
 *
 * Every node gets its request appended and flushed at once; then a single
 * poll() loop collects the replies, so N nodes cost one round trip, not N.
 * Each node is bounded by its own deadline: the connect timeout when it had
 * to be (re)connected (name lookup included, off this thread), else the
 * command timeout. The caller's `decide` callback may end the round once the
 * outcome is known; the round then returns at once, whatever a slow node's
 * connection is doing.
 *
 * Each connection keeps the replies it owes in a FIFO, in the order the
 * requests were written: a reply is matched to its request there, whether
 * the round that sent it still waits for it or has left it behind.
 *
 * Ordering. Requests carry a tag, the owner's ordering domain (opaque
 * here). The invariant: a request with tag T executes on its node after
 * every earlier request with tag T that can still execute there, so no
 * request left behind touches what a later one of its tag wrote. A
 * request left behind with a tag T (its reply unread) may still
 * execute later, even after its connection was closed (the bytes can sit
 * in a network buffer or a paused server's socket); the owner writes its
 * requests of one tag for that order (protocol.c: a late remove of an
 * earlier attempt would delete a later write with the same tag), so a
 * later request with tag T must not execute before it. So:
 *   - on the same connection, order is TCP's;
 *   - on any other connection, the server-side connection that carries the
 *     earlier requests is first closed with CLIENT KILL ID, and only once
 *     that is confirmed is the new request written: after that, whatever of
 *     the earlier requests has not executed never will. A server that
 *     refuses CLIENT KILL (ACL) makes the node fail for that request.
 * A client id names a connection only on the server incarnation that gave
 * it: ids start again from 1 when redis-server restarts, and a host name, a
 * service address or a NAT can lead to another server. Each connection
 * learns its server's run_id in its handshake (INFO server, pipelined with
 * CLIENT ID: no round trip of its own), and so does each request left
 * behind. A kill is decided once the new connection's handshake is in (one
 * more round trip, only for a connection that has kills to send): it is
 * sent only on the same run_id, where "killed" and "No such client" both
 * mean that connection is closed for good (ids are never reused within an
 * incarnation). On another run_id nothing is killed: the requests left
 * behind can only run on their own server, so they do not hold this
 * request back, and they stay listed: a request of their tag that reaches
 * that server again (a DNS failback) kills them first. Nothing else
 * forgets them (a request held in a network path can arrive arbitrarily
 * late); after a restart they are dead but stay listed, harmless (one
 * small entry each, skipped by every other server). A server that refuses
 * INFO gives no run_id: then the Sentinel endpoint generation stands for
 * the server, as it did before run_ids (a restart or a host name that moves
 * cannot be told apart there). All of this paragraph is per server; a
 * Cluster node's data moves between its masters (a node kind whose
 * keys_move), so there a request left behind on another master is closed
 * there first (nodekind.c cl_clear_first).
 * Requests left behind are listed per transport (distlock__stale, under
 * the transport's own lock t->mu, not the client's c->mu); the list is
 * empty in steady state (but for requests left on a server incarnation not
 * met since), and a counting filter over (node, tag) beside it lets the
 * common path read one atomic counter instead of taking the lock.
 *
 * Sentinel nodes (sentinel.c, nodekind.c). The node's server can change: its cached
 * master carries a generation that changes with the address, and so do the
 * connections and the requests left behind made under it. "Before" is then
 * per server: a request left behind on the old master can only ever run
 * there (its connection id means nothing on the new one, so no CLIENT KILL
 * is sent for it), and what the old master writes after the promotion is
 * discarded when it rejoins as a replica. Back on the same address after a
 * passing error, the generation is the same and the rule above applies.
 * Why a Sentinel node does not go to the old master first, as a Cluster
 * node does (cl_clear_first): its data never moves there while another
 * server is its master. A later request's write reaches the old server
 * only as a replica (replication), where a request left behind answers
 * READONLY;
 * the old server turns replica because the sentinels reconfigure it, and
 * with REPLICAOF they send CLIENT KILL TYPE normal, which closes our
 * connections to it, so nothing left behind on them can run after the
 * demotion, even when that server is promoted again (a failback; and a
 * failback reached under the same run_id kills what is still listed, as
 * above). What it ran before the demotion is replaced by the resync. A
 * Cluster node's data, by contrast, moves between masters that all stay
 * masters (MIGRATE: nobody kills our connections), and one master can be
 * reached by two addresses: there "it can only run there" is no defence.
 * A broken connection, a READONLY reply or a ROLE that is not "master"
 * (asked in the handshake) forgets the master; the call asks the sentinels
 * again, once, within its own budget (follow()).
 *
 * Deadlines. A node's call gets one deadline per round: the connect
 * timeout for the node's first connection, else the command timeout (a
 * connection re-made inside a call spends the call's budget). A MOVED or
 * ASK followed, a re-route to another cluster master, a resend after a
 * broken connection all keep it (start_node's cap), so 5 redirects cost no
 * more than one; a trailing request is a round of its own, bounded the
 * same way. Only
 * a Sentinel node's second lookup (follow()) has a budget of its own. A new
 * connection to a Cluster master gets half of what is left while another
 * master could name the slot's owner instead (cl_open): one that black-holes
 * is then left in time to re-route.
 *
 * Stuck connections. A connection that completed its handshake and then
 * owes replies past its timeout (a NAT or firewall that dropped it: the
 * kernel keeps it for ~15 minutes) is replaced by the next call that needs
 * its node: a new connection, CLIENT KILL ID of the old one, confirmed
 * before the call is written (the second rule above, for whatever the old
 * one carries, whatever its tag; only on the same run_id: on another one
 * its requests stay listed, as above), then the call. If the kill is refused
 * the call is not sent; if it is not answered the call times out unsent.
 * One that never completed its handshake is not replaced (the node does
 * not answer at all): the node fails at once until STALE_CLOSE_US.
 *
 * Layer: 1 transport
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hiredis/sds.h>

#include "conn.h"

/* A connection that owes more replies than this is given up (closed); what
 * it still owes is remembered as orphaned requests. */
#define OWED_MAX 256
/* Connections idle longer than this are checked for a server-side close
 * before use. */
#define IDLE_CHECK_US 200000u
/* A connection that has owed replies this long is given up too: the node
 * may be gone for good (no RST ever comes), and a new connection probes it. */
#define STALE_CLOSE_US 30000000u
/* Replies owed for less than this are not read before the next call is
 * written: they are the stragglers of the round just ended (at quorum), and
 * they come in with the new call's reply, often in the same read. Older
 * ones are read first (drain): a connection that sat between calls has its
 * answers waiting, not overdue. Not reading young ones is what a read
 * finding nothing yet did before, so nothing else changes. */
#define DRAIN_AFTER_US 1000u

/* ------------------------------------------------------------ sending */


/* Write the call now (the connection is ready): one more reply is due. */
static int send_call(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i,
                     const distlock__call *call, int force_eval)
{
    distlock__conn *conn = &cs->conns[i];
    int done = 0;
    /* A server known too old for the call (its handshake's INFO, read
     * before any call is written) gets the fallback in its place: it would
     * only refuse the call, and a round that ends at quorum would leave it
     * refused, without the fallback. Not marked retried: the fallback still
     * gets its own NOSCRIPT retry. Unknown version (INFO refused): the call
     * is tried, and the refusal brings the fallback as before. */
    if (call == r->call && call->fallback && call->fallback_below > 0 &&
        conn->srv_ver > 0 && conn->srv_ver < call->fallback_below) {
        r->fell_back = 1;
        r->call = call = call->fallback;
    }
    if (r->ask && t->kind[i]->before_call && t->kind[i]->before_call(conn) != 0) {
        distlock__node_fail(t, conn, r, i, DISTLOCK_ENOMEM, "out of memory");
        return -1;
    }
    if (distlock__append_call_enc(t, i, conn, r, call, force_eval, cs) != 0) {
        distlock__node_fail(t, conn, r, i, DISTLOCK_ENOMEM, "out of memory");
        return -1;
    }
    r->sent = 1;
    r->deferred = 0;
    r->script = call->script;
    r->wait_n = call->wait_replicas > 0 ? call->wait_replicas : 0;
    r->wait_ms = r->wait_n ? call->wait_ms : 0;
    r->acked = -1;
    if (distlock__stream_write(&conn->stream, &done) != REDIS_OK) {
        distlock__round_broken(t, cs, r, i);
        return -1;
    }
    return 0;
}

/* Server-side ids of connections carrying earlier requests with a call's
 * tag, looked up per call (distlock__stale_find); more of them fail it. */
#define STALE_IDS_MAX 16

/* Before the call: close the server-side connections that carry earlier
 * requests with its tag (see the top of this file). */
static __attribute__((noinline)) int add_kills(distlock__transport *t, distlock__conn *conn,
                                               distlock__result *r, int i)
{
    long long ids[STALE_IDS_MAX];
    int elsewhere;
    const distlock__call *call = r->call;
    /* A client id names a connection only on the server incarnation that
     * gave it: a fresh connection first learns which one it is on (its
     * handshake's INFO server), then the kills are decided (try_send). */
    if (conn->hs_pending > 0 &&
        (r->replaced || (call->tag && distlock__stale_maybe(t, i, call->tag)))) {
        conn->late |= r->replaced;  /* a replacement is late until it answers */
        r->kills_due = 1;
        return 0;
    }
    r->kills_due = 0;
    /* This connection replaces a stuck one (start_node): whatever that one
     * still carries must never run, whatever its tag, so it is killed
     * before the call goes out, and the call waits for the confirmation
     * (a trailing request need not: see below). Only on the same server incarnation
     * (same run_id; without run_ids, the same endpoint state): a client id
     * means nothing on another server, and after a restart it names
     * another client. Elsewhere the stuck connection's requests can only
     * run on their own server: they stay listed, and a call of their tag
     * that reaches that server again kills them first (stale_find). */
    int replaced = r->replaced && (conn->srv_run && r->replaced_run
                                       ? conn->srv_run == r->replaced_run
                                       : conn->ep_state == r->replaced_ep);
    if (replaced) {
        conn->late = 1;
        if (distlock__append_kill(conn, call->trailing ? NULL : r, r->replaced_id, 1) != 0) {
            distlock__node_fail(t, conn, r, i, DISTLOCK_ENOMEM, "out of memory");
            return -1;
        }
        r->pre += !call->trailing;
    }
    if (call->tag == 0 || !distlock__stale_maybe(t, i, call->tag))
        return 0;
    int n = distlock__stale_find(t, i, call->tag, conn, ids, STALE_IDS_MAX, &elsewhere);
    if (n < 0) {
        distlock__result_fail(t, r, i, DISTLOCK_ECONN,
                    "an earlier request for %s may still arrive on a lost connection "
                    "(whose id is unknown): not sent", distlock__subject(call));
        return -1;
    }
    /* Another thread's connection still carries an earlier request of this
     * tag: this request sent here could run before it (and what it
     * writes be removed or changed by it), so this node is skipped for
     * it. A trailing request goes out: its owner accepts the earlier one
     * landing after it (distlock__call.trailing). */
    if ((elsewhere & DISTLOCK__STALE_OPEN) && !call->trailing) {
        distlock__result_fail(t, r, i, DISTLOCK_ECONN,
                    "an earlier request for %s is still on its way on another "
                    "connection: not sent", distlock__subject(call));
        return -1;
    }
    /* A Cluster node: one left behind on another master (listed since
     * start_node looked: another thread's). Not here while clearing: the
     * call is routed again once this master's kills are confirmed, and
     * start_node goes to that other master next. */
    if ((elsewhere & DISTLOCK__STALE_OTHER_MASTER) && !call->trailing && !r->clearing) {
        distlock__result_fail(t, r, i, DISTLOCK_ECONN,
                    "an earlier request for %s is left behind on another master of "
                    "this cluster: not sent", distlock__subject(call));
        return -1;
    }
    /* A trailing request need not wait for the KILLs: whichever runs
     * first, it can only remove what the requests it follows may have
     * written (its owner's word: distlock__call.trailing). */
    for (int k = 0; k < n; k++) {
        if (replaced && ids[k] == r->replaced_id)
            continue;  /* killed above */
        if (distlock__append_kill(conn, call->trailing ? NULL : r, ids[k], 0) != 0) {
            distlock__node_fail(t, conn, r, i, DISTLOCK_ENOMEM, "out of memory");
            return -1;
        }
        r->pre += !call->trailing;
    }
    return 0;
}

/* (inlined: a frame of its own on the deepest stack path costs 32 bytes) */
static inline __attribute__((always_inline)) int try_send(distlock__transport *t,
                                                          distlock__connset *cs,
                                                          distlock__result *r, int i)
{
    distlock__conn *conn = &cs->conns[i];
    if (r->state != DISTLOCK__R_PENDING || !r->deferred || conn->hs_pending != 0)
        return 0;
    /* The handshake is in: now the kills (written by the round's poll
     * loop, which waits for output to go; not here: a write failure's
     * restart would add to the deepest stack path) */
    if (r->kills_due && add_kills(t, conn, r, i) != 0)
        return -1;
    if (r->pre == 0)
        return r->clearing ? t->kind[i]->cleared(t, cs, r, i)
                           : send_call(t, cs, r, i, r->call, 0);
    return 0;
}

/* Take every reply available on node i; r is this round's result for it.
 * Returns 0, or -1 if the node failed or was restarted (r changed). */
static int take_replies(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i)
{
    distlock__conn *conn = &cs->conns[i];
    while (conn->stream.ctx && conn->qlen > 0) {
        void *p = NULL;
        if (redisGetReplyFromReader(conn->stream.ctx, &p) != REDIS_OK) {
            long long big = distlock__reader_refused();
            if (big)
                distlock__node_fail(t, conn, r, i, DISTLOCK_EPROTO,
                                    "protocol error: a reply announced %lld elements (at most %d)",
                                    big, DISTLOCK__REPLY_ELEMENTS_MAX);
            else
                distlock__node_fail(t, conn, r, i, DISTLOCK_EPROTO, "protocol error");
            return -1;
        }
        if (p == NULL)
            return 0;  /* need more bytes */
        redisReply *rep = p;
        distlock__owed o = distlock__q_pop(conn);
        conn->late = 0;  /* it answers */
        int is_err = rep->type == REDIS_REPLY_ERROR;
        switch (o.kind) {
        case DISTLOCK__K_AUTH:
        case DISTLOCK__K_SELECT: {
            conn->hs_pending--;
            if (!is_err)
                break;
            /* Nothing of ours was sent behind it (calls wait for the
             * handshake), so closing here runs nothing as another user.
             * A refused AUTH is named by its first word only: the server's
             * text may quote the password. */
            char why[160];
            if (o.kind == DISTLOCK__K_AUTH)
                distlock__handshake_refusal(rep->str, why, sizeof(why));
            else
                snprintf(why, sizeof(why), "%.*s", distlock__reply_shown_len(rep->str, 120),
                         rep->str);
            distlock__node_fail(t, conn, r, i, DISTLOCK_EPROTO, "%s failed: %s",
                                o.kind == DISTLOCK__K_AUTH ? "authentication" : "SELECT", why);
            freeReplyObject(rep);
            return -1;
        }
        case DISTLOCK__K_ID:
            conn->hs_pending--;
            if (rep->type == REDIS_REPLY_INTEGER)
                conn->srv_id = rep->integer;
            if (distlock__check_peer(t, i, conn) != 0) {
                freeReplyObject(rep);
                distlock__node_fail(t, conn, r, i, DISTLOCK_EINVAL, "the same server as another node");
                return -1;
            }
            break;
        case DISTLOCK__K_INFO:
            conn->hs_pending--;
            conn->srv_run = distlock__run_of(rep);  /* 0 if refused: see add_kills */
            conn->srv_ver = distlock__version_of(rep);  /* 0 if refused: see send_call */
            if (distlock__check_peer_run(t, i, conn->srv_run) != 0) {
                freeReplyObject(rep);
                distlock__node_fail(t, conn, r, i, DISTLOCK_EINVAL,
                                    "the same server as another node");
                return -1;
            }
            break;
        case DISTLOCK__K_LOAD:
            conn->hs_pending--;
            distlock__learn_sha(t, o.arg, rep);
            break;
        case DISTLOCK__K_NODE_HS:  /* the kind's handshake request (ROLE) */
            conn->hs_pending--;
            /* fall through */
        case DISTLOCK__K_NODE:  /* one nothing waits for (CLUSTER SLOTS) */
            if (t->kind[i]->reply(t, cs, r, i, rep) != 0) {
                freeReplyObject(rep);
                return -1;
            }
            break;
        case DISTLOCK__K_KILL:
            if (is_err && strncmp(rep->str, "ERR No such client", 18) != 0) {
                if (o.owner == r && r->state == DISTLOCK__R_PENDING && o.arg == 1) {
                    /* The stuck connection may still run what it carries:
                     * nothing is sent behind it (the tag rule still
                     * guards its requests for the calls that follow). */
                    distlock__result_fail(t, r, i, DISTLOCK_EPROTO,
                                          "a connection that owed replies past its timeout was "
                                          "replaced and CLIENT KILL of it failed (%.*s): "
                                          "not sent", distlock__reply_shown_len(rep->str, 60),
                                          rep->str);
                } else if (o.owner == r && r->state == DISTLOCK__R_PENDING) {
                    distlock__result_fail(t, r, i, DISTLOCK_EPROTO,
                                          "an earlier request for %s is still queued on "
                                          "another connection and CLIENT KILL failed (%.*s): "
                                          "not sent", distlock__subject(r->call),
                                          distlock__reply_shown_len(rep->str, 60), rep->str);
                }
            } else {
                /* sent only where the id means that connection (add_kills) */
                distlock__stale_killed(t, i, (long long)o.tag, conn->srv_run);
            }
            if (o.owner)
                o.owner->pre--;
            break;
        case DISTLOCK__K_ASKING:
            break;  /* OK; an error shows in the call's own reply */
        case DISTLOCK__K_WAIT:
            /* The WAIT behind this round's call, once the call's own reply
             * is in; else one behind a request left behind, or behind a
             * send that NOSCRIPT or a fallback replaced: dropped. */
            if (o.owner == r && r->state == DISTLOCK__R_PENDING && r->reply != NULL) {
                if (rep->type == REDIS_REPLY_INTEGER) {
                    r->acked = rep->integer;
                } else {
                    r->acked = -1;
                    snprintf(r->wait_err, sizeof(r->wait_err), "%.*s",
                             is_err ? distlock__reply_shown_len(rep->str, 90) : 90,
                             is_err ? rep->str : "unexpected reply");
                }
                r->state = DISTLOCK__R_DONE;
            }
            break;
        default:  /* DISTLOCK__K_CALL */
            if (o.owner == NULL) {
                if (o.tag)
                    distlock__stale_done(t, i, o.tag, conn->serial);
                break;
            }
            if (is_err && t->kind[i]->error) {
                /* MOVED, ASK, TRYAGAIN, READONLY: nothing ran here; the
                 * kind sends it where it should go, or again later. */
                int k = t->kind[i]->error(t, cs, r, i, rep->str);
                if (k != 0) {
                    freeReplyObject(rep);
                    if (k < 0)
                        return -1;
                    continue;
                }
            }
            if (is_err && !r->retried && r->call->script >= 0 &&
                strncmp(rep->str, "NOSCRIPT", 8) == 0) {
                /* The server lost its script cache (restart, SCRIPT FLUSH,
                 * failover): send the body with EVAL, which caches it. */
                freeReplyObject(rep);
                r->retried = 1;
                if (send_call(t, cs, r, i, r->call, 1) != 0)
                    return -1;
                continue;
            }
            int also = is_err && r->call->fallback_also &&
                       strncmp(rep->str, r->call->fallback_also,
                               strlen(r->call->fallback_also)) == 0;
            if (is_err && !r->retried && r->call->fallback &&
                (also || strncmp(rep->str, r->call->fallback_on,
                                 strlen(r->call->fallback_on)) == 0)) {
                /* The caller's alternative for this error (e.g. a syntax
                 * an older server lacks). */
                freeReplyObject(rep);
                r->retried = 1;
                r->fell_back = also ? 2 : 1;
                r->call = r->call->fallback;
                if (send_call(t, cs, r, i, r->call, 0) != 0)
                    return -1;
                continue;
            }
            if (is_err)  /* the final answer is an error (NOSCRIPT, fallbacks done) */
                distlock__stats_node_error(t->stats, i);
            r->reply = rep;
            rep = NULL;
            /* with a WAIT behind it, done once the WAIT answered too */
            if (r->call->wait_replicas <= 0)
                r->state = DISTLOCK__R_DONE;
            break;
        }
        if (rep)
            freeReplyObject(rep);
        if (try_send(t, cs, r, i) != 0)
            return -1;
    }
    return 0;
}

/* Read what node i has sent without blocking; -1 if the connection is gone.
 * The read itself is the probe (the socket is non-blocking: nothing there
 * is REDIS_OK, a closed or reset connection an error), not a poll() first,
 * which would be one system call more per connection. Only for replies
 * owed since DRAIN_AFTER_US or longer: younger ones (the stragglers of the
 * round just ended) are read after the call is written, with its reply. */
static int drain(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i)
{
    distlock__conn *conn = &cs->conns[i];
    if (distlock__stream_read(&conn->stream) != REDIS_OK) {
        distlock__conn_close(t, i, conn);
        return -1;
    }
    return take_replies(t, cs, r, i);
}

/* A connection whose TCP connect was still in progress when its round
 * ended (at quorum, with this node's connect slower than the others' whole
 * round) has not sent its handshake: nothing drives it between calls, and
 * its replies, owed since it was queued, are not late but never asked for.
 * Failing it as overdue (start_node) would fail every later call the same
 * way and never write it: the node would get no request until the
 * connection is given up. So write it now if the connect is done since, and
 * count its wait from now. Still connecting: as before (overdue once the
 * command timeout is spent: a node that does not accept costs no more). */
static __attribute__((noinline)) void send_unsent_handshake(distlock__conn *conn, uint64_t now)
{
    int done = 0;
    if (distlock__stream_write(&conn->stream, &done) != REDIS_OK || !done)
        return;
    for (int k = 0; k < conn->qlen; k++)
        distlock__q_at(conn, k)->sent_us = now;
}

/* Open the connection to node i at its numeric address(es) and queue the
 * handshake; the call follows once the handshake succeeded. */
__attribute__((noinline)) void distlock__round_open_at(distlock__transport *t,
                                                       distlock__connset *cs,
                                                       distlock__result *r, int i,
                                                       char (*addr)[DISTLOCK__ADDR_LEN],
                                                       int naddr, int port, unsigned ep_state)
{
    distlock__conn *conn = &cs->conns[i];
    int st = DISTLOCK_ECONN;
    /* On the heap: a connect is rare, and this frame sits on the deepest
     * path of every entry point (a reroute inside a round nested in
     * another); the stack stage counts it. */
    char *err = calloc(1, DISTLOCK__ERR_LEN);
    if (err == NULL) {
        distlock__result_fail(t, r, i, DISTLOCK_ENOMEM, "out of memory");
        return;
    }
    /* A Sentinel node's master: its port is the sentinels' answer. */
    int at_port = port > 0 ? port : t->nodes[i].port;
    /* A Cluster master's TLS certificate names its own host, not the seed's. */
    char *host = t->kind[i]->tls_host ? t->kind[i]->tls_host(t, cs, i) : NULL;
    /* Loopback refusals are reported at once: try the next address then. */
    for (int k = 0; conn->stream.ctx == NULL && k < (addr ? naddr : 1); k++)
        (void)distlock__stream_open_node(&conn->stream, t, i, addr ? addr[k] : NULL, at_port,
                                         host, &st, err, DISTLOCK__ERR_LEN);
    free(host);
    conn->ep_state = ep_state;
    if (conn->stream.ctx == NULL) {
        snprintf(r->err, sizeof(r->err), "%s", err);
        free(err);
        r->state = DISTLOCK__R_FAILED;
        r->status = st;
        distlock__stats_node_error(t->stats, i);
        return;
    }
    free(err);
    if (conn->serial != 0)  /* this slot had a connection before */
        distlock__stats_node_reconnect(t->stats, i);
    conn->serial = atomic_fetch_add(&t->conn_serial, 1) + 1;
    conn->srv_id = -1;
    conn->srv_run = 0;
    conn->srv_ver = 0;
    if (distlock__append_handshake(t, i, conn, r) != 0)
        distlock__node_fail(t, conn, r, i, DISTLOCK_ENOMEM, "out of memory");
}

static __attribute__((noinline)) void resolved(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i)
{
    distlock__conn *conn = &cs->conns[i];
    /* On the heap: a lookup is rare, and every entry point keeps its stack
     * small (a write failure below restarts the node: a deep chain). */
    struct { char addr[DISTLOCK__RESOLVE_MAX][DISTLOCK__ADDR_LEN], err[DISTLOCK__ERR_LEN]; } *lk = malloc(sizeof(*lk));
    int naddr = 0;
    if (lk == NULL) {
        distlock__result_fail(t, r, i, DISTLOCK_ENOMEM, "out of memory");
        return;
    }
    int rc = distlock__resolve_take(conn->resolving, lk->addr, &naddr, lk->err, sizeof(lk->err));
    if (rc > 0) {
        free(lk);
        return;
    }
    int port = distlock__resolve_port(conn->resolving);
    distlock__resolve_drop(conn->resolving);
    conn->resolving = NULL;
    if (rc < 0) {
        distlock__result_fail(t, r, i, DISTLOCK_ECONN, "%s", lk->err);
        free(lk);
        if (t->kind[i]->lookup_failed)
            t->kind[i]->lookup_failed(t, cs, r, i);
        return;
    }
    t->kind[i]->resolved(t, cs, r, i, lk->addr, naddr, port);
    free(lk);
    if (r->state == DISTLOCK__R_PENDING && add_kills(t, conn, r, i) == 0) {
        int done = 0;
        if (distlock__stream_write(&conn->stream, &done) != REDIS_OK)
            distlock__round_broken(t, cs, r, i);
    }
}

/* A trailing request for a node that owes replies past its timeout. If a
 * request of its tag was sent to the node (on this connection, or on others
 * still listed), queue it here without waiting for it, behind CLIENT KILLs
 * of those other connections: whichever order the node runs them in when
 * it comes back, the trailing one can only remove what they wrote (its
 * owner's word: distlock__call.trailing). If none was sent, nothing is. */
static void trailing_unwaited(distlock__transport *t, distlock__conn *conn, distlock__result *r,
                              int i, const distlock__call *call)
{
    long long ids[STALE_IDS_MAX];
    int elsewhere = 0;
    int n = distlock__stale_maybe(t, i, call->tag)
                ? distlock__stale_find(t, i, call->tag, conn, ids, STALE_IDS_MAX, &elsewhere) : 0;
    if (!(call->must_mask & (1ull << i)) && !distlock__owes_tag(conn, call->tag) && n == 0 &&
        !elsewhere)
        return;
    if (n < 0)
        n = 0;
    for (int k = 0; k < n; k++)
        if (distlock__append_kill(conn, NULL, ids[k], 0) != 0)
            return;
    if (distlock__append_call(t, i, conn, NULL, call, 0) != 0)
        return;
    int done = 0;
    r->sent = 1;
    pthread_mutex_lock(&t->mu);
    distlock__stale_add_locked(t, i, call->tag, conn, 1);
    pthread_mutex_unlock(&t->mu);
    (void)distlock__stream_write(&conn->stream, &done);
}

/* The longest WAIT a connection still owes a reply to (it may take that
 * long on top of the command timeout). */
static uint64_t owed_wait_ms(distlock__conn *conn)
{
    uint64_t m = 0;
    for (int k = 0; k < conn->qlen; k++) {
        const distlock__owed *o = distlock__q_at(conn, k);
        if (o->kind == DISTLOCK__K_WAIT && (uint64_t)o->arg > m)
            m = (uint64_t)o->arg;
    }
    return m;
}

/* Start (or restart, with cap: the call's deadline) node i's call. */
void distlock__round_start(distlock__transport *t, distlock__connset *cs,
                           const distlock__call *call, distlock__result *r, int i, uint64_t now,
                           uint64_t cap)
{
    distlock__conn *conn = &cs->conns[i];
    long timeout_ms = t->command_timeout_ms;
    int resent = r->resent, sent = r->sent, fell_back = r->fell_back;
    int reresolved = r->reresolved, redirects = r->redirects, ask = r->ask, tries = r->tries;
    long budget_ms = r->budget_ms;

    memset(r, 0, sizeof(*r));
    r->call = call;
    r->state = DISTLOCK__R_PENDING;
    r->resent = resent;
    r->fell_back = fell_back;
    r->sent = sent;
    r->reresolved = reresolved;
    r->redirects = redirects;
    r->ask = ask;
    r->tries = tries;
    r->cap_us = cap;
    if (cap)
        r->budget_ms = budget_ms;
    /* A Cluster node: the connection to the master of the call's slot
     * (or first to one where a request of its tag is left behind). */
    if (t->kind[i]->route && t->kind[i]->route(t, cs, r, i) != 0)
        return;

    if (conn->stream.ctx && conn->stream.ctx->err)
        distlock__conn_close(t, i, conn);
    /* A Sentinel node whose master changed, or was found not to be one,
     * since this connection was made: it goes to the old server. */
    if (conn->stream.ctx && t->kind[i]->current && !t->kind[i]->current(t, i, conn)) {
        /* A trailing request first goes out behind the requests it follows
         * on this connection, unwaited: a server that was only paused (its
         * timeout made us forget it) then runs them in order (a late write
         * and what settles it), instead of keeping the write. The
         * call itself goes where the node leads now. */
        if (call->trailing && call->tag && conn->qlen > 0 &&
            !distlock__owes_kind(conn, DISTLOCK__K_AUTH)) {
            trailing_unwaited(t, conn, r, i, call);
            r->sent = sent;
        }
        distlock__conn_close(t, i, conn);
    }
    if (conn->stream.ctx && conn->qlen == 0 &&
        (conn->cred_gen != atomic_load(&t->cred_gen) || now - conn->used_us > IDLE_CHECK_US)) {
        /* New credentials: reconnect with them. Idle: readable means the
         * server closed it (restart, idle timeout, CLIENT KILL); reconnect
         * now rather than fail this call on a dead socket. A connection in
         * steady use skips the check (one system call less per node). */
        struct pollfd pfd = { distlock__stream_fd(&conn->stream), POLLIN, 0 };
        if (conn->cred_gen != atomic_load(&t->cred_gen) || poll(&pfd, 1, 0) > 0)
            distlock__conn_close(t, i, conn);
    }
    if (conn->stream.ctx && conn->qlen > 0 &&
        (conn->late || now - distlock__q_at(conn, 0)->sent_us >= DRAIN_AFTER_US) &&
        drain(t, cs, r, i) != 0) {
        if (r->state != DISTLOCK__R_PENDING)
            return;  /* e.g. a failed authentication, reported now */
    }
    if (conn->stream.ctx && conn->hs_pending > 0 && sdslen(conn->stream.ctx->obuf) > 0)
        send_unsent_handshake(conn, now);
    if (conn->stream.ctx && conn->qlen > 0) {
        uint64_t owed_since = distlock__q_at(conn, 0)->sent_us;
        int overdue = conn->late || now - owed_since >
                      ((uint64_t)t->command_timeout_ms + owed_wait_ms(conn)) * 1000u;
        if ((overdue || conn->qlen > OWED_MAX) && conn->hs_pending == 0 && conn->srv_id >= 0) {
            /* A connection that worked and now owes replies past its
             * timeout (a NAT or firewall dropped it, a segment waits for
             * retransmission: the kernel may keep it for 15 minutes), or
             * too many: replace it. The new connection kills it (CLIENT
             * KILL ID, add_kills) before the call is sent, so nothing it
             * carries can run after the call. A trailing request first
             * goes out behind the requests it follows here too, unwaited:
             * should the new connection never be ready, a late write is
             * still settled. */
            if (call->trailing && call->tag) {
                trailing_unwaited(t, conn, r, i, call);
                r->sent = sent;
            }
            r->replaced = 1;
            r->replaced_id = conn->srv_id;
            r->replaced_ep = conn->ep_state;
            r->replaced_run = conn->srv_run;
            distlock__conn_close(t, i, conn);  /* reconnect below */
        } else if (conn->qlen > OWED_MAX || now - owed_since > STALE_CLOSE_US) {
            distlock__conn_close(t, i, conn);  /* give up on it; reconnect below */
        } else if (overdue) {
            /* A connection that never completed its handshake owes replies
             * past its timeout: the node itself does not answer (hung,
             * paused), and another connection would wait the same way.
             * Fail it at once instead of waiting again. A trailing request
             * still goes out behind the requests of its tag that it must
             * follow (if the node comes back, they run in order), unwaited. */
            /* (a connection that replaced a stuck one is as old as that one) */
            long owed_ms = (long)((now - owed_since) / 1000);
            distlock__result_fail(t, r, i, DISTLOCK_ECONN, "no reply for %ld ms",
                                  owed_ms > t->command_timeout_ms ? owed_ms
                                                                  : t->command_timeout_ms);
            distlock__stats_node_timeout(t->stats, i);
            /* never behind an unconfirmed AUTH: it could run as another user */
            if (call->trailing && call->tag && !distlock__owes_kind(conn, DISTLOCK__K_AUTH))
                trailing_unwaited(t, conn, r, i, call);
            return;
        }
    }
    conn->used_us = now;
    /* A WAIT behind the call may take its whole wait time on top, and so
     * may one that an earlier round left on this connection (the server
     * answers nothing behind it until it is done). */
    uint64_t wait_us = call->wait_replicas > 0 ? (uint64_t)call->wait_ms * 1000u : 0;
    if (conn->stream.ctx && conn->qlen > 0)
        wait_us += owed_wait_ms(conn) * 1000u;
    distlock__set_deadline(r, now, timeout_ms, wait_us);
    /* A node's first connection gets the connect timeout; one re-made
     * inside a call (broken, stuck, closed by the server) spends the
     * call's budget, the command timeout. */
    long connect_ms = conn->serial ? t->command_timeout_ms : t->connect_timeout_ms;
    if (conn->stream.ctx == NULL && conn->resolving == NULL) {
        r->fresh = 1;
        distlock__set_deadline(r, now, connect_ms, wait_us);
        /* Where to connect: the node's address (or its name, looked up off
         * this thread), a Sentinel node's master, a Cluster slot's master. */
        if (t->kind[i]->open(t, cs, r, i, now, connect_ms, wait_us) != 0)
            return;
    } else if (conn->stream.ctx == NULL) {
        r->fresh = 1;  /* a lookup started by an earlier round is still running */
        distlock__set_deadline(r, now, connect_ms, wait_us);
        r->deferred = 1;
        return;
    }
    r->deferred = 1;
    if (add_kills(t, conn, r, i) != 0)
        return;
    if (try_send(t, cs, r, i) != 0)
        return;
    /* Write now: on an established connection the whole request usually
     * leaves in this one write, before we start waiting on any node. */
    int done = 0;
    if (distlock__stream_write(&conn->stream, &done) != REDIS_OK)
        distlock__round_broken(t, cs, r, i);
}

/* The connection broke (reset, or closed by the server: a restart). If it
 * was an established one and this is the first time in this round, open a
 * fresh connection and send the call again: every call we make is safe to
 * repeat (the owner's side of the contract: distlock__call, transport.h),
 * and the request that may
 * or may not have run on the old connection is closed off first (its
 * server-side connection is killed before the resend, see above). */
static void broken_because(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                           int i, const char *why)
{
    distlock__conn *conn = &cs->conns[i];
    /* The kind first: a Sentinel node's master may be gone (a failover:
     * ask the sentinels again), a Cluster master that refuses a fresh
     * connection has its slots routed elsewhere (nodekind.c). */
    if (t->kind[i]->broken && t->kind[i]->broken(t, cs, r, i))
        return;
    if (!r->fresh && !r->resent && r->call && r->state == DISTLOCK__R_PENDING) {
        const distlock__call *call = r->call;
        distlock__conn_close(t, i, conn);
        r->resent = 1;
        distlock__round_start(t, cs, call, r, i, distlock__now_us(), distlock__call_deadline(r));
        return;
    }
    distlock__node_fail(t, conn, r, i, DISTLOCK_ECONN, "%s", why);
}

/* Whether node i leads elsewhere now than the server its connection was
 * made to (a Sentinel node: the sentinels announced a failover, or a call
 * forgot the master) while its call is out there. If so, whatever that
 * server answers no longer counts for the node: the call goes where the
 * node leads, as from a broken connection. 1 if so (r changed). Asked each
 * time the round looks at the node and after each read from it, before its
 * replies are taken: a reply read once the node moved is not counted,
 * whenever it came. */
static int led_elsewhere(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                         int i)
{
    const distlock__conn *conn = &cs->conns[i];
    if (conn->stream.ctx == NULL || t->kind[i]->current == NULL ||
        t->kind[i]->current(t, i, conn))
        return 0;
    broken_because(t, cs, r, i, "the node's master changed or was found wanting (a failover, "
                                "or another call's timeout) while the request was out");
    return 1;
}

void distlock__round_broken(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                            int i)
{
    const redisContext *ctx = cs->conns[i].stream.ctx;
    broken_because(t, cs, r, i, ctx && ctx->errstr[0] ? ctx->errstr : "connection closed");
}

void distlock__round_begin(distlock__transport *t, distlock__connset *cs,
                           distlock__round_run *rr, const distlock__call *const *calls,
                           distlock__result *res, distlock__decide_fn decide, void *arg)
{
    int n = t->n;
    uint64_t now = distlock__now_us();

    rr->calls = calls;
    rr->res = res;
    rr->decide = decide;
    rr->arg = arg;
    rr->decided = 0;
    rr->drop_unsent = 0;
    rr->grace_end = 0;
    rr->start = now;
    rr->np = 0;
    cs->enc.call = NULL;  /* the set's calls may be rebuilt in place since the last round */
    for (int i = 0; i < n; i++) {
        if (calls[i] == NULL) {
            memset(&res[i], 0, sizeof(res[i]));
            res[i].state = DISTLOCK__R_UNSENT;
            continue;
        }
        res[i].resent = res[i].sent = res[i].fell_back = res[i].reresolved = 0;
        res[i].redirects = res[i].ask = res[i].tries = 0;
        res[i].retry_at_us = 0;
        distlock__round_start(t, cs, calls[i], &res[i], i, now, 0);
        if (res[i].cap_us == 0)  /* the call's deadline, kept by its restarts */
            res[i].cap_us = res[i].deadline_us;
    }
}

/* Whether a trailing call has something to settle on node i: a request it
 * follows may have run there (its must_mask), or one of its tag is owed or
 * listed there (as trailing_unwaited). Else nothing of its tag reached the
 * node, and a round that drops what it has not sent need not wait for the
 * node's connection to send it (a release after a cancel, to a node the
 * cancelled attempt never reached). */
static int trailing_settles(distlock__transport *t, distlock__conn *conn, int i,
                            const distlock__call *call)
{
    return (call->must_mask & (1ull << i)) || distlock__owes_tag(conn, call->tag) ||
           (call->tag && distlock__stale_maybe(t, i, call->tag));
}

int distlock__round_interest(distlock__transport *t, distlock__connset *cs,
                             distlock__round_run *rr, uint64_t *next_us)
{
    int n = t->n;
    distlock__result *res = rr->res;
    struct pollfd *pfd = cs->pfd;
    int *idx = cs->pfd_node;
    int np = 0;
    uint64_t next = UINT64_MAX;
    uint64_t now = distlock__now_us();

    /* Once the outcome is known the round ends: requests on their way
     * are left behind (their replies are read later). A call still
     * waiting for its connection (handshake) gets a short grace, as
     * long again as the round took so far, which a healthy new
     * connection needs, not a hung one's timeout; then it is not sent
     * at all. A trailing call still goes out once its connection is
     * ready, within its deadline: it settles what the requests it follows
     * did, which would else stay written. */
    if (!rr->decided && rr->decide && rr->decide(res, n, rr->arg)) {
        rr->decided = 1;
        rr->grace_end = now + (now - rr->start) + 1000u;
    }
    for (int i = 0; i < n; i++) {
        distlock__result *r = &res[i];
        distlock__conn *conn = &cs->conns[i];
        if (r->state != DISTLOCK__R_PENDING)
            continue;
        if (rr->decided && !(r->deferred && (r->call->trailing || now < rr->grace_end)))
            continue;
        /* Nothing of it was ever written (its connection is not ready), so
         * nothing is waited for; a trailing call still goes out (above)
         * where it has something to settle. */
        if (rr->drop_unsent && r->deferred && !r->sent && !r->resent &&
            (!r->call->trailing || !trailing_settles(t, conn, i, r->call)))
            continue;
        if (now >= r->deadline_us && t->kind[i]->deadline) {
            /* Cluster: a new master's share is over: re-routed, or the
             * rest of its deadline */
            t->kind[i]->deadline(t, cs, r, i);
            if (r->state != DISTLOCK__R_PENDING)
                continue;
        }
        /* The old server may be hung: the call follows the node within
         * DISTLOCK__CURRENT_CHECK_MS, not after the rest of its timeout. */
        if (led_elsewhere(t, cs, r, i) && r->state != DISTLOCK__R_PENDING)
            continue;
        if (now >= r->deadline_us) {
            /* No reply in time. Keep the connection with what it owes:
             * if the node is only paused, a later trailing request queues
             * behind the requests it follows instead of racing them. The
             * kind first: a Sentinel node's master may be gone without a
             * reset (the next call asks the sentinels), a Cluster master
             * that never answered its handshake has its slots routed
             * elsewhere; a call that was clearing the way fails with
             * what it was waiting for. */
            if (t->kind[i]->timed_out && t->kind[i]->timed_out(t, cs, r, i))
                ;
            else if (conn->stream.ctx && !distlock__stream_up(&conn->stream))
                distlock__result_fail(t, r, i, DISTLOCK_ECONN,
                                      "TLS handshake not done within %ld ms (does the "
                                      "server speak TLS on this port?)",
                                      r->budget_ms);
            else
                distlock__result_fail(t, r, i, DISTLOCK_ECONN, "no reply within %ld ms",
                                      r->budget_ms +
                                      (r->call->wait_replicas > 0 ? r->call->wait_ms : 0));
            distlock__stats_node_timeout(t->stats, i);
            if (conn->stream.ctx && conn->qlen > 0)
                conn->late = 1;  /* the next call does not wait on it again */
            distlock__abandon(t, i, conn, r);
            continue;
        }
        if (r->retry_at_us) {  /* a TRYAGAIN's resend (cluster node) */
            if (now >= r->retry_at_us) {
                r->retry_at_us = 0;
                if (send_call(t, cs, r, i, r->call, 0) != 0)
                    continue;
            } else if (r->retry_at_us < next) {
                next = r->retry_at_us;
            }
        }
        if (r->deadline_us < next)
            next = r->deadline_us;
        if (t->kind[i]->current && conn->stream.ctx &&
            now + (uint64_t)DISTLOCK__CURRENT_CHECK_MS * 1000u < next)
            next = now + (uint64_t)DISTLOCK__CURRENT_CHECK_MS * 1000u;
        if (rr->decided && !r->call->trailing && rr->grace_end < next)
            next = rr->grace_end;
        if (conn->stream.ctx == NULL) {
            pfd[np].fd = distlock__resolve_fd(conn->resolving);
            pfd[np].events = POLLIN;
        } else {
            pfd[np].fd = distlock__stream_fd(&conn->stream);
            pfd[np].events = (short)distlock__stream_events(&conn->stream);
        }
        pfd[np].revents = 0;
        idx[np++] = i;
    }
    rr->np = np;
    *next_us = next;
    return np;
}

void distlock__round_advance(distlock__transport *t, distlock__connset *cs,
                             distlock__round_run *rr)
{
    struct pollfd *pfd = cs->pfd;
    int *idx = cs->pfd_node;

    for (int k = 0; k < rr->np; k++) {
        int i = idx[k];
        distlock__conn *conn = &cs->conns[i];
        distlock__result *r = &rr->res[i];
        if (pfd[k].revents == 0 || r->state != DISTLOCK__R_PENDING)
            continue;
        if (conn->stream.ctx == NULL) {
            resolved(t, cs, r, i);
            continue;
        }
        if (pfd[k].revents & POLLOUT) {
            int done = 0;
            if (distlock__stream_write(&conn->stream, &done) != REDIS_OK) {
                distlock__round_broken(t, cs, r, i);
                continue;
            }
        }
        if (pfd[k].revents & (POLLIN | POLLERR | POLLHUP)) {
            if (distlock__stream_read(&conn->stream) != REDIS_OK) {
                distlock__round_broken(t, cs, r, i);
                continue;
            }
            /* After the read: what it brought came before this look, so a
             * reply counted here came before the node moved. */
            if (led_elsewhere(t, cs, r, i))
                continue;
            take_replies(t, cs, r, i);
        }
    }
    rr->np = 0;
}

void distlock__round_end(distlock__transport *t, distlock__connset *cs, distlock__round_run *rr)
{
    /* Nodes we stop waiting for: a call never sent is simply failed; one on
     * its way is left behind (its reply is discarded later). */
    for (int i = 0; i < t->n; i++) {
        distlock__result *r = &rr->res[i];
        if (rr->calls[i] == NULL)
            continue;
        if (r->state == DISTLOCK__R_PENDING && r->deferred && !r->sent)
            distlock__result_fail(t, r, i, DISTLOCK_ECONN,
                                  rr->drop_unsent ? "not sent: given up while its connection "
                                                    "was being made"
                                                  : "not sent: its connection was not ready");
        if (cs->conns[i].qlen > 0)
            distlock__abandon(t, i, &cs->conns[i], r);  /* also a failed node's unconfirmed KILLs */
    }
}

/* The blocking round: the steps above, waiting in distlock__poll_wait. */
void distlock__round(distlock__transport *t, distlock__connset *cs,
                     const distlock__call *const *calls, distlock__result *res,
                     distlock__decide_fn decide, void *arg)
{
    distlock__round_run rr;
    uint64_t next;
    int np;

    distlock__round_begin(t, cs, &rr, calls, res, decide, arg);
    while ((np = distlock__round_interest(t, cs, &rr, &next)) > 0)
        if (distlock__poll_wait(cs->pfd, np, next) > 0)
            distlock__round_advance(t, cs, &rr);
    distlock__round_end(t, cs, &rr);
}

void distlock__round_clear(distlock__result *res, int n)
{
    for (int i = 0; i < n; i++) {
        if (res[i].reply)
            freeReplyObject(res[i].reply);
        res[i].reply = NULL;
    }
}
