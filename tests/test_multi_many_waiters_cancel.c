/* test_multi_many_waiters_cancel.c -- many waiters of one key in one multi
 * (docs/non-blocking.md: "ten thousand waiters of one key in one process
 * cost one attempt on the wire and one subscription") are cancelled, and
 * their ops freed, without one distlock_multi_perform() (or free) holding
 * the event loop for seconds: the work is linear in the waiters.
 *
 * 50000 acquires of a key another client holds; distlock_client_cancel()
 * ends them all in the next performs. Linear work is tens of ms here; the
 * bound below (1.5 s for the longest perform, 1.5 s for the frees) leaves
 * room for a loaded machine and a sanitizer build. Then the same waiters
 * cancelled one by one, and freed newest first. One node. */
#include "test_common.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { N = 50000 };
#define BOUND_US 1500000LL

static long long now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}

/* Every op ended; the longest perform meanwhile. */
static long long end_all(distlock_multi *m)
{
    long long longest = 0, end = rh_now_ms() + 60000;
    int running;
    do {
        assert_true(rh_now_ms() < end);
        struct pollfd p = { distlock_multi_fd(m), POLLIN, 0 };
        long t = distlock_multi_timeout(m);
        (void)poll(&p, 1, t < 0 || t > 100 ? 100 : (int)t);
        long long a = now_us();
        running = distlock_multi_perform(m);
        long long d = now_us() - a;
        if (d > longest)
            longest = d;
        assert_true(running >= 0);
    } while (running > 0);
    return longest;
}

static void start_waiters(distlock_multi *m, distlock_op **ops)
{
    for (int i = 0; i < N; i++)
        assert_rc(distlock_multi_acquire(m, "mmw:k", 10000, 120000, 0, NULL, &ops[i]),
                  DISTLOCK_OK);
    /* the first is on the wire, then waits: a few turns */
    for (int k = 0; k < 5; k++) {
        struct pollfd p = { distlock_multi_fd(m), POLLIN, 0 };
        (void)poll(&p, 1, 20);
        assert_int_equal(distlock_multi_perform(m), N);
    }
}

static void test_many_waiters_cancelled_and_freed_in_linear_time(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = NULL, *holder = NULL;
    distlock_multi *m = NULL;
    distlock_lock *l = NULL;
    distlock_op **ops = calloc(N, sizeof(*ops));
    assert_non_null(ops);
    assert_rc(distlock_client_new(rh_uris(rc), &c), DISTLOCK_OK);
    assert_rc(distlock_client_new(rh_uris(rc), &holder), DISTLOCK_OK);
    assert_rc(distlock_acquire(holder, "mmw:k", 120000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);

    /* a client cancel */
    start_waiters(m, ops);
    assert_rc(distlock_client_cancel(c), DISTLOCK_OK);
    long long by_client = end_all(m);
    for (int i = 0; i < N; i++)
        assert_int_equal(distlock_op_status(ops[i]), DISTLOCK_ECANCELED);
    long long a = now_us();
    for (int i = 0; i < N; i++)
        distlock_op_free(ops[i]);
    long long free_oldest = now_us() - a;

    /* each op cancelled, newest first; freed newest first (not handed out) */
    start_waiters(m, ops);
    for (int i = N - 1; i >= 0; i--)
        distlock_op_cancel(ops[i]);
    long long by_op = end_all(m);
    a = now_us();
    for (int i = N - 1; i >= 0; i--)
        distlock_op_free(ops[i]);
    long long free_newest = now_us() - a;

    printf("%d waiters of one key: longest perform after a client cancel %lld ms, after "
           "cancelling each %lld ms; freeing the ended ops oldest first %lld ms, newest first "
           "%lld ms\n", N, by_client / 1000, by_op / 1000, free_oldest / 1000,
           free_newest / 1000);
    distlock_multi_free(m);
    distlock_lock_free(l);
    distlock_client_free(holder);
    distlock_client_free(c);
    free(ops);
    assert_true(by_client < BOUND_US);
    assert_true(by_op < BOUND_US);
    assert_true(free_oldest < BOUND_US);
    assert_true(free_newest < BOUND_US);
}

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_waiters_cancelled_and_freed_in_linear_time),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
