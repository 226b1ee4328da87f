/* test_common.h -- shared bits of the cmocka tests (include after cmocka.h). */
#ifndef DISTLOCK_TEST_COMMON_H
#define DISTLOCK_TEST_COMMON_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "distlock.h"
#include "harness/redis_harness.h"

/* Assert a distlock status, printing both codes and this thread's detail. */
#define assert_rc(expr, want) do {                                            \
        int rc__ = (expr), want__ = (want);                                   \
        if (rc__ != want__) {                                                 \
            print_error("%s = %d (%s), expected %d (%s); last_error: \"%s\"\n", \
                        #expr, rc__, distlock_strerror(rc__), want__,         \
                        distlock_strerror(want__), distlock_last_error());    \
            fail();                                                           \
        }                                                                     \
    } while (0)

/* A failing call: the expected code and a non-empty detail message. */
#define assert_fails(expr, want) do {                                         \
        assert_rc(expr, want);                                                \
        if (distlock_last_error()[0] == '\0') {                               \
            print_error("%s failed with an empty distlock_last_error()\n", #expr); \
            fail();                                                           \
        }                                                                     \
    } while (0)

/* `key` holds `token` (NULL: anything) on exactly `want` live nodes, waiting
 * up to 3 s for it: with N > 1 an operation returns as soon as a quorum has
 * answered, while its requests to the other nodes may still be on the way. */
#define assert_holding(rc, key, token, want) do {                             \
        int got__ = -1, want__ = (want);                                      \
        const char *tok__ = (token);                                          \
        if (!RH_WAIT_UNTIL((got__ = rh_count_holding(rc, key, tok__)) == want__, 3000)) { \
            print_error("%s holds %s on %d node(s), expected %d\n", (key),     \
                        tok__ ? tok__ : "anything", got__, want__);           \
            fail();                                                           \
        }                                                                     \
    } while (0)

/* `key` holds `token` on at least a quorum of `n` nodes (n/2+1), waiting up
 * to 3 s: what a grant promises. A fresh client's first round may end at the
 * quorum before a slow node's connection is ready, and that request is then
 * never sent, so "every node" is not a promise. */
#define assert_holding_quorum(rc, key, token, n) do {                         \
        int got__ = -1, need__ = (n) / 2 + 1;                                 \
        if (!RH_WAIT_UNTIL((got__ = rh_count_holding(rc, key, token)) >= need__, 3000)) { \
            print_error("%s holds %s on %d node(s), expected a quorum (%d of %d)\n", \
                        (key), (token) ? (const char *)(token) : "anything", got__, \
                        need__, (n));                                         \
            fail();                                                           \
        }                                                                     \
    } while (0)

/* Commands a server ran that are lock attempts (a plain lock's is a SET
 * NX, the others scripts), from its INFO commandstats reply: what a test
 * counts to see how many attempts its waiters sent. */
static inline long long attempt_commands_in(const redisReply *info)
{
    long long n = 0;
    const char *names[] = { "cmdstat_evalsha:calls=", "cmdstat_eval:calls=",
                            "cmdstat_set:calls=" };
    for (int i = 0; i < 3 && info && info->type == REDIS_REPLY_STRING; i++) {
        const char *p = strstr(info->str, names[i]);
        if (p)
            n += atoll(p + strlen(names[i]));
    }
    return n;
}

/* The same of harness node `node`. */
static inline long long attempt_commands_run(rh_cluster *rc, int node)
{
    redisReply *r = rh_command(rc, node, 0, "INFO commandstats");
    long long n = attempt_commands_in(r);
    if (r)
        freeReplyObject(r);
    return n;
}

/* Subscribers node `node` has on `key`'s release channel (distlock:<key>):
 * a client with a waiter for the key is subscribed there. */
