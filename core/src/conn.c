/* conn.c -- one connection's bookkeeping: the FIFO of replies
 * it owes, the transport-wide list of tagged requests left behind (see the
 * ordering rules at the top of round.c), and closing a connection without
 * losing track of what it still carries.
 *
 * Layer: 1 transport */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"

/* ------------------------------------------------------------ owed FIFO */

int distlock__q_grow(distlock__conn *conn)
{
    int cap = conn->qcap ? conn->qcap * 2 : 16;
    distlock__owed *q = malloc(sizeof(*q) * (size_t)cap);
    if (q == NULL)
        return -1;
    for (int k = 0; k < conn->qlen; k++)
        q[k] = *distlock__q_at(conn, k);
    free(conn->q);
    conn->q = q;
    conn->qcap = cap;
    conn->qhead = 0;
    return 0;
}


int distlock__owes_kind(distlock__conn *conn, int kind)
{
    for (int k = 0; k < conn->qlen; k++)
        if (distlock__q_at(conn, k)->kind == kind)
            return 1;
    return 0;
}

int distlock__owes_tag(distlock__conn *conn, uint64_t tag)
{
    for (int k = 0; k < conn->qlen; k++)
        if (distlock__q_at(conn, k)->kind == DISTLOCK__K_CALL && distlock__q_at(conn, k)->tag == tag)
            return 1;
    return 0;
}

/* ------------------------------------------------------------ stale list (t->mu) */

static unsigned stale_bucket(int node, uint64_t tag)
{
    return (unsigned)((tag ^ (tag >> 29) ^ ((uint64_t)node * 0x9e3779b97f4a7c15ull)) &
                      (DISTLOCK__STALE_BUCKETS - 1u));
}

/* Might the list hold an entry for this node and tag? (no lock) */
int distlock__stale_maybe(distlock__transport *t, int node, uint64_t tag)
{
    return atomic_load_explicit(&t->stale_filter[stale_bucket(node, tag)], memory_order_acquire) != 0;
}

void distlock__stale_add_locked(distlock__transport *t, int node, uint64_t tag, const distlock__conn *conn,
                             int open)
{
    for (int k = 0; k < t->nstale; k++) {
        distlock__stale *s = &t->stale[k];
        if (s->node == node && s->tag == tag && s->serial == conn->serial) {
            s->count++;
            s->open = s->open && open;
            return;
        }
    }
    if (t->nstale == t->stale_cap) {
        int cap = t->stale_cap ? t->stale_cap * 2 : 8;
        distlock__stale *grown = realloc(t->stale, sizeof(*grown) * (size_t)cap);
        if (grown == NULL)
            return;  /* nothing better to do: the KILL is then skipped */
        t->stale = grown;
        t->stale_cap = cap;
    }
    t->stale[t->nstale++] = (distlock__stale){ node, tag, conn->serial, conn->srv_id,
                                               conn->srv_run, open, 1, conn->ep_state >> 1 };
    atomic_fetch_add(&t->stale_filter[stale_bucket(node, tag)], 1);
}

static void stale_remove_at_locked(distlock__transport *t, int k)
{
    atomic_fetch_sub(&t->stale_filter[stale_bucket(t->stale[k].node, t->stale[k].tag)], 1);
    t->stale[k] = t->stale[--t->nstale];
}

/* A request left behind on this connection has answered. */
void distlock__stale_done(distlock__transport *t, int node, uint64_t tag, uint64_t serial)
{
    pthread_mutex_lock(&t->mu);
    for (int k = 0; k < t->nstale; k++) {
        distlock__stale *s = &t->stale[k];
        if (s->node == node && s->tag == tag && s->serial == serial) {
            if (--s->count == 0)
                stale_remove_at_locked(t, k);
            break;
        }
    }
    pthread_mutex_unlock(&t->mu);
}

/* The server (incarnation run) confirmed that its connection srv_id is
 * closed: nothing sent on it can execute any more. Only for connections of
 * that incarnation: the same id on another server, or on this one before a
 * restart, is another connection. */
void distlock__stale_killed(distlock__transport *t, int node, long long srv_id, uint64_t run)
{
    pthread_mutex_lock(&t->mu);
    for (int k = 0; k < t->nstale;) {
        if (t->stale[k].node == node && t->stale[k].srv_id == srv_id &&
            distlock__same_run(t->stale[k].run, run))
            stale_remove_at_locked(t, k);
        else
            k++;
    }
    pthread_mutex_unlock(&t->mu);
}

/* Server ids of closed connections to `node` that carried requests with
 * `tag` left behind, closable from `conn`. Returns how many (at most max),
 * or -1 if one of them has no known id (it cannot be closed from here).
 * *elsewhere: DISTLOCK__STALE_OPEN if such requests are also queued on
 * another open connection of ours (another thread's: we do not kill it
 * under that thread's feet); DISTLOCK__STALE_OTHER_MASTER if a Cluster
 * node has such requests on another of its masters, which only a
 * connection to that master can close (nodekind.c cl_clear_first). */
