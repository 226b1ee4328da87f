/* keyset_api.c -- distlock_acquire_many(): several keys as one lock, all
 * or none (keyset.c makes one attempt), with waiting; and the accessors of
 * a lock's keys and fences.
 *
 * The handle is a lock's (handle.c): its record carries every key, so
 * release, extend, renewal (watchdog.c), lost, abandon and free cover the
 * set.
 *
 * Layer: 7 API */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MANY_FLAGS (DISTLOCK_FENCING | DISTLOCK_AUTO_RENEW)

/* Flags of a single key's acquire that a set does not take, by name. */
static const struct { unsigned bit; const char *name; } not_for_sets[] = {
    { DISTLOCK_REENTRANT, "DISTLOCK_REENTRANT" },
    { DISTLOCK_FAIR, "DISTLOCK_FAIR" },
    { DISTLOCK_SHARED, "DISTLOCK_SHARED" },
};

static int check_flags(unsigned flags)
{
    for (size_t i = 0; i < sizeof(not_for_sets) / sizeof(not_for_sets[0]); i++)
        if (flags & not_for_sets[i].bit)
            return distlock__fail(DISTLOCK_EINVAL,
                                  "%s is not for distlock_acquire_many() (it takes "
                                  "DISTLOCK_FENCING and DISTLOCK_AUTO_RENEW)",
                                  not_for_sets[i].name);
    if (flags & ~MANY_FLAGS)
        return distlock__fail(DISTLOCK_EINVAL, "unknown flags 0x%x", flags & ~MANY_FLAGS);
    return DISTLOCK_OK;
}

static int check_keys(const char *const *keys, size_t nkeys)
{
    if (keys == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "keys must not be NULL");
    if (nkeys == 0 || nkeys > DISTLOCK_KEYS_MAX)
        return distlock__fail(DISTLOCK_EINVAL, "nkeys %zu out of range 1..%d", nkeys,
                              DISTLOCK_KEYS_MAX);
    for (size_t i = 0; i < nkeys; i++) {
        if (distlock__check_key(keys[i]) != DISTLOCK_OK) {
            char *detail = distlock__error_copy();
            distlock__fail(DISTLOCK_EINVAL, "keys[%zu]: %s", i, detail ? detail : "invalid");
            free(detail);
            return DISTLOCK_EINVAL;
        }
    }
    /* n <= 256: the pairs are few enough to compare them all */
    for (size_t i = 0; i < nkeys; i++)
        for (size_t j = i + 1; j < nkeys; j++)
            if (strcmp(keys[i], keys[j]) == 0)
                return distlock__fail(DISTLOCK_EINVAL,
                                      "key '%.200s' appears twice (keys[%zu] and keys[%zu])",
                                      keys[i], i, j);
    return DISTLOCK_OK;
}

/* With DISTLOCK_FENCING key i's fence counter is the key {key}:fence
 * (protocol.c): a set naming that counter as one of its keys too would
 * write its token over the counter, and its release would delete it, so
 * key i's next fence would start again from 1. Refused. Only keys ending
 * in the suffix are compared (the side key is made on the heap: the entry
 * point's stack stays small). */
static int check_fence_keys(const char *const *keys, size_t nkeys)
{
    const size_t sl = strlen(DISTLOCK__FENCE_SUFFIX);
    char *side = NULL;
    int rc = DISTLOCK_OK;
    for (size_t j = 0; j < nkeys && rc == DISTLOCK_OK; j++) {
        size_t len = strlen(keys[j]);
        if (len <= sl || memcmp(keys[j] + len - sl, DISTLOCK__FENCE_SUFFIX, sl) != 0)
            continue;
        if (side == NULL && (side = malloc(DISTLOCK__SIDEKEY_MAX)) == NULL)
            return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        for (size_t i = 0; i < nkeys; i++) {
            distlock__sidekey(side, keys[i], DISTLOCK__FENCE_SUFFIX);
            if (strcmp(side, keys[j]) == 0) {
                rc = distlock__fail(DISTLOCK_EINVAL,
                                    "keys[%zu] '%.200s' is the fence counter of keys[%zu] "
                                    "'%.200s': a fenced set cannot also lock it", j, keys[j],
                                    i, keys[i]);
                break;
            }
        }
    }
    free(side);
    return rc;
}

