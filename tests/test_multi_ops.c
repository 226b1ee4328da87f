/* test_multi_ops.c -- the non-blocking API (distlock_multi) driven from the
 * test's own poll() loop on its one descriptor and its timeout, against
 * real servers (1 and 3 nodes): acquire (plain, waiting, SHARED, semaphore
 * permits, FENCING, AUTO_RENEW, FAIR), release, extend, many keys and many
 * acquires per key from one thread, the local queue (one attempt of the
 * multi on the wire per key: counted by the servers' INFO commandstats),
 * a release through the multi handing the key over at once (also with no
 * release message: a user without channel rights), acquires served one
 * after the other keeping one subscription to their key's channel
 * (SUBSCRIBE counted by the servers' INFO commandstats), per-op cancel
 * (queued, mid-wait, mid-attempt), a try-once acquire queued before the
 * active one waits (failing then, after others left), client cancel,
 * args->cancel from another thread, the deadline, argument checks as the
 * blocking calls'. */
#include "test_common.h"
#include "test_multi_drive.h"

#include <poll.h>
#include <pthread.h>
#include <unistd.h>

static int group_setup1(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    return (*state = rh_start(1)) ? 0 : -1;
}
static int group_setup3(void **state) { return (*state = rh_start(3)) ? 0 : -1; }
static int group_teardown(void **state)
{
    rh_stop_all(*state);
    return 0;
}
static int heal(void **state) { return rh_heal(*state) == 0 ? 0 : -1; }

static distlock_client *client(rh_cluster *rc)
{
    distlock_client *c = NULL;
    assert_rc(distlock_client_new(rh_uris(rc), &c), DISTLOCK_OK);
    return c;
}

static void test_acquire_release_extend(void **state)
{
    rh_cluster *rc = *state;
    int n = rc->n;
    distlock_client *c = client(rc);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *op = NULL;
    assert_rc(distlock_multi_acquire(m, "mo:plain", 10000, 0, DISTLOCK_FENCING, NULL, &op),
              DISTLOCK_OK);
    assert_false(distlock_op_done(op));
    multi_drive_until(m, op, 5000);
    assert_op(op, DISTLOCK_OK);
    assert_string_equal(distlock_op_error(op), "");
    assert_ptr_equal(distlock_multi_done(m), op);
    assert_null(distlock_multi_done(m));
    distlock_lock *l = distlock_op_take_lock(op);
    assert_non_null(l);
    assert_null(distlock_op_take_lock(op));
    assert_true(distlock_lock_fence(l) > 0);
    assert_holding_quorum(rc, "mo:plain", distlock_lock_token(l), n);
    distlock_op_free(op);

    /* a second try-once is refused, as the blocking call's */
    assert_rc(distlock_multi_acquire(m, "mo:plain", 10000, 0, 0, NULL, &op), DISTLOCK_OK);
    multi_drive_until(m, op, 5000);
    assert_op(op, DISTLOCK_NOTACQUIRED);
    assert_true(distlock_op_error(op)[0] != '\0');
    distlock_op_free(op);

    /* extend through the multi: the servers' TTL follows */
    assert_rc(distlock_multi_extend(m, l, 60000, &op), DISTLOCK_OK);
    multi_drive_until(m, op, 5000);
    assert_op(op, DISTLOCK_OK);
    distlock_op_free(op);
    /* on a quorum, what an extend promises: it returns once a quorum
     * extended, and node 0 may be one a fresh client's first round left out */
    assert_true(count_pttl_above(rc, "mo:plain", distlock_lock_token(l), 30000) >= n / 2 + 1);
    assert_true(distlock_lock_validity_ms(l) > 30000);

    /* release through the multi */
    assert_rc(distlock_multi_release(m, l, &op), DISTLOCK_OK);
    multi_drive_until(m, op, 5000);
    assert_op(op, DISTLOCK_OK);
    distlock_op_free(op);
    assert_holding(rc, "mo:plain", NULL, 0);
    /* released twice: ENOTOWNER as distlock_release() says */
    assert_rc(distlock_multi_release(m, l, &op), DISTLOCK_OK);
    multi_drive_until(m, op, 5000);
    assert_op(op, DISTLOCK_ENOTOWNER);
    distlock_op_free(op);
    distlock_lock_free(l);
    assert_int_equal(distlock_multi_perform(m), 0);
    distlock_multi_free(m);
    distlock_client_free(c);
}