int distlock__stale_find(distlock__transport *t, int node, uint64_t tag, const distlock__conn *conn,
                      long long *ids, int max, int *elsewhere)
{
    int n = 0;
    int keys_move = t->kind[node]->keys_move;
    *elsewhere = 0;
    pthread_mutex_lock(&t->mu);
    for (int k = 0; k < t->nstale; k++) {
        const distlock__stale *s = &t->stale[k];
        if (s->node != node || s->tag != tag || s->serial == conn->serial)
            continue;
        int other_run = s->run && conn->srv_run && s->run != conn->srv_run;
        int same_run = s->run && conn->srv_run && s->run == conn->srv_run;
        if (keys_move) {
            /* A Cluster node's key moves between its masters (MIGRATE,
             * rebalancing, a failover), so a request left behind on one
             * master can meet a later write there once the key comes back:
             * "it can only run there" does not make it harmless. On the
             * same server (same run_id, whatever the address: a seed and
             * the announced address of one master) it is closed from
             * here. Under another address and not known to be this
             * server, only a connection to its own master can close it:
             * it stays listed, and the round goes there first. Under the
             * same address on another incarnation, that server restarted:
             * a closed connection of ours to it is gone with it (an open
             * one is left alone: it tells us itself). */
            if (!same_run && s->ep_gen != conn->ep_state >> 1) {
                *elsewhere |= DISTLOCK__STALE_OTHER_MASTER;
                continue;
            }
            if (other_run) {
                if (!s->open)
                    stale_remove_at_locked(t, k--);
                continue;
            }
        } else {
            /* Left behind on another server incarnation (another server
             * behind the same name or address, or this one before a
             * restart): it can only run there, never on this one, so it
             * does not hold this call back; it stays listed, for a
             * connection that reaches that server again (a failback) to
             * kill first (round.c). */
            if (other_run)
                continue;
            /* Without run_ids (INFO refused): a Sentinel node's other
             * master, by its address. Closed, it is forgotten (its writes
             * after the promotion are discarded when it rejoins as a
             * replica). */
            if (!same_run && s->ep_gen != conn->ep_state >> 1) {
                if (!s->open)
                    stale_remove_at_locked(t, k--);
                continue;
            }
        }
        if (s->open) {
            *elsewhere |= DISTLOCK__STALE_OPEN;
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
    pthread_mutex_unlock(&t->mu);
    return n;
}

/* ------------------------------------------------------------ connections */

static void conn_reset(distlock__conn *conn)
{
    distlock__stream_close(&conn->stream);  /* writes nothing (no close_notify) */
    conn->srv_id = -1;
    conn->srv_run = 0;
    conn->srv_ver = 0;
    conn->hs_pending = 0;
    conn->late = 0;
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

void distlock__conn_close(distlock__transport *t, int i, distlock__conn *conn)
{
    /* Requests whose replies we will never read may still execute: keep
     * them listed (as orphans) so that a later request with the same tag
     * first closes their server-side connection. */
    int tagged = 0;
    for (int k = 0; k < conn->qlen; k++)
        tagged |= distlock__q_at(conn, k)->kind == DISTLOCK__K_CALL && distlock__q_at(conn, k)->tag != 0;
    if (tagged) {
        pthread_mutex_lock(&t->mu);
        for (int k = 0; k < conn->qlen; k++) {
            distlock__owed *o = distlock__q_at(conn, k);
            if (o->kind == DISTLOCK__K_CALL && o->tag != 0 && o->owner != NULL)
                distlock__stale_add_locked(t, i, o->tag, conn, 0);
        }
        for (int k = 0; k < t->nstale; k++)
            if (t->stale[k].serial == conn->serial)
                t->stale[k].open = 0;
        pthread_mutex_unlock(&t->mu);
    }
    conn_reset(conn);
}

static void vfail(distlock__transport *t, distlock__result *r, int i, int status,
                  const char *fmt, va_list ap)
{
    int off = snprintf(r->err, sizeof(r->err), "%s: ", t->nodes[i].uri);
    if (off > 0 && (size_t)off < sizeof(r->err))
        vsnprintf(r->err + off, sizeof(r->err) - (size_t)off, fmt, ap);
    distlock__cut_args(r->err);  /* a server's quote of what we sent */
    r->state = DISTLOCK__R_FAILED;
    r->status = status;
    distlock__stats_node_error(t->stats, i);
}

void distlock__result_fail(distlock__transport *t, distlock__result *r, int i, int status,
                           const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(t, r, i, status, fmt, ap);
    va_end(ap);
}

void distlock__node_fail(distlock__transport *t, distlock__conn *conn, distlock__result *r, int i,
                         int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(t, r, i, status, fmt, ap);
    va_end(ap);
    distlock__conn_close(t, i, conn);
}

/* This round stops waiting for node i: what it still owes there is left
 * behind (its replies are discarded when they come). */
void distlock__abandon(distlock__transport *t, int i, distlock__conn *conn, distlock__result *r)
{
    int tagged = 0;
    for (int k = 0; k < conn->qlen; k++) {
        distlock__owed *o = distlock__q_at(conn, k);
        if (o->owner == r)
            tagged |= o->kind == DISTLOCK__K_CALL && o->tag != 0;
    }
    if (tagged)
        pthread_mutex_lock(&t->mu);
    for (int k = 0; k < conn->qlen; k++) {
        distlock__owed *o = distlock__q_at(conn, k);
        if (o->owner != r)
            continue;
        o->owner = NULL;
        if (o->kind == DISTLOCK__K_CALL && o->tag != 0)
            distlock__stale_add_locked(t, i, o->tag, conn, 1);
    }
    if (tagged)
        pthread_mutex_unlock(&t->mu);
}

