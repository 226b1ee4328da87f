/* lock.c -- the lock protocol: Lua scripts, reply classification, quorum
 * verdicts, and the operations over a round (acquire, release, extend, leave,
 * the token pair, inspect, force release). Handles live in handle.c.
 *
 * The value of a lock key is the owner's token as a plain string, so the
 * seed PHP code, redis-py, node-redlock, redsync and symfony/lock exclude us
 * and we exclude them on the same key. One code path serves 1..N nodes:
 * N = 1 is simply quorum 1.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* Every script is atomic on its node. KEYS[1] is always the lock key. */
const distlock__script distlock__scripts[DISTLOCK__S_COUNT] = {
    [DISTLOCK__S_ACQUIRE] = { "acquire",
        /* KEYS: key [fence]; ARGV: token ttl_ms strict.
         * Our own token already there (a retry after a lost reply) refreshes
         * the TTL and succeeds, unless strict (plain SET NX semantics): then
         * the reply says the holder is us ({0, pttl, 1}). A fence counter
         * that is not an integer is refused before anything is written. */
        "local f = false\n"
        "if KEYS[2] then\n"
        "  f = redis.call('GET', KEYS[2])\n"
        "  if f and not tonumber(f) then\n"
        "    return redis.error_reply('fence counter ' .. KEYS[2] .. ' is not an integer')\n"
        "  end\n"
        "end\n"
        "local v = redis.call('GET', KEYS[1])\n"
        "if v == false or (v == ARGV[1] and ARGV[3] == '0') then\n"
        "  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
        "  if KEYS[2] then\n"
        "    if v == false then return {1, redis.call('INCR', KEYS[2])} end\n"
        "    return {1, tonumber(f or '0')}\n"
        "  end\n"
        "  return {1, -1}\n"
        "end\n"
        "return {0, redis.call('PTTL', KEYS[1]), v == ARGV[1] and 1 or 0}\n" },
    [DISTLOCK__S_RELEASE] = { "release",
        /* KEYS: key; ARGV: token channel. Compare-and-delete, then wake
         * waiters. pcall: a user without channel rights still releases. */
        "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
        "  redis.call('DEL', KEYS[1])\n"
        "  redis.pcall('PUBLISH', ARGV[2], '')\n"
        "  return 1\n"
        "end\n"
        "return 0\n" },
    [DISTLOCK__S_EXTEND] = { "extend",
        /* KEYS: k1..km; ARGV: token1 ttl1 .. tokenm ttlm. Batched so the
         * watchdog renews every lock due on a node in one round trip. pcall:
         * a key of another type is simply not ours, and must not abort the
         * renewal of the other keys of the batch. */
        "local r = {}\n"
        "for i = 1, #KEYS do\n"
        "  if redis.pcall('GET', KEYS[i]) == ARGV[2*i-1] then\n"
        "    redis.call('PEXPIRE', KEYS[i], ARGV[2*i])\n"
        "    r[i] = 1\n"
        "  else\n"
        "    r[i] = 0\n"
        "  end\n"
        "end\n"
        "return r\n" },
    [DISTLOCK__S_RAISE] = { "raise",
        /* KEYS: key fence; ARGV: token F. Second fencing round for N > 1:
         * raise the counter to F only where we still own the lock. */
        "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end\n"
        "local cur = tonumber(redis.call('GET', KEYS[2]) or '0')\n"
        "if cur < tonumber(ARGV[2]) then redis.call('SET', KEYS[2], ARGV[2]) end\n"
        "return 1\n" },
    [DISTLOCK__S_INSPECT] = { "inspect",
        "return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}\n" },
    [DISTLOCK__S_FAIR] = { "fair",
        /* KEYS: key queue qdeadlines [fence]; ARGV: token ttl_ms strict
         * queue_ttl_ms channel. Waiters are served in arrival order: the
         * free lock goes to the queue's head; others join the queue (or
         * refresh their entry, which expires if the waiter dies) and learn
         * their rank (0: next). When the head takes the lock, the new head
         * is told by name, so a release needs to wake only it. queue_ttl 0:
         * try only. */
        "if KEYS[4] then\n"
        "  local f = redis.call('GET', KEYS[4])\n"
        "  if f and not tonumber(f) then\n"
        "    return redis.error_reply('fence counter ' .. KEYS[4] .. ' is not an integer')\n"
        "  end\n"
        "end\n"
        "local t = redis.call('TIME')\n"
        "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
        "while true do\n"
        "  local head = redis.call('ZRANGE', KEYS[2], 0, 0)\n"
        "  if #head == 0 then break end\n"
        "  if tonumber(redis.call('HGET', KEYS[3], head[1]) or '0') >= now then break end\n"
        "  redis.call('ZREM', KEYS[2], head[1])\n"
        "  redis.call('HDEL', KEYS[3], head[1])\n"
        "end\n"
        "local v = redis.call('GET', KEYS[1])\n"
        "local mine = (v == ARGV[1] and ARGV[3] == '0')\n"
        "if v == false then\n"
        "  local head = redis.call('ZRANGE', KEYS[2], 0, 0)\n"
        "  mine = (#head == 0 or head[1] == ARGV[1])\n"
        "end\n"
        "if mine then\n"
        "  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
        "  redis.call('ZREM', KEYS[2], ARGV[1])\n"
        "  redis.call('HDEL', KEYS[3], ARGV[1])\n"
        "  local nxt = redis.call('ZRANGE', KEYS[2], 0, 0)\n"
        "  if #nxt > 0 then redis.pcall('PUBLISH', ARGV[5], nxt[1]) end\n"
        "  if KEYS[4] then\n"
        "    if v == false then return {1, redis.call('INCR', KEYS[4])} end\n"
        "    return {1, tonumber(redis.call('GET', KEYS[4]) or '0')}\n"
        "  end\n"
        "  return {1, -1}\n"
        "end\n"
        "local qttl = tonumber(ARGV[4])\n"
        "if qttl > 0 then\n"
        "  if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then\n"
        "    local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')\n"
        "    local seq = 0\n"
        "    if #last > 0 then seq = tonumber(last[2]) + 1 end\n"
        "    redis.call('ZADD', KEYS[2], seq, ARGV[1])\n"
        "  end\n"
        "  redis.call('HSET', KEYS[3], ARGV[1], now + qttl)\n"
        "  redis.call('PEXPIRE', KEYS[2], qttl)\n"
        "  redis.call('PEXPIRE', KEYS[3], qttl)\n"
        "end\n"
        "local rank = redis.call('ZRANK', KEYS[2], ARGV[1]) or -1\n"
        "if v == false then return {2, 0, rank} end\n"  /* free, but another waiter is ahead */
        "return {0, redis.call('PTTL', KEYS[1]), rank}\n" },
    [DISTLOCK__S_LEAVE] = { "leave",
        /* KEYS: queue qdeadlines key; ARGV: token channel. A waiter gives
         * up: leave the queue and, if the lock is free, wake the next. */
        "redis.call('ZREM', KEYS[1], ARGV[1])\n"
        "redis.call('HDEL', KEYS[2], ARGV[1])\n"
        "if redis.call('EXISTS', KEYS[3]) == 0 and redis.call('EXISTS', KEYS[1]) == 1 then\n"
        "  redis.pcall('PUBLISH', ARGV[2], '')\n"
        "end\n"
        "return 1\n" },
    [DISTLOCK__S_FAIR_UNDO] = { "fair_undo",
        /* KEYS: key queue qdeadlines; ARGV: token channel queue_ttl_ms. A
         * fair acquire that won this node but not a quorum gives the node
         * back and keeps its place: it is put back at the front of the
         * queue (winning had taken it out), so the nodes' queues do not
         * drift apart and arrival order holds. */
        "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
        "  redis.call('DEL', KEYS[1])\n"
        "  redis.pcall('PUBLISH', ARGV[2], '')\n"
        "end\n"
        "if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then\n"
        "  local t = redis.call('TIME')\n"
        "  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
        "  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')\n"
        "  local seq = 0\n"
        "  if #first > 0 then seq = tonumber(first[2]) - 1 end\n"
        "  redis.call('ZADD', KEYS[2], seq, ARGV[1])\n"
        "  redis.call('HSET', KEYS[3], ARGV[1], now + tonumber(ARGV[3]))\n"
        "  redis.call('PEXPIRE', KEYS[2], ARGV[3])\n"
        "  redis.call('PEXPIRE', KEYS[3], ARGV[3])\n"
        "end\n"
        "return 1\n" },
};

