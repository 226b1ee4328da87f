/* test_fork.c -- a client shared across fork(): the child opens its own
 * connections and cannot release the parent's locks through inherited handles. */
#include "test_common.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

DEFINE_GROUP(1)

/* Child exit codes name the step that failed (0 = all good). */
enum { CH_OK = 0, CH_ACQUIRE = 10, CH_KEY, CH_RELEASE, CH_NEWCONN, CH_PARENT_REL,
       CH_PARENT_EXT, CH_INSPECT, CH_VALIDITY, CH_TOKEN_REL, CH_FREE_LOCK, CH_FREE_CLIENT };

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
    default: return "unknown";
    }
}

/* Wait for pid at most timeout_ms (kill it after); returns its exit code or -1. */
static int wait_child(pid_t pid, long timeout_ms)
{
    long long end = rh_now_ms() + timeout_ms;
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (rh_now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            print_error("child %d did not finish within %ld ms\n", (int)pid, timeout_ms);
            return -1;
        }
        rh_sleep_ms(5);
    }
    if (WIFSIGNALED(st)) {
        print_error("child killed by signal %d\n", WTERMSIG(st));
        return -1;
    }
    return WEXITSTATUS(st);
}

/* In a child, a crash must kill it (the parent sees the signal) instead of
 * being caught by cmocka's handlers, which would run the rest of the suite
 * in the child. */
static void child_init(void)
{
    const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
}

#define CHILD_CHECK(cond, code) do { if (!(cond)) _exit(code); } while (0)

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_fork_child_uses_own_connection, heal),
        cmocka_unit_test_setup(test_fork_many_children, heal),
        cmocka_unit_test_setup(test_fork_child_release_token, heal),
        cmocka_unit_test_setup(test_fork_child_frees, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
