/* sentinel.c -- where a Sentinel-managed node's master is.
 *
 * A node given as redis-sentinel://h1:p1,h2:p2/NAME has no fixed address.
 * Its master is asked of every sentinel in turn with
 * SENTINEL GET-MASTER-ADDR-BY-NAME NAME and SENTINEL MASTER NAME (after AUTH
 * with the sentinels' own credentials, if given), the answer with the
 * highest config epoch taken (lookup), on the resolver's helper thread (resolve.c), so a
 * slow or hung sentinel costs only that node's budget, never the caller's
 * thread: each sentinel gets an equal share of what is left of the budget,
 * then the next is tried. The connections go through net.c like every
 * other; for rediss-sentinel:// through a TLS session (tls.c) with a
 * context of the lookup's own built from the node's settings, so CA,
 * client certificate, verification and server name apply to the sentinels
 * as to the master. Each sentinel's certificate is checked against its
 * host in the URI (or tls_server_name).
 *
 * Announcements (+failover-state-wait-promotion, +promoted-slave,
 * +switch-master): see distlock__sentinel_watch_stop in transport.h; the
 * thread and the rule of whose word moves a client are below (watch_*).
 *
 * The answer is cached per node in the transport (distlock__endpoint, under
 * tp.mu, its state readable without the lock), so steady-state calls cost
 * nothing extra. round.c confirms it with ROLE on every new connection and
 * forgets it when the server is not the master, is gone, or answers
 * READONLY (except a promotion just announced: ep_announce); the next
 * connection asks the sentinels again.
 *
 * May call: resolve.c, net.c, tls.c, resp.c (this layer), base.
 *
 * Layer: 1 transport
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "transport.h"

typedef struct job {
    distlock__node_cfg *cfg;    /* a private copy: the thread may outlive the client */
    long budget_ms;
    /* how to reach the sentinels (rediss-sentinel://: a TLS context with
     * the node's settings, our own); or why not (link_failed, err) */
    distlock__stream_cfg link;
    int link_failed;
    char err[DISTLOCK__ERR_LEN];
    /* a promotion under way (ep_announce): the lookup's answer without
     * asking, the replica (port > 0), or why not now (fail[0]) */
    char addr[DISTLOCK__ADDR_LEN];
    int port;
    char fail[DISTLOCK__ERR_LEN];
} job;

static void watch_start(distlock__transport *t);

static void job_free(void *arg)
{
    job *j = arg;
    if (j == NULL)
        return;
    if (j->cfg) {
        distlock__node_cfg_clear(j->cfg);
        free(j->cfg);
    }
    distlock__stream_cfg_clear(&j->link);
    free(j);
}

/* Send the commands queued on s and read `want` replies before the
 * deadline; they go to rep[]. 0, or -1 with err set and nothing in rep[].
 * The lookup thread's one exchange at a time: write what is queued, wait
 * for what the stream needs (distlock__poll_wait_gated: the lookup holds
 * the fork gate, resolve.c), read. */
static int exchange(distlock__stream *s, int want, redisReply **rep, uint64_t deadline_us,
                    char *err, size_t errlen)
{
    redisContext *ctx = s->ctx;
    int got = 0;
    for (;;) {
        while (got < want) {
            void *p = NULL;
            if (redisGetReplyFromReader(ctx, &p) != REDIS_OK) {
                snprintf(err, errlen, "protocol error");
                goto fail;
            }
            if (p == NULL)
                break;
            rep[got++] = p;
        }
        if (got == want)
            return 0;
        if (distlock__stream_write(s, NULL) != REDIS_OK) {
            snprintf(err, errlen, "%s", ctx->errstr);
            goto fail;
        }
        if (distlock__now_us() >= deadline_us) {
            snprintf(err, errlen, "no reply in time");
            goto fail;
        }
        /* TLS: the handshake's direction while it runs */
        struct pollfd pfd = { distlock__stream_fd(s), (short)distlock__stream_events(s), 0 };
        if (distlock__poll_wait_gated(&pfd, 1, deadline_us) > 0 &&
            (pfd.revents & (POLLIN | POLLERR | POLLHUP)) && distlock__stream_read(s) != REDIS_OK) {
            snprintf(err, errlen, "%s", ctx->errstr);
            goto fail;
        }
    }
fail:
    while (got > 0) {
        freeReplyObject(rep[--got]);
        rep[got] = NULL;
    }
    return -1;
}

/* Resolve host before deadline_us: numeric at once, a name on a helper
 * thread (resolve.c), abandoned at the deadline (the helper ends on its
 * own; nothing waits for getaddrinfo). 0, or -1 with err. Called by
 * holders of the fork gate only (a lookup, the subscriber). */
static int resolve_within(const char *host, char (*addr)[DISTLOCK__ADDR_LEN], int *naddr, uint64_t deadline_us,
                          char *err, size_t errlen)
{
    *naddr = 0;
    if (distlock__host_is_numeric(host))
        return distlock__resolve_now(host, addr, naddr, err, errlen);
    distlock__resolve *r = distlock__resolve_start(host);
    if (r == NULL) {
        snprintf(err, errlen, "cannot resolve '%.100s': out of memory", host);
        return -1;
    }
    int rc;
    while ((rc = distlock__resolve_take(r, addr, naddr, err, errlen)) == 1) {
        uint64_t now = distlock__now_us();
        if (now >= deadline_us) {
            snprintf(err, errlen, "cannot resolve '%.100s' in time", host);
            *naddr = 0;
            rc = -1;
            break;
        }
        struct pollfd p = { distlock__resolve_fd(r), POLLIN, 0 };
        (void)distlock__poll_wait_gated(&p, 1, deadline_us);
    }
    distlock__resolve_drop(r);
    return rc;
}

/* Start connecting to sentinel s of node at one of its numeric addresses
 * (with link's settings: TLS for rediss-sentinel://, the certificate
 * checked against s's host unless link names a server) and queue AUTH with
 * the sentinels' credentials: 0 with the stream in *st and *want (replies
 * owed), or -1 with err. what: "sentinel host:port". Nothing here blocks
 * (the connect is non-blocking; the caller polls). */
