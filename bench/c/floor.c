/*
 * floor.c -- the floor: the least a lock can cost on this machine, written
 * directly on hiredis with nothing a real library would add (no retries, no
 * validity bookkeeping beyond one clock read, no error recovery).
 *
 *   pairs:   SET key token NX PX 30000, then EVALSHA compare-and-delete, on one
 *            connection per node; with N nodes each command goes to all of
 *            them at once (write all, then poll the replies: one parallel
 *            round trip) and a round ends as soon as a quorum said yes
 *            ("all": once every node answered).
 *   contend: the "notify floor": a release publishes on KEY:rel (inside the
 *            same Lua script), a waiter that failed SET NX blocks on its
 *            SUBSCRIBE connection (re-checking at least every 100 ms).
 *   hold:    COUNT keys bench:hold:I held (pipelined SET NX PX) until stdin closes.
 *   renew:   COUNT keys bench:renew:I kept alive: every TTL/3 one pipelined
 *            batch of EVALSHA compare-and-PEXPIRE, until stdin closes.
 */
#include "common.h"

#include <hiredis/hiredis.h>
#include <poll.h>

#define MAXN 16

static const char *REL_LUA =
    "if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end";
static const char *REL_PUB_LUA =
    "if redis.call('get',KEYS[1]) == ARGV[1] then redis.call('del',KEYS[1]); "
    "redis.call('publish',KEYS[1]..':rel','1'); return 1 else return 0 end";
static const char *RENEW_LUA =
    "if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('pexpire',KEYS[1],ARGV[2]) else return 0 end";

static redisContext *conn(const node_addr *a)
{
    redisContext *c = redisConnect(a->host, a->port);
    if (!c || c->err) die("connect", c ? c->errstr : "alloc");
    return c;
}

static void load(redisContext *c, const char *lua, char sha[41])
{
    redisReply *r = redisCommand(c, "SCRIPT LOAD %s", lua);
    if (!r || r->type != REDIS_REPLY_STRING) die("script load", c->errstr);
    snprintf(sha, 41, "%s", r->str);
    freeReplyObject(r);
}

/* Replies still owed per connection: a round ends at quorum, like distlock's
 * and the Redlock paper's, and the stragglers' replies are discarded by the
 * next round that reads that connection. */
static int owed[MAXN];

/* Send argv to every node at once, then read replies until `need` nodes said
 * yes or every node answered: one parallel round trip. Returns the yes count. */
static int all_nodes(redisContext **c, int n, int argc, const char **argv, const size_t *len,
                     int want_status, int need)
{
    int ok = 0, answered = 0;
    int mine[MAXN];
    for (int i = 0; i < n; i++) {
        redisAppendCommandArgv(c[i], argc, argv, len);
        int done = 0;
        do { if (redisBufferWrite(c[i], &done) != REDIS_OK) die("write", c[i]->errstr); } while (!done);
        mine[i] = ++owed[i];   /* this round's reply is the owed[i]-th one still due */
    }
    while (ok < need && answered < n) {
        struct pollfd p[MAXN];
        int idx[MAXN], np = 0;
        for (int i = 0; i < n; i++) {
            redisReply *r = NULL;
            /* replies already buffered first */
            while (owed[i] > 0 && redisGetReplyFromReader(c[i], (void **)&r) == REDIS_OK && r) {
                int current = (owed[i] == 1 && mine[i] > 0);
                owed[i]--;
                if (current) {
                    answered++;
                    mine[i] = 0;
                    if (want_status ? (r->type == REDIS_REPLY_STATUS)
                                    : (r->type == REDIS_REPLY_INTEGER && r->integer == 1)) ok++;
                }
                freeReplyObject(r);
                r = NULL;
            }
            if (mine[i] > 0) { p[np].fd = c[i]->fd; p[np].events = POLLIN; idx[np++] = i; }
        }
        if (ok >= need || answered >= n) break;
        if (poll(p, (nfds_t)np, 5000) <= 0) die("poll", "no reply within 5 s");
        for (int k = 0; k < np; k++)
            if (p[k].revents && redisBufferRead(c[idx[k]]) != REDIS_OK) die("read", c[idx[k]]->errstr);
    }
    return ok;
}

