/* test_own_token_gone_before_its_refresh.c -- an acquire whose own token
 * leaves a node between the first round and that node's refresh.
 *
 * A plain (not strict) acquire counts a node whose SET NX GET answered
 * with this acquire's own token as granted, and the first round may stop
 * there, at a quorum made with it, before a slower node answers; then it
 * refreshes that node. The key can be gone by then: its TTL ran out (the
 * leftover of an earlier attempt), or another process of the same owner
 * released it. The node is then free, and nobody else holds the lock:
 *  - the acquire must not fail as "held by another owner" when the nodes
 *    it heard are free or ours (one node; three nodes with the slowest one
 *    unheard);
 *  - whatever the refresh writes there is this attempt's: a failed
 *    acquire (another owner on a quorum) leaves no key of its own behind.
 *
 * Three real redis-servers behind the fault-injecting proxy: the refresh
 * (EVALSHA, the only one on that connection after the warm-up) is held at
 * the proxy while the key is deleted, so the order is certain. */
#include <pthread.h>

#include "test_common.h"
#include "test_proxy_cluster.h"

DEFINE_PROXY_GROUP(3)

typedef struct {
    distlock_client *c;
    const char *k;
    int r;
    long validity;
    char err[512];
} own_acq;

static void *acquire_thread(void *p)
{
    own_acq *a = p;
    a->r = distlock_acquire_token(a->c, a->k, 20000, "tok", 0, &a->validity);
    snprintf(a->err, sizeof a->err, "%s", a->r == DISTLOCK_OK ? "" : distlock_last_error());
    return NULL;
}

/* Acquire K with token "tok" in another thread; the refresh of node `own`
 * (its EVALSHA) is held at the proxy until the key there is deleted. */
static void acquire_while_own_key_goes(proxy_env *e, distlock_client *c, const char *K, int own,
                                       own_acq *a)
{
    char hex[64];
    fp_ok(e->fp, "hold-match %d up %s", own, fp_hex("EVALSHA", hex, sizeof hex));
    pthread_t th;
    *a = (own_acq){ c, K, -99, 0, "" };
    assert_int_equal(pthread_create(&th, NULL, acquire_thread, a), 0);
    int held = fp_cmd(e->fp, NULL, 0, "wait-held %d up 1 10000", own) == 0;
    int deleted = rh_del(e->rc, own, 0, K);
    fp_ok(e->fp, "unhold %d", own);
    pthread_join(th, NULL);
    printf("# refresh held: %d; own key deleted meanwhile: %d; acquire: %d (%s), validity %ld "
           "ms\n", held, deleted, a->r, a->err, a->validity);
    assert_true(held);
    assert_int_equal(deleted, 1);
}

/* One node, our token on it; the key goes before the refresh: the node is
 * free, so the acquire wins (it is not "held by another owner"). */
static void test_one_node_own_key_gone_before_refresh_is_acquired(void **state)
{
    proxy_env *e = *state;
    const char *K = "own-gone:one";
    char uris[256];
    distlock_client *c = new_client(fp_uris_mask(e->fp, 0x4, uris, sizeof uris));
    warm_up(c);
    assert_int_equal(rh_set(e->rc, 2, 0, K, "tok", 5000), 0);
    own_acq a;
    acquire_while_own_key_goes(e, c, K, 2, &a);
    char v[64] = "";
    int got = rh_get(e->rc, 2, 0, K, v, sizeof v);
    long long pttl = rh_pttl(e->rc, 2, 0, K);
    printf("# node 2 holds '%s' (pttl %lld ms)\n", got == 1 ? v : "(nothing)", pttl);
    int released = a.r == DISTLOCK_OK ? distlock_release_token(c, K, "tok") : DISTLOCK_OK;
    distlock_client_free(c);
    assert_rc(a.r, DISTLOCK_OK);
    assert_true(a.validity > 0);
    assert_int_equal(got, 1);
    assert_string_equal(v, "tok");
    assert_true(pttl > 10000);
    assert_rc(released, DISTLOCK_OK);
    assert_no_key_anywhere(e, K);
}

/* Three nodes: node 2 holds our token, node 1 is free, node 0 does not
 * answer (its requests are held). The round stops at node 1's grant plus
 * node 2's own token; node 2's key goes before its refresh. Nodes 1 and 2
 * are free: a quorum, and no other owner anywhere. */
