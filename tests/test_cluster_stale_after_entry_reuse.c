/* test_cluster_stale_after_entry_reuse.c -- a release left behind on a
 * cluster master must not delete a later grant of the same token on that
 * same master, even after the client's table of masters gave the master's
 * entry to another address and took it back under a new generation.
 *
 * SPEC: "no request sent for an earlier attempt or an earlier ownership
 * (an undo, a release, a renewal) can delete, shorten or overwrite a later
 * grant". round.c keeps that with CLIENT KILL ID of the server-side
 * connection that carries the earlier request before the later one is
 * sent; conn.c's distlock__stale_find skips (and, once closed, forgets) a
 * request left behind under another generation ("it can only run there,
 * never on this one"). cluster.c gives a table entry a new generation when
 * it is reused, so the SAME address named again after a reuse gets a new
 * generation: its requests left behind are then forgotten although they
 * can run on the very server the later request goes to.
 *
 * Real servers only: 3 masters, no replicas. Master X announces the fault
 * proxy's port P (listener 0 -> X). The client acquires K with token T
 * (through P); its release is held in the proxy on that connection, times
 * out, and the client side of that connection is closed (detach: the
 * bytes still reach X on unhold). X then announces its real port, P is
 * refused once (down, no slot), master Y announces 62 dead ports in turn
 * (each learnt and refused: the table fills and P's entry is reused), and
 * X announces P again (a new entry: a new generation). The client acquires
 * K with the same token T through P (a PHP caller passing its $random
 * back, as the seed code does): nothing is killed first. The held release
 * then runs on X and deletes the grant the client was just given. */
#include "test_common.h"

#include "test_cluster_group.h"
#include "harness/faultproxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define CMD_MS 500L
#ifndef CHURN
#define CHURN 62
#endif

DEFINE_CLUSTER_GROUP(rh_rcl_start_n(3, 0))

