/* test_harness_proxy.c -- the fault-injecting proxy (tests/harness/faultproxy.py
 * through faultproxy.h) and the slowdns getaddrinfo shim, checked against
 * real redis-servers with plain hiredis (and, for slowdns, libdistlock.so).
 * No sleeps stand in for synchronisation: wait-held / wait-conns / wait-closed
 * and RH_WAIT_UNTIL do. */
#include "test_common.h"

#include <errno.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "harness/faultproxy.h"
#include "harness/slowdns.h"

typedef struct fixture {
    rh_cluster *rc;
    fp_proxy *fp;
} fixture;

static int group_setup(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->rc = rh_start(2);
    if (!f->rc) { free(f); return -1; }
    f->fp = fp_front(f->rc);
    if (!f->fp) { rh_stop_all(f->rc); free(f); return -1; }
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    fixture *f = *state;
    fp_stop(f->fp);
    rh_stop_all(f->rc);
    free(f);
    return 0;
}

/* Per test: no faults left, every connection of the previous test gone,
 * servers empty. */
static int setup(void **state)
{
    fixture *f = *state;
    if (fp_cmd(f->fp, NULL, 0, "heal") != 0) return -1;
    /* A failed test may have left a client open: cut what is still there. */
    char reply[64];
    if (fp_cmd(f->fp, reply, sizeof reply, "wait-closed * 3000") != 0 &&
        (fp_cmd(f->fp, NULL, 0, "reset *") != 0 ||
         fp_cmd(f->fp, NULL, 0, "wait-closed * 5000") != 0))
        return -1;
    return rh_heal(f->rc) == 0 ? 0 : -1;
}

#define FP(f, ...) assert_int_equal(fp_cmd((f)->fp, NULL, 0, __VA_ARGS__), 0)

/* A hiredis connection through listener l with a read timeout; *cid gets the
 * proxy's id of the connection (known once the proxy accepted it). */
static redisContext *via(fixture *f, int l, long timeout_ms, int *cid)
{
    char reply[64];
    assert_int_equal(fp_cmd(f->fp, reply, sizeof reply, "accepted %d", l), 0);
    long before = strtol(reply + 3, NULL, 10);
    struct timeval tv = { 2, 0 };
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", fp_port(f->fp, l), tv);
    assert_non_null(ctx);
    assert_int_equal(ctx->err, 0);
    struct timeval rt = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
    redisSetTimeout(ctx, rt);
    FP(f, "wait-conns %d %ld 5000", l, before + 1);
    if (cid) {
        *cid = fp_last_conn(f->fp, l);
        assert_true(*cid > 0);
    }
    return ctx;
}

/* Send without reading the reply. */
static void send_cmd(redisContext *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    assert_int_equal(redisvAppendCommand(ctx, fmt, ap), REDIS_OK);
    va_end(ap);
    int done = 0;
    while (!done) assert_int_equal(redisBufferWrite(ctx, &done), REDIS_OK);
}

static redisReply *get_reply(redisContext *ctx)
{
    void *r = NULL;
    if (redisGetReply(ctx, &r) != REDIS_OK) return NULL;
    return r;
}

static void expect_status(redisContext *ctx, const char *want)
{
    redisReply *r = get_reply(ctx);
    assert_non_null(r);
    assert_true(r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING);
    assert_string_equal(r->str, want);
    freeReplyObject(r);
}

static void expect_int(redisContext *ctx, long long want)
{
    redisReply *r = get_reply(ctx);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, want);
    freeReplyObject(r);
}

static long long timed_ping(redisContext *ctx)
{
    long long t0 = rh_now_ms();
    redisReply *r = redisCommand(ctx, "PING");
    assert_non_null(r);
    assert_string_equal(r->str, "PONG");
    freeReplyObject(r);
    return rh_now_ms() - t0;
}