/* ------------------------------------------------------------ helpers */

void distlock__sidekey(char *buf, const char *key, const char *suffix)
{
    /* Same hash slot as the key: reuse its {hashtag} if it has a valid one,
     * else make the whole key the tag. */
    const char *open = strchr(key, '{');
    const char *close = open ? strchr(open + 1, '}') : NULL;
    if (open && close && close > open + 1)
        snprintf(buf, DISTLOCK__SIDEKEY_MAX, "%s%s", key, suffix);
    else if (strchr(key, '}') == NULL)
        snprintf(buf, DISTLOCK__SIDEKEY_MAX, "{%s}%s", key, suffix);
    else
        snprintf(buf, DISTLOCK__SIDEKEY_MAX, "%s%s", key, suffix);
}

static size_t channel_name(char *buf, const char *key)
{
    size_t n = strlen(key);  /* <= DISTLOCK_KEY_MAX, checked by every entry point */
    memcpy(buf, "distlock:", 9);
    memcpy(buf + 9, key, n + 1);
    return 9 + n;
}

/* The transport's ordering domain for requests about this ownership: a
 * request with the same key and token never overtakes an earlier one on a
 * node (round.c). FNV-1a; a collision only orders two requests needlessly. */
static uint64_t lock_tag(const char *key, const char *token)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    for (const unsigned char *p = (const unsigned char *)token; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h ? h : 1;
}

