/*
 * run.c -- `distlock run`: hold a lock for as long as a command runs.
 *
 * Signals. Before the client exists (so that the library's renewal thread
 * inherits the mask) the forwarded signals and SIGCHLD are blocked, and the
 * main thread takes them from a signalfd. No signal handler ever runs, so no
 * library call is ever interrupted by EINTR, and a signal can only be acted on
 * by the main thread, at a point where it is safe to do so.
 *
 * The command runs in distlock's own process group (like flock(1)), so it
 * stays in the terminal's foreground and can read from it. A signal the
 * terminal sends (Ctrl-C, si_code SI_KERNEL) already reaches the whole
 * foreground group, the command included, so it is not forwarded a second
 * time; any other HUP, INT, QUIT, TERM, USR1 or USR2 is forwarded to the
 * command. Either way distlock keeps renewing the lock until the command has
 * exited, then releases it.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

/* A wait is done in slices so that a signal received while waiting (Ctrl-C
 * on `--wait forever`) is acted on promptly; a release still wakes the slice
 * in progress at once. */
#define WAIT_SLICE_MS 250L
/* A lease shorter than this cannot be acquired with any validity left (the
 * clock drift allowance alone is 2 ms) nor renewed in time. */
#define MIN_TTL_MS 10L
/* Without the lost-fd, how often the lost flag is polled. */
#define LOST_POLL_MS 250

struct run_opts {
    struct cli_common co;
    long ttl_ms;
    long wait_ms;
    long conflict_exit;
    long lost_exit;
    int kill_on_lost;
    int kill_sig;
    long kill_after_ms;
    int fence;
};

