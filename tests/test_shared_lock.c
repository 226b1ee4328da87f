/* test_shared_lock.c -- read locks (DISTLOCK_SHARED) and the reader-aware
 * writer (a plain acquire of the same key), against real redis-server
 * processes, on 1 and 3 nodes:
 *   - the wire format of symfony/lock's RedisStore (docs/shared-locks.md):
 *     a zset of tokens scored by their expiry; `__write__` marks a writer;
 *   - readers share, a writer excludes them and they it; threads counting
 *     readers and writers inside never see both;
 *   - a waiting writer is not starved by readers that keep arriving: it
 *     gets the lock within one reader TTL after it starts waiting;
 *   - a writer giving up withdraws its intent; a symfony writer and
 *     symfony readers are respected;
 *   - release / extend / auto-renew / a SIGKILLed reader as for a lock;
 *   - bad input: EINVAL; a semaphore key: EPROTO. */
#include "test_common.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

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

static int key_type_is(const rh_cluster *rc, int i, const char *key, const char *type)
{
    redisReply *r = rh_command(rc, i, 0, "TYPE %s", key);
    assert_non_null(r);
    int ok = r->type == REDIS_REPLY_STATUS && strcmp(r->str, type) == 0;
    freeReplyObject(r);
    return ok;
}

/* Nodes among the first n where key has that type. */
static int count_type(const rh_cluster *rc, int n, const char *key, const char *type)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += key_type_is(rc, i, key, type);
    return k;
}

static long long epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Nodes among the first n where key is the read locks' zset with t1
 * (ttl 10 s, just taken) and t2, the key expiring with them. */
static int readers_on(const rh_cluster *rc, int n, const char *key, const char *t1,
                      const char *t2)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        double s = zscore(rc, i, key, t1);
        long long now = epoch_ms(), pttl = rh_pttl(rc, i, 0, key);
        k += key_type_is(rc, i, key, "zset") && s > now + 8000 && s <= now + 10100 &&
             zscore(rc, i, key, t2) > 0 && pttl > 8000 && pttl <= 10000;
    }
    return k;
}

static void test_readers_share_writer_excludes(void **state)
{
    rh_cluster *rc = *state;
    for (int nodes = 1; nodes <= 3; nodes += 2) {
        distlock_client *c = client_on(rc, nodes);
        /* the format is checked on every node: a fresh client's first round
         * may end at the quorum before its last connection is ready, and
         * that request is never sent */
        connect_nodes(rc, c, "rw:connect", nodes);
        distlock_lock *r1 = NULL, *r2 = NULL, *w = NULL, *x = NULL;
        assert_rc(distlock_acquire(c, "rw", 10000, 0, DISTLOCK_SHARED, &r1), DISTLOCK_OK);
        assert_rc(distlock_acquire(c, "rw", 10000, 0, DISTLOCK_SHARED, &r2), DISTLOCK_OK);
        /* symfony's format: tokens scored by expiry, key PEXPIREAT max; on
         * every node, awaited (a round returns at the quorum, the last
         * node's request may still be on its way) */
        int got = 0;
        if (!RH_WAIT_UNTIL((got = readers_on(rc, nodes, "rw", distlock_lock_token(r1),
                                             distlock_lock_token(r2))) == nodes, 3000))
            fail_msg("both readers in the zset format on %d node(s) of %d", got, nodes);
        /* a writer (a plain acquire, also with fencing) is refused, and
         * writes nothing when it does not wait */
        assert_rc(distlock_acquire(c, "rw", 10000, 0, 0, &w), DISTLOCK_NOTACQUIRED);
        assert_rc(distlock_acquire(c, "rw", 10000, 0, DISTLOCK_FENCING, &w),
                  DISTLOCK_NOTACQUIRED);
        assert_null(w);
        assert_true(zscore(rc, 0, "rw", "__write__") < 0);
        assert_rc(distlock_extend(r1, 20000), DISTLOCK_OK);
        /* an extend returns once a quorum extended: node 0's may come later */
        assert_true(RH_WAIT_UNTIL(zscore(rc, 0, "rw", distlock_lock_token(r1)) >
                                  epoch_ms() + 18000, 3000));
        assert_true(RH_WAIT_UNTIL(rh_pttl(rc, 0, 0, "rw") > 18000, 3000));
        assert_rc(distlock_release(r1), DISTLOCK_OK);
        assert_fails(distlock_release(r1), DISTLOCK_ENOTOWNER);
        assert_rc(distlock_acquire(c, "rw", 10000, 0, 0, &w), DISTLOCK_NOTACQUIRED);
        assert_rc(distlock_release(r2), DISTLOCK_OK);
        assert_fails(distlock_extend(r2, 1000), DISTLOCK_ENOTOWNER);
        /* readers gone: the writer takes it as a plain string lock */
        assert_rc(distlock_acquire(c, "rw", 10000, 0, 0, &w), DISTLOCK_OK);
        char buf[64];
        int held = 0;  /* a grant needs a quorum; the last node may answer late */
        for (int i = 0; i < nodes; i++)
            held += rh_get(rc, i, 0, "rw", buf, sizeof buf) == 1
                    && strcmp(buf, distlock_lock_token(w)) == 0;
        assert_true(held >= nodes / 2 + 1);
        /* and readers are refused while it holds it */
        assert_rc(distlock_acquire(c, "rw", 10000, 0, DISTLOCK_SHARED, &x), DISTLOCK_NOTACQUIRED);
        assert_null(x);
        assert_rc(distlock_release(w), DISTLOCK_OK);
        assert_rc(distlock_acquire(c, "rw", 10000, 0, DISTLOCK_SHARED, &x), DISTLOCK_OK);
        distlock_lock_free(x);
        distlock_lock_free(w);
        distlock_lock_free(r1);
        distlock_lock_free(r2);
        distlock_client_free(c);
        for (int i = 0; i < N; i++)
            assert_int_equal(rh_flushall(rc, i), 0);
    }
}