/* 1 granted, 0 refused, -1 failed, -2 no answer (yet) */
static int verdict(const distlock__result *r)
{
    if (r->state == DISTLOCK__R_DONE) {
        const redisReply *x = r->reply;
        if (x->type == REDIS_REPLY_INTEGER)
            return x->integer == 1;
        if (x->type == REDIS_REPLY_NIL)      /* SET NX GET: was free, now ours */
            return 1;
        if (x->type == REDIS_REPLY_STRING)   /* SET NX GET: the holder's token */
            return 0;
        /* A key of another type under our name (another lock library's
         * structure, say) is someone else's: held, not a failure. */
        if (x->type == REDIS_REPLY_ERROR && strncmp(x->str, "WRONGTYPE", 9) == 0)
            return 0;
        if (x->type == REDIS_REPLY_ARRAY && x->elements >= 1 &&
            x->element[0]->type == REDIS_REPLY_INTEGER)
            return x->element[0]->integer == 1;
        return -1;
    }
    return r->state == DISTLOCK__R_FAILED ? -1 : -2;
}

typedef struct tally { int ok, no, failed, silent; } tally;

static tally count(const distlock__result *res, int n)
{
    tally t = { 0, 0, 0, 0 };
    for (int i = 0; i < n; i++) {
        if (res[i].state == DISTLOCK__R_UNSENT)
            continue;
        switch (verdict(&res[i])) {
        case 1: t.ok++; break;
        case 0: t.no++; break;
        case -1: t.failed++; break;
        default: t.silent++; break;
        }
    }
    return t;
}

/* Stop waiting once a quorum granted, or once it no longer can. */
static int decide_quorum(const distlock__result *res, int n, void *arg)
{
    const distlock_client *c = arg;
    tally t = count(res, n);
    return t.ok >= c->quorum || t.no + t.failed > n - c->quorum;
}

/* Fencing acquires stop early only when they can no longer win: hearing
 * from every node gives the highest counter any live node has, and the
 * fence is then written to every node that granted, so a later owner
 * finds it even if a minority of nodes lose their data in between. */
static int decide_cannot_win(const distlock__result *res, int n, void *arg)
{
    const distlock_client *c = arg;
    tally t = count(res, n);
    return t.no + t.failed > n - c->quorum;
}

/* Put the reasons nodes failed into the thread's detail message. */
static int fail_detail(distlock_client *c, const distlock__result *res, int status,
                       const char *what)
{
    char buf[480];
    size_t off = (size_t)snprintf(buf, sizeof(buf), "%s", what);
    int worst = DISTLOCK_OK;
    for (int i = 0; i < c->n && off < sizeof(buf); i++) {
        const distlock__result *r = &res[i];
        if (r->state == DISTLOCK__R_FAILED) {
            off += (size_t)snprintf(buf + off, sizeof(buf) - off, "; %s", r->err);
            if (worst == DISTLOCK_OK || r->status == DISTLOCK_EPROTO)
                worst = r->status;
        } else if (r->state == DISTLOCK__R_DONE && verdict(r) == -1) {
            const redisReply *x = r->reply;
            off += (size_t)snprintf(buf + off, sizeof(buf) - off, "; %s: %s", c->nodes[i].uri,
                                    x->type == REDIS_REPLY_ERROR ? x->str : "unexpected reply");
            worst = DISTLOCK_EPROTO;
        }
    }
    /* One node: its own error is more useful than "no quorum". */
    if (status == DISTLOCK_ENOQUORUM && c->n == 1 && worst != DISTLOCK_OK)
        status = worst;
    distlock__fail(status, "%s", buf);
    return status;
}

static int64_t reply_int(const distlock__result *r, size_t idx)
{
    const redisReply *x = r->reply;
    if (x && x->type == REDIS_REPLY_ARRAY && x->elements > idx &&
        x->element[idx]->type == REDIS_REPLY_INTEGER)
        return x->element[idx]->integer;
    return -1;
}

