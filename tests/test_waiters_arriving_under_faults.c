/* test_waiters_arriving_under_faults.c -- the promises of a client's
 * waiting calls for one key that take turns (only the longest-waiting one
 * re-checks; a new call joins them instead of sending a first attempt:
 * docs/guarantees.md "Waiting threads of one client take turns"), put
 * under faults and odd arrivals:
 * - one attempt stream per key, also when one node of three is slower
 *   than the others (a round ends at its quorum, the slow node unheard);
 * - a call queued behind the turn ends at its deadline, also while its
 *   subscription cannot be confirmed (a node that never answers SUBSCRIBE);
 * - a key that frees by expiry (no message) while only queued arrivals are
 *   left is taken within about a re-check interval;
 * - a waiter without the turn re-checks no later than the holder's lease
 *   end as the one with the turn saw it (that one may give up before);
 * - read locks arriving behind a waiting reader all enter at the writer's
 *   release; permits arriving behind a permit waiter are served by each
 *   release, not at a deadline;
 * - 200 threads arriving at once add no attempts beside the turn's, and
 *   are served one at a time; a reentrant owner's re-entry is not queued.
 * - a Sentinel failover mid-wait: the release on the new master serves the
 *   thread with the turn and the call queued behind it.
 * Waiters are threads of one client, the holders other clients. */
#include "test_common.h"
#include "test_wake_waiter.h"
/* Its waiting threads ask for 30 s leases: the locks they keep stay held
 * across a cancel of the others and their joins. */
#define WAITING_THREAD_TTL_MS 30000
#include "test_waiting_threads.h"
#include "harness/faultproxy.h"
#include "harness/sentinel_harness.h"

DEFINE_GROUP(1)
DEFINE_GROUP_SETUP(3)

/* The key frees without a message, as when its holder's lease ends. */
static void free_key_silently(rh_cluster *rc, int nodes, const char *key)
{
    for (int i = 0; i < nodes; i++) {
        redisReply *r = rh_command(rc, i, 0, "DEL %s", key);
        assert_non_null(r);
        freeReplyObject(r);
    }
}

/* Six threads wait for a held key with DISTLOCK_FENCING (its attempts are
 * the acquire script, not a plain SET) on 3 nodes, node 2 answering 150 ms
 * late: every refused round ends at its quorum (nodes 0 and 1), node 2
 * unheard. That is no read lock found: the threads keep taking turns, so
 * node 0 sees one re-check stream (re-checks 200-400 ms apart), not six. */
static void test_fencing_waiters_keep_one_turn_with_one_slow_node(void **state)
{
    enum { N = 6 };
    rh_cluster *rc = *state;
    const char *key = "arrivalfault:slow-node";
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(fp_uris(fp), 200, 400);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 3000), DISTLOCK_OK);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    assert_int_equal(fp_cmd(fp, NULL, 0, "delay 2 150 down"), 0);
    static waiting_thread w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 30000, .flags = DISTLOCK_FENCING };
        waiting_thread_start_sleeping(&w[i]);
    }
    long long at0 = attempt_commands_run(rc, 0), t0 = rh_now_ms();
    sleep_until_ms(t0 + 2000);  /* the window measured, not a synchronisation */
    long long sent = attempt_commands_run(rc, 0) - at0, window = rh_now_ms() - t0;
    printf("# %d fencing waiters, node 2 slow: %lld attempts on node 0 in %lld ms (one turn "
           "re-checking 200-400 ms apart sends at most %lld)\n", N, sent, window,
           window / 200 + 2);
    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    int served = 0;
    for (int i = 0; i < N; i++) {
        waiting_thread_join(&w[i], "fencing waiter");
        served += w[i].rc == DISTLOCK_OK;
    }
    (void)fp_cmd(fp, NULL, 0, "heal");
    distlock_client_free(c);
    distlock_client_free(holder);
    fp_stop(fp);
    assert_int_equal(served, N);
    assert_true(sent <= window / 200 + 2);
    assert_holding(rc, key, NULL, 0);
}