static void test_passthrough_and_uris(void **state)
{
    fixture *f = *state;
    char buf[256], want[256];
    snprintf(want, sizeof want, "redis://127.0.0.1:%d,redis://127.0.0.1:%d",
             fp_port(f->fp, 0), fp_port(f->fp, 1));
    assert_string_equal(fp_uris(f->fp), want);
    snprintf(want, sizeof want, "redis://127.0.0.1:%d", fp_port(f->fp, 1));
    assert_string_equal(fp_uris_mask(f->fp, 2, buf, sizeof buf), want);
    assert_int_equal(fp_port(f->fp, 2), -1);
    /* err answers are -1 and name the reason */
    assert_int_equal(fp_cmd(f->fp, buf, sizeof buf, "no-such-command"), -1);
    assert_string_equal(buf, "err unknown command no-such-command");
    assert_int_equal(fp_cmd(f->fp, buf, sizeof buf, "hold 0:999999"), -1);
    assert_int_equal(fp_cmd(f->fp, buf, sizeof buf, "hold 7"), -1);

    /* Listener i reaches node i. */
    for (int l = 0; l < 2; l++) {
        int cid;
        redisContext *ctx = via(f, l, 2000, &cid);
        redisReply *r = redisCommand(ctx, "SET where%d x", l);
        assert_non_null(r);
        freeReplyObject(r);
        char key[16];
        snprintf(key, sizeof key, "where%d", l);
        assert_int_equal(rh_get(f->rc, l, 0, key, NULL, 0), 1);
        assert_int_equal(rh_get(f->rc, 1 - l, 0, key, NULL, 0), 0);
        fp_conn c[8];
        int n = fp_conns(f->fp, l, c, 8);
        assert_int_equal(n, 1);
        assert_int_equal(c[0].id, cid);
        assert_string_equal(c[0].state, "open");
        assert_true(c[0].up_bytes > 0 && c[0].down_bytes > 0);
        redisFree(ctx);
    }
}

static void test_delay(void **state)
{
    fixture *f = *state;
    int cid;
    redisContext *ctx = via(f, 0, 5000, &cid);
    timed_ping(ctx);
    FP(f, "delay 0:%d 250 up", cid);
    long long t = timed_ping(ctx);
    assert_true(t >= 250);
    FP(f, "delay 0:%d 150", cid);      /* both directions */
    t = timed_ping(ctx);
    assert_true(t >= 300);
    /* Order is preserved: pipelined INCRs come back 1..20. */
    for (int i = 0; i < 20; i++) send_cmd(ctx, "INCR ctr");
    for (int i = 1; i <= 20; i++) expect_int(ctx, i);
    FP(f, "delay 0:%d 0", cid);
    long long delayed = fp_stat(f->fp, "delayed_chunks");
    assert_true(delayed >= 4);
    timed_ping(ctx);
    assert_int_equal(fp_stat(f->fp, "delayed_chunks"), delayed);   /* none delayed now */
    /* A listener-wide delay also applies to new connections. */
    FP(f, "delay 0 200 down");
    redisContext *ctx2 = via(f, 0, 5000, NULL);
    assert_true(timed_ping(ctx2) >= 200);
    assert_true(timed_ping(ctx) >= 200);
    redisFree(ctx2);
    redisFree(ctx);
}

static void test_hold_unhold_in_order(void **state)
{
    fixture *f = *state;
    int cid;
    redisContext *ctx = via(f, 0, 5000, &cid);
    FP(f, "hold 0:%d up", cid);
    send_cmd(ctx, "SET h1 a");
    send_cmd(ctx, "APPEND h1 b");
    send_cmd(ctx, "APPEND h1 c");
    /* "*3\r\n$3\r\nSET\r\n$2\r\nh1\r\n$1\r\na\r\n" alone is 29 bytes. */
    FP(f, "wait-held 0:%d up 29 5000", cid);
    assert_int_equal(rh_get(f->rc, 0, 0, "h1", NULL, 0), 0);   /* not executed */
    fp_conn c[4];
    assert_int_equal(fp_conns(f->fp, 0, c, 4), 1);
    assert_true(c[0].held_up >= 29);
    FP(f, "unhold 0:%d up", cid);
    expect_status(ctx, "OK");
    expect_int(ctx, 2);
    expect_int(ctx, 3);
    char buf[16];
    assert_int_equal(rh_get(f->rc, 0, 0, "h1", buf, sizeof buf), 1);
    assert_string_equal(buf, "abc");

    /* Down direction: the reply is held, the command already ran. */
    FP(f, "hold 0:%d down", cid);
    send_cmd(ctx, "SET h2 x");
    FP(f, "wait-held 0:%d down 5 5000", cid);           /* "+OK\r\n" */
    assert_int_equal(rh_get(f->rc, 0, 0, "h2", NULL, 0), 1);
    FP(f, "unhold 0:%d", cid);
    expect_status(ctx, "OK");
    redisFree(ctx);
}