/* Send the release script to the nodes `which` selects (all if NULL). */
static tally release_round(distlock_client *c, distlock__connset *cs, const char *key,
                           const char *token, const int *which, distlock__result *res,
                           uint64_t maybe)
{
    char ch[strlen(key) + 10];  /* "distlock:" + key + NUL; keys are <= 1 KB */
    const distlock__call **calls = res == cs->res_a ? cs->calls_a : cs->calls_b;
    size_t chlen = channel_name(ch, key);
    const char *argv[3] = { key, token, ch };
    size_t len[3] = { chlen - 9, strlen(token), chlen };
    /* Queued even to a node known hung: if it comes back it must run our
     * release after whatever acquire of ours it still owes. */
    distlock__call call = { DISTLOCK__S_RELEASE, 1, 3, argv, len, NULL, 1, lock_tag(key, token),
                            maybe };
    for (int i = 0; i < c->n; i++)
        calls[i] = (which == NULL || which[i]) ? &call : NULL;
    distlock__round(c, cs, calls, res, decide_quorum, c);
    return count(res, c->n);
}

/* ------------------------------------------------------------ protocol */

/* The node refused because the key already holds our own token: SET NX GET
 * returns it; the acquire script says so in a strict refusal. */
static int holds_own(const distlock__result *r, const char *token)
{
    const redisReply *x = r->state == DISTLOCK__R_DONE ? r->reply : NULL;
    if (x == NULL)
        return 0;
    if (x->type == REDIS_REPLY_STRING)
        return strcmp(x->str, token) == 0;
    return r->call->script == DISTLOCK__S_ACQUIRE && x->type == REDIS_REPLY_ARRAY &&
           x->elements >= 3 && x->element[0]->type == REDIS_REPLY_INTEGER &&
           x->element[0]->integer == 0 && x->element[2]->type == REDIS_REPLY_INTEGER &&
           x->element[2]->integer == 1;
}

/* Nodes that answered with our own token get their TTL refreshed by
 * compare-and-PEXPIRE and then count as granted: a retry after a lost reply,
 * or a re-acquire (not for strict acquires: plain SET NX semantics, unless
 * the call itself was resent on a fresh connection, whose first send is
 * what set it). Rare, so it may cost a second round trip. */
static void refresh_own(distlock_client *c, distlock__connset *cs, const char *key,
                        const char *token, uint64_t tag, const char *ttl, int strict,
                        distlock__result *res)
{
    const distlock__call **calls = cs->calls_b;
    distlock__result *res2 = cs->res_b;
    int any = 0;
    const char *argv[3] = { key, token, ttl };
    size_t len[3] = { strlen(key), strlen(token), strlen(ttl) };
    distlock__call ext = { DISTLOCK__S_EXTEND, 1, 3, argv, len, NULL, 0, tag, 0 };

    for (int i = 0; i < c->n; i++) {
        calls[i] = NULL;
        if (holds_own(&res[i], token) && (!strict || res[i].resent)) {
            calls[i] = &ext;
            any = 1;
        }
    }
    if (!any)
        return;
    distlock__round(c, cs, calls, res2, NULL, NULL);
    for (int i = 0; i < c->n; i++) {
        if (calls[i] == NULL)
            continue;
        /* The EXTEND reply ({1} or {0}) replaces the SET reply. */
        freeReplyObject(res[i].reply);
        res[i] = res2[i];
        res2[i].reply = NULL;
    }
}

