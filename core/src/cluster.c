/* cluster.c -- a Redis Cluster node's slot routing.
 *
 * A node of kind DISTLOCK__NODE_CLUSTER is one Redlock node made of several
 * masters: a call goes to the master that owns its key's hash slot. This is
 * only another way of choosing a connection: a connection set keeps one
 * connection per master of the node (made lazily, on the first call routed
 * there) and puts the one a call needs into conns[i] before the round
 * starts the node (distlock__cl_route), so the rest of the transport sees
 * one connection per node, as always.
 *
 * The key of a call is its first key (a script's KEYS[1]) or, for a plain
 * command, its first argument; a call without one goes to any master.
 *
 * The slot map starts empty, with the URI's seed nodes as the known
 * masters: a slot of unknown owner goes to the first master not known to be
 * down, which answers MOVED if it does not own it. Every handshake with a
 * master asks CLUSTER SLOTS (pipelined: no extra round trip) and the answer
 * fills the map; a MOVED updates its slot at once and asks CLUSTER SLOTS
 * again ahead of the resent call. An ASK sends ASKING and the call to the
 * named master once, without changing the map. A master that cannot be
 * connected to (refused, a name that does not resolve, no answer to the
 * handshake within half of what is left of the call's deadline: round.c)
 * is marked down and its slots forgotten: its keys go to another master,
 * whose MOVED names the new owner (after a failover). Each call follows at
 * most DISTLOCK__CL_REDIRECTS of these, within its own deadline.
 *
 * Unknown endpoints (cluster-preferred-endpoint-type unknown-endpoint: the
 * nodes sit behind a load balancer): a NULL endpoint in CLUSTER SLOTS and a
 * MOVED / ASK to ":PORT" mean the host the request was sent to, with the
 * port given.
 *
 * The table of masters holds DISTLOCK__CL_MASTERS. Addresses come and go
 * (pods rescheduled, failovers), so once it is full a new address takes the
 * entry of one that owns no slot (one found down first, the oldest first;
 * never a seed: they are the way back when everything else is gone), with a
 * new generation: a connection set's connection made under the old one
 * leads to the old address and is closed when routed to (distlock__cl_route).
 * Never the entry of one that a request of ours may still reach (a request
 * left behind there, or a connection set routed there now): that address
 * named again would come back under a new generation, and its requests
 * left behind would no longer be ordered before the later ones
 * (in_flight_locked). With no such entry, a MOVED to a new address fails
 * the call, saying so.
 *
 * Ordering (round.c): each master's connections carry a generation that
 * stands for its address (not for a server: one master may be reached by
 * two addresses, a seed and the one the cluster announces), and so do the
 * requests they leave behind. A request left behind on one master runs
 * only there, but the key does not stay put: a slot migrates away and
 * back, so that request can still meet a later write there. A later
 * request of its tag (not a trailing one) first goes to that master and closes
 * it (nodekind.c cl_clear_first, with distlock__cl_stale_master below): on
 * the same server incarnation, whatever the address, CLIENT KILL ID; under
 * the same address on another incarnation, that server restarted and the
 * request is gone. What cannot be closed in time fails the call unsent.
 *
 * TLS: each master's certificate is checked against its own host, not the
 * node's first seed (nodekind.c's tls_host hook passes distlock__cl_host).
 *
 * Layer: 1 transport */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"

static int is_cluster(const distlock__transport *t, int i)
{
    return t->cl != NULL && t->cl[i] != NULL;
}

/* t->mu held: may a request of ours sent to master m of node i still run
 * there? Its connections carry its generation, and so do the requests
 * they left behind (conn.c's list, until answered or killed). If the
 * entry went to another address, the requests left behind under its
 * generation would name no master any more (distlock__cl_stale_master
 * finds a master by generation), and the same address named again would
 * get a new generation: a later request with their tag could neither close
 * them nor be sent (it fails, "no longer known"). So such an entry keeps
 * its address (and generation)
 * while a connection set is routed to it (its round may leave requests
 * behind any moment) or a request left behind there is listed. */
