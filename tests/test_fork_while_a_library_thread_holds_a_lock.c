/* test_fork_while_a_library_thread_holds_a_lock.c -- fork() while a thread
 * of the library holds a lock: inside OpenSSL, in the middle of a TLS
 * handshake to a sentinel (the +switch-master subscriber, and a lookup of
 * the master: another thread's call), or exiting (a lookup's helper, after
 * its work, in a thread-local destructor). The child must not inherit that
 * lock held, or its first OpenSSL call (freeing the parent's sessions, its
 * own handshake) waits forever for a thread it does not have.
 *
 * The lock is one of OpenSSL's allocator, which this test supplies
 * (CRYPTO_set_mem_functions): a lock held across each allocation, as
 * ASan's allocator (GCC 12) holds its size-class locks and does not take
 * them around fork(). One allocation of the handshake state machine on the
 * thread of the kind a case targets is slow (HOLD_MS, holding the lock);
 * the main thread forks while it is. The lock stands for one size class:
 * the targeted thread and the main thread (the child) take it, other
 * threads (the test's own, the subscriber while a lookup is targeted)
 * allocate beside it.
 *
 * Not under valgrind: the child inherits the subscriber thread's OpenSSL
 * per-thread state, as in test_sentinel_tls. */
#include "test_common.h"
#include "harness/faultproxy.h"
#include "harness/sentinel_harness.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* How long the subscriber's one slow allocation lasts: past the fork of a
 * main thread that forks as soon as it sees the allocation begun. */
#define HOLD_MS 2000

static char certs[64];
static rh_sentinels *g;
static fp_proxy *fp;  /* listener k: sentinel k */

/* ------------------------------------------------------------ the allocator */

static pthread_t main_thread;
static pthread_mutex_t heap_mu = PTHREAD_MUTEX_INITIALIZER;  /* the allocator's lock */

/* The threads a case targets: the library's +switch-master subscriber,
 * or the resolver's helpers (named "distlock-lookup"), which run the
 * lookups of a Sentinel node's master. */
enum { SUBSCRIBER = 1, LOOKUP = 2 };

/* The slow allocation's state, under mu. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int target;    /* SUBSCRIBER or LOOKUP */
static int armed;     /* the next handshake allocation of a targeted thread is slow */
static int inside;    /* the slow allocation is under way, heap_mu held */
static int released;  /* the parent forked: the slow allocation may end */

