/* test_stats.c -- distlock_client_stats(): the counters and histograms move
 * exactly as the scenario says.
 *
 * Three real redis-servers behind the fault-injecting proxy. Each test takes
 * a snapshot, plays one scenario, and compares the deltas with what the
 * scenario implies:
 *  a) outcomes: grants, refusals (NOTACQUIRED), failures by status, releases
 *     and a release that is not the owner's, an extend, the wait and hold
 *     histograms (one observation per call), DISTLOCK_OPT_STATS off;
 *  b) two of three nodes frozen: the acquire fails with ENOQUORUM, and the
 *     frozen nodes, only they, count the timeouts of the round and of the
 *     undo sent to them;
 *  c) a connection reset by the proxy: the next call reconnects (one
 *     reconnect on that node, no error: the call is resent);
 *  d) auto-renewal: renewals count up; the key taken over on every node makes
 *     the next renewal fail and the lock lost (one each), its release fails;
 *  e) the call itself: sizing, a buffer too small, names unique and well
 *     formed, cumulative buckets.
 */
#include <poll.h>
#include <regex.h>

#include "test_common.h"
#include "test_proxy_cluster.h"

DEFINE_PROXY_GROUP(3)

#define CMD_MS 300L

typedef struct snap {
    size_t n;
    distlock_stat *e;
} snap;

static snap take(distlock_client *c)
{
    snap s = { 0, NULL };
    assert_rc(distlock_client_stats(c, NULL, 0, &s.n), DISTLOCK_OK);
    assert_true(s.n > 0);
    s.e = calloc(s.n, sizeof(*s.e));
    assert_non_null(s.e);
    size_t again = 0;
    assert_rc(distlock_client_stats(c, s.e, s.n, &again), DISTLOCK_OK);
    assert_int_equal(again, s.n);
    return s;
}

static uint64_t val(const snap *s, const char *name)
{
    for (size_t k = 0; k < s->n; k++)
        if (strcmp(s->e[k].name, name) == 0)
            return s->e[k].value;
    print_error("no stat named %s\n", name);
    fail();
    return 0;
}

/* How much `name` moved from a to b. */
static long long delta(const snap *a, const snap *b, const char *name)
{
    return (long long)(val(b, name) - val(a, name));
}

static long long now_delta(distlock_client *c, const snap *a, const char *name)
{
    snap b = take(c);
    long long d = delta(a, &b, name);
    free(b.e);
    return d;
}

/* Every entry but those listed in `moved` (NULL-terminated) kept its value. */
static void assert_only_moved(const snap *a, const snap *b, const char *const *moved)
{
    assert_int_equal(a->n, b->n);
    for (size_t k = 0; k < a->n; k++) {
        int listed = 0;
        for (const char *const *m = moved; *m; m++)
            listed |= strcmp(*m, a->e[k].name) == 0 ||
                      (strstr(*m, "*") && strncmp(a->e[k].name, *m, strlen(*m) - 1) == 0);
        if (!listed && a->e[k].value != b->e[k].value) {
            print_error("%s moved %llu -> %llu, not expected by the scenario\n", a->e[k].name,
                        (unsigned long long)a->e[k].value, (unsigned long long)b->e[k].value);
            fail();
        }
    }
}

static distlock_client *proxied(proxy_env *e)
{
    distlock_client *c = proxied_client(e);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, CMD_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, CMD_MS), DISTLOCK_OK);
    return c;
}

