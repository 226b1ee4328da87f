/* ops.c -- release, extend and leave-the-queue of one ownership
 * (key and token) on N nodes, each one round and the quorum's verdict.
 * Shared by handles (handle.c), the token pair (pair.c) and the watchdog.
 *
 * Layer: 5 operations */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

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

int distlock__release_lease(distlock_client *c, int need, const char *key, const char *token,
                            uint64_t valid_until_us, uint64_t set_pref, uint64_t maybe,
                            int retried, uint64_t *sent_us)
{
    int rc;
    distlock__quorum tmp;
    const distlock__quorum *q = lease_q(c, need, &tmp);

    if ((rc = distlock__check_usable(c)) != DISTLOCK_OK)
        return rc;
    distlock__connset *cs = set_pref ? distlock__checkout_pref(c, set_pref) : distlock__checkout(c);
    if (cs == NULL)
        return DISTLOCK_ENOMEM;
    distlock__result *res = cs->res_a;
    uint64_t t0 = distlock__now_us();
    if (sent_us)
        *sent_us = t0;
    distlock__tally t = distlock__release_round_q(c, q, cs, key, token, ~0ull, res, maybe,
                                                  retried && t0 < valid_until_us);
    if (t0 < valid_until_us) {
        /* A release resent on a fresh connection (the first one broke after
         * sending) finds the key gone if the first one ran. While the lease
         * was valid when we sent it, nobody else could have removed our
         * key there: so it is our release that did, and it counts. The
         * same for every node of a retried release: the try that got no
         * verdict may have deleted it there (a permit that needs every
         * node, released while one was down, is otherwise "not ours"
         * once that node is back). */
        for (int i = 0; i < c->n; i++)
            if ((res[i].resent || retried) && distlock__reply_verdict(&res[i]) == 0) {
                t.ok++;
                t.no--;
            }
    }
    rc = distlock__verdict(q, res, t, DISTLOCK_ENOTOWNER, "release", key);
    distlock__round_clear(res, c->n);
    distlock__checkin(c, cs);
    return rc;
}

int distlock__extend_keytoken(distlock_client *c, const char *key, const char *token,
                              long ttl_ms, uint64_t *valid_until_us)
{
    return distlock__extend_lease(c, 0, key, token, ttl_ms, valid_until_us);
}

/* The extend script renews a zset lease's member too (protocol.c). */
int distlock__extend_lease(distlock_client *c, int need, const char *key, const char *token,
                           long ttl_ms, uint64_t *valid_until_us)
{
    char ttl[DISTLOCK__NUM_LEN];
    distlock__quorum tmp;
    const distlock__quorum *q = lease_q(c, need, &tmp);
    distlock__connset *cs;
    int rc;

    if ((rc = distlock__begin(c, &cs)) != DISTLOCK_OK)
        return rc;
    distlock__result *res = cs->res_a;
    const char *argv[4] = { key, token, ttl };
    size_t len[4] = { strlen(key), strlen(token), distlock__ltoa(ttl, ttl_ms) };
    distlock__call call = { .script = DISTLOCK__S_EXTEND, .nkeys = 1, .argc = 3, .argv = argv,
                            .argvlen = len, .tag = distlock__lock_tag(key, token) };
    /* Owner metadata on: its TTL follows the lock's (KEYS[2]). */
    char *ok = atomic_load_explicit(&c->owner_info, memory_order_relaxed)
                   ? malloc(DISTLOCK__SIDEKEY_MAX) : NULL;
    if (ok) {
        distlock__sidekey(ok, key, DISTLOCK__OWNER_SUFFIX);
        argv[3] = ttl, argv[2] = token, argv[1] = ok;
        len[3] = len[2], len[2] = len[1], len[1] = strlen(ok);
        call.nkeys = 2, call.argc = 4;
    }
    distlock__set_wait(c, &call);
    for (int i = 0; i < c->n; i++)
        cs->calls_a[i] = &call;
    uint64_t t0 = distlock__now_us();
    distlock__round(&c->tp, cs, cs->calls_a, res, distlock__decide_quorum, (void *)q);
    rc = distlock__verdict(q, res, distlock__count(res, c->n), DISTLOCK_ENOTOWNER, "extend", key);
    if (rc == DISTLOCK_OK) {
        uint64_t until = distlock__valid_until(q, t0, ttl_ms);
        if (distlock__now_us() >= until)
            rc = distlock__fail(DISTLOCK_ETIMEDOUT, "extend of '%.200s' took longer than its ttl",
                                key);
        else if (valid_until_us)
            *valid_until_us = until;
    }
    distlock__round_clear(res, c->n);
    distlock__checkin(c, cs);
    free(ok);
    return rc;
}

