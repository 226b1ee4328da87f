/* test_cluster_unknown_endpoint.c -- a cluster whose nodes announce no
 * endpoint (Redis 7 cluster-preferred-endpoint-type unknown-endpoint, for
 * nodes behind a load balancer): CLUSTER SLOTS gives a NULL endpoint and
 * MOVED / ASK give ":PORT" (no host). Redis's documentation: the client
 * then uses the endpoint it sent the command to, with the port given.
 *
 * cluster.c says it handles it ("An empty address: the server we asked
 * ("unknown endpoint")") but tests for an empty string: Redis sends a NULL
 * (skipped: the element is not a string), and parse_redirect refuses a
 * MOVED whose host is empty (colon == addr). So a key whose slot is on
 * another master than the seed asked fails on every call.
 *
 * Real servers only: 3 masters, no replicas, CONFIG SET
 * cluster-preferred-endpoint-type unknown-endpoint on each; the client is
 * given one seed; a lock on a key of each master's slots. */
#include "test_common.h"

#include "test_cluster_group.h"

DEFINE_CLUSTER_GROUP(rh_rcl_start_n(3, 0))

static void test_moved_without_endpoint_followed_to_the_port_given(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        redisReply *r = rh_command(CL->rc, i, 0,
                                   "CONFIG SET cluster-preferred-endpoint-type unknown-endpoint");
        assert_true(r && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    /* what the servers now say */
    char key[64];
    int seed = 0, slot = -1;
    for (int s = 0; s < 16384 && slot < 0; s += 101)
        if (rh_rcl_owner(CL, 0, s) != seed)
            slot = s;
    assert_true(slot >= 0);
    redisReply *r = rh_command(CL->rc, 0, 0, "CLUSTER SLOTS");
    assert_true(r && r->type == REDIS_REPLY_ARRAY && r->elements > 0);
    printf("# CLUSTER SLOTS endpoint type: %d (nil = %d)\n",
           r->element[0]->element[2]->element[0]->type, REDIS_REPLY_NIL);
    freeReplyObject(r);
    rh_rcl_key_in_slot(CL, "ue", slot, key, sizeof key);
    r = rh_command(CL->rc, seed, 0, "GET %s", key);
    assert_true(r && r->type == REDIS_REPLY_ERROR);
    printf("# server %d on %s: %s\n", seed, key, r->str);
    freeReplyObject(r);

    char uri[128];
    snprintf(uri, sizeof uri, "redis-cluster://127.0.0.1:%d", CL->rc->node[seed].port);
    distlock_client *c = new_client(uri);
    int failed = 0;
    for (int s = 0; s < 16384; s += 4096) {
        char k[64];
        rh_rcl_key_in_slot(CL, "ue", s, k, sizeof k);
        distlock_lock *l = NULL;
        int rc = distlock_acquire(c, k, 30000, 0, 0, &l);
        printf("# lock on %s (slot %d, master %d): %d (%s)\n", k, s, rh_rcl_owner(CL, 0, s), rc,
               rc == DISTLOCK_OK ? "granted" : distlock_last_error());
        if (rc != DISTLOCK_OK) {
            failed++;
            continue;
        }
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    distlock_client_free(c);
    for (int i = 0; i < 3; i++) {
        r = rh_command(CL->rc, i, 0, "CONFIG SET cluster-preferred-endpoint-type ip");
        if (r) freeReplyObject(r);
    }
    assert_int_equal(failed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moved_without_endpoint_followed_to_the_port_given),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
