/* test_caller_token_two_clients.c -- two clients acquiring one key with the
 * same caller's token (distlock_acquire_args.token, a second process of one
 * Laravel owner) must exclude each other: the acquire is strict, "a key that
 * already holds this very token is held by someone (DISTLOCK_NOTACQUIRED)".
 *
 * Here the second client's request is lost on the way: its connection is
 * reset by the fault proxy while the request is held there, before it ever
 * reached the server, so the library resends it on a fresh connection. That
 * resend finds the first client's key holding this very token; it was not
 * set by any send of this call, so the call must still be refused and the
 * first client's key must keep its TTL.
 *
 * Real redis-servers behind the fault proxy; keys read behind the library's
 * back. */
#include <pthread.h>

#include "test_common.h"
#include "harness/faultproxy.h"

typedef struct {
    rh_cluster *rc;
    fp_proxy *fp;
} fixture;

static int group_setup(void **state, int n)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    fixture *f = calloc(1, sizeof *f);
    if (!f || !(f->rc = rh_start(n)) || !(f->fp = fp_front(f->rc)))
        return -1;
    *state = f;
    return 0;
}
static int group_setup1(void **state) { return group_setup(state, 1); }
static int group_setup3(void **state) { return group_setup(state, 3); }
static int group_teardown(void **state)
{
    fixture *f = *state;
    fp_stop(f->fp);
    rh_stop_all(f->rc);
    free(f);
    return 0;
}
static int heal(void **state)
{
    fixture *f = *state;
    return fp_cmd(f->fp, NULL, 0, "heal") == 0 && rh_heal(f->rc) == 0 ? 0 : -1;
}

struct acq {
    distlock_client *c;
    const char *key, *token;
    int rc;
    distlock_lock *lock;
};

static void *acquire_main(void *arg)
{
    struct acq *a = arg;
    distlock_acquire_args args = { .size = sizeof args, .token = a->token };
    a->rc = distlock_acquire_with(a->c, a->key, 30000, 0, 0, &args, &a->lock);
    return NULL;
}

/* The connection of listener l with request bytes held, -1 if none. */
static int held_conn(fp_proxy *fp, int l)
{
    fp_conn cs[32];
    int n = fp_conns(fp, l, cs, 32);
    for (int i = 0; i < n; i++)
        if (cs[i].held_up > 0)
            return cs[i].id;
    return -1;
}

/* Client A holds `key` with token T on every node. Client B, whose
 * connections are already up (not fresh), acquires `key` with T; its request
 * to each node in `lost` is held by the proxy and the connection is reset
 * before the request reaches the server. B must get DISTLOCK_NOTACQUIRED and
 * A's key must stay as it was. */
static void same_token_request_lost(fixture *f, unsigned lost, const char *key)
{
    rh_cluster *rc = f->rc;
    fp_proxy *fp = f->fp;
    const char *tok = "shared-owner-token";
    distlock_client *a = new_client(rh_uris(rc));
    distlock_client *b = new_client(fp_uris(fp));
    connect_every_node(rc, b, "tc2:connect");
    connect_every_node(rc, a, "tc2:connect");  /* A's key is counted on every node */

    distlock_lock *la = NULL;
    distlock_acquire_args args = { .size = sizeof args, .token = tok };
    assert_rc(distlock_acquire_with(a, key, 30000, 0, 0, &args, &la), DISTLOCK_OK);
    assert_true(RH_WAIT_UNTIL(rh_count_holding(rc, key, tok) == rc->n, 5000));  /* every node */

    char hex[256];
    fp_hex(key, hex, sizeof hex);
    for (int i = 0; i < rc->n; i++)
        if (lost >> i & 1)
            assert_int_equal(fp_cmd(fp, NULL, 0, "hold-match %d up %s", i, hex), 0);
    struct acq q = { .c = b, .key = key, .token = tok };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, acquire_main, &q), 0);
    for (int i = 0; i < rc->n; i++) {
        if (!(lost >> i & 1))
            continue;
        assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held %d up 1 10000", i), 0);
        int conn = held_conn(fp, i);
        assert_true(conn > 0);
        /* the request never reaches the server: RST, held bytes dropped */
        assert_int_equal(fp_cmd(fp, NULL, 0, "reset %d:%d", i, conn), 0);
    }
    pthread_join(th, NULL);
    printf("# B's acquire with A's token: %s\n", distlock_strerror(q.rc));
    int both = q.rc == DISTLOCK_OK && distlock_lock_validity_ms(la) > 0;
    if (both)
        printf("# two holders at once: A valid %ld ms, B valid %ld ms\n",
               distlock_lock_validity_ms(la), distlock_lock_validity_ms(q.lock));
    if (q.lock)
        distlock_lock_abandon(q.lock);
    assert_rc(q.rc, DISTLOCK_NOTACQUIRED);
    assert_false(both);
    /* A's key untouched by B's refused call */
    assert_holding(rc, key, tok, rc->n);
    assert_rc(distlock_release(la), DISTLOCK_OK);
    distlock_lock_free(la);
    distlock_client_free(b);
    distlock_client_free(a);
}

