/* test_waiting_threads.h -- the tests whose blocking calls of one client
 * wait on threads of their own (the turns of one key's waiters; include
 * after test_common.h): a waiting thread, one call that waits (a lock, a
 * read lock, a permit, a key set, or a call of the test's own); the
 * client's interrupt hook that counts each waiting thread's sleeps, so a
 * test sees a thread wait even when it sends nothing (it queued behind the
 * one with the turn); starting, joining and dropping what a thread kept. */
#ifndef TEST_WAITING_THREADS_H
#define TEST_WAITING_THREADS_H

#include <pthread.h>
#include <stdatomic.h>

/* The lease a waiting thread asks for unless its ttl_ms says: a file
 * whose threads keep their locks across longer waits defines a longer one
 * before including this header. */
#ifndef WAITING_THREAD_TTL_MS
#define WAITING_THREAD_TTL_MS 10000
#endif

typedef struct waiting_thread waiting_thread;

/* One blocking call on a thread of its own. The test sets the call's
 * fields; the outcome's are the thread's until done is seen set (or the
 * thread is joined). */
struct waiting_thread {
    distlock_client *c;
    const char *key;
    long ttl_ms;                /* 0: WAITING_THREAD_TTL_MS */
    long wait_ms;
    unsigned flags;
    long permits;               /* > 0: a semaphore permit of that many */
    const char *other_key;      /* set: the key set {key, other_key} */
    distlock_cancel *cancel;    /* args->cancel, or NULL */
    const char *token;          /* args->token (a caller's), or NULL */
    const char *owner;          /* args->owner (DISTLOCK_REENTRANT's), or NULL */
    /* set: the call that waits instead of the above (a test's own, e.g. a
     * user's multi); it writes detail itself on a failure */
    int (*call)(waiting_thread *w, long ttl_ms, distlock_lock **out);
    int keep;                   /* keep the lock won in lock (the test releases it) */
    atomic_int *inside, *overlaps;  /* set: a win while another is inside counts an overlap */
    /* set: what the thread does while it holds the lock won, with arg (a
     * test's own, e.g. its section's bookkeeping) */
    void (*while_held)(waiting_thread *w);
    void *arg;
    int interruptible;          /* the hook cancels it once waiting_threads_interrupt is set */
    pthread_t t;
    int rc;                     /* the call's; -99 while it waits, -100: the release failed */
    long long started_ms, done_ms;
    char detail[256];           /* its distlock_last_error() (empty on DISTLOCK_OK) */
    distlock_lock *lock;        /* keep: the lock won */
    atomic_int sleeps;          /* sleeps its wait began (the interrupt hook counts) */
    atomic_int done;
};

/* The waiting thread that runs on this thread, for the interrupt hook. */
static __thread waiting_thread *waiting_thread_self;
/* Set: the hook answers "cancel" for the threads marked interruptible, as a
 * runtime's hook does for the thread its signal's flag concerns. */
static atomic_int waiting_threads_interrupt;

/* The interrupt hook of the waiting clients: it counts the sleeps of the
 * calling thread's wait (a thread queued behind the one with the turn
 * sends no attempt that a test could watch for instead), and cancels the
 * waits of the interruptible threads once waiting_threads_interrupt is set.
 * Other threads' calls on the client (self NULL) are never interrupted. */
static inline int waiting_thread_hook(void *arg)
{
    (void)arg;
    waiting_thread *self = waiting_thread_self;
    if (self == NULL)
        return 0;
    atomic_fetch_add(&self->sleeps, 1);
    return self->interruptible && atomic_load(&waiting_threads_interrupt) != 0;
}

/* A client on uris whose waits re-check retry_min_ms..retry_max_ms apart,
 * with waiting_thread_hook as its interrupt hook. */
static inline distlock_client *new_waiting_client(const char *uris, long retry_min_ms,
                                                  long retry_max_ms)
{
    distlock_client *c = new_client(uris);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MIN_MS, retry_min_ms), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MAX_MS, retry_max_ms), DISTLOCK_OK);
    assert_rc(distlock_client_on_interrupt(c, waiting_thread_hook, NULL), DISTLOCK_OK);
    return c;
}

/* The thread: its call, then a lock won kept (keep) or released. */
static inline void *waiting_thread_main(void *p)
{
    waiting_thread *w = p;
    distlock_lock *l = NULL;
    waiting_thread_self = w;
    distlock_acquire_args args = { .size = sizeof args, .owner = w->owner, .cancel = w->cancel,
                                   .token = w->token };
    long ttl = w->ttl_ms ? w->ttl_ms : WAITING_THREAD_TTL_MS;
    w->started_ms = rh_now_ms();
    if (w->call) {
        w->rc = w->call(w, ttl, &l);
    } else if (w->other_key) {
        const char *keys[2] = { w->key, w->other_key };
        w->rc = distlock_acquire_many(w->c, keys, 2, ttl, w->wait_ms, w->flags, &args, &l);
    } else if (w->permits > 0) {
        w->rc = distlock_semaphore_acquire(w->c, w->key, w->permits, ttl, w->wait_ms, w->flags,
                                           &args, &l);
    } else {
        w->rc = distlock_acquire_with(w->c, w->key, ttl, w->wait_ms, w->flags, &args, &l);
    }
    w->done_ms = rh_now_ms();
    if (!w->call)
        snprintf(w->detail, sizeof w->detail, "%s",
                 w->rc == DISTLOCK_OK ? "" : distlock_last_error());
    if (l && w->inside) {
        if (atomic_fetch_add(w->inside, 1) != 0)
            atomic_fetch_add(w->overlaps, 1);
        atomic_fetch_sub(w->inside, 1);
    }
    if (l && w->while_held)
        w->while_held(w);
    if (l && w->keep) {
        w->lock = l;
    } else if (l) {
        if (distlock_release(l) != DISTLOCK_OK)
            w->rc = -100;
        distlock_lock_free(l);
    }
    atomic_store(&w->done, 1);
    return NULL;
}

