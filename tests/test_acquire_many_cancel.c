/* test_acquire_many_cancel.c -- a cancel (distlock_acquire_args.cancel) of
 * a set of keys (distlock_acquire_many), against real redis-server
 * processes on 1 and 3 nodes: fired before the call, nothing is sent;
 * fired while the set waits for a key another owner holds, the call
 * returns DISTLOCK_ECANCELED at once (woken, not at its deadline) and holds
 * nothing; the other owner's key is untouched. */
#include "test_common.h"

#include <pthread.h>

#define N 3
DEFINE_GROUP(N)

static long numsub(const rh_cluster *rc, int i, const char *channel)
{
    redisReply *r = rh_command(rc, i, 0, "PUBSUB NUMSUB %s", channel);
    assert_non_null(r);
    long n = r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? (long)r->element[1]->integer
                                                               : -1;
    freeReplyObject(r);
    return n;
}

typedef struct waiter {
    distlock_client *c;
    distlock_cancel *cancel;
    int rc;
    long long ms;
    distlock_lock *l;
} waiter;

static void *wait_set(void *arg)
{
    waiter *w = arg;
    const char *keys[] = { "cx:a", "cx:b", "cx:c" };
    distlock_acquire_args a = { .size = sizeof a, .cancel = w->cancel };
    long long t0 = rh_now_ms();
    w->rc = distlock_acquire_many(w->c, keys, 3, 30000, DISTLOCK_WAIT_FOREVER, 0, &a, &w->l);
    w->ms = rh_now_ms() - t0;
    return NULL;
}

static void cancel_set(rh_cluster *rc, int nodes)
{
    char buf[1024];
    distlock_client *c = new_client(rh_uris_mask(rc, (1u << nodes) - 1, buf, sizeof buf));
    distlock_cancel *cancel = NULL;
    assert_rc(distlock_cancel_new(&cancel), DISTLOCK_OK);

    /* fired before: nothing sent, nothing held */
    assert_rc(distlock_cancel_fire(cancel), DISTLOCK_OK);
    waiter w0 = { .c = c, .cancel = cancel };
    wait_set(&w0);
    assert_rc(w0.rc, DISTLOCK_ECANCELED);
    assert_null(w0.l);
    for (int i = 0; i < nodes; i++)
        assert_int_equal(rh_dbsize(rc, i), 0);
    distlock_cancel_free(cancel);

    /* fired while waiting for cx:b */
    assert_rc(distlock_cancel_new(&cancel), DISTLOCK_OK);
    /* cx:b is counted on every node below: each connection up first */
    connect_nodes(rc, c, "cx:connect", nodes);
    distlock_lock *b = NULL;
    assert_rc(distlock_acquire(c, "cx:b", 30000, 0, 0, &b), DISTLOCK_OK);
    waiter w = { .c = c, .cancel = cancel };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_set, &w), 0);
    assert_true(RH_WAIT_UNTIL(numsub(rc, 0, "distlock:cx:b") >= 1, 10000));
    long long t0 = rh_now_ms();
    assert_rc(distlock_cancel_fire(cancel), DISTLOCK_OK);
    pthread_join(th, NULL);
    long long after = rh_now_ms() - t0;
    printf("%d node(s): waiting set cancelled: %s (%s), %lld ms after the fire\n", nodes,
           distlock_strerror(w.rc), distlock_last_error(), after);
    assert_rc(w.rc, DISTLOCK_ECANCELED);
    assert_null(w.l);
    assert_true(after < slow_bound(2000, 5000));
    for (int i = 0; i < nodes; i++) {
        redisReply *r = rh_command(rc, i, 0, "EXISTS cx:a cx:c");
        assert_non_null(r);
        assert_int_equal(r->integer, 0);
        freeReplyObject(r);
    }
    assert_holding(rc, "cx:b", distlock_lock_token(b), nodes);
    assert_rc(distlock_release(b), DISTLOCK_OK);
    distlock_lock_free(b);
    distlock_cancel_free(cancel);
    distlock_client_free(c);
}

static void test_cancel_set_one_node(void **state)
{
    cancel_set(*state, 1);
}

static void test_cancel_set_three_nodes(void **state)
{
    cancel_set(*state, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_cancel_set_one_node, heal),
        cmocka_unit_test_setup(test_cancel_set_three_nodes, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