static int sentinel_open(const distlock__node_cfg *node, const distlock__stream_cfg *link,
                         const distlock__hostport *s, char (*addr)[DISTLOCK__ADDR_LEN], int naddr,
                         distlock__stream *st, int *want, char *what, size_t whatlen, char *err,
                         size_t errlen)
{
    *want = 0;
    *st = (distlock__stream){ NULL, NULL, NULL };
    snprintf(what, whatlen, "sentinel %s:%d", s->host, s->port);
    /* The sentinel as a node of its own: its address. */
    distlock__node_cfg sc = *node;
    sc.uri = what;
    sc.host = s->host;
    sc.port = s->port;
    sc.path = NULL;
    sc.kind = DISTLOCK__NODE_MASTER;
    int status;
    for (int k = 0; st->ctx == NULL && k < naddr; k++)
        (void)distlock__stream_open(st, &sc, link, addr[k], 0, s->host, &status, err, errlen);
    if (st->ctx == NULL)
        return -1;
    if (node->sentinel_pass) {
        const char *argv[3];
        size_t len[3];
        int k = 0;
        argv[k] = "AUTH", len[k] = 4, k++;
        if (node->sentinel_user)
            argv[k] = node->sentinel_user, len[k] = strlen(node->sentinel_user), k++;
        argv[k] = node->sentinel_pass, len[k] = strlen(node->sentinel_pass), k++;
        if (distlock__resp_append(st->ctx, k, argv, len) != 0) {
            snprintf(err, errlen, "%.60s: out of memory", what);
            distlock__stream_close(st);
            return -1;
        }
        *want = 1;
    }
    return 0;
}

/* The value of field name in a SENTINEL MASTER reply or one entry of
 * SENTINEL REPLICAS (a flat list of names and values), or NULL if it has
 * none (or is not such a list: refused, e.g. by an ACL that allows
 * GET-MASTER-ADDR-BY-NAME only). */
static const char *sentinel_field(const redisReply *r, const char *field)
{
    if (r == NULL || r->type != REDIS_REPLY_ARRAY)
        return NULL;
    for (size_t k = 0; k + 1 < r->elements; k += 2) {
        const redisReply *name = r->element[k], *value = r->element[k + 1];
        if (name->type == REDIS_REPLY_STRING && value->type == REDIS_REPLY_STRING &&
            strcmp(name->str, field) == 0)
            return value->str;
    }
    return NULL;
}

/* The config-epoch field of a SENTINEL MASTER reply, or -1 if it has none. */
static long long config_epoch(const redisReply *r)
{
    const char *v = sentinel_field(r, "config-epoch");
    if (v == NULL)
        return -1;
    char *end;
    long long e = strtoll(v, &end, 10);
    return end != v && *end == '\0' && e >= 0 ? e : -1;
}

/* Ask one sentinel. 0 with the master's host and port and the config
 * epoch of that answer (-1: unknown), else -1 and err. The address and
 * the epoch come from one pipeline: the sentinel answers both from the
 * same state. */
static int ask_one(const job *j, const distlock__hostport *s, uint64_t deadline_us, char *host,
                   size_t hostlen, int *port, long long *epoch, char *err, size_t errlen)
{
    const distlock__node_cfg *node = j->cfg;
    char what[160];
    distlock__stream st;
    int want, rc = -1, naddr = 0;
    char addr[DISTLOCK__RESOLVE_MAX][DISTLOCK__ADDR_LEN];
    /* a name that does not resolve in time costs this sentinel's share */
    if (resolve_within(s->host, addr, &naddr, deadline_us, err, errlen) != 0) {
        char e[DISTLOCK__ERR_LEN];
        snprintf(e, sizeof(e), "%s", err);
        snprintf(err, errlen, "sentinel %.60s:%d: %.120s", s->host, s->port, e);
        return -1;
    }
    if (sentinel_open(node, &j->link, s, addr, naddr, &st, &want, what, sizeof(what), err,
                      errlen) != 0)
        return -1;
    const char *argv[3];
    size_t len[3];
    argv[0] = "SENTINEL", len[0] = 8;
    argv[1] = "GET-MASTER-ADDR-BY-NAME", len[1] = 23;
    argv[2] = node->master, len[2] = strlen(node->master);
    if (distlock__resp_append(st.ctx, 3, argv, len) != 0)
        goto out_oom;
    argv[1] = "MASTER", len[1] = 6;
    if (distlock__resp_append(st.ctx, 3, argv, len) != 0)
        goto out_oom;
    want += 2;
    redisReply *rep[3] = { NULL, NULL, NULL };
    char xerr[160] = "";
    if (exchange(&st, want, rep, deadline_us, xerr, sizeof(xerr)) != 0) {
        snprintf(err, errlen, "%.60s: %.150s", what, xerr);
        goto out;
    }
    redisReply *auth = want == 3 ? rep[0] : NULL, *r = rep[want - 2];
    *epoch = config_epoch(rep[want - 1]);
    if (auth && auth->type == REDIS_REPLY_ERROR) {
        /* its first word only: the server's text may quote the password */
        char why[160];
        snprintf(err, errlen, "%.60s: authentication failed: %s", what,
                 distlock__handshake_refusal(auth->str, why, sizeof(why)));
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "%.60s: %.*s", what, distlock__reply_shown_len(r->str, 80), r->str);
    } else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
               r->element[0]->type != REDIS_REPLY_STRING ||
               r->element[1]->type != REDIS_REPLY_STRING) {
        snprintf(err, errlen, "%.60s: does not know a master named '%.60s'", what, node->master);
    } else {
        long p = strtol(r->element[1]->str, NULL, 10);
        if (p <= 0 || p > 65535 || r->element[0]->len == 0 || r->element[0]->len >= hostlen) {
            snprintf(err, errlen, "%.60s: bad address for '%.60s' (%zu characters)", what,
                     node->master, r->element[0]->len);
        } else {
            snprintf(host, hostlen, "%s", r->element[0]->str);
            *port = (int)p;
            rc = 0;
        }
    }
    for (int k = 0; k < want; k++)
        freeReplyObject(rep[k]);
    goto out;
