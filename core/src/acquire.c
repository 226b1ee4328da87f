/* acquire.c -- one acquire attempt on N nodes, and its undo.
 *
 * An attempt is one round (SET NX GET, or the acquire / fair script), then,
 * only when needed: a refresh of nodes that already held our own token, a
 * second fencing round, leaving the queues of a fair lock won elsewhere,
 * and the undo of a lost attempt on every node it may have reached.
 *
 * Layer: 5 operations */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "internal.h"

/* The first round's script arguments at most: 5 keys, 10 values, NULL. */
#define FIRST_ROUND_ARGS 16

/* Side keys and channel: only fair, fencing and owner-metadata acquires
 * need them (on the heap: 4 KB the common path's stack does not carry). */
typedef struct sidekeys {
    char fk[DISTLOCK__SIDEKEY_MAX], q[DISTLOCK__SIDEKEY_MAX], qt[DISTLOCK__SIDEKEY_MAX],
        ch[DISTLOCK__SIDEKEY_MAX], sh[DISTLOCK__SIDEKEY_MAX];  /* sh: ch on a cluster */
    /* a waiting writer: the registry of waiting writers, else "" (no field
     * in attempt_ctx: its frame is on the deepest path of the stack budget) */
    char wk[DISTLOCK__SIDEKEY_MAX];
    /* owner metadata (DISTLOCK_OPT_OWNER_INFO): its key and fields */
    char ok[DISTLOCK__SIDEKEY_MAX], host[DISTLOCK__HOST_LEN], pid[DISTLOCK__NUM_LEN],
        prog[256], since[DISTLOCK__NUM_LEN], label[DISTLOCK_OWNER_LABEL_MAX + 1];
    /* the first round's script arguments (up to 5 keys and 10 values) */
    const char *argv[FIRST_ROUND_ARGS];
    size_t len[FIRST_ROUND_ARGS];
} sidekeys;

/* What an attempt sends, for the steps after the first round. */
typedef struct attempt_ctx {
    distlock_client *c;
    distlock__connset *cs;
    const distlock__acq_req *rq;
    uint64_t tag;
    int fencing;
    int owner;          /* store owner metadata (sk->ok and the fields) */
    sidekeys *sk;       /* fair, fencing, owner or a waiting writer, else NULL */
    /* Nodes whose first-round reply showed our own token already there
     * (distlock__reply_held_own): `own`; of those, `prior` on the request's
     * first send (not resent), so the key held it before this attempt. */
    uint64_t own, prior;
    char ttl[DISTLOCK__NUM_LEN], qttl[DISTLOCK__NUM_LEN];
} attempt_ctx;

/* Who we are, for the owner metadata of an acquire. */
static void owner_fields(distlock_client *c, const char *key, sidekeys *sk)
{
    struct timeval tv;
    distlock__sidekey(sk->ok, key, DISTLOCK__OWNER_SUFFIX);
    if (gethostname(sk->host, sizeof(sk->host)) != 0)
        snprintf(sk->host, sizeof(sk->host), "?");
    sk->host[sizeof(sk->host) - 1] = '\0';
    snprintf(sk->pid, sizeof(sk->pid), "%d", (int)distlock__getpid());
    snprintf(sk->prog, sizeof(sk->prog), "%s", program_invocation_short_name);
    gettimeofday(&tv, NULL);
    snprintf(sk->since, sizeof(sk->since), "%lld",
             (long long)tv.tv_sec * 1000 + (long long)tv.tv_usec / 1000);
    distlock__lock(c);
    memcpy(sk->label, c->owner_label, sizeof(sk->label));
    pthread_mutex_unlock(&c->mu);
}

distlock__tally distlock__release_round(distlock_client *c, distlock__connset *cs,
                                        const char *key, const char *token, uint64_t which,
                                        distlock__result *res, uint64_t maybe)
{
    return distlock__release_round_q(c, &c->q, cs, key, token, which, res, maybe, 0);
}