/* Argument checks are the blocking calls' (same status, same detail). */
static void test_bad_arguments(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client(rc);
    distlock_multi *m = NULL;
    distlock_op *op = (distlock_op *)1;
    distlock_lock *l = NULL;
    char want[512];
    assert_rc(distlock_multi_new(NULL, &m), DISTLOCK_EINVAL);
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    struct { long ttl, wait; unsigned flags; const char *key; } bad[] = {
        { 0, 0, 0, "k" }, { 1000, -5, 0, "k" }, { 1000, 0, 1u << 12, "k" },
        { 1000, 0, DISTLOCK_SHARED | DISTLOCK_FAIR, "k" }, { 1000, 0, 0, "" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int want_rc = distlock_acquire(c, bad[i].key, bad[i].ttl, bad[i].wait, bad[i].flags, &l);
        snprintf(want, sizeof(want), "%s", distlock_last_error());
        assert_rc(distlock_multi_acquire(m, bad[i].key, bad[i].ttl, bad[i].wait, bad[i].flags,
                                         NULL, &op), want_rc);
        assert_null(op);
        assert_string_equal(distlock_last_error(), want);
    }
    assert_fails(distlock_multi_semaphore_acquire(m, "s", 0, 1000, 0, 0, NULL, &op),
                 DISTLOCK_EINVAL);
    assert_fails(distlock_multi_acquire(m, "k", 1000, 0, DISTLOCK_REENTRANT, NULL, &op),
                 DISTLOCK_EINVAL);
    assert_non_null(strstr(distlock_last_error(), "REENTRANT"));
    assert_fails(distlock_multi_release(m, NULL, &op), DISTLOCK_EINVAL);
    assert_fails(distlock_multi_acquire(NULL, "k", 1000, 0, 0, NULL, &op), DISTLOCK_EINVAL);
    assert_int_equal(distlock_multi_fd(NULL), -1);
    assert_int_equal(distlock_op_status(NULL), DISTLOCK_EINVAL);
    distlock_multi_free(m);
    distlock_client_free(c);
}

/* Many keys, many acquires per key, one thread: every acquire of a key is
 * served in turn as the one before releases through the multi. */
static void test_many_keys_served_in_turn(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client(rc);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    enum { KEYS = 8, PER = 5 };
    distlock_op *ops[KEYS][PER];
    char key[32];
    for (int p = 0; p < PER; p++)
        for (int k = 0; k < KEYS; k++) {
            snprintf(key, sizeof(key), "mo:many:%d", k);
            assert_rc(distlock_multi_acquire(m, key, 10000, 20000, 0, NULL, &ops[k][p]),
                      DISTLOCK_OK);
        }
    int served[KEYS] = { 0 };
    long long end = rh_now_ms() + 20000;
    int total = 0, releases = 0;
    while (total < KEYS * PER || releases < KEYS * PER) {
        assert_true(rh_now_ms() < end);
        multi_turn(m, 50);
        distlock_op *op;
        while ((op = distlock_multi_done(m)) != NULL) {
            int found = 0;
            for (int k = 0; k < KEYS && !found; k++)
                if (served[k] < PER && ops[k][served[k]] == op) {
                    /* served in the order they were started */
                    assert_op(op, DISTLOCK_OK);
                    found = 1;
                    ops[k][served[k]++] = NULL;  /* freed below: its address may be reused */
                    distlock_lock *l = distlock_op_take_lock(op);
                    distlock_op *rel;
                    assert_rc(distlock_multi_release(m, l, &rel), DISTLOCK_OK);
                    /* the release is done with the handle before we free it */
                    multi_drive_until(m, rel, 5000);
                    distlock_lock_free(l);
                    total++;
                }
            if (!found) {  /* a release */
                for (int k = 0; k < KEYS; k++)
                    for (int p = 0; p < PER; p++)
                        if (op == ops[k][p]) {  /* out of turn */
                            print_error("key %d: acquire %d done (%d: %s) before %d\n", k, p,
                                        distlock_op_status(op), distlock_op_error(op),
                                        served[k]);
                            fail();
                        }
                assert_op(op, DISTLOCK_OK);
                releases++;
            }
            distlock_op_free(op);
        }
    }
    assert_int_equal(distlock_multi_perform(m), 0);
    distlock_multi_free(m);
    distlock_client_free(c);
}

/* The local queue: 20 acquires of one key held by another client send one
 * attempt at a time (the active one's), not one each; the holder's release
 * (blocking, another client) wakes the active one, which wins; the others
 * follow as each releases through the multi, without waiting out a
 * re-check. */
static void test_local_queue_one_attempt_on_the_wire(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder_c = client(rc), *c = client(rc);
    distlock_lock *held = NULL;
    /* re-checks far apart: only a release can be what serves them */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MIN_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MAX_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_acquire(holder_c, "mo:queue", 30000, 0, 0, &held), DISTLOCK_OK);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    enum { N = 20 };
    distlock_op *ops[N];
    long long before = attempt_commands_run(rc, 0);
    for (int i = 0; i < N; i++)
        assert_rc(distlock_multi_acquire(m, "mo:queue", 10000, 30000, 0, NULL, &ops[i]),
                  DISTLOCK_OK);
    multi_drive_for(m, 600);
    long long sent = attempt_commands_run(rc, 0) - before;
    printf("  attempts sent while 20 acquires of one key waited 600 ms: %lld (%lld before)\n", sent, before);
    /* the active one's tries (its first, the one after it subscribed: a
     * command or two each on node 0), not one (or more) per acquire */
    assert_true(sent >= 1);
    if (sent >= N / 2) {
        /* whose attempts: this client's, or another test's whose server
         * had this port before (a parallel ctest job) */
        redisReply *cl = rh_command(rc, 0, 0, "CLIENT LIST");
        printf("  node 0's clients:\n%s\n", cl && cl->type == REDIS_REPLY_STRING ? cl->str : "?");
        if (cl)
            freeReplyObject(cl);
    }
    assert_true(sent < N / 2);
    for (int i = 0; i < N; i++)
        assert_false(distlock_op_done(ops[i]));

    long long t0 = rh_now_ms();
    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    for (int i = 0; i < N; i++) {
        multi_drive_until(m, ops[i], 4000);
        assert_op(ops[i], DISTLOCK_OK);
        for (int j = i + 1; j < N; j++)
            assert_false(distlock_op_done(ops[j]));
        distlock_lock *l = distlock_op_take_lock(ops[i]);
        distlock_op *rel;
        assert_rc(distlock_multi_release(m, l, &rel), DISTLOCK_OK);
        multi_drive_until(m, rel, 4000);
        distlock_op_free(rel);
        distlock_lock_free(l);
    }
    long long took = rh_now_ms() - t0;
    printf("  20 acquires served one after another in %lld ms\n", took);
    assert_true(took < 4000);  /* a re-check is 5 s away: the releases handed over */
    while (distlock_multi_done(m)) {
    }
    for (int i = 0; i < N; i++)
        distlock_op_free(ops[i]);
    distlock_multi_free(m);
    distlock_client_free(c);
    distlock_client_free(holder_c);
}

