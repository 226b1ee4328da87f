/* test_acl_refusal.c -- a node that refuses a request (an ACL user without
 * a command the library needs, a key of another type: WRONGTYPE) gives an
 * error, DISTLOCK_EPROTO, in every operation: acquire, extend, renewal,
 * release and fencing. "Lost" (ENOTOWNER, the lost flag and callback) is
 * said only when nodes positively answered that the key no longer holds our
 * token; a refusal says nothing about that. Redlock: a refusal on a
 * minority does not matter when a quorum granted (like a minority that is
 * down); without a quorum, it is EPROTO unless a majority said "not ours"
 * or "held" (then the lock is gone, or taken).
 *
 * And docs/servers.md's "ACL permissions": a user with exactly the documented
 * set runs every feature (plain lock, a wait woken by pub/sub, fencing,
 * fair mode, owner metadata, auto-renewal, the admin calls).
 *
 * Real redis-server processes (3), users made with ACL SETUSER. */
#include <pthread.h>

#include "test_common.h"

#define N 3
DEFINE_GROUP(N)

#define USER "dlacl"
#define PASS "acl-pw-1"
/* docs/servers.md's set (section "ACL permissions"), found by trial on Redis 7.0:
 * without any one of these, some feature below fails. @connection: SELECT
 * (the feature test runs in database 1), CLIENT ID / KILL, WAIT. */
#define MINIMAL_ACL "~* &* +@connection +@keyspace +@scripting +@string +@pubsub +@hash " \
                    "+@sortedset +time"
#define FULL_ACL "~* &* +@all"

/* ACL SETUSER USER reset on >PASS <rules...> on the nodes in mask. */
static void set_user(rh_cluster *rc, unsigned mask, const char *rules)
{
    for (int i = 0; i < rc->n; i++) {
        if (!(mask & (1u << i)))
            continue;
        const char *argv[32] = { "ACL", "SETUSER", USER, "reset", "on", ">" PASS };
        int argc = 6;
        char buf[512];
        snprintf(buf, sizeof buf, "%s", rules);
        for (char *tok = strtok(buf, " "); tok && argc < 32; tok = strtok(NULL, " "))
            argv[argc++] = tok;
        redisContext *ctx = rh_connect(rc, i, 0);
        assert_non_null(ctx);
        redisReply *r = redisCommandArgv(ctx, argc, argv, NULL);
        if (r == NULL || r->type != REDIS_REPLY_STATUS) {
            print_error("ACL SETUSER %s on node %d: %s\n", rules, i, r ? r->str : ctx->errstr);
            fail();
        }
        freeReplyObject(r);
        redisFree(ctx);
    }
}

/* A client of the nodes in mask, logged in as USER, in database db. */
static distlock_client *user_client_db(rh_cluster *rc, unsigned mask, int db)
{
    char uris[1024];
    size_t o = 0;
    for (int i = 0; i < rc->n; i++)
        if (mask & (1u << i))
            o += (size_t)snprintf(uris + o, sizeof uris - o, "%sredis://" USER ":" PASS
                                  "@127.0.0.1:%d/%d", o ? "," : "", rc->node[i].port, db);
    distlock_client *c = new_client(uris);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 2000), DISTLOCK_OK);
    return c;
}

static distlock_client *user_client(rh_cluster *rc, unsigned mask)
{
    return user_client_db(rc, mask, 0);
}

static int nodes_of(unsigned mask)
{
    return __builtin_popcount(mask);
}

static uint64_t stat_of(distlock_client *c, const char *name)
{
    distlock_stat st[128];
    size_t n = 0;
    assert_rc(distlock_client_stats(c, st, 128, &n), DISTLOCK_OK);
    for (size_t k = 0; k < n; k++)
        if (strcmp(st[k].name, name) == 0)
            return st[k].value;
    print_error("no stat named %s\n", name);
    fail();
    return 0;
}

/* Replace key by a hash on node i, atomically (no call sees it missing). */
static void make_hash(rh_cluster *rc, int i, const char *key)
{
    redisReply *r = rh_command(rc, i, 0, "EVAL %s 1 %s",
                               "redis.call('DEL', KEYS[1]) redis.call('HSET', KEYS[1], 'f', 'v') "
                               "return 1", key);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
}

/* ------------------------------------------------------------ release */