static void test_hold_next_and_wait_timeout(void **state)
{
    fixture *f = *state;
    char reply[64];
    FP(f, "hold 0:next up");
    int c1, c2;
    redisContext *a = via(f, 0, 5000, &c1);
    redisContext *b = via(f, 0, 5000, &c2);
    /* Only the first new connection is held. */
    assert_true(timed_ping(b) >= 0);
    send_cmd(a, "PING");
    FP(f, "wait-held 0:%d up 14 5000", c1);
    assert_int_equal(fp_cmd(f->fp, reply, sizeof reply, "wait-held 0:%d up 1 50", c2), -1);
    assert_string_equal(reply, "err timeout");
    FP(f, "unhold 0:%d", c1);
    expect_status(a, "PONG");
    redisFree(a);
    redisFree(b);
}

static void test_hold_match(void **state)
{
    fixture *f = *state;
    char hex[64];
    int cid;
    redisContext *ctx = via(f, 0, 5000, &cid);
    /* Hold from the first INCR on: the SET before it goes through. */
    FP(f, "hold-match 0 up %s", fp_hex("INCR", hex, sizeof hex));
    send_cmd(ctx, "SET m 10");
    expect_status(ctx, "OK");
    send_cmd(ctx, "INCR m");
    send_cmd(ctx, "INCR m");
    FP(f, "wait-held 0:%d up 20 5000", cid);
    char buf[16];
    assert_int_equal(rh_get(f->rc, 0, 0, "m", buf, sizeof buf), 1);
    assert_string_equal(buf, "10");
    FP(f, "unhold 0:%d", cid);
    expect_int(ctx, 11);
    expect_int(ctx, 12);
    /* The trigger was for one match: later INCRs flow. */
    send_cmd(ctx, "INCR m");
    expect_int(ctx, 13);

    /* A match that spans two writes (RESP pieces sent separately). */
    int fd = ctx->fd;
    FP(f, "hold-match 0:%d up %s", cid, fp_hex("$4\r\nINCR\r\n", hex, sizeof hex));
    const char *p1 = "*2\r\n$4\r\nIN", *p2 = "CR\r\n$1\r\nm\r\n";
    fp_conn c[4];
    assert_int_equal(fp_conns(f->fp, 0, c, 4), 1);
    long long up0 = c[0].up_bytes;
    assert_int_equal(send(fd, p1, strlen(p1), MSG_NOSIGNAL), (ssize_t)strlen(p1));
    /* The proxy has read the first part (a chunk of its own) before the rest. */
    assert_true(RH_WAIT_UNTIL(fp_conns(f->fp, 0, c, 4) == 1 &&
                              c[0].up_bytes == up0 + (long long)strlen(p1), 5000));
    assert_int_equal(send(fd, p2, strlen(p2), MSG_NOSIGNAL), (ssize_t)strlen(p2));
    FP(f, "wait-held 0:%d up %zu 5000", cid, strlen(p2));
    assert_int_equal(rh_get(f->rc, 0, 0, "m", buf, sizeof buf), 1);
    assert_string_equal(buf, "13");
    FP(f, "unhold 0:%d", cid);
    expect_int(ctx, 14);
    redisFree(ctx);
}

/* The heart of it: the client gives up on a slow connection and closes it,
 * but its request still reaches the server later. */
