/* test_thread_control.h -- the threads of this process, for the few tests
 * that must know where a library thread is or hold it at a given point
 * (include after test_common.h). */
#ifndef DISTLOCK_TEST_THREAD_CONTROL_H
#define DISTLOCK_TEST_THREAD_CONTROL_H

#include <errno.h>

/* For the few tests that must know where a library thread is: its thread
 * ids (the ones a call started are the ids that were not there before) and
 * whether it sleeps in a given system call. */
#include <dirent.h>
#include <sys/syscall.h>
#include <sys/types.h>

static inline int list_tids(pid_t *tids, int max)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL && n < max)
        if (e->d_name[0] != '.') tids[n++] = (pid_t)atoi(e->d_name);
    if (d) closedir(d);
    return n;
}

static inline int read_small(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (int)n;
}

/* Thread tid sleeps (state S) in one of the system calls calls[]. */
static inline int blocked_in(pid_t tid, const long *calls, int ncalls)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    if (read_small(path, buf, sizeof buf) <= 0) return 0;
    const char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] != 'S') return 0;
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    if (read_small(path, buf, sizeof buf) <= 0 || buf[0] < '0' || buf[0] > '9') return 0;
    long nr = strtol(buf, NULL, 10);
    for (int i = 0; i < ncalls; i++)
        if (nr == calls[i]) return 1;
    return 0;
}

__attribute__((unused)) static const long poll_calls[] = {
#ifdef SYS_poll
    SYS_poll,
#endif
#ifdef SYS_select
    SYS_select,
#endif
#ifdef SYS_epoll_wait
    SYS_epoll_wait,
#endif
    SYS_ppoll, SYS_pselect6, SYS_epoll_pwait,
};
__attribute__((unused)) static const long futex_calls[] = { SYS_futex };
#define NCALLS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The threads now running that are not in before[] nor `except`, into out[]. */
static inline int new_tids(const pid_t *before, int nb, pid_t except, pid_t *out, int max)
{
    pid_t now[64];
    int n = list_tids(now, 64), k = 0;
    for (int i = 0; i < n && k < max; i++) {
        int old = now[i] == except;
        for (int j = 0; j < nb; j++) old |= now[i] == before[j];
        if (!old) out[k++] = now[i];
    }
    return k;
}

/* Hold thread tid in a signal handler (SIGUSR2) until thread_resume(), as
 * if the scheduler had stopped running it at that point: for interleavings
 * that otherwise happen only now and then. thread_pause_init() first. */
#include <poll.h>
#include <signal.h>
#include <unistd.h>

__attribute__((unused)) static int pause_fd[2] = { -1, -1 };
__attribute__((unused)) static int pause_ack_fd[2] = { -1, -1 };
__attribute__((unused)) static struct sigaction pause_old_sa;

static inline void pause_handler(int sig)
{
    int e = errno;
    char ch = 'p';
    (void)sig;
    if (write(pause_ack_fd[1], &ch, 1) != 1) {}
    if (read(pause_fd[0], &ch, 1) != 1) {}
    errno = e;
}

static inline void thread_pause_init(void)
{
    struct sigaction sa;
    assert_int_equal(pipe(pause_fd), 0);
    assert_int_equal(pipe(pause_ack_fd), 0);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pause_handler;   /* no SA_RESTART: poll() etc. return EINTR */
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR2, &sa, &pause_old_sa), 0);
}

static inline void thread_pause_fini(void)
{
    sigaction(SIGUSR2, &pause_old_sa, NULL);
    for (int i = 0; i < 2; i++) {
        close(pause_fd[i]);
        close(pause_ack_fd[i]);
        pause_fd[i] = pause_ack_fd[i] = -1;
    }
}

/* 0 once tid sits in the handler. */
static inline int thread_pause(pid_t tid)
{
    char ch;
    struct pollfd p = { pause_ack_fd[0], POLLIN, 0 };
    if (syscall(SYS_tgkill, getpid(), tid, SIGUSR2) != 0 || poll(&p, 1, 3000) != 1 ||
        read(pause_ack_fd[0], &ch, 1) != 1)
        return -1;
    return 0;
}

/* Let n held threads go on. */
static inline void thread_resume(int n)
{
    for (int i = 0; i < n; i++) {
        char ch = 'r';
        if (write(pause_fd[1], &ch, 1) != 1) {}
    }
}

/* Hold threads tids[0..n) where they are (a ptrace stop by a helper
 * process) until thread_unhold(), as if the scheduler had stopped running
 * them: unlike thread_pause() this needs no signal delivered to the thread,
 * so it holds the library's own threads, which block every signal
 * (base.h distlock__thread_create). Returns the helper's pid once every
 * thread is stopped, -1 if one could not be (the helper is gone then). A
 * helper whose test dies sees its pipe close and lets the threads go. */
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

__attribute__((unused)) static int hold_go_fd = -1;

static inline pid_t thread_hold(const pid_t *tids, int n)
{
    int ack[2], go[2];
    if (pipe(ack) != 0) return -1;
    if (pipe(go) != 0) {
        close(ack[0]);
        close(ack[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        /* only system calls here: the child of a threaded process */
        char ok = 'h', ch;
        int held = 0;
        close(ack[0]);
        close(go[1]);
        if (read(go[0], &ch, 1) != 1) _exit(0);  /* the parent let us trace it */
        for (; held < n; held++) {
            int st;
            if (ptrace(PTRACE_SEIZE, tids[held], 0, 0) != 0) break;
            if (ptrace(PTRACE_INTERRUPT, tids[held], 0, 0) != 0 ||
                waitpid(tids[held], &st, __WALL) != tids[held]) {
                held++;
                break;
            }
        }
        if (held < n || n <= 0) ok = 'f';
        if (write(ack[1], &ok, 1) != 1) {}
        if (ok == 'h' && read(go[0], &ch, 1) < 0) {}
        for (int i = 0; i < held; i++) ptrace(PTRACE_DETACH, tids[i], 0, 0);
        _exit(0);
    }
    close(ack[1]);
    close(go[0]);
    char ok = 'f', may = 'm';
    /* Yama's ptrace_scope 1 lets only an ancestor trace, unless named here
     * (EINVAL without Yama: nothing to do) */
    if (pid > 0) (void)prctl(PR_SET_PTRACER, (unsigned long)pid, 0, 0, 0);
    if (pid < 0 || write(go[1], &may, 1) != 1 || read(ack[0], &ok, 1) != 1 || ok != 'h') {
        close(ack[0]);
        close(go[1]);
        if (pid > 0) waitpid(pid, NULL, 0);
        return -1;
    }
    close(ack[0]);
    hold_go_fd = go[1];
    return pid;
}

/* Let the threads thread_hold() stopped go on (helper: its pid; -1: none). */
static inline void thread_unhold(pid_t helper)
{
    if (helper <= 0) return;
    close(hold_go_fd);   /* EOF: the helper detaches and exits */
    hold_go_fd = -1;
    waitpid(helper, NULL, 0);
    (void)prctl(PR_SET_PTRACER, 0UL, 0, 0, 0);
}

#endif
