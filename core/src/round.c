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
 * Ordering. Requests carry a tag (the protocol's hash of key and token). A
 * request left behind with a tag T (its reply unread) may still execute
 * later, even after its connection was closed (the bytes can sit in a
 * network buffer or a paused server's socket). A later request with tag T
 * must not execute before it: an undo or release of an earlier attempt
 * would delete a later grant with the same token. So:
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
 * Cluster node's keys move between its masters, so there a request left
 * behind on another master is closed there first (cl_clear_first).
 * Requests left behind are listed per transport (distlock__stale, under
 * the transport's own lock t->mu, not the client's c->mu); the list is
 * empty in steady state (but for requests left on a server incarnation not
 * met since), and a counting filter over (node, tag) beside it lets the
 * common path read one atomic counter instead of taking the lock.
 *
 * Sentinel nodes (sentinel.c). The node's server can change: its cached
 * master carries a generation that changes with the address, and so do the
 * connections and the requests left behind made under it. "Before" is then
 * per server: a request left behind on the old master can only ever run
 * there (its connection id means nothing on the new one, so no CLIENT KILL
 * is sent for it), and what the old master writes after the promotion is
 * discarded when it rejoins as a replica. Back on the same address after a
 * passing error, the generation is the same and the rule above applies.
 * Why a Sentinel node does not go to the old master first, as a Cluster
 * node does (cl_clear_first): its data never moves there while another
 * server is its master. A later grant reaches the old server only as a
 * replica (replication), where a request left behind answers READONLY;
 * the old server turns replica because the sentinels reconfigure it, and
 * with REPLICAOF they send CLIENT KILL TYPE normal, which closes our
 * connections to it, so nothing left behind on them can run after the
 * demotion, even when that server is promoted again (a failback; and a
 * failback reached under the same run_id kills what is still listed, as
 * above). What it ran before the demotion is replaced by the resync. A
 * Cluster node's keys, by contrast, move between masters that all stay
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
 * more than one; an undo is a round of its own, bounded the same way. Only
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

/* ------------------------------------------------------------ sending */

static void conn_broken(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i);
static int cl_open(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i,
                   const distlock__call *call) __attribute__((noinline));
static int follow(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i);
static void start_node(distlock__transport *t, distlock__connset *cs, const distlock__call *call,
                       distlock__result *r, int i, uint64_t now, uint64_t cap);

static int is_sentinel(const distlock__transport *t, int i)
{
    return t->nodes[i].kind == DISTLOCK__NODE_SENTINEL;
}

static int is_cluster(const distlock__transport *t, int i)
{
    return t->cl != NULL && t->cl[i] != NULL;
}

static int cl_redirect(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i,
                       const char *err);
static int cl_reroute(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i)
    __attribute__((noinline));
static void cl_share_over(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                          int i) __attribute__((noinline));
static int cl_clear_first(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                          int i, const distlock__call *call) __attribute__((noinline));
static int cl_cleared(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i)
    __attribute__((noinline));

/* Write the call now (the connection is ready): one more reply is due. */
static int send_call(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i,
                     const distlock__call *call, int force_eval)
{
    distlock__conn *conn = &cs->conns[i];
    int done = 0;
    const char *asking[1] = { "ASKING" };
    static const size_t asking_len[1] = { 6 };
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
    if (r->ask && distlock__append_cmd(conn, NULL, DISTLOCK__K_ASKING, 0, 0, 1, asking,
                                       asking_len) != 0) {
        distlock__node_fail(t, conn, r, i, DISTLOCK_ENOMEM, "out of memory");
        return -1;
    }
    if (distlock__append_call(t, i, conn, r, call, force_eval) != 0) {
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
        conn_broken(t, cs, r, i);
        return -1;
    }
    return 0;
}

/* Server-side ids of connections carrying earlier requests with a call's
 * tag, looked up per call (distlock__stale_find); more of them fail it. */
#define STALE_IDS_MAX 16
/* TRYAGAIN resends: the pause doubles this many times at most (2 .. 64 ms). */
#define TRYAGAIN_DOUBLINGS 5

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
     * (an undo need not: see below). Only on the same server incarnation
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
        if (distlock__append_kill(conn, call->undo ? NULL : r, r->replaced_id, 1) != 0) {
            distlock__node_fail(t, conn, r, i, DISTLOCK_ENOMEM, "out of memory");
            return -1;
        }
        r->pre += !call->undo;
    }
    if (call->tag == 0 || !distlock__stale_maybe(t, i, call->tag))
        return 0;
    int n = distlock__stale_find(t, i, call->tag, conn, ids, STALE_IDS_MAX, &elsewhere);
    if (n < 0) {
        distlock__result_fail(t, r, i, DISTLOCK_ECONN,
                    "an earlier request for this lock may still arrive on a lost connection "
                    "(whose id is unknown): not sent");
        return -1;
    }
    /* Another thread's connection still carries an earlier request of this
     * ownership: an acquire or extend sent here could run before it (and be
     * undone or shortened by it), so this node is skipped for it. An undo
     * goes out: at worst the earlier request lands after it and leaves a
     * key until its TTL. */
    if ((elsewhere & DISTLOCK__STALE_OPEN) && !call->undo) {
        distlock__result_fail(t, r, i, DISTLOCK_ECONN,
                    "an earlier request for this lock is still on its way on another "
                    "connection: not sent");
        return -1;
    }
    /* A Cluster node: one left behind on another master (listed since
     * start_node looked: another thread's). Not here while clearing: the
     * call is routed again once this master's kills are confirmed, and
     * start_node goes to that other master next. */
    if ((elsewhere & DISTLOCK__STALE_OTHER_MASTER) && !call->undo && !r->clearing) {
        distlock__result_fail(t, r, i, DISTLOCK_ECONN,
                    "an earlier request for this lock is left behind on another master of "
                    "this cluster: not sent");
        return -1;
    }
    /* An undo need not wait for the KILLs: whichever runs first, it can
     * only remove what the requests it follows may have written. */
    for (int k = 0; k < n; k++) {
        if (replaced && ids[k] == r->replaced_id)
            continue;  /* killed above */
        if (distlock__append_kill(conn, call->undo ? NULL : r, ids[k], 0) != 0) {
            distlock__node_fail(t, conn, r, i, DISTLOCK_ENOMEM, "out of memory");
            return -1;
        }
        r->pre += !call->undo;
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
        return r->clearing ? cl_cleared(t, cs, r, i) : send_call(t, cs, r, i, r->call, 0);
    return 0;
}

/* After a TRYAGAIN: schedule the resend if the deadline leaves room for it
 * (pauses of 2, 4, 8 .. 64 ms). */
static int tryagain(distlock__result *r)
{
    int doublings = r->tries < TRYAGAIN_DOUBLINGS ? r->tries : TRYAGAIN_DOUBLINGS;
    uint64_t pause = 2000u << doublings, now = distlock__now_us();
    if (now + pause + 2000u >= r->deadline_us)
        return 0;
    r->tries++;
    r->retry_at_us = now + pause;
    return 1;
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
            break;
        case DISTLOCK__K_LOAD:
            conn->hs_pending--;
            distlock__learn_sha(t, o.arg, rep);
            break;
        case DISTLOCK__K_ROLE: {
            conn->hs_pending--;
            const char *role = rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
                                       rep->element[0]->type == REDIS_REPLY_STRING
                                   ? rep->element[0]->str : NULL;
            if (role && strcmp(role, "master") == 0)
                break;
            /* The sentinels named a server that is not (or no longer) the
             * master. No call was sent behind the handshake: ask again. */
            char what[80];
            snprintf(what, sizeof(what), "%.*s",
                     is_err ? distlock__reply_shown_len(rep->str, 60) : 60,
                     is_err ? rep->str : role ? role : "?");
            freeReplyObject(rep);
            distlock__ep_forget(t, i, conn->ep_state);
            if (follow(t, cs, r, i))
                return -1;
            distlock__node_fail(t, conn, r, i, DISTLOCK_ECONN,
                                "the server the sentinels named is not the master (ROLE: %s)",
                                what);
            return -1;
        }
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
                                          "an earlier request for this lock is still queued on "
                                          "another connection and CLIENT KILL failed (%.*s): "
                                          "not sent", distlock__reply_shown_len(rep->str, 60),
                                          rep->str);
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
        case DISTLOCK__K_SLOTS:
            distlock__cl_learn(t, i, cs->cl ? cs->cl[i]->cur : -1, rep);
            break;
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
            if (is_err && is_cluster(t, i) && r->redirects < DISTLOCK__CL_REDIRECTS &&
                (rep->str[0] == 'M' || rep->str[0] == 'A')) {
                /* MOVED / ASK: nothing ran here; send it where the cluster
                 * says (cluster.c). */
                int k = cl_redirect(t, cs, r, i, rep->str);
                if (k != 0) {
                    freeReplyObject(rep);
                    return -1;
                }
            }
            if (is_err && is_cluster(t, i) && strncmp(rep->str, "TRYAGAIN", 8) == 0 &&
                tryagain(r)) {
                /* A multi-key call while its slot migrates: nothing ran.
                 * Sent again after a pause, within its deadline; the
                 * last TRYAGAIN is its reply. */
                freeReplyObject(rep);
                continue;
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
            if (is_err && is_sentinel(t, i) && strncmp(rep->str, "READONLY", 8) == 0) {
                /* A master turned replica under us (failover): nothing was
                 * written. Ask the sentinels and send it to the new one. */
                freeReplyObject(rep);
                distlock__ep_forget(t, i, conn->ep_state);
                if (follow(t, cs, r, i))
                    return -1;
                distlock__node_fail(t, conn, r, i, DISTLOCK_ECONN, "READONLY: not the master");
                return -1;
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

/* Read what node i has sent without blocking; -1 if the connection is gone. */
static int drain(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i)
{
    distlock__conn *conn = &cs->conns[i];
    struct pollfd pfd = { distlock__stream_fd(&conn->stream), POLLIN, 0 };
    if (poll(&pfd, 1, 0) > 0) {
        if (distlock__stream_read(&conn->stream) != REDIS_OK) {
            distlock__conn_close(t, i, conn);
            return -1;
        }
        return take_replies(t, cs, r, i);
    }
    return 0;
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
static __attribute__((noinline)) void open_at(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i,
                    char (*addr)[DISTLOCK__ADDR_LEN], int naddr, int port, unsigned ep_state)
{
    distlock__conn *conn = &cs->conns[i];
    int st = DISTLOCK_ECONN;
    /* On the heap: a connect is rare, and this frame sits on the deepest
     * path of every entry point (a reroute inside a release inside an
     * acquire); the stack stage counts it. */
    char *err = calloc(1, DISTLOCK__ERR_LEN);
    if (err == NULL) {
        distlock__result_fail(t, r, i, DISTLOCK_ENOMEM, "out of memory");
        return;
    }
    /* A Sentinel node's master: its port is the sentinels' answer. */
    int at_port = port > 0 ? port : t->nodes[i].port;
    /* A Cluster master's TLS certificate names its own host, not the seed's. */
    char *host = is_cluster(t, i) ? distlock__cl_host(t, cs, i) : NULL;
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
        /* A Cluster master's name that no longer resolves (its pod and its
         * DNS record are gone after a failover): like a refusal. */
        if (is_cluster(t, i))
            (void)cl_reroute(t, cs, r, i);
        return;
    }
    unsigned ep_state = 0;
    if (is_cluster(t, i)) {
        if (distlock__cl_target(t, cs, i, NULL, &port, &ep_state) < 0) {
            distlock__result_fail(t, r, i, DISTLOCK_ECONN, "no master known");
            free(lk);
            return;
        }
    }
    if (is_sentinel(t, i)) {
        /* The lookup had its own budget: connecting gets a fresh one. */
        ep_state = distlock__ep_learn(t, i, lk->addr[0], &port);
        naddr = 1;
        r->deadline_us = distlock__now_us() + (uint64_t)t->connect_timeout_ms * 1000u +
                         (r->call->wait_replicas > 0 ? (uint64_t)r->call->wait_ms * 1000u : 0);
        r->cap_us = r->deadline_us;
        r->budget_ms = t->connect_timeout_ms;
    }
    open_at(t, cs, r, i, lk->addr, naddr, port, ep_state);
    free(lk);
    if (r->state == DISTLOCK__R_FAILED && is_sentinel(t, i))
        distlock__ep_forget(t, i, ep_state);  /* the next call asks again */
    if (r->state == DISTLOCK__R_PENDING && add_kills(t, conn, r, i) == 0) {
        int done = 0;
        if (distlock__stream_write(&conn->stream, &done) != REDIS_OK)
            conn_broken(t, cs, r, i);
    }
}

/* An undo for a node that owes replies past its timeout. If a request of its
 * tag was sent to the node (on this connection, or on others still listed),
 * queue the undo here without waiting for it, behind CLIENT KILLs of those
 * other connections: whichever order the node runs them in when it comes
 * back, nothing of that attempt is left. If none was sent, nothing is. */
static void undo_unwaited(distlock__transport *t, distlock__conn *conn, distlock__result *r, int i,
                          const distlock__call *call)
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

/* Node i's deadline: now + ms (+ extra_us), but never past the call's own
 * (r->cap_us, once set): a redirect, re-route or resend spends what is left
 * of it, however many there are. */
static void set_deadline(distlock__result *r, uint64_t now, long ms, uint64_t extra_us)
{
    uint64_t d = now + (uint64_t)ms * 1000u + extra_us;
    if (r->cap_us == 0)
        r->budget_ms = ms;
    r->deadline_us = r->cap_us && d > r->cap_us ? r->cap_us : d;
}

/* The deadline a restart of node i's call keeps. */
static uint64_t call_deadline(const distlock__result *r)
{
    return r->cap_us ? r->cap_us : r->deadline_us;
}

/* Start (or restart, with cap: the call's deadline) node i's call. */
static void start_node(distlock__transport *t, distlock__connset *cs, const distlock__call *call,
                       distlock__result *r, int i, uint64_t now, uint64_t cap)
{
    distlock__conn *conn = &cs->conns[i];
    long timeout_ms = t->command_timeout_ms;
    int resent = r->resent, sent = r->sent, fell_back = r->fell_back;
    int reresolved = r->reresolved, redirects = r->redirects, ask = r->ask, tries = r->tries;
    long budget_ms = r->budget_ms;

    /* A Cluster node: the connection to the master of the call's slot. */
    if (t->cl && t->cl[i])
        distlock__cl_route(t, cs, i, call, ask - 1);
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
    /* A Cluster node: an earlier request of this tag left behind on
     * another master is closed there first (cl_clear_first). The filter
     * keeps this off the common path. */
    if (t->cl && t->cl[i] && call->tag && !call->undo && distlock__stale_maybe(t, i, call->tag) &&
        cl_clear_first(t, cs, r, i, call) != 0)
        return;

    if (conn->stream.ctx && conn->stream.ctx->err)
        distlock__conn_close(t, i, conn);
    /* A Sentinel node whose master changed, or was found not to be one,
     * since this connection was made: it goes to the old server. */
    if (conn->stream.ctx && is_sentinel(t, i) && !distlock__ep_current(t, i, conn->ep_state)) {
        /* An undo (a release) first goes out behind what it undoes on this
         * connection, unwaited: a master that was only paused (its timeout
         * made us forget it) then runs the late write and its undo in
         * order, instead of keeping the write until its TTL. The call
         * itself goes to the master the sentinels name. */
        if (call->undo && call->tag && conn->qlen > 0 &&
            !distlock__owes_kind(conn, DISTLOCK__K_AUTH)) {
            undo_unwaited(t, conn, r, i, call);
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
    if (conn->stream.ctx && conn->qlen > 0 && drain(t, cs, r, i) != 0) {
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
             * carries can run after the call. An undo first goes out
             * behind what it undoes here too, unwaited: should the new
             * connection never be ready, a late write is still undone. */
            if (call->undo && call->tag) {
                undo_unwaited(t, conn, r, i, call);
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
             * Fail it at once instead of waiting again. An undo still goes out
             * behind the requests of its tag that it must follow (if the
             * node comes back, they run in order), unwaited. */
            /* (a connection that replaced a stuck one is as old as that one) */
            long owed_ms = (long)((now - owed_since) / 1000);
            distlock__result_fail(t, r, i, DISTLOCK_ECONN, "no reply for %ld ms",
                                  owed_ms > t->command_timeout_ms ? owed_ms
                                                                  : t->command_timeout_ms);
            distlock__stats_node_timeout(t->stats, i);
            /* never behind an unconfirmed AUTH: it could run as another user */
            if (call->undo && call->tag && !distlock__owes_kind(conn, DISTLOCK__K_AUTH))
                undo_unwaited(t, conn, r, i, call);
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
    set_deadline(r, now, timeout_ms, wait_us);
    /* A node's first connection gets the connect timeout; one re-made
     * inside a call (broken, stuck, closed by the server) spends the
     * call's budget, the command timeout. */
    long connect_ms = conn->serial ? t->command_timeout_ms : t->connect_timeout_ms;
    if (conn->stream.ctx == NULL && conn->resolving == NULL) {
        const distlock__node_cfg *cfg = &t->nodes[i];
        r->fresh = 1;
        set_deadline(r, now, connect_ms, wait_us);
        if (cfg->kind == DISTLOCK__NODE_SENTINEL) {
            char addr[1][DISTLOCK__ADDR_LEN];
            int port = 0;
            unsigned st = 0;
            if (distlock__ep_get(t, i, addr[0], &port, &st)) {
                open_at(t, cs, r, i, addr, 1, port, st);
                if (r->state == DISTLOCK__R_PENDING)
                    goto opened;
                /* The master we knew is gone: ask the sentinels (once). */
                distlock__ep_forget(t, i, st);
                if (r->reresolved)
                    return;
                r->state = DISTLOCK__R_PENDING;
                r->err[0] = '\0';
                r->reresolved = 1;
            }
            /* The sentinels' own budget; connecting gets another. A little
             * over it here, so that their answer (or why none came) is
             * what the caller sees. */
            conn->resolving = distlock__sentinel_start(t, i, t->connect_timeout_ms);
            if (conn->resolving == NULL)
                distlock__result_fail(t, r, i, DISTLOCK_ENOMEM, "out of memory");
            set_deadline(r, now, connect_ms, wait_us + 50000u);
            r->deferred = 1;
            return;
        }
        if (is_cluster(t, i)) {
            if (cl_open(t, cs, r, i, call) != 0)
                return;
            goto opened;
        }
        if (cfg->host && !distlock__host_is_numeric(cfg->host)) {
            /* Resolved off this thread: a slow name costs only this node. */
            conn->resolving = distlock__resolve_start(cfg->host);
            if (conn->resolving == NULL)
                distlock__result_fail(t, r, i, DISTLOCK_ENOMEM, "out of memory");
            r->deferred = 1;
            return;
        }
        char addr[1][DISTLOCK__ADDR_LEN];
        if (cfg->host)
            snprintf(addr[0], sizeof(addr[0]), "%s", cfg->host);
        open_at(t, cs, r, i, cfg->host ? addr : NULL, 1, 0, 0);
        if (r->state != DISTLOCK__R_PENDING)
            return;
    } else if (conn->stream.ctx == NULL) {
        r->fresh = 1;  /* a lookup started by an earlier round is still running */
        set_deadline(r, now, connect_ms, wait_us);
        r->deferred = 1;
        return;
    }
opened:
    r->deferred = 1;
    if (add_kills(t, conn, r, i) != 0)
        return;
    if (try_send(t, cs, r, i) != 0)
        return;
    /* Write now: on an established connection the whole request usually
     * leaves in this one write, before we start waiting on any node. */
    int done = 0;
    if (distlock__stream_write(&conn->stream, &done) != REDIS_OK)
        conn_broken(t, cs, r, i);
}

/* A Cluster node: connect to the master the call was routed to (its
 * numeric address at once, a name off this thread). One that refuses is
 * marked down and the call routed again (cluster.c). 0: opened (or being
 * resolved: deferred), -1: r is final or was restarted. */
static __attribute__((noinline)) int cl_open(distlock__transport *t, distlock__connset *cs,
                                             distlock__result *r, int i,
                                             const distlock__call *call)
{
    distlock__conn *conn = &cs->conns[i];
    char addr[1][DISTLOCK__ADDR_LEN];
    int port;
    unsigned ep_state;
    int kind = distlock__cl_target(t, cs, i, addr[0], &port, &ep_state);
    if (kind < 0) {
        distlock__result_fail(t, r, i, DISTLOCK_ECONN, "no master known");
        return -1;
    }
    /* A master that does not answer (a black hole: no refusal ever comes)
     * must not take the call's whole deadline when another master could
     * name the slot's new owner: its name lookup, connection and handshake
     * get half of what is left; past that it is treated as refused
     * (cl_share_over), and the rest goes to the re-route. */
    if (r->redirects < DISTLOCK__CL_REDIRECTS && distlock__cl_elsewhere(t, cs, i)) {
        uint64_t now = distlock__now_us(), cap = call_deadline(r);
        if (r->cap_us == 0)
            r->cap_us = cap;
        if (cap > now) {
            r->deadline_us = now + (cap - now) / 2;
            r->share = 1;
        }
    }
    if (kind == 1) {  /* a name: resolved off this thread, then resolved() */
        conn->resolving = distlock__cl_resolve(t, cs, i);
        if (conn->resolving == NULL)
            distlock__result_fail(t, r, i, DISTLOCK_ENOMEM, "out of memory");
        r->deferred = 1;
        return -1;
    }
    (void)call;
    open_at(t, cs, r, i, addr, 1, port, ep_state);
    if (r->state == DISTLOCK__R_PENDING)
        return 0;
    (void)cl_reroute(t, cs, r, i);
    return -1;
}

/* A Cluster node's master that cannot be reached (it refuses, its name
 * does not resolve, it does not answer its handshake in time): its slots
 * go elsewhere until the cluster names it again (cluster.c), and the call
 * is routed again within its deadline, like a Sentinel node's follow():
 * what may have run on the old server can only run there. Returns 1 if
 * restarted (r changed), else 0 (r as it was). */
static __attribute__((noinline)) int cl_reroute(distlock__transport *t, distlock__connset *cs,
                                                distlock__result *r, int i)
{
    distlock__cl_down(t, cs, i);
    if (r->clearing && r->call && r->state == DISTLOCK__R_PENDING) {
        /* The master that may still run an earlier request of this call's
         * tag cannot be reached: that request cannot be closed, so the
         * call is not sent (its slot's master is another one). */
        distlock__conn_close(t, i, &cs->conns[i]);
        distlock__result_fail(t, r, i, DISTLOCK_ECONN,
                              "an earlier request for this lock is left behind on another "
                              "master of this cluster, which cannot be reached to close it: "
                              "not sent");
        return 1;
    }
    if (r->call == NULL || r->redirects >= DISTLOCK__CL_REDIRECTS)
        return 0;
    const distlock__call *call = r->call;
    distlock__conn_close(t, i, &cs->conns[i]);
    r->redirects++;
    r->ask = 0;
    r->resent |= r->sent;
    start_node(t, cs, call, r, i, distlock__now_us(), call_deadline(r));
    return 1;
}

/* Node i's share of its call's deadline is over (cl_open). A master that
 * answered its handshake is alive: the call gets the rest of its deadline.
 * One that did not (name lookup, connection or handshake still pending)
 * is treated as refused: re-routed. */
static __attribute__((noinline)) void cl_share_over(distlock__transport *t, distlock__connset *cs,
                                                    distlock__result *r, int i)
{
    distlock__conn *conn = &cs->conns[i];
    if (r->fresh && (conn->stream.ctx == NULL || conn->hs_pending > 0) &&
        r->redirects < DISTLOCK__CL_REDIRECTS && cl_reroute(t, cs, r, i))
        return;
    r->share = 0;
    r->deadline_us = r->cap_us;
}

/* Start node i's call on a Cluster node (start_node; conns[i] is routed to
 * the master of its slot). A request of its tag left behind on another
 * master (a release that timed out there) runs there whenever it arrives,
 * and the key may be there again by then: a slot migrates away and back,
 * or one master is reached by two addresses (a seed and the address the
 * cluster announces) that conns[i] does not know to be one server. So,
 * unlike a Sentinel node's (see the top of this file), it is closed before
 * the call goes out: conns[i] is routed to that master instead (r->clearing),
 * whose handshake tells its run_id; there add_kills sends CLIENT KILL ID of
 * the connections that carry it (same run_id), or stale_find finds that
 * server restarted (another run_id under that address: its connections are
 * gone); once that is confirmed, cl_cleared routes the call again and
 * start_node looks again (another master may have one too). What cannot be
 * cleared within the call's deadline (that master refuses, black-holes, or
 * the kill is refused or unanswered) fails the call, unsent. Returns -1 if
 * r is final. */
static __attribute__((noinline)) int cl_clear_first(distlock__transport *t, distlock__connset *cs,
                                                    distlock__result *r, int i,
                                                    const distlock__call *call)
{
    int m = distlock__cl_stale_master(t, cs, i, call->tag);
    if (m == -1)
        return 0;
    if (m < 0 || r->redirects >= DISTLOCK__CL_REDIRECTS) {
        distlock__result_fail(t, r, i, DISTLOCK_ECONN,
                              "an earlier request for this lock is left behind on another "
                              "master of this cluster (%s): not sent",
                              m < 0 ? "no longer known" : "still there after several tries");
        return -1;
    }
    r->redirects++;
    r->clearing = 1;
    distlock__cl_route(t, cs, i, call, m);
    return 0;
}

/* The kills a clearing connection needed are confirmed (try_send): route
 * the call again (start_node looks for more). Returns -1 (r restarted or
 * final). */
static __attribute__((noinline)) int cl_cleared(distlock__transport *t, distlock__connset *cs,
                                                distlock__result *r, int i)
{
    const distlock__call *call = r->call;
    /* That master's connection of this set itself still carries one (its
     * reply not in yet, within its timeout): no kill from itself. */
    if (distlock__owes_tag(&cs->conns[i], call->tag)) {
        distlock__result_fail(t, r, i, DISTLOCK_ECONN,
                              "an earlier request for this lock is still on its way to another "
                              "master of this cluster: not sent");
        return -1;
    }
    start_node(t, cs, call, r, i, distlock__now_us(), call_deadline(r));
    return -1;
}

/* MOVED or ASK from a Cluster node's master: send the call again where it
 * says (ASKING first for an ASK), and after a MOVED ask that master for the
 * whole map too. Returns 1 if restarted (r changed), 0 if err is neither. */
static __attribute__((noinline)) int cl_redirect(distlock__transport *t, distlock__connset *cs,
                                                 distlock__result *r, int i, const char *err)
{
    int m = -1;
    int k = distlock__cl_redirect(t, i, cs->cl[i]->cur, err, &m);
    if (k == 0)
        return 0;
    if (k < 0) {
        distlock__result_fail(t, r, i, DISTLOCK_ECONN,
                              "%.80s: not followed: no room for that master (its host name is "
                              "too long, or all %d masters known may still receive requests "
                              "of ours)", err, DISTLOCK__CL_MASTERS);
        return 1;
    }
    const distlock__call *call = r->call;
    r->redirects++;
    r->ask = k == 2 ? m + 1 : 0;
    start_node(t, cs, call, r, i, distlock__now_us(), call_deadline(r));
    distlock__conn *conn = &cs->conns[i];
    if (k == 1 && r->state == DISTLOCK__R_PENDING && !r->fresh && conn->stream.ctx) {
        const char *argv[2] = { "CLUSTER", "SLOTS" };
        static const size_t len[2] = { 7, 5 };
        int done = 0;
        if (distlock__append_cmd(conn, NULL, DISTLOCK__K_SLOTS, 0, 0, 2, argv, len) == 0 &&
            distlock__stream_write(&conn->stream, &done) != REDIS_OK)
            conn_broken(t, cs, r, i);
    }
    return 1;
}

/* The connection broke (reset, or closed by the server: a restart). If it
 * was an established one and this is the first time in this round, open a
 * fresh connection and send the call again: every call we make is safe to
 * repeat (acquire and extend are idempotent for the owner; a repeated
 * release is recognised by the protocol layer), and the request that may
 * or may not have run on the old connection is closed off first (its
 * server-side connection is killed before the resend, see above). */
static void conn_broken(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i)
{
    distlock__conn *conn = &cs->conns[i];
    char why[128];
    snprintf(why, sizeof(why), "%s",
             conn->stream.ctx && conn->stream.ctx->errstr[0] ? conn->stream.ctx->errstr
                                                             : "connection closed");
    if (is_sentinel(t, i) && r->call && r->state == DISTLOCK__R_PENDING) {
        /* Gone: perhaps a failover. The request that may have run on the
         * old master cannot be killed from the new one, and need not be:
         * it can only run on the old server (see the top of this file). */
        distlock__ep_forget(t, i, conn->ep_state);
        if (follow(t, cs, r, i))
            return;
    }
    if (!r->fresh && !r->resent && r->call && r->state == DISTLOCK__R_PENDING) {
        const distlock__call *call = r->call;
        distlock__conn_close(t, i, conn);
        r->resent = 1;
        start_node(t, cs, call, r, i, distlock__now_us(), call_deadline(r));
        return;
    }
    /* A Cluster node's master that breaks a fresh connection (refused:
     * down, or a seed that is gone): its slots go elsewhere until the
     * cluster names it again, and the call is routed again, like a
     * Sentinel node's follow(): what may have run on the old server can
     * only run there. Not one whose certificate failed verification: it is
     * up, the cluster names it again, and its certificate is the answer
     * (rerouting would end in a MOVED back to it, without the reason). */
    if (is_cluster(t, i) && r->fresh &&
        !(conn->stream.ctx && distlock__stream_cert_refused(&conn->stream))) {
        if (r->state == DISTLOCK__R_PENDING) {
            if (cl_reroute(t, cs, r, i))
                return;
        } else {
            distlock__cl_down(t, cs, i);
        }
    }
    distlock__node_fail(t, conn, r, i, DISTLOCK_ECONN, "%s", why);
}

/* A Sentinel node's server is gone, not the master, or read-only: once per
 * call, close the connection and start again from the sentinels (its cached
 * master is already forgotten). Returns 1 if restarted (r changed). */
static int follow(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i)
{
    distlock__conn *conn = &cs->conns[i];
    if (!is_sentinel(t, i) || r->reresolved || r->call == NULL ||
        r->state != DISTLOCK__R_PENDING)
        return 0;
    const distlock__call *call = r->call;
    distlock__conn_close(t, i, conn);
    r->reresolved = 1;
    r->resent |= r->sent;
    /* The sentinels' lookup and the connection to the master they name
     * have budgets of their own (docs/sentinel.md's bound for Sentinel nodes). */
    start_node(t, cs, call, r, i, distlock__now_us(), 0);
    return 1;
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
    rr->grace_end = 0;
    rr->start = now;
    rr->np = 0;
    for (int i = 0; i < n; i++) {
        if (calls[i] == NULL) {
            memset(&res[i], 0, sizeof(res[i]));
            res[i].state = DISTLOCK__R_UNSENT;
            continue;
        }
        res[i].resent = res[i].sent = res[i].fell_back = res[i].reresolved = 0;
        res[i].redirects = res[i].ask = res[i].tries = 0;
        res[i].retry_at_us = 0;
        start_node(t, cs, calls[i], &res[i], i, now, 0);
        if (res[i].cap_us == 0)  /* the call's deadline, kept by its restarts */
            res[i].cap_us = res[i].deadline_us;
    }
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
     * at all. An undo (or release) still goes out once its connection is
     * ready, within its deadline: else it would leave a key behind. */
    if (!rr->decided && rr->decide && rr->decide(res, n, rr->arg)) {
        rr->decided = 1;
        rr->grace_end = now + (now - rr->start) + 1000u;
    }
    for (int i = 0; i < n; i++) {
        distlock__result *r = &res[i];
        distlock__conn *conn = &cs->conns[i];
        if (r->state != DISTLOCK__R_PENDING)
            continue;
        if (rr->decided && !(r->deferred && (r->call->undo || now < rr->grace_end)))
            continue;
        if (r->share && now >= r->deadline_us) {
            cl_share_over(t, cs, r, i);  /* re-routed, or the rest of its deadline */
            if (r->state != DISTLOCK__R_PENDING)
                continue;
        }
        if (now >= r->deadline_us) {
            /* No reply in time. Keep the connection with what it owes:
             * if the node is only paused, a later undo queues behind
             * the request it undoes instead of racing it. */
            if (r->clearing)
                distlock__result_fail(t, r, i, DISTLOCK_ECONN,
                                      "an earlier request for this lock is left behind on "
                                      "another master of this cluster and was not closed "
                                      "within %ld ms: not sent", r->budget_ms);
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
            /* A Cluster master that never answered its handshake: like
             * a refused one, its slots go elsewhere (the next call
             * asks another master who owns them now). */
            if (is_cluster(t, i) && r->fresh && (conn->stream.ctx == NULL || conn->hs_pending > 0))
                distlock__cl_down(t, cs, i);
            if (conn->stream.ctx && conn->qlen > 0)
                conn->late = 1;  /* the next call does not wait on it again */
            distlock__abandon(t, i, conn, r);
            /* A Sentinel node's master may be gone without a reset
             * (partition, paused): the next call asks the sentinels;
             * the same answer keeps this connection's ordering. */
            if (is_sentinel(t, i) && conn->stream.ctx)
                distlock__ep_forget(t, i, conn->ep_state);
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
        if (rr->decided && !r->call->undo && rr->grace_end < next)
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
                conn_broken(t, cs, r, i);
                continue;
            }
        }
        if (pfd[k].revents & (POLLIN | POLLERR | POLLHUP)) {
            if (distlock__stream_read(&conn->stream) != REDIS_OK) {
                conn_broken(t, cs, r, i);
                continue;
            }
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
            distlock__result_fail(t, r, i, DISTLOCK_ECONN, "not sent: its connection was not ready");
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
