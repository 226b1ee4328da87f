/* test_fork_while_waiting.c -- fork() while a thread of the parent waits in
 * a blocking acquire: the child, which has no such thread, closes the
 * descriptors of that wait (its multi's epoll and eventfd) at its first
 * use of the client, as it closes the parent's subscriber sockets; the
 * parent's wait goes on untouched and is cancelled as usual.
 *
 * The child counts its epoll and eventfd descriptors (/proc/self/fd)
 * before and after its first call on the client (a try-once acquire of
 * another key, which makes no descriptor of that kind); the parent
 * checks the counts. */
#include "test_common.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

static int group_setup1(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    return (*state = rh_start(1)) ? 0 : -1;
}
static int group_teardown(void **state)
{
    rh_stop_all(*state);
    return 0;
}

/* Descriptors of this process whose target reads `what`. */
static int count_fds(const char *what)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char path[300], target[128];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len < 0)
            continue;
        target[len] = '\0';
        if (strcmp(target, what) == 0)
            n++;
    }
    closedir(d);
    return n;
}

struct waiter {
    distlock_client *c;
    int rc;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    distlock_lock *l = NULL;
    w->rc = distlock_acquire(w->c, "fw:key", 30000, DISTLOCK_WAIT_FOREVER, 0, &l);
    distlock_lock_free(l);
    return NULL;
}

static long long numsub(rh_cluster *rc, const char *key)
{
    redisReply *r = rh_command(rc, 0, 0, "PUBSUB NUMSUB distlock:%s", key);
    long long n = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_INTEGER)
        n = r->element[1]->integer;
    if (r)
        freeReplyObject(r);
    return n;
}

static void test_child_closes_a_waiting_calls_descriptors(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_lock *hl = NULL, *l = NULL;
    assert_rc(distlock_acquire(holder, "fw:key", 30000, 0, 0, &hl), DISTLOCK_OK);
    distlock_client *wc = new_client(rh_uris(rc));
    assert_rc(distlock_acquire(wc, "fw:warm", 1000, 0, 0, &l), DISTLOCK_OK);  /* connected */
    distlock_lock_free(l);
    int epolls_idle = count_fds("anon_inode:[eventpoll]");

    struct waiter w = { .c = wc };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    assert_true(RH_WAIT_UNTIL(numsub(rc, "fw:key") >= 1, 10000));  /* in its wait */
    int epolls_waiting = count_fds("anon_inode:[eventpoll]");

    int res[2];
    assert_int_equal(pipe(res), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int out[5];
        out[0] = count_fds("anon_inode:[eventpoll]");
        out[1] = count_fds("anon_inode:[eventfd]");
        distlock_lock *cl = NULL;
        out[4] = distlock_acquire(wc, "fw:child", 1000, 0, 0, &cl);  /* its first use */
        distlock_lock_free(cl);
        out[2] = count_fds("anon_inode:[eventpoll]");
        out[3] = count_fds("anon_inode:[eventfd]");
        if (write(res[1], out, sizeof out) != (ssize_t)sizeof out)
            _exit(4);
        _exit(0);
    }
    int out[5];
    assert_int_equal(read(res[0], out, sizeof out), (ssize_t)sizeof out);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    printf("# parent: %d epoll descriptor(s) idle, %d while a thread waits\n", epolls_idle,
           epolls_waiting);
    printf("# child: epoll %d -> %d, eventfd %d -> %d across its first call (%s)\n", out[0],
           out[2], out[1], out[3], distlock_strerror(out[4]));
    assert_int_equal(epolls_waiting, epolls_idle + 1);  /* the wait's multi */
    assert_int_equal(out[4], DISTLOCK_OK);
    assert_int_equal(out[0], epolls_waiting);
    assert_int_equal(out[2], epolls_idle);        /* the wait's epoll closed */
    assert_int_equal(out[3], out[1] - 1);         /* and its eventfd */

    /* the parent's wait is untouched: still waiting, and cancelled as usual */
    assert_int_equal(numsub(rc, "fw:key") >= 1, 1);
    assert_rc(distlock_client_cancel(wc), DISTLOCK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, DISTLOCK_ECANCELED);
    assert_int_equal(count_fds("anon_inode:[eventpoll]"), epolls_idle);
    close(res[0]), close(res[1]);
    distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(holder);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_child_closes_a_waiting_calls_descriptors),
    };
    return cmocka_run_group_tests(tests, group_setup1, group_teardown);
}
