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
 * On a Redis Cluster node a release SPUBLISHes in its key's slot (the
 * shard channel, protocol.c), and only that slot's master (and its
 * replicas) hear it: the thread keeps one connection per master it needs
 * and SSUBSCRIBEs each channel on its slot's master, as the transport's
 * slot map says. When the slot moves, the old master drops the subscription
 * (a "sunsubscribe" push): the channel is placed again, and a MOVED answer
 * to its SSUBSCRIBE names the new master.
 *
 * A 5.0/6.x cluster has no shard channels (SSUBSCRIBE is 7.0+): there the
 * release scripts fall back to PUBLISH (protocol.c), which a cluster
 * broadcasts to every node, and a master that answers SSUBSCRIBE with
 * "unknown command" is sent SUBSCRIBE to the same channel names on the same
 * connection instead ("classic"); its slot moving then needs nothing.
 *
 * No network or name-resolution work happens under the client mutex: the
 * thread connects (and resolves names, off-thread, see resolve.c) unlocked,
 * and only formats requests into buffers while it holds the mutex. Its
 * connections live in the client (c->sub), so a forked child can drop them.
 *
 * Layer: 6 background
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

/* A channel MOVED this many times in a row is placed again only after a
 * pause (a slot changing hands: both masters may name the other a while). */
#define MOVED_PAUSE_AFTER 3
#define MOVED_PAUSE_MS 20

enum { NODE_IDLE = 0, NODE_UP, NODE_FAILED };

/* A Redis Cluster node: the connection to one of its masters. */
typedef struct shard_conn {
    char host[DISTLOCK__ADDR_LEN];           /* numeric */
    int port;
    redisContext *ctx;
    distlock__tls *tls;
    uint64_t retry_at_us;
    int classic;             /* no SSUBSCRIBE on this server: SUBSCRIBE */
} shard_conn;

typedef struct sub_node {
    redisContext *ctx;       /* not used for a Redis Cluster node: sc */
    distlock__tls *tls;      /* rediss:// nodes */
    distlock__resolve *resolving;
    uint64_t retry_at_us;
    int state;               /* NODE_*: FAILED = cannot confirm subscriptions now */
    shard_conn *sc;          /* Redis Cluster node: DISTLOCK__CL_MASTERS of them */
    int nsc;
} sub_node;

/* Channels this thread has asked the nodes for. */
typedef struct sub_chan {
    struct sub_chan *next;
    char *name;
    uint64_t confirmed;      /* nodes that confirmed the subscription (bit i) */
    /* Redis Cluster nodes: the shard channel, its slot, and for node i the
     * connection (sc) it was SSUBSCRIBEd on, -1 none yet */
    char *shard;
    int slot;
    signed char *at;
    char moved_host[DISTLOCK__ADDR_LEN];     /* a MOVED answer's master, tried first */
    int moved_port, moved;
    uint64_t place_at_us;    /* not placed again before */
} sub_chan;