static void test_bad_input(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_on(rc, 1);
    distlock_lock *l = NULL;
    assert_fails(distlock_acquire(c, "rb", 1000, 0, DISTLOCK_SHARED | DISTLOCK_FENCING, &l),
                 DISTLOCK_EINVAL);
    assert_non_null(strstr(distlock_last_error(), "DISTLOCK_SHARED"));
    assert_fails(distlock_acquire(c, "rb", 1000, 0, DISTLOCK_SHARED | DISTLOCK_FAIR, &l),
                 DISTLOCK_EINVAL);
    assert_fails(distlock_acquire(c, "rb", 1000, 0, DISTLOCK_SHARED | DISTLOCK_REENTRANT, &l),
                 DISTLOCK_EINVAL);
    assert_null(l);
    /* a fair writer on read locks: EPROTO with a clear detail */
    distlock_lock *r = NULL;
    assert_rc(distlock_acquire(c, "rb", 10000, 0, DISTLOCK_SHARED, &r), DISTLOCK_OK);
    assert_fails(distlock_acquire(c, "rb", 1000, 0, DISTLOCK_FAIR, &l), DISTLOCK_EPROTO);
    assert_non_null(strstr(distlock_last_error(), "holds read locks"));
    assert_null(l);
    distlock_lock_free(r);
    distlock_client_free(c);
}

/* ------------------------------------------------------------ writers never with readers */

typedef struct room {
    distlock_client *c;
    int rounds;
    atomic_int readers, writers, bad, reads, writes, errors;
} room;

static void enter(room *rm, int writer)
{
    if (writer) {
        if (atomic_fetch_add(&rm->writers, 1) != 0 || atomic_load(&rm->readers) != 0)
            atomic_fetch_add(&rm->bad, 1);
    } else {
        atomic_fetch_add(&rm->readers, 1);
        if (atomic_load(&rm->writers) != 0)
            atomic_fetch_add(&rm->bad, 1);
    }
    sleep_until_ms(rh_now_ms() + 2);  /* inside a moment (the scenario) */
    if (writer) {
        if (atomic_load(&rm->readers) != 0)
            atomic_fetch_add(&rm->bad, 1);
        atomic_fetch_sub(&rm->writers, 1);
    } else {
        if (atomic_load(&rm->writers) != 0)
            atomic_fetch_add(&rm->bad, 1);
        atomic_fetch_sub(&rm->readers, 1);
    }
}

