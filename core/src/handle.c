/* handle.c -- distlock_lock handles: release, extend, reentrancy counted
 * on the client side, the accessors; and the rules every acquire follows
 * (checks, the record, the request, re-check times, deadlines, the details
 * of a wait's ends), which the blocking acquires (acquire_api.c) and the
 * multi (multi.c, the one driver of a wait) share.
 *
 * A handle points at a `held` record: one ownership (key, token) of this
 * client. Reentrant acquisitions by the same owner share one record and
 * count; only the last release reaches Redis, so the key stays a plain
 * token string on the wire.
 *
 * Layer: 7 API */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define KNOWN_FLAGS (DISTLOCK_FENCING | DISTLOCK_AUTO_RENEW | DISTLOCK_REENTRANT | DISTLOCK_FAIR | \
                     DISTLOCK_SHARED)

static distlock_lock *new_handle(distlock__held *h)
{
    distlock_lock *l = distlock__zalloc(sizeof(*l));
    if (l)
        l->h = h;
    return l;
}

/* How long a fair waiter's queue entry lives without being refreshed: a
 * few re-check intervals, so a dead waiter leaves the queue quickly. */
long distlock__queue_ttl(const distlock_client *c)
{
    return 3 * c->retry_max_ms + 2 * c->tp.command_timeout_ms;
}

/* Full-jitter backoff between ms/2 and ms: waiters spread their re-checks
 * instead of retrying together. */
static uint64_t jitter_us(long ms)
{
    uint64_t span = (uint64_t)ms * 1000u;
    return span / 2 + distlock__random_u64() % (span / 2 + 1);
}

/* A waiting acquire's sleep until its next re-check, for a lock's and a
 * set's waiters alike: woken by a release when subscribed; else (locks that
 * just expire, or are held by implementations that publish nothing) after
 * the jittered backoff, at most retry_max apart and never later than the
 * holder's remaining TTL (holder_pttl ms, 0: unknown) or the deadline. The
 * backoff doubles up to retry_max. Returns as distlock__waiter_wait(). */
uint64_t distlock__recheck_at(distlock_client *c, long holder_pttl, uint64_t deadline,
                              long *backoff)
{
    uint64_t now = distlock__now_us();
    uint64_t next = now + jitter_us(*backoff);
    if (holder_pttl > 0 && now + (uint64_t)holder_pttl * 1000u + DISTLOCK__PAST_LEASE_US < next)
        next = now + (uint64_t)holder_pttl * 1000u + DISTLOCK__PAST_LEASE_US;
    if (next > deadline)
        next = deadline;
    *backoff = *backoff * 2 > c->retry_max_ms ? c->retry_max_ms : *backoff * 2;
    return next;
}

int distlock__wait_recheck(distlock_client *c, distlock__waiter *w, long holder_pttl,
                           uint64_t deadline, int subscribed, long *backoff)
{
    return distlock__waiter_wait(c, w, distlock__recheck_at(c, holder_pttl, deadline, backoff),
                                 subscribed);
}

/* The fair waiters' pause out of every queue when the queues disagree on
 * the order (acquire.c, real_split): random, so they rejoin in one order. */
uint64_t distlock__split_pause_at(distlock_client *c)
{
    return distlock__now_us() + jitter_us(4 * c->retry_min_ms + 2);
}

uint64_t distlock__wait_deadline(long wait_ms, uint64_t now)
{
    if (wait_ms != DISTLOCK_WAIT_FOREVER && (uint64_t)wait_ms < (UINT64_MAX - now) / 1000u)
        return now + (uint64_t)wait_ms * 1000u;
    return UINT64_MAX;
}

int distlock__attempt_ends_wait(int rc, int *late)
{
    if (rc == DISTLOCK_ETIMEDOUT ? (*late)++ > 0 : rc != DISTLOCK_NOTACQUIRED)
        return 1;
    if (rc == DISTLOCK_NOTACQUIRED)
        *late = 0;
    return 0;
}

