/* test_stuck_connection.c -- a connection that owes a reply past its timeout
 * is replaced on the next call that needs its node, and a reconnect made
 * inside a call spends that call's budget.
 *
 * Real redis-servers behind the fault-injecting proxy. A "stuck" connection
 * is one whose bytes the proxy holds in both directions, forever or until
 * the test lets them through: what a NAT or firewall that dropped an idle
 * connection does (the kernel keeps such a socket for ~15 minutes), while
 * new connections to the same server work.
 *
 *  a) one node (N = 1): the first call times out; the next call succeeds
 *     on a new connection, after CLIENT KILL ID of the stuck one (gone from
 *     the server), and so does every later call, on any key; the stuck
 *     connection's bytes, delivered at last, change nothing (its release
 *     of a lock that is still held);
 *  b) the same with three nodes: the stuck node serves the next call;
 *  c) a connection that breaks inside a call is re-made within that call's
 *     command timeout, not the (longer) connect timeout.
 */
#include "test_common.h"
#include "test_proxy_cluster.h"

DEFINE_PROXY_GROUP(3)

#define CMD_MS 300L
#define BOUND_MS 2000LL  /* "about the command timeout", on a busy 2-core box under ASan */

static distlock_client *client_on(proxy_env *e, unsigned mask, long connect_ms)
{
    char uris[256];
    distlock_client *c = new_client(fp_uris_mask(e->fp, mask, uris, sizeof uris));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, CMD_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, connect_ms), DISTLOCK_OK);
    return c;
}

static long long accepted(proxy_env *e, int l)
{
    char rep[128];
    long long n = -1;
    assert_int_equal(fp_cmd(e->fp, rep, sizeof rep, "accepted %d", l), 0);
    assert_int_equal(sscanf(rep, "ok %lld", &n), 1);
    return n;
}

/* Clients connected to node i, as the server counts them (the helper's own
 * connection included, the same way each time). */
static long long server_clients(proxy_env *e, int i)
{
    redisReply *r = rh_command(e->rc, i, 0, "INFO clients");
    assert_true(r && r->type == REDIS_REPLY_STRING);
    const char *p = strstr(r->str, "connected_clients:");
    assert_non_null(p);
    long long n = atoll(p + strlen("connected_clients:"));
    freeReplyObject(r);
    return n;
}

static void test_stuck_connection_replaced_single_node(void **state)
{
    proxy_env *e = *state;
    const char *key = "stuck:single", *tok = "stuck-single-owner";
    distlock_client *c = client_on(e, 0x1, CMD_MS);
    warm_up(c);
    assert_rc(distlock_acquire_token(c, key, 30000, tok, 0, NULL), DISTLOCK_OK);
    int stuck = lib_conn(e, 0);
    long long before = accepted(e, 0), clients = server_clients(e, 0);
    fp_ok(e->fp, "hold 0:%d", stuck);

    /* The release is held on the stuck connection: it costs one timeout. */
    long long t0 = rh_now_ms();
    assert_fails(distlock_release_token(c, key, tok), DISTLOCK_ECONN);
    long long took = rh_now_ms() - t0;
    printf("# stuck connection: release ECONN in %lld ms (\"%s\")\n", took,
           distlock_last_error());
    assert_true(took >= CMD_MS - 50 && took < BOUND_MS);

    /* Then nothing: the next call (another key) is served, on a new
     * connection, and the server no longer has the stuck one (killed
     * before the call was sent, whatever the stuck one carries). */
    t0 = rh_now_ms();
    int rc = distlock_acquire_token(c, "stuck:single:next", 10000, tok, 0, NULL);
    took = rh_now_ms() - t0;
    printf("# next call (acquire of another key): %d in %lld ms (\"%s\"), connections accepted "
           "%lld -> %lld, server clients %lld -> %lld\n", rc, took,
           rc == DISTLOCK_OK ? "" : distlock_last_error(), before, accepted(e, 0), clients,
           server_clients(e, 0));
    if (rc != DISTLOCK_OK) {
        print_error("the call after a stuck connection's timeout failed (%d: %s): the stuck "
                    "connection was not replaced\n", rc, distlock_last_error());
        fail();
    }
    assert_true(accepted(e, 0) == before + 1);
    assert_true(server_clients(e, 0) == clients);

    /* The stuck connection's bytes arrive at last: its release must not run
     * (the server closed that connection on CLIENT KILL ID). The proxy
     * closes it once the server has (after running what it got, if any). */
    fp_unhold_or_killed(e->fp, "unhold 0:%d", stuck);
    fp_ok(e->fp, "wait-closed 0:%d 5000", stuck);
    assert_holding(e->rc, key, tok, 1);

    /* Every later call, on any key, is served (on the new connection). */
    long validity = 0;
    assert_rc(distlock_extend_token(c, key, tok, 30000, &validity), DISTLOCK_OK);
    assert_true(validity > 0);
    assert_rc(distlock_release_token(c, "stuck:single:next", tok), DISTLOCK_OK);
    for (int k = 0; k < 10; k++) {
        char other[64];
        snprintf(other, sizeof other, "stuck:single:%d", k);
        assert_rc(distlock_acquire_token(c, other, 10000, tok, 0, NULL), DISTLOCK_OK);
        assert_rc(distlock_release_token(c, other, tok), DISTLOCK_OK);
    }
    assert_true(accepted(e, 0) == before + 1);
    assert_rc(distlock_release_token(c, key, tok), DISTLOCK_OK);
    distlock_client_free(c);
}

