/* test_threads.c -- one client shared by 8 threads; the distributed lock is
 * the only thing protecting a plain read-modify-write counter per key.
 * Also the ThreadSanitizer target.
 *
 * distlock_client_set_str(c, DISTLOCK_OPT_PASSWORD, ...), documented
 * thread-safe, while other threads make fresh connections (one node): a
 * handshake on another thread must never read a password being freed (a
 * use-after-free under ASan, a data race under TSan, now and then an AUTH
 * with garbage, WRONGPASS, in a plain build); every operation succeeds.
 * And integer options (timeouts, drift, retry steps) set while other
 * threads acquire and wait, with no data race. */
#include "test_common.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#define N 3
DEFINE_GROUP(N)
DEFINE_GROUP_SETUP(1)

enum { THREADS = 8, KEYS = 3 };

struct shared {
    distlock_client *c;
    int iterations;
    /* The counter is read and written with separate relaxed operations: an
     * increment that is not atomic, so two holders at once lose updates, yet
     * TSan reports only the library's own races, not this deliberate one. */
    atomic_long counter[KEYS];
    atomic_int inside[KEYS];
    atomic_long acquired[KEYS];
    atomic_int overlaps, errors, bad_release;
    atomic_int first_error;
};

static void *worker(void *arg_)
{
    struct shared *s = arg_;
    static atomic_int next_id;
    int id = atomic_fetch_add(&next_id, 1);
    char key[16];
    for (int i = 0; i < s->iterations; i++) {
        int k = (id + i) % KEYS;
        snprintf(key, sizeof key, "cnt:%d", k);
        distlock_lock *l = NULL;
        int r = distlock_acquire(s->c, key, 10000, 0, 0, &l);
        if (r == DISTLOCK_NOTACQUIRED) {
            if (l) atomic_fetch_add(&s->errors, 1);
            sched_yield();
            continue;
        }
        if (r != DISTLOCK_OK || !l) {
            atomic_fetch_add(&s->errors, 1);
            atomic_store(&s->first_error, r);
            continue;
        }
        if (atomic_fetch_add(&s->inside[k], 1) != 0) atomic_fetch_add(&s->overlaps, 1);
        long v = atomic_load_explicit(&s->counter[k], memory_order_relaxed);
        sched_yield();
        atomic_store_explicit(&s->counter[k], v + 1, memory_order_relaxed);
        atomic_fetch_sub(&s->inside[k], 1);
        atomic_fetch_add(&s->acquired[k], 1);
        if (distlock_release(l) != DISTLOCK_OK) atomic_fetch_add(&s->bad_release, 1);
        distlock_lock_free(l);
    }
    return NULL;
}

static void run_threads(rh_cluster *rc, const char *uris)
{
    static struct shared s;
    memset(&s, 0, sizeof s);
    s.c = new_client(uris);
    const char *it = getenv("DISTLOCK_TEST_ITERATIONS");
    s.iterations = it ? atoi(it) : 150;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, worker, &s), 0);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);

    long total = 0;
    for (int k = 0; k < KEYS; k++) {
        long cnt = atomic_load(&s.counter[k]), acq = atomic_load(&s.acquired[k]);
        printf("# key cnt:%d: %ld acquisitions, counter %ld\n", k, acq, cnt);
        assert_int_equal(cnt, acq);
        assert_true(acq > 0);
        total += acq;
    }
    printf("# %d threads x %d attempts: %ld acquisitions, %d overlaps, %d errors\n",
           THREADS, s.iterations, total, atomic_load(&s.overlaps), atomic_load(&s.errors));
    if (atomic_load(&s.errors)) {
        print_error("%d acquire errors, e.g. %d (%s)\n", atomic_load(&s.errors),
                    atomic_load(&s.first_error), distlock_strerror(atomic_load(&s.first_error)));
        fail();
    }
    assert_int_equal(atomic_load(&s.overlaps), 0);
    assert_int_equal(atomic_load(&s.bad_release), 0);
    /* Every release returned OK: no node keeps any of the keys (their TTL is
     * 10 s; assert_holding gives requests still in flight 3 s), and a
     * newcomer gets each key at once. */
    distlock_client *c2 = new_client(uris);
    for (int k = 0; k < KEYS; k++) {
        char key[16];
        snprintf(key, sizeof key, "cnt:%d", k);
        for (int n = 0; n < rc->n; n++) {
            char buf[64];
            if (rh_get(rc, n, 0, key, buf, sizeof buf) == 1)
                printf("# node %d holds %s = %s (pttl %lld) right after the last release\n", n,
                       key, buf, rh_pttl(rc, n, 0, key));
        }
        assert_holding(rc, key, NULL, 0);
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(c2, key, 10000, 0, 0, &l), DISTLOCK_OK);
        assert_true(rh_count_holding(rc, key, distlock_lock_token(l)) >= distlock_client_quorum(c2));
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    distlock_client_free(c2);
    distlock_client_free(s.c);
}