/* SUBSCRIBE commands node `node` has run (INFO commandstats). */
static long long subscribe_calls(rh_cluster *rc, int node)
{
    redisReply *r = rh_command(rc, node, 0, "INFO commandstats");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    const char *p = strstr(r->str, "cmdstat_subscribe:calls=");
    long long n = p ? atoll(p + strlen("cmdstat_subscribe:calls=")) : 0;
    freeReplyObject(r);
    return n;
}

/* Drive m until every node has `want` subscribers on key's channel. */
static void drive_until_subscribers(rh_cluster *rc, distlock_multi *m, const char *key,
                                    long long want)
{
    long long end = rh_now_ms() + 5000;
    for (int i = 0; i < rc->n; i++)
        while (key_channel_subscribers(rc, i, key) != want) {
            if (rh_now_ms() > end)
                fail_msg("node %d: %lld subscribers on distlock:%s, expected %lld", i,
                         key_channel_subscribers(rc, i, key), key, want);
            multi_turn(m, 10);
        }
}

/* Acquires of one key served one after the other through the multi, each
 * finding the key held by the one before (its first attempt goes out when
 * that one wins) and so waiting: the key's channel stays subscribed from
 * the first waiter to the last, no SUBSCRIBE per waiter (the subscriber
 * would else drop the channel between two waiters and subscribe again);
 * it is dropped once no acquire of the key is left. */
