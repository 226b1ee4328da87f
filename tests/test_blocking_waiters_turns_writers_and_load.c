/* test_blocking_waiters_turns_writers_and_load.c -- promises a blocking wait
 * keeps while the waiting calls of one client for one key take turns (only
 * the longest-waiting one re-checks, the others send nothing):
 * - a waiting writer keeps readers out (docs/shared-locks.md): when another
 *   waiting writer gives up, a reader arriving then is refused while ours
 *   still waits, also when ours has not had the turn for longer than the
 *   registry of waiting writers keeps an entry unrefreshed;
 * - a release wakes each group's waiter with the turn (docs/guarantees.md
 *   "Waiting"), also behind eight other permit sizes;
 * - waiting threads send one re-check stream, also when the node answers
 *   slowly (each answer later than DISTLOCK_OPT_RETRY_MAX_MS but well within
 *   the command timeout), and keep waiting there;
 * - the client's cost of many waiting threads (for one key, or each for its
 *   own) grows with their number, not with its square (a user with 1,000
 *   waiting threads).
 * Waiters are threads of one client, the holders other clients. */
#include "test_common.h"
#include "test_waiting_threads.h"
#include "harness/faultproxy.h"

#include <sys/resource.h>
#include <time.h>

DEFINE_GROUP(1)

static long long zcard(rh_cluster *rc, const char *key)
{
    redisReply *r = rh_command(rc, 0, 0, "ZCARD %s", key);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

/* Keys on node 0 whose names contain `key` (the key, its side keys). */
static long long keys_left(rh_cluster *rc, const char *key)
{
    redisReply *r = rh_command(rc, 0, 0, "KEYS *%s*", key);
    long long n = r && r->type == REDIS_REPLY_ARRAY ? (long long)r->elements : -1;
    if (n > 0)
        printf("# left: %s%s\n", r->element[0]->str, n > 1 ? " ..." : "");
    if (r)
        freeReplyObject(r);
    return n;
}

/* docs/shared-locks.md: "A writer that gives up ... removes its intent and
 * wakes the readers it kept out, unless another writer still waits";
 * test_writer_keeps_intent_when_another_writer_gives_up checks it with two
 * writers of two clients. Here both writers are threads of one client: a
 * reader of another client holds the key, our first writer waits (it has
 * the turn and refreshes the intent), our second writer waits behind it
 * (it sends nothing while it has no turn). Then our first writer is
 * cancelled (after `lapse`: once the second's entry in the registry of
 * waiting writers may have lapsed). Our second writer still waits: a reader
 * of another client arriving now must be refused, so that the writer gets
 * the key once the reader in is gone. The leave's message is held on our
 * client's subscription connection (the fault proxy), so the reader arrives
 * before our second writer's next re-check (0.5-1 s later), as when that
 * message is lost or late: the registry is what must keep the intent up,
 * not a race. Returns the arriving reader's status. */
static int reader_after_one_of_two_writers_gives_up(rh_cluster *rc, const char *key,
                                                    const char *token, int lapse)
{
    char writers[128], chan[128], hex[300];
    snprintf(writers, sizeof writers, "{%s}:writers", key);
    snprintf(chan, sizeof chan, "distlock:%s", key);
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *readers = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(fp_uris(fp), 1000, 1000);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 500), DISTLOCK_OK);
    distlock_lock *reader = NULL;
    assert_rc(distlock_acquire(readers, key, 30000, 0, DISTLOCK_SHARED, &reader), DISTLOCK_OK);

    distlock_cancel *cancel = NULL;
    assert_rc(distlock_cancel_new(&cancel), DISTLOCK_OK);
    waiting_thread first = { .c = c, .key = key, .wait_ms = 20000, .cancel = cancel,
                             .token = token };
    waiting_thread_start_sleeping(&first);
    waiting_thread second = { .c = c, .key = key, .wait_ms = 20000, .token = token };
    waiting_thread_start_sleeping(&second);
    printf("# waiting writers noted: %lld (two writers wait)\n", zcard(rc, writers));
    if (lapse) {
        /* Both wait while a reader is in; the queue TTL (3 x 1000 + 2 x 500
         * ms = 4 s) passes, bounded by 8 s: the second writer's entry
         * lapses unless it is kept. */
        assert_int_equal(zcard(rc, writers), 2);  /* both noted themselves */
        long long t0 = rh_now_ms();
        int lapsed = RH_WAIT_UNTIL(zcard(rc, writers) < 2, 8000);
        printf("# waiting writers noted after %lld ms: %lld (both writers wait: 2)\n",
               rh_now_ms() - t0, zcard(rc, writers));
        (void)lapsed;
    }
    assert_false(atomic_load(&second.done));

    /* the key's messages to our client (only its subscription carries the
     * channel's name) are held from now on */
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold-match 0 down %s", fp_hex(chan, hex, sizeof hex)),
                     0);
    assert_rc(distlock_cancel_fire(cancel), DISTLOCK_OK);
    waiting_thread_join(&first, "first writer");
    assert_rc(first.rc, DISTLOCK_ECANCELED);
    assert_false(atomic_load(&second.done));
    distlock_lock *late = NULL;
    int late_rc = distlock_acquire(readers, key, 30000, 0, DISTLOCK_SHARED, &late);
    printf("# a reader arriving once the first writer gave up while the second waits: %s\n",
           distlock_strerror(late_rc));
    (void)fp_cmd(fp, NULL, 0, "unhold 0 down");  /* the message goes on */

    /* clean up: the readers go, our second writer gets the key and releases */
    if (late) {
        assert_rc(distlock_release(late), DISTLOCK_OK);
        distlock_lock_free(late);
    }
    assert_rc(distlock_release(reader), DISTLOCK_OK);
    distlock_lock_free(reader);
    waiting_thread_join(&second, "second writer");
    distlock_cancel_free(cancel);
    distlock_client_free(c);
    distlock_client_free(readers);
    fp_stop(fp);
    assert_rc(second.rc, DISTLOCK_OK);
    assert_true(RH_WAIT_UNTIL(keys_left(rc, key) == 0, 3000));
    return late_rc;
}