int distlock__acquire_once(distlock_client *c, const char *key, const char *token, long ttl_ms,
                           unsigned flags, int fair, long queue_ttl_ms, uint64_t *valid_until_us,
                           int64_t *fence_out, distlock__attempt *att)
{
    /* Side keys and channel: only fair and fencing acquires need them (on
     * the heap: 4 KB the common path's stack does not carry). */
    struct { char fk[DISTLOCK__SIDEKEY_MAX], q[DISTLOCK__SIDEKEY_MAX],
             qt[DISTLOCK__SIDEKEY_MAX], ch[DISTLOCK__SIDEKEY_MAX]; } *sk = NULL;
    char ttl[24], qttl[24];
    const char *argv[10];
    size_t len[10];
    int k = 0, nkeys, rc = DISTLOCK_OK;
    int fencing = (flags & DISTLOCK_FENCING) != 0;
    const char *strict = (flags & DISTLOCK_STRICT) ? "1" : "0";

    uint64_t tag = lock_tag(key, token);
    if ((rc = distlock__check_usable(c)) != DISTLOCK_OK)
        return rc;
    distlock__connset *cs = distlock__checkout(c);
    if (cs == NULL)
        return DISTLOCK_ENOMEM;
    const distlock__call **calls = cs->calls_a;
    distlock__result *res = cs->res_a;
    if ((fair || fencing) && (sk = malloc(sizeof(*sk))) == NULL) {
        distlock__checkin(c, cs);
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    }
    size_t ttllen = distlock__ltoa(ttl, ttl_ms);
    argv[k++] = key;
    if (fair) {
        distlock__sidekey(sk->q, key, ":q");
        distlock__sidekey(sk->qt, key, ":qt");
        argv[k++] = sk->q;
        argv[k++] = sk->qt;
    }
    if (fencing) {
        distlock__sidekey(sk->fk, key, ":fence");
        argv[k++] = sk->fk;
    }
    nkeys = k;
    argv[k++] = token;
    argv[k++] = ttl;
    argv[k++] = strict;
    if (fair) {
        distlock__ltoa(qttl, queue_ttl_ms);
        argv[k++] = qttl;
        channel_name(sk->ch, key);
        argv[k++] = sk->ch;
    }
    for (int a = 0; a < k; a++)
        len[a] = strlen(argv[a]);
    distlock__call call = { fair ? DISTLOCK__S_FAIR : DISTLOCK__S_ACQUIRE, nkeys, k, argv, len,
                            NULL, 0, tag, 0 };
    /* The common case needs no script: SET NX with GET tells us whether we
     * set it, or who holds it (maybe we do already: an owner's retry). */
    const char *pargv[7] = { "SET", key, token, "NX", "PX", ttl, "GET" };
    size_t plen[7] = { 3, len[0], strlen(token), 2, 2, ttllen, 3 };
    distlock__call plain = { -1, 0, 7, pargv, plen, &call, 0, tag, 0 };
    int use_plain = !fair && !fencing && !atomic_load(&c->no_set_get);
    for (int i = 0; i < c->n; i++)
        calls[i] = use_plain ? &plain : &call;

    uint64_t t0 = distlock__now_us();
    distlock__round(c, cs, calls, res, fencing ? decide_cannot_win : decide_quorum, c);
    if (!fair)
        refresh_own(c, cs, key, token, tag, ttl, (flags & DISTLOCK_STRICT) != 0, res);
    tally t = count(res, c->n);
    int64_t fence = -1;
    /* Two nodes turned out to be one server: no lock on that list. */
    if ((rc = distlock__check_usable(c)) != DISTLOCK_OK)
        t.ok = 0;

    if (att) {
        att->granted = t.ok;
        att->behind = 0;
        att->holder_pttl = 0;
        att->head = 0;
        for (int i = 0; i < c->n; i++) {
            if (verdict(&res[i]) != 0)
                continue;
            if (fair && reply_int(&res[i], 2) == 0)
                att->head = 1;
            if (reply_int(&res[i], 0) == 2)
                att->behind++;
            else if (reply_int(&res[i], 1) > att->holder_pttl)
                att->holder_pttl = (long)reply_int(&res[i], 1);
        }
    }
    if (t.ok >= c->quorum && fencing) {
        /* The fence is the highest counter among the nodes that granted
         * (we heard from every live node). Unless all of them already hold
         * that value, raise it on the nodes where we still own the lock: a
         * later owner (whose quorum intersects ours) then reads at least
         * this value, even if a minority of nodes lose their data first. */
        int at_max = 0;
        for (int i = 0; i < c->n; i++)
            if (verdict(&res[i]) == 1 && reply_int(&res[i], 1) > fence)
                fence = reply_int(&res[i], 1);
        for (int i = 0; i < c->n; i++)
            if (verdict(&res[i]) == 1 && reply_int(&res[i], 1) == fence)
                at_max++;
        if (at_max < t.ok) {
            char fv[24];
            distlock__result *res2 = cs->res_b;
            const distlock__call **calls2 = cs->calls_b;
            snprintf(fv, sizeof(fv), "%" PRId64, fence);
            const char *a2[4] = { key, sk->fk, token, fv };
            size_t l2[4] = { strlen(key), strlen(sk->fk), strlen(token), strlen(fv) };
            distlock__call raise = { DISTLOCK__S_RAISE, 2, 4, a2, l2, NULL, 0, tag, 0 };
            for (int i = 0; i < c->n; i++)
                calls2[i] = verdict(&res[i]) == 1 ? &raise : NULL;
            distlock__round(c, cs, calls2, res2, decide_cannot_win, c);
            tally t2 = count(res2, c->n);
            if (t2.ok < c->quorum)
                rc = fail_detail(c, res2, t2.failed > c->n - c->quorum ? DISTLOCK_ENOQUORUM
                                                                       : DISTLOCK_NOTACQUIRED,
                                 "fencing: lock lost before the fence reached a quorum");
            distlock__round_clear(res2, c->n);
        }
    }
    if (rc == DISTLOCK_OK && t.ok >= c->quorum && fair && t.ok < c->n) {
        /* Won: on nodes that did not grant (the previous holder's release
         * still on its way there, say) we are still queued; leave, or our
         * stale entry would stand first in those queues. */
        distlock__result *res4 = cs->res_b;
        const distlock__call **calls4 = cs->calls_b;
        const char *a4[5] = { sk->q, sk->qt, key, token, sk->ch };
        size_t l4[5] = { strlen(sk->q), strlen(sk->qt), strlen(key), strlen(token),
                         strlen(sk->ch) };
        distlock__call leave = { DISTLOCK__S_LEAVE, 3, 5, a4, l4, NULL, 1, tag, 0 };
        for (int i = 0; i < c->n; i++)
            calls4[i] = verdict(&res[i]) == 1 ? NULL : &leave;
        distlock__round(c, cs, calls4, res4, NULL, NULL);
        distlock__round_clear(res4, c->n);
    }
    if (rc == DISTLOCK_OK && t.ok >= c->quorum) {
        uint64_t until = distlock__valid_until(c, t0, ttl_ms);
        if (distlock__now_us() >= until)
            rc = distlock__fail(DISTLOCK_ETIMEDOUT,
                                "acquired on %d of %d nodes but the %ld ms ttl was used up",
                                t.ok, c->n, ttl_ms);
        else {
            *valid_until_us = until;
            if (fence_out)
                *fence_out = fence;
            if (att) {
                att->cs = cs;
                att->maybe = 0;
                for (int i = 0; i < c->n; i++)
                    if (res[i].sent && verdict(&res[i]) != 0)
                        att->maybe |= 1ull << i;
            }
        }
    } else if (rc == DISTLOCK_OK) {
        char what[160];
        if (t.failed > c->n - c->quorum) {
            snprintf(what, sizeof(what), "quorum not reached: %d of %d nodes granted, %d failed (need %d)",
                     t.ok, c->n, t.failed, c->quorum);
            rc = fail_detail(c, res, DISTLOCK_ENOQUORUM, what);
        } else {
            snprintf(what, sizeof(what), "'%s' is held by another owner (%d of %d nodes refused)", key,
                     t.no, c->n);
            rc = fail_detail(c, res, DISTLOCK_NOTACQUIRED, what);
        }
    }
    /* Undo on every node where the acquire was sent and not refused: it
     * granted, may still grant (no answer, timed out, connection lost after
     * sending), or answered with an error after its SET. The transport
     * orders the undo after the acquire it undoes (round.c). */
    int which[64], any = 0;
    for (int i = 0; i < c->n; i++)
        any |= which[i] = rc != DISTLOCK_OK && res[i].sent && verdict(&res[i]) != 0;
    if (any) {
        distlock__result *res3 = cs->res_b;
        if (fair && queue_ttl_ms > 0) {
            const distlock__call **calls3 = cs->calls_b;
            const char *a3[6] = { key, sk->q, sk->qt, token, sk->ch, qttl };
            size_t l3[6] = { strlen(key), strlen(sk->q), strlen(sk->qt), strlen(token), strlen(sk->ch),
                             strlen(qttl) };
            distlock__call undo = { DISTLOCK__S_FAIR_UNDO, 3, 6, a3, l3, NULL, 1, tag, ~0ull };
            for (int i = 0; i < c->n; i++)
                calls3[i] = which[i] ? &undo : NULL;
            distlock__round(c, cs, calls3, res3, decide_quorum, c);
        } else {
            (void)release_round(c, cs, key, token, which, res3, ~0ull);
        }
        distlock__round_clear(res3, c->n);
    }
    distlock__round_clear(res, c->n);
    distlock__checkin(c, cs);
    free(sk);
    return rc;
}

