/* client.c -- the client: its nodes, options and pool of connection sets.
 *
 * Each operation checks a connection set (one connection per node) out of
 * the pool and returns it afterwards, so threads sharing a client run their
 * round trips in parallel and never interleave on one socket. The client
 * remembers the pid that opened the sockets; a forked child drops them
 * without any I/O and opens its own. */
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* Condition variables on the monotonic clock (their waits are deadlines). */
static void init_conds(distlock_client *c)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->wd_cond, &ca);
    pthread_cond_init(&c->pool_cond, &ca);
    pthread_condattr_destroy(&ca);
}

int distlock_client_new(distlock_client **out, const char *servers)
{
    distlock_client *c;
    int rc;

    distlock__clear_error();
    if (out == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "out must not be NULL");
    *out = NULL;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    if ((rc = distlock__parse_servers(servers, &c->nodes, &c->n)) != DISTLOCK_OK) {
        free(c);
        return rc;
    }
    c->quorum = c->n / 2 + 1;
    c->peer = calloc((size_t)c->n, sizeof(*c->peer));
    if (c->peer == NULL) {
        distlock__free_nodes(c->nodes, c->n);
        free(c);
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    }
    c->pid = distlock__getpid();
    c->connect_timeout_ms = 1000;
    c->command_timeout_ms = 500;
    c->drift_ppm = 10000;
    c->drift_min_ms = 2;
    c->retry_min_ms = 2;
    c->retry_max_ms = 100;
    c->lost_fd = -1;
    c->sub_wake[0] = c->sub_wake[1] = -1;
    if ((rc = distlock__cancel_init(c)) != DISTLOCK_OK) {
        free(c->peer);
        distlock__free_nodes(c->nodes, c->n);
        free(c);
        return rc;
    }
    pthread_mutex_init(&c->mu, NULL);
    init_conds(c);
    *out = c;
    return DISTLOCK_OK;
}

static void free_connset(distlock_client *c, distlock__connset *cs)
{
    for (int i = 0; i < c->n; i++)
        distlock__conn_forget(&cs->conns[i]);
    free(cs->res_a);
    free(cs->calls_a);
    free(cs);
}

void distlock__after_fork_locked(distlock_client *c)
{
    /* Sockets, threads and waiters belong to the parent. Closing our copies
     * of the fds sends nothing on the parent's connections. */
    distlock__connset *cs = c->all_sets;
    while (cs) {
        distlock__connset *next = cs->all_next;
        free_connset(c, cs);
        cs = next;
    }
    c->pool = NULL;
    c->all_sets = NULL;
    /* What the parent left behind on its connections is the parent's. */
    c->nstale = 0;
    for (int k = 0; k < 256; k++)
        atomic_store(&c->stale_filter[k], 0);
    /* The parent's held records stay owned by their handles; the child
     * neither renews nor releases them. */
    c->held = NULL;
    /* The parent's threads may have been waiting on these: start afresh. */
    init_conds(c);
    distlock__watchdog_after_fork(c);
    distlock__subscriber_after_fork(c);
    distlock__cancel_after_fork(c);
    c->pid = distlock__getpid();
}

void distlock__lock(distlock_client *c)
{
    pid_t me = distlock__getpid();
    if (c->pid != me) {
        /* First call in a forked child: the mutex may have been copied while
         * another parent thread held it, so start from a fresh one. One
         * thread of the child does it; others wait for it to finish. */
        pid_t seen = atomic_load(&c->reinit_pid);
        if (seen != me && atomic_compare_exchange_strong(&c->reinit_pid, &seen, me)) {
            pthread_mutex_init(&c->mu, NULL);
            pthread_mutex_lock(&c->mu);
            distlock__after_fork_locked(c);  /* sets c->pid */
            return;
        }
        while (atomic_load(&c->pid) != me)
            sched_yield();
    }
    pthread_mutex_lock(&c->mu);
}

/* c->mu held */
static distlock__connset *take_locked(distlock_client *c)
{
    distlock__connset *cs = c->pool;
    if (cs) {
        c->pool = cs->next;
    } else {
        size_t n = (size_t)c->n;
        cs = calloc(1, sizeof(*cs) + sizeof(distlock__conn) * n);
        distlock__result *res = calloc(2 * n, sizeof(*res));
        const distlock__call **calls = calloc(2 * n, sizeof(*calls));
        if (cs == NULL || res == NULL || calls == NULL) {
            free(cs);
            free(res);
            free(calls);
            distlock__fail(DISTLOCK_ENOMEM, "out of memory");
            return NULL;
        }
        cs->res_a = res;
        cs->res_b = res + n;
        cs->calls_a = calls;
        cs->calls_b = calls + n;
        cs->all_next = c->all_sets;
        c->all_sets = cs;
    }
    cs->in_use = 1;
    return cs;
}

