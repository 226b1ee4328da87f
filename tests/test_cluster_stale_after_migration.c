/* test_cluster_stale_after_migration.c -- a release left behind on a
 * cluster master must not delete a later grant of the same token after the
 * key's slot migrated away and back.
 *
 * SPEC: "no request sent for an earlier attempt or an earlier ownership
 * (an undo, a release, a renewal) can delete, shorten or overwrite a later
 * grant", and the brief's promise: through migrations and failovers.
 * conn.c's distlock__stale_find skips a request left behind under another
 * generation (another master of the cluster) and, once its connection is
 * closed, forgets it: "it can only run there, never on this one". But in a
 * cluster the KEY moves between masters (MIGRATE): a release left behind on
 * master X runs on X whenever it arrives, and by then the key (with the
 * later grant) may be on X again.
 *
 * Real servers only: 3 masters, no replicas. Master X announces the fault
 * proxy's port P (listener 0 -> X). The client acquires K with token T
 * through P; its release is held in the proxy on that connection and times
 * out; the client side of the connection is closed (detach: the bytes still
 * reach X on unhold). K's slot migrates to Y (K with it); another lock of
 * the slot learns the move (MOVED to Y). The client acquires K with the same token T (a PHP caller passing its $random back,
 * as the seed code does): MOVED to Y, granted there; nothing is killed on
 * X and the left-behind release is forgotten. The slot migrates back to X
 * (rebalancing). The held release then runs on X and deletes the grant. */
#include "test_common.h"

#include "test_cluster_group.h"
#include "harness/faultproxy.h"

#define CMD_MS 500L

DEFINE_CLUSTER_GROUP(rh_rcl_start_n(3, 0))

static void test_release_left_behind_never_deletes_later_grant_after_slot_moves_back(void **state)
{
    (void)state;
    const char *K = "stale:migrate";
    const char *T = "fedcba9876543210fedcba9876543210";
    int s = rh_rcl_keyslot(CL, K);
    int x = rh_rcl_owner(CL, 0, s);
    assert_true(x >= 0 && x < 3);
    int y = (x + 1) % 3;

    int xport = CL->rc->node[x].port;
    fp_proxy *fp = fp_start(&xport, 1);
    assert_non_null(fp);
    int p = fp_port(fp, 0);
    assert_true(rh_rcl_announce_port(CL, x, p));
    assert_true(RH_WAIT_UNTIL(rh_rcl_slot_port(CL, y, s) == p &&
                                  rh_rcl_slot_port(CL, x, s) == p, 10000));

    char uri[256];
    snprintf(uri, sizeof uri, "redis-cluster://127.0.0.1:%d,127.0.0.1:%d",
             CL->rc->node[y].port, CL->rc->node[(x + 2) % 3].port);
    distlock_client *c = new_client(uri);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, CMD_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 2000), DISTLOCK_OK);

    /* 1. K granted with T through P; that connection's release is held */
    long validity = 0;
    assert_rc(distlock_acquire_token(c, K, 60000, T, 0, &validity), DISTLOCK_OK);
    assert_rc(distlock_acquire_token(c, K, 60000, T, 0, &validity), DISTLOCK_OK);
    char route[64], want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", p);
    assert_int_equal(distlock_admin_cluster_route(c, K, 0, NULL, route, sizeof route), 1);
    assert_string_equal(route, want);
    int conn = fp_last_conn(fp, 0);
    assert_true(conn > 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold 0:%d up", conn), 0);
    int rc = distlock_release_token(c, K, T);
    printf("# release through P, held: %d (%s)\n", rc, distlock_last_error());
    assert_int_not_equal(rc, DISTLOCK_OK);
    assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held 0:%d up 1 2000", conn), 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "detach 0:%d", conn), 0);
    char buf[64];
    assert_int_equal(rh_get(CL->rc, x, 0, K, buf, sizeof buf), 1);  /* not run yet */

    /* 2. the slot (and K) migrates to Y; the same token is granted there */
    assert_int_equal(rh_rcl_migrate_slot(CL, s, x, y, 10, NULL, NULL), 0);
    assert_int_equal(rh_get(CL->rc, y, 0, K, buf, sizeof buf), 1);
    /* another lock of the slot learns the move first (MOVED to Y), as any
     * other traffic on the slot or a CLUSTER SLOTS of a handshake would */
    char k2[64];
    rh_rcl_key_in_slot(CL, "other", s, k2, sizeof k2);
    distlock_lock *l2 = NULL;
    assert_rc(distlock_acquire(c, k2, 30000, 0, 0, &l2), DISTLOCK_OK);
    assert_rc(distlock_release(l2), DISTLOCK_OK);
    distlock_lock_free(l2);
    rc = distlock_acquire_token(c, K, 60000, T, 0, &validity);
    assert_int_equal(distlock_admin_cluster_route(c, K, 0, NULL, route, sizeof route), 1);
    printf("# slot %d moved to Y (127.0.0.1:%d); acquire of K with T again: %d (%s), routed to "
           "%s\n", s, CL->rc->node[y].port, rc,
           rc == DISTLOCK_OK ? "granted" : distlock_last_error(), route);

    /* 3. the slot migrates back to X (K with it), then the held release
     * arrives at X */
    assert_true(rh_rcl_announce_port(CL, x, 0));  /* (the harness finds X by its own port) */
    assert_true(RH_WAIT_UNTIL(rh_rcl_slot_port(CL, y, s) == CL->rc->node[y].port &&
                              rh_rcl_slot_port(CL, y, 0) >= 0, 10000));
    assert_int_equal(rh_rcl_migrate_slot(CL, s, y, x, 10, NULL, NULL), 0);
    assert_int_equal(rh_get(CL->rc, x, 0, K, buf, sizeof buf), 1);
    char rep[256];
    int delivered = fp_cmd(fp, rep, sizeof rep, "unhold 0:%d up", conn) == 0;
    if (delivered)
        assert_int_equal(fp_cmd(fp, NULL, 0, "wait-closed 0:%d 5000", conn), 0);
    int held = rh_get(CL->rc, x, 0, K, buf, sizeof buf);
    printf("# held release %s X: K %s on X\n", delivered ? "delivered to" : "killed before",
           held == 1 ? "still holds T" : held == 0 ? "is GONE" : "?");
    if (rc == DISTLOCK_OK && held != 1) {
        print_error("a release left behind on master X deleted the later grant of the same "
                    "token: it was forgotten when the later request went to Y (another "
                    "generation), and the key came back to X\n");
        fail();
    }
    assert_true(rh_rcl_announce_port(CL, x, 0));
    distlock_client_free(c);
    fp_stop(fp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_left_behind_never_deletes_later_grant_after_slot_moves_back),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
