/* test_shared_lock_writer_gives_up.c -- two writers wait for the readers of
 * one key, against a real redis-server; the second writer's connection
 * goes through the fault proxy, which holds its next attempt (a slow link,
 * or simply the race every release starts: its wake-up and the readers'
 * both go out at once).
 * docs/shared-locks.md: "A writer that waits and finds readers marks its
 * intent ... Readers that arrive from then on are refused, so the writer
 * gets the key once the readers already in are gone: within one reader TTL
 * after it starts waiting."
 *   - the other writer gives up (cancelled): the writer still waiting keeps
 *     the intent (the registry of waiting writers, {key}:writers, still
 *     names it), so a reader arriving then is refused; each writer leaves
 *     the registry, the winner too;
 *   - two writers wait with one caller's token (two threads, processes or
 *     hosts of one owner): each is its own entry in the registry, so the
 *     first to give up (its wait budget spent) leaves only its own and the
 *     intent stays for the other: a reader arriving then is refused;
 *   - the other writer wins, then releases: its release wakes the readers
 *     and the writer alike and readers get in first, but the writer's next
 *     attempt puts the intent back, so it gets the key within one reader
 *     TTL after that release although readers keep arriving. */
#include "test_common.h"
#include "test_proxy_cluster.h"
#include "test_multi_drive.h"

#include <pthread.h>
#include <stdatomic.h>

DEFINE_PROXY_GROUP(1)

typedef struct writer {
    distlock_client *c;
    distlock_cancel *cancel;
    const char *token;   /* the caller's token, NULL: a fresh one */
    long wait_ms;
    int rc;
    long long waited_ms;
    long long done_ms;   /* rh_now_ms() when its acquire returned */
    atomic_int done;     /* its acquire returned (read by the test's thread meanwhile) */
    distlock_lock *l;
} writer;

static void *write_wait(void *arg)
{
    writer *w = arg;
    distlock_acquire_args a = { .size = sizeof a, .cancel = w->cancel, .token = w->token };
    long long t0 = rh_now_ms();
    w->rc = distlock_acquire_with(w->c, "wg", 30000, w->wait_ms, 0, &a, &w->l);
    w->done_ms = rh_now_ms();
    w->waited_ms = w->done_ms - t0;
    atomic_store(&w->done, 1);
    return NULL;
}

static int has_intent(const rh_cluster *rc)
{
    redisReply *r = rh_command(rc, 0, 0, "ZSCORE wg __write__");
    assert_non_null(r);
    int yes = r->type == REDIS_REPLY_STRING;
    freeReplyObject(r);
    return yes;
}

/* Members of the registry of waiting writers of "wg" (its side key). */
static long registered_writers(const rh_cluster *rc)
{
    redisReply *r = rh_command(rc, 0, 0, "ZCARD {wg}:writers");
    assert_non_null(r);
    long n = r->type == REDIS_REPLY_INTEGER ? (long)r->integer : -1;
    freeReplyObject(r);
    return n;
}

static long numsub(const rh_cluster *rc)
{
    redisReply *r = rh_command(rc, 0, 0, "PUBSUB NUMSUB distlock:wg");
    assert_non_null(r);
    long n = r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? (long)r->element[1]->integer
                                                               : -1;
    freeReplyObject(r);
    return n;
}

