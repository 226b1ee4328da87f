/* nodekind.c -- what makes a plain node, a Sentinel node and a Cluster
 * node differ, in one place: one table of hooks per kind
 * (distlock__node_kind, transport.h), chosen per node at distlock__tp_init.
 * The round (round.c), the connections (conn.c, pool.c) and the handshake
 * (request.c) call through it and test no kind themselves.
 *
 *   plain     the node's address, or its name looked up off the round's
 *             thread; nothing else.
 *   Sentinel  the master the sentinels name (sentinel.c's endpoint cache
 *             and lookup); ROLE in the handshake; a connection made under
 *             another master is not used; a broken connection, a READONLY
 *             reply, a ROLE that is not "master" or a timeout forget the
 *             master, and the call asks the sentinels again once (follow).
 *   Cluster   the master of the call's slot (cluster.c's map); CLUSTER
 *             SLOTS behind the handshake; MOVED, ASK and TRYAGAIN move the
 *             call; a master that cannot be reached is marked down and the
 *             call routed again; a request left behind on another master
 *             is closed there first (keys move between masters).
 *
 * The ordering of requests left behind across a node's servers is argued
 * at the top of round.c; what the kinds add to it is here, next to the
 * code that does it.
 *
 * Layer: 1 transport */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"

/* ------------------------------------------------------------ plain */

/* The node's own address at once (0); a name off this thread (1): a slow
 * name costs only this node. */
static int plain_lookup(distlock__transport *t, int i, distlock__resolve **res)
{
    const distlock__node_cfg *cfg = &t->nodes[i];
    if (cfg->host == NULL || distlock__host_is_numeric(cfg->host))
        return 0;
    *res = distlock__resolve_start(cfg->host);
    return *res ? 1 : -1;
}

/* The node's own address at once; a name off this thread, then
 * plain_resolved. */
static int plain_open(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i,
                      uint64_t now, long connect_ms, uint64_t wait_us)
{
    const distlock__node_cfg *cfg = &t->nodes[i];
    distlock__conn *conn = &cs->conns[i];
    (void)now, (void)connect_ms, (void)wait_us;
    int lk = plain_lookup(t, i, &conn->resolving);
    if (lk != 0) {
        if (lk < 0)
            distlock__result_fail(t, r, i, DISTLOCK_ENOMEM, "out of memory");
        r->deferred = 1;
        return -1;
    }
    char addr[1][DISTLOCK__ADDR_LEN];
    if (cfg->host)
        snprintf(addr[0], sizeof(addr[0]), "%s", cfg->host);
    distlock__round_open_at(t, cs, r, i, cfg->host ? addr : NULL, 1, 0, 0);
    return r->state == DISTLOCK__R_PENDING ? 0 : -1;
}

static void plain_resolved(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                           int i, char (*addr)[DISTLOCK__ADDR_LEN], int naddr, int port)
{
    distlock__round_open_at(t, cs, r, i, addr, naddr, port, 0);
}

const distlock__node_kind distlock__kind_plain = {
    .name = "plain",
    .addressed = 1,
    .lookup = plain_lookup,
    .open = plain_open,
    .resolved = plain_resolved,
};

/* ------------------------------------------------------------ Sentinel */

/* A Sentinel node's server is gone, not the master, or read-only: once per
 * call, close the connection and start again from the sentinels (its cached
 * master is already forgotten). Returns 1 if restarted (r changed). */
static __attribute__((noinline)) int follow(distlock__transport *t, distlock__connset *cs,
                                            distlock__result *r, int i)
{
    distlock__conn *conn = &cs->conns[i];
    if (r->reresolved || r->call == NULL ||
        r->state != DISTLOCK__R_PENDING)
        return 0;
    const distlock__call *call = r->call;
    distlock__conn_close(t, i, conn);
    r->reresolved = 1;
    r->resent |= r->sent;
    /* The sentinels' lookup and the connection to the master they name
     * have budgets of their own (docs/sentinel.md's bound for Sentinel nodes). */
    distlock__round_start(t, cs, call, r, i, distlock__now_us(), 0);
    return 1;
}

