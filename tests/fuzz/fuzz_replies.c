/* fuzz_replies.c -- libFuzzer target: what the core makes of node replies.
 * Arbitrary bytes are parsed as RESP by hiredis' reader (as the transport
 * does, so replies may be any type, nested, with NULs inside strings) and
 * handed, as the results of one round over 1..8 nodes, to the protocol
 * layer's reply classification (distlock__reply_verdict, distlock__reply_int,
 * distlock__reply_holds_own, core/src/protocol.c) and to the quorum layer's
 * tally, round stoppers, verdict with its per-node detail, and validity
 * rule (core/src/quorum.c).
 *
 * Input: byte 0 = node count - 1 (mod 8) and the operation; byte 1 = the
 * script of the call; bytes 2..9 = each node's state (unsent, pending,
 * done, failed); bytes 10..13 = a ttl; the rest is the RESP stream, one
 * reply per node in state done (a node whose reply the stream lacks failed).
 * Checks the invariants the callers rely on, beyond "no crash, no UB". */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "internal.h"

#define MAXN 8
#define HDR 14

static const char *const uris[MAXN] = {
    "redis://n0:6379", "redis://n1:6379", "redis://n2:6379", "redis://n3:6379",
    "unix:///n4.sock", "redis://n5:6379", "redis://n6:6379", "redis://n7:6379",
};
static const char token[] = "0123456789abcdef0123456789abcdef";

/* hiredis 0.14's reader allocates an array reply's element table when it
 * reads the header ("*201234552" asks for 1.6 GB at once), before any element
 * arrives; that is the library's behaviour with a hostile node, not a
 * decoder's (see tests/fuzz/README.md). Inputs announcing more than 4096
 * elements are skipped so the fuzzer explores the decoders instead. */
