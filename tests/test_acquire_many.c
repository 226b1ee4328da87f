/* test_acquire_many.c -- distlock_acquire_many(): several keys as one lock,
 * all or none, on 1 node and on 3 nodes (real servers):
 *   - every key holds the set's one token as a plain lock key; key_count,
 *     key_at, fence_at; release deletes every key;
 *   - a key held by another owner: nothing of the set is written, on any
 *     node (the detail names the key); a key of another type: EPROTO
 *     naming it, nothing held; a key of live read locks is held (a set
 *     is a writer), one of a semaphore refused;
 *   - threads taking overlapping sets never hold a common key together
 *     (a marker per key) and never deadlock;
 *   - a release of the refusing key wakes a waiter (re-checks 10 s apart,
 *     so only the notification can be this fast);
 *   - a SIGKILLed holder's keys come back after the TTL;
 *   - one of 3 nodes paused, or killed and restarted empty: the set is
 *     still granted to one owner only;
 *   - AUTO_RENEW keeps every key; one key deleted behind the set's back
 *     makes the set lost; extend covers every key;
 *   - FENCING: one fence per key, increasing per key;
 *   - bad input. */
#include "test_common.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 3
DEFINE_GROUP(N)

static distlock_client *one_node(rh_cluster *rc)
{
    char buf[256];
    return new_client(rh_uris_mask(rc, 1, buf, sizeof buf));
}

/* key holds token on node i (NULL token: exists at all) */
static int holds(rh_cluster *rc, int i, const char *key, const char *token)
{
    char buf[256];
    int r = rh_get(rc, i, 0, key, buf, sizeof buf);
    return r == 1 && (token == NULL || strcmp(buf, token) == 0);
}

static long long exists_on(rh_cluster *rc, int i, const char *key)
{
    redisReply *r = rh_command(rc, i, 0, "EXISTS %s", key);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r) freeReplyObject(r);
    return n;
}

static void test_set_is_plain_locks(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = one_node(rc);
    const char *keys[] = { "m:a", "m:b", "m:c" };
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire_many(c, keys, 3, 30000, 0, 0, NULL, &l), DISTLOCK_OK);
    assert_int_equal(distlock_lock_key_count(l), 3);
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(distlock_lock_key_at(l, i), keys[i]);
        assert_int_equal(distlock_lock_fence_at(l, i), -1);
        assert_true(holds(rc, 0, keys[i], distlock_lock_token(l)));
        long long pttl = rh_pttl(rc, 0, 0, keys[i]);
        assert_true(pttl > 25000 && pttl <= 30000);
    }
    assert_null(distlock_lock_key_at(l, 3));
    assert_int_equal(distlock_lock_fence_at(l, 3), -1);
    assert_string_equal(distlock_lock_key(l), "m:a");
    assert_true(distlock_lock_validity_ms(l) > 25000);
    /* every other client sees each key as a lock */
    distlock_lock *o = NULL;
    assert_rc(distlock_acquire(c, "m:b", 30000, 0, 0, &o), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(exists_on(rc, 0, keys[i]), 0);
    assert_rc(distlock_release(l), DISTLOCK_ENOTOWNER);
    distlock_lock_free(l);
    /* a single lock's handle answers the same accessors */
    assert_rc(distlock_acquire(c, "m:b", 30000, 0, DISTLOCK_FENCING, &o), DISTLOCK_OK);
    assert_int_equal(distlock_lock_key_count(o), 1);
    assert_string_equal(distlock_lock_key_at(o, 0), "m:b");
    assert_null(distlock_lock_key_at(o, 1));
    assert_int_equal(distlock_lock_fence_at(o, 0), distlock_lock_fence(o));
    assert_true(distlock_lock_fence_at(o, 0) >= 1);
    distlock_lock_free(o);
    assert_int_equal(distlock_lock_key_count(NULL), 0);
    assert_null(distlock_lock_key_at(NULL, 0));
    assert_int_equal(distlock_lock_fence_at(NULL, 0), -1);
    distlock_client_free(c);
}