out_oom:
    snprintf(err, errlen, "%.60s: out of memory", what);
out:
    distlock__stream_close(&st);
    return rc;
}

static int lookup(void *arg, char (*addr)[DISTLOCK__ADDR_LEN], int *naddr, int *port, char *err, size_t errlen)
{
    const job *j = arg;
    const distlock__node_cfg *cfg = j->cfg;
    uint64_t start = distlock__now_us(), end = start + (uint64_t)j->budget_ms * 1000u;
    char first[256] = "";
    int asked = 0;
    if (j->link_failed) {
        snprintf(err, errlen, "%s", j->err);  /* the TLS context could not be built */
        *naddr = 0;
        return -1;
    }
    /* a master named by a host name of any length (NI_MAXHOST): the
     * answer being read, then the best so far */
    char *host = malloc(2 * NI_MAXHOST);
    if (host == NULL) {
        snprintf(err, errlen, "out of memory");
        *naddr = 0;
        return -1;
    }
    if (j->fail[0]) {
        snprintf(err, errlen, "%s", j->fail);
        *naddr = 0;
        free(host);
        return -1;
    }
    if (j->port > 0) {
        snprintf(addr[0], 48, "%s", j->addr);
        *naddr = 1;
        *port = j->port;
        free(host);
        return 0;
    }
    /* Every sentinel is asked, not only the first that answers: one that
     * has not heard of a failover yet (it switches on the leader's next
     * hello) still names the old master, which keeps granting until it is
     * converted. The answer with the highest config epoch wins (the epoch
     * a failover's promotion sets; equal ones: URI order). */
    char *best = host + NI_MAXHOST;
    int best_port = 0, answered = 0;
    long long best_epoch = -2;
    for (int k = 0; k < cfg->nsentinels; k++) {
        uint64_t now = distlock__now_us();
        if (now >= end)
            break;
        /* an equal share of what is left: a hung sentinel costs its share */
        uint64_t share = (end - now) / (uint64_t)(cfg->nsentinels - k);
        char e[256] = "";
        long long epoch = -1;
        int p = 0;
        asked++;
        if (ask_one(j, &cfg->sentinels[k], now + share, host, NI_MAXHOST, &p, &epoch, e,
                    sizeof(e)) == 0) {
            answered++;
            if (epoch > best_epoch) {
                best_epoch = epoch;
                best_port = p;
                memcpy(best, host, strlen(host) + 1);  /* shorter than NI_MAXHOST */
            }
        } else if (first[0] == '\0') {
            snprintf(first, sizeof(first), "%s", e);
        }
    }
    if (answered > 0) {
        char e[256] = "";
        /* the master's name (announce-hostnames) within what is left */
        if (resolve_within(best, addr, naddr, end, e, sizeof(e)) == 0) {
            *port = best_port;
            free(host);
            return 0;
        }
        snprintf(first, sizeof(first), "%s", e);
    }
    free(host);
    *naddr = 0;
    /* The first sentinel's reason first (it names the sentinel): the
     * message is cut to fit behind the node's URI. */
    snprintf(err, errlen, "%s (no master '%.40s' from %d of %d sentinel(s) in %ld ms)",
             first[0] ? first : "no time left", cfg->master, asked, cfg->nsentinels, j->budget_ms);
    return -1;
}

distlock__resolve *distlock__sentinel_start(distlock__transport *t, int i, long budget_ms)
{
    const distlock__node_cfg *cfg = &t->nodes[i];
    job *j = calloc(1, sizeof(*j));
    distlock__node_cfg *c = calloc(1, sizeof(*c));
    if (j == NULL || c == NULL || distlock__node_cfg_copy(c, cfg) != 0) {
        free(j);
        free(c);
        return NULL;
    }
    j->cfg = c;
    j->budget_ms = budget_ms;
    pthread_mutex_lock(&t->mu);
    if (t->watch == NULL)
        watch_start(t);
    /* A promotion announced, not yet done, and its replica found not yet
     * the master (ep_forget): not the old master, which the sentinels may
     * still name. Fail at once for a moment, then try the replica again. */
    const distlock__endpoint *e = &t->ep[i];
    uint64_t now = distlock__now_us(), until = atomic_load(&e->promoting_until_us);
    if (until != 0 && now < until && !(atomic_load(&e->state) & 1u)) {
        if (now < atomic_load(&e->promoting_retry_us))
            snprintf(j->fail, sizeof(j->fail),
                     "failover in progress: the sentinels announced %.47s:%d as the new master "
                     "of '%.40s', not yet promoted",
                     e->addr, e->port, cfg->master);
        else {
            snprintf(j->addr, sizeof(j->addr), "%s", e->addr);
            j->port = e->port;
        }
    }
    pthread_mutex_unlock(&t->mu);
    /* A TLS context is built here (under tp.mu, like a node's; lookups
     * are rare): a CA file that does not load is the lookup's reason. */
    int st;
    j->link_failed = distlock__stream_cfg_init(&j->link, t, i, &st, j->err, sizeof(j->err)) != 0;
    return distlock__resolve_start_fn(lookup, j, job_free);
}

/* ------------------------------------------------------------ announcements */