static void test_threads_one_node(void **state)
{
    rh_cluster *rc = *state;
    char buf[256];
    run_threads(rc, rh_uris_mask(rc, 1, buf, sizeof buf));
}

static void test_threads_three_nodes(void **state)
{
    rh_cluster *rc = *state;
    run_threads(rc, rh_uris(rc));
}

/* Threads creating and freeing their own clients concurrently, and using the
 * per-thread error slot: each thread sees its own last error. */
static void *own_client(void *arg)
{
    const char *uris = arg;
    for (int i = 0; i < 20; i++) {
        distlock_client *c = NULL;
        if (distlock_client_new(uris, &c) != DISTLOCK_OK) return (void *)1;
        distlock_lock *l = NULL;
        if (distlock_acquire(c, "", 1000, 0, 0, &l) != DISTLOCK_EINVAL) return (void *)2;
        if (distlock_last_error()[0] == '\0') return (void *)3;
        int r = distlock_acquire(c, "own", 10000, 0, 0, &l);
        if (r == DISTLOCK_OK) {
            if (distlock_release(l) != DISTLOCK_OK) return (void *)4;
            distlock_lock_free(l);
        } else if (r != DISTLOCK_NOTACQUIRED) {
            return (void *)5;
        }
        distlock_client_free(c);
    }
    return NULL;
}

static void test_threads_own_clients(void **state)
{
    rh_cluster *rc = *state;
    pthread_t t[4];
    void *ret[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, own_client, (void *)rh_uris(rc)), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], &ret[i]);
        if (ret[i]) {
            print_error("thread %d failed at step %ld\n", i, (long)(intptr_t)ret[i]);
            fail();
        }
    }
    assert_holding(rc, "own", NULL, 0);
}

#define PW_A "pwA-0123456789abcdefghijklmnopqrstuvwxyz"
#define PW_B "pwB-0123456789abcdefghijklmnopqrstuvwxyz"

struct pw_shared {
    distlock_client *c;
    atomic_int stop;
    long long deadline;
};

struct pw_worker {
    struct pw_shared *s;
    char key[32];
    long iterations;
    int bad_rc;            /* first failing status, 0 if none */
    char bad_what[64];
    char bad_detail[512];
};

static void *pw_setter(void *arg)
{
    struct pw_shared *s = arg;
    long i = 0;
    while (!atomic_load(&s->stop)) {
        int r = distlock_client_set_str(s->c, DISTLOCK_OPT_PASSWORD, (i++ & 1) ? PW_A : PW_B);
        if (r != DISTLOCK_OK) return (void *)(intptr_t)r;
    }
    return NULL;
}

static void *pw_locker(void *arg)
{
    struct pw_worker *w = arg;
    while (rh_now_ms() < w->s->deadline && !w->bad_rc) {
        distlock_lock *l = NULL;
        int r = distlock_acquire(w->s->c, w->key, 10000, 0, 0, &l);
        if (r != DISTLOCK_OK) {
            w->bad_rc = r;
            snprintf(w->bad_what, sizeof w->bad_what, "acquire #%ld", w->iterations + 1);
            snprintf(w->bad_detail, sizeof w->bad_detail, "%s", distlock_last_error());
            break;
        }
        r = distlock_release(l);
        if (r != DISTLOCK_OK) {
            w->bad_rc = r;
            snprintf(w->bad_what, sizeof w->bad_what, "release #%ld", w->iterations + 1);
            snprintf(w->bad_detail, sizeof w->bad_detail, "%s", distlock_last_error());
        }
        distlock_lock_free(l);
        w->iterations++;
    }
    return NULL;
}

