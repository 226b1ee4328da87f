/* test_blocking_waiters_turn_promises.c -- the promises a blocking wait
 * keeps while the waiting calls of one client for one key take turns (only
 * the longest-waiting one re-checks, the others sleep until the turn comes
 * to them or their deadline):
 * - a waiting call is never left waiting when it could have the lock: a
 *   key it could take is taken within about a re-check interval, never
 *   only at some waiter's deadline, also when the waiter with the turn
 *   cannot take it (fewer permits asked, a read lock kept out by a waiting
 *   writer's intent);
 * - the client's interrupt hook reaches every waiting call within a
 *   re-check interval (distlock_client_on_interrupt's promise), not only
 *   the one with the turn;
 * - cancels (the client's, the call's own) end a waiting call at once, and
 *   a call ends at its deadline, with or without the turn;
 * - a release reaches the next waiter when a node is stopped (3 nodes);
 * - 1,000 waiting threads: a release serves the next at once, and every
 *   one of them gets the key in turn, never two at a time;
 * - a call that arrives while threads wait with turns queues behind them:
 *   no attempt until its turn (or its deadline's try), no freed key taken
 *   ahead of the oldest waiter; a try-once call, and one beside waiters
 *   that take no turns (a key set's, a fair one, a noted writer), is not
 *   held back; the hook and a cancel still reach a queued call.
 * Waiters are threads of one client, the holders other clients. */
#include "test_common.h"
#include "test_wake_waiter.h"
#include "test_waiting_threads.h"
#include "harness/faultproxy.h"

#include <poll.h>

DEFINE_GROUP(1)
DEFINE_GROUP_SETUP(3)

/* Keys on node i whose names contain `key` (the key, its side keys). */
static long long keys_left(rh_cluster *rc, int node, const char *key)
{
    redisReply *r = rh_command(rc, node, 0, "KEYS *%s*", key);
    long long n = r && r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;
    if (n > 0)
        printf("# left on node %d: %s%s\n", node, r->element[0]->str, n > 1 ? " ..." : "");
    if (r)
        freeReplyObject(r);
    return n;
}

/* Nothing of key is left on any running node (a release returns once a
 * quorum deleted: the others are waited for, bounded). */
#define assert_nothing_left(rc, key) do {                                     \
        for (int n__ = 0; n__ < (rc)->n; n__++)                               \
            if (!(rc)->node[n__].stopped)                                     \
                assert_true(RH_WAIT_UNTIL(keys_left(rc, n__, key) == 0, 3000)); \
    } while (0)

static long long zcard(rh_cluster *rc, const char *key)
{
    redisReply *r = rh_command(rc, 0, 0, "ZCARD %s", key);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

/* Holders of one key now, as the waiters see them: writers exclusive,
 * readers together; any other overlap is counted. Each keeps a lock won
 * for hold_ms (the holder's work). */
struct section {
    pthread_mutex_t mu;
    long hold_ms;
    int writers, readers, overlaps, served;
};

static void section_enter(struct section *s, int shared)
{
    pthread_mutex_lock(&s->mu);
    if (s->writers > 0 || (!shared && s->readers > 0))
        s->overlaps++;
    if (shared)
        s->readers++;
    else
        s->writers++;
    s->served++;
    pthread_mutex_unlock(&s->mu);
}

static void section_leave(struct section *s, int shared)
{
    pthread_mutex_lock(&s->mu);
    if (shared)
        s->readers--;
    else
        s->writers--;
    pthread_mutex_unlock(&s->mu);
}

/* A user's multi on the waiting client, driven by this thread. */
static int multi_acquire(waiting_thread *w, long ttl, distlock_lock **out)
{
    distlock_multi *m = NULL;
    distlock_op *op = NULL;
    int rc = distlock_multi_new(w->c, &m);
    if (rc != DISTLOCK_OK)
        return rc;
    if ((rc = distlock_multi_acquire(m, w->key, ttl, w->wait_ms, w->flags, NULL, &op)) ==
        DISTLOCK_OK) {
        while (distlock_multi_perform(m) > 0) {
            struct pollfd pfd = { distlock_multi_fd(m), POLLIN, 0 };
            atomic_fetch_add(&w->sleeps, 1);  /* it waits (the hook does not see a multi) */
            (void)poll(&pfd, 1, (int)distlock_multi_timeout(m));
        }
        rc = distlock_op_status(op);
        if (rc == DISTLOCK_OK)
            *out = distlock_op_take_lock(op);
        else
            snprintf(w->detail, sizeof w->detail, "%s", distlock_op_error(op));
        distlock_op_free(op);
    }
    distlock_multi_free(m);
    return rc;
}

/* A waiting thread's work while it holds the lock won: inside its section
 * (w->arg) for the section's hold_ms. */
static void hold_in_section(waiting_thread *w)
{
    struct section *s = w->arg;
    int shared = (w->flags & DISTLOCK_SHARED) != 0;
    section_enter(s, shared);
    sleep_until_ms(rh_now_ms() + s->hold_ms);  /* the holder's work */
    section_leave(s, shared);
}

/* distlock_client_on_interrupt: "a signal ... interrupts a waiting call at
 * once if it lands on that call's thread, else the call sees it at its next
 * re-check (at most DISTLOCK_OPT_RETRY_MAX_MS later)". Two threads wait for
 * a held key (re-checks 50-100 ms apart); the hook then answers "cancel" for
 * the second (a runtime's flag set by a signal that landed elsewhere). The
 * second has no turn: it must still see the hook within a re-check, not at
 * its deadline (10 s). */
static void test_interrupt_hook_reaches_a_waiting_thread_without_the_turn(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnpromise:hook";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 50, 100);
    atomic_store(&waiting_threads_interrupt, 0);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);

    waiting_thread first = { .c = c, .key = key, .wait_ms = 20000 };
    waiting_thread_start(&first);
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 1, 10000));
    waiting_thread second = { .c = c, .key = key, .wait_ms = 10000, .interruptible = 1 };
    waiting_thread_start(&second);
    assert_true(RH_WAIT_UNTIL(waiting_thread_sleeping(&second), 10000));
    long long armed = rh_now_ms();
    atomic_store(&waiting_threads_interrupt, 1);
    waiting_thread_join(&second, "second");
    printf("# the interrupted waiter without the turn returned %d %lld ms after the hook said "
           "cancel (re-checks at most 100 ms apart; its deadline 10000 ms)\n",
           second.rc, second.done_ms - armed);
    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    waiting_thread_join(&first, "first");
    distlock_client_free(c);
    distlock_client_free(holder);
    assert_rc(second.rc, DISTLOCK_ECANCELED);
    assert_true(second.done_ms - armed < 2000);
    assert_rc(first.rc, DISTLOCK_OK);
    assert_holding(rc, key, NULL, 0);
    assert_nothing_left(rc, key);
}

