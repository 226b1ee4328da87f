/* test_cluster_failover_unresolvable_master.c -- a redis-cluster:// node
 * whose masters are announced by host name (Redis 7
 * cluster-announce-hostname, cluster-preferred-endpoint-type hostname:
 * Kubernetes pods) follows a failover also when the dead master's name no
 * longer resolves (its pod is gone, and so is its DNS record).
 *
 * README: "Masters come and go (pods rescheduled, failovers)"; "A master
 * that refuses connections is marked down and its slots forgotten: its
 * keys go to another master, whose MOVED names the new owner after a
 * failover". A master whose name fails to resolve is not marked down
 * (round.c resolved(): result_fail, no distlock__cl_down), its slots stay
 * in the map, and nothing asks CLUSTER SLOTS again while the other
 * masters' connections stay up: every call on its slots fails with
 * "cannot resolve" for good, although the cluster promoted its replica
 * seconds ago.
 *
 * Real servers only: 3 masters + 3 replicas, each announcing nK.test
 * (tests/harness/slowdns: nK.test resolves to 127.0.0.1). The client locks
 * a key of master X's slot, X is killed and nX.test made to fail
 * (EAI_NONAME); once X's replica is master and the cluster is ok, the client
 * must lock that key again within 10 s. (With nX.test still resolving, the
 * refused connection marks X down and the MOVED is followed.) */
#include "test_common.h"

#include "test_cluster_group.h"
#include "harness/slowdns.h"

DEFINE_CLUSTER_GROUP(rh_rcl_start_n(3, 1))

/* Server i's CLUSTER SLOTS names want as slot's master. */
static int named(int i, int slot, const char *want)
{
    char host[256];
    return rh_rcl_slot_host(CL, i, slot, host, sizeof host) == 0 && strcmp(host, want) == 0;
}

static void test_failover_followed_when_dead_master_name_no_longer_resolves(void **state)
{
    (void)state;
    int n = CL->rc->n;
    char rules[512] = "";
    size_t u = 0;
    for (int i = 0; i < n; i++)
        u += (size_t)snprintf(rules + u, sizeof rules - u, "%sn%d.test=0=127.0.0.1", i ? ";" : "",
                              i);
    assert_int_equal(slowdns_set(rules), 0);
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "n%d.test", i);
        assert_true(rh_rcl_command_ok(CL, i, "CONFIG SET cluster-announce-hostname %s", name));
        assert_true(rh_rcl_command_ok(CL, i, "CONFIG SET cluster-preferred-endpoint-type %s",
                                      "hostname"));
    }
    const char *K = "fo:name";
    int s = rh_rcl_keyslot(CL, K);
    int x = rh_rcl_owner(CL, 0, s);
    assert_true(x >= 0);
    int rx = rh_rcl_replica_of(CL, x);
    assert_true(rx >= 0);
    char xname[32], rxname[32];
    snprintf(xname, sizeof xname, "n%d.test", x);
    snprintf(rxname, sizeof rxname, "n%d.test", rx);
    for (int i = 0; i < n; i++)
        if (rh_rcl_is_master(CL, i))
            assert_true(RH_WAIT_UNTIL(named(i, s, xname), 10000));

    distlock_client *c = new_client(CL->uri);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, K, 10000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    char route[64];
    assert_int_equal(distlock_admin_cluster_route(c, K, 0, NULL, route, sizeof route), 1);
    printf("# slot %d routed to %s (master %d; replica %d is %s)\n", s, route, x, rx, rxname);

    /* X's pod is gone: the server and its name */
    assert_int_equal(rh_kill(CL->rc, x), 0);
#ifndef NAME_STAYS
    u = 0;
    for (int i = 0; i < n; i++)
        u += (size_t)snprintf(rules + u, sizeof rules - u, "%sn%d.test=0=%s", i ? ";" : "", i,
                              i == x ? "fail" : "127.0.0.1");
    assert_int_equal(slowdns_set(rules), 0);
#endif
    long long t_kill = rh_now_ms();
    assert_int_equal(rh_rcl_wait_promoted(CL, rx, 30000), 0);
    for (int i = 0; i < n; i++)
        if (i != x && rh_rcl_is_master(CL, i))
            assert_true(RH_WAIT_UNTIL(named(i, s, rxname), 10000));
    printf("# master %d killed, %s promoted and named by every master after %lld ms\n", x, rxname,
           rh_now_ms() - t_kill);

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
    slowdns_set(NULL);
    assert_rc(rc, DISTLOCK_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failover_followed_when_dead_master_name_no_longer_resolves),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