static void *room_reader(void *arg)
{
    room *rm = arg;
    for (int i = 0; i < rm->rounds; i++) {
        distlock_lock *l = NULL;
        if (distlock_acquire(rm->c, "room", 5000, 20000, DISTLOCK_SHARED, &l) != DISTLOCK_OK) {
            print_error("reader: %s\n", distlock_last_error());
            atomic_fetch_add(&rm->errors, 1);
            continue;
        }
        enter(rm, 0);
        atomic_fetch_add(&rm->reads, 1);
        if (distlock_release(l) != DISTLOCK_OK)
            atomic_fetch_add(&rm->errors, 1);
        distlock_lock_free(l);
    }
    return NULL;
}

static void *room_writer(void *arg)
{
    room *rm = arg;
    for (int i = 0; i < rm->rounds / 2; i++) {
        distlock_lock *l = NULL;
        if (distlock_acquire(rm->c, "room", 5000, 20000, 0, &l) != DISTLOCK_OK) {
            print_error("writer: %s\n", distlock_last_error());
            atomic_fetch_add(&rm->errors, 1);
            continue;
        }
        enter(rm, 1);
        atomic_fetch_add(&rm->writes, 1);
        if (distlock_release(l) != DISTLOCK_OK)
            atomic_fetch_add(&rm->errors, 1);
        distlock_lock_free(l);
    }
    return NULL;
}

static void test_readers_and_writers_never_together(void **state)
{
    rh_cluster *rc = *state;
    for (int nodes = 1; nodes <= 3; nodes += 2) {
        room rm = { .c = client_on(rc, nodes), .rounds = 12 };
        pthread_t t[8];
        for (int i = 0; i < 8; i++)
            assert_int_equal(pthread_create(&t[i], NULL, i < 6 ? room_reader : room_writer, &rm),
                             0);
        for (int i = 0; i < 8; i++)
            pthread_join(t[i], NULL);
        printf("# %d node(s): %d reads, %d writes, %d overlaps\n", nodes, atomic_load(&rm.reads),
               atomic_load(&rm.writes), atomic_load(&rm.bad));
        assert_int_equal(atomic_load(&rm.errors), 0);
        assert_int_equal(atomic_load(&rm.bad), 0);
        assert_int_equal(atomic_load(&rm.reads), 6 * 12);
        assert_int_equal(atomic_load(&rm.writes), 2 * 6);
        distlock_client_free(rm.c);
    }
}

/* ------------------------------------------------------------ the writer is not starved */

#define READER_TTL 1000

typedef struct stream {
    distlock_client *c;
    atomic_int stop, reads, errors;
} stream;

/* Readers keep arriving: each takes a read lock, holds it a while, and a
 * next one comes before it leaves, so the key is never free of readers. */
static void *reader_stream(void *arg)
{
    stream *s = arg;
    while (!atomic_load(&s->stop)) {
        distlock_lock *l = NULL;
        int r = distlock_acquire(s->c, "starve", READER_TTL, 200, DISTLOCK_SHARED, &l);
        if (r == DISTLOCK_OK) {
            atomic_fetch_add(&s->reads, 1);
            sleep_until_ms(rh_now_ms() + 150);  /* the scenario: a read takes 150 ms */
            (void)distlock_release(l);
            distlock_lock_free(l);
        } else if (r != DISTLOCK_NOTACQUIRED) {
            atomic_fetch_add(&s->errors, 1);
        }
    }
    return NULL;
}

