/* test_reentrant.c -- DISTLOCK_REENTRANT: counted on the client per owner;
 * the server still sees one plain token key.
 *
 * A reentrant re-acquire never hands out a lease that is no longer ours: the
 * re-acquire of an owner that already holds the record (same thread) checks
 * Redis: it extends the lease to the new ttl on a quorum (one round trip).
 * When the lease is gone (expired, taken by another client, overwritten) it
 * returns DISTLOCK_ENOTOWNER and marks the record lost. Its flags must fit
 * the record: asking for DISTLOCK_FENCING the first acquire did not ask for
 * is DISTLOCK_EINVAL; adding DISTLOCK_AUTO_RENEW turns renewal on (three
 * nodes). */
#include "test_common.h"

#include <pthread.h>

DEFINE_GROUP(1)
DEFINE_GROUP_SETUP(3)

static void test_same_thread_counts(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *a = NULL, *b = NULL, *x = NULL;
    char buf[64];
    assert_rc(distlock_acquire(c, "re", 30000, 0, DISTLOCK_REENTRANT, &a), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "re", 30000, 0, DISTLOCK_REENTRANT, &b), DISTLOCK_OK);
    assert_string_equal(distlock_lock_token(a), distlock_lock_token(b));
    assert_int_equal(rh_get(rc, 0, 0, "re", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(a));
    redisReply *r = rh_command(rc, 0, 0, "TYPE re");
    assert_non_null(r);
    assert_string_equal(r->str, "string");
    freeReplyObject(r);
    /* Without the flag, the same thread is just another contender. */
    assert_rc(distlock_acquire(c, "re", 30000, 0, 0, &x), DISTLOCK_NOTACQUIRED);

    /* The inner release keeps the key; the outer one removes it. */
    assert_rc(distlock_release(b), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "re", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(a));
    assert_fails(distlock_release(b), DISTLOCK_ENOTOWNER);   /* that handle is spent */
    assert_int_equal(rh_get(rc, 0, 0, "re", NULL, 0), 1);
    assert_rc(distlock_release(a), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "re", NULL, 0), 0);
    distlock_lock_free(a);
    distlock_lock_free(b);

    /* Three deep, freed instead of released: still counted. */
    distlock_lock *h[3];
    for (int i = 0; i < 3; i++)
        assert_rc(distlock_acquire(c, "re", 30000, 0, DISTLOCK_REENTRANT, &h[i]), DISTLOCK_OK);
    distlock_lock_free(h[2]);
    distlock_lock_free(h[1]);
    assert_int_equal(rh_get(rc, 0, 0, "re", NULL, 0), 1);
    distlock_lock_free(h[0]);
    assert_int_equal(rh_get(rc, 0, 0, "re", NULL, 0), 0);
    distlock_client_free(c);
}

struct other {
    distlock_client *c;
    distlock_lock *lock;      /* a handle of the main thread's */
    int rc_release, rc_acquire;
};

static void *other_thread(void *arg)
{
    struct other *o = arg;
    distlock_lock *mine = NULL;
    o->rc_acquire = distlock_acquire(o->c, "re2", 30000, 0, DISTLOCK_REENTRANT, &mine);
    if (mine) distlock_lock_free(mine);
    o->rc_release = distlock_release(o->lock);
    return NULL;
}

static void test_other_thread(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *a = NULL, *b = NULL;
    assert_rc(distlock_acquire(c, "re2", 30000, 0, DISTLOCK_REENTRANT, &a), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "re2", 30000, 0, DISTLOCK_REENTRANT, &b), DISTLOCK_OK);
    struct other o = { .c = c, .lock = b };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread, &o), 0);
    pthread_join(t, NULL);
    /* Another thread is another owner: it neither re-enters nor releases. */
    assert_rc(o.rc_acquire, DISTLOCK_NOTACQUIRED);
    assert_rc(o.rc_release, DISTLOCK_ENOTOWNER);
    assert_int_equal(rh_get(rc, 0, 0, "re2", NULL, 0), 1);
    assert_rc(distlock_release(b), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "re2", NULL, 0), 1);
    assert_rc(distlock_release(a), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "re2", NULL, 0), 0);
    distlock_lock_free(a);
    distlock_lock_free(b);
    distlock_client_free(c);
}