/* Our second writer has had no turn for longer than the queue TTL. */
static void test_reader_refused_when_our_first_writer_gives_up_and_our_second_waits(void **state)
{
    assert_rc(reader_after_one_of_two_writers_gives_up(*state, "turnwriters:rw", NULL, 1),
              DISTLOCK_NOTACQUIRED);
}

/* The same, given up at once: the control of the one above (the registry
 * keeps the second writer's entry). */
static void test_reader_refused_when_our_first_writer_gives_up_at_once(void **state)
{
    assert_rc(reader_after_one_of_two_writers_gives_up(*state, "turnwriters:fresh", NULL, 0),
              DISTLOCK_NOTACQUIRED);
}

/* docs/guarantees.md "Waiting": "A release wakes the client's longest waiter
 * of the key and each group's waiter with the turn" (a permit of P is a
 * group of its own). Another client holds 9 permits of the semaphore (P 9).
 * This client's threads wait for a permit: the first with P 1, then one with
 * P 9, then one each with P 1, 2, ..., 8 (ten waiters, nine groups).
 * Re-checks are 10-20 s apart: only a release serves them quickly. One of
 * the 9 permits is released: 8 are held, so only the P 9 waiter can take
 * one (8 < 9); it must, within a second, not at its next re-check. */
static void test_release_wakes_a_permit_waiter_behind_eight_other_permit_sizes(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "turnwriters:sizes";
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 20000, 20000);
    distlock_lock *held[9] = { NULL };
    for (int i = 0; i < 9; i++)
        assert_rc(distlock_semaphore_acquire(holder, key, 9, 60000, 0, 0, NULL, &held[i]),
                  DISTLOCK_OK);
    distlock_cancel *cancel = NULL;
    assert_rc(distlock_cancel_new(&cancel), DISTLOCK_OK);
    const long sizes[10] = { 1, 9, 1, 2, 3, 4, 5, 6, 7, 8 };
    waiting_thread w[10];
    for (int i = 0; i < 10; i++) {
        w[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 60000, .permits = sizes[i],
                                 .cancel = cancel };
        waiting_thread_start_sleeping(&w[i]);
    }
    long long released = rh_now_ms();
    assert_rc(distlock_release(held[0]), DISTLOCK_OK);
    distlock_lock_free(held[0]);
    int served = RH_WAIT_UNTIL(atomic_load(&w[1].done), 30000);
    long long took = rh_now_ms() - released;
    printf("# the P 9 waiter (ten waiters, nine permit sizes) %s %lld ms after the release "
           "(re-checks 10-20 s apart)\n", served ? "ended" : "still waits", took);
    assert_rc(distlock_cancel_fire(cancel), DISTLOCK_OK);
    for (int i = 0; i < 10; i++)
        waiting_thread_join(&w[i], "permit waiter");
    for (int i = 1; i < 9; i++) {
        assert_rc(distlock_release(held[i]), DISTLOCK_OK);
        distlock_lock_free(held[i]);
    }
    distlock_cancel_free(cancel);
    distlock_client_free(c);
    distlock_client_free(holder);
    for (int i = 0; i < 10; i++)
        if (i != 1)
            assert_rc(w[i].rc, DISTLOCK_ECANCELED);
    assert_true(RH_WAIT_UNTIL(keys_left(rc, key) == 0, 3000));
    assert_true(served);
    assert_rc(w[1].rc, DISTLOCK_OK);
    assert_true(took < 1000);
}

