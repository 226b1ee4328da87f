/* test_wait_replicas.c -- DISTLOCK_OPT_WAIT_REPLICAS / _WAIT_TIMEOUT_MS:
 * `WAIT n t` pipelined behind acquire, extend and fence raise, against real
 * replicas (redis-server made a replica with REPLICAOF, its link polled up).
 *
 * Six servers: masters 0, 1, 2; node 3 replicates 0, 4 replicates 1, 5
 * replicates 2. A SIGSTOPped replica never acknowledges: WAIT answers 0. */
#include "test_common.h"

#include <inttypes.h>

#define WAIT_MS 100
/* Where the replicas are alive: generous, a loaded machine (sanitizers,
 * valgrind, 2 cores) may not schedule a replica within 100 ms. Costs nothing
 * when they answer. */
#define ALIVE_MS 5000

static int group_setup(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    rh_cluster *rc = rh_start(6);
    if (!rc)
        return -1;
    *state = rc;
    for (int m = 0; m < 3; m++)
        if (rh_replicate(rc, m + 3, m) != 0)
            return -1;
    return 0;
}

static int group_teardown(void **state)
{
    rh_stop_all(*state);
    return 0;
}

/* Per test: replicas running, masters empty and their replicas too. */
static int reset(void **state)
{
    rh_cluster *rc = *state;
    for (int i = 0; i < 6; i++)
        if (rc->node[i].stopped)
            rh_resume(rc, i);
    for (int m = 0; m < 3; m++)
        if (rh_flushall(rc, m) != 0)
            return -1;
    for (int r = 3; r < 6; r++)
        if (!RH_WAIT_UNTIL(rh_dbsize(rc, r) == 0, 10000))
            return -1;
    return 0;
}

static distlock_client *wait_client(const char *uris, long replicas, long wait_ms)
{
    distlock_client *c = new_client(uris);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_WAIT_REPLICAS, replicas), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_WAIT_TIMEOUT_MS, wait_ms), DISTLOCK_OK);
    return c;
}

static void test_options(void **state)
{
    rh_cluster *rc = *state;
    char buf[256];
    distlock_client *c = new_client(rh_uris_mask(rc, 1, buf, sizeof buf));
    assert_fails(distlock_client_set(c, DISTLOCK_OPT_WAIT_REPLICAS, -1), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set(c, DISTLOCK_OPT_WAIT_REPLICAS, 65), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set(c, DISTLOCK_OPT_WAIT_TIMEOUT_MS, 0), DISTLOCK_EINVAL);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_WAIT_REPLICAS, 0), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_WAIT_TIMEOUT_MS, 60000), DISTLOCK_OK);
    distlock_client_free(c);
}

/* Replica alive: granted, and the key is on the replica when acquire
 * returns (no polling: that is what WAIT promised). */
static void test_acquire_replica_alive(void **state)
{
    rh_cluster *rc = *state;
    char buf[256], val[64];
    distlock_client *c = wait_client(rh_uris_mask(rc, 1, buf, sizeof buf), 1, ALIVE_MS);
    distlock_lock *l = NULL;
    for (int i = 0; i < 20; i++) {
        assert_rc(distlock_acquire(c, "wa", 30000, 0, 0, &l), DISTLOCK_OK);
        assert_int_equal(rh_get(rc, 3, 0, "wa", val, sizeof val), 1);
        assert_string_equal(val, distlock_lock_token(l));
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    /* Asking for more replicas than exist: never granted, nothing left. */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_WAIT_REPLICAS, 2), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_WAIT_TIMEOUT_MS, WAIT_MS), DISTLOCK_OK);
    assert_fails(distlock_acquire(c, "wa", 30000, 0, 0, &l), DISTLOCK_ENOQUORUM);
    assert_non_null(strstr(distlock_last_error(), "1 of 2 replicas acknowledged within 100 ms"));
    assert_int_equal(rh_get(rc, 0, 0, "wa", NULL, 0), 0);
    distlock_client_free(c);
}

/* Replica stopped: the acquire fails after about t with the clear error
 * naming the node, and the grant is undone on the master. */
static void test_acquire_replica_stopped(void **state)
{
    rh_cluster *rc = *state;
    char buf[256], want[160];
    distlock_client *c = wait_client(rh_uris_mask(rc, 1, buf, sizeof buf), 1, WAIT_MS);
    distlock_lock *l = NULL;
    assert_int_equal(rh_pause(rc, 3), 0);
    long long t0 = rh_now_ms();
    assert_fails(distlock_acquire(c, "ws", 30000, 0, 0, &l), DISTLOCK_ENOQUORUM);
    long long took = rh_now_ms() - t0;
    printf("acquire with a stopped replica failed after %lld ms: %s\n", took,
           distlock_last_error());
    snprintf(want, sizeof want, "redis://127.0.0.1:%d: 0 of 1 replicas acknowledged within 100 ms",
             rc->node[0].port);
    assert_non_null(strstr(distlock_last_error(), want));
    assert_null(l);
    assert_true(took >= WAIT_MS);
    assert_true(took < WAIT_MS + 500 + 1000);  /* t + command timeout + slack */
    /* fail-closed: the master no longer has the key */
    assert_int_equal(rh_get(rc, 0, 0, "ws", NULL, 0), 0);
    /* Off again: granted at once on the master alone. */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_WAIT_REPLICAS, 0), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "ws", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* Extend with WAIT: acknowledged → the replica has the new TTL when extend
 * returns; replica stopped → the extend does not count. */