int distlock__leave_queue(distlock_client *c, const char *key, const char *token)
{
    /* fair waiters only: the side keys on the heap, not the stack */
    struct { char q[DISTLOCK__SIDEKEY_MAX], qt[DISTLOCK__SIDEKEY_MAX],
             ch[DISTLOCK__SIDEKEY_MAX], sh[DISTLOCK__SIDEKEY_MAX]; } *sk = malloc(sizeof(*sk));
    if (sk == NULL)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    distlock__connset *cs = distlock__checkout(c);
    if (cs == NULL) {
        free(sk);
        return DISTLOCK_ENOMEM;
    }
    distlock__result *res = cs->res_a;
    distlock__sidekey(sk->q, key, ":q");
    distlock__sidekey(sk->qt, key, ":qt");
    distlock__channel_name(sk->ch, key);
    const char *argv[5] = { sk->q, sk->qt, key, token, sk->ch };
    size_t len[5];
    for (int i = 0; i < 5; i++)
        len[i] = strlen(argv[i]);
    distlock__call call = { .script = DISTLOCK__S_LEAVE, .nkeys = 3, .argc = 5, .argv = argv,
                            .argvlen = len, .tag = distlock__lock_tag(key, token) };
    if (c->tp.cl != NULL)
        distlock__call_sharded(&call, DISTLOCK__S_LEAVE_SH, 4, sk->sh, key);
    for (int i = 0; i < c->n; i++)
        cs->calls_a[i] = &call;
    distlock__round(&c->tp, cs, cs->calls_a, res, NULL, NULL);
    distlock__round_clear(res, c->n);
    distlock__checkin(c, cs);
    free(sk);
    return DISTLOCK_OK;
}

void distlock__write_leave(distlock_client *c, const char *key, const char *writer)
{
    /* channel, shard channel, the registry of waiting writers */
    char *ch = malloc(3 * DISTLOCK__SIDEKEY_MAX);
    distlock__connset *cs = ch ? distlock__checkout(c) : NULL;
    if (cs == NULL) {
        free(ch);
        return;  /* the intent and the registry entry expire with their scores */
    }
    char *wk = ch + 2 * DISTLOCK__SIDEKEY_MAX;
    /* without the registry (a cluster key whose side keys are not in its
     * slot: acquire.c did not note the writer) the intent goes as before */
    int reg = writer != NULL && (c->tp.cl == NULL || distlock__sidekeys_in_slot(key));
    if (reg)
        distlock__sidekey(wk, key, DISTLOCK__WRITERS_SUFFIX);
    const char *argv[4] = { key, reg ? wk : ch, reg ? ch : NULL, reg ? writer : NULL };
    size_t len[4] = { strlen(key), 0, 0, 0 };
    size_t chlen = distlock__channel_name(ch, key);
    len[1] = reg ? strlen(wk) : chlen;
    if (reg)
        len[2] = chlen, len[3] = strlen(writer);
    distlock__call call = { .script = DISTLOCK__S_WRITE_LEAVE, .nkeys = reg ? 2 : 1,
                            .argc = reg ? 4 : 2, .argv = argv, .argvlen = len };
    if (c->tp.cl != NULL)
        distlock__call_sharded(&call, DISTLOCK__S_WRITE_LEAVE_SH, reg ? 2 : 1,
                               ch + DISTLOCK__SIDEKEY_MAX, key);
    for (int i = 0; i < c->n; i++)
        cs->calls_a[i] = &call;
    distlock__round(&c->tp, cs, cs->calls_a, cs->res_a, NULL, NULL);
    distlock__round_clear(cs->res_a, c->n);
    distlock__checkin(c, cs);
    free(ch);
}
