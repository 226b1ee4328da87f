/* watchdog.c -- auto-renewal. One background thread per client (started by
 * the first DISTLOCK_AUTO_RENEW lock) renews each such lock at ttl/3. All
 * renewals due together go to every node in one batched script call, so
 * keeping many locks alive costs one round trip per period, not one per
 * lock. A lock found not ours on enough nodes, or not renewable on a quorum
 * before its validity ends, is marked lost and its owner told: flag,
 * callback, and the client's pollable eventfd. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define BATCH_MAX 2000       /* keys per script call */
#define RETRY_MIN_MS 50      /* first retry after a renewal that reached no quorum */

/* A lock is renewed at ttl/3 after its last renewal, or earlier when the
 * thread is awake anyway: anything due within ttl/6 goes in the same batch.
 * So locks acquired at different moments coalesce into a few round trips
 * per period instead of one per wake-up (renewing early costs nothing). A
 * lock whose renewal is failing is retried at its own backoff time only
 * (else the slack would fire the retry at once, again and again). */
static int renewal_due(const distlock__held *h, uint64_t now)
{
    if (h->retry_ms > 0)
        return h->renew_at_us <= now;
    return h->renew_at_us <= now + (uint64_t)h->ttl_ms * 1000u / 6u + 1000u;
}

/* Backoff while renewals fail (nodes down): doubling from 50 ms up to a
 * tenth of the ttl, so a lock keeps a few more chances before its validity
 * ends, and a dead quorum costs a bounded number of calls. */
static long next_retry_ms(const distlock__held *h)
{
    long cap = h->ttl_ms / 10 > RETRY_MIN_MS ? h->ttl_ms / 10 : RETRY_MIN_MS;
    long r = h->retry_ms ? h->retry_ms * 2 : RETRY_MIN_MS;
    return r > cap ? cap : r;
}

static int renewable(const distlock_client *c, const distlock__held *h)
{
    return (h->flags & DISTLOCK_AUTO_RENEW) && !h->released && !atomic_load(&h->lost) &&
           !h->renewing && h->pid == c->pid;
}

typedef struct due {
    distlock__held *h;
    char *key, *token;
    char ttl[24];
    long ttl_ms;
    unsigned slot;   /* Redis Cluster hash slot of key (clients with a cluster node) */
} due;

static int by_slot(const void *a, const void *b)
{
    unsigned x = ((const due *)a)->slot, y = ((const due *)b)->slot;
    return x < y ? -1 : x > y;
}

static void abs_deadline(struct timespec *ts, uint64_t until_us)
{
    ts->tv_sec = (time_t)(until_us / 1000000u);
    ts->tv_nsec = (long)(until_us % 1000000u) * 1000;
}

/* Renew d[0..m) on every node; fills ok[] with the number of nodes that
 * confirmed each, no[] with those that said it is not ours. */