/* distlock_client_cancel() and a call's own cancel end a waiting thread
 * without the turn at once (its deadline: 20 s). */
static void test_cancels_end_waiting_threads_without_the_turn_at_once(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnpromise:cancel";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 50, 100);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    distlock_cancel *own = NULL;
    assert_rc(distlock_cancel_new(&own), DISTLOCK_OK);

    waiting_thread first = { .c = c, .key = key, .wait_ms = 20000 };
    waiting_thread_start(&first);
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 1, 10000));
    waiting_thread second = { .c = c, .key = key, .wait_ms = 20000, .cancel = own };
    waiting_thread_start(&second);
    waiting_thread third = { .c = c, .key = key, .wait_ms = 20000 };
    waiting_thread_start(&third);
    assert_true(RH_WAIT_UNTIL(waiting_thread_sleeping(&second) && waiting_thread_sleeping(&third),
                              10000));
    long long t_own = rh_now_ms();
    assert_rc(distlock_cancel_fire(own), DISTLOCK_OK);
    waiting_thread_join(&second, "second (own cancel)");
    printf("# own cancel of a waiter without the turn: %d after %lld ms\n", second.rc,
           second.done_ms - t_own);

    long long t_all = rh_now_ms();
    assert_rc(distlock_client_cancel(c), DISTLOCK_OK);
    waiting_thread_join(&third, "third (client cancel)");
    waiting_thread_join(&first, "first (client cancel)");
    printf("# client cancel: the turn holder %d after %lld ms, the waiter without the turn %d "
           "after %lld ms\n", first.rc, first.done_ms - t_all, third.rc, third.done_ms - t_all);
    assert_rc(second.rc, DISTLOCK_ECANCELED);
    assert_true(second.done_ms - t_own < 1000);
    assert_rc(first.rc, DISTLOCK_ECANCELED);
    assert_rc(third.rc, DISTLOCK_ECANCELED);
    assert_true(first.done_ms - t_all < 1000);
    assert_true(third.done_ms - t_all < 1000);
    distlock_cancel_free(own);
    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    assert_holding(rc, key, NULL, 0);
    assert_nothing_left(rc, key);
    distlock_client_free(c);
    distlock_client_free(holder);
}

/* A waiter that waits forever has the turn; short waits behind it still end
 * at their deadlines (500 ms) with DISTLOCK_NOTACQUIRED. */
static void test_short_waits_behind_a_wait_forever_end_at_their_deadlines(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnpromise:forever";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 50, 100);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    distlock_cancel *own = NULL;
    assert_rc(distlock_cancel_new(&own), DISTLOCK_OK);
    waiting_thread forever = { .c = c, .key = key, .wait_ms = DISTLOCK_WAIT_FOREVER,
                               .cancel = own };
    waiting_thread_start(&forever);
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 1, 10000));
    waiting_thread shortw[4];
    for (int i = 0; i < 4; i++) {
        shortw[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 500 };
        waiting_thread_start(&shortw[i]);
    }
    long long worst = 0;
    for (int i = 0; i < 4; i++) {
        waiting_thread_join(&shortw[i], "short");
        assert_rc(shortw[i].rc, DISTLOCK_NOTACQUIRED);
        long long took = shortw[i].done_ms - shortw[i].started_ms;
        if (took > worst)
            worst = took;
        assert_true(took >= 500);
    }
    printf("# 4 waits of 500 ms behind a wait forever ended after at most %lld ms\n", worst);
    assert_true(worst < 1500);
    assert_false(atomic_load(&forever.done));
    assert_rc(distlock_cancel_fire(own), DISTLOCK_OK);
    waiting_thread_join(&forever, "forever");
    assert_rc(forever.rc, DISTLOCK_ECANCELED);
    distlock_cancel_free(own);
    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(holder);
}

/* A semaphore "turnpromise:permits": another client holds 2 permits of 2.
 * This client's first waiter asks for a permit of 1 (it has the turn), the
 * second for a permit of 2 (docs/semaphores.md: mixed P is allowed, each
 * acquire admits up to its own P). One permit is released: the second can
 * take a permit now (1 held < 2); the first cannot (1 held >= 1). The second
 * must take it within about a re-check interval (100 ms), not at the first
 * waiter's deadline (15 s) or its own (20 s). */
static void test_permit_waiter_not_held_behind_one_that_cannot_take_a_permit(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnpromise:permits";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 50, 100);
    distlock_lock *p1 = NULL, *p2 = NULL;
    assert_rc(distlock_semaphore_acquire(holder, key, 2, 30000, 0, 0, NULL, &p1), DISTLOCK_OK);
    assert_rc(distlock_semaphore_acquire(holder, key, 2, 30000, 0, 0, NULL, &p2), DISTLOCK_OK);

    waiting_thread one = { .c = c, .key = key, .wait_ms = 15000, .permits = 1 };
    waiting_thread_start(&one);
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 1, 10000));
    waiting_thread two = { .c = c, .key = key, .wait_ms = 20000, .permits = 2, .keep = 1 };
    waiting_thread_start(&two);
    assert_true(RH_WAIT_UNTIL(waiting_thread_sleeping(&two), 10000));
    long long released = 0;
    assert_true(release_ok_started_at(p1, &released));
    distlock_lock_free(p1);
    waiting_thread_join(&two, "permit of 2");
    printf("# the waiter for a permit of 2 got one %d, %lld ms after a permit was released "
           "(re-checks at most 100 ms apart)\n", two.rc, two.done_ms - released);
    waiting_thread_drop_lock(&two);
    assert_rc(distlock_release(p2), DISTLOCK_OK);
    distlock_lock_free(p2);
    waiting_thread_join(&one, "permit of 1");
    distlock_client_free(c);
    distlock_client_free(holder);
    assert_rc(two.rc, DISTLOCK_OK);
    assert_true(two.done_ms - released < 2000);
    assert_rc(one.rc, DISTLOCK_OK);
    assert_holding(rc, key, NULL, 0);
    assert_nothing_left(rc, key);
}