struct owner_arg {
    distlock_client *c;
    int rc;
    distlock_lock *lock;
};

static void *owner_thread(void *arg)
{
    struct owner_arg *o = arg;
    o->rc = acquire_as(o->c, "re3", 30000, 0, DISTLOCK_REENTRANT, "job-7", &o->lock);
    return NULL;
}

/* An explicit owner id is shared across threads. */
static void test_explicit_owner(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *a = NULL, *x = NULL;
    assert_rc(acquire_as(c, "re3", 30000, 0, DISTLOCK_REENTRANT, "job-7", &a),
              DISTLOCK_OK);
    struct owner_arg o = { .c = c };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, owner_thread, &o), 0);
    pthread_join(t, NULL);
    assert_rc(o.rc, DISTLOCK_OK);
    assert_string_equal(distlock_lock_token(o.lock), distlock_lock_token(a));
    /* A different owner id is refused. */
    assert_rc(acquire_as(c, "re3", 30000, 0, DISTLOCK_REENTRANT, "job-8", &x),
              DISTLOCK_NOTACQUIRED);
    assert_null(x);
    /* A different client (another process, in effect) never re-enters. */
    distlock_client *c2 = new_client(rh_uris(rc));
    assert_rc(acquire_as(c2, "re3", 30000, 0, DISTLOCK_REENTRANT, "job-7", &x),
              DISTLOCK_NOTACQUIRED);
    distlock_client_free(c2);
    assert_rc(distlock_release(o.lock), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "re3", NULL, 0), 1);
    assert_rc(distlock_release(a), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "re3", NULL, 0), 0);
    distlock_lock_free(o.lock);
    distlock_lock_free(a);
    distlock_client_free(c);
}

/* Extending through one handle refreshes the shared ownership. */
static void test_reentrant_extend(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *a = NULL, *b = NULL;
    assert_rc(distlock_acquire(c, "re4", 2000, 0, DISTLOCK_REENTRANT, &a), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "re4", 2000, 0, DISTLOCK_REENTRANT, &b), DISTLOCK_OK);
    assert_rc(distlock_extend(b, 60000), DISTLOCK_OK);
    assert_true(rh_pttl(rc, 0, 0, "re4") > 2000);
    assert_true(distlock_lock_validity_ms(a) > 2000);
    distlock_lock_free(b);
    distlock_lock_free(a);
    assert_int_equal(rh_get(rc, 0, 0, "re4", NULL, 0), 0);
    distlock_client_free(c);
}

static void wait_key_gone(rh_cluster *rc, const char *key)
{
    if (!RH_WAIT_UNTIL(rh_count_holding(rc, key, NULL) == 0, 5000)) {
        print_error("%s still on %d node(s) 5 s after its ttl\n", key,
                    rh_count_holding(rc, key, NULL));
        fail();
    }
}

/* The re-acquire of a lease that has to be refused: ENOTOWNER, no handle,
 * the outer handle marked lost. */
static void expect_refused(distlock_client *c, const char *key, long ttl, distlock_lock *outer,
                           const char *why)
{
    distlock_lock *again = NULL;
    int r = distlock_acquire(c, key, ttl, 0, DISTLOCK_REENTRANT, &again);
    if (r != DISTLOCK_ENOTOWNER) {
        print_error("reentrant re-acquire of '%s' (%s) = %d (%s), expected %d (%s); "
                    "new handle validity %ld ms; outer handle lost=%d; last_error \"%s\"\n",
                    key, why, r, distlock_strerror(r), DISTLOCK_ENOTOWNER,
                    distlock_strerror(DISTLOCK_ENOTOWNER),
                    again ? distlock_lock_validity_ms(again) : -1L, distlock_lock_lost(outer),
                    distlock_last_error());
        fail();
    }
    assert_null(again);
    if (distlock_lock_lost(outer) != 1) {
        print_error("after the refused re-acquire of '%s' the outer handle is not marked lost\n",
                    key);
        fail();
    }
    assert_int_equal(distlock_lock_validity_ms(outer), 0);
}

/* The lease expired and another client took the key;
 * the owner's re-acquire used to return OK without asking Redis. */
