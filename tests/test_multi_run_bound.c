/* test_multi_run_bound.c -- a multi keeps at most DISTLOCK_OPT_MULTI_RUNS
 * runs on the wire (each on one connection set: a connection per node),
 * against real servers:
 *  - N >> k acquires of distinct keys, then their releases: every op ends
 *    OK, and no node ever sees more than k of the library's connections
 *    (+1: the subscriber's), counted with CLIENT LIST while they run;
 *  - an acquire waiting for a slot keeps its deadline and its cancel (the
 *    only slot held by a run stuck on a stopped node);
 *  - a release queued behind acquires waiting for a slot goes first;
 *  - 3,000 acquires on 3 nodes: the process's descriptors (/proc/self/fd)
 *    stay within the bound's sockets;
 *  - the option's range is checked by the core. */
#include "test_common.h"
#include "test_multi_drive.h"

#include <dirent.h>
#include <poll.h>
#include <unistd.h>

static int group_setup1(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    return (*state = rh_start(1)) ? 0 : -1;
}
static int group_setup3(void **state) { return (*state = rh_start(3)) ? 0 : -1; }
static int group_teardown(void **state)
{
    rh_stop_all(*state);
    return 0;
}
static int heal(void **state) { return rh_heal(*state) == 0 ? 0 : -1; }

static distlock_client *client_k(rh_cluster *rc, long k, long command_timeout_ms)
{
    distlock_client *c = NULL;
    assert_rc(distlock_client_new(rh_uris(rc), &c), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_MULTI_RUNS, k), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, command_timeout_ms),
              DISTLOCK_OK);
    return c;
}

/* The most library connections any node has now. */
static int max_lib_conns(rh_cluster *rc, int nodes)
{
    long long ids[4096];
    int most = 0;
    for (int i = 0; i < nodes; i++) {
        int n = rh_lib_conn_ids(rc, i, NULL, ids, 4096);
        assert_true(n >= 0);
        if (n > most)
            most = n;
    }
    return most;
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    assert_non_null(d);
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n - 3;  /* ".", "..", the DIR's own descriptor */
}

/* Drive m until every op in ops is done; sample the nodes' connections
 * every `every` turns. Returns the most seen. */
static int drive_all(rh_cluster *rc, int nodes, distlock_multi *m, distlock_op **ops, int n,
                     int every, long limit_ms)
{
    long long end = rh_now_ms() + limit_ms;
    int most = 0, turns = 0;
    for (;;) {
        int left = 0;
        for (int i = 0; i < n; i++)
            left += !distlock_op_done(ops[i]);
        if (left == 0)
            break;
        if (rh_now_ms() > end) {
            print_error("%d ops not done after %ld ms\n", left, limit_ms);
            fail();
        }
        multi_turn(m, 50);
        if (++turns % every == 0) {
            int c = max_lib_conns(rc, nodes);
            if (c > most)
                most = c;
        }
    }
    int c = max_lib_conns(rc, nodes);
    return c > most ? c : most;
}

static void test_connections_per_node_stay_within_the_bound(void **state)
{
    rh_cluster *rc = *state;
    enum { K = 4, N = 300 };
    distlock_client *c = client_k(rc, K, 2000);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op **ops = calloc(N, sizeof(*ops));
    distlock_lock **locks = calloc(N, sizeof(*locks));
    assert_non_null(ops);
    assert_non_null(locks);
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "mb:conn:%d", i);
        assert_rc(distlock_multi_acquire(m, key, 30000, 0, 0, NULL, &ops[i]), DISTLOCK_OK);
    }
    int most = drive_all(rc, 3, m, ops, N, 5, 60000);
    for (int i = 0; i < N; i++) {
        assert_op(ops[i], DISTLOCK_OK);
        locks[i] = distlock_op_take_lock(ops[i]);
        assert_non_null(locks[i]);
        distlock_op_free(ops[i]);
    }
    printf("  k=%d: %d acquires of distinct keys: at most %d library connections on a node\n",
           K, N, most);
    /* (+1: the client's subscriber connection, if one was opened) */
    assert_true(most <= K + 1);
    for (int i = 0; i < N; i++)
        assert_rc(distlock_multi_release(m, locks[i], &ops[i]), DISTLOCK_OK);
    most = drive_all(rc, 3, m, ops, N, 5, 60000);
    for (int i = 0; i < N; i++) {
        assert_op(ops[i], DISTLOCK_OK);
        distlock_op_free(ops[i]);
        distlock_lock_free(locks[i]);
    }
    printf("  k=%d: their %d releases: at most %d library connections on a node\n", K, N, most);
    assert_true(most <= K + 1);
    for (int i = 0; i < N; i += 37) {
        snprintf(key, sizeof(key), "mb:conn:%d", i);
        assert_holding(rc, key, NULL, 0);
    }
    distlock_multi_free(m);
    distlock_client_free(c);
    free(ops);
    free(locks);
}

