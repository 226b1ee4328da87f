/* admin.c -- questions an operator asks about a key, answered by the core in
 * one round (who holds it, on how many nodes, for how long; what one node
 * holds), the administrative delete, and the one TTL rule the front ends
 * use to turn seconds into milliseconds.
 *
 * Layer 7 (API): it uses the transport's round (distlock__round) and the
 * inspect script of the protocol's table; nothing below calls it.
 */
#include <float.h>
#include <math.h>  /* isfinite: a macro */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ------------------------------------------------------------ holder */

/* The checks and the connection set every admin call starts with. */
static int admin_begin(distlock_client *c, const char *key, distlock__connset **cs)
{
    int rc;
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    if ((rc = distlock__check_key(key)) != DISTLOCK_OK)
        return rc;
    return distlock__begin(c, cs);
}

/* One round of the inspect script ({GET key, PTTL key}) to every node
 * (node < 0) or to node `node`, hearing every node it asks; the replies are
 * in (*cs)->res_a, to clear and check in. */
static int inspect_round(distlock_client *c, const char *key, int node, distlock__connset **cs)
{
    int rc = admin_begin(c, key, cs);
    if (rc != DISTLOCK_OK)
        return rc;
    const char *argv[1] = { key };
    size_t len[1] = { strlen(key) };
    distlock__call call = { .script = DISTLOCK__S_INSPECT, .nkeys = 1, .argc = 1, .argv = argv,
                            .argvlen = len };
    for (int i = 0; i < c->n; i++)
        (*cs)->calls_a[i] = node < 0 || node == i ? &call : NULL;
    distlock__round(&c->tp, *cs, (*cs)->calls_a, (*cs)->res_a, NULL, NULL);
    return DISTLOCK_OK;
}


/* What one node said about the key, from its inspect reply. */
enum { NODE_NONE = 0,   /* no answer: failed, or an error reply */
       NODE_FREE,       /* the key does not exist */
       NODE_TOKEN,      /* a string: a lock token (ours or anyone's) */
       NODE_OTHER };    /* a value of another type: someone else's, no token */

static int node_state(const distlock__result *r)
{
    if (r->state != DISTLOCK__R_DONE)
        return NODE_NONE;
    const redisReply *x = r->reply;
    /* GET on a hash, a list...: the key is taken by something that is not
     * a lock token. Held by someone else, as acquire sees it; not a failure. */
    if (x->type == REDIS_REPLY_ERROR)
        return strstr(x->str, "WRONGTYPE") ? NODE_OTHER : NODE_NONE;
    if (x->type != REDIS_REPLY_ARRAY || x->elements < 1)
        return NODE_NONE;
    if (x->element[0]->type == REDIS_REPLY_STRING)
        return NODE_TOKEN;
    return x->element[0]->type == REDIS_REPLY_NIL ? NODE_FREE : NODE_NONE;
}

static const redisReply *node_token(const distlock__result *r)
{
    return r->reply->element[0];
}

static long node_pttl(const distlock__result *r)
{
    const redisReply *x = r->reply;
    if (x->elements >= 2 && x->element[1]->type == REDIS_REPLY_INTEGER)
        return (long)x->element[1]->integer;
    return -1;
}

static int same_token(const redisReply *a, const redisReply *b)
{
    return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
}

/* Shortest of two remaining TTLs where -1 (no expiry) is the longest. */
static long shorter_pttl(long a, long b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return a < b ? a : b;
}

/* The detail for a verdict the silent nodes could change: what each said. */
static int fail_unanswered(const distlock_client *c, const distlock__result *res,
                           const char *key, int answered)
{
    char buf[480];
    int status = DISTLOCK_ENOQUORUM;
    size_t off = (size_t)snprintf(buf, sizeof buf,
                                  "'%.64s': %d of %d nodes answered, too few to tell who holds it",
                                  key, answered, c->n);
    for (int i = 0; i < c->n && off < sizeof buf; i++) {
        const distlock__result *r = &res[i];
        if (node_state(r) != NODE_NONE)
            continue;
        if (r->state == DISTLOCK__R_FAILED) {
            off += (size_t)snprintf(buf + off, sizeof buf - off, "; %s", r->err);
            if (c->n == 1)
                status = r->status;
        } else {
            const redisReply *x = r->reply;
            off += (size_t)snprintf(buf + off, sizeof buf - off, "; %s: %s", c->nodes[i].uri,
                                    x && x->type == REDIS_REPLY_ERROR ? x->str
                                                                      : "unexpected reply");
            if (c->n == 1)
                status = DISTLOCK_EPROTO;
        }
    }
    /* One node: its own error (ECONN, EPROTO) says more than "no quorum". */
    return distlock__fail(status, "%s", buf);
}

