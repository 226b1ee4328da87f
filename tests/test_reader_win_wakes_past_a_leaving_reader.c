/* test_reader_win_wakes_past_a_leaving_reader.c -- read locks waiting
 * behind a writer all enter at its release, one after the other
 * (guarantees.md, "Waiting threads of one client take turns": a read lock
 * won wakes the next at once, since it may share the key), also when the
 * next one leaves before it looked (cancelled by the interrupt hook): the
 * one after it then looks at once, not at its own re-check 20 s later while
 * it could share the key.
 *
 * One real node; three readers on threads of one client, the writer
 * another client. Ordering by observed conditions: the second reader is
 * held inside the interrupt hook (the client's, asked before each sleep)
 * from its first sleep until the first reader has won; then the hook
 * answers "cancel" for it. */
#include "test_common.h"
#include "test_waiting_threads.h"

#define KEY "readers:leaving"
#define RECHECK_MS 20000
#define WAKE_BOUND_MS 3000

/* A reader held in the hook: entered once it is in, let go with verdict. */
typedef struct hook_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered, open, verdict;
} hook_gate;

/* As waiting_thread_hook, and a thread whose arg is a gate waits there at
 * its first call until the test opens it, then answers its verdict. */
static int gated_hook(void *arg)
{
    (void)arg;
    waiting_thread *self = waiting_thread_self;
    if (self == NULL)
        return 0;
    atomic_fetch_add(&self->sleeps, 1);
    hook_gate *g = self->arg;
    if (g == NULL)
        return 0;
    pthread_mutex_lock(&g->mu);
    g->entered = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->open)
        pthread_cond_wait(&g->cv, &g->mu);
    int verdict = g->verdict;
    pthread_mutex_unlock(&g->mu);
    return verdict;
}

static int gate_entered(hook_gate *g)
{
    pthread_mutex_lock(&g->mu);
    int e = g->entered;
    pthread_mutex_unlock(&g->mu);
    return e;
}

static void test_readers_enter_past_a_reader_that_leaves_before_it_looked(void **state)
{
    (void)state;
    setvbuf(stdout, NULL, _IOLBF, 0);
    rh_cluster *rc = rh_start(1);
    assert_non_null(rc);
    distlock_client *writer = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), RECHECK_MS, RECHECK_MS);
    assert_rc(distlock_client_on_interrupt(c, gated_hook, NULL), DISTLOCK_OK);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(writer, KEY, 60000, 0, 0, &held), DISTLOCK_OK);

    hook_gate gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0 };
    waiting_thread r[3];
    for (int i = 0; i < 3; i++)
        r[i] = (waiting_thread){ .c = c, .key = KEY, .wait_ms = 40000,
                                 .flags = DISTLOCK_SHARED, .keep = 1,
                                 .ttl_ms = 60000 };
    r[1].arg = &gate;
    /* r0 has the turn (looked twice: its first attempt, then after its
     * subscription); r1 joins and is held in the hook before its first
     * sleep; r2 joins behind it and sleeps */
    long long a0 = attempt_commands_run(rc, 0);
    waiting_thread_start(&r[0]);
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, KEY) == 1 &&
                              attempt_commands_run(rc, 0) >= a0 + 2 &&
                              atomic_load(&r[0].sleeps) >= 1, 10000));
    waiting_thread_start(&r[1]);
    assert_true(RH_WAIT_UNTIL(gate_entered(&gate), 10000));
    waiting_thread_start_sleeping(&r[2]);

    /* the writer's release: r0 looks and wins its read lock (kept) */
    assert_rc(distlock_release(held), DISTLOCK_OK);
    long long released = rh_now_ms();
    assert_true(RH_WAIT_UNTIL(atomic_load(&r[0].done), 10000));
    assert_rc(r[0].rc, DISTLOCK_OK);

    /* r1 leaves (its hook says cancel) without a look */
    pthread_mutex_lock(&gate.mu);
    gate.verdict = 1;
    gate.open = 1;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
    pthread_join(r[1].t, NULL);
    waiting_thread_join(&r[2], "r2");
    long long after = r[2].done_ms - r[1].done_ms;
    printf("# r0 won %lld ms after the release; r1: rc %d (%s); r2 took its read lock %lld ms "
           "after r1 left (bound %d ms, re-checks %d ms apart)\n",
           r[0].done_ms - released, r[1].rc, r[1].detail, after, WAKE_BOUND_MS, RECHECK_MS);

    pthread_join(r[0].t, NULL);
    waiting_thread_drop_lock(&r[0]);
    waiting_thread_drop_lock(&r[2]);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(writer);
    rh_stop_all(rc);
    assert_rc(r[1].rc, DISTLOCK_ECANCELED);
    assert_rc(r[2].rc, DISTLOCK_OK);
    /* (r2, woken as r1 leaves, may return before r1's own return is
     * timed: a small negative `after` is that, not an early entry) */
    assert_true(after < WAKE_BOUND_MS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readers_enter_past_a_reader_that_leaves_before_it_looked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