/* Its master, asked of the sentinels (on the resolver's thread). */
static int sentinel_lookup(distlock__transport *t, int i, distlock__resolve **res)
{
    *res = distlock__sentinel_start(t, i, t->connect_timeout_ms);
    return *res ? 1 : -1;
}

/* The cached master, else the sentinels (sentinel_lookup, then
 * sentinel_resolved). */
static int sentinel_open(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                         int i, uint64_t now, long connect_ms, uint64_t wait_us)
{
    distlock__conn *conn = &cs->conns[i];
    char addr[1][DISTLOCK__ADDR_LEN];
    int port = 0;
    unsigned st = 0;
    if (distlock__ep_get(t, i, addr[0], &port, &st)) {
        /* A call that follows (follow(): a failover announced while it was
         * out, a broken connection) to a master already known connects
         * within a follow's budget, the connect timeout, as after a lookup
         * (sentinel_resolved), not within a whole command timeout again:
         * a call costs at most command timeout + 2 x (lookup + connect)
         * (docs/sentinel.md). */
        if (r->reresolved) {
            distlock__set_deadline(r, now, t->connect_timeout_ms, wait_us);
            r->cap_us = r->deadline_us;
        }
        distlock__round_open_at(t, cs, r, i, addr, 1, port, st);
        if (r->state == DISTLOCK__R_PENDING)
            return 0;
        /* The master we knew is gone: ask the sentinels (once). */
        distlock__ep_forget(t, i, st);
        if (r->reresolved)
            return -1;
        r->state = DISTLOCK__R_PENDING;
        r->err[0] = '\0';
        r->reresolved = 1;
    }
    /* The sentinels' own budget; connecting gets another. The call's
     * deadline is only a backstop behind it, set well over it (half of it
     * more, at least 50 ms), so that their answer (or why none came) is
     * what the caller sees even when the lookup's thread or this one gets
     * the CPU late: a lookup that ended in time must not be lost to a
     * "no reply" for its whole call. */
    if (sentinel_lookup(t, i, &conn->resolving) < 0)
        distlock__result_fail(t, r, i, DISTLOCK_ENOMEM, "out of memory");
    long slack_ms = connect_ms / 2 > 50 ? connect_ms / 2 : 50;
    distlock__set_deadline(r, now, connect_ms, wait_us + (uint64_t)slack_ms * 1000u);
    r->deferred = 1;
    return -1;
}

static void sentinel_resolved(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                              int i, char (*addr)[DISTLOCK__ADDR_LEN], int naddr, int port)
{
    (void)naddr;  /* the master: one address */
    unsigned ep_state = distlock__ep_learn(t, i, addr[0], &port);
    /* The lookup had its own budget: connecting gets a fresh one. */
    r->deadline_us = distlock__now_us() + (uint64_t)t->connect_timeout_ms * 1000u +
                     (r->call->wait_replicas > 0 ? (uint64_t)r->call->wait_ms * 1000u : 0);
    r->cap_us = r->deadline_us;
    r->budget_ms = t->connect_timeout_ms;
    distlock__round_open_at(t, cs, r, i, addr, 1, port, ep_state);
    if (r->state == DISTLOCK__R_FAILED)
        distlock__ep_forget(t, i, ep_state);  /* the next call asks again */
}

/* A connection made under another master than the one known now goes to
 * the old server. */
static int sentinel_current(distlock__transport *t, int i, const distlock__conn *conn)
{
    return distlock__ep_current(t, i, conn->ep_state);
}

/* The sentinels' answer may be out of date (a failover under way): only
 * the master itself says it is one. */
static int sentinel_handshake(distlock__transport *t, int i, distlock__conn *conn,
                              distlock__result *r)
{
    (void)t, (void)i;
    const char *argv[1] = { "ROLE" };
    static const size_t len[1] = { 4 };
    return distlock__append_cmd(conn, r, DISTLOCK__K_NODE_HS, 0, 0, 1, argv, len);
}