/* k = 1 and one node, stopped after the connection is made: the first
 * acquire's run holds the only slot until its command timeout; the ops
 * behind it end on their own deadline or cancel meanwhile. */
static void test_waiting_for_a_slot_keeps_deadline_and_cancel(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_k(rc, 1, 8000);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *warm, *stuck, *timed, *cancelled;
    assert_rc(distlock_multi_acquire(m, "mb:warm", 1000, 0, 0, NULL, &warm), DISTLOCK_OK);
    multi_drive_until(m, warm, 5000);
    assert_op(warm, DISTLOCK_OK);
    distlock_op_free(warm);
    assert_int_equal(rh_pause(rc, 0), 0);

    long long t0 = rh_now_ms();
    assert_rc(distlock_multi_acquire(m, "mb:stuck", 10000, 0, 0, NULL, &stuck), DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mb:timed", 10000, 300, 0, NULL, &timed), DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mb:cancelled", 10000, DISTLOCK_WAIT_FOREVER, 0, NULL,
                                     &cancelled), DISTLOCK_OK);
    multi_drive_until(m, timed, 2500);
    long long timed_ms = rh_now_ms() - t0;
    assert_op(timed, DISTLOCK_NOTACQUIRED);
    assert_false(distlock_op_done(stuck));  /* it still holds the only slot */
    assert_false(distlock_op_done(cancelled));
    distlock_op_cancel(cancelled);
    multi_drive_until(m, cancelled, 1000);
    long long cancel_ms = rh_now_ms() - t0;
    assert_op(cancelled, DISTLOCK_ECANCELED);
    assert_false(distlock_op_done(stuck));
    printf("  k=1, the slot's run stuck on a stopped node: wait_ms 300 ended after %lld ms "
           "(\"%s\"), a cancel after %lld ms\n", timed_ms, distlock_op_error(timed), cancel_ms);
    assert_int_equal(rh_resume(rc, 0), 0);
    multi_drive_until(m, stuck, 10000);
    distlock_op_free(stuck);
    distlock_op_free(timed);
    distlock_op_free(cancelled);
    distlock_multi_free(m);
    assert_holding(rc, "mb:timed", NULL, 0);
    assert_holding(rc, "mb:cancelled", NULL, 0);
    distlock_client_free(c);
}

/* k = 1: a release started after many acquires that wait for the slot is
 * served before them (releases and extends go first). */
static void test_release_goes_before_queued_acquires(void **state)
{
    rh_cluster *rc = *state;
    enum { N = 50 };
    distlock_client *c = client_k(rc, 1, 2000);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *held, *rel, *ops[N];
    assert_rc(distlock_multi_acquire(m, "mb:order:held", 30000, 0, 0, NULL, &held), DISTLOCK_OK);
    multi_drive_until(m, held, 5000);
    assert_op(held, DISTLOCK_OK);
    distlock_lock *l = distlock_op_take_lock(held);
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "mb:order:%d", i);
        assert_rc(distlock_multi_acquire(m, key, 30000, 0, 0, NULL, &ops[i]), DISTLOCK_OK);
    }
    assert_rc(distlock_multi_release(m, l, &rel), DISTLOCK_OK);
    multi_drive_until(m, rel, 10000);
    assert_op(rel, DISTLOCK_OK);
    int before = 0;
    for (int i = 0; i < N; i++)
        before += distlock_op_done(ops[i]);
    printf("  k=1: acquires done before a release started after %d of them: %d\n", N, before);
    /* the first one may have taken the slot at its start, before the release */
    assert_true(before <= 1);
    /* (released through the multi: a blocking release would wait for its
     * acquire's connection set, which the multi's next run may hold) */
    distlock_lock *won[N];
    distlock_op *rels[N];
    for (int i = 0; i < N; i++) {
        multi_drive_until(m, ops[i], 10000);
        assert_op(ops[i], DISTLOCK_OK);
        won[i] = distlock_op_take_lock(ops[i]);
        assert_rc(distlock_multi_release(m, won[i], &rels[i]), DISTLOCK_OK);
    }
    for (int i = 0; i < N; i++) {
        multi_drive_until(m, rels[i], 10000);
        assert_op(rels[i], DISTLOCK_OK);
        distlock_op_free(rels[i]);
        distlock_lock_free(won[i]);
        distlock_op_free(ops[i]);
    }
    distlock_op_free(rel);
    distlock_op_free(held);
    distlock_lock_free(l);
    distlock_multi_free(m);
    distlock_client_free(c);
}

