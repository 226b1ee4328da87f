/* test_failed_retry_leaves_no_quorum.c -- a failed acquire's undo (acquire.c
 * undo_node()) after a token pair's retry.
 *
 * undo_node() leaves an unanswered node alone when ANOTHER node's reply
 * showed our token there before this attempt ("prior"), reasoning that the
 * caller then held the lock with this token when it called. That inference
 * is false for a token pair (PHP distributedLock with a caller-supplied
 * $random, the CLI, distlock_acquire_token) retrying after a FAILED
 * acquire whose undo did not reach one node (the SPEC's undo is best
 * effort: a node that stops answering is not released). The retry sees
 * that leftover as "prior", and then skips the undo of a node whose reply
 * was lost after its SET ran. Two failed acquires end with the token on a
 * QUORUM of nodes: a lock nobody was granted and nobody will release
 * blocks every other owner for the whole TTL.
 *
 * Three real redis-servers behind the fault-injecting proxy. */
#include "test_common.h"
#include "test_proxy_cluster.h"
#include "internal.h"  /* distlock__lock_tag */

DEFINE_PROXY_GROUP(3)

/* An acquire of key with token "tok" on a thread of its own. */
typedef struct token_call {
    distlock_client *c;
    const char *key;
    unsigned flags;
    pthread_t t;
    int rc;
} token_call;

static void *token_call_main(void *arg)
{
    token_call *a = arg;
    a->rc = distlock_acquire_token(a->c, a->key, 20000, "tok", a->flags, NULL);
    return NULL;
}

/* Attempt 1 of key K (nodes 0 and 1 held by "foreign"): node 2 grants,
 * nodes 0 and 1 say held, the attempt is lost, and its undo (a release
 * that wakes no one: the only request whose token is followed by an empty
 * channel) is held on its way to node 2: node 2 keeps our token. Nodes 0
 * and 1's replies are held until node 2 has run the SET and the trigger
 * on the undo is armed, so the SET and the undo never reach the proxy
 * together (a trigger holds the whole chunk that matches) and the SET has
 * run when the attempt returns. */
static void first_attempt_leaves_token_on_node_2(proxy_env *e, distlock_client *c,
                                                 const char *K, unsigned flags)
{
    char hex[128], pat[64], v[64] = "";
    fp_ok(e->fp, "hold 0 down");
    fp_ok(e->fp, "hold 1 down");
    token_call a = { .c = c, .key = K, .flags = flags };
    assert_int_equal(pthread_create(&a.t, NULL, token_call_main, &a), 0);
    int granted = RH_WAIT_UNTIL(rh_get(e->rc, 2, 0, K, v, sizeof v) == 1, 5000 * slow_factor());
    snprintf(pat, sizeof pat, "%s\r\n$0\r\n", "tok");
    fp_ok(e->fp, "hold-match 2 up %s", fp_hex(pat, hex, sizeof hex));
    fp_ok(e->fp, "unhold 0 down");
    fp_ok(e->fp, "unhold 1 down");
    assert_int_equal(pthread_join(a.t, NULL), 0);
    printf("# attempt 1: %d (%s)\n", a.rc, distlock_strerror(a.rc));
    assert_true(granted);
    assert_int_not_equal(a.rc, DISTLOCK_OK);
    /* Its undo is held: node 2 still holds our token. */
    assert_int_equal(rh_get(e->rc, 2, 0, K, v, sizeof v), 1);
    assert_string_equal(v, "tok");
}

static void failed_retry(proxy_env *e, const char *K, unsigned flags)
{
    char v[64] = "";
    distlock_client *c = proxied_client(e);
    warm_up(c);
    assert_int_equal(rh_set(e->rc, 0, 0, K, "foreign", 60000), 0);
    assert_int_equal(rh_set(e->rc, 1, 0, K, "foreign", 60000), 0);

    first_attempt_leaves_token_on_node_2(e, c, K, flags);

    /* The connection carrying that undo is lost (a NAT drops it): the
     * library sees it close, the undo never runs (its server-side
     * connection is killed before the next request of this lock). */
    fp_ok(e->fp, "detach 2");

    /* The other owner's lock on node 1 expires or is released. */
    assert_int_equal(rh_del(e->rc, 1, 0, K), 1);

    /* Attempt 2, the same token (the caller retries): node 0 still held by
     * the other owner; node 1 is slow (100 ms): nodes 0 ("foreign") and 2
     * ("tok" on the first send: `prior`) decide the round, node 1 does not
     * answer in time, and its SET runs after the attempt returned. The SPEC:
     * "On failure, release on all nodes, including those that did not
     * answer." undo_node() skips node 1 because of node 2's `prior`. */
    {
        char cr[1024] = "";
        fp_cmd(e->fp, cr, sizeof cr, "conns");
        v[0] = '\0';
        printf("# before attempt 2: node 2 holds '%s'; proxy: %s\n",
               rh_get(e->rc, 2, 0, K, v, sizeof v) == 1 ? v : "(nothing)", cr);
    }
    fp_ok(e->fp, "delay 1 100 up");  /* node 1 is the slowest to answer */
    int r2 = distlock_acquire_token(c, K, 20000, "tok", flags, NULL);
    printf("# attempt 2: %d (%s)\n", r2, r2 == DISTLOCK_OK ? "" : distlock_last_error());

    int n = 0;
    if (r2 != DISTLOCK_OK)
        RH_WAIT_UNTIL((n = rh_count_holding(e->rc, K, "tok")) >= 2, 2000);  /* late requests */
    for (int i = 0; i < 3; i++) {
        v[0] = '\0';
        int g = rh_get(e->rc, i, 0, K, v, sizeof v);
        printf("# node %d: %s (pttl %lld ms)\n", i, g == 1 ? v : "(none)", rh_pttl(e->rc, i, 0, K));
    }
    distlock_client_free(c);
    /* The other owner releases node 0: a third party still cannot lock. */
    assert_int_equal(rh_del(e->rc, 0, 0, K), 1);
    fp_ok(e->fp, "heal");
    distlock_client *c3 = proxied_client(e);
    distlock_lock *l3 = NULL;
    int r3 = distlock_acquire(c3, K, 5000, 0, 0, &l3);
    printf("# another client, the key free but for 'tok': %d (%s)\n", r3,
           r3 == DISTLOCK_OK ? "" : distlock_last_error());
    if (l3) {
        distlock_release(l3);
        distlock_lock_free(l3);
    }
    distlock_client_free(c3);
    if (r2 != DISTLOCK_OK && n >= 2) {
        print_error("two failed acquires of %s (the second returned %d, %s) leave token 'tok' "
                    "on %d of 3 nodes, a quorum: a lock nobody was granted and nobody releases\n",
                    K, r2, distlock_strerror(r2), n);
        fail();
    }
}

