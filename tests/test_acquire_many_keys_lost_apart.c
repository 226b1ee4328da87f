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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_extend_agrees_with_renewal_when_keys_lost_on_different_nodes,
                               heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