/* Read locks and a waiting writer (docs/shared-locks.md): another client's
 * reader holds "turnpromise:rw", a third client's writer waits (its intent
 * refuses readers that arrive). This client's reader then waits (refused by
 * the intent: it has the turn), and this client's writer waits behind it
 * (refused by the reader; it notes itself among the waiting writers, which
 * keeps the intent up). The other writer is cancelled (the intent stays:
 * ours still waits), then the reader releases. Now the key holds only the
 * intent: our reader is refused by it, our writer can take the key. It must
 * within about a re-check interval (100 ms), not when its own entry lapses
 * unrefreshed (the queue TTL: 3 x 100 + 2 x 5000 ms) or at a deadline. */
static void test_waiting_writer_not_held_behind_a_reader_its_intent_refuses(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnpromise:rw";
    distlock_client *rholder = new_client(rh_uris(rc));
    distlock_client *other = new_waiting_client(rh_uris(rc), 50, 100);
    distlock_client *c = new_waiting_client(rh_uris(rc), 50, 100);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(other, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 5000), DISTLOCK_OK);
    distlock_lock *reader = NULL;
    assert_rc(distlock_acquire(rholder, key, 30000, 0, DISTLOCK_SHARED, &reader), DISTLOCK_OK);
    char writers[128];
    snprintf(writers, sizeof writers, "{%s}:writers", key);

    distlock_cancel *ocancel = NULL;
    assert_rc(distlock_cancel_new(&ocancel), DISTLOCK_OK);
    waiting_thread owriter = { .c = other, .key = key, .wait_ms = 30000, .cancel = ocancel };
    waiting_thread_start(&owriter);
    assert_true(RH_WAIT_UNTIL(zcard(rc, writers) == 1, 10000));  /* its intent is up */

    waiting_thread ours_r = { .c = c, .key = key, .wait_ms = 25000, .flags = DISTLOCK_SHARED };
    waiting_thread_start(&ours_r);
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 2, 10000));  /* other + ours subscribed */
    waiting_thread ours_w = { .c = c, .key = key, .wait_ms = 25000, .keep = 1 };
    waiting_thread_start(&ours_w);
    assert_true(RH_WAIT_UNTIL(zcard(rc, writers) == 2, 10000));  /* ours noted too */

    assert_rc(distlock_cancel_fire(ocancel), DISTLOCK_OK);
    waiting_thread_join(&owriter, "other client's writer");
    assert_rc(owriter.rc, DISTLOCK_ECANCELED);
    assert_int_equal(zcard(rc, writers), 1);  /* ours keeps the intent up */
    assert_false(atomic_load(&ours_r.done));
    assert_false(atomic_load(&ours_w.done));

    long long released = 0;
    assert_true(release_ok_started_at(reader, &released));
    distlock_lock_free(reader);
    waiting_thread_join(&ours_w, "our writer");
    printf("# our waiting writer took the key %d, %lld ms after the last reader's release "
           "(re-checks at most 100 ms apart; our reader, with the turn, done: %d)\n",
           ours_w.rc, ours_w.done_ms - released, atomic_load(&ours_r.done));
    waiting_thread_drop_lock(&ours_w);
    waiting_thread_join(&ours_r, "our reader");
    distlock_cancel_free(ocancel);
    distlock_client_free(c);
    distlock_client_free(other);
    distlock_client_free(rholder);
    assert_rc(ours_w.rc, DISTLOCK_OK);
    assert_true(ours_w.done_ms - released < 2000);
    assert_rc(ours_r.rc, DISTLOCK_OK);
    assert_holding(rc, key, NULL, 0);
    assert_nothing_left(rc, key);
}

/* guarantees.md "Waiting": "A release wakes the one with the turn (the
 * notification wakes a client's longest waiter)". An older waiter of this
 * client for a key set ({k, j}, j held for good) waits on k's channel too;
 * then a plain call waits for k (it has the turn; re-checks 2.5-5 s apart).
 * k's release must reach the plain call at once: the set cannot be taken. */
static void test_release_wakes_the_plain_waiter_behind_an_older_key_set_waiter(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnpromise:set-k", *other = "turnpromise:set-j";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 2500, 5000);
    distlock_lock *held = NULL, *held_j = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    assert_rc(distlock_acquire(holder, other, 30000, 0, 0, &held_j), DISTLOCK_OK);
    waiting_thread set = { .c = c, .key = key, .other_key = other, .wait_ms = 8000 };
    waiting_thread_start_sleeping(&set);
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 1, 10000));
    waiting_thread plain = { .c = c, .key = key, .wait_ms = 20000 };
    waiting_thread_start_sleeping(&plain);
    long long released = 0;
    assert_true(release_ok_started_at(held, &released));
    distlock_lock_free(held);
    waiting_thread_join(&plain, "plain");
    printf("# the plain waiter took the key %lld ms after its release (re-checks 2500-5000 ms "
           "apart; an older waiter for {k, j} was woken instead)\n", plain.done_ms - released);
    waiting_thread_join(&set, "set");
    assert_rc(distlock_release(held_j), DISTLOCK_OK);
    distlock_lock_free(held_j);
    distlock_client_free(c);
    distlock_client_free(holder);
    assert_rc(plain.rc, DISTLOCK_OK);
    assert_true(plain.done_ms - released < 1000);
    assert_rc(set.rc, DISTLOCK_NOTACQUIRED);
    assert_holding(rc, key, NULL, 0);
    assert_nothing_left(rc, key);
}

/* The thread with the turn wins and keeps the lock without renewing it
 * (ttl 600 ms; it is lost by expiry while its thread lives on): the next
 * waiter takes the key within about a re-check interval (100 ms) after the
 * expiry, not at its deadline (20 s). */
