/* test_wait_without_descriptors.c -- a blocking acquire at the process's
 * open-file limit.
 *
 * A blocking acquire that must wait goes on as an operation of a multi of
 * its own (an epoll and an eventfd descriptor); its first attempt needs no
 * new descriptor on a client whose connections are open. At the limit
 * (EMFILE):
 *  - an acquire of a free key is granted as usual: the first attempt makes
 *    no multi;
 *  - a fair acquire of a held key, whose first attempt joined the servers'
 *    queue, ends with DISTLOCK_ESYS naming the descriptors, and its queue
 *    entry is gone from every node (nothing left behind for the next
 *    waiters to wait on).
 * The limit is set to the lowest free descriptor, so that every new one
 * fails, and restored before the servers are asked. */
#include "test_common.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

static int group_setup3(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    return (*state = rh_start(3)) ? 0 : -1;
}
static int group_teardown(void **state)
{
    rh_stop_all(*state);
    return 0;
}

static long long queue_len(rh_cluster *rc, int i, const char *key)
{
    redisReply *r = rh_command(rc, i, 0, "ZCARD {%s}:q", key);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

/* No new descriptor from now on (until fd_limit_restore). */
static struct rlimit fd_limit_now(void)
{
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(probe >= 0);
    close(probe);
    lim = old;
    lim.rlim_cur = (rlim_t)probe;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
    int again = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (again >= 0)
        close(again);
    assert_true(again < 0);  /* the limit is in force */
    return old;
}

static void fd_limit_restore(struct rlimit old)
{
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
}

static void test_wait_at_fd_limit(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder = new_client(rh_uris(rc));
    connect_every_node(rc, holder, "nofd:holder:connect");
    distlock_lock *hl = NULL;
    assert_rc(distlock_acquire(holder, "nofd:fair", 30000, 0, 0, &hl), DISTLOCK_OK);
    distlock_client *wc = new_client(rh_uris(rc));
    connect_every_node(rc, wc, "nofd:waiter:connect");  /* its connections are open */

    struct rlimit old = fd_limit_now();
    distlock_lock *free_l = NULL, *l = NULL;
    int free_rc = distlock_acquire(wc, "nofd:free", 30000, 5000, 0, &free_l);
    int rc_free_rel = free_rc == DISTLOCK_OK ? distlock_release(free_l) : -1;
    int wait_rc = distlock_acquire(wc, "nofd:fair", 30000, 5000, DISTLOCK_FAIR, &l);
    char detail[256];
    snprintf(detail, sizeof detail, "%s", distlock_last_error());
    fd_limit_restore(old);

    printf("# a free key at the limit: %s; a fair waiter: %s (\"%s\")\n",
           distlock_strerror(free_rc), distlock_strerror(wait_rc), detail);
    assert_rc(free_rc, DISTLOCK_OK);
    assert_int_equal(rc_free_rel, DISTLOCK_OK);
    distlock_lock_free(free_l);
    assert_int_equal(wait_rc, DISTLOCK_ESYS);
    assert_null(l);
    assert_non_null(strstr(detail, "descriptors"));
    for (int i = 0; i < rc->n; i++) {
        long long n = queue_len(rc, i, "nofd:fair");
        printf("# node %d: %lld fair waiter(s) queued\n", i, n);
        assert_int_equal(n, 0);
    }
    assert_holding(rc, "nofd:fair", distlock_lock_token(hl), rc->n);

    /* with descriptors again, the same client waits as usual */
    assert_rc(distlock_acquire(wc, "nofd:fair", 30000, 50, DISTLOCK_FAIR, &l),
              DISTLOCK_NOTACQUIRED);
    assert_non_null(strstr(distlock_last_error(), "still held"));
    distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(holder);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_at_fd_limit),
    };
    return cmocka_run_group_tests(tests, group_setup3, group_teardown);
}