static void test_writer_keeps_intent_when_another_writer_gives_up(void **state)
{
    proxy_env *e = *state;
    rh_cluster *rc = e->rc;
    distlock_client *d = new_client(rh_uris(rc));       /* readers, writer 1 */
    distlock_client *p = new_client(fp_uris(e->fp));    /* writer 2, through the proxy */
    assert_rc(distlock_client_set(p, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 20000), DISTLOCK_OK);

    distlock_lock *r0 = NULL, *r1 = NULL;
    assert_rc(distlock_acquire(d, "wg", 30000, 0, DISTLOCK_SHARED, &r0), DISTLOCK_OK);

    /* writer 2 waits: its intent is there */
    writer w2 = { .c = p, .wait_ms = 25000 };
    pthread_t t2, t1;
    assert_int_equal(pthread_create(&t2, NULL, write_wait, &w2), 0);
    assert_true(RH_WAIT_UNTIL(has_intent(rc) && numsub(rc) >= 1, 10000));

    /* writer 1 waits too (subscribed, so its first attempt is done) */
    writer w1 = { .c = d, .wait_ms = 25000 };
    assert_rc(distlock_cancel_new(&w1.cancel), DISTLOCK_OK);
    assert_int_equal(pthread_create(&t1, NULL, write_wait, &w1), 0);
    assert_true(RH_WAIT_UNTIL(numsub(rc) >= 2, 10000));

    /* writer 2's next attempt stays in the proxy; writer 1 gives up */
    fp_ok(e->fp, "hold 0 up");
    assert_rc(distlock_cancel_fire(w1.cancel), DISTLOCK_OK);
    pthread_join(t1, NULL);
    assert_rc(w1.rc, DISTLOCK_ECANCELED);
    int intent = has_intent(rc);
    long still = registered_writers(rc);  /* writer 2 only: writer 1 left */

    /* writer 2 still waits: a reader arriving now is refused */
    int r = distlock_acquire(d, "wg", 30000, 0, DISTLOCK_SHARED, &r1);
    printf("writer 1 gave up; writer 2 still waiting; intent left: %d; writers registered: "
           "%ld; a new reader: %s\n", intent, still, distlock_strerror(r));

    fp_ok(e->fp, "unhold 0 up");
    if (r1) {
        assert_rc(distlock_release(r1), DISTLOCK_OK);
        distlock_lock_free(r1);
    }
    assert_rc(distlock_release(r0), DISTLOCK_OK);
    pthread_join(t2, NULL);
    printf("writer 2: %s after %lld ms\n", distlock_strerror(w2.rc), w2.waited_ms);
    assert_rc(w2.rc, DISTLOCK_OK);
    /* the winner left the registry too: nothing keeps a later intent up */
    long left = registered_writers(rc);
    printf("writers registered after writer 2 won: %ld\n", left);
    assert_rc(distlock_release(w2.l), DISTLOCK_OK);
    distlock_lock_free(w2.l);
    distlock_lock_free(r0);
    distlock_cancel_free(w1.cancel);

    assert_rc(r, DISTLOCK_NOTACQUIRED);
    assert_true(intent);
    assert_int_equal(still, 1);
    assert_int_equal(left, 0);
    distlock_client_free(p);
    distlock_client_free(d);
}

/* One owner string used by two waits (what a caller's token is for: two
 * threads, processes or hosts acting as one owner). Writer B (long budget,
 * through the proxy) and writer A (short budget) wait for a reader with
 * the same token; A gives up when its budget is spent, while B's next
 * attempt is held in the proxy (else B's attempt, woken by A's leave,
 * would put a lost intent back before the reader below tries). Each wait
 * is its own registry entry: A's leave removes only A's, the intent stays,
 * and a reader of another client is refused until B gets the key. */
