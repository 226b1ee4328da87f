/* test_lock_token_and_restore.c -- a lock acquired with the caller's token
 * (distlock_acquire_args.token) and a handle restored for an ownership taken
 * elsewhere (distlock_lock_restore()), on one node and on three.
 *
 * The caller's token: a waiting call keeps it and is woken by a release (its
 * re-checks are set seconds apart, so only the release can wake it soon);
 * the acquire is strict (a key already holding that very token is held, and
 * is left as it was); DISTLOCK_FENCING, DISTLOCK_AUTO_RENEW and DISTLOCK_FAIR
 * work with it; it is refused for read locks, reentrant locks, semaphores and
 * distlock_acquire_many(), and checked as distlock_acquire_token()'s is.
 *
 * The restored handle: validity 0 and not lost until the servers say
 * otherwise; its release is sent (and deletes) although its validity is 0,
 * and also when another handle of the client with that token was abandoned;
 * its extend resets the TTL and makes the validity fresh; a release or an
 * extend that finds another owner's token returns DISTLOCK_ENOTOWNER, marks
 * it lost and leaves that key alone; free releases, abandon sends nothing.
 *
 * Real redis-servers; the keys are read behind the library's back. */
#include <pthread.h>
#include <stdatomic.h>

#include "test_common.h"

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

/* distlock_acquire_with() with the caller's token. */
static int acquire_tok(distlock_client *c, const char *key, long ttl, long wait, unsigned flags,
                       const char *token, distlock_lock **out)
{
    distlock_acquire_args a = { .size = sizeof a, .token = token };
    return distlock_acquire_with(c, key, ttl, wait, flags, &a, out);
}

/* `key` holds `token` on every node (the test's direct writes). */
static void set_everywhere(const rh_cluster *rc, const char *key, const char *token, long px)
{
    for (int i = 0; i < rc->n; i++)
        assert_int_equal(rh_set(rc, i, 0, key, token, px), 0);
}

/* Node i's PTTL of key, the most of all nodes. */
static long long max_pttl(const rh_cluster *rc, const char *key)
{
    long long m = -2;
    for (int i = 0; i < rc->n; i++) {
        long long p = rh_pttl(rc, i, 0, key);
        if (p > m) m = p;
    }
    return m;
}

/* ------------------------------------------------ the caller's token */

struct waiter {
    distlock_client *c;
    const char *key, *token;
    unsigned flags;
    int rc;
    long long t_done;
    distlock_lock *lock;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    w->rc = acquire_tok(w->c, w->key, 30000, 20000, w->flags, w->token, &w->lock);
    w->t_done = rh_now_ms();
    return NULL;
}

/* A call waiting with its own token (flags: 0 or DISTLOCK_FAIR) is woken by
 * the holder's release, long before its re-check (3 s at the earliest) or
 * the holder's TTL (30 s), and holds the key with that token. */