static void renew_batch(distlock_client *c, due *d, int m, int *ok, int *no)
{
    /* owner metadata on: each lock's owner key follows the lock keys */
    int ow = atomic_load_explicit(&c->owner_info, memory_order_relaxed) ? 1 : 0;
    const char **argv = calloc((size_t)m * (3 + ow), sizeof(*argv));
    size_t *len = calloc((size_t)m * (3 + ow), sizeof(*len));
    char (*okeys)[DISTLOCK__SIDEKEY_MAX] = ow ? calloc((size_t)m, sizeof(*okeys)) : NULL;
    distlock__connset *cs = distlock__checkout(c);

    memset(ok, 0, sizeof(int) * (size_t)m);
    memset(no, 0, sizeof(int) * (size_t)m);
    if (!argv || !len || !cs || (ow && !okeys)) {
        free(argv);
        free(len);
        free(okeys);
        distlock__checkin(c, cs);
        return;
    }
    distlock__result *res = cs->res_a;
    const distlock__call **calls = cs->calls_a;
    int nk = m * (1 + ow);
    for (int k = 0; k < m; k++) {
        argv[k] = d[k].key, len[k] = strlen(d[k].key);
        if (ow) {
            distlock__sidekey(okeys[k], d[k].key, DISTLOCK__OWNER_SUFFIX);
            argv[m + k] = okeys[k], len[m + k] = strlen(okeys[k]);
        }
        argv[nk + 2 * k] = d[k].token, len[nk + 2 * k] = strlen(d[k].token);
        argv[nk + 2 * k + 1] = d[k].ttl, len[nk + 2 * k + 1] = strlen(d[k].ttl);
    }
    /* no tag: a batch covers many locks; the records' `renewing` flag keeps
     * it apart from extends of the same lock */
    distlock__call call = { .script = DISTLOCK__S_EXTEND, .nkeys = nk, .argc = nk + 2 * m, .argv = argv,
                            .argvlen = len };
    /* Renewals are extends: with WAIT, a node whose replicas did not
     * acknowledge the batch counts for none of its locks (below). */
    distlock__set_wait(c, &call);
    for (int i = 0; i < c->n; i++)
        calls[i] = &call;
    distlock__round(&c->tp, cs, calls, res, NULL, NULL);
    for (int i = 0; i < c->n; i++) {
        const redisReply *x = res[i].state == DISTLOCK__R_DONE ? res[i].reply : NULL;
        if (x == NULL || x->type != REDIS_REPLY_ARRAY || x->elements != (size_t)m)
            continue;
        if (res[i].wait_n > 0 && res[i].acked < res[i].wait_n)
            continue;  /* not acknowledged by enough replicas: neither ok nor no */
        for (int k = 0; k < m; k++) {
            if (x->element[k]->type != REDIS_REPLY_INTEGER)
                continue;
            if (x->element[k]->integer == 1)
                ok[k]++;
            else
                no[k]++;
        }
    }
    distlock__round_clear(res, c->n);
    distlock__checkin(c, cs);
    free(argv);
    free(len);
    free(okeys);
}

typedef struct lost_call { distlock__held *h; distlock_lost_fn fn; distlock_lock *l; void *arg; } lost_call;

