/* admin.c -- questions an operator asks about a key, answered by the core in
 * one round (who holds it, on how many nodes, for how long; what one node
 * holds; its fence counter), which keys may be locks (SCAN, bounded), the
 * administrative delete, and the names of a key's kinds.
 *
 * It uses the transport's round (distlock__round) and the
 * inspect script of the protocol's table; nothing below calls it.
 *
 * Layer: 7 API
 */
#include <stddef.h>  /* offsetof */
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
       NODE_OTHER,      /* a value of another type: someone else's, no token */
       NODE_ZSET };     /* read locks or a semaphore: {kind, pttl, holders, permits} */

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
    if (x->element[0]->type == REDIS_REPLY_INTEGER && x->elements == 5)
        return NODE_ZSET;
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

/* Nodes that refused the request (an error reply: an ACL without a command
 * it needs, OOM; not WRONGTYPE, which the inspect reads as "taken", nor a
 * cluster unavailable for now). */
static int count_refused(const distlock_client *c, const distlock__result *res)
{
    int refused = 0;
    for (int i = 0; i < c->n; i++)
        refused += res[i].state == DISTLOCK__R_DONE && res[i].reply->type == REDIS_REPLY_ERROR &&
                   !strstr(res[i].reply->str, "WRONGTYPE") && distlock__reply_refused(&res[i]);
    return refused;
}

/* The detail for a verdict the silent or refusing nodes could change: what
 * each said. The status follows the verdict's rule (distlock__verdict): a
 * refusal is the operator's to fix, so EPROTO as soon as a node refused,
 * even when others were down too; else ENOQUORUM (one node: its own
 * status). */
