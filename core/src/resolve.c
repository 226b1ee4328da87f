/* resolve.c -- host names resolved off the calling thread.
 *
 * getaddrinfo() blocks for as long as the resolver takes, and hiredis 0.14
 * calls it inside its non-blocking connect. One slow name would then stall
 * the whole parallel round (every node's deadline runs meanwhile) or, in the
 * subscriber thread, every node's notifications. So a name is resolved by a
 * short-lived thread of its own; the caller polls a pipe like any socket and
 * connects to the numeric address once it is known, within that node's own
 * deadline. Numeric hosts never start a thread.
 *
 * The same helper runs other lookups that end in an address: a Sentinel
 * node's master (sentinel.c gives the function, which may also give a
 * port).
 *
 * Layer: 1 transport */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport.h"

struct distlock__resolve {
    pthread_mutex_t mu;
    int refs;                 /* the caller and the thread */
    int done;
    int fds[2];               /* the thread writes one byte when done */
    char *host;
    int naddr;
    char addr[DISTLOCK__RESOLVE_MAX][DISTLOCK__ADDR_LEN];
    int port;                 /* 0: the node's own (a job may find another) */
    char err[DISTLOCK__ERR_LEN];
    distlock__resolve_fn fn;  /* a lookup of another kind (sentinel.c), or NULL */
    void *arg;
    void (*free_arg)(void *);
};

int distlock__host_is_numeric(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

static void job_unref(distlock__resolve *r)
{
    pthread_mutex_lock(&r->mu);
    int last = --r->refs == 0;
    pthread_mutex_unlock(&r->mu);
    if (!last)
        return;
    close(r->fds[0]);
    close(r->fds[1]);
    if (r->free_arg)
        r->free_arg(r->arg);
    pthread_mutex_destroy(&r->mu);
    free(r->host);
    free(r);
}

int distlock__resolve_now(const char *host, char (*addr)[DISTLOCK__ADDR_LEN], int *naddr, char *err,
                          size_t errlen)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    *naddr = 0;
    int e = getaddrinfo(host, NULL, &hints, &res);
    if (e != 0) {
        snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(e));
        return -1;
    }
    /* IPv4 first: servers commonly bind 127.0.0.1 / an IPv4 address
     * only, while "localhost" may list ::1 first. */
    for (int pass = 0; pass < 2; pass++)
        for (struct addrinfo *a = res; a && *naddr < DISTLOCK__RESOLVE_MAX; a = a->ai_next) {
            const void *src;
            if (a->ai_family == AF_INET && pass == 0)
                src = &((struct sockaddr_in *)a->ai_addr)->sin_addr;
            else if (a->ai_family == AF_INET6 && pass == 1)
                src = &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
            else
                continue;
            if (inet_ntop(a->ai_family, src, addr[*naddr], 48))
                (*naddr)++;
        }
    freeaddrinfo(res);
    if (*naddr == 0) {
        snprintf(err, errlen, "cannot resolve '%s': no address", host);
        return -1;
    }
    return 0;
}

/* The helper holds the fork gate (base.h) while it works: a lookup runs
 * OpenSSL (its context, a handshake to each sentinel, freeing them at the
 * end, also after its caller has the answer), and a fork() in the middle
 * would leave the child a lock of OpenSSL or of the allocator held
 * forever. It lets go of the gate to wait: a lookup in its polls
 * (distlock__poll_wait_gated), a name here in getaddrinfo, which takes as
 * long as the resolver does. Its last leave is distlock__fork_gate_exit:
 * nobody waits for a helper to end (a call cancelled or a client freed
 * drops the job), so the gate joins it, and a fork() never catches it
 * half-exited. */
static void *resolve_main(void *arg)
{
    distlock__resolve *r = arg;
    char addr[DISTLOCK__RESOLVE_MAX][DISTLOCK__ADDR_LEN], err[DISTLOCK__ERR_LEN] = "";
    int naddr = 0, port = 0;
    pthread_setname_np(pthread_self(), "distlock-lookup");  /* as ps -T and gdb show it */
    distlock__fork_gate_enter();
    if (r->fn) {
        (void)r->fn(r->arg, addr, &naddr, &port, err, sizeof(err));
    } else {
        distlock__fork_gate_leave();
        (void)distlock__resolve_now(r->host, addr, &naddr, err, sizeof(err));
        distlock__fork_gate_enter();
    }

    pthread_mutex_lock(&r->mu);
    r->naddr = naddr;
    r->port = port;
    memcpy(r->addr, addr, sizeof(addr));
    snprintf(r->err, sizeof(r->err), "%s", naddr > 0 ? "" : err[0] ? err : "no address");
    r->done = 1;
    pthread_mutex_unlock(&r->mu);
    char one = 1;
    ssize_t w = write(r->fds[1], &one, 1);
    (void)w;
    job_unref(r);
    distlock__fork_gate_exit();
    return NULL;
}

static distlock__resolve *job_start(const char *host, distlock__resolve_fn fn, void *arg,
                                    void (*free_arg)(void *))
{
    distlock__resolve *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        if (free_arg)
            free_arg(arg);
        return NULL;
    }
    r->fn = fn;
    r->arg = arg;
    r->free_arg = free_arg;
    if ((host && (r->host = strdup(host)) == NULL) || pipe2(r->fds, O_NONBLOCK | O_CLOEXEC) != 0) {
        if (free_arg)
            free_arg(arg);
        free(r->host);
        free(r);
        return NULL;
    }
    pthread_mutex_init(&r->mu, NULL);
    r->refs = 2;
    pthread_t t;  /* joined through the gate (distlock__fork_gate_exit) */
    int e = distlock__thread_create(&t, NULL, resolve_main, r);
    if (e != 0) {
        r->refs = 1;
        job_unref(r);
        return NULL;
    }
    return r;
}

distlock__resolve *distlock__resolve_start(const char *host)
{
    return job_start(host, NULL, NULL, NULL);
}

distlock__resolve *distlock__resolve_start_fn(distlock__resolve_fn fn, void *arg,
                                              void (*free_arg)(void *))
{
    return job_start(NULL, fn, arg, free_arg);
}

int distlock__resolve_port(distlock__resolve *r)
{
    pthread_mutex_lock(&r->mu);
    int port = r->port;
    pthread_mutex_unlock(&r->mu);
    return port;
}

int distlock__resolve_fd(const distlock__resolve *r)
{
    return r->fds[0];
}

int distlock__resolve_take(distlock__resolve *r, char (*addr)[DISTLOCK__ADDR_LEN], int *naddr, char *err,
                           size_t errlen)
{
    pthread_mutex_lock(&r->mu);
    int done = r->done, rc = 1;
    if (done) {
        *naddr = r->naddr;
        memcpy(addr, r->addr, sizeof(r->addr));
        snprintf(err, errlen, "%s", r->err);
        rc = r->naddr > 0 ? 0 : -1;
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

void distlock__resolve_drop(distlock__resolve *r)
{
    if (r)
        job_unref(r);
}