/* Start w's thread with attr (NULL: the defaults). */
static inline void waiting_thread_start_with(waiting_thread *w, const pthread_attr_t *attr)
{
    atomic_init(&w->done, 0);
    atomic_init(&w->sleeps, 0);
    w->rc = -99;
    w->lock = NULL;
    assert_int_equal(pthread_create(&w->t, attr, waiting_thread_main, w), 0);
}

static inline void waiting_thread_start(waiting_thread *w)
{
    waiting_thread_start_with(w, NULL);
}

/* Start w's thread on a 256 KiB stack: the tests that start hundreds or a
 * thousand waiting threads would reserve 8 MiB each by default. */
static inline void waiting_thread_start_small_stack(waiting_thread *w)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    waiting_thread_start_with(w, &attr);
    pthread_attr_destroy(&attr);
}

/* w is in its wait: it slept (its first attempt was refused, or it queued
 * behind the thread with the turn without one) and has not returned. */
static inline int waiting_thread_sleeping(waiting_thread *w)
{
    return atomic_load(&w->sleeps) >= 1 && !atomic_load(&w->done);
}

/* Every one of w[0..n) is in its wait. */
static inline int waiting_threads_all_sleeping(waiting_thread *w, int n)
{
    for (int i = 0; i < n; i++)
        if (!waiting_thread_sleeping(&w[i]))
            return 0;
    return 1;
}

/* Start w and return once it is in its wait (observed: a call that joins
 * the turns sends nothing first, so there is no attempt to wait for). */
static inline void waiting_thread_start_sleeping(waiting_thread *w)
{
    waiting_thread_start(w);
    assert_true(RH_WAIT_UNTIL(waiting_thread_sleeping(w), 10000));
}

/* Join w's thread; its outcome printed (named name) when it is not
 * DISTLOCK_OK. */
static inline void waiting_thread_join(waiting_thread *w, const char *name)
{
    pthread_join(w->t, NULL);
    if (w->rc != DISTLOCK_OK)
        printf("# %s: %d (%s) after %lld ms\n", name, w->rc, w->detail,
               w->done_ms - w->started_ms);
}

/* Release and free the lock w kept, if any. */
static inline void waiting_thread_drop_lock(waiting_thread *w)
{
    if (w->lock) {
        assert_rc(distlock_release(w->lock), DISTLOCK_OK);
        distlock_lock_free(w->lock);
        w->lock = NULL;
    }
}

/* A witness of a client's release messages: a thread of that client
 * waiting for another key (held by another client), on the same
 * subscription connection. A message published on its channel after
 * another reaches the client after that one: once the witness woke again,
 * the message before it has been handled. Needs test_common.h. */
typedef struct release_witness {
    waiting_thread w;
    distlock_lock *held;  /* its key, held by the other client */
    int sleeps;           /* its sleeps when the last message was sent */
} release_witness;

/* Hold key with holder and start x waiting for it on c, subscribed on
 * node 0 of rc and asleep after its look. */
static inline void release_witness_start(release_witness *x, rh_cluster *rc,
                                         distlock_client *holder, distlock_client *c,
                                         const char *key)
{
    x->held = NULL;
    assert_rc(distlock_acquire(holder, key, 60000, 0, 0, &x->held), DISTLOCK_OK);
    x->w = (waiting_thread){ .c = c, .key = key, .wait_ms = 40000 };
    waiting_thread_start(&x->w);
    assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, key) == 1 &&
                              atomic_load(&x->w.sleeps) >= 2, 10000));
}

/* Before the messages the witness is to follow are published. */
static inline void release_witness_mark(release_witness *x)
{
    x->sleeps = atomic_load(&x->w.sleeps);
}

/* After its own message was published: returns once it woke. */
static inline void release_witness_woken(release_witness *x)
{
    assert_true(RH_WAIT_UNTIL(atomic_load(&x->w.sleeps) > x->sleeps, 10000));
}

/* Its key released: the witness takes it and ends. */
static inline void release_witness_stop(release_witness *x)
{
    assert_rc(distlock_release(x->held), DISTLOCK_OK);
    waiting_thread_join(&x->w, "witness");
    distlock_lock_free(x->held);
    x->held = NULL;
}

#endif
