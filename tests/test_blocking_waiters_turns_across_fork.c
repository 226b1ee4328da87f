/* test_blocking_waiters_turns_across_fork.c -- blocking calls of one client
 * waiting for one key take turns (only the longest-waiting one re-checks).
 * fork() while two threads of the parent wait for a key: the child's own
 * waiting call for that key must not wait behind the parent's waiters (they
 * are not the child's: their threads did not cross the fork). The holder's
 * release serves the parent's two threads and the child within about a
 * second, not at the child's deadline (10 s).
 * Not under TSan: it does not support a child of a multi-threaded process
 * that starts threads. */
#include "test_common.h"
#include "test_wake_waiter.h"
#include "test_waiting_threads.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

DEFINE_GROUP(1)

static void test_child_waits_for_a_key_without_the_parents_waiting_threads_ahead(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnsfork:key";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 50, 100);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);

    waiting_thread w[2];
    for (int i = 0; i < 2; i++) {
        w[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 20000 };
        waiting_thread_start(&w[i]);
        assert_true(RH_WAIT_UNTIL(atomic_load(&w[i].sleeps) >= 1, 10000));
    }
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 1, 10000));

    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* the child: one waiting call of its own, then its status and how
         * long it waited on the pipe */
        close(pfd[0]);
        distlock_lock *l = NULL;
        long long t0 = rh_now_ms();
        int st = distlock_acquire(c, key, 10000, 10000, 0, &l);
        long long took = rh_now_ms() - t0;
        if (l) {
            if (distlock_release(l) != DISTLOCK_OK)
                st = -100;
            distlock_lock_free(l);
        }
        char buf[64];
        int n = snprintf(buf, sizeof buf, "%d %lld\n", st, took);
        ssize_t wr = write(pfd[1], buf, (size_t)n);
        (void)wr;
        _exit(0);
    }
    close(pfd[1]);
    /* the child waits: its own subscription joins the parent's */
    int child_waits = RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 2, 10000);
    long long released = 0;
    assert_true(release_ok_started_at(held, &released));
    distlock_lock_free(held);
    for (int i = 0; i < 2; i++)
        pthread_join(w[i].t, NULL);
    char buf[64] = "";
    ssize_t n = 0;
    struct pollfd p = { pfd[0], POLLIN, 0 };
    if (poll(&p, 1, 30000) == 1)
        n = read(pfd[0], buf, sizeof buf - 1);
    close(pfd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    int child_rc = -99;
    long long child_took = -1;
    if (n > 0)
        sscanf(buf, "%d %lld", &child_rc, &child_took);
    long long child_done = rh_now_ms();
    printf("# parent threads: %d after %lld ms, %d after %lld ms; the child: %d, waited %lld ms "
           "in all (the release came after it began)\n",
           w[0].rc, w[0].done_ms - released, w[1].rc, w[1].done_ms - released, child_rc,
           child_took);
    distlock_client_free(c);
    distlock_client_free(holder);
    assert_true(child_waits);
    assert_rc(w[0].rc, DISTLOCK_OK);
    assert_rc(w[1].rc, DISTLOCK_OK);
    assert_rc(child_rc, DISTLOCK_OK);
    assert_true(child_took >= 0 && child_took < 8000);
    assert_true(child_done - released < 8000);
    assert_holding(rc, key, NULL, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(
            test_child_waits_for_a_key_without_the_parents_waiting_threads_ahead, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
