/* quorum.c -- what N nodes' replies add up to. One code path
 * serves 1..N nodes: N = 1 is simply quorum 1.
 *
 * Layer: 3 quorum */
#include <stdio.h>

#include "quorum.h"

/* The tally; with a token, a "held" whose key holds that very token counts
 * as granted (the _own stoppers). One pass: it runs at every step of every round. */
static inline __attribute__((always_inline)) distlock__tally
tally(const distlock__result *res, int n, const char *token)
{
    distlock__tally t = { 0, 0, 0, 0 };
    for (int i = 0; i < n; i++) {
        if (res[i].state == DISTLOCK__R_UNSENT)
            continue;
        switch (distlock__reply_verdict(&res[i])) {
        case 1: t.ok++; break;
        case 0:
            if (token && distlock__reply_holds_own(&res[i], token))
                t.ok++;
            else
                t.no++;
            break;
        case -1: t.failed++; break;
        default: t.silent++; break;
        }
    }
    return t;
}

distlock__tally distlock__count(const distlock__result *res, int n)
{
    return tally(res, n, NULL);
}

/* Every node that refused, for the verdict below. */
static int count_refusals(const distlock__result *res, int n)
{
    int refusals = 0;
    for (int i = 0; i < n; i++)
        refusals += distlock__reply_refused(&res[i]);
    return refusals;
}

/* A quorum can no longer grant, and the verdict is settled. After a
 * refusal, the nodes still unheard decide between an error and "held" /
 * "not ours" (distlock__verdict): hear them, so the status does not depend
 * on which node answered first. */
static int cannot_win(const distlock__result *res, int n, const distlock__quorum *q,
                      distlock__tally t)
{
    if (t.no + t.failed <= n - q->quorum)
        return 0;
    return t.silent == 0 || t.no > n - q->quorum || count_refusals(res, n) == 0;
}

int distlock__decide_quorum(const distlock__result *res, int n, void *arg)
{
    const distlock__quorum *q = arg;
    distlock__tally t = distlock__count(res, n);
    return t.ok >= q->quorum || cannot_win(res, n, q, t);
}

/* Fencing acquires stop early only when they can no longer win: hearing
 * from every node gives the highest counter any live node has, and the
 * fence is then written to every node that granted, so a later owner
 * finds it even if a minority of nodes lose their data in between. */
int distlock__decide_cannot_win(const distlock__result *res, int n, void *arg)
{
    const distlock__quorum *q = arg;
    return cannot_win(res, n, q, distlock__count(res, n));
}

int distlock__decide_quorum_own(const distlock__result *res, int n, void *arg)
{
    const distlock__quorum_own *o = arg;
    distlock__tally t = tally(res, n, o->token);
    return t.ok >= o->q->quorum || cannot_win(res, n, o->q, t);
}

int distlock__decide_cannot_win_own(const distlock__result *res, int n, void *arg)
{
    const distlock__quorum_own *o = arg;
    return cannot_win(res, n, o->q, tally(res, n, o->token));
}

int distlock__decide_granted_own(const distlock__result *res, int n, void *arg)
{
    const distlock__quorum_own *o = arg;
    return tally(res, n, o->token).ok >= o->q->quorum;
}

int distlock__decide_granted(const distlock__result *res, int n, void *arg)
{
    const distlock__quorum *q = arg;
    return distlock__count(res, n).ok >= q->quorum;
}

distlock__tally distlock__count_key(const distlock__result *res, int n, size_t j)
{
    distlock__tally t = { 0, 0, 0, 0 };
    for (int i = 0; i < n; i++) {
        if (res[i].state == DISTLOCK__R_UNSENT)
            continue;
        switch (distlock__reply_key_verdict(&res[i], j)) {
        case 1: t.ok++; break;
        case 0: t.no++; break;
        case -1: t.failed++; break;
        default: t.silent++; break;
        }
    }
    return t;
}

int distlock__decide_quorum_keys(const distlock__result *res, int n, void *arg)
{
    const distlock__keys_quorum *kq = arg;
    int all = 1;
    for (size_t j = 0; j < kq->m; j++) {
        distlock__tally t = distlock__count_key(res, n, j);
        if (cannot_win(res, n, kq->q, t))
            return 1;  /* the set's verdict is settled by this key */
        all &= t.ok >= kq->q->quorum;
    }
    return all;
}

int distlock__decide_granted_keys(const distlock__result *res, int n, void *arg)
{
    const distlock__keys_quorum *kq = arg;
    for (size_t j = 0; j < kq->m; j++)
        if (distlock__count_key(res, n, j).ok < kq->q->quorum)
            return 0;
    return 1;
}