static void test_next_waiter_takes_a_key_lost_by_expiry_while_its_holder_lives(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnpromise:expiry";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 50, 100);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    waiting_thread a = { .c = c, .key = key, .wait_ms = 20000, .ttl_ms = 600, .keep = 1 };
    waiting_thread_start_sleeping(&a);
    waiting_thread b = { .c = c, .key = key, .wait_ms = 20000, .keep = 1 };
    waiting_thread_start_sleeping(&b);
    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    waiting_thread_join(&a, "a");
    long long expires = a.done_ms + 600;
    waiting_thread_join(&b, "b");
    printf("# the next waiter took the key %lld ms after the first's lease ended\n",
           b.done_ms - expires);
    assert_rc(a.rc, DISTLOCK_OK);
    assert_rc(b.rc, DISTLOCK_OK);
    assert_true(b.done_ms - expires < 2000);
    assert_rc(distlock_release(b.lock), DISTLOCK_OK);
    distlock_lock_free(b.lock);
    distlock_lock_free(a.lock);
    assert_holding(rc, key, NULL, 0);
    assert_nothing_left(rc, key);
    distlock_client_free(c);
    distlock_client_free(holder);
}

/* Waiters of one key on one client, each waiting before the next comes,
 * re-checks 2.5-5 s apart. The holder's release (another client) must serve
 * all of them (each holds 20 ms) within about a second, never a writer with
 * anyone else. */
static void serve_mixed_waiters(rh_cluster *rc, const char *key, waiting_thread *w,
                                const char *const *names, int n)
{
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 2500, 5000);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    struct section sec = { .mu = PTHREAD_MUTEX_INITIALIZER, .hold_ms = 20 };
    for (int i = 0; i < n; i++) {
        w[i].c = c;
        w[i].key = key;
        w[i].wait_ms = 30000;
        w[i].while_held = hold_in_section;
        w[i].arg = &sec;
        waiting_thread_start_sleeping(&w[i]);
    }
    long long released = 0;
    assert_true(release_ok_started_at(held, &released));
    distlock_lock_free(held);
    long long last = 0;
    for (int i = 0; i < n; i++) {
        waiting_thread_join(&w[i], names[i]);
        printf("#   %-12s %d after %lld ms\n", names[i], w[i].rc, w[i].done_ms - released);
        if (w[i].done_ms > last)
            last = w[i].done_ms;
    }
    printf("# %d waiters served %d, the last %lld ms after the release, overlaps %d\n", n,
           sec.served, last - released, sec.overlaps);
    for (int i = 0; i < n; i++)
        assert_rc(w[i].rc, DISTLOCK_OK);
    assert_int_equal(sec.overlaps, 0);
    assert_true(last - released < 1000 + 25 * n);
    assert_holding(rc, key, NULL, 0);
    assert_nothing_left(rc, key);
    distlock_client_free(c);
    distlock_client_free(holder);
}

/* plain, DISTLOCK_REENTRANT with an owner, a read lock, a key set including
 * the key, a user's multi, plain, a read lock, DISTLOCK_REENTRANT with
 * another owner (DISTLOCK_FAIR is not mixed with read locks: refused,
 * docs/shared-locks.md) */
static void test_mixed_waiters_with_read_locks_all_served_one_writer_at_a_time(void **state)
{
    waiting_thread w[8] = {
        { .flags = 0 },
        { .flags = DISTLOCK_REENTRANT, .owner = "owner-a" },
        { .flags = DISTLOCK_SHARED },
        { .other_key = "turnpromise:mixed-other" },
        { .call = multi_acquire },
        { .flags = 0 },
        { .flags = DISTLOCK_SHARED },
        { .flags = DISTLOCK_REENTRANT, .owner = "owner-b" },
    };
    const char *names[8] = { "plain", "reentrant a", "reader", "key set", "multi", "plain 2",
                             "reader 2", "reentrant b" };
    serve_mixed_waiters(*state, "turnpromise:mixed-rw", w, names, 8);
}

/* plain, DISTLOCK_FAIR, DISTLOCK_REENTRANT with an owner, a key set
 * including the key, a user's multi, DISTLOCK_FAIR, plain */
static void test_mixed_waiters_with_fair_ones_all_served_one_at_a_time(void **state)
{
    waiting_thread w[7] = {
        { .flags = 0 },
        { .flags = DISTLOCK_FAIR },
        { .flags = DISTLOCK_REENTRANT, .owner = "owner-a" },
        { .other_key = "turnpromise:mixed-other" },
        { .call = multi_acquire },
        { .flags = DISTLOCK_FAIR },
        { .flags = 0 },
    };
    const char *names[7] = { "plain", "fair", "reentrant a", "key set", "multi", "fair 2",
                             "plain 2" };
    serve_mixed_waiters(*state, "turnpromise:mixed-fair", w, names, 7);
}

/* One connection hangs (the proxy holds what the thread with the turn sends
 * on it; the node and the client's other connections are fine): its
 * re-check is stuck until the command timeout (3 s). The holder releases
 * meanwhile. The turn stays with the stuck attempt (a node that answers
 * slowly looks the same, and more attempts would only pile onto it:
 * test_blocking_waiters_turns_writers_and_load), so the other thread takes
 * the key once that attempt has timed out and its call ended, within about
 * a re-check interval after that: never at its own deadline (20 s). */
static void test_key_taken_once_the_turn_holders_hung_attempt_times_out(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnpromise:hung";
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(fp_uris(fp), 50, 100);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 3000), DISTLOCK_OK);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    waiting_thread first = { .c = c, .key = key, .wait_ms = 20000 };
    waiting_thread_start_sleeping(&first);
    waiting_thread second = { .c = c, .key = key, .wait_ms = 20000 };
    waiting_thread_start_sleeping(&second);
    /* the next request naming the key (the re-check of the thread with the
     * turn: the other one sends nothing) is held, with all after it */
    char hex[128];
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold-match 0 up %s 1", fp_hex(key, hex, sizeof hex)),
                     0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held 0 up 1 10000"), 0);
    long long released = 0;
    assert_true(release_ok_started_at(held, &released));
    distlock_lock_free(held);
    waiting_thread_join(&first, "first");
    waiting_thread_join(&second, "second");
    long long taken = first.rc == DISTLOCK_OK ? first.done_ms : 0;
    if (second.rc == DISTLOCK_OK && (taken == 0 || second.done_ms < taken))
        taken = second.done_ms;
    printf("# one connection hung: first %d after %lld ms, second %d after %lld ms from the "
           "release (re-checks at most 100 ms apart, command timeout 3000 ms)\n", first.rc,
           first.done_ms - released, second.rc, second.done_ms - released);
    (void)fp_cmd(fp, NULL, 0, "reset 0");  /* the held request never runs */
    distlock_client_free(c);
    distlock_client_free(holder);
    fp_stop(fp);
    assert_true(taken != 0);
    assert_true(taken - released < 3000 + 1000);
    assert_holding(rc, key, NULL, 0);
    assert_nothing_left(rc, key);
}

