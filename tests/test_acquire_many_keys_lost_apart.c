/* test_acquire_many_keys_lost_apart.c -- a set of keys on 3 independent
 * nodes where one node lost key a and another node key b (each key still
 * held with the set's token on 2 of 3 nodes, a quorum), against real
 * redis-server processes. docs/multi-key.md: "The set is lost when any key
 * is lost (deleted, expired or taken over), since only then can another
 * owner get that key": here no other owner can get either key (each needs
 * a quorum, and two of three nodes still hold it). The auto-renewal (per
 * key) keeps such a set; distlock_extend() must say the same, not
 * ENOTOWNER for a set that is still every key's holder. */
#include "test_common.h"

#define N 3
DEFINE_GROUP(N)

static void test_extend_agrees_with_renewal_when_keys_lost_on_different_nodes(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    /* counted on every node below: each connection up first (a first round
     * may end at the quorum, its request to a node still connecting unsent) */
    connect_every_node(rc, c, "apart:connect");
    const char *k1[] = { "apart:a", "apart:b" }, *k2[] = { "apart2:a", "apart2:b" };
    distlock_lock *ext = NULL, *ren = NULL;
    assert_rc(distlock_acquire_many(c, k1, 2, 30000, 0, 0, NULL, &ext), DISTLOCK_OK);
    long ttl = slow_bound(900, 2000);
    assert_rc(distlock_acquire_many(c, k2, 2, ttl, 0, DISTLOCK_AUTO_RENEW, NULL, &ren),
              DISTLOCK_OK);
    const char *t1 = distlock_lock_token(ext), *t2 = distlock_lock_token(ren);
    for (int k = 0; k < 2; k++) {
        assert_holding(rc, k1[k], t1, N);
        assert_holding(rc, k2[k], t2, N);
    }
    /* node 0 loses key a, node 1 key b (an eviction, say) */
    assert_int_equal(rh_del(rc, 0, 0, "apart:a"), 1);
    assert_int_equal(rh_del(rc, 1, 0, "apart:b"), 1);
    assert_int_equal(rh_del(rc, 0, 0, "apart2:a"), 1);
    assert_int_equal(rh_del(rc, 1, 0, "apart2:b"), 1);
    /* no other owner can take either key */
    distlock_lock *x = NULL;
    assert_rc(distlock_acquire(c, "apart:a", 30000, 0, 0, &x), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_acquire(c, "apart:b", 30000, 0, 0, &x), DISTLOCK_NOTACQUIRED);

    /* the renewal: two passes later the auto-renewed set is not lost */
    uint64_t r0 = client_stat(c, "renewal_total");
    wait_renewed(c, r0, 2, 2);
    int ren_lost = distlock_lock_lost(ren);
    int r = distlock_extend(ext, 30000);
    printf("auto-renewed set: lost %d; extend of the other set: %s (%s), lost %d\n", ren_lost,
           distlock_strerror(r), distlock_last_error(), distlock_lock_lost(ext));
    assert_int_equal(ren_lost, 0);
    assert_rc(r, DISTLOCK_OK);
    assert_int_equal(distlock_lock_lost(ext), 0);
    distlock_lock_free(ren);
    distlock_lock_free(ext);
    distlock_client_free(c);
}

/* The release counts per key too: each key deleted on a quorum is a
 * released set, and no node keeps any key of it. */
static void test_release_of_keys_lost_on_different_nodes(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    /* each key is deleted from one node below: each connection up first (a
     * first round may end at the quorum, its request to a node still
     * connecting unsent), and each node seen holding both keys (the third
     * node's reply may come after the grant) */
    connect_every_node(rc, c, "relapart:connect");
    const char *keys[] = { "relapart:a", "relapart:b" };
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire_many(c, keys, 2, 30000, 0, 0, NULL, &l), DISTLOCK_OK);
    assert_holding(rc, "relapart:a", distlock_lock_token(l), N);
    assert_holding(rc, "relapart:b", distlock_lock_token(l), N);
    assert_int_equal(rh_del(rc, 0, 0, "relapart:a"), 1);
    assert_int_equal(rh_del(rc, 1, 0, "relapart:b"), 1);
    int r = distlock_release(l);
    printf("release of a set whose keys were lost on different nodes: %s (%s)\n",
           distlock_strerror(r), r == DISTLOCK_OK ? "" : distlock_last_error());
    assert_rc(r, DISTLOCK_OK);
    assert_holding(rc, "relapart:a", NULL, 0);
    assert_holding(rc, "relapart:b", NULL, 0);
    /* released: another owner takes the set at once */
    distlock_lock *l2 = NULL;
    assert_rc(distlock_acquire_many(c, keys, 2, 30000, 0, 0, NULL, &l2), DISTLOCK_OK);
    assert_rc(distlock_release(l2), DISTLOCK_OK);
    distlock_lock_free(l2);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* One key gone from a quorum of nodes: another owner can take that key, so
 * the set is not ours any more: the extend says so (and marks it lost), and
 * so does the release, which still deletes the key that was ours. */
static void test_key_lost_on_a_quorum_is_not_ours(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    /* counted on every node below: each connection up first (a first round
     * may end at the quorum, its request to a node still connecting unsent) */
    connect_every_node(rc, c, "quolost:connect");
    const char *keys[] = { "quolost:a", "quolost:b" };
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire_many(c, keys, 2, 30000, 0, 0, NULL, &l), DISTLOCK_OK);
    const char *t = distlock_lock_token(l);
    assert_holding(rc, "quolost:b", t, N);
    assert_int_equal(rh_del(rc, 0, 0, "quolost:a"), 1);
    assert_int_equal(rh_del(rc, 1, 0, "quolost:a"), 1);
    assert_rc(distlock_extend(l, 30000), DISTLOCK_ENOTOWNER);
    assert_non_null(strstr(distlock_last_error(), "quolost:a"));
    assert_int_equal(distlock_lock_lost(l), 1);
    assert_rc(distlock_release(l), DISTLOCK_ENOTOWNER);
    assert_holding(rc, "quolost:a", NULL, 0);
    assert_holding(rc, "quolost:b", NULL, 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_extend_agrees_with_renewal_when_keys_lost_on_different_nodes,
                               heal),
        cmocka_unit_test_setup(test_release_of_keys_lost_on_different_nodes, heal),
        cmocka_unit_test_setup(test_key_lost_on_a_quorum_is_not_ours, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
