/* test_refused_refresh.c -- a refusal never releases a lock behind its
 * holder's back (SPEC; README "Errors": "a refusal is an error, never a
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

/* ACL SETUSER USER reset on >PASS ~* &* +@all RULE on the nodes in mask. */
static void set_user(rh_cluster *rc, unsigned mask, const char *rule)
{
    for (int i = 0; i < rc->n; i++) {
        if (!(mask & (1u << i)))
            continue;
        const char *argv[] = { "ACL", "SETUSER", USER, "reset", "on", ">" PASS, "~*", "&*",
                               "+@all", rule };
        redisContext *ctx = rh_connect(rc, i, 0);
        assert_non_null(ctx);
        redisReply *r = redisCommandArgv(ctx, 10, argv, NULL);
        if (r == NULL || r->type != REDIS_REPLY_STATUS) {
            print_error("ACL SETUSER %s on node %d: %s\n", rule, i, r ? r->str : ctx->errstr);
            fail();
        }
        freeReplyObject(r);
        redisFree(ctx);
    }
}

static distlock_client *user_client(rh_cluster *rc, unsigned mask)
{
    char uris[1024];
    size_t o = 0;
    for (int i = 0; i < rc->n; i++)
        if (mask & (1u << i))
            o += (size_t)snprintf(uris + o, sizeof uris - o, "%sredis://" USER ":" PASS
                                  "@127.0.0.1:%d", o ? "," : "", rc->node[i].port);
    distlock_client *c = new_client(uris);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 2000), DISTLOCK_OK);
    return c;
}

/* An idempotent re-acquire with the token the key already holds (the
 * token pair's "refreshes the TTL and succeeds", distlock.h) whose refresh
 * is refused (an ACL without PEXPIRE: SET NX GET still works, the extend
 * script does not) fails with EPROTO, "an error, not a loss": the lock the
 * caller held before the call must still be there afterwards, on every
 * node. */
static void reacquire_refused(rh_cluster *rc, unsigned mask)
{
    set_user(rc, mask, "-pexpire");
    distlock_client *c = user_client(rc, mask);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_reacquire_refused_keeps_the_lock_one_node, heal),
        cmocka_unit_test_setup(test_reacquire_refused_keeps_the_lock_three_nodes, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