static inline long long key_channel_subscribers(rh_cluster *rc, int node, const char *key)
{
    redisReply *r = rh_command(rc, node, 0, "PUBSUB NUMSUB distlock:%s", key);
    long long n = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? r->element[1]->integer : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

/* 1 under ASan or TSan (GCC and clang spellings). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define TEST_SANITIZED 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#    define TEST_SANITIZED 1
#  endif
#endif
#ifndef TEST_SANITIZED
#  define TEST_SANITIZED 0
#endif

/* Sanitizer builds (DISTLOCK_TEST_SLOW) get wider time bounds. */
static inline long slow_bound(long normal, long slow)
{
    return getenv("DISTLOCK_TEST_SLOW") ? slow : normal;
}

/* Run a command on node i and require a +OK / status reply. */
static inline void node_command_ok(const rh_cluster *rc, int i, const char *fmt, ...)
{
    redisContext *ctx = rh_connect(rc, i, 0);
    assert_non_null(ctx);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    redisFree(ctx);
    if (!r || r->type == REDIS_REPLY_ERROR) {
        print_error("node %d: %s -> %s\n", i, fmt, r ? r->str : "no reply");
        if (r) freeReplyObject(r);
        fail();
    }
    freeReplyObject(r);
}

/* Block until the monotonic time t_ms (rh_now_ms() scale). Only for a
 * scenario's own timing (how long a holder keeps a lock), never to wait for
 * something to happen. */
static inline void sleep_until_ms(long long t_ms)
{
    struct timespec ts = { (time_t)(t_ms / 1000), (long)(t_ms % 1000) * 1000000L };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

/* Nodes where key holds token and has more than min_pttl ms left. */
static inline int count_pttl_above(const rh_cluster *rc, const char *key,
                                   const char *token, long long min_pttl)
{
    int n = 0;
    char buf[512];
    for (int i = 0; i < rc->n; i++) {
        if (rc->node[i].pid <= 0 || rc->node[i].stopped) continue;
        if (rh_get(rc, i, 0, key, buf, sizeof buf) == 1 && strcmp(buf, token) == 0 &&
            rh_pttl(rc, i, 0, key) > min_pttl)
            n++;
    }
    return n;
}

/* Start/stop a cluster of N nodes as the cmocka group state. */
#define DEFINE_GROUP(N)                                                       \
    static int group_setup(void **state) {                                    \
        setvbuf(stdout, NULL, _IOLBF, 0);                                     \
        rh_cluster *rc = rh_start(N);                                         \
        if (!rc) return -1;                                                   \
        *state = rc;                                                          \
        return 0;                                                             \
    }                                                                         \
    static int group_teardown(void **state) {                                 \
        rh_stop_all(*state);                                                  \
        return 0;                                                             \
    }                                                                         \
    /* Per test: every node up, empty, no cached scripts. */                  \
    static int heal(void **state) { return rh_heal(*state) == 0 ? 0 : -1; }

/* A further group of N nodes in the same binary, after DEFINE_GROUP (whose
 * teardown and heal it shares): group_setup_N, for cases that need another
 * number of nodes than the file's main group. */
#define DEFINE_GROUP_SETUP(N)                                                 \
    static int group_setup_##N(void **state) {                                \
        rh_cluster *rc = rh_start(N);                                         \
        if (!rc) return -1;                                                   \
        *state = rc;                                                          \
        return 0;                                                             \
    }

/* New client on the given URI list, with optional short timeouts. */
static inline distlock_client *new_client(const char *uris)
{
    distlock_client *c = NULL;
    int rc = distlock_client_new(uris, &c);
    if (rc != DISTLOCK_OK) {
        print_error("distlock_client_new(%s) = %d: %s\n", uris, rc, distlock_last_error());
        fail();
    }
    assert_non_null(c);
    return c;
}

/* An acquire with a cancel of its own (args->cancel), made on a thread of
 * its own so that the test can fire the cancel while it runs. Fill c, key,
 * ttl_ms, wait_ms and flags; cancelled_call_start(); distlock_cancel_fire(cancel)
 * when the test wants; cancelled_call_join(): rc, l, when it ended and
 * its detail. */
typedef struct cancelled_call {
    distlock_client *c;
    const char *key;
    long ttl_ms, wait_ms;
    unsigned flags;
    distlock_cancel *cancel;
    pthread_t t;
    distlock_lock *l;
    int rc;
    long long ended_ms;
    char detail[512];
} cancelled_call;

static inline void *cancelled_call_main(void *arg)
{
    cancelled_call *a = arg;
    distlock_acquire_args args = { .size = sizeof args, .cancel = a->cancel };
    a->rc = distlock_acquire_with(a->c, a->key, a->ttl_ms, a->wait_ms, a->flags, &args, &a->l);
    a->ended_ms = rh_now_ms();
    snprintf(a->detail, sizeof a->detail, "%s", distlock_last_error());
    return NULL;
}

static inline void cancelled_call_start(cancelled_call *a)
{
    assert_rc(distlock_cancel_new(&a->cancel), DISTLOCK_OK);
    assert_int_equal(pthread_create(&a->t, NULL, cancelled_call_main, a), 0);
}

/* Its end; the cancel freed. */
static inline void cancelled_call_join(cancelled_call *a)
{
    assert_int_equal(pthread_join(a->t, NULL), 0);
    distlock_cancel_free(a->cancel);
    a->cancel = NULL;
}

/* One acquire (ttl 30 s) and release of key, both asserted. */
static inline void lock_and_release(distlock_client *c, const char *key)
{
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, key, 30000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
}

/* Try to acquire key (ttl_ms, no wait) every 200 ms until granted or
 * within_ms have passed, as a caller does while a cluster settles after a
 * failover. Returns the last status (*l is the lock when DISTLOCK_OK);
 * *tries counts the attempts, last gets the last failure's detail. */
static inline int acquire_retrying(distlock_client *c, const char *key, long ttl_ms,
                                   long within_ms, distlock_lock **l, int *tries,
                                   char *last, size_t size)
{
    long long t0 = rh_now_ms();
    int rc = -1;
    *tries = 0;
    while (rh_now_ms() - t0 < within_ms) {
        *l = NULL;
        rc = distlock_acquire(c, key, ttl_ms, 0, 0, l);
        (*tries)++;
        if (rc == DISTLOCK_OK)
            break;
        snprintf(last, size, "%s", distlock_last_error());
        rh_sleep_ms(200);
    }
    return rc;
}

/* ACL SETUSER user reset on >pass ~* &* +@all [rule] on the nodes of rc in
 * mask (bit i: node i); rule NULL: none. */
static inline void acl_set_user(const rh_cluster *rc, unsigned mask, const char *user,
                                const char *pass, const char *rule)
{
    char pw[256];
    snprintf(pw, sizeof pw, ">%s", pass);
    for (int i = 0; i < rc->n; i++) {
        if (!(mask & (1u << i)))
            continue;
        const char *argv[] = { "ACL", "SETUSER", user, "reset", "on", pw, "~*", "&*",
                               "+@all", rule };
        redisContext *ctx = rh_connect(rc, i, 0);
        assert_non_null(ctx);
        redisReply *r = redisCommandArgv(ctx, rule ? 10 : 9, argv, NULL);
        if (r == NULL || r->type != REDIS_REPLY_STATUS) {
            print_error("ACL SETUSER %s on node %d: %s\n", rule ? rule : "", i,
                        r ? r->str : ctx->errstr);
            fail();
        }
        freeReplyObject(r);
        redisFree(ctx);
    }
}

/* A client of the nodes of rc in mask that logs in as user (command
 * timeout 2 s). */
static inline distlock_client *acl_user_client(const rh_cluster *rc, unsigned mask,
                                               const char *user, const char *pass)
{
    char uris[1024];
    size_t o = 0;
    for (int i = 0; i < rc->n; i++)
        if (mask & (1u << i))
            o += (size_t)snprintf(uris + o, sizeof uris - o, "%sredis://%s:%s@127.0.0.1:%d",
                                  o ? "," : "", user, pass, rc->node[i].port);
    distlock_client *c = new_client(uris);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 2000), DISTLOCK_OK);
    return c;
}

