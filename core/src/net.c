/* net.c -- connecting to one node (transport). Connections are non-blocking so that one
 * thread can talk to N nodes at once; the connect itself completes inside
 * the round's poll() loop and is bounded by the connect timeout there. Host
 * names are resolved beforehand (resolve.c): here addresses are numeric. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <hiredis/sds.h>
#include <string.h>
#include <unistd.h>

#include "transport.h"

redisContext *distlock__node_connect(const distlock__node_cfg *cfg, const char *addr,
                                     int *status, char *err, size_t errlen)
{
    redisContext *ctx = addr ? redisConnectNonBlock(addr, cfg->port)
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
    /* hiredis 0.14 does not set close-on-exec: our sockets must not leak
     * into programs the caller executes. */
    int fl = fcntl(ctx->fd, F_GETFD);
    if (fl >= 0)
        fcntl(ctx->fd, F_SETFD, fl | FD_CLOEXEC);
    return ctx;
}

/* hiredis 0.14 writes with write(2): a node that closed its end (restart,
 * kill) would raise SIGPIPE and kill a program that has not ignored it. So
 * we flush the context's output buffer ourselves with send(MSG_NOSIGNAL),
 * which also costs no extra system calls. Same contract as redisBufferWrite. */
int distlock__write(redisContext *ctx, int *done)
{
    if (ctx->err)
        return REDIS_ERR;
    size_t len = sdslen(ctx->obuf);
    while (len > 0) {
        ssize_t n = send(ctx->fd, ctx->obuf, len, MSG_NOSIGNAL);
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
        *done = len == 0;
    return REDIS_OK;
}

/* redisBufferRead without its 16 KB stack buffer (the library promises
 * callers a small stack): the bytes go through a per-thread buffer. Same
 * contract: REDIS_OK (nothing to read now is fine), REDIS_ERR with
 * ctx->err set on a closed or broken connection. */
int distlock__read(redisContext *ctx)
{
    static _Thread_local char buf[16 * 1024];
    if (ctx->err)
        return REDIS_ERR;
    ssize_t n;
    do
        n = recv(ctx->fd, buf, sizeof(buf), 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return REDIS_OK;
        ctx->err = REDIS_ERR_IO;
        snprintf(ctx->errstr, sizeof(ctx->errstr), "%s", strerror(errno));
        return REDIS_ERR;
    }
    if (n == 0) {
        ctx->err = REDIS_ERR_EOF;
        snprintf(ctx->errstr, sizeof(ctx->errstr), "Server closed the connection");
        return REDIS_ERR;
    }
    if (redisReaderFeed(ctx->reader, buf, (size_t)n) != REDIS_OK) {
        ctx->err = ctx->reader->err;
        snprintf(ctx->errstr, sizeof(ctx->errstr), "%s", ctx->reader->errstr);
        return REDIS_ERR;
    }
    return REDIS_OK;
}