struct distlock__sub {
    sub_node *nodes;         /* c->n */
    sub_chan *chans;
    /* The thread's poll arrays, kept here (under c->mu) so that a forked
     * child, where the thread is gone, can free them (after_fork). */
    struct pollfd *pfd;
    int *idx, *sidx, *opening;
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

static sub_chan *find_shard_chan(struct distlock__sub *sub, const char *shard)
{
    sub_chan *ch = sub->chans;
    while (ch && (ch->shard == NULL || strcmp(ch->shard, shard) != 0))
        ch = ch->next;
    return ch;
}

static void chan_free(sub_chan *ch)
{
    free(ch->name);
    free(ch->shard);
    free(ch->at);
    free(ch);
}

static int is_cluster_node(const distlock_client *c, int i)
{
    return c->nodes[i].kind == DISTLOCK__NODE_CLUSTER;
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
static redisContext *connect_at(distlock_client *c, int i, char (*addr)[DISTLOCK__ADDR_LEN], int naddr, int port,
                                distlock__tls **tls)
{
    int st;
    char err[DISTLOCK__ERR_LEN];
    redisContext *ctx = NULL;
    distlock__node_cfg at = c->nodes[i];
    if (port > 0)
        at.port = port;
    for (int k = 0; ctx == NULL && k < (addr ? naddr : 1); k++)
        ctx = distlock__node_connect(&c->tp, i, addr ? addr[k] : NULL, at.port, NULL, tls, &st,
                                     err, sizeof(err));
    return ctx;
}

static void on_message(distlock_client *c, const char *chan, const char *payload);

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
    if (is_msg)
        on_message(c, chan, r->element[2]->type == REDIS_REPLY_STRING ? r->element[2]->str : "");
}

/* c->mu held: a release (or a fair acquire naming the next) on chan. */
static void on_message(distlock_client *c, const char *chan, const char *payload)
{
    distlock__waiter *oldest = NULL;
    for (distlock__waiter *w = c->waiters; w; w = w->next) {
        if (strcmp(w->channel, chan) != 0)
            continue;
        if (payload[0] != '\0') {
            /* A fair acquire names the new head of the queue (counted: an
             * attempt on the wire meanwhile must not undo it). */
            if (w->token && strcmp(w->token, payload) == 0) {
                w->head = 1;
                w->named++;
            }
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

/* ---------------------------------------- Redis Cluster: shard channels */

/* c->mu held: close node i's connection k; its channels are placed again
 * (once it may be retried: retry_ms). */
static void shard_drop(distlock_client *c, int i, int k, long retry_ms)
{
    sub_node *sn = &c->sub->nodes[i];
    shard_conn *sc = &sn->sc[k];
    distlock__tls_free(sc->tls);  /* writes nothing */
    sc->tls = NULL;
    if (sc->ctx)
        redisFree(sc->ctx);
    sc->ctx = NULL;
    sc->retry_at_us = distlock__now_us() + (uint64_t)retry_ms * 1000u;
    for (sub_chan *ch = c->sub->chans; ch; ch = ch->next)
        if (ch->at && ch->at[i] == k) {
            ch->at[i] = -1;
            ch->confirmed &= ~(1ull << i);
        }
    sn->state = NODE_FAILED;
    wake_settled(c);
}

/* The verb to (un)subscribe a channel on connection sc: shard channels
 * where the server has them, classic ones on a 5.0/6.x cluster. */
static const char *shard_verb(const shard_conn *sc, int subscribe)
{
    if (subscribe)
        return sc->classic ? "SUBSCRIBE" : "SSUBSCRIBE";
    return sc->classic ? "UNSUBSCRIBE" : "SUNSUBSCRIBE";
}

/* Is a push of kind `kind` the shard push `shard_kind` ("smessage",
 * "ssubscribe", "sunsubscribe") or, on a classic connection, its classic
 * twin (the same without the leading 's')? */
static int shard_kind_is(const shard_conn *sc, const char *kind, const char *shard_kind)
{
    return strcmp(kind, sc->classic ? shard_kind + 1 : shard_kind) == 0;
}

static int shard_needed(distlock_client *c, int i, int k);

/* c->mu held: node i's connection to host:port (numeric), listed (not
 * connected) if new; -1 if there is no room. Masters come and go (pods
 * rescheduled, failovers): once DISTLOCK__CL_MASTERS addresses were used, a
 * new one takes the entry of one that carries no channel (a closed one
 * first; an open one is closed: nothing is subscribed on it), else a
 * channel whose master is at a new address would never be placed again. */
static int shard_find(distlock_client *c, int i, const char *host, int port)
{
    sub_node *sn = &c->sub->nodes[i];
    for (int k = 0; k < sn->nsc; k++)
        if (sn->sc[k].port == port && strcmp(sn->sc[k].host, host) == 0)
            return k;
    if (sn->sc == NULL && (sn->sc = calloc(DISTLOCK__CL_MASTERS, sizeof(*sn->sc))) == NULL)
        return -1;
    if (strlen(host) >= sizeof(sn->sc[0].host))
        return -1;
    int k = sn->nsc < DISTLOCK__CL_MASTERS ? sn->nsc++ : -1;
    for (int j = 0; k < 0 && j < sn->nsc; j++)
        if (sn->sc[j].ctx == NULL && !shard_needed(c, i, j))
            k = j;
    for (int j = 0; k < 0 && j < sn->nsc; j++)
        if (!shard_needed(c, i, j))
            k = j;
    if (k < 0)
        return -1;
    shard_conn *sc = &sn->sc[k];
    distlock__tls_free(sc->tls);  /* writes nothing */
    if (sc->ctx)
        redisFree(sc->ctx);
    memset(sc, 0, sizeof(*sc));
    snprintf(sc->host, sizeof(sc->host), "%s", host);
    sc->port = port;
    return k;
}

/* c->mu held: SSUBSCRIBE node i's channels not placed yet, each on its
 * slot's master (a MOVED's, else the transport's slot map's). One that has
 * no master known (or a name, not an address) is left to the waiters'
 * re-checks and placed again later. */
static void shard_place(distlock_client *c, int i, uint64_t now)
{
    sub_node *sn = &c->sub->nodes[i];
    for (sub_chan *ch = c->sub->chans; ch; ch = ch->next) {
        if (ch->at == NULL || ch->at[i] >= 0 || now < ch->place_at_us)
            continue;
        char host[DISTLOCK__HOST_LEN];
        int port = 0, slot, k = -1;
        if (ch->moved_port > 0) {
            snprintf(host, sizeof(host), "%s", ch->moved_host);
            port = ch->moved_port;
            ch->moved_port = 0;
        } else if (distlock__cl_where(&c->tp, i, ch->shard, host, sizeof(host), &port, &slot) != 0) {
            host[0] = '\0';
        }
        if (host[0] && distlock__host_is_numeric(host))
            k = shard_find(c, i, host, port);
        if (k < 0) {
            ch->place_at_us = now + (uint64_t)RECONNECT_MS * 1000u;
            sn->state = NODE_FAILED;
            wake_settled(c);
            continue;
        }
        ch->at[i] = (signed char)k;
        if (sn->sc[k].ctx)
            send_cmd(sn->sc[k].ctx, shard_verb(&sn->sc[k], 1), ch->shard);
    }
}

/* c->mu held: a MOVED answer to an SSUBSCRIBE on node i's connection k:
 * the slot's channels go to the master it names. */
static void shard_moved(distlock_client *c, int i, int k, const char *err, uint64_t now)
{
    int slot, port;
    char host[DISTLOCK__ADDR_LEN];
    /* Not a redirect we can read: nothing is moved (the channel stays
     * unconfirmed on this connection; its waiters re-check on their timers). */
    if (distlock__redirect_parse(err, &slot, host, sizeof(host), &port) != 0)
        return;
    /* No host (cluster-preferred-endpoint-type unknown-endpoint): the
     * endpoint this connection was opened to, with the port given. */
    if (host[0] == '\0')
        snprintf(host, sizeof(host), "%s", c->sub->nodes[i].sc[k].host);
    for (sub_chan *ch = c->sub->chans; ch; ch = ch->next) {
        if (ch->at == NULL || ch->at[i] != k || ch->slot != slot)
            continue;
        ch->at[i] = -1;
        ch->confirmed &= ~(1ull << i);
        snprintf(ch->moved_host, sizeof(ch->moved_host), "%s", host);
        ch->moved_port = port;
        if (++ch->moved > MOVED_PAUSE_AFTER)
            ch->place_at_us = now + (uint64_t)MOVED_PAUSE_MS * 1000u;
    }
}

/* c->mu held: what node i's connection k said. */
static void shard_reply(distlock_client *c, int i, int k, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str;
    const shard_conn *sc = &c->sub->nodes[i].sc[k];
    sub_chan *ch = find_shard_chan(c->sub, r->element[1]->str);
    if (ch == NULL)
        return;
    if (shard_kind_is(sc, kind, "smessage")) {
        on_message(c, ch->name, r->element[2]->type == REDIS_REPLY_STRING ? r->element[2]->str : "");
    } else if (shard_kind_is(sc, kind, "ssubscribe") && ch->at[i] == k) {
        ch->confirmed |= 1ull << i;
        ch->moved = 0;
        c->sub->nodes[i].state = NODE_UP;
        wake_settled(c);
    } else if (shard_kind_is(sc, kind, "sunsubscribe") && ch->at[i] == k) {
        /* its slot left this master: placed again (a MOVED, if the map
         * is behind, names the new one) */
        ch->at[i] = -1;
        ch->confirmed &= ~(1ull << i);
    }
}

/* c->mu held: read what node i's connection k has. */
static void shard_read(distlock_client *c, int i, int k)
{
    shard_conn *sc = &c->sub->nodes[i].sc[k];
    if (distlock__read(sc->ctx, sc->tls) != REDIS_OK) {
        shard_drop(c, i, k, RECONNECT_MS);
        return;
    }
    void *rep;
    while (sc->ctx && redisGetReplyFromReader(sc->ctx, &rep) == REDIS_OK && rep) {
        redisReply *r = rep;
        if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "MOVED ", 6) == 0) {
            shard_moved(c, i, k, r->str, distlock__now_us());
        } else if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "ERR unknown command", 19) == 0) {
            /* A 5.0/6.x cluster: SUBSCRIBE this connection's channels
             * (once: the errors of its other SSUBSCRIBEs follow) */
            if (!sc->classic) {
                sc->classic = 1;
                for (sub_chan *ch = c->sub->chans; ch; ch = ch->next)
                    if (ch->at && ch->at[i] == k)
                        send_cmd(sc->ctx, "SUBSCRIBE", ch->shard);
            }
        } else if (r->type == REDIS_REPLY_ERROR) {
            /* NOPERM (no channel rights), a failed AUTH, CLUSTERDOWN */
            int refused = strncmp(r->str, "NOPERM", 6) == 0;
            freeReplyObject(r);
            shard_drop(c, i, k, refused ? REFUSED_RETRY_MS : RECONNECT_MS);
            break;
        } else {
            shard_reply(c, i, k, r);
        }
        freeReplyObject(r);
    }
}

