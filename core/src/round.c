/* round.c -- one round trip to N nodes in parallel, from one thread.
 *
 * Every node gets its request appended and flushed at once; then a single
 * poll() loop collects the replies, so N nodes cost one round trip, not N.
 * Each node is bounded by its own deadline: the connect timeout when it had
 * to be (re)connected, else the command timeout. The caller's `decide`
 * callback may end the round once the outcome is known: replies still due on
 * the connections left behind are counted in conn->skip and discarded by
 * the next round that uses the connection. A node already known to be hung
 * (it owes replies past its timeout) fails at once without being waited for.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A connection that has owed replies for longer than this is considered
 * hung: the node is failed at once instead of queueing more behind it. */
#define SKIP_MAX 256
/* Connections idle longer than this are checked for a server-side close
 * before use. */
#define IDLE_CHECK_US 200000u
/* A connection that has owed replies this long is given up (closed): its
 * undo requests, if any, are past every TTL worth waiting for. */
#define STALE_CLOSE_US 30000000u

static void node_fail(distlock_client *c, distlock__conn *conn, distlock__result *r, int i,
                      int status, const char *what)
{
    snprintf(r->err, sizeof(r->err), "%s: %s", c->nodes[i].uri, what);
    r->state = DISTLOCK__R_FAILED;
    r->status = status;
    distlock__conn_close(conn);
}

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
    char stack[2048], *buf = stack, *p;
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

/* AUTH and SELECT for a fresh connection, and SCRIPT LOAD of every script,
 * so EVALSHA finds them even on a restarted server and we learn their SHA1. */
static int append_handshake(distlock_client *c, int i, redisContext *ctx, distlock__result *r)
{
    const distlock__node_cfg *cfg = &c->nodes[i];
    const char *user = c->username ? c->username : cfg->user;
    const char *pass = c->password ? c->password : cfg->pass;
    const char *argv[3];
    size_t len[3];
    char db[16];

    r->hs_n = r->hs_i = 0;
    if (pass) {
        int k = 0;
        argv[k] = "AUTH", len[k] = 4, k++;
        if (user)
            argv[k] = user, len[k] = strlen(user), k++;
        argv[k] = pass, len[k] = strlen(pass), k++;
        if (append_argv(ctx, k, argv, len))
            return -1;
        r->hs_kind[r->hs_n++] = 0;
    }
    if (cfg->db) {
        snprintf(db, sizeof(db), "%d", cfg->db);
        argv[0] = "SELECT", len[0] = 6;
        argv[1] = db, len[1] = strlen(db);
        if (append_argv(ctx, 2, argv, len))
            return -1;
        r->hs_kind[r->hs_n++] = 0;
    }
    for (int s = 0; s < DISTLOCK__S_COUNT; s++) {
        argv[0] = "SCRIPT", len[0] = 6;
        argv[1] = "LOAD", len[1] = 4;
        argv[2] = distlock__scripts[s].body, len[2] = strlen(distlock__scripts[s].body);
        if (append_argv(ctx, 3, argv, len))
            return -1;
        r->hs_kind[r->hs_n++] = (unsigned char)(1 + s);
    }
    r->expect += r->hs_n;
    return 0;
}

