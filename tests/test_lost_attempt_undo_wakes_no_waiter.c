/* test_lost_attempt_undo_wakes_no_waiter.c -- a waiting acquire whose
 * attempt loses but was granted on a minority of the nodes gives those
 * grants back (its undo), and that undo wakes no waiter: it freed no lock
 * anyone held, so there is no release to announce. Else a key held by a
 * quorum but missing on one node (a holder whose request to that node was
 * never sent, as a fresh client's first round may leave it, or a node
 * restarted empty) makes every waiter of it spin: each attempt wins that
 * node, loses, undoes it, and the undo's message wakes the waiters (the
 * one that sent it included) for the next attempt at once.
 *
 * Against 3 real nodes; the holder's key is deleted on node 2 by hand, the
 * state such a holder leaves. Re-checks are 5 s apart, so in the windows
 * counted only a wake can make an attempt. */
#include "test_common.h"
#include "test_multi_drive.h"

#include "test_waiting_threads.h"

DEFINE_GROUP(3)

/* Bound on the attempts node 0 runs in a window: a waiter's first attempt
 * and the one after its subscription (a command or two each), not one per
 * wake of a spinning waiter (hundreds to thousands in that time). */
enum { FEW = 10, WINDOW_MS = 600 };

/* A client whose waiters re-check 5 s apart: within a test's window only
 * a wake can make them try again. */
static distlock_client *slow_retry_client(rh_cluster *rc)
{
    return new_waiting_client(rh_uris(rc), 5000, 5000);
}

/* key held by holder_c on nodes 0 and 1 (a quorum), free on node 2. */
static distlock_lock *hold_on_quorum_only(rh_cluster *rc, distlock_client *holder_c,
                                          const char *key, long flags)
{
    /* holder_c is a fresh client, and its lock is counted on all 3 nodes
     * before node 2's copy goes: each connection up first (a first round
     * may end at the quorum, its request to a node still connecting unsent) */
    connect_every_node(rc, holder_c, "undo:connect");
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder_c, key, 30000, 0, (unsigned)flags, &held), DISTLOCK_OK);
    assert_holding(rc, key, distlock_lock_token(held), 3);
    assert_int_equal(rh_del(rc, 2, 0, key), 1);
    assert_holding(rc, key, distlock_lock_token(held), 2);
    return held;
}

/* Waiters of the multi API: one acquire of each of two clients waits;
 * neither client's undo wakes itself or the other. */
static void test_multi_waiters_not_woken_by_undo(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "undo:multi";
    distlock_client *holder_c = new_client(rh_uris(rc));
    distlock_client *c1 = slow_retry_client(rc), *c2 = slow_retry_client(rc);
    distlock_lock *held = hold_on_quorum_only(rc, holder_c, key, 0);
    distlock_multi *m1 = NULL, *m2 = NULL;
    assert_rc(distlock_multi_new(c1, &m1), DISTLOCK_OK);
    assert_rc(distlock_multi_new(c2, &m2), DISTLOCK_OK);
    distlock_op *a = NULL, *b = NULL;
    assert_rc(distlock_multi_acquire(m1, key, 10000, 30000, 0, NULL, &a), DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m2, key, 10000, 30000, 0, NULL, &b), DISTLOCK_OK);
    /* both in their wait: subscribed on every node */
    long long end = rh_now_ms() + 10000;
    for (int i = 0; i < rc->n; i++)
        while (key_channel_subscribers(rc, i, key) != 2) {
            assert_true(rh_now_ms() < end);
            multi_turn(m1, 5);
            multi_turn(m2, 5);
        }
    long long before = attempt_commands_run(rc, 0);
    end = rh_now_ms() + WINDOW_MS;
    while (rh_now_ms() < end) {
        multi_turn(m1, 5);
        multi_turn(m2, 5);
    }
    long long sent = attempt_commands_run(rc, 0) - before;
    printf("  attempts node 0 ran while two multi waiters waited %d ms: %lld\n", WINDOW_MS,
           sent);
    assert_true(sent < FEW);
    assert_false(distlock_op_done(a));
    assert_false(distlock_op_done(b));

    /* the holder's release still serves them, one after the other */
    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    end = rh_now_ms() + 4000;
    while (!distlock_op_done(a) && !distlock_op_done(b)) {
        assert_true(rh_now_ms() < end);
        multi_turn(m1, 5);
        multi_turn(m2, 5);
    }
    distlock_op *won = distlock_op_done(a) ? a : b;
    assert_op(won, DISTLOCK_OK);
    distlock_lock *l = distlock_op_take_lock(won);
    assert_non_null(l);
    assert_holding_quorum(rc, key, distlock_lock_token(l), rc->n);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_multi *other_m = won == a ? m2 : m1;
    distlock_op *other = won == a ? b : a;
    multi_drive_until(other_m, other, 4000);
    assert_op(other, DISTLOCK_OK);
    l = distlock_op_take_lock(other);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_op_free(a);
    distlock_op_free(b);
    distlock_multi_free(m1);
    distlock_multi_free(m2);
    distlock_client_free(c1);
    distlock_client_free(c2);
    distlock_client_free(holder_c);
}