/* One node: B's only request is lost and resent. */
static void test_same_token_resend_after_lost_request_is_refused(void **state)
{
    fixture *f = *state;
    same_token_request_lost(f, f->rc->n == 1 ? 0x1 : 0x3, "tc2:lost-request");
}

/* Every node: all of B's requests are lost and resent. */
static void test_same_token_resend_on_every_node_is_refused(void **state)
{
    fixture *f = *state;
    same_token_request_lost(f, (1u << f->rc->n) - 1, "tc2:lost-everywhere");
}

/* Three nodes, B's request lost on node 0 only: nodes 1 and 2 refuse, so B
 * loses; its undo must leave A's key on node 0 (it answered, on the resend,
 * with A's token), as on every node that answers. */
static void test_same_token_refused_resend_leaves_holder_key(void **state)
{
    fixture *f = *state;
    same_token_request_lost(f, 0x1, "tc2:lost-one-of-three");
}

/* B's replies late (held by the proxy past B's command timeout) from every
 * node but node 0 on three nodes, from the only node on one; its requests
 * ran there and changed nothing: the key holds A's token. B loses; its undo
 * must not delete A's key where B's request only timed out: A still holds
 * its lock, and a third client with a fresh token is kept out while A's
 * validity lasts. (The compatibility pair's case: two workers calling
 * distributedLock() with one order number as $random.) */
static void test_same_token_timed_out_nodes_keep_holder_key(void **state)
{
    fixture *f = *state;
    rh_cluster *rc = f->rc;
    fp_proxy *fp = f->fp;
    const char *key = "tc2:late-replies", *tok = "shared-owner-token";
    distlock_client *a = new_client(rh_uris(rc));
    distlock_client *b = new_client(fp_uris(fp));
    assert_rc(distlock_client_set(b, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 300), DISTLOCK_OK);
    connect_every_node(rc, b, "tc2:connect");
    connect_every_node(rc, a, "tc2:connect");  /* A's key is counted on every node */

    distlock_lock *la = NULL, *lb = NULL, *lc = NULL;
    distlock_acquire_args args = { .size = sizeof args, .token = tok };
    assert_rc(distlock_acquire_with(a, key, 30000, 0, 0, &args, &la), DISTLOCK_OK);
    assert_true(RH_WAIT_UNTIL(rh_count_holding(rc, key, tok) == rc->n, 5000));

    char hex[256];
    fp_hex(tok, hex, sizeof hex);  /* SET ... GET's reply names the holder's token */
    for (int i = rc->n == 1 ? 0 : 1; i < rc->n; i++)
        assert_int_equal(fp_cmd(fp, NULL, 0, "hold-match %d down %s", i, hex), 0);
    int brc = distlock_acquire_with(b, key, 30000, 0, 0, &args, &lb);
    printf("# B's acquire: %s (%s)\n", distlock_strerror(brc), distlock_last_error());
    assert_true(brc != DISTLOCK_OK);
    assert_null(lb);
    assert_int_equal(fp_cmd(fp, NULL, 0, "heal"), 0);
    /* a round of B through the same proxy after its undo was sent */
    distlock_holder_info hi = { .size = sizeof hi };
    (void)distlock_admin_holder(b, key, -1, &hi);
    int kept = rh_count_holding(rc, key, tok);
    printf("# A's key after B's refused acquire: on %d of %d nodes, A's validity %ld ms\n", kept,
           rc->n, distlock_lock_validity_ms(la));
    distlock_client *c = new_client(rh_uris(rc));
    int crc = distlock_acquire(c, key, 30000, 0, 0, &lc);
    printf("# a third client's acquire meanwhile: %s\n", distlock_strerror(crc));
    if (lc)
        distlock_lock_free(lc);
    assert_int_equal(kept, rc->n);
    assert_rc(crc, DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_release(la), DISTLOCK_OK);
    distlock_lock_free(la);
    distlock_client_free(c);
    distlock_client_free(b);
    distlock_client_free(a);
}

