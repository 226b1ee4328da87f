/* test_resend_after_lost_reply.c -- resend and undo after a lost reply.
 *
 * A call whose connection breaks after the request went out is re-sent once
 * on a fresh connection (docs/guarantees.md, "Release, extend and resends"). Whatever that resend
 * finds, the outcome must be true to what happened on the servers:
 *  - an acquire that returns anything but DISTLOCK_OK leaves no key of ours
 *    behind on any node (a DISTLOCK_STRICT one: none where it saw its own
 *    grant; its token found only on a resend is left to its TTL); one that
 *    returns OK holds the key on a quorum;
 *  - a release that did delete the key on a quorum returns DISTLOCK_OK.
 * Three real redis-servers behind the fault-injecting proxy, which resets
 * the library's connection right when the reply comes back (the request has
 * run on the server, the reply is lost). */
#include "test_common.h"
#include "test_proxy_cluster.h"

DEFINE_PROXY_GROUP(3)

static long proxy_resets(proxy_env *e)
{
    return (long)fp_stat(e->fp, "resets");
}

/* After an acquire that returned r: OK -> held on a quorum; anything else
 * -> no key of ours anywhere (waiting up to 3 s for requests still on
 * their way). Returns 0, or 1 with the reason in why. */
static int check_acquire_outcome(proxy_env *e, const char *key, const char *token, int r,
                                 char *why, size_t size)
{
    int n = -1;
    why[0] = '\0';
    if (r == DISTLOCK_OK) {
        n = rh_count_holding(e->rc, key, token);
        if (n < 2)
            snprintf(why, size, "acquire returned OK but %s = %s is held on %d node(s)\n", key,
                     token, n);
    } else if (!RH_WAIT_UNTIL((n = rh_count_holding(e->rc, key, token)) == 0, 3000)) {
        long long pttl = -3;
        for (int i = 0; i < e->rc->n && pttl == -3; i++) {
            char v[256];
            if (rh_get(e->rc, i, 0, key, v, sizeof v) == 1 && strcmp(v, token) == 0)
                pttl = rh_pttl(e->rc, i, 0, key);
        }
        snprintf(why, size, "acquire returned %d (%s) but %s = %s is still held on %d node(s) "
                 "(pttl %lld ms): nobody can take the key for the TTL\n", r,
                 distlock_strerror(r), key, token, n, pttl);
    }
    return why[0] != '\0';
}

#define assert_check_ok(bad, why) do {                                        \
        if (bad) {                                                            \
            print_error("%s", why);                                           \
            fail();                                                           \
        }                                                                     \
    } while (0)

/* (a) DISTLOCK_STRICT acquire_token whose replies from nodes 0 and 1 are
 * lost: the SETs ran, the connections are reset as the replies come back,
 * and the resend on fresh connections finds our own token. A strict token
 * is the caller's and another client may hold the same one, so the resend
 * cannot tell its own first send from that holder's key: those nodes are
 * not counted granted and the undo leaves them to their TTL (only node 2,
 * whose grant it saw, is released). The caller is told NOTACQUIRED, and
 * distlock_release_token() with the token it knows deletes what is left. */
static void test_strict_acquire_lost_reply_not_acquired_token_left_until_released(void **state)
{
    proxy_env *e = *state;
    const char *K = "resend:9a";
    distlock_client *c = proxied_client(e);
    warm_up(c);
    int id0 = lib_conn(e, 0), id1 = lib_conn(e, 1);
    long resets0 = proxy_resets(e);
    fp_ok(e->fp, "reset-after 0:%d down 1", id0);
    fp_ok(e->fp, "reset-after 1:%d down 1", id1);

    long validity = 0;
    int r = distlock_acquire_token(c, K, 10000, "tok", DISTLOCK_STRICT, &validity);
    int held = rh_count_holding(e->rc, K, "tok");
    char v[64];
    printf("# STRICT acquire with two replies lost: %d (%s), proxy resets %ld, token left on "
           "%d node(s)\n", r, r == DISTLOCK_OK ? "" : distlock_last_error(),
           proxy_resets(e) - resets0, held);
    assert_int_equal(proxy_resets(e) - resets0, 2);
    assert_rc(r, DISTLOCK_NOTACQUIRED);
    assert_int_equal(held, 2);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rh_get(e->rc, i, 0, K, v, sizeof v), 1);
        assert_string_equal(v, "tok");
        assert_true(rh_pttl(e->rc, i, 0, K) > 0);
    }
    assert_int_equal(rh_get(e->rc, 2, 0, K, NULL, 0), 0);  /* its seen grant: undone */
    assert_rc(distlock_release_token(c, K, "tok"), DISTLOCK_OK);
    assert_holding(e->rc, K, "tok", 0);
    distlock_client_free(c);
}

