/* test_multi_extend_blocking_same_thread.c -- a blocking distlock_extend()
 * of a handle whose extend through a multi is on the wire, called on the
 * multi's own thread (its loop): that wait could never end (only this
 * thread's next distlock_multi_perform() finishes the multi's extend), so
 * the call returns DISTLOCK_EINVAL at once with a detail that says why, and
 * the multi's extend still ends normally. One node behind the fault proxy,
 * which holds the multi's extend. An alarm ends a hang as a failure. */
#include "test_common.h"
#include "test_multi_drive.h"

#include "harness/faultproxy.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct env {
    rh_cluster *rc;
    fp_proxy *fp;
} env;

static int group_setup(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    static env e;
    if ((e.rc = rh_start(1)) == NULL || (e.fp = fp_front(e.rc)) == NULL)
        return -1;
    *state = &e;
    return 0;
}

static int group_teardown(void **state)
{
    env *e = *state;
    fp_stop(e->fp);
    rh_stop_all(e->rc);
    return 0;
}

static void test_blocking_extend_on_the_loop_thread_returns_at_once(void **state)
{
    env *e = *state;
    const char *key = "mxb:k";
    char hex[64];
    distlock_client *c = NULL;
    distlock_multi *m = NULL;
    distlock_lock *l = NULL;
    distlock_op *ext = NULL;
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "heal"), 0);
    assert_rc(distlock_client_new(fp_uris(e->fp), &c), DISTLOCK_OK);
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, key, 30000, 0, 0, &l), DISTLOCK_OK);
    /* every later request of the key is held: the multi's extend first */
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "hold-match 0 up %s", fp_hex(key, hex, sizeof(hex))),
                     0);
    assert_rc(distlock_multi_extend(m, l, 20000, &ext), DISTLOCK_OK);
    long long end = rh_now_ms() + 10000;
    while (fp_cmd(e->fp, NULL, 0, "wait-held 0 up 1 20") != 0) {
        assert_true(rh_now_ms() < end);
        multi_turn(m, 20);
    }
    assert_false(distlock_op_done(ext));

    alarm(20);  /* the broken behaviour is a wait that never ends */
    long long t0 = rh_now_ms();
    int rc = distlock_extend(l, 20000);
    long long took = rh_now_ms() - t0;
    alarm(0);
    printf("blocking extend on the loop's thread: %d (%s) \"%s\" after %lld ms\n", rc,
           distlock_strerror(rc), distlock_last_error(), took);
    assert_int_equal(rc, DISTLOCK_EINVAL);
    assert_non_null(strstr(distlock_last_error(), "multi"));
    assert_true(took < 1000);

    assert_int_equal(fp_cmd(e->fp, NULL, 0, "heal"), 0);
    while (!distlock_op_done(ext)) {
        assert_true(rh_now_ms() < end);
        multi_turn(m, 20);
    }
    printf("the multi's extend: %d (%s); lock validity %ld ms\n", distlock_op_status(ext),
           distlock_strerror(distlock_op_status(ext)), distlock_lock_validity_ms(l));
    assert_rc(distlock_op_status(ext), DISTLOCK_OK);
    assert_true(distlock_lock_validity_ms(l) > 10000);
    /* nothing of the multi's on the wire now: the blocking extend goes */
    assert_rc(distlock_extend(l, 30000), DISTLOCK_OK);
    distlock_op_free(ext);
    distlock_lock_free(l);
    distlock_multi_free(m);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocking_extend_on_the_loop_thread_returns_at_once),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