distlock__tally distlock__release_round_q(distlock_client *c, const distlock__quorum *q,
                                          distlock__connset *cs, const char *key,
                                          const char *token, uint64_t which,
                                          distlock__result *res, uint64_t maybe, int hear_all)
{
    const distlock__call **calls = res == cs->res_a ? cs->calls_a : cs->calls_b;
    /* The channel: on the stack for the usual short keys, else the heap
     * (keys go up to 1 KB; every entry point keeps under 4 KB of stack). */
    char sch[96], *ch = sch;
    if (strlen(key) + 10 > sizeof(sch) && (ch = malloc(DISTLOCK__SIDEKEY_MAX)) == NULL) {
        distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        ch = sch;
        snprintf(sch, sizeof(sch), "distlock:");  /* the release still runs; waiters re-check */
    }
    size_t chlen = ch == sch && strlen(key) + 10 > sizeof(sch) ? 9 : distlock__channel_name(ch, key);
    const char *argv[4] = { key, token, ch, NULL };
    size_t len[4] = { strlen(key), strlen(token), chlen, 0 };
    /* Queued even to a node known hung: if it comes back it must run our
     * release after whatever acquire of ours it still owes. */
    distlock__call call = { .script = DISTLOCK__S_RELEASE, .nkeys = 1, .argc = 3, .argv = argv,
                            .argvlen = len, .undo = 1, .tag = distlock__lock_tag(key, token),
                            .must_mask = maybe };
    /* Owner metadata on: its key goes too (KEYS[2]), deleted with the lock. */
    char *ok = atomic_load_explicit(&c->owner_info, memory_order_relaxed)
                   ? malloc(DISTLOCK__SIDEKEY_MAX) : NULL;
    if (ok) {
        distlock__sidekey(ok, key, DISTLOCK__OWNER_SUFFIX);
        argv[3] = argv[2], len[3] = len[2];
        argv[2] = argv[1], len[2] = len[1];
        argv[1] = ok, len[1] = strlen(ok);
        call.nkeys = 2, call.argc = 4;
    }
    /* A Redis Cluster node wakes its waiters with SPUBLISH, in the key's
     * slot (on the heap: this frame is on the deepest path of the 4 KB
     * stack budget; without it the release still runs, waiters re-check) */
    char *sh = c->tp.cl != NULL ? malloc(DISTLOCK__SIDEKEY_MAX) : NULL;
    if (sh)
        distlock__call_sharded(&call, DISTLOCK__S_RELEASE_SH, call.argc - 1, sh, key);
    for (int i = 0; i < c->n; i++)
        calls[i] = (which >> i & 1) ? &call : NULL;
    distlock__round(&c->tp, cs, calls, res,
                    hear_all ? distlock__decide_granted : distlock__decide_quorum, (void *)q);
    free(sh);
    if (ch != sch)
        free(ch);
    if (ok)  /* no call on the common path */
        free(ok);
    return distlock__count(res, c->n);
}

/* Nodes that answered with our own token get their TTL refreshed by
 * compare-and-PEXPIRE and then count as granted: a retry after a lost reply,
 * or a re-acquire (not for strict acquires: plain SET NX semantics, unless
 * the call itself was resent on a fresh connection, whose first send is
 * what set it). Rare, so it may cost a second round trip. */
static void refresh_own(attempt_ctx *a, distlock__result *res)
{
    distlock_client *c = a->c;
    const distlock__call **calls = a->cs->calls_b;
    distlock__result *res2 = a->cs->res_b;
    int strict = (a->rq->flags & DISTLOCK_STRICT) != 0, any = 0;
    const char *argv[4] = { a->rq->key, a->rq->token, a->ttl };
    size_t len[4] = { strlen(a->rq->key), strlen(a->rq->token), strlen(a->ttl) };
    distlock__call ext = { .script = DISTLOCK__S_EXTEND, .nkeys = 1, .argc = 3, .argv = argv,
                           .argvlen = len, .tag = a->tag };
    if (a->owner) {  /* the owner metadata's TTL too */
        argv[3] = a->ttl, argv[2] = a->rq->token, argv[1] = a->sk->ok;
        len[3] = len[2], len[2] = len[1], len[1] = strlen(a->sk->ok);
        ext.nkeys = 2, ext.argc = 4;
    }
    distlock__set_wait(c, &ext);

    for (int i = 0; i < c->n; i++) {
        calls[i] = NULL;
        if (distlock__reply_holds_own(&res[i], a->rq->token) && (!strict || res[i].resent)) {
            calls[i] = &ext;
            any = 1;
        }
    }
    if (!any)
        return;
    distlock__round(&c->tp, a->cs, calls, res2, NULL, NULL);
    for (int i = 0; i < c->n; i++) {
        if (calls[i] == NULL)
            continue;
        /* The EXTEND reply ({1} or {0}) replaces the SET reply. */
        freeReplyObject(res[i].reply);
        res[i] = res2[i];
        res2[i].reply = NULL;
    }
}