/* Which sentinel's word moves the client, and when. Sentinel names the
 * promoted replica long before it says +switch-master: the failover's
 * leader publishes +failover-state-wait-promotion as it sends SLAVEOF NO
 * ONE to the replica it selected, then +promoted-slave (and answers
 * GET-MASTER-ADDR-BY-NAME with the replica) once the replica reports itself
 * master (it asks INFO every second during a failover), but +switch-master
 * only at the failover's end, after the other replicas are reconfigured
 * (bounded only by failover-timeout, 180 s by default), while the old
 * master keeps accepting writes until it is converted. The other sentinels
 * switch (and publish +switch-master) when the leader's hello with the new
 * configuration epoch reaches them, moments after the promotion. So the
 * thread listens to every sentinel of a node, not one: whichever the leader
 * is, its announcements reach us, and the others' +switch-master too. The
 * first announcement is taken on its own, not a quorum's: a leader exists
 * only once a majority of the sentinels elected it for that epoch, and from
 * SLAVEOF NO ONE on, what the old master grants no completed failover
 * keeps, so waiting for the others would only prolong the window this
 * closes. A wrong word costs availability, not safety: every new
 * connection checks ROLE.
 *
 * An announcement published while a subscription is down (being
 * replaced after a silent PING, retried after a refusal, not yet
 * confirmed) is never delivered on it, and +failover-state-wait-promotion
 * comes from the leader alone: one missed message on one connection left
 * the client granting from the old master until +promoted-slave. So each
 * (re)subscription first asks the sentinel where the failover is
 * (SENTINEL MASTER: failover-state; SENTINEL REPLICAS: the replica flagged
 * promoted), in the same write as its SUBSCRIBE: the sentinel runs the
 * commands of one read in a row, and publishes its announcements only from
 * its timer, so the state read is the state at the subscription -- what it
 * announced before is in the answer, what it announces after is heard
 * (watch_state). */

/* Every sentinel is served at once by the one thread: each subscription is
 * a small state machine in its poll loop (name lookup on a helper thread,
 * non-blocking connect, AUTH + SUBSCRIBE, then PING), so a hung, slow or
 * unresolvable sentinel costs nothing to the others. A failed attempt is
 * retried after WATCH_RETRY_MS, then every WATCH_RETRY_MAX_MS while it
 * keeps failing (a sentinel back after an outage is heard within 2 s). */
#define WATCH_RETRY_MS 1000
#define WATCH_RETRY_MAX_MS 2000
/* A subscription is silent between announcements, and a connection whose
 * peer vanished without FIN or RST (host rebooted, NAT state dropped) is
 * silent forever: each is PINGed this often (in RESP2 subscribe mode PING
 * is allowed, answered ["pong", ""]) and replaced when nothing came back
 * within the command timeout. */
#define WATCH_PING_MS 1000
/* After +failover-state-wait-promotion the client stays off the old master
 * until +promoted-slave / +switch-master, or -failover-abort-* from the
 * leader; at most this long if none of them is ever heard (Sentinel's
 * default failover-timeout). */
#define WATCH_PROMOTION_MAX_MS 180000
/* Meanwhile, once the replica was found not yet the master, calls fail at
 * once ("failover in progress") this long, then try it again: it is the
 * master moments after it runs SLAVEOF NO ONE, up to a second before
 * +promoted-slave says so. */
#define WATCH_PROMOTION_RETRY_MS 100

enum { W_IDLE, W_RESOLVING, W_OPENING, W_SUBSCRIBED };

typedef struct watch_node {
    distlock__stream stream;  /* W_OPENING, W_SUBSCRIBED */
    int node, sentinel;     /* t->nodes[node].sentinels[sentinel] */
    int state;
    distlock__resolve *res; /* the sentinel's name lookup; kept until it ends
                             * (one helper per sentinel at most) */
    uint64_t retry_at_us;   /* W_IDLE: next attempt */
    uint64_t deadline_us;   /* W_RESOLVING, W_OPENING: the attempt's end */
    uint64_t ping_at_us;    /* W_SUBSCRIBED: next PING */
    uint64_t pong_by_us;    /* a PING's reply due by then (0: none owed) */
    int fails;              /* attempts failed in a row */
    int owed, auth;         /* W_OPENING: replies still owed; AUTH's first */
    redisReply *master;     /* W_OPENING: SENTINEL MASTER's reply, until
                             * SENTINEL REPLICAS' arrives (watch_state) */
} watch_node;

typedef struct distlock__watch {
    distlock__transport *t;
    pthread_t th;
    int wake[2];            /* a byte on wake[1]: stop */
    int nsub;
    watch_node *subs;       /* one per sentinel of each Sentinel node */
    struct pollfd *pfd;     /* the thread's, nsub + 1 (here: a forked child frees it) */
    int *promoter;          /* per node: the sentinel whose wait-promotion
                             * holds the client, or -1 */
} distlock__watch;

/* NQUERY: SENTINEL MASTER and SENTINEL REPLICAS before the SUBSCRIBE */
enum { NCH = 5, NQUERY = 2 };
static const char *const watch_channels[NCH] = {
    "+failover-state-wait-promotion", "+promoted-slave", "+switch-master",
    "-failover-abort-slave-timeout", "-failover-abort-no-good-slave"
};

static void watch_close(watch_node *wn)
{
    distlock__stream_close(&wn->stream);  /* writes nothing (also in a forked child) */
    if (wn->master)
        freeReplyObject(wn->master);
    wn->master = NULL;
}

/* The attempt failed (or the subscription was lost): quiet, retried later.
 * Calls find a failover on their own too, and the node's other sentinels
 * announce it as well. */
static void watch_fail(watch_node *wn, uint64_t now)
{
    watch_close(wn);
    wn->state = W_IDLE;
    uint64_t ms = wn->fails > 0 ? WATCH_RETRY_MAX_MS : WATCH_RETRY_MS;
    wn->retry_at_us = now + ms * 1000u;
    wn->fails++;
}

static long watch_timeout_ms(distlock__transport *t, int command)
{
    pthread_mutex_lock(&t->mu);
    long ms = command ? t->command_timeout_ms : t->connect_timeout_ms;
    pthread_mutex_unlock(&t->mu);
    return ms > 0 ? ms : 1000;
}

