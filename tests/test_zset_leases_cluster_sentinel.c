/* test_zset_leases_cluster_sentinel.c -- semaphore permits and read locks
 * on a Redis Cluster (3 masters) and on a Sentinel-managed master:
 *   - the permit bound and the reader / writer exclusion hold there;
 *   - a release wakes a waiter within a few ms, not at its next re-check
 *     (5 s apart here): on the Cluster through the key's shard channel;
 *   - auto-renewal keeps permits and read locks of several slots alive
 *     (the batched per-master renewal, S_EXTEND_MULTI);
 *   - a writer behind read locks gets the key when the reader leaves;
 *   - two writers waiting there: the one that gives up leaves the other's
 *     intent standing (the registry {key}:writers, in the key's slot); a
 *     key whose side keys are not in its slot ("a}b") keeps the one shared
 *     intent, with no registry and no CROSSSLOT. */
#include "test_common.h"
#include "cluster_harness.h"
#include "sentinel_harness.h"

#include <pthread.h>

static rh_rcl *CL;
static rh_sentinels *SN;

static int group_setup(void **state)
{
    (void)state;
    setvbuf(stdout, NULL, _IOLBF, 0);
    CL = rh_rcl_start_n(3, 0);
    if (CL == NULL)
        return -1;
    rh_sentinels_opts o = { .replicas = -1, .sentinels = 1, .quorum = 1 };
    SN = rh_sentinels_start(&o);
    return SN ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    rh_rcl_stop(CL);
    rh_sentinels_stop(SN);
    return 0;
}

/* A client whose waiting calls re-check only every 5 s. */
static distlock_client *slow_recheck_client(const char *uri)
{
    distlock_client *c = new_client(uri);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MIN_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MAX_MS, 5000), DISTLOCK_OK);
    return c;
}

typedef struct waiter {
    distlock_client *c;
    const char *key;
    int kind;  /* 0 writer, 1 reader, 2 permit of 1 */
    int rc;
    long long got_ms;
} waiter;

static void *wait_for(void *arg)
{
    waiter *w = arg;
    distlock_lock *l = NULL;
    w->rc = w->kind == 2 ? distlock_semaphore_acquire(w->c, w->key, 1, 10000, 20000, 0, NULL, &l)
                         : distlock_acquire(w->c, w->key, 10000, 20000,
                                            w->kind ? DISTLOCK_SHARED : 0, &l);
    w->got_ms = rh_now_ms();
    distlock_lock_free(l);
    return NULL;
}

/* Scripts run so far (EVALSHA and EVAL calls) on the server that serves
 * key: its Cluster master, or the Sentinel group's master. */
static long long script_runs(const char *key, int sentinel)
{
    redisReply *r;
    redisContext *ctx = NULL;
    if (sentinel) {
        ctx = redisConnect("127.0.0.1", rh_sentinels_master(SN));
        r = ctx && !ctx->err ? redisCommand(ctx, "INFO commandstats") : NULL;
    } else {
        int owner = rh_rcl_owner(CL, 0, rh_rcl_keyslot(CL, key));
        r = rh_command(CL->rc, owner, 0, "INFO commandstats");
    }
    long long n = 0;
    if (r && r->type == REDIS_REPLY_STRING) {
        const char *p;
        if ((p = strstr(r->str, "cmdstat_evalsha:calls=")))
            n += atoll(p + 22);
        if ((p = strstr(r->str, "cmdstat_eval:calls=")))
            n += atoll(p + 19);
    }
    if (r)
        freeReplyObject(r);
    if (ctx)
        redisFree(ctx);
    return n;
}

/* holder (a permit of 1, a read lock or a lock) is held; a waiter of
 * `kind` on another client waits; once the key's server has run its two
 * refused attempts (before and after it subscribed) it sleeps for 5 s;
 * then the release: the ms until the waiter has it. */
