/* test_review_a_renew.c -- review items 3, 6a and 6b: the renewal thread
 * (item 4, a use-after-free, has its own file: an ASan report ends the
 * process).
 *
 *  3  distlock_extend() to a shorter ttl re-arms the watchdog from the new
 *     ttl (it slept on until the old ttl/3, so the key expired under a
 *     "held" lock), and the validity never overstates the lease.
 *  6a one key of another type in a renewal batch does not make the other
 *     locks of that batch lost.
 *  6b failing renewals back off instead of retrying every 50 ms inside the
 *     ttl/6 batching slack (a spin of thousands of EVALSHAs per second). */
#include "test_common.h"
#include "test_thread_control.h"


DEFINE_GROUP(3)

/* ------------------------------------------------------------ item 3 */

struct watch3 {
    rh_cluster *rc;
    distlock_client *other;
    distlock_lock *mine, *stolen;
    const char *key, *tok;
    long long t0, t_bad;
    int held;
    long validity;
    int lost;
};

/* Something that must never happen while we hold the lock. */
static int bad3(struct watch3 *w)
{
    w->held = rh_count_holding(w->rc, w->key, w->tok);
    w->validity = distlock_lock_validity_ms(w->mine);
    w->lost = distlock_lock_lost(w->mine);
    if (w->stolen == NULL &&
        distlock_acquire(w->other, w->key, 30000, 0, 0, &w->stolen) == DISTLOCK_OK) {
        w->t_bad = rh_now_ms();
        return 1;
    }
    if (w->held < 2 || w->validity > 1000 || w->lost) {
        w->t_bad = rh_now_ms();
        return 1;
    }
    return 0;
}

static void test_review3_extend_shorter_rearms_watchdog(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc)), *c2 = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    pid_t before[64], wd[8];
    int nb = list_tids(before, 64);
    assert_rc(distlock_acquire(c, "x3", 30000, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    /* As in real use, the extend comes once the renewal thread has settled
     * down to wait for this lock's renewal (else, starting up after the
     * extend, it would schedule from the new ttl by luck). */
    int nwd = new_tids(before, nb, 0, wd, 8);
    for (int i = 0; i < nwd; i++)
        (void)RH_WAIT_UNTIL(blocked_in(wd[i], futex_calls, 1), 3000);
    assert_rc(distlock_extend(l, 1000), DISTLOCK_OK);
    long v = distlock_lock_validity_ms(l);
    if (v > 1000) {
        print_error("validity right after extend(l, 1000): %ld ms\n", v);
        fail();
    }
    /* Three times the new ttl: the key never disappears from a quorum,
     * nobody else gets it, the validity never exceeds the 1000 ms lease. */
    struct watch3 w = { .rc = rc, .other = c2, .mine = l, .key = "x3",
                        .tok = distlock_lock_token(l), .t0 = rh_now_ms() };
    if (RH_WAIT_UNTIL(bad3(&w), 3000)) {
        print_error("auto-renewed lock (ttl 30000) after extend(l, 1000): at +%lld ms the key "
                    "holds our token on %d node(s), another client %s it, lost=%d, "
                    "validity=%ld ms\n", w.t_bad - w.t0, w.held,
                    w.stolen ? "ACQUIRED" : "did not acquire", w.lost, w.validity);
        distlock_lock_free(w.stolen);
        fail();
    }
    assert_int_equal(distlock_lock_lost(l), 0);
    v = distlock_lock_validity_ms(l);
    assert_true(v > 0 && v <= 1000);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_holding(rc, "x3", NULL, 0);
    distlock_lock_free(l);
    distlock_client_free(c2);
    distlock_client_free(c);
}

/* ------------------------------------------------------------ item 6a */

static void replace_with_hash(rh_cluster *rc, const char *key)
{
    /* Atomic on each node: no renewal ever sees the key missing. */
    for (int i = 0; i < rc->n; i++)
        node_command_ok(rc, i, "EVAL %s 1 %s",
                      "redis.call('DEL', KEYS[1]) redis.call('HSET', KEYS[1], 'f', 'v') "
                      "return 'OK'", key);
}

static void test_review6a_wrongtype_in_batch(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *a = NULL, *b = NULL;
    /* Same ttl, acquired together: renewed in one batch. The kept one
     * first: its validity ends a moment before the other's (were it the
     * other way round, a renewal between the two ends would find only the
     * kept one left in the batch, and renew it). */
    assert_rc(distlock_acquire(c, "x6a:kept", 600, 0, DISTLOCK_AUTO_RENEW, &b), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "x6a:replaced", 600, 0, DISTLOCK_AUTO_RENEW, &a), DISTLOCK_OK);
    const char *btok = distlock_lock_token(b);
    replace_with_hash(rc, "x6a:replaced");
    long long t0 = rh_now_ms();
    int held = 3, lost = 0;
    /* Four ttls: the other lock of the batch stays held and not lost. */
    if (RH_WAIT_UNTIL((held = rh_count_holding(rc, "x6a:kept", btok)) < 2 ||
                      (lost = distlock_lock_lost(b)) != 0, 2400)) {
        print_error("one key of the batch replaced by a hash: %lld ms later the OTHER lock is "
                    "on %d node(s), lost=%d (the replaced one: lost=%d)\n", rh_now_ms() - t0,
                    held, lost, distlock_lock_lost(a));
        fail();
    }
    /* The replaced one is someone else's now: lost, its hash untouched. */
    assert_int_equal(distlock_lock_lost(a), 1);
    for (int i = 0; i < rc->n; i++) {
        redisReply *r = rh_command(rc, i, 0, "TYPE x6a:replaced");
        assert_non_null(r);
        assert_string_equal(r->str, "hash");
        freeReplyObject(r);
    }
    assert_rc(distlock_release(b), DISTLOCK_OK);
    distlock_lock_free(b);
    distlock_lock_free(a);
    distlock_client_free(c);
}