/* The address is known: start connecting and queue AUTH + SUBSCRIBE. */
static void watch_connect(distlock__watch *w, watch_node *wn, char (*addr)[DISTLOCK__ADDR_LEN], int naddr,
                          uint64_t now)
{
    distlock__transport *t = w->t;
    const distlock__node_cfg *cfg = &t->nodes[wn->node];
    const distlock__hostport *s = &cfg->sentinels[wn->sentinel];
    distlock__stream_cfg link;
    char what[160], err[DISTLOCK__ERR_LEN];
    int st, want = 0;
    if (distlock__stream_cfg_init(&link, t, wn->node, &st, err, sizeof(err)) != 0) {
        watch_fail(wn, now);
        return;
    }
    int rc = sentinel_open(cfg, &link, s, addr, naddr, &wn->stream, &want, what, sizeof(what),
                           err, sizeof(err));
    distlock__stream_cfg_clear(&link);  /* the session holds a reference */
    if (rc != 0) {
        watch_fail(wn, now);
        return;
    }
    /* Where the failover is, then the subscription: one write (see
     * watch_state). */
    const char *argv[NCH + 1];
    size_t len[NCH + 1];
    argv[0] = "SENTINEL", len[0] = 8;
    argv[2] = cfg->master, len[2] = strlen(cfg->master);
    argv[1] = "MASTER", len[1] = 6;
    if (distlock__resp_append(wn->stream.ctx, 3, argv, len) != 0) {
        watch_fail(wn, now);
        return;
    }
    argv[1] = "REPLICAS", len[1] = 8;
    if (distlock__resp_append(wn->stream.ctx, 3, argv, len) != 0) {
        watch_fail(wn, now);
        return;
    }
    argv[0] = "SUBSCRIBE";
    for (int k = 0; k < NCH; k++)
        argv[k + 1] = watch_channels[k];
    for (int k = 0; k <= NCH; k++)
        len[k] = strlen(argv[k]);
    if (distlock__resp_append(wn->stream.ctx, NCH + 1, argv, len) != 0) {
        watch_fail(wn, now);
        return;
    }
    wn->auth = want;
    wn->owed = want + NQUERY + NCH;
    wn->state = W_OPENING;
}

/* Its name lookup ended (or the name is numeric). */
static void watch_resolved(distlock__watch *w, watch_node *wn, uint64_t now)
{
    char addr[DISTLOCK__RESOLVE_MAX][DISTLOCK__ADDR_LEN], err[DISTLOCK__ERR_LEN];
    int naddr = 0;
    int rc = distlock__resolve_take(wn->res, addr, &naddr, err, sizeof(err));
    if (rc == 1)
        return;  /* not yet */
    distlock__resolve_drop(wn->res);
    wn->res = NULL;
    if (rc != 0) {
        watch_fail(wn, now);
        return;
    }
    watch_connect(w, wn, addr, naddr, now);
}

/* Timers of one subscription: start an attempt, end one past its
 * deadline, PING, give up on a silent one. */
static void watch_step(distlock__watch *w, watch_node *wn, uint64_t now)
{
    distlock__transport *t = w->t;
    switch (wn->state) {
    case W_IDLE: {
        if (now < wn->retry_at_us)
            return;
        const char *host = t->nodes[wn->node].sentinels[wn->sentinel].host;
        wn->deadline_us = now + (uint64_t)watch_timeout_ms(t, 0) * 1000u;
        if (distlock__host_is_numeric(host)) {
            char addr[DISTLOCK__RESOLVE_MAX][DISTLOCK__ADDR_LEN], err[DISTLOCK__ERR_LEN];
            int naddr = 0;
            if (distlock__resolve_now(host, addr, &naddr, err, sizeof(err)) != 0)
                watch_fail(wn, now);
            else
                watch_connect(w, wn, addr, naddr, now);
            return;
        }
        /* a lookup still running from an earlier attempt is waited for again */
        if (wn->res == NULL && (wn->res = distlock__resolve_start(host)) == NULL) {
            watch_fail(wn, now);
            return;
        }
        wn->state = W_RESOLVING;
        return;
    }
    case W_RESOLVING:
        if (now >= wn->deadline_us) {
            wn->state = W_IDLE;  /* wn->res kept: the helper ends on its own */
            watch_fail(wn, now);
        }
        return;
    case W_OPENING:
        if (now >= wn->deadline_us)
            watch_fail(wn, now);
        return;
    case W_SUBSCRIBED:
        if (wn->pong_by_us != 0) {
            if (now >= wn->pong_by_us) {
                /* silent: replaced at once (new connections may work) */
                watch_fail(wn, now);
                wn->retry_at_us = now;
                wn->fails = 0;
            }
        } else if (now >= wn->ping_at_us) {
            const char *argv[1] = { "PING" };
            size_t len[1] = { 4 };
            if (distlock__resp_append(wn->stream.ctx, 1, argv, len) != 0)
                return;
            wn->pong_by_us = now + (uint64_t)watch_timeout_ms(t, 1) * 1000u;
        }
        return;
    }
}

static uint64_t watch_next_timer(const watch_node *wn)
{
    switch (wn->state) {
    case W_IDLE:
        return wn->retry_at_us;
    case W_RESOLVING:
    case W_OPENING:
        return wn->deadline_us;
    default:
        return wn->pong_by_us ? wn->pong_by_us : wn->ping_at_us;
    }
}

/* The leader's promotion or a sentinel's switch: node i's master is now
 * newip:newport, no longer oldip:oldport. */
