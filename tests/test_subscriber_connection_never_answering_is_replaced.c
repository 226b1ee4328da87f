/* test_subscriber_connection_never_answering_is_replaced.c -- the
 * subscriber's connection to a node is bounded like every other: "Each node
 * is bounded by its own deadline: the connect timeout when it had to be
 * (re)connected" (round.c, README's waiting without polling). One whose
 * TCP connect succeeds but that never answers (a black-holing middlebox,
 * a hung host) must be given up and made again, or the client's waiters
 * never hear a release on that node again.
 *
 * One plain node; the waiter's client reaches it through the fault proxy,
 * the holder directly. The waiter's client first has its lock connection
 * (a call on another key); then the proxy black-holes new connections, so
 * the subscriber's connection, made by the wait, gets no answer; the
 * waiter goes on unconfirmed after its connect timeout (docs/guarantees.md,
 * Waiting). The black hole then ends for new connections: the subscriber
 * must be subscribed on the node within a few connect timeouts, and the
 * holder's release must then wake the waiter (re-checks 5-10 s apart,
 * holder's TTL 30 s). Real processes only. */
#include "test_common.h"
#include "test_wake_waiter.h"
#include "harness/faultproxy.h"

#define KEY "blackholed-subscriber"
#define CHANNEL "distlock:" KEY
#define CONNECT_MS 500
#define RECHECK_MS 10000
#define RESUBSCRIBE_BOUND_MS (4 * CONNECT_MS + 1000)
#define WAKE_BOUND_MS 1000

static void test_blackholed_subscriber_connection_is_replaced_and_wakes_waiter(void **state)
{
    (void)state;
    setvbuf(stdout, NULL, _IOLBF, 0);
    rh_cluster *rc = rh_start(1);
    assert_non_null(rc);
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *holder = new_client(rh_uris(rc)), *wc = new_client(fp_uris(fp));
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, CONNECT_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_RETRY_MIN_MS, RECHECK_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_RETRY_MAX_MS, RECHECK_MS), DISTLOCK_OK);
    distlock_lock *warm = NULL, *held = NULL;
    assert_rc(distlock_acquire(wc, KEY ":warm", 5000, 0, 0, &warm), DISTLOCK_OK);
    assert_rc(distlock_release(warm), DISTLOCK_OK);
    distlock_lock_free(warm);
    assert_rc(distlock_acquire(holder, KEY, 30000, 0, 0, &held), DISTLOCK_OK);

    char ans[64];
    assert_int_equal(fp_cmd(fp, ans, sizeof ans, "accepted 0"), 0);
    int before = atoi(ans + 3);
    assert_int_equal(fp_cmd(fp, NULL, 0, "blackhole-accept 0 on"), 0);
    wake_waiter w;
    wake_waiter_start(&w, wc, KEY, 30000, 25000);
    /* the subscriber's connection accepted, and black-holed */
    assert_int_equal(fp_cmd(fp, NULL, 0, "wait-conns 0 %d 10000", before + 1), 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "blackhole-accept 0 off"), 0);
    long long t_off = rh_now_ms();
    int resubscribed =
        RH_WAIT_UNTIL(channel_subscribers(rh_connect(rc, 0, 0), CHANNEL) == 1, RESUBSCRIBE_BOUND_MS);
    long long sub_ms = rh_now_ms() - t_off;
    long long released = 0;
    assert_true(release_ok_started_at(held, &released));
    int woke = wake_waiter_join(&w, 30000);
    long long gap = woke ? w.got_ms - released : -1;
    long long late_subs = channel_subscribers(rh_connect(rc, 0, 0), CHANNEL), late_ms = rh_now_ms() - t_off;
    printf("black hole ended; subscriber %s on the node (%lld ms, bound %d ms); waiter's acquire "
           "ended %lld ms after the release (rc %d; bound %d ms, re-checks %d-%d ms apart); subscribers "
           "on the node %lld ms after the black hole ended: %lld\n",
           resubscribed ? "subscribed" : "not subscribed", sub_ms, RESUBSCRIBE_BOUND_MS, gap, w.rc,
           WAKE_BOUND_MS, RECHECK_MS / 2, RECHECK_MS, late_ms, late_subs);
    distlock_lock_free(held);
    distlock_client_free(holder);
    distlock_client_free(wc);
    fp_stop(fp);
    rh_stop_all(rc);
    assert_true(resubscribed);
    assert_true(woke);
    assert_true(gap >= 0 && gap < WAKE_BOUND_MS);
    assert_rc(w.rc, DISTLOCK_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blackholed_subscriber_connection_is_replaced_and_wakes_waiter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