/* The first round: SET NX GET when no script is needed (the common case:
 * it tells whether we set it, or who holds it), else the acquire or fair
 * script; the script also serves servers without SET ... GET. */
static void first_round(attempt_ctx *a, distlock__result *res)
{
    distlock_client *c = a->c;
    const distlock__acq_req *rq = a->rq;
    /* a plain acquire's script has 4 arguments; the others take theirs
     * from the heap (sk), so the common path's stack stays small */
    const char *argv_plain[5];
    size_t len_plain[5];
    const char **argv = a->sk ? a->sk->argv : argv_plain;
    size_t *len = a->sk ? a->sk->len : len_plain;
    int k = 0, nkeys;
    int writers = a->sk && a->sk->wk[0];
    size_t ttllen = distlock__ltoa(a->ttl, rq->ttl_ms);

    argv[k++] = rq->key;
    if (rq->fair) {
        argv[k++] = a->sk->q;
        argv[k++] = a->sk->qt;
    }
    if (a->fencing)
        argv[k++] = a->sk->fk;
    if (a->owner)
        argv[k++] = a->sk->ok;  /* the last key but the writers' registry */
    if (writers)
        argv[k++] = a->sk->wk;  /* the script finds it by its last argument */
    nkeys = k;
    argv[k++] = rq->token;
    argv[k++] = a->ttl;
    argv[k++] = (rq->flags & DISTLOCK_STRICT) ? "1" : "0";
    int chan_arg = -1;
    if (rq->fair) {
        argv[k++] = a->qttl;
        chan_arg = k;
        argv[k++] = a->sk->ch;
    }
    if (a->owner) {
        argv[k++] = a->sk->host;
        argv[k++] = a->sk->pid;
        argv[k++] = a->sk->prog;
        argv[k++] = a->sk->since;
        argv[k++] = a->sk->label;
    }
    /* the acquire script's last argument: how long a waiting writer's
     * intent stands on a key holding read locks (0: trying once) */
    if (!rq->fair)
        argv[k++] = a->qttl;
    if (writers)
        argv[k++] = rq->writer;
    for (int i = 0; i < k; i++)
        len[i] = strlen(argv[i]);
    distlock__call script = { .script = rq->fair ? DISTLOCK__S_FAIR : DISTLOCK__S_ACQUIRE,
                              .nkeys = nkeys, .argc = k, .argv = argv, .argvlen = len,
                              .tag = a->tag };
    if (chan_arg >= 0 && c->tp.cl != NULL)
        distlock__call_sharded(&script, DISTLOCK__S_FAIR_SH, chan_arg, a->sk->sh,
                               rq->key);
    const char *pargv[7] = { "SET", rq->key, rq->token, "NX", "PX", a->ttl, "GET" };
    size_t plen[7] = { 3, len[0], strlen(rq->token), 2, 2, ttllen, 3 };
    /* WRONGTYPE: the key holds read locks (a zset), which the script
     * handles; the hot path stays one SET on a string key */
    distlock__call plain = { .script = -1, .argc = 7, .argv = pargv, .argvlen = plen,
                             .fallback = &script, .fallback_on = DISTLOCK__SYNTAX_ERROR,
                             .fallback_also = "WRONGTYPE",
                             .fallback_below = DISTLOCK__SET_GET_SINCE, .tag = a->tag };
    distlock__set_wait(c, &script);
    distlock__set_wait(c, &plain);
    int use_plain = !rq->fair && !a->fencing && !a->owner && !atomic_load(&c->no_set_get);
    for (int i = 0; i < c->n; i++)
        a->cs->calls_a[i] = use_plain ? &plain : &script;
    /* A strict acquire (a token the caller chose) that loses hears every
     * node before its undo: a node left unheard counts as "may have been
     * created by this attempt" and is released (undo_node), and with a
     * caller's token that key may be another holder's lock with this very
     * token (a second process of one Laravel owner). Only a node that does
     * not answer in time is undone unheard. A win still ends at the quorum. */
    int strict = (rq->flags & DISTLOCK_STRICT) != 0;
    distlock__round(&c->tp, a->cs, a->cs->calls_a, res,
                    a->fencing ? (strict ? NULL : distlock__decide_cannot_win)
                               : strict ? distlock__decide_granted : distlock__decide_quorum,
                    &c->q);
    for (int i = 0; i < c->n; i++)
        if (res[i].fell_back == 1)
            atomic_store(&c->no_set_get, 1);  /* Redis < 7: the script from now on */
}

