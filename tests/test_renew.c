/* test_renew.c -- DISTLOCK_AUTO_RENEW: the watchdog keeps a short lease
 * alive, and reports a lock found lost (flag, callback, event fd).
 *
 * Also: distlock_extend() to a shorter ttl re-arms the watchdog from the new
 * ttl (it must not sleep on until the old ttl/3 while the key expires under
 * a "held" lock), and the validity never overstates the lease; one key of
 * another type in a renewal batch does not make the other locks of that
 * batch lost; failing renewals back off instead of retrying every 50 ms
 * inside the ttl/6 batching slack (a spin of thousands of EVALSHAs per
 * second). */
#include "test_common.h"
#include "test_thread_control.h"
#include "harness/faultproxy.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

DEFINE_GROUP(3)

struct lost_rec {
    atomic_int calls;
    distlock_lock *seen;
};

static void on_lost(distlock_lock *l, void *arg)
{
    struct lost_rec *r = arg;
    r->seen = l;
    atomic_fetch_add(&r->calls, 1);
}

static int fd_readable(int fd, int timeout_ms)
{
    struct pollfd p = { fd, POLLIN, 0 };
    return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

/* Held for several TTLs: the key is there, with our token, all along. */
static void test_auto_renew_keeps_lock(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    /* ttl 600 ms: renewed every 200 ms, which leaves slack for a loaded
     * machine running sanitizers. */
    assert_rc(distlock_acquire(c, "ar", 600, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    const char *tok = distlock_lock_token(l);
    long long start = rh_now_ms(), checks = 0;
    /* Observe the key for 2.4 s (4 TTLs): it must never be missing on a quorum. */
    while (rh_now_ms() - start < 2400) {
        int held = rh_count_holding(rc, "ar", tok);
        if (held < 2) {
            print_error("after %lld ms the lock is on %d node(s) only\n", rh_now_ms() - start, held);
            fail();
        }
        checks++;
        rh_sleep_ms(20);
    }
    assert_true(checks > 10);
    assert_true(rh_count_holding(rc, "ar", tok) >= 2);
    assert_int_equal(distlock_lock_lost(l), 0);
    assert_true(distlock_lock_validity_ms(l) > 0);
    /* Another client can't take it meanwhile. */
    distlock_client *c2 = new_client(rh_uris(rc));
    distlock_lock *l2 = NULL;
    assert_rc(distlock_acquire(c2, "ar", 600, 0, 0, &l2), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_holding(rc, "ar", NULL, 0);
    /* Released: renewal stopped, the key does not come back. */
    assert_rc(distlock_acquire(c2, "ar", 30000, 0, 0, &l2), DISTLOCK_OK);
    assert_holding_quorum(rc, "ar", distlock_lock_token(l2), 3);
    start = rh_now_ms();
    while (rh_now_ms() - start < 500) {
        assert_int_equal(rh_count_holding(rc, "ar", tok), 0);
        assert_true(rh_count_holding(rc, "ar", distlock_lock_token(l2)) >= 2);
        rh_sleep_ms(20);
    }
    distlock_lock_free(l2);
    distlock_lock_free(l);
    distlock_client_free(c2);
    distlock_client_free(c);
}

/* Deleted behind its back: found lost within a bounded time; the flag, the
 * callback and the client's event fd all say so. */
static void test_auto_renew_detects_loss(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    int fd = distlock_client_lost_fd(c);
    assert_true(fd >= 0);
    assert_false(fd_readable(fd, 0));
    distlock_lock *l = NULL, *keep = NULL;
    struct lost_rec rec = { 0 };
    assert_rc(distlock_acquire(c, "arl", 600, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    assert_rc(distlock_lock_on_lost(l, on_lost, &rec), DISTLOCK_OK);
    /* A second renewed lock that stays fine. */
    assert_rc(distlock_acquire(c, "ark", 600, 0, DISTLOCK_AUTO_RENEW, &keep), DISTLOCK_OK);

    /* Another owner takes the key on every node. */
    for (int i = 0; i < 3; i++) assert_int_equal(rh_set(rc, i, 0, "arl", "thief", 60000), 0);
    long long t0 = rh_now_ms();
    assert_true(RH_WAIT_UNTIL(distlock_lock_lost(l) == 1, 5000));
    printf("# loss noticed after %lld ms (ttl 600)\n", rh_now_ms() - t0);
    assert_true(RH_WAIT_UNTIL(atomic_load(&rec.calls) >= 1, 2000));
    assert_ptr_equal(rec.seen, l);
    assert_true(fd_readable(fd, 2000));
    uint64_t v = 0;
    assert_int_equal(read(fd, &v, sizeof v), (ssize_t)sizeof v);
    assert_true(v >= 1);
    assert_int_equal(distlock_lock_validity_ms(l), 0);
    /* The thief's key is untouched, and the callback fires once only. */
    assert_holding(rc, "arl", "thief", 3);
    long long t1 = rh_now_ms();
    while (rh_now_ms() - t1 < 700) rh_sleep_ms(50);
    assert_int_equal(atomic_load(&rec.calls), 1);
    assert_holding(rc, "arl", "thief", 3);
    assert_fails(distlock_release(l), DISTLOCK_ENOTOWNER);
    assert_fails(distlock_extend(l, 1000), DISTLOCK_ENOTOWNER);
    assert_holding(rc, "arl", "thief", 3);

    /* The other lock kept going. */
    assert_int_equal(distlock_lock_lost(keep), 0);
    assert_holding_quorum(rc, "ark", distlock_lock_token(keep), 3);
    assert_rc(distlock_release(keep), DISTLOCK_OK);
    distlock_lock_free(keep);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* Deleted (not taken): also lost, and the watchdog must not resurrect it. */
static void test_auto_renew_deleted(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    /* deleted from every node below: each connection up first (a first
     * round may end at the quorum, its request to a node still connecting
     * unsent), and each node seen holding it (the third node's reply may
     * come after the grant) */
    connect_every_node(rc, c, "ard:connect");
    distlock_lock *l = NULL;
    struct lost_rec rec = { 0 };
    assert_rc(distlock_acquire(c, "ard", 450, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    assert_rc(distlock_lock_on_lost(l, on_lost, &rec), DISTLOCK_OK);
    assert_holding(rc, "ard", distlock_lock_token(l), 3);
    for (int i = 0; i < 3; i++) assert_int_equal(rh_del(rc, i, 0, "ard"), 1);
    assert_true(RH_WAIT_UNTIL(distlock_lock_lost(l) == 1, 5000));
    assert_true(RH_WAIT_UNTIL(atomic_load(&rec.calls) == 1, 2000));
    assert_holding(rc, "ard", NULL, 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* Quorum lost while renewing (two of three nodes die): lost as well. */
static void test_auto_renew_quorum_gone(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 200), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 200), DISTLOCK_OK);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "arq", 900, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    assert_int_equal(rh_kill(rc, 0), 0);
    assert_int_equal(rh_kill(rc, 1), 0);
    assert_true(RH_WAIT_UNTIL(distlock_lock_lost(l) == 1 || distlock_lock_validity_ms(l) == 0, 5000));
    assert_int_equal(distlock_lock_validity_ms(l), 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* distlock_lock_abandon(): the handle goes, the lock does not. Nothing is
 * sent (the key keeps our token, also after the client is freed), renewal
 * stops (the key then expires by its TTL instead of living on). */
static void test_abandon_keeps_key_and_stops_renewal(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    char tokbuf[64];
    const char *tok = tokbuf;
    assert_rc(distlock_acquire(c, "aba", 900, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    snprintf(tokbuf, sizeof tokbuf, "%s", distlock_lock_token(l));
    (void)wait_renewed(c, client_stat(c, "renewal_total"), 1, 1);  /* it was renewed */
    distlock_lock_abandon(l);
    long long t_abandon = rh_now_ms();
    /* renewed, so the acquire's requests have all landed: the count is final */
    assert_holding_quorum(rc, "aba", tok, 3);
    int held = rh_count_holding(rc, "aba", tok);
    distlock_client_free(c);  /* a client's free releases what it holds: not this */
    assert_holding(rc, "aba", tok, held);
    for (int i = 0; i < rc->n; i++) {
        long long p = rh_pttl(rc, i, 0, "aba");
        assert_true(p == -2 || (p > 0 && p <= 900));
    }
    /* Not renewed: it is gone within its TTL of the last renewal. */
    assert_true(RH_WAIT_UNTIL(rh_count_holding(rc, "aba", tok) == 0, 900 + 2000 * slow_factor()));
    print_message("abandoned lease expired %lld ms after the abandon (ttl 900 ms)\n",
                  rh_now_ms() - t_abandon);
}

/* A reentrant ownership lives on while another handle holds it: abandoning
 * the inner handle drops its count only; the renewal stops with the last. */
static void test_abandon_reentrant_counts(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *outer = NULL, *inner = NULL;
    char tokbuf[64];
    const char *tok = tokbuf;
    unsigned f = DISTLOCK_AUTO_RENEW | DISTLOCK_REENTRANT;
    assert_rc(acquire_as(c, "abr", 600, 0, f, "me", &outer), DISTLOCK_OK);
    assert_rc(acquire_as(c, "abr", 600, 0, f, "me", &inner), DISTLOCK_OK);
    snprintf(tokbuf, sizeof tokbuf, "%s", distlock_lock_token(outer));
    distlock_lock_abandon(inner);
    /* Renewed past several TTLs by the outer handle. */
    long long t0 = rh_now_ms();
    uint64_t r = client_stat(c, "renewal_total");
    r = wait_renewed(c, r, 1, 4);
    assert_true(rh_now_ms() - t0 > 600);
    assert_holding_quorum(rc, "abr", tok, 3);
    int held = rh_count_holding(rc, "abr", tok);
    distlock_lock_abandon(outer);
    assert_holding(rc, "abr", tok, held);
    assert_true(RH_WAIT_UNTIL(rh_count_holding(rc, "abr", tok) == 0, 600 + 2000 * slow_factor()));
    assert_true(client_stat(c, "renewal_total") <= r + 1);  /* at most one under way */
    assert_true(client_stat(c, "release_total") == 0);
    distlock_lock_abandon(NULL);
    distlock_client_free(c);
}

struct reacquire_arg {
    distlock_client *c;
    distlock_lock *lock;
    int rc;
};

static void *reacquire_thread(void *arg)
{
    struct reacquire_arg *a = arg;
    a->rc = acquire_as(a->c, "abx", 6000, 0,
                       DISTLOCK_AUTO_RENEW | DISTLOCK_REENTRANT, "me", &a->lock);
    return NULL;
}

/* A reentrant acquire of the same owner is under way (its extend on the
 * wire) when the last other handle is abandoned. The acquire then succeeds:
 * the handle it returns holds the lock, so its lease must be valid and
 * renewed like any DISTLOCK_AUTO_RENEW lock, not left to run out by a
 * record the abandon marked released. */
static void test_reentrant_acquire_racing_an_abandon_is_renewed(void **state)
{
    rh_cluster *rc = *state;
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *c = new_client(fp_uris(fp));
    /* The held extend must wait for the unhold, not time out. */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 20000), DISTLOCK_OK);
    /* the lock is checked on all 3 nodes at the end: all 3 connections first */
    connect_every_node(rc, c, "abx:warm");
    unsigned f = DISTLOCK_AUTO_RENEW | DISTLOCK_REENTRANT;
    distlock_lock *outer = NULL;
    assert_rc(acquire_as(c, "abx", 6000, 0, f, "me", &outer), DISTLOCK_OK);
    char tokbuf[64];
    const char *tok = tokbuf;
    snprintf(tokbuf, sizeof tokbuf, "%s", distlock_lock_token(outer));
    /* ttl 6 s: the first renewal is due at 2 s, after everything below, so
     * the only request held is the reentrant acquire's extend. */
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold * up"), 0);
    struct reacquire_arg a = { .c = c };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, reacquire_thread, &a), 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held 0 up 1 10000"), 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held 1 up 1 10000"), 0);
    distlock_lock_abandon(outer);  /* the other handle goes while the extend is out */
    assert_int_equal(fp_cmd(fp, NULL, 0, "unhold * up"), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_rc(a.rc, DISTLOCK_OK);
    assert_string_equal(distlock_lock_token(a.lock), tok);
    long v = distlock_lock_validity_ms(a.lock);
    print_message("reentrant acquire won during the abandon: validity %ld ms\n", v);
    assert_true(v > 0);
    /* Renewed past its TTL by the watchdog, as every auto-renewed lock. */
    uint64_t r0 = client_stat(c, "renewal_total");
    assert_true(RH_WAIT_UNTIL(client_stat(c, "renewal_total") > r0, 6000 * slow_factor()));
    assert_holding_quorum(rc, "abx", tok, 3);
    assert_rc(distlock_release(a.lock), DISTLOCK_OK);
    distlock_lock_free(a.lock);
    distlock_client_free(c);
    fp_stop(fp);
}

/* ------------------------------------------- extend to a shorter ttl */

struct extend_watch {
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
static int extend_watch_bad(struct extend_watch *w)
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

static void test_extend_shorter_rearms_watchdog(void **state)
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
    struct extend_watch w = { .rc = rc, .other = c2, .mine = l, .key = "x3",
                        .tok = distlock_lock_token(l), .t0 = rh_now_ms() };
    if (RH_WAIT_UNTIL(extend_watch_bad(&w), 3000)) {
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

/* --------------------------------- a key of another type in a batch */

static void replace_with_hash(rh_cluster *rc, const char *key)
{
    /* Atomic on each node: no renewal ever sees the key missing. */
    for (int i = 0; i < rc->n; i++)
        node_command_ok(rc, i, "EVAL %s 1 %s",
                      "redis.call('DEL', KEYS[1]) redis.call('HSET', KEYS[1], 'f', 'v') "
                      "return 'OK'", key);
}

static void test_renewal_batch_with_wrongtype_key(void **state)
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

/* ---------------------------------------- failing renewals back off */

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

static void test_renewal_backs_off_paused_nodes(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    /* The lock is counted on every node below: each connection up first. */
    connect_every_node(rc, c, "x6b:connect");
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
static void test_renewal_backs_off_killed_nodes(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    /* The lock is counted on every node below: each connection up first. */
    connect_every_node(rc, c, "x6k:connect");
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
        cmocka_unit_test_setup(test_auto_renew_keeps_lock, heal),
        cmocka_unit_test_setup(test_auto_renew_detects_loss, heal),
        cmocka_unit_test_setup(test_auto_renew_deleted, heal),
        cmocka_unit_test_setup(test_auto_renew_quorum_gone, heal),
        cmocka_unit_test_setup(test_abandon_keeps_key_and_stops_renewal, heal),
        cmocka_unit_test_setup(test_abandon_reentrant_counts, heal),
        cmocka_unit_test_setup(test_reentrant_acquire_racing_an_abandon_is_renewed, heal),
        cmocka_unit_test_setup(test_extend_shorter_rearms_watchdog, heal),
        cmocka_unit_test_setup(test_renewal_batch_with_wrongtype_key, heal),
        cmocka_unit_test_setup(test_renewal_backs_off_paused_nodes, heal),
        cmocka_unit_test_setup(test_renewal_backs_off_killed_nodes, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
