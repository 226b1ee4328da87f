/* pubsub.c -- subscription connections: one per node, channels on them.
 *
 * Its owner (wait.c) names channels; this file holds, for each node, the
 * connection that carries their SUBSCRIBEs, and reports what the servers
 * say: a message on a channel, a subscription confirmed on a node, a node
 * that cannot confirm any (down, or an ACL user without channel rights).
 * It knows no lock and no waiter.
 *
 * Where a node's connection goes depends on its kind, decided in two
 * places only (node_start, and distlock__pubsub_new flagging the Cluster
 * nodes): a plain node's address (its name resolved off-thread,
 * resolve.c) or Unix socket; a Sentinel node's master, asked of the
 * sentinels on every (re)connection (sentinel.c), which follows failovers
 * (a demoted master still gets the new one's PUBLISHes: they replicate, so
 * no ROLE check is needed); a Redis Cluster node's shard channels on their
 * slots' masters.
 *
 * On a Redis Cluster node a channel given a shard name (the owner's
 * SPUBLISH channel for it) is SSUBSCRIBEd on its slot's master, as the
 * transport's slot map says: one connection per master needed. When the
 * slot moves, the old master drops the subscription (a "sunsubscribe"
 * push): the channel is placed again, and a MOVED answer to its SSUBSCRIBE
 * (read by cluster.c's strict distlock__redirect_parse) names the new
 * master. A 5.0/6.x cluster has no shard channels (SSUBSCRIBE is 7.0+):
 * a master that answers SSUBSCRIBE with "unknown command" is sent
 * SUBSCRIBE to the same channel names on the same connection instead
 * ("classic"); its slot moving then needs nothing.
 *
 * Connections are opened again after RECONNECT_MS; a node that refused
 * (NOPERM) only after REFUSED_RETRY_MS.
 *
 * A connection that says nothing is not trusted for ever: a paused host, a
 * black-holing middlebox or a dropped NAT entry never closes it, and a
 * subscriber left there never hears a release again. Each connection owes
 * its first reply within the connect timeout (connect, TLS, AUTH and the
 * first (S)SUBSCRIBE's confirmation), and an idle one is PINGed every
 * PING_MS and owes the reply within the command timeout (in RESP2
 * subscribe mode PING answers ["pong", ""]); anything heard counts. A
 * connection past its due time is dropped and made again.
 *
 * Nor is a connection kept once its node's kind says it leads to the wrong
 * server, checked every DISTLOCK__CURRENT_CHECK_MS (transport.h): a
 * Sentinel node's connection made under an endpoint state the kind's
 * `current` hook no longer accepts (a failover was announced, or a round
 * found the master gone) is dropped and its master asked for again; on a
 * Cluster node a channel whose slot the transport's map now gives to
 * another master (or another address) is placed again there. A Cluster master that did not answer (or is marked
 * down in the map) is not asked again for its channels at once: they are
 * SSUBSCRIBEd on another master of the map, whose MOVED names the slot's
 * owner as the cluster sees it (after a failover: the promoted replica,
 * which the waiter's own map may not know yet).
 *
 * Threads: the state is guarded by the owner's mutex (distlock__pubsub_new's
 * mu). Its steps run with it held and release it around connecting (a TLS
 * context may load files): no network or name-resolution work is done
 * under it. The callbacks run with it held. Only one thread (the owner's)
 * calls the steps; others may read distlock__pubsub_confirmed /
 * _can_confirm under mu. distlock__pubsub_free writes nothing, so a forked
 * child frees the parent's state without a byte on the parent's sockets.
 *
 * Layer: 1 transport
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"  /* distlock__cl_redirect: a MOVED teaches the slot map */

#define RECONNECT_MS 200
/* A node that refused SUBSCRIBE (no channel rights) is asked again only
 * this rarely: it will most likely refuse again. */
#define REFUSED_RETRY_MS 30000
/* With nothing due, the owner's loop still comes back this often. */
#define IDLE_MS 1000
/* An idle subscription is PINGed this often (its reply owed within the
 * command timeout): a dead server is then noticed within PING_MS plus that
 * timeout, like the announcement subscriptions' (sentinel.c WATCH_PING_MS),
 * and a release is not missed for longer than that (wait.c: the waiters
 * re-check when the subscription is confirmed again). One PING a second per
 * connection costs the server nothing measurable. */
#define PING_MS 1000

/* A channel MOVED this many times in a row is placed again only after a
 * pause (a slot changing hands: both masters may name the other a while). */
#define MOVED_PAUSE_AFTER 3
#define MOVED_PAUSE_MS 20

enum { NODE_IDLE = 0, NODE_UP, NODE_FAILED };

/* A connection's liveness: a reply owed by due_us (0: none), and when it
 * is PINGed if idle (0: not yet heard from). */
typedef struct ps_live {
    uint64_t due_us;
    uint64_t ping_at_us;
} ps_live;

/* A Redis Cluster node: the connection to one of its masters. */
typedef struct shard_conn {
    char host[DISTLOCK__ADDR_LEN];           /* numeric */
    int port;
    distlock__stream st;     /* closed (st.ctx NULL): not connected */
    uint64_t retry_at_us;
    int classic;             /* no SSUBSCRIBE on this server: SUBSCRIBE */
    ps_live lv;
    /* it failed or did not answer, and has not answered since: its
     * channels are placed on another master first (shard_place) */
    int suspect;
} shard_conn;