/* The first round of a read lock or a semaphore permit: the zset script
 * (protocol.c), stopped once its quorum q granted or no longer can. Not
 * inlined: its arrays stay off the frame of the lock's path. */
static __attribute__((noinline)) void first_round_zset(attempt_ctx *a, distlock__result *res,
                                                        const distlock__quorum *q)
{
    distlock_client *c = a->c;
    const distlock__acq_req *rq = a->rq;
    char permits[DISTLOCK__NUM_LEN];
    distlock__ltoa(a->ttl, rq->ttl_ms);
    distlock__ltoa(permits, rq->permits);
    const char *argv[5] = { rq->key, rq->token, a->ttl, rq->kind == DISTLOCK__READ ? "r" : "s",
                            permits };
    size_t len[5];
    for (int i = 0; i < 5; i++)
        len[i] = strlen(argv[i]);
    distlock__call script = { .script = DISTLOCK__S_ZACQUIRE, .nkeys = 1, .argc = 5,
                              .argv = argv, .argvlen = len, .tag = a->tag };
    distlock__set_wait(c, &script);
    for (int i = 0; i < c->n; i++)
        a->cs->calls_a[i] = &script;
    distlock__round(&c->tp, a->cs, a->cs->calls_a, res, distlock__decide_quorum, (void *)q);
}

/* What the attempt saw, for the wait loop. */
static void observe(const attempt_ctx *a, const distlock__result *res, distlock__tally t,
                    distlock__attempt *att)
{
    att->granted = t.ok;
    att->behind = 0;
    att->holder_pttl = 0;
    att->head = 0;
    att->split = 0;
    att->readers = 0;
    for (int i = 0; i < a->c->n; i++) {
        int v = distlock__reply_verdict(&res[i]);
        const redisReply *x = res[i].reply;
        if (v == 0 && !a->rq->fair && x && x->type == REDIS_REPLY_ARRAY && x->elements >= 4 &&
            x->element[3]->type == REDIS_REPLY_STRING)
            att->readers = 1;  /* the acquire script's {0, pttl, 0, 'r'} */
        if (v == 1 && a->rq->fair)
            att->head = 1;  /* we were first there */
        if (v != 0)
            continue;
        if (a->rq->fair && distlock__reply_int(&res[i], 2) == 0)
            att->head = 1;
        if (distlock__reply_int(&res[i], 0) == 2)
            att->behind++;
        else if (distlock__reply_int(&res[i], 1) > att->holder_pttl)
            att->holder_pttl = (long)distlock__reply_int(&res[i], 1);
    }
}

/* The waiter a fair "behind" reply names first ({2, 0, rank, first}) if
 * every such reply names the same one, else NULL (several, or an older
 * script's reply without the name). */
