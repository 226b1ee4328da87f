/* test_sentinel_answer_from_replaced_master_not_counted.c -- a call out on
 * a Sentinel node's master when the sentinels announce a failover does not
 * count what that old master answers afterwards (docs/sentinel.md,
 * "Following the sentinels' word": "whatever the old one answers is not
 * counted").
 *
 * The old master is paused (SIGSTOP) with an acquire on its way to it; the
 * test makes the failover with SENTINEL FAILOVER to one sentinel (its
 * leader, whose +failover-state-wait-promotion the client's thread and the
 * test hear at the same moment) and resumes the old master a moment after
 * that announcement, as a host that was only slow would: it then runs the
 * acquire and answers. That grant is lost once the promotion completes (the
 * old master is converted to a replica of the new one), so the acquire must
 * not report it: whatever it returns must be true of the new master
 * (granted there with its token), or be a failure. The same for a release
 * (the lock held, on both replicas): released on the new master or a
 * failure, never "not ours", never lost; and an extend: extended there or
 * a failure, never lost. Several trials: the
 * client's 200 ms look at its node is at some point of its interval, and
 * only an answer read before it is the case under test. Real processes
 * only: tests/harness/sentinels.py (1 master, 2 replicas, 3 sentinels). */
#include "test_common.h"
#include "harness/sentinel_harness.h"
#include "test_sentinel_calls.h"

#define DATA_PASS "data-pw-1"
#define COMMAND_TIMEOUT_MS 60000
/* the old master comes back this long after the leader's announcement (a
 * host that was slow, not dead): within the client's 200 ms interval */
#define RESUME_AFTER_MS 20
#define TRIALS 3
#define CALL_BOUND_MS 15000
/* from the announcement to the call's end when the old master stays
 * paused: the 200 ms look, the lookup, connect, ROLE and the call (as
 * test_sentinel_call_in_flight_follows_announced_failover's bound) */
#define FOLLOW_BOUND_MS 10000

#define TTL_MS 30000
#define EXTEND_TTL_MS 90000

/* The sentinels' connection subscribed to the leader's announcement, its
 * confirmation read. */
static redisContext *subscribe_announcements(rh_sentinels *g, int k)
{
    redisContext *sub = sentinel_connect(g, k);
    if (sub == NULL)
        return NULL;
    struct timeval tv = { 30, 0 };
    redisSetTimeout(sub, tv);
    redisReply *r = redisCommand(sub, "SUBSCRIBE +failover-state-wait-promotion");
    if (r == NULL) {
        redisFree(sub);
        return NULL;
    }
    freeReplyObject(r);
    return sub;
}

/* Blocks until the announcement comes on sub: 0, or -1. */
static int wait_announcement(redisContext *sub, char *text, size_t size)
{
    for (;;) {
        void *p = NULL;
        if (redisGetReply(sub, &p) != REDIS_OK)
            return -1;
        redisReply *m = p;
        int hit = m->type == REDIS_REPLY_ARRAY && m->elements == 3 &&
                  strcmp(m->element[0]->str, "message") == 0;
        if (hit)
            snprintf(text, size, "%s", m->element[2]->str);
        freeReplyObject(m);
        if (hit)
            return 0;
    }
}

/* One trial; 1 if the acquire reported a grant the new master does not
 * have (the old master's answer counted), or (keep_paused: the old master
 * resumed only once the call ended) the call did not end within
 * FOLLOW_BOUND_MS of the announcement; 0 if not, -1 if the trial did not
 * run as planned. */