int distlock__release_keytoken(distlock_client *c, const char *key, const char *token,
                               uint64_t valid_until_us, distlock__connset *pref, uint64_t maybe)
{
    int rc;

    if ((rc = distlock__check_usable(c)) != DISTLOCK_OK)
        return rc;
    distlock__connset *cs = pref ? distlock__checkout_pref(c, pref) : distlock__checkout(c);
    if (cs == NULL)
        return DISTLOCK_ENOMEM;
    distlock__result *res = cs->res_a;
    uint64_t t0 = distlock__now_us();
    tally t = release_round(c, cs, key, token, NULL, res, maybe);
    if (t0 < valid_until_us) {
        /* A release resent on a fresh connection (the first one broke after
         * sending) finds the key gone if the first one ran. While the lease
         * was valid when we sent it, nobody else could have removed our
         * key there: so it is our release that did, and it counts. */
        for (int i = 0; i < c->n; i++)
            if (res[i].resent && verdict(&res[i]) == 0) {
                t.ok++;
                t.no--;
            }
    }
    if (t.ok < c->quorum) {
        char what[160];
        if (t.failed > c->n - c->quorum) {
            snprintf(what, sizeof(what), "release of '%s' reached %d of %d nodes (need %d)", key,
                     t.ok + t.no, c->n, c->quorum);
            rc = fail_detail(c, res, DISTLOCK_ENOQUORUM, what);
        } else {
            snprintf(what, sizeof(what),
                     "'%s' was not held with this token on a quorum (deleted on %d of %d nodes): "
                     "expired, lost or already released", key, t.ok, c->n);
            rc = fail_detail(c, res, DISTLOCK_ENOTOWNER, what);
        }
    }
    distlock__round_clear(res, c->n);
    distlock__checkin(c, cs);
    return rc;
}

