/* test_multi_faults.c -- the non-blocking API (distlock_multi) when a node
 * is stuck, and across fork():
 *  - three nodes, one stopped (SIGSTOP): the multi's acquires and releases
 *    of many keys finish on the other two well inside the command timeout,
 *    none waits for the stuck node, and a waiting acquire is still handed
 *    the key by a release through the multi;
 *  - one node stopped: the acquire stuck on it does not hold up a release
 *    through another client, and ends by the command timeout;
 *  - fork: in the child every call on the parent's multi is EINVAL
 *    ("created in process N"), and freeing it there sends nothing (the
 *    parent's lock, won by an op and not taken, stays held); the parent's
 *    multi goes on. */
#include "test_common.h"
#include "test_multi_drive.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

static int group_setup1(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    return (*state = rh_start(1)) ? 0 : -1;
}
static int group_setup3(void **state) { return (*state = rh_start(3)) ? 0 : -1; }
static int group_teardown(void **state)
{
    rh_stop_all(*state);
    return 0;
}
static int heal(void **state) { return rh_heal(*state) == 0 ? 0 : -1; }

static distlock_client *client(rh_cluster *rc, long command_timeout_ms)
{
    distlock_client *c = NULL;
    assert_rc(distlock_client_new(rh_uris(rc), &c), DISTLOCK_OK);
    if (command_timeout_ms > 0)
        assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, command_timeout_ms),
                  DISTLOCK_OK);
    return c;
}

/* Three nodes, node 2 stopped: every op finishes on nodes 0 and 1 long
 * before the 3 s command timeout would end a wait for node 2. */
static void test_stopped_node_stalls_nothing(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client(rc, 3000);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    /* connections to every node first: the stopped node's is then open */
    distlock_op *warm;
    assert_rc(distlock_multi_acquire(m, "mf:warm", 1000, 0, 0, NULL, &warm), DISTLOCK_OK);
    multi_drive_until(m, warm, 5000);
    distlock_op_free(warm);
    assert_int_equal(rh_pause(rc, 2), 0);

    enum { K = 10 };
    distlock_op *a[K], *w;
    char key[32];
    long long t0 = rh_now_ms();
    for (int i = 0; i < K; i++) {
        snprintf(key, sizeof(key), "mf:stuck:%d", i);
        assert_rc(distlock_multi_acquire(m, key, 20000, 5000, 0, NULL, &a[i]), DISTLOCK_OK);
    }
    /* and one that waits for a key the first acquire gets */
    assert_rc(distlock_multi_acquire(m, "mf:stuck:0", 20000, 10000, 0, NULL, &w), DISTLOCK_OK);
    for (int i = 0; i < K; i++) {
        multi_drive_until(m, a[i], 5000);
        assert_op(a[i], DISTLOCK_OK);
    }
    long long acquired = rh_now_ms() - t0;
    /* The release of a key whose acquire left a request on the stopped node
     * waits for that request's timeout (the transport keeps the requests of
     * one key and token in order, round.c): acquires of other keys started
     * meanwhile do not wait for it. */
    distlock_lock *l0 = distlock_op_take_lock(a[0]);
    distlock_op *rel, *more[K];
    assert_rc(distlock_multi_release(m, l0, &rel), DISTLOCK_OK);
    multi_turn(m, 0);
    long long t1 = rh_now_ms();
    for (int i = 0; i < K; i++) {
        snprintf(key, sizeof(key), "mf:more:%d", i);
        assert_rc(distlock_multi_acquire(m, key, 20000, 5000, 0, NULL, &more[i]), DISTLOCK_OK);
    }
    for (int i = 0; i < K; i++) {
        multi_drive_until(m, more[i], 5000);
        assert_op(more[i], DISTLOCK_OK);
    }
    long long more_ms = rh_now_ms() - t1;
    int rel_done_first = distlock_op_done(rel);
    multi_drive_until(m, w, 8000);
    assert_op(w, DISTLOCK_OK);
    long long handed = rh_now_ms() - t1;
    printf("  node 2 stopped: 10 acquires in %lld ms; 10 more while a release waited on the "
           "stopped node: %lld ms; the waiter got the key %lld ms after that release started "
           "(command timeout 3000 ms)\n", acquired, more_ms, handed);
    assert_true(acquired < 1000);
    assert_true(more_ms < 1000);
    assert_false(rel_done_first);
    for (int i = 0; i < K; i++)
        distlock_op_free(more[i]);
    multi_drive_until(m, rel, 5000);
    assert_op(rel, DISTLOCK_OK);
    distlock_lock_free(l0);
    assert_int_equal(rh_resume(rc, 2), 0);
    for (int i = 0; i < K; i++)
        distlock_op_free(a[i]);  /* released: untaken locks */
    distlock_op_free(w);
    distlock_op_free(rel);
    distlock_multi_free(m);
    distlock_client_free(c);
}