/* ------------------------------------------------------------ item 6b */

/* After the first renewal attempt reaches live node 0, count the EVAL(SHA)s
 * it gets over 2 s: failing renewals must back off, not spin. Returns 0 if
 * so, else prints why and returns -1 (the caller frees its client, whose
 * spinning thread would skew the next test, and fails). */
static int no_renewal_spin(rh_cluster *rc, long long base, const char *what)
{
    const long long cap = 60;
    long long s1 = -1, n = 0;
    if (!RH_WAIT_UNTIL((s1 = script_calls_or_error(rc, 0)) > base, 3000)) {
        print_error("%s: no renewal attempt reached node 0\n", what);
        return -1;
    }
    long long t1 = rh_now_ms();
    int spun = RH_WAIT_UNTIL((n = script_calls_or_error(rc, 0) - s1) > cap, 2000);
    long long dt = rh_now_ms() - t1;
    printf("# %s: %lld EVAL/EVALSHA on the live node in %lld ms\n", what, n, dt);
    if (spun) {
        print_error("%s: the live node received %lld EVAL/EVALSHA calls in %lld ms "
                    "(bound %lld in 2000 ms): failing renewals are not backing off\n",
                    what, n, dt, cap);
        return -1;
    }
    return 0;
}

static void test_review6b_renewal_backoff_paused(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "x6b", 3000, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    const char *tok = distlock_lock_token(l);
    assert_holding(rc, "x6b", tok, 3);
    long long base = script_calls_or_error(rc, 0);
    assert_true(base >= 0);
    assert_int_equal(rh_pause(rc, 1), 0);
    assert_int_equal(rh_pause(rc, 2), 0);
    if (no_renewal_spin(rc, base, "2 of 3 nodes SIGSTOPped") != 0) {
        rh_resume(rc, 1);
        rh_resume(rc, 2);
        distlock_lock_free(l);
        distlock_client_free(c);
        fail();
    }

    /* Back: renewal recovers while validity remains, or the lock is flagged
     * lost once it ends; either way without a spin. */
    long long s2 = script_calls_or_error(rc, 0);
    assert_int_equal(rh_resume(rc, 1), 0);
    assert_int_equal(rh_resume(rc, 2), 0);
    long long t0 = rh_now_ms();
    if (!RH_WAIT_UNTIL(distlock_lock_lost(l) == 1 ||
                       count_pttl_above(rc, "x6b", tok, 1500) >= 2, 6000)) {
        print_error("nodes resumed: after %lld ms neither renewed (on %d node(s) with > 1500 "
                    "ms left) nor flagged lost\n", rh_now_ms() - t0,
                    count_pttl_above(rc, "x6b", tok, 1500));
        fail();
    }
    long long s3 = script_calls_or_error(rc, 0);
    printf("# after resuming: %s, %lld EVAL/EVALSHA on node 0 meanwhile\n",
           distlock_lock_lost(l) ? "lost" : "renewed", s3 - s2);
    assert_true(s3 - s2 <= 60);
    if (!distlock_lock_lost(l)) {
        assert_true(distlock_lock_validity_ms(l) > 0);
        assert_rc(distlock_release(l), DISTLOCK_OK);
    }
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* The same with the two nodes dead (connection refused at once). */
static void test_review6b_renewal_backoff_killed(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "x6k", 3000, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    assert_holding(rc, "x6k", distlock_lock_token(l), 3);
    long long base = script_calls_or_error(rc, 0);
    assert_true(base >= 0);
    assert_int_equal(rh_kill(rc, 1), 0);
    assert_int_equal(rh_kill(rc, 2), 0);
    int spun = no_renewal_spin(rc, base, "2 of 3 nodes killed");
    distlock_lock_free(l);
    distlock_client_free(c);
    if (spun) fail();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_review3_extend_shorter_rearms_watchdog, heal),
        cmocka_unit_test_setup(test_review6a_wrongtype_in_batch, heal),
        cmocka_unit_test_setup(test_review6b_renewal_backoff_paused, heal),
        cmocka_unit_test_setup(test_review6b_renewal_backoff_killed, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