static int in_flight_locked(const distlock__transport *t, int i, const distlock__clmaster *x)
{
    if (x->users > 0)
        return 1;
    for (int k = 0; k < t->nstale; k++)
        if (t->stale[k].node == i && t->stale[k].ep_gen == x->gen)
            return 1;
    return 0;
}

/* t->mu held, the table full: the entry a new address may take, -1 if
 * none. One that owns no slot (no call is routed to it by slot), not a
 * seed, that no request of ours may still reach (in_flight_locked); one
 * found down before one merely unnamed now, the oldest first. */
static int reusable_locked(const distlock__transport *t, int i, const distlock__clmap *map)
{
    unsigned char owns[DISTLOCK__CL_MASTERS] = { 0 };
    for (int s = 0; s < DISTLOCK__SLOTS; s++)
        if (map->owner[s])
            owns[map->owner[s] - 1] = 1;
    int best = -1;
    for (int m = map->nseeds; m < map->nm; m++) {
        if (owns[m] || in_flight_locked(t, i, &map->m[m]))
            continue;
        const distlock__clmaster *x = &map->m[m], *b = best >= 0 ? &map->m[best] : NULL;
        if (b == NULL || x->down > b->down || (x->down == b->down && x->gen < b->gen))
            best = m;
    }
    return best;
}

/* t->mu held: index of host:port among node i's masters, added if new (-1:
 * no room, or a host too long). t is NULL while the map is built (no
 * entry to reuse yet). */
static int master_index_locked(const distlock__transport *t, int i, distlock__clmap *map,
                               const char *host, int port)
{
    for (int m = 0; m < map->nm; m++)
        if (map->m[m].port == port && strcmp(map->m[m].host, host) == 0)
            return m;
    if (strlen(host) >= sizeof(map->m[0].host))
        return -1;
    int m = map->nm < DISTLOCK__CL_MASTERS ? map->nm++ : t ? reusable_locked(t, i, map) : -1;
    if (m < 0)
        return -1;
    distlock__clmaster *x = &map->m[m];
    snprintf(x->host, sizeof(x->host), "%s", host);
    x->port = port;
    x->down = 0;
    x->gen = ++map->next_gen;
    return m;
}

int distlock__cl_init(distlock__transport *t)
{
    int any = 0;
    for (int i = 0; i < t->n; i++)
        any |= t->nodes[i].kind == DISTLOCK__NODE_CLUSTER;
    if (!any)
        return DISTLOCK_OK;
    t->cl = calloc((size_t)t->n, sizeof(*t->cl));
    if (t->cl == NULL)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    for (int i = 0; i < t->n; i++) {
        const distlock__node_cfg *cfg = &t->nodes[i];
        if (cfg->kind != DISTLOCK__NODE_CLUSTER)
            continue;
        distlock__clmap *map = calloc(1, sizeof(*map));
        if (map == NULL) {
            distlock__cl_free(t);
            return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        }
        for (int k = 0; k < cfg->nsentinels; k++)
            (void)master_index_locked(NULL, i, map, cfg->sentinels[k].host,
                                      cfg->sentinels[k].port);
        map->nseeds = map->nm;
        t->cl[i] = map;
    }
    return DISTLOCK_OK;
}

void distlock__cl_free(distlock__transport *t)
{
    if (t->cl == NULL)
        return;
    for (int i = 0; i < t->n; i++)
        free(t->cl[i]);
    free(t->cl);
    t->cl = NULL;
}

int distlock__cl_set_init(distlock__transport *t, distlock__connset *cs)
{
    if (t->cl == NULL)
        return 0;
    cs->cl = calloc((size_t)t->n, sizeof(*cs->cl));
    if (cs->cl == NULL)
        return -1;
    for (int i = 0; i < t->n; i++) {
        if (!is_cluster(t, i))
            continue;
        if ((cs->cl[i] = calloc(1, sizeof(*cs->cl[i]))) == NULL) {
            distlock__cl_set_free(t, cs);
            return -1;
        }
        cs->cl[i]->cur = -1;
    }
    return 0;
}