/* One node whose SUBSCRIBE is never answered (held by the proxy; the
 * connect timeout, 3 s, bounds the wait for its confirmation). A thread
 * waits for a held key; a second call arrives with a 300 ms budget and
 * queues behind it. It must end at its deadline (NOTACQUIRED after about
 * 300 ms), not once the subscription's confirmation is given up. */
static void test_queued_arrival_ends_at_its_deadline_with_subscription_unconfirmed(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "arrivalfault:unconfirmed";
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(fp_uris(fp), 50, 100);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 3000), DISTLOCK_OK);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    char hex[64];
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold-match 0 up %s 100",
                            fp_hex("SUBSCRIBE", hex, sizeof hex)), 0);
    waiting_thread first = { .c = c, .key = key, .wait_ms = 30000 };
    waiting_thread_start_sleeping(&first);
    assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held 0 up 1 10000"), 0);
    waiting_thread arrival = { .c = c, .key = key, .wait_ms = 300 };
    waiting_thread_start(&arrival);
    waiting_thread_join(&arrival, "arrival");
    assert_rc(distlock_client_cancel(c), DISTLOCK_OK);
    waiting_thread_join(&first, "first");
    (void)fp_cmd(fp, NULL, 0, "heal");
    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(holder);
    fp_stop(fp);
    assert_rc(arrival.rc, DISTLOCK_NOTACQUIRED);
    assert_true(arrival.done_ms - arrival.started_ms >= 300);
    assert_true(arrival.done_ms - arrival.started_ms < slow_bound(1000, 2000));
    assert_holding(rc, key, NULL, 0);
}

/* The same without a thread waiting before it: the call's first attempt is
 * refused, then its subscription is never confirmed; it ends at its
 * deadline (300 ms) all the same, not once the confirmation is given up. */
static void test_waiting_call_ends_at_its_deadline_with_subscription_unconfirmed(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "arrivalfault:unconfirmed-alone";
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(fp_uris(fp), 50, 100);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 3000), DISTLOCK_OK);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    char hex[64];
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold-match 0 up %s 100",
                            fp_hex("SUBSCRIBE", hex, sizeof hex)), 0);
    waiting_thread alone = { .c = c, .key = key, .wait_ms = 300 };
    waiting_thread_start(&alone);
    waiting_thread_join(&alone, "alone");
    (void)fp_cmd(fp, NULL, 0, "heal");
    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(holder);
    fp_stop(fp);
    assert_rc(alone.rc, DISTLOCK_NOTACQUIRED);
    assert_true(alone.done_ms - alone.started_ms >= 300);
    assert_true(alone.done_ms - alone.started_ms < slow_bound(1000, 2000));
    assert_holding(rc, key, NULL, 0);
}

/* The thread with the turn (a 1.5 s budget) gives up; only calls that
 * arrived behind it are left (waiting forever, re-checks 200-400 ms
 * apart), none of which ever looked at the key. The key then frees by
 * expiry (no message): the oldest of them takes it within about a
 * re-check interval, not never. */
static void test_key_freed_silently_taken_when_only_queued_arrivals_are_left(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "arrivalfault:only-arrivals";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 200, 400);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    waiting_thread first = { .c = c, .key = key, .wait_ms = 1500 };
    waiting_thread_start_sleeping(&first);
    waiting_thread a = { .c = c, .key = key, .wait_ms = DISTLOCK_WAIT_FOREVER, .keep = 1 };
    waiting_thread b = { .c = c, .key = key, .wait_ms = DISTLOCK_WAIT_FOREVER, .keep = 1 };
    waiting_thread_start_sleeping(&a);
    waiting_thread_start_sleeping(&b);
    waiting_thread_join(&first, "first (turn holder)");
    free_key_silently(rc, 1, key);
    long long freed = rh_now_ms();
    int taken = RH_WAIT_UNTIL(atomic_load(&a.done) || atomic_load(&b.done), 10000);
    long long took = rh_now_ms() - freed;
    printf("# the key freed silently with only queued arrivals left: taken after %lld ms "
           "(a %d, b %d)\n", took, atomic_load(&a.done), atomic_load(&b.done));
    assert_rc(distlock_client_cancel(c), DISTLOCK_OK);
    waiting_thread_join(&a, "a");
    waiting_thread_join(&b, "b");
    waiting_thread_drop_lock(&a);
    waiting_thread_drop_lock(&b);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(holder);
    assert_rc(first.rc, DISTLOCK_NOTACQUIRED);
    assert_true(taken);
    assert_true(took < slow_bound(1500, 3000));
    assert_rc(a.rc, DISTLOCK_OK);  /* the older of the two */
    assert_holding(rc, key, NULL, 0);
}

