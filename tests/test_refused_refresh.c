/* test_refused_refresh.c -- a refusal never releases a lock behind its
 * holder's back (SPEC; docs/errors.md: "a refusal is an error, never a
 * loss"). The token pair's acquire, given the token the key already holds,
 * refreshes it (distlock.h: "idempotent retry after a lost reply"); a
 * refresh the server refuses must leave the held lock where it is.
 *
 * Real redis-server processes (3), users made with ACL SETUSER. */
#include "test_common.h"

#define N 3
DEFINE_GROUP(N)

#define USER "dlrefresh"
#define PASS "refresh-pw-1"

/* An idempotent re-acquire with the token the key already holds (the
 * token pair's "refreshes the TTL and succeeds", distlock.h) whose refresh
 * is refused (an ACL without TYPE: SET NX GET still works, the refresh --
 * the acquire script, whose first call is TYPE -- does not) fails with
 * EPROTO, "an error, not a loss": the lock the caller held before the call
 * must still be there afterwards, on every node. */
static void reacquire_refused(rh_cluster *rc, unsigned mask)
{
    acl_set_user(rc, mask, USER, PASS, "-type");
    distlock_client *c = acl_user_client(rc, mask, USER, PASS);
    /* counted on every node below: each connection up first */
    connect_nodes(rc, c, "rr:connect", __builtin_popcount(mask));
    const char *tok = "0123456789abcdef0123456789abcdef";
    assert_rc(distlock_acquire_token(c, "rr:pair", 30000, tok, 0, NULL), DISTLOCK_OK);
    assert_holding(rc, "rr:pair", tok, __builtin_popcount(mask));
    int st = distlock_acquire_token(c, "rr:pair", 30000, tok, 0, NULL);
    printf("re-acquire refused, %d node(s): %d (%s): \"%s\"\n", __builtin_popcount(mask), st,
           distlock_strerror(st), distlock_last_error());
    assert_rc(st, DISTLOCK_EPROTO);
    int held = rh_count_holding(rc, "rr:pair", tok);
    if (held != __builtin_popcount(mask)) {
        print_error("after a refused re-acquire the held lock is on %d of %d node(s): "
                    "deleted behind its holder's back\n", held, __builtin_popcount(mask));
        fail();
    }
    distlock_client_free(c);
}

static void test_reacquire_refused_keeps_the_lock_one_node(void **state)
{
    reacquire_refused(*state, 0x1);
}

static void test_reacquire_refused_keeps_the_lock_three_nodes(void **state)
{
    reacquire_refused(*state, 0x7);
}

/* The undo's rule (acquire.c undo_node), case by case. A refused SET NX
 * GET (an ACL without SET) ran nothing: a re-acquire refused that way
 * leaves the lock its caller held (before: the undo's release, which the
 * user may run, deleted it). */
static void reacquire_set_refused(rh_cluster *rc, unsigned mask)
{
    const char *tok = "fedcba9876543210fedcba9876543210";
    for (int i = 0; i < rc->n; i++)
        if (mask & (1u << i))
            assert_int_equal(rh_set(rc, i, 0, "rr:noset", tok, 30000), 0);
    acl_set_user(rc, mask, USER, PASS, "-set");
    distlock_client *c = acl_user_client(rc, mask, USER, PASS);
    int st = distlock_acquire_token(c, "rr:noset", 30000, tok, 0, NULL);
    printf("re-acquire, SET refused, %d node(s): %d (%s): \"%s\"\n", __builtin_popcount(mask),
           st, distlock_strerror(st), distlock_last_error());
    assert_rc(st, DISTLOCK_EPROTO);
    assert_holding(rc, "rr:noset", tok, __builtin_popcount(mask));
    /* and a fresh token refused the same way created nothing anywhere */
    st = distlock_acquire_token(c, "rr:noset2", 30000, tok, 0, NULL);
    assert_rc(st, DISTLOCK_EPROTO);
    assert_holding(rc, "rr:noset2", NULL, 0);
    distlock_client_free(c);
}

static void test_reacquire_set_refused_keeps_the_lock_one_node(void **state)
{
    reacquire_set_refused(*state, 0x1);
}

static void test_reacquire_set_refused_keeps_the_lock_three_nodes(void **state)
{
    reacquire_set_refused(*state, 0x7);
}

/* A refused re-acquire with a node that does not answer (DEBUG SLEEP past
 * the command timeout): the other nodes' replies prove the caller held the
 * key with this token before the call, so the silent node, which may be
 * one of the held ones, is left alone too. */
