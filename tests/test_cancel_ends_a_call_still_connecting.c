/* test_cancel_ends_a_call_still_connecting.c -- a call's cancel fired while
 * its request waits for its connection (the node's name still resolving,
 * a Sentinel lookup, a connect or a handshake under way) ends the call at
 * once: nothing of it was sent there, so there is nothing to wait for, and
 * what the cancel leaves to clean up (a lock won on the other nodes, a fair
 * queue place, a writer's intent) is cleaned up where the call's requests
 * went, without waiting for that connection either. Before, the call
 * waited until the connection was made (up to the connect timeout), sent
 * its request, and only then saw the cancel.
 *
 * The slowdns shim (tests/harness/slowdns.h, linked in) resolves the slow
 * node's name only after LOOKUP_MS; the connect timeout is longer still.
 * The cancel is fired once the attempt is where each case wants it; the
 * call must end well before the lookup does. Each situation is cancelled in
 * a blocking acquire with its own cancel (waiting; a single try where the
 * attempt alone decides) and in an op of the non-blocking API
 * (distlock_op_cancel):
 *  - one node, its name resolving: nothing anywhere;
 *  - 3 nodes (quorum 2), node 2's name resolving, a DISTLOCK_FENCING
 *    attempt granted on nodes 0 and 1 (it hears every node before it wins):
 *    the lock is given back on nodes 0 and 1;
 *  - DISTLOCK_FAIR, granted on node 0, queued on node 1 behind another
 *    owner: it leaves the queues it reached;
 *  - a waiting writer noted on node 0 (a reader holds the key there),
 *    granted on node 1: it withdraws its intent where it noted it. */
#include "test_common.h"
#include "test_multi_drive.h"

#include "harness/slowdns.h"

#define N 3
DEFINE_GROUP(N)

#define LOOKUP_MS 10000
#define CONNECT_MS 30000
/* far under LOOKUP_MS: the call ends at the cancel, not at the lookup's end */
#define ENDS_WITHIN_MS 3000

static const char *slow_host;  /* the slow name of the test under way */

/* A client of node 0 by the slow name (nodes 1), or of nodes 0 and 1 by
 * address and node 2 by the slow name (nodes 3). */
static distlock_client *slow_client(rh_cluster *rc, const char *host, int nodes)
{
    char rules[128], uri[512];
    slow_host = host;
    snprintf(rules, sizeof rules, "%s=%d=127.0.0.1", host, LOOKUP_MS);
    assert_int_equal(slowdns_set(rules), 0);
    slowdns_reset_calls();
    if (nodes == 1)
        snprintf(uri, sizeof uri, "redis://%s:%d", host, rc->node[0].port);
    else
        snprintf(uri, sizeof uri, "redis://127.0.0.1:%d,redis://127.0.0.1:%d,redis://%s:%d",
                 rc->node[0].port, rc->node[1].port, host, rc->node[2].port);
    distlock_client *c = new_client(uri);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, CONNECT_MS), DISTLOCK_OK);
    return c;
}

static int resolving(void)
{
    return slowdns_calls(slow_host) >= 1;
}

static int held(rh_cluster *rc, int i, const char *key)
{
    return rh_get(rc, i, 0, key, NULL, 0) == 1;
}

/* ZCARD of the key's side key {key}<suffix> on node i (-1: not a zset). */
static long long side_zcard(rh_cluster *rc, int i, const char *key, const char *suffix)
{
    redisReply *r = rh_command(rc, i, 0, "ZCARD {%s}%s", key, suffix);
    assert_non_null(r);
    long long n = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return n;
}

static int writer_intent_on_node0(rh_cluster *rc, const char *key)
{
    redisReply *r = rh_command(rc, 0, 0, "ZSCORE %s __write__", key);
    assert_non_null(r);
    int yes = r->type == REDIS_REPLY_STRING;
    freeReplyObject(r);
    return yes;
}

/* ------------------------------------------------------------ situations */

typedef struct situation {
    const char *name;
    int nodes;
    unsigned flags;
    void (*before)(rh_cluster *rc, const char *key);        /* NULL: nothing */
    int (*under_way)(rh_cluster *rc, const char *key);      /* where the cancel is fired */
    void (*nothing_left)(rh_cluster *rc, const char *key);  /* asserts, after the call */
    void (*after)(void);                                    /* NULL: nothing */
} situation;

static int name_resolving(rh_cluster *rc, const char *key)
{
    (void)rc, (void)key;
    return resolving();
}

