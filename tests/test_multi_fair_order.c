/* test_multi_fair_order.c -- DISTLOCK_FAIR acquires through a multi keep
 * their order across processes (distlock.h: a fair acquire joins the
 * servers' queue at once, the multi's local queue is for non-fair ones).
 *
 * A key is held; a multi starts fair waiters A1 then A2; then another
 * client's multi (another process, as far as the servers can tell) starts
 * fair waiter B. Each joins the servers' queue when it starts. The holder
 * releases: the grants come in the order A1, A2, B -- B does not overtake
 * A2 because A2 waited its turn in its own process. One node. */
#include "test_common.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

#define KEY "mfo:k"

static long long queue_len(rh_cluster *rc)
{
    redisReply *r = rh_command(rc, 0, 0, "ZCARD {%s}:q", KEY);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

/* One turn of both loops (the test's own poll loop over two descriptors). */
static void turn(distlock_multi *m1, distlock_multi *m2)
{
    struct pollfd p[2] = { { distlock_multi_fd(m1), POLLIN, 0 },
                           { distlock_multi_fd(m2), POLLIN, 0 } };
    long t1 = distlock_multi_timeout(m1), t2 = distlock_multi_timeout(m2), t = 20;
    if (t1 >= 0 && t1 < t)
        t = t1;
    if (t2 >= 0 && t2 < t)
        t = t2;
    (void)poll(p, 2, (int)t);
    assert_true(distlock_multi_perform(m1) >= 0);
    assert_true(distlock_multi_perform(m2) >= 0);
}

/* Drive both until the servers' queue holds n waiters (fail after 10 s). */
static void until_queued(rh_cluster *rc, distlock_multi *m1, distlock_multi *m2, long long n,
                         const char *who)
{
    long long end = rh_now_ms() + 10000;
    while (queue_len(rc) < n) {
        if (rh_now_ms() > end) {
            print_error("%s never joined the servers' queue (%lld waiters there, %lld "
                        "expected)\n", who, queue_len(rc), n);
            fail();
        }
        turn(m1, m2);
    }
}

static void test_fair_waiters_of_a_multi_keep_their_order_across_clients(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder = NULL, *c1 = NULL, *c2 = NULL;
    distlock_multi *m1 = NULL, *m2 = NULL;
    distlock_lock *held = NULL;
    distlock_op *ops[3] = { NULL, NULL, NULL };
    const char *names[3] = { "A1", "A2", "B" };
    assert_rc(distlock_client_new(rh_uris(rc), &holder), DISTLOCK_OK);
    assert_rc(distlock_client_new(rh_uris(rc), &c1), DISTLOCK_OK);
    assert_rc(distlock_client_new(rh_uris(rc), &c2), DISTLOCK_OK);
    assert_rc(distlock_multi_new(c1, &m1), DISTLOCK_OK);
    assert_rc(distlock_multi_new(c2, &m2), DISTLOCK_OK);
    assert_rc(distlock_acquire(holder, KEY, 30000, 0, 0, &held), DISTLOCK_OK);

    assert_rc(distlock_multi_acquire(m1, KEY, 10000, 20000, DISTLOCK_FAIR, NULL, &ops[0]),
              DISTLOCK_OK);
    until_queued(rc, m1, m2, 1, "A1");
    assert_rc(distlock_multi_acquire(m1, KEY, 10000, 20000, DISTLOCK_FAIR, NULL, &ops[1]),
              DISTLOCK_OK);
    until_queued(rc, m1, m2, 2, "A2 (the multi's second fair waiter)");
    assert_rc(distlock_multi_acquire(m2, KEY, 10000, 20000, DISTLOCK_FAIR, NULL, &ops[2]),
              DISTLOCK_OK);
    until_queued(rc, m1, m2, 3, "B");
    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);

    /* each winner releases at once; the order of the grants is recorded */
    int order[3], got = 0;
    long long end = rh_now_ms() + 20000;
    while (got < 3) {
        assert_true(rh_now_ms() < end);
        turn(m1, m2);
        for (int i = 0; i < 3; i++) {
            if (ops[i] == NULL || !distlock_op_done(ops[i]))
                continue;
            int st = distlock_op_status(ops[i]);
            printf("%s ended %d (%s) %s\n", names[i], st, distlock_strerror(st),
                   distlock_op_error(ops[i]));
            assert_rc(st, DISTLOCK_OK);
            distlock_lock *l = distlock_op_take_lock(ops[i]);
            assert_non_null(l);
            assert_rc(distlock_release(l), DISTLOCK_OK);
            distlock_lock_free(l);
            distlock_op_free(ops[i]);
            ops[i] = NULL;
            order[got++] = i;
        }
    }
    printf("grants in the order %s, %s, %s\n", names[order[0]], names[order[1]],
           names[order[2]]);
    distlock_multi_free(m1);
    distlock_multi_free(m2);
    distlock_client_free(holder);
    distlock_client_free(c1);
    distlock_client_free(c2);
    assert_int_equal(order[0], 0);
    assert_int_equal(order[1], 1);
    assert_int_equal(order[2], 2);
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
        cmocka_unit_test(test_fair_waiters_of_a_multi_keep_their_order_across_clients),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
