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
 * Requests left behind are listed per client (distlock__stale, under c->mu);
 * the list is empty in steady state, so the common path only reads an
 * atomic flag.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include "internal.h"

/* A connection that owes more replies than this is given up (closed); what
 * it still owes is remembered as orphaned requests. */
#define OWED_MAX 256
/* Connections idle longer than this are checked for a server-side close
 * before use. */
#define IDLE_CHECK_US 200000u
/* A connection that has owed replies this long is given up too: the node
 * may be gone for good (no RST ever comes), and a new connection probes it. */
#define STALE_CLOSE_US 30000000u

/* ------------------------------------------------------------ owed FIFO */

static distlock__owed *q_at(distlock__conn *conn, int k)
{
    return &conn->q[(conn->qhead + k) % conn->qcap];
}

static int q_push(distlock__conn *conn, uint64_t tag, int kind, int arg, distlock__result *owner)
{
    if (conn->qlen == conn->qcap) {
        int cap = conn->qcap ? conn->qcap * 2 : 16;
        distlock__owed *q = malloc(sizeof(*q) * (size_t)cap);
        if (q == NULL)
            return -1;
        for (int k = 0; k < conn->qlen; k++)
            q[k] = *q_at(conn, k);
        free(conn->q);
        conn->q = q;
        conn->qcap = cap;
        conn->qhead = 0;
    }
    distlock__owed *o = &conn->q[(conn->qhead + conn->qlen) % conn->qcap];
    o->tag = tag;
    o->sent_us = distlock__now_us();
    o->kind = kind;
    o->arg = arg;
    o->owner = owner;
    conn->qlen++;
    return 0;
}

static distlock__owed q_pop(distlock__conn *conn)
{
    distlock__owed o = conn->q[conn->qhead];
    conn->qhead = (conn->qhead + 1) % conn->qcap;
    conn->qlen--;
    return o;
}

static int owes_kind(distlock__conn *conn, int kind)
{
    for (int k = 0; k < conn->qlen; k++)
        if (q_at(conn, k)->kind == kind)
            return 1;
    return 0;
}

static int owes_tag(distlock__conn *conn, uint64_t tag)
{
    for (int k = 0; k < conn->qlen; k++)
        if (q_at(conn, k)->kind == DISTLOCK__K_CALL && q_at(conn, k)->tag == tag)
            return 1;
    return 0;
}

/* ------------------------------------------------------------ stale list (c->mu) */

static unsigned stale_bucket(int node, uint64_t tag)
{
    return (unsigned)((tag ^ (tag >> 29) ^ ((uint64_t)node * 0x9e3779b97f4a7c15ull)) & 255u);
}

/* Might the list hold an entry for this node and tag? (no lock) */
static int stale_maybe(distlock_client *c, int node, uint64_t tag)
{
    return atomic_load_explicit(&c->stale_filter[stale_bucket(node, tag)], memory_order_acquire) != 0;
}

static void stale_add_locked(distlock_client *c, int node, uint64_t tag, const distlock__conn *conn,
                             int open)
{
    for (int k = 0; k < c->nstale; k++) {
        distlock__stale *s = &c->stale[k];
        if (s->node == node && s->tag == tag && s->serial == conn->serial) {
            s->count++;
            s->open = s->open && open;
            return;
        }
    }
    if (c->nstale == c->stale_cap) {
        int cap = c->stale_cap ? c->stale_cap * 2 : 8;
        distlock__stale *grown = realloc(c->stale, sizeof(*grown) * (size_t)cap);
        if (grown == NULL)
            return;  /* nothing better to do: the KILL is then skipped */
        c->stale = grown;
        c->stale_cap = cap;
    }
    c->stale[c->nstale++] = (distlock__stale){ node, tag, conn->serial, conn->srv_id, open, 1 };
    atomic_fetch_add(&c->stale_filter[stale_bucket(node, tag)], 1);
}

static void stale_remove_at_locked(distlock_client *c, int k)
{
    atomic_fetch_sub(&c->stale_filter[stale_bucket(c->stale[k].node, c->stale[k].tag)], 1);
    c->stale[k] = c->stale[--c->nstale];
}

