/* test_semaphore.c -- distlock_semaphore_acquire(): permits with expiring
 * leases, on 1 node and on N independent nodes (a permit needs
 * floor(N*P/(P+1)) + 1 grants), against real redis-server processes.
 *   - the wire format (docs/semaphores.md): a zset of tokens scored by
 *     their expiry, the marker `__distlock_semaphore__` scored P;
 *   - never P + 1 holders: threads counting concurrent holders, on 1 and
 *     5 nodes; and an adversarial schedule on 5 nodes, P = 3, where a
 *     per-node quorum (3) would admit 5 holders;
 *   - release / extend / lost as for a lock; AUTO_RENEW renews a permit;
 *   - a release wakes a waiter at once; a SIGKILLed holder's permit comes
 *     back after its TTL; a node down, paused or restarted empty;
 *   - bad input and keys of the other kind: EINVAL / EPROTO, never a grant. */
#include "test_common.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 5
DEFINE_GROUP(N)

/* A client on the first n nodes of the group. */
static distlock_client *client_on(const rh_cluster *rc, int n)
{
    char buf[1024];
    return new_client(rh_uris_mask(rc, (1u << n) - 1, buf, sizeof buf));
}

static long long zcard(const rh_cluster *rc, int i, const char *key)
{
    redisReply *r = rh_command(rc, i, 0, "ZCARD %s", key);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

/* The score of member on node i, -1 if none. */
static double zscore(const rh_cluster *rc, int i, const char *key, const char *member)
{
    redisReply *r = rh_command(rc, i, 0, "ZSCORE %s %s", key, member);
    assert_non_null(r);
    double v = r->type == REDIS_REPLY_STRING ? atof(r->str) : -1;
    freeReplyObject(r);
    return v;
}

static long long epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Nodes among the first n where token's lease in key has not ended. */
static int nodes_leasing(const rh_cluster *rc, int n, const char *key, const char *token)
{
    int got = 0;
    for (int i = 0; i < n; i++)
        got += zscore(rc, i, key, token) > epoch_ms();
    return got;
}

static void test_permits_on_one_node(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_on(rc, 1);
    distlock_lock *a = NULL, *b = NULL, *x = NULL;
    assert_rc(distlock_semaphore_acquire(c, "sem1", 2, 10000, 0, 0, NULL, &a), DISTLOCK_OK);
    assert_rc(distlock_semaphore_acquire(c, "sem1", 2, 10000, 0, 0, NULL, &b), DISTLOCK_OK);
    assert_rc(distlock_semaphore_acquire(c, "sem1", 2, 10000, 0, 0, NULL, &x),
              DISTLOCK_NOTACQUIRED);
    assert_null(x);

    /* the wire format: tokens scored by their expiry (ms since the epoch),
     * the marker scored P, the key expiring with the last permit */
    assert_int_equal(zcard(rc, 0, "sem1"), 3);
    assert_true(zscore(rc, 0, "sem1", "__distlock_semaphore__") == 2);
    double s = zscore(rc, 0, "sem1", distlock_lock_token(a));
    long long now = epoch_ms();
    assert_true(s > now + 8000 && s <= now + 10100);
    long long pttl = rh_pttl(rc, 0, 0, "sem1");
    assert_true(pttl > 8000 && pttl <= 10000);
    assert_string_equal(distlock_lock_key(a), "sem1");
    assert_true(distlock_lock_validity_ms(a) > 8000);

    /* a release frees a permit; release and extend answer as for a lock */
    assert_rc(distlock_release(a), DISTLOCK_OK);
    assert_true(zscore(rc, 0, "sem1", distlock_lock_token(a)) < 0);
    assert_fails(distlock_release(a), DISTLOCK_ENOTOWNER);
    assert_fails(distlock_extend(a, 5000), DISTLOCK_ENOTOWNER);
    assert_rc(distlock_semaphore_acquire(c, "sem1", 2, 10000, 0, 0, NULL, &x), DISTLOCK_OK);
    assert_rc(distlock_extend(b, 30000), DISTLOCK_OK);
    assert_true(zscore(rc, 0, "sem1", distlock_lock_token(b)) > epoch_ms() + 25000);
    assert_true(rh_pttl(rc, 0, 0, "sem1") > 25000);
    assert_rc(distlock_release(b), DISTLOCK_OK);
    assert_rc(distlock_release(x), DISTLOCK_OK);
    /* the last permit gone: the key goes too */
    assert_int_equal(zcard(rc, 0, "sem1"), 0);
    distlock_lock_free(a);
    distlock_lock_free(b);
    distlock_lock_free(x);

    /* an expired permit: not ours any more (as an expired lock) */
    assert_rc(distlock_semaphore_acquire(c, "sem1", 1, 300, 0, 0, NULL, &a), DISTLOCK_OK);
    assert_true(RH_WAIT_UNTIL(distlock_lock_validity_ms(a) == 0, 3000));
    sleep_until_ms(rh_now_ms() + 400);  /* the server's lease ends after ours */
    assert_fails(distlock_extend(a, 5000), DISTLOCK_ENOTOWNER);
    assert_rc(distlock_semaphore_acquire(c, "sem1", 1, 10000, 0, 0, NULL, &b), DISTLOCK_OK);
    distlock_lock_free(b);
    distlock_lock_free(a);
    distlock_client_free(c);
}

/* P may change between acquires: each acquire admits while fewer than its
 * own P are held, so a smaller P admits no one new until enough permits
 * are released, and a larger one admits more at once. */
static void test_permits_changed_between_acquires(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_on(rc, 1);
    distlock_lock *h[3] = { 0 }, *x = NULL, *y = NULL;
    for (int i = 0; i < 3; i++)
        assert_rc(distlock_semaphore_acquire(c, "sem:resize", 3, 10000, 0, 0, NULL, &h[i]),
                  DISTLOCK_OK);
    assert_rc(distlock_semaphore_acquire(c, "sem:resize", 2, 10000, 0, 0, NULL, &x),
              DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_release(h[0]), DISTLOCK_OK);  /* 2 held: still not under 2 */
    assert_rc(distlock_semaphore_acquire(c, "sem:resize", 2, 10000, 0, 0, NULL, &x),
              DISTLOCK_NOTACQUIRED);
    assert_null(x);
    assert_rc(distlock_release(h[1]), DISTLOCK_OK);  /* 1 held */
    assert_rc(distlock_semaphore_acquire(c, "sem:resize", 2, 10000, 0, 0, NULL, &x),
              DISTLOCK_OK);
    assert_true(zscore(rc, 0, "sem:resize", "__distlock_semaphore__") == 2);
    assert_rc(distlock_semaphore_acquire(c, "sem:resize", 2, 10000, 0, 0, NULL, &y),
              DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_semaphore_acquire(c, "sem:resize", 3, 10000, 0, 0, NULL, &y),
              DISTLOCK_OK);  /* a larger P admits a third again */
    assert_true(zscore(rc, 0, "sem:resize", "__distlock_semaphore__") == 3);
    distlock_lock_free(y);
    distlock_lock_free(x);
    for (int i = 0; i < 3; i++)
        distlock_lock_free(h[i]);
    distlock_client_free(c);
}

static void test_bad_input_and_other_kinds(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_on(rc, 1);
    distlock_lock *l = NULL, *w = NULL;
    assert_fails(distlock_semaphore_acquire(c, "semb", 0, 1000, 0, 0, NULL, &l), DISTLOCK_EINVAL);
    assert_non_null(strstr(distlock_last_error(), "permits"));
    assert_fails(distlock_semaphore_acquire(c, "semb", -5, 1000, 0, 0, NULL, &l),
                 DISTLOCK_EINVAL);
    assert_fails(distlock_semaphore_acquire(c, "semb", DISTLOCK_PERMITS_MAX + 1, 1000, 0, 0,
                                            NULL, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_semaphore_acquire(c, "semb", 2, 1000, 0, DISTLOCK_FENCING, NULL, &l),
                 DISTLOCK_EINVAL);
    assert_fails(distlock_semaphore_acquire(c, "semb", 2, 1000, 0, DISTLOCK_SHARED, NULL, &l),
                 DISTLOCK_EINVAL);
    distlock_acquire_args args = { .size = sizeof args, .owner = "me" };
    assert_fails(distlock_semaphore_acquire(c, "semb", 2, 1000, 0, 0, &args, &l),
                 DISTLOCK_EINVAL);
    assert_fails(distlock_semaphore_acquire(NULL, "semb", 2, 1000, 0, 0, NULL, &l),
                 DISTLOCK_EINVAL);
    assert_fails(distlock_semaphore_acquire(c, "", 2, 1000, 0, 0, NULL, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_semaphore_acquire(c, "semb", 2, 0, 0, 0, NULL, &l), DISTLOCK_EINVAL);
    assert_null(l);
    assert_int_equal(zcard(rc, 0, "semb"), 0);
    /* the largest P is fine */
    assert_rc(distlock_semaphore_acquire(c, "semb", DISTLOCK_PERMITS_MAX, 1000, 0, 0, NULL, &l),
              DISTLOCK_OK);
    distlock_lock_free(l);
    l = NULL;

    /* a semaphore on a lock key, a lock or a reader on a semaphore key,
     * a semaphore on read locks: EPROTO naming the kind, nothing written */
    assert_rc(distlock_acquire(c, "kind:lock", 10000, 0, 0, &w), DISTLOCK_OK);
    assert_fails(distlock_semaphore_acquire(c, "kind:lock", 3, 1000, 0, 0, NULL, &l),
                 DISTLOCK_EPROTO);
    assert_non_null(strstr(distlock_last_error(), "holds a lock, not a semaphore"));
    assert_fails(distlock_semaphore_acquire(c, "kind:lock", 3, 1000, 500, 0, NULL, &l),
                 DISTLOCK_EPROTO);
    assert_null(l);
    char buf[64];
    assert_int_equal(rh_get(rc, 0, 0, "kind:lock", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(w));
    distlock_lock_free(w);

    assert_rc(distlock_semaphore_acquire(c, "kind:sem", 3, 10000, 0, 0, NULL, &l), DISTLOCK_OK);
    assert_fails(distlock_acquire(c, "kind:sem", 1000, 0, 0, &w), DISTLOCK_EPROTO);
    assert_non_null(strstr(distlock_last_error(), "is a semaphore, not a lock"));
    assert_fails(distlock_acquire(c, "kind:sem", 1000, 0, DISTLOCK_FENCING, &w), DISTLOCK_EPROTO);
    assert_fails(distlock_acquire(c, "kind:sem", 1000, 300, 0, &w), DISTLOCK_EPROTO);
    assert_fails(distlock_acquire(c, "kind:sem", 1000, 0, DISTLOCK_SHARED, &w), DISTLOCK_EPROTO);
    assert_non_null(strstr(distlock_last_error(), "is a semaphore, not a lock"));
    assert_null(w);
    assert_int_equal(zcard(rc, 0, "kind:sem"), 2);
    distlock_lock_free(l);
    l = NULL;

    assert_rc(distlock_acquire(c, "kind:read", 10000, 0, DISTLOCK_SHARED, &w), DISTLOCK_OK);
    assert_fails(distlock_semaphore_acquire(c, "kind:read", 3, 1000, 0, 0, NULL, &l),
                 DISTLOCK_EPROTO);
    assert_non_null(strstr(distlock_last_error(), "holds read locks, not a semaphore"));
    assert_int_equal(zcard(rc, 0, "kind:read"), 1);
    distlock_lock_free(w);

    /* a value of another type: EPROTO, never a crash */
    node_command_ok(rc, 0, "HSET kind:hash f v");
    assert_fails(distlock_semaphore_acquire(c, "kind:hash", 3, 1000, 0, 0, NULL, &w),
                 DISTLOCK_EPROTO);
    distlock_client_free(c);
}

/* ------------------------------------------------------------ contention */

typedef struct crowd {
    distlock_client *c;
    const char *key;
    long permits;
    int rounds;
    atomic_int inside, most, granted, errors;
} crowd;

static void *crowd_member(void *arg)
{
    crowd *cr = arg;
    for (int i = 0; i < cr->rounds; i++) {
        distlock_lock *l = NULL;
        int rc = distlock_semaphore_acquire(cr->c, cr->key, cr->permits, 5000, 20000, 0, NULL, &l);
        if (rc != DISTLOCK_OK) {
            print_error("acquire: %d %s\n", rc, distlock_last_error());
            atomic_fetch_add(&cr->errors, 1);
            continue;
        }
        int now = atomic_fetch_add(&cr->inside, 1) + 1;
        int m = atomic_load(&cr->most);
        while (now > m && !atomic_compare_exchange_weak(&cr->most, &m, now)) {}
        atomic_fetch_add(&cr->granted, 1);
        sleep_until_ms(rh_now_ms() + 3);  /* hold it a moment (the scenario) */
        atomic_fetch_sub(&cr->inside, 1);  /* before the release: never counted late */
        if (distlock_release(l) != DISTLOCK_OK)
            atomic_fetch_add(&cr->errors, 1);
        distlock_lock_free(l);
    }
    return NULL;
}

static void contend(rh_cluster *rc, int nodes, long permits, int threads, int rounds)
{
    distlock_client *c = client_on(rc, nodes);
    crowd cr = { .c = c, .key = "sem:crowd", .permits = permits, .rounds = rounds };
    pthread_t t[16];
    for (int i = 0; i < threads; i++)
        assert_int_equal(pthread_create(&t[i], NULL, crowd_member, &cr), 0);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    printf("# %d node(s), P=%ld, %d threads: %d grants, at most %d holders at once\n", nodes,
           permits, threads, atomic_load(&cr.granted), atomic_load(&cr.most));
    assert_int_equal(atomic_load(&cr.errors), 0);
    assert_int_equal(atomic_load(&cr.granted), threads * rounds);
    assert_true(atomic_load(&cr.most) <= permits);
    assert_true(atomic_load(&cr.most) >= 2);  /* the permits were shared */
    distlock_client_free(c);
}

static void test_never_more_than_p_holders_one_node(void **state)
{
    contend(*state, 1, 3, 8, 15);
}

static void test_never_more_than_p_holders_five_nodes(void **state)
{
    contend(*state, 5, 3, 8, 8);
}

/* ------------------------------------------------------------ the N-node rule */

/* Fill key on node i with 3 foreign live permits (a semaphore of 3): that
 * node grants nothing now. */
static void fill(rh_cluster *rc, int i, const char *key)
{
    long long until = epoch_ms() + 60000;
    node_command_ok(rc, i, "ZADD %s 3 __distlock_semaphore__ %lld f1 %lld f2 %lld f3", key,
                    until, until, until);
}

/* Live tokens (scored above the marker) of key on node i. */
static long long live_tokens(const rh_cluster *rc, int i, const char *key)
{
    redisReply *r = rh_command(rc, i, 0, "ZCOUNT %s (1000000 +inf", key);
    assert_non_null(r);
    long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

static void unfill(rh_cluster *rc, int i, const char *key)
{
    redisReply *r = rh_command(rc, i, 0, "ZREM %s f1 f2 f3", key);
    assert_non_null(r);
    freeReplyObject(r);
}

/* 5 nodes, P = 3. Holder j may reach only nodes j, j+1, j+2 (the two
 * others full for its attempt). With a per-node quorum (3 of 5), all five
 * would be granted: every node then carries exactly 3 permits, and five
 * holders share a semaphore of three. The rule asks 4 grants of 5: none of
 * those attempts wins; and holders that can reach 4 nodes stop at 3. */
static void test_five_nodes_three_permits_needs_four_grants(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_on(rc, 5);
    distlock_lock *l[10] = { 0 };
    int held = 0;
    for (int j = 0; j < 5; j++) {
        fill(rc, (j + 3) % 5, "sem:rule");
        fill(rc, (j + 4) % 5, "sem:rule");
        int r = distlock_semaphore_acquire(c, "sem:rule", 3, 30000, 0, 0, NULL, &l[held]);
        unfill(rc, (j + 3) % 5, "sem:rule");
        unfill(rc, (j + 4) % 5, "sem:rule");
        if (r == DISTLOCK_OK)
            held++;
        else
            assert_rc(r, DISTLOCK_NOTACQUIRED);
    }
    printf("# 5 nodes, P=3, each holder on 3 nodes: %d holders\n", held);
    assert_true(held <= 3);
    /* a refused attempt undid its grants: no live token of ours anywhere */
    for (int i = 0; i < 5; i++)
        assert_int_equal(live_tokens(rc, i, "sem:rule"), held);
    /* each next one reaches 4 nodes (one full): 3 holders, not a 4th */
    for (int j = 0; j < 5; j++) {
        fill(rc, j, "sem:rule");
        int r = distlock_semaphore_acquire(c, "sem:rule", 3, 30000, 0, 0, NULL, &l[held]);
        unfill(rc, j, "sem:rule");
        if (r == DISTLOCK_OK)
            held++;
        else
            assert_rc(r, DISTLOCK_NOTACQUIRED);
    }
    printf("# then each on 4 nodes: %d holders\n", held);
    assert_int_equal(held, 3);
    for (int i = 0; i < held; i++)
        distlock_lock_free(l[i]);
    distlock_client_free(c);
}

/* One node down: N=5, P=3 needs 4, so one may fail; two may not. A node
 * paused answers nothing: the same. A node restarted empty gives its
 * permits again (the weaker bound of docs/semaphores.md); here the others
 * still refuse, so no 4th holder. */
static void test_node_down_paused_restarted(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_on(rc, 5);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 300), DISTLOCK_OK);
    distlock_lock *l[4] = { 0 }, *x = NULL;
    assert_int_equal(rh_kill(rc, 4), 0);
    for (int i = 0; i < 3; i++)
        assert_rc(distlock_semaphore_acquire(c, "sem:down", 3, 30000, 0, 0, NULL, &l[i]),
                  DISTLOCK_OK);
    assert_rc(distlock_semaphore_acquire(c, "sem:down", 3, 30000, 0, 0, NULL, &x),
              DISTLOCK_NOTACQUIRED);
    assert_int_equal(rh_restart(rc, 4), 0);  /* back, empty */
    assert_rc(distlock_semaphore_acquire(c, "sem:down", 3, 30000, 0, 0, NULL, &x),
              DISTLOCK_NOTACQUIRED);
    assert_null(x);
    assert_rc(distlock_release(l[0]), DISTLOCK_OK);
    /* paused: four answer, enough */
    assert_int_equal(rh_pause(rc, 1), 0);
    int r = distlock_semaphore_acquire(c, "sem:down", 3, 30000, 0, 0, NULL, &l[3]);
    assert_int_equal(rh_resume(rc, 1), 0);
    assert_rc(r, DISTLOCK_OK);
    /* two down: a permit cannot be had, nor its release confirmed */
    assert_rc(distlock_release(l[1]), DISTLOCK_OK);
    assert_int_equal(rh_kill(rc, 3), 0);
    assert_int_equal(rh_kill(rc, 4), 0);
    r = distlock_semaphore_acquire(c, "sem:down", 3, 30000, 0, 0, NULL, &x);
    assert_true(r == DISTLOCK_NOTACQUIRED || r == DISTLOCK_ENOQUORUM);
    assert_null(x);
    assert_fails(distlock_release(l[2]), DISTLOCK_ENOQUORUM);
    for (int i = 0; i < 4; i++)
        distlock_lock_free(l[i]);
    distlock_client_free(c);
}

/* A full node alone rules a permit out when it needs every node (N=3,
 * P=2: k=3): that is "held", also while another node has not answered yet
 * (paused: the round ends on node 0's answer, before node 2's connection
 * is ready), so a waiting acquire waits on instead of failing. */
static void test_full_node_is_held_while_another_is_silent(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_on(rc, 3);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 300), DISTLOCK_OK);
    long long exp = epoch_ms() + 60000;
    node_command_ok(rc, 0, "ZADD %s 2 __distlock_semaphore__ %lld f1 %lld f2", "sem:fullnode",
                    exp, exp);
    assert_int_equal(rh_pause(rc, 2), 0);
    distlock_lock *x = NULL;
    int r = distlock_semaphore_acquire(c, "sem:fullnode", 2, 30000, 0, 0, NULL, &x);
    printf("# try once, node 0 full, node 2 paused: %s (%s)\n", distlock_strerror(r),
           distlock_last_error());
    assert_rc(r, DISTLOCK_NOTACQUIRED);
    assert_null(x);
    /* once node 2 is known silent, its failure alone rules k = 3 out: that
     * is "unreachable" (ENOQUORUM) as well, the order of the answers picks
     * which of the two true statements a round makes; with every node up
     * again a waiting acquire waits for the full node and says "held" */
    assert_int_equal(rh_resume(rc, 2), 0);
    r = distlock_semaphore_acquire(c, "sem:fullnode", 2, 30000, 400, 0, NULL, &x);
    assert_rc(r, DISTLOCK_NOTACQUIRED);
    assert_null(x);
    assert_int_equal(zcard(rc, 1, "sem:fullnode"), 0);  /* node 1's grants were undone */
    distlock_client_free(c);
}

/* ------------------------------------------------------------ waiting */

/* Subscribers of channel on node 0. */
static long long numsub(const rh_cluster *rc, const char *channel)
{
    redisReply *r = rh_command(rc, 0, 0, "PUBSUB NUMSUB %s", channel);
    long long v = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_INTEGER)
        v = r->element[1]->integer;
    if (r)
        freeReplyObject(r);
    return v;
}

