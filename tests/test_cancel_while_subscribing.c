/* test_cancel_while_subscribing.c -- a blocking waiter whose subscription
 * is not confirmed (its SUBSCRIBE held at the fault proxy: a node stuck
 * mid-subscribe) is cancelled: the call returns DISTLOCK_ECANCELED promptly,
 * not after the subscription's deadline (the connect timeout, 10 s here),
 * with nothing held and, for a DISTLOCK_FAIR waiter, out of the queue. Its
 * own cancel (args->cancel) and the client's cancel alike. Then the
 * subscription goes through and a later waiter of the same client is woken
 * by a release as usual. */
#include "test_common.h"
#include "harness/faultproxy.h"

#include <pthread.h>
#include <stdatomic.h>

static int group_setup(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    return (*state = rh_start(1)) ? 0 : -1;
}
static int group_teardown(void **state)
{
    rh_stop_all(*state);
    return 0;
}

#define FP_OK(fp, ...) do {                                                   \
        if (fp_cmd((fp), NULL, 0, __VA_ARGS__) != 0)                          \
            fail_msg("faultproxy command failed: " __VA_ARGS__);              \
    } while (0)

struct waiter {
    distlock_client *c;
    const char *key;
    unsigned flags;
    distlock_cancel *cancel;
    int rc;
    distlock_lock *lock;
    atomic_int done;
    long long t_done;
    pthread_t t;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    distlock_acquire_args a = { .size = sizeof a, .cancel = w->cancel };
    w->rc = distlock_acquire_with(w->c, w->key, 30000, 60000, w->flags, &a, &w->lock);
    w->t_done = rh_now_ms();
    atomic_store(&w->done, 1);
    return NULL;
}

static long long queue_len(rh_cluster *rc, const char *key)
{
    redisReply *r = rh_command(rc, 0, 0, "ZCARD {%s}:q", key);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

static void cancel_mid_subscribe(rh_cluster *rc, const char *key, unsigned flags, int own)
{
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *hc = new_client(rh_uris(rc));
    distlock_lock *hl = NULL;
    assert_rc(distlock_acquire(hc, key, 30000, 0, flags, &hl), DISTLOCK_OK);

    distlock_client *wc = new_client(fp_uris(fp));
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 10000), DISTLOCK_OK);
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 10000), DISTLOCK_OK);
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_RETRY_MIN_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_RETRY_MAX_MS, 5000), DISTLOCK_OK);
    char hex[64];
    FP_OK(fp, "hold-match 0 up %s", fp_hex("SUBSCRIBE", hex, sizeof hex));

    static struct waiter w;
    memset(&w, 0, sizeof w);
    w.c = wc;
    w.key = key;
    w.flags = flags;
    assert_rc(distlock_cancel_new(&w.cancel), DISTLOCK_OK);
    assert_int_equal(pthread_create(&w.t, NULL, waiter_main, &w), 0);
    FP_OK(fp, "wait-held 0 up 1 10000");  /* its first attempt refused, its SUBSCRIBE stuck */
    if (flags & DISTLOCK_FAIR)
        assert_true(RH_WAIT_UNTIL(queue_len(rc, key) == 1, 5000));
    assert_int_equal(atomic_load(&w.done), 0);

    long long t0 = rh_now_ms();
    if (own)
        assert_rc(distlock_cancel_fire(w.cancel), DISTLOCK_OK);
    else
        assert_rc(distlock_client_cancel(wc), DISTLOCK_OK);
    int prompt = RH_WAIT_UNTIL(atomic_load(&w.done), 3000);
    long long took = rh_now_ms() - t0;
    FP_OK(fp, "unhold 0 up");
    pthread_join(w.t, NULL);
    took = w.t_done - t0;
    printf("# %s, %s cancel while subscribing: %d after %lld ms\n", key,
           own ? "own" : "client", w.rc, took);
    assert_true(prompt);
    assert_rc(w.rc, DISTLOCK_ECANCELED);
    assert_null(w.lock);
    if (flags & DISTLOCK_FAIR)
        assert_true(RH_WAIT_UNTIL(queue_len(rc, key) == 0, 3000));

    /* the client goes on: a later waiter is woken by the release */
    static struct waiter w2;
    memset(&w2, 0, sizeof w2);
    w2.c = wc;
    w2.key = key;
    w2.flags = flags;
    assert_int_equal(pthread_create(&w2.t, NULL, waiter_main, &w2), 0);
    if (flags & DISTLOCK_FAIR)
        assert_true(RH_WAIT_UNTIL(queue_len(rc, key) == 1, 5000));
    /* else any moment is right: its first attempt wins, or it waits */
    long long t1 = rh_now_ms();
    assert_rc(distlock_release(hl), DISTLOCK_OK);
    pthread_join(w2.t, NULL);
    assert_rc(w2.rc, DISTLOCK_OK);
    printf("# then a waiter got it %lld ms after the release\n", w2.t_done - t1);
    distlock_lock_free(w2.lock);
    distlock_lock_free(hl);
    distlock_cancel_free(w.cancel);
    distlock_client_free(wc);
    distlock_client_free(hc);
    fp_stop(fp);
}

static void test_own_cancel_while_subscribing(void **state)
{
    cancel_mid_subscribe(*state, "sub-own", 0, 1);
}
static void test_client_cancel_while_subscribing(void **state)
{
    cancel_mid_subscribe(*state, "sub-client", 0, 0);
}
static void test_own_cancel_while_subscribing_fair(void **state)
{
    cancel_mid_subscribe(*state, "sub-own-fair", DISTLOCK_FAIR, 1);
}
static void test_client_cancel_while_subscribing_fair(void **state)
{
    cancel_mid_subscribe(*state, "sub-client-fair", DISTLOCK_FAIR, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_cancel_while_subscribing),
        cmocka_unit_test(test_client_cancel_while_subscribing),
        cmocka_unit_test(test_own_cancel_while_subscribing_fair),
        cmocka_unit_test(test_client_cancel_while_subscribing_fair),
    };
    return cmocka_run_group_tests_name("cancel_while_subscribing", tests, group_setup,
                                       group_teardown);
}
