/* test_zset_renewal_refused_keeps_batch.c -- the auto-renewal of a lock
 * that shares its renewal batch (one script call per node, S_EXTEND) with a
 * read lock whose renewal the node refuses (an ACL that lost ZADD after
 * the read lock was taken), against a real redis-server. errors.md: a
 * refusal is an error, never a loss -- of the refused lease; and the lock
 * beside it, which the node still lets us renew (GET, PEXPIRE), must go on
 * being renewed, not be lost when its validity ends. */
#include "test_common.h"

#define N 1
DEFINE_GROUP(N)

#define USER "dlzren"
#define PASS "zren-pw"

static void test_lock_renewed_beside_refused_read_lock(void **state)
{
    rh_cluster *rc = *state;
    acl_set_user(rc, 0x1, USER, PASS, NULL);
    distlock_client *c = acl_user_client(rc, 0x1, USER, PASS);
    long ttl = slow_bound(1500, 3000);
    distlock_lock *l = NULL, *r = NULL;
    /* taken together: their renewals fall due in one batch */
    assert_rc(distlock_acquire(c, "zb:lock", ttl, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "zb:read", ttl, 0, DISTLOCK_SHARED | DISTLOCK_AUTO_RENEW, &r),
              DISTLOCK_OK);
    acl_set_user(rc, 0x1, USER, PASS, "-zadd");
    uint64_t r0 = client_stat(c, "renewal_total");
    /* three renewals of the lock, or its loss */
    assert_true(RH_WAIT_UNTIL(distlock_lock_lost(l) || client_stat(c, "renewal_total") >= r0 + 3,
                              30000));
    printf("lock beside a read lock whose renewal is refused: lost %d, renewals %llu, "
           "failed renewals %llu; read lock lost %d\n", distlock_lock_lost(l),
           (unsigned long long)(client_stat(c, "renewal_total") - r0),
           (unsigned long long)client_stat(c, "renewal_failed_total"), distlock_lock_lost(r));
    assert_int_equal(distlock_lock_lost(l), 0);
    acl_set_user(rc, 0x1, USER, PASS, NULL);
    distlock_lock_free(r);
    distlock_lock_free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_lock_renewed_beside_refused_read_lock, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
