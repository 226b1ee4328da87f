/* ops.c -- release, extend and leave-the-queue of one ownership
 * (key and token) on N nodes, each one round and the quorum's verdict.
 * Shared by handles (handle.c), the token pair (pair.c) and the watchdog.
 * Each is a run (run.h) of two steps: the first begins the round, the
 * second reads it; the blocking functions wait for their run.
 *
 * Layer: 5 operations */
#include <stdlib.h>
#include <string.h>

#include "run.h"

int distlock__release_keytoken(distlock_client *c, const char *key, const char *token,
                               uint64_t valid_until_us, uint64_t set_pref, uint64_t maybe)
{
    return distlock__release_keytoken_at(c, key, token, valid_until_us, set_pref, maybe, NULL);
}

int distlock__release_keytoken_at(distlock_client *c, const char *key, const char *token,
                                  uint64_t valid_until_us, uint64_t set_pref, uint64_t maybe,
                                  uint64_t *sent_us)
{
    return distlock__release_lease(c, 0, key, token, valid_until_us, set_pref, maybe, 0,
                                   sent_us);
}

/* The verdicts of a lease needing `need` grants: q itself, or *tmp. */
static const distlock__quorum *lease_q(const distlock_client *c, int need, distlock__quorum *tmp)
{
    if (need <= 0 || need == c->quorum)
        return &c->q;
    distlock__quorum_with(&c->q, need, tmp);
    return tmp;
}

/* ------------------------------------------------------------ release */
typedef struct release_run {
    distlock__release_call rel;
    distlock__quorum tmp;
    const distlock__quorum *q;
    const char *key, *token;
    uint64_t valid_until_us, t0, maybe;
    int retried;
} release_run;

static int release_read(distlock__run *r)
{
    release_run *x = (release_run *)(void *)r->op;
    distlock_client *c = r->c;
    distlock__result *res = r->cs->res_a;
    distlock__tally t = distlock__count(res, c->n);
    if (x->t0 < x->valid_until_us) {
        /* A release resent on a fresh connection (the first one broke after
         * sending) finds the key gone if the first one ran. While the lease
         * was valid when we sent it, nobody else could have removed our
         * key there: so it is our release that did, and it counts. The
         * same for every node of a retried release: the try that got no
         * verdict may have deleted it there (a permit that needs every
         * node, released while one was down, is otherwise "not ours"
         * once that node is back). */
        for (int i = 0; i < c->n; i++)
            if ((res[i].resent || x->retried) && distlock__reply_verdict(&res[i]) == 0) {
                t.ok++;
                t.no--;
            }
    }
    r->rc = distlock__verdict(x->q, res, t, DISTLOCK_ENOTOWNER, "release", x->key);
    distlock__round_clear(res, c->n);
    distlock__checkin(c, r->cs);
    r->cs = NULL;
    distlock__release_call_free(&x->rel);
    return 0;
}

static int release_send(distlock__run *r)
{
    release_run *x = (release_run *)(void *)r->op;
    distlock_client *c = r->c;
    /* built by this step: a detail it sets (a long key's channel out of
     * memory) is the run's */
    distlock__release_call_make(c, &x->rel, x->key, x->token, x->maybe, 1);
    for (int i = 0; i < c->n; i++)
        r->cs->calls_a[i] = &x->rel.call;
    r->step = release_read;
    distlock__run_round(r, r->cs->calls_a, r->cs->res_a,
                        x->retried && x->t0 < x->valid_until_us ? distlock__decide_granted
                                                                : distlock__decide_quorum,
                        (void *)x->q);
    return 1;
}

/* wait_pref: wait (bounded) for the preferred set while another operation
 * uses it, as the blocking release always did; a run that must not block
 * takes any set then (the requests' tags keep the order: round.c). */