/* 1,000 threads of one client wait for a key another client holds
 * (re-checks 2.5-5 s apart: only releases serve them quickly; 250 threads
 * and a command timeout of 5 s under the sanitizers, whose threads start
 * slowly). The holder's
 * release serves the first at once; each winner releases at once, and the
 * turn goes on: all 1,000 get the key one at a time, never two together. */
#define MANY 1000
static void test_thousand_waiting_threads_served_one_at_a_time(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnpromise:thousand";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 2500, 5000);
    const int many = (int)slow_bound(MANY, MANY / 4);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 5000), DISTLOCK_OK);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 60000, 0, 0, &held), DISTLOCK_OK);
    atomic_int inside, overlaps;
    atomic_init(&inside, 0);
    atomic_init(&overlaps, 0);
    waiting_thread *w = calloc(MANY, sizeof *w);
    assert_non_null(w);
    long long t_start = rh_now_ms();
    for (int i = 0; i < many; i++) {
        w[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 120000, .inside = &inside,
                                 .overlaps = &overlaps };
        waiting_thread_start_small_stack(&w[i]);
    }
    /* every thread waits (its first attempt refused, or queued behind the
     * turn holder without one), and the client is subscribed */
    assert_true(RH_WAIT_UNTIL(waiting_threads_all_sleeping(w, many), 60000));
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 1, 10000));
    long long registered = rh_now_ms();
    long long released = 0;
    assert_true(release_ok_started_at(held, &released));
    distlock_lock_free(held);
    long long first = 0, last = 0;
    int bad = 0;
    for (int i = 0; i < many; i++) {
        pthread_join(w[i].t, NULL);
        if (w[i].rc != DISTLOCK_OK) {
            if (bad++ < 5)
                print_error("waiter %d: %d (%s)\n", i, w[i].rc, w[i].detail);
            continue;
        }
        if (first == 0 || w[i].done_ms < first)
            first = w[i].done_ms;
        if (w[i].done_ms > last)
            last = w[i].done_ms;
    }
    printf("# %d waiting threads (started in %lld ms): the first served %lld ms after the "
           "release, all %d within %lld ms (%.2f ms a hand-over)\n",
           many, registered - t_start, first - released, many, last - released,
           (double)(last - released) / many);
    assert_int_equal(bad, 0);
    assert_int_equal(atomic_load(&overlaps), 0);
    assert_true(first - released < 1000);
    assert_holding(rc, key, NULL, 0);
    assert_nothing_left(rc, key);
    free(w);
    distlock_client_free(c);
    distlock_client_free(holder);
}

/* 3 nodes, node 2 stopped (SIGSTOP) while two threads wait for a key held
 * on all three. The holder's release (a quorum: nodes 0 and 1) wakes the
 * thread with the turn, whose attempt wins on nodes 0 and 1; it releases,
 * and the next wins too, each within a few command timeouts (500 ms), not
 * at a deadline (20 s). Never both at a time; nothing left on 0 and 1. */
static void test_release_reaches_the_next_waiter_with_a_node_stopped(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnpromise:stopped";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 50, 100);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    assert_holding(rc, key, NULL, 3);
    atomic_int inside, overlaps;
    atomic_init(&inside, 0);
    atomic_init(&overlaps, 0);
    waiting_thread a = { .c = c, .key = key, .wait_ms = 20000, .inside = &inside,
                         .overlaps = &overlaps };
    waiting_thread_start(&a);
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 1 && key_channel_subscribers(rc, 1, key) == 1 &&
                              key_channel_subscribers(rc, 2, key) == 1, 10000));
    waiting_thread b = { .c = c, .key = key, .wait_ms = 20000, .inside = &inside,
                         .overlaps = &overlaps };
    waiting_thread_start(&b);
    assert_true(RH_WAIT_UNTIL(waiting_thread_sleeping(&b), 10000));
    assert_int_equal(rh_pause(rc, 2), 0);
    long long released = 0;
    assert_true(release_ok_started_at(held, &released));
    distlock_lock_free(held);
    waiting_thread_join(&a, "a");
    waiting_thread_join(&b, "b");
    long long last = a.done_ms > b.done_ms ? a.done_ms : b.done_ms;
    printf("# node 2 stopped: both waiters served %lld ms after the release (a %d, b %d)\n",
           last - released, a.rc, b.rc);
    assert_int_equal(rh_resume(rc, 2), 0);
    assert_rc(a.rc, DISTLOCK_OK);
    assert_rc(b.rc, DISTLOCK_OK);
    assert_int_equal(atomic_load(&overlaps), 0);
    assert_true(last - released < 5000);
    /* nothing left where the releases ran (node 2 keeps the holder's key:
     * it was stopped through its release) */
    assert_true(RH_WAIT_UNTIL(keys_left(rc, 0, key) == 0 && keys_left(rc, 1, key) == 0, 3000));
    distlock_client_free(c);
    distlock_client_free(holder);
}

/* ------------------------------------------------ calls that arrive while others wait */

/* The key frees without a message, as when its holder's lease ends (the
 * holder died): only a look at the key can tell. */
static void free_key_silently(rh_cluster *rc, const char *key)
{
    redisReply *r = rh_command(rc, 0, 0, "DEL %s", key);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
}

/* A worker pool on one key: 4 threads of a client wait for a key another
 * client holds (re-checks 100-400 ms apart: one of them has the turn), then
 * 40 more threads arrive, one every 25 ms. The arrivals join the turns:
 * node 0 sees only the turn holder's re-checks meanwhile, not one attempt
 * per arrival. Then the release serves all 44, one at a time. */
