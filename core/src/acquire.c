/* acquire.c -- one acquire attempt on N nodes, and its undo.
 *
 * An attempt is one round (SET NX GET, or the acquire / fair script), then,
 * only when needed: a refresh of nodes that already held our own token, a
 * second fencing round, leaving the queues of a fair lock won elsewhere,
 * and the undo of a lost attempt on every node it may have reached. It is
 * a run (run.h): each of those rounds is a state of it, begun by one step
 * and read by the next, so the attempt never blocks; the blocking
 * distlock__acquire_once waits for it (distlock__run_wait).
 *
 * Layer: 5 operations */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "run.h"

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
    int plain;          /* a lock's first round went out as the plain SET (the script
                           only where a node refused it: its result's fell_back) */
    sidekeys *sk;       /* fair, fencing, owner or a waiting writer, else NULL */
    /* Nodes whose first-round reply showed our own token already there
     * (distlock__reply_held_own): `own`; of those, `prior` on the request's
     * first send (not resent), so the key held it before this attempt. */
    uint64_t own, prior;
    /* Own nodes whose key had gone by their refresh, which set it again
     * (refresh_took): this attempt's grants, undone like any other. */
    uint64_t created;
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

void distlock__release_call_make(distlock_client *c, distlock__release_call *rel, const char *key,
                                 const char *token, uint64_t maybe, int wake)
{
    /* The channel: in the call for the usual short keys, else the heap
     * (keys go up to 1 KB); none (empty) for a call that wakes no one. */
    rel->ch = rel->sch;
    size_t chlen = 0;
    if (!wake) {
        rel->sch[0] = '\0';
    } else if (strlen(key) + 10 > sizeof(rel->sch) &&
               (rel->ch = malloc(DISTLOCK__SIDEKEY_MAX)) == NULL) {
        distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        rel->ch = rel->sch;
        snprintf(rel->sch, sizeof(rel->sch), "distlock:");  /* the release still runs; waiters re-check */
        chlen = 9;
    } else {
        chlen = distlock__channel_name(rel->ch, key);
    }
    rel->argv[0] = key, rel->argv[1] = token, rel->argv[2] = rel->ch, rel->argv[3] = NULL;
    rel->len[0] = strlen(key), rel->len[1] = strlen(token), rel->len[2] = chlen, rel->len[3] = 0;
    /* Queued even to a node known hung: if it comes back it must run our
     * release after whatever acquire of ours it still owes. */
    rel->call = (distlock__call){ .script = DISTLOCK__S_RELEASE, .nkeys = 1, .argc = 3,
                                  .argv = rel->argv, .argvlen = rel->len, .trailing = 1,
                                  .tag = distlock__lock_tag(key, token),
                                  .subject = DISTLOCK__LOCK_SUBJECT, .must_mask = maybe };
    /* Owner metadata on: its key goes too (KEYS[2]), deleted with the lock. */
    rel->ok = atomic_load_explicit(&c->owner_info, memory_order_relaxed)
                  ? malloc(DISTLOCK__SIDEKEY_MAX) : NULL;
    if (rel->ok) {
        distlock__sidekey(rel->ok, key, DISTLOCK__OWNER_SUFFIX);
        rel->argv[3] = rel->argv[2], rel->len[3] = rel->len[2];
        rel->argv[2] = rel->argv[1], rel->len[2] = rel->len[1];
        rel->argv[1] = rel->ok, rel->len[1] = strlen(rel->ok);
        rel->call.nkeys = 2, rel->call.argc = 4;
    }
    /* A Redis Cluster node wakes its waiters with SPUBLISH, in the key's
     * slot (without it the release still runs, waiters re-check) */
    rel->sh = wake && c->tp.cl != NULL ? malloc(DISTLOCK__SIDEKEY_MAX) : NULL;
    if (rel->sh)
        distlock__call_sharded(&rel->call, DISTLOCK__S_RELEASE_SH, rel->call.argc - 1, rel->sh,
                               key);
}

void distlock__release_call_free(distlock__release_call *rel)
{
    free(rel->sh);
    if (rel->ch != rel->sch)
        free(rel->ch);
    free(rel->ok);
    rel->sh = rel->ok = NULL;
    rel->ch = rel->sch;
}

/* The attempt as a run: its state between steps, and what its rounds point
 * at. */