/* One node, stopped: an acquire on it waits for its command timeout, and
 * the multi meanwhile keeps serving its other ops (an extend of a lock held
 * on another client's node... here: the op's own descriptor does not block
 * perform, which returns at once). */
static void test_stopped_node_perform_never_blocks(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client(rc, 800);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *warm;
    assert_rc(distlock_multi_acquire(m, "mf:warm1", 1000, 0, 0, NULL, &warm), DISTLOCK_OK);
    multi_drive_until(m, warm, 5000);
    distlock_op_free(warm);
    assert_int_equal(rh_pause(rc, 0), 0);
    distlock_op *a;
    assert_rc(distlock_multi_acquire(m, "mf:one", 20000, 0, 0, NULL, &a), DISTLOCK_OK);
    long long worst = 0, t0 = rh_now_ms();
    while (!distlock_op_done(a) && rh_now_ms() - t0 < 5000) {
        struct pollfd p = { distlock_multi_fd(m), POLLIN, 0 };
        long t = distlock_multi_timeout(m);
        (void)poll(&p, 1, t < 0 || t > 50 ? 50 : (int)t);
        long long s = rh_now_ms();
        distlock_multi_perform(m);
        if (rh_now_ms() - s > worst)
            worst = rh_now_ms() - s;
    }
    long long took = rh_now_ms() - t0;
    assert_int_equal(rh_resume(rc, 0), 0);
    printf("  node stopped: the acquire ended after %lld ms (status %d), longest perform %lld ms\n",
           took, distlock_op_status(a), worst);
    assert_true(distlock_op_done(a));
    assert_true(distlock_op_status(a) != DISTLOCK_OK);
    /* a perform that blocked would wait out the connect or command timeout
     * (800 ms); valgrind makes every step slower */
    assert_true(worst < slow_bound(100, 400));
    distlock_op_free(a);
    distlock_multi_free(m);
    distlock_client_free(c);
}

/* The child's calls on the parent's multi are refused, and its free sends
 * nothing: the lock the parent's op won (not taken) stays held. */
static void test_fork(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client(rc, 0);
    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *won, *waiting;
    assert_rc(distlock_multi_acquire(m, "mf:fork", 20000, 0, 0, NULL, &won), DISTLOCK_OK);
    multi_drive_until(m, won, 5000);
    assert_op(won, DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, "mf:fork", 20000, 20000, 0, NULL, &waiting),
              DISTLOCK_OK);
    multi_turn(m, 100);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int bad = 0;
        distlock_op *op = NULL;
        char want[64];
        snprintf(want, sizeof(want), "created in process %d", (int)getppid());
        bad |= distlock_multi_perform(m) != DISTLOCK_EINVAL;
        bad |= strstr(distlock_last_error(), want) == NULL;
        bad |= distlock_multi_acquire(m, "mf:fork2", 1000, 0, 0, NULL, &op) != DISTLOCK_EINVAL;
        bad |= op != NULL;
        bad |= distlock_multi_fd(m) != -1;
        bad |= distlock_multi_done(m) != NULL;
        bad |= distlock_op_take_lock(won) != NULL;
        distlock_op_cancel(waiting);
        distlock_multi_free(m);
        _exit(bad ? 1 : 0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* the parent's lock: still held (the child sent nothing) */
    distlock_lock *l = distlock_op_take_lock(won);
    assert_non_null(l);
    assert_holding(rc, "mf:fork", distlock_lock_token(l), 1);
    /* and the parent's multi goes on: the release hands the key over */
    distlock_op *rel;
    assert_rc(distlock_multi_release(m, l, &rel), DISTLOCK_OK);
    multi_drive_until(m, waiting, 5000);
    assert_op(waiting, DISTLOCK_OK);
    multi_drive_until(m, rel, 5000);
    distlock_lock_free(l);
    distlock_op_free(won);
    distlock_op_free(rel);
    distlock_op_free(waiting);
    distlock_multi_free(m);
    assert_holding(rc, "mf:fork", NULL, 0);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest three[] = {
        cmocka_unit_test_setup(test_stopped_node_stalls_nothing, heal),
    };
    const struct CMUnitTest one[] = {
        cmocka_unit_test_setup(test_stopped_node_perform_never_blocks, heal),
        cmocka_unit_test_setup(test_fork, heal),
    };
    int failed = cmocka_run_group_tests_name("one node", one, group_setup1, group_teardown);
    failed += cmocka_run_group_tests_name("three nodes", three, group_setup3, group_teardown);
    return failed;
}