static void test_reacquire_after_expiry_taken(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc)), *c2 = new_client(rh_uris(rc));
    distlock_lock *a = NULL, *other = NULL;
    /* The checks below count all 3 nodes after c2's lock: a new client's first
     * grant may come from a quorum while its third connection is still being
     * made (a round ends at quorum), so c2 first connects to every node. */
    connect_every_node(rc, c2, "r2t:warm");
    assert_rc(distlock_acquire(c, "r2t", 300, 0, DISTLOCK_REENTRANT, &a), DISTLOCK_OK);
    wait_key_gone(rc, "r2t");
    assert_rc(distlock_acquire(c2, "r2t", 30000, 0, 0, &other), DISTLOCK_OK);
    const char *otok = distlock_lock_token(other);
    assert_holding(rc, "r2t", otok, 3);

    expect_refused(c, "r2t", 300, a, "expired, then taken by another client");
    /* The other client's key is untouched, and stays so on release. */
    assert_holding(rc, "r2t", otok, 3);
    assert_fails(distlock_release(a), DISTLOCK_ENOTOWNER);
    assert_holding(rc, "r2t", otok, 3);
    assert_rc(distlock_release(other), DISTLOCK_OK);
    distlock_lock_free(other);
    distlock_lock_free(a);
    distlock_client_free(c2);
    distlock_client_free(c);
}

/* Expired and nobody took it: still not ours, and the re-acquire must not
 * bring the key back under the old token. */
static void test_reacquire_after_expiry_free(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *a = NULL;
    assert_rc(distlock_acquire(c, "r2e", 300, 0, DISTLOCK_REENTRANT, &a), DISTLOCK_OK);
    wait_key_gone(rc, "r2e");
    expect_refused(c, "r2e", 300, a, "expired, key free");
    assert_int_equal(rh_count_holding(rc, "r2e", NULL), 0);
    distlock_lock_free(a);
    distlock_client_free(c);
}

/* Overwritten behind our back while still valid by our clock. */
static void test_reacquire_after_steal(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *a = NULL;
    assert_rc(distlock_acquire(c, "r2s", 30000, 0, DISTLOCK_REENTRANT, &a), DISTLOCK_OK);
    for (int i = 0; i < rc->n; i++) assert_int_equal(rh_set(rc, i, 0, "r2s", "thief", 60000), 0);
    expect_refused(c, "r2s", 30000, a, "overwritten by another owner");
    assert_holding(rc, "r2s", "thief", 3);
    distlock_lock_free(a);
    assert_holding(rc, "r2s", "thief", 3);
    distlock_client_free(c);
}

/* A re-acquire with another ttl extends the lease to that ttl on the
 * servers (it used to leave the old, shorter expiry in place). */
static void test_reacquire_new_ttl(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    /* every node is counted below: a fresh client's first round may end at
     * the quorum before its last connection is ready, and that node then
     * never had the key to extend */
    connect_every_node(rc, c, "r2l:connect");
    distlock_lock *a = NULL, *b = NULL;
    assert_rc(distlock_acquire(c, "r2l", 2000, 0, DISTLOCK_REENTRANT, &a), DISTLOCK_OK);
    const char *tok = distlock_lock_token(a);
    assert_rc(distlock_acquire(c, "r2l", 30000, 0, DISTLOCK_REENTRANT, &b), DISTLOCK_OK);
    assert_string_equal(distlock_lock_token(b), tok);
    /* Extended on a quorum before the call returned, on every node soon after. */
    int now_q = count_pttl_above(rc, "r2l", tok, 20000);
    if (now_q < distlock_client_quorum(c)) {
        print_error("after the re-acquire with ttl 30000 the key has > 20000 ms left on %d "
                    "node(s) (PTTL node0 %lld ms); need a quorum (%d)\n", now_q,
                    rh_pttl(rc, 0, 0, "r2l"), distlock_client_quorum(c));
        fail();
    }
    assert_true(RH_WAIT_UNTIL(count_pttl_above(rc, "r2l", tok, 20000) == 3, 3000));
    long v = distlock_lock_validity_ms(b);
    if (v <= 2000 || v > 30000) {
        print_error("validity after the re-acquire with ttl 30000: %ld ms\n", v);
        fail();
    }
    /* Inner release keeps the (long) lease, the outer one ends it. */
    assert_rc(distlock_release(b), DISTLOCK_OK);
    assert_true(count_pttl_above(rc, "r2l", tok, 20000) >= 2);
    assert_rc(distlock_release(a), DISTLOCK_OK);
    assert_holding(rc, "r2l", NULL, 0);
    distlock_lock_free(b);
    distlock_lock_free(a);
    distlock_client_free(c);
}

