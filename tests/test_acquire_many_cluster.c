/* test_acquire_many_cluster.c -- distlock_acquire_many() on a Redis Cluster
 * (3 masters, real servers): keys of several hash slots are taken one slot
 * group after another, same-slot keys in one script call (counted on the
 * masters with INFO commandstats, grouped with CLUSTER KEYSLOT); a group
 * refused by another owner gives back the groups already taken; a release
 * of the refusing key wakes a waiting set (SPUBLISH in its slot; re-checks
 * 10 s apart); renewal, extend and fences cover keys of every slot. */
#include "test_common.h"
#include "cluster_harness.h"

#include <pthread.h>
#include <stdatomic.h>

static rh_cluster *RC;
static rh_rcl *CL;

static int group_setup(void **state)
{
    (void)state;
    setvbuf(stdout, NULL, _IOLBF, 0);
    CL = rh_rcl_start_n(3, 0);
    if (CL == NULL)
        return -1;
    RC = CL->rc;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    rh_rcl_stop(CL);
    return 0;
}

/* Empty masters between tests. */
static int heal(void **state)
{
    (void)state;
    for (int i = 0; i < RC->n; i++)
        if (rh_flushall(RC, i) != 0)
            return -1;
    return 0;
}

/* The server that holds key's slot. */
static int owner_of(const char *key)
{
    return rh_rcl_owner(CL, 0, rh_rcl_keyslot(CL, key));
}

static int holds(const char *key, const char *token)
{
    char buf[256];
    int r = rh_get(RC, owner_of(key), 0, key, buf, sizeof buf);
    return r == 1 && (token == NULL || strcmp(buf, token) == 0);
}

/* Script calls (EVALSHA + EVAL) served by all masters since the last reset. */
static long long eval_calls(void)
{
    long long total = 0;
    for (int i = 0; i < RC->n; i++) {
        redisReply *r = rh_command(RC, i, 0, "INFO commandstats");
        assert_non_null(r);
        for (const char *name = "cmdstat_evalsha:calls="; name;
             name = strcmp(name, "cmdstat_eval:calls=") ? "cmdstat_eval:calls=" : NULL) {
            const char *p = r->str ? strstr(r->str, name) : NULL;
            if (p)
                total += atoll(p + strlen(name));
        }
        freeReplyObject(r);
    }
    return total;
}

static void reset_stats(void)
{
    for (int i = 0; i < RC->n; i++) {
        redisReply *r = rh_command(RC, i, 0, "CONFIG RESETSTAT");
        assert_non_null(r);
        freeReplyObject(r);
    }
}

/* Four keys: two share slot {t}, the other two have slots of their own. */
static const char *KEYS4[] = { "m:x", "{t}a", "m:y", "{t}b" };

static size_t distinct_slots(const char *const *keys, size_t n)
{
    int slots[16];
    size_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        int s = rh_rcl_keyslot(CL, keys[i]), seen = 0;
        for (size_t j = 0; j < ns; j++)
            seen |= slots[j] == s;
        if (!seen)
            slots[ns++] = s;
    }
    return ns;
}

