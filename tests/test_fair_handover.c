/* test_fair_handover.c -- DISTLOCK_FAIR hand-over: a fair waiter that is
 * named the queue's new head while its own attempt is on the wire is woken
 * by the next release, not left to its re-check timer. */
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

/* A waiting acquire in its own thread. `sleeps` counts the sleeps the call
 * began (the client's interrupt hook runs before each, in the caller's
 * thread), `slept_at_ms` is when the latest began: seen from outside, the
 * call has finished an attempt and waits. */
struct waiter {
    distlock_client *c;
    const char *key;
    unsigned flags;
    int rc;
    distlock_lock *lock;
    atomic_int sleeps;
    _Atomic long long slept_at_ms;
    atomic_int done;
    long long t_done;
    pthread_t t;
};

static __thread struct waiter *this_waiter;

static int count_sleep(void *arg)
{
    (void)arg;
    struct waiter *w = this_waiter;
    if (w) {
        atomic_store(&w->slept_at_ms, rh_now_ms());
        atomic_fetch_add(&w->sleeps, 1);
    }
    return 0;  /* never cancels */
}

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    this_waiter = w;
    w->rc = distlock_acquire(w->c, w->key, 30000, 60000, w->flags, &w->lock);
    w->t_done = rh_now_ms();
    atomic_store(&w->done, 1);
    return NULL;
}

static void waiter_start(struct waiter *w, distlock_client *c, const char *key, unsigned flags)
{
    memset(w, 0, sizeof(*w));
    w->c = c;
    w->key = key;
    w->flags = flags;
    assert_int_equal(pthread_create(&w->t, NULL, waiter_main, w), 0);
}

static long long queue_len(rh_cluster *rc, const char *key)
{
    redisReply *r = rh_command(rc, 0, 0, "ZCARD {%s}:q", key);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

/* A faultproxy command that must succeed. */
#define FP_OK(fp, ...) do {                                                   \
        if (fp_cmd((fp), NULL, 0, __VA_ARGS__) != 0)                          \
            fail_msg("faultproxy command failed: " __VA_ARGS__);              \
    } while (0)

/* Queue: holder H, then X, then W. W's re-check attempt runs on the server
 * while X is still queued ahead of it (its reply says "rank 1"), and that
 * reply is held at the proxy. Meanwhile H releases, X takes the lock and its
 * script names W the new head; W's subscriber has that message before W
 * reads its reply. Then X releases: W must be woken by that release. Its
 * re-checks are 3..6 s apart (DISTLOCK_OPT_RETRY_MIN/MAX_MS 6000), so a
 * waiter that took its reply's older view over the news ("not the head")
 * sleeps seconds; one woken by the release takes the lock in milliseconds.
 *
 * "The subscriber has the news" is made sure of with a probe: a plain
 * waiter of W's client on another key, subscribed on the same connection.
 * A message published on the probe's channel after X's grant arrives after
 * the naming message on that connection and is handled after it, so once
 * the probe is served the naming message has been handled. */