/* (b) The request ran on node 1, then its connection was reset and the
 * resend failed too (its fresh connection is reset as well): node 1 failed
 * with ECONN after our SET reached it. Node 0 refuses (foreign value), so
 * the acquire cannot win; its undo must cover node 1 too. */
static void test_undo_after_reset(void **state)
{
    proxy_env *e = *state;
    const char *K = "resend:9b";
    distlock_client *c = proxied_client(e);
    warm_up(c);
    int id1 = lib_conn(e, 1);
    assert_int_equal(rh_set(e->rc, 0, 0, K, "foreign", 60000), 0);
    long resets0 = proxy_resets(e);
    fp_ok(e->fp, "reset-after 1:%d down 1", id1);    /* reply lost, request ran */
    fp_ok(e->fp, "reset-after 1:next down 1");       /* the resend's connection too */

    int r = distlock_acquire_token(c, K, 10000, "tok", 0, NULL);
    printf("# acquire, node 1 reset after the request: %d (%s), proxy resets %ld\n", r,
           r == DISTLOCK_OK ? "" : distlock_last_error(), proxy_resets(e) - resets0);
    assert_int_equal(proxy_resets(e) - resets0, 2);
    char why[512];
    int bad = check_acquire_outcome(e, K, "tok", r, why, sizeof why);
    distlock_client_free(c);
    assert_check_ok(bad, why);
}

/* (b') A script error after the SET: with DISTLOCK_FENCING the acquire
 * script sets the key, then INCRs {key}:fence, which fails on node 2 where
 * that counter is not an integer (the SET stays: Redis does not roll back a
 * script). Node 0 refuses; the failed acquire must not leave its key on
 * node 2 (nor on node 1). */
static void test_undo_after_script_error(void **state)
{
    proxy_env *e = *state;
    const char *K = "resend:9b2";
    distlock_client *c = proxied_client(e);
    assert_int_equal(rh_set(e->rc, 0, 0, K, "foreign", 60000), 0);
    assert_int_equal(rh_set(e->rc, 2, 0, "{resend:9b2}:fence", "not-a-number", 0), 0);

    distlock_lock *l = NULL;
    int r = distlock_acquire(c, K, 10000, 0, DISTLOCK_FENCING, &l);
    printf("# fencing acquire, script error on node 2: %d (%s)\n", r,
           r == DISTLOCK_OK ? "" : distlock_last_error());
    char why[512] = "";
    if (r == DISTLOCK_OK) {
        /* Only nodes 1 and 2 could grant; node 2 cannot have. */
        snprintf(why, sizeof why, "fencing acquire succeeded without a quorum (fence %lld)\n",
                 (long long)distlock_lock_fence(l));
    } else {
        char v[256] = "";
        int left = -1, node = -1;
        if (!RH_WAIT_UNTIL(rh_get(e->rc, 1, 0, K, NULL, 0) == 0 &&
                           rh_get(e->rc, 2, 0, K, NULL, 0) == 0, 3000)) {
            for (int i = 1; i < 3 && node < 0; i++)
                if ((left = rh_get(e->rc, i, 0, K, v, sizeof v)) != 0) node = i;
            snprintf(why, sizeof why, "failed acquire (%d) left %s = \"%s\" on node %d "
                     "(pttl %lld ms)\n", r, K, v, node, rh_pttl(e->rc, node, 0, K));
        }
    }
    distlock_lock_free(l);
    distlock_client_free(c);
    assert_check_ok(why[0] != '\0', why);
}

/* (c) A release whose replies from nodes 0 and 1 are lost after it ran
 * there: the resend finds nothing left to delete. The key was deleted on
 * every node: the release did release, so it returns OK. */
static void test_release_lost_reply(void **state)
{
    proxy_env *e = *state;
    const char *K = "resend:9c";
    distlock_client *c = proxied_client(e);
    warm_up(c);
    int id0 = lib_conn(e, 0), id1 = lib_conn(e, 1);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, K, 10000, 0, 0, &l), DISTLOCK_OK);
    assert_holding(e->rc, K, distlock_lock_token(l), 3);
    sync_conns(c);
    long resets0 = proxy_resets(e);
    fp_ok(e->fp, "reset-after 0:%d down 1", id0);
    fp_ok(e->fp, "reset-after 1:%d down 1", id1);

    int r = distlock_release(l);
    char detail[512];
    snprintf(detail, sizeof detail, "%s", r == DISTLOCK_OK ? "" : distlock_last_error());
    printf("# release with two replies lost: %d (%s), proxy resets %ld\n", r, detail,
           proxy_resets(e) - resets0);
    /* it returns once a quorum answered: node 2's delete may still be on its way */
    int left = -1;
    (void)RH_WAIT_UNTIL((left = rh_count_holding(e->rc, K, NULL)) == 0, 3000);
    distlock_lock_free(l);
    distlock_client_free(c);
    assert_int_equal(left, 0);
    if (r != DISTLOCK_OK) {
        print_error("distlock_release = %d (%s) although it deleted the key on all 3 nodes: "
                    "\"%s\"\n", r, distlock_strerror(r), detail);
        fail();
    }
}

