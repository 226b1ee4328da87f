/* stats.c -- a client's counters and histograms (stats.h).
 *
 * Relaxed atomics: each counter is exact on its own; a reader sees every
 * event that happened before its call, but no consistent cut across
 * counters (a histogram's _count may run one ahead of its buckets while an
 * event is being recorded). That is what a scraper needs, at the cost of
 * one uncontended atomic add per event.
 *
 * Layer: 0 base */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

static uint64_t bound_us(size_t b)
{
    return 1ull << (DISTLOCK__HIST_MIN_LOG2 + b);
}

static const char *const counter_names[DISTLOCK__ST_COUNT] = {
    "acquire_granted_total", "acquire_refused_total", "release_total", "release_failed_total",
    "extend_total", "extend_failed_total", "renewal_total", "renewal_failed_total",
    "lost_total",
};

/* index -status; 0: a status this version does not know */
static const char *const status_names[DISTLOCK__ST_NSTATUS] = {
    "other", "EINVAL", "ENOMEM", "ECONN", "ETIMEDOUT", "ENOQUORUM",
    "ENOTOWNER", "EPROTO", "ECLOSED", "ECANCELED", "ESYS",
};

static const char *const hist_names[DISTLOCK__H_COUNT] = { "acquire_wait_us", "hold_us" };

static const char *const node_names[3] = {
    "node_errors_total", "node_timeouts_total", "node_reconnects_total",
};

#define HIST_ENTRIES (DISTLOCK__HIST_BOUNDS + 3)  /* buckets, +Inf, _sum, _count */
#define FIXED_ENTRIES (DISTLOCK__ST_COUNT + DISTLOCK__ST_NSTATUS + DISTLOCK__H_COUNT * HIST_ENTRIES)

int distlock__stats_init(distlock__stats *s, int n)
{
    memset(s, 0, sizeof(*s));
    s->node = calloc((size_t)(n > 0 ? n : 1), sizeof(*s->node));
    if (s->node == NULL)
        return -1;
    s->n = n;
    atomic_store(&s->on, 1);
    return 0;
}

void distlock__stats_free(distlock__stats *s)
{
    free(s->node);
    s->node = NULL;
    s->n = 0;
}

static void add(_Atomic uint64_t *v, uint64_t d)
{
    atomic_fetch_add_explicit(v, d, memory_order_relaxed);
}

void distlock__stats_acquire(distlock__stats *s, int status, uint64_t elapsed_us)
{
    if (status == 0)
        add(&s->count[DISTLOCK__ST_ACQ_GRANTED], 1);
    else if (status > 0)
        add(&s->count[DISTLOCK__ST_ACQ_REFUSED], 1);
    else
        add(&s->acq_failed[status >= DISTLOCK__ST_STATUS_MIN ? -status : 0], 1);
    distlock__stats_observe_on(s, DISTLOCK__H_WAIT, elapsed_us);
}

void distlock__stats_node_error(distlock__stats *s, int i)
{
    if (distlock__stats_on(s) && i >= 0 && i < s->n)
        add(&s->node[i].errors, 1);
}

void distlock__stats_node_timeout(distlock__stats *s, int i)
{
    if (distlock__stats_on(s) && i >= 0 && i < s->n)
        add(&s->node[i].timeouts, 1);
}

void distlock__stats_node_reconnect(distlock__stats *s, int i)
{
    if (distlock__stats_on(s) && i >= 0 && i < s->n)
        add(&s->node[i].reconnects, 1);
}

size_t distlock__stats_count(const distlock__stats *s)
{
    return FIXED_ENTRIES + 3 * (size_t)s->n;
}

static uint64_t load(const _Atomic uint64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

/* Entry k of histogram h: cumulative buckets, +Inf, _sum, _count. */
static void hist_entry(const distlock__hist *h, const char *base, size_t k, char *name,
                       size_t size, uint64_t *value)
{
    uint64_t cum = 0;
    size_t upto = k <= DISTLOCK__HIST_BOUNDS ? k : DISTLOCK__HIST_BOUNDS;
    for (size_t b = 0; b <= upto; b++)
        cum += load(&h->bucket[b]);
    if (k < DISTLOCK__HIST_BOUNDS) {
        snprintf(name, size, "%s_bucket{le=\"%llu\"}", base, (unsigned long long)bound_us(k));
        *value = cum;
    } else if (k == DISTLOCK__HIST_BOUNDS) {
        snprintf(name, size, "%s_bucket{le=\"+Inf\"}", base);
        *value = cum;
    } else if (k == DISTLOCK__HIST_BOUNDS + 1) {
        snprintf(name, size, "%s_sum", base);
        *value = load(&h->sum_us);
    } else {
        snprintf(name, size, "%s_count", base);
        *value = cum;
    }
}

int distlock__stats_entry(const distlock__stats *s, size_t k, char *name, size_t size,
                          uint64_t *value)
{
    if (k < DISTLOCK__ST_COUNT) {
        snprintf(name, size, "%s", counter_names[k]);
        *value = load(&s->count[k]);
        return 0;
    }
    k -= DISTLOCK__ST_COUNT;
    if (k < DISTLOCK__ST_NSTATUS) {
        /* EINVAL first, "other" last */
        size_t idx = k + 1 < DISTLOCK__ST_NSTATUS ? k + 1 : 0;
        snprintf(name, size, "acquire_failed_total{status=\"%s\"}", status_names[idx]);
        *value = load(&s->acq_failed[idx]);
        return 0;
    }
    k -= DISTLOCK__ST_NSTATUS;
    if (k < DISTLOCK__H_COUNT * HIST_ENTRIES) {
        hist_entry(&s->hist[k / HIST_ENTRIES], hist_names[k / HIST_ENTRIES], k % HIST_ENTRIES,
                   name, size, value);
        return 0;
    }
    k -= DISTLOCK__H_COUNT * HIST_ENTRIES;
    if (k >= 3 * (size_t)s->n)
        return -1;
    const distlock__node_stats *ns = &s->node[k / 3];
    const _Atomic uint64_t *v[3] = { &ns->errors, &ns->timeouts, &ns->reconnects };
    snprintf(name, size, "%s{node=\"%zu\"}", node_names[k % 3], k / 3);
    *value = load(v[k % 3]);
    return 0;
}