/* Fencing asked for on the re-acquire only: the record has no fence, so
 * the call is refused (it used to succeed with fence -1). */
static void test_reacquire_adds_fencing(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *a = NULL, *b = NULL;
    /* checked on all 3 nodes below: all 3 connections first */
    connect_every_node(rc, c, "r2f:warm");
    assert_rc(distlock_acquire(c, "r2f", 30000, 0, DISTLOCK_REENTRANT, &a), DISTLOCK_OK);
    int r = distlock_acquire(c, "r2f", 30000, 0, DISTLOCK_REENTRANT | DISTLOCK_FENCING, &b);
    if (r != DISTLOCK_EINVAL) {
        print_error("re-acquire adding DISTLOCK_FENCING = %d (%s), expected %d (%s); "
                    "fence of the new handle %lld\n", r, distlock_strerror(r), DISTLOCK_EINVAL,
                    distlock_strerror(DISTLOCK_EINVAL), b ? (long long)distlock_lock_fence(b) : 0LL);
        fail();
    }
    assert_null(b);
    assert_true(distlock_last_error()[0] != '\0');
    /* The first acquisition is unaffected. */
    assert_int_equal(distlock_lock_lost(a), 0);
    assert_holding(rc, "r2f", distlock_lock_token(a), 3);
    assert_rc(distlock_release(a), DISTLOCK_OK);
    assert_holding(rc, "r2f", NULL, 0);
    distlock_lock_free(a);
    distlock_client_free(c);
}

/* DISTLOCK_AUTO_RENEW added by a re-acquire turns renewal on for the
 * record: the key outlives its ttl while held (it used to expire). */
static void test_reacquire_adds_auto_renew(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *a = NULL, *b = NULL;
    assert_rc(distlock_acquire(c, "r2r", 600, 0, DISTLOCK_REENTRANT, &a), DISTLOCK_OK);
    char tok[64];
    snprintf(tok, sizeof tok, "%s", distlock_lock_token(a));
    assert_rc(distlock_acquire(c, "r2r", 600, 0, DISTLOCK_REENTRANT | DISTLOCK_AUTO_RENEW, &b),
              DISTLOCK_OK);
    long long t0 = rh_now_ms();
    int held = 3;
    /* Three ttls: the key must never drop below a quorum. */
    if (RH_WAIT_UNTIL((held = rh_count_holding(rc, "r2r", tok)) < 2, 1800)) {
        print_error("re-acquired with DISTLOCK_AUTO_RENEW, ttl 600: %lld ms later the key is on "
                    "%d node(s) only (not renewed); lost=%d validity=%ld\n", rh_now_ms() - t0,
                    held, distlock_lock_lost(a), distlock_lock_validity_ms(a));
        fail();
    }
    assert_int_equal(distlock_lock_lost(a), 0);
    assert_true(distlock_lock_validity_ms(b) > 0);
    assert_rc(distlock_release(b), DISTLOCK_OK);
    assert_rc(distlock_release(a), DISTLOCK_OK);
    assert_holding(rc, "r2r", NULL, 0);
    distlock_lock_free(b);
    distlock_lock_free(a);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_same_thread_counts, heal),
        cmocka_unit_test_setup(test_other_thread, heal),
        cmocka_unit_test_setup(test_explicit_owner, heal),
        cmocka_unit_test_setup(test_reentrant_extend, heal),
    };
    const struct CMUnitTest tests_3_nodes[] = {
        cmocka_unit_test_setup(test_reacquire_after_expiry_taken, heal),
        cmocka_unit_test_setup(test_reacquire_after_expiry_free, heal),
        cmocka_unit_test_setup(test_reacquire_after_steal, heal),
        cmocka_unit_test_setup(test_reacquire_new_ttl, heal),
        cmocka_unit_test_setup(test_reacquire_adds_fencing, heal),
        cmocka_unit_test_setup(test_reacquire_adds_auto_renew, heal),
    };
    int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);
    failed += cmocka_run_group_tests(tests_3_nodes, group_setup_3, group_teardown);
    return failed;
}