static const char *first_ahead(const distlock_client *c, const distlock__result *res)
{
    const char *name = NULL;
    for (int i = 0; i < c->n; i++) {
        if (distlock__reply_verdict(&res[i]) != 0 || distlock__reply_int(&res[i], 0) != 2)
            continue;
        const redisReply *x = res[i].reply;
        const redisReply *f = x->elements >= 4 ? x->element[3] : NULL;
        if (f == NULL || f->type != REDIS_REPLY_STRING || f->len == 0 ||
            (name && strcmp(name, f->str) != 0))
            return NULL;
        name = f->str;
    }
    return name;
}

/* A fair attempt that lost, granted on some nodes and behind another waiter
 * on others, with free nodes enough for a quorum: is it a real split of the
 * queues' order? Real if that waiter is still queued (so behind us) where we
 * were granted, or if that cannot be told (several waiters first, a node
 * that does not answer). Not one if it is gone from every such node: it was
 * ahead of us everywhere and is leaving, as a previous owner leaves the
 * queues of the nodes it did not win, and one of them may answer us before
 * that leave lands while its release elsewhere already did. One ZSCORE
 * round, on the granted nodes only (after the undo gave them back). */
static int real_split(attempt_ctx *a, const distlock__result *res, distlock__tally t,
                      const distlock__attempt *att)
{
    distlock_client *c = a->c;
    if (!a->rq->fair || t.ok == 0 || att->behind == 0 || t.ok + att->behind < c->quorum)
        return 0;
    const char *name = first_ahead(c, res);
    if (name == NULL)
        return 1;
    const char *argv[3] = { "ZSCORE", a->sk->q, name };
    size_t len[3] = { 6, strlen(a->sk->q), strlen(name) };
    distlock__call zs = { .script = -1, .argc = 3, .argv = argv, .argvlen = len };
    distlock__result *res2 = a->cs->res_b;
    for (int i = 0; i < c->n; i++)
        a->cs->calls_b[i] = distlock__reply_verdict(&res[i]) == 1 ? &zs : NULL;
    distlock__round(&c->tp, a->cs, a->cs->calls_b, res2, NULL, NULL);
    int real = 0;
    for (int i = 0; i < c->n; i++)
        if (a->cs->calls_b[i] && (res2[i].state != DISTLOCK__R_DONE || res2[i].reply == NULL ||
                                  res2[i].reply->type != REDIS_REPLY_NIL))
            real = 1;
    distlock__round_clear(res2, c->n);
    return real;
}

/* The fence is the highest counter among the nodes that granted (we heard
 * from every live node). Unless all of them already hold that value, raise
 * it on the nodes where we still own the lock: a later owner (whose quorum
 * intersects ours) then reads at least this value, even if a minority of
 * nodes lose their data first. */
static int raise_fence(attempt_ctx *a, const distlock__result *res, distlock__tally t,
                       int64_t *fence)
{
    distlock_client *c = a->c;
    int at_max = 0, rc = DISTLOCK_OK;
    for (int i = 0; i < c->n; i++)
        if (distlock__reply_verdict(&res[i]) == 1 && distlock__reply_int(&res[i], 1) > *fence)
            *fence = distlock__reply_int(&res[i], 1);
    for (int i = 0; i < c->n; i++)
        if (distlock__reply_verdict(&res[i]) == 1 && distlock__reply_int(&res[i], 1) == *fence)
            at_max++;
    if (at_max == t.ok)
        return DISTLOCK_OK;
    char fv[DISTLOCK__NUM_LEN];
    distlock__result *res2 = a->cs->res_b;
    const distlock__call **calls2 = a->cs->calls_b;
    snprintf(fv, sizeof(fv), "%" PRId64, *fence);
    const char *argv[4] = { a->rq->key, a->sk->fk, a->rq->token, fv };
    size_t len[4] = { strlen(argv[0]), strlen(argv[1]), strlen(argv[2]), strlen(fv) };
    distlock__call raise = { .script = DISTLOCK__S_RAISE, .nkeys = 2, .argc = 4, .argv = argv,
                             .argvlen = len, .tag = a->tag };
    distlock__set_wait(c, &raise);
    for (int i = 0; i < c->n; i++)
        calls2[i] = distlock__reply_verdict(&res[i]) == 1 ? &raise : NULL;
    distlock__round(&c->tp, a->cs, calls2, res2, distlock__decide_cannot_win, &c->q);
    rc = distlock__verdict(&c->q, res2, distlock__count(res2, c->n), DISTLOCK_NOTACQUIRED,
                           "fencing (the lock was lost before the fence reached a quorum)",
                           a->rq->key);
    distlock__round_clear(res2, c->n);
    return rc;
}