typedef struct ps_node {
    int sharded;             /* a Redis Cluster node: channels on their slots' masters */
    distlock__stream st;     /* the node's own (plain or TLS); not used for a
                              * Redis Cluster node: sc */
    distlock__resolve *resolving;
    uint64_t retry_at_us;
    int state;               /* NODE_*: FAILED = cannot confirm subscriptions now */
    shard_conn *sc;          /* Redis Cluster node: DISTLOCK__CL_MASTERS of them */
    int nsc;
    int probe;               /* Cluster node: the next master to ask instead of a suspect one */
    ps_live lv;
    unsigned ep_state;       /* the endpoint state st was made under (kind's `current`) */
} ps_node;

/* Channels the owner asked for. */
typedef struct ps_chan {
    struct ps_chan *next;
    char *name;
    uint64_t confirmed;      /* nodes that confirmed the subscription (bit i) */
    /* Redis Cluster nodes: the shard channel, its slot, and for node i the
     * connection (sc) it was SSUBSCRIBEd on, -1 none yet */
    char *shard;
    int slot;
    signed char *at;
    unsigned *tok;           /* for node i: the map's owner of slot when placed (map_token) */
    char moved_host[DISTLOCK__ADDR_LEN];     /* a MOVED answer's master, tried first */
    int moved_port, moved;
    uint64_t place_at_us;    /* not placed again before */
} ps_chan;

struct distlock__pubsub {
    distlock__transport *t;
    pthread_mutex_t *mu;
    distlock__pubsub_cb cb;
    int n, nsharded;
    ps_node *nodes;
    ps_chan *chans;
    /* what interest's entry k is: node idx[k], its connection sidx[k] (a
     * Cluster master's; -1: the node's own or its lookup) */
    int *idx, *sidx, *opening;
    int cap;
    uint64_t current_at_us;  /* next comparison with the kinds' view */
    int watch_kinds;         /* a node whose kind may move its connections */
};

static void send_cmd(redisContext *ctx, const char *verb, const char *arg)
{
    const char *argv[2] = { verb, arg };
    size_t len[2] = { strlen(verb), strlen(arg) };
    (void)distlock__resp_append(ctx, 2, argv, len);
}

static ps_chan *find_chan(const distlock__pubsub *ps, const char *name)
{
    ps_chan *ch = ps->chans;
    while (ch && strcmp(ch->name, name) != 0)
        ch = ch->next;
    return ch;
}

static ps_chan *find_shard_chan(const distlock__pubsub *ps, const char *shard)
{
    ps_chan *ch = ps->chans;
    while (ch && (ch->shard == NULL || strcmp(ch->shard, shard) != 0))
        ch = ch->next;
    return ch;
}

static void chan_free(ps_chan *ch)
{
    free(ch->name);
    free(ch->shard);
    free(ch->at);
    free(ch->tok);
    free(ch);
}

/* ---------------------------------------- liveness */

static long connect_ms(const distlock__pubsub *ps)
{
    return ps->t->connect_timeout_ms;
}

static long command_ms(const distlock__pubsub *ps)
{
    return ps->t->command_timeout_ms;
}

/* A connection just opened owes its first reply within the connect timeout. */
static void live_opened(ps_live *lv, long ms)
{
    lv->due_us = distlock__now_us() + (uint64_t)ms * 1000u;
    lv->ping_at_us = 0;
}

/* Something was heard: nothing is owed; PINGed once idle for PING_MS. */
static void live_heard(ps_live *lv)
{
    lv->due_us = 0;
    lv->ping_at_us = distlock__now_us() + (uint64_t)PING_MS * 1000u;
}

/* A request written on a connection that owed nothing: its reply is due. */
static void live_sent(ps_live *lv, long ms)
{
    if (lv->due_us == 0)
        lv->due_us = distlock__now_us() + (uint64_t)ms * 1000u;
}

/* mu held: -1 if the connection is past its due time (the caller drops
 * it); else PING it if idle long enough, and lower *next to when to look
 * again. */
static int live_check(const distlock__pubsub *ps, ps_live *lv, redisContext *ctx, uint64_t now,
                      uint64_t *next)
{
    if (lv->due_us && now >= lv->due_us)
        return -1;
    if (lv->due_us == 0 && lv->ping_at_us && now >= lv->ping_at_us) {
        const char *argv[1] = { "PING" };
        size_t len[1] = { 4 };
        (void)distlock__resp_append(ctx, 1, argv, len);
        lv->due_us = now + (uint64_t)command_ms(ps) * 1000u;
    }
    uint64_t at = lv->due_us ? lv->due_us : lv->ping_at_us;
    if (at && at < *next)
        *next = at;
    return 0;
}

/* mu held: tell the owner a subscription changed (chan NULL: every
 * channel of node i, or the node's ability to confirm). */
static void tell(distlock__pubsub *ps, const char *chan, int i, int up)
{
    if (ps->cb.subscription)
        ps->cb.subscription(ps->cb.arg, chan, i, up);
}

static void close_conn(distlock__stream *st)
{
    distlock__stream_close(st);  /* writes nothing, also in a forked child */
}