void distlock__cl_set_free(distlock__transport *t, distlock__connset *cs)
{
    if (cs->cl == NULL)
        return;
    for (int i = 0; i < t->n; i++) {
        if (cs->cl[i] == NULL)
            continue;
        /* (never with t->mu held: cur is -1 in a set that failed to be made) */
        if (cs->cl[i]->cur >= 0) {
            pthread_mutex_lock(&t->mu);
            t->cl[i]->m[cs->cl[i]->cur].users--;
            pthread_mutex_unlock(&t->mu);
        }
        for (int m = 0; m < DISTLOCK__CL_MASTERS; m++)
            distlock__conn_forget(&cs->cl[i]->c[m]);
        free(cs->cl[i]);
    }
    free(cs->cl);
    cs->cl = NULL;
}

/* The key a call is routed by, or NULL. */
static const char *call_key(const distlock__call *call, size_t *len)
{
    int k = call->script >= 0 ? (call->nkeys > 0 ? 0 : -1) : (call->argc > 1 ? 1 : -1);
    if (k < 0)
        return NULL;
    *len = call->argvlen ? call->argvlen[k] : strlen(call->argv[k]);
    return call->argv[k];
}

/* t->mu held: the master for slot (-1: unknown slot), else the first one
 * not known to be down (the seeds first), else the first. */
static int pick_locked(distlock__clmap *map, int slot)
{
    if (slot >= 0 && map->owner[slot] && !map->m[map->owner[slot] - 1].down)
        return map->owner[slot] - 1;
    for (int m = 0; m < map->nm; m++)
        if (!map->m[m].down)
            return m;
    /* all down: start again from the first */
    for (int m = 0; m < map->nm; m++)
        map->m[m].down = 0;
    return 0;
}

/* A connection set gives up waiting for what a parked connection owes: its
 * replies are read (and dropped) when it is next used. */
static void park(distlock__transport *t, int i, distlock__conn *conn)
{
    int tagged = 0;
    for (int k = 0; k < conn->qlen; k++) {
        distlock__owed *o = distlock__q_at(conn, k);
        tagged |= o->owner != NULL && o->kind == DISTLOCK__K_CALL && o->tag != 0;
    }
    if (tagged)
        pthread_mutex_lock(&t->mu);
    for (int k = 0; k < conn->qlen; k++) {
        distlock__owed *o = distlock__q_at(conn, k);
        if (o->owner != NULL && o->kind == DISTLOCK__K_CALL && o->tag != 0)
            distlock__stale_add_locked(t, i, o->tag, conn, 1);
        o->owner = NULL;
    }
    if (tagged)
        pthread_mutex_unlock(&t->mu);
}

void distlock__cl_route(distlock__transport *t, distlock__connset *cs, int i,
                        const distlock__call *call, int ask)
{
    distlock__clconns *cc = cs->cl[i];
    distlock__clmap *map = t->cl[i];
    size_t len = 0;
    const char *key = call_key(call, &len);
    int slot = key ? (int)distlock__key_slot(key, len) : -1;
    pthread_mutex_lock(&t->mu);
    int m = ask >= 0 && ask < map->nm ? ask : pick_locked(map, slot);
    unsigned gen = map->m[m].gen;
    if (m != cc->cur) {  /* (reusable_locked: the entry keeps its address meanwhile) */
        if (cc->cur >= 0)
            map->m[cc->cur].users--;
        map->m[m].users++;
    }
    pthread_mutex_unlock(&t->mu);
    if (m != cc->cur) {
        if (cc->cur >= 0) {
            if (cs->conns[i].qlen > 0)
                park(t, i, &cs->conns[i]);
            cc->c[cc->cur] = cs->conns[i];
        } else {
            distlock__conn_forget(&cs->conns[i]);  /* never used: empty */
        }
        cs->conns[i] = cc->c[m];
        memset(&cc->c[m], 0, sizeof(cc->c[m]));
        cc->cur = m;
    }
    /* Made before the entry went to another address: it leads to the old
     * one (what it still owes is kept as left behind there). */
    distlock__conn *conn = &cs->conns[i];
    if (conn->stream.ctx && conn->ep_state >> 1 != gen)
        distlock__conn_close(t, i, conn);
}