static void ep_announce(distlock__transport *t, int i, const char *newip, int newport,
                        const char *oldip, int oldport, int done)
{
    char addr[DISTLOCK__RESOLVE_MAX][DISTLOCK__ADDR_LEN], old[DISTLOCK__RESOLVE_MAX][DISTLOCK__ADDR_LEN], err[DISTLOCK__ERR_LEN];
    int naddr = 0, nold = 0;
    /* announce-hostnames: a name, resolved within the connect timeout */
    uint64_t deadline = distlock__now_us() + (uint64_t)watch_timeout_ms(t, 0) * 1000u;
    if (resolve_within(newip, addr, &naddr, deadline, err, sizeof(err)) != 0 || naddr == 0)
        return;
    if (resolve_within(oldip, old, &nold, deadline, err, sizeof(err)) != 0)
        nold = 0;
    distlock__endpoint *e = &t->ep[i];
    pthread_mutex_lock(&t->mu);
    unsigned gen = atomic_load(&e->state) >> 1;
    if (strcmp(e->addr, addr[0]) != 0 || e->port != newport) {
        gen++;  /* another server: another ordering domain */
        snprintf(e->addr, sizeof(e->addr), "%s", addr[0]);
        e->port = newport;
    }
    /* The announcement that names this master first records what it
     * replaced; repeats (the other sentinels', the leader's at the end)
     * name the same two. */
    if (nold > 0) {
        snprintf(e->replaced_addr, sizeof(e->replaced_addr), "%s", old[0]);
        e->replaced_port = oldport;
        e->announced_gen = gen;
    }
    /* Announced before the replica has run SLAVEOF NO ONE (or before we
     * can see it has): a connection may still find it a replica (or not
     * answering: busy). Going back to the old master then would take
     * exactly the grants the promotion discards, so its ROLE mismatch
     * fails that call without forgetting the replica, until the promotion
     * is announced (+promoted-slave, +switch-master) or the leader aborts
     * (-failover-abort-*, watch_abort). */
    atomic_store(&e->promoting_until_us,
                 done ? 0 : distlock__now_us() + (uint64_t)WATCH_PROMOTION_MAX_MS * 1000u);
    atomic_store(&e->state, gen << 1 | 1u);
    pthread_mutex_unlock(&t->mu);
}

/* The leader gave the promotion up: the old master stays. The replica the
 * client was moved to is forgotten, so the next call asks the sentinels. */
static void watch_abort(distlock__transport *t, int i)
{
    distlock__endpoint *e = &t->ep[i];
    pthread_mutex_lock(&t->mu);
    if (atomic_load(&e->promoting_until_us) != 0) {
        atomic_store(&e->promoting_until_us, 0);
        unsigned s = atomic_load(&e->state);
        if ((s >> 1) == e->announced_gen)
            atomic_store(&e->state, s & ~1u);
    }
    pthread_mutex_unlock(&t->mu);
}

/* Splits text at spaces into at most max words (in place); their count. */
static int split_words(char *text, char **word, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *p = strtok_r(text, " ", &save); p; p = strtok_r(NULL, " ", &save)) {
        if (n == max)
            return max + 1;
        word[n++] = p;
    }
    return n;
}

static int parse_port(const char *s)
{
    char *end = NULL;
    long p = strtol(s, &end, 10);
    return end != s && *end == '\0' && p > 0 && p <= 65535 ? (int)p : 0;
}

/* ["message", CHANNEL, TEXT]:
 *   +failover-state-wait-promotion  "slave IP:PORT IP PORT @ NAME OLDIP OLDPORT"
 *   +promoted-slave                 the same
 *   +switch-master                  "NAME OLDIP OLDPORT NEWIP NEWPORT"
 *   -failover-abort-*               "master NAME IP PORT"
 * Host names of any length (announce-hostnames): the words point into a
 * copy of the text, no fixed-size buffer.
 * The leader publishes the first right after it sent SLAVEOF NO ONE to the
 * replica it selected: from then on, what the old master grants is lost
 * once the promotion completes, so the client moves at once, and stays
 * off the old master until the promotion is announced or aborted. */
static void watch_message(distlock__watch *w, watch_node *wn, const redisReply *r)
{
    distlock__transport *t = w->t;
    int i = wn->node;
    const distlock__node_cfg *cfg = &t->nodes[i];
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || strcmp(r->element[0]->str, "message") != 0 ||
        r->element[1]->type != REDIS_REPLY_STRING || r->element[2]->type != REDIS_REPLY_STRING)
        return;
    const char *ch = r->element[1]->str;
    char *text = strdup(r->element[2]->str), *wd[9];
    if (text == NULL)
        return;
    int n = split_words(text, wd, 8);
    const char *name = NULL, *oldip = NULL, *newip = NULL;
    int oldport = 0, newport = 0, kind = 0;  /* 1 wait-promotion, 2 done, 3 abort */
    if (strcmp(ch, "+switch-master") == 0 && n == 5) {
        name = wd[0], oldip = wd[1], oldport = parse_port(wd[2]);
        newip = wd[3], newport = parse_port(wd[4]);
        kind = 2;
    } else if ((strcmp(ch, "+failover-state-wait-promotion") == 0 ||
                strcmp(ch, "+promoted-slave") == 0) &&
               n == 8 && strcmp(wd[0], "slave") == 0 && strcmp(wd[4], "@") == 0) {
        newip = wd[2], newport = parse_port(wd[3]);
        name = wd[5], oldip = wd[6], oldport = parse_port(wd[7]);
        kind = ch[1] == 'f' ? 1 : 2;
    } else if (strncmp(ch, "-failover-abort-", 16) == 0 && n == 4 &&
               strcmp(wd[0], "master") == 0) {
        name = wd[1];
        kind = 3;
    }
    if (kind == 3) {
        /* only the sentinel that announced the promotion can abort it (a
         * would-be leader's abort does not undo the leader's) */
        if (strcmp(name, cfg->master) == 0 && w->promoter[i] == wn->sentinel) {
            w->promoter[i] = -1;
            watch_abort(t, i);
        }
    } else if (kind != 0 && strcmp(name, cfg->master) == 0 && newport > 0 && oldport > 0) {
        w->promoter[i] = kind == 1 ? wn->sentinel : -1;
        ep_announce(t, i, newip, newport, oldip, oldport, kind == 2);
    }
    free(text);
}

