/* watchdog.c -- auto-renewal. One background thread per client (started by
 * the first DISTLOCK_AUTO_RENEW lock) renews each such lock at ttl/3. All
 * renewals due together go to every node in one batched script call, so
 * keeping many locks alive costs one round trip per period, not one per
 * lock. A Redis Cluster node gets one call per master instead: the keys
 * its slot map puts on that master, as arguments of S_EXTEND_MULTI (keys
 * declared of several slots would be CROSSSLOT); a key the master no longer
 * serves (moved, or migrating and gone) answers -1 and is sent again in
 * the same pass by its own slot (S_EXTEND, routed like any call: MOVED and
 * ASK followed, the map refreshed), so a moved key is renewed on its new
 * master within the period. The calls of all nodes go out in rounds, round
 * r carrying each node's r-th call (Redlock over several clusters).
 * A lock found not ours on enough nodes, or not renewable on a quorum
 * before its validity ends, is marked lost and its owner told: flag,
 * callback, and the client's pollable eventfd.
 *
 * The lease clock is a second thread, which sends nothing: it marks a lock
 * lost the moment its validity ends with no renewal confirmed, also while
 * the renewal thread is still waiting for that renewal's replies (slow or
 * silent servers, a long command timeout): the owner must not go on past
 * the lease it can vouch for.
 *
 * Layer: 6 background */
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

/* Keys of a record: a set (distlock_acquire_many) renews each of them. */
static size_t held_keys(const distlock__held *h)
{
    return h->keys ? h->nkeys : 1;
}

typedef struct due {
    distlock__held *h;
    char *key, *token;
    char ttl[DISTLOCK__NUM_LEN];
    long ttl_ms;
    unsigned slot;   /* Redis Cluster hash slot of key */
    const char *okey;  /* its owner metadata key (owner info on) */
} due;

static void abs_deadline(struct timespec *ts, uint64_t until_us)
{
    ts->tv_sec = (time_t)(until_us / 1000000u);
    ts->tv_nsec = (long)(until_us % 1000000u) * 1000;
}

/* One node's share of a pass: the locks still to renew there, and the
 * script call of the current round. A Redis Cluster node first gets one
 * call per master (S_EXTEND_MULTI with the keys its slot map puts there);
 * the keys a master answered "not served here" (moved, migrating) then go
 * by their own slot (S_EXTEND with declared keys, routed like any call:
 * it follows MOVED / ASK and refreshes the map), still in this pass. */
typedef struct share {
    int *todo, ntodo;    /* indices into d[] still to send */
    int *again, nagain;  /* answered -1 by a master: to resend by slot */
    int *grp, ng;        /* the current round's call: these locks */
    int by_slot;         /* second phase: one call per slot */
    const char **argv;
    size_t *len;
    distlock__call call;
} share;

/* What a call of a pass carries (next_group). */
enum { GROUP_NONE, GROUP_DECLARED, GROUP_MASTER };

/* The locks of node i's next call, in sh->grp: GROUP_MASTER (keys of many
 * slots, one cluster master: S_EXTEND_MULTI), GROUP_DECLARED (all locks of
 * a plain node, or one slot's: S_EXTEND), or GROUP_NONE when none is left. */
static int next_group(distlock_client *c, int i, share *sh, const due *d)
{
    if (sh->ntodo == 0 && sh->nagain > 0 && !sh->by_slot) {
        memcpy(sh->todo, sh->again, sizeof(int) * (size_t)sh->nagain);
        sh->ntodo = sh->nagain, sh->nagain = 0, sh->by_slot = 1;
    }
    sh->ng = 0;
    if (sh->ntodo == 0)
        return GROUP_NONE;
    int cluster = c->tp.kind[i]->keys_move, left = 0;  /* keys by slot: a master each */
    unsigned slot0 = d[sh->todo[0]].slot;
    int m0 = cluster && !sh->by_slot ? distlock__cl_slot_master(&c->tp, i, slot0) : -1;
    for (int j = 0; j < sh->ntodo; j++) {
        int k = sh->todo[j];
        int mine = !cluster || (m0 >= 0 ? distlock__cl_slot_master(&c->tp, i, d[k].slot) == m0
                                        : d[k].slot == slot0);
        if (mine)
            sh->grp[sh->ng++] = k;
        else
            sh->todo[left++] = k;
    }
    sh->ntodo = left;
    return m0 >= 0 ? GROUP_MASTER : GROUP_DECLARED;
}

