/* test_paused_node.c -- a paused node must not stall
 * callers.
 *
 * Three real redis-servers, one of them SIGSTOPped (the kernel still
 * accepts connections to it; nothing ever answers). Once a quorum has
 * decided, a call returns: it never waits for the paused node's handshake
 * or reply, not on the first call of a fresh client, and not every few
 * hundred calls when the library gives up a connection that owes too many
 * replies and makes a new one. Default timeouts (connect 1000 ms, command
 * 500 ms). */
#include "test_common.h"

#define N 3
DEFINE_GROUP(N)

/* 1000 acquire/release pairs on one key: after the first, every pair must
 * take well under the command timeout. */
static void test_paused_node_many_pairs(void **state)
{
    rh_cluster *rc = *state;
    enum { PAIRS = 1000 };
    const long long bound = 250;
    static const long long edges[] = { 1, 5, 25, 100, 250, 600, 1000000 };
    enum { NB = sizeof edges / sizeof edges[0] };
    long long hist[NB] = { 0 }, worst = 0, first = 0;
    int worst_at = -1, slow[16], nslow = 0, bad_rc = 0;
    char detail[512] = "";

    assert_int_equal(rh_pause(rc, 2), 0);
    distlock_client *c = new_client(rh_uris(rc));
    for (int i = 0; i < PAIRS; i++) {
        distlock_lock *l = NULL;
        long long t0 = rh_now_ms();
        int ra = distlock_acquire(c, "paused:15", 10000, 0, 0, &l);
        if (ra != DISTLOCK_OK && !bad_rc)
            snprintf(detail, sizeof detail, "pair %d: acquire %d (%s)", i, ra,
                     distlock_last_error());
        int rr = ra == DISTLOCK_OK ? distlock_release(l) : DISTLOCK_OK;
        if (rr != DISTLOCK_OK && !bad_rc)
            snprintf(detail, sizeof detail, "pair %d: release %d (%s)", i, rr,
                     distlock_last_error());
        long long dt = rh_now_ms() - t0;
        distlock_lock_free(l);
        bad_rc |= ra != DISTLOCK_OK || rr != DISTLOCK_OK;
        if (i == 0) {
            first = dt;
            continue;
        }
        int b = 0;
        while (dt >= edges[b]) b++;
        hist[b]++;
        if (dt > worst) worst = dt, worst_at = i;
        if (dt >= bound && nslow < 16) slow[nslow++] = i;
    }
    distlock_client_free(c);
    assert_int_equal(rh_resume(rc, 2), 0);

    printf("# node 2 paused, %d acquire/release pairs: first %lld ms; the others:", PAIRS, first);
    for (int b = 0; b < NB; b++)
        if (hist[b])
            printf(" %lld x %s%lld ms", hist[b], b == NB - 1 ? ">=" : "<",
                   b == NB - 1 ? edges[b - 1] : edges[b]);
    printf("; worst %lld ms (pair %d)\n", worst, worst_at);
    if (nslow) {
        printf("# pairs taking >= %lld ms:", bound);
        for (int k = 0; k < nslow; k++) printf(" %d", slow[k]);
        printf("\n");
    }
    if (bad_rc) {
        print_error("%s\n", detail);
        fail();
    }
    if (worst >= bound) {
        print_error("with one paused node a pair took up to %lld ms (pair %d; %d pairs >= %lld "
                    "ms): the call waited for the paused node after a quorum had decided\n",
                    worst, worst_at, nslow, bound);
        fail();
    }
}

/* A fresh client with a quorum in hand does not wait the connect timeout
 * for the paused node's handshake. */
static void test_paused_node_fresh_client(void **state)
{
    rh_cluster *rc = *state;
    assert_int_equal(rh_pause(rc, 2), 0);
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    long long t0 = rh_now_ms();
    int r = distlock_acquire(c, "paused:15f", 10000, 0, 0, &l);
    long long took = rh_now_ms() - t0;
    char detail[512];
    snprintf(detail, sizeof detail, "%s", r == DISTLOCK_OK ? "" : distlock_last_error());
    int held = rh_count_holding(rc, "paused:15f", r == DISTLOCK_OK ? distlock_lock_token(l) : NULL);
    distlock_lock_free(l);
    distlock_client_free(c);
    assert_int_equal(rh_resume(rc, 2), 0);
    printf("# fresh client, node 2 paused: first acquire %d in %lld ms (connect timeout 1000, "
           "command timeout 500), held on %d node(s)\n", r, took, held);
    if (r != DISTLOCK_OK) {
        print_error("first acquire = %d: %s\n", r, detail);
        fail();
    }
    if (took >= 600) {
        print_error("the first acquire of a fresh client took %lld ms with a quorum of two "
                    "live nodes: it waited for the paused node's handshake\n", took);
        fail();
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_paused_node_many_pairs, heal),
        cmocka_unit_test_setup(test_paused_node_fresh_client, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
