/* wait.c -- waking waiters without polling.
 *
 * The release script PUBLISHes on "distlock:<key>". Each client runs one
 * subscriber thread, started by its first wait, holding one SUBSCRIBE
 * connection per node shared by all the client's waits; it subscribes to
 * the channels its waiters need and wakes the longest-waiting one for that
 * key when a message arrives. Waiters still re-check on their own timer,
 * for locks that simply expire or whose holders publish nothing.
 *
 * Waiters sleep in distlock__sleep (cancel.c), so a cancel interrupts them;
 * this thread wakes one by writing its eventfd.
 *
 * A waiter subscribes, then tries again, so a release in between is not
 * missed; it waits for the subscription to be confirmed by at least one
 * node, unless no node can confirm it (down, or an ACL user without
 * channel rights): then it relies on its re-checks at once.
 *
 * No network or name-resolution work happens under the client mutex: the
 * thread connects (and resolves names, off-thread, see resolve.c) unlocked,
 * and only formats requests into buffers while it holds the mutex. Its
 * connections live in the client (c->sub), so a forked child can drop them.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define RECONNECT_MS 200
/* A node that refused SUBSCRIBE (no channel rights) is asked again only
 * this rarely: it will most likely refuse again. */
#define REFUSED_RETRY_MS 30000

enum { NODE_IDLE = 0, NODE_UP, NODE_FAILED };

typedef struct sub_node {
    redisContext *ctx;
    distlock__tls *tls;      /* rediss:// nodes */
    distlock__resolve *resolving;
    uint64_t retry_at_us;
    int state;               /* NODE_*: FAILED = cannot confirm subscriptions now */
    int seed;                /* Redis Cluster node: the seed to connect to next (turns) */
    int seed_port;           /* ... and the port of the one being resolved */
} sub_node;

/* Channels this thread has asked the nodes for. */
typedef struct sub_chan {
    struct sub_chan *next;
    char *name;
    uint64_t confirmed;      /* nodes that confirmed the subscription (bit i) */
} sub_chan;

struct distlock__sub {
    sub_node *nodes;         /* c->n */
    sub_chan *chans;
};

static void send_cmd(redisContext *ctx, const char *verb, const char *arg)
{
    const char *argv[2] = { verb, arg };
    size_t len[2] = { strlen(verb), strlen(arg) };
    (void)distlock__resp_append(ctx, 2, argv, len);
}

static sub_chan *find_chan(struct distlock__sub *sub, const char *name)
{
    sub_chan *ch = sub->chans;
    while (ch && strcmp(ch->name, name) != 0)
        ch = ch->next;
    return ch;
}

/* c->mu held. Can a waiter on `name` stop waiting for the confirmation? */
static int settled(distlock_client *c, const char *name)
{
    struct distlock__sub *sub = c->sub;
    sub_chan *ch = find_chan(sub, name);
    if (ch && ch->confirmed)
        return 1;
    for (int i = 0; i < c->n; i++)
        if (sub->nodes[i].state != NODE_FAILED)
            return 0;
    return 1;  /* no node can confirm: rely on re-checks */
}

static void wake_settled(distlock_client *c)
{
    for (distlock__waiter *w = c->waiters; w; w = w->next)
        if (!w->subscribed && settled(c, w->channel)) {
            w->subscribed = 1;
            distlock__sleeper_wake(&w->sl);
        }
}

/* c->mu held */
static void node_drop(distlock_client *c, int i, int failed, long retry_ms)
{
    sub_node *sn = &c->sub->nodes[i];
    distlock__tls_free(sn->tls);  /* writes nothing */
    sn->tls = NULL;
    if (sn->ctx)
        redisFree(sn->ctx);
    sn->ctx = NULL;
    sn->retry_at_us = distlock__now_us() + (uint64_t)retry_ms * 1000u;
    sn->state = failed ? NODE_FAILED : NODE_IDLE;
    for (sub_chan *ch = c->sub->chans; ch; ch = ch->next)
        ch->confirmed &= ~(1ull << i);
    wake_settled(c);
}