static void test_waiters_served_in_turn_keep_one_subscription(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder_c = client(rc), *c = client(rc);
    const char *key = "mo:onesub";
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder_c, key, 30000, 0, 0, &held), DISTLOCK_OK);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    enum { N = 20 };
    distlock_op *ops[N];
    for (int i = 0; i < N; i++)
        assert_rc(distlock_multi_acquire(m, key, 10000, 30000, 0, NULL, &ops[i]), DISTLOCK_OK);
    drive_until_subscribers(rc, m, key, 1);  /* the first waits, subscribed */
    long long before[8];
    for (int i = 0; i < rc->n; i++)
        before[i] = subscribe_calls(rc, i);
    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    for (int i = 0; i < N; i++) {
        multi_drive_until(m, ops[i], 5000);
        assert_op(ops[i], DISTLOCK_OK);
        if (i + 1 < N)
            assert_false(distlock_op_done(ops[i + 1]));
        distlock_lock *l = distlock_op_take_lock(ops[i]);
        distlock_op *rel;
        assert_rc(distlock_multi_release(m, l, &rel), DISTLOCK_OK);
        multi_drive_until(m, rel, 5000);
        assert_op(rel, DISTLOCK_OK);
        distlock_op_free(rel);
        distlock_lock_free(l);
    }
    for (int i = 0; i < rc->n; i++) {
        long long subs = subscribe_calls(rc, i) - before[i];
        printf("  node %d: %lld SUBSCRIBE while %d acquires were served one after the other\n",
               i, subs, N);
        assert_int_equal(subs, 0);
    }
    /* no acquire of the key left: the channel goes */
    drive_until_subscribers(rc, m, key, 0);
    for (int i = 0; i < N; i++)
        distlock_op_free(ops[i]);
    distlock_multi_free(m);
    distlock_client_free(c);
    distlock_client_free(holder_c);
}

/* A release through the multi hands the key to the next acquire of the
 * multi at once, by itself: here the client's user may not SUBSCRIBE
 * (NOPERM: no release message ever wakes a waiter) and re-checks are 5 s
 * apart, so only the handover can serve the next acquire sooner. */
static void test_release_hands_over_without_messages(void **state)
{
    rh_cluster *rc = *state;
    char uris[512] = "", one[96];
    for (int i = 0; i < rc->n; i++) {
        redisReply *r = rh_command(rc, i, 0,
                                   "ACL SETUSER mo_nochan reset on >pw ~* resetchannels +@all");
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STATUS);
        freeReplyObject(r);
        snprintf(one, sizeof(one), "%sredis://mo_nochan:pw@127.0.0.1:%d", i ? "," : "",
                 rc->node[i].port);
        strncat(uris, one, sizeof(uris) - strlen(uris) - 1);
    }
    distlock_client *c = NULL;
    assert_rc(distlock_client_new(uris, &c), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MIN_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MAX_MS, 5000), DISTLOCK_OK);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *a, *b;
    assert_rc(distlock_multi_acquire(m, "mo:handover", 20000, 20000, 0, NULL, &a), DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mo:handover", 20000, 20000, 0, NULL, &b), DISTLOCK_OK);
    multi_drive_until(m, a, 5000);
    assert_op(a, DISTLOCK_OK);
    multi_drive_for(m, 300);  /* b tried, found it held, waits for its re-check */
    assert_false(distlock_op_done(b));
    distlock_lock *l = distlock_op_take_lock(a);
    distlock_op *rel;
    long long t0 = rh_now_ms();
    assert_rc(distlock_multi_release(m, l, &rel), DISTLOCK_OK);
    multi_drive_until(m, b, 8000);
    long long took = rh_now_ms() - t0;
    printf("  without release messages, the next acquire won %lld ms after the release "
           "started (re-checks 5000 ms apart)\n", took);
    assert_op(b, DISTLOCK_OK);
    assert_true(took < 2000);
    multi_drive_until(m, rel, 5000);
    distlock_lock_free(l);
    distlock_op_free(a);
    distlock_op_free(b);  /* its lock, never taken, is released */
    distlock_op_free(rel);
    distlock_multi_free(m);
    distlock_client_free(c);
    for (int i = 0; i < rc->n; i++) {
        redisReply *r = rh_command(rc, i, 0, "ACL DELUSER mo_nochan");
        if (r)
            freeReplyObject(r);
    }
}

static uint64_t stat_value(distlock_client *c, const char *name)
{
    distlock_stat st[256];
    size_t n = 0;
    if (distlock_client_stats(c, st, 256, &n) != DISTLOCK_OK)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(st[i].name, name) == 0)
            return st[i].value;
    return 0;
}