static long long ms_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (now.tv_sec - t0->tv_sec) * 1000LL + (now.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Until the parent has forked, at most HOLD_MS; mu held. */
static void hold_until_released(void)
{
    struct timespec t0, until;
    clock_gettime(CLOCK_REALTIME, &t0);
    until = t0;
    until.tv_sec += HOLD_MS / 1000;
    until.tv_nsec += (HOLD_MS % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (!released && ms_since(&t0) < HOLD_MS)
        pthread_cond_timedwait(&cv, &mu, &until);
}

/* This thread's kind: 0 for the main thread, LOOKUP for the resolver's
 * helpers, else SUBSCRIBER. */
static int thread_kind(void)
{
    static __thread int kind = -1;
    if (kind < 0) {
        char name[16] = "";
        if (pthread_equal(pthread_self(), main_thread))
            kind = 0;
        else if (pthread_getname_np(pthread_self(), name, sizeof name) == 0 &&
                 strcmp(name, "distlock-lookup") == 0)
            kind = LOOKUP;
        else
            kind = SUBSCRIBER;
    }
    return kind;
}

/* The exit of a helper: a thread-local destructor of the test's, run after
 * the library's code has returned, holds the allocator's lock as a
 * sanitizer's (draining the thread's cache) or OpenSSL's (its per-thread
 * state) do there. Armed by exit_arm(); one helper's exit, the first to
 * end, holds it. */
static pthread_key_t exit_key;
static int exit_armed;

static void exit_slow(void *unused)
{
    (void)unused;
    if (!__atomic_exchange_n(&exit_armed, 0, __ATOMIC_SEQ_CST))
        return;
    pthread_mutex_lock(&heap_mu);
    pthread_mutex_lock(&mu);
    __atomic_store_n(&inside, 1, __ATOMIC_SEQ_CST);
    hold_until_released();
    __atomic_store_n(&inside, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&mu);
    pthread_mutex_unlock(&heap_mu);
}

/* A helper that allocates through OpenSSL gets the destructor. */
static void exit_watch(void)
{
    static __thread int watched;
    if (!watched && thread_kind() == LOOKUP) {
        watched = 1;
        pthread_setspecific(exit_key, &watched);
    }
}

/* Whether this thread allocates under heap_mu: the targeted threads, and
 * the main thread of a child (the one that must not find it held). */
static pid_t parent;

static int locks_heap(void)
{
    int k = thread_kind();
    return k == 0 ? getpid() != parent : k == __atomic_load_n(&target, __ATOMIC_SEQ_CST);
}

/* heap_mu held. The first allocation of a TLS handshake step of a
 * targeted thread, once armed, lasts HOLD_MS (heap_mu held), or until the
 * parent has forked. */
static void maybe_slow(const char *file)
{
    if (thread_kind() == 0 || file == NULL || strstr(file, "ssl/statem/") == NULL)
        return;
    pthread_mutex_lock(&mu);
    if (armed && thread_kind() == target) {
        armed = 0;
        __atomic_store_n(&inside, 1, __ATOMIC_SEQ_CST);
        hold_until_released();
        __atomic_store_n(&inside, 0, __ATOMIC_SEQ_CST);
    }
    pthread_mutex_unlock(&mu);
}

static void *heap_malloc(size_t n, const char *file, int line)
{
    (void)line;
    exit_watch();
    int locked = locks_heap();
    if (locked)
        pthread_mutex_lock(&heap_mu);
    maybe_slow(file);
    void *p = malloc(n);
    if (locked)
        pthread_mutex_unlock(&heap_mu);
    return p;
}

static void *heap_realloc(void *p, size_t n, const char *file, int line)
{
    (void)line;
    int locked = locks_heap();
    if (locked)
        pthread_mutex_lock(&heap_mu);
    maybe_slow(file);
    void *q = realloc(p, n);
    if (locked)
        pthread_mutex_unlock(&heap_mu);
    return q;
}

static void heap_free(void *p, const char *file, int line)
{
    (void)file;
    (void)line;
    int locked = locks_heap();
    if (locked)
        pthread_mutex_lock(&heap_mu);
    free(p);
    if (locked)
        pthread_mutex_unlock(&heap_mu);
}

/* ------------------------------------------------------------ the group */

static int group_setup(void **state)
{
    (void)state;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (rh_make_certs(certs, sizeof certs) != 0)
        return -1;
    rh_sentinels_opts o = { 0 };
    o.tls_dir = certs;
    g = rh_sentinels_start(&o);
    if (g == NULL)
        return -1;
    fp = fp_start(g->sentinel_port, 3);
    return fp ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    fp_stop(fp);
    rh_sentinels_stop(g);
    rh_remove_certs(certs);
    return 0;
}

/* Under valgrind or sanitizers (DISTLOCK_TEST_SLOW) handshakes are slow. */
static long budget(long ms)
{
    return getenv("DISTLOCK_TEST_SLOW") ? ms * 10 : ms;
}

static distlock_client *tls_client(const char *uri)
{
    char f[128];
    distlock_client *c = new_client(uri);
    /* Longer than the slow allocation: the call whose lookup it holds up
     * (HOLD_MS inside a handshake) must still connect. */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, budget(HOLD_MS + 2000)),
              DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, budget(HOLD_MS + 2000)),
              DISTLOCK_OK);
    snprintf(f, sizeof f, "%s/ca.crt", certs);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_TLS_CA_FILE, f), DISTLOCK_OK);
    snprintf(f, sizeof f, "%s/client.crt", certs);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_TLS_CERT, f), DISTLOCK_OK);
    snprintf(f, sizeof f, "%s/client.key", certs);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_TLS_KEY, f), DISTLOCK_OK);
    return c;
}

/* Exit code of pid, waiting at most timeout_ms (then killed): -1 - signal
 * number if it died of a signal, -1000 if it did not end in time. */
static int child_status(pid_t pid, long timeout_ms)
{
    long long end = rh_now_ms() + timeout_ms;
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            break;
        if (rh_now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1000;
        }
        rh_sleep_ms(5);
    }
    return WIFSIGNALED(st) ? -1 - WTERMSIG(st) : WEXITSTATUS(st);
}

/* The main thread forks while a targeted thread is inside its slow
 * allocation (`who` names it). The child writes what the fork caught (the
 * allocation under way), then acquires and releases through c: its first
 * OpenSSL call (freeing the parent's sessions, or its own handshake) takes
 * the allocator's lock. It must not have caught the allocation, and must
 * lock and exit within its budget. */
static void fork_while_inside(distlock_client *c, const char *who)
{
    assert_true(RH_WAIT_UNTIL(__atomic_load_n(&inside, __ATOMIC_SEQ_CST), budget(3000)));
    int report[2];
    assert_int_equal(pipe(report), 0);
    long long t0 = rh_now_ms();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char caught = (char)__atomic_load_n(&inside, __ATOMIC_SEQ_CST);
        ssize_t w = write(report[1], &caught, 1);
        distlock_lock *l = NULL;
        int ok = w == 1 && distlock_acquire(c, "fth-child", 10000, 0, 0, &l) == DISTLOCK_OK &&
                 distlock_release(l) == DISTLOCK_OK;
        distlock_lock_free(l);
        distlock_client_free(c);
        _exit(ok ? 0 : 1);
    }
    long long forked = rh_now_ms() - t0;
    pthread_mutex_lock(&mu);
    released = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    close(report[1]);
    char caught = -1;
    assert_int_equal(read(report[0], &caught, 1), 1);
    close(report[0]);
    int code = child_status(pid, budget(3000));
    printf("fork returned after %lld ms; the %s was %s its slow step (the lock held) at the fork; "
           "the child %s\n", forked, who, caught ? "inside" : "out of",
           code == 0 ? "locked and exited" : code == -1000 ? "hung (killed)" : "failed");
    assert_int_equal(caught, 0);
    assert_int_equal(code, 0);
}

