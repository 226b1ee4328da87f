/* test_wake_waiter.h -- the tests that time how soon a release wakes a
 * blocking acquire (include after test_common.h): the waiter, one
 * distlock_acquire with a wait on a thread of its own; the subscribers of
 * the key's channel on a node, to see the waiter listening before the
 * release; and the release timed from the start of its call. */
#ifndef TEST_WAKE_WAITER_H
#define TEST_WAKE_WAITER_H

#include <pthread.h>
#include <stdatomic.h>

/* One blocking acquire of key on client c. rc and got_ms are the waiter
 * thread's until done is seen set. */
typedef struct wake_waiter {
    distlock_client *c;
    const char *key;
    long ttl_ms, wait_ms;
    int rc;              /* distlock_acquire's; -99 while it waits */
    long long got_ms;    /* rh_now_ms() when it returned */
    char detail[512];    /* its distlock_last_error() (empty on DISTLOCK_OK) */
    atomic_int done;
    pthread_t th;
} wake_waiter;

/* The waiter's thread: the lock won is released at once, so the test's
 * holder (or a later waiter) is never kept waiting by it. */
static inline void *wake_waiter_main(void *p)
{
    wake_waiter *w = p;
    distlock_lock *l = NULL;
    w->rc = distlock_acquire(w->c, w->key, w->ttl_ms, w->wait_ms, 0, &l);
    w->got_ms = rh_now_ms();
    snprintf(w->detail, sizeof w->detail, "%s", w->rc == DISTLOCK_OK ? "" : distlock_last_error());
    if (l) {
        (void)distlock_release(l);
        distlock_lock_free(l);
    }
    atomic_store(&w->done, 1);
    return NULL;
}

/* Start w's thread: distlock_acquire(c, key, ttl_ms, wait_ms, 0, ...). */
static inline void wake_waiter_start(wake_waiter *w, distlock_client *c, const char *key,
                                     long ttl_ms, long wait_ms)
{
    memset(w, 0, sizeof *w);
    w->c = c;
    w->key = key;
    w->ttl_ms = ttl_ms;
    w->wait_ms = wait_ms;
    w->rc = -99;
    atomic_init(&w->done, 0);
    assert_int_equal(pthread_create(&w->th, NULL, wake_waiter_main, w), 0);
}

/* 1 once the waiter's acquire has returned (rc, got_ms, detail are then
 * set). */
static inline int wake_waiter_done(wake_waiter *w)
{
    return atomic_load(&w->done);
}

/* Wait up to within_ms for the waiter's acquire to return, observed (never
 * a sleep); joins its thread if it did. 1 if it returned. */
static inline int wake_waiter_join(wake_waiter *w, long within_ms)
{
    if (!RH_WAIT_UNTIL(wake_waiter_done(w), within_ms))
        return 0;
    assert_int_equal(pthread_join(w->th, NULL), 0);
    return 1;
}

/* Subscribers of channel (PUBSUB NUMSUB) on the node ctx is connected to,
 * -1 on an error. Takes ctx and frees it (NULL: -1), so each call passes a
 * fresh connection: rh_connect(rc, i, 0) for a harness node,
 * rh_auth_connect(port, user, pass) for a Sentinel group's data node. (A
 * cluster's shard channel: rh_rcl_shardnumsub, cluster_harness.h.) */
static inline long long channel_subscribers(redisContext *ctx, const char *channel)
{
    if (!ctx)
        return -1;
    redisReply *r = redisCommand(ctx, "PUBSUB NUMSUB %s", channel);
    redisFree(ctx);
    long long n = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? r->element[1]->integer : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

/* Lock attempts the node ctx is connected to ran (attempt_commands_in),
 * -1 on an error; takes ctx and frees it, as channel_subscribers. A test
 * that stops the node under a waiter first sees both of its attempts (the
 * first, and the one after its subscription) answered: one left on the
 * stopped node would end the wait with its error. */
static inline long long attempt_commands_on(redisContext *ctx)
{
    if (!ctx)
        return -1;
    redisReply *r = redisCommand(ctx, "INFO commandstats");
    redisFree(ctx);
    long long n = r && r->type == REDIS_REPLY_STRING ? attempt_commands_in(r) : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

/* distlock_release(l) == DISTLOCK_OK, with the time the call started in
 * *started_ms: a waiter woken by the release (its script publishes) may
 * win before the call returns here, so a wake-up is timed from the start. */
static inline int release_ok_started_at(distlock_lock *l, long long *started_ms)
{
    *started_ms = rh_now_ms();
    return distlock_release(l) == DISTLOCK_OK;
}

#endif