static distlock__run *release_start(distlock_client *c, int need, const char *key,
                                    const char *token, uint64_t valid_until_us, uint64_t set_pref,
                                    uint64_t maybe, int retried, uint64_t *sent_us, int wait_pref,
                                    int *rc)
{
    if ((*rc = distlock__check_usable(c)) != DISTLOCK_OK)
        return NULL;
    distlock__run *r = distlock__run_new(c, sizeof(release_run));
    if (r == NULL) {
        *rc = distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        return NULL;
    }
    r->cs = set_pref && wait_pref ? distlock__checkout_pref(c, set_pref) : distlock__checkout(c);
    if (r->cs == NULL) {
        free(r);
        *rc = DISTLOCK_ENOMEM;
        return NULL;
    }
    release_run *x = (release_run *)(void *)r->op;
    x->q = lease_q(c, need, &x->tmp);
    x->key = key;
    x->valid_until_us = valid_until_us;
    x->retried = retried;
    x->t0 = distlock__now_us();
    if (sent_us)
        *sent_us = x->t0;
    x->token = token;
    x->maybe = maybe;
    distlock__run_go(r, release_send);
    *rc = DISTLOCK_OK;
    return r;
}

distlock__run *distlock__release_lease_start(distlock_client *c, int need, const char *key,
                                             const char *token, uint64_t valid_until_us,
                                             uint64_t set_pref, uint64_t maybe, int retried,
                                             uint64_t *sent_us, int *rc)
{
    return release_start(c, need, key, token, valid_until_us, set_pref, maybe, retried, sent_us,
                         0, rc);
}

int distlock__release_lease(distlock_client *c, int need, const char *key, const char *token,
                            uint64_t valid_until_us, uint64_t set_pref, uint64_t maybe,
                            int retried, uint64_t *sent_us)
{
    int rc;
    distlock__run *r = release_start(c, need, key, token, valid_until_us, set_pref, maybe,
                                     retried, sent_us, 1, &rc);
    return r ? distlock__run_wait(r) : rc;
}

int distlock__extend_keytoken(distlock_client *c, const char *key, const char *token,
                              long ttl_ms, uint64_t *valid_until_us)
{
    return distlock__extend_lease(c, 0, key, token, ttl_ms, valid_until_us);
}

/* ------------------------------------------------------------ extend */
typedef struct extend_run {
    char ttl[DISTLOCK__NUM_LEN];
    const char *argv[4];
    size_t len[4];
    distlock__call call;
    char *ok;                    /* owner metadata on: its key */
    distlock__quorum tmp;
    const distlock__quorum *q;
    const char *key;
    long ttl_ms;
    uint64_t t0;
    uint64_t *valid_until_us;
} extend_run;

static int extend_read(distlock__run *r)
{
    extend_run *x = (extend_run *)(void *)r->op;
    distlock_client *c = r->c;
    distlock__result *res = r->cs->res_a;
    r->rc = distlock__verdict(x->q, res, distlock__count(res, c->n), DISTLOCK_ENOTOWNER, "extend",
                              x->key);
    if (r->rc == DISTLOCK_OK) {
        uint64_t until = distlock__valid_until(x->q, x->t0, x->ttl_ms);
        if (distlock__now_us() >= until)
            r->rc = distlock__fail(DISTLOCK_ETIMEDOUT,
                                   "extend of '%.200s' took longer than its ttl", x->key);
        else if (x->valid_until_us)
            *x->valid_until_us = until;
    }
    distlock__round_clear(res, c->n);
    distlock__checkin(c, r->cs);
    r->cs = NULL;
    free(x->ok);
    x->ok = NULL;
    return 0;
}

static int extend_send(distlock__run *r)
{
    extend_run *x = (extend_run *)(void *)r->op;
    for (int i = 0; i < r->c->n; i++)
        r->cs->calls_a[i] = &x->call;
    x->t0 = distlock__now_us();
    r->step = extend_read;
    distlock__run_round(r, r->cs->calls_a, r->cs->res_a, distlock__decide_quorum, (void *)x->q);
    return 1;
}