distlock__connset *distlock__checkout(distlock_client *c)
{
    distlock__lock(c);
    distlock__connset *cs = take_locked(c);
    pthread_mutex_unlock(&c->mu);
    return cs;
}

distlock__connset *distlock__checkout_pref(distlock_client *c, distlock__connset *pref)
{
    distlock__lock(c);
    distlock__connset *cs = c->all_sets;
    while (cs && cs != pref)
        cs = cs->all_next;
    if (cs) {
        /* Another thread has it: wait for its operation to end. That is
         * bounded by a few rounds (no set is held during a wait), so the
         * bound here is only a safety net. */
        uint64_t deadline = distlock__now_us() +
            (uint64_t)(c->connect_timeout_ms + c->command_timeout_ms) * 4000u;
        while (cs->in_use && distlock__now_us() < deadline) {
            struct timespec ts = { (time_t)(deadline / 1000000u),
                                   (long)(deadline % 1000000u) * 1000 };
            pthread_cond_timedwait(&c->pool_cond, &c->mu, &ts);
        }
        if (!cs->in_use) {
            for (distlock__connset **pp = &c->pool; *pp; pp = &(*pp)->next)
                if (*pp == cs) {
                    *pp = cs->next;
                    break;
                }
            cs->in_use = 1;
            pthread_mutex_unlock(&c->mu);
            return cs;
        }
    }
    cs = take_locked(c);
    pthread_mutex_unlock(&c->mu);
    return cs;
}

void distlock__checkin(distlock_client *c, distlock__connset *cs)
{
    if (cs == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    cs->in_use = 0;
    cs->next = c->pool;
    c->pool = cs;
    pthread_cond_broadcast(&c->pool_cond);
    pthread_mutex_unlock(&c->mu);
}

void distlock_client_free(distlock_client *c)
{
    if (c == NULL)
        return;
    distlock__watchdog_stop(c);
    distlock__subscriber_stop(c);
    /* Release what is still held through this client, so a forgotten
     * handle does not keep other processes waiting for its TTL. */
    distlock__lock(c);
    distlock__held *h = c->held;
    c->held = NULL;
    pthread_mutex_unlock(&c->mu);
    while (h) {
        distlock__held *next = h->next;
        if (!h->released && h->pid == distlock__getpid() && !atomic_load(&h->lost))
            (void)distlock__release_keytoken(c, h->key, h->token, atomic_load(&h->valid_until_us),
                                             h->cs_pref, h->maybe);
        h->released = 1;
        h->client = NULL;  /* handles left report DISTLOCK_ECLOSED */
        h->next = NULL;
        h = next;
    }
    distlock__connset *cs = c->all_sets;
    while (cs) {
        distlock__connset *next = cs->all_next;
        free_connset(c, cs);
        cs = next;
    }
    if (c->lost_fd >= 0)
        close(c->lost_fd);
    distlock__cancel_free(c);
    free(c->stale);
    free(c->peer);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->wd_cond);
    pthread_cond_destroy(&c->pool_cond);
    distlock__free_nodes(c->nodes, c->n);
    free(c->username);
    free(c->password);
    free(c);
}

int distlock_client_set(distlock_client *c, distlock_option opt, long v)
{
    long *slot = NULL, lo = 1, hi = 3600000;

    distlock__clear_error();
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    switch (opt) {
    case DISTLOCK_OPT_CONNECT_TIMEOUT_MS: slot = &c->connect_timeout_ms; break;
    case DISTLOCK_OPT_COMMAND_TIMEOUT_MS: slot = &c->command_timeout_ms; break;
    case DISTLOCK_OPT_DRIFT_PPM: slot = &c->drift_ppm; lo = 0; hi = 500000; break;
    case DISTLOCK_OPT_DRIFT_MIN_MS: slot = &c->drift_min_ms; lo = 0; break;
    case DISTLOCK_OPT_RETRY_MIN_MS: slot = &c->retry_min_ms; break;
    case DISTLOCK_OPT_RETRY_MAX_MS: slot = &c->retry_max_ms; break;
    case DISTLOCK_OPT_USERNAME:
    case DISTLOCK_OPT_PASSWORD:
        return distlock__fail(DISTLOCK_EINVAL, "option %d is a string: use distlock_client_set_str",
                              (int)opt);
    default:
        return distlock__fail(DISTLOCK_EINVAL, "unknown option %d", (int)opt);
    }
    if (v < lo || v > hi)
        return distlock__fail(DISTLOCK_EINVAL, "option %d: value %ld out of range %ld..%ld",
                              (int)opt, v, lo, hi);
    distlock__lock(c);
    *slot = v;
    if (c->retry_min_ms > c->retry_max_ms) {
        if (slot == &c->retry_min_ms)
            c->retry_max_ms = v;
        else
            c->retry_min_ms = v;
    }
    pthread_mutex_unlock(&c->mu);
    return DISTLOCK_OK;
}