/* A release the servers refused (no EVALSHA/EVAL: NOPERM) said nothing
 * about who holds the key: it is EPROTO, the key keeps our token, and the
 * same handle can release it once the servers take the script again (a
 * retry that answered "already released" would leave the key to its TTL
 * while telling the caller it is not the owner). */
static void release_refused_then_retried(rh_cluster *rc, unsigned mask)
{
    set_user(rc, mask, FULL_ACL);
    distlock_client *c = user_client(rc, mask);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "acl:rel", 30000, 0, 0, &l), DISTLOCK_OK);
    char tok[DISTLOCK_TOKEN_MAX + 1];
    snprintf(tok, sizeof tok, "%s", distlock_lock_token(l));
    RH_WAIT_UNTIL(rh_count_holding(rc, "acl:rel", tok) == nodes_of(mask), 3000);
    int held = rh_count_holding(rc, "acl:rel", tok);

    set_user(rc, mask, FULL_ACL " -evalsha -eval");
    int r = distlock_release(l);
    printf("release, %d node(s) refusing the script: %d (%s): \"%s\"\n", nodes_of(mask), r,
           distlock_strerror(r), distlock_last_error());
    assert_rc(r, DISTLOCK_EPROTO);
    assert_int_equal(rh_count_holding(rc, "acl:rel", tok), held);

    set_user(rc, mask, FULL_ACL);
    r = distlock_release(l);
    printf("the same handle's release, retried: %d (%s): \"%s\"\n", r, distlock_strerror(r),
           distlock_last_error());
    assert_rc(r, DISTLOCK_OK);
    assert_holding(rc, "acl:rel", tok, 0);
    /* Done now: a third release is the plain "already released". */
    assert_fails(distlock_release(l), DISTLOCK_ENOTOWNER);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_release_refused_then_retried_one_node(void **state)
{
    release_refused_then_retried(*state, 0x1);
}

static void test_release_refused_then_retried_three_nodes(void **state)
{
    release_refused_then_retried(*state, 0x7);
}

/* ------------------------------------------------------------ extend */

/* The tracker's case: a user allowed everything but GET. SET NX GET
 * acquires; the compare-and-PEXPIRE script cannot read the key. */
