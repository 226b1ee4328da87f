/* test_lost_callback.c -- the contract of distlock_lock_on_lost() as
 * distlock.h states it:
 *  - called once per lost lock, on the client's renewal thread (not the
 *    caller's), after the flag is set and the lost fd made readable;
 *  - it may call the library on that lock and on the client (release,
 *    another acquire, even distlock_lock_free of its own handle);
 *  - the other locks of the client go on being renewed;
 *  - a loss found by distlock_extend() is returned to that caller and shown
 *    by the flag and the fd, with no callback;
 *  - it never receives a freed handle: freeing a handle unregisters its
 *    callback, even while the record lives on through another reentrant
 *    handle (three nodes). */
#include "test_common.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <stdint.h>

DEFINE_GROUP(1)
DEFINE_GROUP_SETUP(3)

struct seen {
    distlock_client *c;
    const char *other_key;  /* acquired and released from inside the callback */
    int free_it;            /* distlock_lock_free(l) from inside the callback */
    int lost_fd;
    atomic_int calls;
    atomic_int done;
    pthread_t thread;
    distlock_lock *handle;
    int lost_flag, validity_ms, release_rc, inner_acquire_rc, inner_release_rc, fd_ready;
};

/* The auto-renewed leases: short, so losses are found soon, but not so
 * short that a renewal late under valgrind on a loaded machine loses one
 * for real before the test deletes it (300 ms did, once). */
static long lease_ms(void)
{
    return 300 * slow_factor();
}

static int fd_readable(int fd)
{
    struct pollfd p = { fd, POLLIN, 0 };
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void on_lost(distlock_lock *l, void *arg)
{
    struct seen *s = arg;
    if (atomic_fetch_add(&s->calls, 1) > 0) {
        atomic_store(&s->done, 1);
        return;  /* a second call: counted, checked by the test */
    }
    s->thread = pthread_self();
    s->handle = l;
    s->lost_flag = distlock_lock_lost(l);
    s->validity_ms = (int)distlock_lock_validity_ms(l);
    s->fd_ready = fd_readable(s->lost_fd);
    s->release_rc = distlock_release(l);  /* the key is gone: ENOTOWNER */
    if (s->other_key) {
        distlock_lock *o = NULL;
        s->inner_acquire_rc = distlock_acquire(s->c, s->other_key, 5000, 0, 0, &o);
        s->inner_release_rc = o ? distlock_release(o) : 99;
        distlock_lock_free(o);
    }
    if (s->free_it)
        distlock_lock_free(l);
    atomic_store(&s->done, 1);
}

static void test_callback_thread_and_calls(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    struct seen a = { .c = c, .other_key = "lc:inner" }, b = { .c = c };
    a.lost_fd = b.lost_fd = distlock_client_lost_fd(c);
    assert_true(a.lost_fd >= 0);
    distlock_lock *la = NULL, *lb = NULL, *keep = NULL;
    assert_rc(distlock_acquire(c, "lc:a", lease_ms(), 0, DISTLOCK_AUTO_RENEW, &la), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "lc:b", lease_ms(), 0, DISTLOCK_AUTO_RENEW, &lb), DISTLOCK_OK);
    long long keep_from = rh_now_ms();
    assert_rc(distlock_acquire(c, "lc:keep", lease_ms(), 0, DISTLOCK_AUTO_RENEW, &keep),
              DISTLOCK_OK);
    assert_rc(distlock_lock_on_lost(la, on_lost, &a), DISTLOCK_OK);
    assert_rc(distlock_lock_on_lost(lb, on_lost, &b), DISTLOCK_OK);
    assert_false(fd_readable(a.lost_fd));

    assert_int_equal(rh_del(rc, 0, 0, "lc:a"), 1);  /* lost behind its back */
    if (!RH_WAIT_UNTIL(atomic_load(&a.done) == 1, 5000)) {
        print_error("the lost callback was not called\n");
        fail();
    }
    assert_false(pthread_equal(a.thread, pthread_self()));  /* the renewal thread */
    assert_ptr_equal(a.handle, la);
    assert_int_equal(a.lost_flag, 1);         /* flag set before the call */
    assert_int_equal(a.validity_ms, 0);
    assert_int_equal(a.fd_ready, 1);          /* fd written before the call */
    assert_int_equal(a.release_rc, DISTLOCK_ENOTOWNER);
    assert_int_equal(a.inner_acquire_rc, DISTLOCK_OK);  /* the client is usable from it */
    assert_int_equal(a.inner_release_rc, DISTLOCK_OK);
    assert_holding(rc, "lc:inner", NULL, 0);

    /* A later loss, found in a later round of the same thread: by then a
     * second call for the first lock would have happened. */
    assert_int_equal(rh_del(rc, 0, 0, "lc:b"), 1);
    if (!RH_WAIT_UNTIL(atomic_load(&b.done) == 1, 5000)) {
        print_error("the second lost callback was not called\n");
        fail();
    }
    assert_true(pthread_equal(a.thread, b.thread));
    assert_int_equal(atomic_load(&a.calls), 1);
    assert_int_equal(atomic_load(&b.calls), 1);
    /* Meanwhile the healthy lock was renewed: checked once twice its
     * first lease has passed. */
    assert_true(RH_WAIT_UNTIL(rh_now_ms() > keep_from + 2 * lease_ms(), 10 * lease_ms()));
    assert_int_equal(distlock_lock_lost(keep), 0);
    assert_holding(rc, "lc:keep", distlock_lock_token(keep), 1);
    assert_rc(distlock_release(keep), DISTLOCK_OK);

    distlock_lock_free(la);
    distlock_lock_free(lb);
    distlock_lock_free(keep);
    distlock_client_free(c);
}