static void test_failed_retry_leaves_no_token_on_a_quorum(void **state)
{
    failed_retry(*state, "ar2:ghost", 0);
}

/* The same with DISTLOCK_STRICT: PHP's distributedLock($key, $ttl, $random)
 * with the caller's own $random (SET NX semantics): the retry after the
 * "请求过于频繁" exception. */
static void test_failed_strict_retry_leaves_no_token_on_a_quorum(void **state)
{
    failed_retry(*state, "ar2:ghost-strict", DISTLOCK_STRICT);
}

/* A retry like the one above whose slow node does not answer at all (its
 * SET runs after the attempt gave up), while this client holds ANOTHER key
 * with the same token: holding that lock says nothing about K, so the
 * retry must still undo the silent node. held is that other key. */
static void failed_retry_silent_node(proxy_env *e, const char *K, const char *held)
{
    char v[64];
    distlock_client *c = proxied_client(e);
    warm_up(c);
    assert_rc(distlock_acquire_token(c, held, 20000, "tok", 0, NULL), DISTLOCK_OK);
    assert_int_equal(rh_set(e->rc, 0, 0, K, "foreign", 60000), 0);
    assert_int_equal(rh_set(e->rc, 1, 0, K, "foreign", 60000), 0);
    first_attempt_leaves_token_on_node_2(e, c, K, 0);
    fp_ok(e->fp, "detach 2");
    assert_int_equal(rh_del(e->rc, 1, 0, K), 1);
    /* Attempt 2: node 1 answers only after the command timeout. */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 300), DISTLOCK_OK);
    fp_ok(e->fp, "delay 1 1000 up");
    int r2 = distlock_acquire_token(c, K, 20000, "tok", 0, NULL);
    printf("# attempt 2: %d (%s)\n", r2, r2 == DISTLOCK_OK ? "" : distlock_last_error());
    assert_int_not_equal(r2, DISTLOCK_OK);
    /* Its late SET lands on node 1; the undo, queued behind it, must follow. */
    int landed = RH_WAIT_UNTIL(rh_get(e->rc, 1, 0, K, v, sizeof v) == 1, 5000);
    printf("# node 1 got the late SET: %d\n", landed);
    int undone = RH_WAIT_UNTIL(rh_get(e->rc, 1, 0, K, v, sizeof v) == 0, 3000);
    printf("# node 1 undone: %d; 'tok' on %d of 3 nodes (pttl on node 1: %lld ms)\n", undone,
           rh_count_holding(e->rc, K, "tok"), rh_pttl(e->rc, 1, 0, K));
    distlock_client_free(c);
    assert_true(landed);
    if (!undone) {
        print_error("a failed retry of %s left its token on the silent node because the client "
                    "held %s, another key with the same token\n", K, held);
        fail();
    }
}

static void test_failed_retry_undoes_a_silent_node_while_another_key_is_held(void **state)
{
    failed_retry_silent_node(*state, "ar2:ghost-silent", "ar2:other");
}

/* The same with a held key whose request-ordering tag (protocol.c
 * distlock__lock_tag) is K's: the two keys were made to collide, which
 * takes a second with a hash anyone can invert; the client must not take
 * the one for the other. */
static void test_failed_retry_undoes_a_silent_node_while_a_colliding_key_is_held(void **state)
{
    assert_true(distlock__lock_tag("ar2:ghost-collid", "tok") ==
                distlock__lock_tag("hmrflrbiB5932kwC", "tok"));
    failed_retry_silent_node(*state, "ar2:ghost-collid", "hmrflrbiB5932kwC");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_failed_retry_leaves_no_token_on_a_quorum, heal),
        cmocka_unit_test_setup(test_failed_strict_retry_leaves_no_token_on_a_quorum, heal),
        cmocka_unit_test_setup(test_failed_retry_undoes_a_silent_node_while_another_key_is_held,
                               heal),
        cmocka_unit_test_setup(
            test_failed_retry_undoes_a_silent_node_while_a_colliding_key_is_held, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