/* mu held */
static void node_drop(distlock__pubsub *ps, int i, long retry_ms)
{
    ps_node *sn = &ps->nodes[i];
    close_conn(&sn->st);
    sn->retry_at_us = distlock__now_us() + (uint64_t)retry_ms * 1000u;
    sn->state = NODE_FAILED;
    for (ps_chan *ch = ps->chans; ch; ch = ch->next)
        ch->confirmed &= ~(1ull << i);
    tell(ps, NULL, i, 0);
}

/* mu held: authenticate and subscribe on a connection just made. */
static void node_greet(distlock__pubsub *ps, int i)
{
    ps_node *sn = &ps->nodes[i];
    (void)distlock__tp_append_auth(ps->t, i, sn->st.ctx);
    for (ps_chan *ch = ps->chans; ch; ch = ch->next)
        send_cmd(sn->st.ctx, "SUBSCRIBE", ch->name);
    live_opened(&sn->lv, connect_ms(ps));
    sn->state = NODE_UP;
}

/* Unlocked: connect node i at addr (NULL: its Unix socket), at port (0:
 * the node's own; a Sentinel node's master has the sentinels' port). */
static distlock__stream connect_at(distlock__pubsub *ps, int i, char (*addr)[DISTLOCK__ADDR_LEN],
                                   int naddr, int port)
{
    int status;
    char err[DISTLOCK__ERR_LEN];
    distlock__stream st = { 0 };
    if (port <= 0)
        port = ps->t->nodes[i].port;
    for (int k = 0; st.ctx == NULL && k < (addr ? naddr : 1); k++)
        (void)distlock__stream_open_node(&st, ps->t, i, addr ? addr[k] : NULL, port, NULL, &status,
                                         err, sizeof(err));
    return st;
}

/* mu held: a push on node i's own connection. */
static void node_reply(distlock__pubsub *ps, int i, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str, *chan = r->element[1]->str;
    if (strcmp(kind, "subscribe") == 0) {
        ps_chan *ch = find_chan(ps, chan);
        if (ch)
            ch->confirmed |= 1ull << i;
        tell(ps, chan, i, 1);
        return;
    }
    if (strcmp(kind, "message") == 0 && ps->cb.message)
        ps->cb.message(ps->cb.arg, chan,
                       r->element[2]->type == REDIS_REPLY_STRING ? r->element[2]->str : "");
}

/* mu held: read what node i's own connection has. */
static void node_read(distlock__pubsub *ps, int i)
{
    ps_node *sn = &ps->nodes[i];
    if (distlock__stream_read(&sn->st) != REDIS_OK) {
        node_drop(ps, i, RECONNECT_MS);
        return;
    }
    void *rep;
    while (sn->st.ctx && redisGetReplyFromReader(sn->st.ctx, &rep) == REDIS_OK && rep) {
        redisReply *r = rep;
        live_heard(&sn->lv);
        if (r->type == REDIS_REPLY_ERROR) {
            /* NOPERM (no channel rights) or a failed AUTH: this node
             * cannot notify; the owner relies on other means. */
            int refused = strncmp(r->str, "NOPERM", 6) == 0;
            freeReplyObject(r);
            node_drop(ps, i, refused ? REFUSED_RETRY_MS : RECONNECT_MS);
            break;
        }
        node_reply(ps, i, r);
        freeReplyObject(r);
    }
}

/* ---------------------------------------- Redis Cluster: shard channels */

/* mu held: close node i's connection k; its channels are placed again
 * (once it may be retried: retry_ms). */