enum { S_START = 0, S_FIRST, S_REFRESH, S_VERDICT, S_FENCE, S_FENCED, S_LEAVE, S_LEFT, S_UNDO,
       S_UNDONE, S_SPLIT };
typedef struct acq_run {
    attempt_ctx a;
    distlock__attempt *att;
    const distlock__quorum *q;   /* the grants this lease needs: &c->q, or &qk */
    distlock__quorum qk;
    distlock__quorum_own qown;   /* the first round's stopper: our token counts as ours */
    distlock__tally t;
    int state;
    int rel_made;                /* rel holds an undo's release call */
    /* What the round in progress points at: one round at a time, and the
     * transport reads a call only while its round runs (transport.h). */
    union {
        struct {  /* the first round: a plain acquire's script (4 arguments;
                   * the others take theirs from sk), SET NX GET, or the
                   * zset script */
            const char *argv_plain[5];
            size_t len_plain[5];
            distlock__call script, plain;
            const char *pargv[7];
            size_t plen[7];
            char permits[DISTLOCK__NUM_LEN];
        };
        struct {  /* a later round: refresh, fence raise, leave, a fair undo,
                   * the split check */
            const char *argv[8];
            size_t len[8];
            distlock__call call;
            char fv[DISTLOCK__NUM_LEN];
        };
        distlock__release_call rel;  /* a lost attempt's undo */
    };
} acq_run;

/* Nodes that answered with our own token get their TTL refreshed and then
 * count as granted: a retry after a lost reply, or a re-acquire. The
 * refresh is the acquire script (own token: PEXPIRE; a free key: SET NX),
 * not a compare-and-PEXPIRE: the first round may have stopped at a quorum
 * counting these nodes (distlock__decide_quorum_own) before a slower node
 * answered, and the key can be gone by now (its TTL ran out, another
 * process of the owner released it). That node is free, not held by
 * another owner: it grants (and refresh_took notes it as this attempt's
 * creation, for the undo). Not for strict acquires (plain SET NX
 * semantics), not even when the call was resent on a fresh connection: a
 * strict token is the caller's (an order number), another client may hold
 * the same one, and the resend cannot tell its own first send from that
 * holder's key (test_caller_token_two_clients). Rare, so it may cost a second round trip.
 * Returns 1 if that round began (refresh_took reads it). */
static int refresh_own(distlock__run *r, acq_run *x)
{
    attempt_ctx *a = &x->a;
    distlock_client *c = a->c;
    const distlock__call **calls = a->cs->calls_b;
    distlock__result *res = a->cs->res_a;
    int strict = (a->rq->flags & DISTLOCK_STRICT) != 0, any = 0;
    const char **argv = x->argv;
    size_t *len = x->len;
    argv[0] = a->rq->key, argv[1] = a->rq->token, argv[2] = a->ttl;
    len[0] = strlen(a->rq->key), len[1] = strlen(a->rq->token), len[2] = strlen(a->ttl);
    /* the acquire script, not strict; 3 ARGV: no waiting writer's intent */
    argv[3] = "0", len[3] = 1;
    x->call = (distlock__call){ .script = DISTLOCK__S_ACQUIRE, .nkeys = 1, .argc = 4,
                                .argv = argv, .argvlen = len, .tag = a->tag,
                                .subject = DISTLOCK__LOCK_SUBJECT };
    /* (an owner-recorded, fencing or fair acquire goes by its script, which
     * refreshes our own token itself: only a plain SET NX GET comes here) */
    distlock__set_wait(c, &x->call);

    for (int i = 0; i < c->n; i++) {
        calls[i] = NULL;
        if (distlock__reply_holds_own(&res[i], a->rq->token) && !strict) {
            calls[i] = &x->call;
            any = 1;
        }
    }
    if (!any)
        return 0;
    distlock__run_round(r, calls, a->cs->res_b, NULL, NULL);
    return 1;
}