/* Scripts run on node 0 so far (EVALSHA and EVAL calls). */
static long long script_runs(const rh_cluster *rc)
{
    redisReply *r = rh_command(rc, 0, 0, "INFO commandstats");
    long long n = 0;
    if (r && r->type == REDIS_REPLY_STRING) {
        const char *p;
        if ((p = strstr(r->str, "cmdstat_evalsha:calls=")))
            n += atoll(p + 22);
        if ((p = strstr(r->str, "cmdstat_eval:calls=")))
            n += atoll(p + 19);
    }
    if (r)
        freeReplyObject(r);
    return n;
}

typedef struct waiter { distlock_client *c; long long got_ms; int rc; distlock_lock *l; } waiter;

static void *wait_permit(void *arg)
{
    waiter *w = arg;
    w->rc = distlock_semaphore_acquire(w->c, "sem:wake", 1, 10000, 20000, 0, NULL, &w->l);
    w->got_ms = rh_now_ms();
    return NULL;
}

static void test_release_wakes_waiter(void **state)
{
    rh_cluster *rc = *state;
    for (int nodes = 1; nodes <= 3; nodes += 2) {
        distlock_client *c = client_on(rc, nodes), *c2 = client_on(rc, nodes);
        /* its re-checks far apart: only the release's message wakes it soon */
        assert_rc(distlock_client_set(c2, DISTLOCK_OPT_RETRY_MIN_MS, 5000), DISTLOCK_OK);
        assert_rc(distlock_client_set(c2, DISTLOCK_OPT_RETRY_MAX_MS, 5000), DISTLOCK_OK);
        distlock_lock *l = NULL;
        assert_rc(distlock_semaphore_acquire(c, "sem:wake", 1, 10000, 0, 0, NULL, &l),
                  DISTLOCK_OK);
        long long runs0 = script_runs(rc);
        waiter w = { .c = c2 };
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, wait_permit, &w), 0);
        /* the waiter has subscribed to the key's channel, and has been
         * refused by node 0 after that (its first try, then the one after
         * subscribing): it is going to sleep */
        assert_true(RH_WAIT_UNTIL(numsub(rc, "distlock:sem:wake") >= 1 &&
                                  script_runs(rc) >= runs0 + 2, 5000));
        long long t0 = rh_now_ms();
        assert_rc(distlock_release(l), DISTLOCK_OK);
        pthread_join(t, NULL);
        assert_rc(w.rc, DISTLOCK_OK);
        long long ms = w.got_ms - t0;
        printf("# %d node(s): release -> waiter granted in %lld ms\n", nodes, ms);
        assert_true(ms < slow_bound(250, 1000));  /* not its 10 s ttl, nor a backoff */
        distlock_lock_free(w.l);
        distlock_lock_free(l);
        distlock_client_free(c);
        distlock_client_free(c2);
    }
}

