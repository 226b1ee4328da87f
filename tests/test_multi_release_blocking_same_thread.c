/* test_multi_release_blocking_same_thread.c -- a blocking release
 * (distlock_release, distlock_lock_free: a front end's close or GC) of a
 * lock won through a multi, on the thread that drives the multi, while
 * another run of that multi is on the wire: the release must not wait for
 * the connection set its acquire used, which that run may hold (only this
 * thread's next perform can finish the run: the wait would last its whole
 * bound, (connect + command timeout) x 4). One node behind the fault proxy,
 * which holds the other run's request. */
#include "test_common.h"
#include "test_multi_drive.h"

#include "harness/faultproxy.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

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

static void test_blocking_release_does_not_wait_for_the_loops_run(void **state)
{
    env *e = *state;
    char hex[64];
    distlock_client *c = NULL;
    distlock_multi *m = NULL;
    distlock_op *a = NULL, *b = NULL;
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "heal"), 0);
    assert_rc(distlock_client_new(fp_uris(e->fp), &c), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 3000), DISTLOCK_OK);
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    long long end = rh_now_ms() + 10000;

    assert_rc(distlock_multi_acquire(m, "mrb:a", 30000, 0, 0, NULL, &a), DISTLOCK_OK);
    while (!distlock_op_done(a)) {
        assert_true(rh_now_ms() < end);
        multi_turn(m, 20);
    }
    assert_rc(distlock_op_status(a), DISTLOCK_OK);
    distlock_lock *l = distlock_op_take_lock(a);
    assert_non_null(l);

    /* another run of the multi on the wire (its request held at the proxy),
     * on a connection set of the pool: the one the acquire used, if free */
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "hold-match 0 up %s",
                            fp_hex("mrb:b", hex, sizeof(hex))), 0);
    assert_rc(distlock_multi_acquire(m, "mrb:b", 30000, 0, 0, NULL, &b), DISTLOCK_OK);
    while (fp_cmd(e->fp, NULL, 0, "wait-held 0 up 1 20") != 0) {
        assert_true(rh_now_ms() < end);
        multi_turn(m, 20);
    }

    long long t0 = rh_now_ms();
    int rc = distlock_release(l);
    long long took = rh_now_ms() - t0;
    printf("blocking release on the loop's thread, another run on the wire: %d (%s) after "
           "%lld ms\n", rc, distlock_strerror(rc), took);
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "heal"), 0);
    while (!distlock_op_done(b)) {
        assert_true(rh_now_ms() < end + 10000);
        multi_turn(m, 20);
    }
    distlock_lock_free(l);
    distlock_op_free(a);
    distlock_op_free(b);
    distlock_multi_free(m);
    distlock_client_free(c);
    assert_rc(rc, DISTLOCK_OK);
    assert_true(took < 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocking_release_does_not_wait_for_the_loops_run),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