/* Eight threads of one client wait for a held key (re-checks 50-100 ms
 * apart); then the node answers each request 1 s late (a busy node; the
 * command timeout is 5 s), longer than the re-check interval. Over four
 * seconds: the attempts node 0 ran (*sent) in *window ms, and how many
 * waiting calls ended meanwhile (the return value; the key stays held, so
 * none should). connect_ms: the connect timeout (0: the default, 1 s). */
#define SLOW_THREADS 8
static int slow_node_window(rh_cluster *rc, const char *key, long connect_ms, long long *sent,
                            long long *window)
{
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(fp_uris(fp), 50, 100);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 5000), DISTLOCK_OK);
    if (connect_ms)
        assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, connect_ms),
                  DISTLOCK_OK);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);
    waiting_thread w[SLOW_THREADS];
    for (int i = 0; i < SLOW_THREADS; i++) {
        w[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 30000 };
        waiting_thread_start_sleeping(&w[i]);
    }
    /* the node's answers (the replies' direction) come 1 s late */
    assert_int_equal(fp_cmd(fp, NULL, 0, "delay 0 1000 down"), 0);
    /* a first slow attempt went out (the window starts with the streams) */
    long long a0 = attempt_commands_run(rc, 0);
    assert_true(RH_WAIT_UNTIL(attempt_commands_run(rc, 0) > a0, 5000));
    long long t0 = rh_now_ms(), at0 = attempt_commands_run(rc, 0), t1 = t0;
    while ((t1 = rh_now_ms()) - t0 < 4000)
        rh_sleep_ms(20);  /* the window measured (no event ends it) */
    *sent = attempt_commands_run(rc, 0) - at0;
    *window = t1 - t0;
    printf("# %d threads waiting, answers 1 s late, connect timeout %ld ms: %lld attempts in "
           "%lld ms (one stream sends at most %lld)\n", SLOW_THREADS,
           connect_ms ? connect_ms : 1000, *sent, *window, *window / 1000 + 2);
    int early = 0;
    for (int i = 0; i < SLOW_THREADS; i++)
        if (atomic_load(&w[i].done)) {
            early++;
            printf("# waiter %d ended in the window: %d (%s)\n", i, w[i].rc, w[i].detail);
        }
    assert_int_equal(fp_cmd(fp, NULL, 0, "delay 0 0 down"), 0);
    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    for (int i = 0; i < SLOW_THREADS; i++)
        waiting_thread_join(&w[i], "waiter");
    distlock_client_free(c);
    distlock_client_free(holder);
    fp_stop(fp);
    assert_true(RH_WAIT_UNTIL(keys_left(rc, key) == 0, 3000));
    return early;
}

