/* acquire_api.c -- the blocking acquires (distlock_acquire,
 * distlock_acquire_with, distlock_semaphore_acquire): checks, reentrancy,
 * the first attempt on the calling thread, and a wait that goes on as an
 * operation of a multi (multi.c), the one driver of the wait rules.
 *
 * The first attempt is the hot path: an uncontended acquire is one
 * attempt (distlock__acquire_once: a run driven by a poll() loop on this
 * thread) and nothing else, no multi made. Only an acquire that must wait
 * (another owner holds the key, or a grant came too late within a wait
 * budget), a waiting writer that won but may have left its intent where it
 * did not grant (distlock__won_writer_leaves: it leaves the registry there
 * first), or whose own cancel fired while that attempt was out hands the
 * attempt's outcome to distlock__acquire_wait (multi.c), which finishes the
 * call there, on this thread, with the same rules as a multi's acquire.
 * A call that finds other calls of the client waiting for its key with
 * local turns (wait.c) sends no first attempt: it goes to that wait at
 * once, behind them.
 *
 * Layer: 7 API */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void thread_owner(char *buf, size_t n)
{
    snprintf(buf, n, "thread:%d:%lu", (int)distlock__getpid(), (unsigned long)pthread_self());
}

/* *t_start, *t_end: when the first attempt went out and when the grant was
 * checked (distlock__attempt), 0 if none (the metrics' wait; the hold time
 * starts at *t_end). */
/* Inlined into each entry point: one frame less on the deepest path of the
 * 4 KB stack budget (scripts/stack-usage.py). */
static inline __attribute__((always_inline))
int acquire_with(distlock_client *c, const char *key, long permits, long ttl_ms,
                        long wait_ms, unsigned flags, const distlock_acquire_args *args,
                        distlock_lock **out, uint64_t *t_start, uint64_t *t_end)
{
    char tid[48];  /* "thread:PID:TID": 40 bytes at most */
    const char *token;  /* args->token: the caller's, else NULL (a fresh one) */
    int rc;

    if ((rc = distlock__acquire_check(c, key, permits, ttl_ms, wait_ms, flags, args, out,
                                      &token)) != DISTLOCK_OK)
        return rc;
    const char *owner = args ? args->owner : NULL;
    distlock_cancel *cancel = args ? args->cancel : NULL;

    if (flags & DISTLOCK_REENTRANT) {
        if (owner == NULL) {
            thread_owner(tid, sizeof(tid));
            owner = tid;
        }
        if ((rc = distlock__reacquire(c, key, ttl_ms, flags, owner, cancel, out)) != 1)
            return rc;
    }

    distlock_lock *l;
    distlock__held *h = distlock__held_new(c, key, token, permits, ttl_ms, flags, owner,
                                           (flags & DISTLOCK_REENTRANT) && owner == tid, &l,
                                           &rc);
    if (h == NULL)
        return rc;

    unsigned gen = distlock__cancel_gen(c);  /* client cancels from now on concern this call */
    distlock__acq_req rq;
    distlock__attempt att;
    if ((rc = distlock__acq_req_init(c, h, token != NULL, wait_ms, &rq)) != DISTLOCK_OK) {
        distlock__held_free(h);  /* nothing was sent */
        free(l);
        return rc;
    }
    if (wait_ms != 0 && !rq.fair && !distlock__cancel_fired(cancel) &&
        distlock__waiter_turn_to_join(c, key, distlock__turn_group(&rq))) {
        /* Other calls of this client wait for this key, one of them with
         * the turn (wait.c): this one queues behind them, its first attempt
         * being the re-check its turn brings, so arrivals add nothing on
         * the wire and take no key that frees ahead of older waiters. */
        memset(&att, 0, sizeof(att));
        att.t0_us = distlock__now_us();  /* the call's wait starts here */
        rc = distlock__fail(DISTLOCK_NOTACQUIRED, "'%s' not tried yet: queued behind this "
                            "client's waiters of the key", key);
    } else {
        rc = distlock__acquire_once(c, &rq, &att, distlock__cancel_fd(cancel));
    }
    if (distlock__cancel_fired(cancel) || !distlock__first_attempt_ends(rc, wait_ms) ||
        distlock__won_writer_leaves(rc, &rq, &att))
        rc = distlock__acquire_wait(c, h, token != NULL, wait_ms, cancel, gen, &rq, rc, &att);
    *t_start = att.t0_us;
    *t_end = att.t1_us;
    if (rc != DISTLOCK_OK) {
        distlock__held_free(h);
        free(l);
        return rc;
    }
    return distlock__held_register(c, h, l, &att, out);
}

/* The outcome and the duration of every call are counted (stats.c). */
int distlock_acquire_with(distlock_client *c, const char *key, long ttl_ms, long wait_ms,
                          unsigned flags, const distlock_acquire_args *args, distlock_lock **out)
{
    uint64_t t0 = 0, t1 = 0;
    int rc = acquire_with(c, key, 0, ttl_ms, wait_ms, flags, args, out, &t0, &t1);
    if (c && distlock__stats_on(&c->stats))
        distlock__stats_acquire(&c->stats, rc, distlock__stats_span(t0, t1));
    return rc;
}

int distlock_semaphore_acquire(distlock_client *c, const char *key, long permits, long ttl_ms,
                               long wait_ms, unsigned flags, const distlock_acquire_args *args,
                               distlock_lock **out)
{
    uint64_t t0 = 0, t1 = 0;
    if (permits < 1 || permits > DISTLOCK_PERMITS_MAX) {
        distlock__clear_error();
        if (out)
            *out = NULL;
        return distlock__fail(DISTLOCK_EINVAL, "permits %ld: use 1..%ld (DISTLOCK_PERMITS_MAX)",
                              permits, (long)DISTLOCK_PERMITS_MAX);
    }
    int rc = acquire_with(c, key, permits, ttl_ms, wait_ms, flags, args, out, &t0, &t1);
    if (c && distlock__stats_on(&c->stats))
        distlock__stats_acquire(&c->stats, rc, distlock__stats_span(t0, t1));
    return rc;
}

int distlock_acquire(distlock_client *c, const char *key, long ttl_ms, long wait_ms,
                     unsigned flags, distlock_lock **out)
{
    return distlock_acquire_with(c, key, ttl_ms, wait_ms, flags, NULL, out);
}