int distlock__cl_target(distlock__transport *t, distlock__connset *cs, int i, char *addr,
                        int *port, unsigned *ep_state)
{
    int m = cs->cl[i]->cur;
    if (m < 0)
        return -1;
    pthread_mutex_lock(&t->mu);
    const distlock__clmaster *x = &t->cl[i]->m[m];
    int numeric = distlock__host_is_numeric(x->host) && strlen(x->host) < 48;
    if (addr && numeric)
        memcpy(addr, x->host, strlen(x->host) + 1);
    *port = x->port;
    *ep_state = x->gen << 1 | 1u;
    pthread_mutex_unlock(&t->mu);
    return numeric ? 0 : 1;
}

char *distlock__cl_host(distlock__transport *t, distlock__connset *cs, int i)
{
    int m = cs->cl[i]->cur;
    pthread_mutex_lock(&t->mu);
    char *host = m >= 0 ? strdup(t->cl[i]->m[m].host) : NULL;
    pthread_mutex_unlock(&t->mu);
    return host;
}

distlock__resolve *distlock__cl_resolve(distlock__transport *t, distlock__connset *cs, int i)
{
    int m = cs->cl[i]->cur;
    pthread_mutex_lock(&t->mu);
    char *host = m >= 0 ? strdup(t->cl[i]->m[m].host) : NULL;
    pthread_mutex_unlock(&t->mu);
    distlock__resolve *r = host ? distlock__resolve_start(host) : NULL;
    free(host);
    return r;
}

void distlock__cl_down(distlock__transport *t, distlock__connset *cs, int i)
{
    int m = cs->cl[i]->cur;
    if (m < 0)
        return;
    distlock__clmap *map = t->cl[i];
    pthread_mutex_lock(&t->mu);
    map->m[m].down = 1;
    for (int s = 0; s < DISTLOCK__SLOTS; s++)
        if (map->owner[s] == m + 1)
            map->owner[s] = 0;
    pthread_mutex_unlock(&t->mu);
}

int distlock__cl_elsewhere(distlock__transport *t, distlock__connset *cs, int i)
{
    int cur = cs->cl[i]->cur, any = 0;
    const distlock__clmap *map = t->cl[i];
    pthread_mutex_lock(&t->mu);
    for (int m = 0; m < map->nm && !any; m++)
        any = m != cur && !map->m[m].down;
    pthread_mutex_unlock(&t->mu);
    return any;
}

int distlock__cl_stale_master(distlock__transport *t, distlock__connset *cs, int i, uint64_t tag)
{
    const distlock__conn *conn = &cs->conns[i];
    const distlock__clmap *map = t->cl[i];
    int cur = cs->cl[i]->cur, found = -1;
    /* the server conns[i] is on, if its handshake told */
    uint64_t run = conn->stream.ctx && conn->hs_pending == 0 ? conn->srv_run : 0;
    pthread_mutex_lock(&t->mu);
    unsigned gen = cur >= 0 ? map->m[cur].gen : 0;
    for (int k = 0; k < t->nstale && found == -1; k++) {
        const distlock__stale *s = &t->stale[k];
        if (s->node != i || s->tag != tag || (cur >= 0 && s->ep_gen == gen))
            continue;
        if (s->run && run && s->run == run)
            continue;  /* the same server by another address: closed from conns[i] */
        /* (in_flight_locked keeps that master's entry, and its generation,
         * while the request is listed) */
        found = -2;
        for (int m = 0; m < map->nm; m++)
            if (map->m[m].gen == s->ep_gen)
                found = m;
    }
    pthread_mutex_unlock(&t->mu);
    return found;
}

/* "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381" (an IPv6 address
 * has colons of its own: the port follows the last one). "MOVED 3999 :6381"
 * (cluster-preferred-endpoint-type unknown-endpoint) gives an empty host. */
int distlock__redirect_parse(const char *err, int *slot, char *host, size_t hostlen, int *port)
{
    const char *p = strchr(err, ' ');
    if (p == NULL)
        return -1;
    char *end;
    long s = strtol(p + 1, &end, 10);
    if (end == p + 1 || *end != ' ' || s < 0 || s >= DISTLOCK__SLOTS)
        return -1;
    const char *addr = end + 1, *colon = strrchr(addr, ':');
    if (colon == NULL || (size_t)(colon - addr) >= hostlen)
        return -1;
    long pt = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || pt <= 0 || pt > 65535)
        return -1;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    *slot = (int)s;
    *port = (int)pt;
    return 0;
}