static void shard_drop(distlock__pubsub *ps, int i, int k, long retry_ms)
{
    ps_node *sn = &ps->nodes[i];
    shard_conn *sc = &sn->sc[k];
    close_conn(&sc->st);
    sc->retry_at_us = distlock__now_us() + (uint64_t)retry_ms * 1000u;
    for (ps_chan *ch = ps->chans; ch; ch = ch->next)
        if (ch->at && ch->at[i] == k) {
            ch->at[i] = -1;
            ch->confirmed &= ~(1ull << i);
        }
    sn->state = NODE_FAILED;
    tell(ps, NULL, i, 0);
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

/* mu held: has node i's connection k channels to carry? */
static int shard_needed(const distlock__pubsub *ps, int i, int k)
{
    for (const ps_chan *ch = ps->chans; ch; ch = ch->next)
        if (ch->at && ch->at[i] == k)
            return 1;
    return 0;
}

/* mu held: node i's connection to host:port (numeric), listed (not
 * connected) if new; -1 if there is no room. Masters come and go (pods
 * rescheduled, failovers): once DISTLOCK__CL_MASTERS addresses were used, a
 * new one takes the entry of one that carries no channel (a closed one
 * first; an open one is closed: nothing is subscribed on it), else a
 * channel whose master is at a new address would never be placed again. */
static int shard_find(distlock__pubsub *ps, int i, const char *host, int port)
{
    ps_node *sn = &ps->nodes[i];
    for (int k = 0; k < sn->nsc; k++)
        if (sn->sc[k].port == port && strcmp(sn->sc[k].host, host) == 0)
            return k;
    if (sn->sc == NULL && (sn->sc = calloc(DISTLOCK__CL_MASTERS, sizeof(*sn->sc))) == NULL)
        return -1;
    if (strlen(host) >= sizeof(sn->sc[0].host))
        return -1;
    int k = sn->nsc < DISTLOCK__CL_MASTERS ? sn->nsc++ : -1;
    for (int j = 0; k < 0 && j < sn->nsc; j++)
        if (sn->sc[j].st.ctx == NULL && !shard_needed(ps, i, j))
            k = j;
    for (int j = 0; k < 0 && j < sn->nsc; j++)
        if (!shard_needed(ps, i, j))
            k = j;
    if (k < 0)
        return -1;
    shard_conn *sc = &sn->sc[k];
    close_conn(&sc->st);
    memset(sc, 0, sizeof(*sc));
    snprintf(sc->host, sizeof(sc->host), "%s", host);
    sc->port = port;
    return k;
}

/* The owner of slot in node i's map now, as a value that changes when the
 * owner does, its address does, or it is marked down (0: none known). */
static unsigned map_token(distlock__transport *t, int i, int slot)
{
    const distlock__clmap *map = t->cl ? t->cl[i] : NULL;
    if (map == NULL || slot < 0 || slot >= DISTLOCK__SLOTS)
        return 0;
    pthread_mutex_lock(&t->mu);
    int m = map->owner[slot] ? map->owner[slot] - 1 : -1;
    unsigned tok = m < 0 ? 0 : (unsigned)(m + 1) | (map->m[m].down ? 0x80u : 0u) | map->m[m].gen << 8;
    pthread_mutex_unlock(&t->mu);
    return tok;
}

/* mu held: node i's connection to host:port if listed, else -1. */
static int shard_known(const distlock__pubsub *ps, int i, const char *host, int port)
{
    const ps_node *sn = &ps->nodes[i];
    for (int k = 0; k < sn->nsc; k++)
        if (sn->sc[k].port == port && strcmp(sn->sc[k].host, host) == 0)
            return k;
    return -1;
}

/* mu held: the slot's master (host:port) is marked down or did not answer
 * us: another master of node i's map (by turns) to SSUBSCRIBE on instead,
 * whose MOVED names the owner as the cluster sees it. 0 with host/port
 * replaced, -1 if there is none. */
static int shard_other(distlock__pubsub *ps, int i, char *host, size_t hostlen, int *port)
{
    ps_node *sn = &ps->nodes[i];
    const distlock__clmap *map = ps->t->cl ? ps->t->cl[i] : NULL;
    int found = -1;
    if (map == NULL)
        return -1;
    pthread_mutex_lock(&ps->t->mu);
    for (int n = 0; found < 0 && n < map->nm; n++) {
        int j = (sn->probe + n) % map->nm;
        const distlock__clmaster *m = &map->m[j];
        if (m->port <= 0 || m->down || (m->port == *port && strcmp(m->host, host) == 0) ||
            !distlock__host_is_numeric(m->host))
            continue;
        int k = shard_known(ps, i, m->host, m->port);
        if (k >= 0 && sn->sc[k].suspect)
            continue;
        /* a master of some slot only: a seed may be a replica, which
         * accepts the SSUBSCRIBE of its master's slots, and its confirming
         * would send the waiters' re-checks to the old master meanwhile */
        int owns = 0;
        for (int sl = 0; !owns && sl < DISTLOCK__SLOTS; sl++)
            owns = map->owner[sl] == j + 1;
        if (!owns)
            continue;
        found = j;
    }
    if (found >= 0) {
        snprintf(host, hostlen, "%s", map->m[found].host);
        *port = map->m[found].port;
        sn->probe = found + 1;
    }
    pthread_mutex_unlock(&ps->t->mu);
    return found >= 0 ? 0 : -1;
}

/* mu held: SSUBSCRIBE node i's channels not placed yet, each on its
 * slot's master (a MOVED's, else the transport's slot map's). One that has
 * no master known (or a name, not an address) is left unconfirmed and
 * placed again later. */
static void shard_place(distlock__pubsub *ps, int i, uint64_t now)
{
    ps_node *sn = &ps->nodes[i];
    for (ps_chan *ch = ps->chans; ch; ch = ch->next) {
        if (ch->at == NULL || ch->at[i] >= 0 || now < ch->place_at_us)
            continue;
        char host[DISTLOCK__HOST_LEN];
        int port = 0, slot, k = -1;
        ch->tok[i] = map_token(ps->t, i, ch->slot);
        if (ch->moved_port > 0) {
            snprintf(host, sizeof(host), "%s", ch->moved_host);
            port = ch->moved_port;
            ch->moved_port = 0;
        } else if (distlock__cl_where(ps->t, i, ch->shard, host, sizeof(host), &port, &slot) != 0) {
            host[0] = '\0';
        } else if (distlock__host_is_numeric(host)) {
            /* its master marked down, or silent to us: ask another */
            int known = shard_known(ps, i, host, port);
            if ((ch->tok[i] & 0x80u) || (known >= 0 && ps->nodes[i].sc[known].suspect))
                (void)shard_other(ps, i, host, sizeof(host), &port);
        }
        if (host[0] && distlock__host_is_numeric(host))
            k = shard_find(ps, i, host, port);
        if (k < 0) {
            ch->place_at_us = now + (uint64_t)RECONNECT_MS * 1000u;
            sn->state = NODE_FAILED;
            tell(ps, NULL, i, 0);
            continue;
        }
        ch->at[i] = (signed char)k;
        if (sn->sc[k].st.ctx) {
            send_cmd(sn->sc[k].st.ctx, shard_verb(&sn->sc[k], 1), ch->shard);
            live_sent(&sn->sc[k].lv, command_ms(ps));
        }
    }
}

/* mu held: a MOVED answer to an SSUBSCRIBE on node i's connection k:
 * the slot's channels go to the master it names. */
static void shard_moved(distlock__pubsub *ps, int i, int k, const char *err, uint64_t now)
{
    int slot, port;
    char host[DISTLOCK__ADDR_LEN];
    /* Not a redirect we can read: nothing is moved (the channel stays
     * unconfirmed on this connection). */
    if (distlock__redirect_parse(err, &slot, host, sizeof(host), &port) != 0)
        return;
    /* No host (cluster-preferred-endpoint-type unknown-endpoint): the
     * endpoint this connection was opened to, with the port given. */
    if (host[0] == '\0')
        snprintf(host, sizeof(host), "%s", ps->nodes[i].sc[k].host);
    /* The transport's map learns the owner too, as from a call's MOVED:
     * after a failover the waiter's own map may still name the old master,
     * and the re-check this subscription's confirmation will cause (wait.c)
     * would go there. */
    int ask = 0;
    (void)distlock__cl_redirect(ps->t, i, -1, err, &ask);
    for (ps_chan *ch = ps->chans; ch; ch = ch->next) {
        if (ch->at == NULL || ch->at[i] != k || ch->slot != slot)
            continue;
        ch->at[i] = -1;
        if (ch->confirmed & (1ull << i)) {
            ch->confirmed &= ~(1ull << i);
            tell(ps, ch->name, i, 0);
        }
        snprintf(ch->moved_host, sizeof(ch->moved_host), "%s", host);
        ch->moved_port = port;
        if (++ch->moved > MOVED_PAUSE_AFTER)
            ch->place_at_us = now + (uint64_t)MOVED_PAUSE_MS * 1000u;
    }
}

/* mu held: a push on node i's connection k. */
static void shard_reply(distlock__pubsub *ps, int i, int k, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str;
    const shard_conn *sc = &ps->nodes[i].sc[k];
    ps_chan *ch = find_shard_chan(ps, r->element[1]->str);
    if (ch == NULL)
        return;
    if (shard_kind_is(sc, kind, "smessage")) {
        if (ps->cb.message)
            ps->cb.message(ps->cb.arg, ch->name,
                           r->element[2]->type == REDIS_REPLY_STRING ? r->element[2]->str : "");
    } else if (shard_kind_is(sc, kind, "ssubscribe") && ch->at[i] == k) {
        ch->confirmed |= 1ull << i;
        ch->moved = 0;
        ps->nodes[i].state = NODE_UP;
        tell(ps, ch->name, i, 1);
    } else if (shard_kind_is(sc, kind, "sunsubscribe") && ch->at[i] == k) {
        /* its slot left this master: placed again (a MOVED, if the map
         * is behind, names the new one) */
        ch->at[i] = -1;
        ch->confirmed &= ~(1ull << i);
        tell(ps, ch->name, i, 0);
    }
}

/* mu held: read what node i's connection k has. */
static void shard_read(distlock__pubsub *ps, int i, int k)
{
    shard_conn *sc = &ps->nodes[i].sc[k];
    if (distlock__stream_read(&sc->st) != REDIS_OK) {
        sc->suspect = 1;
        shard_drop(ps, i, k, RECONNECT_MS);
        return;
    }
    void *rep;
    while (sc->st.ctx && redisGetReplyFromReader(sc->st.ctx, &rep) == REDIS_OK && rep) {
        redisReply *r = rep;
        live_heard(&sc->lv);
        sc->suspect = 0;
        if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "MOVED ", 6) == 0) {
            shard_moved(ps, i, k, r->str, distlock__now_us());
        } else if (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "ERR unknown command", 19) == 0) {
            /* A 5.0/6.x cluster: SUBSCRIBE this connection's channels
             * (once: the errors of its other SSUBSCRIBEs follow) */
            if (!sc->classic) {
                sc->classic = 1;
                for (ps_chan *ch = ps->chans; ch; ch = ch->next)
                    if (ch->at && ch->at[i] == k)
                        send_cmd(sc->st.ctx, "SUBSCRIBE", ch->shard);
            }
        } else if (r->type == REDIS_REPLY_ERROR) {
            /* NOPERM (no channel rights), a failed AUTH, CLUSTERDOWN */
            int refused = strncmp(r->str, "NOPERM", 6) == 0;
            freeReplyObject(r);
            shard_drop(ps, i, k, refused ? REFUSED_RETRY_MS : RECONNECT_MS);
            break;
        } else {
            shard_reply(ps, i, k, r);
        }
        freeReplyObject(r);
    }
}