static void test_held_key_writes_nothing(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    const char *keys[] = { "h:a", "h:b", "h:c" };
    /* h:b held by another owner on every node */
    for (int i = 0; i < N; i++)
        assert_int_equal(rh_set(rc, i, 0, "h:b", "someone-else", 30000), 0);
    distlock_lock *l = NULL;
    assert_fails(distlock_acquire_many(c, keys, 3, 30000, 0, 0, NULL, &l),
                 DISTLOCK_NOTACQUIRED);
    assert_null(l);
    assert_non_null(strstr(distlock_last_error(), "'h:b'"));
    for (int i = 0; i < N; i++) {
        assert_int_equal(exists_on(rc, i, "h:a"), 0);
        assert_int_equal(exists_on(rc, i, "h:c"), 0);
        assert_true(holds(rc, i, "h:b", "someone-else"));
    }
    /* held on one node only: the other two grant (a quorum), and the node
     * that refused has nothing of the set written */
    assert_int_equal(rh_del(rc, 0, 0, "h:b"), 1);
    assert_int_equal(rh_del(rc, 1, 0, "h:b"), 1);
    assert_rc(distlock_acquire_many(c, keys, 3, 30000, 0, 0, NULL, &l), DISTLOCK_OK);
    for (int k = 0; k < 3; k++) {
        assert_holding(rc, keys[k], distlock_lock_token(l), 2);
        assert_true(holds(rc, 0, keys[k], distlock_lock_token(l)));
        assert_true(holds(rc, 1, keys[k], distlock_lock_token(l)));
    }
    assert_int_equal(exists_on(rc, 2, "h:a"), 0);
    assert_int_equal(exists_on(rc, 2, "h:c"), 0);
    assert_true(holds(rc, 2, "h:b", "someone-else"));
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_holding(rc, "h:a", NULL, 0);
    distlock_client_free(c);
}

static void test_wrong_type_key(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = one_node(rc);
    redisReply *r = rh_command(rc, 0, 0, "LPUSH w:list x");
    assert_non_null(r);
    freeReplyObject(r);
    const char *keys[] = { "w:a", "w:list" };
    distlock_lock *l = NULL;
    assert_fails(distlock_acquire_many(c, keys, 2, 30000, 0, 0, NULL, &l), DISTLOCK_EPROTO);
    assert_null(l);
    assert_non_null(strstr(distlock_last_error(), "'w:list'"));
    assert_int_equal(exists_on(rc, 0, "w:a"), 0);
    /* a waiting acquire stops on it too (an error, not "held") */
    assert_fails(distlock_acquire_many(c, keys, 2, 30000, 2000, 0, NULL, &l), DISTLOCK_EPROTO);
    assert_int_equal(exists_on(rc, 0, "w:a"), 0);
    distlock_client_free(c);
}