int distlock_client_set_str(distlock_client *c, distlock_option opt, const char *v)
{
    char **slot, *copy = NULL;

    distlock__clear_error();
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    switch (opt) {
    case DISTLOCK_OPT_USERNAME: slot = &c->username; break;
    case DISTLOCK_OPT_PASSWORD: slot = &c->password; break;
    default:
        return distlock__fail(DISTLOCK_EINVAL, "option %d is not a string option", (int)opt);
    }
    if (v && strlen(v) > 4096)
        return distlock__fail(DISTLOCK_EINVAL, "option %d: string longer than 4096 bytes", (int)opt);
    if (v && (copy = strdup(v)) == NULL)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    distlock__lock(c);
    free(*slot);
    *slot = copy;
    /* Connections authenticated with the old credentials reconnect with the
     * new ones when next used with nothing owed (round.c): closing them here
     * could drop requests still on their way, and they belong to whichever
     * thread has them checked out. */
    atomic_fetch_add(&c->cred_gen, 1);
    pthread_mutex_unlock(&c->mu);
    return DISTLOCK_OK;
}

int distlock_client_node_count(const distlock_client *c)
{
    return c ? c->n : distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
}

int distlock_client_quorum(const distlock_client *c)
{
    return c ? c->quorum : distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
}

const char *distlock_client_node_uri(const distlock_client *c, int i)
{
    if (c == NULL || i < 0 || i >= c->n) {
        distlock__fail(DISTLOCK_EINVAL, "no node %d", i);
        return NULL;
    }
    return c->nodes[i].uri;
}

int distlock__check_key(const char *key)
{
    if (key == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "key must not be NULL");
    size_t n = strnlen(key, DISTLOCK_KEY_MAX + 1);
    if (n == 0)
        return distlock__fail(DISTLOCK_EINVAL, "key must not be empty");
    if (n > DISTLOCK_KEY_MAX)
        return distlock__fail(DISTLOCK_EINVAL, "key longer than %d bytes", DISTLOCK_KEY_MAX);
    return DISTLOCK_OK;
}

int distlock__check_ttl(const distlock_client *c, long ttl_ms)
{
    if (ttl_ms <= 0 || ttl_ms > DISTLOCK_TTL_MAX)
        return distlock__fail(DISTLOCK_EINVAL, "ttl_ms %ld out of range 1..%ld", ttl_ms,
                              (long)DISTLOCK_TTL_MAX);
    /* A lease no longer than the clock-drift allowance can never be valid. */
    if (c && ttl_ms <= distlock__drift_ms(c, ttl_ms))
        return distlock__fail(DISTLOCK_EINVAL,
                              "ttl_ms %ld is not above the clock-drift allowance of %ld ms",
                              ttl_ms, distlock__drift_ms(c, ttl_ms));
    return DISTLOCK_OK;
}

long distlock__drift_ms(const distlock_client *c, long ttl_ms)
{
    return (long)((int64_t)ttl_ms * c->drift_ppm / 1000000) + c->drift_min_ms;
}

uint64_t distlock__valid_until(const distlock_client *c, uint64_t t0_us, long ttl_ms)
{
    long drift = distlock__drift_ms(c, ttl_ms);
    return ttl_ms > drift ? t0_us + (uint64_t)(ttl_ms - drift) * 1000u : 0;
}

uint64_t distlock__renew_at(uint64_t from_us, long ttl_ms)
{
    return from_us + (uint64_t)ttl_ms * 1000u / 3u;
}

int distlock__check_usable(distlock_client *c)
{
    /* config_detail is written once, before the flag is set */
    if (atomic_load(&c->config_error))
        return distlock__fail(DISTLOCK_EINVAL, "%s", c->config_detail);
    return DISTLOCK_OK;
}