/* Default drift for ttl (DISTLOCK_OPT_DRIFT_PPM 10000, DRIFT_MIN_MS 2). */
/* distlock_acquire_with() for an explicit DISTLOCK_REENTRANT owner id. */
static inline int acquire_as(distlock_client *c, const char *key, long ttl_ms, long wait_ms,
                             unsigned flags, const char *owner, distlock_lock **out)
{
    distlock_acquire_args a = { .size = sizeof a, .owner = owner };
    return distlock_acquire_with(c, key, ttl_ms, wait_ms, flags, &a, out);
}

static inline long default_drift(long ttl)
{
    return (long)((long long)ttl * 10000 / 1000000) + 2;
}

/* Fail unless rc is "not acquired": NOTACQUIRED or a negative error. */
#define assert_not_acquired(expr, lockp) do {                                 \
        int r__ = (expr);                                                     \
        if (r__ == DISTLOCK_OK) {                                             \
            print_error("%s acquired, expected a failure\n", #expr);          \
            fail();                                                           \
        }                                                                     \
        assert_true(r__ == DISTLOCK_NOTACQUIRED || r__ < 0);                  \
        if (r__ < 0) assert_true(distlock_last_error()[0] != '\0');           \
        assert_null(*(lockp));                                                \
    } while (0)

