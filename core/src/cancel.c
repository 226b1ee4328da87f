/* cancel.c -- cancelling blocking calls, and the one way the library sleeps.
 *
 * distlock_client_cancel() must work from a signal handler, so it takes no
 * lock and touches no list: it bumps the client's cancel generation (an
 * atomic) and writes its eventfd. Every blocking call notes the generation
 * when it starts; one that sees it changed is cancelled.
 *
 * A waiting call sleeps in poll() on two descriptors: its own eventfd (the
 * subscriber thread writes it on a release, wait.c) and the client's cancel
 * eventfd. The cancel eventfd is shared by every sleeper, so the first to see
 * it readable drains it, under c->mu, and passes the news on: it wakes every
 * registered sleeper whose call started before the current generation. No
 * cancel is missed: a sleeper registers (under c->mu) and then checks the
 * generation before each sleep; the canceller bumps the generation before
 * it writes, and the drain happens after the write, under c->mu, where it
 * finds every sleeper registered by then.
 *
 * A non-blocking multi (multi.c) registers a sleeper per operation, all on
 * the multi's one eventfd (not their own): a wake sets the sleeper's `woken`
 * flag, then writes that eventfd, so the multi finds which of its
 * operations to look at; the multi polls the cancel eventfd too and passes
 * a cancel on as a sleeper does.
 *
 * A call's own cancel (distlock_cancel, distlock_acquire_with) is simpler:
 * it concerns only the calls that carry it, so it needs no generation and no
 * passing on. Its eventfd is written once, by the first fire, and never
 * read: it stays readable for good, so every sleeper that carries it polls
 * it as a third descriptor and wakes, now or at any later sleep (sticky),
 * and the `fired` flag answers the re-checks between sleeps. The eventfd
 * is shared with a forked child, the flag is not: only the process that made
 * the cancel writes or polls it, so that a copy fired on one side of a fork
 * neither ends nor wakes (over and over: the eventfd stays readable) the
 * other side's calls. A child's calls see its copy fired at their next
 * re-check.
 *
 * Runtimes whose signal handlers only set a flag (Python) cannot call
 * distlock_client_cancel() from the handler; they install an interrupt hook,
 * called before each sleep and when a signal interrupts one. To close the
 * race "signal just before the sleep", the check and the sleep run with the
 * thread's signals blocked and ppoll() unblocks them atomically for the
 * sleep: a signal pending by then interrupts it at once.
 *
 * Layer: 6 background */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* distlock_client_cancel() relies on these being plain instructions. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "lock-free atomic int needed (signal handlers)");

int distlock__cancel_init(distlock_client *c)
{
    atomic_store(&c->cancel_gen, 0);
    c->sleepers = NULL;
    c->intr_fn = NULL;
    c->intr_arg = NULL;
    c->cancel_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->cancel_fd < 0)
        return distlock__fail(DISTLOCK_ESYS, "cannot create the cancel eventfd: %s",
                              strerror(errno));
    return DISTLOCK_OK;
}

void distlock__cancel_free(distlock_client *c)
{
    if (c->cancel_fd >= 0)
        close(c->cancel_fd);
    c->cancel_fd = -1;
}

void distlock__cancel_after_fork(distlock_client *c)
{
    /* The parent's sleepers are not ours: their eventfds are closed here, as
     * the subscriber's pipe is (the threads that would close them are not in
     * the child). The cancel eventfd is shared with the parent: replace it
     * under the same number (a signal handler may be about to write it), so
     * that the parent's cancels wake only the parent and ours only us. If
     * that fails, a cancel is still seen at the next re-check (the
     * generation), only later. */
    for (distlock__sleeper *s = c->sleepers; s; s = s->next) {
        /* the parent's threads' (open while listed); a multi's is its own,
         * but a blocking call's multi is its thread's, not in the child */
        if (s->fd >= 0 && (s->own_fd || s->child_fd >= 0))
            close(s->fd);
        if (s->child_fd >= 0)
            close(s->child_fd);
    }
    c->sleepers = NULL;
    if (c->cancel_fd >= 0)
        (void)distlock__eventfd_renew(c->cancel_fd);
}

int distlock_client_cancel(distlock_client *c)
{
    /* Async-signal-safe: an atomic add, getpid() and write(); no lock, no
     * allocation, and the thread's detail message is left alone. */
    if (c == NULL)
        return DISTLOCK_EINVAL;
    int saved = errno;
    atomic_fetch_add(&c->cancel_gen, 1u);
    /* In a forked child that has not used the client yet, the eventfd is
     * still the parent's: the generation alone is enough here (no call of
     * ours can be waiting before the child's first use re-creates it). */
    if (atomic_load(&c->pid) == getpid()) {
        uint64_t one = 1;
        ssize_t w = write(c->cancel_fd, &one, sizeof one);
        (void)w;  /* EAGAIN: the counter is already far from zero */
    }
    errno = saved;
    return DISTLOCK_OK;
}

