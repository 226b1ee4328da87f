/* state.c -- the client's shared state. Its lock, which notices a
 * fork and resets what came from the parent before anything else runs in
 * the child; the transport's pool behind that check; argument checks every
 * entry point shares.
 *
 * Layer: 4 client state */
#include <sched.h>
#include <string.h>

#include "internal.h"

/* Called with c->mu held, in a forked child: forget everything inherited. */
static void after_fork_locked(distlock_client *c)
{
    distlock__tp_after_fork(&c->tp);
    /* The parent's held records stay owned by their handles; the child
     * neither renews nor releases them. */
    c->held = NULL;
    for (size_t k = 0; k < sizeof(c->after_fork) / sizeof(c->after_fork[0]); k++)
        if (c->after_fork[k])
            c->after_fork[k](c);
    c->pid = distlock__getpid();
}

void distlock__lock(distlock_client *c)
{
    pid_t me = distlock__getpid();
    if (c->pid != me) {
        /* First call in a forked child: the mutex may have been copied while
         * another parent thread held it, so start from a fresh one. One
         * thread of the child does it; others wait for it to finish. */
        pid_t seen = atomic_load(&c->reinit_pid);
        if (seen != me && atomic_compare_exchange_strong(&c->reinit_pid, &seen, me)) {
            pthread_mutex_init(&c->mu, NULL);
            pthread_mutex_lock(&c->mu);
            after_fork_locked(c);  /* sets c->pid */
            return;
        }
        while (atomic_load(&c->pid) != me)
            sched_yield();
    }
    pthread_mutex_lock(&c->mu);
}

/* Before the transport's lock is taken in a forked child, reset it. */
static void fork_check(distlock_client *c)
{
    if (c->pid != distlock__getpid()) {
        distlock__lock(c);
        pthread_mutex_unlock(&c->mu);
    }
}

distlock__connset *distlock__checkout(distlock_client *c)
{
    fork_check(c);
    return distlock__tp_checkout(&c->tp);
}

distlock__connset *distlock__checkout_pref(distlock_client *c, uint64_t set_id)
{
    fork_check(c);
    return distlock__tp_checkout_pref(&c->tp, set_id);
}

void distlock__checkin(distlock_client *c, distlock__connset *cs)
{
    distlock__tp_checkin(&c->tp, cs);
}

int distlock__check_usable(distlock_client *c)
{
    return distlock__tp_check_usable(&c->tp);
}

int distlock__begin(distlock_client *c, distlock__connset **cs)
{
    int rc = distlock__check_usable(c);
    if (rc != DISTLOCK_OK)
        return rc;
    return (*cs = distlock__checkout(c)) != NULL ? DISTLOCK_OK : DISTLOCK_ENOMEM;
}

int distlock__check_text(const char *what, const char *s, size_t max)
{
    if (s == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "%s must not be NULL", what);
    size_t n = strnlen(s, max + 1);
    if (n == 0)
        return distlock__fail(DISTLOCK_EINVAL, "%s must not be empty", what);
    if (n > max)
        return distlock__fail(DISTLOCK_EINVAL, "%s longer than %zu bytes", what, max);
    return DISTLOCK_OK;
}

int distlock__check_key(const char *key)
{
    return distlock__check_text("key", key, DISTLOCK_KEY_MAX);
}

int distlock__check_token(const char *token)
{
    return distlock__check_text("token", token, DISTLOCK_TOKEN_MAX);
}