int distlock__extend_keytoken(distlock_client *c, const char *key, const char *token,
                              long ttl_ms, uint64_t *valid_until_us)
{
    char ttl[24];
    int rc;

    if ((rc = distlock__check_usable(c)) != DISTLOCK_OK)
        return rc;
    distlock__connset *cs = distlock__checkout(c);
    if (cs == NULL)
        return DISTLOCK_ENOMEM;
    distlock__result *res = cs->res_a;
    const distlock__call **calls = cs->calls_a;
    snprintf(ttl, sizeof(ttl), "%ld", ttl_ms);
    const char *argv[3] = { key, token, ttl };
    size_t len[3] = { strlen(key), strlen(token), strlen(ttl) };
    distlock__call call = { DISTLOCK__S_EXTEND, 1, 3, argv, len, NULL, 0, lock_tag(key, token), 0 };
    for (int i = 0; i < c->n; i++)
        calls[i] = &call;
    uint64_t t0 = distlock__now_us();
    distlock__round(c, cs, calls, res, decide_quorum, c);
    tally t = count(res, c->n);
    if (t.ok >= c->quorum) {
        uint64_t until = distlock__valid_until(c, t0, ttl_ms);
        if (distlock__now_us() >= until)
            rc = distlock__fail(DISTLOCK_ETIMEDOUT, "extend of '%s' took longer than its ttl", key);
        else if (valid_until_us)
            *valid_until_us = until;
    } else {
        char what[160];
        if (t.failed > c->n - c->quorum) {
            snprintf(what, sizeof(what), "extend of '%s' reached %d of %d nodes (need %d)", key,
                     t.ok + t.no, c->n, c->quorum);
            rc = fail_detail(c, res, DISTLOCK_ENOQUORUM, what);
        } else {
            snprintf(what, sizeof(what), "'%s' is no longer held with this token (%d of %d nodes)",
                     key, t.ok, c->n);
            rc = fail_detail(c, res, DISTLOCK_ENOTOWNER, what);
        }
    }
    distlock__round_clear(res, c->n);
    distlock__checkin(c, cs);
    return rc;
}

int distlock__leave_queue(distlock_client *c, const char *key, const char *token)
{
    /* fair waiters only: the side keys on the heap, not the stack */
    struct { char q[DISTLOCK__SIDEKEY_MAX], qt[DISTLOCK__SIDEKEY_MAX],
             ch[DISTLOCK__SIDEKEY_MAX]; } *sk = malloc(sizeof(*sk));
    if (sk == NULL)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    distlock__connset *cs = distlock__checkout(c);

    if (cs == NULL) {
        free(sk);
        return DISTLOCK_ENOMEM;
    }
    distlock__result *res = cs->res_a;
    const distlock__call **calls = cs->calls_a;
    distlock__sidekey(sk->q, key, ":q");
    distlock__sidekey(sk->qt, key, ":qt");
    channel_name(sk->ch, key);
    const char *argv[5] = { sk->q, sk->qt, key, token, sk->ch };
    size_t len[5] = { strlen(sk->q), strlen(sk->qt), strlen(key), strlen(token),
                      strlen(sk->ch) };
    distlock__call call = { DISTLOCK__S_LEAVE, 3, 5, argv, len, NULL, 0, lock_tag(key, token), 0 };
    for (int i = 0; i < c->n; i++)
        calls[i] = &call;
    distlock__round(c, cs, calls, res, NULL, NULL);
    distlock__round_clear(res, c->n);
    distlock__checkin(c, cs);
    free(sk);
    return DISTLOCK_OK;
}

/* ------------------------------------------------------------ token pair */

static int check_token(const char *token)
{
    if (token == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "token must not be NULL");
    size_t n = strnlen(token, DISTLOCK_TOKEN_MAX + 1);
    if (n == 0)
        return distlock__fail(DISTLOCK_EINVAL, "token must not be empty");
    if (n > DISTLOCK_TOKEN_MAX)
        return distlock__fail(DISTLOCK_EINVAL, "token longer than %d bytes", DISTLOCK_TOKEN_MAX);
    return DISTLOCK_OK;
}

static long ms_left(uint64_t until_us)
{
    uint64_t now = distlock__now_us();
    return until_us > now ? (long)((until_us - now) / 1000) : 0;
}

/* The checks every token-pair entry point makes (the ttl when has_ttl). */
static int check_pair(const distlock_client *c, const char *key, const char *token, int has_ttl,
                      long ttl_ms)
{
    int rc;
    distlock__clear_error();
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    if ((rc = distlock__check_key(key)) || (has_ttl && (rc = distlock__check_ttl(c, ttl_ms))) ||
        (rc = check_token(token)))
        return rc;
    return DISTLOCK_OK;
}

