/*
 * distlock_bench.c -- libdistlock through its C API, same protocol as floor.c.
 *
 *   distlock_bench pairs   URIS START SLICE PERIOD COUNT KEY [token]
 *       distlock_acquire(wait 0) + distlock_release + distlock_lock_free;
 *       "token": distlock_acquire_token + distlock_release_token (the pair the
 *       PHP compatibility functions and the CLI use).
 *   distlock_bench contend URIS START END KEY HOLD_US THINK_US LOG MARKER ID [fair]
 *       distlock_acquire with a 10 s wait budget (DISTLOCK_FAIR with "fair").
 *   distlock_bench hold    URIS COUNT TTL_MS
 *   distlock_bench renew   URIS COUNT TTL_MS   (DISTLOCK_AUTO_RENEW; on stdin
 *       close, reports how many were found lost and checks each validity)
 *   distlock_bench waitcost URIS REPLICAS SLICE_MS ROUNDS KEY
 *       WAIT for replicas: pairs/s of a client with DISTLOCK_OPT_WAIT_REPLICAS =
 *       REPLICAS against one without, in alternating slices of one run (the
 *       nodes of URIS must have that many replicas); bench/c/wait_cost.sh.
 *   distlock_bench statscost URIS SLICE_MS ROUNDS KEY
 *       Metrics: pairs/s of a client with DISTLOCK_OPT_STATS = 1 (the default)
 *       against one with 0, alternating slices of one run; bench/c/stats_cost.sh.
 *   distlock_bench manycost URIS SLICE_MS ROUNDS KEY
 *       Several keys: pairs/s of distlock_acquire_many() of 1 key and of 4
 *       keys (acquire + release + free) against a plain lock's, alternating
 *       slices of one run, one client; bench/c/many_cost.sh.
 *   distlock_bench count URIS PAIRS KEY STATS
 *       Exactly PAIRS pairs in run_pairs() (for callgrind --toggle-collect);
 *       STATS 0/1 sets DISTLOCK_OPT_STATS, "-" leaves the client as it is (a
 *       library that has no such option). An optional OWNER 1 sets
 *       DISTLOCK_OPT_OWNER_INFO (owner metadata; bench/c/owner_cost.sh).
 */
#include "common.h"

#include <poll.h>

#include "distlock.h"

static distlock_client *client(const char *uris)
{
    distlock_client *c = NULL;
    int rc = distlock_client_new(uris, &c);
    if (rc != DISTLOCK_OK) die("distlock_client_new", distlock_last_error());
    return c;
}

static void fail(const char *what, int rc)
{
    fprintf(stderr, "bench: %s: %s (%s)\n", what, distlock_strerror(rc), distlock_last_error());
    exit(1);
}

/* One acquire (never waits) + release; acquire latency into lat. 0 if both
 * succeeded. */
static int one_pair(distlock_client *c, const char *key, int token_mode, samples *lat)
{
    int64_t t = now_ns();
    if (token_mode) {
        char tok[33];
        distlock_token_generate(tok, sizeof tok);
        int rc = distlock_acquire_token(c, key, 30000, tok, 0, NULL);
        if (lat) samples_add(lat, now_ns() - t);
        if (rc != DISTLOCK_OK) return rc;
        return distlock_release_token(c, key, tok);
    }
    distlock_lock *l = NULL;
    int rc = distlock_acquire(c, key, 30000, 0, 0, &l);
    if (lat) samples_add(lat, now_ns() - t);
    if (rc != DISTLOCK_OK) return rc;
    rc = distlock_release(l);
    distlock_lock_free(l);
    return rc;
}