/* The server's clock, ms since the epoch (read locks are scored by it). */
static long long server_ms(rh_cluster *rc, int i)
{
    redisReply *r = rh_command(rc, i, 0, "TIME");
    assert_true(r && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    long long ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

static void zadd(rh_cluster *rc, const char *key, long long score, const char *member)
{
    redisReply *r = rh_command(rc, 0, 0, "ZADD %s %lld %s", key, score, member);
    assert_true(r && r->type == REDIS_REPLY_INTEGER);
    freeReplyObject(r);
}

/* A key of read locks (symfony/lock's sorted set: tokens scored by their
 * expiry) is held by its live readers: the set waits for them as a writer
 * does; with none left (expired readers, a writer's __write__ intent), the
 * set takes the key as a plain lock. A semaphore's key is refused. */
static void test_read_locked_and_semaphore_keys(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = one_node(rc);
    const char *keys[] = { "z:a", "z:read" };
    long long now = server_ms(rc, 0);
    zadd(rc, "z:read", now + 30000, "reader-1");
    distlock_lock *l = NULL;
    assert_fails(distlock_acquire_many(c, keys, 2, 30000, 0, 0, NULL, &l), DISTLOCK_NOTACQUIRED);
    assert_non_null(strstr(distlock_last_error(), "'z:read'"));
    assert_int_equal(exists_on(rc, 0, "z:a"), 0);
    redisReply *r = rh_command(rc, 0, 0, "ZCARD z:read");
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
    /* the reader gone (expired), a writer's intent left: the set takes it */
    assert_int_equal(rh_del(rc, 0, 0, "z:read"), 1);
    zadd(rc, "z:read", now - 1000, "reader-1");
    zadd(rc, "z:read", now + 30000, "__write__");
    assert_rc(distlock_acquire_many(c, keys, 2, 30000, 0, DISTLOCK_FENCING, NULL, &l),
              DISTLOCK_OK);
    assert_true(holds(rc, 0, "z:read", distlock_lock_token(l)));
    assert_true(distlock_lock_fence_at(l, 1) >= 1);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    /* a semaphore's key: an error naming it, nothing held */
    zadd(rc, "z:sem", 3, "__distlock_semaphore__");
    zadd(rc, "z:sem", now + 30000, "permit-1");
    const char *sem[] = { "z:a", "z:sem" };
    assert_fails(distlock_acquire_many(c, sem, 2, 30000, 0, 0, NULL, &l), DISTLOCK_EPROTO);
    assert_non_null(strstr(distlock_last_error(), "'z:sem' is a semaphore"));
    assert_int_equal(exists_on(rc, 0, "z:a"), 0);
    distlock_client_free(c);
}

static void test_bad_input(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = one_node(rc);
    distlock_lock *l = NULL;
    const char *two[] = { "b:a", "b:b" };
    const char *dup[] = { "b:a", "b:b", "b:a" };
    const char *withnull[] = { "b:a", NULL };
    const char *empty[] = { "b:a", "" };
    static char longkey[DISTLOCK_KEY_MAX + 2];
    memset(longkey, 'k', DISTLOCK_KEY_MAX + 1);
    const char *toolong[] = { "b:a", longkey };
    static const char *many[DISTLOCK_KEYS_MAX + 1];
    static char names[DISTLOCK_KEYS_MAX + 1][16];
    for (int i = 0; i <= DISTLOCK_KEYS_MAX; i++) {
        snprintf(names[i], sizeof names[i], "b:%d", i);
        many[i] = names[i];
    }
    static const char *const want[] = {
        "keys", "nkeys 0", "nkeys 257", "keys[1]", "keys[1]", "keys[1]",
        "key 'b:a' appears twice", "DISTLOCK_REENTRANT", "DISTLOCK_FAIR", "DISTLOCK_SHARED",
        "unknown flags", "ttl_ms 0", "wait_ms -5", "client", "out",
    };
    /* each case: EINVAL, and a detail naming the argument */
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        int rc2 = -100;
        switch (i) {
        case 0: rc2 = distlock_acquire_many(c, NULL, 2, 30000, 0, 0, NULL, &l); break;
        case 1: rc2 = distlock_acquire_many(c, two, 0, 30000, 0, 0, NULL, &l); break;
        case 2: rc2 = distlock_acquire_many(c, many, DISTLOCK_KEYS_MAX + 1, 30000, 0, 0, NULL,
                                            &l); break;
        case 3: rc2 = distlock_acquire_many(c, withnull, 2, 30000, 0, 0, NULL, &l); break;
        case 4: rc2 = distlock_acquire_many(c, empty, 2, 30000, 0, 0, NULL, &l); break;
        case 5: rc2 = distlock_acquire_many(c, toolong, 2, 30000, 0, 0, NULL, &l); break;
        case 6: rc2 = distlock_acquire_many(c, dup, 3, 30000, 0, 0, NULL, &l); break;
        case 7: rc2 = distlock_acquire_many(c, two, 2, 30000, 0, DISTLOCK_REENTRANT, NULL, &l);
                break;
        case 8: rc2 = distlock_acquire_many(c, two, 2, 30000, 0, DISTLOCK_FAIR, NULL, &l); break;
        case 9: rc2 = distlock_acquire_many(c, two, 2, 30000, 0, 1u << 4, NULL, &l); break;
        case 10: rc2 = distlock_acquire_many(c, two, 2, 30000, 0, 1u << 12, NULL, &l); break;
        case 11: rc2 = distlock_acquire_many(c, two, 2, 0, 0, 0, NULL, &l); break;
        case 12: rc2 = distlock_acquire_many(c, two, 2, 30000, -5, 0, NULL, &l); break;
        case 13: rc2 = distlock_acquire_many(NULL, two, 2, 30000, 0, 0, NULL, &l); break;
        case 14: rc2 = distlock_acquire_many(c, two, 2, 30000, 0, 0, NULL, NULL); break;
        }
        assert_int_equal(rc2, DISTLOCK_EINVAL);
        if (strstr(distlock_last_error(), want[i]) == NULL) {
            print_error("case %zu: detail \"%s\" does not name \"%s\"\n", i,
                        distlock_last_error(), want[i]);
            fail();
        }
    }
    /* an owner id is DISTLOCK_REENTRANT's */
    distlock_acquire_args args = { .size = sizeof args, .owner = "me" };
    assert_fails(distlock_acquire_many(c, two, 2, 30000, 0, 0, &args, &l), DISTLOCK_EINVAL);
    /* DISTLOCK_KEYS_MAX keys are fine; nothing was written by the refusals */
    assert_int_equal(exists_on(rc, 0, "b:a"), 0);
    assert_rc(distlock_acquire_many(c, many, DISTLOCK_KEYS_MAX, 30000, 0, 0, NULL, &l),
              DISTLOCK_OK);
    assert_true(holds(rc, 0, names[DISTLOCK_KEYS_MAX - 1], distlock_lock_token(l)));
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_int_equal(exists_on(rc, 0, names[0]), 0);
    distlock_client_free(c);
}

/* ---- overlapping sets in threads: a marker per key */
#define NK 6
#define THREADS 4
#define ROUNDS 25
struct overlap {
    distlock_client *c;
    atomic_int inside[NK];
    atomic_int violations, failures, done;
    int seed;
};

static void *overlap_worker(void *arg)
{
    struct overlap *o = arg;
    static const char *names[NK] = { "o:0", "o:1", "o:2", "o:3", "o:4", "o:5" };
    unsigned seed = (unsigned)atomic_fetch_add(&o->done, 0) + (unsigned)(uintptr_t)&seed;
    for (int r = 0; r < ROUNDS; r++) {
        /* 3 distinct keys of 6, in a random order (sets overlap and come in
         * opposite orders: a one-by-one locker could deadlock here) */
        int idx[NK] = { 0, 1, 2, 3, 4, 5 };
        for (int i = NK - 1; i > 0; i--) {
            int j = (int)(rand_r(&seed) % (unsigned)(i + 1)), t = idx[i];
            idx[i] = idx[j], idx[j] = t;
        }
        const char *keys[3] = { names[idx[0]], names[idx[1]], names[idx[2]] };
        distlock_lock *l = NULL;
        int rc = distlock_acquire_many(o->c, keys, 3, 10000, 20000, 0, NULL, &l);
        if (rc != DISTLOCK_OK) {
            print_error("acquire_many: %d %s\n", rc, distlock_last_error());
            atomic_fetch_add(&o->failures, 1);
            continue;
        }
        for (int k = 0; k < 3; k++)
            if (atomic_fetch_add(&o->inside[idx[k]], 1) != 0)
                atomic_fetch_add(&o->violations, 1);
        sched_yield();
        for (int k = 0; k < 3; k++)
            atomic_fetch_sub(&o->inside[idx[k]], 1);
        if (distlock_release(l) != DISTLOCK_OK)
            atomic_fetch_add(&o->failures, 1);
        distlock_lock_free(l);
    }
    return NULL;
}

static void overlapping_sets(const char *uris)
{
    struct overlap o;
    memset(&o, 0, sizeof o);
    o.c = new_client(uris);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, overlap_worker, &o), 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("overlapping sets: %d threads x %d rounds, %d violations, %d failures\n", THREADS,
           ROUNDS, atomic_load(&o.violations), atomic_load(&o.failures));
    assert_int_equal(atomic_load(&o.violations), 0);
    assert_int_equal(atomic_load(&o.failures), 0);
    distlock_client_free(o.c);
}