/* A holder SIGKILLed: its permit comes back when its TTL ends. */
static void test_killed_holder_permit_comes_back(void **state)
{
    rh_cluster *rc = *state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char buf[1024];
        distlock_client *c = NULL;
        distlock_lock *l = NULL;
        if (distlock_client_new(rh_uris_mask(rc, 7, buf, sizeof buf), &c) != DISTLOCK_OK ||
            distlock_semaphore_acquire(c, "sem:kill", 1, 1500, 0, 0, NULL, &l) != DISTLOCK_OK)
            _exit(1);
        (void)!write(p[1], "k", 1);
        for (;;)
            pause();
    }
    close(p[1]);
    char ch;
    assert_int_equal(read(p[0], &ch, 1), 1);
    close(p[0]);
    long long t0 = rh_now_ms();
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    distlock_client *c = client_on(rc, 3);
    distlock_lock *l = NULL;
    assert_rc(distlock_semaphore_acquire(c, "sem:kill", 1, 5000, 0, 0, NULL, &l),
              DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_semaphore_acquire(c, "sem:kill", 1, 5000, 10000, 0, NULL, &l),
              DISTLOCK_OK);
    long long ms = rh_now_ms() - t0;
    printf("# a killed holder's permit (ttl 1500 ms) came back after %lld ms\n", ms);
    assert_true(ms >= 1000 && ms < 1500 + slow_bound(1500, 4000));
    distlock_lock_free(l);
    distlock_client_free(c);
}