/* K, held with token T on all 3 nodes through c, released with the
 * replies of nodes 0 and 1 (c's connections id0, id1) lost: the release
 * deleted the key everywhere and must say so. Frees c. */
static void release_token_with_two_replies_lost(proxy_env *e, distlock_client *c, int id0,
                                                int id1, const char *K, const char *T,
                                                const char *what)
{
    assert_holding(e->rc, K, T, 3);
    sync_conns(c);
    fp_ok(e->fp, "reset-after 0:%d down 1", id0);
    fp_ok(e->fp, "reset-after 1:%d down 1", id1);

    int r = distlock_release_token(c, K, T);
    char detail[512];
    snprintf(detail, sizeof detail, "%s", r == DISTLOCK_OK ? "" : distlock_last_error());
    printf("# release_token with two replies lost%s: %d (%s)\n", what, r, detail);
    int left = -1;
    (void)RH_WAIT_UNTIL((left = rh_count_holding(e->rc, K, NULL)) == 0, 3000);
    distlock_client_free(c);
    assert_int_equal(left, 0);
    if (r != DISTLOCK_OK) {
        print_error("distlock_release_token = %d (%s) although it deleted the key on all 3 "
                    "nodes: \"%s\"\n", r, distlock_strerror(r), detail);
        fail();
    }
}

/* The same through the token pair (as the PHP compat functions use it):
 * distlock_release_token whose first send ran and whose reply was lost on
 * two nodes says it released. */
static void test_release_token_lost_reply(void **state)
{
    proxy_env *e = *state;
    const char *K = "resend:9d";
    distlock_client *c = proxied_client(e);
    warm_up(c);
    int id0 = lib_conn(e, 0), id1 = lib_conn(e, 1);
    long v = 0;
    assert_rc(distlock_acquire_token(c, K, 10000, "tok-9d", 0, &v), DISTLOCK_OK);
    release_token_with_two_replies_lost(e, c, id0, id1, K, "tok-9d", "");
}

/* The same after the key and token were acquired before, by an earlier
 * ownership whose lease has ended: the client remembers its recent token
 * pairs (32 of them) in a ring, and other pairs in between make the ring
 * wrap, so the latest acquire's entry comes before the earlier one's. The
 * release must judge the resend's "gone" by the latest lease, which is
 * valid, not by the earlier one, which ended. */
static void test_release_token_lost_reply_after_the_same_token_held_before(void **state)
{
    proxy_env *e = *state;
    const char *K = "resend:9e", *T = "tok-9e";
    distlock_client *c = proxied_client(e);
    warm_up(c);
    int id0 = lib_conn(e, 0), id1 = lib_conn(e, 1);
    enum { REMEMBERED = 32 };  /* core/src/internal.h DISTLOCK__TP_RECENT */
    char other[32];
    for (int i = 0; i < REMEMBERED; i++) {
        if (i == 1) {  /* the earlier ownership, in the ring's second entry */
            assert_rc(distlock_acquire_token(c, K, 200, T, 0, NULL), DISTLOCK_OK);
            assert_true(RH_WAIT_UNTIL(rh_count_holding(e->rc, K, NULL) == 0, 3000));
            continue;
        }
        snprintf(other, sizeof other, "resend:9e:other:%d", i);
        assert_rc(distlock_acquire_token(c, other, 10000, "o", 0, NULL), DISTLOCK_OK);
        assert_rc(distlock_release_token(c, other, "o"), DISTLOCK_OK);
    }
    /* the latest ownership, in the ring's first entry again */
    assert_rc(distlock_acquire_token(c, K, 10000, T, 0, NULL), DISTLOCK_OK);
    release_token_with_two_replies_lost(e, c, id0, id1, K, T, ", the same token held before");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_strict_acquire_lost_reply_not_acquired_token_left_until_released, heal),
        cmocka_unit_test_setup(test_undo_after_reset, heal),
        cmocka_unit_test_setup(test_undo_after_script_error, heal),
        cmocka_unit_test_setup(test_release_lost_reply, heal),
        cmocka_unit_test_setup(test_release_token_lost_reply, heal),
        cmocka_unit_test_setup(test_release_token_lost_reply_after_the_same_token_held_before, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