/* A request left behind on this connection has answered. */
static void stale_done(distlock_client *c, int node, uint64_t tag, uint64_t serial)
{
    pthread_mutex_lock(&c->mu);
    for (int k = 0; k < c->nstale; k++) {
        distlock__stale *s = &c->stale[k];
        if (s->node == node && s->tag == tag && s->serial == serial) {
            if (--s->count == 0)
                stale_remove_at_locked(c, k);
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* The server confirmed that its connection srv_id is closed: nothing sent on
 * it can execute any more. */
static void stale_killed(distlock_client *c, int node, long long srv_id)
{
    pthread_mutex_lock(&c->mu);
    for (int k = 0; k < c->nstale;) {
        if (c->stale[k].node == node && c->stale[k].srv_id == srv_id)
            stale_remove_at_locked(c, k);
        else
            k++;
    }
    pthread_mutex_unlock(&c->mu);
}

/* Server ids of closed connections to `node` that carried requests with
 * `tag` left behind. Returns how many (at most max), or -1 if one of them
 * has no known id (it cannot be closed from here). *open_elsewhere: such
 * requests are also queued on another open connection of ours (another
 * thread's: we do not kill it under that thread's feet). */
static int stale_find(distlock_client *c, int node, uint64_t tag, const distlock__conn *conn,
                      long long *ids, int max, int *open_elsewhere)
{
    int n = 0;
    *open_elsewhere = 0;
    pthread_mutex_lock(&c->mu);
    for (int k = 0; k < c->nstale; k++) {
        const distlock__stale *s = &c->stale[k];
        if (s->node != node || s->tag != tag || s->serial == conn->serial)
            continue;
        if (s->open) {
            *open_elsewhere = 1;
            continue;
        }
        if (s->srv_id < 0) {
            n = -1;
            break;
        }
        int dup = 0;
        for (int j = 0; j < n; j++)
            dup |= ids[j] == s->srv_id;
        if (!dup && n < max)
            ids[n++] = s->srv_id;
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* ------------------------------------------------------------ connections */

static void conn_reset(distlock__conn *conn)
{
    if (conn->ctx)
        redisFree(conn->ctx);  /* closes our fd; writes nothing */
    conn->ctx = NULL;
    conn->srv_id = -1;
    conn->hs_pending = 0;
    conn->qlen = conn->qhead = 0;
    distlock__resolve_drop(conn->resolving);
    conn->resolving = NULL;
}

void distlock__conn_forget(distlock__conn *conn)
{
    conn_reset(conn);
    free(conn->q);
    conn->q = NULL;
    conn->qcap = 0;
}

void distlock__conn_close(distlock_client *c, int i, distlock__conn *conn)
{
    /* Requests whose replies we will never read may still execute: keep
     * them listed (as orphans) so that a later request with the same tag
     * first closes their server-side connection. */
    int tagged = 0;
    for (int k = 0; k < conn->qlen; k++)
        tagged |= q_at(conn, k)->kind == DISTLOCK__K_CALL && q_at(conn, k)->tag != 0;
    if (tagged) {
        pthread_mutex_lock(&c->mu);
        for (int k = 0; k < conn->qlen; k++) {
            distlock__owed *o = q_at(conn, k);
            if (o->kind == DISTLOCK__K_CALL && o->tag != 0 && o->owner != NULL)
                stale_add_locked(c, i, o->tag, conn, 0);
        }
        for (int k = 0; k < c->nstale; k++)
            if (c->stale[k].serial == conn->serial)
                c->stale[k].open = 0;
        pthread_mutex_unlock(&c->mu);
    }
    conn_reset(conn);
}

static void result_fail(distlock_client *c, distlock__result *r, int i, int status,
                        const char *what)
{
    snprintf(r->err, sizeof(r->err), "%s: %s", c->nodes[i].uri, what);
    r->state = DISTLOCK__R_FAILED;
    r->status = status;
}

static void node_fail(distlock_client *c, distlock__conn *conn, distlock__result *r, int i,
                      int status, const char *what)
{
    result_fail(c, r, i, status, what);
    distlock__conn_close(c, i, conn);
}

/* This round stops waiting for node i: what it still owes there is left
 * behind (its replies are discarded when they come). */
static void abandon(distlock_client *c, int i, distlock__conn *conn, distlock__result *r)
{
    int tagged = 0;
    for (int k = 0; k < conn->qlen; k++) {
        distlock__owed *o = q_at(conn, k);
        if (o->owner == r)
            tagged |= o->kind == DISTLOCK__K_CALL && o->tag != 0;
    }
    if (tagged)
        pthread_mutex_lock(&c->mu);
    for (int k = 0; k < conn->qlen; k++) {
        distlock__owed *o = q_at(conn, k);
        if (o->owner != r)
            continue;
        o->owner = NULL;
        if (o->kind == DISTLOCK__K_CALL && o->tag != 0)
            stale_add_locked(c, i, o->tag, conn, 1);
    }
    if (tagged)
        pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------ encoding */

/* Encode a command in RESP ourselves, into a stack buffer when it fits:
 * hiredis' redisFormatSdsCommandArgv (sdscatfmt per argument) was ~40% of
 * the client's instructions per lock+unlock. */
static char *resp_header(char *p, char type, size_t n)
{
    *p++ = type;
    p += distlock__ltoa(p, (long long)n);
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

static int append_argv(redisContext *ctx, int argc, const char **argv, const size_t *len)
{
    char stack[512], *buf = stack, *p;  /* a lock request with a short key fits */
    size_t total = 16;
    int rc;

    for (int a = 0; a < argc; a++)
        total += len[a] + 28;
    if (total > sizeof(stack) && (buf = malloc(total)) == NULL)
        return -1;
    p = resp_header(buf, '*', (size_t)argc);
    for (int a = 0; a < argc; a++) {
        p = resp_header(p, '$', len[a]);
        memcpy(p, argv[a], len[a]);
        p += len[a];
        *p++ = '\r';
        *p++ = '\n';
    }
    rc = redisAppendFormattedCommand(ctx, buf, (size_t)(p - buf)) == REDIS_OK ? 0 : -1;
    if (buf != stack)
        free(buf);
    return rc;
}

static int append_cmd(distlock__conn *conn, distlock__result *owner, int kind, int arg,
                      uint64_t tag, int argc, const char **argv, const size_t *len)
{
    if (append_argv(conn->ctx, argc, argv, len) != 0 || q_push(conn, tag, kind, arg, owner) != 0)
        return -1;
    return 0;
}

/* AUTH and SELECT for a fresh connection, CLIENT ID (to be able to close it
 * from another connection, see the top of this file) and SCRIPT LOAD of
 * every script, so EVALSHA finds them even on a restarted server and we
 * learn their SHA1. Credentials are read under c->mu: another thread may
 * be replacing them. */
static int append_handshake(distlock_client *c, int i, distlock__conn *conn, distlock__result *r)
{
    const distlock__node_cfg *cfg = &c->nodes[i];
    const char *argv[3];
    size_t len[3];
    char db[16];
    int rc = 0, n0 = conn->qlen;

    pthread_mutex_lock(&c->mu);
    const char *user = c->username ? c->username : cfg->user;
    const char *pass = c->password ? c->password : cfg->pass;
    conn->cred_gen = atomic_load(&c->cred_gen);
    if (pass) {
        int k = 0;
        argv[k] = "AUTH", len[k] = 4, k++;
        if (user)
            argv[k] = user, len[k] = strlen(user), k++;
        argv[k] = pass, len[k] = strlen(pass), k++;
        rc = append_cmd(conn, r, DISTLOCK__K_AUTH, 0, 0, k, argv, len);
    }
    pthread_mutex_unlock(&c->mu);
    if (rc == 0 && cfg->db) {
        argv[0] = "SELECT", len[0] = 6;
        argv[1] = db, len[1] = distlock__ltoa(db, cfg->db);
        rc = append_cmd(conn, r, DISTLOCK__K_SELECT, 0, 0, 2, argv, len);
    }
    if (rc == 0) {
        argv[0] = "CLIENT", len[0] = 6;
        argv[1] = "ID", len[1] = 2;
        rc = append_cmd(conn, r, DISTLOCK__K_ID, 0, 0, 2, argv, len);
    }
    for (int s = 0; rc == 0 && s < DISTLOCK__S_COUNT; s++) {
        argv[0] = "SCRIPT", len[0] = 6;
        argv[1] = "LOAD", len[1] = 4;
        argv[2] = distlock__scripts[s].body, len[2] = strlen(distlock__scripts[s].body);
        rc = append_cmd(conn, r, DISTLOCK__K_LOAD, s, 0, 3, argv, len);
    }
    conn->hs_pending += conn->qlen - n0;
    return rc;
}

/* EVALSHA when we know the script's SHA1, else EVAL (which also caches it). */
static int append_call(distlock_client *c, distlock__conn *conn, distlock__result *owner,
                       const distlock__call *call, int force_eval)
{
    const char *sargv[16], **argv = sargv;
    size_t slen[16], *len = slen;
    char nk[24];
    int k = 0, rc;

    if (call->script < 0)
        return append_cmd(conn, owner, DISTLOCK__K_CALL, 0, call->tag, call->argc, call->argv,
                          call->argvlen);
    if (call->argc + 3 > 16) {  /* batched renewals */
        argv = malloc(sizeof(*argv) * (size_t)(call->argc + 3));
        len = malloc(sizeof(*len) * (size_t)(call->argc + 3));
        if (!argv || !len) {
            free(argv);
            free(len);
            return -1;
        }
    }
    if (!force_eval && atomic_load_explicit(&c->sha_ok[call->script], memory_order_acquire)) {
        argv[k] = "EVALSHA", len[k] = 7, k++;
        argv[k] = c->sha[call->script], len[k] = 40, k++;
    } else {
        argv[k] = "EVAL", len[k] = 4, k++;
        argv[k] = distlock__scripts[call->script].body;
        len[k] = strlen(argv[k]), k++;
    }
    argv[k] = nk, len[k] = distlock__ltoa(nk, call->nkeys), k++;
    for (int a = 0; a < call->argc; a++)
        argv[k] = call->argv[a], len[k] = call->argvlen[a], k++;
    rc = append_cmd(conn, owner, DISTLOCK__K_CALL, 0, call->tag, k, argv, len);
    if (argv != sargv) {
        free(argv);
        free(len);
    }
    return rc;
}

static int append_kill(distlock__conn *conn, distlock__result *owner, long long srv_id)
{
    char id[24];
    const char *argv[4] = { "CLIENT", "KILL", "ID", id };
    size_t len[4] = { 6, 4, 2, distlock__ltoa(id, srv_id) };
    return append_cmd(conn, owner, DISTLOCK__K_KILL, 0, (uint64_t)srv_id, 4, argv, len);
}

static void learn_sha(distlock_client *c, int s, const redisReply *rep)
{
    if (rep->type != REDIS_REPLY_STRING || rep->len != 40 ||
        atomic_load_explicit(&c->sha_ok[s], memory_order_acquire))
        return;
    pthread_mutex_lock(&c->mu);
    if (!atomic_load_explicit(&c->sha_ok[s], memory_order_relaxed)) {
        memcpy(c->sha[s], rep->str, 40);
        c->sha[s][40] = '\0';
        atomic_store_explicit(&c->sha_ok[s], 1, memory_order_release);
    }
    pthread_mutex_unlock(&c->mu);
}

/* Two nodes of the list must be two servers: a Redlock whose quorum is one
 * server would silently lose its safety. Names are only known to be the
 * same server once resolved and connected, so this is checked here. */
static int check_peer(distlock_client *c, int i, distlock__conn *conn)
{
    char me[64] = "";
    const distlock__node_cfg *cfg = &c->nodes[i];
    if (cfg->path) {
        struct stat st;
        if (stat(cfg->path, &st) == 0)
            snprintf(me, sizeof(me), "unix:%lu:%lu", (unsigned long)st.st_dev,
                     (unsigned long)st.st_ino);
    } else {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        char ip[48] = "";
        if (getpeername(conn->ctx->fd, (struct sockaddr *)&ss, &sl) == 0) {
            if (ss.ss_family == AF_INET)
                inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof(ip));
            else if (ss.ss_family == AF_INET6)
                inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip, sizeof(ip));
            if (ip[0])
                snprintf(me, sizeof(me), "%s:%d", ip, cfg->port);
        }
    }
    if (me[0] == '\0')
        return 0;
    int dup = -1;
    pthread_mutex_lock(&c->mu);
    for (int j = 0; j < c->n && dup < 0; j++)
        if (j != i && strcmp(c->peer[j], me) == 0)
            dup = j;
    if (dup < 0) {
        memcpy(c->peer[i], me, sizeof(me));
    } else if (!atomic_load(&c->config_error)) {
        snprintf(c->config_detail, sizeof(c->config_detail),
                 "%s and %s are the same server (%s): Redlock needs independent servers",
                 c->nodes[dup].uri, cfg->uri, me);
        atomic_store(&c->config_error, 1);
    }
    pthread_mutex_unlock(&c->mu);
    return dup < 0 ? 0 : -1;
}

/* ------------------------------------------------------------ sending */

static void conn_broken(distlock_client *c, distlock__connset *cs, distlock__result *r, int i);

/* Write the call now (the connection is ready): one more reply is due. */
static int send_call(distlock_client *c, distlock__connset *cs, distlock__result *r, int i,
                     const distlock__call *call, int force_eval)
{
    distlock__conn *conn = &cs->conns[i];
    int done = 0;
    if (append_call(c, conn, r, call, force_eval) != 0) {
        node_fail(c, conn, r, i, DISTLOCK_ENOMEM, "out of memory");
        return -1;
    }
    r->sent = 1;
    r->deferred = 0;
    if (distlock__write(conn->ctx, &done) != REDIS_OK) {
        conn_broken(c, cs, r, i);
        return -1;
    }
    return 0;
}

/* Before the call: close the server-side connections that carry earlier
 * requests with its tag (see the top of this file). */
static int add_kills(distlock_client *c, distlock__conn *conn, distlock__result *r, int i)
{
    long long ids[16];
    int open_elsewhere;
    const distlock__call *call = r->call;
    if (call->tag == 0 || !stale_maybe(c, i, call->tag))
        return 0;
    int n = stale_find(c, i, call->tag, conn, ids, 16, &open_elsewhere);
    if (n < 0) {
        result_fail(c, r, i, DISTLOCK_ECONN,
                    "an earlier request for this lock may still arrive on a lost connection "
                    "(whose id is unknown): not sent");
        return -1;
    }
    /* Another thread's connection still carries an earlier request of this
     * ownership: an acquire or extend sent here could run before it (and be
     * undone or shortened by it), so this node is skipped for it. An undo
     * goes out: at worst the earlier request lands after it and leaves a
     * key until its TTL. */
    if (open_elsewhere && !call->undo) {
        result_fail(c, r, i, DISTLOCK_ECONN,
                    "an earlier request for this lock is still on its way on another "
                    "connection: not sent");
        return -1;
    }
    /* An undo need not wait for the KILLs: whichever runs first, it can
     * only remove what the requests it follows may have written. */
    for (int k = 0; k < n; k++) {
        if (append_kill(conn, call->undo ? NULL : r, ids[k]) != 0) {
            node_fail(c, conn, r, i, DISTLOCK_ENOMEM, "out of memory");
            return -1;
        }
        r->pre += !call->undo;
    }
    return 0;
}

static int try_send(distlock_client *c, distlock__connset *cs, distlock__result *r, int i)
{
    if (r->state == DISTLOCK__R_PENDING && r->deferred && cs->conns[i].hs_pending == 0 &&
        r->pre == 0)
        return send_call(c, cs, r, i, r->call, 0);
    return 0;
}

/* Take every reply available on node i; r is this round's result for it.
 * Returns 0, or -1 if the node failed or was restarted (r changed). */
static int take_replies(distlock_client *c, distlock__connset *cs, distlock__result *r, int i)
{
    distlock__conn *conn = &cs->conns[i];
    while (conn->ctx && conn->qlen > 0) {
        void *p = NULL;
        if (redisGetReplyFromReader(conn->ctx, &p) != REDIS_OK) {
            node_fail(c, conn, r, i, DISTLOCK_EPROTO, "protocol error");
            return -1;
        }
        if (p == NULL)
            return 0;  /* need more bytes */
        redisReply *rep = p;
        distlock__owed o = q_pop(conn);
        int is_err = rep->type == REDIS_REPLY_ERROR;
        switch (o.kind) {
        case DISTLOCK__K_AUTH:
        case DISTLOCK__K_SELECT: {
            conn->hs_pending--;
            if (!is_err)
                break;
            /* Nothing of ours was sent behind it (calls wait for the
             * handshake), so closing here runs nothing as another user. */
            char msg[160];
            snprintf(msg, sizeof(msg), "%s failed: %s",
                     o.kind == DISTLOCK__K_AUTH ? "authentication" : "SELECT", rep->str);
            freeReplyObject(rep);
            node_fail(c, conn, r, i, DISTLOCK_EPROTO, msg);
            return -1;
        }
        case DISTLOCK__K_ID:
            conn->hs_pending--;
            if (rep->type == REDIS_REPLY_INTEGER)
                conn->srv_id = rep->integer;
            if (check_peer(c, i, conn) != 0) {
                freeReplyObject(rep);
                node_fail(c, conn, r, i, DISTLOCK_EINVAL, "the same server as another node");
                return -1;
            }
            break;
        case DISTLOCK__K_LOAD:
            conn->hs_pending--;
            learn_sha(c, o.arg, rep);
            break;
        case DISTLOCK__K_KILL:
            if (is_err && strncmp(rep->str, "ERR No such client", 18) != 0) {
                if (o.owner == r && r->state == DISTLOCK__R_PENDING) {
                    char msg[160];
                    snprintf(msg, sizeof(msg),
                             "an earlier request for this lock is still queued on another "
                             "connection and CLIENT KILL failed (%s): not sent", rep->str);
                    result_fail(c, r, i, DISTLOCK_EPROTO, msg);
                }
            } else {
                stale_killed(c, i, (long long)o.tag);
            }
            if (o.owner)
                o.owner->pre--;
            break;
        default:  /* DISTLOCK__K_CALL */
            if (o.owner == NULL) {
                if (o.tag)
                    stale_done(c, i, o.tag, conn->serial);
                break;
            }
            if (is_err && !r->retried && r->call->script >= 0 &&
                strncmp(rep->str, "NOSCRIPT", 8) == 0) {
                /* The server lost its script cache (restart, SCRIPT FLUSH,
                 * failover): send the body with EVAL, which caches it. */
                freeReplyObject(rep);
                r->retried = 1;
                if (send_call(c, cs, r, i, r->call, 1) != 0)
                    return -1;
                continue;
            }
            if (is_err && !r->retried && r->call->fallback &&
                strncmp(rep->str, "ERR syntax", 10) == 0) {
                /* An older server without SET ... NX GET: use the script,
                 * now and for every later call of this client. */
                freeReplyObject(rep);
                atomic_store(&c->no_set_get, 1);
                r->retried = 1;
                r->call = r->call->fallback;
                if (send_call(c, cs, r, i, r->call, 0) != 0)
                    return -1;
                continue;
            }
            r->reply = rep;
            r->state = DISTLOCK__R_DONE;
            rep = NULL;
            break;
        }
        if (rep)
            freeReplyObject(rep);
        if (try_send(c, cs, r, i) != 0)
            return -1;
    }
    return 0;
}

/* Read what node i has sent without blocking; -1 if the connection is gone. */
static int drain(distlock_client *c, distlock__connset *cs, distlock__result *r, int i)
{
    distlock__conn *conn = &cs->conns[i];
    struct pollfd pfd = { conn->ctx->fd, POLLIN, 0 };
    if (poll(&pfd, 1, 0) > 0) {
        if (redisBufferRead(conn->ctx) != REDIS_OK) {
            distlock__conn_close(c, i, conn);
            return -1;
        }
        return take_replies(c, cs, r, i);
    }
    return 0;
}

/* Open the connection to node i at its numeric address(es) and queue the
 * handshake; the call follows once the handshake succeeded. */
static void open_at(distlock_client *c, distlock__connset *cs, distlock__result *r, int i,
                    char (*addr)[48], int naddr)
{
    distlock__conn *conn = &cs->conns[i];
    int st = DISTLOCK_ECONN;
    char err[192] = "";
    /* Loopback refusals are reported at once: try the next address then. */
    for (int k = 0; conn->ctx == NULL && k < (addr ? naddr : 1); k++)
        conn->ctx = distlock__node_connect(&c->nodes[i], addr ? addr[k] : NULL, &st, err,
                                           sizeof(err));
    if (conn->ctx == NULL) {
        snprintf(r->err, sizeof(r->err), "%s", err);
        r->state = DISTLOCK__R_FAILED;
        r->status = st;
        return;
    }
    conn->serial = atomic_fetch_add(&c->conn_serial, 1) + 1;
    conn->srv_id = -1;
    if (append_handshake(c, i, conn, r) != 0)
        node_fail(c, conn, r, i, DISTLOCK_ENOMEM, "out of memory");
}

static void resolved(distlock_client *c, distlock__connset *cs, distlock__result *r, int i)
{
    distlock__conn *conn = &cs->conns[i];
    char addr[DISTLOCK__RESOLVE_MAX][48], err[128];
    int naddr = 0;
    int rc = distlock__resolve_take(conn->resolving, addr, &naddr, err, sizeof(err));
    if (rc > 0)
        return;
    distlock__resolve_drop(conn->resolving);
    conn->resolving = NULL;
    if (rc < 0) {
        result_fail(c, r, i, DISTLOCK_ECONN, err);
        return;
    }
    open_at(c, cs, r, i, addr, naddr);
    if (r->state == DISTLOCK__R_PENDING && add_kills(c, conn, r, i) == 0) {
        int done = 0;
        if (distlock__write(conn->ctx, &done) != REDIS_OK)
            conn_broken(c, cs, r, i);
    }
}

/* An undo for a node that owes replies past its timeout. If a request of its
 * tag was sent to the node (on this connection, or on others still listed),
 * queue the undo here without waiting for it, behind CLIENT KILLs of those
 * other connections: whichever order the node runs them in when it comes
 * back, nothing of that attempt is left. If none was sent, nothing is. */
static void undo_unwaited(distlock_client *c, distlock__conn *conn, distlock__result *r, int i,
                          const distlock__call *call)
{
    long long ids[16];
    int open_elsewhere = 0;
    int n = stale_maybe(c, i, call->tag)
                ? stale_find(c, i, call->tag, conn, ids, 16, &open_elsewhere) : 0;
    if (!(call->must_mask & (1ull << i)) && !owes_tag(conn, call->tag) && n == 0 &&
        !open_elsewhere)
        return;
    if (n < 0)
        n = 0;
    for (int k = 0; k < n; k++)
        if (append_kill(conn, NULL, ids[k]) != 0)
            return;
    if (append_call(c, conn, NULL, call, 0) != 0)
        return;
    int done = 0;
    r->sent = 1;
    pthread_mutex_lock(&c->mu);
    stale_add_locked(c, i, call->tag, conn, 1);
    pthread_mutex_unlock(&c->mu);
    (void)distlock__write(conn->ctx, &done);
}

static void start_node(distlock_client *c, distlock__connset *cs, const distlock__call *call,
                       distlock__result *r, int i, uint64_t now)
{
    distlock__conn *conn = &cs->conns[i];
    long timeout_ms = c->command_timeout_ms;
    int resent = r->resent, sent = r->sent;

    memset(r, 0, sizeof(*r));
    r->call = call;
    r->state = DISTLOCK__R_PENDING;
    r->resent = resent;
    r->sent = sent;

    if (conn->ctx && conn->ctx->err)
        distlock__conn_close(c, i, conn);
    if (conn->ctx && conn->qlen == 0 &&
        (conn->cred_gen != atomic_load(&c->cred_gen) || now - conn->used_us > IDLE_CHECK_US)) {
        /* New credentials: reconnect with them. Idle: readable means the
         * server closed it (restart, idle timeout, CLIENT KILL); reconnect
         * now rather than fail this call on a dead socket. A connection in
         * steady use skips the check (one system call less per node). */
        struct pollfd pfd = { conn->ctx->fd, POLLIN, 0 };
        if (conn->cred_gen != atomic_load(&c->cred_gen) || poll(&pfd, 1, 0) > 0)
            distlock__conn_close(c, i, conn);
    }
    if (conn->ctx && conn->qlen > 0 && drain(c, cs, r, i) != 0) {
        if (r->state != DISTLOCK__R_PENDING)
            return;  /* e.g. a failed authentication, reported now */
    }
    if (conn->ctx && conn->qlen > 0) {
        uint64_t owed_since = q_at(conn, 0)->sent_us;
        if (conn->qlen > OWED_MAX || now - owed_since > STALE_CLOSE_US) {
            distlock__conn_close(c, i, conn);  /* give up on it; reconnect below */
        } else if (now - owed_since > (uint64_t)c->command_timeout_ms * 1000u) {
            /* The node owes replies past its timeout (hung, paused): fail
             * it at once instead of waiting again. An undo still goes out
             * behind the requests of its tag that it must follow (if the
             * node comes back, they run in order), unwaited. */
            char msg[96];
            snprintf(msg, sizeof(msg), "no reply for %ld ms", (long)((now - owed_since) / 1000));
            result_fail(c, r, i, DISTLOCK_ECONN, msg);
            /* never behind an unconfirmed AUTH: it could run as another user */
            if (call->undo && call->tag && !owes_kind(conn, DISTLOCK__K_AUTH))
                undo_unwaited(c, conn, r, i, call);
            return;
        }
    }
    conn->used_us = now;
    r->deadline_us = now + (uint64_t)timeout_ms * 1000u;
    if (conn->ctx == NULL && conn->resolving == NULL) {
        const distlock__node_cfg *cfg = &c->nodes[i];
        r->fresh = 1;
        r->deadline_us = now + (uint64_t)c->connect_timeout_ms * 1000u;
        if (cfg->host && !distlock__host_is_numeric(cfg->host)) {
            /* Resolved off this thread: a slow name costs only this node. */
            conn->resolving = distlock__resolve_start(cfg->host);
            if (conn->resolving == NULL)
                result_fail(c, r, i, DISTLOCK_ENOMEM, "out of memory");
            r->deferred = 1;
            return;
        }
        char addr[1][48];
        if (cfg->host)
            snprintf(addr[0], sizeof(addr[0]), "%s", cfg->host);
        open_at(c, cs, r, i, cfg->host ? addr : NULL, 1);
        if (r->state != DISTLOCK__R_PENDING)
            return;
    } else if (conn->ctx == NULL) {
        r->fresh = 1;  /* a lookup started by an earlier round is still running */
        r->deadline_us = now + (uint64_t)c->connect_timeout_ms * 1000u;
        r->deferred = 1;
        return;
    }
    r->deferred = 1;
    if (add_kills(c, conn, r, i) != 0)
        return;
    if (try_send(c, cs, r, i) != 0)
        return;
    /* Write now: on an established connection the whole request usually
     * leaves in this one write, before we start waiting on any node. */
    int done = 0;
    if (distlock__write(conn->ctx, &done) != REDIS_OK)
        conn_broken(c, cs, r, i);
}

/* The connection broke (reset, or closed by the server: a restart). If it
 * was an established one and this is the first time in this round, open a
 * fresh connection and send the call again: every call we make is safe to
 * repeat (acquire and extend are idempotent for the owner; a repeated
 * release is recognised by the protocol layer), and the request that may
 * or may not have run on the old connection is closed off first (its
 * server-side connection is killed before the resend, see above). */
static void conn_broken(distlock_client *c, distlock__connset *cs, distlock__result *r, int i)
{
    distlock__conn *conn = &cs->conns[i];
    char why[128];
    snprintf(why, sizeof(why), "%s",
             conn->ctx && conn->ctx->errstr[0] ? conn->ctx->errstr : "connection closed");
    if (!r->fresh && !r->resent && r->call && r->state == DISTLOCK__R_PENDING) {
        const distlock__call *call = r->call;
        distlock__conn_close(c, i, conn);
        r->resent = 1;
        start_node(c, cs, call, r, i, distlock__now_us());
        return;
    }
    node_fail(c, conn, r, i, DISTLOCK_ECONN, why);
}

void distlock__round(distlock_client *c, distlock__connset *cs,
                     const distlock__call *const *calls, distlock__result *res,
                     distlock__decide_fn decide, void *arg)
{
    int n = c->n;
    struct pollfd pfd[n];  /* n <= 64 (uri.c) */
    int idx[n];
    uint64_t now = distlock__now_us();

    for (int i = 0; i < n; i++) {
        if (calls[i] == NULL) {
            memset(&res[i], 0, sizeof(res[i]));
            res[i].state = DISTLOCK__R_UNSENT;
            continue;
        }
        res[i].resent = res[i].sent = 0;
        start_node(c, cs, calls[i], &res[i], i, now);
    }

    int decided = 0;
    uint64_t start = now, grace_end = 0;
    for (;;) {
        int np = 0;
        uint64_t next = UINT64_MAX;

        now = distlock__now_us();
        /* Once the outcome is known the round ends: requests on their way
         * are left behind (their replies are read later). A call still
         * waiting for its connection (handshake) gets a short grace, as
         * long again as the round took so far, which a healthy new
         * connection needs, not a hung one's timeout; then it is not sent
         * at all. An undo (or release) still goes out once its connection is
         * ready, within its deadline: else it would leave a key behind. */
        if (!decided && decide && decide(res, n, arg)) {
            decided = 1;
            grace_end = now + (now - start) + 1000u;
        }
        for (int i = 0; i < n; i++) {
            distlock__result *r = &res[i];
            distlock__conn *conn = &cs->conns[i];
            if (r->state != DISTLOCK__R_PENDING)
                continue;
            if (decided && !(r->deferred && (r->call->undo || now < grace_end)))
                continue;
            if (now >= r->deadline_us) {
                /* No reply in time. Keep the connection with what it owes:
                 * if the node is only paused, a later undo queues behind
                 * the request it undoes instead of racing it. */
                char msg[64];
                snprintf(msg, sizeof(msg), "no reply within %ld ms",
                         r->fresh ? c->connect_timeout_ms : c->command_timeout_ms);
                result_fail(c, r, i, DISTLOCK_ECONN, msg);
                abandon(c, i, conn, r);
                continue;
            }
            if (r->deadline_us < next)
                next = r->deadline_us;
            if (decided && !r->call->undo && grace_end < next)
                next = grace_end;
            if (conn->ctx == NULL) {
                pfd[np].fd = distlock__resolve_fd(conn->resolving);
                pfd[np].events = POLLIN;
            } else {
                pfd[np].fd = conn->ctx->fd;
                pfd[np].events = POLLIN;
                if (conn->ctx->obuf && conn->ctx->obuf[0] != '\0')
                    pfd[np].events |= POLLOUT;
            }
            pfd[np].revents = 0;
            idx[np++] = i;
        }
        if (np == 0)
            break;
        int wait_ms = (int)((next - now + 999) / 1000);
        int pr = poll(pfd, (nfds_t)np, wait_ms);
        if (pr < 0 && errno != EINTR) {
            for (int k = 0; k < np; k++)
                node_fail(c, &cs->conns[idx[k]], &res[idx[k]], idx[k], DISTLOCK_ECONN,
                          strerror(errno));
            break;
        }
        for (int k = 0; pr > 0 && k < np; k++) {
            int i = idx[k];
            distlock__conn *conn = &cs->conns[i];
            distlock__result *r = &res[i];
            if (pfd[k].revents == 0 || r->state != DISTLOCK__R_PENDING)
                continue;
            if (conn->ctx == NULL) {
                resolved(c, cs, r, i);
                continue;
            }
            if (pfd[k].revents & POLLOUT) {
                int done = 0;
                if (distlock__write(conn->ctx, &done) != REDIS_OK) {
                    conn_broken(c, cs, r, i);
                    continue;
                }
            }
            if (pfd[k].revents & (POLLIN | POLLERR | POLLHUP)) {
                if (redisBufferRead(conn->ctx) != REDIS_OK) {
                    conn_broken(c, cs, r, i);
                    continue;
                }
                take_replies(c, cs, r, i);
            }
        }
    }

    /* Nodes we stop waiting for: a call never sent is simply failed; one on
     * its way is left behind (its reply is discarded later). */
    for (int i = 0; i < n; i++) {
        distlock__result *r = &res[i];
        if (calls[i] == NULL)
            continue;
        if (r->state == DISTLOCK__R_PENDING && r->deferred && !r->sent)
            result_fail(c, r, i, DISTLOCK_ECONN, "not sent: its connection was not ready");
        if (cs->conns[i].qlen > 0)
            abandon(c, i, &cs->conns[i], r);  /* also a failed node's unconfirmed KILLs */
    }
}

void distlock__round_clear(distlock__result *res, int n)
{
    for (int i = 0; i < n; i++) {
        if (res[i].reply)
            freeReplyObject(res[i].reply);
        res[i].reply = NULL;
    }
}