/* ROLE's reply. */
static int sentinel_reply(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                          int i, const redisReply *rep)
{
    distlock__conn *conn = &cs->conns[i];
    int is_err = rep->type == REDIS_REPLY_ERROR;
    const char *role = rep->type == REDIS_REPLY_ARRAY && rep->elements > 0 &&
                               rep->element[0]->type == REDIS_REPLY_STRING
                           ? rep->element[0]->str : NULL;
    if (role && strcmp(role, "master") == 0)
        return 0;
    /* The sentinels named a server that is not (or no longer) the master.
     * No call was sent behind the handshake: ask again. */
    char what[80];
    snprintf(what, sizeof(what), "%.*s", is_err ? distlock__reply_shown_len(rep->str, 60) : 60,
             is_err ? rep->str : role ? role : "?");
    distlock__ep_forget(t, i, conn->ep_state);
    if (follow(t, cs, r, i))
        return -1;
    distlock__node_fail(t, conn, r, i, DISTLOCK_ECONN,
                        "the server the sentinels named is not the master (ROLE: %s)", what);
    return -1;
}

/* READONLY: a master turned replica under us (failover): nothing was
 * written. Ask the sentinels and send it to the new one. */
static int sentinel_error(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                          int i, const char *err)
{
    if (strncmp(err, "READONLY", 8) != 0)
        return 0;
    distlock__ep_forget(t, i, cs->conns[i].ep_state);
    if (follow(t, cs, r, i))
        return -1;
    distlock__node_fail(t, &cs->conns[i], r, i, DISTLOCK_ECONN, "READONLY: not the master");
    return -1;
}

/* Gone: perhaps a failover. The request that may have run on the old
 * master cannot be killed from the new one, and need not be: it can only
 * run on the old server (see the top of round.c). */
static int sentinel_broken(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                           int i)
{
    if (r->call == NULL || r->state != DISTLOCK__R_PENDING)
        return 0;
    distlock__ep_forget(t, i, cs->conns[i].ep_state);
    return follow(t, cs, r, i);
}

/* The master may be gone without a reset (partition, paused): the next
 * call asks the sentinels; the same answer keeps this connection's
 * ordering. */
static int sentinel_timed_out(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                              int i)
{
    (void)r;
    if (cs->conns[i].stream.ctx)
        distlock__ep_forget(t, i, cs->conns[i].ep_state);
    return 0;
}

const distlock__node_kind distlock__kind_sentinel = {
    .name = "sentinel",
    .lookup = sentinel_lookup,
    .current = sentinel_current,
    .open = sentinel_open,
    .resolved = sentinel_resolved,
    .handshake = sentinel_handshake,
    .reply = sentinel_reply,
    .error = sentinel_error,
    .broken = sentinel_broken,
    .timed_out = sentinel_timed_out,
};

/* ------------------------------------------------------------ Cluster */

/* TRYAGAIN resends: the pause doubles this many times at most (2 .. 64 ms). */
#define TRYAGAIN_DOUBLINGS 5

static int cl_reroute(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i)
    __attribute__((noinline));

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
        uint64_t now = distlock__now_us(), cap = distlock__call_deadline(r);
        if (r->cap_us == 0)
            r->cap_us = cap;
        if (cap > now) {
            r->deadline_us = now + (cap - now) / 2;
            r->share = 1;
        }
    }
    if (kind == 1) {  /* a name: resolved off this thread, then cluster_resolved() */
        conn->resolving = distlock__cl_resolve(t, cs, i);
        if (conn->resolving == NULL)
            distlock__result_fail(t, r, i, DISTLOCK_ENOMEM, "out of memory");
        r->deferred = 1;
        return -1;
    }
    (void)call;
    distlock__round_open_at(t, cs, r, i, addr, 1, port, ep_state);
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
                              "an earlier request for %s is left behind on another "
                              "master of this cluster, which cannot be reached to close it: "
                              "not sent", distlock__subject(r->call));
        return 1;
    }
    if (r->call == NULL || r->redirects >= DISTLOCK__CL_REDIRECTS)
        return 0;
    const distlock__call *call = r->call;
    distlock__conn_close(t, i, &cs->conns[i]);
    r->redirects++;
    r->ask = 0;
    r->resent |= r->sent;
    distlock__round_start(t, cs, call, r, i, distlock__now_us(), distlock__call_deadline(r));
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