int distlock__fail_nodes(const distlock__quorum *q, const distlock__result *res, int status,
                         const char *what)
{
    char buf[480];
    size_t off = (size_t)snprintf(buf, sizeof(buf), "%s", what);
    int worst = DISTLOCK_OK;
    for (int i = 0; i < q->n && off < sizeof(buf); i++) {
        const distlock__result *r = &res[i];
        if (r->state == DISTLOCK__R_FAILED) {
            off += (size_t)snprintf(buf + off, sizeof(buf) - off, "; %s", r->err);
            if (worst == DISTLOCK_OK || r->status == DISTLOCK_EPROTO)
                worst = r->status;
        } else if (distlock__wait_short(r)) {
            /* granted, but not acknowledged by enough replicas: undone */
            if (r->acked < 0)
                off += (size_t)snprintf(buf + off, sizeof(buf) - off,
                                        "; %s: WAIT for %d replicas failed: %s", q->nodes[i].uri,
                                        r->wait_n, r->wait_err);
            else
                off += (size_t)snprintf(buf + off, sizeof(buf) - off,
                                        "; %s: %lld of %d replicas acknowledged within %ld ms",
                                        q->nodes[i].uri, r->acked, r->wait_n, r->wait_ms);
        } else if (r->state == DISTLOCK__R_DONE && distlock__reply_verdict(r) == -1) {
            const char *e = distlock__reply_error(r);
            off += (size_t)snprintf(buf + off, sizeof(buf) - off, "; %s: %s", q->nodes[i].uri,
                                    e ? e : "unexpected reply");
            if (!distlock__reply_unavailable(r))
                worst = DISTLOCK_EPROTO;
            else if (worst == DISTLOCK_OK)
                worst = DISTLOCK_ECONN;  /* a cluster down or migrating: unreachable for now */
        }
    }
    /* One node: its own error is more useful than "no quorum". */
    if (status == DISTLOCK_ENOQUORUM && q->n == 1 && worst != DISTLOCK_OK)
        status = worst;
    distlock__fail(status, "%s", buf);
    return status;
}

int distlock__verdict(const distlock__quorum *q, const distlock__result *res, distlock__tally t,
                      int refused, const char *op, const char *key)
{
    char msg[400];
    if (t.ok >= q->quorum)
        return DISTLOCK_OK;
    int refusals = count_refusals(res, q->n);
    /* Held (or not ours) unless the failures alone rule a quorum out: a
     * round that stopped early leaves some nodes unheard, not failed.
     * A node that refused (ACL, WRONGTYPE, OOM) said nothing about who holds
     * the key, so "held by another" or "not ours" needs the nodes that say
     * so positively to rule a quorum out by themselves: more than
     * n - quorum of them (a majority for an odd n; half for an even n:
     * 2 of 4, quorum 3). Then the verdict does not depend on the refusals:
     * had every refusing node granted, the answer would be the same. With
     * fewer, a refusal is an error (EPROTO), never a loss. A refusal on a
     * minority is no error at all when a quorum granted (above), like a
     * minority that is down.
     * Why not "a majority" for an even n: with 4 nodes, 2 held by another
     * owner, 1 refusing and 1 granting, no acquire of ours can win while
     * that owner's key stays on those 2 (3 needed, 2 possible): "held" is
     * the truth, and a waiting acquire should wait for it (once it goes,
     * 3 nodes can grant even if the refusing one keeps refusing), not stop
     * on EPROTO. An extend with 2 of 4 "not ours" can never renew a quorum
     * again, whatever the refusing node would say: the lock is lost when
     * its current lease runs out, and saying so now is the safe side for
     * its holder. */
    /* More than n - quorum nodes saying "held" (or "not ours") decide it by
     * themselves, whatever the others would say: a round that stopped on
     * them leaves the rest unsent or unheard, not failed. This matters
     * when the quorum is more than a majority (a semaphore's permit on N
     * nodes may need all of them): one full node is "held" even while
     * another node's connection is still being made. With a majority
     * quorum, failures and "held" cannot both pass n - quorum. */
    if (t.no <= q->n - q->quorum && (t.failed > q->n - q->quorum || refusals > 0)) {
        if (q->n == 1)  /* the node's own failure follows */
            snprintf(msg, sizeof(msg), "%s of '%.200s' failed", op, key);
        else if (refusals > 0)
            snprintf(msg, sizeof(msg),
                     "%s of '%.200s': refused by %d of %d nodes, %d granted (need %d)", op, key,
                     refusals, q->n, t.ok, q->quorum);
        else
            snprintf(msg, sizeof(msg),
                     "%s of '%.200s': %d of %d nodes answered, %d granted (need %d)", op, key,
                     t.ok + t.no, q->n, t.ok, q->quorum);
        /* A refusal is the operator's to fix (retrying will not help):
         * it names the status even when other nodes were down too. */
        return distlock__fail_nodes(q, res, refusals > 0 ? DISTLOCK_EPROTO : DISTLOCK_ENOQUORUM,
                                    msg);
    }
    /* "Not ours" is a loss only when the nodes that say so rule a quorum
     * out by themselves. With n - quorum of them or fewer, the nodes that
     * still had it, failed or were not heard make a quorum between them:
     * the lock may still be held there (a node that granted is paused, one
     * that said "not ours" carries another owner's stray grant), so this
     * is no verdict (retry), never "lost" said of a lock still held. An
     * acquire's "held" stays a verdict: a waiting acquire waits on it. */
    if (refused == DISTLOCK_ENOTOWNER && t.no <= q->n - q->quorum) {
        snprintf(msg, sizeof(msg),
                 "%s of '%.200s': no verdict: %d of %d nodes said not ours, %d still had it, "
                 "the others did not answer (it may still be held on a quorum)",
                 op, key, t.no, q->n, t.ok);
        return distlock__fail_nodes(q, res, DISTLOCK_ENOQUORUM, msg);
    }
    int o;
    if (refused == DISTLOCK_NOTACQUIRED)
        o = snprintf(msg, sizeof(msg), "%s of '%.200s': held by another owner (%d of %d nodes said "
                     "held", op, key, t.no, q->n);
    else
        o = snprintf(msg, sizeof(msg),
                     "%s of '%.200s': not held with this token on a quorum (%d of %d nodes "
                     "said not ours, %d still had it", op, key, t.no, q->n, t.ok);
    if (o > 0 && (size_t)o < sizeof(msg))
        snprintf(msg + o, sizeof(msg) - (size_t)o, "%s%s",
                 refusals > 0 ? ", enough without the refusing nodes" : "",
                 refused == DISTLOCK_NOTACQUIRED ? ")" : "): expired, lost or already released");
    return distlock__fail_nodes(q, res, refused, msg);
}