/* Whether the comma-separated flags (SENTINEL REPLICAS' "flags") hold flag. */
static int has_flag(const char *flags, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = flags; p != NULL; p = strchr(p, ',')) {
        if (*p == ',')
            p++;
        if (strncmp(p, flag, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return 1;
    }
    return 0;
}

/* What sentinel wn said of node i's failover as it was subscribed
 * (SENTINEL MASTER's reply, then SENTINEL REPLICAS'), taken as the
 * announcements it would have published before: the leader's
 * failover-state wait_promotion is its +failover-state-wait-promotion
 * naming the replica flagged promoted, reconf_slaves or update_config its
 * +promoted-slave. A promotion this sentinel announced that it no longer
 * reports under way ended unheard (aborted, or completed): as after an
 * abort, the next call asks the sentinels, whose highest epoch names the
 * master either way. A refusal (an ACL allowing GET-MASTER-ADDR-BY-NAME
 * only) or an unknown name tells nothing: the subscription still stands. */
static void watch_state(distlock__watch *w, watch_node *wn, const redisReply *master,
                        const redisReply *replicas)
{
    distlock__transport *t = w->t;
    int i = wn->node;
    const char *oldip = sentinel_field(master, "ip"), *oldp = sentinel_field(master, "port");
    const char *fs = sentinel_field(master, "failover-state");
    if (oldip == NULL || oldp == NULL || replicas == NULL || replicas->type != REDIS_REPLY_ARRAY)
        return;
    int kind = 0;  /* 1 wait-promotion, 2 done */
    if (fs && strcmp(fs, "wait_promotion") == 0)
        kind = 1;
    else if (fs && (strcmp(fs, "reconf_slaves") == 0 || strcmp(fs, "update_config") == 0))
        kind = 2;
    if (kind == 0) {
        if (w->promoter[i] == wn->sentinel) {
            w->promoter[i] = -1;
            watch_abort(t, i);
        }
        return;
    }
    for (size_t k = 0; k < replicas->elements; k++) {
        const redisReply *r = replicas->element[k];
        const char *flags = sentinel_field(r, "flags"), *ip = sentinel_field(r, "ip"),
                   *p = sentinel_field(r, "port");
        if (flags == NULL || ip == NULL || p == NULL || !has_flag(flags, "promoted"))
            continue;
        int newport = parse_port(p), oldport = parse_port(oldp);
        if (newport > 0 && oldport > 0) {
            w->promoter[i] = kind == 1 ? wn->sentinel : -1;
            ep_announce(t, i, ip, newport, oldip, oldport, kind == 2);
        }
        return;
    }
}

/* Read what a connection has; 0, or -1: closed or refused. */
static int watch_read(distlock__watch *w, watch_node *wn, uint64_t now)
{
    if (distlock__stream_read(&wn->stream) != REDIS_OK)
        return -1;
    for (;;) {
        void *p = NULL;
        if (redisGetReplyFromReader(wn->stream.ctx, &p) != REDIS_OK)
            return -1;
        if (p == NULL)
            return 0;
        redisReply *rep = p;
        if (wn->state == W_OPENING) {
            /* AUTH's reply, the failover's state (SENTINEL MASTER, then
             * REPLICAS), then one confirmation per channel */
            int seq = wn->auth + NQUERY + NCH - wn->owed, bad = 0;
            if (seq < wn->auth) {
                bad = rep->type == REDIS_REPLY_ERROR;
            } else if (seq == wn->auth) {
                wn->master = rep;
                rep = NULL;
            } else if (seq == wn->auth + 1) {
                watch_state(w, wn, wn->master, rep);
                freeReplyObject(wn->master);
                wn->master = NULL;
            } else {
                bad = rep->type != REDIS_REPLY_ARRAY;
            }
            if (rep)
                freeReplyObject(rep);
            if (bad)
                return -1;
            if (--wn->owed == 0) {
                wn->state = W_SUBSCRIBED;
                wn->fails = 0;
                wn->ping_at_us = now + WATCH_PING_MS * 1000u;
                wn->pong_by_us = 0;
            }
            continue;
        }
        /* anything heard proves it alive: the PING's reply, a message */
        wn->pong_by_us = 0;
        wn->ping_at_us = now + WATCH_PING_MS * 1000u;
        watch_message(w, wn, rep);
        freeReplyObject(rep);
    }
}

/* The thread's steps, as a round's: interest runs each subscription's
 * timers and fills pfd[k] with what subscription k waits for (fd -1:
 * nothing) and *next_us with the first timer; advance takes the revents. */
static void watch_interest(distlock__watch *w, struct pollfd *pfd, uint64_t *next_us)
{
    uint64_t now = distlock__now_us(), next = now + WATCH_RETRY_MS * 1000u;
    for (int k = 0; k < w->nsub; k++) {
        watch_node *wn = &w->subs[k];
        watch_step(w, wn, now);
        if (wn->state == W_RESOLVING)
            pfd[k] = (struct pollfd){ distlock__resolve_fd(wn->res), POLLIN, 0 };
        else if (wn->state == W_OPENING || wn->state == W_SUBSCRIBED)
            pfd[k] = (struct pollfd){ distlock__stream_fd(&wn->stream),
                                      (short)distlock__stream_events(&wn->stream), 0 };
        else
            pfd[k] = (struct pollfd){ -1, 0, 0 };
        uint64_t tm = watch_next_timer(wn);
        if (tm < next)
            next = tm;
    }
    *next_us = next;
}

static void watch_advance(distlock__watch *w, const struct pollfd *pfd)
{
    uint64_t now = distlock__now_us();
    for (int k = 0; k < w->nsub; k++) {
        watch_node *wn = &w->subs[k];
        if (pfd[k].fd < 0 || pfd[k].revents == 0)
            continue;
        if (wn->state == W_RESOLVING) {
            watch_resolved(w, wn, now);
            continue;
        }
        if ((pfd[k].revents & POLLOUT) && distlock__stream_write(&wn->stream, NULL) != REDIS_OK) {
            watch_fail(wn, now);
            continue;
        }
        if ((pfd[k].revents & (POLLIN | POLLERR | POLLHUP)) && watch_read(w, wn, now) != 0)
            watch_fail(wn, now);  /* the others still listen */
    }
}

/* The thread holds the fork gate (base.h) except in poll() (here, and
 * resolve_within's in ep_announce): its steps run OpenSSL (contexts,
 * handshakes, reads) and allocate, and a fork() in the middle of one would
 * leave the child a lock held forever (the allocator's, OpenSSL's), which
 * its first call (freeing these sessions, its own handshake) would wait
 * for. */
static void *watch_main(void *arg)
{
    distlock__watch *w = arg;  /* not t->watch: a stop clears that at once */
    pthread_setname_np(pthread_self(), "distlock-switch");  /* as ps -T and gdb show it */
    struct pollfd *pfd = w->pfd;  /* the stop pipe, then one per subscription */
    distlock__fork_gate_enter();
    for (;;) {
        uint64_t next;
        pfd[0] = (struct pollfd){ w->wake[0], POLLIN, 0 };
        watch_interest(w, pfd + 1, &next);
        int pr = distlock__poll_wait_gated(pfd, w->nsub + 1, next);
        if (pr > 0 && pfd[0].revents)
            break;  /* stop */
        watch_advance(w, pfd + 1);
    }
    distlock__fork_gate_leave();
    return NULL;
}

/* t->mu held */
static void watch_start(distlock__transport *t)
{
    int nsub = 0;
    for (int i = 0; i < t->n; i++)
        if (t->nodes[i].kind == DISTLOCK__NODE_SENTINEL)
            nsub += t->nodes[i].nsentinels;
    distlock__watch *w = calloc(1, sizeof(*w));
    if (w && nsub > 0 && (w->subs = calloc((size_t)nsub, sizeof(*w->subs))) != NULL &&
        (w->pfd = calloc((size_t)nsub + 1, sizeof(*w->pfd))) != NULL &&
        (w->promoter = calloc((size_t)t->n, sizeof(*w->promoter))) != NULL &&
        pipe2(w->wake, O_CLOEXEC | O_NONBLOCK) == 0) {
        w->t = t;
        w->nsub = nsub;
        for (int i = 0; i < t->n; i++)
            w->promoter[i] = -1;
        for (int i = 0, k = 0; i < t->n; i++)
            for (int s = 0; t->nodes[i].kind == DISTLOCK__NODE_SENTINEL &&
                            s < t->nodes[i].nsentinels; s++, k++) {
                w->subs[k].node = i;
                w->subs[k].sentinel = s;
            }
        if (distlock__thread_create(&w->th, NULL, watch_main, w) == 0) {
            t->watch = w;
            return;
        }
        close(w->wake[0]);
        close(w->wake[1]);
    }
    if (w) {
        free(w->subs);
        free(w->pfd);
        free(w->promoter);
    }
    free(w);  /* not watching: calls still find a failover themselves */
}

static void watch_free(distlock__transport *t, distlock__watch *w)
{
    (void)t;
    for (int k = 0; k < w->nsub; k++) {
        watch_close(&w->subs[k]);
        /* a lookup still running: its helper thread frees it when done */
        distlock__resolve_drop(w->subs[k].res);
    }
    close(w->wake[0]);
    close(w->wake[1]);
    free(w->subs);
    free(w->pfd);
    free(w->promoter);
    free(w);
}

void distlock__sentinel_watch_stop(distlock__transport *t)
{
    pthread_mutex_lock(&t->mu);
    distlock__watch *w = t->watch;
    t->watch = NULL;
    pthread_mutex_unlock(&t->mu);
    if (w == NULL)
        return;
    char b = 1;
    while (write(w->wake[1], &b, 1) < 0 && errno == EINTR)
        ;
    pthread_join(w->th, NULL);
    watch_free(t, w);
}

void distlock__sentinel_watch_after_fork(distlock__transport *t)
{
    /* the parent's thread is not in this process: its connections are
     * the parent's, closed here without a byte */
    if (t->watch)
        watch_free(t, t->watch);
    t->watch = NULL;
}

/* ------------------------------------------------------------ the cache */

int distlock__ep_get(distlock__transport *t, int i, char *addr, int *port, unsigned *state)
{
    distlock__endpoint *e = &t->ep[i];
    pthread_mutex_lock(&t->mu);
    unsigned s = atomic_load(&e->state);
    if (s & 1u) {
        snprintf(addr, 48, "%s", e->addr);
        *port = e->port;
        *state = s;
    }
    pthread_mutex_unlock(&t->mu);
    return (s & 1u) != 0;
}

unsigned distlock__ep_learn(distlock__transport *t, int i, char *addr, int *port)
{
    distlock__endpoint *e = &t->ep[i];
    pthread_mutex_lock(&t->mu);
    unsigned s = atomic_load(&e->state);
    unsigned gen = s >> 1;
    /* Sentinels do not switch at the same moment (the leader first, the
     * others on its hello): a lookup that asked one that had not heard yet
     * names the master an announcement just replaced. Nothing learnt since
     * the announcement, and its master not found wanting (forgotten): the
     * announcement stands. */
    if ((s & 1u) && gen == e->announced_gen && e->replaced_port == *port &&
        strcmp(e->replaced_addr, addr) == 0) {
        snprintf(addr, 48, "%s", e->addr);
        *port = e->port;
    }
    if (strcmp(e->addr, addr) != 0 || e->port != *port) {
        gen++;  /* another server: another ordering domain */
        snprintf(e->addr, sizeof(e->addr), "%s", addr);
        e->port = *port;
    }
    s = gen << 1 | 1u;
    atomic_store(&e->state, s);
    pthread_mutex_unlock(&t->mu);
    return s;
}

void distlock__ep_forget(distlock__transport *t, int i, unsigned state)
{
    uint64_t now = distlock__now_us(), until = atomic_load(&t->ep[i].promoting_until_us);
    if (until != 0 && now < until && atomic_load(&t->ep[i].state) == state) {
        /* A promotion under way (ep_announce): the replica is kept (the
         * lookup answers it, sentinel_start), and calls fail at once for
         * WATCH_PROMOTION_RETRY_MS before it is tried again. */
        atomic_store(&t->ep[i].promoting_retry_us, now + WATCH_PROMOTION_RETRY_MS * 1000u);
    }
    unsigned s = state;
    /* only the address that connection was made to */
    atomic_compare_exchange_strong(&t->ep[i].state, &s, state & ~1u);
}

int distlock__ep_current(distlock__transport *t, int i, unsigned state)
{
    return atomic_load_explicit(&t->ep[i].state, memory_order_relaxed) == state;
}