static void test_arriving_threads_send_no_attempt_until_they_have_the_turn(void **state)
{
    enum { OLD = 4, NEW = 40 };
    rh_cluster *rc = *state;
    const char *key = "turnpromise:arrivals";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 200, 400);
    atomic_store(&waiting_threads_interrupt, 0);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    atomic_int inside, overlaps;
    atomic_init(&inside, 0);
    atomic_init(&overlaps, 0);
    static waiting_thread w[OLD + NEW];
    for (int i = 0; i < OLD + NEW; i++)
        w[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 30000, .inside = &inside,
                                 .overlaps = &overlaps };
    for (int i = 0; i < OLD; i++)
        waiting_thread_start_sleeping(&w[i]);

    long long at0 = attempt_commands_run(rc, 0), t0 = rh_now_ms();
    for (int i = OLD; i < OLD + NEW; i++) {
        sleep_until_ms(t0 + (long long)(i - OLD) * 25);  /* the arrivals' pace */
        waiting_thread_start(&w[i]);
    }
    int all = 1;
    for (int i = OLD; i < OLD + NEW; i++)
        all &= RH_WAIT_UNTIL(waiting_thread_sleeping(&w[i]), 10000);
    long long sent = attempt_commands_run(rc, 0) - at0, window = rh_now_ms() - t0;
    printf("# %d threads arrived over %lld ms while %d waited: %lld attempts (%.1f/s); the turn "
           "holder re-checking 100-400 ms apart sends at most %lld\n",
           NEW, window, OLD, sent, window ? sent * 1000.0 / (double)window : 0.0,
           window / 100 + 2);
    int none_done = 1;
    for (int i = 0; i < OLD + NEW; i++)
        none_done &= !atomic_load(&w[i].done);

    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    int served = 0;
    for (int i = 0; i < OLD + NEW; i++) {
        waiting_thread_join(&w[i], "waiter");
        served += w[i].rc == DISTLOCK_OK;
    }
    distlock_client_free(c);
    distlock_client_free(holder);
    assert_true(all);
    assert_true(none_done);
    assert_true(sent <= window / 100 + 2);
    assert_int_equal(served, OLD + NEW);
    assert_int_equal(atomic_load(&overlaps), 0);
    assert_holding(rc, key, NULL, 0);
    assert_nothing_left(rc, key);
}

/* Three threads wait in turn (re-checks 100-400 ms apart); the key then
 * frees without a message (the holder's lease ended) and a fourth thread
 * arrives at once. The oldest waiter takes the key at its re-check; the
 * arrival, queued behind the three, does not take it first. */
static void test_oldest_waiting_thread_takes_a_freed_key_before_an_arrival(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnpromise:arrival-order";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 200, 400);
    atomic_store(&waiting_threads_interrupt, 0);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    waiting_thread w[3];
    for (int i = 0; i < 3; i++) {
        w[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 20000, .keep = 1 };
        waiting_thread_start_sleeping(&w[i]);
    }
    free_key_silently(rc, key);
    waiting_thread late = { .c = c, .key = key, .wait_ms = 20000, .keep = 1 };
    waiting_thread_start(&late);
    int someone = RH_WAIT_UNTIL(atomic_load(&w[0].done) || atomic_load(&w[1].done) ||
                                atomic_load(&w[2].done) || atomic_load(&late.done), 10000);
    int oldest_won = atomic_load(&w[0].done) && w[0].rc == DISTLOCK_OK;
    int late_won = atomic_load(&late.done) && late.rc == DISTLOCK_OK;
    printf("# the key freed silently: the oldest waiter won: %d, the arrival won: %d\n",
           oldest_won, late_won);
    assert_rc(distlock_client_cancel(c), DISTLOCK_OK);
    for (int i = 0; i < 3; i++)
        waiting_thread_join(&w[i], "old waiter");
    waiting_thread_join(&late, "arrival");
    for (int i = 0; i < 3; i++)
        waiting_thread_drop_lock(&w[i]);
    waiting_thread_drop_lock(&late);
    distlock_lock_free(held);  /* its lease is gone: nothing to release */
    distlock_client_free(c);
    distlock_client_free(holder);
    assert_true(someone);
    assert_true(oldest_won);
    assert_false(late_won);
    assert_rc(late.rc, DISTLOCK_ECANCELED);
    assert_holding(rc, key, NULL, 0);
}

/* An arrival behind a waiter with the turn that re-checks rarely (5-10 s
 * apart) still tries once at its deadline (300 ms): refused with the usual
 * detail while the key is held, and, once the key frees silently, it takes
 * it at that deadline (not before: it had no turn). */
static void test_arrival_without_the_turn_tries_once_at_its_deadline(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnpromise:arrival-deadline";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 10000, 20000);
    atomic_store(&waiting_threads_interrupt, 0);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    distlock_cancel *own = NULL;
    assert_rc(distlock_cancel_new(&own), DISTLOCK_OK);
    waiting_thread first = { .c = c, .key = key, .wait_ms = DISTLOCK_WAIT_FOREVER, .cancel = own };
    waiting_thread_start_sleeping(&first);

    waiting_thread refused = { .c = c, .key = key, .wait_ms = 300 };
    waiting_thread_start(&refused);
    waiting_thread_join(&refused, "refused arrival");
    long long refused_took = refused.done_ms - refused.started_ms;
    free_key_silently(rc, key);
    long long at0 = attempt_commands_run(rc, 0);
    waiting_thread taker = { .c = c, .key = key, .wait_ms = 300, .keep = 1 };
    waiting_thread_start(&taker);
    waiting_thread_join(&taker, "taking arrival");
    long long taker_took = taker.done_ms - taker.started_ms;
    long long sent = attempt_commands_run(rc, 0) - at0;
    printf("# arrivals without the turn: refused after %lld ms (%d: %s); the key freed, taken "
           "after %lld ms (%d) with %lld attempt(s)\n",
           refused_took, refused.rc, refused.detail, taker_took, taker.rc, sent);
    assert_rc(distlock_cancel_fire(own), DISTLOCK_OK);
    waiting_thread_join(&first, "first");
    waiting_thread_drop_lock(&taker);
    distlock_lock_free(held);
    distlock_cancel_free(own);
    distlock_client_free(c);
    distlock_client_free(holder);
    assert_rc(refused.rc, DISTLOCK_NOTACQUIRED);
    assert_non_null(strstr(refused.detail, "still held by another owner after 300 ms"));
    assert_true(refused_took >= 300);
    assert_true(refused_took < 3000);
    assert_rc(taker.rc, DISTLOCK_OK);
    assert_true(taker_took >= 300);
    assert_true(taker_took < 3000);
    assert_int_equal(sent, 1);
    assert_rc(first.rc, DISTLOCK_ECANCELED);
    assert_holding(rc, key, NULL, 0);
}

