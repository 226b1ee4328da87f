/* net.c -- the plain stream: its connect, its functions, what it and the
 * TLS stream (tls.c) share, closing a stream, and the one blocking wait on
 * the transport's descriptors (stream.c opens streams). Connections are non-blocking so that one thread
 * can talk to N nodes at once; the connect itself completes inside the
 * round's poll() loop and is bounded by the connect timeout there. Host
 * names are resolved beforehand (resolve.c): here addresses are numeric.
 *
 * Layer: 1 transport */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <hiredis/sds.h>
#include <limits.h>
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

/* A socket of family, close-on-exec and non-blocking from its creation
 * (hiredis 0.14 makes its sockets without SOCK_CLOEXEC, so a fork and exec
 * on another thread before a later fcntl would hand them to the program
 * executed), its connect to sa started: the connect completes in the
 * round's poll() loop, as hiredis's non-blocking connect does. The
 * descriptor, or -1 with errno set. */
static int connect_started(int family, int protocol, const struct sockaddr *sa, socklen_t len)
{
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
    if (fd < 0 || connect(fd, sa, len) == 0 || errno == EINPROGRESS)
        return fd;
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

/* A socket connecting to addr:port (numeric: resolve.c; each address it
 * gives tried in turn) or to the Unix socket path. The descriptor, or -1
 * with why set. */
static int connecting_socket(const char *addr, int port, const char *path, char *why,
                             size_t whylen)
{
    int fd = -1;
    if (addr == NULL) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);  /* uri.c checked its length */
        fd = connect_started(AF_UNIX, 0, (struct sockaddr *)&sa, sizeof(sa));
    } else {
        char service[16];
        snprintf(service, sizeof(service), "%d", port);
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV }, *res = NULL;
        int gai = getaddrinfo(addr, service, &hints, &res);
        if (gai != 0) {
            snprintf(why, whylen, "%s", gai_strerror(gai));
            return -1;
        }
        errno = EADDRNOTAVAIL;  /* (no address at all) */
        for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next)
            fd = connect_started(a->ai_family, a->ai_protocol, a->ai_addr, a->ai_addrlen);
        int e = errno;
        freeaddrinfo(res);
        errno = e;
        if (fd >= 0) {
            int one = 1;  /* small requests, each awaited: no Nagle delay (as hiredis) */
            (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        }
    }
    if (fd < 0)
        snprintf(why, whylen, "%s", strerror(errno));
    return fd;
}

int distlock__stream_open_plain(distlock__stream *s, const distlock__node_cfg *cfg,
                                const char *addr, int port, int *status, char *err,
                                size_t errlen)
{
    char why[128] = "";
    int fd = connecting_socket(addr, port > 0 ? port : cfg->port, cfg->path, why, sizeof(why));
    if (fd < 0) {
        *status = DISTLOCK_ECONN;
        snprintf(err, errlen, "%s: %s", cfg->uri, why);
        return -1;
    }
    /* hiredis keeps the descriptor, its reader and its output buffer; the
     * reads and writes are ours (below), never hiredis's blocking ones */
    redisContext *ctx = redisConnectFd(fd);
    if (ctx == NULL) {
        close(fd);
        *status = DISTLOCK_ENOMEM;
        snprintf(err, errlen, "%s: out of memory", cfg->uri);
        return -1;
    }
    ctx->flags &= ~REDIS_BLOCK;
    if (distlock__reader_cap(ctx->reader) != 0) {
        *status = DISTLOCK_ENOMEM;
        snprintf(err, errlen, "%s: out of memory", cfg->uri);
        redisFree(ctx);
        return -1;
    }
    s->ctx = ctx;
    s->fn = &distlock__stream_plain;
    s->impl = NULL;
    return 0;
}

void distlock__stream_close(distlock__stream *s)
{
    if (s->ctx == NULL)
        return;
    if (s->fn->free_impl)
        s->fn->free_impl(s->impl);  /* writes nothing (no close_notify) */
    redisFree(s->ctx);  /* closes our fd; writes nothing */
    *s = (distlock__stream){ NULL, NULL, NULL };
}

int distlock__stream_fail(distlock__stream *s, int type, const char *why)
{
    s->ctx->err = type;
    snprintf(s->ctx->errstr, sizeof(s->ctx->errstr), "%s", why);
    return REDIS_ERR;
}

void distlock__stream_sent(distlock__stream *s, size_t n)
{
    if (n == sdslen(s->ctx->obuf))
        sdsclear(s->ctx->obuf);
    else
        sdsrange(s->ctx->obuf, (ssize_t)n, -1);
}

char *distlock__stream_rbuf(void)
{
    static _Thread_local char buf[DISTLOCK__STREAM_RBUF];
    return buf;
}

/* hiredis 0.14 writes with write(2): a node that closed its end (restart,
 * kill) would raise SIGPIPE and kill a program that has not ignored it. So
 * we flush the context's output buffer ourselves with send(MSG_NOSIGNAL),
 * which also costs no extra system calls. Same contract as redisBufferWrite. */
static int plain_write(distlock__stream *s, int *done)
{
    redisContext *ctx = s->ctx;
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
            return distlock__stream_fail(s, REDIS_ERR_IO, strerror(errno));
        }
        distlock__stream_sent(s, (size_t)n);
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
static int plain_read(distlock__stream *s)
{
    redisContext *ctx = s->ctx;
    char *buf = distlock__stream_rbuf();
    if (ctx->err)
        return REDIS_ERR;
    ssize_t n;
    do
        n = recv(ctx->fd, buf, DISTLOCK__STREAM_RBUF, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return REDIS_OK;
        return distlock__stream_fail(s, REDIS_ERR_IO, strerror(errno));
    }
    if (n == 0)
        return distlock__stream_fail(s, REDIS_ERR_EOF, "Server closed the connection");
    if (redisReaderFeed(ctx->reader, buf, (size_t)n) != REDIS_OK)
        return distlock__stream_fail(s, ctx->reader->err, ctx->reader->errstr);
    return REDIS_OK;
}

static int plain_events(const distlock__stream *s)
{
    return POLLIN | (s->ctx->obuf && s->ctx->obuf[0] != '\0' ? POLLOUT : 0);
}

static int plain_up(const distlock__stream *s)
{
    (void)s;
    return 1;
}

static int plain_cert_refused(const distlock__stream *s)
{
    (void)s;
    return 0;
}

const distlock__stream_funcs distlock__stream_plain = {
    plain_write, plain_read, plain_events, plain_up, plain_cert_refused, NULL
};

int distlock__poll_wait(struct pollfd *pfd, int np, uint64_t until_us)
{
    uint64_t now = distlock__now_us();
    int ms = -1;
    if (until_us != UINT64_MAX) {
        uint64_t left = until_us > now ? (until_us - now + 999) / 1000 : 0;
        ms = left > INT_MAX ? INT_MAX : (int)left;
    }
    int pr = poll(pfd, (nfds_t)np, ms);
    if (pr >= 0)
        return pr;
    if (errno != EINTR) {
        /* poll() itself failed (ENOMEM): nothing is known about the
         * descriptors; wait a little and let the caller ask again. */
        (void)poll(NULL, 0, ms < 0 || ms > 10 ? 10 : ms);
    }
    for (int k = 0; k < np; k++)
        pfd[k].revents = 0;
    return 0;
}

int distlock__poll_wait_gated(struct pollfd *pfd, int np, uint64_t until_us)
{
    distlock__fork_gate_leave();
    int pr = distlock__poll_wait(pfd, np, until_us);
    distlock__fork_gate_enter();
    return pr;
}
