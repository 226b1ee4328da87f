/* test_review_a.h -- helpers shared by the test_review_a_*.c regression tests
 * (include after test_common.h). Each of those tests pins one finding of the
 * safety review: it fails on the core the review was made against and
 * passes once the finding is fixed. */
#ifndef DISTLOCK_TEST_REVIEW_A_H
#define DISTLOCK_TEST_REVIEW_A_H

#include <errno.h>
#include <stdarg.h>
#include <time.h>

/* 1 under ASan or TSan (GCC and clang spellings). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#  define REVIEW_SANITIZED 1
#elif defined(__has_feature)
#  if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#    define REVIEW_SANITIZED 1
#  endif
#endif
#ifndef REVIEW_SANITIZED
#  define REVIEW_SANITIZED 0
#endif

/* Sanitizer builds (DISTLOCK_TEST_SLOW) get wider time bounds. */
static inline long review_slow(long normal, long slow)
{
    return getenv("DISTLOCK_TEST_SLOW") ? slow : normal;
}

/* Run a command on node i and require a +OK / status reply. */
static inline void review_status(const rh_cluster *rc, int i, const char *fmt, ...)
{
    redisContext *ctx = rh_connect(rc, i, 0);
    assert_non_null(ctx);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    redisFree(ctx);
    if (!r || r->type == REDIS_REPLY_ERROR) {
        print_error("node %d: %s -> %s\n", i, fmt, r ? r->str : "no reply");
        if (r) freeReplyObject(r);
        fail();
    }
    freeReplyObject(r);
}

/* Number of EVALSHA + EVAL calls node i has served (INFO commandstats). */
static inline long long review_eval_calls(const rh_cluster *rc, int i)
{
    redisReply *r = rh_command(rc, i, 0, "INFO commandstats");
    long long n = 0;
    if (!r || r->type != REDIS_REPLY_STRING) {
        if (r) freeReplyObject(r);
        return -1;
    }
    const char *names[] = { "cmdstat_evalsha:calls=", "cmdstat_eval:calls=" };
    for (int k = 0; k < 2; k++) {
        const char *p = strstr(r->str, names[k]);
        if (p) n += strtoll(p + strlen(names[k]), NULL, 10);
    }
    freeReplyObject(r);
    return n;
}

/* Block until the monotonic time t_ms (rh_now_ms() scale). Only for a
 * scenario's own timing (how long a holder keeps a lock), never to wait for
 * something to happen. */
static inline void review_until(long long t_ms)
{
    struct timespec ts = { (time_t)(t_ms / 1000), (long)(t_ms % 1000) * 1000000L };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

/* Nodes where key holds token and has more than min_pttl ms left. */
static inline int review_count_pttl_above(const rh_cluster *rc, const char *key,
                                          const char *token, long long min_pttl)
{
    int n = 0;
    char buf[512];
    for (int i = 0; i < rc->n; i++) {
        if (rc->node[i].pid <= 0 || rc->node[i].stopped) continue;
        if (rh_get(rc, i, 0, key, buf, sizeof buf) == 1 && strcmp(buf, token) == 0 &&
            rh_pttl(rc, i, 0, key) > min_pttl)
            n++;
    }
    return n;
}

/* ------------------------------------------------ threads of this process
 * For the few tests that must know where a library thread is: its thread
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

/* Hold thread tid in a signal handler (SIGUSR2) until review_resume(), as
 * if the scheduler had stopped running it at that point: for interleavings
 * that otherwise happen only now and then. review_pause_init() first. */
#include <poll.h>
#include <signal.h>
#include <unistd.h>

__attribute__((unused)) static int review_pause_fd[2] = { -1, -1 };
__attribute__((unused)) static int review_ack_fd[2] = { -1, -1 };
__attribute__((unused)) static struct sigaction review_old_sa;

static inline void review_pause_handler(int sig)
{
    int e = errno;
    char ch = 'p';
    (void)sig;
    if (write(review_ack_fd[1], &ch, 1) != 1) {}
    if (read(review_pause_fd[0], &ch, 1) != 1) {}
    errno = e;
}

static inline void review_pause_init(void)
{
    struct sigaction sa;
    assert_int_equal(pipe(review_pause_fd), 0);
    assert_int_equal(pipe(review_ack_fd), 0);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = review_pause_handler;   /* no SA_RESTART: poll() etc. return EINTR */
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR2, &sa, &review_old_sa), 0);
}

static inline void review_pause_fini(void)
{
    sigaction(SIGUSR2, &review_old_sa, NULL);
    for (int i = 0; i < 2; i++) {
        close(review_pause_fd[i]);
        close(review_ack_fd[i]);
        review_pause_fd[i] = review_ack_fd[i] = -1;
    }
}

/* 0 once tid sits in the handler. */
static inline int review_pause(pid_t tid)
{
    char ch;
    struct pollfd p = { review_ack_fd[0], POLLIN, 0 };
    if (syscall(SYS_tgkill, getpid(), tid, SIGUSR2) != 0 || poll(&p, 1, 3000) != 1 ||
        read(review_ack_fd[0], &ch, 1) != 1)
        return -1;
    return 0;
}

/* Let n held threads go on. */
static inline void review_resume(int n)
{
    for (int i = 0; i < n; i++) {
        char ch = 'r';
        if (write(review_pause_fd[1], &ch, 1) != 1) {}
    }
}

#endif
