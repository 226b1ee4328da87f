/* test_multi_extend_woken_by_renewal.c -- an extend through a multi that
 * waits for a renewal of the lock on the wire (DISTLOCK_AUTO_RENEW, the
 * client's watchdog) is woken by that renewal's end through the multi's
 * descriptor, instead of looking again every few ms: while it waits, the
 * multi's timeout is not a short poll; once the renewal has ended (seen as
 * the lock's validity renewed) the descriptor is readable at once, and the
 * extend then goes out and succeeds. One node behind the fault proxy, which
 * holds the renewal. */
#include "test_common.h"

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

static void test_extend_waiting_for_a_renewal_is_woken_by_its_end(void **state)
{
    env *e = *state;
    const char *key = "mxw:k";
    char hex[64];
    distlock_client *c = NULL;
    distlock_multi *m = NULL;
    distlock_lock *l = NULL;
    distlock_op *ext = NULL;
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "heal"), 0);
    assert_rc(distlock_client_new(fp_uris(e->fp), &c), DISTLOCK_OK);
    /* the held renewal waits for the heal, not for its budget */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 10000), DISTLOCK_OK);
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, key, 3000, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    /* the watchdog's next renewal of the key is held at the proxy */
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "hold-match 0 up %s", fp_hex(key, hex, sizeof(hex))),
                     0);
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "wait-held 0 up 1 10000"), 0);

    assert_rc(distlock_multi_extend(m, l, 20000, &ext), DISTLOCK_OK);
    assert_true(distlock_multi_perform(m) >= 0);
    assert_false(distlock_op_done(ext));
    long t = distlock_multi_timeout(m);
    printf("waiting for the renewal: the multi's timeout is %ld ms\n", t);
    assert_true(t >= 10);

    long before = distlock_lock_validity_ms(l);
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "heal"), 0);
    long long end = rh_now_ms() + 10000;
    while (distlock_lock_validity_ms(l) <= before) {  /* the renewal ended */
        assert_true(rh_now_ms() < end);
        (void)poll(NULL, 0, 2);  /* the interval between looks (the deadline decides) */
    }
    struct pollfd p = { distlock_multi_fd(m), POLLIN, 0 };
    int ready = poll(&p, 1, 0);
    printf("renewal ended (validity %ld -> %ld ms): the multi's descriptor readable: %d\n",
           before, distlock_lock_validity_ms(l), ready);
    assert_int_equal(ready, 1);
    while (!distlock_op_done(ext)) {
        assert_true(rh_now_ms() < end);
        long w = distlock_multi_timeout(m);
        (void)poll(&p, 1, w < 0 || w > 20 ? 20 : (int)w);
        assert_true(distlock_multi_perform(m) >= 0);
    }
    printf("the multi's extend: %d (%s), validity %ld ms\n", distlock_op_status(ext),
           distlock_strerror(distlock_op_status(ext)), distlock_lock_validity_ms(l));
    assert_rc(distlock_op_status(ext), DISTLOCK_OK);
    assert_true(distlock_lock_validity_ms(l) > 10000);
    distlock_op_free(ext);
    distlock_lock_free(l);
    distlock_multi_free(m);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extend_waiting_for_a_renewal_is_woken_by_its_end),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