static void waiter_woken_by_release(rh_cluster *rc, const char *key, unsigned flags)
{
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &l), DISTLOCK_OK);

    long long before[512];
    int nbefore = rh_lib_conn_ids(rc, 0, NULL, before, 512);
    distlock_client *wc = new_client(rh_uris(rc));
    /* Re-checks far apart: only a notification can wake the waiter quickly. */
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_RETRY_MIN_MS, 3000), DISTLOCK_OK);
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_RETRY_MAX_MS, 5000), DISTLOCK_OK);
    struct waiter w = { .c = wc, .key = key, .token = "laravel-owner-7f3a", .flags = flags };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    /* The waiter has tried once (its own connection shows up on the server). */
    assert_true(RH_WAIT_UNTIL(rh_new_lib_conns(rc, 0, "set", before, nbefore) +
                              rh_new_lib_conns(rc, 0, "eval", before, nbefore) >= 1, 10000));
    assert_true(rh_count_holding(rc, key, distlock_lock_token(l)) >= distlock_client_quorum(wc));

    long long t_rel = rh_now_ms();
    assert_rc(distlock_release(l), DISTLOCK_OK);
    pthread_join(t, NULL);
    assert_rc(w.rc, DISTLOCK_OK);
    long long lag = w.t_done - t_rel;
    printf("# waiter with its own token acquired %lld ms after the release\n", lag);
    const long bound = slow_bound(500, 1500);   /* its re-check is >= 3000 */
    if (lag > bound) {
        print_error("waiter acquired %lld ms after the release: not woken by it\n", lag);
        fail();
    }
    assert_string_equal(distlock_lock_token(w.lock), "laravel-owner-7f3a");
    assert_true(rh_count_holding(rc, key, "laravel-owner-7f3a") >= distlock_client_quorum(wc));
    assert_rc(distlock_release(w.lock), DISTLOCK_OK);
    distlock_lock_free(w.lock);
    distlock_lock_free(l);
    distlock_client_free(wc);
    distlock_client_free(holder);
}

static void test_caller_token_waiter_woken_by_release(void **state)
{
    waiter_woken_by_release(*state, "ct:wake", 0);
}

static void test_caller_token_fair_waiter_woken_by_release(void **state)
{
    waiter_woken_by_release(*state, "ct:wake-fair", DISTLOCK_FAIR);
}

/* SET NX semantics: a key that already holds this very token is held by
 * someone (the call that took it, or another process with the same owner
 * string): NOTACQUIRED at once, or after the wait; the key is left as it
 * was (its holder still releases it). */
static void test_caller_token_strict(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    connect_every_node(rc, c, "ct:strict:connect");
    distlock_lock *l = NULL, *l2 = NULL;
    assert_rc(acquire_tok(c, "ct:strict", 30000, 0, 0, "same-token", &l), DISTLOCK_OK);
    assert_string_equal(distlock_lock_token(l), "same-token");
    assert_holding(rc, "ct:strict", "same-token", rc->n);
    assert_rc(acquire_tok(c, "ct:strict", 30000, 0, 0, "same-token", &l2), DISTLOCK_NOTACQUIRED);
    assert_null(l2);
    long long t0 = rh_now_ms();
    assert_rc(acquire_tok(c, "ct:strict", 30000, 300, 0, "same-token", &l2),
              DISTLOCK_NOTACQUIRED);
    assert_true(rh_now_ms() - t0 >= 280);  /* it did wait */
    assert_null(l2);
    /* nothing of the refused calls undid the holder's key */
    assert_holding(rc, "ct:strict", "same-token", rc->n);
    assert_true(max_pttl(rc, "ct:strict") > 20000);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_holding(rc, "ct:strict", NULL, 0);
    distlock_lock_free(l);

    /* The same for a token another process put there. */
    set_everywhere(rc, "ct:strict:foreign", "their-token", 30000);
    assert_rc(acquire_tok(c, "ct:strict:foreign", 30000, 0, 0, "their-token", &l2),
              DISTLOCK_NOTACQUIRED);
    assert_null(l2);
    assert_holding(rc, "ct:strict:foreign", "their-token", rc->n);
    distlock_client_free(c);
}

