/* test_sentinel_release_wakes_waiter_after_failover.c -- "a release
 * wakes waiters at once (pub/sub)" (README) on a Sentinel node whose master
 * is replaced by a failover: stopped without closing its sockets (SIGSTOP:
 * a hung host, a dropped NAT entry), or killed (its sockets reset).
 *
 * The waiter's client is subscribed to the release channel on the old
 * master; the holder's release runs on the new master (the key was
 * replicated before the pause) and PUBLISHes there. The waiter's re-checks
 * are set 10-20 s apart and its wait starts with the holder's lock at a
 * 60 s TTL, so only the release notification can end the wait within a
 * second of the release. Real processes only: tests/harness/sentinels.py
 * (1 master, 2 replicas, 3 sentinels). */
#include "test_common.h"
#include "test_wake_waiter.h"
#include "harness/sentinel_harness.h"

#include <unistd.h>

#define DATA_PASS "data-pw-1"
#define KEY "sentinel-paused-master-wake"
#define CHANNEL "distlock:" KEY
#define HOLD_TTL_MS 60000
#define RECHECK_MS 20000
#define WAIT_MS 50000
#define WAKE_BOUND_MS 1500

static int role_is_master(int port)
{
    redisContext *c = rh_auth_connect(port, NULL, DATA_PASS);
    if (!c) return 0;
    redisReply *r = redisCommand(c, "ROLE");
    redisFree(c);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 && strcmp(r->element[0]->str, "master") == 0;
    if (r) freeReplyObject(r);
    return ok;
}

/* The old master stops (kill_old 0: SIGSTOP, its sockets open; 1: SIGKILL,
 * its sockets reset), a failover names another; the holder releases there.
 * command_ms > 0: the waiter's command timeout (the reply deadline of its
 * subscription's PING). */
static void release_after_failover_wakes_waiter(int kill_old, long command_ms)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    rh_sentinels_opts o = { .data_pass = DATA_PASS, .down_after_ms = 1000, .failover_timeout_ms = 3000 };
    rh_sentinels *g = rh_sentinels_start(&o);
    assert_non_null(g);
    int old = rh_sentinels_master(g);
    assert_true(old > 0);

    distlock_client *holder, *waiter;
    assert_rc(distlock_client_new(g->uri, &holder), DISTLOCK_OK);
    assert_rc(distlock_client_new(g->uri, &waiter), DISTLOCK_OK);
    assert_rc(distlock_client_set(waiter, DISTLOCK_OPT_RETRY_MAX_MS, RECHECK_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(waiter, DISTLOCK_OPT_RETRY_MIN_MS, RECHECK_MS), DISTLOCK_OK);
    if (command_ms > 0)
        assert_rc(distlock_client_set(waiter, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, command_ms), DISTLOCK_OK);

    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, KEY, HOLD_TTL_MS, 0, 0, &held), DISTLOCK_OK);

    long long attempts = attempt_commands_on(rh_auth_connect(old, NULL, DATA_PASS));
    assert_true(attempts >= 0);
    wake_waiter a;
    wake_waiter_start(&a, waiter, KEY, 5000, WAIT_MS);

    /* the waiter's subscription is on the master, both its attempts
     * answered there; the key on both replicas */
    assert_true(RH_WAIT_UNTIL(
        channel_subscribers(rh_auth_connect(old, NULL, DATA_PASS), CHANNEL) == 1 &&
        attempt_commands_on(rh_auth_connect(old, NULL, DATA_PASS)) >= attempts + 2, 10000));
    for (int k = 0; k < 3; k++)
        if (g->data_port[k] > 0 && g->data_port[k] != old)
            assert_true(RH_WAIT_UNTIL(rh_sentinels_has(g, g->data_port[k], KEY, NULL) > 0, 10000));

    if (kill_old)
        assert_int_equal(rh_sentinels_kill(g, old), 0);
    else
        assert_int_equal(rh_sentinels_signal(g, old, 1), 0);
    int now_master = rh_sentinels_wait_master_not(g, old, 30000);
    assert_true(now_master > 0);
    assert_true(RH_WAIT_UNTIL(role_is_master(now_master), 10000));

    /* the holder follows the sentinels to the new master */
    long long released = 0;
    assert_true(RH_WAIT_UNTIL(release_ok_started_at(held, &released), 15000));
    /* where the waiter's client listens now (the old master cannot say) */
    long long on_new = channel_subscribers(rh_auth_connect(now_master, NULL, DATA_PASS), CHANNEL);
    assert_true(RH_WAIT_UNTIL(rh_sentinels_has(g, now_master, KEY, NULL) == 0, 5000));

    /* when (if ever) the waiter's client listens on the new master */
    long long sub_ms = -1;
    if (RH_WAIT_UNTIL(channel_subscribers(rh_auth_connect(now_master, NULL, DATA_PASS), CHANNEL) == 1 ||
                      wake_waiter_done(&a), WAIT_MS + 5000) &&
        !wake_waiter_done(&a))
        sub_ms = rh_now_ms() - released;
    int woke = wake_waiter_join(&a, WAIT_MS + 5000);
    long long gap = woke ? a.got_ms - released : -1;
    printf("old master %d %s, new master %d (subscribers of the channel there at the release: %lld); "
           "subscribed there %lld ms after the release (-1: not before the wait ended); "
           "waiter's acquire ended %lld ms after the release (rc %d, bound %d ms; re-checks %d-%d ms apart)\n",
           old, kill_old ? "killed" : "paused", now_master, on_new, sub_ms, gap, a.rc, WAKE_BOUND_MS, RECHECK_MS / 2, RECHECK_MS);
    if (!kill_old)
        (void)rh_sentinels_signal(g, old, 0);
    distlock_lock_free(held);
    distlock_client_free(holder);
    distlock_client_free(waiter);
    rh_sentinels_stop(g);
    assert_true(woke);
    assert_rc(a.rc, DISTLOCK_OK);
    assert_true(gap >= 0 && gap < WAKE_BOUND_MS);
}

static void test_release_on_new_master_wakes_waiter_subscribed_on_paused_old_one(void **state)
{
    (void)state;
    release_after_failover_wakes_waiter(0, 0);
}

/* The same with a command timeout far longer than the failover: the paused
 * master's silence to the subscription's PING is noticed too late, so the
 * subscriber must leave it because the failover was announced (the
 * Sentinel kind's endpoint state changed). */
static void test_announced_failover_moves_subscriber_off_paused_old_master(void **state)
{
    (void)state;
    release_after_failover_wakes_waiter(0, 60000);
}

/* The same with the old master's sockets reset: the subscriber reconnects,
 * asks the sentinels, and listens on the new master. */
static void test_release_on_new_master_wakes_waiter_subscribed_on_killed_old_one(void **state)
{
    (void)state;
    release_after_failover_wakes_waiter(1, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_on_new_master_wakes_waiter_subscribed_on_killed_old_one),
        cmocka_unit_test(test_release_on_new_master_wakes_waiter_subscribed_on_paused_old_one),
        cmocka_unit_test(test_announced_failover_moves_subscriber_off_paused_old_master),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