/* docs/guarantees.md "Waiting": "eight threads waiting for a held key send
 * one re-check stream, not eight". One stream behind answers 1 s late is
 * at most one attempt a second; node 0 must see one stream, not eight
 * (connect timeout 5 s: no waiting call ends). */
static void test_waiting_threads_send_one_stream_to_a_slow_node(void **state)
{
    long long sent = 0, window = 0;
    int early = slow_node_window(*state, "turnwriters:slow", 5000, &sent, &window);
    assert_int_equal(early, 0);
    assert_true(sent >= 1);
    assert_true(sent <= window / 1000 + 2);
}

/* The same with the default connect timeout (1 s): a slow node is no reason
 * for a waiting call to end while the key stays held (one stream reuses the
 * connection it has; each further attempt on the wire at once needs a new
 * one, which owes its first reply within the connect timeout). */
static void test_waiting_threads_keep_waiting_behind_a_slow_node(void **state)
{
    long long sent = 0, window = 0;
    int early = slow_node_window(*state, "turnwriters:slow-connect", 0, &sent, &window);
    assert_int_equal(early, 0);
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

static uint64_t now_us_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* CPU time this process has used, user and system, in ms: what the
 * scaling tests compare, as another process's load barely changes it
 * (wall time does). */
static double process_cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* The CPU time this process spends per second while n threads of one client
 * wait for a held key (re-checks 50-100 ms apart; no release). Each waiter
 * wakes at its timer whether or not it has the turn: n wake-ups per interval
 * are the price of n waiters; what each costs must not grow with n. */
static double cpu_ms_per_s_waiting(rh_cluster *rc, int n, const char *key)
{
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 50, 100);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 5000), DISTLOCK_OK);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 60000, 0, 0, &held), DISTLOCK_OK);
    distlock_cancel *cancel = NULL;
    assert_rc(distlock_cancel_new(&cancel), DISTLOCK_OK);
    waiting_thread *w = calloc((size_t)n, sizeof(*w));
    assert_non_null(w);
    for (int i = 0; i < n; i++) {
        w[i] = (waiting_thread){ .c = c, .key = key, .wait_ms = 60000, .cancel = cancel };
        waiting_thread_start_small_stack(&w[i]);
    }
    for (int i = 0; i < n; i++)
        assert_true(RH_WAIT_UNTIL(atomic_load(&w[i].sleeps) >= 2, 60000));
    double cpu0 = process_cpu_ms();
    long long t0 = rh_now_ms(), t1 = t0;
    while ((t1 = rh_now_ms()) - t0 < 2000)
        rh_sleep_ms(50);  /* the window measured (no event ends it) */
    double cpu_ms = process_cpu_ms() - cpu0;
    /* meanwhile, this thread's acquires of a free key on the same client
     * (each takes the client's mutex the waiters' turns take) */
    enum { PAIRS = 200 };
    long long took_us[PAIRS];
    char free_key[64];
    snprintf(free_key, sizeof free_key, "%s:free", key);
    for (int i = 0; i < PAIRS; i++) {
        distlock_lock *l = NULL;
        uint64_t a0 = now_us_mono();
        assert_rc(distlock_acquire(c, free_key, 10000, 0, 0, &l), DISTLOCK_OK);
        took_us[i] = (long long)(now_us_mono() - a0);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    qsort(took_us, PAIRS, sizeof took_us[0], cmp_ll);
    printf("# %d threads waiting: an uncontended acquire on the same client p50 %lld us, "
           "p99 %lld us, max %lld us\n", n, took_us[PAIRS / 2], took_us[PAIRS * 99 / 100],
           took_us[PAIRS - 1]);
    int done_early = 0;
    for (int i = 0; i < n; i++)
        done_early += atomic_load(&w[i].done);
    assert_rc(distlock_cancel_fire(cancel), DISTLOCK_OK);
    int cancelled = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(w[i].t, NULL);
        cancelled += w[i].rc == DISTLOCK_ECANCELED;
    }
    free(w);
    distlock_cancel_free(cancel);
    assert_rc(distlock_release(held), DISTLOCK_OK);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(holder);
    assert_int_equal(done_early, 0);
    assert_int_equal(cancelled, n);
    assert_true(RH_WAIT_UNTIL(keys_left(rc, key) == 0, 3000));
    return cpu_ms * 1000.0 / (double)(t1 - t0);
}