/* c->mu held: authenticate and subscribe on a connection just made. */
static void node_greet(distlock_client *c, int i)
{
    sub_node *sn = &c->sub->nodes[i];
    (void)distlock__tp_append_auth(&c->tp, i, sn->ctx);
    for (sub_chan *ch = c->sub->chans; ch; ch = ch->next)
        send_cmd(sn->ctx, "SUBSCRIBE", ch->name);
    sn->state = NODE_UP;
}

/* Unlocked: connect node i at addr (NULL: its Unix socket), at port (0:
 * the node's own; a Sentinel node's master has the sentinels' port). */
static redisContext *connect_at(distlock_client *c, int i, char (*addr)[48], int naddr, int port,
                                distlock__tls **tls)
{
    int st;
    char err[192];
    redisContext *ctx = NULL;
    distlock__node_cfg at = c->nodes[i];
    if (port > 0)
        at.port = port;
    for (int k = 0; ctx == NULL && k < (addr ? naddr : 1); k++)
        ctx = distlock__node_connect(&c->tp, i, addr ? addr[k] : NULL, at.port, tls, &st, err,
                                     sizeof(err));
    return ctx;
}

/* c->mu held */
static void on_reply(distlock_client *c, int i, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str, *chan = r->element[1]->str;
    int is_msg = strcmp(kind, "message") == 0, is_sub = strcmp(kind, "subscribe") == 0;
    if (is_sub) {
        sub_chan *ch = find_chan(c->sub, chan);
        if (ch)
            ch->confirmed |= 1ull << i;
        wake_settled(c);
        return;
    }
    if (!is_msg)
        return;
    const char *payload = r->element[2]->type == REDIS_REPLY_STRING ? r->element[2]->str : "";
    distlock__waiter *oldest = NULL;
    for (distlock__waiter *w = c->waiters; w; w = w->next) {
        if (strcmp(w->channel, chan) != 0)
            continue;
        if (payload[0] != '\0') {
            /* A fair acquire names the new head of the queue. */
            if (w->token && strcmp(w->token, payload) == 0)
                w->head = 1;
        } else if (w->token == NULL || w->head) {
            oldest = w;  /* the list is newest first */
        }
    }
    /* A release frees one lock: wake one of our waiters it concerns, the
     * longest waiting plain one or our fair waiter at the queue's head;
     * fair waiters further back are not woken (no herd), and the others
     * keep their re-check timers. */
    if (oldest) {
        oldest->notified = 1;
        distlock__sleeper_wake(&oldest->sl);
    }
}

/* c->mu held: subscribe to channels newly wanted, drop unused ones. */
static void sync_channels(distlock_client *c)
{
    struct distlock__sub *sub = c->sub;
    for (distlock__waiter *w = c->waiters; w; w = w->next) {
        if (find_chan(sub, w->channel))
            continue;
        sub_chan *ch = calloc(1, sizeof(*ch));
        if (!ch || !(ch->name = strdup(w->channel))) {
            free(ch);
            continue;
        }
        ch->next = sub->chans;
        sub->chans = ch;
        for (int i = 0; i < c->n; i++)
            if (sub->nodes[i].ctx && sub->nodes[i].state == NODE_UP)
                send_cmd(sub->nodes[i].ctx, "SUBSCRIBE", ch->name);
    }
    for (sub_chan **pp = &sub->chans; *pp;) {
        sub_chan *ch = *pp;
        distlock__waiter *w = c->waiters;
        while (w && strcmp(w->channel, ch->name) != 0)
            w = w->next;
        if (w) {
            pp = &ch->next;
            continue;
        }
        for (int i = 0; i < c->n; i++)
            if (sub->nodes[i].ctx && sub->nodes[i].state == NODE_UP)
                send_cmd(sub->nodes[i].ctx, "UNSUBSCRIBE", ch->name);
        *pp = ch->next;
        free(ch->name);
        free(ch);
    }
}