static int trial(rh_sentinels *g, distlock_client *c, int n, int multi, int keep_paused, int op)
{
    int old = rh_sentinels_master(g);
    if (old <= 0)
        return -1;
    char key[64];
    snprintf(key, sizeof key, "answer-after-announcement-%d-%d-%d-%d", op, multi, keep_paused, n);
    sentinel_call o = { .c = c, .op = op, .key = key, .multi = multi,
                        .ttl_ms = op == SC_EXTEND ? EXTEND_TTL_MS : TTL_MS };
    if (op != SC_ACQUIRE) {
        /* held, and on both replicas (either may be promoted) */
        assert_rc(distlock_acquire(c, o.key, TTL_MS, 0, 0, &o.lock), DISTLOCK_OK);
        snprintf(o.won, sizeof o.won, "%s", distlock_lock_token(o.lock));
        int everywhere = 1;
        for (int k = 0; k < 3; k++)
            if (g->data_port[k] != old)  /* a master converted since: its resync first */
                everywhere &= RH_WAIT_UNTIL(
                    rh_sentinels_has(g, g->data_port[k], o.key, o.won) == 1, 20000);
        if (!everywhere) {
            printf("trial %d: the key did not reach every replica\n", n);
            distlock_lock_abandon(o.lock);
            return -1;
        }
    }
    redisContext *sub = subscribe_announcements(g, 0);
    redisContext *sc = sentinel_connect(g, 0);
    if (sub == NULL || sc == NULL)
        return -1;

    assert_int_equal(rh_sentinels_signal(g, old, 1), 0);
    long long paused = rh_now_ms();
    pthread_t th;
    sentinel_call_start(&o, &th);
    int forced = 0;
    for (int tries = 0; tries < 200 && !forced; tries++) {
        redisReply *r = redisCommand(sc, "SENTINEL FAILOVER mymaster");
        forced = r && r->type == REDIS_REPLY_STATUS;
        if (r)
            freeReplyObject(r);
        if (!forced)
            rh_sleep_ms(50);  /* retry pace while the sentinel refuses (a failover under way) */
    }
    redisFree(sc);
    char text[256] = "";
    long long announced = -1, resumed = -1;
    if (forced && wait_announcement(sub, text, sizeof text) == 0) {
        announced = rh_now_ms();
        if (keep_paused)
            (void)RH_WAIT_UNTIL(atomic_load(&o.done), CALL_BOUND_MS);
        else
            rh_sleep_ms(RESUME_AFTER_MS);  /* the fault's shape: the old host answers late */
    }
    assert_int_equal(rh_sentinels_signal(g, old, 0), 0);
    resumed = rh_now_ms();
    redisFree(sub);
    int ended = RH_WAIT_UNTIL(atomic_load(&o.done), CALL_BOUND_MS);
    long long end_ms = o.ended_ms;
    int now_master = rh_sentinels_wait_master_not(g, old, 30000);
    int on_old = o.rc == DISTLOCK_OK || op != SC_ACQUIRE ? rh_sentinels_has(g, old, o.key, o.won)
                                                         : -2;
    int on_new = (o.rc == DISTLOCK_OK || op != SC_ACQUIRE) && now_master > 0
                     ? rh_sentinels_has(g, now_master, o.key, o.won) : -2;
    long long pttl = now_master > 0 ? pttl_on(now_master, DATA_PASS, o.key) : -3;
    int lost = o.lock ? distlock_lock_lost(o.lock) : 0;
    printf("trial %d (%s %s): old master %d paused; announced %lld ms later (%s); resumed %lld ms "
           "after the announcement; the call ended %lld ms after the announcement: rc %d %s; new "
           "master %d has the key with its token: %d (PTTL %lld ms); old master: %d; lock lost: %d\n",
           n, op == SC_ACQUIRE ? "acquire" : op == SC_RELEASE ? "release" : "extend",
           multi ? "multi" : "blocking", old, announced - paused, text, resumed - announced,
           end_ms - announced, o.rc, o.detail, now_master, on_new, pttl, on_old, lost);
    if (o.lock)
        distlock_lock_abandon(o.lock);
    if (ended)
        assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(ended);
    if (!forced || announced < 0 || now_master <= 0)
        return -1;
    if (keep_paused && end_ms - announced > FOLLOW_BOUND_MS)
        return 1;
    if (op == SC_RELEASE)  /* released where the lock is now; never "not ours" of a held lock */
        return o.rc == DISTLOCK_ENOTOWNER || lost || (o.rc == DISTLOCK_OK && on_new != 0);
    if (op == SC_EXTEND)  /* extended where the lock is now; never lost while held there */
        return o.rc == DISTLOCK_ENOTOWNER || lost ||
               (o.rc == DISTLOCK_OK && (on_new != 1 || pttl <= TTL_MS));
    return o.rc == DISTLOCK_OK && on_new != 1;
}

static void run(int multi, int keep_paused, int op)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* No automatic failover while the old master is paused: the test's
     * SENTINEL FAILOVER is the only one, and sentinel 0 leads it. */
    rh_sentinels_opts opts = { .data_pass = DATA_PASS, .down_after_ms = 60000,
                               .failover_timeout_ms = 3000 };
    rh_sentinels *g = rh_sentinels_start(&opts);
    assert_non_null(g);
    distlock_client *c = sentinel_call_client(g, 0, COMMAND_TIMEOUT_MS,
                                              "answer-after-announcement-warm");
    assert_true(RH_WAIT_UNTIL(client_listens_on(g, 0), 10000));

    int wrong = 0, ran = 0;
    for (int n = 0; n < (keep_paused ? 1 : TRIALS); n++) {
        int rc = trial(g, c, n, multi, keep_paused, op);
        if (rc < 0)
            break;
        ran++;
        wrong += rc;
        /* the next trial's master: the old one converted, the group settled */
        (void)RH_WAIT_UNTIL(rh_sentinels_master(g) > 0, 10000);
    }
    printf("trials run: %d; %s: %d\n", ran,
           keep_paused ? "calls not ended within the bound"
           : op == SC_ACQUIRE ? "grants of the replaced master counted"
                              : "outcomes not true of the new master",
           wrong);
    distlock_client_free(c);
    rh_sentinels_stop(g);
    assert_true(ran > 0);
    assert_int_equal(wrong, 0);
}

static void test_answer_of_replaced_master_is_not_counted(void **state)
{
    (void)state;
    run(0, 0, SC_ACQUIRE);
}

static void test_answer_of_replaced_master_is_not_counted_multi(void **state)
{
    (void)state;
    run(1, 0, SC_ACQUIRE);
}

/* The old master stays paused: the multi's own timeout brings the look at
 * the node (distlock_multi_timeout), not the command timeout. */
static void test_multi_call_in_flight_follows_announced_failover(void **state)
{
    (void)state;
    run(1, 1, SC_ACQUIRE);
}

/* A release out on the old master when the announcement comes: released
 * on the new master (the old one's answer not counted), or a failure;
 * never "not ours" of the held lock, never lost. */
static void test_release_in_flight_at_announcement(void **state)
{
    (void)state;
    run(0, 0, SC_RELEASE);
}

/* An extend: extended on the new master, or a failure; never lost. */
static void test_extend_in_flight_at_announcement(void **state)
{
    (void)state;
    run(0, 0, SC_EXTEND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answer_of_replaced_master_is_not_counted),
        cmocka_unit_test(test_answer_of_replaced_master_is_not_counted_multi),
        cmocka_unit_test(test_multi_call_in_flight_follows_announced_failover),
        cmocka_unit_test(test_release_in_flight_at_announcement),
        cmocka_unit_test(test_extend_in_flight_at_announcement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
