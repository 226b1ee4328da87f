/* pool.c -- the transport's state and its pool of connection sets.
 *
 * Each operation checks a connection set (one connection per node) out of
 * the pool and returns it afterwards, so threads sharing a transport run
 * their round trips in parallel and never interleave on one socket.
 *
 * Layer: 1 transport */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conn.h"

int distlock__tp_init(distlock__transport *t, const distlock__node_cfg *nodes, int n,
                      const distlock__script *scripts, int nscripts)
{
    pthread_condattr_t ca;

    memset(t, 0, sizeof(*t));
    t->n = n;
    t->nodes = nodes;
    t->scripts = scripts;
    t->nscripts = nscripts;
    /* the timeouts and tls_verify: the option table's defaults, which
     * distlock_client_new() applies */
    t->peer = calloc((size_t)n, sizeof(*t->peer));
    t->peer_run = calloc((size_t)n, sizeof(*t->peer_run));
    t->ep = calloc((size_t)n, sizeof(*t->ep));
    t->sha = calloc((size_t)nscripts + 1, sizeof(*t->sha));
    t->sha_ok = calloc((size_t)nscripts + 1, sizeof(*t->sha_ok));
    t->tls_ctx = calloc((size_t)n, sizeof(*t->tls_ctx));
    t->kind = calloc((size_t)n, sizeof(*t->kind));
    if (t->peer == NULL || t->peer_run == NULL || t->ep == NULL || t->sha == NULL || t->sha_ok == NULL ||
        t->tls_ctx == NULL || t->kind == NULL) {
        free(t->kind);
        free(t->tls_ctx);
        free(t->peer);
        free(t->peer_run);
        free(t->ep);
        free(t->sha);
        free((void *)t->sha_ok);
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++)
        t->kind[i] = distlock__node_kind_of(&nodes[i]);
    if (distlock__cl_init(t) != DISTLOCK_OK) {
        free(t->kind);
        free(t->tls_ctx);
        free(t->peer);
        free(t->peer_run);
        free(t->ep);
        free(t->sha);
        free((void *)t->sha_ok);
        return DISTLOCK_ENOMEM;
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);  /* its waits are deadlines */
    pthread_cond_init(&t->pool_cond, &ca);
    pthread_condattr_destroy(&ca);
    return DISTLOCK_OK;
}

static void free_sets(distlock__transport *t)
{
    distlock__connset *cs = t->all_sets;
    while (cs) {
        distlock__connset *next = cs->all_next;
        for (int i = 0; i < t->n; i++)
            distlock__conn_forget(&cs->conns[i]);
        distlock__cl_set_free(t, cs);
        free(cs->res_a);
        free(cs->calls_a);
        free(cs->pfd);
        free(cs->pfd_node);
        free(cs->enc.buf);
        free(cs);
        cs = next;
    }
    t->pool = NULL;
    t->all_sets = NULL;
}

void distlock__tp_free(distlock__transport *t)
{
    distlock__sentinel_watch_stop(t);  /* first: its thread uses t */
    free_sets(t);
    distlock__cl_free(t);
    free(t->stale);
    free(t->peer);
    free(t->peer_run);
    free(t->ep);
    free(t->sha);
    free((void *)t->sha_ok);
    free(t->username);
    free(t->password);
    distlock__tls_ctx_drop_all(t);
    free(t->tls_ctx);
    free((void *)t->kind);
    for (int k = 0; k < DISTLOCK__TLS_NOPT; k++)
        free(t->tls_opt[k]);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->pool_cond);
}

/* After fork: what the parent's connection still waits for, listed as left
 * behind on a closed connection (the child never reads its replies). */
static void keep_owed(distlock__transport *t, int i, distlock__conn *conn)
{
    for (int k = 0; conn->stream.ctx && k < conn->qlen; k++) {
        distlock__owed *o = distlock__q_at(conn, k);
        if (o->kind == DISTLOCK__K_CALL && o->tag != 0 && o->owner != NULL)
            distlock__stale_add_locked(t, i, o->tag, conn, 0);
    }
}

void distlock__tp_after_fork(distlock__transport *t)
{
    pthread_condattr_t ca;

    /* The lock may have been copied while a parent thread held it, and the
     * parent's threads may have been waiting on the condition. */
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->pool_cond, &ca);
    pthread_condattr_destroy(&ca);
    distlock__sentinel_watch_after_fork(t);
    /* Sockets belong to the parent: closing our copies sends nothing on
     * its connections. But what the parent left behind on them, or still
     * waits for, may run on its server after any request of ours: the
     * child keeps it listed, as closed connections of its own (it never
     * reads their replies), so that a request of the same tag (the same
     * key and token, say) first kills the parent's server-side connection
     * from a connection of the child's, on the same server incarnation
     * (round.c), or is not sent while that cannot be done. */
    for (distlock__connset *cs = t->all_sets; cs; cs = cs->all_next)
        for (int i = 0; i < t->n; i++) {
            keep_owed(t, i, &cs->conns[i]);
            if (t->kind[i]->each_conn)  /* a Cluster node's other masters */
                t->kind[i]->each_conn(t, cs, i, keep_owed);
        }
    for (int k = 0; k < t->nstale; k++)
        t->stale[k].open = 0;
    free_sets(t);
}

void distlock__tp_set_timeout(distlock__transport *t, int which, long ms)
{
    pthread_mutex_lock(&t->mu);
    if (which == 0)
        t->connect_timeout_ms = ms;
    else
        t->command_timeout_ms = ms;
    pthread_mutex_unlock(&t->mu);
}