/* The extend script renews a zset lease's member too (protocol.c). */
distlock__run *distlock__extend_lease_start(distlock_client *c, int need, const char *key,
                                            const char *token, long ttl_ms,
                                            uint64_t *valid_until_us, int *rc)
{
    distlock__connset *cs;
    if ((*rc = distlock__begin(c, &cs)) != DISTLOCK_OK)
        return NULL;
    distlock__run *r = distlock__run_new(c, sizeof(extend_run));
    if (r == NULL) {
        distlock__checkin(c, cs);
        *rc = distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        return NULL;
    }
    r->cs = cs;
    extend_run *x = (extend_run *)(void *)r->op;
    x->q = lease_q(c, need, &x->tmp);
    x->key = key;
    x->ttl_ms = ttl_ms;
    x->valid_until_us = valid_until_us;
    x->argv[0] = key, x->argv[1] = token, x->argv[2] = x->ttl;
    x->len[0] = strlen(key), x->len[1] = strlen(token), x->len[2] = distlock__ltoa(x->ttl, ttl_ms);
    x->call = (distlock__call){ .script = DISTLOCK__S_EXTEND, .nkeys = 1, .argc = 3,
                                .argv = x->argv, .argvlen = x->len,
                                .tag = distlock__lock_tag(key, token),
                                .subject = DISTLOCK__LOCK_SUBJECT };
    /* Owner metadata on: its TTL follows the lock's (KEYS[2]). */
    x->ok = atomic_load_explicit(&c->owner_info, memory_order_relaxed)
                ? malloc(DISTLOCK__SIDEKEY_MAX) : NULL;
    if (x->ok) {
        distlock__sidekey(x->ok, key, DISTLOCK__OWNER_SUFFIX);
        x->argv[3] = x->ttl, x->argv[2] = token, x->argv[1] = x->ok;
        x->len[3] = x->len[2], x->len[2] = x->len[1], x->len[1] = strlen(x->ok);
        x->call.nkeys = 2, x->call.argc = 4;
    }
    distlock__set_wait(c, &x->call);
    distlock__run_go(r, extend_send);
    *rc = DISTLOCK_OK;
    return r;
}

int distlock__extend_lease(distlock_client *c, int need, const char *key, const char *token,
                           long ttl_ms, uint64_t *valid_until_us)
{
    int rc;
    distlock__run *r = distlock__extend_lease_start(c, need, key, token, ttl_ms, valid_until_us,
                                                    &rc);
    return r ? distlock__run_wait(r) : rc;
}

/* ------------------------------------------------------------ leave a queue */
/* A round whose replies are not read: its end only gives back the set. */
static int unread_end(distlock__run *r)
{
    distlock__round_clear(r->cs->res_a, r->c->n);
    distlock__checkin(r->c, r->cs);
    r->cs = NULL;
    r->rc = DISTLOCK_OK;
    return 0;
}

typedef struct leave_run {
    /* fair waiters only: the side keys in the run (on the heap) */
    char q[DISTLOCK__SIDEKEY_MAX], qt[DISTLOCK__SIDEKEY_MAX], ch[DISTLOCK__SIDEKEY_MAX],
        sh[DISTLOCK__SIDEKEY_MAX];
    const char *argv[5];
    size_t len[5];
    distlock__call call;
    uint64_t nodes;              /* where it goes (bit i: node i) */
} leave_run;

static int leave_send(distlock__run *r)
{
    leave_run *x = (leave_run *)(void *)r->op;
    for (int i = 0; i < r->c->n; i++)
        r->cs->calls_a[i] = (x->nodes >> i & 1) ? &x->call : NULL;
    r->step = unread_end;
    distlock__run_round(r, r->cs->calls_a, r->cs->res_a, NULL, NULL);
    return 1;
}