static void *watchdog_main(void *arg)
{
    distlock_client *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!c->wd_stop) {
        uint64_t now = distlock__now_us(), next = UINT64_MAX;
        int m = 0;
        for (distlock__held *h = c->held; h; h = h->next) {
            if (!renewable(c, h))
                continue;
            if (renewal_due(h, now))
                m++;
            else if (h->renew_at_us < next)
                next = h->renew_at_us;
        }
        if (m == 0) {
            if (next == UINT64_MAX) {
                pthread_cond_wait(&c->wd_cond, &c->mu);
            } else {
                struct timespec ts;
                abs_deadline(&ts, next);
                pthread_cond_timedwait(&c->wd_cond, &c->mu, &ts);
            }
            continue;
        }
        if (m > BATCH_MAX)
            m = BATCH_MAX;
        due *d = calloc((size_t)m, sizeof(*d));
        int *ok = calloc((size_t)m, sizeof(int)), *no = calloc((size_t)m, sizeof(int));
        lost_call *lc = calloc((size_t)m, sizeof(*lc));
        if (!d || !ok || !no || !lc) {
            free(d), free(ok), free(no), free(lc);
            struct timespec ts;
            abs_deadline(&ts, now + RETRY_MIN_MS * 1000u);
            pthread_cond_timedwait(&c->wd_cond, &c->mu, &ts);
            continue;
        }
        int k = 0;
        for (distlock__held *h = c->held; h && k < m; h = h->next) {
            if (!renewable(c, h) || !renewal_due(h, now))
                continue;
            h->refs++;  /* keep it alive while we work unlocked */
            h->renewing = 1;
            d[k].h = h;
            d[k].key = h->key;
            d[k].token = h->token;
            d[k].ttl_ms = h->ttl_ms;
            snprintf(d[k].ttl, sizeof(d[k].ttl), "%ld", h->ttl_ms);
            k++;
        }
        m = k;
        pthread_mutex_unlock(&c->mu);

        uint64_t t0 = distlock__now_us();
        if (c->tp.cl == NULL) {
            renew_batch(c, d, m, ok, no);
        } else {
            /* A cluster node runs a script on one slot only (CROSSSLOT
             * otherwise): one batch per slot, each sent to the master
             * that owns it now. */
            for (k = 0; k < m; k++)
                d[k].slot = distlock__key_slot(d[k].key, strlen(d[k].key));
            qsort(d, (size_t)m, sizeof(*d), by_slot);
            for (int s0 = 0, s1; s0 < m; s0 = s1) {
                for (s1 = s0 + 1; s1 < m && d[s1].slot == d[s0].slot; s1++)
                    ;
                renew_batch(c, d + s0, s1 - s0, ok + s0, no + s0);
            }
        }
        uint64_t t1 = distlock__now_us();

        pthread_mutex_lock(&c->mu);
        int nl = 0;
        for (k = 0; k < m; k++) {
            distlock__held *h = d[k].h;
            h->renewing = 0;
            if (h->released || atomic_load(&h->lost))
                continue;
            uint64_t until = distlock__valid_until(&c->q, t0, d[k].ttl_ms);
            uint64_t valid = atomic_load(&h->valid_until_us);
            if (ok[k] >= c->quorum && t1 < until) {
                atomic_store(&h->valid_until_us, until);
                h->renew_at_us = distlock__renew_at(t1, d[k].ttl_ms);
                h->retry_ms = 0;
                distlock__stats_inc(&c->stats, DISTLOCK__ST_RENEWED);
                continue;
            }
            distlock__stats_inc(&c->stats, DISTLOCK__ST_RENEW_FAILED);
            if (no[k] > c->n - c->quorum || t1 >= valid) {
                distlock__mark_lost(h);
                if (h->lost_fn) {
                    h->cb_running = 1;  /* distlock_lock_free waits for it */
                    lc[nl++] = (lost_call){ h, h->lost_fn, h->lost_handle, h->lost_arg };
                }
            } else {
                /* No quorum either way (nodes down): try again after a
                 * backoff, and at the latest when the validity ends. */
                h->retry_ms = next_retry_ms(h);
                h->renew_at_us = t1 + (uint64_t)h->retry_ms * 1000u;
                if (h->renew_at_us > valid)
                    h->renew_at_us = valid;
            }
        }
        pthread_cond_broadcast(&c->wd_cond);  /* extends waiting for this batch */
        /* Callbacks run unlocked (they may call into the library); the
         * extra references keep the records alive meanwhile, and a handle
         * being freed waits for its callback to return. */
        if (nl > 0) {
            pthread_mutex_unlock(&c->mu);
            for (int i = 0; i < nl; i++)
                lc[i].fn(lc[i].l, lc[i].arg);
            pthread_mutex_lock(&c->mu);
            for (int i = 0; i < nl; i++)
                lc[i].h->cb_running = 0;
            pthread_cond_broadcast(&c->wd_cond);
        }
        for (k = 0; k < m; k++)
            distlock__held_unref_locked(c, d[k].h);
        free(d), free(ok), free(no), free(lc);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int distlock__watchdog_start(distlock_client *c)
{
    if (c->wd_running)
        return DISTLOCK_OK;
    c->wd_stop = 0;
    int e = distlock__thread_create(&c->wd_thread, NULL, watchdog_main, c);
    if (e != 0)
        return distlock__fail(DISTLOCK_ESYS, "cannot start the renewal thread: %s", strerror(e));
    c->wd_running = 1;
    return DISTLOCK_OK;
}

void distlock__watchdog_after_fork(distlock_client *c)
{
    pthread_condattr_t ca;

    c->wd_running = 0;
    c->wd_stop = 0;
    /* The parent's thread may have been waiting on it: start afresh. */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->wd_cond, &ca);
    pthread_condattr_destroy(&ca);
    /* The eventfd is shared with the parent: give the child its own under
     * the same number, so the fd a user holds reports only the child's
     * losses (and the parent never sees them). */
    if (c->lost_fd >= 0)
        (void)distlock__eventfd_renew(c->lost_fd);
}

void distlock__watchdog_stop(distlock_client *c)
{
    distlock__lock(c);
    int running = c->wd_running;
    c->wd_stop = 1;
    c->wd_running = 0;
    pthread_cond_broadcast(&c->wd_cond);
    pthread_mutex_unlock(&c->mu);
    if (running)
        pthread_join(c->wd_thread, NULL);
}