static void test_detach_then_unhold_executes_later(void **state)
{
    fixture *f = *state;
    int cid;
    redisContext *ctx = via(f, 0, 5000, &cid);
    FP(f, "hold 0:%d up", cid);
    send_cmd(ctx, "SET late v1");
    FP(f, "wait-held 0:%d up 31 5000", cid);
    FP(f, "detach 0:%d", cid);
    /* The client sees its connection closed (EOF), the server has nothing. */
    redisReply *r = get_reply(ctx);
    assert_null(r);
    assert_true(ctx->err == REDIS_ERR_EOF || ctx->err == REDIS_ERR_IO);
    redisFree(ctx);
    fp_conn c[4];
    assert_int_equal(fp_conns(f->fp, 0, c, 4), 1);
    assert_string_equal(c[0].state, "detached");
    assert_int_equal(rh_get(f->rc, 0, 0, "late", NULL, 0), 0);
    /* Later the held request arrives and runs; the upstream is then closed. */
    FP(f, "unhold 0:%d", cid);
    char buf[16];
    assert_true(RH_WAIT_UNTIL(rh_get(f->rc, 0, 0, "late", buf, sizeof buf) == 1, 5000));
    assert_string_equal(buf, "v1");
    FP(f, "wait-closed 0:%d 5000", cid);

    /* Same through heal. */
    ctx = via(f, 0, 5000, &cid);
    FP(f, "hold 0:%d up", cid);
    send_cmd(ctx, "SET late2 v2");
    FP(f, "wait-held 0:%d up 32 5000", cid);
    FP(f, "detach 0:%d", cid);
    redisFree(ctx);
    assert_int_equal(rh_get(f->rc, 0, 0, "late2", NULL, 0), 0);
    FP(f, "heal");
    assert_true(RH_WAIT_UNTIL(rh_get(f->rc, 0, 0, "late2", NULL, 0) == 1, 5000));
    FP(f, "wait-closed 0:%d 5000", cid);
}

static void test_reset_and_reset_after(void **state)
{
    fixture *f = *state;
    char big[10001];
    memset(big, 'x', 10000);
    big[10000] = '\0';
    assert_int_equal(rh_set(f->rc, 0, 0, "big", big, 0), 0);

    /* hiredis: the reply is cut, the call fails. */
    int cid;
    redisContext *ctx = via(f, 0, 5000, &cid);
    FP(f, "reset-after 0:%d down 100", cid);
    redisReply *r = redisCommand(ctx, "GET big");
    assert_null(r);
    assert_int_equal(ctx->err, REDIS_ERR_IO);
    redisFree(ctx);

    /* A raw socket sees exactly the 100 bytes, then ECONNRESET. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)fp_port(f->fp, 0)) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    FP(f, "reset-after 0:next down 100");
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    const char *get = "GET big\r\n";
    assert_int_equal(send(fd, get, strlen(get), MSG_NOSIGNAL), (ssize_t)strlen(get));
    char buf[4096];
    size_t total = 0;
    int err = 0;
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n > 0) { total += (size_t)n; continue; }
        if (n < 0 && errno == EINTR) continue;
        err = n < 0 ? errno : 0;
        break;
    }
    close(fd);
    assert_int_equal(total, 100);
    assert_int_equal(err, ECONNRESET);

    /* reset: the client side is aborted with RST at once. */
    ctx = via(f, 0, 5000, &cid);
    timed_ping(ctx);
    FP(f, "reset 0:%d", cid);
    r = redisCommand(ctx, "PING");
    assert_null(r);
    assert_int_equal(ctx->err, REDIS_ERR_IO);
    redisFree(ctx);
    FP(f, "wait-closed 0:%d 5000", cid);
    assert_true(fp_stat(f->fp, "resets") >= 3);
}

static void test_partition(void **state)
{
    fixture *f = *state;
    int cid;
    redisContext *ctx = via(f, 1, 300, &cid);
    timed_ping(ctx);
    FP(f, "partition 1 on");
    long long t0 = rh_now_ms();
    redisReply *r = redisCommand(ctx, "SET p 1");
    assert_null(r);
    assert_int_equal(ctx->err, REDIS_ERR_IO);      /* read timeout */
    assert_true(rh_now_ms() - t0 >= 290);
    assert_int_equal(rh_get(f->rc, 1, 0, "p", NULL, 0), 0);  /* dropped, not buffered */
    redisFree(ctx);
    /* New connections are accepted, and nothing answers. */
    redisContext *c2 = via(f, 1, 300, NULL);
    r = redisCommand(c2, "PING");
    assert_null(r);
    redisFree(c2);
    /* Listener 0 is unaffected. */
    redisContext *c0 = via(f, 0, 2000, NULL);
    timed_ping(c0);
    redisFree(c0);
    FP(f, "partition 1 off");
    c2 = via(f, 1, 2000, NULL);
    timed_ping(c2);
    redisFree(c2);
    assert_int_equal(rh_get(f->rc, 1, 0, "p", NULL, 0), 0);
    assert_true(fp_stat(f->fp, "dropped_bytes") > 0);
}