static void test_outcomes(void **state)
{
    proxy_env *e = *state;
    const char *key = "st:outcomes";
    distlock_client *a = proxied(e), *b = proxied(e);
    distlock_lock *la = NULL, *lb = NULL;
    warm_up(a);
    warm_up(b);
    snap a0 = take(a), b0 = take(b);

    enum { REFUSALS = 3 };
    assert_rc(distlock_acquire(a, key, 10000, 0, 0, &la), DISTLOCK_OK);
    for (int i = 0; i < REFUSALS; i++)
        assert_rc(distlock_acquire(b, key, 10000, 0, 0, &lb), DISTLOCK_NOTACQUIRED);
    assert_fails(distlock_acquire(b, "", 10000, 0, 0, &lb), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire_token(b, key, -5, "tok", 0, NULL), DISTLOCK_EINVAL);
    assert_rc(distlock_extend(la, 10000), DISTLOCK_OK);
    assert_fails(distlock_release_token(b, key, "not-the-token"), DISTLOCK_ENOTOWNER);
    assert_rc(distlock_release(la), DISTLOCK_OK);
    distlock_lock_free(la);
    sync_conns(a);
    sync_conns(b);

    snap a1 = take(a), b1 = take(b);
    assert_int_equal(delta(&a0, &a1, "acquire_granted_total"), 1);
    assert_int_equal(delta(&a0, &a1, "extend_total"), 1);
    assert_int_equal(delta(&a0, &a1, "release_total"), 1);
    assert_int_equal(delta(&a0, &a1, "acquire_wait_us_count"), 1);
    assert_int_equal(delta(&a0, &a1, "hold_us_count"), 1);
    assert_int_equal(delta(&a0, &a1, "hold_us_bucket{le=\"+Inf\"}"), 1);
    const char *a_moved[] = { "acquire_granted_total", "extend_total", "release_total",
                              "acquire_wait_us_*", "hold_us_*", NULL };
    assert_only_moved(&a0, &a1, a_moved);

    assert_int_equal(delta(&b0, &b1, "acquire_refused_total"), REFUSALS);
    assert_int_equal(delta(&b0, &b1, "acquire_failed_total{status=\"EINVAL\"}"), 2);
    assert_int_equal(delta(&b0, &b1, "release_failed_total"), 1);
    assert_int_equal(delta(&b0, &b1, "acquire_wait_us_count"), REFUSALS + 2);
    const char *b_moved[] = { "acquire_refused_total", "acquire_failed_total{status=\"EINVAL\"}",
                              "release_failed_total", "acquire_wait_us_*", NULL };
    assert_only_moved(&b0, &b1, b_moved);

    /* Off: nothing moves; on again: counting resumes where it was. */
    assert_rc(distlock_client_set(a, DISTLOCK_OPT_STATS, 0), DISTLOCK_OK);
    assert_rc(distlock_acquire(a, key, 10000, 0, 0, &la), DISTLOCK_OK);
    assert_rc(distlock_release(la), DISTLOCK_OK);
    distlock_lock_free(la);
    snap a2 = take(a);
    const char *none[] = { NULL };
    assert_only_moved(&a1, &a2, none);
    assert_rc(distlock_client_set(a, DISTLOCK_OPT_STATS, 1), DISTLOCK_OK);
    assert_rc(distlock_acquire(a, key, 10000, 0, 0, &la), DISTLOCK_OK);
    assert_int_equal(now_delta(a, &a2, "acquire_granted_total"), 1);
    assert_rc(distlock_release(la), DISTLOCK_OK);
    distlock_lock_free(la);
    assert_fails(distlock_client_set(a, DISTLOCK_OPT_STATS, 2), DISTLOCK_EINVAL);

    free(a0.e), free(a1.e), free(a2.e), free(b0.e), free(b1.e);
    distlock_client_free(a);
    distlock_client_free(b);
}

/* Two of three frozen: the round waits out both frozen nodes' command
 * timeout (ENOQUORUM), then undoes the attempt on every node it reached:
 * the undo goes to the live node (which answers) and is queued to the
 * frozen ones, which already owe a reply past their timeout, so they fail
 * at once. Each frozen node: 2 errors, both timeouts; the live one none. */