static void test_overlapping_sets_one_node(void **state)
{
    char buf[256];
    overlapping_sets(rh_uris_mask(*state, 1, buf, sizeof buf));
}

static void test_overlapping_sets_three_nodes(void **state)
{
    overlapping_sets(rh_uris(*state));
}

/* ---- a release wakes a waiter */
struct waiter_arg {
    distlock_client *c;
    int rc;
    long long t_done;
    distlock_lock *l;
};

static void *wait_many(void *arg)
{
    struct waiter_arg *w = arg;
    const char *keys[] = { "wk:a", "wk:b" };
    w->rc = distlock_acquire_many(w->c, keys, 2, 30000, 20000, 0, NULL, &w->l);
    w->t_done = rh_now_ms();
    return NULL;
}

static long numsub(rh_cluster *rc, int i, const char *channel)
{
    long n = -1;
    redisReply *r = rh_command(rc, i, 0, "PUBSUB NUMSUB %s", channel);
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        n = (long)r->element[1]->integer;
    if (r) freeReplyObject(r);
    return n;
}

static void test_release_wakes_waiter(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder = new_client(rh_uris(rc));
    struct waiter_arg w = { .c = new_client(rh_uris(rc)) };
    /* re-checks 10 s apart: only the release's notification is fast */
    assert_rc(distlock_client_set(w.c, DISTLOCK_OPT_RETRY_MIN_MS, 10000), DISTLOCK_OK);
    assert_rc(distlock_client_set(w.c, DISTLOCK_OPT_RETRY_MAX_MS, 10000), DISTLOCK_OK);
    distlock_lock *h = NULL;
    assert_rc(distlock_acquire(holder, "wk:b", 30000, 0, 0, &h), DISTLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_many, &w), 0);
    /* the waiter subscribed to the refusing key's channel (every node) */
    assert_true(RH_WAIT_UNTIL(numsub(rc, 0, "distlock:wk:b") == 1 &&
                              numsub(rc, 1, "distlock:wk:b") == 1 &&
                              numsub(rc, 2, "distlock:wk:b") == 1, 10000));
    /* nothing held while it waits */
    assert_holding(rc, "wk:a", NULL, 0);
    long long t0 = rh_now_ms();
    assert_rc(distlock_release(h), DISTLOCK_OK);
    pthread_join(t, NULL);
    assert_rc(w.rc, DISTLOCK_OK);
    long long handover = w.t_done - t0;
    printf("release -> waiting set granted: %lld ms\n", handover);
    assert_true(handover < slow_bound(3000, 6000));
    /* the set holds a quorum; the third node may have refused it if the
     * set's request came before the release reached that node (the first
     * nodes to run the release wake the waiter), and a grant needs a quorum */
    int on = -1;
    if (!RH_WAIT_UNTIL((on = rh_count_holding(rc, "wk:b", distlock_lock_token(w.l))) >=
                       distlock_client_quorum(w.c), 3000))
        fail_msg("wk:b holds the set's token on %d node(s), a quorum is %d", on,
                 distlock_client_quorum(w.c));
    distlock_lock_free(w.l);
    distlock_lock_free(h);
    distlock_client_free(w.c);
    distlock_client_free(holder);
}

