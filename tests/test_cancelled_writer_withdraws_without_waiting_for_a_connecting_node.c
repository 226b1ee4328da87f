/* test_cancelled_writer_withdraws_without_waiting_for_a_connecting_node.c
 * -- a waiting writer (a plain acquire that waits) cancelled while its first
 * attempt waits for one node's connection withdraws its intent where it
 * noted it and ends at once. Its request never went to the node still
 * connecting (the cancel dropped it), so it has noted nothing there.
 *
 * 3 nodes, quorum 2: nodes 0 and 1 by address, node 2 by a name the
 * slowdns shim (tests/harness/slowdns.h, linked in) resolves only after
 * LOOKUP_MS. A reader holds the key on node 0 (its intent and the registry
 * of waiting writers are noted there), node 1 grants, so the attempt can
 * still win only through node 2: it waits for node 2, and the cancel is
 * fired then. */
#include "test_common.h"
#include "test_multi_drive.h"

#include <pthread.h>

#include "harness/slowdns.h"

#define N 3
DEFINE_GROUP(N)

#define LOOKUP_MS 10000
#define CONNECT_MS 30000
/* far under LOOKUP_MS: the call ends at the cancel, not at the lookup's end */
#define ENDS_WITHIN_MS 3000

static distlock_client *slow_third_client(rh_cluster *rc, const char *host)
{
    char rules[128], uri[512];
    snprintf(rules, sizeof rules, "%s=%d=127.0.0.1", host, LOOKUP_MS);
    assert_int_equal(slowdns_set(rules), 0);
    slowdns_reset_calls();
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d,redis://127.0.0.1:%d,redis://%s:%d",
             rc->node[0].port, rc->node[1].port, host, rc->node[2].port);
    distlock_client *c = new_client(uri);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, CONNECT_MS), DISTLOCK_OK);
    return c;
}

/* A read lock of key on node 0 alone (a client of that node only). */
static distlock_lock *read_lock_on_node0(rh_cluster *rc, distlock_client **rcl, const char *key)
{
    char uri[64];
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", rc->node[0].port);
    *rcl = new_client(uri);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(*rcl, key, 60000, 0, DISTLOCK_SHARED, &l), DISTLOCK_OK);
    return l;
}

static int has_intent(rh_cluster *rc, const char *key)
{
    redisReply *r = rh_command(rc, 0, 0, "ZSCORE %s __write__", key);
    assert_non_null(r);
    int yes = r->type == REDIS_REPLY_STRING;
    freeReplyObject(r);
    return yes;
}

static long long registered_writers(rh_cluster *rc, const char *key)
{
    redisReply *r = rh_command(rc, 0, 0, "ZCARD {%s}:writers", key);
    assert_non_null(r);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

/* Noted on node 0, granted on node 1, node 2's name being looked up. */
static int waiting_for_the_third(rh_cluster *rc, const char *host, const char *key)
{
    return slowdns_calls(host) >= 1 && has_intent(rc, key) &&
           registered_writers(rc, key) == 1 && rh_get(rc, 1, 0, key, NULL, 0) == 1;
}

static void withdrawn(rh_cluster *rc, const char *key)
{
    assert_int_equal(rh_get(rc, 1, 0, key, NULL, 0), 0);
    assert_int_equal(registered_writers(rc, key), 0);
    assert_false(has_intent(rc, key));
}

struct call {
    distlock_client *c;
    const char *key;
    distlock_cancel *cancel;
    distlock_lock *l;
    int rc;
    long long ended_ms;
    char detail[512];
};

static void *call_main(void *arg)
{
    struct call *a = arg;
    distlock_acquire_args args = { .size = sizeof args, .cancel = a->cancel };
    a->rc = distlock_acquire_with(a->c, a->key, 30000, 10000, 0, &args, &a->l);
    a->ended_ms = rh_now_ms();
    snprintf(a->detail, sizeof a->detail, "%s", distlock_last_error());
    return NULL;
}

static void test_cancelled_writer_ends_while_a_name_resolves(void **state)
{
    rh_cluster *rc = *state;
    const char *host = "slow-ra.test", *key = "cr:blocking";
    distlock_client *rcl;
    distlock_lock *rl = read_lock_on_node0(rc, &rcl, key);
    distlock_client *c = slow_third_client(rc, host);
    struct call a = { .c = c, .key = key };
    assert_rc(distlock_cancel_new(&a.cancel), DISTLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, call_main, &a), 0);
    assert_true(RH_WAIT_UNTIL(waiting_for_the_third(rc, host, key), 5000));
    long long fired = rh_now_ms();
    assert_rc(distlock_cancel_fire(a.cancel), DISTLOCK_OK);
    pthread_join(t, NULL);
    long long took = a.ended_ms - fired;
    printf("# writer: cancelled noted on node 0 (a reader), granted on node 1, node 2's name "
           "resolving (%d ms): ended %lld ms after the cancel: rc %d: %s\n", LOOKUP_MS, took,
           a.rc, a.detail);
    assert_int_equal(a.rc, DISTLOCK_ECANCELED);
    assert_null(a.l);
    withdrawn(rc, key);
    assert_true(took < ENDS_WITHIN_MS);
    distlock_cancel_free(a.cancel);
    distlock_client_free(c);
    assert_rc(distlock_release(rl), DISTLOCK_OK);
    distlock_lock_free(rl);
    distlock_client_free(rcl);
}

/* The same through the non-blocking API: distlock_op_cancel(). */
static void test_cancelled_writer_op_ends_while_a_name_resolves(void **state)
{
    rh_cluster *rc = *state;
    const char *host = "slow-rb.test", *key = "cr:op";
    distlock_client *rcl;
    distlock_lock *rl = read_lock_on_node0(rc, &rcl, key);
    distlock_client *c = slow_third_client(rc, host);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *op = NULL;
    assert_rc(distlock_multi_acquire(m, key, 30000, 10000, 0, NULL, &op), DISTLOCK_OK);
    long long end = rh_now_ms() + 5000;
    while (!waiting_for_the_third(rc, host, key) && rh_now_ms() < end)
        multi_turn(m, 10);
    assert_true(waiting_for_the_third(rc, host, key));
    assert_false(distlock_op_done(op));
    long long fired = rh_now_ms();
    distlock_op_cancel(op);
    end = fired + LOOKUP_MS + 5000;
    while (!distlock_op_done(op) && rh_now_ms() < end)
        multi_turn(m, 50);
    long long took = rh_now_ms() - fired;
    printf("# writer op cancelled noted on node 0, granted on node 1, node 2's name resolving: "
           "done %lld ms after the cancel: %s\n", took, distlock_op_error(op));
    assert_true(distlock_op_done(op));
    assert_op(op, DISTLOCK_ECANCELED);
    withdrawn(rc, key);
    assert_true(took < ENDS_WITHIN_MS);
    distlock_op_free(op);
    distlock_multi_free(m);
    distlock_client_free(c);
    assert_rc(distlock_release(rl), DISTLOCK_OK);
    distlock_lock_free(rl);
    distlock_client_free(rcl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_cancelled_writer_ends_while_a_name_resolves, heal),
        cmocka_unit_test_setup(test_cancelled_writer_op_ends_while_a_name_resolves, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
