/* quorum.h -- layer 3: what N nodes' replies add up to (quorum.c). One
 * tally, one verdict (granted / held / no quorum / not the owner), one
 * validity rule, one renewal schedule.
 *
 * May call: protocol (reply classification), transport types, base.
 * Called by: operations, background threads. */
#ifndef DISTLOCK_QUORUM_H
#define DISTLOCK_QUORUM_H

#include "protocol.h"

typedef struct distlock__quorum {
    int n;
    int quorum;                       /* n/2 + 1 */
    const distlock__node_cfg *nodes;  /* for the detail messages */
    /* clock drift allowance: ttl*ppm/1e6 + min; set by distlock_client_set()
     * while other threads' calls read them: atomic */
    _Atomic long drift_ppm;
    _Atomic long drift_min_ms;
} distlock__quorum;

typedef struct distlock__tally { int ok, no, failed, silent; } distlock__tally;

distlock__tally distlock__count(const distlock__result *res, int n);
/* Round stoppers (arg: the distlock__quorum): once a quorum granted or no
 * longer can; only once it no longer can (fencing acquires hear every
 * live node). */
int distlock__decide_quorum(const distlock__result *res, int n, void *arg);
int distlock__decide_cannot_win(const distlock__result *res, int n, void *arg);
/* The same for an acquire whose nodes that answered "the key holds this
 * token" are refreshed into grants afterwards (acquire.c refresh_own, not
 * a strict acquire): they count as granted, so a round does not stop on
 * them as if another owner held the key before a free node answered. */
typedef struct distlock__quorum_own { const distlock__quorum *q; const char *token; } distlock__quorum_own;
int distlock__decide_quorum_own(const distlock__result *res, int n, void *arg);
int distlock__decide_cannot_win_own(const distlock__result *res, int n, void *arg);
/* A quorum granted, those nodes counted: whether refreshing them can win. */
int distlock__decide_granted_own(const distlock__result *res, int n, void *arg);
/* Only once a quorum granted: a retried release hears every other node,
 * since the "not ours" of a node its first try emptied count as its own. */
int distlock__decide_granted(const distlock__result *res, int n, void *arg);

/* Replies that answer per key (a set's release or extend): the tally of
 * key j (0-based), and the round stopper (arg: a distlock__keys_quorum)
 * once every key has a quorum or some key no longer can. */
typedef struct distlock__keys_quorum { const distlock__quorum *q; size_t m; } distlock__keys_quorum;
distlock__tally distlock__count_key(const distlock__result *res, int n, size_t j);
int distlock__decide_quorum_keys(const distlock__result *res, int n, void *arg);
/* Only once every key has a quorum (a retried release, as above). */
int distlock__decide_granted_keys(const distlock__result *res, int n, void *arg);

/* The one verdict of a round of lock requests: DISTLOCK_OK when a quorum
 * granted; else EPROTO when a node refused (distlock__reply_refused) and no
 * more than n - quorum said "held" / "not ours" (too few to rule a quorum
 * out by themselves); else ENOQUORUM (one node:
 * that node's own status) when the failures alone rule a quorum out; else
 * `refused`: NOTACQUIRED (held by another owner) for an acquire, ENOTOWNER
 * for a release or extend. The detail names the operation `op` and the key. */
int distlock__verdict(const distlock__quorum *q, const distlock__result *res, distlock__tally t,
                      int refused, const char *op, const char *key);
/* Record `status` with `what` and every node's failure as the detail;
 * with one node, its own status replaces ENOQUORUM. Returns the status. */
int distlock__fail_nodes(const distlock__quorum *q, const distlock__result *res, int status,
                         const char *what);

/* The one validity rule: a lease taken (or renewed) by requests sent at
 * t0_us for ttl_ms lasts until t0 + ttl - drift; 0 if that is not positive. */
uint64_t distlock__valid_until(const distlock__quorum *q, uint64_t t0_us, long ttl_ms);
/* The one renewal schedule, for a lease valid until until_us (taken or
 * renewed by requests sent at until - (ttl - drift), confirmed at done_us):
 * ttl/3 after that send, and never later than one round trip (as long as
 * the last one) before until_us, so the next renewal can be confirmed
 * while the lease is still valid. A time already past means "now". */
uint64_t distlock__renew_at(const distlock__quorum *q, uint64_t until_us, uint64_t done_us,
                           long ttl_ms);
/* The grants one lease needs on n nodes: `permits` 0 (a lock, a read
 * lock), the quorum n/2 + 1; a permit of a semaphore of `permits`,
 * floor(n * P / (P + 1)) + 1, so P + 1 holders never fit on n nodes of P
 * permits each (docs/semaphores.md). */
int distlock__lease_quorum(const distlock__quorum *q, long permits);
/* *out = q with quorum `need` (the verdict and the stoppers of one lease). */
void distlock__quorum_with(const distlock__quorum *q, int need, distlock__quorum *out);

/* The one TTL check: 1..DISTLOCK_TTL_MAX and above the drift allowance. */
int distlock__check_ttl(const distlock__quorum *q, long ttl_ms);

#endif