static void test_writer_not_starved_by_readers(void **state)
{
    rh_cluster *rc = *state;
    for (int nodes = 1; nodes <= 3; nodes += 2) {
        stream s = { .c = client_on(rc, nodes) };
        distlock_client *wc = client_on(rc, nodes);
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
            assert_int_equal(pthread_create(&t[i], NULL, reader_stream, &s), 0);
        /* the readers are in */
        assert_true(RH_WAIT_UNTIL(atomic_load(&s.reads) >= 8, 10000));
        distlock_lock *w = NULL;
        long long t0 = rh_now_ms();
        int r = distlock_acquire(wc, "starve", 5000, 4 * READER_TTL, 0, &w);
        long long waited = rh_now_ms() - t0;
        int reads_then = atomic_load(&s.reads);
        printf("# %d node(s): writer behind arriving readers waited %lld ms (reader ttl %d ms, "
               "%d reads so far)\n", nodes, waited, READER_TTL, reads_then);
        if (r != DISTLOCK_OK) {  /* stop the readers before failing */
            atomic_store(&s.stop, 1);
            for (int i = 0; i < 4; i++)
                pthread_join(t[i], NULL);
        }
        assert_rc(r, DISTLOCK_OK);
        /* within one reader TTL of the start of its wait (+ margin) */
        if (waited >= READER_TTL + slow_bound(300, 1500))
            atomic_store(&s.stop, 1);
        assert_true(waited < READER_TTL + slow_bound(300, 1500));
        /* the writer holds a plain string lock on a quorum (the round
         * returns at a quorum: the others' replies may still be coming) */
        int strings = 0;
        RH_WAIT_UNTIL((strings = count_type(rc, nodes, "starve", "string")) >= nodes / 2 + 1,
                      3000);
        atomic_store(&s.stop, 1);
        for (int i = 0; i < 4; i++)
            pthread_join(t[i], NULL);
        assert_true(strings >= nodes / 2 + 1);
        assert_rc(distlock_release(w), DISTLOCK_OK);
        distlock_lock_free(w);
        assert_int_equal(atomic_load(&s.errors), 0);
        distlock_client_free(s.c);
        distlock_client_free(wc);
        for (int i = 0; i < N; i++)
            assert_int_equal(rh_flushall(rc, i), 0);
    }
}

typedef struct wait_arg { distlock_client *c; distlock_lock *l; int rc; long long got_ms; } wait_arg;

static void *wait_writer(void *arg)
{
    wait_arg *w = arg;
    w->rc = distlock_acquire(w->c, "intent", 10000, 20000, 0, &w->l);
    w->got_ms = rh_now_ms();
    return NULL;
}

/* A waiting writer marks its intent (`__write__` alone); new readers are
 * refused; when it gives up, the intent goes and readers come in again. */
static void test_writer_intent_and_give_up(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_on(rc, 1);
    distlock_lock *r1 = NULL, *w = NULL, *r2 = NULL;
    assert_rc(distlock_acquire(c, "intent", 10000, 0, DISTLOCK_SHARED, &r1), DISTLOCK_OK);
    long long t0 = rh_now_ms();
    assert_rc(distlock_acquire(c, "intent", 10000, 300, 0, &w), DISTLOCK_NOTACQUIRED);
    assert_true(rh_now_ms() - t0 >= 300);
    /* gave up: no intent left, a reader comes in at once */
    assert_true(zscore(rc, 0, "intent", "__write__") < 0);
    assert_rc(distlock_acquire(c, "intent", 10000, 0, DISTLOCK_SHARED, &r2), DISTLOCK_OK);
    assert_rc(distlock_release(r2), DISTLOCK_OK);
    distlock_lock_free(r2);
    r2 = NULL;

    /* while a writer waits: its intent stands alone at its score, a new
     * reader is refused, the reader already in extends and releases as
     * before, and its release hands the key to the writer */
    distlock_client *wc = client_on(rc, 1);
    wait_arg wa = { .c = wc };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_writer, &wa), 0);
    assert_true(RH_WAIT_UNTIL(zscore(rc, 0, "intent", "__write__") > 0, 5000));
    assert_rc(distlock_acquire(c, "intent", 10000, 0, DISTLOCK_SHARED, &r2), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_extend(r1, 10000), DISTLOCK_OK);
    long long t1 = rh_now_ms();
    assert_rc(distlock_release(r1), DISTLOCK_OK);
    pthread_join(t, NULL);
    assert_rc(wa.rc, DISTLOCK_OK);
    printf("# the last reader's release -> waiting writer granted in %lld ms\n", wa.got_ms - t1);
    assert_true(wa.got_ms - t1 < slow_bound(250, 1000));
    assert_true(key_type_is(rc, 0, "intent", "string"));
    distlock_lock_free(wa.l);
    distlock_lock_free(r1);
    distlock_client_free(wc);
    distlock_client_free(c);
}