static void test_set_password_while_connecting(void **state)
{
    rh_cluster *rc = *state;
    /* A user with two valid passwords: every value the setter writes works. */
    node_command_ok(rc, 0, "ACL SETUSER pwswap reset on >%s >%s ~* &* +@all", PW_A, PW_B);
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_USERNAME, "pwswap"), DISTLOCK_OK);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_PASSWORD, PW_A), DISTLOCK_OK);

    struct pw_shared s = { .c = c, .deadline = rh_now_ms() + 1500 };
    struct pw_worker w[2] = { { .s = &s }, { .s = &s } };
    snprintf(w[0].key, sizeof w[0].key, "pwswap:0");
    snprintf(w[1].key, sizeof w[1].key, "pwswap:1");
    pthread_t ts, tw[2];
    assert_int_equal(pthread_create(&ts, NULL, pw_setter, &s), 0);
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&tw[i], NULL, pw_locker, &w[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(tw[i], NULL);
    atomic_store(&s.stop, 1);
    void *setter_rc = NULL;
    pthread_join(ts, &setter_rc);
    distlock_client_free(c);
    node_command_ok(rc, 0, "ACL DELUSER pwswap");

    printf("# %ld + %ld acquire/release pairs while the password was being set\n",
           w[0].iterations, w[1].iterations);
    assert_int_equal((int)(intptr_t)setter_rc, DISTLOCK_OK);
    for (int i = 0; i < 2; i++) {
        if (w[i].bad_rc != DISTLOCK_OK) {
            print_error("thread %d: %s = %d (%s): \"%s\"\n", i, w[i].bad_what, w[i].bad_rc,
                        distlock_strerror(w[i].bad_rc), w[i].bad_detail);
            fail();
        }
        assert_true(w[i].iterations > 0);
    }
}

/* distlock_client_set(), documented thread-safe, while other threads acquire
 * and wait: the options a call reads (timeouts, drift, retry steps) are set
 * on one thread and read on another with nothing ordering the two, a data
 * race under TSan unless the library reads them atomically; every
 * operation succeeds either way. */
struct setter {
    distlock_client *c;
    atomic_int stop;
    int failed;
};

static void *set_options_main(void *arg)
{
    struct setter *s = arg;
    for (long i = 0; !atomic_load(&s->stop); i++) {
        long odd = i & 1;
        if (distlock_client_set(s->c, DISTLOCK_OPT_DRIFT_PPM, 10000 + odd) != DISTLOCK_OK ||
            distlock_client_set(s->c, DISTLOCK_OPT_DRIFT_MIN_MS, 2 + odd) != DISTLOCK_OK ||
            distlock_client_set(s->c, DISTLOCK_OPT_RETRY_MIN_MS, 1 + odd) != DISTLOCK_OK ||
            distlock_client_set(s->c, DISTLOCK_OPT_RETRY_MAX_MS, 3 + odd) != DISTLOCK_OK ||
            distlock_client_set(s->c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 5000 + odd) !=
                DISTLOCK_OK ||
            distlock_client_set(s->c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 5000 + odd) !=
                DISTLOCK_OK)
            s->failed = 1;
        sched_yield();
    }
    return NULL;
}

static void test_options_set_while_acquiring(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_client *holder = new_client(rh_uris(rc));
    struct setter s = { .c = c };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, set_options_main, &s), 0);
    for (int i = 0; i < 20; i++) {
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(c, "t:opts", 10000, 0, 0, &l), DISTLOCK_OK);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    /* A waiter that re-checks every few ms until the holder's lease expires. */
    distlock_lock *hl = NULL, *l = NULL;
    assert_rc(distlock_acquire(holder, "t:opts", 300, 0, 0, &hl), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "t:opts", 10000, 10000, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    atomic_store(&s.stop, 1);
    pthread_join(t, NULL);
    assert_int_equal(s.failed, 0);
    assert_holding(rc, "t:opts", NULL, 0);
    distlock_lock_free(l);
    distlock_lock_free(hl);
    distlock_client_free(holder);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_threads_one_node, heal),
        cmocka_unit_test_setup(test_threads_three_nodes, heal),
        cmocka_unit_test_setup(test_threads_own_clients, heal),
        cmocka_unit_test_setup(test_options_set_while_acquiring, heal),
    };
    const struct CMUnitTest tests_1_nodes[] = {
        cmocka_unit_test_setup(test_set_password_while_connecting, heal),
    };
    int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);
    failed += cmocka_run_group_tests(tests_1_nodes, group_setup_1, group_teardown);
    return failed;
}