/* A try-once call (wait 0) while a thread of the client waits with the
 * turn is never held back: it is refused at once with one attempt while
 * the key is held, and takes the key at once when it is free. */
static void test_try_once_is_not_held_behind_waiting_threads(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnpromise:try-once";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 10000, 20000);
    atomic_store(&waiting_threads_interrupt, 0);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    distlock_cancel *own = NULL;
    assert_rc(distlock_cancel_new(&own), DISTLOCK_OK);
    waiting_thread first = { .c = c, .key = key, .wait_ms = DISTLOCK_WAIT_FOREVER, .cancel = own };
    long long before_first = attempt_commands_run(rc, 0);
    waiting_thread_start_sleeping(&first);
    /* Its first sleep can be the one before its subscription is confirmed;
     * its look at the key right after (it has the turn) must be in before
     * the count below starts: its first attempt and that look. The next
     * is 10 s away. */
    assert_true(RH_WAIT_UNTIL(attempt_commands_run(rc, 0) >= before_first + 2, 10000));

    long long at0 = attempt_commands_run(rc, 0);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, key, 10000, 0, 0, &l), DISTLOCK_NOTACQUIRED);
    long long sent = attempt_commands_run(rc, 0) - at0;
    free_key_silently(rc, key);
    long long t0 = rh_now_ms();
    assert_rc(distlock_acquire(c, key, 10000, 0, 0, &l), DISTLOCK_OK);
    long long took = rh_now_ms() - t0;
    printf("# try-once beside a waiting thread: refused with %lld attempt(s); the key free, "
           "taken in %lld ms\n", sent, took);
    assert_int_equal(sent, 1);
    assert_true(took < 1000);
    /* the key stays taken until the waiting thread is cancelled: a release
     * first would wake it, and it could win the key before the cancel */
    assert_rc(distlock_cancel_fire(own), DISTLOCK_OK);
    waiting_thread_join(&first, "first");
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_rc(first.rc, DISTLOCK_ECANCELED);
    distlock_lock_free(held);
    distlock_cancel_free(own);
    distlock_client_free(c);
    distlock_client_free(holder);
}

/* Arrivals beside waiters that take no turns are not held back: there is
 * no turn to join. The waiters re-check 5-10 s apart and cannot win; the
 * key (held by another client) frees silently; the arrival takes it at its
 * first attempt. Beside a key set's waiter ({k, j}, j held) and beside a
 * fair waiter (both wait on k's channel). */
static void test_arrival_beside_waiters_without_turns_tries_at_once(void **state)
{
    rh_cluster *rc = *state;
    const char *keys[2] = { "turnpromise:noturn-set", "turnpromise:noturn-fair" };
    const char *other = "turnpromise:noturn-j";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 10000, 20000);
    atomic_store(&waiting_threads_interrupt, 0);
    distlock_lock *held_j = NULL;
    assert_rc(distlock_acquire(holder, other, 30000, 0, 0, &held_j), DISTLOCK_OK);
    for (int k = 0; k < 2; k++) {
        distlock_lock *held = NULL;
        assert_rc(distlock_acquire(holder, keys[k], 30000, 0, 0, &held), DISTLOCK_OK);
        distlock_cancel *own = NULL;
        assert_rc(distlock_cancel_new(&own), DISTLOCK_OK);
        waiting_thread before = { .c = c, .key = keys[k], .wait_ms = 20000, .cancel = own };
        if (k == 0) {
            before.other_key = other;
        } else {
            before.flags = DISTLOCK_FAIR;
        }
        /* in its wait once it slept after its second attempt (the one
         * that follows its subscription; its first sleep waits for that
         * subscription): a key freed before that attempt is its to take */
        long long at0 = attempt_commands_run(rc, 0);
        waiting_thread_start_sleeping(&before);
        assert_true(RH_WAIT_UNTIL(attempt_commands_run(rc, 0) >= at0 + 2, 10000));
        free_key_silently(rc, keys[k]);
        /* The arrival keeps what it won until the waiter before is
         * cancelled: its release would wake that waiter, which could win
         * the key before the cancel (a fair one can). */
        waiting_thread arrival = { .c = c, .key = keys[k], .wait_ms = 20000, .keep = 1 };
        waiting_thread_start(&arrival);
        waiting_thread_join(&arrival, "arrival");
        printf("# beside a %s waiter: the arrival %d after %lld ms (the waiter re-checks 5-10 s "
               "apart)\n", k == 0 ? "key set's" : "fair", arrival.rc,
               arrival.done_ms - arrival.started_ms);
        assert_rc(distlock_cancel_fire(own), DISTLOCK_OK);
        waiting_thread_join(&before, "the waiter before");
        waiting_thread_drop_lock(&arrival);
        distlock_lock_free(held);
        distlock_cancel_free(own);
        assert_rc(arrival.rc, DISTLOCK_OK);
        assert_true(arrival.done_ms - arrival.started_ms < 2000);
        assert_rc(before.rc, DISTLOCK_ECANCELED);
    }
    assert_rc(distlock_release(held_j), DISTLOCK_OK);
    distlock_lock_free(held_j);
    distlock_client_free(c);
    distlock_client_free(holder);
}

/* A writer of this client that found read locks notes itself among the
 * key's waiting writers and takes no turns; a writer arriving next is not
 * held back: its first attempt goes out (it notes itself there too). */