typedef struct cancel_arg { distlock_client *c; distlock_cancel *cancel; int rc; } cancel_arg;

static void *writer_cancellable(void *arg)
{
    cancel_arg *a = arg;
    distlock_lock *l = NULL;
    distlock_acquire_args args = { .size = sizeof args, .cancel = a->cancel };
    a->rc = distlock_acquire_with(a->c, "rcancel", 10000, DISTLOCK_WAIT_FOREVER, 0, &args, &l);
    distlock_lock_free(l);
    return NULL;
}

/* A writer waiting behind a reader is cancelled: ECANCELED, and its
 * intent is withdrawn, so readers come in again at once. */
static void test_cancelled_writer_withdraws_intent(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_on(rc, 3), *wc = client_on(rc, 3);
    distlock_lock *r = NULL, *r2 = NULL;
    assert_rc(distlock_acquire(c, "rcancel", 10000, 0, DISTLOCK_SHARED, &r), DISTLOCK_OK);
    cancel_arg a = { .c = wc, .rc = -99 };
    assert_rc(distlock_cancel_new(&a.cancel), DISTLOCK_OK);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, writer_cancellable, &a), 0);
    assert_true(RH_WAIT_UNTIL(zscore(rc, 0, "rcancel", "__write__") > 0 &&
                              zscore(rc, 1, "rcancel", "__write__") > 0, 5000));
    assert_rc(distlock_acquire(c, "rcancel", 10000, 0, DISTLOCK_SHARED, &r2),
              DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_cancel_fire(a.cancel), DISTLOCK_OK);
    pthread_join(t, NULL);
    assert_rc(a.rc, DISTLOCK_ECANCELED);
    for (int i = 0; i < 3; i++)
        assert_true(RH_WAIT_UNTIL(zscore(rc, i, "rcancel", "__write__") < 0, 3000));
    assert_rc(distlock_acquire(c, "rcancel", 10000, 0, DISTLOCK_SHARED, &r2), DISTLOCK_OK);
    distlock_cancel_free(a.cancel);
    distlock_lock_free(r2);
    distlock_lock_free(r);
    distlock_client_free(c);
    distlock_client_free(wc);
}

/* symfony/lock's RedisStore writer (its token and `__write__` at the same
 * score) holds the key: our readers and writers wait; a symfony reader
 * (a member alone) keeps our writer out. */