/* mu held: is node i's connection k needed and due to be opened? */
static int shard_due(const distlock__pubsub *ps, int i, int k, uint64_t now)
{
    const shard_conn *sc = &ps->nodes[i].sc[k];
    return sc->st.ctx == NULL && now >= sc->retry_at_us && shard_needed(ps, i, k);
}

/* mu held, released meanwhile: connect node i's connection k, then
 * authenticate and SSUBSCRIBE its channels. */
static void shard_open(distlock__pubsub *ps, int i, int k)
{
    char addr[1][DISTLOCK__ADDR_LEN];
    shard_conn *sc = &ps->nodes[i].sc[k];
    int port = sc->port;
    memcpy(addr[0], sc->host, sizeof(addr[0]));
    pthread_mutex_unlock(ps->mu);
    distlock__stream st = connect_at(ps, i, addr, 1, port);
    pthread_mutex_lock(ps->mu);
    sc = &ps->nodes[i].sc[k];  /* only the stepping thread changes the list */
    if (st.ctx == NULL) {
        sc->suspect = 1;
        shard_drop(ps, i, k, RECONNECT_MS);
        return;
    }
    sc->st = st;
    sc->classic = 0;  /* asked again: the server may have been upgraded */
    (void)distlock__tp_append_auth(ps->t, i, st.ctx);
    for (ps_chan *ch = ps->chans; ch; ch = ch->next)
        if (ch->at && ch->at[i] == k)
            send_cmd(st.ctx, "SSUBSCRIBE", ch->shard);
    live_opened(&sc->lv, connect_ms(ps));
}

