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

#include <pthread.h>
#include <stdatomic.h>

DEFINE_GROUP(1)

struct waiter {
    distlock_client *c;
    const char *key;
    long wait_ms;
    pthread_t t;
    int rc;
    long long done_ms;
    char detail[256];
    atomic_int sleeps;  /* sleeps its wait began (the interrupt hook counts) */
    atomic_int done;
};

static __thread struct waiter *self;

/* The interrupt hook: never interrupts, counts the calling thread's sleeps
 * so that the test sees each thread wait (a queued call sends nothing). */
static int count_sleeps(void *arg)
{
    (void)arg;
    if (self)
        atomic_fetch_add(&self->sleeps, 1);
    return 0;
}

static void *waiter_main(void *p)
{
    struct waiter *w = p;
    distlock_lock *l = NULL;
    self = w;
    /* fencing: the refusal tells the holder's TTL (the script's PTTL; a
     * plain SET NX does not), so the cap on the timers applies */
    w->rc = distlock_acquire(w->c, w->key, 10000, w->wait_ms, DISTLOCK_FENCING, &l);
    w->done_ms = rh_now_ms();
    snprintf(w->detail, sizeof w->detail, "%s", w->rc == DISTLOCK_OK ? "" : distlock_last_error());
    atomic_store(&w->done, 1);
    if (l && distlock_release(l) != DISTLOCK_OK)
        w->rc = -100;
    distlock_lock_free(l);
    return NULL;
}

static void start(struct waiter *w)
{
    atomic_init(&w->done, 0);
    atomic_init(&w->sleeps, 0);
    w->rc = -99;
    assert_int_equal(pthread_create(&w->t, NULL, waiter_main, w), 0);
}

static long long pttl(rh_cluster *rc, const char *key)
{
    redisReply *r = rh_command(rc, 0, 0, "PTTL %s", key);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -3;
    if (r)
        freeReplyObject(r);
    return v;
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
 * the first (with the turn) for 1.5 s, the second for 30 s. The key is
 * handed to another owner with a 2.5 s lease; the first sees it, gives up
 * at its deadline, and the new owner never releases. The second takes the
 * key at that lease's end, not at its own 20 s timer. */
static void test_waiter_without_turn_takes_key_at_a_shorter_lease_seen_later(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turns:lease-shortened";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MIN_MS, 20000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MAX_MS, 20000), DISTLOCK_OK);
    assert_rc(distlock_client_on_interrupt(c, count_sleeps, NULL), DISTLOCK_OK);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 60000, 0, 0, &held), DISTLOCK_OK);

    struct waiter first = { .c = c, .key = key, .wait_ms = 1500 };
    start(&first);
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 1 &&
                              atomic_load(&first.sleeps) >= 2, 10000));
    struct waiter next = { .c = c, .key = key, .wait_ms = 30000 };
    start(&next);
    assert_true(RH_WAIT_UNTIL(atomic_load(&next.sleeps) >= 1 || atomic_load(&next.done), 10000));
    assert_false(atomic_load(&next.done));

    hand_over(rc, key, 2500);
    long long lease_end = rh_now_ms() + 2500;
    pthread_join(first.t, NULL);
    assert_rc(first.rc, DISTLOCK_NOTACQUIRED);
    /* the first gave up while the new lease still ran */
    assert_true(pttl(rc, key) > 0);
    pthread_join(next.t, NULL);
    printf("# the next waiter took the key %lld ms after the new owner's lease ended "
           "(re-checks 20000 ms apart)\n", next.done_ms - lease_end);
    if (next.rc != DISTLOCK_OK)
        print_error("next: %d (%s)\n", next.rc, next.detail);
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
static void turn_holder_looks(rh_cluster *rc, const char *key, struct waiter *first)
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
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MIN_MS, 600000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MAX_MS, 600000), DISTLOCK_OK);
    assert_rc(distlock_client_on_interrupt(c, count_sleeps, NULL), DISTLOCK_OK);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 3600000, 0, 0, &held), DISTLOCK_OK);

    struct waiter first = { .c = c, .key = key, .wait_ms = 3600000 };
    start(&first);
    /* subscribed, then looked (and saw the hour's lease) and slept */
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 1 &&
                              atomic_load(&first.sleeps) >= 2, 60000));
    struct waiter w[OTHERS];
    for (int i = 0; i < OTHERS; i++) {
        w[i] = (struct waiter){ .c = c, .key = key, .wait_ms = 3600000 };
        start(&w[i]);
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