/* SHARED read locks, semaphore permits, AUTO_RENEW, FAIR through the multi. */
static void test_kinds(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client(rc);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *r1, *r2, *w, *p1, *p2, *p3, *ar, *f;
    assert_rc(distlock_multi_acquire(m, "mo:rw", 10000, 0, DISTLOCK_SHARED, NULL, &r1),
              DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mo:rw", 10000, 0, DISTLOCK_SHARED, NULL, &r2),
              DISTLOCK_OK);
    multi_drive_until(m, r1, 5000);
    multi_drive_until(m, r2, 5000);
    assert_op(r1, DISTLOCK_OK);
    assert_op(r2, DISTLOCK_OK);
    /* a writer waits for both readers */
    assert_rc(distlock_multi_acquire(m, "mo:rw", 10000, 10000, 0, NULL, &w), DISTLOCK_OK);
    multi_drive_for(m, 300);
    assert_false(distlock_op_done(w));
    distlock_lock *lr1 = distlock_op_take_lock(r1), *lr2 = distlock_op_take_lock(r2);
    assert_rc(distlock_release(lr1), DISTLOCK_OK);
    assert_rc(distlock_release(lr2), DISTLOCK_OK);
    multi_drive_until(m, w, 8000);
    assert_op(w, DISTLOCK_OK);
    distlock_lock *lw = distlock_op_take_lock(w);
    assert_rc(distlock_release(lw), DISTLOCK_OK);

    /* two permits of three taken: a third goes, a fourth waits */
    assert_rc(distlock_multi_semaphore_acquire(m, "mo:sem", 2, 10000, 0, 0, NULL, &p1),
              DISTLOCK_OK);
    assert_rc(distlock_multi_semaphore_acquire(m, "mo:sem", 2, 10000, 0, 0, NULL, &p2),
              DISTLOCK_OK);
    assert_rc(distlock_multi_semaphore_acquire(m, "mo:sem", 2, 10000, 0, 0, NULL, &p3),
              DISTLOCK_OK);
    multi_drive_until(m, p1, 5000);
    multi_drive_until(m, p2, 5000);
    multi_drive_until(m, p3, 5000);
    assert_op(p1, DISTLOCK_OK);
    assert_op(p2, DISTLOCK_OK);
    assert_op(p3, DISTLOCK_NOTACQUIRED);

    /* AUTO_RENEW: renewed by the client's renewal thread (twice: observed).
     * 6 s: a sanitizer build on a loaded machine starved the renewal thread
     * past a 3 s lease once, and the fair waiter below then took the key. */
    assert_rc(distlock_multi_acquire(m, "mo:renew", 6000, 0, DISTLOCK_AUTO_RENEW, NULL, &ar),
              DISTLOCK_OK);
    multi_drive_until(m, ar, 5000);
    assert_op(ar, DISTLOCK_OK);
    distlock_lock *lar = distlock_op_take_lock(ar);
    assert_true(RH_WAIT_UNTIL(stat_value(c, "renewal_total") >= 2, 15000));
    assert_int_equal(distlock_lock_lost(lar), 0);
    assert_holding_quorum(rc, "mo:renew", distlock_lock_token(lar), rc->n);

    /* FAIR waits as the blocking call does */
    assert_rc(distlock_multi_acquire(m, "mo:renew", 5000, 10000, DISTLOCK_FAIR, NULL, &f),
              DISTLOCK_OK);
    multi_drive_for(m, 300);
    assert_false(distlock_op_done(f));
    assert_rc(distlock_release(lar), DISTLOCK_OK);
    multi_drive_until(m, f, 8000);
    assert_op(f, DISTLOCK_OK);
    distlock_lock *lf = distlock_op_take_lock(f);
    assert_rc(distlock_release(lf), DISTLOCK_OK);

    distlock_lock_free(lr1);
    distlock_lock_free(lr2);
    distlock_lock_free(lw);
    distlock_lock_free(lar);
    distlock_lock_free(lf);
    distlock_op *all[] = { r1, r2, w, p1, p2, p3, ar, f };
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        distlock_op_free(all[i]);  /* p1, p2: their untaken permits are released */
    assert_holding(rc, "mo:sem", NULL, 0);
    distlock_multi_free(m);
    distlock_client_free(c);
}

/* A try-once acquire started while another acquire of the multi waits for
 * the key fails at once (the key was held at that one's last try), with its
 * own detail; one of another key is not affected. A caller's token
 * (args->token) is the one the servers hold. */
static void test_try_once_behind_a_waiter_and_caller_token(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder_c = client(rc), *c = client(rc);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder_c, "mo:tryonce", 30000, 0, 0, &held), DISTLOCK_OK);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *w, *t, *other;
    assert_rc(distlock_multi_acquire(m, "mo:tryonce", 10000, 30000, 0, NULL, &w), DISTLOCK_OK);
    multi_drive_for(m, 300);  /* w tried and waits */
    assert_false(distlock_op_done(w));
    assert_rc(distlock_multi_acquire(m, "mo:tryonce", 10000, 0, 0, NULL, &t), DISTLOCK_OK);
    distlock_acquire_args args = { .size = sizeof(args), .token = "my-own-token-1" };
    assert_rc(distlock_multi_acquire(m, "mo:tryonce:other", 10000, 0, 0, &args, &other),
              DISTLOCK_OK);
    multi_drive_until(m, other, 5000);
    multi_turn(m, 0);
    assert_true(distlock_op_done(t));
    assert_op(t, DISTLOCK_NOTACQUIRED);
    assert_non_null(strstr(distlock_op_error(t), "another acquire of this multi waits"));
    assert_op(other, DISTLOCK_OK);
    assert_false(distlock_op_done(w));
    distlock_lock *lo = distlock_op_take_lock(other);
    assert_string_equal(distlock_lock_token(lo), "my-own-token-1");
    assert_holding_quorum(rc, "mo:tryonce:other", "my-own-token-1", rc->n);
    distlock_lock_free(lo);
    distlock_op_free(w);  /* running: cancelled, freed when done */
    distlock_op_free(t);
    distlock_op_free(other);
    distlock_multi_free(m);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(holder_c);
}