int distlock__acq_req_init(distlock_client *c, distlock__held *h, int given, long wait_ms,
                           distlock__acq_req *rq)
{
    unsigned flags = h->flags | (given ? DISTLOCK_STRICT : 0);
    int fair = (flags & DISTLOCK_FAIR) != 0;
    memset(rq, 0, sizeof(*rq));
    rq->key = h->key;
    rq->token = h->token;
    rq->ttl_ms = h->ttl_ms;
    rq->flags = flags;
    rq->fair = fair;
    rq->queue_ttl_ms = wait_ms ? distlock__queue_ttl(c) : 0;
    rq->kind = h->kind;
    rq->permits = h->permits;
    rq->quorum = h->quorum;
    if (!wait_ms || fair || h->kind != DISTLOCK__LOCK)
        return DISTLOCK_OK;
    /* A waiting writer's name in the registry: one per wait, kept for its
     * enter, refreshes and leaves. A generated token is already one per
     * wait, but each attempt of a multi's wait rewrites it in place: its
     * first value is kept. A caller's token may be another wait's too (one
     * owner on several threads, processes or hosts): such a wait gets a
     * fresh random name, so that two of them are two entries and one's
     * leave does not take the other's away (random, not the token plus a
     * local counter: the other waits may be in other processes). */
    int rc = given ? distlock_token_generate(h->writer, sizeof(h->writer))
                   : (memcpy(h->writer, h->token, sizeof(h->writer)), DISTLOCK_OK);
    if (rc == DISTLOCK_OK)
        rq->writer = h->writer;
    return rc;
}

int distlock__args_token(const distlock_acquire_args *args, const char **token)
{
    *token = NULL;
    if (args == NULL)
        return DISTLOCK_OK;
    /* Growth rule: a caller built against a later header may pass a bigger
     * struct (its added fields are not read here); one built against an
     * earlier header passes a smaller one, whose missing fields are NULL;
     * one smaller than the first layout is no layout at all. */
    if (args->size < offsetof(distlock_acquire_args, token))
        return distlock__fail(DISTLOCK_EINVAL, "args->size %zu is smaller than "
                              "sizeof(distlock_acquire_args) (%zu): set it to sizeof",
                              args->size, sizeof(distlock_acquire_args));
    if (args->size >= offsetof(distlock_acquire_args, token) + sizeof(args->token))
        *token = args->token;
    return DISTLOCK_OK;
}

/* The detail of a cancelled wait (the status is returned as well). */
int distlock__wait_cancelled(const char *key, uint64_t t0_us, const char *what)
{
    long ms = (long)((distlock__now_us() - t0_us) / 1000u);
    return distlock__fail(DISTLOCK_ECANCELED, "waiting for '%s' cancelled after %ld ms%s", key,
                          ms, what);
}

int distlock__first_cancelled(const char *key, int won)
{
    return distlock__fail(DISTLOCK_ECANCELED, "acquiring '%s' cancelled while its first "
                          "attempt was out%s", key, won ? "; the lock won meanwhile was released"
                                                        : "");
}

/* A grant is handed out only while its lease runs. A waiting writer's win
 * is followed by its leave of the registry of waiting writers; that leave
 * can take up to a command timeout (a slow or stalled node), longer than a
 * short ttl. So the grant is judged once more after that cleanup: one whose
 * validity ended meanwhile is a late grant (acquire.c judges one at the
 * attempt's end the same way): ETIMEDOUT with its detail, the caller
 * releases it, and a wait tries once more (distlock__attempt_ends_wait). */
int distlock__grant_outlived(const distlock__acq_req *rq, const distlock__attempt *att)
{
    if (distlock__now_us() < att->valid_until_us)
        return DISTLOCK_OK;
    return distlock__fail(DISTLOCK_ETIMEDOUT, "'%s' acquired but its %ld ms ttl was used up "
                          "before the acquire's last request (leaving the registry of waiting "
                          "writers) came back; it was released", rq->key, rq->ttl_ms);
}

int distlock__wait_expired(const char *key, long wait_ms)
{
    return distlock__fail(DISTLOCK_NOTACQUIRED, "'%s' still held by another owner after %ld ms",
                          key, wait_ms);
}

/* Extend the lease of h to ttl_ms on a quorum (compare-and-PEXPIRE), in
 * step with the watchdog: never both on the wire for one record (an older
 * renewal landing after a newer extend could restore the older TTL on the
 * servers, or in valid_until). On success the lease runs from this extend,
 * and renewal is scheduled from the new TTL. */
