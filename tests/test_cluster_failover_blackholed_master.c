/* test_cluster_failover_blackholed_master.c -- a redis-cluster:// node
 * follows a failover also when the dead master's address does not refuse
 * but black-holes (a host that is gone: its SYNs are dropped, as for a
 * Kubernetes pod's IP or a cloud VM that was removed).
 *
 * README: "Masters come and go (pods rescheduled, failovers)"; "A master
 * that refuses connections is marked down and its slots forgotten: its
 * keys go to another master, whose MOVED names the new owner after a
 * failover". A master that never answers is not marked down (round.c: a
 * deadline passed only fails the call; a connection that never completed
 * its handshake fails the next calls at once until STALE_CLOSE_US, 30 s,
 * then is tried again), its slots stay in the map, and nothing asks
 * CLUSTER SLOTS again while the other masters' connections stay up: every
 * call on its slots fails for good, although the cluster promoted its
 * replica seconds ago.
 *
 * Real servers only: 3 masters + 3 replicas; master X announces a fault
 * proxy's port P (-> X). The client locks a key of X's slot through P; X
 * is killed and P black-holes every new connection (blackhole-accept: the
 * TCP connect succeeds, nothing ever answers); once X's replica is master
 * and named by every master, the client must lock that key again within
 * 10 s. (With P refusing instead, the MOVED is followed at once.) */
#include "test_common.h"

#include "test_cluster_group.h"
#include "harness/faultproxy.h"

DEFINE_CLUSTER_GROUP(rh_rcl_start_n(3, 1))

static void test_failover_followed_when_dead_master_address_blackholes(void **state)
{
    (void)state;
    int n = CL->rc->n;
    const char *K = "fo:blackhole";
    int s = rh_rcl_keyslot(CL, K);
    int x = rh_rcl_owner(CL, 0, s);
    assert_true(x >= 0);
    int rx = rh_rcl_replica_of(CL, x);
    assert_true(rx >= 0);
    int xport = CL->rc->node[x].port;
    fp_proxy *fp = fp_start(&xport, 1);
    assert_non_null(fp);
    int p = fp_port(fp, 0);
    assert_true(rh_rcl_announce_port(CL, x, p));
    for (int i = 0; i < n; i++)
        if (rh_rcl_is_master(CL, i))
            assert_true(RH_WAIT_UNTIL(rh_rcl_slot_port(CL, i, s) == p, 10000));

    distlock_client *c = new_client(CL->uri);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, K, 10000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    char route[64];
    assert_int_equal(distlock_admin_cluster_route(c, K, 0, NULL, route, sizeof route), 1);
    printf("# slot %d routed to %s (master %d through P; replica %d at 127.0.0.1:%d)\n", s, route,
           x, rx, CL->rc->node[rx].port);

    /* X's host is gone: the server, and its address answers nothing */
#ifndef REFUSES
    assert_int_equal(fp_cmd(fp, NULL, 0, "blackhole-accept 0 on"), 0);
#endif
    assert_int_equal(rh_kill(CL->rc, x), 0);
#ifdef REFUSES
    fp_stop(fp);
    fp = NULL;
#endif
    long long t_kill = rh_now_ms();
    assert_int_equal(rh_rcl_wait_promoted(CL, rx, 30000), 0);
    for (int i = 0; i < n; i++)
        if (i != x && rh_rcl_is_master(CL, i))
            assert_true(RH_WAIT_UNTIL(rh_rcl_slot_port(CL, i, s) == CL->rc->node[rx].port, 10000));
    printf("# master %d killed, replica %d promoted and named by every master after %lld ms\n", x,
           rx, rh_now_ms() - t_kill);

    long long t0 = rh_now_ms();
    int tries = 0;
    char last[300] = "";
    int rc = acquire_retrying(c, K, 10000, 10000, &l, &tries, last, sizeof last);
    assert_int_equal(distlock_admin_cluster_route(c, K, 0, NULL, route, sizeof route), 1);
    printf("# after the failover: %d after %d tries in %lld ms (%s); routed to %s\n", rc, tries,
           rh_now_ms() - t0, rc == DISTLOCK_OK ? "granted" : last, route);
    if (l) {
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    distlock_client_free(c);
    if (fp)
        fp_stop(fp);
    assert_rc(rc, DISTLOCK_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failover_followed_when_dead_master_address_blackholes),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
