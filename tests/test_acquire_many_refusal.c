/* test_acquire_many_refusal.c -- a set of keys (distlock_acquire_many) on
 * nodes that refuse a command the set's scripts run, against real
 * redis-server processes (1 and 3 nodes). errors.md: "A refusal is an
 * error, never a loss": extend and release report EPROTO, not ENOTOWNER,
 * the set is not marked lost, its keys keep the token, and the same handle
 * releases them once the servers take the command again -- as for one lock
 * (test_acl_refusal's test_extend_refused_*). Here the user may run
 * everything but GET, taken away after the set was acquired. */
#include "test_common.h"

#define N 3
DEFINE_GROUP(N)

#define USER "dlsetacl"
#define PASS "set-acl-pw"

static distlock_client *client_of(const rh_cluster *rc, unsigned mask)
{
    return acl_user_client(rc, mask, USER, PASS);
}

static int nodes_of(unsigned mask)
{
    return __builtin_popcount(mask);
}

/* A set of keys "sacl:a", "sacl:b" held by the user on the nodes in mask;
 * its token in tok. */
static distlock_lock *held_set(rh_cluster *rc, distlock_client *c, unsigned mask, char *tok)
{
    const char *keys[] = { "sacl:a", "sacl:b" };
    distlock_lock *l = NULL;
    /* counted on every node below: each connection up first */
    connect_nodes(rc, c, "sacl:connect", nodes_of(mask));
    assert_rc(distlock_acquire_many(c, keys, 2, 30000, 0, 0, NULL, &l), DISTLOCK_OK);
    snprintf(tok, DISTLOCK_TOKEN_MAX + 1, "%s", distlock_lock_token(l));
    const char *t = tok;
    assert_holding(rc, "sacl:a", t, nodes_of(mask));
    assert_holding(rc, "sacl:b", t, nodes_of(mask));
    return l;
}

static void set_refused_after_acquire(rh_cluster *rc, unsigned mask)
{
    int n = nodes_of(mask);
    char tok[DISTLOCK_TOKEN_MAX + 1];
    acl_set_user(rc, mask, USER, PASS, NULL);
    distlock_client *c = client_of(rc, mask);

    /* release refused: EPROTO, the keys keep the token, a retry releases */
    distlock_lock *l = held_set(rc, c, mask, tok);
    acl_set_user(rc, mask, USER, PASS, "-get");
    int r = distlock_release(l);
    printf("release of a set, %d node(s) refusing GET: %s (%s)\n", n, distlock_strerror(r),
           distlock_last_error());
    assert_int_equal(rh_count_holding(rc, "sacl:a", tok), n);
    assert_int_equal(rh_count_holding(rc, "sacl:b", tok), n);
    assert_rc(r, DISTLOCK_EPROTO);
    acl_set_user(rc, mask, USER, PASS, NULL);
    r = distlock_release(l);
    printf("the same handle's release, retried: %s (%s)\n", distlock_strerror(r),
           distlock_last_error());
    assert_rc(r, DISTLOCK_OK);
    /* the release returns once a quorum deleted the set: wait for the last node */
    assert_holding(rc, "sacl:a", tok, 0);
    assert_holding(rc, "sacl:b", tok, 0);
    distlock_lock_free(l);

    /* extend refused: EPROTO, not lost */
    l = held_set(rc, c, mask, tok);
    acl_set_user(rc, mask, USER, PASS, "-get");
    r = distlock_extend(l, 30000);
    printf("extend of a set, %d node(s) refusing GET: %s (%s); lost %d\n", n,
           distlock_strerror(r), distlock_last_error(), distlock_lock_lost(l));
    assert_rc(r, DISTLOCK_EPROTO);
    assert_int_equal(distlock_lock_lost(l), 0);
    acl_set_user(rc, mask, USER, PASS, NULL);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_set_refused_after_acquire_one_node(void **state)
{
    set_refused_after_acquire(*state, 0x1);
}

static void test_set_refused_after_acquire_three_nodes(void **state)
{
    set_refused_after_acquire(*state, 0x7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_set_refused_after_acquire_one_node, heal),
        cmocka_unit_test_setup(test_set_refused_after_acquire_three_nodes, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