static long woken_after(distlock_client *wc, distlock_lock *holder, const char *key, int kind,
                        int sentinel)
{
    waiter w = { .c = wc, .key = key, .kind = kind, .rc = -99 };
    long long runs0 = script_runs(key, sentinel);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for, &w), 0);
    int sleeping = RH_WAIT_UNTIL(script_runs(key, sentinel) >= runs0 + 2, 10000);
    long long t0 = rh_now_ms();
    assert_rc(distlock_release(holder), DISTLOCK_OK);
    pthread_join(t, NULL);
    assert_true(sleeping);
    assert_rc(w.rc, DISTLOCK_OK);
    return (long)(w.got_ms - t0);
}

static void test_cluster_permits_and_wakeup(void **state)
{
    (void)state;
    distlock_client *c = new_client(CL->uri), *wc = slow_recheck_client(CL->uri);
    const char *keys[3] = { "cl:sem:a", "cl:sem:b", "{cl}sem:c" };
    for (int k = 0; k < 3; k++) {
        distlock_lock *a = NULL, *b = NULL, *x = NULL;
        assert_rc(distlock_semaphore_acquire(c, keys[k], 2, 10000, 0, 0, NULL, &a), DISTLOCK_OK);
        assert_rc(distlock_semaphore_acquire(c, keys[k], 2, 10000, 0, 0, NULL, &b), DISTLOCK_OK);
        assert_rc(distlock_semaphore_acquire(c, keys[k], 2, 10000, 0, 0, NULL, &x),
                  DISTLOCK_NOTACQUIRED);
        assert_rc(distlock_release(a), DISTLOCK_OK);
        assert_rc(distlock_semaphore_acquire(c, keys[k], 2, 10000, 0, 0, NULL, &x), DISTLOCK_OK);
        distlock_lock_free(x);
        distlock_lock_free(b);
        distlock_lock_free(a);
        /* a release wakes a waiter through the key's shard channel */
        distlock_lock *h = NULL;
        assert_rc(distlock_semaphore_acquire(c, keys[k], 1, 10000, 0, 0, NULL, &h), DISTLOCK_OK);
        long ms = woken_after(wc, h, keys[k], 2, 0);
        printf("# cluster, '%s' (slot %d): permit released -> waiter granted in %ld ms\n",
               keys[k], rh_rcl_keyslot(CL, keys[k]), ms);
        assert_true(ms < slow_bound(250, 1000));
        distlock_lock_free(h);
    }
    distlock_client_free(wc);
    distlock_client_free(c);
}

static void test_cluster_read_locks_and_writer(void **state)
{
    (void)state;
    distlock_client *c = new_client(CL->uri), *wc = slow_recheck_client(CL->uri);
    distlock_lock *r1 = NULL, *r2 = NULL, *w = NULL;
    assert_rc(distlock_acquire(c, "cl:rw", 10000, 0, DISTLOCK_SHARED, &r1), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "cl:rw", 10000, 0, DISTLOCK_SHARED, &r2), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "cl:rw", 10000, 0, 0, &w), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_release(r2), DISTLOCK_OK);
    /* the last reader's release wakes the waiting writer */
    long ms = woken_after(wc, r1, "cl:rw", 0, 0);
    printf("# cluster: last reader released -> writer granted in %ld ms\n", ms);
    assert_true(ms < slow_bound(250, 1000));
    /* and the writer's release wakes a reader */
    assert_rc(distlock_acquire(c, "cl:rw", 10000, 0, 0, &w), DISTLOCK_OK);
    ms = woken_after(wc, w, "cl:rw", 1, 0);
    printf("# cluster: writer released -> reader granted in %ld ms\n", ms);
    assert_true(ms < slow_bound(250, 1000));
    distlock_lock_free(w);
    distlock_lock_free(r1);
    distlock_lock_free(r2);
    distlock_client_free(wc);
    distlock_client_free(c);
}

