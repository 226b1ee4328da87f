/* stats.h -- layer 0 (base): a client's counters and histograms.
 *
 * One struct per client, updated with relaxed atomics from whichever thread
 * sees the event (callers, the watchdog, the transport inside a round) and
 * read, entry by entry, by distlock_client_stats(). Each layer counts what
 * it alone knows: the transport its nodes' errors, timeouts and reconnects
 * (through the pointer its owner gives it), the operations and the API the
 * outcomes. This file calls nothing but the C library.
 *
 * May call: clock.c (distlock__stats_span). Called by: every layer above. */
#ifndef DISTLOCK_STATS_H
#define DISTLOCK_STATS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Plain counters, in the order they are listed. */
enum {
    DISTLOCK__ST_ACQ_GRANTED = 0,
    DISTLOCK__ST_ACQ_REFUSED,      /* NOTACQUIRED: held by another owner */
    DISTLOCK__ST_RELEASED,
    DISTLOCK__ST_RELEASE_FAILED,   /* any status but OK (ENOTOWNER: it had expired) */
    DISTLOCK__ST_EXTENDED,         /* distlock_extend and reentrant re-acquires */
    DISTLOCK__ST_EXTEND_FAILED,
    DISTLOCK__ST_RENEWED,          /* watchdog: one lock renewed on a quorum */
    DISTLOCK__ST_RENEW_FAILED,     /* watchdog: one lock's renewal that renewed nothing */
    DISTLOCK__ST_LOST,             /* a held lock found lost (renewal, extend, reentry) */
    DISTLOCK__ST_COUNT
};

/* Histograms: fixed log-scale bucket bounds in microseconds, powers of two
 * from 2^7 = 128 us to 2^26 = 67.1 s (Prometheus' exponential buckets;
 * the bucket is found with one count-leading-zeros), plus +Inf; counts are
 * kept per bucket and made cumulative when read. */
#define DISTLOCK__HIST_MIN_LOG2 7
#define DISTLOCK__HIST_BOUNDS 20
enum { DISTLOCK__H_WAIT = 0, DISTLOCK__H_HOLD, DISTLOCK__H_COUNT };

typedef struct distlock__hist {
    _Atomic uint64_t bucket[DISTLOCK__HIST_BOUNDS + 1];  /* last: above every bound */
    _Atomic uint64_t sum_us;
} distlock__hist;

typedef struct distlock__node_stats {
    _Atomic uint64_t errors;      /* a round's request failed or got an error reply */
    _Atomic uint64_t timeouts;    /* of which: no reply in time */
    _Atomic uint64_t reconnects;  /* a connection opened where one had been before */
} distlock__node_stats;

/* failed acquires by status: index -status for DISTLOCK_STATUS_MIN..-1,
 * 0 for a status this version does not know */
#define DISTLOCK__ST_NSTATUS (1 - DISTLOCK__ST_STATUS_MIN)
#define DISTLOCK__ST_STATUS_MIN (-10)

typedef struct distlock__stats {
    _Atomic int on;               /* DISTLOCK_OPT_STATS: 1 (default) counts, 0 does not */
    int n;                        /* nodes */
    _Atomic uint64_t count[DISTLOCK__ST_COUNT];
    _Atomic uint64_t acq_failed[DISTLOCK__ST_NSTATUS];
    distlock__hist hist[DISTLOCK__H_COUNT];
    distlock__node_stats *node;   /* n of them */
} distlock__stats;

/* 0, or -1 on ENOMEM. Counting is on. */
int distlock__stats_init(distlock__stats *s, int n);
void distlock__stats_free(distlock__stats *s);

/* Counting on? Callers that would read the clock only for a histogram ask
 * first. s may be NULL (a transport without an owner's stats). */
static inline int distlock__stats_on(const distlock__stats *s)
{
    return s != NULL && atomic_load_explicit(&s->on, memory_order_relaxed);
}

static inline void distlock__stats_inc_on(distlock__stats *s, int which)
{
    atomic_fetch_add_explicit(&s->count[which], 1, memory_order_relaxed);
}

static inline void distlock__stats_inc(distlock__stats *s, int which)
{
    if (distlock__stats_on(s))
        distlock__stats_inc_on(s, which);
}

/* An acquire's wait from its attempt's clock reads (distlock__attempt):
 * t0 the first attempt's start (0: nothing was sent: 0), t1 the grant's
 * check (0: not granted: read the clock now). */
uint64_t distlock__now_us(void);
static inline uint64_t distlock__stats_span(uint64_t t0, uint64_t t1)
{
    if (t0 == 0)
        return 0;
    return (t1 != 0 ? t1 : distlock__now_us()) - t0;
}

/* An acquire call's outcome (OK, NOTACQUIRED or an error status) and how
 * long it took (its wait, whatever the outcome); counting on (the caller
 * checked). */
void distlock__stats_acquire(distlock__stats *s, int status, uint64_t elapsed_us);

/* One observation into histogram `hist`, counting on (the caller checked). */
static inline void distlock__stats_observe_on(distlock__stats *s, int hist, uint64_t us)
{
    /* le: the upper bound is inclusive. The smallest b with us <= 2^(MIN+b):
     * ceil(log2(us)) - MIN, clamped to 0..BOUNDS (BOUNDS: +Inf). */
    uint64_t x = (us - (us != 0)) | ((1u << DISTLOCK__HIST_MIN_LOG2) - 1);  /* 0 if us <= 2^MIN */
    int b = 64 - __builtin_clzll(x) - DISTLOCK__HIST_MIN_LOG2;
    if (b > DISTLOCK__HIST_BOUNDS)
        b = DISTLOCK__HIST_BOUNDS;
    atomic_fetch_add_explicit(&s->hist[hist].bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->hist[hist].sum_us, us, memory_order_relaxed);
}
/* Node i: a request failed or got an error reply (counted where that is
 * decided); of those, one that had no reply in time; a reconnect. */
void distlock__stats_node_error(distlock__stats *s, int i);
void distlock__stats_node_timeout(distlock__stats *s, int i);
void distlock__stats_node_reconnect(distlock__stats *s, int i);

/* Entries, in a fixed order: how many there are for this client, and entry
 * k's name (Prometheus-style, labels included) and value; 0, or -1 if k is
 * out of range. */
size_t distlock__stats_count(const distlock__stats *s);
int distlock__stats_entry(const distlock__stats *s, size_t k, char *name, size_t size,
                          uint64_t *value);

#endif
