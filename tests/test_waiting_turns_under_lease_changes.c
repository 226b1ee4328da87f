/* test_waiting_turns_under_lease_changes.c -- while blocking calls of one
 * client take turns on a key, a waiter without the turn re-checks no later
 * than the end of the holder's lease as the one with the turn last saw it
 * (guarantees.md, "Waiting threads of one client take turns"), also when
 * that lease changed after the waiter went to sleep: the key was released
 * and taken by another owner with a shorter lease, the one with the turn
 * saw it and then gave up at its deadline, and the new owner's lease ends
 * without a release (its process died). Re-checks are 20 s apart, so a
 * waiter left to its own timer shows. The waiters ask for fencing tokens,
 * whose acquire script tells the holder's TTL when it refuses (a plain
 * SET NX tells none: no cap then, guarantees.md). And the others are not
 * woken while the one with the turn sees the same lease again and again,
 * only once by a shorter one (counted, no clock involved).
 * One real node; waiters on threads of one client, the holders others. */
#include "test_common.h"
#include "test_wake_waiter.h"
#include "test_waiting_threads.h"

DEFINE_GROUP(1)

/* Every waiter's flags: fencing, whose refusal tells the holder's TTL, so
 * the cap on the timers applies (above). */
static const unsigned waiter_flags = DISTLOCK_FENCING;

/* Start the waiter that gets the turn (the first on the key) and return
 * once it subscribed, looked (saw the holder's lease) and slept. */
static void start_turn_holder(rh_cluster *rc, waiting_thread *first, long timeout_ms)
{
    waiting_thread_start(first);
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, first->key) == 1 &&
                              atomic_load(&first->sleeps) >= 2, timeout_ms));
}

/* Another owner takes the key over in one step (the release of the first
 * and the acquire of the next, as two processes racing would leave it),
 * with a lease of lease_ms, and the release is published, so the waiter
 * with the turn looks again and sees the new lease. */
static void hand_over(rh_cluster *rc, const char *key, long lease_ms)
{
    char ch[256];
    snprintf(ch, sizeof ch, "distlock:%s", key);
    redisReply *r = rh_command(rc, 0, 0,
                               "EVAL %s 1 %s %s %ld",
                               "redis.call('DEL', KEYS[1]) "
                               "redis.call('SET', KEYS[1], 'other-owner', 'PX', ARGV[2]) "
                               "return redis.call('PUBLISH', ARGV[1], '')",
                               key, ch, lease_ms);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
}

/* The key is held for a minute; two threads wait (fencing), re-checks 20 s apart:
 * the first (with the turn) for 5 s, the second for 30 s. The key is
 * handed to another owner with a lease that ends 3 s after the first's
 * deadline (5 s leave the first the time to subscribe and look on a loaded
 * machine); the first sees it, gives up at its deadline, and the new owner
 * never releases. The second takes the key at that lease's end, not at its
 * own 20 s timer. */
static void test_waiter_without_turn_takes_key_at_a_shorter_lease_seen_later(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turns:lease-shortened";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 20000, 20000);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 60000, 0, 0, &held), DISTLOCK_OK);

    waiting_thread first = { .c = c, .key = key, .wait_ms = 5000, .flags = waiter_flags };
    start_turn_holder(rc, &first, 10000);
    waiting_thread next = { .c = c, .key = key, .wait_ms = 30000, .flags = waiter_flags };
    waiting_thread_start_sleeping(&next);

    long long lease_end = first.started_ms + first.wait_ms + 3000;
    hand_over(rc, key, (long)(lease_end - rh_now_ms()));
    pthread_join(first.t, NULL);
    assert_rc(first.rc, DISTLOCK_NOTACQUIRED);
    /* the first gave up while the new lease still ran */
    assert_true(rh_pttl(rc, 0, 0, key) > 0);
    waiting_thread_join(&next, "next");
    printf("# the next waiter took the key %lld ms after the new owner's lease ended "
           "(re-checks 20000 ms apart)\n", next.done_ms - lease_end);
    assert_rc(next.rc, DISTLOCK_OK);
    assert_true(next.done_ms - lease_end < 2000);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(holder);
}

static void publish_release(rh_cluster *rc, const char *key)
{
    redisReply *r = rh_command(rc, 0, 0, "PUBLISH distlock:%s %s", key, "");
    assert_non_null(r);
    freeReplyObject(r);
}