static void test_cluster_auto_renew_many_slots(void **state)
{
    (void)state;
    distlock_client *c = new_client(CL->uri), *c2 = new_client(CL->uri);
    distlock_lock *l[8] = { 0 }, *x = NULL;
    char keys[8][32];
    for (int i = 0; i < 8; i++) {
        snprintf(keys[i], sizeof keys[i], "cl:renew:%d", i);
        if (i % 2)
            assert_rc(distlock_semaphore_acquire(c, keys[i], 1, 900, 0, DISTLOCK_AUTO_RENEW,
                                                 NULL, &l[i]), DISTLOCK_OK);
        else
            assert_rc(distlock_acquire(c, keys[i], 900, 0, DISTLOCK_SHARED | DISTLOCK_AUTO_RENEW,
                                       &l[i]), DISTLOCK_OK);
    }
    sleep_until_ms(rh_now_ms() + 2500);  /* the scenario: held past 2 ttls */
    for (int i = 0; i < 8; i++) {
        assert_int_equal(distlock_lock_lost(l[i]), 0);
        assert_true(distlock_lock_validity_ms(l[i]) > 0);
        if (i % 2)
            assert_rc(distlock_semaphore_acquire(c2, keys[i], 1, 900, 0, 0, NULL, &x),
                      DISTLOCK_NOTACQUIRED);
        else
            assert_rc(distlock_acquire(c2, keys[i], 900, 0, 0, &x), DISTLOCK_NOTACQUIRED);
    }
    for (int i = 0; i < 8; i++)
        distlock_lock_free(l[i]);
    distlock_client_free(c2);
    distlock_client_free(c);
}

typedef struct cancellable {
    distlock_client *c;
    const char *key;
    distlock_cancel *cancel;
    int rc;
} cancellable;

static void *write_until_cancelled(void *arg)
{
    cancellable *w = arg;
    distlock_lock *l = NULL;
    distlock_acquire_args a = { .size = sizeof a, .cancel = w->cancel };
    w->rc = distlock_acquire_with(w->c, w->key, 10000, DISTLOCK_WAIT_FOREVER, 0, &a, &l);
    distlock_lock_free(l);
    return NULL;
}

/* A command's integer reply on the master that serves slot_key's slot. */
static long long owner_int(const char *slot_key, const char *fmt, const char *arg)
{
    int owner = rh_rcl_owner(CL, 0, rh_rcl_keyslot(CL, slot_key));
    redisReply *r = rh_command(CL->rc, owner, 0, fmt, arg);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer
                  : r->type == REDIS_REPLY_STRING ? 1 : 0;  /* ZSCORE: a score */
    freeReplyObject(r);
    return v;
}

/* 1 if key exists on master i. */
static long long exists_on(int i, const char *key)
{
    redisReply *e = rh_command(CL->rc, i, 0, "EXISTS %s", key);
    assert_non_null(e);
    long long n = e->type == REDIS_REPLY_INTEGER ? e->integer : 0;
    freeReplyObject(e);
    return n;
}

