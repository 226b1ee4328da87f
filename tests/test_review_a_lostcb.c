/* test_review_a_lostcb.c -- review item 4: a lost-lock callback never
 * receives a freed handle.
 *
 * distlock_lock_on_lost(l, fn, arg) kept the handle l, and the renewal
 * thread called fn(l, ...) when the lock was found lost, even after l had
 * been freed -- deterministic with reentrancy, where the record outlives the
 * handle that registered the callback. Fixed: freeing a handle unregisters
 * its callback. (Its own file: under ASan the report ends the process.) */
#include "test_common.h"
#include "test_thread_control.h"

#include <stdatomic.h>
#include <stdint.h>

DEFINE_GROUP(3)

struct cbrec {
    atomic_int calls;
    distlock_lock *seen[8];
};

static void on_lost_rec(distlock_lock *l, void *arg)
{
    struct cbrec *r = arg;
    int i = atomic_fetch_add(&r->calls, 1);
    if (i < 8) r->seen[i] = l;
#if TEST_SANITIZED
    /* What any real callback does with its handle: under ASan a freed one
     * is a heap-use-after-free reported right here. */
    (void)distlock_lock_key(l);
    (void)distlock_lock_lost(l);
#endif
}

static void test_review4_lost_callback_after_handle_free(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *a = NULL, *b = NULL;
    struct cbrec rec = { 0 };
    const unsigned fl = DISTLOCK_REENTRANT | DISTLOCK_AUTO_RENEW;
    /* Two handles of one record (same thread, reentrant). */
    assert_rc(distlock_acquire(c, "x4", 600, 0, fl, &a), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "x4", 600, 0, fl, &b), DISTLOCK_OK);
    assert_string_equal(distlock_lock_token(a), distlock_lock_token(b));
    assert_rc(distlock_lock_on_lost(a, on_lost_rec, &rec), DISTLOCK_OK);
    uintptr_t freed = (uintptr_t)a;
    distlock_lock_free(a);   /* the record lives on through b */
    assert_holding(rc, "x4", distlock_lock_token(b), 3);

    /* Lost behind its back. */
    for (int i = 0; i < rc->n; i++) assert_int_equal(rh_del(rc, i, 0, "x4"), 1);
    if (!RH_WAIT_UNTIL(distlock_lock_lost(b) == 1, 5000)) {
        print_error("the deleted lock was not found lost\n");
        fail();
    }
    distlock_lock_free(b);
    /* Joins the renewal thread: every callback it was going to make is done. */
    distlock_client_free(c);

    int n = atomic_load(&rec.calls), bad = 0;
    for (int i = 0; i < n && i < 8; i++) {
        if ((uintptr_t)rec.seen[i] == freed) {
            print_error("lost callback #%d received the handle freed before the loss (%p)\n",
                        i + 1, (void *)freed);
            bad = 1;
        }
    }
    printf("# lost callback invoked %d time(s)\n", n);
    if (bad) fail();
    assert_true(n <= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_review4_lost_callback_after_handle_free, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