/* Won: on nodes that did not grant (the previous holder's release still on
 * its way there, say) we are still queued; leave, or our stale entry would
 * stand first in those queues. */
static void leave_where_lost(attempt_ctx *a, const distlock__result *res)
{
    distlock_client *c = a->c;
    distlock__result *res4 = a->cs->res_b;
    const distlock__call **calls4 = a->cs->calls_b;
    const char *argv[5] = { a->sk->q, a->sk->qt, a->rq->key, a->rq->token, a->sk->ch };
    size_t len[5];
    for (int i = 0; i < 5; i++)
        len[i] = strlen(argv[i]);
    distlock__call leave = { .script = DISTLOCK__S_LEAVE, .nkeys = 3, .argc = 5, .argv = argv,
                             .argvlen = len, .undo = 1, .tag = a->tag };
    if (c->tp.cl != NULL)
        distlock__call_sharded(&leave, DISTLOCK__S_LEAVE_SH, 4, a->sk->sh, a->rq->key);
    for (int i = 0; i < c->n; i++)
        calls4[i] = distlock__reply_verdict(&res[i]) == 1 ? NULL : &leave;
    distlock__round(&c->tp, a->cs, calls4, res4, NULL, NULL);
    distlock__round_clear(res4, c->n);
}

/* Does the undo of a lost attempt release node i? The rule: only where THIS
 * attempt may have created the key, never a key that held our token before
 * the attempt (the caller's lock: a token pair's re-acquire, whose refresh
 * was refused, say, fails with the lock still held, as it was).
 *  - the reply says the key held our token before (SET NX GET returned it,
 *    the script "refreshed" it, a strict refusal named us), on the
 *    request's first send: not this attempt's key, left alone, whatever
 *    the refresh then said;
 *  - held by another owner: nothing of ours there;
 *  - granted (created now; also a grant whose WAIT fell short): released;
 *  - refused (an error reply: ACL, WRONGTYPE, OOM) on the request's only
 *    send: the command, or the script before its only write of the lock
 *    key (protocol.c), did not run, so it created nothing: left alone (a
 *    refused RESEND says nothing of the first send, which may have run:
 *    treated as no answer, test_refused_resend_undo);
 *  - no answer (timed out, connection lost after sending, a cluster
 *    unavailable) or our token seen only on a resend: this attempt may
 *    have created it. The SPEC's "release on all nodes, including those
 *    that did not answer" applies -- unless the caller held the lock with
 *    this token when it called: a node proved the key held our token
 *    before this attempt (`prior`) AND this client was granted that key
 *    and token with a lease not yet ended (`held_known`). Then the silent
 *    node may be one of the held ones; it is left alone (whatever this
 *    attempt put there holds the caller's token: the caller's release
 *    deletes it on every node, or it expires with the TTL, and it touches
 *    no other owner). `prior` alone is no proof: it may be the leftover of
 *    an earlier FAILED attempt whose undo missed that node, and skipping
 *    the silent nodes then could leave the token on a quorum that nobody
 *    was granted (test_failed_retry_leaves_no_quorum).
 * A plain handle's attempt has a fresh token (prior is empty): it is
 * undone on every node that granted or did not answer, as before. */
