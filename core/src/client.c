/* client.c -- the client. Its nodes, options and lifetime;
 * it wires the layers together: the transport gets the protocol's scripts,
 * the client's state gets the background threads' after-fork hooks.
 *
 * Layer: 7 API */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

static void apply_long(distlock_client *c, distlock_option opt, long v);

int distlock_client_new(const char *servers, distlock_client **out)
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
    if ((rc = distlock__tp_init(&c->tp, c->nodes, c->n, distlock__scripts,
                                DISTLOCK__S_COUNT)) != DISTLOCK_OK) {
        distlock__free_nodes(c->nodes, c->n);
        free(c);
        return rc;
    }
    if (distlock__stats_init(&c->stats, c->n) != 0)
        rc = distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    else if ((rc = distlock__cancel_init(c)) != DISTLOCK_OK)
        distlock__stats_free(&c->stats);
    if (rc != DISTLOCK_OK) {
        distlock__tp_free(&c->tp);
        distlock__free_nodes(c->nodes, c->n);
        free(c);
        return rc;
    }
    c->quorum = c->n / 2 + 1;
    c->q = (distlock__quorum){ .n = c->n, .quorum = c->quorum, .nodes = c->nodes };
    c->pid = distlock__getpid();
    c->tp.stats = &c->stats;  /* the transport counts its nodes' errors there */
    c->lost_fd = -1;
    c->sub_wake[0] = c->sub_wake[1] = -1;
    c->after_fork[0] = distlock__watchdog_after_fork;
    c->after_fork[1] = distlock__subscriber_after_fork;
    c->after_fork[2] = distlock__cancel_after_fork;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);  /* its waits are deadlines */
    pthread_cond_init(&c->wd_cond, &ca);
    pthread_condattr_destroy(&ca);
    /* Every integer option starts at its table default: the table is the
     * one place defaults are written. */
    const distlock_option_info *o;
    for (size_t i = 0; (o = distlock_option_at(i)) != NULL; i++)
        if (o->type == DISTLOCK_OPTION_LONG)
            apply_long(c, o->id, o->default_value);
    *out = c;
    return DISTLOCK_OK;
}

/* release: send the releases of what is still held (distlock_client_free),
 * or leave every lease to run out by its TTL (distlock_client_abandon). */
static void client_free(distlock_client *c, int release)
{
    if (c == NULL)
        return;
    distlock__watchdog_stop(c);
    distlock__subscriber_stop(c);
    /* Release what is still held through this client, so a forgotten
     * handle does not keep other processes waiting for its TTL; unless
     * the records are abandoned (or were: their handle's promise holds), or
     * restored (distlock_lock_restore: the key may be another process's
     * lock, deleted only by an explicit release). */
    distlock__lock(c);
    distlock__held *h = c->held;
    c->held = NULL;
    pthread_mutex_unlock(&c->mu);
    while (h) {
        distlock__held *next = h->next;
        if (release && !h->abandoned && !h->restored && !h->released && h->pid == distlock__getpid() &&
            !atomic_load(&h->lost))
            (void)distlock__held_release(c, h, atomic_load(&h->valid_until_us), 0, NULL);
        h->released = 1;
        h->client = NULL;  /* handles left report DISTLOCK_ECLOSED */
        h->next = NULL;
        h = next;
    }
    if (c->lost_fd >= 0)
        close(c->lost_fd);
    distlock__cancel_free(c);
    for (int k = 0; k < DISTLOCK__TP_RECENT; k++)
        free(c->tp_recent[k].lock);
    distlock__tp_free(&c->tp);
    distlock__stats_free(&c->stats);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->wd_cond);
    distlock__free_nodes(c->nodes, c->n);
    free(c);
}

void distlock_client_free(distlock_client *c)
{
    client_free(c, 1);
}

void distlock_client_abandon(distlock_client *c)
{
    client_free(c, 0);
}

