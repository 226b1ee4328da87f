/* test_fork.c -- a client shared across fork(): the child opens its own
 * connections and cannot release the parent's locks through inherited handles;
 * its distlock_client_lost_fd() is its own (a lock lost in the child does not
 * make the parent's fd readable, and vice versa); the parent's subscriber
 * connection (a waiting acquire started it) is closed in the child by its
 * first library call; distlock_lock_validity_ms() in a child returns even
 * when a parent thread held the client mutex at fork time.
 *
 * Not in the TSan stage: ThreadSanitizer does not support a child of a
 * multi-threaded process that starts threads. */
#include "test_common.h"
#include "test_thread_control.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

DEFINE_GROUP(1)

/* Child exit codes name the step that failed (0 = all good). */
enum { CH_OK = 0, CH_ACQUIRE = 10, CH_KEY, CH_RELEASE, CH_NEWCONN, CH_PARENT_REL,
       CH_PARENT_EXT, CH_INSPECT, CH_VALIDITY, CH_TOKEN_REL, CH_FREE_LOCK, CH_FREE_CLIENT,
       CH_FD, CH_NOT_LOST, CH_OWN_FD, CH_PIPE, CH_PARENT_FD_LEAK, CH_SOCKET_LEAK };

static const char *child_step(int code)
{
    switch (code) {
    case CH_ACQUIRE: return "child acquire on the inherited client";
    case CH_KEY: return "child's key not on the server with its token";
    case CH_RELEASE: return "child release of its own lock";
    case CH_NEWCONN: return "child did not use a connection of its own";
    case CH_PARENT_REL: return "child released the parent's lock through the inherited handle";
    case CH_PARENT_EXT: return "child extended the parent's lock through the inherited handle";
    case CH_INSPECT: return "child could not inspect the inherited handle";
    case CH_VALIDITY: return "inherited handle shows no validity in the child";
    case CH_TOKEN_REL: return "child's deliberate release_token of the parent's lock";
    case CH_FREE_LOCK: return "freeing the inherited lock handle in the child released the parent's lock";
    case CH_FREE_CLIENT: return "freeing the inherited client in the child released the parent's lock";
    case CH_FD: return "distlock_client_lost_fd() failed in the child";
    case CH_NOT_LOST: return "the child's deleted lock was not found lost";
    case CH_OWN_FD: return "the child's own lost lock did not make its lost fd readable";
    case CH_PIPE: return "talking to the parent failed";
    case CH_PARENT_FD_LEAK: return "a lock lost in the PARENT made the CHILD's lost fd readable";
    case CH_SOCKET_LEAK: return "a socket of the parent's subscriber connection is still open in "
                                "the child after its first library call";
    default: return "unknown";
    }
}

/* Exit code of pid, waiting at most timeout_ms (then killed); -1 - signal
 * number if it died of a signal, -1000 on timeout. */
static int child_status(pid_t pid, long timeout_ms)
{
    long long end = rh_now_ms() + timeout_ms;
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (rh_now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1000;
        }
        rh_sleep_ms(2);
    }
    if (WIFSIGNALED(st)) return -1 - WTERMSIG(st);
    return WEXITSTATUS(st);
}

/* Wait for pid at most timeout_ms (kill it after); returns its exit code or -1. */
static int wait_child(pid_t pid, long timeout_ms)
{
    int code = child_status(pid, timeout_ms);
    if (code == -1000) {
        print_error("child %d did not finish within %ld ms\n", (int)pid, timeout_ms);
        return -1;
    }
    if (code < 0) {
        print_error("child killed by signal %d\n", -1 - code);
        return -1;
    }
    return code;
}

/* In a child, a crash must kill it (the parent sees the signal) instead of
 * being caught by cmocka's handlers, which would run the rest of the suite
 * in the child. */
static void child_init(void)
{
    const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
}

/* child_init(), and whatever happens, the child does not outlive the test. */
static void child_init_limited(void)
{
    child_init();
    alarm(30);
}