static void refresh_took(acq_run *x)
{
    distlock__connset *cs = x->a.cs;
    distlock__result *res = cs->res_a, *res2 = cs->res_b;
    for (int i = 0; i < x->a.c->n; i++) {
        if (cs->calls_b[i] == NULL)
            continue;
        /* {1, -1, 0}: the key had gone and this send set it (a first send
         * that set it would make a resend say {1, -1, 1}: only the reply
         * of the send that created it says 0). A refresh not heard leaves
         * the node alone, as before: it may have found the key there. */
        if (res2[i].state == DISTLOCK__R_DONE && res2[i].script == DISTLOCK__S_ACQUIRE &&
            distlock__reply_int(&res2[i], 0) == 1 && distlock__reply_int(&res2[i], 2) == 0)
            x->a.created |= 1ull << i;
        /* The refresh's reply replaces the SET reply. */
        freeReplyObject(res[i].reply);
        res[i] = res2[i];
        res2[i].reply = NULL;
    }
}

/* The first round: SET NX GET when no script is needed (the common case:
 * it tells whether we set it, or who holds it), else the acquire or fair
 * script; the script also serves servers without SET ... GET. */
static void first_round(distlock__run *r, acq_run *x)
{
    attempt_ctx *a = &x->a;
    distlock_client *c = a->c;
    const distlock__acq_req *rq = a->rq;
    /* a plain acquire's script has 4 arguments; the others take theirs
     * from sk (its 16) */
    const char **argv = a->sk ? a->sk->argv : x->argv_plain;
    size_t *len = a->sk ? a->sk->len : x->len_plain;
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
    x->script = (distlock__call){ .script = rq->fair ? DISTLOCK__S_FAIR : DISTLOCK__S_ACQUIRE,
                                  .nkeys = nkeys, .argc = k, .argv = argv, .argvlen = len,
                                  .tag = a->tag, .subject = DISTLOCK__LOCK_SUBJECT };
    if (chan_arg >= 0 && c->tp.cl != NULL)
        distlock__call_sharded(&x->script, DISTLOCK__S_FAIR_SH, chan_arg, a->sk->sh,
                               rq->key);
    const char **pargv = x->pargv;
    size_t *plen = x->plen;
    pargv[0] = "SET", pargv[1] = rq->key, pargv[2] = rq->token, pargv[3] = "NX";
    pargv[4] = "PX", pargv[5] = a->ttl, pargv[6] = "GET";
    plen[0] = 3, plen[1] = len[0], plen[2] = strlen(rq->token), plen[3] = 2;
    plen[4] = 2, plen[5] = ttllen, plen[6] = 3;
    /* WRONGTYPE: the key holds read locks (a zset), which the script
     * handles; the hot path stays one SET on a string key */
    x->plain = (distlock__call){ .script = -1, .argc = 7, .argv = pargv, .argvlen = plen,
                                 .fallback = &x->script,
                                 .fallback_on = DISTLOCK__SYNTAX_ERROR,
                                 .fallback_also = "WRONGTYPE",
                                 .fallback_below = DISTLOCK__SET_GET_SINCE, .tag = a->tag,
                                 .subject = DISTLOCK__LOCK_SUBJECT };
    distlock__set_wait(c, &x->script);
    distlock__set_wait(c, &x->plain);
    int use_plain = !rq->fair && !a->fencing && !a->owner && !atomic_load(&c->no_set_get);
    a->plain = use_plain;
    for (int i = 0; i < c->n; i++)
        a->cs->calls_a[i] = use_plain ? &x->plain : &x->script;
    /* A strict acquire (a token the caller chose) that loses hears every
     * node before its undo: its undo releases only the nodes whose reply
     * showed its own grant (undo_node; an unheard node may hold another
     * holder's key with this very token, a second process of one Laravel
     * owner), so waiting for the replies leaves fewer of its grants to
     * their TTL. A win still ends at the quorum. */
    /* Any other acquire refreshes a node that answered with its own token
     * into a grant (refresh_own): the round counts it so from the start. */
    int strict = (rq->flags & DISTLOCK_STRICT) != 0;
    x->qown = (distlock__quorum_own){ &c->q, rq->token };
    if (strict)
        distlock__run_round(r, a->cs->calls_a, a->cs->res_a,
                            a->fencing ? NULL : distlock__decide_granted, &c->q);
    else
        distlock__run_round(r, a->cs->calls_a, a->cs->res_a,
                            a->fencing ? distlock__decide_cannot_win_own
                                       : distlock__decide_quorum_own, &x->qown);
}

/* The first round of a read lock or a semaphore permit: the zset script
 * (protocol.c), stopped once its quorum q granted or no longer can. */