static void test_named_head_during_attempt_is_woken_by_release(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "handover", *probe = "probe";
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);

    distlock_client *hc = new_client(rh_uris(rc)), *xc = new_client(rh_uris(rc));
    distlock_lock *hl = NULL;
    assert_rc(distlock_acquire(hc, key, 30000, 0, DISTLOCK_FAIR, &hl), DISTLOCK_OK);
    static struct waiter x, w, p;
    waiter_start(&x, xc, key, DISTLOCK_FAIR);
    assert_true(RH_WAIT_UNTIL(queue_len(rc, key) == 1, 10000));

    /* W's client talks through the proxy; a reply held there must not
     * time out (command timeout 20 s). */
    distlock_client *wc = new_client(fp_uris(fp));
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_RETRY_MIN_MS, 6000), DISTLOCK_OK);
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_RETRY_MAX_MS, 6000), DISTLOCK_OK);
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 20000), DISTLOCK_OK);
    assert_rc(distlock_client_on_interrupt(wc, count_sleep, NULL), DISTLOCK_OK);
    waiter_start(&w, wc, key, DISTLOCK_FAIR);
    /* Second in the queue, subscribed (one sleep until the subscription is
     * confirmed), tried again and asleep until its re-check. */
    assert_true(RH_WAIT_UNTIL(atomic_load(&w.sleeps) >= 2, 10000));
    assert_int_equal(queue_len(rc, key), 2);

    /* W's next attempt (the re-check, 3..6 s later): the only request on
     * the proxy carrying the key now (W's SUBSCRIBE went out before). */
    char hex[64];
    FP_OK(fp, "hold-match 0 up %s", fp_hex(key, hex, sizeof hex));
    FP_OK(fp, "wait-held 0 up 1 15000");
    fp_conn conns[64];
    int nc = fp_conns(fp, 0, conns, 64), cw = -1;
    for (int k = 0; k < nc; k++)
        if (conns[k].held_up > 0)
            cw = conns[k].id;
    assert_true(cw > 0);
    /* It runs on the server now (X is first: "rank 1"); its reply waits. */
    FP_OK(fp, "hold 0:%d down", cw);
    FP_OK(fp, "unhold 0:%d up", cw);
    FP_OK(fp, "wait-held 0:%d down 1 10000", cw);
    assert_int_equal(atomic_load(&w.sleeps), 2);

    /* The probe: asleep on its own re-check after its attempt after
     * subscribing. */
    assert_int_equal(rh_set(rc, 0, 0, probe, "test-holds-it", 60000), 0);
    waiter_start(&p, wc, probe, 0);
    assert_true(RH_WAIT_UNTIL(atomic_load(&p.sleeps) >= 2, 10000));

    /* H releases; X is woken, wins and names W the head. */
    assert_rc(distlock_release(hl), DISTLOCK_OK);
    pthread_join(x.t, NULL);
    assert_rc(x.rc, DISTLOCK_OK);
    /* The probe's release: served once the subscriber handled both. */
    assert_int_equal(rh_del(rc, 0, 0, probe), 1);
    redisReply *r = rh_command(rc, 0, 0, "PUBLISH distlock:%s %s", probe, "");
    assert_non_null(r);
    freeReplyObject(r);
    pthread_join(p.t, NULL);
    assert_rc(p.rc, DISTLOCK_OK);
    assert_int_equal(atomic_load(&w.done), 0);

    /* W reads its reply (the older view: second) and sleeps. */
    FP_OK(fp, "unhold 0:%d down", cw);
    assert_true(RH_WAIT_UNTIL(atomic_load(&w.sleeps) >= 3, 10000));
    long long slept = atomic_load(&w.slept_at_ms);

    /* X releases: W, the head, is woken and served. */
    long long t_rel = rh_now_ms();
    assert_rc(distlock_release(x.lock), DISTLOCK_OK);
    pthread_join(w.t, NULL);
    assert_rc(w.rc, DISTLOCK_OK);
    long long after_sleep = w.t_done - slept;
    printf("# named head while its attempt was on the wire: served %lld ms after the release "
           "(%lld ms after it went to sleep; its re-check was >= 3000 ms away)\n",
           w.t_done - t_rel, after_sleep);
    if (after_sleep >= 2000) {
        print_error("the release did not wake the new head: served %lld ms after it went to "
                    "sleep, by its re-check\n", after_sleep);
        fail();
    }

    assert_rc(distlock_release(w.lock), DISTLOCK_OK);
    distlock_lock_free(w.lock);
    distlock_lock_free(p.lock);
    distlock_lock_free(x.lock);
    distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(xc);
    distlock_client_free(hc);
    fp_stop(fp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_named_head_during_attempt_is_woken_by_release),
    };
    return cmocka_run_group_tests_name("fair_handover", tests, group_setup, group_teardown);
}
