/* node.c -- connecting to one node. Connections are non-blocking so that one
 * thread can talk to N nodes at once; the connect itself completes inside
 * the round's poll() loop and is bounded by the connect timeout there. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

redisContext *distlock__node_connect(const distlock__node_cfg *cfg, long timeout_ms,
                                     int nonblock, int *status, char *err, size_t errlen)
{
    redisContext *ctx;

    if (nonblock) {
        ctx = cfg->path ? redisConnectUnixNonBlock(cfg->path)
                        : redisConnectNonBlock(cfg->host, cfg->port);
    } else {
        struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
        ctx = cfg->path ? redisConnectUnixWithTimeout(cfg->path, tv)
                        : redisConnectWithTimeout(cfg->host, cfg->port, tv);
        if (ctx && !ctx->err)
            redisSetTimeout(ctx, tv);
    }
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
    return ctx;
}

void distlock__conn_close(distlock__conn *conn)
{
    /* redisFree only closes our fd: no bytes are written, so this is also
     * how a forked child drops the sockets it inherited. */
    if (conn->ctx)
        redisFree(conn->ctx);
    conn->ctx = NULL;
    conn->skip = 0;
    conn->skip_since_us = 0;
}

/* hiredis writes with write(2): a node that closed its end (restart, kill)
 * would raise SIGPIPE and kill a program that has not ignored it. Block
 * SIGPIPE in this thread for the write, and consume one it raised. */
int distlock__write(redisContext *ctx, int *done)
{
    sigset_t pipe_set, old, pending;
    int was_pending, rc;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigpending(&pending);
    was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    rc = redisBufferWrite(ctx, done);
    if (rc != REDIS_OK && !was_pending) {
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE)) {
            struct timespec zero = { 0, 0 };
            while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {
            }
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}