static int cancelled(const char *key, uint64_t t0_us, const char *what)
{
    long ms = (long)((distlock__now_us() - t0_us) / 1000u);
    return distlock__fail(DISTLOCK_ECANCELED,
                          "waiting for the keys of '%s' cancelled after %ld ms%s", key, ms, what);
}

/* As handle.c's acquire_wait for one key, minus the fair queue: every
 * attempt has a fresh token (in `token`, 33 bytes) and holds nothing once
 * it lost (keyset.c undoes it), so a waiter never waits holding keys, and
 * two sets that overlap cannot deadlock. The wait is on the release
 * channel of the key that refused the latest attempt (re-subscribed when
 * another key refuses), with the backoff re-checks of a lock's waiter. */
static int many_wait(distlock_client *c, distlock__many_req *rq, char *token, long wait_ms,
                     distlock_cancel *cancel, distlock__many_attempt *att)
{
    unsigned gen = distlock__cancel_gen(c);
    const char *key0 = rq->keys[0];
    int rc = distlock__acquire_many_once(c, rq, att);
    uint64_t first_t0 = att->t0_us, now0 = distlock__now_us(), deadline = UINT64_MAX;
    if (distlock__cancel_fired(cancel)) {
        if (rc == DISTLOCK_OK)
            (void)distlock__release_many(c, rq->keys, rq->nkeys, token, att->valid_until_us,
                                         att->set_id, att->maybe, 0, NULL);
        return distlock__fail(DISTLOCK_ECANCELED, "acquiring the keys of '%s' cancelled while "
                              "its first attempt was out%s", key0, rc == DISTLOCK_OK ?
                              "; the keys won meanwhile were released" : "");
    }
    int late = rc == DISTLOCK_ETIMEDOUT;
    if ((rc != DISTLOCK_NOTACQUIRED && !late) || wait_ms == 0)
        return rc;

    if (wait_ms != DISTLOCK_WAIT_FOREVER && (uint64_t)wait_ms < (UINT64_MAX - now0) / 1000u)
        deadline = now0 + (uint64_t)wait_ms * 1000u;
    char *ch = malloc(DISTLOCK__SIDEKEY_MAX);
    if (ch == NULL)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    size_t watching = late ? 0 : att->held_at;
    distlock__channel_name(ch, rq->keys[watching]);
    distlock__waiter w;
    memset(&w, 0, sizeof(w));
    w.channel = ch;
    distlock__sleeper_start(c, &w.sl, gen, cancel);
    int sub = distlock__waiter_add(c, &w);
    int subscribed = sub == DISTLOCK_OK;
    long backoff = c->retry_min_ms;
    int woke = 0;  /* the last wait ended by a wake (a release), not looked at yet */
    if (sub == DISTLOCK_ECANCELED) {
        rc = cancelled(key0, now0, "");
        goto out;
    }
    /* Subscribed first, then tried again: a release between the last try
     * and the subscription is not missed. */
    for (;;) {
        if (distlock__cancelled(c, &w.sl, 0)) {
            rc = cancelled(key0, now0, "");
            break;
        }
        woke = 0;
        if ((rc = distlock_token_generate(token, 33)) != DISTLOCK_OK)
            break;
        rc = distlock__acquire_many_once(c, rq, att);
        if (rc == DISTLOCK_OK && distlock__cancelled(c, &w.sl, 1)) {
            (void)distlock__release_many(c, rq->keys, rq->nkeys, token, att->valid_until_us,
                                         att->set_id, att->maybe, 0, NULL);
            rc = cancelled(key0, now0, "; the keys won meanwhile were released");
            break;
        }
        if (rc != DISTLOCK_OK && rc != DISTLOCK_NOTACQUIRED && distlock__cancelled(c, &w.sl, 0)) {
            rc = cancelled(key0, now0, "");
            break;
        }
        if (rc == DISTLOCK_ETIMEDOUT ? late++ > 0 : rc != DISTLOCK_NOTACQUIRED)
            break;
        if (rc == DISTLOCK_NOTACQUIRED)
            late = 0;
        uint64_t now = distlock__now_us();
        if (now >= deadline) {
            if (rc == DISTLOCK_NOTACQUIRED)
                distlock__fail(DISTLOCK_NOTACQUIRED, "'%s' (a key of the set) still held by "
                               "another owner after %ld ms", rq->keys[att->held_at], wait_ms);
            break;
        }
        if (rc == DISTLOCK_NOTACQUIRED && att->held_at != watching) {
            /* another key refused this time: wait for its release instead
             * (subscribed first, then tried again, as above) */
            if (subscribed) {
                w.pass_wake = 1;  /* a release of the old key woke it: the next hears it */
                distlock__waiter_remove(c, &w);
                w.pass_wake = 0;
            }
            watching = att->held_at;
            distlock__channel_name(ch, rq->keys[watching]);
            w.notified = 0;
            sub = distlock__waiter_add(c, &w);
            subscribed = sub == DISTLOCK_OK;
            if (sub == DISTLOCK_ECANCELED) {
                rc = cancelled(key0, now0, "");
                break;
            }
            continue;
        }
        int r = distlock__wait_recheck(c, &w, att->holder_pttl, deadline, subscribed, &backoff);
        if (r == DISTLOCK_ECANCELED) {
            rc = cancelled(key0, now0, "");
            break;
        }
        woke = r == 1;
    }
out:
    if (subscribed) {
        /* a wake it did not act on goes on (wait.c): one pending, or the
         * one that ended its last wait when a cancel came with it */
        w.pass_wake = rc == DISTLOCK_OK ? 0 : woke ? 2 : 1;
        distlock__waiter_remove(c, &w);
    }
    distlock__sleeper_end(c, &w.sl);
    free(ch);
    att->t0_us = first_t0;
    return rc;
}

