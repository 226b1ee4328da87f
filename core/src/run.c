/* run.c -- the driver of runs: a layer-5 operation (a chain of rounds) that
 * never blocks, advanced by whoever waits for its descriptors (the blocking
 * calls: distlock__run_wait's poll(); the non-blocking API: its own loop
 * over many runs). The operations' steps are acquire.c's and ops.c's; run.h
 * says what a run holds.
 *
 * Error details: the thread's detail is one buffer per thread, and runs
 * interleaved on one thread must not mix theirs. A run keeps its own: the
 * thread's at its start, then whatever detail each of its steps sets (the
 * buffer is cleared before a step and read after it); finish puts it back
 * on the calling thread. A blocking call therefore leaves the detail
 * exactly as the same code did when it ran on the thread directly.
 *
 * Layer: 5 operations */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

distlock__run *distlock__run_new(distlock_client *c, size_t op_size)
{
    distlock__run *r = distlock__zalloc(sizeof(*r) + op_size);  /* one per operation */
    if (r == NULL)
        return NULL;
    r->c = c;
    const char *e = distlock_last_error();
    if (e[0] != '\0' && (r->detail = strdup(e)) == NULL) {
        free(r);
        return NULL;
    }
    return r;
}

/* One step, its detail (if it set one) kept as the run's. */
static void run_step(distlock__run *r)
{
    const char *e = distlock_last_error();
    distlock__clear_error();
    if (r->step(r) == 0)
        r->over = 1;
    if (e[0] != '\0') {
        char *d = strdup(e);
        if (d != NULL) {  /* else the run keeps its previous detail */
            free(r->detail);
            r->detail = d;
        }
    }
}

void distlock__run_go(distlock__run *r, int (*step)(distlock__run *r))
{
    r->step = step;
    run_step(r);
}

void distlock__run_round(distlock__run *r, const distlock__call *const *calls,
                         distlock__result *res, distlock__decide_fn decide, void *arg)
{
    distlock__round_begin(&r->c->tp, r->cs, &r->rr, calls, res, decide, arg);
    r->rr.drop_unsent = r->drop_unsent;
    r->in_round = 1;
}

void distlock__run_drop_unsent(distlock__run *r)
{
    r->drop_unsent = 1;
    r->rr.drop_unsent = 1;  /* the round under way (a later one copies it) */
}

int distlock__run_interest(distlock__run *r, struct pollfd **pfd, uint64_t *next_us)
{
    for (;;) {
        if (r->in_round) {
            int np = distlock__round_interest(&r->c->tp, r->cs, &r->rr, next_us);
            if (np > 0) {
                *pfd = r->cs->pfd;
                return np;
            }
            distlock__round_end(&r->c->tp, r->cs, &r->rr);
            r->in_round = 0;
        }
        if (r->over) {
            *pfd = NULL;
            *next_us = UINT64_MAX;
            return 0;
        }
        run_step(r);  /* the round ended: the next one, or the end */
    }
}

void distlock__run_advance(distlock__run *r)
{
    if (r->in_round)
        distlock__round_advance(&r->c->tp, r->cs, &r->rr);
}

int distlock__run_finish(distlock__run *r)
{
    int rc = r->rc;
    const char *d = r->detail ? r->detail : "";
    /* (a blocking call's thread already has it, most often "": no copy) */
    if (strcmp(distlock_last_error(), d) != 0)
        distlock__fail(rc, "%s", d);
    free(r->detail);
    free(r);
    return rc;
}

int distlock__run_wait_fd(distlock__run *r, int cfd)
{
    struct pollfd *pfd;
    uint64_t next;
    int np;

    /* The connection set's poll set has room for one more (pool.c). A
     * fired cancel stays readable (one fired before the call too: the
     * first poll sees it): watched until then, not after. (A failed poll()
     * waits a little there: the nodes' own deadlines still end the round,
     * interest fails them.) */
    while ((np = distlock__run_interest(r, &pfd, &next)) > 0) {
        int w = np;
        if (cfd >= 0) {
            pfd[w].fd = cfd;
            pfd[w].events = POLLIN;
            pfd[w++].revents = 0;
        }
        if (distlock__poll_wait(pfd, w, next) > 0) {
            if (cfd >= 0 && pfd[np].revents) {
                distlock__run_drop_unsent(r);
                cfd = -1;
            }
            distlock__run_advance(r);
        }
    }
    return distlock__run_finish(r);
}

int distlock__run_wait(distlock__run *r)
{
    return distlock__run_wait_fd(r, -1);
}
