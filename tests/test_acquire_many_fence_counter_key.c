/* test_acquire_many_fence_counter_key.c -- a fenced set of keys that also
 * names another of its keys' fence counter ("fz" and "{fz}:fence"), against
 * a real redis-server. docs/multi-key.md: "with DISTLOCK_FENCING each key
 * gets the next value of its own counter ({key}:fence, the counter a fenced
 * lock of that key uses), so a key's fence increases across owners whether
 * they took the key alone or in a set." Either such a set is refused, or
 * the next fenced owner of "fz" gets a higher fence than the set had.
 * (With the counter already there the set is refused: its key
 * "{fz}:fence" holds the number; the first fenced owner is the case.) */
#include "test_common.h"

#define N 1
DEFINE_GROUP(N)

static void test_set_naming_a_fence_counter_keeps_fences_increasing(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    /* no fenced owner of "fz" before: its counter does not exist yet */
    int64_t f0 = 0;
    const char *keys[] = { "fz", "{fz}:fence" };
    distlock_lock *set = NULL;
    int r = distlock_acquire_many(c, keys, 2, 10000, 0, DISTLOCK_FENCING, NULL, &set);
    printf("fenced set {fz, {fz}:fence} (fences so far: %lld): %s (%s)\n", (long long)f0,
           distlock_strerror(r), distlock_last_error());
    int64_t fset = f0;
    int granted = r == DISTLOCK_OK;
    if (granted) {
        fset = distlock_lock_fence_at(set, 0);
        assert_rc(distlock_release(set), DISTLOCK_OK);
        distlock_lock_free(set);
    } else {
        /* not granted: a refusal that wrote nothing */
        assert_null(set);
        assert_int_equal(rh_dbsize(rc, 0), 0);
    }
    /* the next fenced owner of "fz" */
    distlock_lock *next = NULL;
    r = distlock_acquire(c, "fz", 10000, 0, DISTLOCK_FENCING, &next);
    printf("next fenced lock of fz: %s (%s), fence %lld; the set's fence of fz %lld\n",
           distlock_strerror(r), distlock_last_error(),
           (long long)(r == DISTLOCK_OK ? distlock_lock_fence(next) : -1), (long long)fset);
    assert_rc(r, DISTLOCK_OK);
    assert_true(distlock_lock_fence(next) > fset);
    if (granted)
        assert_true(fset > f0);
    distlock_lock_free(next);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_set_naming_a_fence_counter_keeps_fences_increasing, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
