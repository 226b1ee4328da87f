/* test_frozen_node.c -- one meaning per status, seen from the C API: what a
 * caller gets when nodes freeze. The PHP, Python and CLI
 * suites play the same scenarios (php-ext/tests/072_frozen_node.phpt,
 * python/tests/test_frozen_node.py, cli/tests/run.sh t_frozen_*, t_granted_after_ttl), and
 * docs/errors.md "Statuses in each front end" is the table they all follow.
 *
 * Three real redis-servers behind the fault-injecting proxy; a "frozen" node
 * is a listener whose traffic the proxy holds in both directions (the
 * connections stay open, nothing ever answers: a hung server or a network
 * that stopped delivering), for current and new connections alike.
 *
 *  a) one of three frozen: acquire and release succeed on the two others (a
 *     quorum), within the command timeout; a second owner is told
 *     NOTACQUIRED (held), also after waiting, and gets the lock once it is
 *     released;
 *  b) the only node frozen: ECONN within about the command timeout, also
 *     with a wait budget (never NOTACQUIRED, never "held"); a release there
 *     is ECONN too;
 *  c) two of three frozen: ENOQUORUM, also with a wait budget;
 *  d) a quorum that grants only after the ttl is used up: ETIMEDOUT, and the
 *     grant is undone (nothing held) -- the only meaning ETIMEDOUT has.
 */
#include "test_common.h"
#include "test_proxy_cluster.h"

DEFINE_PROXY_GROUP(3)

#define CMD_MS 300L      /* per-node command timeout of these clients */
#define CONNECT_MS 300L
#define BOUND_MS 2000LL  /* "about the command timeout", on a busy 2-core box under ASan */

static distlock_client *client_on(proxy_env *e, unsigned mask)
{
    char uris[256];
    distlock_client *c = new_client(fp_uris_mask(e->fp, mask, uris, sizeof uris));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, CMD_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, CONNECT_MS), DISTLOCK_OK);
    return c;
}

/* Connect to every node and load the scripts while nothing is frozen, so the
 * scenarios below freeze established connections, as in production. */