/* mu held: the Cluster nodes' channels to place, then the first master
 * due to be connected to (one at a time, without the mutex); 1 if one
 * was opened (the caller looks again). */
static int cluster_step(distlock__pubsub *ps, uint64_t now)
{
    for (int i = 0; i < ps->n; i++) {
        if (!ps->nodes[i].sharded)
            continue;
        shard_place(ps, i, now);
        for (int k = 0; k < ps->nodes[i].nsc; k++)
            if (shard_due(ps, i, k, now)) {
                shard_open(ps, i, k);
                return 1;
            }
    }
    return 0;
}

/* ---------------------------------------- the nodes' own connections */

/* Unlocked: where node i's own connection goes, by its kind (a Cluster
 * node has none: its channels go to their masters, cluster_step). A
 * Sentinel node: its master, asked of the sentinels on every
 * (re)connection; a name: resolved; else its address or Unix socket,
 * connected now. The lookup started, or NULL with *st (closed: failed). */
static distlock__resolve *node_start(distlock__pubsub *ps, int i, distlock__stream *st)
{
    const distlock__node_cfg *cfg = &ps->t->nodes[i];
    distlock__resolve *res = NULL;
    if (ps->t->kind[i]->lookup(ps->t, i, &res) != 0)
        return res;  /* started, or NULL: out of memory */
    char addr[1][DISTLOCK__ADDR_LEN];
    if (cfg->host)
        snprintf(addr[0], sizeof(addr[0]), "%s", cfg->host);
    *st = connect_at(ps, i, cfg->host ? addr : NULL, 1, 0);
    return NULL;
}

/* mu held, released meanwhile: open the connections due (or start their
 * master's or name's lookup); 1 if any was. */
static int nodes_open(distlock__pubsub *ps, uint64_t now)
{
    int nopen = 0;
    for (int i = 0; i < ps->n; i++) {
        ps_node *sn = &ps->nodes[i];
        if (ps->chans && !ps->nodes[i].sharded && sn->st.ctx == NULL && sn->resolving == NULL &&
            now >= sn->retry_at_us)
            ps->opening[nopen++] = i;
    }
    if (nopen == 0)
        return 0;
    pthread_mutex_unlock(ps->mu);
    for (int k = 0; k < nopen; k++) {
        int i = ps->opening[k];
        distlock__stream st = { 0 };
        distlock__resolve *res = node_start(ps, i, &st);
        pthread_mutex_lock(ps->mu);
        ps->nodes[i].resolving = res;
        ps->nodes[i].st = st;
        if (st.ctx)
            node_greet(ps, i);
        else if (res == NULL)
            node_drop(ps, i, RECONNECT_MS);
        pthread_mutex_unlock(ps->mu);
    }
    pthread_mutex_lock(ps->mu);
    return 1;
}

/* mu held, released meanwhile: node i's lookup ended (or not yet). */
static void node_resolved(distlock__pubsub *ps, int i)
{
    ps_node *sn = &ps->nodes[i];
    char addr[DISTLOCK__RESOLVE_MAX][DISTLOCK__ADDR_LEN], err[DISTLOCK__ERR_LEN];
    int naddr = 0;
    int rc = distlock__resolve_take(sn->resolving, addr, &naddr, err, sizeof(err));
    if (rc > 0)
        return;
    int port = distlock__resolve_port(sn->resolving);
    distlock__resolve_drop(sn->resolving);
    sn->resolving = NULL;
    distlock__stream st = { 0 };
    unsigned ep_state = 0;
    if (rc == 0) {
        pthread_mutex_unlock(ps->mu);
        /* A kind that tells whether a connection is still current (a
         * Sentinel node) records the master found as a round's lookup
         * does, rewritten to the one a failover announced if the sentinel
         * asked had not heard yet; the state is compared later. */
        if (ps->t->kind[i]->current && naddr > 0)
            ep_state = distlock__ep_learn(ps->t, i, addr[0], &port);
        st = connect_at(ps, i, addr, naddr, port);
        pthread_mutex_lock(ps->mu);
    }
    sn = &ps->nodes[i];
    sn->st = st;
    sn->ep_state = ep_state;
    if (st.ctx)
        node_greet(ps, i);
    else
        node_drop(ps, i, RECONNECT_MS);
}

/* ---------------------------------------- the kinds' view */

/* mu held: channel ch leaves node i's connection it was placed on, to be
 * placed again (shard_place). */
