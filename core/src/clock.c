/* clock.c -- time and the process. Every duration is measured
 * on CLOCK_MONOTONIC: wall-clock jumps must not stretch or shrink a lock's
 * validity. The pid is cached and fork noticed; eventfds renewed in a child.
 *
 * Layer: 0 base */
#include <fcntl.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "base.h"

uint64_t distlock__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}


/* getpid() is a system call in current glibc and we check the pid on every
 * operation (fork safety). Cache it; the cache is invalidated in a forked
 * child by an atfork handler. This is process-wide state about the process
 * itself, not client state. */
static _Atomic pid_t cached_pid;
static pthread_once_t pid_once = PTHREAD_ONCE_INIT;

/* The fork gate (base.h). Writer-preferring: a fork() waiting for it goes
 * before holders that would start working again, so a busy subscriber
 * cannot hold it off. Its handlers are registered with the pid cache's,
 * at the first distlock__getpid (a client's creation), before any library
 * thread exists. */
static pthread_rwlock_t fork_gate;

static void gate_init(void)
{
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&fork_gate, &a);
    pthread_rwlockattr_destroy(&a);
}

/* The library threads that left the gate for good (distlock__fork_gate_exit)
 * and have not been joined: they may still be exiting. A list, not one
 * slot: a thread that leaves joins only those that have ended, so that one
 * slow to end (its thread-local destructors, a thread the scheduler does
 * not run for a while) holds up no other: they end side by side instead of
 * each waiting for the one before, and a fork() waits for the slowest of
 * them, not for all of them one after another. */
#define EXITING_MAX 64
static pthread_mutex_t exiting_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t exiting[EXITING_MAX];
static int nexiting;

static void gate_close(void)
{
    pthread_rwlock_wrlock(&fork_gate);
    /* No thread is inside; some may still be on their way out: wait for them. */
    pthread_mutex_lock(&exiting_mu);
    for (int k = 0; k < nexiting; k++)
        pthread_join(exiting[k], NULL);
    nexiting = 0;
    pthread_mutex_unlock(&exiting_mu);
}

static void gate_open(void)
{
    pthread_rwlock_unlock(&fork_gate);
}

static void pid_forget(void)
{
    atomic_store(&cached_pid, 0);
    /* The child's one thread holds the gate, under the parent's thread id
     * (an unlock here would not be taken as the writer's): a fresh one.
     * The parent's holders are not in this process. */
    gate_init();
}

static void pid_init(void)
{
    gate_init();
    pthread_atfork(gate_close, gate_open, pid_forget);
}

void distlock__fork_gate_enter(void)
{
    pthread_once(&pid_once, pid_init);
    pthread_rwlock_rdlock(&fork_gate);
}

void distlock__fork_gate_leave(void)
{
    pthread_rwlock_unlock(&fork_gate);
}

/* At the process's exit the ones left are let go, not waited for (exit()
 * never waits on a thread of the library): not left joinable for good. */
__attribute__((destructor)) static void exiting_let_go(void)
{
    pthread_mutex_lock(&exiting_mu);
    for (int k = 0; k < nexiting; k++)
        pthread_detach(exiting[k]);
    nexiting = 0;
    pthread_mutex_unlock(&exiting_mu);
}

void distlock__fork_gate_exit(void)
{
    pthread_mutex_lock(&exiting_mu);
    int n = 0;
    for (int k = 0; k < nexiting; k++)
        if (pthread_tryjoin_np(exiting[k], NULL) != 0)  /* still exiting: kept */
            exiting[n++] = exiting[k];
    nexiting = n;
    /* As many still exiting as the list holds: the oldest is waited for,
     * past the gate (its exit takes no lock of ours). */
    int full = nexiting == EXITING_MAX;
    pthread_t oldest = exiting[0];
    if (full)
        memmove(exiting, exiting + 1, (EXITING_MAX - 1) * sizeof(exiting[0]));
    exiting[full ? EXITING_MAX - 1 : nexiting++] = pthread_self();
    pthread_mutex_unlock(&exiting_mu);
    if (full)
        pthread_join(oldest, NULL);
    pthread_rwlock_unlock(&fork_gate);
}

pid_t distlock__getpid(void)
{
    pthread_once(&pid_once, pid_init);
    pid_t p = atomic_load_explicit(&cached_pid, memory_order_relaxed);
    if (p == 0) {
        p = getpid();
        atomic_store_explicit(&cached_pid, p, memory_order_relaxed);
    }
    return p;
}

int distlock__eventfd_renew(int fd)
{
    int fresh = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fresh < 0)
        return -1;
    int rc = dup3(fresh, fd, O_CLOEXEC) < 0 ? -1 : 0;
    close(fresh);
    return rc;
}