static int fail_unanswered(const distlock_client *c, const distlock__result *res,
                           const char *key, int answered)
{
    char buf[480];
    int refused = count_refused(c, res);
    int status = refused > 0 ? DISTLOCK_EPROTO : DISTLOCK_ENOQUORUM;
    size_t off;
    if (c->n == 1)
        off = (size_t)snprintf(buf, sizeof buf, "'%.64s': cannot tell who holds it: the node %s",
                               key, refused ? "refused" : "did not answer");
    else if (refused > 0)
        off = (size_t)snprintf(buf, sizeof buf,
                               "'%.64s': %d of %d nodes told who holds it, %d refused, %d did "
                               "not answer: too few to tell", key, answered, c->n, refused,
                               c->n - answered - refused);
    else
        off = (size_t)snprintf(buf, sizeof buf,
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

/* ------------------------------------------------------------ growable results */

/* The 0.1.0 layouts of the result structs: the smallest size a caller may
 * give. They end at the last field of 0.1.0, and stay so when later
 * versions add fields. */
#define HOLDER_INFO_MIN_SIZE (offsetof(distlock_holder_info, taken) + sizeof(int))
#define OWNER_INFO_MIN_SIZE (offsetof(distlock_owner_info, pttl_ms) + sizeof(long))

/* Today's structs are their 0.1.0 layouts: a size check_size() accepts
 * holds every field this version fills, so the calls write them in place
 * in the caller's struct (no copy on the stack: the owner record is 800
 * bytes, and every entry point stays within 4 KB of stack). A field added
 * later must be written only when the caller's size holds it. */
_Static_assert(OWNER_INFO_MIN_SIZE == sizeof(distlock_owner_info),
               "a field added to a result struct: fill it only when out->size holds it");
/* distlock_holder_info grew kind, holders, permits, writer after its 0.1.0
 * layout: each written only when the caller's size holds it (kind_fields). */
#define HOLDER_HOLDS(info, f) ((info)->size >= offsetof(distlock_holder_info, f) + \
                               sizeof((info)->f))
_Static_assert(offsetof(distlock_holder_info, writer) + sizeof(int) >
               sizeof(distlock_holder_info) - sizeof(long),  /* writer is the last field */
               "a field added to distlock_holder_info: fill it only when out->size holds it");

/* What the nodes counted say the key is (distlock_holder_kind): a token on
 * them, else the zset lease seen (holders: the most live tokens a node
 * had), else another type, else free. Only into a caller's struct that
 * holds these fields. */
static void kind_fields(const distlock__result *res, int from, int to, int token,
                        distlock_holder_info *info)
{
    int kind = token ? DISTLOCK_HOLDER_LOCK : DISTLOCK_HOLDER_FREE, writer = 0;
    long holders = 0, permits = 0;
    for (int i = from; i < to && !token; i++) {
        int s = node_state(&res[i]);
        if (s == NODE_ZSET) {
            const redisReply *x = res[i].reply;
            kind = (int)x->element[0]->integer;
            if (x->element[2]->type == REDIS_REPLY_INTEGER && x->element[2]->integer > holders)
                holders = (long)x->element[2]->integer;
            if (kind == DISTLOCK_HOLDER_SEMAPHORE && x->element[3]->type == REDIS_REPLY_INTEGER &&
                x->element[3]->integer > permits)
                permits = (long)x->element[3]->integer;
            if (x->element[4]->type == REDIS_REPLY_INTEGER && x->element[4]->integer == 1)
                writer = 1;
        } else if (s == NODE_OTHER && kind == DISTLOCK_HOLDER_FREE) {
            kind = DISTLOCK_HOLDER_OTHER;
        }
    }
    if (HOLDER_HOLDS(info, kind))
        info->kind = kind;
    if (HOLDER_HOLDS(info, holders))
        info->holders = holders;
    if (HOLDER_HOLDS(info, permits))
        info->permits = permits;
    if (HOLDER_HOLDS(info, writer))
        info->writer = kind == DISTLOCK_HOLDER_READERS ? writer : 0;
}

/* The caller's struct `out` (NULL: none asked) declares its size in its
 * first field: refuse one smaller than the 0.1.0 layout, before anything is
 * written or sent. */
static int check_size(const void *out, size_t min, const char *type)
{
    size_t size;
    if (out == NULL)
        return DISTLOCK_OK;
    memcpy(&size, out, sizeof size);
    if (size < min)
        return distlock__fail(DISTLOCK_EINVAL,
                              "%s.size is %zu, less than the %zu bytes of its 0.1.0 layout: set "
                              "it to sizeof(%s)", type, size, min, type);
    return DISTLOCK_OK;
}

/* Zero the caller's struct (size checked) after its size field, up to its
 * size: the fields of this version, and those of a later header that this
 * version does not fill. Never past the caller's size, nor its size field. */
static void clear_sized(void *out)
{
    size_t size;
    if (out == NULL)
        return;
    memcpy(&size, out, sizeof size);
    memset((char *)out + sizeof size, 0, size - sizeof size);
}

/* ------------------------------------------------------------ holder */

/* What node i alone says (distlock_admin_holder with node = i): 1 holds a
 * token, 0 does not, or that node's error. */
static int one_node_holder(const distlock_client *c, const distlock__result *r, int node,
                           distlock_holder_info *info)
{
    int s = node_state(r);
    if (s == NODE_NONE) {
        if (r->state == DISTLOCK__R_FAILED)
            return distlock__fail(r->status, "%s", r->err);
        return distlock__fail(DISTLOCK_EPROTO, "%s: %s", c->nodes[node].uri,
                              r->reply->type == REDIS_REPLY_ERROR ? r->reply->str
                                                                  : "unexpected reply");
    }
    info->answered = 1;
    info->taken = s == NODE_TOKEN || s == NODE_OTHER || s == NODE_ZSET;
    kind_fields(r, 0, 1, s == NODE_TOKEN, info);
    if (s != NODE_TOKEN)
        return 0;
    const redisReply *t = node_token(r);
    size_t n = t->len < sizeof info->token - 1 ? t->len : sizeof info->token - 1;
    memcpy(info->token, t->str, n);
    info->token[n] = '\0';
    info->nodes = 1;
    info->pttl_ms = node_pttl(r);
    return 1;
}

/* The verdict over every node (distlock_admin_holder with node = -1). */
static int all_nodes_holder(const distlock_client *c, const distlock__result *res,
                            const char *key, distlock_holder_info *info)
{
    /* The token seen on the most nodes (ties: the first in node order). */
    int heard = 0, held = 0, best = 0, best_i = -1;
    long best_pttl = 0;
    for (int i = 0; i < c->n; i++) {
        int s = node_state(&res[i]);
        heard += s != NODE_NONE;
        held += s == NODE_TOKEN || s == NODE_OTHER || s == NODE_ZSET;
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
    if (best_i >= 0) {
        const redisReply *t = node_token(&res[best_i]);
        size_t n = t->len < sizeof info->token - 1 ? t->len : sizeof info->token - 1;
        memcpy(info->token, t->str, n);
        info->token[n] = '\0';
    }
    info->nodes = best;
    info->pttl_ms = best_i >= 0 ? best_pttl : 0;
    info->answered = heard;
    info->taken = held;
    kind_fields(res, 0, c->n, best_i >= 0, info);

    /* Held once one token is on a quorum: the silent nodes cannot undo that.
     * Not held once no token could reach a quorum even if every silent node
     * held it. In between, the silent nodes decide: no verdict. */
    int silent = c->n - heard;
    if (best >= c->quorum)
        return 1;
    if (best + silent < c->quorum)
        return 0;
    return fail_unanswered(c, res, key, heard);
}

int distlock_admin_holder(distlock_client *c, const char *key, int node,
                          distlock_holder_info *out)
{
    int rc;
    distlock__connset *cs;
    distlock_holder_info scratch;  /* when the caller wants the verdict alone */
    distlock_holder_info *info = out ? out : &scratch;

    distlock__clear_error();
    if ((rc = check_size(out, HOLDER_INFO_MIN_SIZE, "distlock_holder_info")) != DISTLOCK_OK)
        return rc;
    scratch.size = sizeof scratch;
    clear_sized(info);
    if (c && (node < -1 || node >= c->n))
        return distlock__fail(DISTLOCK_EINVAL, "node %d out of range -1..%d", node, c->n - 1);
    /* No early stop: the answer is who holds it where, so hear every node
     * asked (each bounded by its own timeout). */
    if ((rc = inspect_round(c, key, node, &cs)) != DISTLOCK_OK)
        return rc;
    distlock__result *res = cs->res_a;
    rc = node < 0 ? all_nodes_holder(c, res, key, info)
                  : one_node_holder(c, &res[node], node, info);
    distlock__round_clear(res, c->n);
    distlock__checkin(c, cs);
    return rc;
}

/* The one table of the kinds' names: the CLI, the PHP extension and the
 * Python package print these, so `distlock status`, Client::holder() and
 * Client.holder() cannot drift apart. A value this library does not know
 * (a caller's garbage, or a kind a newer header adds) is "other", as a
 * value of another type is: the key is not one of ours to name. */
const char *distlock_holder_kind_name(int kind)
{
    switch (kind) {
    case DISTLOCK_HOLDER_FREE: return "free";
    case DISTLOCK_HOLDER_LOCK: return "lock";
    case DISTLOCK_HOLDER_READERS: return "readers";
    case DISTLOCK_HOLDER_SEMAPHORE: return "semaphore";
    default: return "other";
    }
}

/* ------------------------------------------------------------ owner */

/* Field `name` of a HGETALL reply (flat name/value array), or NULL. */
static const redisReply *hash_field(const redisReply *h, const char *name)
{
    for (size_t i = 0; i + 1 < h->elements; i += 2)
        if (h->element[i]->type == REDIS_REPLY_STRING && strcmp(h->element[i]->str, name) == 0 &&
            h->element[i + 1]->type == REDIS_REPLY_STRING)
            return h->element[i + 1];
    return NULL;
}

static void copy_field(char *dst, size_t size, const redisReply *v)
{
    size_t n = v == NULL ? 0 : v->len < size - 1 ? v->len : size - 1;
    if (n)
        memcpy(dst, v->str, n);
    dst[n] = '\0';
}

/* Node r's owner record, if it names the token the node's lock key holds. */
static int owner_of(const distlock__result *r, distlock_owner_info *out)
{
    if (node_state(r) != NODE_TOKEN || r->reply->elements < 4 ||
        r->reply->element[2]->type != REDIS_REPLY_ARRAY)
        return 0;
    const redisReply *h = r->reply->element[2], *t = hash_field(h, "token");
    if (t == NULL || !same_token(t, node_token(r)))
        return 0;  /* none, or a stale record of an earlier holder */
    if (out == NULL)
        return 1;
    const redisReply *pid = hash_field(h, "pid"), *since = hash_field(h, "since");
    copy_field(out->host, sizeof(out->host), hash_field(h, "host"));
    copy_field(out->program, sizeof(out->program), hash_field(h, "program"));
    copy_field(out->label, sizeof(out->label), hash_field(h, "label"));
    out->pid = pid ? strtol(pid->str, NULL, 10) : 0;
    out->since_ms = since ? strtoll(since->str, NULL, 10) : 0;
    out->pttl_ms = r->reply->element[3]->type == REDIS_REPLY_INTEGER
                       ? (long)r->reply->element[3]->integer : -1;
    return 1;
}

int distlock_admin_owner(distlock_client *c, const char *key, int node,
                         distlock_owner_info *out)
{
    int rc;
    distlock__connset *cs;
    char ok[DISTLOCK__SIDEKEY_MAX];

    distlock__clear_error();
    if ((rc = check_size(out, OWNER_INFO_MIN_SIZE, "distlock_owner_info")) != DISTLOCK_OK)
        return rc;
    clear_sized(out);
    if (c && (node < -1 || node >= c->n))
        return distlock__fail(DISTLOCK_EINVAL, "node %d out of range -1..%d", node, c->n - 1);
    if ((rc = admin_begin(c, key, &cs)) != DISTLOCK_OK)
        return rc;
    distlock__sidekey(ok, key, DISTLOCK__OWNER_SUFFIX);
    const char *argv[2] = { key, ok };
    size_t len[2] = { strlen(key), strlen(ok) };
    distlock__call call = { .script = DISTLOCK__S_INSPECT, .nkeys = 2, .argc = 2, .argv = argv,
                            .argvlen = len };
    for (int i = 0; i < c->n; i++)
        cs->calls_a[i] = node < 0 || node == i ? &call : NULL;
    distlock__round(&c->tp, cs, cs->calls_a, cs->res_a, NULL, NULL);
    distlock__result *res = cs->res_a;
    rc = 0;
    int heard = 0;
    for (int i = 0; i < c->n && rc == 0; i++) {
        if (node >= 0 && i != node)
            continue;
        heard += node_state(&res[i]) != NODE_NONE;
        rc = owner_of(&res[i], out);
    }
    if (rc == 0 && heard == 0) {
        /* nobody answered: say why (the first failure; a refusal first, as
         * in the verdict: EPROTO even when other nodes were down too) */
        int refused = count_refused(c, res);
        for (int i = 0; i < c->n; i++) {
            if (node >= 0 && i != node)
                continue;
            if (res[i].state == DISTLOCK__R_FAILED && !refused) {
                rc = distlock__fail(res[i].status, "%s", res[i].err);
                break;
            }
            if (res[i].reply && res[i].reply->type == REDIS_REPLY_ERROR) {
                rc = distlock__fail(DISTLOCK_EPROTO, "%s: %s", c->nodes[i].uri,
                                    res[i].reply->str);
                break;
            }
        }
    }
    distlock__round_clear(res, c->n);
    distlock__checkin(c, cs);
    return rc;
}

/* One plain command to node `node` only; the reply in (*cs)->res_a[node],
 * to clear and check in. */
static int one_node_command(distlock_client *c, int node, int argc, const char **argv,
                            const size_t *len, distlock__connset **cs)
{
    int rc = distlock__begin(c, cs);
    if (rc != DISTLOCK_OK)
        return rc;
    distlock__call call = { .script = -1, .argc = argc, .argv = argv, .argvlen = len };
    for (int i = 0; i < c->n; i++)
        (*cs)->calls_a[i] = i == node ? &call : NULL;
    distlock__round(&c->tp, *cs, (*cs)->calls_a, (*cs)->res_a, NULL, NULL);
    return DISTLOCK_OK;
}

/* The failure of a one-node reply that is not a value: its status, with
 * the node's detail. Returns DISTLOCK_OK for a usable reply. */
static int node_reply_error(const distlock_client *c, int node, const distlock__result *r)
{
    if (r->state == DISTLOCK__R_FAILED)
        return distlock__fail(r->status, "%s", r->err);
    if (r->reply->type == REDIS_REPLY_ERROR)
        return distlock__fail(DISTLOCK_EPROTO, "%s: %s", c->nodes[node].uri, r->reply->str);
    return DISTLOCK_OK;
}

static int node_arg(const distlock_client *c, int node)
{
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    if (node < 0 || node >= c->n)
        return distlock__fail(DISTLOCK_EINVAL, "node %d out of range 0..%d", node, c->n - 1);
    return DISTLOCK_OK;
}

int distlock_admin_fence(distlock_client *c, const char *key, int node, int64_t *fence)
{
    int rc;
    char fk[DISTLOCK__SIDEKEY_MAX];
    distlock__connset *cs;

    distlock__clear_error();
    if (fence)
        *fence = 0;
    if ((rc = node_arg(c, node)) != DISTLOCK_OK || (rc = distlock__check_key(key)) != DISTLOCK_OK)
        return rc;
    distlock__sidekey(fk, key, DISTLOCK__FENCE_SUFFIX);
    const char *argv[2] = { "GET", fk };
    size_t len[2] = { 3, strlen(fk) };
    if ((rc = one_node_command(c, node, 2, argv, len, &cs)) != DISTLOCK_OK)
        return rc;
    const distlock__result *r = &cs->res_a[node];
    if ((rc = node_reply_error(c, node, r)) == DISTLOCK_OK) {
        const redisReply *x = r->reply;
        char *end = NULL;
        long long v = 0;
        if (x->type == REDIS_REPLY_NIL) {
            rc = 0;
        } else if (x->type == REDIS_REPLY_STRING && x->len > 0 &&
                   (v = strtoll(x->str, &end, 10), end == x->str + x->len) && v >= 0) {
            if (fence)
                *fence = (int64_t)v;
            rc = 1;
        } else {
            rc = distlock__fail(DISTLOCK_EPROTO, "%s: fence counter of '%.64s' is not an integer",
                                c->nodes[node].uri, key);
        }
    }
    distlock__round_clear(cs->res_a, c->n);
    distlock__checkin(c, cs);
    return rc;
}

/* The keys of one SCAN reply ({cursor, {keys...}}) to fn, fence counters
 * and registries of waiting writers (a zset of writers' names: it would
 * read as read locks) left out; the next cursor in *cursor. Returns the count or EPROTO. */
static int scan_reply(const distlock_client *c, int node, const redisReply *x,
                      unsigned long long *cursor, distlock_key_fn fn, void *arg)
{
    char *end = NULL;
    if (x->type != REDIS_REPLY_ARRAY || x->elements != 2 ||
        x->element[0]->type != REDIS_REPLY_STRING || x->element[1]->type != REDIS_REPLY_ARRAY)
        return distlock__fail(DISTLOCK_EPROTO, "%s: unexpected reply to SCAN", c->nodes[node].uri);
    unsigned long long next = strtoull(x->element[0]->str, &end, 10);
    if (end != x->element[0]->str + x->element[0]->len)
        return distlock__fail(DISTLOCK_EPROTO, "%s: unexpected SCAN cursor", c->nodes[node].uri);
    int given = 0;
    const redisReply *keys = x->element[1];
    for (size_t i = 0; i < keys->elements; i++) {
        const redisReply *k = keys->element[i];
        if (k->type != REDIS_REPLY_STRING ||
            distlock__is_sidekey(k->str, k->len, DISTLOCK__FENCE_SUFFIX) ||
            distlock__is_sidekey(k->str, k->len, DISTLOCK__WRITERS_SUFFIX))
            continue;
        given++;
        if (fn && fn(k->str, k->len, arg) != 0)
            break;
    }
    *cursor = next;
    return given;
}

/* SCAN's COUNT hint at most (distlock.h): one step's reply stays bounded. */
#define SCAN_COUNT_MAX 100000

int distlock_admin_scan(distlock_client *c, int node, const char *pattern, long count,
                        unsigned long long *cursor, distlock_key_fn fn, void *arg)
{
    int rc;
    char cur[DISTLOCK__NUM_LEN], cnt[DISTLOCK__NUM_LEN];
    distlock__connset *cs;

    distlock__clear_error();
    if ((rc = node_arg(c, node)) != DISTLOCK_OK)
        return rc;
    if (cursor == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "cursor must not be NULL");
    if (count < 1 || count > SCAN_COUNT_MAX)
        return distlock__fail(DISTLOCK_EINVAL, "count %ld out of range 1..%d", count,
                              SCAN_COUNT_MAX);
    if (pattern == NULL)
        pattern = "*";
    if (!*pattern || strlen(pattern) > DISTLOCK_KEY_MAX)
        return distlock__fail(DISTLOCK_EINVAL, "pattern must be 1..%d bytes", DISTLOCK_KEY_MAX);
    snprintf(cur, sizeof cur, "%llu", *cursor);
    snprintf(cnt, sizeof cnt, "%ld", count);
    /* One SCAN step and a TYPE per key in the server (the same one round
     * trip per step): string keys, and the zsets that are read locks or
     * semaphores (protocol.h), which SCAN ... TYPE cannot pick in one step. */
    const char *argv[6] = { "EVAL", distlock__scan_leases_script, "0", cur, pattern, cnt };
    size_t len[6];
    for (int i = 0; i < 6; i++)
        len[i] = strlen(argv[i]);
    if ((rc = distlock__begin(c, &cs)) != DISTLOCK_OK)
        return rc;
    distlock__call call = { .script = -1, .argc = 6, .argv = argv, .argvlen = len };
    for (int i = 0; i < c->n; i++)
        cs->calls_a[i] = i == node ? &call : NULL;
    distlock__round(&c->tp, cs, cs->calls_a, cs->res_a, NULL, NULL);
    const distlock__result *r = &cs->res_a[node];
    if ((rc = node_reply_error(c, node, r)) == DISTLOCK_OK)
        rc = scan_reply(c, node, r->reply, cursor, fn, arg);
    distlock__round_clear(cs->res_a, c->n);
    distlock__checkin(c, cs);
    return rc;
}

int distlock_admin_cluster_route(distlock_client *c, const char *key, int node, int *slot,
                                 char *buf, size_t size)
{
    int rc;
    distlock__clear_error();
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    if ((rc = distlock__check_key(key)) != DISTLOCK_OK)
        return rc;
    if (node < 0 || node >= c->n)
        return distlock__fail(DISTLOCK_EINVAL, "node %d out of range 0..%d", node, c->n - 1);
    if (!c->tp.kind[node]->keys_move)  /* a key's server is the node's own */
        return 0;
    char host[DISTLOCK__HOST_LEN] = "";
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

int distlock_admin_force_release(distlock_client *c, const char *key, int *deleted)
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
    /* A node that refused the DEL (an ACL without it) makes it EPROTO, as
     * in the verdict of lock operations: the operator's to fix, not "no
     * quorum" (nodes down or slow, try again); fail_nodes says so for one
     * node. */
    if (failed > 0)
        rc = distlock__fail_nodes(&c->q, res, count_refused(c, res) > 0 ? DISTLOCK_EPROTO
                                                                         : DISTLOCK_ENOQUORUM,
                                  "force release did not reach every node");
    if (deleted)
        *deleted = del;
    distlock__round_clear(res, c->n);
    distlock__checkin(c, cs);
    return rc;
}