static int mode_pairs(int argc, char **argv)
{
    if (argc < 8) die("usage", "pairs URIS START_NS SLICE_NS PERIOD_NS COUNT KEY [all]");
    node_addr a[MAXN];
    int n = parse_uris(argv[2], a, MAXN), quorum = n / 2 + 1;
    /* "all": wait for every node's reply, not just a quorum (what a round
     * costs when a library waits for the stragglers) */
    int need = (argc > 8 && !strcmp(argv[8], "all")) ? n : quorum;
    slices sl;
    slices_init(&sl, argv + 3);
    const char *key = argv[7];
    redisContext *c[MAXN];
    char sha[41];
    for (int i = 0; i < n; i++) { c[i] = conn(&a[i]); load(c[i], REL_LUA, sha); }

    samples lat = { 0 };
    long errors = 0;
    char tok[33];
    const char *set_argv[] = { "SET", key, tok, "NX", "PX", "30000" };
    size_t set_len[] = { 3, strlen(key), 32, 2, 2, 5 };
    const char *rel_argv[] = { "EVALSHA", sha, "1", key, tok };
    size_t rel_len[] = { 7, 40, 1, strlen(key), 32 };
    for (int w = 0; w < 200; w++) {   /* warm-up: connections, script cache, allocator */
        hex_token(tok);
        all_nodes(c, n, 6, set_argv, set_len, 1, quorum);
        all_nodes(c, n, 5, rel_argv, rel_len, 0, quorum);
    }
    int64_t end, t;
    while (slices_next(&sl, &end)) {
        long pairs = 0;
        int64_t c0 = cpu_ns();
        while ((t = now_ns()) < end) {
            hex_token(tok);
            int got = all_nodes(c, n, 6, set_argv, set_len, 1, need);
            samples_add(&lat, now_ns() - t);
            if (got < quorum) errors++;
            if (all_nodes(c, n, 5, rel_argv, rel_len, 0, need) < quorum) errors++;
            pairs++;
        }
        sl.cpu_ns += cpu_ns() - c0;
        sl.pairs[sl.k++] = pairs;
    }
    print_slices(n == 1 ? "floor" : need == n ? "floor-parallel-all" : "floor-parallel", &sl, &lat, errors);
    return 0;
}

/* Wait up to ms for any message on the subscriber connection. */
static void wait_msg(redisContext *sub, int ms)
{
    redisReply *r = NULL;
    if (redisGetReplyFromReader(sub, (void **)&r) == REDIS_OK && r) { freeReplyObject(r); return; }
    struct pollfd p = { sub->fd, POLLIN, 0 };
    if (poll(&p, 1, ms) <= 0) return;
    if (redisBufferRead(sub) != REDIS_OK) die("sub read", sub->errstr);
    while (redisGetReplyFromReader(sub, (void **)&r) == REDIS_OK && r) { freeReplyObject(r); r = NULL; }
}

static int mode_contend(int argc, char **argv)
{
    if (argc < 11) die("usage", "contend URIS START END KEY HOLD_US THINK_US LOG MARKER ID");
    node_addr a[MAXN];
    parse_uris(argv[2], a, MAXN);
    int64_t start = atoll(argv[3]), end = atoll(argv[4]);
    const char *key = argv[5];
    long hold = atol(argv[6]), think = atol(argv[7]);
    marker m;
    marker_open(&m, argv[9], atol(argv[10]));
    redisContext *c = conn(&a[0]), *sub = conn(&a[0]);
    char sha[41];
    load(c, REL_PUB_LUA, sha);
    redisReply *r = redisCommand(sub, "SUBSCRIBE %s:rel", key);
    if (!r) die("subscribe", sub->errstr);
    freeReplyObject(r);

    cslog log = { 0 };
    long cs = 0, errors = 0;
    char tok[33];
    int late = wait_until(start);
    while (now_ns() < end) {
        int64_t treq = now_ns();
        hex_token(tok);
        for (;;) {
            r = redisCommand(c, "SET %s %s NX PX 10000", key, tok);
            if (!r) die("set", c->errstr);
            int ok = r->type == REDIS_REPLY_STATUS;
            freeReplyObject(r);
            if (ok) break;
            wait_msg(sub, 100);
        }
        int64_t tacq = now_ns();
        marker_enter(&m);
        sleep_us(hold);
        marker_leave(&m);
        int64_t trel = now_ns();
        r = redisCommand(c, "EVALSHA %s 1 %s %s", sha, key, tok);
        if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 1) errors++;
        if (r) freeReplyObject(r);
        cslog_add(&log, treq, tacq, trel);
        cs++;
        sleep_us(think);
    }
    cslog_write(&log, argv[8]);
    printf("impl=floor-notify cs=%ld overlaps=%ld late=%d errors=%ld\n", cs, m.overlaps, late, errors);
    return 0;
}