/* Start node i's call on a Cluster node (round.c's start_node; conns[i] is
 * routed to the master of its slot). A request of its tag left behind on
 * another master (one that timed out there) runs there whenever it
 * arrives, and the key may be there again by then: a slot migrates away and back,
 * or one master is reached by two addresses (a seed and the address the
 * cluster announces) that conns[i] does not know to be one server. So,
 * unlike a Sentinel node's (see the top of round.c), it is closed before
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
                              "an earlier request for %s is left behind on another "
                              "master of this cluster (%s): not sent", distlock__subject(call),
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
                              "an earlier request for %s is still on its way to another "
                              "master of this cluster: not sent", distlock__subject(call));
        return -1;
    }
    distlock__round_start(t, cs, call, r, i, distlock__now_us(), distlock__call_deadline(r));
    return -1;
}

/* MOVED or ASK from a Cluster node's master: send the call again where it
 * says (ASKING first for an ASK), and after a MOVED ask that master for the
 * whole map too. Returns 1 if restarted (r changed), 0 if err is neither.
 * (inlined into cluster_error, its one caller: one frame less on the
 * deepest stack path, a redirect inside a round nested in another) */
static inline __attribute__((always_inline)) int cl_redirect(distlock__transport *t,
                                                             distlock__connset *cs,
                                                             distlock__result *r, int i,
                                                             const char *err)
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
    distlock__round_start(t, cs, call, r, i, distlock__now_us(), distlock__call_deadline(r));
    distlock__conn *conn = &cs->conns[i];
    if (k == 1 && r->state == DISTLOCK__R_PENDING && !r->fresh && conn->stream.ctx) {
        const char *argv[2] = { "CLUSTER", "SLOTS" };
        static const size_t len[2] = { 7, 5 };
        if (distlock__append_cmd(conn, NULL, DISTLOCK__K_NODE, 0, 0, 2, argv, len) == 0)
            distlock__round_flush(t, cs, r, i);
    }
    return 1;
}

/* The connection to the master of the call's slot; first, a request of
 * its tag left behind on another master is closed there (cl_clear_first;
 * the filter keeps this off the common path). */
static int cluster_route(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                         int i)
{
    const distlock__call *call = r->call;
    distlock__cl_route(t, cs, i, call, r->ask - 1);
    if (call->tag && !call->trailing && distlock__stale_maybe(t, i, call->tag) &&
        cl_clear_first(t, cs, r, i, call) != 0)
        return -1;
    return 0;
}

static int cluster_open(distlock__transport *t, distlock__connset *cs, distlock__result *r, int i,
                        uint64_t now, long connect_ms, uint64_t wait_us)
{
    (void)now, (void)connect_ms, (void)wait_us;
    return cl_open(t, cs, r, i, r->call);
}

static void cluster_resolved(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                             int i, char (*addr)[DISTLOCK__ADDR_LEN], int naddr, int port)
{
    unsigned ep_state = 0;
    if (distlock__cl_target(t, cs, i, NULL, &port, &ep_state) < 0) {
        distlock__result_fail(t, r, i, DISTLOCK_ECONN, "no master known");
        return;
    }
    distlock__round_open_at(t, cs, r, i, addr, naddr, port, ep_state);
}

/* A master's name that no longer resolves (its pod and its DNS record are
 * gone after a failover): like a refusal. */
static void cluster_lookup_failed(distlock__transport *t, distlock__connset *cs,
                                  distlock__result *r, int i)
{
    (void)cl_reroute(t, cs, r, i);
}

/* A master's TLS certificate names its own host, not the seed's. */
static char *cluster_tls_host(distlock__transport *t, distlock__connset *cs, int i)
{
    return distlock__cl_host(t, cs, i);
}

/* The slot map, fresh from this master (cluster.c); the call need not
 * wait for it. */
static int cluster_handshake_tail(distlock__transport *t, int i, distlock__conn *conn)
{
    (void)t, (void)i;
    const char *argv[2] = { "CLUSTER", "SLOTS" };
    static const size_t len[2] = { 7, 5 };
    return distlock__append_cmd(conn, NULL, DISTLOCK__K_NODE, 0, 0, 2, argv, len);
}

static int cluster_reply(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                         int i, const redisReply *rep)
{
    (void)r;
    distlock__cl_learn(t, i, cs->cl ? cs->cl[i]->cur : -1, rep);
    return 0;
}