/* c->mu held: has node i's connection k channels to carry? */
static int shard_needed(distlock_client *c, int i, int k)
{
    for (sub_chan *ch = c->sub->chans; ch; ch = ch->next)
        if (ch->at && ch->at[i] == k)
            return 1;
    return 0;
}

/* c->mu held: is node i's connection k needed and due to be opened? */
static int shard_due(distlock_client *c, int i, int k, uint64_t now)
{
    shard_conn *sc = &c->sub->nodes[i].sc[k];
    return sc->ctx == NULL && now >= sc->retry_at_us && shard_needed(c, i, k);
}

/* c->mu held, released meanwhile: connect node i's connection k, then
 * authenticate and SSUBSCRIBE its channels. */
static void shard_open(distlock_client *c, int i, int k)
{
    char addr[1][DISTLOCK__ADDR_LEN];
    shard_conn *sc = &c->sub->nodes[i].sc[k];
    int port = sc->port;
    distlock__tls *tls = NULL;
    memcpy(addr[0], sc->host, sizeof(addr[0]));
    pthread_mutex_unlock(&c->mu);
    redisContext *ctx = connect_at(c, i, addr, 1, port, &tls);
    pthread_mutex_lock(&c->mu);
    sc = &c->sub->nodes[i].sc[k];  /* only this thread changes the list */
    if (ctx == NULL) {
        shard_drop(c, i, k, RECONNECT_MS);
        return;
    }
    sc->ctx = ctx;
    sc->tls = tls;
    sc->classic = 0;  /* asked again: the server may have been upgraded */
    (void)distlock__tp_append_auth(&c->tp, i, ctx);
    for (sub_chan *ch = c->sub->chans; ch; ch = ch->next)
        if (ch->at && ch->at[i] == k)
            send_cmd(ctx, "SSUBSCRIBE", ch->shard);
}