distlock__run *distlock__leave_queue_start(distlock_client *c, const char *key,
                                           const char *token, uint64_t nodes, int *rc)
{
    distlock__run *r = distlock__run_new(c, sizeof(leave_run));
    if (r == NULL) {
        *rc = distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        return NULL;
    }
    if ((r->cs = distlock__checkout(c)) == NULL) {
        free(r);
        *rc = DISTLOCK_ENOMEM;
        return NULL;
    }
    leave_run *x = (leave_run *)(void *)r->op;
    x->nodes = nodes;
    distlock__sidekey(x->q, key, ":q");
    distlock__sidekey(x->qt, key, ":qt");
    distlock__channel_name(x->ch, key);
    x->argv[0] = x->q, x->argv[1] = x->qt, x->argv[2] = key, x->argv[3] = token;
    x->argv[4] = x->ch;
    for (int i = 0; i < 5; i++)
        x->len[i] = strlen(x->argv[i]);
    x->call = (distlock__call){ .script = DISTLOCK__S_LEAVE, .nkeys = 3, .argc = 5,
                                .argv = x->argv, .argvlen = x->len,
                                .tag = distlock__lock_tag(key, token),
                                .subject = DISTLOCK__LOCK_SUBJECT };
    if (c->tp.cl != NULL)
        distlock__call_sharded(&x->call, DISTLOCK__S_LEAVE_SH, 4, x->sh, key);
    distlock__run_go(r, leave_send);
    *rc = DISTLOCK_OK;
    return r;
}

int distlock__leave_queue(distlock_client *c, const char *key, const char *token)
{
    int rc;
    distlock__run *r = distlock__leave_queue_start(c, key, token, ~0ull, &rc);
    return r ? distlock__run_wait(r) : rc;
}

/* ------------------------------------------------------------ a writer's intent */
typedef struct write_leave_run {
    /* channel, shard channel, the registry of waiting writers */
    char ch[DISTLOCK__SIDEKEY_MAX], sh[DISTLOCK__SIDEKEY_MAX], wk[DISTLOCK__SIDEKEY_MAX];
    const char *argv[4];
    size_t len[4];
    distlock__call call;
    uint64_t nodes;              /* where it goes (bit i: node i) */
} write_leave_run;

static int write_leave_send(distlock__run *r)
{
    write_leave_run *x = (write_leave_run *)(void *)r->op;
    for (int i = 0; i < r->c->n; i++)
        r->cs->calls_a[i] = (x->nodes >> i & 1) ? &x->call : NULL;
    r->step = unread_end;
    distlock__run_round(r, r->cs->calls_a, r->cs->res_a, NULL, NULL);
    return 1;
}

/* NULL without a detail when it cannot start (out of memory): the intent
 * and the registry entry expire with their scores. */
distlock__run *distlock__write_leave_start(distlock_client *c, const char *key,
                                           const char *writer, uint64_t nodes, int *rc)
{
    *rc = DISTLOCK_ENOMEM;
    distlock__run *r = distlock__run_new(c, sizeof(write_leave_run));
    if (r == NULL)
        return NULL;
    if ((r->cs = distlock__checkout(c)) == NULL) {
        free(r);
        return NULL;
    }
    write_leave_run *x = (write_leave_run *)(void *)r->op;
    x->nodes = nodes;
    /* without the registry (a cluster key whose side keys are not in its
     * slot: acquire.c did not note the writer) the intent goes as before */
    int reg = writer != NULL && (c->tp.cl == NULL || distlock__sidekeys_in_slot(key));
    if (reg)
        distlock__sidekey(x->wk, key, DISTLOCK__WRITERS_SUFFIX);
    size_t chlen = distlock__channel_name(x->ch, key);
    x->argv[0] = key, x->argv[1] = reg ? x->wk : x->ch;
    x->argv[2] = reg ? x->ch : NULL, x->argv[3] = reg ? writer : NULL;
    x->len[0] = strlen(key), x->len[1] = reg ? strlen(x->wk) : chlen;
    if (reg)
        x->len[2] = chlen, x->len[3] = strlen(writer);
    x->call = (distlock__call){ .script = DISTLOCK__S_WRITE_LEAVE, .nkeys = reg ? 2 : 1,
                                .argc = reg ? 4 : 2, .argv = x->argv, .argvlen = x->len };
    if (c->tp.cl != NULL)
        distlock__call_sharded(&x->call, DISTLOCK__S_WRITE_LEAVE_SH, reg ? 2 : 1, x->sh, key);
    distlock__run_go(r, write_leave_send);
    *rc = DISTLOCK_OK;
    return r;
}

void distlock__write_leave(distlock_client *c, const char *key, const char *writer)
{
    int rc;
    distlock__run *r = distlock__write_leave_start(c, key, writer, ~0ull, &rc);
    if (r)
        (void)distlock__run_wait(r);
}
