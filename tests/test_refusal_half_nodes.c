/* test_refusal_half_nodes.c -- Redlock over an even number of nodes: "held"
 * or "not the owner" needs a MAJORITY of nodes saying so positively (README
 * "Errors": "without one, 'held' or 'not the owner' needs a majority of nodes
 * saying so positively, else a refusal makes it EPROTO"). With 4 nodes
 * (quorum 3), two nodes saying "not ours", one refusing (an ACL without
 * GET: the script cannot read the key) and one granting is half, not a
 * majority: EPROTO, and the lock is not marked lost. (The refusing node and
 * the granting one still hold the token: nobody else can reach a quorum of
 * 3 before it expires.)
 *
 * Real redis-server processes (4), users made with ACL SETUSER. */
#include "test_common.h"

#define N 4
DEFINE_GROUP(N)

#define USER "dlhalf"
#define PASS "half-pw-1"

static void set_user(rh_cluster *rc, unsigned mask, const char *rule)
{
    for (int i = 0; i < rc->n; i++) {
        if (!(mask & (1u << i)))
            continue;
        const char *argv[] = { "ACL", "SETUSER", USER, "reset", "on", ">" PASS, "~*", "&*",
                               "+@all", rule };
        redisContext *ctx = rh_connect(rc, i, 0);
        assert_non_null(ctx);
        redisReply *r = redisCommandArgv(ctx, rule ? 10 : 9, argv, NULL);
        if (r == NULL || r->type != REDIS_REPLY_STATUS) {
            print_error("ACL SETUSER on node %d: %s\n", i, r ? r->str : ctx->errstr);
            fail();
        }
        freeReplyObject(r);
        redisFree(ctx);
    }
}

static distlock_client *user_client(rh_cluster *rc)
{
    char uris[1024];
    size_t o = 0;
    for (int i = 0; i < rc->n; i++)
        o += (size_t)snprintf(uris + o, sizeof uris - o, "%sredis://" USER ":" PASS
                              "@127.0.0.1:%d", o ? "," : "", rc->node[i].port);
    distlock_client *c = new_client(uris);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 2000), DISTLOCK_OK);
    return c;
}

/* Held on all 4; then the key is gone from nodes 0 and 1 (restarted without
 * persistence, say), node 2 refuses, node 3 renews. */
static void test_extend_two_not_ours_one_refused_one_renewed(void **state)
{
    rh_cluster *rc = *state;
    set_user(rc, 0xf, NULL);
    distlock_client *c = user_client(rc);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "half:ext", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_holding(rc, "half:ext", distlock_lock_token(l), 4);
    assert_int_equal(rh_del(rc, 0, 0, "half:ext"), 1);
    assert_int_equal(rh_del(rc, 1, 0, "half:ext"), 1);
    set_user(rc, 0x4, "-get");
    int st = distlock_extend(l, 30000);
    printf("extend, 2 of 4 not ours, 1 refused, 1 renewed: %d (%s), lost %d: \"%s\"\n", st,
           distlock_strerror(st), distlock_lock_lost(l), distlock_last_error());
    assert_rc(st, DISTLOCK_EPROTO);
    assert_int_equal(distlock_lock_lost(l), 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* Another owner's token on nodes 0 and 1, node 2 refuses, node 3 grants. */
static void test_acquire_two_held_one_refused_one_granted(void **state)
{
    rh_cluster *rc = *state;
    set_user(rc, 0xf, NULL);
    assert_int_equal(rh_set(rc, 0, 0, "half:acq", "othertoken", 30000), 0);
    assert_int_equal(rh_set(rc, 1, 0, "half:acq", "othertoken", 30000), 0);
    set_user(rc, 0x4, "-set");
    distlock_client *c = user_client(rc);
    distlock_lock *l = NULL;
    int st = distlock_acquire(c, "half:acq", 30000, 0, 0, &l);
    printf("acquire, 2 of 4 held by another, 1 refused, 1 granted: %d (%s): \"%s\"\n", st,
           distlock_strerror(st), distlock_last_error());
    assert_rc(st, DISTLOCK_EPROTO);
    distlock_lock_free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_extend_two_not_ours_one_refused_one_renewed, heal),
        cmocka_unit_test_setup(test_acquire_two_held_one_refused_one_granted, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
