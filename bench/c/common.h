/*
 * common.h -- what every C bench driver shares: the monotonic clock (the same
 * CLOCK_MONOTONIC that PHP hrtime(), Python time.monotonic_ns() and Node
 * process.hrtime.bigint() read, so logs of different processes line up), the
 * latency sample buffer, the shared overlap marker and the contention log.
 *
 * Driver protocol (identical in every language, see bench/README.md):
 *   DRIVER pairs   URIS START_NS SLICE_NS PERIOD_NS COUNT KEY
 *   DRIVER contend URIS START_NS END_NS KEY HOLD_US THINK_US LOGFILE MARKER ID
 *   DRIVER hold    URIS COUNT TTL_MS
 *   DRIVER renew   URIS COUNT TTL_MS          (floor and distlock only)
 * Each prints one result line of key=value pairs on stdout.
 */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void sleep_us(long us)
{
    if (us <= 0) return;
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

/* Sleep until the common start instant; 1 if we were already late. */
static inline int wait_until(int64_t t)
{
    int64_t n = now_ns();
    if (n > t) return 1;
    struct timespec ts = { (t - n) / 1000000000LL, (t - n) % 1000000000LL };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
    return 0;
}

static inline void die(const char *what, const char *detail)
{
    fprintf(stderr, "bench: %s: %s\n", what, detail ? detail : "");
    exit(1);
}

/* 32 lowercase hex characters from getrandom, like the distlock token. */
static inline void hex_token(char out[33])
{
    unsigned char b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) die("getrandom", strerror(errno));
    static const char hx[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) { out[2 * i] = hx[b[i] >> 4]; out[2 * i + 1] = hx[b[i] & 15]; }
    out[32] = 0;
}

/* ---- latency samples */
typedef struct { int64_t *v; size_t n, cap; } samples;

static inline void samples_add(samples *s, int64_t x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 65536;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        if (!s->v) die("realloc", "out of memory");
    }
    s->v[s->n++] = x;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static inline double samples_pct_us(samples *s, double p)
{
    if (!s->n) return -1;
    qsort(s->v, s->n, sizeof *s->v, cmp_i64);
    size_t i = (size_t)(p * (double)(s->n - 1) + 0.5);
    return (double)s->v[i] / 1000.0;
}

/* ---- time slices of the uncontended runs: window k is
 * [START + k*PERIOD, START + k*PERIOD + SLICE). bench.py gives every
 * implementation of a group the same PERIOD and its own START, so they take
 * turns (round robin, one active at a time) and each ratio compares windows
 * a fraction of a second apart. A window that is already over when the
 * driver gets to it (slow start) is reported as -1. */
typedef struct { int64_t start, slice, period, cpu_ns; int count, k, late; long *pairs; } slices;

/* CPU time of this process, all threads (user + system). */
static inline int64_t cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
           ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
}

static inline void slices_init(slices *s, char **a /* START SLICE PERIOD COUNT */)
{
    s->start = atoll(a[0]); s->slice = atoll(a[1]); s->period = atoll(a[2]);
    s->count = atoi(a[3]); s->k = 0; s->late = 0; s->cpu_ns = 0;
    s->pairs = calloc((size_t)(s->count > 0 ? s->count : 1), sizeof *s->pairs);
    if (!s->pairs) die("calloc", "out of memory");
}

/* Sleep until the next window; 0 when all are done. *end gets its end.
 * The caller brackets each window's work with c0 = cpu_ns() ... and adds
 * the difference to s->cpu_ns. */
static inline int slices_next(slices *s, int64_t *end)
{
    while (s->k < s->count) {
        int64_t ws = s->start + s->k * s->period, we = ws + s->slice;
        if (now_ns() >= we) { s->pairs[s->k++] = -1; s->late = 1; continue; }
        wait_until(ws);
        *end = we;
        return 1;
    }
    return 0;
}

static inline void print_slices(const char *impl, slices *s, samples *lat, long errors)
{
    double p50 = samples_pct_us(lat, 0.50), p99 = samples_pct_us(lat, 0.99);
    printf("impl=%s slice_s=%.6f p50_us=%.1f p99_us=%.1f late=%d errors=%ld cpu_ns=%lld pairs=",
           impl, (double)s->slice / 1e9, p50, p99, s->late, errors, (long long)s->cpu_ns);
    for (int k = 0; k < s->count; k++) printf("%s%ld", k ? "," : "", s->pairs[k]);
    printf("\n");
}

/* ---- overlap marker: a shared 8-byte file every holder checks and sets
 * inside its critical section. Entering, it must read 0; leaving, it must
 * still read its own id. Anything else is an overlap (mutual exclusion lost). */
typedef struct { int fd; long id; long overlaps; } marker;

static inline void marker_open(marker *m, const char *path, long id)
{
    m->fd = open(path, O_RDWR | O_CREAT, 0600);
    if (m->fd < 0) die(path, strerror(errno));
    m->id = id; m->overlaps = 0;
}

static inline void marker_enter(marker *m)
{
    long v = 0;
    if (pread(m->fd, &v, sizeof v, 0) == (ssize_t)sizeof v && v != 0) m->overlaps++;
    v = m->id;
    if (pwrite(m->fd, &v, sizeof v, 0) != (ssize_t)sizeof v) die("marker", strerror(errno));
}

static inline void marker_leave(marker *m)
{
    long v = 0;
    if (pread(m->fd, &v, sizeof v, 0) == (ssize_t)sizeof v && v != m->id) m->overlaps++;
    v = 0;
    if (pwrite(m->fd, &v, sizeof v, 0) != (ssize_t)sizeof v) die("marker", strerror(errno));
}

/* ---- contention log: one "t_req t_acq t_rel" line per critical section. */
typedef struct { int64_t *v; size_t n, cap; } cslog;

static inline void cslog_add(cslog *l, int64_t req, int64_t acq, int64_t rel)
{
    if (l->n + 3 > l->cap) {
        l->cap = l->cap ? l->cap * 2 : 3 * 16384;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
        if (!l->v) die("realloc", "out of memory");
    }
    l->v[l->n++] = req; l->v[l->n++] = acq; l->v[l->n++] = rel;
}

static inline void cslog_write(cslog *l, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) die(path, strerror(errno));
    for (size_t i = 0; i + 2 < l->n; i += 3)
        fprintf(f, "%lld %lld %lld\n", (long long)l->v[i], (long long)l->v[i + 1],
                (long long)l->v[i + 2]);
    fclose(f);
}

/* Split "redis://127.0.0.1:P,redis://127.0.0.1:Q" into host/port pairs. */
typedef struct { char host[64]; int port; } node_addr;

static inline int parse_uris(const char *uris, node_addr *out, int max)
{
    int n = 0;
    const char *p = uris;
    while (*p && n < max) {
        if (strncmp(p, "redis://", 8) == 0) p += 8;
        const char *colon = strchr(p, ':');
        if (!colon) die("uri", uris);
        size_t hl = (size_t)(colon - p);
        if (hl >= sizeof out[n].host) die("uri", uris);
        memcpy(out[n].host, p, hl);
        out[n].host[hl] = 0;
        out[n].port = atoi(colon + 1);
        n++;
        const char *comma = strchr(colon, ',');
        if (!comma) break;
        p = comma + 1;
    }
    return n;
}

#endif