static void test_extend_refused_one_node(void **state)
{
    rh_cluster *rc = *state;
    set_user(rc, 0x1, FULL_ACL " -get");
    distlock_client *c = user_client(rc, 0x1);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "ar:ext1", 30000, 0, 0, &l), DISTLOCK_OK);
    const char *tok = distlock_lock_token(l);
    assert_fails(distlock_extend(l, 30000), DISTLOCK_EPROTO);
    /* Redis 7.0's words for an ACL refusal inside a script */
    assert_non_null(strstr(distlock_last_error(), "can't run this command"));
    assert_int_equal(distlock_lock_lost(l), 0);
    assert_true(distlock_lock_validity_ms(l) > 0);
    assert_holding(rc, "ar:ext1", tok, 1);
    assert_fails(distlock_extend_token(c, "ar:ext1", tok, 30000, NULL), DISTLOCK_EPROTO);
    /* release reads the key too: the same refusal, the same status */
    assert_fails(distlock_release(l), DISTLOCK_EPROTO);
    assert_int_equal(distlock_lock_lost(l), 0);
    assert_holding(rc, "ar:ext1", tok, 1);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_extend_refused_three_nodes(void **state)
{
    rh_cluster *rc = *state;
    distlock_lock *l = NULL;

    /* refused everywhere */
    set_user(rc, 0x7, FULL_ACL " -get");
    distlock_client *c = user_client(rc, 0x7);
    assert_rc(distlock_acquire(c, "ar:ext3", 30000, 0, 0, &l), DISTLOCK_OK);
    const char *tok = distlock_lock_token(l);
    assert_fails(distlock_extend(l, 30000), DISTLOCK_EPROTO);
    assert_int_equal(distlock_lock_lost(l), 0);
    assert_holding_quorum(rc, "ar:ext3", tok, 3);
    assert_fails(distlock_release(l), DISTLOCK_EPROTO);
    assert_int_equal(distlock_lock_lost(l), 0);
    distlock_lock_free(l);
    distlock_client_free(c);
    rh_del(rc, 0, 0, "ar:ext3"), rh_del(rc, 1, 0, "ar:ext3"), rh_del(rc, 2, 0, "ar:ext3");

    /* refused on a minority (node 2), a quorum renews: no error */
    set_user(rc, 0x3, FULL_ACL);
    c = user_client(rc, 0x7);
    assert_rc(distlock_acquire(c, "ar:min", 30000, 0, 0, &l), DISTLOCK_OK);
    tok = distlock_lock_token(l);
    assert_rc(distlock_extend(l, 30000), DISTLOCK_OK);
    assert_int_equal(distlock_lock_lost(l), 0);

    /* node 1 lost it, node 2 refuses, node 0 renews: not a quorum either
     * way, and nothing says the lock is gone (node 2 may hold it): EPROTO */
    assert_int_equal(rh_del(rc, 1, 0, "ar:min"), 1);
    assert_fails(distlock_extend(l, 30000), DISTLOCK_EPROTO);
    assert_non_null(strstr(distlock_last_error(), "refused by 1 of 3 nodes"));
    assert_int_equal(distlock_lock_lost(l), 0);

    /* nodes 0 and 1 say "not ours": gone on a majority, whatever node 2 says */
    assert_int_equal(rh_del(rc, 0, 0, "ar:min"), 1);
    assert_fails(distlock_extend(l, 30000), DISTLOCK_ENOTOWNER);
    assert_int_equal(distlock_lock_lost(l), 1);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* ------------------------------------------------------------ renewal */

static void count_lost(distlock_lock *l, void *arg)
{
    (void)l;
    __atomic_add_fetch((int *)arg, 1, __ATOMIC_SEQ_CST);
}

/* Renewals refused: failed renewals (retried), not a loss, while the lease
 * is valid. ttl 6 s: the first renewal is due at 2 s, the lease ends at
 * ~5.9 s, so the checks below run with seconds to spare. */
static void renewal_refused(rh_cluster *rc, unsigned mask, const char *key)
{
    set_user(rc, mask, FULL_ACL " -get");
    distlock_client *c = user_client(rc, mask);
    distlock_lock *l = NULL;
    int lost_calls = 0;
    assert_rc(distlock_acquire(c, key, 6000, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    const char *tok = distlock_lock_token(l);
    assert_rc(distlock_lock_on_lost(l, count_lost, &lost_calls), DISTLOCK_OK);
    if (!RH_WAIT_UNTIL(stat_of(c, "renewal_failed_total") >= 2 || distlock_lock_lost(l), 5000)) {
        print_error("no failed renewal within 5 s\n");
        fail();
    }
    if (distlock_lock_lost(l) || __atomic_load_n(&lost_calls, __ATOMIC_SEQ_CST)) {
        print_error("%d node(s) refused the renewal (an ACL without GET) and the lock was marked lost "
                    "(lost=%d, callbacks=%d, renewal_failed_total=%llu) while its key still "
                    "holds the token on %d node(s)\n", nodes_of(mask), distlock_lock_lost(l),
                    lost_calls, (unsigned long long)stat_of(c, "renewal_failed_total"),
                    rh_count_holding(rc, key, tok));
        fail();
    }
    assert_int_equal(stat_of(c, "lost_total"), 0);
    assert_true(distlock_lock_validity_ms(l) > 0);
    assert_holding_quorum(rc, key, tok, nodes_of(mask));
    assert_fails(distlock_extend(l, 6000), DISTLOCK_EPROTO);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_renewal_refused_one_node(void **state)
{
    renewal_refused(*state, 0x1, "ar:renew1");
}

static void test_renewal_refused_three_nodes(void **state)
{
    renewal_refused(*state, 0x7, "ar:renew3");
}

/* ------------------------------------------------------------ WRONGTYPE */

static void test_wrongtype_one_node(void **state)
{
    rh_cluster *rc = *state;
    set_user(rc, 0x1, FULL_ACL);
    distlock_client *c = user_client(rc, 0x1);
    distlock_lock *l = NULL;
    int64_t fence = 0;

    make_hash(rc, 0, "ar:wt");
    assert_fails(distlock_acquire(c, "ar:wt", 30000, 0, 0, &l), DISTLOCK_EPROTO);
    assert_non_null(strstr(distlock_last_error(), "WRONGTYPE"));
    assert_null(l);
    /* a wait does not wait for a hash to go away: the error at once */
    assert_fails(distlock_acquire(c, "ar:wt", 30000, 20000, 0, &l), DISTLOCK_EPROTO);
    assert_fails(distlock_acquire(c, "ar:wt", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_EPROTO);
    assert_fails(distlock_release_token(c, "ar:wt", "0123456789abcdef0123456789abcdef"),
                 DISTLOCK_EPROTO);
    assert_fails(distlock_extend_token(c, "ar:wt", "0123456789abcdef0123456789abcdef", 30000,
                                       NULL), DISTLOCK_EPROTO);

    /* a held lock whose key was replaced by a hash */
    assert_rc(distlock_acquire(c, "ar:wt2", 30000, 0, 0, &l), DISTLOCK_OK);
    make_hash(rc, 0, "ar:wt2");
    assert_fails(distlock_extend(l, 30000), DISTLOCK_EPROTO);
    assert_int_equal(distlock_lock_lost(l), 0);
    assert_fails(distlock_release(l), DISTLOCK_EPROTO);
    distlock_lock_free(l);

    /* a fence counter of another type */
    make_hash(rc, 0, "{ar:wt3}:fence");
    assert_fails(distlock_acquire(c, "ar:wt3", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_EPROTO);
    assert_fails(distlock_admin_fence(c, "ar:wt3", 0, &fence), DISTLOCK_EPROTO);
    assert_int_equal(rh_count_holding(rc, "ar:wt3", NULL), 0);
    distlock_client_free(c);
}

static void test_wrongtype_three_nodes(void **state)
{
    rh_cluster *rc = *state;
    set_user(rc, 0x7, FULL_ACL);
    distlock_client *c = user_client(rc, 0x7);
    distlock_lock *l = NULL;

    /* a hash on every node */
    for (int i = 0; i < 3; i++)
        make_hash(rc, i, "ar:wt3n");
    assert_fails(distlock_acquire(c, "ar:wt3n", 30000, 0, 0, &l), DISTLOCK_EPROTO);
    assert_fails(distlock_release_token(c, "ar:wt3n", "0123456789abcdef0123456789abcdef"),
                 DISTLOCK_EPROTO);

    /* a hash on one node: a quorum of the others grants */
    make_hash(rc, 2, "ar:wt1of3");
    assert_rc(distlock_acquire(c, "ar:wt1of3", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_extend(l, 30000), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);

    /* held, then replaced by a hash on two nodes: no quorum, no loss */
    assert_rc(distlock_acquire(c, "ar:wt2of3", 30000, 0, 0, &l), DISTLOCK_OK);
    make_hash(rc, 0, "ar:wt2of3");
    make_hash(rc, 1, "ar:wt2of3");
    assert_fails(distlock_extend(l, 30000), DISTLOCK_EPROTO);
    assert_int_equal(distlock_lock_lost(l), 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* ------------------------------------------------------------ one permission missing */

/* Every command the library sends, removed one at a time from an
 * otherwise unrestricted user: each operation answers OK or EPROTO, never
 * "held by another" / "not the owner" on a free key of its own, and never
 * marks the lock lost. */
static const char *const needed[] = {
    "-get", "-set", "-del", "-pexpire", "-pttl", "-exists", "-incr", "-hset", "-hget",
    "-hdel", "-hgetall", "-zadd", "-zrange", "-zrem", "-zrank", "-zscore", "-time",
    "-publish", "-subscribe", "-evalsha", "-eval", "-script", "-client", "-ping", "-wait",
    "-@scripting", "-@string", "-@keyspace", "-@hash", "-@sortedset", "-@pubsub",
};

static int ok_or_refused(int st)
{
    return st == DISTLOCK_OK || st == DISTLOCK_EPROTO;
}

#define CHECK_OP(what, expr) do {                                             \
        int st__ = (expr);                                                    \
        if (!ok_or_refused(st__)) {                                           \
            print_error("user +@all %s, %d node(s): %s = %d (%s): \"%s\"\n",    \
                        rule, n, what, st__, distlock_strerror(st__),         \
                        distlock_last_error());                               \
            fail();                                                           \
        }                                                                     \
    } while (0)

static void each_operation(rh_cluster *rc, unsigned mask, const char *rule)
{
    static const unsigned flags[] = { 0, DISTLOCK_FENCING, DISTLOCK_FAIR, DISTLOCK_REENTRANT };
    int n = nodes_of(mask);
    char rules[256];
    snprintf(rules, sizeof rules, FULL_ACL " %s", rule);
    set_user(rc, mask, rules);
    for (int owner = 0; owner <= 1; owner++) {
        distlock_client *c = user_client(rc, mask);
        assert_rc(distlock_client_set(c, DISTLOCK_OPT_OWNER_INFO, owner), DISTLOCK_OK);
        for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++) {
            char key[64];
            distlock_lock *l = NULL;
            snprintf(key, sizeof key, "ar:one:%d:%zu", owner, f);
            CHECK_OP("acquire", distlock_acquire(c, key, 30000, 0, flags[f], &l));
            if (l) {
                CHECK_OP("extend", distlock_extend(l, 30000));
                assert_int_equal(distlock_lock_lost(l), 0);
                CHECK_OP("release", distlock_release(l));
                assert_int_equal(distlock_lock_lost(l), 0);
                distlock_lock_free(l);
            }
        }
        /* a wait on a free key */
        distlock_lock *l = NULL;
        CHECK_OP("acquire with a wait", distlock_acquire(c, "ar:one:wait", 30000, 300, 0, &l));
        distlock_lock_free(l);
        assert_int_equal(stat_of(c, "lost_total"), 0);
        distlock_client_free(c);
        for (int i = 0; i < rc->n; i++)
            assert_int_equal(rh_flushall(rc, i), 0);
    }
}

static void test_one_permission_missing_one_node(void **state)
{
    for (size_t k = 0; k < sizeof needed / sizeof needed[0]; k++)
        each_operation(*state, 0x1, needed[k]);
}

static void test_one_permission_missing_three_nodes(void **state)
{
    for (size_t k = 0; k < sizeof needed / sizeof needed[0]; k++)
        each_operation(*state, 0x7, needed[k]);
}

/* ------------------------------------------------------------ the documented set */

typedef struct waiter {
    distlock_client *c;
    const char *key;
    int rc;
    long long got_ms;
} waiter;

static void *wait_for(void *arg)
{
    waiter *w = arg;
    distlock_lock *l = NULL;
    w->rc = distlock_acquire(w->c, w->key, 30000, 20000, 0, &l);
    w->got_ms = rh_now_ms();
    distlock_lock_free(l);
    return NULL;
}

static int count_key(const char *key, size_t len, void *arg)
{
    (void)key, (void)len;
    ++*(int *)arg;
    return 0;
}

static long long numsub(rh_cluster *rc, int i, const char *channel)
{
    redisReply *r = rh_command(rc, i, 0, "PUBSUB NUMSUB %s", channel);
    long long v = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_INTEGER)
        v = r->element[1]->integer;
    freeReplyObject(r);
    return v;
}

static void every_feature(rh_cluster *rc, unsigned mask)
{
    int n = nodes_of(mask);
    set_user(rc, mask, MINIMAL_ACL);
    distlock_client *c = user_client_db(rc, mask, 1);
    distlock_lock *l = NULL, *l2 = NULL;
    distlock_holder_info h = { .size = sizeof h };
    int deleted = 0;
    int64_t fence = 0;

    /* plain lock */
    assert_rc(distlock_acquire(c, "ms:plain", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_extend(l, 30000), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "ms:plain", 30000, 0, 0, &l2), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_ENOTOWNER);
    distlock_lock_free(l);

    /* a wait woken by the release's publish: the re-check interval is 60 s,
     * so a waiter that gets the lock within 10 s was woken by pub/sub */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MAX_MS, 60000), DISTLOCK_OK);
    distlock_client *c2 = user_client_db(rc, mask, 1);
    assert_rc(distlock_client_set(c2, DISTLOCK_OPT_RETRY_MIN_MS, 60000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c2, DISTLOCK_OPT_RETRY_MAX_MS, 60000), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "ms:wait", 30000, 0, 0, &l), DISTLOCK_OK);
    waiter w = { c2, "ms:wait", 1, 0 };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_for, &w), 0);
    if (!RH_WAIT_UNTIL(numsub(rc, __builtin_ctz(mask), "distlock:ms:wait") >= 1, 10000)) {
        print_error("the waiter never subscribed to distlock:ms:wait\n");
        fail();
    }
    long long t0 = rh_now_ms();
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    pthread_join(th, NULL);
    assert_rc(w.rc, DISTLOCK_OK);
    assert_true(w.got_ms - t0 < 10000);
    distlock_client_free(c2);

    /* fencing */
    assert_rc(distlock_acquire(c, "ms:fence", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
    int64_t f1 = distlock_lock_fence(l);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_rc(distlock_acquire(c, "ms:fence", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
    assert_true(distlock_lock_fence(l) > f1);
    assert_rc(distlock_admin_fence(c, "ms:fence", 0, &fence), 1);
    assert_true(fence >= distlock_lock_fence(l) - (n > 1 ? 1 : 0));
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);

    /* fair mode: a second fair waiter queues, then gets it in turn */
    assert_rc(distlock_acquire(c, "ms:fair", 30000, 0, DISTLOCK_FAIR, &l), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "ms:fair", 30000, 0, DISTLOCK_FAIR, &l2), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_rc(distlock_acquire(c, "ms:fair", 30000, 1000, DISTLOCK_FAIR, &l2), DISTLOCK_OK);
    assert_rc(distlock_release(l2), DISTLOCK_OK);
    distlock_lock_free(l2);

    /* owner metadata */
    distlock_owner_info info = { .size = sizeof info };
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_OWNER_INFO, 1), DISTLOCK_OK);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_OWNER_LABEL, "acl test"), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "ms:owner", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_extend(l, 30000), DISTLOCK_OK);
    assert_rc(distlock_admin_owner(c, "ms:owner", -1, &info), 1);
    assert_string_equal(info.label, "acl test");
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);

    /* auto-renewal (ttl 3 s: renewed every second, with 2 s to spare) */
    assert_rc(distlock_acquire(c, "ms:renew", 3000, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    if (!RH_WAIT_UNTIL(stat_of(c, "renewal_total") >= 2, 10000)) {
        print_error("not two renewals within 10 s (failed: %llu)\n",
                    (unsigned long long)stat_of(c, "renewal_failed_total"));
        fail();
    }
    assert_int_equal(stat_of(c, "renewal_failed_total"), 0);
    assert_int_equal(distlock_lock_lost(l), 0);

    /* admin: holder (every node, then node 0 alone), scan, force release */
    assert_rc(distlock_admin_holder(c, "ms:renew", -1, &h), 1);
    assert_string_equal(h.token, distlock_lock_token(l));
    assert_int_equal(h.answered, n);
    assert_rc(distlock_admin_holder(c, "ms:renew", 0, &h), 1);
    assert_string_equal(h.token, distlock_lock_token(l));
    unsigned long long cursor = 0;
    int found = 0;
    do
        assert_true(distlock_admin_scan(c, 0, "ms:*", 100, &cursor, count_key, &found) >= 0);
    while (cursor != 0);
    assert_true(found >= 1);
    assert_rc(distlock_admin_force_release(c, "ms:renew", &deleted), DISTLOCK_OK);
    assert_int_equal(deleted, n);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_documented_set_every_feature_one_node(void **state)
{
    every_feature(*state, 0x1);
}

static void test_documented_set_every_feature_three_nodes(void **state)
{
    every_feature(*state, 0x7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_release_refused_then_retried_one_node, heal),
        cmocka_unit_test_setup(test_release_refused_then_retried_three_nodes, heal),
        cmocka_unit_test_setup(test_extend_refused_one_node, heal),
        cmocka_unit_test_setup(test_extend_refused_three_nodes, heal),
        cmocka_unit_test_setup(test_renewal_refused_one_node, heal),
        cmocka_unit_test_setup(test_renewal_refused_three_nodes, heal),
        cmocka_unit_test_setup(test_wrongtype_one_node, heal),
        cmocka_unit_test_setup(test_wrongtype_three_nodes, heal),
        cmocka_unit_test_setup(test_one_permission_missing_one_node, heal),
        cmocka_unit_test_setup(test_one_permission_missing_three_nodes, heal),
        cmocka_unit_test_setup(test_documented_set_every_feature_one_node, heal),
        cmocka_unit_test_setup(test_documented_set_every_feature_three_nodes, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