#define CHILD_CHECK(cond, code) do { if (!(cond)) _exit(code); } while (0)

static int fd_readable(int fd, int timeout_ms)
{
    struct pollfd p = { fd, POLLIN, 0 };
    return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

static void drain(int fd)
{
    uint64_t v;
    while (read(fd, &v, sizeof v) == (ssize_t)sizeof v) {}
}

static int send_byte(int fd, char ch) { return write(fd, &ch, 1) == 1 ? 0 : -1; }

static int recv_byte(int fd, char want, int timeout_ms)
{
    char ch;
    if (!fd_readable(fd, timeout_ms)) return -1;
    return read(fd, &ch, 1) == 1 && ch == want ? 0 : -1;
}

static void test_fork_child_uses_own_connection(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *pl = NULL;
    char buf[64];
    assert_rc(distlock_acquire(c, "parent", 60000, 0, 0, &pl), DISTLOCK_OK);
    char ptok[64];
    snprintf(ptok, sizeof ptok, "%s", distlock_lock_token(pl));

    long long before[512];
    int nbefore = rh_lib_conn_ids(rc, 0, NULL, before, 512);
    assert_true(nbefore >= 1);   /* the parent's own connection */

    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        child_init();
        distlock_lock *cl = NULL;
        CHILD_CHECK(distlock_acquire(c, "child", 60000, 0, 0, &cl) == DISTLOCK_OK, CH_ACQUIRE);
        CHILD_CHECK(rh_get(rc, 0, 0, "child", buf, sizeof buf) == 1 &&
                    strcmp(buf, distlock_lock_token(cl)) == 0, CH_KEY);
        /* A connection that was not there before the fork did the work. */
        CHILD_CHECK(rh_new_lib_conns(rc, 0, NULL, before, nbefore) >= 1, CH_NEWCONN);
        CHILD_CHECK(distlock_release(cl) == DISTLOCK_OK, CH_RELEASE);
        distlock_lock_free(cl);
        /* The parent's handle: readable, but not releasable or extendable here. */
        CHILD_CHECK(distlock_lock_key(pl) && strcmp(distlock_lock_key(pl), "parent") == 0,
                    CH_INSPECT);
        CHILD_CHECK(distlock_lock_validity_ms(pl) > 0, CH_VALIDITY);
        CHILD_CHECK(distlock_release(pl) < 0, CH_PARENT_REL);
        CHILD_CHECK(rh_get(rc, 0, 0, "parent", NULL, 0) == 1, CH_PARENT_REL);
        CHILD_CHECK(distlock_extend(pl, 1000) < 0, CH_PARENT_EXT);
        CHILD_CHECK(rh_pttl(rc, 0, 0, "parent") > 1000, CH_PARENT_EXT);
        _exit(CH_OK);
    }
    int code = wait_child(pid, 30000);
    if (code != CH_OK) {
        print_error("child failed: %d (%s)\n", code, code > 0 ? child_step(code) : "crash/timeout");
        fail();
    }
    /* The parent's lock is intact and its connection still answers correctly. */
    assert_int_equal(rh_get(rc, 0, 0, "parent", buf, sizeof buf), 1);
    assert_string_equal(buf, ptok);
    assert_int_equal(rh_get(rc, 0, 0, "child", NULL, 0), 0);
    assert_rc(distlock_extend(pl, 90000), DISTLOCK_OK);
    assert_true(rh_pttl(rc, 0, 0, "parent") > 60000);
    distlock_lock *pl2 = NULL;
    assert_rc(distlock_acquire(c, "parent", 60000, 0, 0, &pl2), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_acquire(c, "parent2", 60000, 0, 0, &pl2), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "parent2", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(pl2));
    assert_rc(distlock_release(pl), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "parent", NULL, 0), 0);
    assert_rc(distlock_release(pl2), DISTLOCK_OK);
    distlock_lock_free(pl);
    distlock_lock_free(pl2);
    distlock_client_free(c);
}