/* 125 then 1,000 waiting threads (8 times as many; 31 and 250 under the
 * sanitizers, whose threads start slowly): the CPU time per second must grow
 * about 8 times (at most 16: noise, a loaded machine), not 64. */
static void test_cost_of_waiting_threads_grows_linearly(void **state)
{
    rh_cluster *rc = *state;
    const int n = (int)slow_bound(1000, 250);
    double few = cpu_ms_per_s_waiting(rc, n / 8, "turnwriters:cost-few");
    double many = cpu_ms_per_s_waiting(rc, n, "turnwriters:cost-many");
    printf("# CPU per second of waiting: %d threads %.1f ms, %d threads %.1f ms "
           "(x%.1f for 8 times the threads)\n", n / 8, few, n, many, few > 0 ? many / few : 0.0);
    assert_true(many <= 16.0 * (few > 1.0 ? few : 1.0));
}

/* n threads of one client each wait for a key of its own, all held by
 * another client (re-checks 10-20 s apart: only releases serve them in
 * less). Measures the CPU time this process uses from the moment the n
 * threads (already started) begin their acquires until all n wait
 * (*settle), then while the holder releases the n keys one after the
 * other until all n took and released theirs (the return value); the wall
 * times are printed beside them. */
struct served_cost { double cpu_ms; long long wall_ms; };

/* The waiting threads of own_keys_served start their acquire together once
 * the gate opens: the CPU window that follows holds the library's work,
 * not the threads' creation, which grows faster than linearly under TSan
 * (its thread registry and stack shadows: most of the user time there). */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
} own_keys_gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

static int gated_acquire(waiting_thread *w, long ttl_ms, distlock_lock **out)
{
    pthread_mutex_lock(&own_keys_gate.mu);
    while (!own_keys_gate.open)
        pthread_cond_wait(&own_keys_gate.cv, &own_keys_gate.mu);
    pthread_mutex_unlock(&own_keys_gate.mu);
    return distlock_acquire(w->c, w->key, ttl_ms, w->wait_ms, w->flags, out);
}

static void own_keys_gate_set(int open)
{
    pthread_mutex_lock(&own_keys_gate.mu);
    own_keys_gate.open = open;
    pthread_cond_broadcast(&own_keys_gate.cv);
    pthread_mutex_unlock(&own_keys_gate.mu);
}