/* c->mu held: a new channel's shard name, for the Redis Cluster nodes. */
static int chan_shard_init(distlock_client *c, sub_chan *ch)
{
    if (c->tp.cl == NULL || strncmp(ch->name, "distlock:", 9) != 0)
        return 0;
    if ((ch->shard = malloc(DISTLOCK__SIDEKEY_MAX)) == NULL ||
        (ch->at = malloc((size_t)c->n)) == NULL)
        return -1;
    distlock__shard_channel_name(ch->shard, ch->name + 9);
    ch->slot = (int)distlock__key_slot(ch->shard, strlen(ch->shard));
    memset(ch->at, -1, (size_t)c->n);
    return 0;
}

/* c->mu held: subscribe to channels newly wanted, drop unused ones. */
static void sync_channels(distlock_client *c)
{
    struct distlock__sub *sub = c->sub;
    for (distlock__waiter *w = c->waiters; w; w = w->next) {
        if (find_chan(sub, w->channel))
            continue;
        sub_chan *ch = calloc(1, sizeof(*ch));
        if (!ch || !(ch->name = strdup(w->channel)) || chan_shard_init(c, ch) != 0) {
            if (ch)
                chan_free(ch);
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
        for (int i = 0; i < c->n; i++) {
            sub_node *sn = &sub->nodes[i];
            if (sn->ctx && sn->state == NODE_UP)
                send_cmd(sn->ctx, "UNSUBSCRIBE", ch->name);
            if (ch->at && ch->at[i] >= 0 && sn->sc[ch->at[i]].ctx)
                send_cmd(sn->sc[ch->at[i]].ctx, shard_verb(&sn->sc[ch->at[i]], 0), ch->shard);
        }
        *pp = ch->next;
        chan_free(ch);
    }
}

static void *subscriber_main(void *arg)
{
    distlock_client *c = arg;
    struct distlock__sub *sub = c->sub;
    /* poll: the wake-up pipe, a connection per node, and for a Redis
     * Cluster node one per master (idx: node, sidx: its connection) */
    size_t cap = 1 + (size_t)c->n;
    for (int i = 0; i < c->n; i++)
        if (is_cluster_node(c, i))
            cap += DISTLOCK__CL_MASTERS;
    struct pollfd *pfd = calloc(cap, sizeof(*pfd));
    int *idx = calloc(cap, sizeof(int)), *sidx = calloc(cap, sizeof(int));
    int *opening = calloc((size_t)c->n, sizeof(int));

    pthread_mutex_lock(&c->mu);
    sub->pfd = pfd, sub->idx = idx, sub->sidx = sidx, sub->opening = opening;
    while (!c->sub_stop && opening && pfd && idx && sidx) {
        uint64_t now = distlock__now_us();
        sync_channels(c);

        /* Redis Cluster nodes: channels to place, masters to connect to
         * (one at a time, without the mutex) */
        int opened = 0;
        for (int i = 0; i < c->n && !opened; i++) {
            if (!is_cluster_node(c, i))
                continue;
            shard_place(c, i, now);
            for (int k = 0; k < sub->nodes[i].nsc && !opened; k++)
                if (shard_due(c, i, k, now)) {
                    shard_open(c, i, k);
                    opened = 1;
                }
        }
        if (opened)
            continue;

        /* Connections to (re)open: done below, without the mutex. */
        int nopen = 0;
        for (int i = 0; i < c->n; i++) {
            sub_node *sn = &sub->nodes[i];
            if (sub->chans && !is_cluster_node(c, i) && sn->ctx == NULL && sn->resolving == NULL &&
                now >= sn->retry_at_us)
                opening[nopen++] = i;
        }
        if (nopen > 0) {
            pthread_mutex_unlock(&c->mu);
            for (int k = 0; k < nopen; k++) {
                int i = opening[k];
                const distlock__node_cfg *cfg = &c->nodes[i];
                redisContext *ctx = NULL;
                distlock__tls *tls = NULL;
                distlock__resolve *res = NULL;
                if (cfg->kind == DISTLOCK__NODE_SENTINEL) {
                    /* Its master, asked of the sentinels on every
                     * (re)connection, which follows failovers. A demoted
                     * master still gets the new one's PUBLISHes (they
                     * replicate), so no ROLE check is needed here. */
                    res = distlock__sentinel_start(&c->tp, i, c->tp.connect_timeout_ms);
                } else if (cfg->host && !distlock__host_is_numeric(cfg->host)) {
                    res = distlock__resolve_start(cfg->host);
                } else {
                    char addr[1][DISTLOCK__ADDR_LEN];
                    if (cfg->host)
                        snprintf(addr[0], sizeof(addr[0]), "%s", cfg->host);
                    ctx = connect_at(c, i, cfg->host ? addr : NULL, 1, 0, &tls);
                }
                pthread_mutex_lock(&c->mu);
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
            for (int k = 0; k < sn->nsc; k++) {
                shard_conn *sc = &sn->sc[k];
                int done = 0;
                if (sc->ctx == NULL) {
                    if (sc->retry_at_us < next && shard_needed(c, i, k))
                        next = sc->retry_at_us;
                    continue;
                }
                if (distlock__write(sc->ctx, sc->tls, &done) != REDIS_OK) {
                    shard_drop(c, i, k, RECONNECT_MS);
                    continue;
                }
                pfd[np].fd = sc->ctx->fd;
                pfd[np].events = (short)distlock__events(sc->ctx, sc->tls);
                idx[np] = i, sidx[np++] = k;
            }
            for (sub_chan *ch = sub->chans; ch && is_cluster_node(c, i); ch = ch->next)
                if (ch->at && ch->at[i] < 0 && ch->place_at_us < next)
                    next = ch->place_at_us;
            if (sn->resolving) {
                pfd[np].fd = distlock__resolve_fd(sn->resolving);
                pfd[np].events = POLLIN;
                idx[np] = i, sidx[np++] = -1;
                continue;
            }
            if (sn->ctx == NULL) {
                if (sub->chans && !is_cluster_node(c, i) && sn->retry_at_us < next)
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
            idx[np] = i, sidx[np++] = -1;
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
            if (sidx[k] >= 0) {
                shard_conn *sc = &sn->sc[sidx[k]];
                if (sc->ctx && sc->ctx->fd == pfd[k].fd &&
                    (pfd[k].revents & (POLLIN | POLLERR | POLLHUP)))
                    shard_read(c, i, sidx[k]);
                continue;
            }
            if (sn->resolving) {
                char addr[DISTLOCK__RESOLVE_MAX][DISTLOCK__ADDR_LEN], err[DISTLOCK__ERR_LEN];
                int naddr = 0;
                int rc = distlock__resolve_take(sn->resolving, addr, &naddr, err, sizeof(err));
                if (rc > 0)
                    continue;
                int port = distlock__resolve_port(sn->resolving);
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
    sub->pfd = NULL, sub->idx = sub->sidx = sub->opening = NULL;
    pthread_mutex_unlock(&c->mu);
    free(opening);
    free(pfd);
    free(idx);
    free(sidx);
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
        for (int k = 0; k < sub->nodes[i].nsc; k++) {
            distlock__tls_free(sub->nodes[i].sc[k].tls);
            if (sub->nodes[i].sc[k].ctx)
                redisFree(sub->nodes[i].sc[k].ctx);
        }
        free(sub->nodes[i].sc);
        /* In a forked child the lookup thread is the parent's: let go of
         * the memory rather than wait for a thread that does not exist. */
        if (!forget)
            distlock__resolve_drop(sub->nodes[i].resolving);
    }
    while (sub->chans) {
        sub_chan *next = sub->chans->next;
        chan_free(sub->chans);
        sub->chans = next;
    }
    free(sub->nodes);
    free(sub);
    c->sub = NULL;
}

/* c->mu held on return when DISTLOCK_OK; not held on an error. */
static int waiter_add_locked(distlock_client *c, distlock__waiter *w)
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
    return DISTLOCK_OK;
}

int distlock__waiter_add_start(distlock_client *c, distlock__waiter *w)
{
    int rc = waiter_add_locked(c, w);
    if (rc == DISTLOCK_OK)
        pthread_mutex_unlock(&c->mu);
    return rc;
}

int distlock__waiter_settled(distlock_client *c, distlock__waiter *w, uint64_t deadline_us)
{
    pthread_mutex_lock(&c->mu);
    int done = w->subscribed || settled(c, w->channel) || distlock__now_us() >= deadline_us;
    w->subscribed |= done;
    pthread_mutex_unlock(&c->mu);
    return done;
}

int distlock__waiter_take_notified(distlock_client *c, distlock__waiter *w)
{
    pthread_mutex_lock(&c->mu);
    int notified = w->notified;
    w->notified = 0;
    pthread_mutex_unlock(&c->mu);
    return notified;
}

int distlock__waiter_add(distlock_client *c, distlock__waiter *w)
{
    int rc = waiter_add_locked(c, w);
    if (rc != DISTLOCK_OK)
        return rc;
    uint64_t deadline = distlock__now_us() + (uint64_t)c->tp.connect_timeout_ms * 1000u;
    while (!w->subscribed && !settled(c, w->channel) && distlock__now_us() < deadline) {
        pthread_mutex_unlock(&c->mu);
        if (distlock__sleep(c, &w->sl, deadline) == DISTLOCK_ECANCELED) {
            rc = DISTLOCK_ECANCELED;
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
    /* The thread is the parent's; its sockets are closed here (no I/O),
     * and the arrays it polled with are freed: nothing else holds them. */
    if (c->sub) {
        free(c->sub->pfd);
        free(c->sub->idx);
        free(c->sub->sidx);
        free(c->sub->opening);
        c->sub->pfd = NULL, c->sub->idx = c->sub->sidx = c->sub->opening = NULL;
    }
    sub_free(c, 1);
    c->sub_running = 0;
    c->waiters = NULL;
    if (c->sub_wake[0] >= 0) {
        close(c->sub_wake[0]);
        close(c->sub_wake[1]);
        c->sub_wake[0] = c->sub_wake[1] = -1;
    }
}

unsigned distlock__waiter_named(distlock_client *c, distlock__waiter *w)
{
    pthread_mutex_lock(&c->mu);
    unsigned named = w->named;
    pthread_mutex_unlock(&c->mu);
    return named;
}

/* An attempt's view is older than a naming that arrived while it was on the
 * wire: the attempt may have run on the servers before the acquire that
 * named us, and saw us still behind it. Taking its "not the head" would
 * leave the next release to wake nobody here, and the new head to its
 * re-check timer. */
void distlock__waiter_set_head(distlock_client *c, distlock__waiter *w, int head,
                               unsigned named_before)
{
    pthread_mutex_lock(&c->mu);
    w->head = head || w->named != named_before;
    pthread_mutex_unlock(&c->mu);
}
