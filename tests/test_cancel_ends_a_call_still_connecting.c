/* test_cancel_ends_a_call_still_connecting.c -- a call's cancel fired while
 * its request waits for its connection (the node's name still resolving,
 * a Sentinel lookup, a connect or a handshake under way) ends the call at
 * once: nothing of it was sent, so there is nothing to wait for. Before,
 * the call waited until the connection was made (up to the connect
 * timeout), sent its request, and only then saw the cancel.
 *
 * The node is named by a host the slowdns shim (tests/harness/slowdns.h,
 * linked in) resolves only after LOOKUP_MS; the connect timeout is longer
 * still. The cancel is fired once the lookup has begun (slowdns counts
 * it); the call must end well before the lookup does. */
#include "test_common.h"
#include "test_multi_drive.h"

#include "harness/slowdns.h"

#define N 1
DEFINE_GROUP(N)

#define LOOKUP_MS 10000
#define CONNECT_MS 30000
/* far under LOOKUP_MS: the call ends at the cancel, not at the lookup's end */
#define ENDS_WITHIN_MS 3000

static distlock_client *slow_client(rh_cluster *rc, const char *host)
{
    char rules[128], uri[128];
    snprintf(rules, sizeof rules, "%s=%d=127.0.0.1", host, LOOKUP_MS);
    assert_int_equal(slowdns_set(rules), 0);
    slowdns_reset_calls();
    snprintf(uri, sizeof uri, "redis://%s:%d", host, rc->node[0].port);
    distlock_client *c = new_client(uri);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, CONNECT_MS), DISTLOCK_OK);
    return c;
}

/* A blocking acquire, its own cancel fired by another thread while the
 * node's name resolves: DISTLOCK_ECANCELED, no handle, nothing on the
 * server. */
static void cancel_blocking_call(rh_cluster *rc, const char *host, const char *key,
                                 long wait_ms)
{
    cancelled_call a = { .c = slow_client(rc, host), .key = key, .ttl_ms = 30000,
                         .wait_ms = wait_ms };
    cancelled_call_start(&a);
    assert_true(RH_WAIT_UNTIL(slowdns_calls(host) >= 1, 10000));
    long long fired = rh_now_ms();
    assert_rc(distlock_cancel_fire(a.cancel), DISTLOCK_OK);
    cancelled_call_join(&a);
    long long took = a.ended_ms - fired;
    printf("# wait %ld ms: cancelled while the name resolved (%d ms): ended %lld ms after "
           "the cancel: rc %d: %s\n", wait_ms, LOOKUP_MS, took, a.rc, a.detail);
    assert_int_equal(a.rc, DISTLOCK_ECANCELED);
    assert_null(a.l);
    assert_true(took < ENDS_WITHIN_MS);
    assert_int_equal(rh_get(rc, 0, 0, key, NULL, 0), 0);
    distlock_client_free(a.c);
}

static void test_cancelled_waiting_acquire_ends_while_its_name_resolves(void **state)
{
    cancel_blocking_call(*state, "slow-a.test", "cs:waiting", 10000);
}

static void test_cancelled_single_try_ends_while_its_name_resolves(void **state)
{
    cancel_blocking_call(*state, "slow-b.test", "cs:once", 0);
}

/* The same through the non-blocking API: distlock_op_cancel() while the
 * op's first attempt waits for the lookup; the op is done within the
 * bound, cancelled. */
static void test_cancelled_op_ends_while_its_name_resolves(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = slow_client(rc, "slow-c.test");
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *op = NULL;
    assert_rc(distlock_multi_acquire(m, "cs:op", 30000, 10000, 0, NULL, &op), DISTLOCK_OK);
    long long end = rh_now_ms() + 10000;
    while (slowdns_calls("slow-c.test") < 1 && rh_now_ms() < end)
        multi_turn(m, 10);
    assert_true(slowdns_calls("slow-c.test") >= 1);
    assert_false(distlock_op_done(op));
    long long fired = rh_now_ms();
    distlock_op_cancel(op);
    multi_drive_until(m, op, ENDS_WITHIN_MS);
    printf("# op cancelled while the name resolved: done %lld ms after the cancel: %s\n",
           rh_now_ms() - fired, distlock_op_error(op));
    assert_op(op, DISTLOCK_ECANCELED);
    assert_int_equal(rh_get(rc, 0, 0, "cs:op", NULL, 0), 0);
    distlock_op_free(op);
    distlock_multi_free(m);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_cancelled_waiting_acquire_ends_while_its_name_resolves,
                               heal),
        cmocka_unit_test_setup(test_cancelled_single_try_ends_while_its_name_resolves, heal),
        cmocka_unit_test_setup(test_cancelled_op_ends_while_its_name_resolves, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
