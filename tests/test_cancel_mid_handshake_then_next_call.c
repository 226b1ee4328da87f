/* test_cancel_mid_handshake_then_next_call.c -- a call cancelled while one
 * node's connection is in its handshake (the server's replies to it held by
 * the fault proxy) drops its request there and ends at once; the client's
 * next calls use that connection once its handshake is in (or a new one),
 * and nothing of the cancelled attempt ever runs on that node.
 *
 * 3 nodes behind the proxy. Node 2's next connection has its replies held
 * (the handshake: HELLO/CLIENT ID/INFO do not come back). A
 * DISTLOCK_FENCING attempt hears every node, so it waits there with nodes
 * 0 and 1 granted; the cancel is fired then. */
#include "test_common.h"

#include "harness/faultproxy.h"

#define N 3
DEFINE_GROUP(N)

#define ENDS_WITHIN_MS 3000

/* Cancelled with node 2's handshake held; returns the client, the proxy
 * still holding node 2's replies. */
static distlock_client *cancelled_mid_handshake(rh_cluster *rc, fp_proxy *fp, const char *key)
{
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold 2:next down"), 0);
    distlock_client *c = new_client(fp_uris(fp));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 30000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 20000), DISTLOCK_OK);
    cancelled_call a = { .c = c, .key = key, .ttl_ms = 30000, .wait_ms = 0,
                         .flags = DISTLOCK_FENCING };
    cancelled_call_start(&a);
    assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held 2 down 1 10000"), 0);
    assert_true(RH_WAIT_UNTIL(rh_get(rc, 0, 0, key, NULL, 0) == 1 &&
                              rh_get(rc, 1, 0, key, NULL, 0) == 1, 5000));
    long long fired = rh_now_ms();
    assert_rc(distlock_cancel_fire(a.cancel), DISTLOCK_OK);
    cancelled_call_join(&a);
    long long took = a.ended_ms - fired;
    printf("# cancelled with node 2's handshake held: ended %lld ms after the cancel: rc %d: "
           "%s\n", took, a.rc, a.detail);
    assert_int_equal(a.rc, DISTLOCK_ECANCELED);
    assert_null(a.l);
    assert_true(took < ENDS_WITHIN_MS);
    assert_holding(rc, key, NULL, 0);
    return c;
}

/* The handshake's replies then come: the next acquire (fencing: it hears
 * every node) and its release work on all three nodes; the cancelled key
 * never reaches node 2. */
static void test_next_acquire_after_the_handshake_comes(void **state)
{
    rh_cluster *rc = *state;
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *c = cancelled_mid_handshake(rc, fp, "mh:a");
    assert_int_equal(fp_cmd(fp, NULL, 0, "unhold 2 down"), 0);
    distlock_lock *l = NULL;
    long long t0 = rh_now_ms();
    assert_rc(distlock_acquire(c, "mh:b", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
    printf("# next fencing acquire: %lld ms, fence %lld\n", rh_now_ms() - t0,
           (long long)distlock_lock_fence(l));
    assert_holding(rc, "mh:b", distlock_lock_token(l), 3);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_holding(rc, "mh:b", NULL, 0);
    assert_int_equal(rh_get(rc, 2, 0, "mh:a", NULL, 0), 0);
    /* and the cancelled key itself, again */
    assert_rc(distlock_acquire(c, "mh:a", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
    assert_holding(rc, "mh:a", distlock_lock_token(l), 3);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_holding(rc, "mh:a", NULL, 0);
    distlock_client_free(c);
    fp_stop(fp);
}

/* The replies stay held: a plain acquire (ends at the quorum) still works
 * through nodes 0 and 1; then the handshake comes, its release and a
 * fencing acquire work on every node, and nothing of the cancelled attempt
 * runs on node 2. (Its release is made once the handshake is in: a release
 * while it is held waits for node 2's connection up to the command
 * timeout, with or without a cancel before, as any trailing request does.) */
static void test_next_acquire_while_the_handshake_is_held(void **state)
{
    rh_cluster *rc = *state;
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *c = cancelled_mid_handshake(rc, fp, "mh:c");
    distlock_lock *l = NULL;
    long long t0 = rh_now_ms();
    assert_rc(distlock_acquire(c, "mh:d", 30000, 0, 0, &l), DISTLOCK_OK);
    printf("# next acquire with node 2's handshake held: %lld ms\n", rh_now_ms() - t0);
    assert_holding_quorum(rc, "mh:d", distlock_lock_token(l), 3);
    assert_int_equal(fp_cmd(fp, NULL, 0, "unhold 2 down"), 0);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_holding(rc, "mh:d", NULL, 0);
    assert_rc(distlock_acquire(c, "mh:e", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
    assert_holding(rc, "mh:e", distlock_lock_token(l), 3);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_int_equal(rh_get(rc, 2, 0, "mh:c", NULL, 0), 0);
    assert_holding(rc, "mh:e", NULL, 0);
    distlock_client_free(c);
    fp_stop(fp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_next_acquire_after_the_handshake_comes, heal),
        cmocka_unit_test_setup(test_next_acquire_while_the_handshake_is_held, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
