/* keyset.c -- several keys as one lock (distlock_acquire_many): one
 * attempt that takes every key or none, its undo, and the release and
 * extend of a set, on N nodes.
 *
 * Each key of a set is a plain lock key (a string holding the set's one
 * token), so every other client sees today's locks. A plain or Sentinel
 * node gets one script call with every key (protocol.c, S_ACQUIRE_MANY:
 * all keys checked before any is written, so a refusal writes nothing).
 * A Redis Cluster routes a call by its first key's slot and refuses keys of
 * several slots in one script: the keys are grouped by slot, and the groups
 * taken one after another in ascending slot order, each with one call;
 * a refused group undoes the groups already taken. Every group is decided
 * by the quorum of the N nodes, as one lock is.
 *
 * Layer: 5 operations */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The keys in the order their calls go out: one group of all keys on
 * plain nodes; on a Redis Cluster one group per hash slot, by ascending
 * slot (within a slot, the caller's order). */
typedef struct plan {
    size_t n;
    size_t *ord;        /* ord[j]: index into the caller's keys */
    size_t *gstart;     /* group g: ord[gstart[g] .. gstart[g + 1]) */
    size_t ng;
    /* one call's arguments: up to 3 per key (key, fence key or channel,
     * fence), plus token, ttl and a flag */
    const char **argv;
    size_t *len;
    /* per key (on the heap: a set may have 256 keys of 1 KB): the fence
     * counter of an acquire, the channel(s) of a release */
    char (*side)[DISTLOCK__SIDEKEY_MAX];
    char (*shard)[DISTLOCK__SIDEKEY_MAX];
} plan;

typedef struct slot_ix { unsigned slot; size_t i; } slot_ix;

static int by_slot(const void *a, const void *b)
{
    const slot_ix *x = a, *y = b;
    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static void plan_free(plan *p)
{
    free(p->ord);
    free(p->gstart);
    free(p->argv);
    free(p->len);
    free(p->side);
    free(p->shard);
}

/* sides: per-key side names wanted (0: none, 1: side, 2: side and shard). */
static int plan_make(distlock_client *c, const char *const *keys, size_t n, int sides, plan *p)
{
    memset(p, 0, sizeof(*p));
    p->n = n;
    p->ord = malloc(n * sizeof(*p->ord));
    p->gstart = malloc((n + 1) * sizeof(*p->gstart));
    p->argv = malloc((3 * n + 4) * sizeof(*p->argv));
    p->len = malloc((3 * n + 4) * sizeof(*p->len));
    if (sides >= 1)
        p->side = malloc(n * sizeof(*p->side));
    if (sides >= 2 && c->tp.cl != NULL)
        p->shard = malloc(n * sizeof(*p->shard));
    slot_ix *s = c->tp.cl != NULL ? malloc(n * sizeof(*s)) : NULL;
    if (!p->ord || !p->gstart || !p->argv || !p->len || (sides >= 1 && !p->side) ||
        (sides >= 2 && c->tp.cl != NULL && !p->shard) || (c->tp.cl != NULL && !s)) {
        free(s);
        plan_free(p);
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    }
    if (s == NULL) {
        for (size_t j = 0; j < n; j++)
            p->ord[j] = j;
        p->gstart[0] = 0;
        p->gstart[1] = n;
        p->ng = 1;
        return DISTLOCK_OK;
    }
    for (size_t j = 0; j < n; j++)
        s[j] = (slot_ix){ distlock__key_slot(keys[j], strlen(keys[j])), j };
    qsort(s, n, sizeof(*s), by_slot);
    for (size_t j = 0; j < n; j++) {
        p->ord[j] = s[j].i;
        if (j == 0 || s[j].slot != s[j - 1].slot)
            p->gstart[p->ng++] = j;
    }
    p->gstart[p->ng] = n;
    free(s);
    return DISTLOCK_OK;
}

/* The node runs a Redis Cluster's variant of a script (SPUBLISH). */
static int cluster_node(const distlock_client *c, int i)
{
    return c->tp.kind[i]->sharded;
}

/* Compare-and-delete group g's keys on the nodes `which` selects, each key
 * waking its waiters (PUBLISH, or SPUBLISH in its slot on a cluster node)
 * unless !wake (empty channels: a lost attempt's grants that never made a
 * lock, acquire.c undo). Queued even to a node known hung where `maybe`
 * says it may hold them. */
static void release_group(distlock_client *c, distlock__connset *cs, plan *p,
                          const char *const *keys, size_t g, const char *token,
                          uint64_t which, uint64_t maybe, int hear_all, int wake,
                          distlock__result *res)
{
    const distlock__call **calls = res == cs->res_a ? cs->calls_a : cs->calls_b;
    size_t b = p->gstart[g], m = p->gstart[g + 1] - b;
    /* [keys token channels]; cluster nodes get a copy with the shard
     * channels */
    const char **av = p->argv;
    size_t *len = p->len;
    for (size_t j = 0; j < m; j++) {
        const char *k = keys[p->ord[b + j]];
        av[j] = k, len[j] = strlen(k);
        len[m + 1 + j] = wake ? distlock__channel_name(p->side[b + j], k) : 0;
        av[m + 1 + j] = wake ? p->side[b + j] : "";
    }
    av[m] = token, len[m] = strlen(token);
    distlock__call call = { .script = DISTLOCK__S_RELEASE_MANY, .nkeys = (int)m,
                            .argc = (int)(2 * m + 1), .argv = av, .argvlen = len, .trailing = 1,
                            .tag = distlock__lock_tag(keys[0], token),
                            .subject = DISTLOCK__LOCK_SUBJECT, .must_mask = maybe };
    distlock__call shcall = call;
    const char **sav = NULL;
    size_t *slen = NULL;
    if (p->shard != NULL && wake) {
        sav = malloc((2 * m + 1) * sizeof(*sav));
        slen = malloc((2 * m + 1) * sizeof(*slen));
        if (sav && slen) {
            memcpy(sav, av, (m + 1) * sizeof(*sav));
            memcpy(slen, len, (m + 1) * sizeof(*slen));
            for (size_t j = 0; j < m; j++) {
                slen[m + 1 + j] = distlock__shard_channel_name(p->shard[b + j],
                                                               keys[p->ord[b + j]]);
                sav[m + 1 + j] = p->shard[b + j];
            }
            shcall.script = DISTLOCK__S_RELEASE_MANY_SH;
            shcall.argv = sav, shcall.argvlen = slen;
        }
        /* without memory for it the classic PUBLISH goes out: the release
         * still runs, and waiters re-check */
    }
    for (int i = 0; i < c->n; i++)
        calls[i] = (which >> i & 1) ? (cluster_node(c, i) ? &shcall : &call) : NULL;
    distlock__keys_quorum kq = { &c->q, m };
    distlock__round(&c->tp, cs, calls, res,
                    hear_all ? distlock__decide_granted_keys : distlock__decide_quorum_keys, &kq);
    free(sav);
    free(slen);
}

/* The verdict of group g's release or extend round: each key needs its own
 * quorum of nodes that answered "done" for it (a node that lost key a may
 * still hold key b: the set stays protected while every key is held on a
 * quorum, as the watchdog counts). ENOTOWNER (the set is not ours) when
 * some key's answers prove it, whatever the other keys' failures; else the
 * first key without a quorum gives the status (EPROTO for a refusal,
 * ENOQUORUM). resent_ran: a resent release that finds a key gone counts as
 * ours having run there (ops.c); 2: every node's, the release being a
 * retry of one that got no verdict. */
static int group_verdict(distlock_client *c, const plan *p, const char *const *keys, size_t g,
                         const distlock__result *res, int refused, const char *op,
                         int resent_ran)
{
    size_t b = p->gstart[g], m = p->gstart[g + 1] - b;
    int first = DISTLOCK_OK;
    char *detail = NULL;
    for (size_t j = 0; j < m; j++) {
        distlock__tally t = distlock__count_key(res, c->n, j);
        for (int i = 0; resent_ran && i < c->n; i++)
            if ((res[i].resent || resent_ran == 2) &&
                distlock__reply_key_verdict(&res[i], j) == 0) {
                t.ok++;
                t.no--;
            }
        if (t.ok >= c->q.quorum)
            continue;
        int r = distlock__verdict(&c->q, res, t, refused, op, keys[p->ord[b + j]]);
        if (r == refused) {
            free(detail);
            return r;
        }
        if (first == DISTLOCK_OK) {
            first = r;
            detail = distlock__error_copy();
        }
    }
    if (first != DISTLOCK_OK)
        distlock__fail(first, "%s", detail ? detail : "");
    free(detail);
    return first;
}

/* Does the undo of a lost attempt release node i for this group? Each
 * attempt has a fresh token, so no key held our token before it: only
 * a node that answered "held by another" (the script writes nothing then),
 * or refused the request on its only send (its check comes before any
 * write), is left alone; one that granted, or may have (no answer, a
 * resend), is released. */
static int undo_needed(const distlock__result *r)
{
    if (!r->sent)
        return 0;
    int v = distlock__reply_verdict(r);
    if (v == 0)
        return 0;
    if (v == 1 || distlock__wait_short(r))
        return 1;
    return !(distlock__reply_refused(r) && !r->resent);
}

/* The fence of each key of group g: the highest counter among the nodes
 * that granted; then, unless every such node holds it already, raised on
 * them where the set is still ours (as acquire.c's raise_fence, per key). */
static int raise_fences(distlock_client *c, distlock__connset *cs, plan *p,
                        const distlock__many_req *rq, size_t g, const distlock__result *res,
                        int64_t *fences, uint64_t tag)
{
    size_t b = p->gstart[g], m = p->gstart[g + 1] - b;
    int behind = 0, rc;
    for (size_t j = 0; j < m; j++) {
        int64_t f = -1;
        for (int i = 0; i < c->n; i++)
            if (distlock__reply_verdict(&res[i]) == 1 &&
                distlock__reply_int(&res[i], j + 1) > f)
                f = distlock__reply_int(&res[i], j + 1);
        fences[p->ord[b + j]] = f;
        for (int i = 0; i < c->n; i++)
            if (distlock__reply_verdict(&res[i]) == 1 &&
                distlock__reply_int(&res[i], j + 1) != f)
                behind = 1;
    }
    if (!behind)
        return DISTLOCK_OK;
    char (*fv)[DISTLOCK__NUM_LEN] = malloc(m * sizeof(*fv));
    if (fv == NULL)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    const char **av = p->argv;
    size_t *len = p->len;
    for (size_t j = 0; j < m; j++) {
        size_t k = p->ord[b + j];
        av[j] = rq->keys[k], len[j] = strlen(rq->keys[k]);
        av[m + j] = p->side[b + j], len[m + j] = strlen(p->side[b + j]);
        snprintf(fv[j], sizeof(fv[j]), "%" PRId64, fences[k]);
        av[2 * m + 1 + j] = fv[j], len[2 * m + 1 + j] = strlen(fv[j]);
    }
    av[2 * m] = rq->token, len[2 * m] = strlen(rq->token);
    distlock__call raise = { .script = DISTLOCK__S_RAISE_MANY, .nkeys = (int)(2 * m),
                             .argc = (int)(3 * m + 1), .argv = av, .argvlen = len, .tag = tag,
                             .subject = DISTLOCK__LOCK_SUBJECT };
    distlock__set_wait(c, &raise);
    for (int i = 0; i < c->n; i++)
        cs->calls_b[i] = distlock__reply_verdict(&res[i]) == 1 ? &raise : NULL;
    distlock__round(&c->tp, cs, cs->calls_b, cs->res_b, distlock__decide_cannot_win, &c->q);
    rc = distlock__verdict(&c->q, cs->res_b, distlock__count(cs->res_b, c->n),
                           DISTLOCK_NOTACQUIRED,
                           "fencing (the set was lost before its fences reached a quorum)",
                           rq->keys[p->ord[b]]);
    distlock__round_clear(cs->res_b, c->n);
    free(fv);
    return rc;
}

int distlock__acquire_many_once(distlock_client *c, const distlock__many_req *rq,
                                distlock__many_attempt *att)
{
    int fencing = (rq->flags & DISTLOCK_FENCING) != 0, rc;
    int64_t *fences = att->fences;
    plan p;

    memset(att, 0, sizeof(*att));
    att->fences = fences;
    if ((rc = distlock__check_usable(c)) != DISTLOCK_OK)
        return rc;
    /* a fence counter goes into the script of its key: same slot */
    for (size_t k = 0; fencing && c->tp.cl != NULL && k < rq->nkeys; k++)
        if (!distlock__sidekeys_in_slot(rq->keys[k]))
            return distlock__fail(DISTLOCK_EINVAL,
                                  "key '%s' has a '}' but no {hash tag}: its fence counter "
                                  "cannot share its Redis Cluster slot (use a key with a "
                                  "non-empty {tag}, or one without '}')", rq->keys[k]);
    if ((rc = plan_make(c, rq->keys, rq->nkeys, 2, &p)) != DISTLOCK_OK)
        return rc;
    uint64_t *undo_mask = calloc(p.ng, sizeof(*undo_mask));
    /* the groups whose grants made a quorum: their undo wakes waiters */
    unsigned char *made = calloc(p.ng, 1);
    if (undo_mask == NULL || made == NULL) {
        free(undo_mask);
        free(made);
        plan_free(&p);
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    }
    distlock__connset *cs = distlock__checkout(c);
    if (cs == NULL) {
        free(undo_mask);
        free(made);
        plan_free(&p);
        return DISTLOCK_ENOMEM;
    }
    uint64_t tag = distlock__lock_tag(rq->keys[0], rq->token), maybe = 0;
    char ttl[DISTLOCK__NUM_LEN];
    size_t ttllen = distlock__ltoa(ttl, rq->ttl_ms);
    distlock__result *res = cs->res_a;
    size_t g;

    att->t0_us = distlock__now_us();
    for (g = 0; g < p.ng && rc == DISTLOCK_OK; g++) {
        size_t b = p.gstart[g], m = p.gstart[g + 1] - b, a = 0;
        for (size_t j = 0; j < m; j++) {
            const char *k = rq->keys[p.ord[b + j]];
            p.argv[a] = k, p.len[a++] = strlen(k);
        }
        for (size_t j = 0; fencing && j < m; j++) {
            distlock__sidekey(p.side[b + j], rq->keys[p.ord[b + j]], DISTLOCK__FENCE_SUFFIX);
            p.argv[a] = p.side[b + j], p.len[a] = strlen(p.side[b + j]), a++;
        }
        int nkeys = (int)a;
        p.argv[a] = rq->token, p.len[a++] = strlen(rq->token);
        p.argv[a] = ttl, p.len[a++] = ttllen;
        p.argv[a] = fencing ? "1" : "0", p.len[a++] = 1;
        distlock__call call = { .script = DISTLOCK__S_ACQUIRE_MANY, .nkeys = nkeys,
                                .argc = (int)a, .argv = p.argv, .argvlen = p.len, .tag = tag,
                                .subject = DISTLOCK__LOCK_SUBJECT };
        distlock__set_wait(c, &call);
        for (int i = 0; i < c->n; i++)
            cs->calls_a[i] = &call;
        distlock__round(&c->tp, cs, cs->calls_a, res,
                        fencing ? distlock__decide_cannot_win : distlock__decide_quorum, &c->q);
        distlock__tally t = distlock__count(res, c->n);
        made[g] = t.ok >= c->q.quorum;
        const char *named = rq->keys[p.ord[b]];  /* the key the verdict names */
        int seen = 0;
        for (int i = 0; i < c->n; i++) {
            if (undo_needed(&res[i]))
                undo_mask[g] |= 1ull << i;
            if (res[i].sent && distlock__reply_verdict(&res[i]) != 0)
                maybe |= 1ull << i;
            int64_t at = distlock__reply_int(&res[i], 2);
            if (distlock__reply_verdict(&res[i]) != 0 || at < 1 || (size_t)at > m)
                continue;
            /* held by another: the first such key seen is the one to wait for */
            if (!seen) {
                att->held_at = p.ord[b + (size_t)at - 1];
                named = rq->keys[att->held_at];
                seen = 1;
            }
            if (distlock__reply_int(&res[i], 1) > att->holder_pttl)
                att->holder_pttl = (long)distlock__reply_int(&res[i], 1);
        }
        if ((rc = distlock__check_usable(c)) == DISTLOCK_OK)
            rc = distlock__verdict(&c->q, res, t, DISTLOCK_NOTACQUIRED, "acquire", named);
        if (rc == DISTLOCK_OK && fencing)
            rc = raise_fences(c, cs, &p, rq, g, res, att->fences, tag);
        distlock__round_clear(res, c->n);
    }
    if (rc == DISTLOCK_OK) {
        att->valid_until_us = distlock__valid_until(&c->q, att->t0_us, rq->ttl_ms);
        if ((att->t1_us = distlock__now_us()) >= att->valid_until_us)
            rc = distlock__fail(DISTLOCK_ETIMEDOUT,
                                "the %zu keys of '%s' acquired but their %ld ms ttl was used up",
                                rq->nkeys, rq->keys[0], rq->ttl_ms);
    }
    if (rc == DISTLOCK_OK) {
        att->set_id = cs->id;
        att->maybe = maybe;
    } else {
        /* Nothing is held after a lost attempt: every group it may have
         * taken is given back (g: the groups sent, the failed one too). The
         * detail of the failure stays. A group taken on a quorum was held
         * (its keys' waiters may have seen it): its undo wakes them as a
         * release does. One taken on fewer nodes never made a lock: its
         * undo wakes no one, else this set's own waiter, woken by it,
         * would try again at once, win those nodes again and spin while
         * the key it waits for is held on a quorum (acquire.c undo). */
        char *detail = distlock__error_copy();
        for (size_t k = 0; k < g; k++)
            if (undo_mask[k]) {
                release_group(c, cs, &p, rq->keys, k, rq->token, undo_mask[k], ~0ull, 0, made[k],
                              cs->res_b);
                distlock__round_clear(cs->res_b, c->n);
            }
        distlock__fail(rc, "%s", detail ? detail : "");
        free(detail);
    }
    distlock__checkin(c, cs);
    free(undo_mask);
    free(made);
    plan_free(&p);
    return rc;
}

int distlock__release_many(distlock_client *c, const char *const *keys, size_t nkeys,
                           const char *token, uint64_t valid_until_us, uint64_t set_pref,
                           uint64_t maybe, int retried, uint64_t *sent_us)
{
    int rc;
    plan p;
    if ((rc = distlock__check_usable(c)) != DISTLOCK_OK)
        return rc;
    if ((rc = plan_make(c, keys, nkeys, 2, &p)) != DISTLOCK_OK)
        return rc;
    distlock__connset *cs = set_pref ? distlock__checkout_pref(c, set_pref) : distlock__checkout(c);
    if (cs == NULL) {
        plan_free(&p);
        return DISTLOCK_ENOMEM;
    }
    distlock__result *res = cs->res_a;
    uint64_t t0 = distlock__now_us();
    char *detail = NULL;
    if (sent_us)
        *sent_us = t0;
    /* every group is released, whatever the others answered; the first
     * failure is the call's (the first "not ours" before any other: a key
     * proved not ours is the set's verdict) */
    for (size_t g = 0; g < p.ng; g++) {
        release_group(c, cs, &p, keys, g, token, ~0ull, maybe, retried && t0 < valid_until_us, 1,
                      res);
        /* within the lease, a resent (or retried) release finding a key
         * gone: ours ran */
        int r = group_verdict(c, &p, keys, g, res, DISTLOCK_ENOTOWNER, "release",
                              t0 < valid_until_us ? (retried ? 2 : 1) : 0);
        distlock__round_clear(res, c->n);
        if (r != DISTLOCK_OK && (rc == DISTLOCK_OK ||
                                 (r == DISTLOCK_ENOTOWNER && rc != DISTLOCK_ENOTOWNER))) {
            free(detail);
            rc = r;
            detail = distlock__error_copy();
        }
    }
    if (rc != DISTLOCK_OK)
        distlock__fail(rc, "%s", detail ? detail : "");
    free(detail);
    distlock__checkin(c, cs);
    plan_free(&p);
    return rc;
}

int distlock__extend_many(distlock_client *c, const char *const *keys, size_t nkeys,
                          const char *token, long ttl_ms, uint64_t *valid_until_us)
{
    char ttl[DISTLOCK__NUM_LEN];
    distlock__connset *cs;
    int rc;
    plan p;

    if ((rc = plan_make(c, keys, nkeys, 0, &p)) != DISTLOCK_OK)
        return rc;
    if ((rc = distlock__begin(c, &cs)) != DISTLOCK_OK) {
        plan_free(&p);
        return rc;
    }
    distlock__result *res = cs->res_a;
    size_t ttllen = distlock__ltoa(ttl, ttl_ms);
    uint64_t t0 = distlock__now_us();
    for (size_t g = 0; g < p.ng && rc == DISTLOCK_OK; g++) {
        size_t b = p.gstart[g], m = p.gstart[g + 1] - b;
        for (size_t j = 0; j < m; j++)
            p.argv[j] = keys[p.ord[b + j]], p.len[j] = strlen(p.argv[j]);
        p.argv[m] = token, p.len[m] = strlen(token);
        p.argv[m + 1] = ttl, p.len[m + 1] = ttllen;
        distlock__call call = { .script = DISTLOCK__S_EXTEND_MANY, .nkeys = (int)m,
                                .argc = (int)m + 2, .argv = p.argv, .argvlen = p.len,
                                .tag = distlock__lock_tag(keys[0], token),
                                .subject = DISTLOCK__LOCK_SUBJECT };
        distlock__set_wait(c, &call);
        for (int i = 0; i < c->n; i++)
            cs->calls_a[i] = &call;
        distlock__keys_quorum kq = { &c->q, m };
        distlock__round(&c->tp, cs, cs->calls_a, res, distlock__decide_quorum_keys, &kq);
        rc = group_verdict(c, &p, keys, g, res, DISTLOCK_ENOTOWNER, "extend", 0);
        distlock__round_clear(res, c->n);
    }
    if (rc == DISTLOCK_OK) {
        /* Each key's quorum was renewed by requests sent at or after t0
         * (the first group's send): the shortest per-key validity, the one
         * the watchdog computes from its batch's send. */
        uint64_t until = distlock__valid_until(&c->q, t0, ttl_ms);
        if (distlock__now_us() >= until)
            rc = distlock__fail(DISTLOCK_ETIMEDOUT, "extend of the %zu keys of '%.200s' took "
                                "longer than its ttl", nkeys, keys[0]);
        else if (valid_until_us)
            *valid_until_us = until;
    }
    distlock__checkin(c, cs);
    plan_free(&p);
    return rc;
}

int distlock__held_release(distlock_client *c, const distlock__held *h, uint64_t valid_until_us,
                           int retried, uint64_t *sent_us)
{
    if (h->keys != NULL)
        return distlock__release_many(c, (const char *const *)h->keys, h->nkeys, h->token,
                                      valid_until_us, h->set_pref, h->maybe, retried, sent_us);
    return distlock__release_lease(c, h->quorum, h->key, h->token, valid_until_us, h->set_pref,
                                   h->maybe, retried, sent_us);
}

int distlock__held_extend(distlock_client *c, const distlock__held *h, long ttl_ms,
                          uint64_t *valid_until_us)
{
    if (h->keys != NULL)
        return distlock__extend_many(c, (const char *const *)h->keys, h->nkeys, h->token,
                                     ttl_ms, valid_until_us);
    return distlock__extend_lease(c, h->quorum, h->key, h->token, ttl_ms, valid_until_us);
}