/* guarantees.md "Waiting": a waiter re-checks "never past the holder's
 * remaining TTL". A thread waits with the turn (a 1 s budget) for a key
 * another client holds with a 2.5 s lease it never releases (the acquire
 * script's refusal tells the holder's remaining TTL: DISTLOCK_FENCING; a
 * plain SET does not); a call arrives behind it (waiting forever; re-checks 10-20 s apart), queued, so
 * it never saw the holder's TTL itself. The thread with the turn gives up
 * before the lease ends; the arrival must take the key soon after the
 * lease ends, not at a re-check 5-20 s later. */
static void test_queued_arrival_takes_a_key_at_its_holders_lease_end(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "arrivalfault:lease-end";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 10000, 20000);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 2500, 0, 0, &held), DISTLOCK_OK);
    long long lease_end = rh_now_ms() + 2500;
    waiting_thread first = { .c = c, .key = key, .wait_ms = 1000, .flags = DISTLOCK_FENCING };
    waiting_thread_start_sleeping(&first);
    waiting_thread arrival = { .c = c, .key = key, .wait_ms = DISTLOCK_WAIT_FOREVER, .keep = 1,
                               .flags = DISTLOCK_FENCING };
    waiting_thread_start_sleeping(&arrival);
    waiting_thread_join(&first, "first (turn holder)");
    int taken = RH_WAIT_UNTIL(atomic_load(&arrival.done), 30000);
    printf("# the arrival took the key %lld ms after the holder's lease ended\n",
           rh_now_ms() - lease_end);
    long long late = rh_now_ms() - lease_end;
    assert_rc(distlock_client_cancel(c), DISTLOCK_OK);
    waiting_thread_join(&arrival, "arrival");
    waiting_thread_drop_lock(&arrival);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(holder);
    assert_rc(first.rc, DISTLOCK_NOTACQUIRED);
    assert_true(taken);
    assert_rc(arrival.rc, DISTLOCK_OK);
    assert_true(late < slow_bound(1000, 2000));
    assert_holding(rc, key, NULL, 0);
}

/* Read locks arriving behind a waiting reader, while another client's
 * writer holds the key (re-checks 10-20 s apart: only releases and
 * hand-overs serve them quickly): the writer's release lets all of them
 * in together, each soon after the one before. */
static void test_arriving_readers_enter_together_at_the_writers_release(void **state)
{
    enum { N = 5 };
    rh_cluster *rc = *state;
    const char *key = "arrivalfault:readers";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 10000, 20000);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    static waiting_thread r[N];
    for (int i = 0; i < N; i++) {
        r[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 8000, .flags = DISTLOCK_SHARED,
                                 .keep = 1 };
        waiting_thread_start_sleeping(&r[i]);
    }
    long long released = 0;
    assert_true(release_ok_started_at(held, &released));
    distlock_lock_free(held);
    long long last = 0;
    int served = 0;
    for (int i = 0; i < N; i++) {
        waiting_thread_join(&r[i], "reader");
        served += r[i].rc == DISTLOCK_OK;
        if (r[i].done_ms > last)
            last = r[i].done_ms;
    }
    printf("# %d readers (4 queued arrivals): all in %lld ms after the release\n", served,
           last - released);
    for (int i = 0; i < N; i++)
        waiting_thread_drop_lock(&r[i]);
    distlock_client_free(c);
    distlock_client_free(holder);
    assert_int_equal(served, N);
    assert_true(last - released < slow_bound(1500, 3000));
}