static int mode_pairs(int argc, char **argv)
{
    if (argc < 8) die("usage", "pairs URIS START SLICE PERIOD COUNT KEY [token]");
    distlock_client *c = client(argv[2]);
    slices sl;
    slices_init(&sl, argv + 3);
    const char *key = argv[7];
    int token_mode = argc > 8 && !strcmp(argv[8], "token");
    int n = distlock_client_node_count(c);
    samples lat = { 0 };
    long errors = 0;
    for (int w = 0; w < 200; w++) {
        int rc = one_pair(c, key, token_mode, NULL);
        if (rc != DISTLOCK_OK) fail("warm-up pair", rc);
    }
    int64_t end;
    while (slices_next(&sl, &end)) {
        long pairs = 0;
        int64_t c0 = cpu_ns();
        while (now_ns() < end) {
            if (one_pair(c, key, token_mode, &lat) != DISTLOCK_OK) errors++;
            else pairs++;
        }
        sl.cpu_ns += cpu_ns() - c0;
        sl.pairs[sl.k++] = pairs;
    }
    char impl[64];
    snprintf(impl, sizeof impl, "distlock-c%s-%d", token_mode ? "-token" : "", n);
    print_slices(impl, &sl, &lat, errors);
    distlock_client_free(c);
    return 0;
}

static int mode_contend(int argc, char **argv)
{
    if (argc < 11) die("usage", "contend URIS START END KEY HOLD_US THINK_US LOG MARKER ID [fair]");
    distlock_client *c = client(argv[2]);
    int64_t start = atoll(argv[3]), end = atoll(argv[4]);
    const char *key = argv[5];
    long hold = atol(argv[6]), think = atol(argv[7]);
    unsigned flags = (argc > 11 && !strcmp(argv[11], "fair")) ? DISTLOCK_FAIR : 0;
    marker m;
    marker_open(&m, argv[9], atol(argv[10]));
    /* connect (and load scripts) before the clock starts, as the floor does */
    distlock_lock *l = NULL;
    char wkey[128];
    snprintf(wkey, sizeof wkey, "%s:warm:%s", key, argv[10]);
    int rc = distlock_acquire(c, wkey, 10000, 0, flags, &l);
    if (rc != DISTLOCK_OK) fail("warm-up acquire", rc);
    distlock_lock_free(l);

    cslog log = { 0 };
    long cs = 0, errors = 0, timeouts = 0;
    int late = wait_until(start);
    while (now_ns() < end) {
        int64_t treq = now_ns();
        l = NULL;
        rc = distlock_acquire(c, key, 10000, 10000, flags, &l);
        if (rc == DISTLOCK_NOTACQUIRED) { timeouts++; continue; }
        if (rc != DISTLOCK_OK) fail("acquire (wait)", rc);
        int64_t tacq = now_ns();
        marker_enter(&m);
        sleep_us(hold);
        marker_leave(&m);
        int64_t trel = now_ns();
        if (distlock_release(l) != DISTLOCK_OK) errors++;
        distlock_lock_free(l);
        cslog_add(&log, treq, tacq, trel);
        cs++;
        sleep_us(think);
    }
    cslog_write(&log, argv[8]);
    printf("impl=distlock-c%s cs=%ld overlaps=%ld late=%d errors=%ld timeouts=%ld\n",
           flags ? "-fair" : "", cs, m.overlaps, late, errors, timeouts);
    distlock_client_free(c);
    return 0;
}

static int mode_hold(int argc, char **argv, int renew)
{
    if (argc < 5) die("usage", "hold|renew URIS COUNT TTL_MS");
    distlock_client *c = client(argv[2]);
    long count = atol(argv[3]), ttl = atol(argv[4]), held = 0;
    distlock_lock **locks = calloc((size_t)count, sizeof *locks);
    if (!locks) die("calloc", "out of memory");
    char key[64];
    for (long i = 0; i < count; i++) {
        snprintf(key, sizeof key, renew ? "bench:renew:%ld" : "bench:hold:%ld", i);
        int rc = distlock_acquire(c, key, ttl, 0, renew ? DISTLOCK_AUTO_RENEW : 0, &locks[i]);
        if (rc == DISTLOCK_OK) held++;
        else if (rc < 0) fail(renew ? "acquire (auto-renew)" : "acquire", rc);
    }
    printf("ready held=%ld\n", held);
    fflush(stdout);
    struct pollfd p = { 0, POLLIN, 0 };
    poll(&p, 1, -1);
    if (renew) {
        long lost = 0, expired = 0;
        for (long i = 0; i < count; i++) {
            if (!locks[i]) continue;
            if (distlock_lock_lost(locks[i])) lost++;
            if (distlock_lock_validity_ms(locks[i]) <= 0) expired++;
        }
        printf("impl=distlock-c lost=%ld expired=%ld\n", lost, expired);
        fflush(stdout);
    }
    _exit(0);   /* keep the keys: the orchestrator inspects and flushes the servers */
}

