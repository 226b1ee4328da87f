/* net.c -- connecting to one node. Connections are non-blocking so that one
 * thread can talk to N nodes at once; the connect itself completes inside
 * the round's poll() loop and is bounded by the connect timeout there. Host
 * names are resolved beforehand (resolve.c): here addresses are numeric.
 *
 * Layer: 1 transport */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/socket.h>
#include <hiredis/sds.h>
#include <string.h>
#include <unistd.h>

#include "transport.h"

/* hiredis 0.14 sizes an array's element table from its header alone: one
 * line "*201234552\r\n" from a broken or hostile node is a 1.6 GB calloc
 * (found by tests/fuzz). No reply we ask for comes near
 * DISTLOCK__REPLY_ELEMENTS_MAX elements, so a reader of ours refuses a
 * bigger header: hiredis then fails the reply (a protocol error, the
 * connection closed) and distlock__reader_refused() says why. */
static redisReplyObjectFunctions capped_fns;
static void *(*hiredis_create_array)(const redisReadTask *, int);
static pthread_once_t capped_once = PTHREAD_ONCE_INIT;
static __thread long long refused_elements;

static void *capped_create_array(const redisReadTask *task, int elements)
{
    if (elements > DISTLOCK__REPLY_ELEMENTS_MAX) {
        refused_elements = elements;
        return NULL;
    }
    return hiredis_create_array(task, elements);
}

/* hiredis' own object functions are static: take them from a reader. */
static void capped_init(void)
{
    redisReader *r = redisReaderCreate();
    if (r == NULL)
        return;
    capped_fns = *r->fn;
    redisReaderFree(r);
    hiredis_create_array = capped_fns.createArray;
    capped_fns.createArray = capped_create_array;
}

int distlock__reader_cap(redisReader *r)
{
    pthread_once(&capped_once, capped_init);
    if (hiredis_create_array == NULL)
        return -1;
    r->fn = &capped_fns;
    return 0;
}

long long distlock__reader_refused(void)
{
    long long n = refused_elements;
    refused_elements = 0;
    return n;
}

redisContext *distlock__tcp_connect(const distlock__node_cfg *cfg, const char *addr, int port,
                                    int *status, char *err, size_t errlen)
{
    redisContext *ctx = addr ? redisConnectNonBlock(addr, port > 0 ? port : cfg->port)
                             : redisConnectUnixNonBlock(cfg->path);
    if (ctx == NULL) {
        *status = DISTLOCK_ENOMEM;
        snprintf(err, errlen, "%s: out of memory", cfg->uri);
        return NULL;
    }
    if (ctx->err) {
        *status = DISTLOCK_ECONN;
        snprintf(err, errlen, "%s: %s", cfg->uri, ctx->errstr);
        redisFree(ctx);
        return NULL;
    }
    if (distlock__reader_cap(ctx->reader) != 0) {
        *status = DISTLOCK_ENOMEM;
        snprintf(err, errlen, "%s: out of memory", cfg->uri);
        redisFree(ctx);
        return NULL;
    }
    /* hiredis 0.14 does not set close-on-exec: our sockets must not leak
     * into programs the caller executes. */
    int fl = fcntl(ctx->fd, F_GETFD);
    if (fl >= 0)
        fcntl(ctx->fd, F_SETFD, fl | FD_CLOEXEC);
    return ctx;
}