/* A semaphore of 2 whose permits another client holds. This client waits
 * for a permit of 2 (the turn), then permits of 2 arrive behind it, and a
 * permit of 1 of the same key (its own group). The holder releases one
 * permit, then the other: each release serves one waiter of 2 at once,
 * not at a deadline (re-checks 10-20 s apart). */
static void test_arriving_permits_served_by_each_release(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "arrivalfault:permits";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 10000, 20000);
    distlock_lock *h1 = NULL, *h2 = NULL;
    assert_rc(distlock_semaphore_acquire(holder, key, 2, 30000, 0, 0, NULL, &h1), DISTLOCK_OK);
    assert_rc(distlock_semaphore_acquire(holder, key, 2, 30000, 0, 0, NULL, &h2), DISTLOCK_OK);
    waiting_thread p[3];
    for (int i = 0; i < 3; i++) {
        p[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 8000, .permits = 2, .keep = 1 };
        waiting_thread_start_sleeping(&p[i]);
    }
    long long r1 = 0, r2 = 0;
    assert_true(release_ok_started_at(h1, &r1));
    int one = RH_WAIT_UNTIL(atomic_load(&p[0].done), 5000);
    long long one_at = rh_now_ms() - r1;
    assert_true(release_ok_started_at(h2, &r2));
    int two = RH_WAIT_UNTIL(atomic_load(&p[1].done), 5000);
    long long two_at = rh_now_ms() - r2;
    printf("# permits of 2: first served %lld ms after a release (%d), second %lld ms after the "
           "next (%d)\n", one_at, one, two_at, two);
    assert_rc(distlock_client_cancel(c), DISTLOCK_OK);
    for (int i = 0; i < 3; i++) {
        waiting_thread_join(&p[i], "permit waiter");
        waiting_thread_drop_lock(&p[i]);
    }
    distlock_lock_free(h1);
    distlock_lock_free(h2);
    distlock_client_free(c);
    distlock_client_free(holder);
    assert_true(one);
    assert_true(two);
    assert_rc(p[0].rc, DISTLOCK_OK);
    assert_rc(p[1].rc, DISTLOCK_OK);
    assert_rc(p[2].rc, DISTLOCK_ECANCELED);
    assert_true(one_at < slow_bound(1500, 3000));
    assert_true(two_at < slow_bound(1500, 3000));
}

/* 200 threads arrive at once while one thread of the client waits with the
 * turn (re-checks 200-400 ms apart) for a key another client holds: they
 * queue behind it, so node 0 sees about one re-check stream meanwhile, not
 * an attempt per arrival; the release then serves all 201 one at a time,
 * never two together. */
static void test_crowd_arriving_at_once_queues_behind_the_turn(void **state)
{
    enum { CROWD = 200 };
    rh_cluster *rc = *state;
    const char *key = "arrivalfault:crowd";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 200, 400);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 5000), DISTLOCK_OK);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 60000, 0, 0, &held), DISTLOCK_OK);
    atomic_int inside, overlaps;
    atomic_init(&inside, 0);
    atomic_init(&overlaps, 0);
    waiting_thread *w = calloc(CROWD + 1, sizeof *w);
    assert_non_null(w);
    for (int i = 0; i <= CROWD; i++)
        w[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 60000, .inside = &inside,
                                 .overlaps = &overlaps };
    waiting_thread_start_small_stack(&w[0]);
    assert_true(RH_WAIT_UNTIL(waiting_thread_sleeping(&w[0]), 10000));
    long long at0 = attempt_commands_run(rc, 0), t0 = rh_now_ms();
    for (int i = 1; i <= CROWD; i++)
        waiting_thread_start_small_stack(&w[i]);
    int all = 1;
    for (int i = 1; i <= CROWD; i++)
        all &= RH_WAIT_UNTIL(waiting_thread_sleeping(&w[i]), 30000);
    long long sent = attempt_commands_run(rc, 0) - at0, window = rh_now_ms() - t0;
    printf("# %d threads arrived at once beside one waiting: %lld attempts in %lld ms (one turn "
           "re-checking 200-400 ms apart sends at most %lld)\n", CROWD, sent, window,
           window / 200 + 2);
    long long released = 0;
    assert_true(release_ok_started_at(held, &released));
    distlock_lock_free(held);
    int served = 0;
    long long last = 0;
    for (int i = 0; i <= CROWD; i++) {
        pthread_join(w[i].t, NULL);
        served += w[i].rc == DISTLOCK_OK;
        if (w[i].rc != DISTLOCK_OK && served + 5 > i)
            printf("# waiter %d: %d (%s)\n", i, w[i].rc, w[i].detail);
        if (w[i].done_ms > last)
            last = w[i].done_ms;
    }
    printf("# all %d served within %lld ms of the release\n", served, last - released);
    free(w);
    distlock_client_free(c);
    distlock_client_free(holder);
    assert_true(all);
    assert_true(sent <= window / 200 + 2);
    assert_int_equal(served, CROWD + 1);
    assert_int_equal(atomic_load(&overlaps), 0);
    assert_holding(rc, key, NULL, 0);
}