/* TLS row: the cost of a new connection. COUNT times: a new client, one
 * pair (connect, handshake: TLS for rediss://, AUTH/SCRIPT LOAD, then
 * acquire + release), free. Prints the median and mean per client. */
static int mode_connect(int argc, char **argv)
{
    if (argc < 5) die("usage", "connect URIS COUNT KEY");
    long count = atol(argv[3]);
    if (count < 1) die("connect", "COUNT must be >= 1");
    samples lat = { 0 };
    int64_t t0 = now_ns();
    for (long i = 0; i < count; i++) {
        int64_t a = now_ns();
        distlock_client *c = client(argv[2]);
        int rc = one_pair(c, argv[4], 0, NULL);
        if (rc != DISTLOCK_OK) fail("pair on a new client", rc);
        distlock_client_free(c);
        samples_add(&lat, now_ns() - a);
    }
    double mean_us = (double)(now_ns() - t0) / 1e3 / (double)count;
    printf("impl=distlock-c-connect count=%ld mean_us=%.1f p50_us=%.1f\n", count, mean_us,
           samples_pct_us(&lat, 0.50));
    return 0;
}

/* WAIT for replicas: one slice of pairs on c; pairs per second. */
static double wait_slice(distlock_client *c, const char *key, long slice_ms)
{
    long pairs = 0;
    int64_t t0 = now_ns(), end = t0 + (int64_t)slice_ms * 1000000;
    while (now_ns() < end) {
        int rc = one_pair(c, key, 0, NULL);
        if (rc != DISTLOCK_OK) fail("pair", rc);
        pairs++;
    }
    return pairs * 1e9 / (double)(now_ns() - t0);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A against B: both warmed up, then alternating slices of pairs on key (so
 * drift on this shared machine hits both alike); prints each median and the
 * ratio B/A under the names given, frees both clients. */
static int ab_slices(distlock_client *ca, distlock_client *cb, const char *key, long slice_ms,
                     int rounds, const char *name_a, const char *name_b, const char *ratio)
{
    int rc;
    if (rounds < 1 || rounds > 100) die("usage", "ROUNDS 1..100");
    double a[100], b[100];
    for (int w = 0; w < 200; w++)
        if ((rc = one_pair(ca, key, 0, NULL)) != DISTLOCK_OK || (rc = one_pair(cb, key, 0, NULL)))
            fail("warm-up pair", rc);
    for (int k = 0; k < rounds; k++) {
        a[k] = wait_slice(ca, key, slice_ms);
        b[k] = wait_slice(cb, key, slice_ms);
    }
    qsort(a, (size_t)rounds, sizeof(double), cmp_double);
    qsort(b, (size_t)rounds, sizeof(double), cmp_double);
    double ma = a[rounds / 2], mb = b[rounds / 2];
    printf("%s pairs/s median %.0f (min %.0f max %.0f)\n", name_a, ma, a[0], a[rounds - 1]);
    printf("%s pairs/s median %.0f (min %.0f max %.0f)\n", name_b, mb, b[0], b[rounds - 1]);
    printf("ratio %s %.3f over %d slices of %ld ms each\n", ratio, mb / ma, rounds, slice_ms);
    distlock_client_free(ca);
    distlock_client_free(cb);
    return 0;
}

static int mode_waitcost(int argc, char **argv)
{
    if (argc < 7) die("usage", "waitcost URIS REPLICAS SLICE_MS ROUNDS KEY");
    distlock_client *off = client(argv[2]), *on = client(argv[2]);
    long replicas = atol(argv[3]), slice_ms = atol(argv[4]);
    int rounds = atoi(argv[5]);
    const char *key = argv[6];
    int rc = distlock_client_set(on, DISTLOCK_OPT_WAIT_REPLICAS, replicas);
    if (rc != DISTLOCK_OK) fail("DISTLOCK_OPT_WAIT_REPLICAS", rc);
    /* 1 s: a busy machine may not run the replica within the default 100 ms
     * (that would be a failed pair, not a cost); the time it waits counts. */
    if ((rc = distlock_client_set(on, DISTLOCK_OPT_WAIT_TIMEOUT_MS, 1000)) != DISTLOCK_OK)
        fail("DISTLOCK_OPT_WAIT_TIMEOUT_MS", rc);
    char on_name[48];
    snprintf(on_name, sizeof on_name, "wait_replicas=%ld", replicas);
    return ab_slices(off, on, key, slice_ms, rounds, "wait_replicas=0", on_name, "wait/no-wait");
}

/* One acquire_many of keys[0..n) (wait 0) + release + free. */
static int one_many_pair(distlock_client *c, const char *const *keys, size_t n)
{
    distlock_lock *l = NULL;
    int rc = distlock_acquire_many(c, keys, n, 30000, 0, 0, NULL, &l);
    if (rc != DISTLOCK_OK) return rc;
    rc = distlock_release(l);
    distlock_lock_free(l);
    return rc;
}

/* pairs/s of a slice: n 0 is a plain lock of keys[0], else a set of n keys */
static double many_slice(distlock_client *c, const char *const *keys, size_t n, long slice_ms)
{
    long pairs = 0;
    int64_t t0 = now_ns(), end = t0 + (int64_t)slice_ms * 1000000;
    while (now_ns() < end) {
        int rc = n ? one_many_pair(c, keys, n) : one_pair(c, keys[0], 0, NULL);
        if (rc != DISTLOCK_OK) fail(n ? "acquire_many pair" : "pair", rc);
        pairs++;
    }
    return pairs * 1e9 / (double)(now_ns() - t0);
}

static int mode_manycost(int argc, char **argv)
{
    if (argc < 6) die("usage", "manycost URIS SLICE_MS ROUNDS KEY");
    distlock_client *c = client(argv[2]);
    long slice_ms = atol(argv[3]);
    int rounds = atoi(argv[4]);
    if (rounds < 1 || rounds > 100) die("usage", "ROUNDS 1..100");
    char names[4][128];
    const char *keys[4];
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof names[i], "%s:%d", argv[5], i);
        keys[i] = names[i];
    }
    static const size_t sizes[3] = { 0, 1, 4 };
    static const char *const label[3] = { "lock", "acquire_many 1 key", "acquire_many 4 keys" };
    double r[3][100];
    for (int w = 0; w < 200; w++)
        for (int v = 0; v < 3; v++) {
            int rc = sizes[v] ? one_many_pair(c, keys, sizes[v]) : one_pair(c, keys[0], 0, NULL);
            if (rc != DISTLOCK_OK) fail("warm-up pair", rc);
        }
    for (int k = 0; k < rounds; k++)
        for (int v = 0; v < 3; v++)
            r[v][k] = many_slice(c, keys, sizes[v], slice_ms);
    double med[3];
    for (int v = 0; v < 3; v++) {
        qsort(r[v], (size_t)rounds, sizeof(double), cmp_double);
        med[v] = r[v][rounds / 2];
        printf("%s pairs/s median %.0f (min %.0f max %.0f)\n", label[v], med[v], r[v][0],
               r[v][rounds - 1]);
    }
    printf("ratio 1 key/lock %.3f, 4 keys/lock %.3f over %d slices of %ld ms each\n",
           med[1] / med[0], med[2] / med[0], rounds, slice_ms);
    distlock_client_free(c);
    return 0;
}