static const int forwarded[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
#define NFORWARDED ((int)(sizeof forwarded / sizeof forwarded[0]))

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

enum {
    OPT_LOST_EXIT = 2000, OPT_KILL_SIGNAL, OPT_KILL_AFTER, OPT_FENCE
};

static const struct option run_longopts[] = {
    CLI_COMMON_LONGOPTS,
    {"ttl", required_argument, NULL, 't'},
    {"wait", required_argument, NULL, 'w'},
    {"nonblock", no_argument, NULL, 'n'},
    {"conflict-exit-code", required_argument, NULL, 'E'},
    {"lost-exit-code", required_argument, NULL, OPT_LOST_EXIT},
    {"kill-on-lost", no_argument, NULL, 'k'},
    {"kill-signal", required_argument, NULL, OPT_KILL_SIGNAL},
    {"kill-after", required_argument, NULL, OPT_KILL_AFTER},
    {"fence", no_argument, NULL, OPT_FENCE},
    {NULL, 0, NULL, 0}
};

/* Returns -1 to go on, else an exit status. */
static int parse_run(int argc, char **argv, struct run_opts *o, int *first)
{
    int opt;
    long v;
    cli_common_init(&o->co);
    o->ttl_ms = CLI_DEFAULT_TTL_MS;
    o->wait_ms = 0;
    o->conflict_exit = CLI_EXIT_CONFLICT;
    o->lost_exit = CLI_EXIT_LOST;
    o->kill_on_lost = 0;
    o->kill_sig = SIGTERM;
    o->kill_after_ms = 10000;
    o->fence = 0;

    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "+:" CLI_COMMON_SHORTOPTS "t:w:nE:k",
                              run_longopts, NULL)) != -1) {
        int r = cli_common_option(&o->co, opt, optarg);
        if (r < 0)
            return cli_usage_error("run", "invalid option value");
        if (r > 0)
            continue;
        switch (opt) {
        case 'h':
            cli_help_run(stdout);
            return CLI_EXIT_OK;
        case 't':
            if (cli_parse_duration(optarg, 0, &o->ttl_ms) || o->ttl_ms < MIN_TTL_MS ||
                o->ttl_ms > DISTLOCK_TTL_MAX)
                return cli_usage_error("run", "invalid --ttl '%s' (a duration from 10ms to "
                                       "24 days, such as 30s or 500ms)", optarg);
            break;
        case 'w':
            if (cli_parse_duration(optarg, 1, &o->wait_ms))
                return cli_usage_error("run", "invalid --wait '%s' (a duration such as 10s, "
                                       "or 'forever')", optarg);
            break;
        case 'n':
            o->wait_ms = 0;
            break;
        case 'E':
        case OPT_LOST_EXIT:
            if (cli_parse_int(optarg, 0, 255, &v))
                return cli_usage_error("run", "invalid %s '%s' (an integer 0..255)",
                                       opt == 'E' ? "--conflict-exit-code" : "--lost-exit-code",
                                       optarg);
            if (opt == 'E') o->conflict_exit = v;
            else o->lost_exit = v;
            break;
        case 'k':
            o->kill_on_lost = 1;
            break;
        case OPT_KILL_SIGNAL:
            if (cli_parse_signal(optarg, &o->kill_sig))
                return cli_usage_error("run", "invalid --kill-signal '%s' (TERM, KILL, INT, "
                                       "HUP, a number...)", optarg);
            break;
        case OPT_KILL_AFTER:
            if (cli_parse_duration(optarg, 0, &o->kill_after_ms))
                return cli_usage_error("run", "invalid --kill-after '%s' (a duration; 0 = "
                                       "never send SIGKILL)", optarg);
            break;
        case OPT_FENCE:
            o->fence = 1;
            break;
        case ':':
            return cli_usage_error("run", "option '%s' needs a value", argv[optind - 1]);
        case '?':
        default:
            if (optopt)
                return cli_usage_error("run", "unknown option '-%c'", optopt);
            return cli_usage_error("run", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return cli_usage_error("run", "missing KEY and COMMAND");
    if (!argv[optind][0])
        return cli_usage_error("run", "KEY is empty");
    *first = optind;
    int cmd = optind + 1;
    if (cmd < argc && !strcmp(argv[cmd], "--"))
        cmd++;
    if (cmd >= argc)
        return cli_usage_error("run", "missing COMMAND after KEY");
    /* No command name starts with '-': this is an option put after KEY. */
    if (argv[cmd][0] == '-')
        return cli_usage_error("run", "'%s' after KEY: options go before KEY "
                               "(distlock run [options] KEY -- COMMAND)", argv[cmd]);
    return -1;
}

/* The environment of the command: ours, with DISTLOCK_KEY, DISTLOCK_TOKEN
 * and (with --fence) DISTLOCK_FENCE set. */
static char **child_env(const char *key, const char *token, long long fence)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 4, sizeof *env);
    if (!env)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strncmp(environ[i], "DISTLOCK_KEY=", 13) ||
            !strncmp(environ[i], "DISTLOCK_TOKEN=", 15) ||
            !strncmp(environ[i], "DISTLOCK_FENCE=", 15))
            continue;
        env[j++] = environ[i];
    }
    size_t kl = strlen(key), tl = strlen(token);
    char *k = malloc(kl + 14), *t = malloc(tl + 16), *f = fence >= 0 ? malloc(48) : NULL;
    if (!k || !t || (fence >= 0 && !f)) {
        free(k); free(t); free(f); free(env);
        return NULL;
    }
    snprintf(k, kl + 14, "DISTLOCK_KEY=%s", key);
    snprintf(t, tl + 16, "DISTLOCK_TOKEN=%s", token);
    env[j++] = k;
    env[j++] = t;
    if (f) {
        snprintf(f, 48, "DISTLOCK_FENCE=%lld", fence);
        env[j++] = f;
    }
    env[j] = NULL;
    return env;
}

/* Read every pending signal. Before the command starts (child <= 0) the
 * first terminating one is returned in *stop; afterwards signals are
 * forwarded to the command. *chld is set on SIGCHLD. */
static void take_signals(int sfd, pid_t child, int *stop, int *chld, int verbose)
{
    struct signalfd_siginfo si;
    for (;;) {
        ssize_t r = read(sfd, &si, sizeof si);
        if (r != (ssize_t)sizeof si)
            return; /* EAGAIN: none left */
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD) {
            *chld = 1;
            continue;
        }
        if (child <= 0) {
            if (!*stop)
                *stop = sig;
            continue;
        }
        /* The terminal signals its whole foreground process group, which the
         * command is part of: it has this one already. */
        if (si.ssi_code == SI_KERNEL)
            continue;
        if (verbose)
            cli_err("forwarding %s to the command (pid %ld)", strsignal(sig), (long)child);
        kill(child, sig);
    }
}