static void test_cluster_waiting_writers_keep_intent(void **state)
{
    (void)state;
    const char *keys[2] = { "cl:ww", "cl:a}b" };
    const char *regs[2] = { "{cl:ww}:writers", "cl:a}b:writers" };
    for (int k = 0; k < 2; k++) {
        distlock_client *c = new_client(CL->uri), *c1 = new_client(CL->uri),
                        *c2 = new_client(CL->uri);
        distlock_lock *r = NULL, *x = NULL;
        assert_rc(distlock_acquire(c, keys[k], 10000, 0, DISTLOCK_SHARED, &r), DISTLOCK_OK);
        cancellable w1 = { .c = c1, .key = keys[k], .rc = -99 };
        cancellable w2 = { .c = c2, .key = keys[k], .rc = -99 };
        assert_rc(distlock_cancel_new(&w1.cancel), DISTLOCK_OK);
        assert_rc(distlock_cancel_new(&w2.cancel), DISTLOCK_OK);
        pthread_t t1, t2;
        assert_int_equal(pthread_create(&t1, NULL, write_until_cancelled, &w1), 0);
        assert_int_equal(pthread_create(&t2, NULL, write_until_cancelled, &w2), 0);
        /* both writers are waiting: the intent is up; in the key's slot,
         * both are registered */
        int up = RH_WAIT_UNTIL(owner_int(keys[k], "ZSCORE %s __write__", keys[k]) &&
                               (k == 1 || owner_int(keys[k], "ZCARD %s", regs[k]) == 2),
                               10000);
        long long reg_waiting = 0;  /* registries on the masters while both wait */
        for (int i = 0; i < 3; i++)
            reg_waiting += exists_on(i, regs[k]);
        assert_rc(distlock_cancel_fire(w1.cancel), DISTLOCK_OK);
        pthread_join(t1, NULL);
        int reader_while_w2 = distlock_acquire(c, keys[k], 10000, 0, DISTLOCK_SHARED, &x);
        distlock_lock_free(x);
        x = NULL;
        assert_rc(distlock_cancel_fire(w2.cancel), DISTLOCK_OK);
        pthread_join(t2, NULL);
        int reader_after = distlock_acquire(c, keys[k], 10000, 0, DISTLOCK_SHARED, &x);
        long long reg_left = 0;  /* on no master, whatever its slot */
        for (int i = 0; i < 3; i++)
            reg_left += exists_on(i, regs[k]);
        printf("# cluster '%s': registries while two writers wait: %lld; writer 1 gave up, "
               "writer 2 waiting: a new reader %s; both gave up: a new reader %s; registries "
               "left: %lld\n", keys[k], reg_waiting, distlock_strerror(reader_while_w2),
               distlock_strerror(reader_after), reg_left);
        assert_true(up);
        /* both waited (no CROSSSLOT) until cancelled */
        assert_rc(w1.rc, DISTLOCK_ECANCELED);
        assert_rc(w2.rc, DISTLOCK_ECANCELED);
        /* in the slot: one registry, and the intent stays for writer 2.
         * "a}b": none; the first writer to leave withdrew the intent (then
         * writer 2's next attempt, woken by that leave, races the reader:
         * either may come first) */
        assert_int_equal(reg_waiting, k == 0 ? 1 : 0);
        if (k == 0)
            assert_rc(reader_while_w2, DISTLOCK_NOTACQUIRED);
        assert_rc(reader_after, DISTLOCK_OK);
        assert_int_equal(reg_left, 0);
        distlock_lock_free(x);
        distlock_lock_free(r);
        distlock_cancel_free(w1.cancel);
        distlock_cancel_free(w2.cancel);
        distlock_client_free(c2);
        distlock_client_free(c1);
        distlock_client_free(c);
    }
}

static void test_sentinel_permits_read_locks(void **state)
{
    (void)state;
    distlock_client *c = new_client(SN->uri), *wc = slow_recheck_client(SN->uri);
    distlock_lock *a = NULL, *x = NULL, *r = NULL;
    assert_rc(distlock_semaphore_acquire(c, "sn:sem", 1, 10000, 0, 0, NULL, &a), DISTLOCK_OK);
    assert_rc(distlock_semaphore_acquire(c, "sn:sem", 1, 10000, 0, 0, NULL, &x),
              DISTLOCK_NOTACQUIRED);
    long ms = woken_after(wc, a, "sn:sem", 2, 1);
    printf("# sentinel: permit released -> waiter granted in %ld ms\n", ms);
    assert_true(ms < slow_bound(250, 1000));
    assert_rc(distlock_acquire(c, "sn:rw", 10000, 0, DISTLOCK_SHARED, &r), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "sn:rw", 10000, 0, 0, &x), DISTLOCK_NOTACQUIRED);
    ms = woken_after(wc, r, "sn:rw", 0, 1);
    printf("# sentinel: reader released -> writer granted in %ld ms\n", ms);
    assert_true(ms < slow_bound(250, 1000));
    distlock_lock_free(a);
    distlock_lock_free(r);
    distlock_client_free(wc);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cluster_permits_and_wakeup),
        cmocka_unit_test(test_cluster_read_locks_and_writer),
        cmocka_unit_test(test_cluster_auto_renew_many_slots),
        cmocka_unit_test(test_cluster_waiting_writers_keep_intent),
        cmocka_unit_test(test_sentinel_permits_read_locks),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