/* Pipeline COUNT commands built by fmt(i) and count replies equal to `want`. */
static long pipeline_keys(redisContext *c, long count, const char *fmt, const char *a1,
                          const char *a2, const char *a3, int status_ok)
{
    long ok = 0;
    char key[64];
    for (long i = 0; i < count; i++) {
        snprintf(key, sizeof key, fmt, i);
        if (a3) redisAppendCommand(c, "EVALSHA %s 1 %s %s %s", a1, key, a2, a3);
        else redisAppendCommand(c, "SET %s %s NX PX %s", key, a1, a2);
    }
    for (long i = 0; i < count; i++) {
        redisReply *r;
        if (redisGetReply(c, (void **)&r) != REDIS_OK) die("pipeline", c->errstr);
        if (status_ok ? r->type == REDIS_REPLY_STATUS
                      : (r->type == REDIS_REPLY_INTEGER && r->integer == 1)) ok++;
        freeReplyObject(r);
    }
    return ok;
}

/* 1 once stdin has a line or EOF (the orchestrator's "stop"), polled for ms. */
static int stdin_closed(int ms)
{
    struct pollfd p = { 0, POLLIN, 0 };
    return poll(&p, 1, ms) > 0;
}

static int mode_hold(int argc, char **argv, int renew)
{
    if (argc < 5) die("usage", "hold|renew URIS COUNT TTL_MS");
    node_addr a[MAXN];
    parse_uris(argv[2], a, MAXN);
    long count = atol(argv[3]);
    const char *ttl = argv[4];
    redisContext *c = conn(&a[0]);
    char tok[33], sha[41];
    hex_token(tok);   /* one token per process, as a client would use per lock owner */
    long got = pipeline_keys(c, count, renew ? "bench:renew:%ld" : "bench:hold:%ld", tok, ttl,
                             NULL, 1);
    printf("ready held=%ld\n", got);
    fflush(stdout);
    if (!renew) { stdin_closed(-1); return 0; }
    load(c, RENEW_LUA, sha);
    long period = atol(ttl) / 3, rounds = 0, lost = 0;
    int64_t next = now_ns() + period * 1000000LL;
    for (;;) {
        long wait_ms = (long)((next - now_ns()) / 1000000);
        if (stdin_closed(wait_ms > 0 ? (int)wait_ms : 0)) break;
        if (now_ns() < next) continue;
        lost += count - pipeline_keys(c, count, "bench:renew:%ld", sha, tok, ttl, 0);
        rounds++;
        next += period * 1000000LL;
    }
    printf("impl=floor rounds=%ld lost=%ld\n", rounds, lost);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) die("usage", "floor pairs|contend|hold|renew ...");
    if (!strcmp(argv[1], "pairs")) return mode_pairs(argc, argv);
    if (!strcmp(argv[1], "contend")) return mode_contend(argc, argv);
    if (!strcmp(argv[1], "hold")) return mode_hold(argc, argv, 0);
    if (!strcmp(argv[1], "renew")) return mode_hold(argc, argv, 1);
    die("unknown mode", argv[1]);
    return 2;
}