int distlock__cl_redirect(distlock__transport *t, int i, int from, const char *err, int *ask)
{
    int moved = strncmp(err, "MOVED ", 6) == 0, asked = strncmp(err, "ASK ", 4) == 0;
    if (!is_cluster(t, i) || !(moved || asked))
        return 0;
    char host[DISTLOCK__HOST_LEN];
    int slot, port;
    if (distlock__redirect_parse(err, &slot, host, sizeof(host), &port) != 0)
        return 0;
    distlock__clmap *map = t->cl[i];
    pthread_mutex_lock(&t->mu);
    /* No host: an unknown endpoint, i.e. the one this request was sent to
     * (Redis's cluster specification), with the port given. */
    if (host[0] == '\0' && from >= 0 && from < map->nm)
        snprintf(host, sizeof(host), "%s", map->m[from].host);
    int m = host[0] ? master_index_locked(t, i, map, host, port) : -2;
    if (m >= 0) {
        map->m[m].down = 0;  /* the cluster names it: try it again */
        if (moved)
            map->owner[slot] = (unsigned char)(m + 1);
    }
    pthread_mutex_unlock(&t->mu);
    if (m < 0)
        return m == -1 ? -1 : 0;
    *ask = m;
    return moved ? 1 : 2;
}

void distlock__cl_learn(distlock__transport *t, int i, int m, const redisReply *rep)
{
    if (!is_cluster(t, i) || rep->type != REDIS_REPLY_ARRAY)
        return;
    distlock__clmap *map = t->cl[i];
    pthread_mutex_lock(&t->mu);
    for (size_t k = 0; k < rep->elements; k++) {
        const redisReply *e = rep->element[k];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2)
            continue;
        const redisReply *a = e->element[2];
        int named = a->element[0]->type == REDIS_REPLY_STRING && a->element[0]->str[0];
        if ((!named && a->element[0]->type != REDIS_REPLY_STRING &&
             a->element[0]->type != REDIS_REPLY_NIL) || a->element[1]->type != REDIS_REPLY_INTEGER)
            continue;
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        if (lo < 0 || hi >= DISTLOCK__SLOTS || lo > hi)
            continue;
        /* A NULL endpoint (cluster-preferred-endpoint-type unknown-endpoint)
         * or an empty one: the endpoint we asked, with the port given. */
        const char *host = named ? a->element[0]->str
                           : m >= 0 && m < map->nm ? map->m[m].host : NULL;
        int x = host ? master_index_locked(t, i, map, host, (int)a->element[1]->integer) : -1;
        if (x < 0)
            continue;
        map->m[x].down = 0;
        for (long long s = lo; s <= hi; s++)
            map->owner[s] = (unsigned char)(x + 1);
    }
    pthread_mutex_unlock(&t->mu);
}

int distlock__cl_where(distlock__transport *t, int i, const char *key, char *host,
                       size_t hostlen, int *port, int *slot)
{
    if (!is_cluster(t, i))
        return -1;
    distlock__clmap *map = t->cl[i];
    *slot = (int)distlock__key_slot(key, strlen(key));
    pthread_mutex_lock(&t->mu);
    int m = map->owner[*slot] ? map->owner[*slot] - 1 : -1;
    if (m >= 0) {
        snprintf(host, hostlen, "%s", map->m[m].host);
        *port = map->m[m].port;
    }
    pthread_mutex_unlock(&t->mu);
    return m >= 0 ? 0 : -1;
}

int distlock__cl_slot_master(distlock__transport *t, int i, unsigned slot)
{
    if (!is_cluster(t, i) || slot >= DISTLOCK__SLOTS)
        return -1;
    distlock__clmap *map = t->cl[i];
    pthread_mutex_lock(&t->mu);
    int m = map->owner[slot] ? map->owner[slot] - 1 : -1;
    if (m >= 0 && map->m[m].down)
        m = -1;
    pthread_mutex_unlock(&t->mu);
    return m;
}