typedef struct cancel_arg { distlock_client *c; distlock_cancel *cancel; int rc; } cancel_arg;

static void *wait_cancellable(void *arg)
{
    cancel_arg *a = arg;
    distlock_lock *l = NULL;
    distlock_acquire_args args = { .size = sizeof args, .cancel = a->cancel };
    a->rc = distlock_semaphore_acquire(a->c, "sem:cancel", 1, 10000, DISTLOCK_WAIT_FOREVER, 0,
                                       &args, &l);
    distlock_lock_free(l);
    return NULL;
}

/* A waiting permit is cancelled by its own cancel: ECANCELED, nothing held.
 * The holder's permit is on every node (its client connects each first: a
 * fresh client's first round may end at the grants it needs, before the
 * last connection is ready, and that request is never sent), so every node
 * must show the holder's token and nothing of the waiter's. */
static void test_cancel_waiting_permit(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_on(rc, 3), *wc = client_on(rc, 3);
    connect_nodes(rc, c, "sem:cancel:connect", 3);
    distlock_lock *l = NULL;
    assert_rc(distlock_semaphore_acquire(c, "sem:cancel", 1, 10000, 0, 0, NULL, &l), DISTLOCK_OK);
    /* the round returned at its grants: the last node's may still be on its way */
    assert_true(RH_WAIT_UNTIL(nodes_leasing(rc, 3, "sem:cancel", distlock_lock_token(l)) == 3,
                              3000));
    cancel_arg a = { .c = wc, .rc = -99 };
    assert_rc(distlock_cancel_new(&a.cancel), DISTLOCK_OK);
    long long runs0 = script_runs(rc);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_cancellable, &a), 0);
    assert_true(RH_WAIT_UNTIL(script_runs(rc) >= runs0 + 2, 5000));
    long long t0 = rh_now_ms();
    assert_rc(distlock_cancel_fire(a.cancel), DISTLOCK_OK);
    pthread_join(t, NULL);
    printf("# a waiting permit cancelled: returned in %lld ms\n", rh_now_ms() - t0);
    assert_rc(a.rc, DISTLOCK_ECANCELED);
    for (int i = 0; i < 3; i++)
        assert_int_equal(live_tokens(rc, i, "sem:cancel"), 1);  /* the holder's only */
    distlock_cancel_free(a.cancel);
    distlock_lock_free(l);
    distlock_client_free(c);
    distlock_client_free(wc);
}