/* Store an integer option already checked against the table. */
static void apply_long(distlock_client *c, distlock_option opt, long v)
{
    _Atomic long *slot = NULL;

    switch (opt) {
    case DISTLOCK_OPT_CONNECT_TIMEOUT_MS: distlock__tp_set_timeout(&c->tp, 0, v); return;
    case DISTLOCK_OPT_COMMAND_TIMEOUT_MS: distlock__tp_set_timeout(&c->tp, 1, v); return;
    /* WAIT for replicas, stats, owner metadata: operations read these atomically */
    case DISTLOCK_OPT_WAIT_REPLICAS: atomic_store(&c->wait_replicas, v); return;
    case DISTLOCK_OPT_WAIT_TIMEOUT_MS: atomic_store(&c->wait_timeout_ms, v); return;
    case DISTLOCK_OPT_STATS: atomic_store(&c->stats.on, (int)v); return;
    case DISTLOCK_OPT_OWNER_INFO: atomic_store(&c->owner_info, (int)v); return;
    case DISTLOCK_OPT_MULTI_RUNS: atomic_store(&c->multi_runs, v); return;
    case DISTLOCK_OPT_TLS_VERIFY:
        distlock__lock(c);  /* in a forked child, resets the transport first */
        pthread_mutex_unlock(&c->mu);
        distlock__tp_set_tls_verify(&c->tp, (int)v);
        return;
    case DISTLOCK_OPT_DRIFT_PPM: slot = &c->q.drift_ppm; break;
    case DISTLOCK_OPT_DRIFT_MIN_MS: slot = &c->q.drift_min_ms; break;
    case DISTLOCK_OPT_RETRY_MIN_MS: slot = &c->retry_min_ms; break;
    case DISTLOCK_OPT_RETRY_MAX_MS: slot = &c->retry_max_ms; break;
    default: return;  /* every integer row of the table has a case above */
    }
    distlock__lock(c);
    *slot = v;
    if (c->retry_min_ms > c->retry_max_ms) {
        if (slot == &c->retry_min_ms)
            c->retry_max_ms = v;
        else
            c->retry_min_ms = v;
    }
    pthread_mutex_unlock(&c->mu);
}

int distlock__client_option_value(distlock_client *c, distlock_option opt, long *v)
{
    switch (opt) {
    case DISTLOCK_OPT_CONNECT_TIMEOUT_MS:
    case DISTLOCK_OPT_COMMAND_TIMEOUT_MS:
    case DISTLOCK_OPT_TLS_VERIFY:
        pthread_mutex_lock(&c->tp.mu);
        *v = opt == DISTLOCK_OPT_CONNECT_TIMEOUT_MS   ? c->tp.connect_timeout_ms
             : opt == DISTLOCK_OPT_COMMAND_TIMEOUT_MS ? c->tp.command_timeout_ms
                                                      : c->tp.tls_verify;
        pthread_mutex_unlock(&c->tp.mu);
        return DISTLOCK_OK;
    case DISTLOCK_OPT_WAIT_REPLICAS: *v = atomic_load(&c->wait_replicas); return DISTLOCK_OK;
    case DISTLOCK_OPT_WAIT_TIMEOUT_MS: *v = atomic_load(&c->wait_timeout_ms); return DISTLOCK_OK;
    case DISTLOCK_OPT_STATS: *v = atomic_load(&c->stats.on); return DISTLOCK_OK;
    case DISTLOCK_OPT_OWNER_INFO: *v = atomic_load(&c->owner_info); return DISTLOCK_OK;
    case DISTLOCK_OPT_MULTI_RUNS: *v = atomic_load(&c->multi_runs); return DISTLOCK_OK;
    case DISTLOCK_OPT_DRIFT_PPM:
    case DISTLOCK_OPT_DRIFT_MIN_MS:
    case DISTLOCK_OPT_RETRY_MIN_MS:
    case DISTLOCK_OPT_RETRY_MAX_MS:
        distlock__lock(c);
        *v = opt == DISTLOCK_OPT_DRIFT_PPM      ? c->q.drift_ppm
             : opt == DISTLOCK_OPT_DRIFT_MIN_MS ? c->q.drift_min_ms
             : opt == DISTLOCK_OPT_RETRY_MIN_MS ? c->retry_min_ms
                                                : c->retry_max_ms;
        pthread_mutex_unlock(&c->mu);
        return DISTLOCK_OK;
    default:
        return distlock__fail(DISTLOCK_EINVAL, "option %d is not an integer option", (int)opt);
    }
}

