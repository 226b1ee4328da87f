/* test_release_retry_after_node_down.c -- a release that got no verdict
 * (ENOQUORUM: a node was down) leaves the handle releasable (handle.c:
 * "the key may still hold our token"); retried once the node is back, it
 * deletes what our first try left and must say released, not "not held
 * with this token: expired, lost or already released" -- the nodes our
 * own first try emptied answer "not ours" on the retry.
 *   - a plain lock on 3 nodes (quorum 2) with 2 nodes down on the first try,
 *     both back for the retry, or only one of them;
 *   - a set of two keys, the same with one node still down;
 *   - a semaphore permit on 3 nodes, P = 2 (k = 3: every node), with 1 down.
 * Nodes run with appendonly (rh_start_aof): a restarted node keeps the
 * lease, as a node back from a network partition does. */
#include "test_common.h"

#include <time.h>

#define N 3

static int group_setup(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    rh_cluster *rc = rh_start_aof(N);
    if (!rc)
        return -1;
    *state = rc;
    return 0;
}

static int group_teardown(void **state)
{
    rh_stop_all(*state);
    return 0;
}

static int heal(void **state) { return rh_heal(*state) == 0 ? 0 : -1; }

static distlock_client *client3(const rh_cluster *rc)
{
    char buf[1024];
    distlock_client *c = new_client(rh_uris_mask(rc, 7u, buf, sizeof buf));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 500), DISTLOCK_OK);
    /* release_then_retry() waits for the lease on every node: each
     * connection up first (a first round may end at the quorum, its request
     * to a node still connecting unsent, and that node would never get it) */
    connect_every_node(rc, c, "retry:connect");
    return c;
}

static long long exists_on(const rh_cluster *rc, int i, const char *key)
{
    redisReply *r = rh_command(rc, i, 0, "EXISTS %s", key);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

/* A node restarted from its AOF answers LOADING until it has read it:
 * poll (with a deadline) until it answers a command. */
static void wait_loaded(const rh_cluster *rc, int i)
{
    struct timespec t0, now, pause = { 0, 2000000 };
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        redisReply *r = rh_command(rc, i, 0, "EXISTS distlock-test-probe");
        int ready = r && r->type == REDIS_REPLY_INTEGER;
        if (r)
            freeReplyObject(r);
        if (ready)
            return;
        clock_gettime(CLOCK_MONOTONIC, &now);
        assert_true(now.tv_sec - t0.tv_sec < 20);  /* loaded within 20 s */
        nanosleep(&pause, NULL);
    }
}

static void release_then_retry(const rh_cluster *rc_, distlock_client *c, distlock_lock *l,
                               const char *key, const int *down, int ndown, int nback)
{
    rh_cluster *rc = (rh_cluster *)rc_;
    /* an acquire returns once a quorum granted: the last node's grant may
     * still be on its way; the nodes killed below must hold the lease */
    struct timespec t0, now, pause = { 0, 2000000 };
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < N; i++)
        while (exists_on(rc, i, key) != 1) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            assert_true(now.tv_sec - t0.tv_sec < 20);  /* granted on every node within 20 s */
            nanosleep(&pause, NULL);
        }
    for (int d = 0; d < ndown; d++)
        assert_int_equal(rh_kill(rc, down[d]), 0);
    int r = distlock_release(l);
    printf("# first release, %d node(s) down: %s (%s)\n", ndown, distlock_strerror(r),
           distlock_last_error());
    assert_true(r != DISTLOCK_OK && r != DISTLOCK_ENOTOWNER);
    for (int d = 0; d < nback; d++) {
        assert_int_equal(rh_restart(rc, down[d]), 0);
        wait_loaded(rc, down[d]);
        assert_int_equal(exists_on(rc, down[d], key), 1);  /* our lease is still there */
    }
    r = distlock_release(l);
    printf("# retried release, %d of them back: %s (%s)\n", nback, distlock_strerror(r),
           r == DISTLOCK_OK ? "" : distlock_last_error());
    for (int i = 0; i < N; i++)
        if (i != down[nback < ndown ? nback : 0] || nback == ndown)
            assert_int_equal(exists_on(rc, i, key), 0);
    assert_rc(r, DISTLOCK_OK);
    /* the node left down comes back loaded here: the next test's heal
     * would otherwise FLUSHALL a node still loading its AOF */
    for (int d = nback; d < ndown; d++) {
        assert_int_equal(rh_restart(rc, down[d]), 0);
        wait_loaded(rc, down[d]);
    }
    (void)c;
}

static void test_lock_release_retried_after_two_nodes_down(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client3(rc);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "retry:lock", 60000, 0, 0, &l), DISTLOCK_OK);
    int down[2] = { 1, 2 };
    release_then_retry(rc, c, l, "retry:lock", down, 2, 2);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* Only one of the two back: with the lease still valid, node 0's "not
 * ours" can only be our first try's delete (the round stopped before its
 * answer came), so nodes 0 and 1 are a quorum our release emptied. */
static void test_lock_release_retried_with_one_node_still_down(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client3(rc);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "retry:lock1", 60000, 0, 0, &l), DISTLOCK_OK);
    int down[2] = { 1, 2 };
    release_then_retry(rc, c, l, "retry:lock1", down, 2, 1);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* A set, likewise: each key's quorum counts the nodes the first try
 * emptied (both keys checked on every node). */
static void test_set_release_retried_with_one_node_still_down(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client3(rc);
    distlock_lock *l = NULL;
    const char *keys[2] = { "retry:set:a", "retry:set:b" };
    assert_rc(distlock_acquire_many(c, keys, 2, 60000, 0, 0, NULL, &l), DISTLOCK_OK);
    int down[2] = { 1, 2 };
    release_then_retry(rc, c, l, "retry:set:a", down, 2, 1);
    assert_int_equal(exists_on(rc, 0, "retry:set:b"), 0);
    assert_int_equal(exists_on(rc, 1, "retry:set:b"), 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_permit_release_retried_after_one_node_down(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client3(rc);
    distlock_lock *l = NULL;
    assert_rc(distlock_semaphore_acquire(c, "retry:sem", 2, 60000, 0, 0, NULL, &l), DISTLOCK_OK);
    int down[1] = { 2 };
    release_then_retry(rc, c, l, "retry:sem", down, 1, 1);
    distlock_lock_free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_lock_release_retried_after_two_nodes_down, heal),
        cmocka_unit_test_setup(test_lock_release_retried_with_one_node_still_down, heal),
        cmocka_unit_test_setup(test_set_release_retried_with_one_node_still_down, heal),
        cmocka_unit_test_setup(test_permit_release_retried_after_one_node_down, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