static void test_auto_renew_keeps_permit(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_on(rc, 3), *c2 = client_on(rc, 3);
    distlock_lock *l = NULL, *x = NULL;
    assert_rc(distlock_semaphore_acquire(c, "sem:renew", 1, 900, 0, DISTLOCK_AUTO_RENEW, NULL,
                                         &l), DISTLOCK_OK);
    sleep_until_ms(rh_now_ms() + 2500);  /* the scenario: held past 2 ttls */
    assert_int_equal(distlock_lock_lost(l), 0);
    assert_true(distlock_lock_validity_ms(l) > 0);
    assert_rc(distlock_semaphore_acquire(c2, "sem:renew", 1, 900, 0, 0, NULL, &x),
              DISTLOCK_NOTACQUIRED);
    /* renewed past 2 ttls on the grants a permit needs (2 of 3), which is
     * what a grant promises: a fresh client's first round may end there,
     * before its last connection is ready, and that node never had it */
    int renewed = nodes_leasing(rc, 3, "sem:renew", distlock_lock_token(l));
    printf("# a 1-permit lease on 3 nodes, held 2500 ms (ttl 900): live on %d node(s)\n",
           renewed);
    assert_true(renewed >= 2);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_rc(distlock_semaphore_acquire(c2, "sem:renew", 1, 900, 0, 0, NULL, &x), DISTLOCK_OK);
    distlock_lock_free(x);
    distlock_lock_free(l);
    distlock_client_free(c);
    distlock_client_free(c2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_permits_on_one_node, heal),
        cmocka_unit_test_setup(test_permits_changed_between_acquires, heal),
        cmocka_unit_test_setup(test_bad_input_and_other_kinds, heal),
        cmocka_unit_test_setup(test_never_more_than_p_holders_one_node, heal),
        cmocka_unit_test_setup(test_never_more_than_p_holders_five_nodes, heal),
        cmocka_unit_test_setup(test_five_nodes_three_permits_needs_four_grants, heal),
        cmocka_unit_test_setup(test_node_down_paused_restarted, heal),
        cmocka_unit_test_setup(test_full_node_is_held_while_another_is_silent, heal),
        cmocka_unit_test_setup(test_release_wakes_waiter, heal),
        cmocka_unit_test_setup(test_killed_holder_permit_comes_back, heal),
        cmocka_unit_test_setup(test_cancel_waiting_permit, heal),
        cmocka_unit_test_setup(test_auto_renew_keeps_permit, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
