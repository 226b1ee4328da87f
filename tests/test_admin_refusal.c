/* test_admin_refusal.c -- the admin verbs under a refusal. The promise (README
 * "Errors", "ACL permissions"): a refusal inside any script or command (an
 * ACL user without a command the call needs) is DISTLOCK_EPROTO in every
 * operation, admin verbs included, whatever the number of nodes: a refusal
 * is the operator's to fix, retrying will not help, so it must not read as
 * "no quorum" (DISTLOCK_ENOQUORUM: nodes down or slow, try again).
 *
 * Real redis-server processes (3), users made with ACL SETUSER. */
#include "test_common.h"

#define N 3
DEFINE_GROUP(N)

#define USER "dladm"
#define PASS "adm-pw-1"

/* distlock_admin_holder: the inspect script cannot GET the key (-get) on every
 * node of the client. */
static void holder_refused(rh_cluster *rc, unsigned mask)
{
    acl_set_user(rc, mask, USER, PASS, "-get");
    distlock_client *c = acl_user_client(rc, mask, USER, PASS);
    distlock_holder_info info = { .size = sizeof info };
    int st = distlock_admin_holder(c, "adm:holder", -1, &info);
    printf("holder, %d node(s) refusing: %d (%s): \"%s\"\n", __builtin_popcount(mask), st,
           distlock_strerror(st), distlock_last_error());
    assert_rc(st, DISTLOCK_EPROTO);
    distlock_client_free(c);
}

static void test_holder_refused_one_node(void **state)
{
    holder_refused(*state, 0x1);
}

static void test_holder_refused_three_nodes(void **state)
{
    holder_refused(*state, 0x7);
}

/* distlock_admin_force_release: DEL refused (-del) on every node. */
static void force_release_refused(rh_cluster *rc, unsigned mask)
{
    for (int i = 0; i < rc->n; i++)
        if (mask & (1u << i))
            assert_int_equal(rh_set(rc, i, 0, "adm:force", "sometoken", 30000), 0);
    acl_set_user(rc, mask, USER, PASS, "-del");
    distlock_client *c = acl_user_client(rc, mask, USER, PASS);
    int deleted = -1;
    int st = distlock_admin_force_release(c, "adm:force", &deleted);
    printf("force release, %d node(s) refusing: %d (%s): \"%s\"\n", __builtin_popcount(mask),
           st, distlock_strerror(st), distlock_last_error());
    assert_rc(st, DISTLOCK_EPROTO);
    assert_int_equal(deleted, 0);
    distlock_client_free(c);
}

static void test_force_release_refused_one_node(void **state)
{
    force_release_refused(*state, 0x1);
}

static void test_force_release_refused_three_nodes(void **state)
{
    force_release_refused(*state, 0x7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_holder_refused_one_node, heal),
        cmocka_unit_test_setup(test_holder_refused_three_nodes, heal),
        cmocka_unit_test_setup(test_force_release_refused_one_node, heal),
        cmocka_unit_test_setup(test_force_release_refused_three_nodes, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
