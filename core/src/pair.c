/* pair.c -- the token-carrying pair, for callers that keep
 * the token themselves (the PHP compatibility functions, the CLI).
 *
 * Layer: 7 API */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"


static long ms_left(uint64_t until_us)
{
    uint64_t now = distlock__now_us();
    return until_us > now ? (long)((until_us - now) / 1000) : 0;
}

/* The checks every token-pair entry point makes (the ttl when has_ttl). */
static int check_pair(const distlock_client *c, const char *key, const char *token, int has_ttl,
                      long ttl_ms)
{
    int rc;
    distlock__clear_error();
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    if ((rc = distlock__check_key(key)) || (has_ttl && (rc = distlock__check_ttl(&c->q, ttl_ms))) ||
        (rc = distlock__check_token(token)))
        return rc;
    return DISTLOCK_OK;
}

/* The recent entry of key and token (its tag given), -1 if none; c->mu
 * held. The tag is a fast hash that anyone can make two locks share: the
 * key and token decide, or one lock's release would take the other's
 * nodes and lease, and its acquire the other's grant for its own. */
static int recent_of(const distlock_client *c, uint64_t tag, const char *key, const char *token)
{
    for (int k = 0; k < DISTLOCK__TP_RECENT; k++) {
        const char *l = c->tp_recent[k].lock;
        if (c->tp_recent[k].tag == tag && l != NULL && strcmp(l, key) == 0 &&
            strcmp(l + strlen(key) + 1, token) == 0)
            return k;  /* the only one (acquire_token) */
    }
    return -1;
}

/* Whether this client was granted the lock of key and token and its lease
 * has not ended yet: an acquire of it is then a re-acquire by its holder. */
static int held_now(distlock_client *c, uint64_t tag, const char *key, const char *token)
{
    uint64_t now = distlock__now_us();
    pthread_mutex_lock(&c->mu);
    int k = recent_of(c, tag, key, token);
    int held = k >= 0 && c->tp_recent[k].until > now;
    pthread_mutex_unlock(&c->mu);
    return held;
}

static int acquire_token(distlock_client *c, const char *key, long ttl_ms, const char *token,
                         unsigned flags, long *validity_ms, uint64_t *t0, uint64_t *t1)
{
    uint64_t until = 0;
    int rc;

    if ((rc = check_pair(c, key, token, 1, ttl_ms)) != DISTLOCK_OK)
        return rc;
    if (flags & ~DISTLOCK_STRICT)
        return distlock__fail(DISTLOCK_EINVAL, "unknown flags 0x%x (only DISTLOCK_STRICT)", flags);
    uint64_t tag = distlock__lock_tag(key, token);
    distlock__acq_req rq = { .key = key, .token = token, .ttl_ms = ttl_ms, .flags = flags,
                             .held_known = held_now(c, tag, key, token) };
    distlock__attempt att;
    rc = distlock__acquire_once(c, &rq, &att, -1);
    *t0 = att.t0_us;
    *t1 = att.t1_us;
    if (rc == DISTLOCK_OK) {
        until = att.valid_until_us;
        if (validity_ms)
            *validity_ms = ms_left(until);
        /* One entry per key and token: an acquire of one remembered
         * replaces its entry, so a release reads the latest lease whatever
         * the ring's order (an older entry after the wrap would be read
         * instead, its lease long over). */
        pthread_mutex_lock(&c->mu);
        int k = recent_of(c, tag, key, token);
        if (k < 0) {
            k = c->tp_next;
            c->tp_next = (c->tp_next + 1) % DISTLOCK__TP_RECENT;
            /* the evicted entry's block, reused (in place when it fits) */
            size_t kn = strlen(key) + 1, tn = strlen(token) + 1;
            char *l = realloc(c->tp_recent[k].lock, kn + tn);
            if (l != NULL) {
                memcpy(l, key, kn);
                memcpy(l + kn, token, tn);
            } else {  /* none: nothing remembered, the release goes to all */
                free(c->tp_recent[k].lock);
            }
            c->tp_recent[k].lock = l;
        }
        c->tp_recent[k].tag = tag;
        c->tp_recent[k].maybe = att.maybe;
        c->tp_recent[k].until = until;
        pthread_mutex_unlock(&c->mu);
    }
    return rc;
}

/* The outcome and the duration of every call are counted (stats.c). */
int distlock_acquire_token(distlock_client *c, const char *key, long ttl_ms, const char *token,
                           unsigned flags, long *validity_ms)
{
    uint64_t t0 = 0, t1 = 0;
    int rc = acquire_token(c, key, ttl_ms, token, flags, validity_ms, &t0, &t1);
    if (c && distlock__stats_on(&c->stats))
        distlock__stats_acquire(&c->stats, rc, distlock__stats_span(t0, t1));
    return rc;
}

int distlock_release_token(distlock_client *c, const char *key, const char *token)
{
    int rc = check_pair(c, key, token, 0, 0);
    if (rc != DISTLOCK_OK)
        return rc;
    /* Nodes the latest acquire of this key and token may hold (all if it
     * is not among the recent ones), and its lease (a release resent after
     * its first send ran is then recognised). */
    uint64_t tag = distlock__lock_tag(key, token), maybe = ~0ull, until = 0;
    distlock__lock(c);
    int k = recent_of(c, tag, key, token);
    if (k >= 0) {
        maybe = c->tp_recent[k].maybe;
        until = c->tp_recent[k].until;
    }
    pthread_mutex_unlock(&c->mu);
    rc = distlock__release_keytoken(c, key, token, until, 0, maybe);
    if (rc == DISTLOCK_OK) {  /* released: no longer held (held_now) */
        distlock__lock(c);
        if ((k = recent_of(c, tag, key, token)) >= 0)
            c->tp_recent[k].until = 0;
        pthread_mutex_unlock(&c->mu);
    }
    distlock__stats_inc(&c->stats, rc == DISTLOCK_OK ? DISTLOCK__ST_RELEASED
                                                     : DISTLOCK__ST_RELEASE_FAILED);
    return rc;
}

int distlock_extend_token(distlock_client *c, const char *key, const char *token, long ttl_ms,
                          long *validity_ms)
{
    uint64_t until = 0;
    int rc;
    if ((rc = check_pair(c, key, token, 1, ttl_ms)) != DISTLOCK_OK)
        return rc;
    rc = distlock__extend_keytoken(c, key, token, ttl_ms, &until);
    distlock__stats_inc(&c->stats, rc == DISTLOCK_OK ? DISTLOCK__ST_EXTENDED
                                                     : DISTLOCK__ST_EXTEND_FAILED);
    if (rc == DISTLOCK_OK && validity_ms)
        *validity_ms = ms_left(until);
    return rc;
}

