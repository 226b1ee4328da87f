/* inspect.c -- layer 7 (API): administration of a key on the nodes (who
 * holds it on one node; delete it everywhere). */
#include <stdio.h>
#include <string.h>

#include "internal.h"


int distlock_inspect(distlock_client *c, const char *key, int node, char *token_buf, size_t size,
                     long *pttl_ms)
{
    int rc;

    distlock__clear_error();
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    if ((rc = distlock__check_key(key)))
        return rc;
    if (node < 0 || node >= c->n)
        return distlock__fail(DISTLOCK_EINVAL, "node %d out of range 0..%d", node, c->n - 1);
    distlock__connset *cs;
    if ((rc = distlock__begin(c, &cs)) != DISTLOCK_OK)
        return rc;
    distlock__result *res = cs->res_a;
    const distlock__call **calls = cs->calls_a;
    for (int i = 0; i < c->n; i++)
        calls[i] = NULL;
    const char *argv[1] = { key };
    size_t len[1] = { strlen(key) };
    distlock__call call = { .script = DISTLOCK__S_INSPECT, .nkeys = 1, .argc = 1, .argv = argv,
                            .argvlen = len };
    calls[node] = &call;
    distlock__round(&c->tp, cs, calls, res, NULL, NULL);
    const distlock__result *r = &res[node];
    if (r->state == DISTLOCK__R_FAILED) {
        rc = distlock__fail(r->status, "%s", r->err);
    } else if (r->reply->type == REDIS_REPLY_ERROR) {
        rc = distlock__fail(DISTLOCK_EPROTO, "%s: %s", c->nodes[node].uri, r->reply->str);
    } else {
        const redisReply *x = r->reply;
        rc = x->elements >= 1 && x->element[0]->type == REDIS_REPLY_STRING;
        if (token_buf && size > 0)
            snprintf(token_buf, size, "%s", rc ? x->element[0]->str : "");
        if (pttl_ms)
            *pttl_ms = rc ? (long)distlock__reply_int(r, 1) : 0;
    }
    distlock__round_clear(res, c->n);
    distlock__checkin(c, cs);
    return rc;
}

int distlock_force_release(distlock_client *c, const char *key, int *deleted)
{
    int rc, del = 0, failed = 0;

    distlock__clear_error();
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    distlock__connset *cs;
    if ((rc = distlock__check_key(key)) || (rc = distlock__begin(c, &cs)))
        return rc;
    distlock__result *res = cs->res_a;
    const distlock__call **calls = cs->calls_a;
    const char *argv[2] = { "DEL", key };
    size_t len[2] = { 3, strlen(key) };
    distlock__call call = { .script = -1, .argc = 2, .argv = argv, .argvlen = len };
    for (int i = 0; i < c->n; i++)
        calls[i] = &call;
    distlock__round(&c->tp, cs, calls, res, NULL, NULL);
    for (int i = 0; i < c->n; i++) {
        if (res[i].state == DISTLOCK__R_DONE && res[i].reply->type == REDIS_REPLY_INTEGER)
            del += (int)res[i].reply->integer;
        else
            failed++;
    }
    rc = DISTLOCK_OK;
    if (failed > 0)
        rc = distlock__fail_nodes(&c->q, res, DISTLOCK_ENOQUORUM, "force release did not reach every node");
    if (deleted)
        *deleted = del;
    distlock__round_clear(res, c->n);
    distlock__checkin(c, cs);
    return rc;
}