/* DISTLOCK_FENCING with the caller's token: a fence, rising with each owner. */
static void test_caller_token_fencing(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    assert_rc(acquire_tok(c, "ct:fence", 30000, 0, DISTLOCK_FENCING, "fenced-token", &l),
              DISTLOCK_OK);
    int64_t f1 = distlock_lock_fence(l);
    assert_true(f1 >= 1);
    assert_true(rh_count_holding(rc, "ct:fence", "fenced-token") >= distlock_client_quorum(c));
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_rc(acquire_tok(c, "ct:fence", 30000, 0, DISTLOCK_FENCING, "fenced-token", &l),
              DISTLOCK_OK);
    int64_t f2 = distlock_lock_fence(l);
    printf("# fences with the caller's token: %lld then %lld\n", (long long)f1, (long long)f2);
    assert_true(f2 > f1);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* DISTLOCK_AUTO_RENEW with the caller's token keeps the key past its ttl. */
static void test_caller_token_auto_renew(void **state)
{
    rh_cluster *rc = *state;
    const long ttl = 1500 * slow_factor();
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    uint64_t r0 = client_stat(c, "renewal_total");
    long long t0 = rh_now_ms();
    assert_rc(acquire_tok(c, "ct:renew", ttl, 0, DISTLOCK_AUTO_RENEW, "renewed-token", &l),
              DISTLOCK_OK);
    /* renewed at ttl/3: four renewals are more than one ttl */
    (void)wait_renewed(c, r0, 1, 4);
    long long held = rh_now_ms() - t0;
    printf("# held with the caller's token for %lld ms, ttl %ld ms\n", held, ttl);
    assert_true(held > ttl);
    assert_int_equal(distlock_lock_lost(l), 0);
    assert_true(distlock_lock_validity_ms(l) > 0);
    assert_true(rh_count_holding(rc, "ct:renew", "renewed-token") >= distlock_client_quorum(c));
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_holding(rc, "ct:renew", NULL, 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* Refusals: each one DISTLOCK_EINVAL with a detail, nothing sent. */
static void test_caller_token_refusals(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    char long_tok[DISTLOCK_TOKEN_MAX + 2];
    memset(long_tok, 't', sizeof long_tok - 1);
    long_tok[sizeof long_tok - 1] = '\0';  /* DISTLOCK_TOKEN_MAX + 1 bytes */

    /* the token pair's checks, word for word */
    char pair_detail[512];
    assert_fails(distlock_acquire_token(c, "ct:ref", 30000, "", 0, NULL), DISTLOCK_EINVAL);
    snprintf(pair_detail, sizeof pair_detail, "%s", distlock_last_error());
    assert_fails(acquire_tok(c, "ct:ref", 30000, 0, 0, "", &l), DISTLOCK_EINVAL);
    assert_string_equal(distlock_last_error(), pair_detail);
    assert_fails(distlock_acquire_token(c, "ct:ref", 30000, long_tok, 0, NULL), DISTLOCK_EINVAL);
    snprintf(pair_detail, sizeof pair_detail, "%s", distlock_last_error());
    assert_fails(acquire_tok(c, "ct:ref", 30000, 0, 0, long_tok, &l), DISTLOCK_EINVAL);
    assert_string_equal(distlock_last_error(), pair_detail);
    printf("# a token too long: %s\n", distlock_last_error());

    /* a token for anything but a plain lock */
    assert_fails(acquire_tok(c, "ct:ref", 30000, 0, DISTLOCK_SHARED, "tok", &l), DISTLOCK_EINVAL);
    assert_non_null(strstr(distlock_last_error(), "DISTLOCK_SHARED"));
    assert_fails(acquire_tok(c, "ct:ref", 30000, 0, DISTLOCK_REENTRANT, "tok", &l),
                 DISTLOCK_EINVAL);
    assert_non_null(strstr(distlock_last_error(), "DISTLOCK_REENTRANT"));
    distlock_acquire_args a = { .size = sizeof a, .token = "tok" };
    assert_fails(distlock_semaphore_acquire(c, "ct:ref", 3, 30000, 0, 0, &a, &l),
                 DISTLOCK_EINVAL);
    assert_non_null(strstr(distlock_last_error(), "semaphore"));
    const char *keys[] = { "ct:ref", "ct:ref2" };
    assert_fails(distlock_acquire_many(c, keys, 2, 30000, 0, 0, &a, &l), DISTLOCK_EINVAL);
    assert_non_null(strstr(distlock_last_error(), "distlock_acquire_many"));
    printf("# %s\n", distlock_last_error());
    assert_null(l);
    for (int i = 0; i < rc->n; i++) {
        assert_int_equal(rh_get(rc, i, 0, "ct:ref", NULL, 0), 0);
        assert_int_equal(rh_get(rc, i, 0, "ct:ref2", NULL, 0), 0);
    }

    /* the longest token is one */
    long_tok[DISTLOCK_TOKEN_MAX] = '\0';
    assert_rc(acquire_tok(c, "ct:ref", 30000, 0, 0, long_tok, &l), DISTLOCK_OK);
    assert_true(rh_count_holding(rc, "ct:ref", long_tok) >= distlock_client_quorum(c));
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    l = NULL;

    /* A caller built against the header without `token` passes the
     * smaller struct: accepted, no token read (a fresh one). */
    struct { size_t size; const char *owner; distlock_cancel *cancel; const char *junk; } old = {
        .size = offsetof(distlock_acquire_args, token), .junk = "" };
    assert_rc(distlock_acquire_with(c, "ct:old", 30000, 0, 0, (distlock_acquire_args *)&old,
                                    &l), DISTLOCK_OK);
    assert_true(rh_is_hex32(distlock_lock_token(l)));
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* ------------------------------------------------ restored handles */

/* A restored handle: no I/O, validity 0, not lost, no fence; its release
 * deletes the token on every node although its validity is 0. */
static void test_restored_release_deletes(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *a = new_client(rh_uris(rc)), *b = new_client(rh_uris(rc));
    connect_every_node(rc, a, "rs:rel:connect");
    connect_every_node(rc, b, "rs:rel:connect");
    assert_rc(distlock_acquire_token(a, "rs:rel", 30000, "owner-1", DISTLOCK_STRICT, NULL),
              DISTLOCK_OK);
    assert_holding(rc, "rs:rel", "owner-1", rc->n);
    distlock_lock *l = NULL;
    assert_rc(distlock_lock_restore(b, "rs:rel", "owner-1", &l), DISTLOCK_OK);
    assert_string_equal(distlock_lock_key(l), "rs:rel");
    assert_string_equal(distlock_lock_token(l), "owner-1");
    assert_int_equal(distlock_lock_validity_ms(l), 0);
    assert_int_equal(distlock_lock_lost(l), 0);
    assert_int_equal(distlock_lock_fence(l), -1);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_holding(rc, "rs:rel", NULL, 0);
    assert_int_equal(distlock_lock_lost(l), 0);
    assert_fails(distlock_release(l), DISTLOCK_ENOTOWNER);  /* once per handle */
    distlock_lock_free(l);
    distlock_client_free(b);
    distlock_client_free(a);
}

/* extend resets the TTL where the token holds the key and makes the
 * validity fresh. */
static void test_restored_extend(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    connect_every_node(rc, c, "rs:ext:connect");
    set_everywhere(rc, "rs:ext", "owner-2", 5000);
    distlock_lock *l = NULL;
    assert_rc(distlock_lock_restore(c, "rs:ext", "owner-2", &l), DISTLOCK_OK);
    assert_int_equal(distlock_lock_validity_ms(l), 0);
    assert_rc(distlock_extend(l, 60000), DISTLOCK_OK);
    long v = distlock_lock_validity_ms(l);
    printf("# restored handle's validity after extend(60000): %ld ms\n", v);
    assert_true(v > 50000 && v <= 60000);
    assert_true(rh_count_holding(rc, "rs:ext", "owner-2") >= distlock_client_quorum(c));
    assert_true(count_pttl_above(rc, "rs:ext", "owner-2", 50000) >= distlock_client_quorum(c));
    assert_int_equal(distlock_lock_lost(l), 0);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_holding(rc, "rs:ext", NULL, 0);
    assert_int_equal(distlock_lock_validity_ms(l), 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* Another owner's key: release and extend say DISTLOCK_ENOTOWNER, the
 * handle is lost, the key keeps its token and its TTL. */
static void test_restored_never_touches_another_owner(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    set_everywhere(rc, "rs:other", "their-token", 20000);
    distlock_lock *l = NULL, *l2 = NULL;
    assert_rc(distlock_lock_restore(c, "rs:other", "my-token", &l), DISTLOCK_OK);
    assert_fails(distlock_release(l), DISTLOCK_ENOTOWNER);
    assert_int_equal(distlock_lock_lost(l), 1);
    assert_holding(rc, "rs:other", "their-token", rc->n);

    assert_rc(distlock_lock_restore(c, "rs:other", "my-token", &l2), DISTLOCK_OK);
    assert_fails(distlock_extend(l2, 60000), DISTLOCK_ENOTOWNER);
    assert_int_equal(distlock_lock_lost(l2), 1);
    assert_int_equal(distlock_lock_validity_ms(l2), 0);
    assert_holding(rc, "rs:other", "their-token", rc->n);
    assert_true(max_pttl(rc, "rs:other") <= 20000);  /* not extended */
    distlock_lock_free(l2);  /* its release finds it not ours: nothing deleted */
    distlock_lock_free(l);
    assert_holding(rc, "rs:other", "their-token", rc->n);
    distlock_client_free(c);
    assert_holding(rc, "rs:other", "their-token", rc->n);
}

/* distlock_lock_free() releases a restored handle, and so does
 * distlock_client_free() for one still held. */
static void test_restored_free_releases(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    connect_every_node(rc, c, "rs:free:connect");
    set_everywhere(rc, "rs:free", "owner-3", 30000);
    distlock_lock *l = NULL;
    assert_rc(distlock_lock_restore(c, "rs:free", "owner-3", &l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_holding(rc, "rs:free", NULL, 0);

    set_everywhere(rc, "rs:free", "owner-3", 30000);
    assert_rc(distlock_lock_restore(c, "rs:free", "owner-3", &l), DISTLOCK_OK);
    distlock_client_free(c);
    assert_holding(rc, "rs:free", NULL, 0);
    distlock_lock_free(l);  /* its client is gone: nothing sent */
}

/* distlock_lock_abandon() of a restored handle sends nothing: the key keeps
 * the token and its TTL. */
static void test_restored_abandon_sends_nothing(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    set_everywhere(rc, "rs:abandon", "owner-4", 30000);
    distlock_lock *l = NULL;
    assert_rc(distlock_lock_restore(c, "rs:abandon", "owner-4", &l), DISTLOCK_OK);
    distlock_lock_abandon(l);
    distlock_client_free(c);
    assert_holding(rc, "rs:abandon", "owner-4", rc->n);
    assert_true(max_pttl(rc, "rs:abandon") > 20000);
}

/* The token of a handle this client abandoned: a restored handle of it is
 * the caller's explicit claim, and its release deletes the key. */
static void test_restored_after_abandoned_handle_deletes(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    connect_every_node(rc, c, "rs:ab:connect");
    distlock_lock *l = NULL, *r = NULL;
    assert_rc(acquire_tok(c, "rs:ab", 30000, 0, 0, "request-17", &l), DISTLOCK_OK);
    assert_holding(rc, "rs:ab", "request-17", rc->n);
    distlock_lock_abandon(l);
    assert_holding(rc, "rs:ab", "request-17", rc->n);
    assert_rc(distlock_lock_restore(c, "rs:ab", "request-17", &r), DISTLOCK_OK);
    assert_rc(distlock_release(r), DISTLOCK_OK);
    assert_holding(rc, "rs:ab", NULL, 0);
    distlock_lock_free(r);

    /* An abandoned ownership still in the client (a reentrant one whose
     * other handle holds it): its own handles no longer delete the key, a
     * restored handle of its token does. */
    distlock_lock *h1 = NULL, *h2 = NULL;
    assert_rc(acquire_as(c, "rs:ab2", 30000, 0, DISTLOCK_REENTRANT, "job", &h1), DISTLOCK_OK);
    assert_rc(acquire_as(c, "rs:ab2", 30000, 0, DISTLOCK_REENTRANT, "job", &h2), DISTLOCK_OK);
    const char *tok = distlock_lock_token(h1);  /* h1 outlives r */
    assert_holding(rc, "rs:ab2", tok, rc->n);
    distlock_lock_abandon(h2);
    assert_rc(distlock_lock_restore(c, "rs:ab2", tok, &r), DISTLOCK_OK);
    assert_rc(distlock_release(r), DISTLOCK_OK);
    assert_holding(rc, "rs:ab2", NULL, 0);
    distlock_lock_free(r);
    assert_rc(distlock_release(h1), DISTLOCK_OK);  /* abandoned: sends nothing */
    distlock_lock_free(h1);
    distlock_client_free(c);
}

/* Bad input: DISTLOCK_EINVAL with a detail, *out NULL, nothing sent. */
static void test_restore_refusals(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = (distlock_lock *)1;
    char long_tok[DISTLOCK_TOKEN_MAX + 2];
    memset(long_tok, 't', sizeof long_tok - 1);
    long_tok[sizeof long_tok - 1] = '\0';
    assert_fails(distlock_lock_restore(NULL, "rs:bad", "tok", &l), DISTLOCK_EINVAL);
    assert_null(l);
    assert_fails(distlock_lock_restore(c, "rs:bad", "tok", NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_lock_restore(c, NULL, "tok", &l), DISTLOCK_EINVAL);
    assert_fails(distlock_lock_restore(c, "", "tok", &l), DISTLOCK_EINVAL);
    assert_fails(distlock_lock_restore(c, "rs:bad", NULL, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_lock_restore(c, "rs:bad", "", &l), DISTLOCK_EINVAL);
    assert_fails(distlock_lock_restore(c, "rs:bad", long_tok, &l), DISTLOCK_EINVAL);
    assert_non_null(strstr(distlock_last_error(), "token"));
    assert_null(l);
    distlock_client_free(c);
    for (int i = 0; i < rc->n; i++)
        assert_int_equal(rh_get(rc, i, 0, "rs:bad", NULL, 0), 0);
}

#define ALL_TESTS                                                              \
    cmocka_unit_test_setup(test_caller_token_waiter_woken_by_release, heal),   \
    cmocka_unit_test_setup(test_caller_token_fair_waiter_woken_by_release, heal), \
    cmocka_unit_test_setup(test_caller_token_strict, heal),                    \
    cmocka_unit_test_setup(test_caller_token_fencing, heal),                   \
    cmocka_unit_test_setup(test_caller_token_auto_renew, heal),                \
    cmocka_unit_test_setup(test_caller_token_refusals, heal),                  \
    cmocka_unit_test_setup(test_restored_release_deletes, heal),               \
    cmocka_unit_test_setup(test_restored_extend, heal),                        \
    cmocka_unit_test_setup(test_restored_never_touches_another_owner, heal),   \
    cmocka_unit_test_setup(test_restored_free_releases, heal),                 \
    cmocka_unit_test_setup(test_restored_abandon_sends_nothing, heal),         \
    cmocka_unit_test_setup(test_restored_after_abandoned_handle_deletes, heal),\
    cmocka_unit_test_setup(test_restore_refusals, heal)

int main(void)
{
    const struct CMUnitTest tests1[] = { ALL_TESTS };
    const struct CMUnitTest tests3[] = { ALL_TESTS };
    printf("# one node\n");
    int failed = cmocka_run_group_tests_name("one node", tests1, group_setup1, group_teardown);
    printf("# three nodes\n");
    failed += cmocka_run_group_tests_name("three nodes", tests3, group_setup3, group_teardown);
    return failed;
}