/* ---- a SIGKILLed holder's keys come back after the TTL */
static void test_killed_holder_keys_expire(void **state)
{
    rh_cluster *rc = *state;
    const char *keys[] = { "k:a", "k:b", "k:c" };
    /* long enough for the kill to come while the keys are held, on a
     * loaded machine under a sanitizer too */
    long ttl = slow_bound(1500, 4000);
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        distlock_client *c = NULL;
        distlock_lock *l = NULL;
        if (distlock_client_new(rh_uris(rc), &c) != DISTLOCK_OK ||
            distlock_acquire_many(c, keys, 3, ttl, 0, 0, NULL, &l) != DISTLOCK_OK)
            _exit(1);
        char one = 1;
        if (write(p[1], &one, 1) != 1)
            _exit(2);
        for (;;)
            pause();
    }
    close(p[1]);
    char got = 0;
    assert_int_equal(read(p[0], &got, 1), 1);
    close(p[0]);
    long long t_kill = rh_now_ms();
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire_many(c, keys, 3, 30000, 0, 0, NULL, &l), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_acquire_many(c, keys, 3, 30000, ttl + 10000, 0, NULL, &l), DISTLOCK_OK);
    long long waited = rh_now_ms() - t_kill;
    printf("keys of a SIGKILLed holder (ttl %ld ms) back after %lld ms\n", ttl, waited);
    assert_true(waited < ttl + slow_bound(2000, 4000));
    /* a quorum holds each key; the holder's keys expire node by node (its
     * requests reached them at different moments), so the node where they
     * expired last may have refused the set, and a grant needs a quorum */
    for (int k = 0; k < 3; k++) {
        int on = -1;
        if (!RH_WAIT_UNTIL((on = rh_count_holding(rc, keys[k], distlock_lock_token(l))) >=
                           distlock_client_quorum(c), 3000))
            fail_msg("%s holds the set's token on %d node(s), a quorum is %d", keys[k], on,
                     distlock_client_quorum(c));
    }
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* ---- faults on 1 of 3 nodes */
static void test_paused_node(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *a = new_client(rh_uris(rc)), *b = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(a, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 300), DISTLOCK_OK);
    assert_rc(distlock_client_set(b, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 300), DISTLOCK_OK);
    const char *keys[] = { "p:a", "p:b" };
    const char *other[] = { "p:b", "p:c" };
    assert_int_equal(rh_pause(rc, 2), 0);
    distlock_lock *l = NULL, *m = NULL;
    assert_rc(distlock_acquire_many(a, keys, 2, 30000, 0, 0, NULL, &l), DISTLOCK_OK);
    assert_true(holds(rc, 0, "p:a", distlock_lock_token(l)));
    assert_true(holds(rc, 1, "p:b", distlock_lock_token(l)));
    /* an overlapping set is refused, and writes nothing */
    assert_rc(distlock_acquire_many(b, other, 2, 30000, 0, 0, NULL, &m), DISTLOCK_NOTACQUIRED);
    assert_int_equal(exists_on(rc, 0, "p:c"), 0);
    assert_int_equal(exists_on(rc, 1, "p:c"), 0);
    assert_rc(distlock_extend(l, 30000), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_rc(distlock_acquire_many(b, other, 2, 30000, 0, 0, NULL, &m), DISTLOCK_OK);
    assert_int_equal(rh_resume(rc, 2), 0);
    assert_rc(distlock_release(m), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_lock_free(m);
    distlock_client_free(a);
    distlock_client_free(b);
}

static void test_node_restarted_empty(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *a = new_client(rh_uris(rc)), *b = new_client(rh_uris(rc));
    const char *keys[] = { "r:a", "r:b" };
    const char *other[] = { "r:b", "r:c" };
    distlock_lock *l = NULL, *m = NULL;
    /* held on every node below (one restarts empty): each connection up first (a first round
     * may end at the quorum, its request to a node still connecting unsent) */
    connect_every_node(rc, a, "r:connect");
    assert_rc(distlock_acquire_many(a, keys, 2, 30000, 0, 0, NULL, &l), DISTLOCK_OK);
    assert_holding(rc, "r:b", distlock_lock_token(l), N);
    assert_int_equal(rh_restart(rc, 2), 0);  /* no persistence: back empty */
    assert_int_equal(exists_on(rc, 2, "r:b"), 0);
    /* two nodes still hold r:b: no quorum for another owner, nothing of its
     * set stays anywhere */
    assert_rc(distlock_acquire_many(b, other, 2, 30000, 0, 0, NULL, &m), DISTLOCK_NOTACQUIRED);
    assert_holding(rc, "r:c", NULL, 0);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_rc(distlock_acquire_many(b, other, 2, 30000, 0, 0, NULL, &m), DISTLOCK_OK);
    distlock_lock_free(m);
    distlock_lock_free(l);
    distlock_client_free(a);
    distlock_client_free(b);
}

/* ---- auto-renewal, extend, lost */
static atomic_int lost_calls;
static void on_lost(distlock_lock *l, void *arg)
{
    (void)l, (void)arg;
    atomic_fetch_add(&lost_calls, 1);
}

static void test_auto_renew_and_lost(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    /* counted on every node below: each connection up first (a first round
     * may end at the quorum, its request to a node still connecting unsent) */
    connect_every_node(rc, c, "ar:connect");
    const char *keys[] = { "ar:a", "ar:b", "ar:c" };
    distlock_lock *l = NULL;
    long ttl = slow_bound(600, 1500);
    assert_rc(distlock_acquire_many(c, keys, 3, ttl, 0, DISTLOCK_AUTO_RENEW, NULL, &l),
              DISTLOCK_OK);
    atomic_store(&lost_calls, 0);
    assert_rc(distlock_lock_on_lost(l, on_lost, NULL), DISTLOCK_OK);
    /* three ttls later every key is still ours (renewed, not re-acquired) */
    sleep_until_ms(rh_now_ms() + 3 * ttl);
    assert_false(distlock_lock_lost(l));
    for (int k = 0; k < 3; k++)
        assert_holding(rc, keys[k], distlock_lock_token(l), N);
    /* extend covers every key */
    assert_rc(distlock_extend(l, 60000), DISTLOCK_OK);
    for (int k = 0; k < 3; k++)  /* at the quorum: node 0's extend may come later */
        assert_true(RH_WAIT_UNTIL(rh_pttl(rc, 0, 0, keys[k]) > 50000, 3000));
    assert_rc(distlock_extend(l, ttl), DISTLOCK_OK);
    /* one key deleted behind its back on every node: the set is lost */
    for (int i = 0; i < N; i++)
        assert_int_equal(rh_del(rc, i, 0, "ar:b"), 1);
    assert_true(RH_WAIT_UNTIL(distlock_lock_lost(l) == 1, 5 * ttl));
    assert_true(RH_WAIT_UNTIL(atomic_load(&lost_calls) == 1, 2000));
    assert_int_equal(distlock_lock_validity_ms(l), 0);
    assert_fails(distlock_extend(l, ttl), DISTLOCK_ENOTOWNER);
    distlock_lock_free(l);
    /* the other keys are released by the free (or expire): free again */
    assert_rc(distlock_acquire_many(c, keys, 3, 30000, 2 * ttl + 2000, 0, NULL, &l),
              DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_abandon_keeps_keys(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = one_node(rc);
    const char *keys[] = { "ab:a", "ab:b" };
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire_many(c, keys, 2, 30000, 0, DISTLOCK_AUTO_RENEW, NULL, &l),
              DISTLOCK_OK);
    char tok[40];
    snprintf(tok, sizeof tok, "%s", distlock_lock_token(l));
    distlock_lock_abandon(l);
    assert_true(holds(rc, 0, "ab:a", tok));
    assert_true(holds(rc, 0, "ab:b", tok));
    /* and the client's free does not release them either */
    distlock_client_free(c);
    assert_true(holds(rc, 0, "ab:b", tok));
}

/* ---- fencing: a fence per key */
static void test_fences_per_key(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    const char *keys[] = { "f:a", "f:b" };
    int64_t last[2] = { -1, -1 };
    /* f:b's counter is ahead of f:a's: the fences are per key */
    for (int i = 0; i < 5; i++) {
        distlock_lock *o = NULL;
        assert_rc(distlock_acquire(c, "f:b", 30000, 0, DISTLOCK_FENCING, &o), DISTLOCK_OK);
        last[1] = distlock_lock_fence(o);  /* the set's f:b fence must pass it */
        distlock_lock_free(o);
    }
    for (int r = 0; r < 4; r++) {
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire_many(c, keys, 2, 30000, 0, DISTLOCK_FENCING, NULL, &l),
                  DISTLOCK_OK);
        for (size_t k = 0; k < 2; k++) {
            int64_t f = distlock_lock_fence_at(l, k);
            if (f <= last[k]) {
                print_error("round %d key %zu: fence %lld after %lld\n", r, k, (long long)f,
                            (long long)last[k]);
                fail();
            }
            last[k] = f;
        }
        assert_int_equal(distlock_lock_fence(l), distlock_lock_fence_at(l, 0));
        assert_true(distlock_lock_fence_at(l, 1) > distlock_lock_fence_at(l, 0));
        distlock_lock_free(l);
    }
    /* a node restarted empty forgets its counters: the raise round keeps
     * them increasing (a quorum holds the last fence) */
    assert_int_equal(rh_restart(rc, 0), 0);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire_many(c, keys, 2, 30000, 0, DISTLOCK_FENCING, NULL, &l),
              DISTLOCK_OK);
    assert_true(distlock_lock_fence_at(l, 0) > last[0]);
    assert_true(distlock_lock_fence_at(l, 1) > last[1]);
    /* a plain fenced lock of each key of the set continues that key's
     * sequence (each key has its own counter) */
    int64_t fa = distlock_lock_fence_at(l, 0), fb = distlock_lock_fence_at(l, 1);
    distlock_lock_free(l);
    assert_rc(distlock_acquire(c, "f:a", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
    assert_true(distlock_lock_fence(l) > fa);
    distlock_lock_free(l);
    assert_rc(distlock_acquire(c, "f:b", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
    assert_true(distlock_lock_fence(l) > fb);
    distlock_lock_free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_set_is_plain_locks, heal),
        cmocka_unit_test_setup(test_held_key_writes_nothing, heal),
        cmocka_unit_test_setup(test_wrong_type_key, heal),
        cmocka_unit_test_setup(test_read_locked_and_semaphore_keys, heal),
        cmocka_unit_test_setup(test_bad_input, heal),
        cmocka_unit_test_setup(test_overlapping_sets_one_node, heal),
        cmocka_unit_test_setup(test_overlapping_sets_three_nodes, heal),
        cmocka_unit_test_setup(test_release_wakes_waiter, heal),
        cmocka_unit_test_setup(test_killed_holder_keys_expire, heal),
        cmocka_unit_test_setup(test_paused_node, heal),
        cmocka_unit_test_setup(test_node_restarted_empty, heal),
        cmocka_unit_test_setup(test_auto_renew_and_lost, heal),
        cmocka_unit_test_setup(test_abandon_keeps_keys, heal),
        cmocka_unit_test_setup(test_fences_per_key, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