#ifndef DISTLOCK_OPT_STATS
#define DISTLOCK_OPT_STATS 40  /* built against a header without it: the call fails */
#endif

static int mode_statscost(int argc, char **argv)
{
    if (argc < 6) die("usage", "statscost URIS SLICE_MS ROUNDS KEY");
    distlock_client *off = client(argv[2]), *on = client(argv[2]);
    long slice_ms = atol(argv[3]);
    int rounds = atoi(argv[4]);
    const char *key = argv[5];
    int rc = distlock_client_set(off, DISTLOCK_OPT_STATS, 0);
    if (rc != DISTLOCK_OK) fail("DISTLOCK_OPT_STATS", rc);
    return ab_slices(off, on, key, slice_ms, rounds, "stats=0", "stats=1", "stats/no-stats");
}

/* DISTLOCK_OPT_OWNER_INFO is an enum member, which #ifdef cannot see: the
 * owner metadata's macro tells a header that has it. */
#ifdef DISTLOCK_OWNER_LABEL_MAX
#define BENCH_OPT_OWNER_INFO DISTLOCK_OPT_OWNER_INFO
#else
#define BENCH_OPT_OWNER_INFO 50  /* built against a header without it: the call fails */
#endif

/* Not inlined: callgrind --toggle-collect=run_pairs counts this loop only. */
__attribute__((noinline)) static void run_pairs(distlock_client *c, const char *key, long pairs)
{
    for (long k = 0; k < pairs; k++) {
        int rc = one_pair(c, key, 0, NULL);
        if (rc != DISTLOCK_OK) fail("pair", rc);
    }
}