/* Many children hammering the inherited client while the parent keeps using
 * it: replies never get mixed up (each side sees its own keys' results). */
static void test_fork_many_children(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *pl = NULL;
    assert_rc(distlock_acquire(c, "pm", 60000, 0, 0, &pl), DISTLOCK_OK);
    enum { KIDS = 4, ROUNDS = 30 };
    pid_t kids[KIDS];
    fflush(NULL);
    for (int k = 0; k < KIDS; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0) {
            child_init();
            char key[32], buf[64];
            snprintf(key, sizeof key, "kid%d", k);
            for (int i = 0; i < ROUNDS; i++) {
                distlock_lock *l = NULL;
                CHILD_CHECK(distlock_acquire(c, key, 60000, 0, 0, &l) == DISTLOCK_OK, CH_ACQUIRE);
                CHILD_CHECK(rh_get(rc, 0, 0, key, buf, sizeof buf) == 1 &&
                            strcmp(buf, distlock_lock_token(l)) == 0, CH_KEY);
                /* The parent's key is held: the child must see NOTACQUIRED. */
                distlock_lock *x = NULL;
                CHILD_CHECK(distlock_acquire(c, "pm", 60000, 0, 0, &x) == DISTLOCK_NOTACQUIRED,
                            CH_ACQUIRE);
                CHILD_CHECK(distlock_release(l) == DISTLOCK_OK, CH_RELEASE);
                distlock_lock_free(l);
            }
            _exit(CH_OK);
        }
    }
    for (int i = 0; i < ROUNDS; i++) {
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(c, "pk", 60000, 0, 0, &l), DISTLOCK_OK);
        assert_rc(distlock_extend(pl, 60000), DISTLOCK_OK);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    for (int k = 0; k < KIDS; k++) {
        int code = wait_child(kids[k], 60000);
        if (code != CH_OK) {
            print_error("child %d failed: %d (%s)\n", k, code, child_step(code));
            fail();
        }
    }
    assert_rc(distlock_release(pl), DISTLOCK_OK);
    distlock_lock_free(pl);
    distlock_client_free(c);
}

/* Deliberate hand-over: the child may release by token on purpose. */
static void test_fork_child_release_token(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *pl = NULL;
    assert_rc(distlock_acquire(c, "ph", 60000, 0, 0, &pl), DISTLOCK_OK);
    char tok[64];
    snprintf(tok, sizeof tok, "%s", distlock_lock_token(pl));
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        child_init();
        CHILD_CHECK(distlock_release_token(c, "ph", tok) == DISTLOCK_OK, CH_TOKEN_REL);
        _exit(rh_get(rc, 0, 0, "ph", NULL, 0) == 0 ? CH_OK : CH_TOKEN_REL);
    }
    int code = wait_child(pid, 30000);
    if (code != CH_OK) {
        print_error("child failed: %d (%s)\n", code, code > 0 ? child_step(code) : "crash/timeout");
        fail();
    }
    assert_int_equal(rh_get(rc, 0, 0, "ph", NULL, 0), 0);
    assert_fails(distlock_release(pl), DISTLOCK_ENOTOWNER);
    distlock_lock_free(pl);
    distlock_client_free(c);
}

/* The child frees the inherited lock handle, then the inherited client: no
 * crash (was a use-after-free of the parent's held list), nothing sent that
 * releases the parent's lock, which the parent then releases normally. */