static void two_writers_one_token(void **state, int a_multi)
{
    proxy_env *e = *state;
    rh_cluster *rc = e->rc;
    distlock_client *d = new_client(rh_uris(rc));       /* the reader, writer A */
    distlock_client *p = new_client(fp_uris(e->fp));    /* writer B, through the proxy */
    distlock_client *o = new_client(rh_uris(rc));       /* a reader of another client */
    assert_rc(distlock_client_set(p, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 20000), DISTLOCK_OK);

    distlock_lock *r0 = NULL, *r1 = NULL;
    assert_rc(distlock_acquire(d, "wg", 30000, 0, DISTLOCK_SHARED, &r0), DISTLOCK_OK);

    writer wb = { .c = p, .token = "one-owner", .wait_ms = 25000 };
    pthread_t tb, ta;
    assert_int_equal(pthread_create(&tb, NULL, write_wait, &wb), 0);
    assert_true(RH_WAIT_UNTIL(has_intent(rc) && numsub(rc) >= 1, 10000));

    /* writer A waits too (subscribed: its first attempt, which noted it in
     * the registry, is done): a blocking acquire on a thread, or a multi's
     * acquire driven here */
    writer wa = { .c = d, .token = "one-owner", .wait_ms = slow_bound(3000, 8000) };
    distlock_multi *m = NULL;
    distlock_op *op = NULL;
    long long t0 = 0;
    if (a_multi) {
        distlock_acquire_args a = { .size = sizeof a, .token = wa.token };
        assert_rc(distlock_multi_new(d, &m), DISTLOCK_OK);
        t0 = rh_now_ms();
        assert_rc(distlock_multi_acquire(m, "wg", 30000, wa.wait_ms, 0, &a, &op), DISTLOCK_OK);
        long long end = rh_now_ms() + 10000;
        while (numsub(rc) < 2 && !distlock_op_done(op) && rh_now_ms() < end)
            multi_turn(m, 20);
    } else {
        assert_int_equal(pthread_create(&ta, NULL, write_wait, &wa), 0);
        assert_true(RH_WAIT_UNTIL(numsub(rc) >= 2 || atomic_load(&wa.done), 10000));
    }
    long both = registered_writers(rc);

    /* B's next attempt stays in the proxy; A gives up (its budget spent) */
    fp_ok(e->fp, "hold 0 up");
    int a_waited_then = a_multi ? !distlock_op_done(op) : !atomic_load(&wa.done);
    if (a_multi) {
        multi_drive_until(m, op, 30000);
        wa.rc = distlock_op_status(op);
        wa.waited_ms = rh_now_ms() - t0;
    } else {
        pthread_join(ta, NULL);
    }
    int intent = has_intent(rc);
    long still = registered_writers(rc);  /* B only: A left */

    /* B still waits: a reader of another client arriving now is refused */
    int r = distlock_acquire(o, "wg", 30000, 0, DISTLOCK_SHARED, &r1);
    printf("two writers with one token waiting (A %s): %ld registered; writer A: %s after %lld "
           "ms; intent left: %d; writers registered: %ld; a new reader: %s\n",
           a_multi ? "a multi's" : "blocking", both, distlock_strerror(wa.rc), wa.waited_ms,
           intent, still, distlock_strerror(r));
    if (m)
        distlock_multi_free(m);

    fp_ok(e->fp, "unhold 0 up");
    if (r1) {
        assert_rc(distlock_release(r1), DISTLOCK_OK);
        distlock_lock_free(r1);
    }
    assert_rc(distlock_release(r0), DISTLOCK_OK);
    pthread_join(tb, NULL);
    long left = registered_writers(rc);
    printf("writer B: %s after %lld ms; writers registered after it won: %ld\n",
           distlock_strerror(wb.rc), wb.waited_ms, left);
    assert_rc(wb.rc, DISTLOCK_OK);
    assert_string_equal(distlock_lock_token(wb.l), "one-owner");
    assert_rc(distlock_release(wb.l), DISTLOCK_OK);
    distlock_lock_free(wb.l);
    distlock_lock_free(r0);

    assert_true(a_waited_then);   /* A was still waiting when B's attempts were held */
    assert_rc(wa.rc, DISTLOCK_NOTACQUIRED);
    assert_rc(r, DISTLOCK_NOTACQUIRED);
    assert_true(intent);
    assert_int_equal(still, 1);
    assert_int_equal(both, 2);
    assert_int_equal(left, 0);
    distlock_client_free(o);
    distlock_client_free(p);
    distlock_client_free(d);
}

static void test_two_waiting_writers_with_one_token_keep_readers_out_until_the_last_gives_up(
    void **state)
{
    two_writers_one_token(state, 0);
}

/* The same with writer A a multi's acquire (distlock_multi_acquire): its
 * wait starts in the multi, not on a blocking call's first attempt. */
static void test_two_writers_with_one_token_one_a_multis_keep_readers_out_until_the_last_gives_up(
    void **state)
{
    two_writers_one_token(state, 1);
}

#define READER_TTL 1000

typedef struct stream {
    distlock_client *c;
    atomic_int stop, reads, errors;
} stream;

