/* test_sentinel_calls.h -- what the tests of calls out on a Sentinel node's
 * master while it fails over share (include after test_common.h and
 * harness/sentinel_harness.h): the call under test on a thread of its own,
 * so that the test can pause masters and ask for failovers meanwhile; the
 * client, its connection and its sentinel subscriptions made first; and
 * looks at the sentinels and data nodes. */
#ifndef TEST_SENTINEL_CALLS_H
#define TEST_SENTINEL_CALLS_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

enum { SC_ACQUIRE, SC_RELEASE, SC_EXTEND };

/* One call. Set c, op and what it needs; the rest is the thread's until
 * done is seen set. */
typedef struct sentinel_call {
    distlock_client *c;
    int op;                 /* SC_ACQUIRE (never waits), SC_RELEASE, SC_EXTEND */
    const char *key;
    const char *token;      /* release / extend through the token pair (distlock_*_token) */
    distlock_lock *lock;    /* else release / extend of this held lock */
    int multi;              /* an acquire through a distlock_multi, driven as a loop would */
    long ttl_ms;            /* the acquire's or the extend's */
    int rc;
    long validity;          /* the token pair's extend */
    char won[DISTLOCK_TOKEN_MAX + 1];  /* an acquire's token (its lock abandoned, not released) */
    char detail[512];
    long long ended_ms;
    atomic_int done;
} sentinel_call;

/* The acquire through the non-blocking API: poll() on the multi's
 * descriptor up to distlock_multi_timeout(), then perform; nothing else
 * wakes it. */
static inline int sentinel_call_multi(sentinel_call *o, distlock_lock **l)
{
    distlock_multi *m = NULL;
    distlock_op *op = NULL;
    int rc = distlock_multi_new(o->c, &m);
    if (rc == DISTLOCK_OK)
        rc = distlock_multi_acquire(m, o->key, o->ttl_ms, 0, 0, NULL, &op);
    while (rc == DISTLOCK_OK && !distlock_op_done(op)) {
        struct pollfd p = { distlock_multi_fd(m), POLLIN, 0 };
        long t = distlock_multi_timeout(m);
        (void)poll(&p, 1, t < 0 || t > 120000 ? 120000 : (int)t);
        if (distlock_multi_perform(m) < 0)
            rc = DISTLOCK_EINVAL;
    }
    if (op && distlock_op_done(op)) {
        rc = distlock_op_status(op);
        snprintf(o->detail, sizeof o->detail, "%s", rc == DISTLOCK_OK ? "" : distlock_op_error(op));
        *l = distlock_op_take_lock(op);
    }
    distlock_multi_free(m);
    return rc;
}

static inline void *sentinel_call_main(void *p)
{
    sentinel_call *o = p;
    distlock_lock *l = NULL;
    if (o->op == SC_ACQUIRE && o->multi)
        o->rc = sentinel_call_multi(o, &l);
    else if (o->op == SC_ACQUIRE)
        o->rc = distlock_acquire(o->c, o->key, o->ttl_ms, 0, 0, &l);
    else if (o->token)
        o->rc = o->op == SC_RELEASE
                    ? distlock_release_token(o->c, o->key, o->token)
                    : distlock_extend_token(o->c, o->key, o->token, o->ttl_ms, &o->validity);
    else
        o->rc = o->op == SC_RELEASE ? distlock_release(o->lock)
                                    : distlock_extend(o->lock, o->ttl_ms);
    o->ended_ms = rh_now_ms();
    if (!(o->op == SC_ACQUIRE && o->multi))
        snprintf(o->detail, sizeof o->detail, "%s",
                 o->rc == DISTLOCK_OK ? "" : distlock_last_error());
    if (l) {
        snprintf(o->won, sizeof o->won, "%s", distlock_lock_token(l));
        distlock_lock_abandon(l);  /* freed, not released: the test looks at the key */
    }
    atomic_store(&o->done, 1);
    return NULL;
}

/* Start o (set up by the caller) on a thread of its own. */
static inline void sentinel_call_start(sentinel_call *o, pthread_t *th)
{
    atomic_init(&o->done, 0);
    assert_int_equal(pthread_create(th, NULL, sentinel_call_main, o), 0);
}

/* A client of g with these timeouts (0: the default), its connection to the
 * master made and its subscriptions to the sentinels started (an acquire
 * and release of warm_key). */
static inline distlock_client *sentinel_call_client(rh_sentinels *g, long connect_ms,
                                                    long command_ms, const char *warm_key)
{
    distlock_client *c = NULL;
    assert_rc(distlock_client_new(g->uri, &c), DISTLOCK_OK);
    if (connect_ms > 0)
        assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, connect_ms),
                  DISTLOCK_OK);
    if (command_ms > 0)
        assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, command_ms),
                  DISTLOCK_OK);
    distlock_lock *warm = NULL;
    assert_rc(distlock_acquire(c, warm_key, 30000, 0, 0, &warm), DISTLOCK_OK);
    assert_rc(distlock_release(warm), DISTLOCK_OK);
    distlock_lock_free(warm);
    return c;
}

/* A connection to sentinel k of g (a group without sentinel credentials). */
static inline redisContext *sentinel_connect(rh_sentinels *g, int k)
{
    struct timeval tv = { 30, 0 };
    redisContext *c = redisConnectWithTimeout("127.0.0.1", g->sentinel_port[k], tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* The client's thread subscribes each sentinel to five announcement
 * channels: in the sentinel's CLIENT LIST such a connection shows sub=5 (a
 * test's own, with one channel, does not count). 1 if sentinel k has one. */
static inline int client_listens_on(rh_sentinels *g, int k)
{
    redisContext *c = sentinel_connect(g, k);
    if (c == NULL)
        return 0;
    redisReply *r = redisCommand(c, "CLIENT LIST");
    redisFree(c);
    int yes = r && (r->type == REDIS_REPLY_STRING || r->type == 14 /* VERB */) &&
              strstr(r->str, " sub=5 ") != NULL;
    if (r)
        freeReplyObject(r);
    return yes;
}

/* PTTL of key on the data node at port, whose password is pass (-2 absent,
 * -3 error). */
static inline long long pttl_on(int port, const char *pass, const char *key)
{
    redisContext *d = rh_auth_connect(port, NULL, pass);
    if (d == NULL)
        return -3;
    redisReply *r = redisCommand(d, "PTTL %s", key);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -3;
    if (r)
        freeReplyObject(r);
    redisFree(d);
    return v;
}

#endif