int distlock__extend_begin(distlock__held *h, long ttl_ms, int wait)
{
    distlock_client *c = h->client;
    pthread_mutex_lock(&c->mu);
    while (h->renewing) {
        if (!wait) {
            pthread_mutex_unlock(&c->mu);
            return 1;
        }
        if (h->renewing_multi && pthread_equal(h->renewer, pthread_self())) {
            /* a multi's extend is on the wire and only this thread's loop
             * drives it: waiting here would never end */
            pthread_mutex_unlock(&c->mu);
            distlock__fail(DISTLOCK_EINVAL, "'%s': an extend of this lock through a multi "
                           "(distlock_multi_extend) is on the wire, driven by this thread's "
                           "loop: wait for that op instead of calling distlock_extend()", h->key);
            return -1;
        }
        pthread_cond_wait(&c->wd_cond, &c->mu);
    }
    h->renewing = 1;
    h->renewing_multi = !wait;  /* the multi's (the only caller that does not wait) */
    if (!wait)
        h->renewer = pthread_self();
    h->inflight_until_us = distlock__valid_until(&c->q, distlock__now_us(), ttl_ms);
    h->gen++;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

int distlock__extend_begin_or_wake(distlock__held *h, long ttl_ms, int wake_fd)
{
    distlock_client *c = h->client;
    pthread_mutex_lock(&c->mu);
    if (h->renewing) {
        /* set under the lock the renewal's end takes: that end sees it */
        h->renew_waker = wake_fd + 1;
        pthread_mutex_unlock(&c->mu);
        return 1;
    }
    pthread_mutex_unlock(&c->mu);
    return distlock__extend_begin(h, ttl_ms, 0);
}

void distlock__renewal_unwake(distlock__held *h, int wake_fd)
{
    distlock_client *c = h->client;
    pthread_mutex_lock(&c->mu);
    if (h->renew_waker == wake_fd + 1)
        h->renew_waker = 0;
    pthread_mutex_unlock(&c->mu);
}

int distlock__extend_end(distlock__held *h, long ttl_ms, int rc, uint64_t until)
{
    distlock_client *c = h->client;
    distlock__stats_inc(&c->stats, rc == DISTLOCK_OK ? DISTLOCK__ST_EXTENDED
                                                     : DISTLOCK__ST_EXTEND_FAILED);

    uint64_t done = distlock__now_us();
    pthread_mutex_lock(&c->mu);
    h->renewing = 0;
    h->renewing_multi = 0;
    distlock__renewal_ended(h);
    if (rc == DISTLOCK_OK && atomic_load(&h->lost)) {
        /* Its validity ended while this extend was out, and the owner was
         * told it is lost (watchdog.c, the lease clock): a loss is final. */
        rc = distlock__fail(DISTLOCK_ENOTOWNER, "'%s' was found lost (its validity ended "
                            "before this extend was confirmed)", h->key);
    } else if (rc == DISTLOCK_OK) {
        atomic_store(&h->valid_until_us, until);
        h->ttl_ms = ttl_ms;
        h->retry_ms = 0;
        h->renew_at_us = distlock__renew_at(&c->q, until, done, ttl_ms);
    } else if (rc == DISTLOCK_ENOTOWNER) {
        distlock__mark_lost(h, DISTLOCK__LOST_GONE);
    } else {
        /* Not known either way: what the servers hold may now be the
         * shorter of the two TTLs, so claim no more than that. */
        uint64_t cap = distlock__valid_until(&c->q, distlock__now_us(), ttl_ms);
        if (cap < atomic_load(&h->valid_until_us))
            atomic_store(&h->valid_until_us, cap);
    }
    pthread_cond_broadcast(&c->wd_cond);  /* the watchdog reschedules; waiters go on */
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* Extend the lease of h to ttl_ms on a quorum (compare-and-PEXPIRE), in
 * step with the watchdog: never both on the wire for one record (an older
 * renewal landing after a newer extend could restore the older TTL on the
 * servers, or in valid_until). On success the lease runs from this extend,
 * and renewal is scheduled from the new TTL. */
static int held_extend(distlock__held *h, long ttl_ms)
{
    uint64_t until = 0;
    if (distlock__extend_begin(h, ttl_ms, 1) < 0)
        return DISTLOCK_EINVAL;  /* would wait for itself (detail set) */
    int rc = distlock__held_extend(h->client, h, ttl_ms, &until);
    return distlock__extend_end(h, ttl_ms, rc, until);
}

/* DISTLOCK_REENTRANT: the same owner acquiring a key it holds gets another
 * counted handle of the same ownership, once Redis confirms the lease is
 * still ours (the extend to the new ttl is that check). Returns 1 when it
 * found no such ownership. The call's own cancel, fired while the extend
 * was out, ends it as it ends an attempt that won: no new handle, so the
 * ownership keeps the count it had. */
int distlock__reacquire(distlock_client *c, const char *key, long ttl_ms, unsigned flags,
                        const char *owner, distlock_cancel *cancel, distlock_lock **out)
{
    distlock__held *h = NULL;
    distlock__lock(c);
    for (distlock__held *x = c->held; x; x = x->next)
        if (x->owner && !x->released && x->count > 0 && strcmp(x->key, key) == 0 &&
            strcmp(x->owner, owner) == 0) {
            h = x;
            break;
        }
    if (h == NULL) {
        pthread_mutex_unlock(&c->mu);
        return 1;
    }
    if ((flags & DISTLOCK_FENCING) && !(h->flags & DISTLOCK_FENCING)) {
        pthread_mutex_unlock(&c->mu);
        return distlock__fail(DISTLOCK_EINVAL,
                              "'%s' is already held by this owner without DISTLOCK_FENCING: a "
                              "reentrant acquire cannot add a fence to it", key);
    }
    if (atomic_load(&h->lost)) {
        pthread_mutex_unlock(&c->mu);
        return distlock__fail(DISTLOCK_ENOTOWNER,
                              "'%s': this owner's earlier acquisition was lost", key);
    }
    h->refs++;  /* alive while we extend unlocked */
    pthread_mutex_unlock(&c->mu);

    int rc = held_extend(h, ttl_ms);
    distlock_lock *l = NULL;
    pthread_mutex_lock(&c->mu);
    if (rc == DISTLOCK_OK && distlock__cancel_fired(cancel)) {
        /* before the released case below: a cancelled call takes no
         * abandoned ownership back, and starts no fresh acquire */
        distlock__held_unref_locked(c, h);
        pthread_mutex_unlock(&c->mu);
        return distlock__fail(DISTLOCK_ECANCELED, "re-acquiring '%s' cancelled while its "
                              "extend was out; no new handle, the ownership keeps its count",
                              key);
    }
    if (rc == DISTLOCK_OK && h->released) {
        /* The last other handle went while the extend was out. Released:
         * its compare-and-delete is on its way, so this ownership is over;
         * acquire afresh (the caller goes on as if none was found).
         * Abandoned: nothing was sent and the extend just confirmed the key
         * holds our token, so this acquire takes the ownership back, renewed
         * like any other (the watchdog skips released records only). */
        if (!h->abandoned) {
            distlock__held_unref_locked(c, h);
            pthread_mutex_unlock(&c->mu);
            return 1;
        }
        h->released = 0;
        /* renewable again: the background threads (which skipped it after
         * held_extend's broadcast) must look at it anew */
        pthread_cond_broadcast(&c->wd_cond);
    }
    if (rc == DISTLOCK_OK && (l = new_handle(h)) == NULL)
        rc = distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    if (rc == DISTLOCK_OK) {
        h->count++;
        if ((flags & DISTLOCK_AUTO_RENEW) && !(h->flags & DISTLOCK_AUTO_RENEW)) {
            h->flags |= DISTLOCK_AUTO_RENEW;
            if (distlock__watchdog_start(c) == DISTLOCK_OK)
                pthread_cond_broadcast(&c->wd_cond);
        }
        pthread_mutex_unlock(&c->mu);
        *out = l;
        return DISTLOCK_OK;
    }
    distlock__held_unref_locked(c, h);
    pthread_mutex_unlock(&c->mu);
    if (rc == DISTLOCK_ENOTOWNER) {
        char *detail = distlock__error_copy();
        distlock__fail(rc, "'%s': this owner's earlier acquisition is no longer valid (%s)", key,
                       detail ? detail : "");
        free(detail);
    }
    return rc;
}

int distlock__acquire_check(distlock_client *c, const char *key, long permits, long ttl_ms,
                            long wait_ms, unsigned flags, const distlock_acquire_args *args,
                            distlock_lock **out, const char **token)
{
    int rc;
    distlock__clear_error();
    *token = NULL;
    if (out)
        *out = NULL;
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    if (out == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "out must not be NULL");
    if ((rc = distlock__args_token(args, token)) != DISTLOCK_OK)
        return rc;
    const char *owner = args ? args->owner : NULL;
    distlock_cancel *cancel = args ? args->cancel : NULL;
    if ((rc = distlock__check_key(key)) || (rc = distlock__check_ttl(&c->q, ttl_ms)))
        return rc;
    if (wait_ms < 0 && wait_ms != DISTLOCK_WAIT_FOREVER)
        return distlock__fail(DISTLOCK_EINVAL, "wait_ms %ld: use >= 0 or DISTLOCK_WAIT_FOREVER",
                              wait_ms);
    if (flags & ~KNOWN_FLAGS)
        return distlock__fail(DISTLOCK_EINVAL, "unknown flags 0x%x", flags & ~KNOWN_FLAGS);
    if ((flags & DISTLOCK_SHARED) &&
        (flags & (DISTLOCK_FENCING | DISTLOCK_FAIR | DISTLOCK_REENTRANT)))
        return distlock__fail(DISTLOCK_EINVAL, "DISTLOCK_SHARED (a read lock) does not take "
                              "DISTLOCK_FENCING, DISTLOCK_FAIR or DISTLOCK_REENTRANT");
    if (permits > 0 && (flags & ~(unsigned)DISTLOCK_AUTO_RENEW))
        return distlock__fail(DISTLOCK_EINVAL, "flags 0x%x: a semaphore permit takes "
                              "DISTLOCK_AUTO_RENEW only", flags);
    if (permits > 0 && owner)
        return distlock__fail(DISTLOCK_EINVAL, "a semaphore permit takes no owner id");
    if (owner && (owner[0] == '\0' || strlen(owner) > 256))
        return distlock__fail(DISTLOCK_EINVAL, "owner id must be 1..256 bytes");
    if (owner && !(flags & DISTLOCK_REENTRANT))
        return distlock__fail(DISTLOCK_EINVAL, "an owner id needs DISTLOCK_REENTRANT");
    /* A caller's token names one plain lock: read locks and permits are
     * members of a set, each with a token of its own, and a reentrant
     * ownership is found by its owner id, not by its token. */
    if (*token && (permits > 0 || (flags & (DISTLOCK_SHARED | DISTLOCK_REENTRANT))))
        return distlock__fail(DISTLOCK_EINVAL, "args->token is for a plain lock: %s takes "
                              "no caller's token", permits > 0 ? "a semaphore permit"
                              : (flags & DISTLOCK_SHARED) ? "DISTLOCK_SHARED (a read lock)"
                              : "DISTLOCK_REENTRANT");
    if (*token && (rc = distlock__check_token(*token)) != DISTLOCK_OK)
        return rc;
    /* Sticky: a cancel fired before the call ends it before anything is
     * sent (a reentrant re-acquire's extend included). */
    if (distlock__cancel_fired(cancel))
        return distlock__fail(DISTLOCK_ECANCELED, "acquiring '%s' cancelled before it started; "
                              "nothing was sent", key);
    return DISTLOCK_OK;
}

/* The token lives in the record from the start (a generated one is
 * rewritten in place by each attempt of a plain waiter): no copy of it on
 * the caller's frame, which is on the deepest path of the stack budget. The
 * handle is allocated before anything is sent, so that a lock won is never
 * lost to an out-of-memory afterwards. */
distlock__held *distlock__held_new(distlock_client *c, const char *key, const char *token,
                                   long permits, long ttl_ms, unsigned flags, const char *owner,
                                   int owner_thread, distlock_lock **l, int *rc)
{
    distlock__held *h = distlock__zalloc(sizeof(*h));
    *l = distlock__zalloc(sizeof(**l));
    if (h == NULL || *l == NULL || (h->key = strdup(key)) == NULL ||
        (h->token = token ? strdup(token) : malloc(33)) == NULL ||
        ((flags & DISTLOCK_REENTRANT) && (h->owner = strdup(owner)) == NULL)) {
        if (h)
            distlock__held_free(h);
        free(*l);
        *l = NULL;
        *rc = distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        return NULL;
    }
    if (!token && (*rc = distlock_token_generate(h->token, 33)) != DISTLOCK_OK) {
        distlock__held_free(h);
        free(*l);
        *l = NULL;
        return NULL;
    }
    h->client = c;
    h->ttl_ms = ttl_ms;
    h->flags = flags;
    h->fence = -1;
    h->kind = permits > 0 ? DISTLOCK__PERMIT
            : (flags & DISTLOCK_SHARED) ? DISTLOCK__READ : DISTLOCK__LOCK;
    h->permits = permits;
    h->quorum = distlock__lease_quorum(&c->q, permits);
    h->pid = distlock__getpid();
    h->count = 1;
    h->owner_thread = owner_thread;
    if (h->owner_thread)
        h->thread = pthread_self();
    *rc = DISTLOCK_OK;
    return h;
}

int distlock__held_register(distlock_client *c, distlock__held *h, distlock_lock *l,
                            const distlock__attempt *att, distlock_lock **out)
{
    int rc;
    uint64_t until = att->valid_until_us;
    h->fence = att->fence;
    h->set_pref = att->set_id;
    h->maybe = att->maybe;
    atomic_store(&h->valid_until_us, until);
    h->acquired_us = att->t1_us;
    l->h = h;
    pthread_mutex_lock(&c->mu);
    h->next = c->held;
    c->held = h;
    h->refs = 1;
    if (h->flags & DISTLOCK_AUTO_RENEW) {
        h->renew_at_us = distlock__renew_at(&c->q, until, att->t1_us, h->ttl_ms);
        if ((rc = distlock__watchdog_start(c)) != DISTLOCK_OK) {
            pthread_mutex_unlock(&c->mu);
            char *detail = distlock__error_copy();
            distlock_lock_free(l);
            distlock__fail(rc, "%s", detail ? detail : "");
            free(detail);
            return rc;
        }
        pthread_cond_broadcast(&c->wd_cond);
    }
    pthread_mutex_unlock(&c->mu);
    *out = l;
    return DISTLOCK_OK;
}

/* The handle can act here: its client lives and this process owns it. */
static int usable(const distlock_lock *l, const char *what)
{
    if (l == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "lock must not be NULL");
    if (l->h->client == NULL)
        return distlock__fail(DISTLOCK_ECLOSED, "%s: its client was freed", what);
    if (l->h->pid != distlock__getpid())
        return distlock__fail(DISTLOCK_ECLOSED,
                              "%s: lock of process %d cannot be used in forked child %d", what,
                              (int)l->h->pid, (int)distlock__getpid());
    return DISTLOCK_OK;
}

int distlock__release_begin(distlock_lock *l, int check_thread, int *retry, uint64_t *until)
{
    int rc;
    if ((rc = usable(l, "release")) != DISTLOCK_OK)
        return rc;
    distlock__held *h = l->h;
    distlock_client *c = h->client;
    if (l->released && !l->resend)
        return distlock__fail(DISTLOCK_ENOTOWNER, "'%s' was already released through this handle",
                              h->key);
    if (check_thread && h->owner_thread && !pthread_equal(h->thread, pthread_self()))
        return distlock__fail(DISTLOCK_ENOTOWNER,
                              "'%s' is a reentrant lock of another thread: only its owner "
                              "releases it", h->key);
    pthread_mutex_lock(&c->mu);
    if (!l->released) {
        l->released = 1;
        if (--h->count > 0) {  /* reentrant: an outer acquisition still holds it */
            pthread_mutex_unlock(&c->mu);
            return 1;
        }
        h->released = 1;       /* the watchdog stops renewing it */
        if (h->abandoned) {
            /* A handle of this ownership was abandoned with the promise that
             * the key keeps its token until its TTL: the last release gives up
             * its count and the renewal, and sends nothing. */
            pthread_mutex_unlock(&c->mu);
            return 1;
        }
    }
    /* Else a retry of a release the servers gave no verdict on: the count
     * and the renewal were given up by the first try; send it again. */
    *retry = l->resend;
    *until = atomic_load(&h->lost) ? 0 : atomic_load(&h->valid_until_us);
    pthread_mutex_unlock(&c->mu);
    return DISTLOCK_OK;
}

int distlock__release_end(distlock_lock *l, int rc, int retry, uint64_t sent)
{
    distlock__held *h = l->h;
    distlock_client *c = h->client;
    /* Only "deleted" and "not ours" are verdicts; after anything else (a
     * refusal, no quorum, no reply) the key may still hold our token, so
     * the handle stays releasable rather than answer "already released". */
    l->resend = rc != DISTLOCK_OK && rc != DISTLOCK_ENOTOWNER;
    /* "Not ours" is a loss found (as by an extend): distlock_lock_lost()
     * and the lost fd show it, with no callback (the caller has the status). */
    if (rc == DISTLOCK_ENOTOWNER)
        distlock__mark_lost(h, DISTLOCK__LOST_GONE);
    if (distlock__stats_on(&c->stats)) {
        distlock__stats_inc_on(&c->stats, rc == DISTLOCK_OK ? DISTLOCK__ST_RELEASED
                                                            : DISTLOCK__ST_RELEASE_FAILED);
        if (!retry && h->acquired_us != 0 && sent > h->acquired_us)
            distlock__stats_observe_on(&c->stats, DISTLOCK__H_HOLD, sent - h->acquired_us);
    }
    return rc;
}

static int release_handle(distlock_lock *l, int check_thread)
{
    int retry = 0;
    uint64_t until = 0;
    int rc = distlock__release_begin(l, check_thread, &retry, &until);
    if (rc != DISTLOCK_OK)
        return rc == 1 ? DISTLOCK_OK : rc;
    uint64_t sent = 0;  /* the hold ends when the release goes out */
    rc = distlock__held_release(l->h->client, l->h, until, retry, &sent);
    return distlock__release_end(l, rc, retry, sent);
}

int distlock_release(distlock_lock *l)
{
    distlock__clear_error();
    return release_handle(l, 1);
}

void distlock_lock_free(distlock_lock *l)
{
    if (l == NULL)
        return;
    distlock__held *h = l->h;
    distlock_client *c = h->client;
    if (h->restored && (!l->released || l->resend)) {
        /* A restored handle may name another process's lock (its token came
         * from elsewhere): dropping it sends nothing, as an abandon; only an
         * explicit distlock_release() deletes (a retry of a failed one
         * included). The abandon frees the handle through here again. */
        distlock_lock_abandon(l);
        return;
    }
    if (c && h->pid != distlock__getpid()) {
        /* In a forked child: let the client forget its parent's state
         * (including its list of held records) before we free ours. */
        distlock__lock(c);
        pthread_mutex_unlock(&c->mu);
    }
    if ((!l->released || l->resend) && c && h->pid == distlock__getpid())
        (void)release_handle(l, 0);
    if (c && h->pid == distlock__getpid()) {
        pthread_mutex_lock(&c->mu);
        /* The lost callback must never get a freed handle: unregister it,
         * and wait for a call already under way (unless this is it). */
        if (h->lost_handle == l) {
            h->lost_fn = NULL;
            h->lost_handle = NULL;
        }
        /* Only the callback's own thread may go on: another lock's callback
         * on the other background thread must wait like anyone else. */
        while (h->cb_running && !pthread_equal(h->cb_thread, pthread_self()))
            pthread_cond_wait(&c->wd_cond, &c->mu);
        distlock__held_unref_locked(c, h);
        pthread_mutex_unlock(&c->mu);
    } else if (--h->refs <= 0) {
        /* Client freed (it unlinked us) or inherited across fork: the
         * record is only memory here. */
        distlock__held_free(h);
    }
    free(l);
}

/* A record of an ownership this client did not acquire: validity 0 (the
 * client vouches for nothing until an extend succeeds), every node may hold
 * it (`maybe`: a release goes to all), no renewal. Its own record, never
 * another handle's: an abandoned record of the same token does not stop
 * its release (the caller asked for this handle with the token). Linked in
 * the client's list (distlock_client_free() marks it ended) but `restored`:
 * neither distlock_lock_free() nor distlock_client_free() deletes its key,
 * which may be another process's lock still in use; only an explicit
 * distlock_release() does. */
int distlock_lock_restore(distlock_client *c, const char *key, const char *token,
                          distlock_lock **out)
{
    int rc;
    distlock__clear_error();
    if (out)
        *out = NULL;
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    if (out == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "out must not be NULL");
    if ((rc = distlock__check_key(key)) || (rc = distlock__check_token(token)))
        return rc;
    distlock__held *h = distlock__zalloc(sizeof(*h));
    distlock_lock *l = distlock__zalloc(sizeof(*l));
    if (h == NULL || l == NULL || (h->key = strdup(key)) == NULL ||
        (h->token = strdup(token)) == NULL) {
        if (h)
            distlock__held_free(h);
        free(l);
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    }
    h->client = c;
    h->fence = -1;
    h->kind = DISTLOCK__LOCK;
    h->quorum = distlock__lease_quorum(&c->q, 0);
    h->maybe = ~0ull;
    h->pid = distlock__getpid();
    h->count = 1;
    h->refs = 1;
    h->restored = 1;
    l->h = h;
    distlock__lock(c);
    h->next = c->held;
    c->held = h;
    pthread_mutex_unlock(&c->mu);
    *out = l;
    return DISTLOCK_OK;
}

/* As distlock_lock_free() with the release left out: the handle's count is
 * given up, and the last one marks the record released, which is what stops
 * the watchdog (the lease then ends by its TTL on the servers). The record
 * is marked abandoned, so no other handle of the ownership deletes the key
 * (release_handle). */
void distlock_lock_abandon(distlock_lock *l)
{
    if (l == NULL)
        return;
    distlock__held *h = l->h;
    distlock_client *c = h->client;
    if (!l->released && c && h->pid == distlock__getpid()) {
        pthread_mutex_lock(&c->mu);
        h->abandoned = 1;
        if (--h->count <= 0)
            h->released = 1;
        pthread_mutex_unlock(&c->mu);
    }
    l->released = 1;
    l->resend = 0;         /* a failed release is not retried: nothing is sent */
    distlock_lock_free(l);
}

int distlock__extend_check(const distlock_lock *l, long ttl_ms)
{
    int rc;
    if ((rc = usable(l, "extend")) || (rc = distlock__check_ttl(&l->h->client->q, ttl_ms)))
        return rc;
    if (l->released || l->h->released)
        return distlock__fail(DISTLOCK_ENOTOWNER, "'%s' was released", l->h->key);
    return DISTLOCK_OK;
}

int distlock_extend(distlock_lock *l, long ttl_ms)
{
    int rc;
    distlock__clear_error();
    if ((rc = distlock__extend_check(l, ttl_ms)) != DISTLOCK_OK)
        return rc;
    return held_extend(l->h, ttl_ms);
}

long distlock_lock_validity_ms(const distlock_lock *l)
{
    /* No lock taken: this is safe in a forked child whatever state the
     * parent's threads left the client's mutex in. */
    if (l == NULL || l->released || l->h->released || atomic_load(&l->h->lost))
        return 0;
    uint64_t until = atomic_load(&l->h->valid_until_us);
    uint64_t now = distlock__now_us();
    return until > now ? (long)((until - now) / 1000) : 0;
}

const char *distlock_lock_key(const distlock_lock *l)
{
    return l ? l->h->key : NULL;
}

const char *distlock_lock_token(const distlock_lock *l)
{
    return l ? l->h->token : NULL;
}

int64_t distlock_lock_fence(const distlock_lock *l)
{
    return l ? l->h->fence : -1;
}

int distlock_lock_lost(const distlock_lock *l)
{
    int why = l ? atomic_load(&l->h->lost) : 0;
    if (why == DISTLOCK__LOST_UNCONFIRMED)
        distlock__fail(DISTLOCK_ENOTOWNER, "it could not be renewed before its validity ended "
                       "(servers not replying): nothing vouches for it any more, though a "
                       "server may still hold it until its TTL runs out");
    else if (why)
        distlock__fail(DISTLOCK_ENOTOWNER, "it was deleted, expired or taken over (the servers "
                       "no longer hold our token)");
    return why ? 1 : 0;
}

int distlock_lock_on_lost(distlock_lock *l, distlock_lost_fn fn, void *arg)
{
    int rc;
    distlock__clear_error();
    if ((rc = usable(l, "on_lost")) != DISTLOCK_OK)
        return rc;
    pthread_mutex_lock(&l->h->client->mu);
    l->h->lost_fn = fn;
    l->h->lost_arg = arg;
    l->h->lost_handle = fn ? l : NULL;
    pthread_mutex_unlock(&l->h->client->mu);
    return DISTLOCK_OK;
}
