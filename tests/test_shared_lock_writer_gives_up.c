/* test_shared_lock_writer_gives_up.c -- two writers wait for the readers of
 * one key and one of them gives up (cancelled), against a real
 * redis-server; the other writer's connection goes through the fault proxy,
 * which holds its next attempt (a slow link, or simply the race every
 * release starts: its wake-up and the readers' both go out at once).
 * docs/shared-locks.md: "A writer that waits and finds readers marks its
 * intent ... Readers that arrive from then on are refused, so the writer
 * gets the key once the readers already in are gone: within one reader TTL
 * after it starts waiting." The writer still waiting must keep that: a
 * reader arriving after the other writer gave up is refused. */
#include "test_common.h"
#include "test_proxy_cluster.h"

#include <pthread.h>

DEFINE_PROXY_GROUP(1)

typedef struct writer {
    distlock_client *c;
    distlock_cancel *cancel;
    long wait_ms;
    int rc;
    long long waited_ms;
    distlock_lock *l;
} writer;

static void *write_wait(void *arg)
{
    writer *w = arg;
    distlock_acquire_args a = { .size = sizeof a, .cancel = w->cancel };
    long long t0 = rh_now_ms();
    w->rc = distlock_acquire_with(w->c, "wg", 30000, w->wait_ms, 0, &a, &w->l);
    w->waited_ms = rh_now_ms() - t0;
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

    /* writer 2 still waits: a reader arriving now is refused */
    int r = distlock_acquire(d, "wg", 30000, 0, DISTLOCK_SHARED, &r1);
    printf("writer 1 gave up; writer 2 still waiting; intent left: %d; a new reader: %s\n",
           intent, distlock_strerror(r));

    fp_ok(e->fp, "unhold 0 up");
    if (r1) {
        assert_rc(distlock_release(r1), DISTLOCK_OK);
        distlock_lock_free(r1);
    }
    assert_rc(distlock_release(r0), DISTLOCK_OK);
    pthread_join(t2, NULL);
    printf("writer 2: %s after %lld ms\n", distlock_strerror(w2.rc), w2.waited_ms);
    assert_rc(w2.rc, DISTLOCK_OK);
    distlock_lock_free(w2.l);
    distlock_lock_free(r0);
    distlock_cancel_free(w1.cancel);

    assert_rc(r, DISTLOCK_NOTACQUIRED);
    distlock_client_free(p);
    distlock_client_free(d);
}

/* The same when the other writer wins: writer 1 takes the key after the
 * readers (the zset and its intent go), then releases it; writer 2, which
 * has waited since before, still keeps a reader arriving now out. */
static void test_writer_keeps_intent_when_another_writer_wins(void **state)
{
    proxy_env *e = *state;
    rh_cluster *rc = e->rc;
    distlock_client *d = new_client(rh_uris(rc));
    distlock_client *p = new_client(fp_uris(e->fp));
    assert_rc(distlock_client_set(p, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 20000), DISTLOCK_OK);

    distlock_lock *r0 = NULL, *r1 = NULL;
    assert_rc(distlock_acquire(d, "wg", 30000, 0, DISTLOCK_SHARED, &r0), DISTLOCK_OK);
    writer w2 = { .c = p, .wait_ms = 25000 };
    pthread_t t2, t1;
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
    assert_rc(distlock_release(w1.l), DISTLOCK_OK);

    int r = distlock_acquire(d, "wg", 30000, 0, DISTLOCK_SHARED, &r1);
    printf("writer 1 won and released; writer 2 still waiting; a new reader: %s\n",
           distlock_strerror(r));
    fp_ok(e->fp, "unhold 0 up");
    if (r1) {
        assert_rc(distlock_release(r1), DISTLOCK_OK);
        distlock_lock_free(r1);
    }
    pthread_join(t2, NULL);
    assert_rc(w2.rc, DISTLOCK_OK);
    distlock_lock_free(w2.l);
    distlock_lock_free(w1.l);
    distlock_lock_free(r0);

    assert_rc(r, DISTLOCK_NOTACQUIRED);
    distlock_client_free(p);
    distlock_client_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_writer_keeps_intent_when_another_writer_gives_up, heal),
        cmocka_unit_test_setup(test_writer_keeps_intent_when_another_writer_wins, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