/* The same with a fair acquire (DISTLOCK_FAIR, its own script and undo):
 * B's replies held past its command timeout on every node but node 0 (on
 * the only node of one); B loses, and neither its plain undo (no wait) nor
 * its queue-keeping undo (a wait) may delete A's key where B only timed out. */
static void same_token_fair_timed_out(fixture *f, const char *key, long wait_ms)
{
    rh_cluster *rc = f->rc;
    fp_proxy *fp = f->fp;
    const char *tok = "shared-owner-token";
    distlock_client *a = new_client(rh_uris(rc));
    distlock_client *b = new_client(fp_uris(fp));
    assert_rc(distlock_client_set(b, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 300), DISTLOCK_OK);
    connect_every_node(rc, b, "tc2:connect");
    connect_every_node(rc, a, "tc2:connect");  /* A's key is counted on every node */

    distlock_lock *la = NULL, *lb = NULL;
    distlock_acquire_args args = { .size = sizeof args, .token = tok };
    assert_rc(distlock_acquire_with(a, key, 30000, 0, DISTLOCK_FAIR, &args, &la), DISTLOCK_OK);
    assert_true(RH_WAIT_UNTIL(rh_count_holding(rc, key, tok) == rc->n, 5000));

    for (int i = rc->n == 1 ? 0 : 1; i < rc->n; i++)
        assert_int_equal(fp_cmd(fp, NULL, 0, "hold %d down", i), 0);
    int brc = distlock_acquire_with(b, key, 30000, wait_ms, DISTLOCK_FAIR, &args, &lb);
    printf("# B's fair acquire (wait %ld ms): %s (%s)\n", wait_ms, distlock_strerror(brc),
           distlock_last_error());
    assert_true(brc != DISTLOCK_OK);
    assert_null(lb);
    assert_int_equal(fp_cmd(fp, NULL, 0, "heal"), 0);
    /* a round of B through the same proxy after its undo was sent */
    distlock_holder_info hi = { .size = sizeof hi };
    (void)distlock_admin_holder(b, key, -1, &hi);
    int kept = rh_count_holding(rc, key, tok);
    printf("# A's key after B's refused fair acquire: on %d of %d nodes\n", kept, rc->n);
    assert_int_equal(kept, rc->n);
    assert_rc(distlock_release(la), DISTLOCK_OK);
    distlock_lock_free(la);
    distlock_client_free(b);
    distlock_client_free(a);
}

static void test_same_token_fair_timed_out_nodes_keep_holder_key(void **state)
{
    same_token_fair_timed_out(*state, "tc2:fair-late-replies", 0);
}

static void test_same_token_fair_waiter_timed_out_nodes_keep_holder_key(void **state)
{
    same_token_fair_timed_out(*state, "tc2:fair-wait-late-replies", 400);
}

#define ALL_TESTS                                                                     \
    cmocka_unit_test_setup(test_same_token_resend_after_lost_request_is_refused, heal), \
    cmocka_unit_test_setup(test_same_token_resend_on_every_node_is_refused, heal), \
    cmocka_unit_test_setup(test_same_token_timed_out_nodes_keep_holder_key, heal), \
    cmocka_unit_test_setup(test_same_token_fair_timed_out_nodes_keep_holder_key, heal), \
    cmocka_unit_test_setup(test_same_token_fair_waiter_timed_out_nodes_keep_holder_key, heal)

int main(void)
{
    const struct CMUnitTest tests1[] = { ALL_TESTS };
    const struct CMUnitTest tests3[] = {
        ALL_TESTS,
        cmocka_unit_test_setup(test_same_token_refused_resend_leaves_holder_key, heal),
    };
    printf("# one node\n");
    int failed = cmocka_run_group_tests_name("one node", tests1, group_setup1, group_teardown);
    printf("# three nodes\n");
    failed += cmocka_run_group_tests_name("three nodes", tests3, group_setup3, group_teardown);
    return failed;
}