int distlock_acquire_token(distlock_client *c, const char *key, long ttl_ms, const char *token,
                           unsigned flags, long *validity_ms)
{
    uint64_t until = 0;
    int rc;

    if ((rc = check_pair(c, key, token, 1, ttl_ms)) != DISTLOCK_OK)
        return rc;
    if (flags & ~DISTLOCK_STRICT)
        return distlock__fail(DISTLOCK_EINVAL, "unknown flags 0x%x (only DISTLOCK_STRICT)", flags);
    distlock__attempt att = { 0, 0, 0, 0, NULL, 0 };
    rc = distlock__acquire_once(c, key, token, ttl_ms, flags, 0, 0, &until, NULL, &att);
    if (rc == DISTLOCK_OK) {
        if (validity_ms)
            *validity_ms = ms_left(until);
        uint64_t tag = lock_tag(key, token);
        pthread_mutex_lock(&c->mu);
        c->tp_recent[c->tp_next].tag = tag;
        c->tp_recent[c->tp_next].maybe = att.maybe;
        c->tp_recent[c->tp_next].until = until;
        c->tp_next = (c->tp_next + 1) % 32;
        pthread_mutex_unlock(&c->mu);
    }
    return rc;
}

int distlock_release_token(distlock_client *c, const char *key, const char *token)
{
    int rc = check_pair(c, key, token, 0, 0);
    if (rc != DISTLOCK_OK)
        return rc;
    /* Nodes the latest acquire of this key and token may hold (all if it
     * is not among the recent ones), and its lease (a release resent after
     * its first send ran is then recognised). */
    uint64_t tag = lock_tag(key, token), maybe = ~0ull, until = 0;
    distlock__lock(c);
    for (int k = 0; k < 32; k++)
        if (c->tp_recent[k].tag == tag) {
            maybe = c->tp_recent[k].maybe;
            until = c->tp_recent[k].until;
        }
    pthread_mutex_unlock(&c->mu);
    return distlock__release_keytoken(c, key, token, until, NULL, maybe);
}

int distlock_extend_token(distlock_client *c, const char *key, const char *token, long ttl_ms,
                          long *validity_ms)
{
    uint64_t until = 0;
    int rc;
    if ((rc = check_pair(c, key, token, 1, ttl_ms)) != DISTLOCK_OK)
        return rc;
    rc = distlock__extend_keytoken(c, key, token, ttl_ms, &until);
    if (rc == DISTLOCK_OK && validity_ms)
        *validity_ms = ms_left(until);
    return rc;
}

/* ------------------------------------------------------------ admin */

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
    if ((rc = distlock__check_usable(c)) != DISTLOCK_OK)
        return rc;
    distlock__connset *cs = distlock__checkout(c);
    if (cs == NULL)
        return DISTLOCK_ENOMEM;
    distlock__result *res = cs->res_a;
    const distlock__call **calls = cs->calls_a;
    for (int i = 0; i < c->n; i++)
        calls[i] = NULL;
    const char *argv[1] = { key };
    size_t len[1] = { strlen(key) };
    distlock__call call = { DISTLOCK__S_INSPECT, 1, 1, argv, len, NULL, 0, 0, 0 };
    calls[node] = &call;
    distlock__round(c, cs, calls, res, NULL, NULL);
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
            *pttl_ms = rc ? (long)reply_int(r, 1) : 0;
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
    if ((rc = distlock__check_key(key)) || (rc = distlock__check_usable(c)))
        return rc;
    distlock__connset *cs = distlock__checkout(c);
    if (cs == NULL)
        return DISTLOCK_ENOMEM;
    distlock__result *res = cs->res_a;
    const distlock__call **calls = cs->calls_a;
    const char *argv[2] = { "DEL", key };
    size_t len[2] = { 3, strlen(key) };
    distlock__call call = { -1, 0, 2, argv, len, NULL, 0, 0, 0 };
    for (int i = 0; i < c->n; i++)
        calls[i] = &call;
    distlock__round(c, cs, calls, res, NULL, NULL);
    for (int i = 0; i < c->n; i++) {
        if (res[i].state == DISTLOCK__R_DONE && res[i].reply->type == REDIS_REPLY_INTEGER)
            del += (int)res[i].reply->integer;
        else
            failed++;
    }
    rc = DISTLOCK_OK;
    if (failed > 0)
        rc = fail_detail(c, res, DISTLOCK_ENOQUORUM, "force release did not reach every node");
    if (deleted)
        *deleted = del;
    distlock__round_clear(res, c->n);
    distlock__checkin(c, cs);
    return rc;
}