/* Readers keep arriving: each takes a read lock, holds it 150 ms, and a
 * next one comes before it leaves, so the key is never free of readers. */
static void *reader_stream(void *arg)
{
    stream *s = arg;
    while (!atomic_load(&s->stop)) {
        distlock_lock *l = NULL;
        int r = distlock_acquire(s->c, "wg", READER_TTL, 200, DISTLOCK_SHARED, &l);
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

/* Writer 1 takes the key after the readers (the zset and the intent go:
 * the key is its string lock) and releases it while readers keep
 * arriving; writer 2, which has waited since before, is woken by that
 * release as the readers are, and its attempt is the slower one (held in
 * the proxy until readers are in). The promise: writer 2 gets the key
 * within one reader TTL after writer 1's release. */
static void test_writer_gets_key_within_reader_ttl_after_another_writer_releases(void **state)
{
    proxy_env *e = *state;
    rh_cluster *rc = e->rc;
    distlock_client *d = new_client(rh_uris(rc));
    distlock_client *p = new_client(fp_uris(e->fp));
    assert_rc(distlock_client_set(p, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 20000), DISTLOCK_OK);
    stream s = { .c = new_client(rh_uris(rc)) };

    distlock_lock *r0 = NULL;
    assert_rc(distlock_acquire(d, "wg", 30000, 0, DISTLOCK_SHARED, &r0), DISTLOCK_OK);
    writer w2 = { .c = p, .wait_ms = 25000 };
    pthread_t t2, t1, tr[4];
    assert_int_equal(pthread_create(&t2, NULL, write_wait, &w2), 0);
    assert_true(RH_WAIT_UNTIL(has_intent(rc) && numsub(rc) >= 1, 10000));
    writer w1 = { .c = d, .wait_ms = 25000 };
    assert_int_equal(pthread_create(&t1, NULL, write_wait, &w1), 0);
    assert_true(RH_WAIT_UNTIL(numsub(rc) >= 2, 10000));

    /* writer 2's attempts stay in the proxy: writer 1 gets the key */
    fp_ok(e->fp, "hold 0 up");
    assert_rc(distlock_release(r0), DISTLOCK_OK);
    pthread_join(t1, NULL);
    assert_rc(w1.rc, DISTLOCK_OK);

    /* readers come, wait behind writer 1, and keep arriving once it goes */
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&tr[i], NULL, reader_stream, &s), 0);
    long long released = rh_now_ms();
    assert_rc(distlock_release(w1.l), DISTLOCK_OK);
    /* the readers won the race the release started */
    int readers_in = RH_WAIT_UNTIL(atomic_load(&s.reads) >= 1, 10000);
    fp_ok(e->fp, "unhold 0 up");
    pthread_join(t2, NULL);
    long long after_release = w2.done_ms - released;
    int reads_before = atomic_load(&s.reads);
    atomic_store(&s.stop, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(tr[i], NULL);
    printf("writer 1 won and released; readers got in: %d; writer 2: %s %lld ms after that "
           "release (reader ttl %d ms, %d reads before it)\n", readers_in,
           distlock_strerror(w2.rc), after_release, READER_TTL, reads_before);
    assert_rc(w2.rc, DISTLOCK_OK);
    assert_rc(distlock_release(w2.l), DISTLOCK_OK);
    distlock_lock_free(w2.l);
    distlock_lock_free(w1.l);
    distlock_lock_free(r0);

    assert_true(readers_in);
    assert_int_equal(atomic_load(&s.errors), 0);
    assert_true(after_release < READER_TTL + slow_bound(300, 1500));
    distlock_client_free(s.c);
    distlock_client_free(p);
    distlock_client_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_writer_keeps_intent_when_another_writer_gives_up, heal),
        cmocka_unit_test_setup(
            test_two_waiting_writers_with_one_token_keep_readers_out_until_the_last_gives_up,
            heal),
        cmocka_unit_test_setup(
            test_two_writers_with_one_token_one_a_multis_keep_readers_out_until_the_last_gives_up,
            heal),
        cmocka_unit_test_setup(
            test_writer_gets_key_within_reader_ttl_after_another_writer_releases, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
