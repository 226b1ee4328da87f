/* zset_leases.c -- semaphore permits and read locks against plain locks, in
 * one run on the same servers (bench/c/zset_leases.sh):
 *   pairs     acquire (try once) + release pairs/s of a lock, a read lock and
 *             a permit of a semaphore of 4, in alternating 0.5 s slices
 *             (the machine's load changes faster than a run)
 *   handover  a permit of 1 (and a writer behind a reader): the time from a
 *             release to the waiter's grant, p50 / p99 / max
 *   writer    a waiting writer behind readers that keep arriving (READERS
 *             threads, each holding HOLD ms with a TTL of TTL ms and taking
 *             the next read lock at once): its wait, p50 / max over TRIALS
 *
 *   zset_leases URIS SECONDS
 * Prints key=value lines. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "distlock.h"

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_us(long long us)
{
    struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

static distlock_client *client(const char *uris)
{
    distlock_client *c = NULL;
    if (distlock_client_new(uris, &c) != DISTLOCK_OK) {
        fprintf(stderr, "client: %s\n", distlock_last_error());
        exit(2);
    }
    return c;
}

enum { LOCK, READ, PERMIT, KINDS };
static const char *kind_name[KINDS] = { "lock", "read_lock", "permit" };

static int take(distlock_client *c, int kind, const char *key, long ttl, long wait,
                distlock_lock **l)
{
    if (kind == PERMIT)
        return distlock_semaphore_acquire(c, key, 4, ttl, wait, 0, NULL, l);
    return distlock_acquire(c, key, ttl, wait, kind == READ ? DISTLOCK_SHARED : 0, l);
}

static void pairs(const char *uris, double secs)
{
    distlock_client *c = client(uris);
    long long n[KINDS] = { 0 }, us[KINDS] = { 0 };
    int errors = 0;
    const char *key[KINDS] = { "bench:z:lock", "bench:z:read", "bench:z:sem" };
    for (long long end = now_us() + (long long)(secs * 1e6); now_us() < end;) {
        for (int k = 0; k < KINDS; k++) {
            long long t0 = now_us(), stop = t0 + 500000;
            while (now_us() < stop) {
                distlock_lock *l = NULL;
                if (take(c, k, key[k], 10000, 0, &l) != DISTLOCK_OK ||
                    distlock_release(l) != DISTLOCK_OK)
                    errors++;
                distlock_lock_free(l);
                n[k]++;
            }
            us[k] += now_us() - t0;
        }
    }
    for (int k = 0; k < KINDS; k++)
        printf("pairs_per_s_%s=%.0f ", kind_name[k], n[k] * 1e6 / (double)us[k]);
    printf("ratio_read_lock=%.2f ratio_permit=%.2f errors=%d\n",
           (n[READ] * 1e6 / (double)us[READ]) / (n[LOCK] * 1e6 / (double)us[LOCK]),
           (n[PERMIT] * 1e6 / (double)us[PERMIT]) / (n[LOCK] * 1e6 / (double)us[LOCK]), errors);
    distlock_client_free(c);
}

typedef struct waiter_arg {
    distlock_client *c;
    const char *key;
    int writer;  /* 1: a plain acquire, else a permit of 1 */
    atomic_llong got_us;
    atomic_int ready;
} waiter_arg;

static void *waiter(void *p)
{
    waiter_arg *w = p;
    distlock_lock *l = NULL;
    atomic_store(&w->ready, 1);
    int rc = w->writer ? distlock_acquire(w->c, w->key, 10000, 10000, 0, &l)
                       : distlock_semaphore_acquire(w->c, w->key, 1, 10000, 10000, 0, NULL, &l);
    atomic_store(&w->got_us, rc == DISTLOCK_OK ? now_us() : -1);
    if (l) {
        distlock_release(l);
        distlock_lock_free(l);
    }
    return NULL;
}