static void test_own_key_gone_before_refresh_wins_with_a_free_quorum(void **state)
{
    proxy_env *e = *state;
    const char *K = "own-gone:three";
    distlock_client *c = proxied_client(e);
    warm_up(c);
    assert_int_equal(rh_set(e->rc, 2, 0, K, "tok", 5000), 0);
    fp_ok(e->fp, "hold 0 up");
    own_acq a;
    acquire_while_own_key_goes(e, c, K, 2, &a);
    int on1 = rh_count_holding(e->rc, K, "tok");
    long long pttl2 = rh_pttl(e->rc, 2, 0, K);
    printf("# 'tok' on %d node(s) before node 0 runs its request; pttl node 2 %lld ms\n", on1,
           pttl2);
    fp_ok(e->fp, "unhold 0");
    sync_conns(c);
    int released = a.r == DISTLOCK_OK ? distlock_release_token(c, K, "tok") : DISTLOCK_OK;
    distlock_client_free(c);
    assert_rc(a.r, DISTLOCK_OK);
    assert_true(a.validity > 0);
    assert_int_equal(on1, 2);
    assert_true(pttl2 > 10000);
    assert_rc(released, DISTLOCK_OK);
    /* node 0's late grant went with the release */
    assert_no_key_anywhere(e, K);
}

/* Another owner holds node 1; nodes 0 and 2 hold our token, so the round
 * can win and both are refreshed. Node 2's key goes before its refresh,
 * which then sets it (this attempt's grant); node 0's refresh gets no
 * reply in time: the attempt loses, and its undo must take node 2's new
 * key back -- the key was not there before -- while node 0's, which held
 * our token before, is left alone. (A round that cannot win refreshes
 * nothing: test_own_token_counts_toward_the_quorum.) */
static void test_failed_acquire_leaves_no_key_where_own_key_went(void **state)
{
    proxy_env *e = *state;
    const char *K = "own-gone:held";
    char hex[64];
    distlock_client *c = proxied_client(e);
    warm_up(c);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 500), DISTLOCK_OK);
    assert_int_equal(rh_set(e->rc, 0, 0, K, "tok", 30000), 0);
    assert_int_equal(rh_set(e->rc, 1, 0, K, "foreign", 60000), 0);
    assert_int_equal(rh_set(e->rc, 2, 0, K, "tok", 30000), 0);
    fp_ok(e->fp, "hold-match 0 up %s", fp_hex("EVALSHA", hex, sizeof hex));
    fp_ok(e->fp, "hold-match 2 up %s", fp_hex("EVALSHA", hex, sizeof hex));
    pthread_t th;
    own_acq a = { c, K, -99, 0, "" };
    assert_int_equal(pthread_create(&th, NULL, acquire_thread, &a), 0);
    int held0 = fp_cmd(e->fp, NULL, 0, "wait-held 0 up 1 10000") == 0;
    int held2 = fp_cmd(e->fp, NULL, 0, "wait-held 2 up 1 10000") == 0;
    int deleted = rh_del(e->rc, 2, 0, K);
    fp_ok(e->fp, "unhold 2");  /* node 0's refresh stays held past the timeout */
    pthread_join(th, NULL);
    printf("# refreshes held: node 0 %d, node 2 %d; node 2's key deleted meanwhile: %d; "
           "acquire: %d (%s)\n", held0, held2, deleted, a.r, a.err);
    char v[64] = "";
    int left = rh_get(e->rc, 2, 0, K, v, sizeof v);
    printf("# node 2 after the failed acquire: %s (pttl %lld ms)\n", left == 1 ? v : "(none)",
           rh_pttl(e->rc, 2, 0, K));
    char v0[64] = "";
    int kept = rh_get(e->rc, 0, 0, K, v0, sizeof v0) == 1 && strcmp(v0, "tok") == 0;
    fp_ok(e->fp, "heal");
    distlock_client_free(c);
    assert_true(held0 && held2);
    assert_int_equal(deleted, 1);
    assert_true(a.r != DISTLOCK_OK);
    assert_true(kept);  /* what held our token before the attempt */
    if (left == 1) {
        print_error("the failed acquire left '%s' on node 2, where the key was gone before its "
                    "refresh\n", v);
        fail();
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_one_node_own_key_gone_before_refresh_is_acquired, heal),
        cmocka_unit_test_setup(test_own_key_gone_before_refresh_wins_with_a_free_quorum, heal),
        cmocka_unit_test_setup(test_failed_acquire_leaves_no_key_where_own_key_went, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