static void test_one_call_per_slot_group(void **state)
{
    (void)state;
    assert_int_equal(distinct_slots(KEYS4, 4), 3);
    assert_int_equal(rh_rcl_keyslot(CL, "{t}a"), rh_rcl_keyslot(CL, "{t}b"));
    distlock_client *c = new_client(CL->uri);
    distlock_lock *l = NULL;
    /* connections (and their script loads) made first */
    assert_rc(distlock_acquire_many(c, KEYS4, 4, 30000, 0, 0, NULL, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    reset_stats();
    assert_rc(distlock_acquire_many(c, KEYS4, 4, 30000, 0, 0, NULL, &l), DISTLOCK_OK);
    long long calls = eval_calls();
    printf("acquire of 4 keys in 3 slots: %lld script calls\n", calls);
    assert_int_equal(calls, 3);
    for (int k = 0; k < 4; k++)
        assert_true(holds(KEYS4[k], distlock_lock_token(l)));
    assert_rc(distlock_extend(l, 30000), DISTLOCK_OK);
    assert_int_equal(eval_calls(), 6);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_int_equal(eval_calls(), 9);
    for (int k = 0; k < 4; k++)
        assert_false(holds(KEYS4[k], NULL));
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_refused_group_undoes_taken_groups(void **state)
{
    (void)state;
    distlock_client *c = new_client(CL->uri), *other = new_client(CL->uri);
    /* the key of the highest slot is held: every other group was taken
     * before it (ascending slot order) and must be given back */
    int hi = 0;
    for (int k = 1; k < 4; k++)
        if (rh_rcl_keyslot(CL, KEYS4[k]) > rh_rcl_keyslot(CL, KEYS4[hi]))
            hi = k;
    distlock_lock *h = NULL, *l = NULL;
    assert_rc(distlock_acquire(other, KEYS4[hi], 30000, 0, 0, &h), DISTLOCK_OK);
    reset_stats();
    assert_fails(distlock_acquire_many(c, KEYS4, 4, 30000, 0, 0, NULL, &l),
                 DISTLOCK_NOTACQUIRED);
    char want[64];
    snprintf(want, sizeof want, "'%s'", KEYS4[hi]);
    assert_non_null(strstr(distlock_last_error(), want));
    for (int k = 0; k < 4; k++)
        if (k != hi)
            assert_false(holds(KEYS4[k], NULL));
    /* 3 groups sent, the 2 taken ones undone */
    assert_int_equal(eval_calls(), 5);
    assert_true(holds(KEYS4[hi], distlock_lock_token(h)));
    distlock_lock_free(h);
    assert_rc(distlock_acquire_many(c, KEYS4, 4, 30000, 0, 0, NULL, &l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(other);
    distlock_client_free(c);
}

struct waiter_arg { distlock_client *c; int rc; long long t_done; };

static void *wait_set(void *p)
{
    struct waiter_arg *w = p;
    distlock_lock *l = NULL;
    w->rc = distlock_acquire_many(w->c, KEYS4, 4, 30000, 20000, 0, NULL, &l);
    w->t_done = rh_now_ms();
    distlock_lock_free(l);
    return NULL;
}

static void test_release_wakes_waiting_set(void **state)
{
    (void)state;
    distlock_client *holder = new_client(CL->uri);
    struct waiter_arg w = { .c = new_client(CL->uri), .rc = -99 };
    assert_rc(distlock_client_set(w.c, DISTLOCK_OPT_RETRY_MIN_MS, 10000), DISTLOCK_OK);
    assert_rc(distlock_client_set(w.c, DISTLOCK_OPT_RETRY_MAX_MS, 10000), DISTLOCK_OK);
    distlock_lock *h = NULL;
    assert_rc(distlock_acquire(holder, "m:y", 30000, 0, 0, &h), DISTLOCK_OK);
    reset_stats();
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_set, &w), 0);
    /* the waiter's first attempt and its retry after subscribing were
     * refused (each sends the groups up to m:y's, then undoes): waiting */
    int slot_y = rh_rcl_keyslot(CL, "m:y");
    const char *lower[4];
    size_t nl = 0;
    for (int k = 0; k < 4; k++)
        if (rh_rcl_keyslot(CL, KEYS4[k]) < slot_y)
            lower[nl++] = KEYS4[k];
    long long before = (long long)distinct_slots(lower, nl);  /* groups taken before m:y's */
    assert_true(RH_WAIT_UNTIL(eval_calls() >= 2 * (2 * before + 1), 10000));
    long long t0 = rh_now_ms();
    assert_rc(distlock_release(h), DISTLOCK_OK);
    pthread_join(t, NULL);
    assert_rc(w.rc, DISTLOCK_OK);
    printf("cluster: release -> waiting set granted in %lld ms\n", w.t_done - t0);
    assert_true(w.t_done - t0 < slow_bound(3000, 6000));
    distlock_lock_free(h);
    distlock_client_free(w.c);
    distlock_client_free(holder);
}

static void test_renewal_and_fences_across_slots(void **state)
{
    (void)state;
    distlock_client *c = new_client(CL->uri);
    distlock_lock *l = NULL;
    long ttl = slow_bound(600, 1500);
    assert_rc(distlock_acquire_many(c, KEYS4, 4, ttl, 0, DISTLOCK_AUTO_RENEW | DISTLOCK_FENCING,
                                    NULL, &l), DISTLOCK_OK);
    int64_t f[4];
    for (int k = 0; k < 4; k++) {
        f[k] = distlock_lock_fence_at(l, (size_t)k);
        assert_true(f[k] >= 1);
    }
    sleep_until_ms(rh_now_ms() + 3 * ttl);
    assert_false(distlock_lock_lost(l));
    for (int k = 0; k < 4; k++)
        assert_true(holds(KEYS4[k], distlock_lock_token(l)));
    /* one key of one slot deleted behind its back: the set is lost */
    assert_int_equal(rh_del(RC, owner_of("{t}b"), 0, "{t}b"), 1);
    assert_true(RH_WAIT_UNTIL(distlock_lock_lost(l) == 1, 5 * ttl));
    distlock_lock_free(l);
    assert_rc(distlock_acquire_many(c, KEYS4, 4, 30000, 3 * ttl, DISTLOCK_FENCING, NULL, &l),
              DISTLOCK_OK);
    for (int k = 0; k < 4; k++)
        assert_true(distlock_lock_fence_at(l, (size_t)k) > f[k]);
    distlock_lock_free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_one_call_per_slot_group, heal),
        cmocka_unit_test_setup(test_refused_group_undoes_taken_groups, heal),
        cmocka_unit_test_setup(test_release_wakes_waiting_set, heal),
        cmocka_unit_test_setup(test_renewal_and_fences_across_slots, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