/* After an ASK: ASKING (its OK is dropped; an error shows in the call's
 * own reply). */
static int cluster_before_call(distlock__conn *conn)
{
    const char *argv[1] = { "ASKING" };
    static const size_t len[1] = { 6 };
    return distlock__append_cmd(conn, NULL, DISTLOCK__K_ASKING, 0, 0, 1, argv, len);
}

static int cluster_error(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                         int i, const char *err)
{
    /* MOVED / ASK: nothing ran here; send it where the cluster says. */
    if (r->redirects < DISTLOCK__CL_REDIRECTS && (err[0] == 'M' || err[0] == 'A') &&
        cl_redirect(t, cs, r, i, err) != 0)
        return -1;
    /* A multi-key call while its slot migrates: nothing ran. Sent again
     * after a pause, within its deadline; the last TRYAGAIN is its reply. */
    if (strncmp(err, "TRYAGAIN", 8) == 0 && tryagain(r))
        return 1;
    return 0;
}

/* A master that breaks a fresh connection (refused: down, or a seed that
 * is gone): its slots go elsewhere until the cluster names it again, and
 * the call is routed again, like a Sentinel node's follow(): what may have
 * run on the old server can only run there. Not one whose certificate
 * failed verification: it is up, the cluster names it again, and its
 * certificate is the answer (rerouting would end in a MOVED back to it,
 * without the reason). */
static int cluster_broken(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                          int i)
{
    distlock__conn *conn = &cs->conns[i];
    if (!r->fresh || (conn->stream.ctx && distlock__stream_cert_refused(&conn->stream)))
        return 0;
    if (r->state == DISTLOCK__R_PENDING)
        return cl_reroute(t, cs, r, i);
    distlock__cl_down(t, cs, i);
    return 0;
}

static void cluster_deadline(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                             int i)
{
    if (r->share)
        cl_share_over(t, cs, r, i);  /* re-routed, or the rest of its deadline */
}

static int cluster_timed_out(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                             int i)
{
    distlock__conn *conn = &cs->conns[i];
    int own = 0;
    if (r->clearing) {
        distlock__result_fail(t, r, i, DISTLOCK_ECONN,
                              "an earlier request for %s is left behind on another master of "
                              "this cluster and was not closed within %ld ms: not sent",
                              distlock__subject(r->call), r->budget_ms);
        own = 1;
    }
    /* A master that never answered its handshake: like a refused one, its
     * slots go elsewhere (the next call asks another master who owns them
     * now). */
    if (r->fresh && (conn->stream.ctx == NULL || conn->hs_pending > 0))
        distlock__cl_down(t, cs, i);
    return own;
}

/* The set's connections to the node's other masters. */
static void cluster_each_conn(distlock__transport *t, distlock__connset *cs, int i,
                              void (*fn)(distlock__transport *t, int i, distlock__conn *conn))
{
    for (int m = 0; cs->cl && cs->cl[i] && m < DISTLOCK__CL_MASTERS; m++)
        fn(t, i, &cs->cl[i]->c[m]);
}

const distlock__node_kind distlock__kind_cluster = {
    .name = "cluster",
    .keys_move = 1,
    .sharded = 1,
    .route = cluster_route,
    .open = cluster_open,
    .resolved = cluster_resolved,
    .lookup_failed = cluster_lookup_failed,
    .tls_host = cluster_tls_host,
    .handshake_tail = cluster_handshake_tail,
    .reply = cluster_reply,
    .before_call = cluster_before_call,
    .error = cluster_error,
    .broken = cluster_broken,
    .deadline = cluster_deadline,
    .timed_out = cluster_timed_out,
    .cleared = cl_cleared,
    .each_conn = cluster_each_conn,
};

const distlock__node_kind *distlock__node_kind_of(const distlock__node_cfg *cfg)
{
    switch (cfg->kind) {
    case DISTLOCK__NODE_SENTINEL:
        return &distlock__kind_sentinel;
    case DISTLOCK__NODE_CLUSTER:
        return &distlock__kind_cluster;
    default:
        return &distlock__kind_plain;
    }
}
