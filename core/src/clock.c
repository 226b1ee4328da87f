/* clock.c -- time and the process. Every duration is measured
 * on CLOCK_MONOTONIC: wall-clock jumps must not stretch or shrink a lock's
 * validity. The pid is cached and fork noticed; eventfds renewed in a child.
 *
 * Layer: 0 base */
#include <fcntl.h>
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

static void pid_forget(void)
{
    atomic_store(&cached_pid, 0);
}

static void pid_init(void)
{
    pthread_atfork(NULL, NULL, pid_forget);
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
