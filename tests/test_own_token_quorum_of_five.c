/* test_own_token_quorum_of_five.c -- five nodes (quorum 3): an acquire that
 * finds its own token on two nodes and a grant on a third stops there, with
 * two nodes not heard yet.
 *
 *  - it wins, the own nodes carry the new lease, and the release removes
 *    the grants the unheard nodes make afterwards (they are on the lock's
 *    list of nodes it may hold);
 *  - one own node's key gone before its refresh: still a quorum (the
 *    refresh takes the free key), no "held by another owner";
 *  - another owner on the third node: no quorum; the undo releases the
 *    nodes that were not heard (what their late requests set), and leaves
 *    the keys that held our token before the attempt.
 *
 * Five real redis-servers behind the fault-injecting proxy; the unheard
 * nodes' requests are held there until the acquire has returned. */
#include <pthread.h>

#include "test_common.h"
#include "test_proxy_cluster.h"

DEFINE_PROXY_GROUP(5)

/* Nodes 3 and 4 hold our token, nodes 0 and 1 receive nothing (held). */
static distlock_client *own_on_two_unheard_two(proxy_env *e, const char *K)
{
    distlock_client *c = proxied_client(e);
    warm_up(c);
    assert_int_equal(rh_set(e->rc, 3, 0, K, "tok", 5000), 0);
    assert_int_equal(rh_set(e->rc, 4, 0, K, "tok", 5000), 0);
    fp_ok(e->fp, "hold 0 up");
    fp_ok(e->fp, "hold 1 up");
    return c;
}

static void unhold_unheard(proxy_env *e, distlock_client *c)
{
    fp_ok(e->fp, "unhold 0");
    fp_ok(e->fp, "unhold 1");
    sync_conns(c);
}

static void test_two_own_and_one_grant_win_before_two_nodes_answer(void **state)
{
    proxy_env *e = *state;
    const char *K = "own5:win";
    distlock_client *c = own_on_two_unheard_two(e, K);
    long validity = 0;
    int r = distlock_acquire_token(c, K, 20000, "tok", 0, &validity);
    int before = rh_count_holding(e->rc, K, "tok");
    long long pttl3 = rh_pttl(e->rc, 3, 0, K), pttl4 = rh_pttl(e->rc, 4, 0, K);
    printf("# acquire: %d (%s), validity %ld ms; 'tok' on %d node(s), pttl 3: %lld, 4: %lld\n",
           r, r == DISTLOCK_OK ? "" : distlock_last_error(), validity, before, pttl3, pttl4);
    unhold_unheard(e, c);
    int after = rh_count_holding(e->rc, K, "tok");
    printf("# 'tok' on %d node(s) once nodes 0 and 1 ran their requests\n", after);
    int released = r == DISTLOCK_OK ? distlock_release_token(c, K, "tok") : DISTLOCK_OK;
    distlock_client_free(c);
    assert_rc(r, DISTLOCK_OK);
    assert_true(validity > 0);
    assert_int_equal(before, 3);
    assert_true(pttl3 > 10000 && pttl4 > 10000);
    assert_int_equal(after, 5);
    assert_rc(released, DISTLOCK_OK);
    assert_no_key_anywhere(e, K);
}

typedef struct { distlock_client *c; const char *k; int r; long validity; char err[512]; } acq5;

static void *acquire_thread(void *p)
{
    acq5 *a = p;
    a->r = distlock_acquire_token(a->c, a->k, 20000, "tok", 0, &a->validity);
    snprintf(a->err, sizeof a->err, "%s", a->r == DISTLOCK_OK ? "" : distlock_last_error());
    return NULL;
}

static void test_own_key_gone_before_refresh_on_one_of_five_still_wins(void **state)
{
    proxy_env *e = *state;
    const char *K = "own5:gone";
    char hex[64];
    distlock_client *c = own_on_two_unheard_two(e, K);
    fp_ok(e->fp, "hold-match 4 up %s", fp_hex("EVALSHA", hex, sizeof hex));
    acq5 a = { c, K, -99, 0, "" };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, acquire_thread, &a), 0);
    int held = fp_cmd(e->fp, NULL, 0, "wait-held 4 up 1 10000") == 0;
    int deleted = rh_del(e->rc, 4, 0, K);
    fp_ok(e->fp, "unhold 4");
    pthread_join(th, NULL);
    int before = rh_count_holding(e->rc, K, "tok");
    printf("# refresh of node 4 held: %d, its key deleted: %d; acquire: %d (%s), validity %ld "
           "ms; 'tok' on %d node(s)\n", held, deleted, a.r, a.err, a.validity, before);
    unhold_unheard(e, c);
    int released = a.r == DISTLOCK_OK ? distlock_release_token(c, K, "tok") : DISTLOCK_OK;
    distlock_client_free(c);
    assert_true(held);
    assert_int_equal(deleted, 1);
    assert_rc(a.r, DISTLOCK_OK);
    assert_true(a.validity > 0);
    assert_int_equal(before, 3);
    assert_rc(released, DISTLOCK_OK);
    assert_no_key_anywhere(e, K);
}

static void test_no_quorum_undoes_unheard_nodes_and_keeps_what_was_ours(void **state)
{
    proxy_env *e = *state;
    const char *K = "own5:held";
    distlock_client *c = own_on_two_unheard_two(e, K);
    assert_int_equal(rh_set(e->rc, 2, 0, K, "foreign", 60000), 0);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 300), DISTLOCK_OK);
    int r = distlock_acquire_token(c, K, 20000, "tok", 0, NULL);
    printf("# acquire: %d (%s)\n", r, distlock_last_error());
    /* No call of the client's after this: its connections to nodes 0 and 1
     * are known hung now (a call there would fail at once until they are
     * read again); the servers say what ran. */
    fp_ok(e->fp, "unhold 0");
    fp_ok(e->fp, "unhold 1");
    char v[64];
    int on0 = 1, on1 = 1;
    /* the held SET, then the undo's release queued behind it (or the
     * replacement connection's CLIENT KILL of the held one first) */
    RH_WAIT_UNTIL((on0 = rh_get(e->rc, 0, 0, K, v, sizeof v)) != 1 &&
                  (on1 = rh_get(e->rc, 1, 0, K, v, sizeof v)) != 1, 3000);
    int ours = rh_count_holding(e->rc, K, "tok");
    int foreign = rh_count_holding(e->rc, K, "foreign");
    printf("# node 0 %s, node 1 %s; 'tok' on %d node(s), 'foreign' on %d\n",
           on0 == 1 ? "has a key" : "empty", on1 == 1 ? "has a key" : "empty", ours, foreign);
    distlock_client_free(c);
    assert_int_not_equal(r, DISTLOCK_OK);
    assert_int_not_equal(on0, 1);
    assert_int_not_equal(on1, 1);
    assert_int_equal(foreign, 1);
    /* nodes 3 and 4 held our token before the attempt: left alone */
    assert_int_equal(ours, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_two_own_and_one_grant_win_before_two_nodes_answer, heal),
        cmocka_unit_test_setup(test_own_key_gone_before_refresh_on_one_of_five_still_wins, heal),
        cmocka_unit_test_setup(test_no_quorum_undoes_unheard_nodes_and_keeps_what_was_ours, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