/* Best effort: why is the key not ours? "held by another owner for 12.3s".
 * Returns 0 when no node shows a holder (any more). */
static int explain_conflict(distlock_client *c, const char *key, char *buf, size_t size)
{
    int n = distlock_client_node_count(c);
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        long pttl = 0;
        int r = distlock_inspect(c, key, i, NULL, 0, &pttl);
        if (r == 1) {
            char d[32];
            if (pttl >= 0)
                snprintf(buf, size, " (it expires in %s unless renewed)",
                         cli_fmt_ms(pttl, d, sizeof d));
            else
                snprintf(buf, size, " (it has no expiry)");
            return 1;
        }
    }
    return 0;
}

int cli_run(int argc, char **argv)
{
    struct run_opts o;
    int first = 0;
    int rc = parse_run(argc, argv, &o, &first);
    if (rc >= 0)
        return rc;
    const char *key = argv[first];
    char **cmd = argv + first + 1;
    if (!strcmp(cmd[0], "--"))
        cmd++;
    char d1[32], d2[32], d3[32];

    /* Block before any library thread exists: threads inherit the mask, so
     * only the main thread ever sees these signals (through sfd). */
    sigset_t set, orig_mask;
    sigemptyset(&set);
    for (int i = 0; i < NFORWARDED; i++)
        sigaddset(&set, forwarded[i]);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, &orig_mask);
    /* SIGCHLD must not be ignored (children would be reaped for us) and a
     * broken server socket must not kill us; the command gets the caller's
     * dispositions back. */
    struct sigaction dfl, ign, old_chld, old_pipe;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ign = dfl;
    ign.sa_handler = SIG_IGN;
    sigaction(SIGCHLD, &dfl, &old_chld);
    sigaction(SIGPIPE, &ign, &old_pipe);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        cli_err("signalfd: %s", strerror(errno));
        return CLI_EXIT_SOFTWARE;
    }

    distlock_client *c = NULL;
    if ((rc = cli_client(&o.co, &c)) != 0) {
        close(sfd);
        return rc;
    }

    /* Acquire, waiting in slices (see WAIT_SLICE_MS). */
    unsigned flags = DISTLOCK_AUTO_RENEW | (o.fence ? DISTLOCK_FENCING : 0);
    distlock_lock *lock = NULL;
    long t0 = now_ms();
    int stop = 0, chld = 0;
    /* A first try without waiting, so that -v can say that we wait. */
    rc = distlock_acquire(c, key, o.ttl_ms, 0, flags, &lock);
    if ((rc == DISTLOCK_NOTACQUIRED || rc == DISTLOCK_ETIMEDOUT) && o.wait_ms != 0) {
        if (o.co.verbose) {
            if (o.wait_ms == DISTLOCK_WAIT_FOREVER)
                cli_err("'%s' is locked by another owner; waiting for it", key);
            else
                cli_err("'%s' is locked by another owner; waiting up to %s", key,
                        cli_fmt_ms(o.wait_ms, d1, sizeof d1));
        }
    }
    while ((rc == DISTLOCK_NOTACQUIRED || rc == DISTLOCK_ETIMEDOUT) && o.wait_ms != 0) {
        take_signals(sfd, 0, &stop, &chld, 0);
        if (stop)
            break;
        if (o.wait_ms != DISTLOCK_WAIT_FOREVER && now_ms() - t0 >= o.wait_ms)
            break;
        long slice = o.wait_ms;
        if (o.wait_ms == DISTLOCK_WAIT_FOREVER) {
            slice = WAIT_SLICE_MS;
        } else if (o.wait_ms > 0) {
            slice = o.wait_ms - (now_ms() - t0);
            if (slice > WAIT_SLICE_MS) slice = WAIT_SLICE_MS;
            if (slice < 0) slice = 0;
        }
        if (slice == 0)
            break;
        rc = distlock_acquire(c, key, o.ttl_ms, slice, flags, &lock);
    }
    long waited = now_ms() - t0;
    if (rc == DISTLOCK_OK)
        take_signals(sfd, 0, &stop, &chld, 0);
    if (stop) {
        if (!o.co.quiet)
            cli_err("%s while %s '%s'; not running the command", strsignal(stop),
                    rc == DISTLOCK_OK ? "holding" : "waiting for", key);
        distlock_lock_free(lock); /* releases it if we got it */
        distlock_client_free(c);
        close(sfd);
        return 128 + stop;
    }
    if (rc == DISTLOCK_NOTACQUIRED || rc == DISTLOCK_ETIMEDOUT) {
        if (!o.co.quiet) {
            char why[96];
            if (!explain_conflict(c, key, why, sizeof why))
                cli_err("could not lock '%s' although no owner holds it now: it was just "
                        "released, or too few nodes granted it with validity left (a "
                        "--ttl of %s is too short for these servers?); not running the "
                        "command", key, cli_fmt_ms(o.ttl_ms, d1, sizeof d1));
            else if (o.wait_ms != 0)
                cli_err("'%s' is locked by another owner%s; gave up after waiting %s; "
                        "not running the command", key, why, cli_fmt_ms(waited, d1, sizeof d1));
            else
                cli_err("'%s' is locked by another owner%s; not running the command",
                        key, why);
        }
        distlock_client_free(c);
        close(sfd);
        return (int)o.conflict_exit;
    }
    if (rc != DISTLOCK_OK) {
        char what[128];
        snprintf(what, sizeof what, "cannot lock '%.80s'", key);
        cli_report(what, rc);
        distlock_client_free(c);
        close(sfd);
        return cli_exit_for_status(rc);
    }

    long long fence = o.fence ? (long long)distlock_lock_fence(lock) : -1;
    if (o.co.verbose) {
        char fb[40] = "";
        if (o.fence)
            snprintf(fb, sizeof fb, ", fence %lld", fence);
        cli_err("acquired '%s' after %s (token %s%s, ttl %s, renewed every %s)", key,
                cli_fmt_ms(waited, d1, sizeof d1), distlock_lock_token(lock), fb,
                cli_fmt_ms(o.ttl_ms, d2, sizeof d2), cli_fmt_ms(o.ttl_ms / 3 ? o.ttl_ms / 3 : 1, d3, sizeof d3));
    }

    int lost_fd = distlock_client_lost_fd(c);
    char **env = child_env(key, distlock_lock_token(lock), fence);
    int errpipe[2];
    if (!env || pipe2(errpipe, O_CLOEXEC) < 0) {
        cli_err("cannot start the command: %s", env ? strerror(errno) : "out of memory");
        distlock_lock_free(lock);
        distlock_client_free(c);
        close(sfd);
        return CLI_EXIT_SOFTWARE;
    }

    /* Nothing to close here: every descriptor the library opens is
     * close-on-exec (its sockets, the subscriber's pipe, the lost eventfd,
     * the resolver's pipe), and so are ours (sfd, errpipe). The command gets
     * exactly the caller's descriptors, as with flock(1); cli/tests/run.sh
     * t_descriptors checks it. */
    long t_start = now_ms();
    pid_t pid = fork();
    if (pid < 0) {
        cli_err("fork: %s", strerror(errno));
        distlock_lock_free(lock);
        distlock_client_free(c);
        close(sfd);
        return CLI_EXIT_SOFTWARE;
    }
    if (pid == 0) {
        /* Only async-signal-safe calls from here: the parent has threads. */
        close(errpipe[0]);
        sigaction(SIGCHLD, &old_chld, NULL);
        sigaction(SIGPIPE, &old_pipe, NULL);
        sigprocmask(SIG_SETMASK, &orig_mask, NULL);
        execvpe(cmd[0], cmd, env);
        int e = errno;
        ssize_t w = write(errpipe[1], &e, sizeof e);
        (void)w;
        _exit(e == ENOENT ? CLI_EXIT_NOT_FOUND : CLI_EXIT_CANNOT_EXEC);
    }
    close(errpipe[1]);
    int exec_errno = 0;
    for (;;) {
        ssize_t r = read(errpipe[0], &exec_errno, sizeof exec_errno);
        if (r < 0 && errno == EINTR)
            continue;
        if (r != (ssize_t)sizeof exec_errno)
            exec_errno = 0;
        break;
    }
    close(errpipe[0]);
    if (exec_errno)
        cli_err("cannot run '%s': %s", cmd[0], strerror(exec_errno));

    /* Supervise: forward signals, watch for loss, reap the command. */
    int status = 0, reaped = 0, lost = 0, killed_for_lost = 0;
    long kill_deadline = -1;
    for (;;) {
        struct pollfd pf[2];
        int n = 0;
        pf[n].fd = sfd; pf[n].events = POLLIN; pf[n].revents = 0; n++;
        if (lost_fd >= 0 && !lost) {
            pf[n].fd = lost_fd; pf[n].events = POLLIN; pf[n].revents = 0; n++;
        }
        int timeout = -1;
        if (lost_fd < 0 && !lost)
            timeout = LOST_POLL_MS;
        if (kill_deadline >= 0) {
            long left = kill_deadline - now_ms();
            if (left < 0) left = 0;
            if (timeout < 0 || left < timeout) timeout = (int)left;
        }
        if (poll(pf, (nfds_t)n, timeout) < 0 && errno != EINTR) {
            cli_err("poll: %s", strerror(errno));
            break; /* still reap the child below */
        }
        chld = 0;
        take_signals(sfd, pid, &stop, &chld, o.co.verbose);
        if (chld) {
            pid_t w = waitpid(pid, &status, WNOHANG);
            if (w == pid) {
                reaped = 1;
                break;
            }
        }
        int fd_says = 0;
        if (n > 1 && (pf[1].revents & POLLIN)) {
            uint64_t cnt;
            ssize_t r = read(lost_fd, &cnt, sizeof cnt);
            (void)r;
            fd_says = 1;
        }
        if (!lost && (fd_says || distlock_lock_lost(lock))) {
            lost = 1;
            if (o.kill_on_lost) {
                cli_err("lost the lock on '%s' while the command was running (expired, "
                        "deleted or taken over); sending %s to the command (pid %ld)",
                        key, strsignal(o.kill_sig), (long)pid);
                kill(pid, o.kill_sig);
                killed_for_lost = 1;
                if (o.kill_after_ms > 0 && o.kill_sig != SIGKILL)
                    kill_deadline = now_ms() + o.kill_after_ms;
            } else {
                cli_err("lost the lock on '%s' while the command was running (expired, "
                        "deleted or taken over); the command goes on WITHOUT the lock",
                        key);
            }
        }
        if (kill_deadline >= 0 && now_ms() >= kill_deadline) {
            cli_err("the command (pid %ld) is still running %s after losing the lock; "
                    "sending SIGKILL", (long)pid, cli_fmt_ms(o.kill_after_ms, d1, sizeof d1));
            kill(pid, SIGKILL);
            kill_deadline = -1;
        }
    }
    if (!reaped) {
        /* poll failed: wait for the command the plain way. */
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
    }
    long ran = now_ms() - t_start;
    int code = WIFEXITED(status) ? WEXITSTATUS(status)
             : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : CLI_EXIT_SOFTWARE;

    rc = distlock_release(lock);
    if (rc == DISTLOCK_ENOTOWNER) {
        if (!lost)
            cli_err("lost the lock on '%s' before the command ended (expired, deleted or "
                    "taken over); the command finished WITHOUT the lock", key);
        lost = 1;
    } else if (rc != DISTLOCK_OK) {
        char what[160];
        snprintf(what, sizeof what, "could not release '%.80s' (it expires by itself within %s)",
                 key, cli_fmt_ms(o.ttl_ms, d1, sizeof d1));
        cli_report(what, rc);
    } else if (o.co.verbose) {
        if (WIFSIGNALED(status))
            cli_err("released '%s'; the command ran %s and was killed by %s", key,
                    cli_fmt_ms(ran, d1, sizeof d1), strsignal(WTERMSIG(status)));
        else
            cli_err("released '%s'; the command ran %s and exited with status %d", key,
                    cli_fmt_ms(ran, d1, sizeof d1), code);
    }
    if (killed_for_lost)
        code = (int)o.lost_exit;

    distlock_lock_free(lock);
    distlock_client_free(c);
    close(sfd);
    for (char **e = env; *e; e++) {
        if (!strncmp(*e, "DISTLOCK_KEY=", 13) || !strncmp(*e, "DISTLOCK_TOKEN=", 15) ||
            !strncmp(*e, "DISTLOCK_FENCE=", 15))
            free(*e);
    }
    free(env);
    return code;
}