int distlock_holder(distlock_client *c, const char *key, char *token_buf, size_t size,
                    int *nodes, long *pttl_ms, int *answered, int *taken)
{
    int rc;

    distlock__clear_error();
    if (token_buf && size > 0)
        token_buf[0] = '\0';
    if (nodes)
        *nodes = 0;
    if (pttl_ms)
        *pttl_ms = 0;
    if (answered)
        *answered = 0;
    if (taken)
        *taken = 0;
    /* No early stop: the answer is who holds it where, so hear every node
     * (each bounded by its own timeout). */
    distlock__connset *cs;
    if ((rc = inspect_round(c, key, -1, &cs)) != DISTLOCK_OK)
        return rc;
    distlock__result *res = cs->res_a;

    /* The token seen on the most nodes (ties: the first in node order). */
    int heard = 0, held = 0, best = 0, best_i = -1;
    long best_pttl = 0;
    for (int i = 0; i < c->n; i++) {
        int s = node_state(&res[i]);
        heard += s != NODE_NONE;
        held += s == NODE_TOKEN || s == NODE_OTHER;
        if (s != NODE_TOKEN)
            continue;
        int same = 0;
        long pttl = -1;
        for (int j = 0; j < c->n; j++) {
            if (node_state(&res[j]) == NODE_TOKEN &&
                same_token(node_token(&res[i]), node_token(&res[j]))) {
                same++;
                pttl = shorter_pttl(pttl, node_pttl(&res[j]));
            }
        }
        if (same > best) {
            best = same;
            best_i = i;
            best_pttl = pttl;
        }
    }
    if (best_i >= 0 && token_buf && size > 0) {
        const redisReply *t = node_token(&res[best_i]);
        size_t n = t->len < size - 1 ? t->len : size - 1;
        memcpy(token_buf, t->str, n);
        token_buf[n] = '\0';
    }
    if (nodes)
        *nodes = best;
    if (pttl_ms)
        *pttl_ms = best_i >= 0 ? best_pttl : 0;
    if (answered)
        *answered = heard;
    if (taken)
        *taken = held;

    /* Held once one token is on a quorum: the silent nodes cannot undo that.
     * Not held once no token could reach a quorum even if every silent node
     * held it. In between, the silent nodes decide: no verdict. */
    int silent = c->n - heard;
    if (best >= c->quorum)
        rc = 1;
    else if (best + silent < c->quorum)
        rc = 0;
    else
        rc = fail_unanswered(c, res, key, heard);
    distlock__round_clear(res, c->n);
    distlock__checkin(c, cs);
    return rc;
}

/* ------------------------------------------------------------ one node, or all */

int distlock_inspect(distlock_client *c, const char *key, int node, char *token_buf, size_t size,
                     long *pttl_ms)
{
    int rc;
    distlock__connset *cs;

    distlock__clear_error();
    if (c && (node < 0 || node >= c->n))
        return distlock__fail(DISTLOCK_EINVAL, "node %d out of range 0..%d", node, c->n - 1);
    if ((rc = inspect_round(c, key, node, &cs)) != DISTLOCK_OK)
        return rc;
    distlock__result *res = cs->res_a;
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

int distlock_cluster_route(distlock_client *c, const char *key, int node, int *slot, char *buf,
                           size_t size)
{
    int rc;
    distlock__clear_error();
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    if ((rc = distlock__check_key(key)) != DISTLOCK_OK)
        return rc;
    if (node < 0 || node >= c->n)
        return distlock__fail(DISTLOCK_EINVAL, "node %d out of range 0..%d", node, c->n - 1);
    if (c->nodes[node].kind != DISTLOCK__NODE_CLUSTER)
        return 0;
    char host[256] = "";
    int port = 0, s = 0;
    int known = distlock__cl_where(&c->tp, node, key, host, sizeof(host), &port, &s) == 0;
    if (slot)
        *slot = s;
    if (buf && size > 0) {
        int v6 = strchr(host, ':') != NULL;
        if (known)
            snprintf(buf, size, "%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port);
        else
            buf[0] = '\0';
    }
    return 1;
}

int distlock_force_release(distlock_client *c, const char *key, int *deleted)
{
    int rc, del = 0, failed = 0;
    distlock__connset *cs;

    distlock__clear_error();
    if ((rc = admin_begin(c, key, &cs)) != DISTLOCK_OK)
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

/* ------------------------------------------------------------ the TTL rule */

/* The shortest decimal text that reads back as v, so a detail names the
 * value the caller wrote (0.07, not 0.070000000000000007). */
static void fmt_double(char *buf, size_t size, double v)
{
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

int distlock_ttl_from_seconds(double seconds, long *ttl_ms)
{
    char v[40];

    distlock__clear_error();
    if (ttl_ms == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "ttl_ms must not be NULL");
    if (!isfinite(seconds) || !(seconds > 0.0)) {
        fmt_double(v, sizeof v, seconds);
        return distlock__fail(DISTLOCK_EINVAL,
                              "ttl must be a finite number of seconds > 0, got %s", v);
    }
    double ms = seconds * 1000.0;
    /* (truncation is floor here: ms > 0; and no libm needed) */
    double whole = ms < (double)DISTLOCK_TTL_MAX + 1.0 ? (double)(long)ms : ms;
    /* Rounded up, so a lease is never shorter than asked -- except for the
     * error of the binary product itself: 0.07 s is 70.00000000000001 ms in
     * doubles, and is 70 ms, not 71. A few ulps of tolerance. */
    if (ms - whole > whole * 4 * DBL_EPSILON)
        whole += 1.0;
    if (whole > (double)DISTLOCK_TTL_MAX) {
        fmt_double(v, sizeof v, seconds);
        return distlock__fail(DISTLOCK_EINVAL,
                              "ttl must be at most %ld.%03ld seconds (DISTLOCK_TTL_MAX ms), got %s",
                              DISTLOCK_TTL_MAX / 1000, DISTLOCK_TTL_MAX % 1000, v);
    }
    *ttl_ms = (long)whole;
    return DISTLOCK_OK;
}