struct distlock_cancel {
    atomic_int fired;  /* 0, then 1 for good */
    int fd;            /* eventfd, written by the first fire, never read */
    pid_t pid;         /* the process that made it: the only one to use fd */
};

int distlock_cancel_new(distlock_cancel **out)
{
    distlock__clear_error();
    if (out == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "out must not be NULL");
    *out = NULL;
    distlock_cancel *k = distlock__zalloc(sizeof(*k));
    if (k == NULL)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    atomic_init(&k->fired, 0);
    k->pid = getpid();
    k->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (k->fd < 0) {
        int e = errno;
        free(k);
        return distlock__fail(DISTLOCK_ESYS, "cannot create the cancel's eventfd: %s",
                              strerror(e));
    }
    *out = k;
    return DISTLOCK_OK;
}

int distlock_cancel_fire(distlock_cancel *k)
{
    /* Async-signal-safe: an atomic exchange, getpid() and one write(); no lock, no
     * allocation, and the thread's detail message is left alone. The flag
     * first: a sleeper woken by the write finds it set. */
    if (k == NULL)
        return DISTLOCK_EINVAL;
    int saved = errno;
    if (atomic_exchange(&k->fired, 1) == 0 && getpid() == k->pid) {
        uint64_t one = 1;
        ssize_t w = write(k->fd, &one, sizeof one);
        (void)w;  /* cannot fail short of EBADF: the counter goes 0 -> 1 */
    }
    errno = saved;
    return DISTLOCK_OK;
}

void distlock_cancel_free(distlock_cancel *k)
{
    if (k == NULL)
        return;
    close(k->fd);
    free(k);
}

int distlock__cancel_fired(const distlock_cancel *k)
{
    return k != NULL && atomic_load(&k->fired) != 0;
}

int distlock_client_on_interrupt(distlock_client *c, distlock_interrupt_fn fn, void *arg)
{
    distlock__clear_error();
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    distlock__lock(c);
    c->intr_fn = fn;
    c->intr_arg = fn ? arg : NULL;
    pthread_mutex_unlock(&c->mu);
    return DISTLOCK_OK;
}

unsigned distlock__cancel_gen(distlock_client *c)
{
    return atomic_load(&c->cancel_gen);
}

/* Register s, waking on fd (own: closed by distlock__sleeper_end); a
 * forked child closes fd if own, and fd and child_fd if child_fd >= 0. */
static void sleeper_register(distlock_client *c, distlock__sleeper *s, unsigned gen,
                             distlock_cancel *cancel, int fd, int own, int child_fd)
{
    s->cancel = cancel;
    s->fd = fd;
    s->own_fd = own;
    s->child_fd = child_fd;
    atomic_init(&s->woken, 0);
    s->gen = gen;
    distlock__lock(c);
    s->next = c->sleepers;
    c->sleepers = s;
    pthread_mutex_unlock(&c->mu);
}

void distlock__sleeper_start(distlock_client *c, distlock__sleeper *s, unsigned gen,
                            distlock_cancel *cancel)
{
    /* Without an eventfd (EMFILE) the call still works: it sees a cancel
     * or a release at its next re-check instead of at once. */
    sleeper_register(c, s, gen, cancel, eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), 1, -1);
}

void distlock__sleeper_start_on(distlock_client *c, distlock__sleeper *s, unsigned gen,
                                distlock_cancel *cancel, int fd)
{
    sleeper_register(c, s, gen, cancel, fd, 0, -1);
}

void distlock__sleeper_start_private(distlock_client *c, distlock__sleeper *s, unsigned gen,
                                     distlock_cancel *cancel, int fd, int epfd)
{
    sleeper_register(c, s, gen, cancel, fd, 0, epfd);  /* its multi closes both at the end */
}

int distlock__sleeper_take_woken(distlock__sleeper *s)
{
    return atomic_exchange(&s->woken, 0);
}

int distlock__cancel_fd(const distlock_cancel *k)
{
    return k != NULL && k->pid == distlock__getpid() ? k->fd : -1;
}