static void test_fork_child_frees(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *pl = NULL, *pl2 = NULL;
    /* pf2 is auto-renewed, so the parent's watchdog thread is waiting on
     * its condition variable at fork time: the child's client_free() must
     * not block on the copy (it once hung in pthread_cond_destroy()). */
    assert_rc(distlock_acquire(c, "pf", 60000, 0, 0, &pl), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "pf2", 60000, 0, DISTLOCK_AUTO_RENEW, &pl2), DISTLOCK_OK);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        child_init();
        distlock_lock_free(pl);
        CHILD_CHECK(rh_get(rc, 0, 0, "pf", NULL, 0) == 1, CH_FREE_LOCK);
        distlock_client_free(c);   /* still holds the inherited pl2 */
        CHILD_CHECK(rh_get(rc, 0, 0, "pf", NULL, 0) == 1, CH_FREE_CLIENT);
        CHILD_CHECK(rh_get(rc, 0, 0, "pf2", NULL, 0) == 1, CH_FREE_CLIENT);
        _exit(CH_OK);
    }
    int code = wait_child(pid, 30000);
    if (code != CH_OK) {
        print_error("child failed: %d (%s)\n", code, code > 0 ? child_step(code) : "crash/timeout");
        fail();
    }
    char buf[64];
    assert_int_equal(rh_get(rc, 0, 0, "pf", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(pl));
    assert_int_equal(rh_get(rc, 0, 0, "pf2", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(pl2));
    assert_rc(distlock_release(pl), DISTLOCK_OK);
    assert_rc(distlock_release(pl2), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "pf", NULL, 0), 0);
    assert_int_equal(rh_get(rc, 0, 0, "pf2", NULL, 0), 0);
    distlock_lock_free(pl);
    distlock_lock_free(pl2);
    distlock_client_free(c);
}

/* ------------------------------------------- the lost-lock fd after fork */

static void test_fork_lost_fd_is_per_process(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    int pfd = distlock_client_lost_fd(c);
    assert_true(pfd >= 0);
    distlock_lock *pl = NULL;
    assert_rc(distlock_acquire(c, "f10p", 500, 0, DISTLOCK_AUTO_RENEW, &pl), DISTLOCK_OK);
    int p2c[2], c2p[2];
    assert_int_equal(pipe(p2c), 0);
    assert_int_equal(pipe(c2p), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        child_init_limited();
        int cfd = distlock_client_lost_fd(c);
        CHILD_CHECK(cfd >= 0, CH_FD);
        distlock_lock *cl = NULL;
        /* No renewal thread in the child: a forked child of a threaded
         * process that starts threads can hang in the sanitizers' runtime
         * (seen 1 run in 4 under ASan). The loss is found by an extend,
         * which signals the lost fd like the watchdog does. */
        CHILD_CHECK(distlock_acquire(c, "f10c", 500, 0, 0, &cl) == DISTLOCK_OK, CH_ACQUIRE);
        /* The child's lock is lost. */
        CHILD_CHECK(rh_del(rc, 0, 0, "f10c") == 1, CH_ACQUIRE);
        CHILD_CHECK(distlock_extend(cl, 500) == DISTLOCK_ENOTOWNER && distlock_lock_lost(cl) == 1,
                    CH_NOT_LOST);
        CHILD_CHECK(fd_readable(cfd, 2000), CH_OWN_FD);
        CHILD_CHECK(send_byte(c2p[1], 'A') == 0 && recv_byte(p2c[0], 'B', 10000) == 0, CH_PIPE);
        drain(cfd);
        /* Now the parent loses one. */
        CHILD_CHECK(send_byte(c2p[1], 'C') == 0 && recv_byte(p2c[0], 'D', 10000) == 0, CH_PIPE);
        CHILD_CHECK(!fd_readable(cfd, 0), CH_PARENT_FD_LEAK);
        _exit(CH_OK);
    }
    /* The child's loss must not show on the parent's fd. */
    int r_a = recv_byte(c2p[0], 'A', 15000);
    int leak_to_parent = r_a == 0 && fd_readable(pfd, 0);
    if (leak_to_parent) drain(pfd);
    int r_c = r_a == 0 ? (send_byte(p2c[1], 'B') == 0 ? recv_byte(c2p[0], 'C', 10000) : -1) : -1;
    int parent_lost = 0, parent_fd = 0;
    if (r_c == 0) {
        assert_int_equal(rh_del(rc, 0, 0, "f10p"), 1);
        parent_lost = RH_WAIT_UNTIL(distlock_lock_lost(pl) == 1, 5000);
        parent_fd = fd_readable(pfd, 2000);
        (void)send_byte(p2c[1], 'D');
    }
    int code = child_status(pid, 20000);
    for (int i = 0; i < 2; i++) close(p2c[i]), close(c2p[i]);
    distlock_lock_free(pl);
    distlock_client_free(c);
    if (leak_to_parent)
        print_error("a lock lost in the CHILD made the PARENT's lost fd readable "
                    "(one eventfd shared across fork)\n");
    if (code != CH_OK)
        print_error("child: %d (%s)\n", code, code > 0 ? child_step(code) : "crash/timeout");
    assert_false(leak_to_parent);
    assert_int_equal(code, CH_OK);
    assert_true(parent_lost);
    assert_true(parent_fd);
}