/* A try-once acquire queued while the active one's first attempt is out
 * fails as soon as that one starts its wait, even after a waiting acquire
 * queued beside it left the queue (cancelled): the multi counts the
 * try-once acquires queued per key and walks the queue only if there are
 * some, so a count that went wrong would leave it queued for the turn of
 * the key (30 s away here). Then again, after that first try-once left. */
static void test_try_once_queued_fails_when_the_active_one_waits(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder_c = client(rc), *c = client(rc);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder_c, "mo:tryonce:queued", 30000, 0, 0, &held), DISTLOCK_OK);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *a, *b, *t, *d, *t2;
    /* nothing is sent before perform: b and t are queued behind a, whose
     * first attempt has not been answered when b's cancel is seen */
    assert_rc(distlock_multi_acquire(m, "mo:tryonce:queued", 10000, 30000, 0, NULL, &a),
              DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mo:tryonce:queued", 10000, 30000, 0, NULL, &b),
              DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mo:tryonce:queued", 10000, 0, 0, NULL, &t),
              DISTLOCK_OK);
    distlock_op_cancel(b);
    multi_drive_until(m, b, 2000);
    assert_op(b, DISTLOCK_ECANCELED);
    assert_false(distlock_op_done(t));  /* a's first attempt is still out */
    multi_drive_until(m, t, 3000);
    assert_op(t, DISTLOCK_NOTACQUIRED);
    assert_non_null(strstr(distlock_op_error(t), "another acquire of this multi waits"));
    assert_false(distlock_op_done(a));

    /* a waits; d (waiting) queued, then a try-once: refused at once, d and
     * a go on */
    assert_rc(distlock_multi_acquire(m, "mo:tryonce:queued", 10000, 30000, 0, NULL, &d),
              DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mo:tryonce:queued", 10000, 0, 0, NULL, &t2),
              DISTLOCK_OK);
    assert_true(distlock_op_done(t2));
    assert_op(t2, DISTLOCK_NOTACQUIRED);
    /* a cancelled: d is the active one, tries, and waits in turn */
    distlock_op_cancel(a);
    multi_drive_until(m, a, 2000);
    assert_op(a, DISTLOCK_ECANCELED);
    assert_false(distlock_op_done(d));
    assert_rc(distlock_release(held), DISTLOCK_OK);
    multi_drive_until(m, d, 5000);
    assert_op(d, DISTLOCK_OK);
    distlock_lock *l = distlock_op_take_lock(d);
    assert_holding_quorum(rc, "mo:tryonce:queued", distlock_lock_token(l), rc->n);
    distlock_lock_free(l);
    distlock_op_free(a);
    distlock_op_free(b);
    distlock_op_free(t);
    distlock_op_free(d);
    distlock_op_free(t2);
    distlock_multi_free(m);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(holder_c);
}

/* The deadline: a waiting acquire (active or queued) gives up after wait_ms. */
static void test_deadline(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder_c = client(rc), *c = client(rc);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder_c, "mo:deadline", 30000, 0, 0, &held), DISTLOCK_OK);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *a, *b;
    long long t0 = rh_now_ms();
    assert_rc(distlock_multi_acquire(m, "mo:deadline", 10000, 400, 0, NULL, &a), DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mo:deadline", 10000, 300, 0, NULL, &b), DISTLOCK_OK);
    multi_drive_until(m, b, 5000);
    long long tb = rh_now_ms() - t0;
    multi_drive_until(m, a, 5000);
    long long ta = rh_now_ms() - t0;
    printf("  queued (300 ms) gave up after %lld ms, active (400 ms) after %lld ms\n", tb, ta);
    assert_op(a, DISTLOCK_NOTACQUIRED);
    assert_op(b, DISTLOCK_NOTACQUIRED);
    assert_non_null(strstr(distlock_op_error(b), "still held by another owner after 300 ms"));
    /* the queued one ended by its own deadline, before the active one */
    assert_ptr_equal(distlock_multi_done(m), b);
    assert_ptr_equal(distlock_multi_done(m), a);
    assert_true(tb >= 300 && ta >= 400);
    assert_true(ta < slow_bound(2000, 5000));
    distlock_op_free(a);
    distlock_op_free(b);
    distlock_multi_free(m);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(holder_c);
}

