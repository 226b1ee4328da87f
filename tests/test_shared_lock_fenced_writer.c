/* test_shared_lock_fenced_writer.c -- a writer that waits behind read locks
 * with every side key at once: a fence (DISTLOCK_FENCING), owner metadata
 * (DISTLOCK_OPT_OWNER_INFO) and the registry of waiting writers, so the
 * acquire script gets KEYS key, fence, owner, writers and its longest
 * ARGV (owner fields, intent, writer name). Once the last reader goes, the
 * writer holds the key as a plain lock on a quorum of nodes, with its fence
 * written to the key's counter, its owner record under {key}:owner, and no
 * registry left behind; on 1 and 3 nodes. */
#include "test_common.h"

#include <pthread.h>

#define N 3
DEFINE_GROUP(N)

static distlock_client *client_on(const rh_cluster *rc, int n)
{
    char buf[1024];
    return new_client(rh_uris_mask(rc, (1u << n) - 1, buf, sizeof buf));
}

static double zscore(const rh_cluster *rc, int i, const char *key, const char *member)
{
    redisReply *r = rh_command(rc, i, 0, "ZSCORE %s %s", key, member);
    assert_non_null(r);
    double v = r->type == REDIS_REPLY_STRING ? atof(r->str) : -1;
    freeReplyObject(r);
    return v;
}

static long long zcard(const rh_cluster *rc, int i, const char *key)
{
    redisReply *r = rh_command(rc, i, 0, "ZCARD %s", key);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

/* nodes (of the first n) where the writer's intent and its registry entry stand */
static int intent_nodes(const rh_cluster *rc, int n, const char *key, const char *wk)
{
    int got = 0;
    for (int i = 0; i < n; i++)
        got += zscore(rc, i, key, "__write__") > 0 && zcard(rc, i, wk) == 1;
    return got;
}

/* reply->str of a command that answers a string, copied; "" otherwise */
static void string_reply(const rh_cluster *rc, int i, char *buf, size_t size, const char *fmt,
                         const char *a, const char *b)
{
    redisReply *r = rh_command(rc, i, 0, fmt, a, b);
    assert_non_null(r);
    snprintf(buf, size, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

typedef struct writer_arg { distlock_client *c; const char *key; int rc; distlock_lock *l; } writer_arg;

static void *fenced_writer(void *arg)
{
    writer_arg *a = arg;
    a->rc = distlock_acquire(a->c, a->key, 10000, 8000, DISTLOCK_FENCING, &a->l);
    return NULL;
}

static void test_fenced_writer_with_owner_info_waits_then_holds(void **state)
{
    rh_cluster *rc = *state;
    for (int nodes = 1; nodes <= 3; nodes += 2) {
        const char *key = nodes == 1 ? "fw1" : "fw3";
        distlock_client *c = client_on(rc, nodes), *wc = client_on(rc, nodes);
        assert_rc(distlock_client_set(wc, DISTLOCK_OPT_OWNER_INFO, 1), DISTLOCK_OK);
        distlock_lock *r = NULL, *x = NULL;
        assert_rc(distlock_acquire(c, key, 10000, 0, DISTLOCK_SHARED, &r), DISTLOCK_OK);
        writer_arg wa = { .c = wc, .key = key, .rc = -99 };
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, fenced_writer, &wa), 0);
        char wk[64], ok[64], fk[64], buf[128];
        snprintf(wk, sizeof wk, "{%s}:writers", key);
        snprintf(ok, sizeof ok, "{%s}:owner", key);
        snprintf(fk, sizeof fk, "{%s}:fence", key);
        /* waiting: its intent stands and it is in the registry */
        /* (on a quorum: the writer's fresh client may not reach the last node) */
        assert_true(RH_WAIT_UNTIL(intent_nodes(rc, nodes, key, wk) >= nodes / 2 + 1, 5000));
        assert_rc(distlock_acquire(c, key, 10000, 0, DISTLOCK_SHARED, &x), DISTLOCK_NOTACQUIRED);
        assert_rc(distlock_release(r), DISTLOCK_OK);
        pthread_join(t, NULL);
        printf("# %d node(s): fenced writer with owner info: %s (%s), fence %lld\n", nodes,
               distlock_strerror(wa.rc), wa.rc == DISTLOCK_OK ? "" : distlock_last_error(),
               wa.l ? (long long)distlock_lock_fence(wa.l) : -1LL);
        assert_rc(wa.rc, DISTLOCK_OK);
        long long fence = distlock_lock_fence(wa.l);
        assert_true(fence >= 1);
        const char *tok = distlock_lock_token(wa.l);
        /* a grant needs a quorum, not every node: the round may end before
         * the last node answers; each node that holds it holds all of it */
        int held = 0;
        for (int i = 0; i < nodes; i++) {
            if (rh_get(rc, i, 0, key, buf, sizeof buf) != 1 || strcmp(buf, tok) != 0)
                continue;
            held++;
            string_reply(rc, i, buf, sizeof buf, "HGET %s %s", ok, "token");
            assert_string_equal(buf, tok);
            assert_true(rh_pttl(rc, i, 0, ok) > 0);
            string_reply(rc, i, buf, sizeof buf, "GET %s%s", fk, "");
            assert_true(atoll(buf) >= fence);
            assert_int_equal(rh_pttl(rc, i, 0, wk), -2);  /* no registry left */
        }
        assert_true(held >= nodes / 2 + 1);
        /* held as a lock: readers refused, then in after its release */
        assert_rc(distlock_acquire(c, key, 10000, 0, DISTLOCK_SHARED, &x), DISTLOCK_NOTACQUIRED);
        assert_rc(distlock_release(wa.l), DISTLOCK_OK);
        assert_rc(distlock_acquire(c, key, 10000, 0, DISTLOCK_SHARED, &x), DISTLOCK_OK);
        distlock_lock_free(x);
        distlock_lock_free(wa.l);
        distlock_lock_free(r);
        distlock_client_free(wc);
        distlock_client_free(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_fenced_writer_with_owner_info_waits_then_holds, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