static int undo_node(const attempt_ctx *a, const distlock__result *r, int i)
{
    uint64_t bit = 1ull << i;
    int held_before = a->prior != 0 && a->rq->held_known;
    if (!r->sent || (a->prior & bit))
        return 0;
    if (a->own & bit)
        return !held_before;
    int v = distlock__reply_verdict(r);
    if (v == 0)
        return 0;
    if (v == 1 || distlock__wait_short(r))
        return 1;
    if (distlock__reply_refused(r) && !r->resent)
        return 0;
    return !held_before;
}

/* Undo a lost attempt where it may have created the key (undo_node). The
 * transport orders the undo after the acquire it undoes (round.c). A fair
 * waiter keeps its place in the queues (and its undo keeps the old rule:
 * every node sent to that did not say "held by another"). */
static void undo(attempt_ctx *a, const distlock__result *res)
{
    distlock_client *c = a->c;
    distlock__result *res3 = a->cs->res_b;
    uint64_t which = 0;  /* bit i: node i (n <= DISTLOCK__MAX_NODES) */

    for (int i = 0; i < c->n; i++)
        if (a->rq->fair ? res[i].sent && distlock__reply_verdict(&res[i]) != 0
                        : undo_node(a, &res[i], i))
            which |= 1ull << i;
    if (which == 0)
        return;
    if (a->rq->fair && a->rq->queue_ttl_ms > 0) {
        const distlock__call **calls3 = a->cs->calls_b;
        const char *argv[7] = { a->rq->key, a->sk->q, a->sk->qt, a->rq->token, a->sk->ch,
                                a->qttl, NULL };
        int nk = 3;
        if (a->owner) {  /* KEYS[4]: deleted with the lock */
            memmove(&argv[4], &argv[3], 3 * sizeof(*argv));
            argv[nk++] = a->sk->ok;
        }
        size_t len[7];
        for (int i = 0; i < nk + 3; i++)
            len[i] = strlen(argv[i]);
        distlock__call fu = { .script = DISTLOCK__S_FAIR_UNDO, .nkeys = nk, .argc = nk + 3,
                              .argv = argv, .argvlen = len, .undo = 1, .tag = a->tag,
                              .must_mask = ~0ull };
        if (c->tp.cl != NULL)  /* the channel: argv[4], or [5] after the owner key */
            distlock__call_sharded(&fu, DISTLOCK__S_FAIR_UNDO_SH, nk + 1, a->sk->sh, a->rq->key);
        for (int i = 0; i < c->n; i++)
            calls3[i] = (which >> i & 1) ? &fu : NULL;
        distlock__round(&c->tp, a->cs, calls3, res3, distlock__decide_quorum, &c->q);
    } else {
        (void)distlock__release_round(c, a->cs, a->rq->key, a->rq->token, which, res3, ~0ull);
    }
    distlock__round_clear(res3, c->n);
}