static void test_reacquire_refused_silent_node_keeps_the_lock(void **state)
{
    rh_cluster *rc = *state;
    acl_set_user(rc, 0x7, USER, PASS, "-type");
    distlock_client *c = acl_user_client(rc, 0x7, USER, PASS);
    /* counted on every node below: each connection up first */
    connect_nodes(rc, c, "rr:connect", N);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 200), DISTLOCK_OK);
    const char *tok = "00112233445566778899aabbccddeeff";
    assert_rc(distlock_acquire_token(c, "rr:silent", 30000, tok, 0, NULL), DISTLOCK_OK);
    assert_holding(rc, "rr:silent", tok, 3);
    assert_int_equal(rh_debug_sleep(rc, 2, 800), 0);
    int st = distlock_acquire_token(c, "rr:silent", 30000, tok, 0, NULL);
    printf("re-acquire refused on 2, 1 silent: %d (%s): \"%s\"\n", st, distlock_strerror(st),
           distlock_last_error());
    assert_rc(st, DISTLOCK_EPROTO);
    rh_sleep_ms(1000);  /* the sleeping node ran whatever it was sent */
    int held = rh_count_holding(rc, "rr:silent", tok);
    if (held != 3) {
        print_error("after a refused re-acquire with a silent node the held lock is on %d of 3 "
                    "nodes\n", held);
        fail();
    }
    distlock_client_free(c);
}

/* The acquire script's path (owner metadata on): node 0 holds our token
 * and the script refreshes it ({1, -1, 1}: held before, left alone by the
 * undo), node 1 holds it too but refuses the script's HSET (-hset: the
 * refusal comes before the script's only write of the lock key, so
 * nothing to undo there either), node 2 is another owner's. No quorum:
 * EPROTO, and the lock held on nodes 0 and 1 is still there. (Before: the
 * script set the key, then failed on HSET, and the undo released both.) */
static void test_reacquire_script_refused_keeps_the_lock(void **state)
{
    rh_cluster *rc = *state;
    const char *tok = "99998888777766665555444433332222";
    assert_int_equal(rh_set(rc, 0, 0, "rr:script", tok, 30000), 0);
    assert_int_equal(rh_set(rc, 1, 0, "rr:script", tok, 30000), 0);
    assert_int_equal(rh_set(rc, 2, 0, "rr:script", "someoneelse", 30000), 0);
    acl_set_user(rc, 0x1, USER, PASS, "+@all");
    acl_set_user(rc, 0x6, USER, PASS, "-hset");
    distlock_client *c = acl_user_client(rc, 0x7, USER, PASS);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_OWNER_INFO, 1), DISTLOCK_OK);
    int st = distlock_acquire_token(c, "rr:script", 30000, tok, 0, NULL);
    printf("re-acquire by script: 1 refreshed, 1 refused, 1 held by another: %d (%s): \"%s\"\n",
           st, distlock_strerror(st), distlock_last_error());
    assert_rc(st, DISTLOCK_EPROTO);
    int held = rh_count_holding(rc, "rr:script", tok);
    if (held != 2) {
        print_error("after a failed re-acquire the held lock is on %d of its 2 nodes\n", held);
        fail();
    }
    distlock_client_free(c);
}

/* The other side of the rule (the SPEC: "on failure, release on all nodes,
 * including those that did not answer"): a failed acquire with nothing
 * held before -- a handle, or the token pair with a token no node holds --
 * leaves no key behind on the nodes that did not answer in time but ran
 * the request later. */
static void test_failed_acquire_leaves_nothing_on_unanswered_nodes(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 200), DISTLOCK_OK);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "rr:warm", 30000, 0, 0, &l), DISTLOCK_OK);  /* connections */
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    l = NULL;
    for (int round = 0; round < 2; round++) {
        const char *key = round == 0 ? "rr:plain" : "rr:freshpair";
        assert_int_equal(rh_debug_sleep(rc, 1, 800), 0);
        assert_int_equal(rh_debug_sleep(rc, 2, 800), 0);
        int st = round == 0 ? distlock_acquire(c, key, 30000, 0, 0, &l)
                            : distlock_acquire_token(c, key, 30000,
                                                     "aaaabbbbccccddddeeeeffff00001111", 0, NULL);
        printf("%s, 2 of 3 silent: %d (%s): \"%s\"\n", round == 0 ? "acquire" : "acquire_token",
               st, distlock_strerror(st), distlock_last_error());
        assert_true(st < 0);
        assert_null(l);
        /* Both answer again: what they were sent while asleep (the acquire)
         * has run; then its undo, which assert_holding waits for. */
        for (int i = 1; i <= 2; i++) {
            redisReply *pong = rh_command(rc, i, 0, "PING");
            assert_non_null(pong);
            freeReplyObject(pong);
        }
        assert_holding(rc, key, NULL, 0);
    }
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_reacquire_refused_keeps_the_lock_one_node, heal),
        cmocka_unit_test_setup(test_reacquire_refused_keeps_the_lock_three_nodes, heal),
        cmocka_unit_test_setup(test_reacquire_set_refused_keeps_the_lock_one_node, heal),
        cmocka_unit_test_setup(test_reacquire_set_refused_keeps_the_lock_three_nodes, heal),
        cmocka_unit_test_setup(test_reacquire_refused_silent_node_keeps_the_lock, heal),
        cmocka_unit_test_setup(test_reacquire_script_refused_keeps_the_lock, heal),
        cmocka_unit_test_setup(test_failed_acquire_leaves_nothing_on_unanswered_nodes, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
