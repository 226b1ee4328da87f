/* test_own_token_counts_toward_the_quorum.c -- an acquire that finds its
 * own token on some nodes counts them as grants from the start.
 *
 * A node whose key already holds this acquire's token (a re-acquire with
 * the same token, a retry after a lost reply, an earlier ownership whose
 * release did not reach that node) is refreshed and then counts as
 * granted (acquire.c refresh_own). The round that sends the acquire must
 * count it that way too: if it took that node's "the key holds this token"
 * for "held by another owner", a round where another owner holds a third
 * node would stop there, before a slower free node answers, and the
 * acquire would fail although a quorum was there to win (and leave the
 * slow node's grant to be undone).
 *
 * Three real redis-servers behind the fault-injecting proxy. */
#include "test_common.h"
#include "test_proxy_cluster.h"

DEFINE_PROXY_GROUP(3)

/* Node 2 holds our token, node 1 another owner's key, node 0 is free and
 * the slowest to answer. */
static distlock_client *own_token_foreign_and_slow_free_node(proxy_env *e, const char *key)
{
    distlock_client *c = proxied_client(e);
    warm_up(c);
    assert_int_equal(rh_set(e->rc, 2, 0, key, "tok", 5000), 0);
    assert_int_equal(rh_set(e->rc, 1, 0, key, "foreign", 60000), 0);
    fp_ok(e->fp, "delay 0 300 up");
    return c;
}

static void test_own_token_and_a_slow_free_node_make_the_quorum(void **state)
{
    proxy_env *e = *state;
    const char *K = "own:slow-free";
    distlock_client *c = own_token_foreign_and_slow_free_node(e, K);
    long validity = 0;
    int r = distlock_acquire_token(c, K, 20000, "tok", 0, &validity);
    printf("# acquire: %d (%s), validity %ld ms\n", r,
           r == DISTLOCK_OK ? "" : distlock_last_error(), validity);
    fp_ok(e->fp, "heal");
    int holding = rh_count_holding(e->rc, K, "tok");
    long long pttl0 = rh_pttl(e->rc, 0, 0, K), pttl2 = rh_pttl(e->rc, 2, 0, K);
    printf("# 'tok' on %d node(s); pttl node 0 %lld ms, node 2 %lld ms\n", holding, pttl0, pttl2);
    int released = r == DISTLOCK_OK ? distlock_release_token(c, K, "tok") : DISTLOCK_OK;
    distlock_client_free(c);
    assert_rc(r, DISTLOCK_OK);
    assert_int_equal(holding, 2);
    /* node 2's key carries the new lease, not what was left of the old one */
    assert_true(pttl2 > 10000);
    assert_rc(released, DISTLOCK_OK);
}

/* Nodes 0 and 1 held by another owner, node 2 holding our token with 3 s
 * left (an earlier ownership whose release did not reach it): the acquire
 * cannot win, and must not refresh node 2 on its way to failing -- a
 * refresh would keep that leftover 20 s instead of 3, and a failed
 * acquire leaves alone what it found with its token (it may be the
 * caller's own lease). */
static void test_failed_acquire_does_not_lengthen_the_lease_it_found(void **state)
{
    proxy_env *e = *state;
    const char *K = "own:cannot-win";
    distlock_client *c = proxied_client(e);
    warm_up(c);
    assert_int_equal(rh_set(e->rc, 0, 0, K, "foreign", 60000), 0);
    assert_int_equal(rh_set(e->rc, 1, 0, K, "foreign", 60000), 0);
    assert_int_equal(rh_set(e->rc, 2, 0, K, "tok", 3000), 0);
    /* node 2 answers first: the round hears that the key held our token
     * before (an unheard node would be undone as this attempt's) */
    fp_ok(e->fp, "delay 0 200 up");
    fp_ok(e->fp, "delay 1 200 up");
    int r = distlock_acquire_token(c, K, 20000, "tok", 0, NULL);
    printf("# acquire: %d (%s)\n", r, r == DISTLOCK_OK ? "" : distlock_last_error());
    distlock_client_free(c);
    char v[64] = "";
    int g = rh_get(e->rc, 2, 0, K, v, sizeof v);
    long long pttl = rh_pttl(e->rc, 2, 0, K);
    printf("# node 2: %s, pttl %lld ms\n", g == 1 ? v : "(none)", pttl);
    assert_rc(r, DISTLOCK_NOTACQUIRED);
    assert_int_equal(g, 1);
    assert_string_equal(v, "tok");
    assert_true(pttl <= 3000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_own_token_and_a_slow_free_node_make_the_quorum, heal),
        cmocka_unit_test_setup(test_failed_acquire_does_not_lengthen_the_lease_it_found, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