static struct served_cost own_keys_served(rh_cluster *rc, int n, struct served_cost *settle)
{
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(rh_uris(rc), 20000, 20000);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 5000), DISTLOCK_OK);
    char (*keys)[48] = calloc((size_t)n, sizeof(*keys));
    distlock_lock **held = calloc((size_t)n, sizeof(*held));
    waiting_thread *w = calloc((size_t)n, sizeof(*w));
    assert_true(keys && held && w);
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof keys[i], "turnwriters:own:%d:%d", n, i);
        assert_rc(distlock_acquire(holder, keys[i], 120000, 0, 0, &held[i]), DISTLOCK_OK);
    }
    own_keys_gate_set(0);
    for (int i = 0; i < n; i++) {
        w[i] = (waiting_thread){ .c = c, .key = keys[i], .wait_ms = 120000,
                                 .call = gated_acquire };
        waiting_thread_start_small_stack(&w[i]);
    }
    long long t0 = rh_now_ms();
    double cpu0 = process_cpu_ms();
    own_keys_gate_set(1);
    for (int i = 0; i < n; i++)
        assert_true(RH_WAIT_UNTIL(atomic_load(&w[i].sleeps) >= 1, 120000));
    *settle = (struct served_cost){ process_cpu_ms() - cpu0, rh_now_ms() - t0 };
    long long r0 = rh_now_ms();
    double rcpu0 = process_cpu_ms();
    for (int i = 0; i < n; i++) {
        assert_rc(distlock_release(held[i]), DISTLOCK_OK);
        distlock_lock_free(held[i]);
    }
    int ok = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(w[i].t, NULL);
        ok += w[i].rc == DISTLOCK_OK;
    }
    struct served_cost served = { process_cpu_ms() - rcpu0, rh_now_ms() - r0 };
    distlock_client_free(c);
    distlock_client_free(holder);
    free(w);
    free(held);
    free(keys);
    assert_int_equal(ok, n);
    return served;
}

/* 125 then 1,000 threads (31 and 250 under the sanitizers), each waiting for
 * a key of its own: the CPU time until all wait and until all are served
 * after their releases must grow about 8 times (at most 16, over a floor of
 * 100 ms), not 64. CPU time, not wall time: on a loaded machine the
 * threads' start waits for a CPU, which says nothing of the library. */
static void test_threads_waiting_for_their_own_keys_served_in_linear_time(void **state)
{
    rh_cluster *rc = *state;
    const int n = (int)slow_bound(1000, 250);
    struct served_cost settle_few, settle_many;
    struct served_cost few = own_keys_served(rc, n / 8, &settle_few);
    struct served_cost many = own_keys_served(rc, n, &settle_many);
    printf("# threads each waiting for its own key: %d all waiting after %.0f ms of CPU (%lld "
           "ms), served in %.0f ms of CPU (%lld ms) after the releases began; %d: %.0f (%lld), "
           "%.0f (%lld)\n", n / 8, settle_few.cpu_ms, settle_few.wall_ms, few.cpu_ms,
           few.wall_ms, n, settle_many.cpu_ms, settle_many.wall_ms, many.cpu_ms, many.wall_ms);
    /* a floor of 100 ms: a few ms at 125 threads are mostly noise */
    assert_true(settle_many.cpu_ms <= 16 * (settle_few.cpu_ms > 100 ? settle_few.cpu_ms : 100));
    assert_true(many.cpu_ms <= 16 * (few.cpu_ms > 100 ? few.cpu_ms : 100));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(
            test_reader_refused_when_our_first_writer_gives_up_and_our_second_waits, heal),
        cmocka_unit_test_setup(test_reader_refused_when_our_first_writer_gives_up_at_once, heal),
        cmocka_unit_test_setup(test_release_wakes_a_permit_waiter_behind_eight_other_permit_sizes,
                               heal),
        cmocka_unit_test_setup(test_waiting_threads_send_one_stream_to_a_slow_node, heal),
        cmocka_unit_test_setup(test_waiting_threads_keep_waiting_behind_a_slow_node, heal),
        cmocka_unit_test_setup(test_cost_of_waiting_threads_grows_linearly, heal),
        cmocka_unit_test_setup(test_threads_waiting_for_their_own_keys_served_in_linear_time,
                               heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