static int huge_array(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '*' || (i > 0 && p[i - 1] != '\n'))
            continue;
        unsigned long v = 0;
        for (size_t k = i + 1; k < n && p[k] >= '0' && p[k] <= '9'; k++)
            if ((v = v * 10 + (p[k] - '0')) > 4096)
                return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < HDR || huge_array(data + HDR, size - HDR))
        return 0;
    int n = 1 + (data[0] & 7);
    int acquire = (data[0] >> 3) & 1;
    static const int scripts[4] = { DISTLOCK__S_ACQUIRE, DISTLOCK__S_RELEASE,
                                    DISTLOCK__S_EXTEND, -1 };
    distlock__call call = { .script = scripts[data[1] & 3] };

    distlock__node_cfg nodes[MAXN];
    memset(nodes, 0, sizeof(nodes));
    for (int i = 0; i < MAXN; i++)
        nodes[i].uri = (char *)uris[i];

    redisReader *rd = redisReaderCreate();
    if (rd == NULL)
        return 0;
    distlock__reader_cap(rd);  /* as every connection's reader (net.c) */
    if (redisReaderFeed(rd, (const char *)data + HDR, size - HDR) != REDIS_OK) {
        redisReaderFree(rd);
        return 0;
    }

    distlock__result res[MAXN];
    memset(res, 0, sizeof(res));
    int unsent = 0;
    for (int i = 0; i < n; i++) {
        res[i].call = &call;
        res[i].state = data[2 + i] & 3;
        if (res[i].state == DISTLOCK__R_DONE) {
            void *reply = NULL;
            if (redisReaderGetReply(rd, &reply) != REDIS_OK || reply == NULL)
                res[i].state = DISTLOCK__R_FAILED;
            else
                res[i].reply = reply;
        }
        if (res[i].state == DISTLOCK__R_FAILED) {
            res[i].status = (data[2 + i] >> 2) & 1 ? DISTLOCK_EPROTO : DISTLOCK_ECONN;
            snprintf(res[i].err, sizeof(res[i].err), "%s: node failed", uris[i]);
        }
        unsent += res[i].state == DISTLOCK__R_UNSENT;
    }

    /* protocol.c: each node's reply on its own */
    for (int i = 0; i < n; i++) {
        int v = distlock__reply_verdict(&res[i]);
        if (v < -2 || v > 1)
            abort();
        if (res[i].state == DISTLOCK__R_FAILED && v != -1)
            abort();
        if ((res[i].state == DISTLOCK__R_PENDING || res[i].state == DISTLOCK__R_UNSENT) && v != -2)
            abort();
        if (res[i].state == DISTLOCK__R_DONE)
            for (size_t k = 0; k < 4; k++)
                (void)distlock__reply_int(&res[i], k);
        int own = distlock__reply_holds_own(&res[i], token);
        if (own != 0 && own != 1)
            abort();
        /* held before: implied by holds_own (the undo's rule, acquire.c) */
        int before = distlock__reply_held_own(&res[i], token);
        if ((before != 0 && before != 1) || (own && !before))
            abort();
    }

    /* quorum.c: one round's tally and verdict */
    distlock__quorum q = { .n = n, .quorum = n / 2 + 1, .nodes = nodes,
                           .drift_ppm = 10000, .drift_min_ms = 2 };
    distlock__tally t = distlock__count(res, n);
    if (t.ok < 0 || t.no < 0 || t.failed < 0 || t.silent < 0 ||
        t.ok + t.no + t.failed + t.silent + unsent != n)
        abort();
    int stop = distlock__decide_quorum(res, n, &q);
    int lost = distlock__decide_cannot_win(res, n, &q);
    if (lost && !stop)
        abort();  /* a round that can no longer win always stops */
    int rc = distlock__verdict(&q, res, t, acquire ? DISTLOCK_NOTACQUIRED : DISTLOCK_ENOTOWNER,
                               acquire ? "acquire" : "release", "fuzz:key");
    if ((rc == DISTLOCK_OK) != (t.ok >= q.quorum))
        abort();
    if (rc != DISTLOCK_OK && distlock_last_error()[0] == '\0')
        abort();  /* a refusal or failure always says why */
    int refusals = 0;
    for (int i = 0; i < n; i++)
        refusals += distlock__reply_refused(&res[i]);
    /* a node's refusal (an error reply) says nothing about who holds the key:
     * without a quorum, and without more than n - quorum nodes positively saying "held" /
     * "not ours", it is EPROTO, never a loss; and the round hears the nodes
     * still silent before it decides */
    int refusal_decides = refusals > 0 && t.ok < q.quorum && t.no <= n - q.quorum;
    if (refusal_decides && rc != DISTLOCK_EPROTO)
        abort();
    if (refusal_decides && t.silent > 0 && stop)
        abort();
    /* neither granted nor ruled out: an acquire's "held"; a release's "not
     * ours" only where the nodes saying so rule a quorum out by themselves,
     * else no verdict (those that deleted, failed or are unheard may hold
     * it on a quorum: never "lost" said of a lock still held) */
    int want = acquire ? DISTLOCK_NOTACQUIRED
               : t.no > n - q.quorum ? DISTLOCK_ENOTOWNER : DISTLOCK_ENOQUORUM;
    if (t.ok >= q.quorum || t.failed > n - q.quorum || refusal_decides ? 0 : rc != want)
        abort();

    /* quorum.c: the one TTL and validity rule */
    uint32_t raw = (uint32_t)data[10] | (uint32_t)data[11] << 8 | (uint32_t)data[12] << 16 |
                   (uint32_t)data[13] << 24;
    long ttl = (long)(int32_t)raw;
    if (distlock__check_ttl(&q, ttl) == DISTLOCK_OK) {
        uint64_t t0 = 1000000;
        uint64_t until = distlock__valid_until(&q, t0, ttl);
        if (until <= t0 || until > t0 + (uint64_t)ttl * 1000u)
            abort();  /* a valid ttl gives a lease that ends within it */
        /* confirmed after a round trip of 0..999 ms (from the same bytes) */
        uint64_t done = t0 + (uint64_t)(raw % 1000u) * 1000u;
        if (distlock__renew_at(&q, until, done, ttl) > until)
            abort();  /* the next renewal is due no later than the lease ends,
                       * however late the last one was confirmed */
    }

    for (int i = 0; i < n; i++)
        if (res[i].reply)
            freeReplyObject(res[i].reply);
    redisReaderFree(rd);
    return 0;
}