static void test_blackhole_accept(void **state)
{
    fixture *f = *state;
    redisContext *old = via(f, 0, 300, NULL);
    FP(f, "blackhole-accept 0 on");
    redisContext *fresh = via(f, 0, 300, NULL);
    FP(f, "blackhole-accept 0 off");
    timed_ping(old);                                  /* existing: unaffected */
    redisReply *r = redisCommand(fresh, "PING");      /* accepted while on: dead */
    assert_null(r);
    redisFree(fresh);
    redisContext *later = via(f, 0, 2000, NULL);      /* after off: fine */
    timed_ping(later);
    redisFree(later);
    redisFree(old);
}

static void test_slow_accept(void **state)
{
    fixture *f = *state;
    FP(f, "slow-accept 0 400");
    long long t0 = rh_now_ms();
    int cid;
    redisContext *ctx = via(f, 0, 5000, &cid);
    /* TCP accepted at once, the upstream not connected yet. */
    fp_conn c[4];
    assert_int_equal(fp_conns(f->fp, 0, c, 4), 1);
    assert_string_equal(c[0].state, "connecting");
    redisReply *r = redisCommand(ctx, "PING");       /* answered late */
    assert_non_null(r);
    assert_string_equal(r->str, "PONG");
    freeReplyObject(r);
    assert_true(rh_now_ms() - t0 >= 400);
    /* With a 150 ms read timeout, the first reply is too late (handshake hang). */
    redisContext *c2 = via(f, 0, 150, NULL);
    r = redisCommand(c2, "PING");
    assert_null(r);
    redisFree(c2);
    FP(f, "slow-accept 0 0");
    redisContext *c3 = via(f, 0, 150, NULL);
    timed_ping(c3);
    redisFree(c3);
    redisFree(ctx);
}

static void test_heal(void **state)
{
    fixture *f = *state;
    int a_id, b_id;
    redisContext *a = via(f, 0, 5000, &a_id);
    redisContext *b = via(f, 1, 5000, &b_id);
    FP(f, "hold * up");                     /* every listener, now and later */
    FP(f, "delay 1 1000");
    FP(f, "slow-accept 0 60000");
    send_cmd(a, "SET healed a");
    send_cmd(b, "SET healed b");
    FP(f, "wait-held 0:%d up 1 5000", a_id);
    FP(f, "wait-held 1:%d up 1 5000", b_id);
    redisContext *c = via(f, 0, 5000, NULL);   /* waits for slow-accept */
    send_cmd(c, "PING");
    long long delayed = fp_stat(f->fp, "delayed_chunks");
    FP(f, "heal");
    expect_status(a, "OK");
    expect_status(b, "OK");
    expect_status(c, "PONG");
    timed_ping(b);
    assert_int_equal(fp_stat(f->fp, "delayed_chunks"), delayed);   /* the delay is gone too */
    assert_int_equal(fp_stat(f->fp, "held_bytes"), 0);
    char buf[8];
    assert_int_equal(rh_get(f->rc, 0, 0, "healed", buf, sizeof buf), 1);
    assert_string_equal(buf, "a");
    assert_int_equal(rh_get(f->rc, 1, 0, "healed", buf, sizeof buf), 1);
    assert_string_equal(buf, "b");
    /* New connections are not held any more. */
    redisContext *d = via(f, 1, 2000, NULL);
    timed_ping(d);
    redisFree(d);
    redisFree(c);
    redisFree(b);
    redisFree(a);
}