static void test_stuck_connection_replaced_in_redlock(void **state)
{
    proxy_env *e = *state;
    const char *key = "stuck:redlock", *tok = "stuck-redlock-owner";
    distlock_client *c = client_on(e, 0x7, CMD_MS);
    warm_up(c);
    int stuck = lib_conn(e, 2);
    long long before = accepted(e, 2);
    fp_ok(e->fp, "hold 2:%d", stuck);

    /* A call that waits for node 2 costs one timeout there... */
    long long t0 = rh_now_ms();
    assert_fails(distlock_admin_holder(c, key, 2, NULL), DISTLOCK_ECONN);
    long long took = rh_now_ms() - t0;
    printf("# node 2's connection stuck: inspect ECONN in %lld ms\n", took);
    assert_true(took >= CMD_MS - 50 && took < BOUND_MS);

    /* ...then node 2 answers the next one, on a new connection. */
    t0 = rh_now_ms();
    int rc = distlock_admin_holder(c, key, 2, NULL);
    took = rh_now_ms() - t0;
    printf("# next inspect of node 2: %d in %lld ms (\"%s\")\n", rc, took,
           rc == 0 ? "" : distlock_last_error());
    if (rc != 0) {
        print_error("node 2 still fails after its stuck connection's timeout (%d: %s)\n", rc,
                    distlock_last_error());
        fail();
    }
    assert_true(accepted(e, 2) == before + 1);
    /* and a lock is taken on all three nodes again */
    assert_rc(distlock_acquire_token(c, key, 30000, tok, 0, NULL), DISTLOCK_OK);
    assert_holding(e->rc, key, tok, 3);
    assert_rc(distlock_release_token(c, key, tok), DISTLOCK_OK);
    fp_unhold_or_killed(e->fp, "unhold 2:%d", stuck);
    distlock_client_free(c);
}

/* A connection the server side closed under us (the proxy detaches it) is
 * re-made inside the call; the new one never answers. The call ends at its
 * command timeout (300 ms), not the connect timeout (1000 ms). */
static void test_reconnect_inside_call_bounded_by_command_timeout(void **state)
{
    proxy_env *e = *state;
    const char *key = "stuck:reconnect", *tok = "stuck-reconnect-owner";
    const long connect_ms = 1000;
    distlock_client *c = client_on(e, 0x1, connect_ms);
    warm_up(c);
    assert_rc(distlock_acquire_token(c, key, 30000, tok, 0, NULL), DISTLOCK_OK);
    int old = lib_conn(e, 0);
    fp_ok(e->fp, "hold 0");            /* new connections: nothing answers */
    fp_ok(e->fp, "detach 0:%d", old);  /* the established one: closed under us */

    long long t0 = rh_now_ms();
    assert_fails(distlock_release_token(c, key, tok), DISTLOCK_ECONN);
    long long took = rh_now_ms() - t0;
    printf("# release over a re-made connection that never answers: ECONN in %lld ms "
           "(command timeout %ld, connect timeout %ld) (\"%s\")\n", took, CMD_MS, connect_ms,
           distlock_last_error());
    if (took >= connect_ms - 100) {
        print_error("a reconnect inside a call took %lld ms: the connect timeout (%ld ms), "
                    "not the call's command timeout (%ld ms)\n", took, connect_ms, CMD_MS);
        fail();
    }
    fp_ok(e->fp, "heal");
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_stuck_connection_replaced_single_node, heal),
        cmocka_unit_test_setup(test_stuck_connection_replaced_in_redlock, heal),
        cmocka_unit_test_setup(test_reconnect_inside_call_bounded_by_command_timeout, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
