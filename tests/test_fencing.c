/* test_fencing.c -- DISTLOCK_FENCING: fences strictly increase across
 * successive owners, checked by a fenced resource that rejects any fence not
 * above the last one it accepted, with owners in several processes, on one
 * node and on five nodes with one killed and restarted. */
#include "test_common.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 5
DEFINE_GROUP(N)

static void test_fence_basic(void **state)
{
    rh_cluster *rc = *state;
    char buf[256];
    distlock_client *c = new_client(rh_uris_mask(rc, 1, buf, sizeof buf));
    distlock_lock *l = NULL;
    int64_t last = -1;
    for (int i = 0; i < 50; i++) {
        assert_rc(distlock_acquire(c, "fb", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
        int64_t f = distlock_lock_fence(l);
        if (f <= last) {
            print_error("owner %d got fence %lld after %lld\n", i, (long long)f, (long long)last);
            fail();
        }
        last = f;
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    assert_true(last >= 1);
    /* Without the flag: -1. */
    assert_rc(distlock_acquire(c, "fb", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_int_equal(distlock_lock_fence(l), -1);
    distlock_lock_free(l);
    /* An owner that lost the key by expiry, then a new owner: still higher. */
    assert_rc(distlock_acquire(c, "fb", 100, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
    int64_t f1 = distlock_lock_fence(l);
    assert_true(f1 > last);
    assert_true(RH_WAIT_UNTIL(rh_get(rc, 0, 0, "fb", NULL, 0) == 0, 5000));
    distlock_lock *l2 = NULL;
    assert_rc(distlock_acquire(c, "fb", 30000, 0, DISTLOCK_FENCING, &l2), DISTLOCK_OK);
    assert_true(distlock_lock_fence(l2) > f1);
    /* The lock key itself stays a plain token string. */
    assert_int_equal(rh_get(rc, 0, 0, "fb", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(l2));
    distlock_lock_free(l);
    distlock_lock_free(l2);
    distlock_client_free(c);
}

/* The fenced resource, in shared memory: accepts a write only with a fence
 * above the last accepted one. */
struct resource {
    pthread_mutex_t mu;
    int64_t last_fence;
    long accepted, rejected, changes, overlaps, errors;
    int inside;
    int64_t bad_fence, bad_last;
};

static struct resource *res_new(void)
{
    struct resource *r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                              -1, 0);
    if (r == MAP_FAILED) return NULL;
    memset(r, 0, sizeof *r);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&r->mu, &a);
    pthread_mutexattr_destroy(&a);
    r->last_fence = -1;
    return r;
}

static long res_changes(struct resource *r)
{
    pthread_mutex_lock(&r->mu);
    long v = r->changes;
    pthread_mutex_unlock(&r->mu);
    return v;
}

static void owner_loop(struct resource *r, const char *uris, long target)
{
    distlock_client *c = NULL;
    if (distlock_client_new(uris, &c) != DISTLOCK_OK) _exit(10);
    distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 300);
    distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 300);
    long long deadline = rh_now_ms() + 120000;
    while (res_changes(r) < target && rh_now_ms() < deadline) {
        distlock_lock *l = NULL;
        int rc = distlock_acquire(c, "fence", 5000, 500, DISTLOCK_FENCING, &l);
        if (rc == DISTLOCK_NOTACQUIRED || rc == DISTLOCK_ENOQUORUM || rc == DISTLOCK_ETIMEDOUT)
            continue;   /* contention, or a node going away under us */
        if (rc != DISTLOCK_OK) {
            pthread_mutex_lock(&r->mu);
            r->errors++;
            pthread_mutex_unlock(&r->mu);
            continue;
        }
        int64_t f = distlock_lock_fence(l);
        pthread_mutex_lock(&r->mu);
        if (r->inside++) r->overlaps++;
        if (f > r->last_fence) {
            r->last_fence = f;
            r->accepted++;
        } else {
            if (!r->rejected) { r->bad_fence = f; r->bad_last = r->last_fence; }
            r->rejected++;
        }
        r->changes++;
        r->inside--;
        pthread_mutex_unlock(&r->mu);
        distlock_release(l);
        distlock_lock_free(l);
    }
    distlock_client_free(c);
    _exit(0);
}

/* kill_at / restart_at: owner-change counts at which node 1 is killed and
 * brought back (0: never). */
static void run_owners(rh_cluster *rc, const char *uris, long target, long kill_at, long restart_at)
{
    enum { P = 4 };
    struct resource *r = res_new();
    assert_non_null(r);
    pid_t kids[P];
    fflush(NULL);
    for (int k = 0; k < P; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0) {
            signal(SIGSEGV, SIG_DFL);
            signal(SIGABRT, SIG_DFL);
            owner_loop(r, uris, target);
        }
    }
    int killed = 0, restarted = 0;
    long long deadline = rh_now_ms() + 150000;
    int alive = P, failed = 0;
    while (alive > 0 && rh_now_ms() < deadline) {
        long ch = res_changes(r);
        if (kill_at && !killed && ch >= kill_at) {
            assert_int_equal(rh_kill(rc, 1), 0);
            killed = 1;
            printf("# node 1 killed after %ld owner changes\n", ch);
        }
        if (restart_at && killed && !restarted && ch >= restart_at) {
            assert_int_equal(rh_restart(rc, 1), 0);
            restarted = 1;
            printf("# node 1 restarted (empty) after %ld owner changes\n", ch);
        }
        for (int k = 0; k < P; k++) {
            int st;
            if (kids[k] > 0 && waitpid(kids[k], &st, WNOHANG) == kids[k]) {
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed++;
                kids[k] = 0;
                alive--;
            }
        }
        rh_sleep_ms(2);
    }
    for (int k = 0; k < P; k++)
        if (kids[k] > 0) { kill(kids[k], SIGKILL); waitpid(kids[k], NULL, 0); failed++; }
    printf("# %ld owner changes: %ld fences accepted, %ld rejected, last fence %lld, "
           "%ld overlaps, %ld errors\n", r->changes, r->accepted, r->rejected,
           (long long)r->last_fence, r->overlaps, r->errors);
    assert_int_equal(failed, 0);
    assert_true(r->changes >= target);
    if (r->rejected) {
        print_error("fence %lld was not above the last accepted %lld\n",
                    (long long)r->bad_fence, (long long)r->bad_last);
        fail();
    }
    assert_int_equal(r->overlaps, 0);
    assert_int_equal(r->errors, 0);
    if (kill_at) assert_true(killed);
    if (restart_at) assert_true(restarted);
    munmap(r, sizeof *r);
}

static void test_fence_processes_one_node(void **state)
{
    rh_cluster *rc = *state;
    char buf[256];
    run_owners(rc, rh_uris_mask(rc, 1, buf, sizeof buf), 1000, 0, 0);
}

static void test_fence_processes_five_nodes_restart(void **state)
{
    rh_cluster *rc = *state;
    run_owners(rc, rh_uris(rc), 1000, 300, 600);
}

/* The hard case for a quorum max: the nodes that hold the highest counter
 * die and come back empty one after another, each time with new owners in
 * between. Fences must still increase. */
static void test_fence_rolling_restarts(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 300), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 300), DISTLOCK_OK);
    int64_t last = -1;
    for (int round = 0; round < 10; round++) {
        for (int j = 0; j < 3; j++) {
            distlock_lock *l = NULL;
            int r = DISTLOCK_NOTACQUIRED;
            for (int tries = 0; tries < 20 && r != DISTLOCK_OK; tries++)
                r = distlock_acquire(c, "roll", 5000, 0, DISTLOCK_FENCING, &l);
            assert_rc(r, DISTLOCK_OK);
            int64_t f = distlock_lock_fence(l);
            if (f <= last) {
                print_error("round %d: fence %lld after %lld\n", round, (long long)f, (long long)last);
                fail();
            }
            last = f;
            assert_rc(distlock_release(l), DISTLOCK_OK);
            distlock_lock_free(l);
        }
        /* Two nodes (a minority) lose everything. */
        assert_int_equal(rh_restart(rc, round % N), 0);
        assert_int_equal(rh_restart(rc, (round + 2) % N), 0);
    }
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_fence_basic, heal),
        cmocka_unit_test_setup(test_fence_processes_one_node, heal),
        cmocka_unit_test_setup(test_fence_processes_five_nodes_restart, heal),
        cmocka_unit_test_setup(test_fence_rolling_restarts, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