/* The record of a set: every key copied, fences when asked for. */
static distlock__held *new_record(distlock_client *c, const char *const *keys, size_t nkeys,
                                  long ttl_ms, unsigned flags)
{
    distlock__held *h = distlock__zalloc(sizeof(*h));
    if (h == NULL)
        return NULL;
    h->nkeys = nkeys;
    h->keys = calloc(nkeys, sizeof(*h->keys));
    h->key = strdup(keys[0]);
    if ((flags & DISTLOCK_FENCING) && (h->fences = malloc(nkeys * sizeof(*h->fences))) == NULL)
        h->key = (free(h->key), NULL);
    int ok = h->keys != NULL && h->key != NULL;
    for (size_t i = 0; ok && i < nkeys; i++)
        ok = (h->keys[i] = strdup(keys[i])) != NULL;
    if (!ok) {
        distlock__held_free(h);
        return NULL;
    }
    h->client = c;
    h->ttl_ms = ttl_ms;
    h->flags = flags;
    h->fence = -1;
    h->pid = distlock__getpid();
    h->count = 1;
    return h;
}

static int acquire_many(distlock_client *c, const char *const *keys, size_t nkeys, long ttl_ms,
                        long wait_ms, unsigned flags, const distlock_acquire_args *args,
                        distlock_lock **out, uint64_t *t_start, uint64_t *t_end)
{
    char tok[33];
    int rc;

    distlock__clear_error();
    if (out)
        *out = NULL;
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    if (out == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "out must not be NULL");
    const char *token;
    if ((rc = distlock__args_token(args, &token)) != DISTLOCK_OK)
        return rc;
    /* one token covers every key of the set; a caller's would be a second
     * name for a lock that is not one key (distlock_lock_restore() cannot
     * give it back) */
    if (token)
        return distlock__fail(DISTLOCK_EINVAL, "args->token is for a plain lock: "
                              "distlock_acquire_many() takes no caller's token");
    if (args && args->owner)
        return distlock__fail(DISTLOCK_EINVAL, "an owner id is for DISTLOCK_REENTRANT, which "
                              "distlock_acquire_many() does not take");
    distlock_cancel *cancel = args ? args->cancel : NULL;
    if ((rc = check_keys(keys, nkeys)) || (rc = distlock__check_ttl(&c->q, ttl_ms)) ||
        (rc = check_flags(flags)) ||
        ((flags & DISTLOCK_FENCING) && (rc = check_fence_keys(keys, nkeys))))
        return rc;
    if (wait_ms < 0 && wait_ms != DISTLOCK_WAIT_FOREVER)
        return distlock__fail(DISTLOCK_EINVAL, "wait_ms %ld: use >= 0 or DISTLOCK_WAIT_FOREVER",
                              wait_ms);
    if (distlock__cancel_fired(cancel))
        return distlock__fail(DISTLOCK_ECANCELED, "acquiring the keys of '%s' cancelled before "
                              "it started; nothing was sent", keys[0]);
    if ((rc = distlock_token_generate(tok, sizeof(tok))) != DISTLOCK_OK)
        return rc;
    distlock__held *h = new_record(c, keys, nkeys, ttl_ms, flags);
    distlock_lock *l = distlock__zalloc(sizeof(*l));
    if (h == NULL || l == NULL) {
        if (h)
            distlock__held_free(h);
        free(l);
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    }

    distlock__many_req rq = { .keys = keys, .nkeys = nkeys, .token = tok, .ttl_ms = ttl_ms,
                              .flags = flags };
    distlock__many_attempt att = { .fences = h->fences };
    rc = many_wait(c, &rq, tok, wait_ms, cancel, &att);
    *t_start = att.t0_us;
    *t_end = att.t1_us;
    if (rc == DISTLOCK_OK && (h->token = strdup(tok)) == NULL) {
        (void)distlock__release_many(c, keys, nkeys, tok, att.valid_until_us, att.set_id,
                                     att.maybe, 0, NULL);
        rc = distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    }
    if (rc != DISTLOCK_OK) {
        distlock__held_free(h);
        free(l);
        return rc;
    }
    h->set_pref = att.set_id;
    h->maybe = att.maybe;
    h->fence = h->fences ? h->fences[0] : -1;  /* distlock_lock_fence(): the first key's */
    atomic_store(&h->valid_until_us, att.valid_until_us);
    h->acquired_us = att.t1_us;
    l->h = h;
    pthread_mutex_lock(&c->mu);
    h->next = c->held;
    c->held = h;
    h->refs = 1;
    if (flags & DISTLOCK_AUTO_RENEW) {
        h->renew_at_us = distlock__renew_at(&c->q, att.valid_until_us, att.t1_us, ttl_ms);
        if ((rc = distlock__watchdog_start(c)) != DISTLOCK_OK) {
            pthread_mutex_unlock(&c->mu);
            char *detail = distlock__error_copy();
            distlock_lock_free(l);
            distlock__fail(rc, "%s", detail ? detail : "");
            free(detail);
            return rc;
        }
        pthread_cond_broadcast(&c->wd_cond);
    }
    pthread_mutex_unlock(&c->mu);
    *out = l;
    return DISTLOCK_OK;
}