static void test_extend(void **state)
{
    rh_cluster *rc = *state;
    char buf[256], want[160];
    distlock_client *c = wait_client(rh_uris_mask(rc, 1, buf, sizeof buf), 1, ALIVE_MS);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "we", 2000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_extend(l, 600000), DISTLOCK_OK);
    long long pttl = rh_pttl(rc, 3, 0, "we");
    assert_true(pttl > 500000);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_WAIT_TIMEOUT_MS, WAIT_MS), DISTLOCK_OK);
    assert_int_equal(rh_pause(rc, 3), 0);
    assert_fails(distlock_extend(l, 600000), DISTLOCK_ENOQUORUM);
    snprintf(want, sizeof want, "redis://127.0.0.1:%d: 0 of 1 replicas acknowledged within 100 ms",
             rc->node[0].port);
    assert_non_null(strstr(distlock_last_error(), want));
    assert_int_equal(rh_resume(rc, 3), 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* Three-node Redlock, node 2's replica stopped: node 2's grant does not
 * count, nodes 0 and 1 make the quorum; the release clears all three. */
static void test_redlock_one_replica_stopped(void **state)
{
    rh_cluster *rc = *state;
    char buf[256];
    distlock_client *c = wait_client(rh_uris_mask(rc, 7, buf, sizeof buf), 1, 1000);
    distlock_lock *l = NULL;
    assert_int_equal(rh_pause(rc, 5), 0);
    for (int i = 0; i < 5; i++) {
        assert_rc(distlock_acquire(c, "wr", 30000, 0, 0, &l), DISTLOCK_OK);
        char val[64];
        assert_int_equal(rh_get(rc, 3, 0, "wr", val, sizeof val), 1);
        assert_int_equal(rh_get(rc, 4, 0, "wr", val, sizeof val), 1);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
        for (int m = 0; m < 3; m++)
            assert_true(RH_WAIT_UNTIL(rh_get(rc, m, 0, "wr", NULL, 0) == 0, 5000));
    }
    /* Two replicas stopped: no quorum of acknowledged grants; undone everywhere. */
    assert_int_equal(rh_pause(rc, 4), 0);
    assert_fails(distlock_acquire(c, "wr", 30000, 0, 0, &l), DISTLOCK_ENOQUORUM);
    printf("two replicas stopped: %s\n", distlock_last_error());
    assert_non_null(strstr(distlock_last_error(), "0 of 1 replicas acknowledged"));
    for (int m = 0; m < 3; m++)
        assert_int_equal(rh_get(rc, m, 0, "wr", NULL, 0), 0);
    distlock_client_free(c);
}

/* Fencing with WAIT: node 0's counter is ahead, so the fence is raised on
 * nodes 1 and 2 with a WAIT behind; their replicas have the raised counter
 * when acquire returns. */
static void test_fence_raise(void **state)
{
    rh_cluster *rc = *state;
    char buf[256], val[64];
    distlock_client *c = wait_client(rh_uris_mask(rc, 7, buf, sizeof buf), 1, ALIVE_MS);
    distlock_lock *l = NULL;
    assert_int_equal(rh_set(rc, 0, 0, "{wf}:fence", "100", 0), 0);
    assert_rc(distlock_acquire(c, "wf", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
    assert_int_equal(distlock_lock_fence(l), 101);
    for (int r = 3; r < 6; r++) {
        assert_int_equal(rh_get(rc, r, 0, "{wf}:fence", val, sizeof val), 1);
        assert_string_equal(val, "101");
    }
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    /* Replicas of nodes 1 and 2 stopped: no acknowledged quorum. */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_WAIT_TIMEOUT_MS, WAIT_MS), DISTLOCK_OK);
    assert_int_equal(rh_pause(rc, 4), 0);
    assert_int_equal(rh_pause(rc, 5), 0);
    assert_fails(distlock_acquire(c, "wf", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_ENOQUORUM);
    for (int m = 0; m < 3; m++)
        assert_int_equal(rh_get(rc, m, 0, "wf", NULL, 0), 0);
    distlock_client_free(c);
}

/* Auto-renewal (the watchdog's batched extends) with WAIT and live
 * replicas: the lock stays held past its ttl. */
static void test_auto_renew(void **state)
{
    rh_cluster *rc = *state;
    char buf[256];
    distlock_client *c = wait_client(rh_uris_mask(rc, 1, buf, sizeof buf), 1, 300);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "wd", 1500, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    long long t0 = rh_now_ms();
    /* renewed at ttl/3: two ttls later the key is still on the replica */
    assert_true(RH_WAIT_UNTIL(rh_now_ms() - t0 > 3000 && rh_pttl(rc, 3, 0, "wd") > 0, 6000));
    assert_int_equal(distlock_lock_lost(l), 0);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    /* Replica stopped: renewals are not acknowledged, do not count, and the
     * lock is reported lost instead of silently held on the master alone. */
    assert_rc(distlock_acquire(c, "wd", 1500, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    assert_int_equal(rh_pause(rc, 3), 0);
    assert_true(RH_WAIT_UNTIL(distlock_lock_lost(l) == 1, 10000));
    assert_int_equal(rh_resume(rc, 3), 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_options, reset),
        cmocka_unit_test_setup(test_acquire_replica_alive, reset),
        cmocka_unit_test_setup(test_acquire_replica_stopped, reset),
        cmocka_unit_test_setup(test_extend, reset),
        cmocka_unit_test_setup(test_redlock_one_replica_stopped, reset),
        cmocka_unit_test_setup(test_fence_raise, reset),
        cmocka_unit_test_setup(test_auto_renew, reset),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
