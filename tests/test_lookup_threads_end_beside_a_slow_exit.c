/* test_lookup_threads_end_beside_a_slow_exit.c -- the resolver's helper
 * threads (a host name resolved off the calling thread) are joined, so
 * that a fork() never catches one half-exited. One helper whose exit is
 * slow (a thread-local destructor: OpenSSL's per-thread state, a
 * sanitizer's allocator cache, or only a thread the scheduler does not run
 * for a while) must not hold up the end of the helpers that finish after
 * it: they end beside it, and the number of the library's threads stays
 * that of the lookups under way.
 *
 * The test's getaddrinfo (exported, as slowdns does) runs on the helper:
 * it gives the first helper, once armed, a thread-local destructor that
 * waits until the test lets it end. Meanwhile other clients resolve the
 * same name and lock; their helpers must be gone (/proc/self/task) while
 * the first one's exit still waits. */
#include "test_common.h"
#include "test_thread_control.h"

#include <dlfcn.h>
#include <netdb.h>
#include <unistd.h>

static rh_cluster *rc;

static pthread_key_t exit_key;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int armed;     /* the next helper's exit waits */
static int held;      /* a helper's exit is waiting */
static int let_go;    /* the test lets it end */

/* A helper's exit, armed: waits until let go (at most 60 s, so that a
 * failed test still ends). */
static void exit_held(void *unused)
{
    (void)unused;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 60;
    pthread_mutex_lock(&mu);
    held = 1;
    pthread_cond_broadcast(&cv);
    while (!let_go)
        if (pthread_cond_timedwait(&cv, &mu, &until) != 0)
            break;
    held = 0;
    pthread_mutex_unlock(&mu);
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    static int (*real)(const char *, const char *, const struct addrinfo *, struct addrinfo **);
    if (real == NULL)
        real = (int (*)(const char *, const char *, const struct addrinfo *, struct addrinfo **))dlsym(
            RTLD_NEXT, "getaddrinfo");
    char name[16] = "";
    if (pthread_getname_np(pthread_self(), name, sizeof name) == 0 && strcmp(name, "distlock-lookup") == 0) {
        pthread_mutex_lock(&mu);
        if (armed) {
            armed = 0;
            pthread_setspecific(exit_key, &armed);
        }
        pthread_mutex_unlock(&mu);
    }
    return real(node, service, hints, res);
}

static int exit_is_held(void)
{
    pthread_mutex_lock(&mu);
    int h = held;
    pthread_mutex_unlock(&mu);
    return h;
}

/* The library's lookup threads now alive. */
static int lookup_threads(void)
{
    pid_t tids[512];
    int n = list_tids(tids, 512), lookups = 0;
    for (int k = 0; k < n; k++) {
        char path[64], comm[32];
        snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tids[k]);
        lookups += read_small(path, comm, sizeof comm) > 0 &&
                   strncmp(comm, "distlock-lookup", 15) == 0;
    }
    return lookups;
}

/* A client of the server by its host name locks and is freed: one lookup,
 * on a helper that finishes. */
static void lock_by_name(const char *key)
{
    char uri[64];
    snprintf(uri, sizeof uri, "redis://localhost:%d", rc->node[0].port);
    distlock_client *c = new_client(uri);
    lock_and_release(c, key);
    distlock_client_free(c);
}

#define LATER 8  /* lookups that finish while the first helper's exit waits */

static void test_helpers_end_while_an_earlier_one_is_still_exiting(void **state)
{
    (void)state;
    pthread_mutex_lock(&mu);
    armed = 1;
    pthread_mutex_unlock(&mu);
    lock_by_name("ltse-0");
    assert_true(RH_WAIT_UNTIL(exit_is_held(), 10000));

    for (int k = 1; k <= LATER; k++) {
        char key[16];
        snprintf(key, sizeof key, "ltse-%d", k);
        lock_by_name(key);
    }
    /* The later helpers have done their work (each call had its address):
     * only the held one may still be there. */
    int ended = RH_WAIT_UNTIL(lookup_threads() <= 1, 10000);
    int alive = lookup_threads();
    pthread_mutex_lock(&mu);
    int still_held = held;
    let_go = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    printf("%d lookups finished while the first helper's exit waited (%s): %d lookup thread(s) alive\n",
           LATER, still_held ? "still waiting" : "no longer waiting", alive);
    assert_true(still_held);
    assert_true(ended);
    assert_true(RH_WAIT_UNTIL(lookup_threads() == 0, 10000));
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (pthread_key_create(&exit_key, exit_held) != 0)
        return 1;
    rc = rh_start(1);
    if (rc == NULL)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_helpers_end_while_an_earlier_one_is_still_exiting),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    rh_stop_all(rc);
    return r;
}