static void first_round_zset(distlock__run *r, acq_run *x)
{
    attempt_ctx *a = &x->a;
    distlock_client *c = a->c;
    const distlock__acq_req *rq = a->rq;
    distlock__ltoa(a->ttl, rq->ttl_ms);
    distlock__ltoa(x->permits, rq->permits);
    const char **argv = x->argv_plain;
    size_t *len = x->len_plain;
    argv[0] = rq->key, argv[1] = rq->token, argv[2] = a->ttl;
    argv[3] = rq->kind == DISTLOCK__READ ? "r" : "s", argv[4] = x->permits;
    for (int i = 0; i < 5; i++)
        len[i] = strlen(argv[i]);
    x->script = (distlock__call){ .script = DISTLOCK__S_ZACQUIRE, .nkeys = 1, .argc = 5,
                                  .argv = argv, .argvlen = len, .tag = a->tag,
                                  .subject = DISTLOCK__LOCK_SUBJECT };
    distlock__set_wait(c, &x->script);
    for (int i = 0; i < c->n; i++)
        a->cs->calls_a[i] = &x->script;
    distlock__run_round(r, a->cs->calls_a, a->cs->res_a, distlock__decide_quorum, (void *)x->q);
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
    att->saw_readers = 0;
    for (int i = 0; i < a->c->n; i++) {
        int v = distlock__reply_verdict(&res[i]);
        const redisReply *x = res[i].reply;
        if (v == 0 && !a->rq->fair && x && x->type == REDIS_REPLY_ARRAY && x->elements >= 4 &&
            x->element[3]->type == REDIS_REPLY_STRING)
            att->readers = att->saw_readers = 1;  /* the acquire script's {0, pttl, 0, 'r'} */
        else if (v < 0 && a->rq->writer && res[i].sent && (!a->plain || res[i].fell_back))
            att->readers = 1;  /* not heard (a round ends at its quorum) or failed after
                                  the script went out: it may have run there and noted
                                  the intent. A plain SET unheard noted nothing: a
                                  stopped node costs a writer's win no leave; nor does
                                  a request never sent (its connection was not ready,
                                  or a cancel dropped it). */
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
 * round, on the granted nodes only (after the undo gave them back): begun
 * here (returns 1; split_read reads it), else att->split is decided now. */
static int real_split(distlock__run *r, acq_run *x)
{
    attempt_ctx *a = &x->a;
    distlock_client *c = a->c;
    const distlock__result *res = a->cs->res_a;
    x->att->split = 0;
    if (!a->rq->fair || x->t.ok == 0 || x->att->behind == 0 ||
        x->t.ok + x->att->behind < c->quorum)
        return 0;
    const char *name = first_ahead(c, res);  /* in res' replies: kept until the end */
    if (name == NULL) {
        x->att->split = 1;
        return 0;
    }
    x->argv[0] = "ZSCORE", x->argv[1] = a->sk->q, x->argv[2] = name;
    x->len[0] = 6, x->len[1] = strlen(a->sk->q), x->len[2] = strlen(name);
    x->call = (distlock__call){ .script = -1, .argc = 3, .argv = x->argv, .argvlen = x->len };
    for (int i = 0; i < c->n; i++)
        a->cs->calls_b[i] = distlock__reply_verdict(&res[i]) == 1 ? &x->call : NULL;
    distlock__run_round(r, a->cs->calls_b, a->cs->res_b, NULL, NULL);
    return 1;
}

static void split_read(acq_run *x)
{
    distlock__connset *cs = x->a.cs;
    distlock__result *res2 = cs->res_b;
    int real = 0;
    for (int i = 0; i < x->a.c->n; i++)
        if (cs->calls_b[i] && (res2[i].state != DISTLOCK__R_DONE || res2[i].reply == NULL ||
                               res2[i].reply->type != REDIS_REPLY_NIL))
            real = 1;
    distlock__round_clear(res2, x->a.c->n);
    x->att->split = real;
}

/* The fence is the highest counter among the nodes that granted (we heard
 * from every live node). Unless all of them already hold that value, raise
 * it on the nodes where we still own the lock: a later owner (whose quorum
 * intersects ours) then reads at least this value, even if a minority of
 * nodes lose their data first. Returns 1 if that round began (fence_read
 * gives its verdict). */
static int raise_fence(distlock__run *r, acq_run *x)
{
    attempt_ctx *a = &x->a;
    distlock_client *c = a->c;
    const distlock__result *res = a->cs->res_a;
    int64_t *fence = &x->att->fence;
    int at_max = 0;
    for (int i = 0; i < c->n; i++)
        if (distlock__reply_verdict(&res[i]) == 1 && distlock__reply_int(&res[i], 1) > *fence)
            *fence = distlock__reply_int(&res[i], 1);
    for (int i = 0; i < c->n; i++)
        if (distlock__reply_verdict(&res[i]) == 1 && distlock__reply_int(&res[i], 1) == *fence)
            at_max++;
    if (at_max == x->t.ok)
        return 0;
    const distlock__call **calls2 = a->cs->calls_b;
    snprintf(x->fv, sizeof(x->fv), "%" PRId64, *fence);
    x->argv[0] = a->rq->key, x->argv[1] = a->sk->fk, x->argv[2] = a->rq->token, x->argv[3] = x->fv;
    for (int i = 0; i < 4; i++)
        x->len[i] = strlen(x->argv[i]);
    x->call = (distlock__call){ .script = DISTLOCK__S_RAISE, .nkeys = 2, .argc = 4,
                                .argv = x->argv, .argvlen = x->len, .tag = a->tag,
                                .subject = DISTLOCK__LOCK_SUBJECT };
    distlock__set_wait(c, &x->call);
    for (int i = 0; i < c->n; i++)
        calls2[i] = distlock__reply_verdict(&res[i]) == 1 ? &x->call : NULL;
    distlock__run_round(r, calls2, a->cs->res_b, distlock__decide_cannot_win, &c->q);
    return 1;
}

static int fence_read(acq_run *x)
{
    distlock_client *c = x->a.c;
    distlock__result *res2 = x->a.cs->res_b;
    int rc = distlock__verdict(&c->q, res2, distlock__count(res2, c->n), DISTLOCK_NOTACQUIRED,
                               "fencing (the lock was lost before the fence reached a quorum)",
                               x->a.rq->key);
    distlock__round_clear(res2, c->n);
    return rc;
}

/* Won: on nodes that did not grant (the previous holder's release still on
 * its way there, say) we are still queued; leave, or our stale entry would
 * stand first in those queues. Begins the round (cleared by the next step). */
static void leave_where_lost(distlock__run *r, acq_run *x)
{
    attempt_ctx *a = &x->a;
    distlock_client *c = a->c;
    const distlock__result *res = a->cs->res_a;
    const distlock__call **calls4 = a->cs->calls_b;
    x->argv[0] = a->sk->q, x->argv[1] = a->sk->qt, x->argv[2] = a->rq->key;
    x->argv[3] = a->rq->token, x->argv[4] = a->sk->ch;
    for (int i = 0; i < 5; i++)
        x->len[i] = strlen(x->argv[i]);
    x->call = (distlock__call){ .script = DISTLOCK__S_LEAVE, .nkeys = 3, .argc = 5,
                                .argv = x->argv, .argvlen = x->len, .trailing = 1, .tag = a->tag,
                                .subject = DISTLOCK__LOCK_SUBJECT };
    if (c->tp.cl != NULL)
        distlock__call_sharded(&x->call, DISTLOCK__S_LEAVE_SH, 4, a->sk->sh, a->rq->key);
    for (int i = 0; i < c->n; i++)
        calls4[i] = distlock__reply_verdict(&res[i]) == 1 ? NULL : &x->call;
    distlock__run_round(r, calls4, a->cs->res_b, NULL, NULL);
}

/* Does the undo of a lost attempt release node i? The rule: only where THIS
 * attempt may have created the key, never a key that held our token before
 * the attempt (the caller's lock: a token pair's re-acquire, whose refresh
 * was refused, say, fails with the lock still held, as it was).
 *  - the reply says the key held our token before (SET NX GET returned it,
 *    the script "refreshed" it, a strict refusal named us), on the
 *    request's first send: not this attempt's key, left alone, whatever
 *    the refresh then said -- unless the refresh found the key gone and
 *    set it (`created`): then it is this attempt's grant, released;
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
 * A strict acquire (a token the caller chose: another client may hold the
 * same one) releases only the nodes whose reply showed its own SET take
 * effect (granted, or a grant whose WAIT fell short). A silent node, or our
 * token seen only on a resend, may be that other holder's key: left to its
 * TTL (the caller, who knows the token, can release it).
 * A plain handle's attempt has a fresh token (prior is empty): it is
 * undone on every node that granted or did not answer, as before. */
static int undo_node(const attempt_ctx *a, const distlock__result *r, int i)
{
    uint64_t bit = 1ull << i;
    int held_before = a->prior != 0 && a->rq->held_known;
    if (r->sent && (a->created & bit))
        return 1;
    if (!r->sent || (a->prior & bit))
        return 0;
    if (a->rq->flags & DISTLOCK_STRICT)
        return distlock__reply_verdict(r) == 1 || distlock__wait_short(r);
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

/* A fair attempt's undo: every node sent to that did not say "held by
 * another" (its queue place is put back there too); with a caller's token
 * (strict) only the nodes whose reply showed its grant, as undo_node: a
 * silent node may hold another holder's key with this very token. */
static int fair_undo_node(const attempt_ctx *a, const distlock__result *r)
{
    int v = distlock__reply_verdict(r);
    if (!r->sent || v == 0)
        return 0;
    return !(a->rq->flags & DISTLOCK_STRICT) || v == 1 || distlock__wait_short(r);
}

/* Undo a lost attempt where it may have created the key (undo_node). The
 * transport orders the undo after the acquire it undoes (round.c). A fair
 * waiter keeps its place in the queues (fair_undo_node). Returns 1 if the
 * undo's round began (undo_done ends it). */
static int undo(distlock__run *r, acq_run *x)
{
    attempt_ctx *a = &x->a;
    distlock_client *c = a->c;
    const distlock__result *res = a->cs->res_a;
    const distlock__call **calls3 = a->cs->calls_b;
    uint64_t which = 0;  /* bit i: node i (n <= DISTLOCK__MAX_NODES) */

    for (int i = 0; i < c->n; i++)
        if (a->rq->fair ? fair_undo_node(a, &res[i]) : undo_node(a, &res[i], i))
            which |= 1ull << i;
    if (which == 0)
        return 0;
    /* Grants that never made a lock are given back without a wake: nobody
     * held the key by them, so no waiter has anything to look at again,
     * and the wake would reach this attempt's own waiter too. A key held
     * by a quorum but missing on some node (its holder's request never
     * went there, or the node restarted empty) would else make every
     * waiter of it spin: win there, lose, undo, be woken, try again at
     * once. Grants that did make one (its lease was used up before they
     * came back) were a lock others may have seen held: its end wakes
     * them as a release's does. */
    int wake = x->t.ok >= x->q->quorum;
    const distlock__call *call;
    if (a->rq->fair && a->rq->queue_ttl_ms > 0) {
        const char **argv = x->argv;
        argv[0] = a->rq->key, argv[1] = a->sk->q, argv[2] = a->sk->qt, argv[3] = a->rq->token;
        argv[4] = wake ? a->sk->ch : "", argv[5] = a->qttl, argv[6] = NULL;
        int nk = 3;
        if (a->owner) {  /* KEYS[4]: deleted with the lock */
            memmove(&argv[4], &argv[3], 3 * sizeof(*argv));
            argv[nk++] = a->sk->ok;
        }
        for (int i = 0; i < nk + 3; i++)
            x->len[i] = strlen(argv[i]);
        x->call = (distlock__call){ .script = DISTLOCK__S_FAIR_UNDO, .nkeys = nk, .argc = nk + 3,
                                    .argv = argv, .argvlen = x->len, .trailing = 1, .tag = a->tag,
                                    .subject = DISTLOCK__LOCK_SUBJECT,
                                    .must_mask = ~0ull };
        if (wake && c->tp.cl != NULL)  /* the channel: argv[4], or [5] after the owner key */
            distlock__call_sharded(&x->call, DISTLOCK__S_FAIR_UNDO_SH, nk + 1, a->sk->sh,
                                   a->rq->key);
        call = &x->call;
    } else {
        distlock__release_call_make(c, &x->rel, a->rq->key, a->rq->token, ~0ull, wake);
        x->rel_made = 1;
        call = &x->rel.call;
    }
    for (int i = 0; i < c->n; i++)
        calls3[i] = (which >> i & 1) ? call : NULL;
    distlock__run_round(r, calls3, a->cs->res_b, distlock__decide_quorum, &c->q);
    return 1;
}

static void undo_done(acq_run *x)
{
    distlock__round_clear(x->a.cs->res_b, x->a.c->n);
    if (x->rel_made)
        distlock__release_call_free(&x->rel);
    x->rel_made = 0;
}

/* The attempt's last step: what it holds goes back. */
static int acq_end(distlock__run *r, acq_run *x)
{
    distlock__round_clear(x->a.cs->res_a, x->a.c->n);
    distlock__checkin(x->a.c, x->a.cs);
    r->cs = NULL;
    free(x->a.sk);
    x->a.sk = NULL;
    return 0;
}

/* The attempt's steps, one per round (run.h): each one reads the round
 * that ended and begins the next, until the verdict and its aftermath
 * (fence, leave, undo, split check) are done. */
static int acq_step(distlock__run *r)
{
    acq_run *x = (acq_run *)(void *)r->op;
    attempt_ctx *a = &x->a;
    distlock_client *c = a->c;
    const distlock__acq_req *rq = a->rq;
    distlock__attempt *att = x->att;
    distlock__result *res = a->cs->res_a;

    for (;;) {
        switch (x->state) {
        case S_START:
            att->t0_us = distlock__now_us();
            x->state = S_FIRST;
            if (rq->kind != DISTLOCK__LOCK)
                first_round_zset(r, x);
            else
                first_round(r, x);
            return 1;
        case S_FIRST:
            if (rq->kind == DISTLOCK__LOCK)
                for (int i = 0; i < c->n; i++)
                    if (res[i].fell_back == 1)
                        atomic_store(&c->no_set_get, 1);  /* Redis < 7: the script from now on */
            for (int i = 0; i < c->n; i++) {
                if (res[i].sent)
                    att->reached |= 1ull << i;
                if (!distlock__reply_held_own(&res[i], rq->token))
                    continue;
                a->own |= 1ull << i;
                if (!res[i].resent)
                    a->prior |= 1ull << i;
            }
            x->state = S_VERDICT;
            /* only when they make a quorum with the grants: a refresh
             * that cannot win would only lengthen what it found (an
             * earlier ownership's key that its release did not reach) */
            if (!rq->fair && rq->kind == DISTLOCK__LOCK &&
                distlock__decide_granted_own(res, c->n, &x->qown) && refresh_own(r, x)) {
                x->state = S_REFRESH;
                return 1;
            }
            break;
        case S_REFRESH:
            refresh_took(x);
            x->state = S_VERDICT;
            break;
        case S_VERDICT:
            x->t = distlock__count(res, c->n);
            observe(a, res, x->t, att);
            /* Two nodes turned out to be one server: no lock on that list. */
            if ((r->rc = distlock__check_usable(c)) != DISTLOCK_OK)
                x->t.ok = 0;
            else
                r->rc = distlock__verdict(x->q, res, x->t, DISTLOCK_NOTACQUIRED, "acquire",
                                          rq->key);
            x->state = S_FENCED;
            if (r->rc == DISTLOCK_OK && a->fencing && raise_fence(r, x)) {
                x->state = S_FENCE;
                return 1;
            }
            break;
        case S_FENCE:
            r->rc = fence_read(x);
            x->state = S_FENCED;
            break;
        case S_FENCED:
            x->state = S_LEFT;
            if (r->rc == DISTLOCK_OK && rq->fair && x->t.ok < c->n) {
                leave_where_lost(r, x);
                x->state = S_LEAVE;
                return 1;
            }
            break;
        case S_LEAVE:
            distlock__round_clear(a->cs->res_b, c->n);
            x->state = S_LEFT;
            break;
        case S_LEFT:
            if (r->rc == DISTLOCK_OK) {
                att->valid_until_us = distlock__valid_until(x->q, att->t0_us, rq->ttl_ms);
                if ((att->t1_us = distlock__now_us()) >= att->valid_until_us)
                    r->rc = distlock__fail(DISTLOCK_ETIMEDOUT,
                                           "'%s' acquired on %d of %d nodes but its %ld ms ttl "
                                           "was used up", rq->key, x->t.ok, c->n, rq->ttl_ms);
            }
            if (r->rc == DISTLOCK_OK) {
                att->set_id = a->cs->id;
                att->maybe = 0;
                for (int i = 0; i < c->n; i++)
                    if (res[i].sent && distlock__reply_verdict(&res[i]) != 0)
                        att->maybe |= 1ull << i;
                return acq_end(r, x);
            }
            x->state = S_UNDONE;
            if (undo(r, x)) {
                x->state = S_UNDO;
                return 1;
            }
            break;
        case S_UNDO:
            undo_done(x);
            x->state = S_UNDONE;
            break;
        case S_UNDONE:
            if (real_split(r, x)) {
                x->state = S_SPLIT;
                return 1;
            }
            return acq_end(r, x);
        case S_SPLIT:
            split_read(x);
            return acq_end(r, x);
        }
    }
}

distlock__run *distlock__acquire_start(distlock_client *c, const distlock__acq_req *rq,
                                       distlock__attempt *att, int *rc)
{
    int fencing = (rq->flags & DISTLOCK_FENCING) != 0;
    int owner = atomic_load_explicit(&c->owner_info, memory_order_relaxed);

    memset(att, 0, sizeof(*att));
    att->fence = -1;
    if ((*rc = distlock__check_usable(c)) != DISTLOCK_OK)
        return NULL;
    /* Side keys (fence counter, queue, owner record) go into the same
     * scripts as the lock key: on a cluster they must share its slot. One
     * check here serves handles and token pairs alike. */
    if ((rq->fair || fencing || owner) && c->tp.cl != NULL && !distlock__sidekeys_in_slot(rq->key)) {
        *rc = distlock__fail(DISTLOCK_EINVAL,
                             "key '%s' has a '}' but no {hash tag}: its fence counter, queue "
                             "and owner record cannot share its Redis Cluster slot (use a key "
                             "with a non-empty {tag}, or one without '}')", rq->key);
        return NULL;
    }
    /* A waiting writer notes itself in the key's registry of waiting
     * writers (protocol.c); a cluster key whose side keys are not in its
     * slot has none: its writers keep the one shared intent. */
    int writers = rq->writer != NULL && rq->kind == DISTLOCK__LOCK && !rq->fair &&
                  rq->queue_ttl_ms > 0 &&
                  (c->tp.cl == NULL || distlock__sidekeys_in_slot(rq->key));
    distlock__run *r = distlock__run_new(c, sizeof(acq_run));
    if (r == NULL) {
        *rc = distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        return NULL;
    }
    acq_run *x = (acq_run *)(void *)r->op;
    attempt_ctx *a = &x->a;
    a->c = c, a->rq = rq, a->fencing = fencing, a->owner = owner;
    x->att = att;
    x->state = S_START;
    a->tag = distlock__lock_tag(rq->key, rq->token);
    if ((rq->fair || fencing || owner || writers) && (a->sk = malloc(sizeof(*a->sk))) == NULL) {
        free(r);
        *rc = distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        return NULL;
    }
    if ((a->cs = r->cs = distlock__checkout(c)) == NULL) {
        free(a->sk);
        free(r);
        *rc = DISTLOCK_ENOMEM;
        return NULL;
    }
    if (rq->fair) {
        distlock__sidekey(a->sk->q, rq->key, ":q");
        distlock__sidekey(a->sk->qt, rq->key, ":qt");
        distlock__channel_name(a->sk->ch, rq->key);
    }
    if (fencing)
        distlock__sidekey(a->sk->fk, rq->key, DISTLOCK__FENCE_SUFFIX);
    if (owner)
        owner_fields(c, rq->key, a->sk);
    if (writers)
        distlock__sidekey(a->sk->wk, rq->key, DISTLOCK__WRITERS_SUFFIX);
    else if (a->sk)
        a->sk->wk[0] = '\0';
    /* the grants this lease needs: the quorum, or a permit's more */
    x->q = &c->q;
    if (rq->quorum > 0 && rq->quorum != c->quorum) {
        distlock__quorum_with(&c->q, rq->quorum, &x->qk);
        x->q = &x->qk;
    }
    distlock__ltoa(a->qttl, rq->queue_ttl_ms);
    distlock__run_go(r, acq_step);
    *rc = DISTLOCK_OK;
    return r;
}

int distlock__acquire_once(distlock_client *c, const distlock__acq_req *rq, distlock__attempt *att,
                           int cancel_fd)
{
    int rc;
    distlock__run *r = distlock__acquire_start(c, rq, att, &rc);
    return r ? distlock__run_wait_fd(r, cancel_fd) : rc;
}
