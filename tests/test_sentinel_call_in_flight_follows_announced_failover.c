/* test_sentinel_call_in_flight_follows_announced_failover.c -- a call out
 * on a Sentinel node's master that stops answering (SIGSTOP: a hung host,
 * its sockets open) goes to the new master once the sentinels announce the
 * failover, instead of waiting out its command timeout on the old one
 * (docs/sentinel.md, "Following the sentinels' word").
 *
 * The client's command timeout is 60 s, far longer than the failover
 * (down-after 1 s): only following the announcement ends the call within
 * seconds of it. The call is an acquire that never waits; whatever it
 * returns must be true of the new master: granted there with its token,
 * or refused with an error. Real processes only: tests/harness/sentinels.py
 * (1 master, 2 replicas, 3 sentinels). */
#include "test_common.h"
#include "harness/sentinel_harness.h"
#include "test_sentinel_calls.h"

#define DATA_PASS "data-pw-1"
#define KEY "sentinel-call-in-flight"
#define COMMAND_TIMEOUT_MS 60000
/* from the new master named to the call's end: lookup, connect, ROLE and
 * the call, and a promotion not yet done (calls fail at once meanwhile) */
#define FOLLOW_BOUND_MS 10000

static void test_call_in_flight_to_paused_master_follows_announced_failover(void **state)
{
    (void)state;
    setvbuf(stdout, NULL, _IOLBF, 0);
    rh_sentinels_opts opts = { .data_pass = DATA_PASS, .down_after_ms = 1000,
                               .failover_timeout_ms = 3000 };
    rh_sentinels *g = rh_sentinels_start(&opts);
    assert_non_null(g);
    int old = rh_sentinels_master(g);
    assert_true(old > 0);

    sentinel_call o = { .op = SC_ACQUIRE, .key = KEY, .ttl_ms = 30000 };
    o.c = sentinel_call_client(g, 0, COMMAND_TIMEOUT_MS, KEY "-warm");

    assert_int_equal(rh_sentinels_signal(g, old, 1), 0);
    long long paused = rh_now_ms();
    pthread_t th;
    sentinel_call_start(&o, &th);
    int now_master = rh_sentinels_wait_master_not(g, old, 30000);
    long long named = rh_now_ms();
    assert_true(now_master > 0);

    int ended = RH_WAIT_UNTIL(atomic_load(&o.done), COMMAND_TIMEOUT_MS + 10000);
    long long after = ended ? o.ended_ms - named : -1;
    int has = o.rc == DISTLOCK_OK ? rh_sentinels_has(g, now_master, KEY, o.won) : -2;
    printf("old master %d paused; new master %d named %lld ms later; the call ended %lld ms "
           "after that (bound %d ms; command timeout %d ms): rc %d %s; new master has the "
           "key with its token: %d\n",
           old, now_master, named - paused, after, FOLLOW_BOUND_MS, COMMAND_TIMEOUT_MS, o.rc,
           o.detail, has);
    (void)rh_sentinels_signal(g, old, 0);
    if (ended)
        assert_int_equal(pthread_join(th, NULL), 0);
    distlock_client_free(o.c);
    rh_sentinels_stop(g);
    assert_true(ended);
    assert_true(after < FOLLOW_BOUND_MS);
    if (o.rc == DISTLOCK_OK)
        assert_int_equal(has, 1);
    else
        assert_int_equal(o.rc, DISTLOCK_ECONN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_call_in_flight_to_paused_master_follows_announced_failover),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