static void not_on_node0(rh_cluster *rc, const char *key)
{
    assert_false(held(rc, 0, key));
}

static const situation one_node = {
    "one node, its name resolving", 1, 0, NULL, name_resolving, not_on_node0, NULL
};

static int granted_on_nodes_0_and_1(rh_cluster *rc, const char *key)
{
    return resolving() && held(rc, 0, key) && held(rc, 1, key);
}

static void given_back(rh_cluster *rc, const char *key)
{
    assert_false(held(rc, 0, key));
    assert_false(held(rc, 1, key));
}

static const situation fencing_win = {
    "fencing, granted on nodes 0 and 1, node 2's name resolving", 3, DISTLOCK_FENCING, NULL,
    granted_on_nodes_0_and_1, given_back, NULL
};

static void another_owner_on_node1(rh_cluster *rc, const char *key)
{
    assert_int_equal(rh_set(rc, 1, 0, key, "another-owner", 60000), 0);
}

static int granted_on_0_queued_on_1(rh_cluster *rc, const char *key)
{
    return resolving() && held(rc, 0, key) && side_zcard(rc, 1, key, ":q") == 1;
}

static void left_the_queues(rh_cluster *rc, const char *key)
{
    assert_false(held(rc, 0, key));
    assert_int_equal(side_zcard(rc, 0, key, ":q"), 0);
    assert_int_equal(side_zcard(rc, 1, key, ":q"), 0);
}

static const situation fair_waiter = {
    "fair, granted on node 0, queued on node 1, node 2's name resolving", 3, DISTLOCK_FAIR,
    another_owner_on_node1, granted_on_0_queued_on_1, left_the_queues, NULL
};

static distlock_client *reader_client;
static distlock_lock *reader_lock;

/* A read lock of key on node 0 alone (a client of that node only). */
static void read_locked_on_node0(rh_cluster *rc, const char *key)
{
    char uri[64];
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", rc->node[0].port);
    reader_client = new_client(uri);
    assert_rc(distlock_acquire(reader_client, key, 60000, 0, DISTLOCK_SHARED, &reader_lock),
              DISTLOCK_OK);
}

static void reader_gone(void)
{
    assert_rc(distlock_release(reader_lock), DISTLOCK_OK);
    distlock_lock_free(reader_lock);
    distlock_client_free(reader_client);
}

static int noted_on_0_granted_on_1(rh_cluster *rc, const char *key)
{
    return resolving() && writer_intent_on_node0(rc, key) &&
           side_zcard(rc, 0, key, ":writers") == 1 && held(rc, 1, key);
}

static void withdrawn(rh_cluster *rc, const char *key)
{
    assert_false(held(rc, 1, key));
    assert_int_equal(side_zcard(rc, 0, key, ":writers"), 0);
    assert_false(writer_intent_on_node0(rc, key));
}

static const situation waiting_writer = {
    "writer, noted on node 0 (a reader), granted on node 1, node 2's name resolving", 3, 0,
    read_locked_on_node0, noted_on_0_granted_on_1, withdrawn, reader_gone
};

/* ------------------------------------------------------------ the calls */

/* A blocking acquire, its own cancel fired by this thread once the attempt
 * is under way as the situation wants: DISTLOCK_ECANCELED, no handle,
 * nothing left, within the bound. */
static void cancel_blocking(rh_cluster *rc, const situation *s, const char *host,
                            const char *key, long wait_ms)
{
    if (s->before)
        s->before(rc, key);
    cancelled_call a = { .c = slow_client(rc, host, s->nodes), .key = key, .ttl_ms = 30000,
                         .wait_ms = wait_ms, .flags = s->flags };
    cancelled_call_start(&a);
    int ready = RH_WAIT_UNTIL(s->under_way(rc, key), 10000);
    long long fired = rh_now_ms();
    assert_rc(distlock_cancel_fire(a.cancel), DISTLOCK_OK);
    cancelled_call_join(&a);
    long long took = a.ended_ms - fired;
    printf("# %s, wait %ld ms: ended %lld ms after the cancel (lookup %d ms): rc %d: %s\n",
           s->name, wait_ms, took, LOOKUP_MS, a.rc, a.detail);
    assert_true(ready);
    assert_int_equal(a.rc, DISTLOCK_ECANCELED);
    assert_null(a.l);
    s->nothing_left(rc, key);
    assert_true(took < ENDS_WITHIN_MS);
    distlock_client_free(a.c);
    if (s->after)
        s->after();
}