/* Counted with the acquires (stats.c): a set is one acquire. */
int distlock_acquire_many(distlock_client *c, const char *const *keys, size_t nkeys, long ttl_ms,
                          long wait_ms, unsigned flags, const distlock_acquire_args *args,
                          distlock_lock **out)
{
    uint64_t t0 = 0, t1 = 0;
    int rc = acquire_many(c, keys, nkeys, ttl_ms, wait_ms, flags, args, out, &t0, &t1);
    if (c && distlock__stats_on(&c->stats))
        distlock__stats_acquire(&c->stats, rc, distlock__stats_span(t0, t1));
    return rc;
}

size_t distlock_lock_key_count(const distlock_lock *l)
{
    if (l == NULL)
        return 0;
    return l->h->keys ? l->h->nkeys : 1;
}

const char *distlock_lock_key_at(const distlock_lock *l, size_t i)
{
    if (l == NULL || i >= distlock_lock_key_count(l))
        return NULL;
    return l->h->keys ? l->h->keys[i] : l->h->key;
}

int64_t distlock_lock_fence_at(const distlock_lock *l, size_t i)
{
    if (l == NULL || i >= distlock_lock_key_count(l))
        return -1;
    return l->h->fences ? l->h->fences[i] : (l->h->keys ? -1 : l->h->fence);
}