static void test_release_left_behind_never_deletes_later_grant_after_entry_reuse(void **state)
{
    (void)state;
    const char *K = "stale:reuse";
    const char *T = "0123456789abcdef0123456789abcdef";
    int s = rh_rcl_keyslot(CL, K);
    int x = rh_rcl_owner(CL, 0, s), y = -1, sy = -1;
    assert_true(x >= 0 && x < 3);
    y = (x + 1) % 3;
    for (int k = 0; k < 16384 && sy < 0; k += 97)
        if (rh_rcl_owner(CL, 0, k) == y)
            sy = k;
    assert_true(sy >= 0);
    char ykey[64], k2[64];
    rh_rcl_key_in_slot(CL, "churn", sy, ykey, sizeof ykey);
    rh_rcl_key_in_slot(CL, "other", s, k2, sizeof k2);

    int xport = CL->rc->node[x].port;
    fp_proxy *fp = fp_start(&xport, 1);
    assert_non_null(fp);
    int p = fp_port(fp, 0);
    assert_true(rh_rcl_announce_port(CL, x, p));
    assert_true(RH_WAIT_UNTIL(rh_rcl_slot_port(CL, y, s) == p &&
                                  rh_rcl_slot_port(CL, x, s) == p, 10000));

    /* seeds: Y first (the fallback of an unknown slot), then X, then Z */
    char uri[256];
    snprintf(uri, sizeof uri, "redis-cluster://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d",
             CL->rc->node[y].port, xport, CL->rc->node[(x + 2) % 3].port);
    distlock_client *c = new_client(uri);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, CMD_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 2000), DISTLOCK_OK);

    /* 1. K granted with T through P; that connection's release is held */
    long validity = 0;
    assert_rc(distlock_acquire_token(c, K, 60000, T, 0, &validity), DISTLOCK_OK);
    char route[64], want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", p);
    assert_int_equal(distlock_admin_cluster_route(c, K, 0, NULL, route, sizeof route), 1);
    assert_string_equal(route, want);
    assert_rc(distlock_acquire_token(c, K, 60000, T, 0, &validity), DISTLOCK_OK);
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

    /* 2. X back at its real port; P refused once: down, no slot */
    assert_true(rh_rcl_announce_port(CL, x, 0));
    assert_true(RH_WAIT_UNTIL(rh_rcl_slot_port(CL, y, s) == xport &&
                                  rh_rcl_slot_port(CL, x, s) == xport, 10000));
    assert_int_equal(fp_cmd(fp, NULL, 0, "reset-after 0:next up 0"), 0);
    lock_and_release(c, k2);
    snprintf(want, sizeof want, "127.0.0.1:%d", xport);
    assert_int_equal(distlock_admin_cluster_route(c, K, 0, NULL, route, sizeof route), 1);
    printf("# slot %d now routed to %s (X at %s)\n", s, route, want);

    /* 3. Y announces CHURN dead ports, each learnt then refused: the table
     * of 64 fills and P's entry goes to another address */
    int dead[CHURN], nd = 0;
    for (int q = 1023; q > 0 && nd < CHURN; q -= 7)
        if (rh_port_refused(q))
            dead[nd++] = q;
    assert_int_equal(nd, CHURN);
    for (int k = 0; k < CHURN; k++) {
        assert_true(rh_rcl_announce_port(CL, y, dead[k]));
        redisReply *r = rh_command(CL->rc, y, 0, "CLIENT KILL TYPE normal SKIPME yes");
        assert_true(r && r->type == REDIS_REPLY_INTEGER);
        freeReplyObject(r);
        lock_and_release(c, ykey);
    }
    assert_true(rh_rcl_announce_port(CL, y, 0));

    /* 4. X announces P again: learnt as a new entry (new generation) */
    assert_true(rh_rcl_announce_port(CL, x, p));
    assert_true(RH_WAIT_UNTIL(rh_rcl_slot_port(CL, y, s) == p &&
                                  rh_rcl_slot_port(CL, x, s) == p, 10000));
    redisReply *r = rh_command(CL->rc, y, 0, "CLIENT KILL TYPE normal SKIPME yes");
    assert_true(r && r->type == REDIS_REPLY_INTEGER);
    freeReplyObject(r);
    lock_and_release(c, ykey);
    snprintf(want, sizeof want, "127.0.0.1:%d", p);
    assert_int_equal(distlock_admin_cluster_route(c, K, 0, NULL, route, sizeof route), 1);
    printf("# slot %d routed to %s again (P = %s)\n", s, route, want);
    assert_string_equal(route, want);

    /* 5. the same token again, through P: the held release must never run
     * after it (its server-side connection killed first), or it must not
     * be granted */
    rc = distlock_acquire_token(c, K, 60000, T, 0, &validity);
    printf("# acquire of K with T again through P: %d (%s)\n", rc,
           rc == DISTLOCK_OK ? "granted" : distlock_last_error());
    /* "err no connection": its server-side connection was killed first */
    char rep[256];
    if (fp_cmd(fp, rep, sizeof rep, "unhold 0:%d up", conn) == 0)
        assert_int_equal(fp_cmd(fp, NULL, 0, "wait-closed 0:%d 5000", conn), 0);
    int held = rh_get(CL->rc, x, 0, K, buf, sizeof buf);
    printf("# after the held release reached X: K %s on X\n",
           held == 1 ? "still holds T" : held == 0 ? "is GONE" : "?");
    if (rc == DISTLOCK_OK && held != 1) {
        print_error("a release left behind on 127.0.0.1:%d deleted the later grant of the same "
                    "token on the same master: the entry was reused and P came back under a "
                    "new generation, so its left-behind request was forgotten, not killed\n", p);
        fail();
    }
    assert_true(rh_rcl_announce_port(CL, x, 0));
    distlock_client_free(c);
    fp_stop(fp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_left_behind_never_deletes_later_grant_after_entry_reuse),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