/* A reentrant call whose owner already holds the key (a thread of the
 * client) is not queued behind the client's waiters of that key: it
 * re-enters at once, while another thread still waits with the turn. */
static void test_reentrant_owner_not_queued_behind_waiters_of_its_key(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "arrivalfault:reentrant";
    distlock_client *c = new_waiting_client(rh_uris(rc), 10000, 20000);
    distlock_acquire_args args = { .size = sizeof args, .owner = "job-7" };
    distlock_lock *outer = NULL, *inner = NULL;
    assert_rc(distlock_acquire_with(c, key, 30000, 0, DISTLOCK_REENTRANT, &args, &outer),
              DISTLOCK_OK);
    waiting_thread other = { .c = c, .key = key, .wait_ms = 30000 };
    waiting_thread_start_sleeping(&other);
    long long t0 = rh_now_ms();
    int rc_inner = distlock_acquire_with(c, key, 30000, 5000, DISTLOCK_REENTRANT, &args, &inner);
    long long took = rh_now_ms() - t0;
    printf("# the owner's re-entry beside a waiting thread: %d after %lld ms\n", rc_inner, took);
    if (inner) {
        assert_rc(distlock_release(inner), DISTLOCK_OK);
        distlock_lock_free(inner);
    }
    assert_rc(distlock_release(outer), DISTLOCK_OK);
    distlock_lock_free(outer);
    waiting_thread_join(&other, "other");
    distlock_client_free(c);
    assert_rc(rc_inner, DISTLOCK_OK);
    assert_true(took < 1000);
    assert_rc(other.rc, DISTLOCK_OK);
    assert_holding(rc, key, NULL, 0);
}

/* Lock attempts (attempt_commands_run's count) the data node at port has
 * run: a Sentinel group's node, not a harness node. */
static long long port_attempt_commands(int port)
{
    struct timeval tv = { 2, 0 };
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", port, tv);
    redisReply *r = ctx && !ctx->err ? redisCommand(ctx, "INFO commandstats") : NULL;
    long long n = attempt_commands_in(r);
    if (r)
        freeReplyObject(r);
    if (ctx)
        redisFree(ctx);
    return n;
}

/* A Sentinel group: a thread waits with the turn and a call queued behind
 * it (re-checks 10-20 s apart) for a key another client holds; the master
 * is killed and a replica promoted. The holder's release on the new master
 * serves both, each within a few seconds of the release, not at a
 * re-check: the subscription follows the failover and the turn goes on. */
