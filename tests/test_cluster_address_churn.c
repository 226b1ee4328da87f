/* test_cluster_address_churn.c -- redis-cluster:// after many masters came
 * and went: the client's table of masters holds 64 at once, and addresses
 * the cluster no longer names must not fill it for good (pods rescheduled,
 * failovers), or a MOVED to a live master at a new address is never
 * followed.
 *
 * Real servers only: a cluster of 3 masters and a spare master that owns no
 * slot (cluster_harness.h rh_rcl_start_spares). Master X announces 70
 * different client ports in turn (CONFIG SET cluster-announce-port, nothing
 * listening there; its bus port stays, so the cluster stays ok), and after
 * each the client learns it: X's connection is killed, the client's call
 * for X's slot finds the address it knew refused, falls back to X's seed
 * address (live: X still listens on its real port) and learns the new one
 * from the CLUSTER SLOTS of that handshake; its release finds that one
 * refused. 70 dead addresses in all, each learnt and refused. Then X's slot moves to the spare, at an address the client
 * never saw: X answers MOVED there, and the client must follow it. */
#include "test_common.h"
#include "test_cluster_group.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define DEAD_ADDRESSES 70
#define SLOT 6000

DEFINE_CLUSTER_GROUP(rh_rcl_start_spares(3, 1))

static void test_moved_to_new_master_followed_after_many_dead_addresses(void **state)
{
    (void)state;
    int x = rh_rcl_owner(CL, 0, SLOT), spare = 3;
    assert_true(x >= 0 && x < 3);
    /* X's seed first: the client falls back to it when X's announced
     * address is refused */
    char uri[256];
    size_t u = (size_t)snprintf(uri, sizeof uri, "redis-cluster://127.0.0.1:%d",
                                CL->rc->node[x].port);
    for (int i = 0; i < 3; i++)
        if (i != x)
            u += (size_t)snprintf(uri + u, sizeof uri - u, ",127.0.0.1:%d", CL->rc->node[i].port);
    distlock_client *c = new_client(uri);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 2000), DISTLOCK_OK);
    char key[64], route[64], want[64];
    rh_rcl_key_in_slot(CL, "churn", SLOT, key, sizeof key);
    lock_and_release(c, key);

    /* ports nobody listens on, below 1024: the test servers take ports
     * from 10000 up, helpers (the fault proxy, sentinels.py) the kernel's
     * ephemeral ones, so none appears there while this runs */
    int dead[DEAD_ADDRESSES], nd = 0;
    for (int p = 1023; p > 0 && nd < DEAD_ADDRESSES; p -= 7)
        if (rh_port_refused(p))
            dead[nd++] = p;
    assert_int_equal(nd, DEAD_ADDRESSES);

    int learned = 0;
    long long t0 = rh_now_ms();
    for (int k = 0; k < DEAD_ADDRESSES; k++) {
        assert_true(rh_rcl_command_ok(CL, x, "CONFIG SET cluster-announce-port %d", dead[k]));
        assert_true(RH_WAIT_UNTIL(rh_rcl_slot_port(CL, x, SLOT) == dead[k], 5000));
        /* the client's next connection to X is a new one: its handshake
         * asks CLUSTER SLOTS */
        redisReply *r = rh_command(CL->rc, x, 0, "CLIENT KILL TYPE normal SKIPME yes");
        assert_true(r && r->type == REDIS_REPLY_INTEGER);
        freeReplyObject(r);
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(c, key, 30000, 0, 0, &l), DISTLOCK_OK);
        /* learnt (the release, refused there, forgets it again: down) */
        snprintf(want, sizeof want, "127.0.0.1:%d", dead[k]);
        int slot = -1;
        if (distlock_admin_cluster_route(c, key, 0, &slot, route, sizeof route) == 1 &&
            strcmp(route, want) == 0)
            learned++;
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    printf("churn: %d of %d dead addresses of master %d learnt, each then refused, in %lld ms\n",
           learned, DEAD_ADDRESSES, x, rh_now_ms() - t0);

    /* X at its own port again; its slot moves to the spare, whose address
     * the client never saw: X answers MOVED there */
    assert_true(rh_rcl_command_ok(CL, x, "CONFIG SET cluster-announce-port %d", 0));
    assert_true(RH_WAIT_UNTIL(rh_rcl_slot_port(CL, x, SLOT) == CL->rc->node[x].port, 5000));
    assert_int_equal(rh_rcl_migrate_slot(CL, SLOT, x, spare, 10, NULL, NULL), 0);
    distlock_lock *l = NULL;
    int rc = distlock_acquire(c, key, 30000, 0, 0, &l);
    printf("churn: after the slot moved to the spare master (127.0.0.1:%d): %d (%s)\n",
           CL->rc->node[spare].port, rc, rc == DISTLOCK_OK ? "granted" : distlock_last_error());
    assert_rc(rc, DISTLOCK_OK);
    char buf[64];
    assert_int_equal(rh_get(CL->rc, spare, 0, key, buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(l));
    int slot = -1;
    assert_int_equal(distlock_admin_cluster_route(c, key, 0, &slot, route, sizeof route), 1);
    snprintf(want, sizeof want, "127.0.0.1:%d", CL->rc->node[spare].port);
    assert_string_equal(route, want);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    /* every dead address was followed while it was the slot's */
    assert_int_equal(learned, DEAD_ADDRESSES);
    /* the other masters, still at their seed addresses, serve as before */
    for (int s = 0; s < 16384; s += 8191) {
        char other[64];
        rh_rcl_key_in_slot(CL, "churn-other", s, other, sizeof other);
        lock_and_release(c, other);
    }
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moved_to_new_master_followed_after_many_dead_addresses),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