/* The one with the turn looks once more: a release that frees nothing (a
 * PUBLISH alone) wakes it, it tries, sees the key held, and sleeps again
 * (its sleep counted by the interrupt hook, which it asks after its look
 * was recorded for the others). */
static void turn_holder_looks(rh_cluster *rc, const char *key, waiting_thread *first)
{
    int seen = atomic_load(&first->sleeps);
    publish_release(rc, key);
    assert_true(RH_WAIT_UNTIL(atomic_load(&first->sleeps) > seen, 60000));
}

/* The timers set again (above) are those of the waiters whose timer is
 * later than the lease seen: while the one with the turn keeps seeing the
 * same lease, the others sleep on, however often it looks (no local herd);
 * a shorter lease sets each later timer again, once. Counted without a
 * clock: each sleep of a waiter's thread is counted (the interrupt hook),
 * and a waiter without the turn sleeps once when it arrives, then only
 * when woken (its timer is minutes away; releases wake the one with the
 * turn only). Re-checks 300-600 s apart, a lease of an hour: no timer
 * reaches the lease's end, so the end seen moving by the few ms that a
 * reply read late adds can wake nobody; the shorter lease (200 s) ends
 * before every timer. */
static void test_waiters_without_turn_sleep_on_while_the_lease_seen_stays(void **state)
{
    enum { OTHERS = 4, LOOKS = 10 };
    rh_cluster *rc = *state;
    const char *key = "turns:lease-stays";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 600000, 600000);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 3600000, 0, 0, &held), DISTLOCK_OK);

    waiting_thread first = { .c = c, .key = key, .wait_ms = 3600000, .flags = waiter_flags };
    start_turn_holder(rc, &first, 60000);
    waiting_thread w[OTHERS];
    for (int i = 0; i < OTHERS; i++) {
        w[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 3600000, .flags = waiter_flags };
        waiting_thread_start(&w[i]);
        assert_true(RH_WAIT_UNTIL(atomic_load(&w[i].sleeps) >= 1, 60000));
    }
    for (int k = 0; k < LOOKS; k++)
        turn_holder_looks(rc, key, &first);
    int woken = 0;
    for (int i = 0; i < OTHERS; i++) {
        assert_false(atomic_load(&w[i].done));
        woken += atomic_load(&w[i].sleeps) - 1;
    }
    printf("# the one with the turn looked %d times at the same lease; the %d others woke %d "
           "times\n", LOOKS, OTHERS, woken);
    assert_int_equal(woken, 0);

    /* another owner, a lease of 200 s: the one with the turn sees it (the
     * hand-over publishes), each other is woken once and sets its timer
     * at that lease's end (no later wake: the next look or timer is the
     * test's or minutes away) */
    int looks = atomic_load(&first.sleeps);
    hand_over(rc, key, 200000);
    assert_true(RH_WAIT_UNTIL(atomic_load(&first.sleeps) > looks, 60000));
    for (int i = 0; i < OTHERS; i++)
        assert_true(RH_WAIT_UNTIL(atomic_load(&w[i].sleeps) >= 2, 60000));
    woken = 0;
    for (int i = 0; i < OTHERS; i++) {
        assert_false(atomic_load(&w[i].done));
        woken += atomic_load(&w[i].sleeps) - 1;
    }
    printf("# a shorter lease seen: the %d others woke %d times (once each)\n", OTHERS, woken);
    assert_int_equal(atomic_load(&first.sleeps), looks + 1);
    for (int i = 0; i < OTHERS; i++)
        assert_int_equal(atomic_load(&w[i].sleeps), 2);

    assert_rc(distlock_client_cancel(c), DISTLOCK_OK);
    pthread_join(first.t, NULL);
    assert_rc(first.rc, DISTLOCK_ECANCELED);
    for (int i = 0; i < OTHERS; i++) {
        pthread_join(w[i].t, NULL);
        assert_rc(w[i].rc, DISTLOCK_ECANCELED);
    }
    node_command_ok(rc, 0, "DEL %s", key);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(holder);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_waiter_without_turn_takes_key_at_a_shorter_lease_seen_later,
                               heal),
        cmocka_unit_test_setup(test_waiters_without_turn_sleep_on_while_the_lease_seen_stays, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
