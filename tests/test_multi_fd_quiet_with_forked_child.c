/* test_multi_fd_quiet_with_forked_child.c -- the multi's descriptor is
 * readable only when distlock_multi_perform() has something to do
 * (distlock.h), also while a forked child (a prefork worker that never
 * touches the library) holds copies of the parent's sockets.
 *
 * The parent's acquire has its request on the wire (held at the fault
 * proxy) when the child is forked; the proxy then resets that connection,
 * the parent's acquire ends and its socket is closed. An epoll registration
 * lives as long as the open file, not the descriptor number: the child's
 * copy keeps the reset socket (readable for good) in the multi's epoll set,
 * where nobody reads it, unless the multi took it out before it was
 * closed. With no operation left, a loop that waits on the descriptor must
 * then sleep, not spin. */
#include "test_common.h"

#include "harness/faultproxy.h"

#include <poll.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_descriptor_quiet_after_reset_with_forked_child(void **state)
{
    (void)state;
    rh_cluster *rc = rh_start(1);
    assert_non_null(rc);
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *c = NULL;
    distlock_multi *m = NULL;
    assert_rc(distlock_client_new(fp_uris(fp), &c), DISTLOCK_OK);
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);

    char hex[64];
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold-match 0 up %s", fp_hex("mq:fork", hex, sizeof hex)),
                     0);
    distlock_op *op = NULL;
    assert_rc(distlock_multi_acquire(m, "mq:fork", 10000, 0, 0, NULL, &op), DISTLOCK_OK);
    /* until its request is held: the attempt is on the wire */
    long long end = rh_now_ms() + 10000;
    for (;;) {
        struct pollfd p = { distlock_multi_fd(m), POLLIN, 0 };
        (void)poll(&p, 1, 20);
        assert_true(distlock_multi_perform(m) >= 0);
        if (fp_cmd(fp, NULL, 0, "wait-held 0 up 1 1") == 0)
            break;
        assert_true(rh_now_ms() < end);
    }

    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* a worker that never uses the library: it only keeps the copies */
        char b;
        close(pipefd[1]);
        ssize_t r = read(pipefd[0], &b, 1);
        (void)r;
        _exit(0);
    }
    close(pipefd[0]);

    assert_int_equal(fp_cmd(fp, NULL, 0, "reset 0"), 0);
    end = rh_now_ms() + 10000;
    while (!distlock_op_done(op)) {
        struct pollfd p = { distlock_multi_fd(m), POLLIN, 0 };
        long t = distlock_multi_timeout(m);
        (void)poll(&p, 1, t < 0 || t > 50 ? 50 : (int)t);
        assert_true(distlock_multi_perform(m) >= 0);
        assert_true(rh_now_ms() < end);
    }
    printf("the acquire ended: %d (%s)\n", distlock_op_status(op), distlock_op_error(op));
    distlock_op_free(op);

    /* Nothing runs: for 500 ms, an event loop waiting on the descriptor
     * (and the timeout) wakes only when something is due. */
    int wakeups = 0, running = 0;
    long long t0 = rh_now_ms();
    while (rh_now_ms() - t0 < 500) {
        struct pollfd p = { distlock_multi_fd(m), POLLIN, 0 };
        long t = distlock_multi_timeout(m);
        if (poll(&p, 1, t < 0 || t > 100 ? 100 : (int)t) > 0)
            wakeups++;
        running = distlock_multi_perform(m);
    }
    printf("idle for 500 ms: %d operations running, the descriptor was readable %d times\n",
           running, wakeups);

    close(pipefd[1]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    distlock_multi_free(m);
    distlock_client_free(c);
    fp_stop(fp);
    rh_stop_all(rc);
    assert_int_equal(running, 0);
    assert_true(wakeups <= 2);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_descriptor_quiet_after_reset_with_forked_child),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