/* release -> grant of a waiter that has been waiting 20 ms */
static void handover(const char *uris, int writer, int rounds)
{
    distlock_client *c = client(uris), *wc = client(uris);
    long long *gap = calloc((size_t)rounds, sizeof(*gap));
    int ok = 0;
    const char *key = writer ? "bench:z:ho:rw" : "bench:z:ho:sem";
    for (int i = 0; i < rounds; i++) {
        distlock_lock *h = NULL;
        int rc = writer ? distlock_acquire(c, key, 10000, 0, DISTLOCK_SHARED, &h)
                        : distlock_semaphore_acquire(c, key, 1, 10000, 0, 0, NULL, &h);
        if (rc != DISTLOCK_OK)
            continue;
        waiter_arg w = { .c = wc, .key = key, .writer = writer };
        pthread_t t;
        pthread_create(&t, NULL, waiter, &w);
        while (!atomic_load(&w.ready))
            sleep_us(100);
        sleep_us(20000);  /* the waiter is asleep by now (a bench, not a test) */
        long long t0 = now_us();
        distlock_release(h);
        pthread_join(t, NULL);
        distlock_lock_free(h);
        if (atomic_load(&w.got_us) > 0)
            gap[ok++] = atomic_load(&w.got_us) - t0;
    }
    qsort(gap, (size_t)ok, sizeof(*gap), cmp_ll);
    printf("handover_%s n=%d p50_ms=%.2f p99_ms=%.2f max_ms=%.2f\n",
           writer ? "reader_to_writer" : "permit", ok, ok ? gap[ok / 2] / 1e3 : -1,
           ok ? gap[(ok * 99) / 100 < ok ? (ok * 99) / 100 : ok - 1] / 1e3 : -1,
           ok ? gap[ok - 1] / 1e3 : -1);
    free(gap);
    distlock_client_free(c);
    distlock_client_free(wc);
}

typedef struct stream { distlock_client *c; long ttl, hold_ms; atomic_int stop; } stream;

static void *reader(void *p)
{
    stream *s = p;
    while (!atomic_load(&s->stop)) {
        distlock_lock *l = NULL;
        if (distlock_acquire(s->c, "bench:z:starve", s->ttl, 200, DISTLOCK_SHARED, &l) ==
            DISTLOCK_OK) {
            sleep_us(s->hold_ms * 1000);
            distlock_release(l);
        }
        distlock_lock_free(l);
    }
    return NULL;
}

static void writer_behind_readers(const char *uris, int readers, long ttl, long hold, int trials)
{
    stream s = { .c = client(uris), .ttl = ttl, .hold_ms = hold };
    distlock_client *wc = client(uris);
    pthread_t t[32];
    for (int i = 0; i < readers; i++)
        pthread_create(&t[i], NULL, reader, &s);
    long long *w = calloc((size_t)trials, sizeof(*w));
    int ok = 0, fail = 0;
    sleep_us(300000);
    for (int i = 0; i < trials; i++) {
        distlock_lock *l = NULL;
        long long t0 = now_us();
        if (distlock_acquire(wc, "bench:z:starve", 5000, 10 * ttl, 0, &l) == DISTLOCK_OK) {
            w[ok++] = now_us() - t0;
            distlock_release(l);
        } else {
            fail++;
        }
        distlock_lock_free(l);
        sleep_us(100000);  /* the readers come back in */
    }
    atomic_store(&s.stop, 1);
    for (int i = 0; i < readers; i++)
        pthread_join(t[i], NULL);
    qsort(w, (size_t)ok, sizeof(*w), cmp_ll);
    printf("writer_behind_readers readers=%d reader_ttl_ms=%ld reader_hold_ms=%ld trials=%d "
           "granted=%d p50_ms=%.1f max_ms=%.1f not_granted_in_10_ttl=%d\n", readers, ttl, hold,
           trials, ok, ok ? w[ok / 2] / 1e3 : -1, ok ? w[ok - 1] / 1e3 : -1, fail);
    free(w);
    distlock_client_free(s.c);
    distlock_client_free(wc);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s URIS SECONDS\n", argv[0]);
        return 2;
    }
    double secs = atof(argv[2]);
    pairs(argv[1], secs);
    handover(argv[1], 0, 50);
    handover(argv[1], 1, 50);
    writer_behind_readers(argv[1], 4, 1000, 150, 10);
    return 0;
}