static void test_free_own_handle_inside_callback(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    struct seen s = { .c = c, .free_it = 1 };
    s.lost_fd = distlock_client_lost_fd(c);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "lc:free", lease_ms(), 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    assert_rc(distlock_lock_on_lost(l, on_lost, &s), DISTLOCK_OK);
    assert_int_equal(rh_del(rc, 0, 0, "lc:free"), 1);
    if (!RH_WAIT_UNTIL(atomic_load(&s.done) == 1, 5000)) {
        print_error("the lost callback did not return (deadlock freeing its own handle?)\n");
        fail();
    }
    /* l is freed by the callback: the client still works and frees cleanly
     * (ASan/valgrind: no use after free, no leak). */
    distlock_lock *o = NULL;
    assert_rc(distlock_acquire(c, "lc:free", 5000, 0, 0, &o), DISTLOCK_OK);
    distlock_lock_free(o);
    distlock_client_free(c);
}

static void test_loss_found_by_extend_calls_no_callback(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    struct seen s = { .c = c };
    s.lost_fd = distlock_client_lost_fd(c);
    uint64_t drain;
    while (read(s.lost_fd, &drain, sizeof drain) > 0) {}  /* earlier tests' losses */
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "lc:ext", 5000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_lock_on_lost(l, on_lost, &s), DISTLOCK_OK);
    assert_int_equal(rh_del(rc, 0, 0, "lc:ext"), 1);
    assert_fails(distlock_extend(l, 5000), DISTLOCK_ENOTOWNER);
    assert_int_equal(distlock_lock_lost(l), 1);
    assert_true(fd_readable(s.lost_fd));
    distlock_lock_free(l);  /* unregisters; joins nothing under way */
    distlock_client_free(c);  /* joins the renewal thread */
    assert_int_equal(atomic_load(&s.calls), 0);
}

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

static void test_no_callback_with_freed_handle(void **state)
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
    assert_holding_quorum(rc, "x4", distlock_lock_token(b), 3);

    /* Lost behind its back. */
    for (int i = 0; i < rc->n; i++) assert_true(rh_del(rc, i, 0, "x4") >= 0);
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
        cmocka_unit_test_setup(test_callback_thread_and_calls, heal),
        cmocka_unit_test_setup(test_free_own_handle_inside_callback, heal),
        cmocka_unit_test_setup(test_loss_found_by_extend_calls_no_callback, heal),
    };
    const struct CMUnitTest tests_3_nodes[] = {
        cmocka_unit_test_setup(test_no_callback_with_freed_handle, heal),
    };
    int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);
    failed += cmocka_run_group_tests(tests_3_nodes, group_setup_3, group_teardown);
    return failed;
}