int distlock__acquire_once(distlock_client *c, const distlock__acq_req *rq, distlock__attempt *att)
{
    attempt_ctx a = { .c = c, .rq = rq, .fencing = (rq->flags & DISTLOCK_FENCING) != 0,
                      .owner = atomic_load_explicit(&c->owner_info, memory_order_relaxed) };
    int rc;

    memset(att, 0, sizeof(*att));
    att->fence = -1;
    if ((rc = distlock__check_usable(c)) != DISTLOCK_OK)
        return rc;
    /* Side keys (fence counter, queue, owner record) go into the same
     * scripts as the lock key: on a cluster they must share its slot. One
     * check here serves handles and token pairs alike. */
    if ((rq->fair || a.fencing || a.owner) && c->tp.cl != NULL && !distlock__sidekeys_in_slot(rq->key))
        return distlock__fail(DISTLOCK_EINVAL,
                              "key '%s' has a '}' but no {hash tag}: its fence counter, queue "
                              "and owner record cannot share its Redis Cluster slot (use a key "
                              "with a non-empty {tag}, or one without '}')", rq->key);
    a.tag = distlock__lock_tag(rq->key, rq->token);
    /* A waiting writer notes itself in the key's registry of waiting
     * writers (protocol.c); a cluster key whose side keys are not in its
     * slot has none: its writers keep the one shared intent. */
    int writers = rq->writer != NULL && rq->kind == DISTLOCK__LOCK && !rq->fair &&
                  rq->queue_ttl_ms > 0 &&
                  (c->tp.cl == NULL || distlock__sidekeys_in_slot(rq->key));
    if ((rq->fair || a.fencing || a.owner || writers) && (a.sk = malloc(sizeof(*a.sk))) == NULL)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    if ((a.cs = distlock__checkout(c)) == NULL) {
        free(a.sk);
        return DISTLOCK_ENOMEM;
    }
    if (rq->fair) {
        distlock__sidekey(a.sk->q, rq->key, ":q");
        distlock__sidekey(a.sk->qt, rq->key, ":qt");
        distlock__channel_name(a.sk->ch, rq->key);
        distlock__ltoa(a.qttl, rq->queue_ttl_ms);
    }
    if (a.fencing)
        distlock__sidekey(a.sk->fk, rq->key, DISTLOCK__FENCE_SUFFIX);
    if (a.owner)
        owner_fields(c, rq->key, a.sk);
    if (writers)
        distlock__sidekey(a.sk->wk, rq->key, DISTLOCK__WRITERS_SUFFIX);
    else if (a.sk)
        a.sk->wk[0] = '\0';
    distlock__result *res = a.cs->res_a;
    /* the grants this lease needs: the quorum, or a permit's more (its
     * verdict's copy on the heap: off the lock path's stack) */
    const distlock__quorum *q = &c->q;
    distlock__quorum *qk = NULL;
    if (rq->quorum > 0 && rq->quorum != c->quorum) {
        if ((qk = malloc(sizeof(*qk))) == NULL) {
            distlock__checkin(c, a.cs);
            free(a.sk);
            return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        }
        distlock__quorum_with(&c->q, rq->quorum, qk);
        q = qk;
    }
    distlock__ltoa(a.qttl, rq->queue_ttl_ms);

    uint64_t t0 = att->t0_us = distlock__now_us();
    if (rq->kind != DISTLOCK__LOCK)
        first_round_zset(&a, res, q);
    else
        first_round(&a, res);
    for (int i = 0; i < c->n; i++) {
        if (!distlock__reply_held_own(&res[i], rq->token))
            continue;
        a.own |= 1ull << i;
        if (!res[i].resent)
            a.prior |= 1ull << i;
    }
    if (!rq->fair && rq->kind == DISTLOCK__LOCK)
        refresh_own(&a, res);
    distlock__tally t = distlock__count(res, c->n);
    observe(&a, res, t, att);
    /* Two nodes turned out to be one server: no lock on that list. */
    if ((rc = distlock__check_usable(c)) != DISTLOCK_OK)
        t.ok = 0;
    else
        rc = distlock__verdict(q, res, t, DISTLOCK_NOTACQUIRED, "acquire", rq->key);
    if (rc == DISTLOCK_OK && a.fencing)
        rc = raise_fence(&a, res, t, &att->fence);
    if (rc == DISTLOCK_OK && rq->fair && t.ok < c->n)
        leave_where_lost(&a, res);
    if (rc == DISTLOCK_OK) {
        att->valid_until_us = distlock__valid_until(q, t0, rq->ttl_ms);
        if ((att->t1_us = distlock__now_us()) >= att->valid_until_us)
            rc = distlock__fail(DISTLOCK_ETIMEDOUT,
                                "'%s' acquired on %d of %d nodes but its %ld ms ttl was used up",
                                rq->key, t.ok, c->n, rq->ttl_ms);
    }
    if (rc == DISTLOCK_OK) {
        att->set_id = a.cs->id;
        att->maybe = 0;
        for (int i = 0; i < c->n; i++)
            if (res[i].sent && distlock__reply_verdict(&res[i]) != 0)
                att->maybe |= 1ull << i;
    } else {
        undo(&a, res);
        att->split = real_split(&a, res, t, att);
    }
    distlock__round_clear(res, c->n);
    distlock__checkin(c, a.cs);
    free(a.sk);
    free(qk);
    return rc;
}
