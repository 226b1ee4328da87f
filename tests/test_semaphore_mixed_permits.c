/* test_semaphore_mixed_permits.c -- clients using different P on one
 * semaphore key, on 5 independent nodes, against real redis-server
 * processes. docs/semaphores.md (Limits): with different P in use a node
 * carries at most P_max permits and a holder of P_min needed k(P_min)
 * grants, so H <= N * P_max / k(P_min), which can exceed P_max. Here one
 * client uses P = 1 (k = 3 grants of 5) and three use P = 3 (k = 4): the
 * schedule below (nodes made full for one attempt by other holders'
 * permits, as test_semaphore's test_five_nodes_three_permits_needs_four_grants
 * makes them) ends with every node carrying exactly 3 live permits and 4
 * holders: more than P_max = 3 (what the page warns of), within the bound
 * 5 * 3 / 3 = 5, and no node above P_max. */
#include "test_common.h"

#define N 5
DEFINE_GROUP(N)

static distlock_client *client_on(const rh_cluster *rc, int n)
{
    char buf[1024];
    return new_client(rh_uris_mask(rc, (1u << n) - 1, buf, sizeof buf));
}

static long long epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Node i full for the next attempt: three other holders' live permits
 * (the marker keeps the P the node already has, or 3 on an empty key). */
static void fill(rh_cluster *rc, int i, const char *key)
{
    long long until = epoch_ms() + 60000;
    node_command_ok(rc, i, "ZADD %s NX 3 __distlock_semaphore__", key);
    node_command_ok(rc, i, "ZADD %s %lld f1 %lld f2 %lld f3", key, until, until, until);
}

/* Those holders release. */
static void unfill(rh_cluster *rc, int i, const char *key)
{
    node_command_ok(rc, i, "ZREM %s f1 f2 f3", key);
}

static long long live_tokens(const rh_cluster *rc, int i, const char *key)
{
    redisReply *r = rh_command(rc, i, 0, "ZCOUNT %s (1000000 +inf", key);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

static void test_mixed_permits_bound_is_n_pmax_over_k_pmin(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "sem:mixed";
    distlock_client *c = client_on(rc, 5);
    distlock_lock *l[4] = { 0 };
    int held = 0;

    /* the P = 1 client: nodes 3 and 4 are full for its attempt; it is
     * granted on 0, 1, 2 (k = 3) */
    fill(rc, 3, key);
    fill(rc, 4, key);
    int r = distlock_semaphore_acquire(c, key, 1, 30000, 0, 0, NULL, &l[held]);
    unfill(rc, 3, key);
    unfill(rc, 4, key);
    printf("# P=1 client: %s\n", distlock_strerror(r));
    if (r == DISTLOCK_OK)
        held++;

    /* three P = 3 clients: the j-th finds node j full, and is granted on
     * the four others (k = 4) */
    for (int j = 0; j < 3; j++) {
        int filled = live_tokens(rc, j, key) < 3;
        if (filled)
            fill(rc, j, key);
        r = distlock_semaphore_acquire(c, key, 3, 30000, 0, 0, NULL, &l[held]);
        if (filled)
            unfill(rc, j, key);
        printf("# P=3 client %d: %s\n", j, distlock_strerror(r));
        if (r == DISTLOCK_OK)
            held++;
    }
    printf("# live permits per node:");
    for (int i = 0; i < 5; i++)
        printf(" %lld", live_tokens(rc, i, key));
    printf("\n# holders at once: %d (largest P in use: 3, bound N*P_max/k(P_min) = 5)\n", held);
    for (int i = 0; i < 5; i++)
        assert_true(live_tokens(rc, i, key) <= 3);
    assert_true(held <= 5 * 3 / 3);
    assert_int_equal(held, 4);  /* the schedule does get past P_max: the warning is real */
    for (int i = 0; i < held; i++)
        distlock_lock_free(l[i]);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_mixed_permits_bound_is_n_pmax_over_k_pmin, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
