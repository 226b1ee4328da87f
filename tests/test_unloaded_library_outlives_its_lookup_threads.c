/* test_unloaded_library_outlives_its_lookup_threads.c -- a program that
 * unloads libdistlock (dlclose: PHP unloads its extensions at shutdown, a
 * plugin host drops a plugin) while one of the library's detached threads
 * still runs (a Sentinel lookup, a host name being resolved: a call
 * cancelled or a client freed does not wait for them) is not crashed when
 * that thread goes on: the library stays mapped (linked -z nodelete).
 *
 * The test opens the library itself (it does not link it, which would keep
 * it loaded), in a child process whose death by a signal is the failure.
 * The only sentinel's name takes 3 s to resolve (slowdns): the call gives
 * up at its deadline, the client is freed and the library closed while the
 * resolving thread still waits; the child then waits (observed) for its
 * own threads to end and exits 0. */
#include <dlfcn.h>
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "distlock.h"
#include "redis_harness.h"  /* rh_now_ms (the harness does not link the library) */
#include "slowdns.h"

#define SLOW_SENTINEL "slow-sentinel.test"

/* The functions the test calls, looked up in the opened library. */
struct lib {
    void *h;
    int (*client_new)(const char *, distlock_client **);
    int (*client_set)(distlock_client *, distlock_option, long);
    int (*acquire)(distlock_client *, const char *, long, long, unsigned, distlock_lock **);
    void (*client_free)(distlock_client *);
};

/* Threads of this process (/proc/self/task), -1 on an error. */
static int threads_running(void)
{
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}


/* The child: exit code 0 when all went as described above; other codes
 * say which step failed; a signal is the crash. */
static int child(void)
{
    int base = threads_running();  /* 1, or more under a sanitizer */
    struct lib lib = { 0 };
    lib.h = dlopen(DISTLOCK_SHARED_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (lib.h == NULL)
        return 10;
    *(void **)&lib.client_new = dlsym(lib.h, "distlock_client_new");
    *(void **)&lib.client_set = dlsym(lib.h, "distlock_client_set");
    *(void **)&lib.acquire = dlsym(lib.h, "distlock_acquire");
    *(void **)&lib.client_free = dlsym(lib.h, "distlock_client_free");
    if (!lib.client_new || !lib.client_set || !lib.acquire || !lib.client_free)
        return 11;
    /* the sentinel's name takes 3 s to (fail to) resolve; the call gives
     * up after its 300 ms connect budget and the lookup's backstop */
    if (slowdns_set(SLOW_SENTINEL "=3000=fail") != 0)
        return 12;
    distlock_client *c = NULL;
    distlock_lock *l = NULL;
    if (lib.client_new("redis-sentinel://" SLOW_SENTINEL ":26379/mymaster", &c) != DISTLOCK_OK ||
        lib.client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 300) != DISTLOCK_OK)
        return 13;
    long long t0 = rh_now_ms();
    int rc = lib.acquire(c, "unload:key", 10000, 0, 0, &l);
    long long took = rh_now_ms() - t0;
    if (rc == DISTLOCK_OK || slowdns_calls(SLOW_SENTINEL) < 1)
        return 14;
    lib.client_free(c);
    if (dlclose(lib.h) != 0)
        return 15;
    int running = threads_running();
    void *again = dlopen(DISTLOCK_SHARED_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
    printf("# the call failed after %lld ms (rc %d); after dlclose: %d thread(s) in the "
           "process, the library %s\n", took, rc, running, again ? "still mapped" : "unmapped");
    fflush(stdout);
    if (again)
        dlclose(again);
    if (running <= base)
        return 16;  /* no lookup thread left: the test would show nothing */
    /* the resolving thread returns from the slow lookup into the library */
    long long until = rh_now_ms() + 20000;
    while (threads_running() > base && rh_now_ms() < until)
        (void)poll(NULL, 0, 1);
    return threads_running() <= base ? 0 : 17;
}

static void test_library_closed_while_a_sentinel_lookup_runs(void **state)
{
    (void)state;
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* a crash is the child's death by its signal, not cmocka's report */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        signal(SIGILL, SIG_DFL);
        _exit(child());
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (WIFSIGNALED(st))
        fail_msg("the process died of signal %d (%s) once the lookup thread went on in the "
                 "closed library", WTERMSIG(st), strsignal(WTERMSIG(st)));
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) != 0)
        fail_msg("the child stopped at step %d (see child() for its codes)", WEXITSTATUS(st));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_library_closed_while_a_sentinel_lookup_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