static int mode_count(int argc, char **argv)
{
    if (argc < 6) die("usage", "count URIS PAIRS KEY STATS(0|1|-) [OWNER(0|1)]");
    distlock_client *c = client(argv[2]);
    if (strcmp(argv[5], "-") != 0) {
        int rc = distlock_client_set(c, DISTLOCK_OPT_STATS, atol(argv[5]));
        if (rc != DISTLOCK_OK) fail("DISTLOCK_OPT_STATS", rc);
    }
    if (argc > 6 && !strcmp(argv[6], "1")) {
        int rc = distlock_client_set(c, BENCH_OPT_OWNER_INFO, 1);
        if (rc != DISTLOCK_OK) fail("DISTLOCK_OPT_OWNER_INFO", rc);
    }
    run_pairs(c, argv[4], 200);  /* warm-up: connections, scripts */
    run_pairs(c, argv[4], atol(argv[3]));
    distlock_client_free(c);
    return 0;
}

/* Two server lists, one client each, alternating slices of acquire/release
 * pairs on one key: e.g. a single master against a Redis Cluster. */
static int mode_vs(int argc, char **argv)
{
    if (argc < 7) die("usage", "vs URIS_A URIS_B SLICE_MS ROUNDS KEY");
    distlock_client *ca = client(argv[2]), *cb = client(argv[3]);
    return ab_slices(ca, cb, argv[6], atol(argv[4]), atoi(argv[5]), "A", "B", "B/A");
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) die("usage", "distlock_bench pairs|contend|hold|renew ...");
    if (!strcmp(argv[1], "pairs")) return mode_pairs(argc, argv);
    if (!strcmp(argv[1], "contend")) return mode_contend(argc, argv);
    if (!strcmp(argv[1], "hold")) return mode_hold(argc, argv, 0);
    if (!strcmp(argv[1], "renew")) return mode_hold(argc, argv, 1);
    if (!strcmp(argv[1], "connect")) return mode_connect(argc, argv);   /* TLS row */
    if (!strcmp(argv[1], "waitcost")) return mode_waitcost(argc, argv);
    if (!strcmp(argv[1], "manycost")) return mode_manycost(argc, argv);
    if (!strcmp(argv[1], "statscost")) return mode_statscost(argc, argv);
    if (!strcmp(argv[1], "count")) return mode_count(argc, argv);
    if (!strcmp(argv[1], "vs")) return mode_vs(argc, argv);             /* cluster row */
    die("unknown mode", argv[1]);
    return 2;
}