/* The waiting call w (a plain or fair lock, or a key set, held_key the
 * one of them held on a quorum only): its lost attempt's undo wakes
 * neither it nor anyone else; the holder's release (of held) serves it. */
static void waiter_not_woken_by_undo(rh_cluster *rc, waiting_thread *w, const char *held_key,
                                     distlock_lock *held, const char *what)
{
    waiting_thread_start(w);
    for (int i = 0; i < rc->n; i++)
        assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, i, held_key) == 1, 10000));
    long long before = attempt_commands_run(rc, 0);
    /* a window in which nothing but a wake could make an attempt */
    int spun = RH_WAIT_UNTIL(attempt_commands_run(rc, 0) - before >= FEW, WINDOW_MS);
    long long sent = attempt_commands_run(rc, 0) - before;
    printf("  attempts node 0 ran while %s waited %d ms: %lld\n", what, WINDOW_MS, sent);
    int done_early = atomic_load(&w->done);

    /* the holder's release serves it; the waiting thread is joined before
     * anything is asserted */
    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    waiting_thread_join(w, what);
    assert_false(spun);
    assert_int_equal(done_early, 0);
    assert_rc(w->rc, DISTLOCK_OK);
    assert_holding_quorum(rc, w->key, distlock_lock_token(w->lock), rc->n);
    if (w->other_key)
        assert_holding_quorum(rc, w->other_key, distlock_lock_token(w->lock), rc->n);
    waiting_thread_drop_lock(w);
}

/* A blocking waiter (plain, or fair behind a fair holder): its undo does not
 * wake it again. */
static void blocking_waiter_not_woken_by_undo(rh_cluster *rc, const char *key, unsigned flags)
{
    distlock_client *holder_c = new_client(rh_uris(rc));
    distlock_client *c = slow_retry_client(rc);
    distlock_lock *held = hold_on_quorum_only(rc, holder_c, key, flags);
    waiting_thread w = { .c = c, .key = key, .flags = flags, .wait_ms = 30000, .keep = 1 };
    waiter_not_woken_by_undo(rc, &w, key, held,
                             (flags & DISTLOCK_FAIR) ? "a blocking fair waiter"
                                                     : "a blocking plain waiter");
    distlock_client_free(c);
    distlock_client_free(holder_c);
}

static void test_blocking_waiter_not_woken_by_undo(void **state)
{
    blocking_waiter_not_woken_by_undo(*state, "undo:blocking", 0);
}

static void test_blocking_fair_waiter_not_woken_by_undo(void **state)
{
    blocking_waiter_not_woken_by_undo(*state, "undo:fair", DISTLOCK_FAIR);
}

/* A key set's waiter: its attempt takes both keys on node 2 (the one
 * held there is missing), loses, and gives them back; that undo wakes
 * neither it (waiting for the held key) nor anyone else. */
static void test_key_set_waiter_not_woken_by_undo(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder_c = new_client(rh_uris(rc));
    distlock_client *c = slow_retry_client(rc);
    distlock_lock *held = hold_on_quorum_only(rc, holder_c, "undo:set:held", 0);
    waiting_thread w = { .c = c, .key = "undo:set:free", .other_key = "undo:set:held",
                         .wait_ms = 30000, .keep = 1 };
    waiter_not_woken_by_undo(rc, &w, "undo:set:held", held, "a key set's waiter");
    distlock_client_free(c);
    distlock_client_free(holder_c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_multi_waiters_not_woken_by_undo, heal),
        cmocka_unit_test_setup(test_blocking_waiter_not_woken_by_undo, heal),
        cmocka_unit_test_setup(test_blocking_fair_waiter_not_woken_by_undo, heal),
        cmocka_unit_test_setup(test_key_set_waiter_not_woken_by_undo, heal),
    };
    return cmocka_run_group_tests_name("three nodes", tests, group_setup, group_teardown);
}