void distlock__sleeper_end(distlock_client *c, distlock__sleeper *s)
{
    pthread_mutex_lock(&c->mu);
    for (distlock__sleeper **pp = &c->sleepers; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    pthread_mutex_unlock(&c->mu);
    if (s->fd >= 0 && s->own_fd)
        close(s->fd);
    s->fd = -1;
}

/* The flag first: whoever drains the (maybe shared) eventfd finds it set. */
void distlock__sleeper_wake(distlock__sleeper *s)
{
    uint64_t one = 1;
    atomic_store(&s->woken, 1);
    if (s->fd >= 0) {
        ssize_t w = write(s->fd, &one, sizeof one);
        (void)w;
    }
}

int distlock__cancelled(distlock_client *c, const distlock__sleeper *s, int ask_hook)
{
    if (atomic_load(&c->cancel_gen) != s->gen || distlock__cancel_fired(s->cancel))
        return 1;
    if (!ask_hook)
        return 0;
    pthread_mutex_lock(&c->mu);
    distlock_interrupt_fn fn = c->intr_fn;
    void *arg = c->intr_arg;
    pthread_mutex_unlock(&c->mu);
    return fn && fn(arg) != 0;
}

/* The cancel eventfd was readable: reset it and wake every sleeper whose
 * call is older than the current generation (this one included). */
void distlock__cancel_pass_on(distlock_client *c)
{
    uint64_t v;
    pthread_mutex_lock(&c->mu);
    ssize_t r = read(c->cancel_fd, &v, sizeof v);
    (void)r;
    unsigned gen = atomic_load(&c->cancel_gen);
    for (distlock__sleeper *s = c->sleepers; s; s = s->next)
        if (s->gen != gen)
            distlock__sleeper_wake(s);
    pthread_mutex_unlock(&c->mu);
}

int distlock__sleep(distlock_client *c, distlock__sleeper *s, uint64_t deadline_us)
{
    pthread_mutex_lock(&c->mu);
    distlock_interrupt_fn fn = c->intr_fn;
    void *arg = c->intr_arg;
    pthread_mutex_unlock(&c->mu);

    sigset_t block, old;
    if (fn) {
        distlock__blockable_signals(&block);
        pthread_sigmask(SIG_BLOCK, &block, &old);
    }
    int rc = 0;
    if (atomic_load(&c->cancel_gen) != s->gen || distlock__cancel_fired(s->cancel) ||
        (fn && fn(arg) != 0)) {
        rc = DISTLOCK_ECANCELED;
    } else {
        /* poll() skips a negative fd: no own cancel, no third descriptor */
        struct pollfd pfd[3] = { { s->fd, POLLIN, 0 }, { c->cancel_fd, POLLIN, 0 },
                                 { s->cancel && s->cancel->pid == distlock__getpid()
                                       ? s->cancel->fd : -1, POLLIN, 0 } };
        uint64_t now = distlock__now_us();
        uint64_t left = deadline_us > now ? deadline_us - now : 0;
        struct timespec ts = { (time_t)(left / 1000000u), (long)(left % 1000000u) * 1000 };
        int pr = ppoll(pfd, 3, deadline_us == UINT64_MAX ? NULL : &ts, fn ? &old : NULL);
        if (pr < 0 && errno == EINTR && fn && fn(arg) != 0)
            rc = DISTLOCK_ECANCELED;
        if (pr > 0 && (pfd[0].revents & POLLIN)) {
            uint64_t v;
            ssize_t r = read(s->fd, &v, sizeof v);
            (void)r;
        }
        if (pr > 0 && (pfd[1].revents & POLLIN))
            distlock__cancel_pass_on(c);
        if (atomic_load(&c->cancel_gen) != s->gen || distlock__cancel_fired(s->cancel))
            rc = DISTLOCK_ECANCELED;
    }
    if (fn)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int distlock__sleep_fd(distlock_client *c, int fd, uint64_t deadline_us, int ask_hook)
{
    distlock_interrupt_fn fn = NULL;
    void *arg = NULL;
    if (ask_hook) {
        pthread_mutex_lock(&c->mu);
        fn = c->intr_fn;
        arg = c->intr_arg;
        pthread_mutex_unlock(&c->mu);
    }
    sigset_t block, old;
    if (fn) {
        distlock__blockable_signals(&block);
        pthread_sigmask(SIG_BLOCK, &block, &old);
    }
    int rc = 0;
    if (fn && fn(arg) != 0) {
        rc = DISTLOCK_ECANCELED;
    } else {
        struct pollfd pfd = { fd, POLLIN, 0 };
        uint64_t now = distlock__now_us();
        uint64_t left = deadline_us > now ? deadline_us - now : 0;
        struct timespec ts = { (time_t)(left / 1000000u), (long)(left % 1000000u) * 1000 };
        int pr = ppoll(&pfd, 1, deadline_us == UINT64_MAX ? NULL : &ts, fn ? &old : NULL);
        if (pr < 0 && errno == EINTR && fn && fn(arg) != 0)
            rc = DISTLOCK_ECANCELED;
    }
    if (fn)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}
