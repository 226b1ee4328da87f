/* test_queue.c -- fair queue hygiene and renewal against paused nodes:
 * a fair waiter that dies leaves the queue (its entry expires) so the next
 * waiter is served; auto-renewal reports the lock lost when a quorum of
 * nodes is paused (SIGSTOP) past its validity. */
#include "test_common.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

DEFINE_GROUP(3)


static distlock_client *new_client_fast(const char *uris)
{
    distlock_client *c = NULL;
    assert_rc(distlock_client_new(uris, &c), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 300), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 300), DISTLOCK_OK);
    return c;
}

/* Entries in the fair queue of `key` on node i. */
static long long queue_len(rh_cluster *rc, int i, const char *key)
{
    redisReply *r = rh_command(rc, i, 0, "ZCARD {%s}:q", key);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

static void test_dead_waiter_leaves_queue(void **state)
{
    rh_cluster *rc = *state;
    char one[64];
    const char *uri = rh_uris_mask(rc, 1u, one, sizeof one);  /* node 0 only */
    distlock_client *holder = new_client_fast(uri);
    distlock_lock *hl = NULL;
    assert_rc(distlock_acquire(holder, "q:dead", 30000, 0, DISTLOCK_FAIR, &hl), DISTLOCK_OK);

    /* A waiter in another process queues up, then is killed with SIGKILL:
     * it can neither release nor leave the queue itself. */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        distlock_client *c = NULL;
        distlock_lock *l = NULL;
        if (distlock_client_new(uri, &c) != DISTLOCK_OK)
            _exit(2);
        distlock_acquire(c, "q:dead", 30000, DISTLOCK_WAIT_FOREVER, DISTLOCK_FAIR, &l);
        _exit(3);  /* not reached while the holder holds it */
    }
    assert_true(RH_WAIT_UNTIL(queue_len(rc, 0, "q:dead") == 1, 5000));
    assert_int_equal(kill(pid, SIGKILL), 0);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(queue_len(rc, 0, "q:dead"), 1);  /* its entry is still there */

    /* A live fair waiter (another process) queues behind the dead one. */
    long long t0 = rh_now_ms();
    fflush(NULL);
    /* The live waiter must get the lock once the dead entry expires (about
     * 3 x retry_max + 2 x command timeout = 0.9 s here), not wait forever. */
    pid_t w = fork();
    assert_true(w >= 0);
    if (w == 0) {
        distlock_client *c = new_client_fast(uri);
        distlock_lock *l = NULL;
        int r = distlock_acquire(c, "q:dead", 30000, 10000, DISTLOCK_FAIR, &l);
        _exit(r == DISTLOCK_OK ? 0 : 10 - r);
    }
    assert_true(RH_WAIT_UNTIL(queue_len(rc, 0, "q:dead") == 2, 5000));
    assert_rc(distlock_release(hl), DISTLOCK_OK);
    assert_int_equal(waitpid(w, &st, 0), w);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    long long took = rh_now_ms() - t0;
    print_message("live waiter served %lld ms after it queued behind a dead waiter\n", took);
    assert_true(took < 8000);
    assert_int_equal(queue_len(rc, 0, "q:dead"), 0);  /* both entries gone */
    distlock_lock_free(hl);
    distlock_client_free(holder);
}

static void test_auto_renew_nodes_paused(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client_fast(rh_uris(rc));
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "q:paused", 900, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    int fd = distlock_client_lost_fd(c);
    assert_true(fd >= 0);
    /* Renewed across several TTLs while every node answers. */
    assert_false(RH_WAIT_UNTIL(distlock_lock_lost(l) == 1, 2000));
    /* held on a quorum (a fresh client's first round may leave a node out) */
    assert_true(count_pttl_above(rc, "q:paused", distlock_lock_token(l), 0) >= 2);
    /* Two of three paused: no quorum renews it, so once its validity runs
     * out it must be reported lost (not silently kept). */
    assert_int_equal(rh_pause(rc, 0), 0);
    assert_int_equal(rh_pause(rc, 1), 0);
    long long tp = rh_now_ms();
    assert_true(RH_WAIT_UNTIL(distlock_lock_lost(l) == 1, 5000));
    long long took = rh_now_ms() - tp;
    print_message("lost reported %lld ms after pausing 2 of 3 nodes (ttl 900 ms)\n", took);
    assert_true(took < 3000);
    assert_int_equal(distlock_lock_validity_ms(l), 0);
    uint64_t ev = 0;
    assert_int_equal(read(fd, &ev, sizeof ev), (ssize_t)sizeof ev);
    assert_true(ev >= 1);
    assert_int_equal(rh_resume(rc, 0), 0);
    assert_int_equal(rh_resume(rc, 1), 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_dead_waiter_leaves_queue, heal),
        cmocka_unit_test_setup(test_auto_renew_nodes_paused, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