/* ------------------------------- the parent's subscriber sockets in the child */

/* Local ports of this process's IPv4 TCP sockets connected to `port`. */
static int sockets_to(int port, int *fds, int *lports, int max)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL && n < max) {
        if (e->d_name[0] == '.') continue;
        int fd = atoi(e->d_name);
        struct sockaddr_in peer, local;
        socklen_t pl = sizeof peer, ll = sizeof local;
        if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0 || peer.sin_family != AF_INET ||
            ntohs(peer.sin_port) != port)
            continue;
        if (getsockname(fd, (struct sockaddr *)&local, &ll) != 0) continue;
        fds[n] = fd;
        lports[n++] = ntohs(local.sin_port);
    }
    if (d) closedir(d);
    return n;
}

static void test_fork_child_closes_subscriber_sockets(void **state)
{
    rh_cluster *rc = *state;
    int port = rc->node[0].port;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    /* A waiting acquire: starts the subscriber thread and its connection. */
    assert_int_equal(rh_set(rc, 0, 0, "f10s", "other", 100), 0);
    assert_rc(distlock_acquire(c, "f10s", 30000, 5000, 0, &l), DISTLOCK_OK);
    int fds[64], lports[64];
    int n = sockets_to(port, fds, lports, 64);
    printf("# parent: %d connection(s) to the server before fork()\n", n);
    assert_true(n >= 2);   /* a connection set and the subscriber's */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        child_init_limited();
        distlock_lock *cl = NULL;
        CHILD_CHECK(distlock_acquire(c, "f10s2", 30000, 0, 0, &cl) == DISTLOCK_OK, CH_ACQUIRE);
        int cfds[64], clports[64], leaks = 0;
        int cn = sockets_to(port, cfds, clports, 64);
        for (int i = 0; i < cn; i++)
            for (int j = 0; j < n; j++)
                if (clports[i] == lports[j]) {
                    fprintf(stderr, "child: fd %d (127.0.0.1:%d -> :%d), inherited from the "
                            "parent, is still open\n", cfds[i], clports[i], port);
                    leaks++;
                }
        _exit(leaks ? CH_SOCKET_LEAK : CH_OK);
    }
    int code = child_status(pid, 20000);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);
    if (code != CH_OK) {
        print_error("child: %d (%s)\n", code, code > 0 ? child_step(code) : "crash/timeout");
        fail();
    }
}

/* ---------------------------- the validity in a child forked mid-call */

struct spin {
    distlock_lock *l;
    atomic_int stop, tid;
    atomic_long calls;
};

static void *spinner(void *arg)
{
    struct spin *s = arg;
    atomic_store(&s->tid, (int)syscall(SYS_gettid));
    while (!atomic_load(&s->stop)) {
        (void)distlock_lock_validity_ms(s->l);
        atomic_fetch_add(&s->calls, 1);
    }
    return NULL;
}