static void test_node_timeouts(void **state)
{
    proxy_env *e = *state;
    distlock_client *c = proxied(e);
    distlock_lock *l = NULL;
    warm_up(c);
    snap s0 = take(c);
    fp_ok(e->fp, "hold 1");
    fp_ok(e->fp, "hold 2");
    assert_fails(distlock_acquire(c, "st:frozen", 10000, 0, 0, &l), DISTLOCK_ENOQUORUM);
    snap s1 = take(c);
    enum { ROUNDS = 2 };  /* the attempt, its undo */
    assert_int_equal(delta(&s0, &s1, "acquire_failed_total{status=\"ENOQUORUM\"}"), 1);
    assert_int_equal(delta(&s0, &s1, "node_errors_total{node=\"0\"}"), 0);
    assert_int_equal(delta(&s0, &s1, "node_timeouts_total{node=\"0\"}"), 0);
    for (int i = 1; i <= 2; i++) {
        char en[64], tn[64];
        snprintf(en, sizeof en, "node_errors_total{node=\"%d\"}", i);
        snprintf(tn, sizeof tn, "node_timeouts_total{node=\"%d\"}", i);
        printf("# frozen node %d: %lld errors, %lld timeouts\n", i, delta(&s0, &s1, en),
               delta(&s0, &s1, tn));
        assert_int_equal(delta(&s0, &s1, tn), ROUNDS);
        assert_int_equal(delta(&s0, &s1, en), ROUNDS);
        /* the undo replaced the connection the attempt timed out on */
        snprintf(en, sizeof en, "node_reconnects_total{node=\"%d\"}", i);
        assert_int_equal(delta(&s0, &s1, en), 1);
    }
    assert_int_equal(delta(&s0, &s1, "acquire_wait_us_count"), 1);
    /* it waited out the command timeout: not in a bucket below it */
    assert_int_equal(delta(&s0, &s1, "acquire_wait_us_bucket{le=\"262144\"}"), 0);
    const char *moved[] = { "acquire_failed_total{status=\"ENOQUORUM\"}", "acquire_wait_us_*",
                            "node_errors_total{node=\"1\"}", "node_errors_total{node=\"2\"}",
                            "node_timeouts_total{node=\"1\"}", "node_timeouts_total{node=\"2\"}",
                            "node_reconnects_total{node=\"1\"}",
                            "node_reconnects_total{node=\"2\"}", NULL };
    assert_only_moved(&s0, &s1, moved);
    free(s0.e), free(s1.e);
    distlock_client_free(c);
}

/* The proxy resets the library's connection to node 1 while it is idle:
 * the next call finds it broken, reconnects and sends again (one reconnect,
 * no node error, the acquire succeeds). */
