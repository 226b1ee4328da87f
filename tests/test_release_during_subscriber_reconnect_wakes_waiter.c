/* test_release_during_subscriber_reconnect_wakes_waiter.c -- "a release
 * wakes waiters at once (pub/sub)" (README) when the release comes while
 * the waiter's subscription connection is down and being made again.
 *
 * One plain node; the waiter's client reaches it through the fault proxy,
 * the holder directly. The waiter's subscription is confirmed, then the
 * node closes the subscription's connection (CLIENT KILL TYPE pubsub: the
 * waiter's lock connection stays, so its attempts are not what is tested)
 * and the proxy delays the subscriber's next one (slow accept); the holder
 * releases while the node has no subscriber (PUBLISH reaches nobody); the
 * subscriber's new connection then SUBSCRIBEs again. A release
 * may have been missed during the gap, so the waiter must look again once
 * it is subscribed again, not at its next re-check (set 5-10 s apart here,
 * the holder's TTL 30 s). Real processes only. */
#include "test_common.h"
#include "test_wake_waiter.h"
#include "harness/faultproxy.h"

#define KEY "resubscribe-wake"
#define CHANNEL "distlock:" KEY
#define RECHECK_MS 10000
#define SLOW_ACCEPT_MS 1500
#define WAKE_BOUND_MS 1000

static void test_release_while_subscriber_reconnects_wakes_waiter_once_subscribed(void **state)
{
    (void)state;
    setvbuf(stdout, NULL, _IOLBF, 0);
    rh_cluster *rc = rh_start(1);
    assert_non_null(rc);
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *holder = new_client(rh_uris(rc)), *wc = new_client(fp_uris(fp));
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_RETRY_MIN_MS, RECHECK_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_RETRY_MAX_MS, RECHECK_MS), DISTLOCK_OK);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, KEY, 30000, 0, 0, &held), DISTLOCK_OK);

    wake_waiter w;
    wake_waiter_start(&w, wc, KEY, 30000, 25000);
    assert_true(RH_WAIT_UNTIL(channel_subscribers(rh_connect(rc, 0, 0), CHANNEL) == 1, 10000));

    /* the subscription's connection closed by the node, the next one slow
     * to come (the proxy delays the one it accepts next; later ones go
     * through at once) */
    char ans[64];
    assert_int_equal(fp_cmd(fp, ans, sizeof ans, "accepted 0"), 0);
    int before = atoi(ans + 3);
    assert_int_equal(fp_cmd(fp, NULL, 0, "slow-accept 0 %d", SLOW_ACCEPT_MS), 0);
    redisReply *kill = rh_command(rc, 0, 0, "CLIENT KILL TYPE pubsub");
    assert_true(kill && kill->type == REDIS_REPLY_INTEGER && kill->integer == 1);
    freeReplyObject(kill);
    assert_int_equal(fp_cmd(fp, NULL, 0, "wait-conns 0 %d 10000", before + 1), 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "slow-accept 0 0"), 0);
    assert_true(RH_WAIT_UNTIL(channel_subscribers(rh_connect(rc, 0, 0), CHANNEL) == 0, 5000));
    long long released = 0;
    assert_true(release_ok_started_at(held, &released));
    /* Subscribed again: seen on the node, or the waiter already done (woken
     * by the confirmation, it acquired, released and unsubscribed between
     * two looks; that its re-check did not end it is checked below). */
    int resubscribed = RH_WAIT_UNTIL(
        channel_subscribers(rh_connect(rc, 0, 0), CHANNEL) == 1 || wake_waiter_done(&w), 10000);
    long long resub_ms = rh_now_ms();
    int woke = wake_waiter_join(&w, 30000);
    long long gap = woke ? (w.got_ms > resub_ms ? w.got_ms - resub_ms : 0) : -1;
    long long since_release = woke ? w.got_ms - released : -1;
    printf("released with no subscriber on the node; the waiter's client subscribed again %lld ms "
           "later (%s), and its acquire ended %lld ms after that (rc %d%s%s; bound %d ms, re-checks "
           "%d-%d ms apart)\n",
           resub_ms - released, resubscribed ? "seen" : "not seen", gap, w.rc,
           w.detail[0] ? ": " : "", w.detail, WAKE_BOUND_MS,
           RECHECK_MS / 2, RECHECK_MS);
    printf("acquire ended %lld ms after the release\n", since_release);
    distlock_lock_free(held);
    distlock_client_free(holder);
    distlock_client_free(wc);
    fp_stop(fp);
    rh_stop_all(rc);
    assert_true(resubscribed);
    assert_true(woke);
    assert_rc(w.rc, DISTLOCK_OK);
    assert_true(gap >= 0 && gap < WAKE_BOUND_MS);
    /* sooner than the earliest re-check could have ended it */
    assert_true(since_release >= 0 && since_release < RECHECK_MS / 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_while_subscriber_reconnects_wakes_waiter_once_subscribed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
