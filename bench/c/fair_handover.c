/*
 * fair_handover.c -- DISTLOCK_FAIR hand-over latency: from a release to the
 * next waiter's acquire, with PROCS processes x THREADS threads (one client
 * per process, shared by its threads, as a PHP-FPM pool or a threaded
 * service would) contending on one key. bench/c/fair_handover.sh runs it on
 * 1, 3 and 5 nodes.
 *
 *   fair_handover URIS SECONDS [PROCS=8] [THREADS=2] [HOLD_US=1000] [KEY]
 *
 * Every holder logs (CLOCK_MONOTONIC) when its acquire returned and when it
 * called release, into memory shared with the parent. The parent orders the
 * grants by acquire time; a hand-over is the gap between one holder's
 * release and the next grant (there is always a queued waiter: 16
 * contenders, 1 holder). It prints one line: the number of hand-overs, p50,
 * p99 and max in ms, and the overlaps (a grant before the previous holder
 * released: must be 0).
 */
#include "common.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "distlock.h"

#define MAX_PROCS 32
#define MAX_THREADS 8
#define MAX_RECS 200000   /* per thread */
#define SLOW_NS 20000000LL

typedef struct { int64_t acq, rel; } rec;

typedef struct {
    long n;
    long timeouts, errors;
    rec r[MAX_RECS];
} thread_log;

static const char *g_key;
static int64_t g_start, g_end;
static long g_hold_us;

typedef struct { distlock_client *c; thread_log *log; } worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    (void)wait_until(g_start);
    while (now_ns() < g_end) {
        distlock_lock *l = NULL;
        int rc = distlock_acquire(w->c, g_key, 30000, 10000, DISTLOCK_FAIR, &l);
        int64_t tacq = now_ns();
        if (rc == DISTLOCK_NOTACQUIRED) { w->log->timeouts++; continue; }
        if (rc != DISTLOCK_OK) {
            if (w->log->errors++ == 0)
                fprintf(stderr, "fair_handover: acquire: %s (%s)\n", distlock_strerror(rc),
                        distlock_last_error());
            sleep_us(10000);  /* not a busy loop of failures */
            continue;
        }
        sleep_us(g_hold_us);
        int64_t trel = now_ns();
        if (w->log->n < MAX_RECS)
            w->log->r[w->log->n++] = (rec){ tacq, trel };
        if (distlock_release(l) != DISTLOCK_OK) w->log->errors++;
        distlock_lock_free(l);
    }
    return NULL;
}

static void child(const char *uris, thread_log *logs, int threads)
{
    distlock_client *c = NULL;
    if (distlock_client_new(uris, &c) != DISTLOCK_OK) die("distlock_client_new", distlock_last_error());
    /* connect and load the scripts before the clock starts */
    char wkey[160];
    snprintf(wkey, sizeof wkey, "%s:warm:%d", g_key, (int)getpid());
    distlock_lock *l = NULL;
    if (distlock_acquire(c, wkey, 10000, 0, DISTLOCK_FAIR, &l) != DISTLOCK_OK)
        die("warm-up acquire", distlock_last_error());
    distlock_release(l);
    distlock_lock_free(l);
    pthread_t t[MAX_THREADS];
    worker w[MAX_THREADS];
    for (int i = 0; i < threads; i++) {
        w[i] = (worker){ c, &logs[i] };
        if (pthread_create(&t[i], NULL, worker_main, &w[i]) != 0) die("pthread_create", "");
    }
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    distlock_client_free(c);
    _exit(0);
}

static int cmp_rec(const void *a, const void *b)
{
    const rec *x = a, *y = b;
    return x->acq < y->acq ? -1 : x->acq > y->acq;
}

int main(int argc, char **argv)
{
    if (argc < 3) die("usage", "fair_handover URIS SECONDS [PROCS] [THREADS] [HOLD_US] [KEY]");
    const char *uris = argv[1];
    double secs = atof(argv[2]);
    int procs = argc > 3 ? atoi(argv[3]) : 8, threads = argc > 4 ? atoi(argv[4]) : 2;
    g_hold_us = argc > 5 ? atol(argv[5]) : 1000;
    g_key = argc > 6 ? argv[6] : "bench:fairhandover";
    if (procs < 1 || procs > MAX_PROCS || threads < 1 || threads > MAX_THREADS || secs <= 0)
        die("usage", "1..32 processes, 1..8 threads, SECONDS > 0");
    int nlogs = procs * threads;
    size_t size = (size_t)nlogs * sizeof(thread_log);
    thread_log *logs = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (logs == MAP_FAILED) die("mmap", strerror(errno));

    /* every process starts its window together, after its own setup */
    g_start = now_ns() + 1500000000LL;
    g_end = g_start + (int64_t)(secs * 1e9);
    pid_t pid[MAX_PROCS];
    for (int p = 0; p < procs; p++) {
        if ((pid[p] = fork()) < 0) die("fork", strerror(errno));
        if (pid[p] == 0) child(uris, &logs[p * threads], threads);
    }
    int failed = 0;
    for (int p = 0; p < procs; p++) {
        int st;
        if (waitpid(pid[p], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed++;
    }

    long total = 0, timeouts = 0, errors = 0;
    for (int i = 0; i < nlogs; i++) {
        total += logs[i].n;
        timeouts += logs[i].timeouts;
        errors += logs[i].errors;
    }
    rec *all = malloc((size_t)(total ? total : 1) * sizeof(rec));
    if (!all) die("malloc", "out of memory");
    long k = 0, least = -1, most = 0;
    for (int i = 0; i < nlogs; i++) {
        memcpy(all + k, logs[i].r, (size_t)logs[i].n * sizeof(rec));
        k += logs[i].n;
        if (least < 0 || logs[i].n < least) least = logs[i].n;
        if (logs[i].n > most) most = logs[i].n;
    }
    qsort(all, (size_t)total, sizeof(rec), cmp_rec);
    samples gap = { 0 };
    long overlaps = 0, slow = 0;
    for (long i = 1; i < total; i++) {
        if (all[i].acq < all[i - 1].rel) { overlaps++; continue; }
        samples_add(&gap, all[i].acq - all[i - 1].rel);
        /* far beyond a wake-up's cost, about a re-check interval: a waiter
         * whose release notification did not wake it */
        if (all[i].acq - all[i - 1].rel > SLOW_NS) slow++;
    }
    double p50 = samples_pct_us(&gap, 0.50), p99 = samples_pct_us(&gap, 0.99);
    double max = gap.n ? (double)gap.v[gap.n - 1] / 1000.0 : -1;
    printf("handovers=%zu p50_ms=%.2f p99_ms=%.2f max_ms=%.2f over_20ms=%ld per_thread=%ld..%ld "
           "overlaps=%ld timeouts=%ld errors=%ld failed_procs=%d\n",
           gap.n, p50 / 1000.0, p99 / 1000.0, max / 1000.0, slow, least, most, overlaps,
           timeouts, errors, failed);
    return overlaps || errors || failed || gap.n == 0;
}