/* Per-op cancel: a queued acquire and a waiting one end ECANCELED at the
 * next perform, nothing held, the other acquires go on. */
static void test_op_cancel(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder_c = client(rc), *c = client(rc);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder_c, "mo:cancel", 30000, 0, 0, &held), DISTLOCK_OK);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *a, *b, *d;
    assert_rc(distlock_multi_acquire(m, "mo:cancel", 10000, 30000, 0, NULL, &a), DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mo:cancel", 10000, 30000, 0, NULL, &b), DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mo:cancel", 10000, 30000, 0, NULL, &d), DISTLOCK_OK);
    multi_drive_for(m, 300);
    distlock_op_cancel(b);  /* queued */
    assert_true(multi_turn(m, 0) >= 0);
    assert_true(distlock_op_done(b));
    assert_op(b, DISTLOCK_ECANCELED);
    distlock_op_cancel(a);  /* the active one, waiting: d becomes active */
    multi_drive_until(m, a, 2000);
    assert_op(a, DISTLOCK_ECANCELED);
    assert_false(distlock_op_done(d));
    assert_rc(distlock_release(held), DISTLOCK_OK);
    multi_drive_until(m, d, 5000);
    assert_op(d, DISTLOCK_OK);
    distlock_lock *l = distlock_op_take_lock(d);
    assert_holding_quorum(rc, "mo:cancel", distlock_lock_token(l), rc->n);
    distlock_lock_free(l);
    distlock_op_free(a);
    distlock_op_free(b);
    distlock_op_free(d);
    distlock_lock_free(held);
    distlock_multi_free(m);
    distlock_client_free(c);
    distlock_client_free(holder_c);
}

/* Cancelled while its attempt is on the wire (a node made slow by DEBUG
 * SLEEP): the attempt wins, and the lock it won is released. */
static void test_cancel_mid_attempt_releases_win(void **state)
{
    rh_cluster *rc = *state;
    int n = rc->n;
    distlock_client *c = client(rc);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *warm;
    /* connections made first, so the attempt below is on the wire at once */
    assert_rc(distlock_multi_acquire(m, "mo:warm", 1000, 0, 0, NULL, &warm), DISTLOCK_OK);
    multi_drive_until(m, warm, 5000);
    distlock_op_free(warm);
    for (int i = 0; i < n; i++)
        assert_int_equal(rh_debug_sleep(rc, i, 400), 0);
    distlock_op *a;
    assert_rc(distlock_multi_acquire(m, "mo:midwire", 20000, 5000, 0, NULL, &a), DISTLOCK_OK);
    multi_turn(m, 0);  /* sent */
    distlock_op_cancel(a);
    multi_drive_until(m, a, 5000);
    assert_op(a, DISTLOCK_ECANCELED);
    assert_non_null(strstr(distlock_op_error(a), "released"));
    assert_null(distlock_op_take_lock(a));
    assert_holding(rc, "mo:midwire", NULL, 0);
    distlock_op_free(a);
    distlock_multi_free(m);
    distlock_client_free(c);
}

static void *cancel_later(void *arg)
{
    rh_sleep_ms(200);
    distlock_client_cancel(arg);
    return NULL;
}

/* distlock_client_cancel() from another thread ends the multi's waiting
 * acquires (they started before it), not a later one. */
static void test_client_cancel(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder_c = client(rc), *c = client(rc);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder_c, "mo:ccancel", 30000, 0, 0, &held), DISTLOCK_OK);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *a, *b;
    assert_rc(distlock_multi_acquire(m, "mo:ccancel", 10000, 30000, 0, NULL, &a), DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mo:ccancel", 10000, 30000, 0, NULL, &b), DISTLOCK_OK);
    pthread_t t;
    long long t0 = rh_now_ms();
    assert_int_equal(pthread_create(&t, NULL, cancel_later, c), 0);
    multi_drive_until(m, a, 5000);
    multi_drive_until(m, b, 5000);
    long long took = rh_now_ms() - t0;
    pthread_join(t, NULL);
    printf("  client cancel ended both after %lld ms\n", took);
    assert_op(a, DISTLOCK_ECANCELED);
    assert_op(b, DISTLOCK_ECANCELED);
    assert_true(took < 2000);  /* not the 30 s wait, nor a 5 s re-check */
    distlock_op *later;
    assert_rc(distlock_multi_acquire(m, "mo:ccancel", 10000, 300, 0, NULL, &later), DISTLOCK_OK);
    multi_drive_until(m, later, 5000);
    assert_op(later, DISTLOCK_NOTACQUIRED);
    distlock_op_free(a);
    distlock_op_free(b);
    distlock_op_free(later);
    distlock_multi_free(m);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(holder_c);
}