static void test_writer_arriving_beside_a_noted_writer_tries_at_once(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnpromise:noturn-writer";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 10000, 20000);
    atomic_store(&waiting_threads_interrupt, 0);
    distlock_lock *reader = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, DISTLOCK_SHARED, &reader), DISTLOCK_OK);
    char writers[128];
    snprintf(writers, sizeof writers, "{%s}:writers", key);
    waiting_thread first = { .c = c, .key = key, .wait_ms = 20000 };
    waiting_thread_start_sleeping(&first);
    assert_true(RH_WAIT_UNTIL(zcard(rc, writers) == 1, 10000));
    waiting_thread arrival = { .c = c, .key = key, .wait_ms = 20000 };
    long long t0 = rh_now_ms();
    waiting_thread_start(&arrival);
    int noted = RH_WAIT_UNTIL(zcard(rc, writers) == 2, 10000);
    long long took = rh_now_ms() - t0;
    printf("# a writer arriving beside a noted writer noted itself after %lld ms (re-checks "
           "5-10 s apart)\n", took);
    assert_rc(distlock_client_cancel(c), DISTLOCK_OK);
    waiting_thread_join(&first, "first writer");
    waiting_thread_join(&arrival, "arriving writer");
    assert_rc(distlock_release(reader), DISTLOCK_OK);
    distlock_lock_free(reader);
    distlock_client_free(c);
    distlock_client_free(holder);
    assert_true(noted);
    assert_true(took < 2000);
    assert_rc(first.rc, DISTLOCK_ECANCELED);
    assert_rc(arrival.rc, DISTLOCK_ECANCELED);
    assert_true(RH_WAIT_UNTIL(zcard(rc, writers) == 0, 3000));
    assert_nothing_left(rc, key);
}

/* An arrival queued behind a waiting thread (re-checks 50-100 ms apart)
 * sees the interrupt hook within a re-check interval, and its own cancel at
 * once; the thread with the turn waits on and wins at the release. */
static void test_queued_arrival_sees_the_hook_and_its_cancel(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnpromise:arrival-cancel";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 50, 100);
    atomic_store(&waiting_threads_interrupt, 0);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    waiting_thread first = { .c = c, .key = key, .wait_ms = 20000 };
    waiting_thread_start_sleeping(&first);
    distlock_cancel *own = NULL;
    assert_rc(distlock_cancel_new(&own), DISTLOCK_OK);
    waiting_thread hooked = { .c = c, .key = key, .wait_ms = 20000, .interruptible = 1 };
    waiting_thread cancelled = { .c = c, .key = key, .wait_ms = 20000, .cancel = own };
    waiting_thread_start_sleeping(&hooked);
    waiting_thread_start_sleeping(&cancelled);
    long long t0 = rh_now_ms();
    atomic_store(&waiting_threads_interrupt, 1);
    waiting_thread_join(&hooked, "hooked arrival");
    long long t1 = rh_now_ms();
    assert_rc(distlock_cancel_fire(own), DISTLOCK_OK);
    waiting_thread_join(&cancelled, "cancelled arrival");
    printf("# queued arrivals: the hook's %d after %lld ms, the own cancel's %d after %lld ms\n",
           hooked.rc, hooked.done_ms - t0, cancelled.rc, cancelled.done_ms - t1);
    atomic_store(&waiting_threads_interrupt, 0);
    int first_waits = !atomic_load(&first.done);
    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    waiting_thread_join(&first, "first");
    distlock_cancel_free(own);
    distlock_client_free(c);
    distlock_client_free(holder);
    assert_rc(hooked.rc, DISTLOCK_ECANCELED);
    assert_true(hooked.done_ms - t0 < 2000);
    assert_rc(cancelled.rc, DISTLOCK_ECANCELED);
    assert_true(cancelled.done_ms - t1 < 1000);
    assert_true(first_waits);
    assert_rc(first.rc, DISTLOCK_OK);
    assert_holding(rc, key, NULL, 0);
    assert_nothing_left(rc, key);
}

int main(void)
{
    const struct CMUnitTest one_node[] = {
        cmocka_unit_test_setup(test_interrupt_hook_reaches_a_waiting_thread_without_the_turn,
                               heal),
        cmocka_unit_test_setup(test_cancels_end_waiting_threads_without_the_turn_at_once, heal),
        cmocka_unit_test_setup(test_short_waits_behind_a_wait_forever_end_at_their_deadlines,
                               heal),
        cmocka_unit_test_setup(test_permit_waiter_not_held_behind_one_that_cannot_take_a_permit,
                               heal),
        cmocka_unit_test_setup(test_waiting_writer_not_held_behind_a_reader_its_intent_refuses,
                               heal),
        cmocka_unit_test_setup(test_release_wakes_the_plain_waiter_behind_an_older_key_set_waiter,
                               heal),
        cmocka_unit_test_setup(test_next_waiter_takes_a_key_lost_by_expiry_while_its_holder_lives,
                               heal),
        cmocka_unit_test_setup(test_mixed_waiters_with_read_locks_all_served_one_writer_at_a_time,
                               heal),
        cmocka_unit_test_setup(test_mixed_waiters_with_fair_ones_all_served_one_at_a_time, heal),
        cmocka_unit_test_setup(test_key_taken_once_the_turn_holders_hung_attempt_times_out,
                               heal),
        cmocka_unit_test_setup(test_thousand_waiting_threads_served_one_at_a_time, heal),
        cmocka_unit_test_setup(test_arriving_threads_send_no_attempt_until_they_have_the_turn,
                               heal),
        cmocka_unit_test_setup(test_oldest_waiting_thread_takes_a_freed_key_before_an_arrival,
                               heal),
        cmocka_unit_test_setup(test_arrival_without_the_turn_tries_once_at_its_deadline, heal),
        cmocka_unit_test_setup(test_try_once_is_not_held_behind_waiting_threads, heal),
        cmocka_unit_test_setup(test_arrival_beside_waiters_without_turns_tries_at_once, heal),
        cmocka_unit_test_setup(test_writer_arriving_beside_a_noted_writer_tries_at_once, heal),
        cmocka_unit_test_setup(test_queued_arrival_sees_the_hook_and_its_cancel, heal),
    };
    const struct CMUnitTest three_nodes[] = {
        cmocka_unit_test_setup(test_release_reaches_the_next_waiter_with_a_node_stopped, heal),
    };
    /* DISTLOCK_TEST_FILTER=test_thousand*: one test alone (timing it) */
    if (getenv("DISTLOCK_TEST_FILTER"))
        cmocka_set_test_filter(getenv("DISTLOCK_TEST_FILTER"));
    int failed = cmocka_run_group_tests_name("one node", one_node, group_setup, group_teardown);
    failed += cmocka_run_group_tests_name("three nodes", three_nodes, group_setup_3,
                                          group_teardown);
    return failed;
}