static long drift_ms(const distlock__quorum *q, long ttl_ms)
{
    return (long)((int64_t)ttl_ms * q->drift_ppm / 1000000) + q->drift_min_ms;
}

uint64_t distlock__valid_until(const distlock__quorum *q, uint64_t t0_us, long ttl_ms)
{
    long drift = drift_ms(q, ttl_ms);
    return ttl_ms > drift ? t0_us + (uint64_t)(ttl_ms - drift) * 1000u : 0;
}

uint64_t distlock__renew_at(const distlock__quorum *q, uint64_t until_us, uint64_t done_us,
                           long ttl_ms)
{
    long drift = drift_ms(q, ttl_ms);
    uint64_t life = ttl_ms > drift ? (uint64_t)(ttl_ms - drift) * 1000u : 0;
    if (until_us < life)
        return 0;
    /* Counted from the send, as the validity is: a late confirmation must
     * not push the next renewal past the lease's end on the servers. */
    uint64_t sent = until_us - life;
    uint64_t at = sent + (uint64_t)ttl_ms * 1000u / 3u;
    /* The next renewal must be confirmed before this validity ends: sent at
     * least one round trip (as long as the last one took) before it. */
    uint64_t rtt = done_us > sent ? done_us - sent : 0;
    uint64_t latest = until_us > rtt ? until_us - rtt : 0;
    return at < latest ? at : latest;
}

int distlock__check_ttl(const distlock__quorum *q, long ttl_ms)
{
    if (ttl_ms <= 0 || ttl_ms > DISTLOCK_TTL_MAX)
        return distlock__fail(DISTLOCK_EINVAL, "ttl_ms %ld out of range 1..%ld", ttl_ms,
                              (long)DISTLOCK_TTL_MAX);
    /* A lease no longer than the clock-drift allowance can never be valid. */
    if (q && ttl_ms <= drift_ms(q, ttl_ms))
        return distlock__fail(DISTLOCK_EINVAL,
                              "ttl_ms %ld is not above the clock-drift allowance of %ld ms",
                              ttl_ms, drift_ms(q, ttl_ms));
    return DISTLOCK_OK;
}

int distlock__lease_quorum(const distlock__quorum *q, long permits)
{
    /* H holders with k grants each need H * k grants; a node carries at
     * most P: H * k <= n * P, so with k > n * P / (P + 1) never P + 1. */
    if (permits <= 0)
        return q->quorum;
    return (int)((long long)q->n * permits / (permits + 1)) + 1;
}

void distlock__quorum_with(const distlock__quorum *q, int need, distlock__quorum *out)
{
    out->n = q->n;
    out->quorum = need;
    out->nodes = q->nodes;
    atomic_init(&out->drift_ppm, atomic_load(&q->drift_ppm));
    atomic_init(&out->drift_min_ms, atomic_load(&q->drift_min_ms));
}
