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
    c->q = (distlock__quorum){ .n = c->n, .quorum = c->quorum, .nodes = c->nodes,
                               .drift_ppm = 10000, .drift_min_ms = 2 };
    c->pid = distlock__getpid();
    c->tp.stats = &c->stats;  /* the transport counts its nodes' errors there */
    c->retry_min_ms = 2;
    c->retry_max_ms = 100;
    atomic_store(&c->wait_timeout_ms, 100);  /* WAIT: off until replicas are asked for */
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
     * the records are abandoned (or were: their handle's promise holds). */
    distlock__lock(c);
    distlock__held *h = c->held;
    c->held = NULL;
    pthread_mutex_unlock(&c->mu);
    while (h) {
        distlock__held *next = h->next;
        if (release && !h->abandoned && !h->released && h->pid == distlock__getpid() &&
            !atomic_load(&h->lost))
            (void)distlock__release_keytoken(c, h->key, h->token, atomic_load(&h->valid_until_us),
                                             h->set_pref, h->maybe);
        h->released = 1;
        h->client = NULL;  /* handles left report DISTLOCK_ECLOSED */
        h->next = NULL;
        h = next;
    }
    if (c->lost_fd >= 0)
        close(c->lost_fd);
    distlock__cancel_free(c);
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

int distlock_client_set(distlock_client *c, distlock_option opt, long v)
{
    long *slot = NULL, lo = 1, hi = 3600000;
    int timeout = -1;

    distlock__clear_error();
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    switch (opt) {
    case DISTLOCK_OPT_CONNECT_TIMEOUT_MS: timeout = 0; break;
    case DISTLOCK_OPT_COMMAND_TIMEOUT_MS: timeout = 1; break;
    case DISTLOCK_OPT_DRIFT_PPM: slot = &c->q.drift_ppm; lo = 0; hi = 500000; break;
    case DISTLOCK_OPT_DRIFT_MIN_MS: slot = &c->q.drift_min_ms; lo = 0; break;
    case DISTLOCK_OPT_RETRY_MIN_MS: slot = &c->retry_min_ms; break;
    case DISTLOCK_OPT_RETRY_MAX_MS: slot = &c->retry_max_ms; break;
    case DISTLOCK_OPT_WAIT_REPLICAS:
    case DISTLOCK_OPT_WAIT_TIMEOUT_MS: {
        /* WAIT for replicas: operations read these atomically */
        int replicas = opt == DISTLOCK_OPT_WAIT_REPLICAS;
        if (v < (replicas ? 0 : 1) || v > (replicas ? 64 : 60000))
            return distlock__fail(DISTLOCK_EINVAL, "%s: value %ld out of range %d..%d",
                                  replicas ? "wait replicas (DISTLOCK_OPT_WAIT_REPLICAS)"
                                           : "wait timeout (DISTLOCK_OPT_WAIT_TIMEOUT_MS)",
                                  v, replicas ? 0 : 1, replicas ? 64 : 60000);
        atomic_store(replicas ? &c->wait_replicas : &c->wait_timeout_ms, v);
        return DISTLOCK_OK;
    }
    case DISTLOCK_OPT_STATS:
        if (v != 0 && v != 1)
            return distlock__fail(DISTLOCK_EINVAL, "stats (DISTLOCK_OPT_STATS): value %ld: 0 or 1",
                                  v);
        atomic_store(&c->stats.on, (int)v);
        return DISTLOCK_OK;
    case DISTLOCK_OPT_OWNER_INFO:
        if (v != 0 && v != 1)
            return distlock__fail(DISTLOCK_EINVAL,
                                  "owner info (DISTLOCK_OPT_OWNER_INFO): value %ld: 0 or 1", v);
        atomic_store(&c->owner_info, (int)v);
        return DISTLOCK_OK;
    /* TLS */
    case DISTLOCK_OPT_TLS_VERIFY:
        if (v != 0 && v != 1)
            return distlock__fail(DISTLOCK_EINVAL, "option %d: value %ld: 0 or 1", (int)opt, v);
        distlock__lock(c);  /* in a forked child, resets the transport first */
        pthread_mutex_unlock(&c->mu);
        distlock__tp_set_tls_verify(&c->tp, (int)v);
        return DISTLOCK_OK;
    case DISTLOCK_OPT_TLS_CA_FILE:
    case DISTLOCK_OPT_TLS_CA_DIR:
    case DISTLOCK_OPT_TLS_CERT:
    case DISTLOCK_OPT_TLS_KEY:
    case DISTLOCK_OPT_TLS_SERVER_NAME:
    /* end TLS */
    case DISTLOCK_OPT_USERNAME:
    case DISTLOCK_OPT_PASSWORD:
    case DISTLOCK_OPT_OWNER_LABEL:
        return distlock__fail(DISTLOCK_EINVAL, "option %d is a string: use distlock_client_set_str",
                              (int)opt);
    default:
        return distlock__fail(DISTLOCK_EINVAL, "unknown option %d", (int)opt);
    }
    if (v < lo || v > hi)
        return distlock__fail(DISTLOCK_EINVAL, "option %d: value %ld out of range %ld..%ld",
                              (int)opt, v, lo, hi);
    if (timeout >= 0) {
        distlock__tp_set_timeout(&c->tp, timeout, v);
        return DISTLOCK_OK;
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
    return DISTLOCK_OK;
}

/* The label stored with the owner metadata; copied by acquires under mu. */
static int set_owner_label(distlock_client *c, const char *v)
{
    size_t n = v ? strlen(v) : 0;
    if (n > DISTLOCK_OWNER_LABEL_MAX)
        return distlock__fail(DISTLOCK_EINVAL,
                              "owner label (DISTLOCK_OPT_OWNER_LABEL): %zu bytes, at most %d", n,
                              DISTLOCK_OWNER_LABEL_MAX);
    distlock__lock(c);
    memcpy(c->owner_label, v ? v : "", n + 1);
    pthread_mutex_unlock(&c->mu);
    return DISTLOCK_OK;
}

int distlock_client_set_str(distlock_client *c, distlock_option opt, const char *v)
{
    int which;

    distlock__clear_error();
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    switch (opt) {
    case DISTLOCK_OPT_USERNAME: which = 0; break;
    case DISTLOCK_OPT_PASSWORD: which = 1; break;
    /* TLS */
    case DISTLOCK_OPT_TLS_CA_FILE: which = 10 + DISTLOCK__TLS_CA_FILE; break;
    case DISTLOCK_OPT_TLS_CA_DIR: which = 10 + DISTLOCK__TLS_CA_DIR; break;
    case DISTLOCK_OPT_TLS_CERT: which = 10 + DISTLOCK__TLS_CERT; break;
    case DISTLOCK_OPT_TLS_KEY: which = 10 + DISTLOCK__TLS_KEY; break;
    case DISTLOCK_OPT_TLS_SERVER_NAME: which = 10 + DISTLOCK__TLS_SERVER_NAME; break;
    /* end TLS */
    case DISTLOCK_OPT_OWNER_LABEL:
        return set_owner_label(c, v);
    default:
        return distlock__fail(DISTLOCK_EINVAL, "option %d is not a string option", (int)opt);
    }
    if (v && strlen(v) > 4096)
        return distlock__fail(DISTLOCK_EINVAL, "option %d: string longer than 4096 bytes", (int)opt);
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