/* The same through the non-blocking API: distlock_op_cancel(). */
static void cancel_op(rh_cluster *rc, const situation *s, const char *host, const char *key)
{
    if (s->before)
        s->before(rc, key);
    distlock_client *c = slow_client(rc, host, s->nodes);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *op = NULL;
    assert_rc(distlock_multi_acquire(m, key, 30000, 10000, s->flags, NULL, &op), DISTLOCK_OK);
    long long end = rh_now_ms() + 10000;
    while (!s->under_way(rc, key) && rh_now_ms() < end)
        multi_turn(m, 10);
    assert_true(s->under_way(rc, key));
    assert_false(distlock_op_done(op));
    long long fired = rh_now_ms();
    distlock_op_cancel(op);
    end = fired + LOOKUP_MS + 5000;
    while (!distlock_op_done(op) && rh_now_ms() < end)
        multi_turn(m, 50);
    long long took = rh_now_ms() - fired;
    printf("# %s, an op: done %lld ms after the cancel (lookup %d ms): %s\n", s->name, took,
           LOOKUP_MS, distlock_op_error(op));
    assert_true(distlock_op_done(op));
    assert_op(op, DISTLOCK_ECANCELED);
    s->nothing_left(rc, key);
    assert_true(took < ENDS_WITHIN_MS);
    distlock_op_free(op);
    distlock_multi_free(m);
    distlock_client_free(c);
    if (s->after)
        s->after();
}

static void test_cancelled_waiting_acquire_ends_while_its_name_resolves(void **state)
{
    cancel_blocking(*state, &one_node, "slow-a.test", "cs:waiting", 10000);
}

static void test_cancelled_single_try_ends_while_its_name_resolves(void **state)
{
    cancel_blocking(*state, &one_node, "slow-b.test", "cs:once", 0);
}

static void test_cancelled_op_ends_while_its_name_resolves(void **state)
{
    cancel_op(*state, &one_node, "slow-c.test", "cs:op");
}

static void test_cancelled_fencing_win_is_given_back_while_a_name_resolves(void **state)
{
    cancel_blocking(*state, &fencing_win, "slow-wa.test", "cw:waiting", 10000);
}

static void test_cancelled_single_try_fencing_win_is_given_back_while_a_name_resolves(
    void **state)
{
    cancel_blocking(*state, &fencing_win, "slow-wb.test", "cw:once", 0);
}

static void test_cancelled_fencing_op_win_is_given_back_while_a_name_resolves(void **state)
{
    cancel_op(*state, &fencing_win, "slow-wc.test", "cw:op");
}

static void test_cancelled_fair_waiter_leaves_the_queues_it_reached(void **state)
{
    cancel_blocking(*state, &fair_waiter, "slow-fa.test", "cf:blocking", 10000);
}

static void test_cancelled_fair_op_leaves_the_queues_it_reached(void **state)
{
    cancel_op(*state, &fair_waiter, "slow-fb.test", "cf:op");
}

static void test_cancelled_writer_withdraws_its_intent_where_it_noted_it(void **state)
{
    cancel_blocking(*state, &waiting_writer, "slow-ra.test", "cr:blocking", 10000);
}

static void test_cancelled_writer_op_withdraws_its_intent_where_it_noted_it(void **state)
{
    cancel_op(*state, &waiting_writer, "slow-rb.test", "cr:op");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_cancelled_waiting_acquire_ends_while_its_name_resolves,
                               heal),
        cmocka_unit_test_setup(test_cancelled_single_try_ends_while_its_name_resolves, heal),
        cmocka_unit_test_setup(test_cancelled_op_ends_while_its_name_resolves, heal),
        cmocka_unit_test_setup(test_cancelled_fencing_win_is_given_back_while_a_name_resolves,
                               heal),
        cmocka_unit_test_setup(
            test_cancelled_single_try_fencing_win_is_given_back_while_a_name_resolves, heal),
        cmocka_unit_test_setup(test_cancelled_fencing_op_win_is_given_back_while_a_name_resolves,
                               heal),
        cmocka_unit_test_setup(test_cancelled_fair_waiter_leaves_the_queues_it_reached, heal),
        cmocka_unit_test_setup(test_cancelled_fair_op_leaves_the_queues_it_reached, heal),
        cmocka_unit_test_setup(test_cancelled_writer_withdraws_its_intent_where_it_noted_it,
                               heal),
        cmocka_unit_test_setup(test_cancelled_writer_op_withdraws_its_intent_where_it_noted_it,
                               heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
