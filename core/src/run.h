/* run.h -- what a run is, inside: shared by the files that make runs
 * (acquire.c, ops.c) and the driver (run.c), and by nothing else; the
 * rest of the library sees internal.h's opaque distlock__run.
 *
 * A run is one operation of layer 5 as a chain of rounds on one checked-out
 * connection set. Its operation gives a step function: called when the run
 * starts and each time the round in progress has ended, it either starts
 * the next round (distlock__run_round) and returns 1, or decides the run is
 * over (r->rc its status, the set checked in, the outputs written) and
 * returns 0. Whatever a round points at (calls, argv arrays, strings) lives
 * in the run until that round ends: never on a step's stack. */
#ifndef DISTLOCK_RUN_H
#define DISTLOCK_RUN_H

#include <stddef.h>

#include "internal.h"

struct distlock__run {
    distlock_client *c;
    distlock__connset *cs;      /* checked out by the start, in by the last step */
    int (*step)(distlock__run *r);
    distlock__round_run rr;     /* the round in progress */
    int in_round;
    int drop_unsent;            /* distlock__run_drop_unsent: for its later rounds too */
    int over;                   /* the step returned 0: finish may be called */
    int rc;
    /* The thread's detail as this run left it: the one it found at its
     * start, replaced by each detail one of its steps set (run.c); a copy
     * on the heap, NULL for none (""): the common case costs nothing. */
    char *detail;
    /* the operation's own state (acquire.c, ops.c) */
    max_align_t op[];
};

/* A run with `op_size` bytes of zeroed state for its operation at r->op,
 * and the thread's current detail; NULL on ENOMEM (no detail set: the
 * caller says what it wants said). One allocation: keep op_size small (a
 * run of the hot path under 1 KB stays in malloc's per-thread cache). */
distlock__run *distlock__run_new(distlock_client *c, size_t op_size);
/* Run the first step (the start's last act; never blocks). Afterwards the
 * run may already be over. */
void distlock__run_go(distlock__run *r, int (*step)(distlock__run *r));
/* From a step: begin a round on the run's set (its arrays must live until
 * it ends, that is until the next step). */
void distlock__run_round(distlock__run *r, const distlock__call *const *calls,
                         distlock__result *res, distlock__decide_fn decide, void *arg);

/* The release script's call for one ownership, built in place (acquire.c:
 * a lost attempt's undo and ops.c's release share it); its strings are
 * the call's own until distlock__release_call_free. */
typedef struct distlock__release_call {
    char sch[96];               /* the channel of the usual short keys */
    char *ch;                   /* sch, or the heap for a long key */
    char *ok;                   /* owner metadata on: its key (heap), else NULL */
    char *sh;                   /* a Redis Cluster node: the shard channel (heap), else NULL */
    const char *argv[4];
    size_t len[4];
    distlock__call call;
} distlock__release_call;
/* Queued even to a node known hung where `maybe` says it may hold it.
 * wake 0: the call publishes nothing (an empty channel). */
void distlock__release_call_make(distlock_client *c, distlock__release_call *rel, const char *key,
                                 const char *token, uint64_t maybe, int wake);
void distlock__release_call_free(distlock__release_call *rel);

#endif