struct probe {
    distlock_lock *l;
    atomic_int done;
};

static void *probe_main(void *arg)
{
    struct probe *p = arg;
    (void)distlock_lock_validity_ms(p->l);
    atomic_store(&p->done, 1);
    return NULL;
}

/* A parent thread calls distlock_lock_validity_ms() in a loop; we stop it
 * at a random point (a signal handler holds it) until a probe thread shows
 * it is inside the client's lock (the probe's own call blocks), and fork
 * right then. The child's first call, distlock_lock_validity_ms(), must
 * return: alarm() kills a child stuck for 3 s. */
static void test_fork_validity_in_child_no_deadlock(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "f10v", 60000, 0, 0, &l), DISTLOCK_OK);
    thread_pause_init();
    struct spin s = { .l = l };
    pthread_t ts;
    assert_int_equal(pthread_create(&ts, NULL, spinner, &s), 0);
    assert_true(RH_WAIT_UNTIL(atomic_load(&s.calls) > 1000, 5000));
    int attempts = 0, caught = 0, code = CH_OK, paused_err = 0;
    long long give_up = rh_now_ms() + 15000;
    while (attempts < 5000 && !caught && rh_now_ms() < give_up) {
        attempts++;
        if (thread_pause((pid_t)atomic_load(&s.tid)) != 0) {
            paused_err = 1;
            break;
        }
        struct probe p = { .l = l };
        pthread_t tp;
        assert_int_equal(pthread_create(&tp, NULL, probe_main, &p), 0);
        /* A free lock lets the probe through within microseconds. */
        long long until = rh_now_ms() + 5;
        while (!atomic_load(&p.done) && rh_now_ms() < until) sched_yield();
        if (!atomic_load(&p.done)) {
            /* The probe is blocked: the stopped thread holds the lock. */
            fflush(NULL);
            pid_t pid = fork();
            assert_true(pid >= 0);
            if (pid == 0) {
                child_init_limited();
                alarm(3);
                long v = distlock_lock_validity_ms(l);
                _exit(v >= 0 ? CH_OK : CH_VALIDITY);
            }
            code = child_status(pid, 10000);
            /* Still blocked now: the lock was held across the fork. */
            caught = !atomic_load(&p.done);
        }
        thread_resume(1);
        pthread_join(tp, NULL);
        /* Let it run a random number of calls: the next stop lands
         * anywhere in its loop. */
        long target = atomic_load(&s.calls) + 1 + random() % 64;
        while (atomic_load(&s.calls) < target) sched_yield();
    }
    atomic_store(&s.stop, 1);
    pthread_join(ts, NULL);
    thread_pause_fini();
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);
    assert_false(paused_err);
    if (!caught) {
        /* distlock_lock_validity_ms() never blocked on a stopped thread: a
         * core that reads the validity without that lock cannot deadlock
         * on it. */
        printf("# after %d attempts, never caught a thread inside the lock: nothing to check\n",
               attempts);
        return;
    }
    printf("# fork #%d happened while a parent thread held the client lock\n", attempts);
    if (code == -1 - SIGALRM || code == -1000) {
        print_error("the child's distlock_lock_validity_ms() did not return within 3 s "
                    "(deadlocked on the client mutex a parent thread held at fork time)\n");
        fail();
    }
    if (code != CH_OK) {
        print_error("child: %d (%s)\n", code, code > 0 ? child_step(code) : "crash");
        fail();
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_fork_child_uses_own_connection, heal),
        cmocka_unit_test_setup(test_fork_many_children, heal),
        cmocka_unit_test_setup(test_fork_child_release_token, heal),
        cmocka_unit_test_setup(test_fork_child_frees, heal),
        cmocka_unit_test_setup(test_fork_lost_fd_is_per_process, heal),
        cmocka_unit_test_setup(test_fork_child_closes_subscriber_sockets, heal),
        cmocka_unit_test_setup(test_fork_validity_in_child_no_deadlock, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