static void test_symfony_members(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_on(rc, 1);
    distlock_lock *l = NULL;
    long long until = epoch_ms() + 10000;
    node_command_ok(rc, 0, "ZADD sy %lld symfonywriter %lld __write__", until, until);
    node_command_ok(rc, 0, "PEXPIREAT sy %lld", until);
    assert_rc(distlock_acquire(c, "sy", 10000, 0, DISTLOCK_SHARED, &l), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_acquire(c, "sy", 10000, 0, 0, &l), DISTLOCK_NOTACQUIRED);
    /* a waiting writer leaves a symfony writer's __write__ alone */
    assert_rc(distlock_acquire(c, "sy", 10000, 200, 0, &l), DISTLOCK_NOTACQUIRED);
    assert_true(zscore(rc, 0, "sy", "__write__") == (double)until);
    assert_true(zscore(rc, 0, "sy", "symfonywriter") == (double)until);
    node_command_ok(rc, 0, "DEL sy");

    node_command_ok(rc, 0, "ZADD sy %lld symfonyreader", until);
    assert_rc(distlock_acquire(c, "sy", 10000, 0, 0, &l), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_acquire(c, "sy", 10000, 0, DISTLOCK_SHARED, &l), DISTLOCK_OK);
    distlock_lock_free(l);
    /* an expired member is swept: the writer gets it */
    node_command_ok(rc, 0, "ZADD sy %lld symfonyreader", epoch_ms() - 1);
    assert_rc(distlock_acquire(c, "sy", 10000, 0, 0, &l), DISTLOCK_OK);
    assert_true(key_type_is(rc, 0, "sy", "string"));
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* ------------------------------------------------------------ leases */

static void test_killed_reader_comes_back(void **state)
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
            distlock_acquire(c, "rk", 1500, 0, DISTLOCK_SHARED, &l) != DISTLOCK_OK)
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
    assert_rc(distlock_acquire(c, "rk", 5000, 0, 0, &l), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_acquire(c, "rk", 5000, 10000, 0, &l), DISTLOCK_OK);
    long long ms = rh_now_ms() - t0;
    printf("# a killed reader's lock (ttl 1500 ms) let the writer in after %lld ms\n", ms);
    assert_true(ms >= 1000 && ms < 1500 + slow_bound(1500, 4000));
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_auto_renew_keeps_read_lock(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_on(rc, 3), *c2 = client_on(rc, 3);
    distlock_lock *l = NULL, *x = NULL;
    assert_rc(distlock_acquire(c, "rr", 900, 0, DISTLOCK_SHARED | DISTLOCK_AUTO_RENEW, &l),
              DISTLOCK_OK);
    sleep_until_ms(rh_now_ms() + 2500);  /* the scenario: held past 2 ttls */
    assert_int_equal(distlock_lock_lost(l), 0);
    assert_true(distlock_lock_validity_ms(l) > 0);
    assert_rc(distlock_acquire(c2, "rr", 900, 0, 0, &x), DISTLOCK_NOTACQUIRED);
    /* renewed past 2 ttls on a quorum (2 of 3), what the grant promises: a
     * fresh client's first round may end there, before its last connection
     * is ready, and that node never had it */
    int renewed = 0;
    for (int i = 0; i < 3; i++)
        renewed += zscore(rc, i, "rr", distlock_lock_token(l)) > epoch_ms();
    printf("# a read lock on 3 nodes, held 2500 ms (ttl 900): live on %d node(s)\n", renewed);
    assert_true(renewed >= 2);
    /* deleted behind its back: found lost */
    for (int i = 0; i < 3; i++)
        node_command_ok(rc, i, "ZREM rr %s", distlock_lock_token(l));
    assert_true(RH_WAIT_UNTIL(distlock_lock_lost(l) == 1, 5000));
    assert_rc(distlock_acquire(c2, "rr", 900, 0, 0, &x), DISTLOCK_OK);
    distlock_lock_free(x);
    distlock_lock_free(l);
    distlock_client_free(c);
    distlock_client_free(c2);
}

