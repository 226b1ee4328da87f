/* resolve.c -- host names resolved off the calling thread.
 *
 * getaddrinfo() blocks for as long as the resolver takes, and hiredis 0.14
 * calls it inside its non-blocking connect. One slow name would then stall
 * the whole parallel round (every node's deadline runs meanwhile) or, in the
 * subscriber thread, every node's notifications. So a name is resolved by a
 * short-lived detached thread; the caller polls a pipe like any socket and
 * connects to the numeric address once it is known, within that node's own
 * deadline. Numeric hosts never start a thread. */
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
    char addr[DISTLOCK__RESOLVE_MAX][48];
    char err[128];
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
    pthread_mutex_destroy(&r->mu);
    free(r->host);
    free(r);
}

static void *resolve_main(void *arg)
{
    distlock__resolve *r = arg;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int e = getaddrinfo(r->host, NULL, &hints, &res);

    pthread_mutex_lock(&r->mu);
    if (e != 0) {
        snprintf(r->err, sizeof(r->err), "cannot resolve '%s': %s", r->host, gai_strerror(e));
    } else {
        /* IPv4 first: servers commonly bind 127.0.0.1 / an IPv4 address
         * only, while "localhost" may list ::1 first. */
        for (int pass = 0; pass < 2; pass++)
            for (struct addrinfo *a = res; a && r->naddr < DISTLOCK__RESOLVE_MAX; a = a->ai_next) {
                const void *src;
                if (a->ai_family == AF_INET && pass == 0)
                    src = &((struct sockaddr_in *)a->ai_addr)->sin_addr;
                else if (a->ai_family == AF_INET6 && pass == 1)
                    src = &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
                else
                    continue;
                if (inet_ntop(a->ai_family, src, r->addr[r->naddr], sizeof(r->addr[0])))
                    r->naddr++;
            }
        if (r->naddr == 0)
            snprintf(r->err, sizeof(r->err), "cannot resolve '%s': no address", r->host);
        freeaddrinfo(res);
    }
    r->done = 1;
    pthread_mutex_unlock(&r->mu);
    char one = 1;
    ssize_t w = write(r->fds[1], &one, 1);
    (void)w;
    job_unref(r);
    return NULL;
}

distlock__resolve *distlock__resolve_start(const char *host)
{
    distlock__resolve *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    if ((r->host = strdup(host)) == NULL || pipe2(r->fds, O_NONBLOCK | O_CLOEXEC) != 0) {
        free(r->host);
        free(r);
        return NULL;
    }
    pthread_mutex_init(&r->mu, NULL);
    r->refs = 2;
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int e = distlock__thread_create(&t, &at, resolve_main, r);
    pthread_attr_destroy(&at);
    if (e != 0) {
        r->refs = 1;
        job_unref(r);
        return NULL;
    }
    return r;
}

int distlock__resolve_fd(const distlock__resolve *r)
{
    return r->fds[0];
}

int distlock__resolve_take(distlock__resolve *r, char (*addr)[48], int *naddr, char *err,
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
