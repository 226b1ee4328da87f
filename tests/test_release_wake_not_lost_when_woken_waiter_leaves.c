/* test_release_wake_not_lost_when_woken_waiter_leaves.c -- "a release wakes
 * the next local waiter" (guarantees.md, "Waiting") also when the waiter the
 * release woke leaves without looking at the key: its own cancel came while
 * its attempt was on the wire, and that attempt ran before the release (it
 * saw the key held). The release's wake was the only one for the key; the
 * waiter behind it (the next in the turns of the client's blocking calls)
 * must then look at once, not at its own re-check 20 s later while the key
 * is free.
 *
 * One real node. The waiting client reaches it through the fault proxy (its
 * attempt's reply is held there), the holders directly. Ordering is by
 * observed conditions only: the held request and reply at the proxy, and a
 * second message published behind the release on another key's channel of
 * the same subscription connection, which wakes a witness waiter whose
 * next sleep the interrupt hook counts: once it slept again, the release's
 * message (before it on the same connection) was handled. */
#include "test_common.h"
#include "test_waiting_threads.h"
#include "harness/faultproxy.h"

#define KEY "lostwake:key"
#define WITNESS_KEY "witness:other"
#define RECHECK_MS 20000
#define WAKE_BOUND_MS 3000

/* Publish on key's channel, as a release does, after an optional DEL. */
static void publish_release(rh_cluster *rc, const char *key, int del)
{
    char ch[256];
    snprintf(ch, sizeof ch, "distlock:%s", key);
    redisReply *r = rh_command(rc, 0, 0, "EVAL %s 1 %s %s %d",
                               "if ARGV[2] == '1' then redis.call('DEL', KEYS[1]) end "
                               "return redis.call('PUBLISH', ARGV[1], '')",
                               key, ch, del);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
}

/* The connection of listener 0 that holds bytes in dir ("up"/"down"), or -1. */
static int conn_holding(fp_proxy *fp, int down)
{
    fp_conn cs[64];
    int n = fp_conns(fp, 0, cs, 64);
    for (int i = 0; i < n; i++)
        if ((down ? cs[i].held_down : cs[i].held_up) > 0)
            return cs[i].id;
    return -1;
}

/* The scenario: `first` (its cancel set here) waits for KEY and is the
 * waiter a release of KEY wakes; `next` waits for KEY behind it; both on the
 * waiting client c (through the proxy). Returns once both ended, with the
 * time from the release to next's win in *after_ms. */
static void woken_waiter_leaves(waiting_thread *first, waiting_thread *next,
                                long long *after_ms)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    rh_cluster *rc = rh_start(1);
    assert_non_null(rc);
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(fp_uris(fp), RECHECK_MS, RECHECK_MS);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, KEY, 60000, 0, 0, &held), DISTLOCK_OK);
    release_witness witness;
    release_witness_start(&witness, rc, holder, c, WITNESS_KEY);

    /* first: subscribed, looked again and asleep; next: behind it, its
     * attempts (none when it joins the first's turns; a first one and one
     * after its subscription otherwise) seen by the node, then asleep */
    distlock_cancel *cancel = NULL;
    assert_rc(distlock_cancel_new(&cancel), DISTLOCK_OK);
    first->c = next->c = c;
    first->cancel = cancel;
    long long a0 = attempt_commands_run(rc, 0);
    waiting_thread_start(first);
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, KEY) == 1 &&
                              attempt_commands_run(rc, 0) >= a0 + 2 &&
                              atomic_load(&first->sleeps) >= 1, 10000));
    a0 = attempt_commands_run(rc, 0);
    waiting_thread_start(next);
    assert_true(RH_WAIT_UNTIL(attempt_commands_run(rc, 0) >= a0 + (next->other_key ? 2 : 0) &&
                              atomic_load(&next->sleeps) >= 1, 10000));

    /* the first's next attempt (woken by a message the holder publishes
     * while it keeps the key) runs on the node, its reply held */
    char hex[64];
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold-match 0 up %s", fp_hex(KEY, hex, sizeof hex)), 0);
    publish_release(rc, KEY, 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held 0 up 1 10000"), 0);
    int conn = conn_holding(fp, 0);
    assert_true(conn > 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold 0:%d down", conn), 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "unhold 0:%d up", conn), 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held 0:%d down 1 10000", conn), 0);

    /* the release (the key is free from here on), then the witness's
     * message behind it on the same subscription connection */
    release_witness_mark(&witness);
    publish_release(rc, KEY, 1);
    long long released = rh_now_ms();
    publish_release(rc, WITNESS_KEY, 0);
    release_witness_woken(&witness);

    /* the first, woken by the release, is cancelled before it sees its
     * (refused) reply: it leaves without another look */
    assert_rc(distlock_cancel_fire(cancel), DISTLOCK_OK);
    assert_int_equal(fp_cmd(fp, NULL, 0, "unhold 0:%d down", conn), 0);
    pthread_join(first->t, NULL);
    waiting_thread_join(next, "next");
    *after_ms = next->done_ms - released;
    printf("# the first waiter: rc %d (%s); the next took the free key %lld ms after the "
           "release (bound %d ms, re-checks %d ms apart)\n",
           first->rc, first->detail, *after_ms, WAKE_BOUND_MS, RECHECK_MS);

    release_witness_stop(&witness);
    distlock_lock_free(held);
    distlock_cancel_free(cancel);
    distlock_client_free(c);
    distlock_client_free(holder);
    fp_stop(fp);
    rh_stop_all(rc);
}

/* Blocking calls taking turns: the first has the turn, the next joined. */
static void test_release_wakes_next_waiter_when_the_woken_one_leaves(void **state)
{
    (void)state;
    waiting_thread first = { .key = KEY, .wait_ms = 40000 };
    waiting_thread next = { .key = KEY, .wait_ms = 40000 };
    long long after = -1;
    woken_waiter_leaves(&first, &next, &after);
    assert_rc(first.rc, DISTLOCK_ECANCELED);
    assert_rc(next.rc, DISTLOCK_OK);
    assert_true(after >= 0 && after < WAKE_BOUND_MS);
}

/* Key sets (no turns: a release wakes the longest waiting one only). */
static void test_release_wakes_next_key_set_when_the_woken_one_leaves(void **state)
{
    (void)state;
    waiting_thread first = { .key = KEY, .other_key = "set:first", .wait_ms = 40000 };
    waiting_thread next = { .key = KEY, .other_key = "set:next", .wait_ms = 40000 };
    long long after = -1;
    woken_waiter_leaves(&first, &next, &after);
    assert_rc(first.rc, DISTLOCK_ECANCELED);
    assert_rc(next.rc, DISTLOCK_OK);
    assert_true(after >= 0 && after < WAKE_BOUND_MS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_wakes_next_waiter_when_the_woken_one_leaves),
        cmocka_unit_test(test_release_wakes_next_key_set_when_the_woken_one_leaves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