static void connect_all(distlock_client *c, const char *key)
{
    distlock_lock *l = NULL;
    char k[128];
    snprintf(k, sizeof k, "%s:warm", key);
    assert_rc(distlock_acquire(c, k, 5000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
}

/* The detail of a failure that is not "held" must not say it is. */
static void assert_detail_not_held(void)
{
    const char *d = distlock_last_error();
    if (strstr(d, "held by another") != NULL || strstr(d, "another owner") != NULL) {
        print_error("the detail of a node failure speaks of another owner: \"%s\"\n", d);
        fail();
    }
}

static void test_one_of_three_frozen(void **state)
{
    proxy_env *e = *state;
    const char *key = "fz:one-of-three";
    distlock_client *a = client_on(e, 0x7), *b = client_on(e, 0x7);
    distlock_lock *la = NULL, *lb = NULL;
    connect_all(a, key);
    connect_all(b, key);
    fp_ok(e->fp, "hold 2");

    long long t0 = rh_now_ms();
    assert_rc(distlock_acquire(a, key, 10000, 0, 0, &la), DISTLOCK_OK);
    long long took = rh_now_ms() - t0;
    printf("# node 2 of 3 frozen: acquire OK in %lld ms (command timeout %ld)\n", took, CMD_MS);
    assert_true(took < BOUND_MS);
    assert_holding(e->rc, key, distlock_lock_token(la), 2);  /* not on the frozen node */
    assert_true(distlock_lock_validity_ms(la) > 0);

    /* Another owner: held, at once and after waiting -- NOTACQUIRED, not an error. */
    assert_rc(distlock_acquire(b, key, 10000, 0, 0, &lb), DISTLOCK_NOTACQUIRED);
    assert_null(lb);
    t0 = rh_now_ms();
    assert_rc(distlock_acquire(b, key, 10000, 400, 0, &lb), DISTLOCK_NOTACQUIRED);
    took = rh_now_ms() - t0;
    printf("# second owner, wait 400 ms: NOTACQUIRED after %lld ms\n", took);
    assert_true(took >= 350 && took < 400 + BOUND_MS);

    /* The holder releases on the two live nodes; then the other owner gets it. */
    t0 = rh_now_ms();
    assert_rc(distlock_release(la), DISTLOCK_OK);
    assert_true(rh_now_ms() - t0 < BOUND_MS);
    assert_holding(e->rc, key, NULL, 0);
    assert_rc(distlock_acquire(b, key, 10000, 0, 0, &lb), DISTLOCK_OK);
    assert_rc(distlock_release(lb), DISTLOCK_OK);
    distlock_lock_free(la);
    distlock_lock_free(lb);
    distlock_client_free(a);
    distlock_client_free(b);
}

static void test_only_node_frozen(void **state)
{
    proxy_env *e = *state;
    const char *key = "fz:only-node";
    distlock_client *c = client_on(e, 0x1);
    distlock_lock *held = NULL, *l = NULL;
    connect_all(c, key);
    assert_rc(distlock_acquire(c, key, 10000, 0, 0, &held), DISTLOCK_OK);
    fp_ok(e->fp, "hold 0");

    /* Without and with a wait budget: the connection status, not "held". */
    static const long waits[] = { 0, 3000 };
    for (int i = 0; i < 2; i++) {
        char k[64];
        snprintf(k, sizeof k, "%s:%d", key, i);
        long long t0 = rh_now_ms();
        assert_fails(distlock_acquire(c, k, 10000, waits[i], 0, &l), DISTLOCK_ECONN);
        long long took = rh_now_ms() - t0;
        printf("# the only node frozen, wait %ld ms: ECONN in %lld ms (\"%s\")\n", waits[i],
               took, distlock_last_error());
        assert_detail_not_held();
        assert_null(l);
        /* The first call waits out the command timeout; later ones may
         * fail at once (the core knows the node owes replies past it). */
        assert_true((i > 0 || took >= CMD_MS - 50) && took < BOUND_MS);
    }
    long long t0 = rh_now_ms();
    assert_fails(distlock_release(held), DISTLOCK_ECONN);
    assert_detail_not_held();
    assert_true(rh_now_ms() - t0 < BOUND_MS);
    distlock_lock_free(held);
    distlock_client_free(c);
}

static void test_two_of_three_frozen(void **state)
{
    proxy_env *e = *state;
    const char *key = "fz:two-of-three";
    distlock_client *c = client_on(e, 0x7);
    distlock_lock *l = NULL;
    connect_all(c, key);
    fp_ok(e->fp, "hold 1");
    fp_ok(e->fp, "hold 2");
    static const long waits[] = { 0, 3000 };
    for (int i = 0; i < 2; i++) {
        char k[64];
        snprintf(k, sizeof k, "%s:%d", key, i);
        long long t0 = rh_now_ms();
        assert_fails(distlock_acquire(c, k, 10000, waits[i], 0, &l), DISTLOCK_ENOQUORUM);
        long long took = rh_now_ms() - t0;
        printf("# two of three frozen, wait %ld ms: ENOQUORUM in %lld ms (\"%s\")\n", waits[i],
               took, distlock_last_error());
        assert_detail_not_held();
        assert_null(l);
        assert_true(took < BOUND_MS);
        assert_holding(e->rc, k, NULL, 0);  /* the live node's grant was undone */
    }
    distlock_client_free(c);
}

static void test_granted_after_ttl(void **state)
{
    proxy_env *e = *state;
    const char *key = "fz:too-late";
    distlock_client *c = new_client(fp_uris(e->fp));   /* default timeouts: 1000 / 500 ms */
    distlock_lock *l = NULL;
    connect_all(c, key);
    /* Every request reaches its node 300 ms late: the nodes grant a 100 ms
     * lease that is over before the replies are back. */
    fp_ok(e->fp, "delay * 300 up");
    assert_fails(distlock_acquire(c, key, 100, 0, 0, &l), DISTLOCK_ETIMEDOUT);
    printf("# quorum granted after the ttl: ETIMEDOUT (\"%s\")\n", distlock_last_error());
    assert_detail_not_held();
    assert_null(l);
    fp_ok(e->fp, "delay * 0 up");
    assert_holding(e->rc, key, NULL, 0);
    /* With a wait budget too: the same answer at once, not a wait for a holder. */
    fp_ok(e->fp, "delay * 300 up");
    long long t0 = rh_now_ms();
    assert_fails(distlock_acquire(c, key, 100, 5000, 0, &l), DISTLOCK_ETIMEDOUT);
    assert_true(rh_now_ms() - t0 < 3000);
    fp_ok(e->fp, "delay * 0 up");
    assert_holding(e->rc, key, NULL, 0);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_one_of_three_frozen, heal),
        cmocka_unit_test_setup(test_only_node_frozen, heal),
        cmocka_unit_test_setup(test_two_of_three_frozen, heal),
        cmocka_unit_test_setup(test_granted_after_ttl, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
