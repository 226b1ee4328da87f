/* test_blocking_waiters_take_turns.c -- blocking calls of one client
 * waiting for one key take turns: only the longest-waiting one re-checks
 * (the others send nothing), a release wakes it, and when it leaves (it
 * won, gave up, was cancelled) the next has the turn at its next re-check,
 * so no waiter is left to its deadline. Read locks waiting behind a writer
 * all enter at its release (a read lock won wakes the next at once).
 * One real node; waiters on threads of one client, the holder another. */
#include "test_common.h"
#include "test_wake_waiter.h"
#include "test_waiting_threads.h"

#define NTHREADS 8

DEFINE_GROUP(1)

/* Eight threads of one client wait for a key another client holds; re-checks
 * 25-50 ms apart. Over a second, node 0 sees the attempts of one waiter (the
 * longest-waiting), not of eight. Then the holder's release serves all eight
 * one after another, each once, never two at a time. */
static void test_waiting_threads_send_one_attempt_at_a_time(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turns:one-on-the-wire";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 50, 50);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);

    atomic_int inside, overlaps;
    atomic_init(&inside, 0);
    atomic_init(&overlaps, 0);
    waiting_thread w[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 20000, .inside = &inside,
                                 .overlaps = &overlaps };
        waiting_thread_start(&w[i]);
    }
    /* every thread waits (its first attempt refused, or queued behind the
     * one with the turn without one), and the client is subscribed */
    assert_true(RH_WAIT_UNTIL(waiting_threads_all_sleeping(w, NTHREADS), 10000));
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 1, 10000));
    long long t0 = rh_now_ms(), at0 = attempt_commands_run(rc, 0);
    long long t1 = t0;
    while ((t1 = rh_now_ms()) - t0 < 1000)
        rh_sleep_ms(20);  /* the window measured (no event ends it) */
    long long sent = attempt_commands_run(rc, 0) - at0;
    long long window = t1 - t0;
    printf("# %d threads waiting: %lld attempts in %lld ms (one waiter re-checking every "
           "25-50 ms sends at most %lld)\n",
           NTHREADS, sent, window, window / 25 + 2);
    for (int i = 0; i < NTHREADS; i++)
        assert_false(atomic_load(&w[i].done));
    assert_true(sent >= 1);
    assert_true(sent <= window / 25 + 2);

    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(w[i].t, NULL);
        if (w[i].rc != DISTLOCK_OK)
            print_error("waiter %d: %d (%s)\n", i, w[i].rc, w[i].detail);
        assert_rc(w[i].rc, DISTLOCK_OK);
    }
    assert_int_equal(atomic_load(&overlaps), 0);
    assert_holding(rc, key, NULL, 0);
    distlock_client_free(c);
    distlock_client_free(holder);
}

/* Re-checks 5 s apart: only releases can serve eight waiting threads in
 * less. Each winner releases at once; its release wakes the next waiter,
 * which got the turn when the winner left (to wait for that release). */
static void test_release_hands_over_to_the_next_waiting_thread(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turns:handover";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 5000, 5000);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    atomic_int inside, overlaps;
    atomic_init(&inside, 0);
    atomic_init(&overlaps, 0);
    waiting_thread w[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 30000, .inside = &inside,
                                 .overlaps = &overlaps };
        waiting_thread_start(&w[i]);
    }
    assert_true(RH_WAIT_UNTIL(waiting_threads_all_sleeping(w, NTHREADS), 10000));
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 1, 10000));
    long long released = 0;
    assert_true(release_ok_started_at(held, &released));
    distlock_lock_free(held);
    long long last = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(w[i].t, NULL);
        if (w[i].rc != DISTLOCK_OK)
            print_error("waiter %d: %d (%s)\n", i, w[i].rc, w[i].detail);
        assert_rc(w[i].rc, DISTLOCK_OK);
        if (w[i].done_ms > last)
            last = w[i].done_ms;
    }
    printf("# %d threads served %lld ms after the release (re-checks 5000 ms apart)\n", NTHREADS,
           last - released);
    assert_int_equal(atomic_load(&overlaps), 0);
    assert_true(last - released < 4000);
    distlock_client_free(c);
    distlock_client_free(holder);
}

/* The longest-waiting thread gives up (its wait ends) while the key is
 * still held: the next has the turn at its next re-check (50 ms) and takes
 * the key when the holder's lease ends (1.5 s), long before its own
 * deadline (20 s), when a waiter without the turn looks. */
static void test_turn_passes_when_the_longest_waiter_gives_up(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turns:gives-up";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 50, 50);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 1500, 0, 0, &held), DISTLOCK_OK);
    long long expires = rh_now_ms() + 1500;
    waiting_thread first = { .c = c, .key = key, .wait_ms = 400 };
    waiting_thread_start(&first);
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 1 || atomic_load(&first.done), 10000));
    waiting_thread next = { .c = c, .key = key, .wait_ms = 20000 };
    waiting_thread_start(&next);
    pthread_join(first.t, NULL);
    pthread_join(next.t, NULL);
    printf("# the first waiter: %d (%s); the next took the key %lld ms after the holder's lease "
           "ended (its deadline: 20000 ms after it began)\n",
           first.rc, distlock_strerror(first.rc), next.done_ms - expires);
    assert_rc(first.rc, DISTLOCK_NOTACQUIRED);
    if (next.rc != DISTLOCK_OK)
        print_error("next: %d (%s)\n", next.rc, next.detail);
    assert_rc(next.rc, DISTLOCK_OK);
    assert_true(next.done_ms - expires < 5000);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(holder);
}

/* Read locks of eight threads wait behind a writer; re-checks 5 s apart.
 * The writer's release lets all of them in together: a read lock won
 * passes the turn on at once (others may share the key). */
static void test_waiting_readers_all_enter_at_a_release(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turns:readers";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 5000, 5000);
    distlock_lock *writer = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &writer), DISTLOCK_OK);
    waiting_thread w[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        /* read locks are kept, released by the test once all are in */
        w[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 30000, .flags = DISTLOCK_SHARED,
                                 .keep = 1 };
        waiting_thread_start(&w[i]);
    }
    assert_true(RH_WAIT_UNTIL(waiting_threads_all_sleeping(w, NTHREADS), 10000));
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 1, 10000));
    long long released = 0;
    assert_true(release_ok_started_at(writer, &released));
    distlock_lock_free(writer);
    distlock_lock *reader[NTHREADS];
    long long last = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(w[i].t, NULL);
        reader[i] = w[i].lock;
        if (w[i].rc != DISTLOCK_OK)
            print_error("reader %d: %d (%s)\n", i, w[i].rc, w[i].detail);
        assert_rc(w[i].rc, DISTLOCK_OK);
        if (w[i].done_ms > last)
            last = w[i].done_ms;
    }
    printf("# %d read locks held together %lld ms after the writer's release\n", NTHREADS,
           last - released);
    assert_true(last - released < 4000);
    for (int i = 0; i < NTHREADS; i++) {
        assert_rc(distlock_release(reader[i]), DISTLOCK_OK);
        distlock_lock_free(reader[i]);
    }
    distlock_client_free(c);
    distlock_client_free(holder);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_waiting_threads_send_one_attempt_at_a_time, heal),
        cmocka_unit_test_setup(test_release_hands_over_to_the_next_waiting_thread, heal),
        cmocka_unit_test_setup(test_turn_passes_when_the_longest_waiter_gives_up, heal),
        cmocka_unit_test_setup(test_waiting_readers_all_enter_at_a_release, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