static void shard_unplace(distlock__pubsub *ps, int i, ps_chan *ch)
{
    shard_conn *sc = &ps->nodes[i].sc[ch->at[i]];
    if (sc->st.ctx) {
        send_cmd(sc->st.ctx, shard_verb(sc, 0), ch->shard);
        live_sent(&sc->lv, command_ms(ps));
    }
    ch->at[i] = -1;
    ch->moved = 0;
    ch->place_at_us = 0;
    if (ch->confirmed & (1ull << i)) {
        ch->confirmed &= ~(1ull << i);
        tell(ps, ch->name, i, 0);
    }
}

/* mu held: drop the connections that no longer lead where their node's
 * kind says (see the top of the file). */
static void check_current(distlock__pubsub *ps)
{
    distlock__transport *t = ps->t;
    for (int i = 0; i < ps->n; i++) {
        ps_node *sn = &ps->nodes[i];
        if (sn->sharded) {
            for (ps_chan *ch = ps->chans; ch; ch = ch->next)
                if (ch->at && ch->at[i] >= 0 && map_token(t, i, ch->slot) != ch->tok[i])
                    shard_unplace(ps, i, ch);
            continue;
        }
        if (sn->st.ctx == NULL || t->kind[i]->current == NULL)
            continue;
        /* the hook reads a round's connection: only its endpoint state */
        distlock__conn probe;
        memset(&probe, 0, sizeof(probe));
        probe.ep_state = sn->ep_state;
        if (!t->kind[i]->current(t, i, &probe))
            node_drop(ps, i, 0);  /* asked for again at once */
    }
}

/* ---------------------------------------- the steps */

int distlock__pubsub_interest(distlock__pubsub *ps, struct pollfd *pfd, uint64_t *next_us)
{
    uint64_t now = distlock__now_us();
    if (now >= ps->current_at_us) {
        check_current(ps);
        ps->current_at_us = now + (uint64_t)DISTLOCK__CURRENT_CHECK_MS * 1000u;
    }
    /* connections to open first (each opening drops the mutex: look again) */
    while (cluster_step(ps, now) || nodes_open(ps, now))
        now = distlock__now_us();
    int np = 0;
    uint64_t next = now + (uint64_t)IDLE_MS * 1000u;
    for (int i = 0; i < ps->n; i++) {
        ps_node *sn = &ps->nodes[i];
        for (int k = 0; k < sn->nsc; k++) {
            shard_conn *sc = &sn->sc[k];
            int done = 0;
            if (sc->st.ctx == NULL) {
                if (sc->retry_at_us < next && shard_needed(ps, i, k))
                    next = sc->retry_at_us;
                continue;
            }
            if (live_check(ps, &sc->lv, sc->st.ctx, now, &next) != 0) {
                if (!shard_needed(ps, i, k)) {
                    close_conn(&sc->st);  /* carries nothing: closed quietly */
                    continue;
                }
                sc->suspect = 1;
                shard_drop(ps, i, k, RECONNECT_MS);
                continue;
            }
            if (distlock__stream_write(&sc->st, &done) != REDIS_OK) {
                shard_drop(ps, i, k, RECONNECT_MS);
                continue;
            }
            pfd[np].fd = distlock__stream_fd(&sc->st);
            pfd[np].events = (short)distlock__stream_events(&sc->st);
            pfd[np].revents = 0;
            ps->idx[np] = i, ps->sidx[np++] = k;
        }
        for (ps_chan *ch = ps->chans; ch && ps->nodes[i].sharded; ch = ch->next)
            if (ch->at && ch->at[i] < 0 && ch->place_at_us < next)
                next = ch->place_at_us;
        if (sn->resolving) {
            pfd[np].fd = distlock__resolve_fd(sn->resolving);
            pfd[np].events = POLLIN;
            pfd[np].revents = 0;
            ps->idx[np] = i, ps->sidx[np++] = -1;
            continue;
        }
        if (sn->st.ctx == NULL) {
            if (ps->chans && !ps->nodes[i].sharded && sn->retry_at_us < next)
                next = sn->retry_at_us;
            continue;
        }
        int done = 0;
        if (live_check(ps, &sn->lv, sn->st.ctx, now, &next) != 0 ||
            distlock__stream_write(&sn->st, &done) != REDIS_OK) {
            node_drop(ps, i, RECONNECT_MS);
            continue;
        }
        pfd[np].fd = distlock__stream_fd(&sn->st);
        pfd[np].events = (short)distlock__stream_events(&sn->st);
        pfd[np].revents = 0;
        ps->idx[np] = i, ps->sidx[np++] = -1;
    }
    if (ps->current_at_us < next && ps->watch_kinds && ps->chans)
        next = ps->current_at_us;
    *next_us = next;
    return np;
}

void distlock__pubsub_advance(distlock__pubsub *ps, const struct pollfd *pfd, int np)
{
    for (int k = 0; k < np; k++) {
        if (pfd[k].revents == 0)
            continue;
        int i = ps->idx[k];
        ps_node *sn = &ps->nodes[i];
        if (ps->sidx[k] >= 0) {
            shard_conn *sc = &sn->sc[ps->sidx[k]];
            /* still the connection polled (one read above may have replaced it) */
            if (sc->st.ctx && distlock__stream_fd(&sc->st) == pfd[k].fd && (pfd[k].revents & (POLLIN | POLLERR | POLLHUP)))
                shard_read(ps, i, ps->sidx[k]);
            continue;
        }
        if (sn->resolving) {
            node_resolved(ps, i);
            continue;
        }
        if (sn->st.ctx == NULL || !(pfd[k].revents & (POLLIN | POLLERR | POLLHUP)))
            continue;
        node_read(ps, i);
    }
}