/* Timeouts and budgets scale by this under sanitizers/valgrind
 * (DISTLOCK_TEST_SLOW set by tests/run-c-tests.sh). */
static inline long slow_factor(void)
{
    return getenv("DISTLOCK_TEST_SLOW") ? 5 : 1;
}

/* The client's counter `name` (distlock_client_stats), e.g. "renewal_total". */
/* Until c has a connection to every node of rc: a round ends once a quorum
 * answered, and a request still waiting for its new connection is then not
 * sent, so a new client's first lock may be on a quorum only. A test that
 * later counts every node first makes sure each connection is up: a lock of
 * KEY seen on all n nodes (observed, never timed). `n`: the client's nodes,
 * fewer than rc->n for a client of a mask of them. */
static inline void connect_nodes(const rh_cluster *rc, distlock_client *c, const char *key, int n)
{
    for (int i = 0; i < 100; i++) {
        distlock_lock *l = NULL;
        assert_int_equal(distlock_acquire(c, key, 10000, 0, 0, &l), DISTLOCK_OK);
        int all = RH_WAIT_UNTIL(rh_count_holding(rc, key, distlock_lock_token(l)) == n, 500);
        assert_int_equal(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
        if (all) return;
    }
    print_error("%s was never seen on all %d nodes\n", key, n);
    fail();
}

/* connect_nodes for a client of every node of rc. */
static inline void connect_every_node(const rh_cluster *rc, distlock_client *c, const char *key)
{
    connect_nodes(rc, c, key, rc->n);
}

static inline uint64_t client_stat(distlock_client *c, const char *name)
{
    distlock_stat st[256];
    size_t n = 0;
    assert_rc(distlock_client_stats(c, st, 256, &n), DISTLOCK_OK);
    for (size_t k = 0; k < n; k++)
        if (strcmp(st[k].name, name) == 0)
            return st[k].value;
    fail_msg("no stat %s", name);
    return 0;
}

/* Script calls (EVALSHA + EVAL) server i of rc has run so far. */
static inline long script_calls(const rh_cluster *rc, int i)
{
    long total = 0;
    redisReply *r = rh_command(rc, i, 0, "INFO commandstats");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    static const char *const needles[] = { "cmdstat_evalsha:calls=", "cmdstat_eval:calls=" };
    for (int k = 0; k < 2; k++) {
        const char *p = strstr(r->str, needles[k]);
        if (p) total += strtol(p + strlen(needles[k]), NULL, 10);
    }
    freeReplyObject(r);
    return total;
}

/* Like script_calls(), but -1 instead of a failure when node i does not
 * answer: for polling a node that may be paused. */
static inline long long script_calls_or_error(const rh_cluster *rc, int i)
{
    redisReply *r = rh_command(rc, i, 0, "INFO commandstats");
    long long n = 0;
    if (!r || r->type != REDIS_REPLY_STRING) {
        if (r) freeReplyObject(r);
        return -1;
    }
    const char *names[] = { "cmdstat_evalsha:calls=", "cmdstat_eval:calls=" };
    for (int k = 0; k < 2; k++) {
        const char *p = strstr(r->str, names[k]);
        if (p) n += strtoll(p + strlen(names[k]), NULL, 10);
    }
    freeReplyObject(r);
    return n;
}

/* Wait (up to 30 s) until the client's watchdog renewed nk locks `passes`
 * more times after renewal_total was r0; returns renewal_total then. */
static inline uint64_t wait_renewed(distlock_client *c, uint64_t r0, int nk, int passes)
{
    uint64_t want = r0 + (uint64_t)nk * (uint64_t)passes;
    assert_true(RH_WAIT_UNTIL(client_stat(c, "renewal_total") >= want, 30000));
    return client_stat(c, "renewal_total");
}

#endif
