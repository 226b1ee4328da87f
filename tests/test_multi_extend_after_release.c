/* test_multi_extend_after_release.c -- an extend through a multi of a handle
 * the caller released (blocking distlock_release()) after the extend was
 * started but before it went out. distlock.h: distlock_multi_extend() is
 * "as distlock_extend()", whose check says ENOTOWNER "'k' was released"
 * without sending anything; a lock is "lost" only when found lost (expired,
 * deleted or taken over by someone else), never because its holder
 * released it. So: DISTLOCK_ENOTOWNER, the handle not marked lost, the
 * client's lost descriptor quiet, lost_total unchanged. One node. */
#include "test_common.h"
#include "test_multi_drive.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

static uint64_t lost_total(distlock_client *c)
{
    distlock_stat st[256];
    size_t n = 0;
    assert_rc(distlock_client_stats(c, st, 256, &n), DISTLOCK_OK);
    for (size_t i = 0; i < n; i++)
        if (strcmp(st[i].name, "lost_total") == 0)
            return st[i].value;
    fail_msg("no lost_total");
    return 0;
}

static void test_extend_of_a_handle_released_meanwhile_is_not_a_loss(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = NULL;
    distlock_multi *m = NULL;
    distlock_lock *l = NULL;
    distlock_op *ext = NULL;
    assert_rc(distlock_client_new(rh_uris(rc), &c), DISTLOCK_OK);
    int lfd = distlock_client_lost_fd(c);
    assert_true(lfd >= 0);
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "mer:k", 30000, 0, 0, &l), DISTLOCK_OK);
    uint64_t lost0 = lost_total(c);

    assert_rc(distlock_multi_extend(m, l, 30000, &ext), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);  /* before the extend went out */
    multi_drive_until(m, ext, 10000);

    int st = distlock_op_status(ext);
    int lost = distlock_lock_lost(l);
    char why[512];  /* the thread's detail: copied before the next call clears it */
    snprintf(why, sizeof(why), "%s", lost ? distlock_last_error() : "");
    struct pollfd p = { lfd, POLLIN, 0 };
    int lost_fd_ready = poll(&p, 1, 0);
    uint64_t lost1 = lost_total(c);
    printf("extend after the release: %d (%s) \"%s\"; lock_lost %d \"%s\"; lost fd readable "
           "%d; lost_total %llu -> %llu\n", st, distlock_strerror(st), distlock_op_error(ext),
           lost, why, lost_fd_ready, (unsigned long long)lost0, (unsigned long long)lost1);
    distlock_op_free(ext);
    distlock_lock_free(l);
    distlock_multi_free(m);
    distlock_client_free(c);
    assert_int_equal(st, DISTLOCK_ENOTOWNER);
    assert_int_equal(lost, 0);
    assert_int_equal(lost_fd_ready, 0);
    assert_int_equal(lost1, lost0);
}

static int group_setup(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    return (*state = rh_start(1)) ? 0 : -1;
}

static int group_teardown(void **state)
{
    rh_stop_all(*state);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extend_of_a_handle_released_meanwhile_is_not_a_loss),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