static void test_descriptors_stay_bounded_with_3000_ops(void **state)
{
    rh_cluster *rc = *state;
    enum { N = 3000 };
    const distlock_option_info *o = distlock_option_by_id(DISTLOCK_OPT_MULTI_RUNS);
    assert_non_null(o);
    long k = o->default_value;
    distlock_client *c = NULL;
    assert_rc(distlock_client_new(rh_uris(rc), &c), DISTLOCK_OK);  /* the default bound */
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    int base = open_fds();
    distlock_op **ops = calloc(N, sizeof(*ops));
    assert_non_null(ops);
    char key[32];
    for (int i = 0; i < N; i++) {
        snprintf(key, sizeof(key), "mb:fd:%d", i);
        assert_rc(distlock_multi_acquire(m, key, 30000, 0, 0, NULL, &ops[i]), DISTLOCK_OK);
    }
    distlock_lock **locks = calloc(N, sizeof(*locks));
    assert_non_null(locks);
    long long t0 = rh_now_ms(), ms[2];
    int most = open_fds();
    for (int phase = 0; phase < 2; phase++) {
        int left = N;
        while (left > 0) {
            if (rh_now_ms() - t0 > 120000) {
                print_error("%d ops not done after 120 s\n", left);
                fail();
            }
            multi_turn(m, 50);
            int f = open_fds();
            if (f > most)
                most = f;
            distlock_op *op;
            while ((op = distlock_multi_done(m)) != NULL) {
                assert_op(op, DISTLOCK_OK);
                left--;
            }
        }
        ms[phase] = rh_now_ms() - t0;
        for (int i = 0; i < N; i++) {
            if (phase == 0) {  /* then their releases, through the multi too */
                locks[i] = distlock_op_take_lock(ops[i]);
                assert_non_null(locks[i]);
                distlock_op_free(ops[i]);
                assert_rc(distlock_multi_release(m, locks[i], &ops[i]), DISTLOCK_OK);
            } else {
                distlock_op_free(ops[i]);
                distlock_lock_free(locks[i]);
            }
        }
    }
    printf("  default k=%ld, 3 nodes: %d acquires in %lld ms, their releases by %lld ms; "
           "descriptors %d before, at most %d during\n", k, N, ms[0], ms[1], base, most);
    /* k sets of 3 connections, and the subscriber's 3 */
    assert_true(most <= base + 3 * k + 3);
    free(locks);
    free(ops);
    distlock_multi_free(m);
    distlock_client_free(c);
}

static void test_bound_range_is_checked(void **state)
{
    (void)state;
    const distlock_option_info *o = distlock_option_by_name("multi_runs");
    assert_non_null(o);
    assert_int_equal(o->id, DISTLOCK_OPT_MULTI_RUNS);
    assert_int_equal(o->type, DISTLOCK_OPTION_LONG);
    distlock_client *c = NULL;
    assert_rc(distlock_client_new("redis://127.0.0.1:1", &c), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_MULTI_RUNS, 0), DISTLOCK_EINVAL);
    assert_non_null(strstr(distlock_last_error(), "multi_runs"));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_MULTI_RUNS, o->max + 1), DISTLOCK_EINVAL);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_MULTI_RUNS, 1), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_MULTI_RUNS, o->max), DISTLOCK_OK);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest one[] = {
        cmocka_unit_test_setup(test_waiting_for_a_slot_keeps_deadline_and_cancel, heal),
        cmocka_unit_test_setup(test_release_goes_before_queued_acquires, heal),
        cmocka_unit_test(test_bound_range_is_checked),
    };
    const struct CMUnitTest three[] = {
        cmocka_unit_test_setup(test_connections_per_node_stay_within_the_bound, heal),
        cmocka_unit_test_setup(test_descriptors_stay_bounded_with_3000_ops, heal),
    };
    int failed = cmocka_run_group_tests_name("one node", one, group_setup1, group_teardown);
    failed += cmocka_run_group_tests_name("three nodes", three, group_setup3, group_teardown);
    return failed;
}