/* distlock_admin_holder(): the kind, and the live readers / permits. */
static void test_holder_kinds(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_on(rc, 3);
    distlock_lock *a = NULL, *b = NULL, *s = NULL, *l = NULL;
    distlock_holder_info h = { .size = sizeof h };
    assert_rc(distlock_acquire(c, "hk:r", 10000, 0, DISTLOCK_SHARED, &a), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "hk:r", 10000, 0, DISTLOCK_SHARED, &b), DISTLOCK_OK);
    assert_rc(distlock_admin_holder(c, "hk:r", -1, &h), 0);
    assert_int_equal(h.kind, DISTLOCK_HOLDER_READERS);
    assert_int_equal(h.holders, 2);
    assert_int_equal(h.permits, 0);
    assert_int_equal(h.taken, 3);
    assert_int_equal(h.writer, 0);
    assert_rc(distlock_admin_holder(c, "hk:r", 1, &h), 0);
    assert_int_equal(h.kind, DISTLOCK_HOLDER_READERS);
    assert_int_equal(h.holders, 2);
    /* a writer's intent on node 1: a writer waits; an expired one is none */
    node_command_ok(rc, 1, "ZADD hk:r %lld __write__", epoch_ms() + 10000);
    assert_rc(distlock_admin_holder(c, "hk:r", 1, &h), 0);
    assert_int_equal(h.writer, 1);
    assert_int_equal(h.holders, 2);
    assert_rc(distlock_admin_holder(c, "hk:r", -1, &h), 0);
    assert_int_equal(h.writer, 1);
    node_command_ok(rc, 1, "ZADD hk:r %lld __write__", epoch_ms() - 1);
    assert_rc(distlock_admin_holder(c, "hk:r", 1, &h), 0);
    assert_int_equal(h.writer, 0);
    assert_rc(distlock_semaphore_acquire(c, "hk:s", 4, 10000, 0, 0, NULL, &s), DISTLOCK_OK);
    assert_rc(distlock_admin_holder(c, "hk:s", -1, &h), 0);
    assert_int_equal(h.kind, DISTLOCK_HOLDER_SEMAPHORE);
    assert_int_equal(h.holders, 1);
    assert_int_equal(h.permits, 4);
    assert_rc(distlock_acquire(c, "hk:l", 10000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_admin_holder(c, "hk:l", -1, &h), 1);
    assert_int_equal(h.kind, DISTLOCK_HOLDER_LOCK);
    assert_string_equal(h.token, distlock_lock_token(l));
    assert_rc(distlock_admin_holder(c, "hk:free", -1, &h), 0);
    assert_int_equal(h.kind, DISTLOCK_HOLDER_FREE);
    node_command_ok(rc, 0, "HSET hk:h f v");
    assert_rc(distlock_admin_holder(c, "hk:h", 0, &h), 0);
    assert_int_equal(h.kind, DISTLOCK_HOLDER_OTHER);
    /* a caller built against the 0.1.0 struct: nothing written past it */
    struct { distlock_holder_info h; char guard[32]; } old;
    memset(&old, 0x5a, sizeof old);
    old.h.size = offsetof(distlock_holder_info, taken) + sizeof(int);
    assert_rc(distlock_admin_holder(c, "hk:s", -1, &old.h), 0);
    const unsigned char *p = (const unsigned char *)&old.h + old.h.size;
    for (size_t i = 0; i < sizeof old - old.h.size; i++)
        assert_int_equal(p[i], 0x5a);
    /* ... and one whose struct ends before `writer`: kind and the counts
     * written, nothing after them */
    memset(&old, 0x5a, sizeof old);
    old.h.size = offsetof(distlock_holder_info, writer);
    assert_rc(distlock_admin_holder(c, "hk:s", -1, &old.h), 0);
    assert_int_equal(old.h.kind, DISTLOCK_HOLDER_SEMAPHORE);
    assert_int_equal(old.h.permits, 4);
    p = (const unsigned char *)&old.h + old.h.size;
    for (size_t i = 0; i < sizeof old - old.h.size; i++)
        assert_int_equal(p[i], 0x5a);
    /* distlock_admin_scan lists the read locks and the semaphore, not a
     * user's sorted set */
    node_command_ok(rc, 0, "ZADD hk:user 1 a 2 b");
    unsigned long long cursor = 0;
    int found = 0;
    do {
        int r = distlock_admin_scan(c, 0, "hk:*", 100, &cursor, NULL, NULL);
        assert_true(r >= 0);
        found += r;
    } while (cursor != 0);
    assert_int_equal(found, 3);  /* hk:r, hk:s, hk:l */
    distlock_lock_free(a);
    distlock_lock_free(b);
    distlock_lock_free(s);
    distlock_lock_free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_readers_share_writer_excludes, heal),
        cmocka_unit_test_setup(test_bad_input, heal),
        cmocka_unit_test_setup(test_readers_and_writers_never_together, heal),
        cmocka_unit_test_setup(test_writer_not_starved_by_readers, heal),
        cmocka_unit_test_setup(test_writer_intent_and_give_up, heal),
        cmocka_unit_test_setup(test_cancelled_writer_withdraws_intent, heal),
        cmocka_unit_test_setup(test_symfony_members, heal),
        cmocka_unit_test_setup(test_killed_reader_comes_back, heal),
        cmocka_unit_test_setup(test_auto_renew_keeps_read_lock, heal),
        cmocka_unit_test_setup(test_holder_kinds, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