/* ---------------------------------------- channels */

int distlock__pubsub_subscribe(distlock__pubsub *ps, const char *chan, const char *shard)
{
    if (find_chan(ps, chan))
        return 0;
    ps_chan *ch = calloc(1, sizeof(*ch));
    if (ch == NULL || (ch->name = strdup(chan)) == NULL)
        goto oom;
    /* a shard name matters only where a Cluster node is */
    if (shard && ps->nsharded > 0) {
        if ((ch->shard = strdup(shard)) == NULL || (ch->at = malloc((size_t)ps->n)) == NULL ||
            (ch->tok = calloc((size_t)ps->n, sizeof(*ch->tok))) == NULL)
            goto oom;
        ch->slot = (int)distlock__key_slot(ch->shard, strlen(ch->shard));
        memset(ch->at, -1, (size_t)ps->n);
    }
    ch->next = ps->chans;
    ps->chans = ch;
    for (int i = 0; i < ps->n; i++)
        if (ps->nodes[i].st.ctx && ps->nodes[i].state == NODE_UP) {
            send_cmd(ps->nodes[i].st.ctx, "SUBSCRIBE", ch->name);
            live_sent(&ps->nodes[i].lv, command_ms(ps));
        }
    return 0;
oom:
    if (ch)
        chan_free(ch);
    return -1;
}

void distlock__pubsub_unsubscribe(distlock__pubsub *ps, const char *chan)
{
    for (ps_chan **pp = &ps->chans; *pp; pp = &(*pp)->next) {
        ps_chan *ch = *pp;
        if (strcmp(ch->name, chan) != 0)
            continue;
        for (int i = 0; i < ps->n; i++) {
            ps_node *sn = &ps->nodes[i];
            if (sn->st.ctx && sn->state == NODE_UP)
                send_cmd(sn->st.ctx, "UNSUBSCRIBE", ch->name);
            if (ch->at && ch->at[i] >= 0 && sn->sc[ch->at[i]].st.ctx)
                send_cmd(sn->sc[ch->at[i]].st.ctx, shard_verb(&sn->sc[ch->at[i]], 0), ch->shard);
        }
        *pp = ch->next;
        chan_free(ch);
        return;
    }
}

uint64_t distlock__pubsub_confirmed(const distlock__pubsub *ps, const char *chan)
{
    const ps_chan *ch = find_chan(ps, chan);
    return ch ? ch->confirmed : 0;
}

int distlock__pubsub_can_confirm(const distlock__pubsub *ps)
{
    for (int i = 0; i < ps->n; i++)
        if (ps->nodes[i].state != NODE_FAILED)
            return 1;
    return 0;
}

/* ---------------------------------------- life */

distlock__pubsub *distlock__pubsub_new(distlock__transport *t, pthread_mutex_t *mu,
                                       const distlock__pubsub_cb *cb)
{
    distlock__pubsub *ps = calloc(1, sizeof(*ps));
    if (ps == NULL)
        return NULL;
    ps->t = t;
    ps->mu = mu;
    ps->cb = *cb;
    ps->n = t->n;
    ps->nodes = calloc((size_t)t->n, sizeof(*ps->nodes));
    if (ps->nodes == NULL) {
        free(ps);
        return NULL;
    }
    /* a connection (or lookup) per node, and one per master of a Cluster
     * node (the kinds' other differences: node_start) */
    ps->cap = t->n;
    for (int i = 0; i < t->n; i++) {
        if (t->kind[i]->sharded || t->kind[i]->current)
            ps->watch_kinds = 1;
        if (t->kind[i]->sharded) {
            ps->nodes[i].sharded = 1;
            ps->nsharded++;
            ps->cap += DISTLOCK__CL_MASTERS;
        }
    }
    ps->idx = calloc((size_t)ps->cap, sizeof(int));
    ps->sidx = calloc((size_t)ps->cap, sizeof(int));
    ps->opening = calloc((size_t)t->n, sizeof(int));
    if (ps->idx == NULL || ps->sidx == NULL || ps->opening == NULL) {
        distlock__pubsub_free(ps, 0);
        return NULL;
    }
    return ps;
}

int distlock__pubsub_pollfd_max(const distlock__pubsub *ps)
{
    return ps->cap;
}

void distlock__pubsub_free(distlock__pubsub *ps, int forked)
{
    if (ps == NULL)
        return;
    for (int i = 0; ps->nodes && i < ps->n; i++) {
        ps_node *sn = &ps->nodes[i];
        close_conn(&sn->st);
        for (int k = 0; k < sn->nsc; k++)
            close_conn(&sn->sc[k].st);
        free(sn->sc);
        /* In a forked child the lookup thread is the parent's: let go of
         * the memory rather than wait for a thread that does not exist. */
        if (!forked)
            distlock__resolve_drop(sn->resolving);
    }
    while (ps->chans) {
        ps_chan *next = ps->chans->next;
        chan_free(ps->chans);
        ps->chans = next;
    }
    free(ps->nodes);
    free(ps->idx);
    free(ps->sidx);
    free(ps->opening);
    free(ps);
}