static void *subscriber_main(void *arg)
{
    distlock_client *c = arg;
    struct distlock__sub *sub = c->sub;
    struct pollfd pfd[65];
    int idx[65];
    int *opening = calloc((size_t)c->n, sizeof(int));

    pthread_mutex_lock(&c->mu);
    while (!c->sub_stop && opening) {
        uint64_t now = distlock__now_us();
        sync_channels(c);

        /* Connections to (re)open: done below, without the mutex. */
        int nopen = 0;
        for (int i = 0; i < c->n; i++) {
            sub_node *sn = &sub->nodes[i];
            if (sub->chans && sn->ctx == NULL && sn->resolving == NULL && now >= sn->retry_at_us) {
                opening[nopen++] = i;
                sn->seed++;  /* a cluster node's next seed: one that is down is passed over */
            }
        }
        if (nopen > 0) {
            pthread_mutex_unlock(&c->mu);
            for (int k = 0; k < nopen; k++) {
                int i = opening[k];
                const distlock__node_cfg *cfg = &c->nodes[i];
                redisContext *ctx = NULL;
                distlock__tls *tls = NULL;
                distlock__resolve *res = NULL;
                int seed_port = 0;
                if (cfg->kind == DISTLOCK__NODE_CLUSTER && cfg->nsentinels > 0) {
                    /* Any node of the cluster will do: a release's PUBLISH
                     * reaches every node over the cluster bus. The seeds in
                     * turn, so a dead one does not stop wake-ups. */
                    pthread_mutex_lock(&c->mu);
                    const distlock__hostport *hp =
                        &cfg->sentinels[(sub->nodes[i].seed - 1) % cfg->nsentinels];
                    pthread_mutex_unlock(&c->mu);
                    seed_port = hp->port;
                    if (distlock__host_is_numeric(hp->host)) {
                        char addr[1][48];
                        snprintf(addr[0], sizeof(addr[0]), "%.47s", hp->host);
                        ctx = connect_at(c, i, addr, 1, hp->port, &tls);
                    } else {
                        res = distlock__resolve_start(hp->host);
                    }
                } else if (cfg->kind == DISTLOCK__NODE_SENTINEL) {
                    /* Its master, asked of the sentinels on every
                     * (re)connection, which follows failovers. A demoted
                     * master still gets the new one's PUBLISHes (they
                     * replicate), so no ROLE check is needed here. */
                    res = distlock__sentinel_start(&c->tp, i, c->tp.connect_timeout_ms);
                } else if (cfg->host && !distlock__host_is_numeric(cfg->host)) {
                    res = distlock__resolve_start(cfg->host);
                } else {
                    char addr[1][48];
                    if (cfg->host)
                        snprintf(addr[0], sizeof(addr[0]), "%s", cfg->host);
                    ctx = connect_at(c, i, cfg->host ? addr : NULL, 1, 0, &tls);
                }
                pthread_mutex_lock(&c->mu);
                sub->nodes[i].seed_port = seed_port;
                sub->nodes[i].resolving = res;
                sub->nodes[i].ctx = ctx;
                sub->nodes[i].tls = tls;
                if (ctx)
                    node_greet(c, i);
                else if (res == NULL)
                    node_drop(c, i, 1, RECONNECT_MS);
                pthread_mutex_unlock(&c->mu);
            }
            pthread_mutex_lock(&c->mu);
            continue;
        }

        int np = 0;
        uint64_t next = now + 1000000u;
        pfd[np].fd = c->sub_wake[0], pfd[np].events = POLLIN, idx[np++] = -1;
        for (int i = 0; i < c->n; i++) {
            sub_node *sn = &sub->nodes[i];
            if (sn->resolving) {
                pfd[np].fd = distlock__resolve_fd(sn->resolving);
                pfd[np].events = POLLIN;
                idx[np++] = i;
                continue;
            }
            if (sn->ctx == NULL) {
                if (sub->chans && sn->retry_at_us < next)
                    next = sn->retry_at_us;
                continue;
            }
            int done = 0;
            if (distlock__write(sn->ctx, sn->tls, &done) != REDIS_OK) {
                node_drop(c, i, 1, RECONNECT_MS);
                continue;
            }
            pfd[np].fd = sn->ctx->fd;
            pfd[np].events = (short)distlock__events(sn->ctx, sn->tls);
            idx[np++] = i;
        }
        pthread_mutex_unlock(&c->mu);
        int pr = poll(pfd, (nfds_t)np, next > now ? (int)((next - now) / 1000 + 1) : 0);
        pthread_mutex_lock(&c->mu);
        if (pr <= 0)
            continue;
        for (int k = 0; k < np; k++) {
            if (pfd[k].revents == 0)
                continue;
            if (idx[k] < 0) {
                char buf[64];
                while (read(c->sub_wake[0], buf, sizeof(buf)) > 0) {
                }
                continue;
            }
            int i = idx[k];
            sub_node *sn = &sub->nodes[i];
            if (sn->resolving) {
                char addr[DISTLOCK__RESOLVE_MAX][48], err[192];
                int naddr = 0;
                int rc = distlock__resolve_take(sn->resolving, addr, &naddr, err, sizeof(err));
                if (rc > 0)
                    continue;
                int port = distlock__resolve_port(sn->resolving);
                if (port == 0)
                    port = sn->seed_port;  /* a cluster seed's (0 for other nodes) */
                distlock__resolve_drop(sn->resolving);
                sn->resolving = NULL;
                redisContext *ctx = NULL;
                distlock__tls *tls = NULL;
                if (rc == 0) {
                    pthread_mutex_unlock(&c->mu);
                    ctx = connect_at(c, i, addr, naddr, port, &tls);
                    pthread_mutex_lock(&c->mu);
                }
                sn->ctx = ctx;
                sn->tls = tls;
                if (ctx)
                    node_greet(c, i);
                else
                    node_drop(c, i, 1, RECONNECT_MS);
                continue;
            }
            if (sn->ctx == NULL || !(pfd[k].revents & (POLLIN | POLLERR | POLLHUP)))
                continue;
            if (distlock__read(sn->ctx, sn->tls) != REDIS_OK) {
                node_drop(c, i, 1, RECONNECT_MS);
                continue;
            }
            void *rep;
            while (sn->ctx && redisGetReplyFromReader(sn->ctx, &rep) == REDIS_OK && rep) {
                redisReply *r = rep;
                if (r->type == REDIS_REPLY_ERROR) {
                    /* NOPERM (no channel rights) or a failed AUTH: this
                     * node cannot notify us; waiters use re-checks. */
                    int refused = strncmp(r->str, "NOPERM", 6) == 0;
                    freeReplyObject(r);
                    node_drop(c, i, 1, refused ? REFUSED_RETRY_MS : RECONNECT_MS);
                    break;
                }
                on_reply(c, i, r);
                freeReplyObject(r);
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
    free(opening);
    return NULL;
}

static void wake_subscriber(distlock_client *c)
{
    char one = 1;
    ssize_t w = write(c->sub_wake[1], &one, 1);
    (void)w;
}

static void sub_free(distlock_client *c, int forget)
{
    struct distlock__sub *sub = c->sub;
    if (sub == NULL)
        return;
    for (int i = 0; i < c->n; i++) {
        distlock__tls_free(sub->nodes[i].tls);  /* writes nothing, also in a child */
        if (sub->nodes[i].ctx)
            redisFree(sub->nodes[i].ctx);  /* closes our fd; writes nothing */
        /* In a forked child the lookup thread is the parent's: let go of
         * the memory rather than wait for a thread that does not exist. */
        if (!forget)
            distlock__resolve_drop(sub->nodes[i].resolving);
    }
    while (sub->chans) {
        sub_chan *next = sub->chans->next;
        free(sub->chans->name);
        free(sub->chans);
        sub->chans = next;
    }
    free(sub->nodes);
    free(sub);
    c->sub = NULL;
}

int distlock__waiter_add(distlock_client *c, distlock__waiter *w)
{
    distlock__lock(c);
    if (!c->sub_running) {
        c->sub = calloc(1, sizeof(*c->sub));
        if (c->sub && (c->sub->nodes = calloc((size_t)c->n, sizeof(sub_node))) == NULL) {
            free(c->sub);
            c->sub = NULL;
        }
        if (c->sub == NULL || pipe2(c->sub_wake, O_NONBLOCK | O_CLOEXEC) != 0) {
            sub_free(c, 0);
            pthread_mutex_unlock(&c->mu);
            return distlock__fail(DISTLOCK_ESYS, "cannot start waiting: %s", strerror(errno));
        }
        c->sub_stop = 0;
        if (distlock__thread_create(&c->sub_thread, NULL, subscriber_main, c) != 0) {
            close(c->sub_wake[0]);
            close(c->sub_wake[1]);
            c->sub_wake[0] = c->sub_wake[1] = -1;
            sub_free(c, 0);
            pthread_mutex_unlock(&c->mu);
            return distlock__fail(DISTLOCK_ESYS, "cannot start the subscriber thread");
        }
        c->sub_running = 1;
    }
    w->next = c->waiters;
    c->waiters = w;
    w->subscribed = 0;
    wake_subscriber(c);
    uint64_t deadline = distlock__now_us() + (uint64_t)c->tp.connect_timeout_ms * 1000u;
    while (!w->subscribed && !settled(c, w->channel) && distlock__now_us() < deadline) {
        pthread_mutex_unlock(&c->mu);
        int rc = distlock__sleep(c, &w->sl, deadline);
        if (rc == DISTLOCK_ECANCELED) {
            distlock__waiter_remove(c, w);
            return rc;
        }
        pthread_mutex_lock(&c->mu);
    }
    w->subscribed = 1;
    pthread_mutex_unlock(&c->mu);
    return DISTLOCK_OK;  /* unconfirmed: the waiter's re-checks cover it */
}

void distlock__waiter_remove(distlock_client *c, distlock__waiter *w)
{
    distlock__lock(c);
    for (distlock__waiter **pp = &c->waiters; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    if (c->sub_running)
        wake_subscriber(c);
    pthread_mutex_unlock(&c->mu);
}

int distlock__waiter_wait(distlock_client *c, distlock__waiter *w, uint64_t deadline_us,
                          int notice)
{
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int notified = notice && w->notified;
        if (notified)
            w->notified = 0;
        pthread_mutex_unlock(&c->mu);
        if (notified)
            return 1;
        if (distlock__now_us() >= deadline_us)
            return 0;
        if (distlock__sleep(c, &w->sl, deadline_us) == DISTLOCK_ECANCELED)
            return DISTLOCK_ECANCELED;
    }
}

void distlock__subscriber_stop(distlock_client *c)
{
    distlock__lock(c);
    int running = c->sub_running;
    c->sub_stop = 1;
    c->sub_running = 0;
    if (running)
        wake_subscriber(c);
    pthread_mutex_unlock(&c->mu);
    if (running) {
        pthread_join(c->sub_thread, NULL);
        close(c->sub_wake[0]);
        close(c->sub_wake[1]);
        c->sub_wake[0] = c->sub_wake[1] = -1;
        sub_free(c, 0);
    }
}

void distlock__subscriber_after_fork(distlock_client *c)
{
    /* The thread is the parent's; its sockets are closed here (no I/O). */
    sub_free(c, 1);
    c->sub_running = 0;
    c->waiters = NULL;
    if (c->sub_wake[0] >= 0) {
        close(c->sub_wake[0]);
        close(c->sub_wake[1]);
        c->sub_wake[0] = c->sub_wake[1] = -1;
    }
}

void distlock__waiter_set_head(distlock_client *c, distlock__waiter *w, int head)
{
    pthread_mutex_lock(&c->mu);
    w->head = head;
    pthread_mutex_unlock(&c->mu);
}