redisContext *distlock__node_connect(distlock__transport *t, int i, const char *addr, int port,
                                     const char *host, distlock__tls **tls, int *status,
                                     char *err, size_t errlen)
{
    const distlock__node_cfg *cfg = &t->nodes[i];
    *tls = NULL;
    redisContext *ctx = distlock__tcp_connect(cfg, addr, port, status, err, errlen);
    /* checked against host (a Cluster master's own), else as tls.c says:
     * the URI's host, or addr (a Sentinel node's master, a Cluster master) */
    if (ctx && cfg->tls.enabled &&
        (*tls = distlock__tls_start(t, i, ctx->fd, addr, host, status, err, errlen)) == NULL) {
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}

int distlock__events(const redisContext *ctx, const distlock__tls *tls)
{
    int out = ctx->obuf && ctx->obuf[0] != '\0';
    return tls ? distlock__tls_events(tls, out) : POLLIN | (out ? POLLOUT : 0);
}

static int io_fail(redisContext *ctx, int type, const char *why)
{
    ctx->err = type;
    snprintf(ctx->errstr, sizeof(ctx->errstr), "%s", why);
    return REDIS_ERR;
}

/* hiredis 0.14 writes with write(2): a node that closed its end (restart,
 * kill) would raise SIGPIPE and kill a program that has not ignored it. So
 * we flush the context's output buffer ourselves with send(MSG_NOSIGNAL),
 * which also costs no extra system calls. Same contract as redisBufferWrite. */
int distlock__write(redisContext *ctx, distlock__tls *tls, int *done)
{
    char why[128];
    if (ctx->err)
        return REDIS_ERR;
    size_t len = sdslen(ctx->obuf);
    if (tls) {
        int hs = distlock__tls_handshake(tls, why, sizeof(why));
        if (hs < 0)
            return io_fail(ctx, REDIS_ERR_IO, why);
        if (hs == 0)
            len = 0;  /* the output waits for the handshake */
    }
    while (len > 0) {
        ssize_t n;
        if (tls) {
            n = distlock__tls_send(tls, ctx->obuf, len, why, sizeof(why));
            if (n < 0)
                return io_fail(ctx, REDIS_ERR_IO, why);
            if (n == 0)
                break;
        } else {
            n = send(ctx->fd, ctx->obuf, len, MSG_NOSIGNAL);
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            ctx->err = REDIS_ERR_IO;
            snprintf(ctx->errstr, sizeof(ctx->errstr), "%s", strerror(errno));
            return REDIS_ERR;
        }
        if ((size_t)n == len)
            sdsclear(ctx->obuf);
        else
            sdsrange(ctx->obuf, n, -1);
        len = sdslen(ctx->obuf);
    }
    if (done)
        *done = sdslen(ctx->obuf) == 0;
    return REDIS_OK;
}

/* redisBufferRead without its 16 KB stack buffer (the library promises
 * callers a small stack): the bytes go through a per-thread buffer. Same
 * contract: REDIS_OK (nothing to read now is fine), REDIS_ERR with
 * ctx->err set on a closed or broken connection. */
int distlock__read(redisContext *ctx, distlock__tls *tls)
{
    static _Thread_local char buf[16 * 1024];
    char why[128];
    if (ctx->err)
        return REDIS_ERR;
    if (tls) {
        int hs = distlock__tls_handshake(tls, why, sizeof(why));
        if (hs < 0)
            return io_fail(ctx, REDIS_ERR_IO, why);
        if (hs == 0)
            return REDIS_OK;
        /* Up: what waited for the handshake goes out now. */
        if (distlock__write(ctx, tls, NULL) != REDIS_OK)
            return REDIS_ERR;
        /* Everything OpenSSL has read from the socket is taken now: poll()
         * sees only the socket, not OpenSSL's buffer. What is still in the
         * socket wakes poll() again. */
        do {
            ssize_t n = distlock__tls_recv(tls, buf, sizeof(buf), why, sizeof(why));
            if (n == 0)
                return REDIS_OK;
            if (n < 0)
                return io_fail(ctx, n == -2 ? REDIS_ERR_EOF : REDIS_ERR_IO, why);
            if (redisReaderFeed(ctx->reader, buf, (size_t)n) != REDIS_OK)
                return io_fail(ctx, ctx->reader->err, ctx->reader->errstr);
        } while (distlock__tls_pending(tls));
        return REDIS_OK;
    }
    ssize_t n;
    do
        n = recv(ctx->fd, buf, sizeof(buf), 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return REDIS_OK;
        return io_fail(ctx, REDIS_ERR_IO, strerror(errno));
    }
    if (n == 0)
        return io_fail(ctx, REDIS_ERR_EOF, "Server closed the connection");
    if (redisReaderFeed(ctx->reader, buf, (size_t)n) != REDIS_OK)
        return io_fail(ctx, ctx->reader->err, ctx->reader->errstr);
    return REDIS_OK;
}