/* EVALSHA when we know the script's SHA1, else EVAL (which also caches it). */
static int append_call(distlock_client *c, redisContext *ctx, const distlock__call *call,
                       int force_eval)
{
    const char *sargv[16], **argv = sargv;
    size_t slen[16], *len = slen;
    char nk[24];
    int k = 0, rc;

    if (call->script < 0)
        return append_argv(ctx, call->argc, call->argv, call->argvlen);
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
    rc = append_argv(ctx, k, argv, len);
    if (argv != sargv) {
        free(argv);
        free(len);
    }
    return rc;
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

/* Queue `call` on node i behind what is already there and flush it: one
 * more reply is then due. Returns -1 (node failed) on error. */
static int send_more(distlock_client *c, distlock__conn *conn, distlock__result *r, int i,
                     const distlock__call *call, int force_eval)
{
    int done = 0;
    if (append_call(c, conn->ctx, call, force_eval) != 0) {
        node_fail(c, conn, r, i, DISTLOCK_ENOMEM, "out of memory");
        return -1;
    }
    r->expect++;
    if (distlock__write(conn->ctx, &done) != REDIS_OK) {
        node_fail(c, conn, r, i, DISTLOCK_ECONN, conn->ctx->errstr);
        return -1;
    }
    return 0;
}

/* Take every reply available on node i. Returns 0, or -1 if the node failed. */
static int take_replies(distlock_client *c, distlock__conn *conn, distlock__result *r, int i)
{
    while (conn->skip > 0 || r->expect > 0) {
        void *p = NULL;
        if (redisGetReplyFromReader(conn->ctx, &p) != REDIS_OK) {
            node_fail(c, conn, r, i, DISTLOCK_EPROTO, "protocol error");
            return -1;
        }
        if (p == NULL)
            return 0;  /* need more bytes */
        redisReply *rep = p;
        if (conn->skip > 0) {
            conn->skip--;
            if (conn->skip == 0)
                conn->skip_since_us = 0;
            freeReplyObject(rep);
            continue;
        }
        r->expect--;
        if (r->hs_i < r->hs_n) {
            int kind = r->hs_kind[r->hs_i++];
            if (rep->type == REDIS_REPLY_ERROR) {
                char msg[160];
                snprintf(msg, sizeof(msg), "%s", rep->str);
                freeReplyObject(rep);
                node_fail(c, conn, r, i, DISTLOCK_EPROTO, msg);
                return -1;
            }
            if (kind > 0)
                learn_sha(c, kind - 1, rep);
            freeReplyObject(rep);
            if (r->hs_i == r->hs_n && r->deferred) {
                /* Authenticated and ready: only now send the call, so a
                 * failed AUTH can never let it run as another user. */
                r->deferred = 0;
                if (send_more(c, conn, r, i, r->call, 0) != 0)
                    return -1;
            }
            continue;
        }
        if (rep->type == REDIS_REPLY_ERROR && !r->retried && r->call->script >= 0 &&
            strncmp(rep->str, "NOSCRIPT", 8) == 0) {
            /* The server lost its script cache (restart, SCRIPT FLUSH,
             * failover): send the body with EVAL, which caches it again. */
            freeReplyObject(rep);
            r->retried = 1;
            if (send_more(c, conn, r, i, r->call, 1) != 0)
                return -1;
            continue;
        }
        if (rep->type == REDIS_REPLY_ERROR && !r->retried && r->call->fallback &&
            strncmp(rep->str, "ERR syntax", 10) == 0) {
            /* An older server without SET ... NX GET: use the script, now
             * and for every later call of this client. */
            freeReplyObject(rep);
            atomic_store(&c->no_set_get, 1);
            r->retried = 1;
            r->call = r->call->fallback;
            if (send_more(c, conn, r, i, r->call, 0) != 0)
                return -1;
            continue;
        }
        r->reply = rep;
        r->state = DISTLOCK__R_DONE;
    }
    return 0;
}

/* Discard, without blocking, replies owed by an earlier round; returns -1 if
 * the connection is gone. */
static int drain_skipped(distlock_client *c, distlock__conn *conn, distlock__result *r, int i)
{
    struct pollfd pfd = { conn->ctx->fd, POLLIN, 0 };
    if (poll(&pfd, 1, 0) > 0) {
        if (redisBufferRead(conn->ctx) != REDIS_OK) {
            distlock__conn_close(conn);
            return -1;
        }
        if (take_replies(c, conn, r, i) != 0)
            return -1;
    }
    return 0;
}

static void conn_broken(distlock_client *c, distlock__connset *cs, distlock__result *r, int i);

static void start_node(distlock_client *c, distlock__connset *cs, const distlock__call *call,
                       distlock__result *r, int i, uint64_t now)
{
    distlock__conn *conn = &cs->conns[i];
    long timeout_ms = c->command_timeout_ms;

    memset(r, 0, sizeof(*r));
    r->call = call;
    r->state = DISTLOCK__R_PENDING;

    if (conn->ctx && conn->ctx->err)
        distlock__conn_close(conn);
    if (conn->ctx && conn->skip == 0 && now - conn->used_us > IDLE_CHECK_US) {
        /* No reply is due on an idle connection: readable means the server
         * closed it (restart, idle timeout, CLIENT KILL). Reconnect now
         * rather than fail this call on a dead socket. A connection in
         * steady use skips the check (one system call less per node). */
        struct pollfd pfd = { conn->ctx->fd, POLLIN, 0 };
        if (poll(&pfd, 1, 0) > 0)
            distlock__conn_close(conn);
    }
    if (conn->ctx && conn->skip > 0) {
        if (drain_skipped(c, conn, r, i) != 0) {
            r->state = DISTLOCK__R_PENDING;
            r->err[0] = '\0';
        } else if (conn->skip > 0 && (now - conn->skip_since_us > STALE_CLOSE_US ||
                                      conn->skip > SKIP_MAX)) {
            distlock__conn_close(conn);  /* give up on it; reconnect below */
        } else if (conn->skip > 0 &&
                   now - conn->skip_since_us > (uint64_t)c->command_timeout_ms * 1000u) {
            /* The node owes replies past its timeout (hung, paused): fail
             * it at once instead of waiting again. An undo is still queued
             * behind what it owes, so it takes effect in order if the node
             * comes back. The connection is kept: its replies may come. */
            snprintf(r->err, sizeof(r->err), "%s: no reply for %ld ms", c->nodes[i].uri,
                     (long)((now - conn->skip_since_us) / 1000));
            r->state = DISTLOCK__R_FAILED;
            r->status = DISTLOCK_ETIMEDOUT;
            if (call->undo && append_call(c, conn->ctx, call, 0) == 0) {
                int done = 0;
                conn->skip++;
                (void)distlock__write(conn->ctx, &done);
            }
            return;
        }
    }
    if (conn->ctx == NULL) {
        int st = DISTLOCK_ECONN;
        conn->ctx = distlock__node_connect(&c->nodes[i], c->connect_timeout_ms, 1, &st, r->err,
                                           sizeof(r->err));
        if (conn->ctx == NULL) {
            r->state = DISTLOCK__R_FAILED;
            r->status = st;
            return;
        }
        timeout_ms = c->connect_timeout_ms;
        if (append_handshake(c, i, conn->ctx, r) != 0) {
            node_fail(c, conn, r, i, DISTLOCK_ENOMEM, "out of memory");
            return;
        }
        r->deferred = 1;  /* the call follows a successful handshake */
    } else {
        if (append_call(c, conn->ctx, call, 0) != 0) {
            node_fail(c, conn, r, i, DISTLOCK_ENOMEM, "out of memory");
            return;
        }
        r->expect++;
    }
    conn->used_us = now;
    r->sent_us = now;
    r->deadline_us = now + (uint64_t)timeout_ms * 1000u;
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
 * release can only report "not owner"). Else the node fails. */
static void conn_broken(distlock_client *c, distlock__connset *cs, distlock__result *r, int i)
{
    distlock__conn *conn = &cs->conns[i];
    const char *why = conn->ctx && conn->ctx->errstr[0] ? conn->ctx->errstr
                                                        : "connection closed";
    if (r->hs_n == 0 && !r->reconnected && conn->skip == 0 && r->call) {
        const distlock__call *call = r->call;
        distlock__conn_close(conn);
        start_node(c, cs, call, r, i, distlock__now_us());
        r->reconnected = 1;
        return;
    }
    node_fail(c, conn, r, i, DISTLOCK_ECONN, why);
}

void distlock__round(distlock_client *c, distlock__connset *cs,
                     const distlock__call *const *calls, distlock__result *res,
                     distlock__decide_fn decide, void *arg)
{
    int n = c->n;
    struct pollfd pfd[64];
    int idx[64];
    uint64_t now = distlock__now_us();

    for (int i = 0; i < n; i++) {
        if (calls[i] == NULL) {
            memset(&res[i], 0, sizeof(res[i]));
            res[i].state = DISTLOCK__R_UNSENT;
            continue;
        }
        start_node(c, cs, calls[i], &res[i], i, now);
    }

    int decided = 0;
    for (;;) {
        int np = 0;
        uint64_t next = UINT64_MAX;

        now = distlock__now_us();
        if (!decided && decide && decide(res, n, arg))
            decided = 1;  /* from now on, wait only for calls not yet sent */
        for (int i = 0; i < n; i++) {
            distlock__result *r = &res[i];
            distlock__conn *conn = &cs->conns[i];
            if (r->state != DISTLOCK__R_PENDING)
                continue;
            /* Once the outcome is known we leave sent requests behind (their
             * replies are discarded later), but never a call still waiting
             * for its connection's handshake: it would not be sent at all. */
            if (decided && !r->deferred)
                continue;
            if (now >= r->deadline_us) {
                /* No reply in time. Keep the connection with what it owes
                 * counted: if the node is only paused, a later undo (say,
                 * the release of a failed acquire) queues behind the
                 * request it undoes instead of racing it. */
                snprintf(r->err, sizeof(r->err), "%s: no reply within %ld ms", c->nodes[i].uri,
                         r->hs_n ? c->connect_timeout_ms : c->command_timeout_ms);
                r->state = DISTLOCK__R_FAILED;
                r->status = DISTLOCK_ETIMEDOUT;
                if (conn->skip == 0)
                    conn->skip_since_us = r->sent_us;
                conn->skip += r->expect;
                r->expect = 0;
                continue;
            }
            if (r->deadline_us < next)
                next = r->deadline_us;
            short ev = POLLIN;
            if (conn->ctx->obuf && conn->ctx->obuf[0] != '\0')
                ev |= POLLOUT;
            pfd[np].fd = conn->ctx->fd;
            pfd[np].events = ev;
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
            if (pfd[k].revents == 0)
                continue;
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
                take_replies(c, conn, r, i);
            }
        }
    }

    /* Nodes we stop waiting for: their replies are discarded later. */
    now = distlock__now_us();
    for (int i = 0; i < n; i++) {
        distlock__conn *conn = &cs->conns[i];
        if (res[i].state == DISTLOCK__R_PENDING && conn->ctx) {
            if (conn->skip == 0)
                conn->skip_since_us = now;
            conn->skip += res[i].expect;
            res[i].expect = 0;
        }
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