static void test_turn_and_queued_arrival_served_after_a_sentinel_failover(void **state)
{
    (void)state;
    rh_sentinels_opts o = { .down_after_ms = 1000, .failover_timeout_ms = 3000 };
    rh_sentinels *g = rh_sentinels_start(&o);
    assert_non_null(g);
    int old = rh_sentinels_master(g);
    assert_true(old > 0);
    const char *key = "arrivalfault:failover";
    distlock_client *holder = new_client(g->uri), *c = new_waiting_client(g->uri, 10000, 20000);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 60000, 0, 0, &held), DISTLOCK_OK);
    waiting_thread a = { .c = c, .key = key, .wait_ms = 50000 };
    waiting_thread b = { .c = c, .key = key, .wait_ms = 50000 };
    /* The turn's two attempts (its first, and its re-check once its
     * subscription is confirmed) are over before the master goes: the
     * failover must be met by a wait, not by an attempt on the wire
     * (whose error would end the wait, as any attempt's error does). */
    long long attempts0 = port_attempt_commands(old);
    waiting_thread_start_sleeping(&a);
    assert_true(RH_WAIT_UNTIL(port_attempt_commands(old) >= attempts0 + 2, 10000));
    waiting_thread_start_sleeping(&b);
    /* the key is on the replicas before the master goes */
    for (int k = 0; k < 3; k++)
        if (g->data_port[k] > 0 && g->data_port[k] != old)
            assert_true(RH_WAIT_UNTIL(rh_sentinels_has(g, g->data_port[k], key, NULL) > 0, 10000));
    assert_int_equal(rh_sentinels_kill(g, old), 0);
    int now_master = rh_sentinels_wait_master_not(g, old, 30000);
    assert_true(now_master > 0);
    long long released = 0;
    assert_true(RH_WAIT_UNTIL(release_ok_started_at(held, &released), 15000));
    distlock_lock_free(held);
    int both = RH_WAIT_UNTIL(atomic_load(&a.done) && atomic_load(&b.done), 30000);
    waiting_thread_join(&a, "a (turn)");
    waiting_thread_join(&b, "b (queued)");
    long long last = a.done_ms > b.done_ms ? a.done_ms : b.done_ms;
    printf("# failover %d -> %d: both served %lld ms after the release (a %d, b %d)\n", old,
           now_master, last - released, a.rc, b.rc);
    distlock_client_free(c);
    distlock_client_free(holder);
    rh_sentinels_stop(g);
    assert_true(both);
    assert_rc(a.rc, DISTLOCK_OK);
    assert_rc(b.rc, DISTLOCK_OK);
    assert_true(last - released < 5000);
}

int main(void)
{
    const struct CMUnitTest one_node[] = {
        cmocka_unit_test_setup(
            test_queued_arrival_ends_at_its_deadline_with_subscription_unconfirmed, heal),
        cmocka_unit_test_setup(
            test_waiting_call_ends_at_its_deadline_with_subscription_unconfirmed, heal),
        cmocka_unit_test_setup(test_key_freed_silently_taken_when_only_queued_arrivals_are_left,
                               heal),
        cmocka_unit_test_setup(test_queued_arrival_takes_a_key_at_its_holders_lease_end, heal),
        cmocka_unit_test_setup(test_arriving_readers_enter_together_at_the_writers_release, heal),
        cmocka_unit_test_setup(test_arriving_permits_served_by_each_release, heal),
        cmocka_unit_test_setup(test_crowd_arriving_at_once_queues_behind_the_turn, heal),
        cmocka_unit_test_setup(test_reentrant_owner_not_queued_behind_waiters_of_its_key, heal),
    };
    const struct CMUnitTest three_nodes[] = {
        cmocka_unit_test_setup(test_fencing_waiters_keep_one_turn_with_one_slow_node, heal),
    };
    const struct CMUnitTest sentinel[] = {
        cmocka_unit_test(test_turn_and_queued_arrival_served_after_a_sentinel_failover),
    };
    if (getenv("DISTLOCK_TEST_FILTER"))
        cmocka_set_test_filter(getenv("DISTLOCK_TEST_FILTER"));
    int failed = cmocka_run_group_tests_name("one node", one_node, group_setup, group_teardown);
    failed += cmocka_run_group_tests_name("three nodes", three_nodes, group_setup_3,
                                          group_teardown);
    failed += cmocka_run_group_tests_name("sentinel group", sentinel, NULL, NULL);
    return failed;
}