static void test_reconnect(void **state)
{
    proxy_env *e = *state;
    distlock_client *c = proxied(e);
    distlock_lock *l = NULL;
    warm_up(c);
    int id = lib_conn(e, 1);
    snap s0 = take(c);
    fp_ok(e->fp, "reset 1:%d", id);
    fp_ok(e->fp, "wait-closed 1:%d 3000", id);
    assert_rc(distlock_acquire(c, "st:reconnect", 10000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    sync_conns(c);
    snap s1 = take(c);
    assert_int_equal(delta(&s0, &s1, "node_reconnects_total{node=\"1\"}"), 1);
    assert_int_equal(delta(&s0, &s1, "node_errors_total{node=\"1\"}"), 0);
    const char *moved[] = { "node_reconnects_total{node=\"1\"}", "acquire_granted_total",
                            "release_total", "acquire_wait_us_*", "hold_us_*", NULL };
    assert_only_moved(&s0, &s1, moved);
    free(s0.e), free(s1.e);
    distlock_client_free(c);
}

static void test_renew_and_lost(void **state)
{
    proxy_env *e = *state;
    const char *key = "st:renew";
    distlock_client *c = new_client(rh_uris(e->rc));
    distlock_lock *l = NULL;
    int fd = distlock_client_lost_fd(c);
    assert_true(fd >= 0);
    snap s0 = take(c);
    assert_rc(distlock_acquire(c, key, 600, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    /* renewals every ttl/3 = 200 ms: wait for two */
    assert_true(RH_WAIT_UNTIL(now_delta(c, &s0, "renewal_total") >= 2, 10000));
    snap s1 = take(c);
    for (int i = 0; i < e->rc->n; i++)
        assert_int_equal(rh_set(e->rc, i, 0, key, "someone-else", 30000), 0);
    struct pollfd p = { fd, POLLIN, 0 };
    assert_int_equal(poll(&p, 1, 10000), 1);
    assert_true(distlock_lock_lost(l));
    assert_fails(distlock_release(l), DISTLOCK_ENOTOWNER);
    distlock_lock_free(l);
    snap s2 = take(c);
    printf("# renewals before the take-over: %llu\n",
           (unsigned long long)val(&s1, "renewal_total"));
    assert_int_equal(delta(&s0, &s2, "renewal_failed_total"), 1);
    assert_int_equal(delta(&s0, &s2, "lost_total"), 1);
    assert_int_equal(delta(&s0, &s2, "acquire_granted_total"), 1);
    assert_int_equal(delta(&s0, &s2, "release_failed_total"), 1);
    assert_int_equal(delta(&s0, &s2, "release_total"), 0);
    /* a renewal may have gone out between our read and the take-over */
    assert_true(delta(&s1, &s2, "renewal_total") <= 1);
    free(s0.e), free(s1.e), free(s2.e);
    distlock_client_free(c);
}

static void test_the_call(void **state)
{
    proxy_env *e = *state;
    distlock_client *c = new_client(rh_uris(e->rc));
    size_t n = 0;
    assert_fails(distlock_client_stats(NULL, NULL, 0, &n), DISTLOCK_EINVAL);
    assert_fails(distlock_client_stats(c, NULL, 0, NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_client_stats(c, NULL, 3, &n), DISTLOCK_EINVAL);
    distlock_stat small[4];
    memset(small, 0, sizeof small);
    assert_fails(distlock_client_stats(c, small, 4, &n), DISTLOCK_EINVAL);
    assert_true(n > 4);
    assert_string_equal(small[0].name, "acquire_granted_total");

    snap s = take(c);
    assert_int_equal(s.n, n);
    regex_t re;
    assert_int_equal(regcomp(&re, "^[a-z_]+(\\{[a-z]+=\"[^\"]+\"\\})?$", REG_EXTENDED), 0);
    int node_entries = 0;
    for (size_t k = 0; k < s.n; k++) {
        assert_int_equal(regexec(&re, s.e[k].name, 0, NULL, 0), 0);
        for (size_t j = 0; j < k; j++)
            assert_string_not_equal(s.e[j].name, s.e[k].name);
        node_entries += strncmp(s.e[k].name, "node_", 5) == 0;
    }
    regfree(&re);
    assert_int_equal(node_entries, 3 * distlock_client_node_count(c));
    free(s.e);

    /* cumulative buckets: a few acquires of different lengths */
    distlock_lock *l = NULL;
    for (int i = 0; i < 5; i++) {
        assert_rc(distlock_acquire(c, "st:call", 10000, 0, 0, &l), DISTLOCK_OK);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    s = take(c);
    uint64_t prev = 0;
    for (size_t k = 0; k < s.n; k++)
        if (strncmp(s.e[k].name, "acquire_wait_us_bucket", 22) == 0) {
            assert_true(s.e[k].value >= prev);
            prev = s.e[k].value;
        }
    assert_int_equal(prev, 5);
    assert_int_equal(val(&s, "acquire_wait_us_count"), 5);
    assert_true(val(&s, "acquire_wait_us_sum") > 0);
    free(s.e);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_outcomes, heal),
        cmocka_unit_test_setup(test_node_timeouts, heal),
        cmocka_unit_test_setup(test_reconnect, heal),
        cmocka_unit_test_setup(test_renew_and_lost, heal),
        cmocka_unit_test_setup(test_the_call, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
