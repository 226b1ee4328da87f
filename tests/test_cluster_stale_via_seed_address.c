/* test_cluster_stale_via_seed_address.c -- a release left behind on a
 * cluster master, sent through the address the client was given for it (a
 * seed), must not delete a later grant of the same token sent through the
 * address the cluster announces for the same master.
 *
 * SPEC: "no request sent for an earlier attempt or an earlier ownership
 * (an undo, a release, a renewal) can delete, shorten or overwrite a later
 * grant". round.c keeps it by CLIENT KILL ID of the connection that carries
 * the earlier request before the later one is sent, but conn.c's
 * distlock__stale_find skips (and, once closed, forgets) a request left
 * behind under another generation: "it can only run there, never on this
 * one". In a cluster node the generation stands for a table entry, i.e. an
 * ADDRESS, not a server: a seed given as another address than the one the
 * cluster announces (a load balancer, a DNS name, NAT, a container's port
 * mapping; here: a fault proxy) is the same server under two generations.
 *
 * Real servers only: 3 masters, no replicas; a fault proxy with two
 * listeners, both forwarding to master X: the client's only seed is P0,
 * and X announces P1 (cluster-announce-port). The client acquires K with
 * token T (through P0, the map being empty; the handshake learns slot ->
 * P1). Its release goes to P1, whose first connection is refused (a
 * restart), so it falls back to the seed P0, where it is held in the proxy
 * and times out; the client side of that connection is then closed
 * (detach: the bytes still reach X later). Another lock of the slot makes
 * a new connection to P0 whose handshake names P1 again. The client
 * acquires K with T again (a PHP caller passing its $random back, as the
 * seed code does): through P1, nothing killed first. The held release then
 * runs on X and deletes that grant. */
#include "test_common.h"

#include "test_cluster_group.h"
#include "harness/faultproxy.h"

#define CMD_MS 500L

DEFINE_CLUSTER_GROUP(rh_rcl_start_n(3, 0))

static void test_release_left_behind_via_seed_never_deletes_later_grant_via_announced_address(
    void **state)
{
    (void)state;
    const char *K = "stale:seed";
    const char *T = "00112233445566778899aabbccddeeff";
    int s = rh_rcl_keyslot(CL, K);
    int x = rh_rcl_owner(CL, 0, s);
    assert_true(x >= 0 && x < 3);
    int y = (x + 1) % 3;

    int xport = CL->rc->node[x].port, targets[2] = { xport, xport };
    fp_proxy *fp = fp_start(targets, 2);
    assert_non_null(fp);
    int p0 = fp_port(fp, 0), p1 = fp_port(fp, 1);
    assert_true(rh_rcl_announce_port(CL, x, p1));
    assert_true(RH_WAIT_UNTIL(rh_rcl_slot_port(CL, y, s) == p1 &&
                                  rh_rcl_slot_port(CL, x, s) == p1, 10000));

    char uri[128];
    snprintf(uri, sizeof uri, "redis-cluster://127.0.0.1:%d", p0);
    distlock_client *c = new_client(uri);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, CMD_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 2000), DISTLOCK_OK);

    /* 1. K granted with T through the seed P0; the map learns slot -> P1 */
    long validity = 0;
    assert_rc(distlock_acquire_token(c, K, 60000, T, 0, &validity), DISTLOCK_OK);
    char route[64], want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", p1);
    assert_int_equal(distlock_admin_cluster_route(c, K, 0, NULL, route, sizeof route), 1);
    assert_string_equal(route, want);
    int conn = fp_last_conn(fp, 0);
    assert_true(conn > 0);

    /* 2. the release: P1 refused once (down), back to the seed P0, held
     * there; then the client side of that connection closes */
    assert_int_equal(fp_cmd(fp, NULL, 0, "reset-after 1:next up 0"), 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold 0:%d up", conn), 0);
    int rc = distlock_release_token(c, K, T);
    printf("# release (P1 refused, then the seed P0, held): %d (%s)\n", rc,
           distlock_last_error());
    assert_int_not_equal(rc, DISTLOCK_OK);
    assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held 0:%d up 1 2000", conn), 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "detach 0:%d", conn), 0);
    char buf[64];
    assert_int_equal(rh_get(CL->rc, x, 0, K, buf, sizeof buf), 1);  /* not run yet */

    /* 3. another lock of the slot: a new connection to P0, whose handshake
     * names P1 again */
    char k2[64];
    rh_rcl_key_in_slot(CL, "other", s, k2, sizeof k2);
    distlock_lock *l2 = NULL;
    assert_rc(distlock_acquire(c, k2, 30000, 0, 0, &l2), DISTLOCK_OK);
    assert_rc(distlock_release(l2), DISTLOCK_OK);
    distlock_lock_free(l2);
    assert_int_equal(distlock_admin_cluster_route(c, K, 0, NULL, route, sizeof route), 1);
    printf("# slot %d routed to %s (P0 = 127.0.0.1:%d, P1 = %s)\n", s, route, p0, want);

    /* 4. the same token again: the held release must never run after it */
    rc = distlock_acquire_token(c, K, 60000, T, 0, &validity);
    printf("# acquire of K with T again: %d (%s)\n", rc,
           rc == DISTLOCK_OK ? "granted" : distlock_last_error());
    char rep[256];
    int delivered = fp_cmd(fp, rep, sizeof rep, "unhold 0:%d up", conn) == 0;
    if (delivered)
        assert_int_equal(fp_cmd(fp, NULL, 0, "wait-closed 0:%d 5000", conn), 0);
    int held = rh_get(CL->rc, x, 0, K, buf, sizeof buf);
    printf("# held release %s X: K %s on X\n", delivered ? "delivered to" : "killed before",
           held == 1 ? "still holds T" : held == 0 ? "is GONE" : "?");
    if (rc == DISTLOCK_OK && held != 1) {
        print_error("a release left behind on master X (through its seed address) deleted the "
                    "later grant of the same token (through its announced address): another "
                    "generation, so it was forgotten, not killed\n");
        fail();
    }
    assert_true(rh_rcl_announce_port(CL, x, 0));
    distlock_client_free(c);
    fp_stop(fp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_release_left_behind_via_seed_never_deletes_later_grant_via_announced_address),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