/* Fill sh->call for the locks in sh->grp (kind: next_group's answer). */
static void build_call(const distlock_client *c, share *sh, const due *d, int ow, int kind)
{
    int g = sh->ng, a = 0;
    if (kind == GROUP_MASTER) {
        /* KEYS[1] routes it; ARGV: ow, then key token ttl [owner] per lock */
        sh->argv[a++] = d[sh->grp[0]].key;
        sh->argv[a++] = ow ? "1" : "0";
        for (int j = 0; j < g; j++) {
            const due *x = &d[sh->grp[j]];
            sh->argv[a++] = x->key, sh->argv[a++] = x->token, sh->argv[a++] = x->ttl;
            if (ow)
                sh->argv[a++] = x->okey;
        }
        sh->call = (distlock__call){ .script = DISTLOCK__S_EXTEND_MULTI, .nkeys = 1 };
    } else {
        /* KEYS: k1..kg [o1..og]; ARGV: token ttl per lock */
        for (int j = 0; j < g; j++)
            sh->argv[a++] = d[sh->grp[j]].key;
        for (int j = 0; ow && j < g; j++)
            sh->argv[a++] = d[sh->grp[j]].okey;
        int nk = a;
        for (int j = 0; j < g; j++)
            sh->argv[a++] = d[sh->grp[j]].token, sh->argv[a++] = d[sh->grp[j]].ttl;
        sh->call = (distlock__call){ .script = DISTLOCK__S_EXTEND, .nkeys = nk };
    }
    for (int j = 0; j < a; j++)
        sh->len[j] = strlen(sh->argv[j]);
    /* no tag: a batch covers many locks; the records' `renewing` flag keeps
     * it apart from extends of the same lock */
    sh->call.argc = a, sh->call.argv = sh->argv, sh->call.argvlen = sh->len;
    /* Renewals are extends: with WAIT, a node whose replicas did not
     * acknowledge the batch counts for none of its locks (below). */
    distlock__set_wait(c, &sh->call);
}

/* Count node i's answer to its call in ok[] / no[]; -1 (not served by
 * that master) puts the lock in sh->again. */
static void take_reply(const distlock__result *r, share *sh, int *ok, int *no)
{
    const redisReply *x = r->state == DISTLOCK__R_DONE ? r->reply : NULL;
    if (x == NULL || x->type != REDIS_REPLY_ARRAY || x->elements != (size_t)sh->ng)
        return;
    /* not acknowledged by enough replicas: neither ok nor no */
    int short_wait = r->wait_n > 0 && r->acked < r->wait_n;
    for (int j = 0; j < sh->ng; j++) {
        int k = sh->grp[j];
        if (x->element[j]->type != REDIS_REPLY_INTEGER)
            continue;
        long long v = x->element[j]->integer;
        if (v < 0 && !sh->by_slot)
            sh->again[sh->nagain++] = k;  /* untouched: WAIT or not */
        else if (short_wait || v < 0)
            continue;
        else if (v == 1)
            ok[k]++;
        else
            no[k]++;
    }
}

/* Renew d[0..m) on every node; fills ok[] with the number of nodes that
 * confirmed each, no[] with those that said it is not ours. Rounds: round
 * r carries each node's r-th call (a plain or Sentinel node has one, a
 * cluster node one per master, plus one per slot of moved keys), all
 * nodes in parallel. */