int distlock__tp_set_credential(distlock__transport *t, int which, const char *value)
{
    char *copy = NULL;
    if (value && (copy = strdup(value)) == NULL)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    pthread_mutex_lock(&t->mu);
    char **slot = which == 0 ? &t->username : &t->password;
    free(*slot);
    *slot = copy;
    /* Connections authenticated with the old credentials reconnect with the
     * new ones when next used with nothing owed (round.c): closing them here
     * could drop requests still on their way, and they belong to whichever
     * thread has them checked out. */
    atomic_fetch_add(&t->cred_gen, 1);
    pthread_mutex_unlock(&t->mu);
    return DISTLOCK_OK;
}

/* TLS settings: like the credentials, connections made with the old ones
 * are re-made when next used with nothing owed; contexts are rebuilt. */
int distlock__tp_set_tls(distlock__transport *t, int which, const char *value)
{
    char *copy = NULL;
    if (which < 0 || which >= DISTLOCK__TLS_NOPT)
        return distlock__fail(DISTLOCK_EINVAL, "unknown TLS option %d", which);
    if (value && (copy = strdup(value)) == NULL)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    pthread_mutex_lock(&t->mu);
    free(t->tls_opt[which]);
    t->tls_opt[which] = copy;
    distlock__tls_ctx_drop_all(t);
    atomic_fetch_add(&t->cred_gen, 1);
    pthread_mutex_unlock(&t->mu);
    return DISTLOCK_OK;
}

void distlock__tp_set_tls_verify(distlock__transport *t, int on)
{
    pthread_mutex_lock(&t->mu);
    t->tls_verify = on != 0;
    distlock__tls_ctx_drop_all(t);
    atomic_fetch_add(&t->cred_gen, 1);
    pthread_mutex_unlock(&t->mu);
}

/* t->mu held */
static distlock__connset *take_locked(distlock__transport *t)
{
    distlock__connset *cs = t->pool;
    if (cs) {
        t->pool = cs->next;
    } else {
        size_t n = (size_t)t->n;
        cs = calloc(1, sizeof(*cs) + sizeof(distlock__conn) * n);
        distlock__result *res = calloc(2 * n, sizeof(*res));
        const distlock__call **calls = calloc(2 * n, sizeof(*calls));
        /* one more: a blocking run's cancel (distlock__run_wait_fd) */
        struct pollfd *pfd = calloc(n + 1, sizeof(*pfd));
        int *pfd_node = calloc(n, sizeof(*pfd_node));
        if (cs == NULL || res == NULL || calls == NULL || pfd == NULL || pfd_node == NULL ||
            distlock__cl_set_init(t, cs) != 0) {
            free(cs);
            free(res);
            free(calls);
            free(pfd);
            free(pfd_node);
            distlock__fail(DISTLOCK_ENOMEM, "out of memory");
            return NULL;
        }
        cs->res_a = res;
        cs->res_b = res + n;
        cs->calls_a = calls;
        cs->calls_b = calls + n;
        cs->pfd = pfd;
        cs->pfd_node = pfd_node;
        cs->id = ++t->next_set_id;
        cs->all_next = t->all_sets;
        t->all_sets = cs;
    }
    cs->in_use = 1;
    return cs;
}

distlock__connset *distlock__tp_checkout(distlock__transport *t)
{
    pthread_mutex_lock(&t->mu);
    distlock__connset *cs = take_locked(t);
    pthread_mutex_unlock(&t->mu);
    return cs;
}

distlock__connset *distlock__tp_checkout_pref(distlock__transport *t, uint64_t id)
{
    pthread_mutex_lock(&t->mu);
    distlock__connset *cs = t->all_sets;
    while (cs && cs->id != id)
        cs = cs->all_next;
    if (cs) {
        /* Another thread has it: wait for its operation to end. That is
         * bounded by a few rounds (no set is held during a wait), so the
         * bound here is only a safety net. */
        uint64_t deadline = distlock__now_us() +
            (uint64_t)(t->connect_timeout_ms + t->command_timeout_ms) * 4000u;
        while (cs->in_use && distlock__now_us() < deadline) {
            struct timespec ts = { (time_t)(deadline / 1000000u),
                                   (long)(deadline % 1000000u) * 1000 };
            pthread_cond_timedwait(&t->pool_cond, &t->mu, &ts);
        }
        if (!cs->in_use) {
            for (distlock__connset **pp = &t->pool; *pp; pp = &(*pp)->next)
                if (*pp == cs) {
                    *pp = cs->next;
                    break;
                }
            cs->in_use = 1;
            pthread_mutex_unlock(&t->mu);
            return cs;
        }
    }
    cs = take_locked(t);
    pthread_mutex_unlock(&t->mu);
    return cs;
}

void distlock__tp_checkin(distlock__transport *t, distlock__connset *cs)
{
    if (cs == NULL)
        return;
    pthread_mutex_lock(&t->mu);
    cs->in_use = 0;
    cs->next = t->pool;
    t->pool = cs;
    pthread_cond_broadcast(&t->pool_cond);
    pthread_mutex_unlock(&t->mu);
}

int distlock__tp_check_usable(distlock__transport *t)
{
    /* config_detail is written once, before the flag is set */
    if (atomic_load(&t->config_error))
        return distlock__fail(DISTLOCK_EINVAL, "%s", t->config_detail);
    return DISTLOCK_OK;
}