/* libdistlock through the proxy: fp_uris() is all a library test needs. */
static void test_library_through_proxy(void **state)
{
    fixture *f = *state;
    distlock_client *c = new_client(fp_uris(f->fp));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 300), DISTLOCK_OK);
    distlock_lock *lock = NULL;
    assert_rc(distlock_acquire(c, "plock", 10000, 0, 0, &lock), DISTLOCK_OK);
    assert_holding(f->rc, "plock", distlock_lock_token(lock), 2);
    assert_rc(distlock_release(lock), DISTLOCK_OK);
    distlock_lock_free(lock);
    assert_holding(f->rc, "plock", NULL, 0);
    /* Node 1 unreachable: 1 of 2 is no quorum. */
    FP(f, "partition 1 on");
    lock = NULL;
    assert_int_not_equal(distlock_acquire(c, "plock2", 10000, 0, 0, &lock), DISTLOCK_OK);
    assert_null(lock);
    FP(f, "partition 1 off");
    /* The partition dropped bytes mid-stream: the old connection to node 1
     * owes a reply that will never come (the library gives such a connection
     * up after 30 s). A new client connects afresh. */
    distlock_client_free(c);
    c = new_client(fp_uris(f->fp));
    assert_rc(distlock_acquire(c, "plock3", 10000, 0, 0, &lock), DISTLOCK_OK);
    assert_rc(distlock_release(lock), DISTLOCK_OK);
    distlock_lock_free(lock);
    distlock_client_free(c);
}

static void test_slowdns(void **state)
{
    fixture *f = *state;
    assert_int_equal(slowdns_set("slow.test=300=127.0.0.1;dead.test=0=fail;Fast.Test=0=127.0.0.1"), 0);
    assert_int_equal(slowdns_set("bad"), -1);
    slowdns_reset_calls();
    struct timeval tv = { 5, 0 };
    long long t0 = rh_now_ms();
    redisContext *ctx = redisConnectWithTimeout("slow.test", f->rc->node[0].port, tv);
    long long took = rh_now_ms() - t0;
    assert_non_null(ctx);
    assert_int_equal(ctx->err, 0);
    assert_true(took >= 300);
    assert_true(slowdns_calls("slow.test") >= 1);
    timed_ping(ctx);
    redisFree(ctx);

    ctx = redisConnectWithTimeout("dead.test", f->rc->node[0].port, tv);
    assert_non_null(ctx);
    assert_int_not_equal(ctx->err, 0);
    redisFree(ctx);
    assert_true(slowdns_calls("DEAD.test") >= 1);

    /* Through libdistlock.so (hiredis inside it resolves the name): the
     * executable's getaddrinfo is the one every library sees. */
    char uri[128];
    snprintf(uri, sizeof uri, "redis://fast.test:%d", f->rc->node[1].port);
    int before = slowdns_calls("fast.test");
    distlock_client *c = new_client(uri);
    distlock_lock *lock = NULL;
    assert_rc(distlock_acquire(c, "dnslock", 10000, 0, 0, &lock), DISTLOCK_OK);
    assert_true(slowdns_calls("fast.test") > before);
    assert_int_equal(rh_count_holding(f->rc, "dnslock", NULL), 1);
    assert_rc(distlock_release(lock), DISTLOCK_OK);
    distlock_lock_free(lock);
    distlock_client_free(c);
    /* Names without a rule pass through to the real resolver. */
    before = slowdns_calls(NULL);
    ctx = redisConnectWithTimeout("localhost", f->rc->node[0].port, tv);
    assert_non_null(ctx);
    assert_int_equal(ctx->err, 0);
    redisFree(ctx);
    assert_true(slowdns_calls(NULL) > before);
    assert_int_equal(slowdns_set(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_passthrough_and_uris, setup),
        cmocka_unit_test_setup(test_delay, setup),
        cmocka_unit_test_setup(test_hold_unhold_in_order, setup),
        cmocka_unit_test_setup(test_hold_next_and_wait_timeout, setup),
        cmocka_unit_test_setup(test_hold_match, setup),
        cmocka_unit_test_setup(test_detach_then_unhold_executes_later, setup),
        cmocka_unit_test_setup(test_reset_and_reset_after, setup),
        cmocka_unit_test_setup(test_partition, setup),
        cmocka_unit_test_setup(test_blackhole_accept, setup),
        cmocka_unit_test_setup(test_slow_accept, setup),
        cmocka_unit_test_setup(test_heal, setup),
        cmocka_unit_test_setup(test_library_through_proxy, setup),
        cmocka_unit_test_setup(test_slowdns, setup),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