static void renew_all(distlock_client *c, due *d, int m, int *ok, int *no)
{
    /* owner metadata on: each lock's owner key is renewed with it */
    int ow = atomic_load_explicit(&c->owner_info, memory_order_relaxed) ? 1 : 0;
    int n = c->n, width = 2 + m * (3 + ow);
    share *sh = calloc((size_t)n, sizeof(*sh));
    int *ix = calloc((size_t)n * 3 * (size_t)m, sizeof(int));
    const char **argv = calloc((size_t)n * (size_t)width, sizeof(*argv));
    size_t *len = calloc((size_t)n * (size_t)width, sizeof(*len));
    char (*okeys)[DISTLOCK__SIDEKEY_MAX] = ow ? calloc((size_t)m, sizeof(*okeys)) : NULL;
    distlock__connset *cs = distlock__checkout(c);

    memset(ok, 0, sizeof(int) * (size_t)m);
    memset(no, 0, sizeof(int) * (size_t)m);
    if (!sh || !ix || !argv || !len || !cs || (ow && !okeys))
        goto out;
    for (int k = 0; k < m; k++) {
        d[k].slot = c->tp.cl ? distlock__key_slot(d[k].key, strlen(d[k].key)) : 0;
        if (ow) {
            distlock__sidekey(okeys[k], d[k].key, DISTLOCK__OWNER_SUFFIX);
            d[k].okey = okeys[k];
        }
    }
    for (int i = 0; i < n; i++) {
        sh[i].todo = ix + (size_t)i * 3 * (size_t)m;
        sh[i].again = sh[i].todo + m;
        sh[i].grp = sh[i].again + m;
        sh[i].argv = argv + (size_t)i * (size_t)width;
        sh[i].len = len + (size_t)i * (size_t)width;
        for (int k = 0; k < m; k++)
            sh[i].todo[k] = k;
        sh[i].ntodo = m;
    }
    distlock__result *res = cs->res_a;
    const distlock__call **calls = cs->calls_a;
    for (;;) {
        int any = 0;
        for (int i = 0; i < n; i++) {
            int kind = next_group(c, i, &sh[i], d);
            calls[i] = NULL;
            if (kind != GROUP_NONE) {
                build_call(c, &sh[i], d, ow, kind);
                calls[i] = &sh[i].call;
                any = 1;
            }
        }
        if (!any)
            break;
        distlock__round(&c->tp, cs, calls, res, NULL, NULL);
        for (int i = 0; i < n; i++)
            if (calls[i])
                take_reply(&res[i], &sh[i], ok, no);
        distlock__round_clear(res, n);
    }
out:
    distlock__checkin(c, cs);
    free(sh);
    free(ix);
    free(argv);
    free(len);
    free(okeys);
}

typedef struct lost_call { distlock__held *h; distlock_lost_fn fn; distlock_lock *l; void *arg; } lost_call;