int distlock_client_set(distlock_client *c, distlock_option opt, long v)
{
    const distlock_option_info *o;
    int rc;

    distlock__clear_error();
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    if ((o = distlock_option_by_id(opt)) == NULL)
        return DISTLOCK_EINVAL;
    if ((rc = distlock__option_check_long(o, v)) != DISTLOCK_OK)
        return rc;
    apply_long(c, opt, v);
    return DISTLOCK_OK;
}

/* The label stored with the owner metadata; copied by acquires under mu. */
static int set_owner_label(distlock_client *c, const char *v)
{
    size_t n = v ? strlen(v) : 0;
    distlock__lock(c);
    memcpy(c->owner_label, v ? v : "", n + 1);
    pthread_mutex_unlock(&c->mu);
    return DISTLOCK_OK;
}

int distlock_client_set_str(distlock_client *c, distlock_option opt, const char *v)
{
    const distlock_option_info *o;
    int which, rc;
    long n;

    distlock__clear_error();
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    if ((o = distlock_option_by_id(opt)) == NULL)
        return DISTLOCK_EINVAL;
    if (o->type == DISTLOCK_OPTION_LONG) {
        /* an integer option given as text (a command line, an ini file) */
        if ((rc = distlock__option_parse_long(o, v, &n)) != DISTLOCK_OK)
            return rc;
        apply_long(c, opt, n);
        return DISTLOCK_OK;
    }
    if ((rc = distlock__option_check_string(o, v)) != DISTLOCK_OK)
        return rc;
    switch (opt) {
    case DISTLOCK_OPT_USERNAME: which = 0; break;
    case DISTLOCK_OPT_PASSWORD: which = 1; break;
    case DISTLOCK_OPT_TLS_CA_FILE: which = 10 + DISTLOCK__TLS_CA_FILE; break;
    case DISTLOCK_OPT_TLS_CA_DIR: which = 10 + DISTLOCK__TLS_CA_DIR; break;
    case DISTLOCK_OPT_TLS_CERT: which = 10 + DISTLOCK__TLS_CERT; break;
    case DISTLOCK_OPT_TLS_KEY: which = 10 + DISTLOCK__TLS_KEY; break;
    case DISTLOCK_OPT_TLS_SERVER_NAME: which = 10 + DISTLOCK__TLS_SERVER_NAME; break;
    case DISTLOCK_OPT_OWNER_LABEL: return set_owner_label(c, v);
    default:  /* every string row of the table has a case above */
        return distlock__fail(DISTLOCK_EINVAL, "option \"%s\" cannot be set", o->name);
    }
    distlock__lock(c);  /* in a forked child, resets the transport first */
    pthread_mutex_unlock(&c->mu);
    if (which >= 10)
        return distlock__tp_set_tls(&c->tp, which - 10, v && *v ? v : NULL);
    return distlock__tp_set_credential(&c->tp, which, v);
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

int distlock_client_stats(distlock_client *c, distlock_stat *out, size_t cap, size_t *count)
{
    distlock__clear_error();
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    if (count == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "count must not be NULL");
    if (out == NULL && cap > 0)
        return distlock__fail(DISTLOCK_EINVAL, "out must not be NULL when cap > 0");
    size_t total = distlock__stats_count(&c->stats);
    *count = total;
    for (size_t k = 0; k < cap && k < total; k++)
        (void)distlock__stats_entry(&c->stats, k, out[k].name, sizeof(out[k].name),
                                    &out[k].value);
    if (cap > 0 && cap < total)
        return distlock__fail(DISTLOCK_EINVAL, "stats: room for %zu entries, %zu needed", cap,
                              total);
    return DISTLOCK_OK;
}