static void *fire_later(void *arg)
{
    rh_sleep_ms(200);
    distlock_cancel_fire(arg);
    return NULL;
}

/* args->cancel fired from another thread wakes the multi (its descriptor)
 * and ends the acquires that carry it, and only those. */
static void test_args_cancel(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder_c = client(rc), *c = client(rc);
    distlock_lock *held = NULL;
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MIN_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MAX_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_acquire(holder_c, "mo:acancel", 30000, 0, 0, &held), DISTLOCK_OK);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_cancel *k = NULL;
    assert_rc(distlock_cancel_new(&k), DISTLOCK_OK);
    distlock_acquire_args args = { .size = sizeof(args), .cancel = k };
    distlock_op *a, *b, *other;
    assert_rc(distlock_multi_acquire(m, "mo:acancel", 10000, 30000, 0, &args, &a), DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mo:acancel", 10000, 30000, 0, &args, &b), DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mo:acancel:2", 10000, 30000, 0, NULL, &other),
              DISTLOCK_OK);
    multi_drive_until(m, other, 5000);
    assert_op(other, DISTLOCK_OK);
    pthread_t t;
    long long t0 = rh_now_ms();
    assert_int_equal(pthread_create(&t, NULL, fire_later, k), 0);
    multi_drive_until(m, a, 5000);
    multi_drive_until(m, b, 5000);
    long long took = rh_now_ms() - t0;
    pthread_join(t, NULL);
    assert_op(a, DISTLOCK_ECANCELED);
    assert_op(b, DISTLOCK_ECANCELED);
    assert_true(took < 2000);
    distlock_op_free(a);
    distlock_op_free(b);
    distlock_op_free(other);  /* its lock, never taken, is released */
    assert_holding(rc, "mo:acancel:2", NULL, 0);
    distlock_multi_free(m);
    distlock_cancel_free(k);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(holder_c);
}

/* Freeing the multi with acquires waiting and one won but not taken: the
 * waiters end, the lock is released, nothing is left on the servers. */
static void test_free_with_running_ops(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client(rc);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *a, *b, *d;
    assert_rc(distlock_multi_acquire(m, "mo:free", 20000, 0, 0, NULL, &a), DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mo:free", 20000, 30000, 0, NULL, &b), DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mo:free", 20000, 30000, 0, NULL, &d), DISTLOCK_OK);
    multi_drive_until(m, a, 5000);
    multi_drive_for(m, 200);
    distlock_op_free(d);  /* running: cancelled, freed when done */
    long long t0 = rh_now_ms();
    distlock_multi_free(m);
    assert_true(rh_now_ms() - t0 < 3000);
    assert_holding(rc, "mo:free", NULL, 0);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_acquire_release_extend, heal),
        cmocka_unit_test_setup(test_bad_arguments, heal),
        cmocka_unit_test_setup(test_many_keys_served_in_turn, heal),
        cmocka_unit_test_setup(test_local_queue_one_attempt_on_the_wire, heal),
        cmocka_unit_test_setup(test_release_hands_over_without_messages, heal),
        cmocka_unit_test_setup(test_waiters_served_in_turn_keep_one_subscription, heal),
        cmocka_unit_test_setup(test_kinds, heal),
        cmocka_unit_test_setup(test_deadline, heal),
        cmocka_unit_test_setup(test_try_once_behind_a_waiter_and_caller_token, heal),
        cmocka_unit_test_setup(test_try_once_queued_fails_when_the_active_one_waits, heal),
        cmocka_unit_test_setup(test_op_cancel, heal),
        cmocka_unit_test_setup(test_cancel_mid_attempt_releases_win, heal),
        cmocka_unit_test_setup(test_client_cancel, heal),
        cmocka_unit_test_setup(test_args_cancel, heal),
        cmocka_unit_test_setup(test_free_with_running_ops, heal),
    };
    int failed = cmocka_run_group_tests_name("one node", tests, group_setup1, group_teardown);
    failed += cmocka_run_group_tests_name("three nodes", tests, group_setup3, group_teardown);
    return failed;
}