/* The slow allocation of the next case's targeted threads. */
static void arm(int kind)
{
    pthread_mutex_lock(&mu);
    __atomic_store_n(&target, kind, __ATOMIC_SEQ_CST);
    armed = 1;
    released = 0;
    pthread_mutex_unlock(&mu);
}

/* The slow exit of the next helper to end (exit_slow), no slow allocation. */
static void arm_exit(void)
{
    pthread_mutex_lock(&mu);
    __atomic_store_n(&target, 0, __ATOMIC_SEQ_CST);
    armed = 0;
    released = 0;
    __atomic_store_n(&exit_armed, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&mu);
}

/* The first lock starts the subscriber; its connections reset, its next
 * attempt's handshake is inside OpenSSL when the main thread forks (no
 * call runs meanwhile, so no lookup): the child (which frees the parent's
 * sessions, then locks over TLS of its own) finishes, and so does the
 * parent's next lock. */
static void test_fork_while_subscriber_in_handshake(void **state)
{
    (void)state;
    /* the sentinels through the proxy, the master (which they name) direct */
    char uri[512];
    const char *name = strrchr(g->uri, '/');
    assert_non_null(name);
    snprintf(uri, sizeof uri, "rediss-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d%s",
             fp_port(fp, 0), fp_port(fp, 1), fp_port(fp, 2), name);
    distlock_client *c = tls_client(uri);
    lock_and_release(c, "fth-1");

    arm(SUBSCRIBER);
    assert_int_equal(fp_cmd(fp, NULL, 0, "reset *"), 0);
    fork_while_inside(c, "subscriber");

    lock_and_release(c, "fth-2");
    distlock_client_free(c);
}

struct caller {
    distlock_client *c;
    int rc;
};

static void *caller_main(void *arg)
{
    struct caller *a = arg;
    distlock_lock *l = NULL;
    a->rc = distlock_acquire(a->c, "fth-3", 10000, 0, 0, &l);
    if (l) {
        if (distlock_release(l) != DISTLOCK_OK)
            a->rc = -100;
        distlock_lock_free(l);
    }
    return NULL;
}

/* Another thread's first call looks the master up; that lookup's
 * handshake to a sentinel is inside OpenSSL when the main thread forks:
 * the child locks through a client of its own (which locked once before
 * the fork: the child starts no thread, which ThreadSanitizer does not
 * support after a fork, and its first call frees that client's sessions,
 * then connects to the master it knows), and the other thread's call
 * succeeds. */
static void test_fork_while_lookup_in_handshake(void **state)
{
    (void)state;
    distlock_client *mine = tls_client(g->uri), *childs = tls_client(g->uri);
    lock_and_release(childs, "fth-4");
    arm(LOOKUP);
    struct caller a = { mine, -100 };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, caller_main, &a), 0);
    fork_while_inside(childs, "lookup");
    pthread_join(th, NULL);
    assert_rc(a.rc, DISTLOCK_OK);
    distlock_client_free(childs);
    distlock_client_free(mine);
}

/* A lookup's helper that ends: the call has its answer and goes on, and
 * the helper's thread exits after the library's code returned, holding a
 * lock there (exit_slow) when the main thread forks. fork() waits for that
 * exit (the gate joins the helpers that left it), so the child does not
 * start with the lock held: it locks through a client of its own, as
 * above. */
static void test_fork_while_lookup_thread_exits(void **state)
{
    (void)state;
    distlock_client *mine = tls_client(g->uri), *childs = tls_client(g->uri);
    lock_and_release(childs, "fth-5");
    arm_exit();
    lock_and_release(mine, "fth-6");
    fork_while_inside(childs, "lookup helper's exit");
    distlock_client_free(childs);
    distlock_client_free(mine);
}

int main(void)
{
    /* before OpenSSL allocates anything */
    main_thread = pthread_self();
    parent = getpid();
    if (pthread_key_create(&exit_key, exit_slow) != 0)
        return 1;
    if (CRYPTO_set_mem_functions(heap_malloc, heap_realloc, heap_free) != 1) {
        fprintf(stderr, "CRYPTO_set_mem_functions refused: OpenSSL allocated already\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fork_while_subscriber_in_handshake),
        cmocka_unit_test(test_fork_while_lookup_in_handshake),
        cmocka_unit_test(test_fork_while_lookup_thread_exits),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
