/* held.c -- the records of ownerships held through a client
 * (one per key and token), shared by handles and the watchdog, and the
 * signals that one was lost.
 *
 * Layer: 5 operations */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "internal.h"

void distlock__held_free(distlock__held *h)
{
    for (size_t i = 0; h->keys && i < h->nkeys; i++)
        free(h->keys[i]);
    free(h->keys);
    free(h->fences);
    free(h->key);
    free(h->token);
    free(h->owner);
    free(h);
}

void distlock__held_unref_locked(distlock_client *c, distlock__held *h)
{
    if (--h->refs > 0)
        return;
    for (distlock__held **pp = &c->held; *pp; pp = &(*pp)->next)
        if (*pp == h) {
            *pp = h->next;
            break;
        }
    distlock__held_free(h);
}

int distlock__mark_lost(distlock__held *h, int why)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&h->lost, &expected, why))
        return 0;
    if (h->client)
        distlock__stats_inc(&h->client->stats, DISTLOCK__ST_LOST);
    if (h->client && h->client->lost_fd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(h->client->lost_fd, &one, sizeof(one));
        (void)w;
    }
    return 1;
}

int distlock_client_lost_fd(distlock_client *c)
{
    distlock__clear_error();
    if (c == NULL)
        return distlock__fail(-1, "client must not be NULL");
    distlock__lock(c);
    if (c->lost_fd < 0)
        c->lost_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    int fd = c->lost_fd;
    pthread_mutex_unlock(&c->mu);
    if (fd < 0)
        distlock__fail(-1, "eventfd: %s", strerror(errno));
    return fd;
}

/* c->mu held: a renewal of h ended (the watchdog's, or a blocking extend's):
 * a multi's extend waiting for it is woken through the multi's eventfd
 * (handle.c's distlock__extend_begin_or_wake sets the waker). Here, below both
 * the watchdog and the API, so either end may call it. */
void distlock__renewal_ended(distlock__held *h)
{
    if (h->renew_waker == 0)
        return;
    uint64_t one = 1;
    ssize_t w = write(h->renew_waker - 1, &one, sizeof one);
    (void)w;  /* EAGAIN: already readable */
    h->renew_waker = 0;
}