static void *watchdog_main(void *arg)
{
    distlock_client *c = arg;
    pthread_setname_np(pthread_self(), "distlock-renew");  /* as ps -T and gdb show it */
    pthread_mutex_lock(&c->mu);
    while (!c->wd_stop) {
        uint64_t now = distlock__now_us(), next = UINT64_MAX;
        int m = 0;
        for (distlock__held *h = c->held; h; h = h->next) {
            if (!renewable(c, h))
                continue;
            if (renewal_due(h, now))
                m += (int)held_keys(h);
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
            /* a set's keys go in one batch (the next pass takes a set
             * that no longer fits) */
            int nk = (int)held_keys(h);
            if (k + nk > m)
                continue;
            h->refs++;  /* keep it alive while we work unlocked */
            h->renewing = 1;
            h->inflight_until_us = distlock__valid_until(&c->q, now, h->ttl_ms);
            for (int j = 0; j < nk; j++, k++) {
                d[k].h = h;
                d[k].key = h->keys ? h->keys[j] : h->key;
                d[k].token = h->token;
                d[k].ttl_ms = h->ttl_ms;
                snprintf(d[k].ttl, sizeof(d[k].ttl), "%ld", h->ttl_ms);
            }
        }
        m = k;
        pthread_mutex_unlock(&c->mu);

        uint64_t t0 = distlock__now_us();
        renew_all(c, d, m, ok, no);
        uint64_t t1 = distlock__now_us();

        pthread_mutex_lock(&c->mu);
        int nl = 0;
        for (k = 0; k < m; k += (int)held_keys(d[k].h)) {
            distlock__held *h = d[k].h;
            h->renewing = 0;
            distlock__renewal_ended(h);  /* a multi's extend waiting for it goes */
            if (h->released || atomic_load(&h->lost))
                continue;
            /* A set is one lease: renewed when every key is renewed on a
             * quorum, gone when any key is (each key is a lock, and the
             * set is held only while all of them are). */
            for (int j = 1; j < (int)held_keys(h); j++) {
                if (ok[k + j] < ok[k])
                    ok[k] = ok[k + j];
                if (no[k + j] > no[k])
                    no[k] = no[k + j];
            }
            uint64_t until = distlock__valid_until(&c->q, t0, d[k].ttl_ms);
            uint64_t valid = atomic_load(&h->valid_until_us);
            /* a semaphore permit needs more grants than the quorum */
            int need = h->quorum > 0 ? h->quorum : c->quorum;
            if (ok[k] >= need && t1 < until) {
                atomic_store(&h->valid_until_us, until);
                /* from the send (t0, in until), not from the confirmation */
                h->renew_at_us = distlock__renew_at(&c->q, until, t1, d[k].ttl_ms);
                h->retry_ms = 0;
                distlock__stats_inc(&c->stats, DISTLOCK__ST_RENEWED);
                continue;
            }
            distlock__stats_inc(&c->stats, DISTLOCK__ST_RENEW_FAILED);
            int gone = no[k] > c->n - need;
            if (gone || t1 >= valid) {
                if (distlock__mark_lost(h, gone ? DISTLOCK__LOST_GONE
                                                : DISTLOCK__LOST_UNCONFIRMED) &&
                    h->lost_fn) {
                    h->cb_running = 1;  /* distlock_lock_free waits for it */
                    h->cb_thread = pthread_self();
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
        for (k = 0; k < m;) {
            distlock__held *h = d[k].h;
            k += (int)held_keys(h);
            distlock__held_unref_locked(c, h);
        }
        free(d), free(ok), free(no), free(lc);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* The lease clock (see the top of this file). It wakes at the earliest
 * end of validity among the auto-renewed locks (the renewal thread and
 * extends broadcast wd_cond when they move one), and marks lost every lock
 * whose validity has ended: a renewal confirmed in time has moved it, so
 * one that ended was not renewed in time. A renewal still on the wire
 * holds the verdict back only until the validity it would give (from its
 * send) ends too: past that, whatever its replies say, it is too late. */
static void *lease_clock_main(void *arg)
{
    distlock_client *c = arg;
    pthread_setname_np(pthread_self(), "distlock-leases");  /* as ps -T and gdb show it */
    pthread_mutex_lock(&c->mu);
    while (!c->wd_stop) {
        uint64_t now = distlock__now_us(), next = UINT64_MAX;
        distlock__held *h, *ended = NULL;
        for (h = c->held; h; h = h->next) {
            if (!(h->flags & DISTLOCK_AUTO_RENEW) || h->released || atomic_load(&h->lost) ||
                h->pid != c->pid || h->cb_running)
                continue;
            uint64_t v = atomic_load(&h->valid_until_us);
            /* A renewal (or extend) sent before the validity ended may still
             * be confirmed by a quorum: its validity counts from its send, so
             * until that later end the lock may well be held (a node that
             * does not answer holds the round back, not the lease). */
            if (h->renewing && h->inflight_until_us > v)
                v = h->inflight_until_us;
            if (v <= now) {
                ended = h;
                break;
            }
            if (v < next)
                next = v;
        }
        if (ended == NULL) {
            if (next == UINT64_MAX) {
                pthread_cond_wait(&c->wd_cond, &c->mu);
            } else {
                struct timespec ts;
                abs_deadline(&ts, next);
                pthread_cond_timedwait(&c->wd_cond, &c->mu, &ts);
            }
            continue;
        }
        /* One at a time: its callback runs unlocked, and the list may
         * change meanwhile, so it is walked again after. */
        if (!distlock__mark_lost(ended, DISTLOCK__LOST_UNCONFIRMED) || ended->lost_fn == NULL)
            continue;
        lost_call lc = { ended, ended->lost_fn, ended->lost_handle, ended->lost_arg };
        ended->refs++;
        ended->cb_running = 1;  /* distlock_lock_free waits for it */
        ended->cb_thread = pthread_self();
        pthread_cond_broadcast(&c->wd_cond);
        pthread_mutex_unlock(&c->mu);
        lc.fn(lc.l, lc.arg);
        pthread_mutex_lock(&c->mu);
        ended->cb_running = 0;
        pthread_cond_broadcast(&c->wd_cond);
        distlock__held_unref_locked(c, ended);
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
    e = distlock__thread_create(&c->wd_clock, NULL, lease_clock_main, c);
    if (e != 0) {
        /* Without it a silent server's round delays the loss until its
         * timeout: refuse, as for the renewal thread. */
        c->wd_stop = 1;
        pthread_cond_broadcast(&c->wd_cond);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->wd_thread, NULL);
        pthread_mutex_lock(&c->mu);
        c->wd_running = 0;
        c->wd_stop = 0;
        return distlock__fail(DISTLOCK_ESYS, "cannot start the lease clock thread: %s",
                              strerror(e));
    }
    c->wd_clock_running = 1;
    return DISTLOCK_OK;
}

void distlock__watchdog_after_fork(distlock_client *c)
{
    pthread_condattr_t ca;

    c->wd_running = 0;
    c->wd_clock_running = 0;
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
    int running = c->wd_running, clock = c->wd_clock_running;
    c->wd_stop = 1;
    c->wd_running = 0;
    c->wd_clock_running = 0;
    pthread_cond_broadcast(&c->wd_cond);
    pthread_mutex_unlock(&c->mu);
    if (running)
        pthread_join(c->wd_thread, NULL);
    if (clock)
        pthread_join(c->wd_clock, NULL);
}
