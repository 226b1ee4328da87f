/*
 * run.c -- `distlock run`: hold a lock for as long as a command runs.
 *
 * Signals. Before the client exists the forwarded signals and SIGCHLD are
 * blocked, and the main thread takes them from a signalfd, at points where it
 * is safe to act on them. The one exception is the wait for the lock: there
 * the forwarded signals are unblocked, with a handler that records the signal
 * and cancels the wait (distlock_client_cancel(), async-signal-safe), so the
 * wait is one library call that a signal ends at once; they are blocked again
 * before anything else happens. (The library's own threads block every
 * signal, so the main thread is the one that receives them.)
 *
 * The command runs in a process group of its own, so that stopping it on a
 * lost lease (and forwarding a signal) reaches everything it started: a
 * shell script's programs as well as the shell. When distlock has a
 * controlling terminal (/dev/tty, whatever stdin is) and is in the
 * foreground, that group is made the terminal's foreground group (as a
 * shell does for a job), so the command reads from the terminal and Ctrl-C /
 * Ctrl-Z reach it directly; distlock takes the terminal back when it stops
 * or exits (SIGTTOU blocked, so it may while in the background), and gives
 * it to the command's group when brought to the foreground later
 * (continued(), stopped_command()). The command dies with distlock
 * (PR_SET_PDEATHSIG, exec_command()), and the lock is released only once
 * the command's group is empty (supervise()). HUP, INT, QUIT, TERM, USR1 or USR2
 * that reach distlock are forwarded to the command's group: with the
 * terminal given to the command, a terminal-generated one reaches distlock
 * only when the command is not in the foreground, and then the command has
 * not had it. Either way distlock keeps renewing the lock until the command
 * has exited, then releases it.
 *
 * Steps. cli_run() is parse_run, block_signals, make_client, acquire_lock,
 * spawn_command, supervise, release_lock, then the exit status; each step
 * keeps what it acquires in one struct run_state, which run_state_free()
 * cleans up whichever step ended the run.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

/* Without the lost-fd, how often the lost flag is polled. */
#define LOST_POLL_MS 250

/* Once the command has exited, how often distlock checks whether what it
 * left running in its process group has exited too (kill(-pgid, 0)). */
#define GROUP_POLL_MS 100

/* Each step of `run` below returns RUN_GO_ON to go on to the next one, or the
 * exit status to end with. A step leaves what it acquired in the run_state,
 * and run_state_free() is the one cleanup, whichever step ended the run. */
#define RUN_GO_ON (-1)

struct run_opts {
    struct cli_common co;
    long ttl_ms;
    long wait_ms;
    long conflict_exit;
    long lost_exit;
    int on_lost;          /* ON_LOST_*: what a lost lease does to the command */
    int kill_sig;         /* the first signal of ON_LOST_TERM (--kill-signal) */
    long grace_ms;        /* then SIGKILL after this (--grace, --kill-after); 0: never */
    int fence;
    const char *stats_file;  /* --stats-file, else $DISTLOCK_STATS_FILE, else NULL */
    long permits;         /* -n N: a permit of the semaphore KEY (N permits); 0: not one */
    int permits_given;    /* -n was given (its value is the library's to check) */
    int shared;           /* --shared: a read lock on KEY */
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
    OPT_LOST_EXIT = 2000, OPT_KILL_SIGNAL, OPT_KILL_AFTER, OPT_FENCE, OPT_STATS_FILE,
    OPT_ON_LOST, OPT_NONBLOCK, OPT_SHARED
};

/* --on-lost: the lease is gone while the command runs. The default is
 * `term`: a command run under a lock counts on the exclusion (a cron job, a
 * deploy), and once the lease is gone another host may already run the same
 * job, so the command is stopped as `consul lock` and `flock`-style wrappers
 * users know do. `ignore` (the command goes on, its status kept, the loss
 * said on stderr) is asked for by a caller whose command is safe to finish
 * unprotected; `kill` skips the grace. */
enum { ON_LOST_IGNORE = 0, ON_LOST_TERM, ON_LOST_KILL };
static const char *const on_lost_names[] = {"ignore", "term", "kill"};

static int parse_on_lost(const char *s, int *out)
{
    for (int i = 0; i < (int)(sizeof on_lost_names / sizeof on_lost_names[0]); i++) {
        if (!strcmp(s, on_lost_names[i])) {
            *out = i;
            return 0;
        }
    }
    return -1;
}

static const struct option run_longopts[] = {
    CLI_COMMON_LONGOPTS,
    {"ttl", required_argument, NULL, 't'},
    {"wait", required_argument, NULL, 'w'},
    {"nonblock", no_argument, NULL, OPT_NONBLOCK},
    {"permits", required_argument, NULL, 'n'},
    {"shared", no_argument, NULL, OPT_SHARED},
    {"conflict-exit-code", required_argument, NULL, 'E'},
    {"lost-exit-code", required_argument, NULL, OPT_LOST_EXIT},
    {"kill-on-lost", no_argument, NULL, 'k'},
    {"kill-signal", required_argument, NULL, OPT_KILL_SIGNAL},
    {"kill-after", required_argument, NULL, OPT_KILL_AFTER},
    {"grace", required_argument, NULL, OPT_KILL_AFTER},
    {"on-lost", required_argument, NULL, OPT_ON_LOST},
    {"fence", no_argument, NULL, OPT_FENCE},
    {"stats-file", required_argument, NULL, OPT_STATS_FILE},
    {NULL, 0, NULL, 0}
};

/* Parse the options into *o and find the keys and the command's argv.
 * KEY [--] COMMAND is one key; KEY1 KEY2 ... -- COMMAND (the first "--"
 * after KEY1 ends the list) several, all or none. Without a "--" the first
 * word is the one KEY, the rest the command, as always. Returns RUN_GO_ON,
 * else an exit status (--help, or a usage error said). */
static int parse_run(int argc, char **argv, struct run_opts *o, char ***keys, size_t *nkeys,
                     char ***cmd_argv)
{
    int opt;
    long v;
    cli_common_init(&o->co, "run");
    o->ttl_ms = CLI_DEFAULT_TTL_MS;
    o->wait_ms = 0;
    o->conflict_exit = CLI_EXIT_CONFLICT;
    o->lost_exit = CLI_EXIT_LOST;
    o->on_lost = ON_LOST_TERM;
    o->kill_sig = SIGTERM;
    o->grace_ms = 10000;
    o->fence = 0;
    o->stats_file = getenv("DISTLOCK_STATS_FILE");
    o->permits = 0;
    o->permits_given = 0;
    o->shared = 0;

    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "+:" CLI_COMMON_SHORTOPTS "t:w:n:E:k",
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
        {
            const char *why;
            if (cli_parse_ttl(optarg, &o->ttl_ms, &why))
                return cli_usage_error("run", "invalid --ttl '%s' (%s)", optarg, why);
            break;
        }
        case 'w':
            if (cli_parse_duration(optarg, 1, &o->wait_ms))
                return cli_usage_error("run", "invalid --wait '%s' (a duration such as 10s, "
                                       "or 'forever')", optarg);
            break;
        case OPT_NONBLOCK:
            o->wait_ms = 0;
            break;
        case 'n':
            /* Any integer: its range (1..DISTLOCK_PERMITS_MAX) is the
             * library's rule, said in its words when acquiring. */
            if (cli_parse_int(optarg, LONG_MIN, LONG_MAX, &o->permits))
                return cli_usage_error("run", "invalid -n/--permits '%s' (the number of "
                                       "permits of the semaphore KEY, 1..%ld; to fail at once "
                                       "when the lock is held: --nonblock, the default)",
                                       cli_arg_shown(optarg, (char[256]){0}, 256),
                                       (long)DISTLOCK_PERMITS_MAX);
            o->permits_given = 1;
            break;
        case OPT_SHARED:
            o->shared = 1;
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
        case 'k':  /* the older spelling of --on-lost=term */
            o->on_lost = ON_LOST_TERM;
            break;
        case OPT_ON_LOST:
            if (parse_on_lost(optarg, &o->on_lost))
                return cli_usage_error("run", "invalid --on-lost '%s' (term, kill or ignore)",
                                       optarg);
            break;
        case OPT_KILL_SIGNAL:
            if (cli_parse_signal(optarg, &o->kill_sig))
                return cli_usage_error("run", "invalid --kill-signal '%s' (TERM, KILL, INT, "
                                       "HUP, a number...)", optarg);
            break;
        case OPT_KILL_AFTER:  /* --grace, or its older name --kill-after */
            if (cli_parse_duration(optarg, 0, &o->grace_ms))
                return cli_usage_error("run", "invalid --grace '%s' (a duration; 0 = "
                                       "never send SIGKILL)", optarg);
            break;
        case OPT_FENCE:
            o->fence = 1;
            break;
        case OPT_STATS_FILE:
            o->stats_file = optarg;
            break;
        default: /* ':' or '?' */
            return cli_getopt_error("run", opt, argv);
        }
    }
    if (optind >= argc)
        return cli_usage_error("run", "missing KEY and COMMAND");
    if (!argv[optind][0])
        return cli_usage_error("run", "KEY is empty");
    /* The keys end at the first "--" after KEY1; none: KEY1 alone. */
    int cmd = optind + 1;
    for (int i = optind + 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) {
            cmd = i;
            break;
        }
    }
    *keys = argv + optind;
    *nkeys = (size_t)(cmd - optind);
    if (cmd < argc && !strcmp(argv[cmd], "--"))
        cmd++;
    /* No key or command name starts with '-': this is an option put after
     * KEY. */
    for (int i = optind + 1; i < cmd && i < argc; i++)
        if (argv[i][0] == '-' && strcmp(argv[i], "--"))
            return cli_usage_error("run", "'%s' after KEY: options go before KEY "
                                   "(distlock run [options] KEY... -- COMMAND; the first "
                                   "'--' ends the keys: a COMMAND with a '--' of its own "
                                   "needs one right after KEY)",
                                   cli_arg_shown(argv[i], (char[256]){0}, 256));
    if (cmd >= argc)
        return cli_usage_error("run", "missing COMMAND after KEY");
    if (argv[cmd][0] == '-')
        return cli_usage_error("run", "'%s' after KEY: options go before KEY "
                               "(distlock run [options] KEY... -- COMMAND)",
                               cli_arg_shown(argv[cmd], (char[256]){0}, 256));
    /* Which primitive: the library has no semaphore or read lock over
     * several keys, nor a shared semaphore. */
    if (o->permits_given && *nkeys > 1)
        return cli_usage_error("run", "-n/--permits takes one KEY (a semaphore), not %zu "
                               "keys", *nkeys);
    if (o->shared && *nkeys > 1)
        return cli_usage_error("run", "--shared takes one KEY (a read lock), not %zu keys",
                               *nkeys);
    if (o->shared && o->permits_given)
        return cli_usage_error("run", "--shared and -n/--permits exclude each other (a read "
                               "lock or a permit of a semaphore)");
    *cmd_argv = argv + cmd;
    return RUN_GO_ON;
}

/* Read every pending signal. Before the command starts (child <= 0) the
 * first terminating one is returned in *stop; afterwards signals are
 * forwarded to the command. *chld is set on SIGCHLD, *cont (if given) on
 * SIGCONT, which is never forwarded as such. */
static void take_signals(int sfd, pid_t child, int *stop, int *chld, int *cont, int verbose)
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
        if (sig == SIGCONT) {  /* distlock continued (fg, bg): see continued() */
            if (cont)
                *cont = 1;
            continue;
        }
        if (child <= 0) {
            if (!*stop)
                *stop = sig;
            continue;
        }
        if (verbose)
            cli_err("forwarding %s to the command (process group %ld)", strsignal(sig),
                    (long)child);
        kill(-child, sig);  /* the command leads its own group (spawn_command) */
    }
}

/* Best effort: why is the key not ours? "held by another owner for 12.3s",
 * or by how many read locks. Returns 0 when no node shows a holder (any
 * more). */
static int explain_conflict(distlock_client *c, const char *key, char *buf, size_t size)
{
    int n = distlock_client_node_count(c);
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        distlock_holder_info h = { .size = sizeof h };
        int r = distlock_admin_holder(c, key, i, &h);
        if (r == 1) {
            char d[32];
            if (h.pttl_ms >= 0)
                snprintf(buf, size, " (it expires in %s unless renewed)",
                         cli_fmt_ms(h.pttl_ms, d, sizeof d));
            else
                snprintf(buf, size, " (it has no expiry)");
            return 1;
        }
        /* Read locks (or a semaphore's permits) hold it: each a lease. */
        if (r == 0 && h.holders > 0 && (h.kind == DISTLOCK_HOLDER_READERS ||
                                        h.kind == DISTLOCK_HOLDER_SEMAPHORE)) {
            snprintf(buf, size, " (%ld %s%s)", h.holders,
                     h.kind == DISTLOCK_HOLDER_READERS ? "read lock" : "permit",
                     h.holders == 1 ? "" : "s");
            return 1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- state */

/* The variables distlock sets for the command (any the caller had are
 * dropped: without --fence there is no DISTLOCK_FENCE at all, and a run
 * inside a run of several keys does not see the outer DISTLOCK_KEY_2).
 * env_families are the numbered ones: DISTLOCK_KEY_1, DISTLOCK_FENCE_1... */
static const char *const env_names[] = {"DISTLOCK_KEY", "DISTLOCK_TOKEN", "DISTLOCK_FENCE",
                                        "DISTLOCK_KEY_COUNT", "DISTLOCK_PERMITS"};
static const char *const env_families[] = {"DISTLOCK_KEY_", "DISTLOCK_FENCE_"};
#define NENV_NAMES (sizeof env_names / sizeof env_names[0])

/* What `run` holds while the command runs. */
enum run_kind { KIND_LOCK, KIND_READ, KIND_PERMIT, KIND_MANY };

struct run_state {
    struct run_opts o;
    const char *key;           /* the first key (the only one but with several) */
    char **keys;               /* every key, as given (argv) */
    size_t nkeys;
    enum run_kind kind;
    char what[400];            /* "the lock on 'k'", for messages (describe()) */
    char name[400];            /* "'k'" for a lock, else as `what` */
    char detail[512];          /* the library's detail of the last failed acquire */
    char **cmd;                /* the command's argv */
    sigset_t orig_mask;        /* the caller's signal mask, for the command */
    struct sigaction old_chld, old_pipe; /* the caller's dispositions, likewise */
    int sfd;                   /* signalfd of the blocked signals, or -1 */
    distlock_client *c;
    distlock_lock *lock;       /* freed (released if still held) at the end */
    long waited_ms;            /* how long acquiring took */
    int lost_fd;               /* the client's lost eventfd, or -1: poll the flag */
    char **env;                /* the command's environment: environ's entries... */
    char **env_own;            /* ...and these, which are ours to free */
    size_t nenv_own;
    pid_t pid;                 /* the command, once started: also its process group */
    int give_tty;              /* distlock was in the foreground at the start */
    int tty_stopped;           /* the command is stopped by SIGTTIN/SIGTTOU, distlock
                                * in the background: watch for the foreground */
    pid_t parent;              /* distlock's pid, for the child's PR_SET_PDEATHSIG check */
    int tty;                   /* distlock's controlling terminal (/dev/tty), or -1 */
    long t_start;              /* when it was started */
    int status;                /* its wait status, once reaped */
    int lost;                  /* the lock was found lost */
    int killed_for_lost;       /* --kill-on-lost signalled the command */
};

static void run_state_init(struct run_state *st)
{
    memset(st, 0, sizeof *st);
    st->sfd = -1;
    st->lost_fd = -1;
    st->pid = -1;
    st->tty = -1;
}

/* The one cleanup. The signal mask and dispositions are left as they are:
 * the process exits next, and a signal unblocked now would kill it with the
 * wrong status. */
static void run_state_free(struct run_state *st)
{
    distlock_lock_free(st->lock);  /* releases it unless released already */
    if (st->c && st->o.stats_file && st->o.stats_file[0])
        (void)cli_stats_save(st->o.stats_file, st->c);
    cli_stats_verbose(&st->o.co, st->c);
    distlock_client_free(st->c);
    if (st->sfd >= 0)
        close(st->sfd);
    if (st->tty >= 0)
        close(st->tty);
    for (size_t i = 0; i < st->nenv_own; i++)
        free(st->env_own[i]);
    free(st->env_own);
    free(st->env);
}

/* ---------------------------------------------------------------- steps */

/* Block the forwarded signals and SIGCHLD, and take them from st->sfd
 * instead. Must run before the client exists: the library's threads inherit
 * the mask, so only the main thread ever sees these signals. SIGCHLD must not
 * be ignored (children would be reaped for us) and a broken server socket
 * must not kill us; the caller's mask and dispositions are kept in st for the
 * command. Returns RUN_GO_ON or CLI_EXIT_SOFTWARE. */
static int block_signals(struct run_state *st)
{
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < NFORWARDED; i++)
        sigaddset(&set, forwarded[i]);
    sigaddset(&set, SIGCHLD);
    /* SIGCONT still continues distlock when blocked; taken from the
     * signalfd it says that distlock was continued (continued()). */
    sigaddset(&set, SIGCONT);
    sigprocmask(SIG_BLOCK, &set, &st->orig_mask);
    /* Blocked, not taken: distlock gives the terminal to the command's
     * group and takes it back from the background (tcsetpgrp), which
     * SIGTTOU would otherwise stop it for. The command gets the caller's
     * mask back (exec_command). */
    sigset_t ttou;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    sigprocmask(SIG_BLOCK, &ttou, NULL);
    struct sigaction dfl, ign;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ign = dfl;
    ign.sa_handler = SIG_IGN;
    sigaction(SIGCHLD, &dfl, &st->old_chld);
    sigaction(SIGPIPE, &ign, &st->old_pipe);
    st->sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (st->sfd < 0) {
        cli_err("signalfd: %s", strerror(errno));
        return CLI_EXIT_SOFTWARE;
    }
    return RUN_GO_ON;
}

/* Make st->c from the common options (it connects on the first acquire).
 * Returns RUN_GO_ON or the exit status (the reason printed). */
static int make_client(struct run_state *st)
{
    int rc = cli_client(&st->o.co, &st->c);
    return rc ? rc : RUN_GO_ON;
}

/* Held by another owner (NOTACQUIRED: also when the wait ran out), as the
 * exit status mapping says; nothing else is. */
static int is_conflict(int rc)
{
    return cli_exit_for_status(rc) == CLI_EXIT_CONFLICT;
}

/* ------------------------------------------------- the cancellable wait */

/* One library acquire of what the options ask for: a permit of a semaphore
 * (-n), all of several keys, a read lock (--shared, a flag) or a lock.
 * Which flags each takes is the library's rule (DISTLOCK_EINVAL names a
 * flag it refuses, e.g. --fence with -n). */
static int acquire_call(struct run_state *st, long wait_ms, unsigned flags)
{
    const struct run_opts *o = &st->o;
    int rc;
    if (st->kind == KIND_PERMIT)
        rc = distlock_semaphore_acquire(st->c, st->key, o->permits, o->ttl_ms, wait_ms, flags,
                                        NULL, &st->lock);
    else if (st->kind == KIND_MANY)
        rc = distlock_acquire_many(st->c, (const char *const *)st->keys, st->nkeys, o->ttl_ms,
                                   wait_ms, flags, NULL, &st->lock);
    else
        rc = distlock_acquire(st->c, st->key, o->ttl_ms, wait_ms,
                              flags | (st->kind == KIND_READ ? DISTLOCK_SHARED : 0), &st->lock);
    /* The library's detail (which key of several is held), for the message. */
    snprintf(st->detail, sizeof st->detail, "%s", rc ? distlock_last_error() : "");
    return rc;
}

/* "'k' is locked by another owner", or what stands for it for a read lock,
 * a permit or several keys, into buf. Returns buf. */
static const char *conflict_text(const struct run_state *st, char *buf, size_t size)
{
    switch (st->kind) {
    case KIND_READ:
        snprintf(buf, size, "'%s' is locked for writing by another owner, or a writer waits "
                 "for it", st->key);
        break;
    case KIND_PERMIT:
        snprintf(buf, size, "all %ld permits of the semaphore '%s' are taken", st->o.permits,
                 st->key);
        break;
    case KIND_MANY:
        snprintf(buf, size, "one of the %zu keys is locked by another owner%s%s; nothing "
                 "is held", st->nkeys, st->detail[0] ? ": " : "", st->detail);
        break;
    default:
        snprintf(buf, size, "'%s' is locked by another owner", st->key);
    }
    return buf;
}

/* The client whose wait a signal cancels, and the first such signal. */
static distlock_client *volatile wait_client;
static volatile sig_atomic_t wait_signal;

static void on_wait_signal(int sig)
{
    if (!wait_signal)
        wait_signal = sig;
    distlock_client_cancel(wait_client);  /* async-signal-safe */
}

/* The library asks before each sleep of the wait: a signal handled just
 * before the wait started (its cancel then concerned no call) is seen too. */
static int wait_interrupted(void *arg)
{
    (void)arg;
    return wait_signal != 0;
}

/* Wait up to wait_ms for the lock in one library call that any forwarded
 * signal cancels: the signals (blocked everywhere else) are unblocked for the
 * call, with on_wait_signal as their handler, then blocked again and the
 * caller's dispositions restored. A signal the caller ignores stays ignored.
 * The signal, if any, is returned in *stop; the call's status is returned. */
static int wait_cancellable(struct run_state *st, long wait_ms, unsigned flags, int *stop)
{
    sigset_t set;
    struct sigaction sa, old[NFORWARDED];
    int handled[NFORWARDED];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_wait_signal;  /* no SA_RESTART: the wait's poll() is interrupted */
    sigemptyset(&sa.sa_mask);
    sigemptyset(&set);
    for (int i = 0; i < NFORWARDED; i++)
        sigaddset(&sa.sa_mask, forwarded[i]);
    wait_client = st->c;
    wait_signal = 0;
    for (int i = 0; i < NFORWARDED; i++) {
        handled[i] = sigaction(forwarded[i], NULL, &old[i]) == 0 &&
                     old[i].sa_handler != SIG_IGN && sigaction(forwarded[i], &sa, NULL) == 0;
        if (handled[i])
            sigaddset(&set, forwarded[i]);
    }
    distlock_client_on_interrupt(st->c, wait_interrupted, NULL);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    int rc = acquire_call(st, wait_ms, flags);
    sigprocmask(SIG_BLOCK, &set, NULL);
    distlock_client_on_interrupt(st->c, NULL, NULL);
    for (int i = 0; i < NFORWARDED; i++)
        if (handled[i])
            sigaction(forwarded[i], &old[i], NULL);
    if (wait_signal && !*stop)
        *stop = wait_signal;
    return rc;
}

/* Try to acquire: once at once (so that -v can say that we wait), then, with
 * --wait, in one wait that a signal to stop (*stop) cancels. Returns the
 * library status of the last try (DISTLOCK_ECANCELED when a signal ended the
 * wait: *stop says which, and the caller exits 128+N), the lock in st->lock,
 * and the time spent in st->waited_ms. */
static int try_acquire(struct run_state *st, int *stop)
{
    const struct run_opts *o = &st->o;
    unsigned flags = DISTLOCK_AUTO_RENEW | (o->fence ? DISTLOCK_FENCING : 0);
    long t0 = now_ms();
    int chld = 0;
    char d[32];
    int rc = acquire_call(st, 0, flags);
    if (is_conflict(rc) && o->wait_ms != 0 && o->co.verbose) {
        char held[700];
        if (o->wait_ms == DISTLOCK_WAIT_FOREVER)
            cli_err("%s; waiting for it", conflict_text(st, held, sizeof held));
        else
            cli_err("%s; waiting up to %s", conflict_text(st, held, sizeof held),
                    cli_fmt_ms(o->wait_ms, d, sizeof d));
    }
    if (is_conflict(rc) && o->wait_ms != 0) {
        take_signals(st->sfd, 0, stop, &chld, NULL, 0);  /* any that came during the first try */
        long left = o->wait_ms;
        if (left != DISTLOCK_WAIT_FOREVER && (left -= now_ms() - t0) < 1)
            left = 1;
        if (!*stop)
            rc = wait_cancellable(st, left, flags, stop);
    }
    st->waited_ms = now_ms() - t0;
    if (rc == DISTLOCK_OK)
        take_signals(st->sfd, 0, stop, &chld, NULL, 0);
    return rc;
}

/* Acquire the lock (try_acquire) and say why not. Returns RUN_GO_ON with
 * st->lock held; 128+N when signal N arrived while waiting or just after the
 * lock was taken (then st->lock is released by the cleanup); --conflict-exit-
 * code when another owner holds it; the status for a library error. */
static int acquire_lock(struct run_state *st)
{
    const struct run_opts *o = &st->o;
    const char *key = st->key;
    char d1[32], d2[32], d3[32];
    int stop = 0;
    int rc = try_acquire(st, &stop);
    if (stop) {
        if (!o->co.quiet)
            cli_err("%s while %s %s; not running the command", strsignal(stop),
                    rc == DISTLOCK_OK ? "holding" : "waiting for", st->name);
        return 128 + stop;
    }
    if (is_conflict(rc)) {
        if (!o->co.quiet) {
            char why[96] = "", held[700];
            conflict_text(st, held, sizeof held);
            /* A lock: when it expires, read again (the wait may have
             * ended just as its holder released it). */
            if (st->kind == KIND_READ)
                (void)explain_conflict(st->c, key, why, sizeof why);
            if (st->kind == KIND_LOCK && !explain_conflict(st->c, key, why, sizeof why))
                cli_err("'%s' was locked by another owner, who released it since (or "
                        "holds it only on nodes that no longer answer); not running the "
                        "command", key);
            else if (o->wait_ms != 0)
                cli_err("%s%s; gave up after waiting %s; not running the command", held, why,
                        cli_fmt_ms(st->waited_ms, d1, sizeof d1));
            else
                cli_err("%s%s; not running the command", held, why);
        }
        return (int)o->conflict_exit;
    }
    if (rc != DISTLOCK_OK) {
        const char *take = st->kind == KIND_LOCK ? "lock" : "take";
        char what[600];
        if (rc == DISTLOCK_ETIMEDOUT)  /* not "held": granted too late, and undone */
            snprintf(what, sizeof what, "cannot %s %s (nothing is held; is a --ttl of "
                     "%s too short for these servers?)", take, st->name,
                     cli_fmt_ms(o->ttl_ms, d1, sizeof d1));
        else
            snprintf(what, sizeof what, "cannot %s %s", take, st->name);
        return cli_report(what, rc);
    }
    if (o->co.verbose) {
        char fb[200] = "";
        if (o->fence && st->nkeys > 1) {
            size_t off = (size_t)snprintf(fb, sizeof fb, ", fences");
            for (size_t i = 0; i < st->nkeys && off < sizeof fb; i++)
                off += (size_t)snprintf(fb + off, sizeof fb - off, "%s%lld", i ? "," : " ",
                                        (long long)distlock_lock_fence_at(st->lock, i));
        } else if (o->fence) {
            snprintf(fb, sizeof fb, ", fence %lld", (long long)distlock_lock_fence(st->lock));
        }
        cli_err("acquired %s after %s (token %s%s, ttl %s, renewed every %s)", st->name,
                cli_fmt_ms(st->waited_ms, d1, sizeof d1), distlock_lock_token(st->lock), fb,
                cli_fmt_ms(o->ttl_ms, d2, sizeof d2),
                cli_fmt_ms(o->ttl_ms / 3 ? o->ttl_ms / 3 : 1, d3, sizeof d3));
    }
    return RUN_GO_ON;
}

/* Is environ's entry e one distlock sets (env_names, env_families)? */
static int env_is_ours(const char *e)
{
    for (size_t k = 0; k < NENV_NAMES; k++) {
        size_t l = strlen(env_names[k]);
        if (!strncmp(e, env_names[k], l) && e[l] == '=')
            return 1;
    }
    for (size_t k = 0; k < sizeof env_families / sizeof env_families[0]; k++) {
        size_t l = strlen(env_families[k]);
        if (strncmp(e, env_families[k], l))
            continue;
        const char *p = e + l;
        while (*p >= '0' && *p <= '9')
            p++;
        if (p > e + l && *p == '=')
            return 1;
    }
    return 0;
}

/* Add "NAME=VALUE" (NAME_i when i > 0) to st->env_own. Returns 0 or -1 when
 * out of memory. */
static int env_add(struct run_state *st, const char *name, size_t i, const char *value)
{
    char *s;
    if ((i ? asprintf(&s, "%s_%zu=%s", name, i, value)
           : asprintf(&s, "%s=%s", name, value)) < 0)
        return -1;
    st->env_own[st->nenv_own++] = s;
    return 0;
}

/* The command's environment in st->env: ours without any variable distlock
 * sets, then DISTLOCK_KEY (the first key), DISTLOCK_TOKEN, DISTLOCK_FENCE
 * (one key, --fence); several keys: DISTLOCK_KEY_COUNT, DISTLOCK_KEY_1..N
 * in the order given and, with --fence, DISTLOCK_FENCE_1..N (the fence of
 * DISTLOCK_KEY_i; no DISTLOCK_FENCE: a set has no single fence); a permit:
 * DISTLOCK_PERMITS. Returns 0, or -1 when out of memory. */
static int make_env(struct run_state *st)
{
    size_t n = 0, most = 5 + 2 * st->nkeys;
    while (environ[n])
        n++;
    st->env = calloc(n + most + 1, sizeof *st->env);
    st->env_own = calloc(most, sizeof *st->env_own);
    if (!st->env || !st->env_own)
        return -1;
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (!env_is_ours(environ[i]))
            st->env[j++] = environ[i];
    char v[32];
    if (env_add(st, "DISTLOCK_KEY", 0, st->key) ||
        env_add(st, "DISTLOCK_TOKEN", 0, distlock_lock_token(st->lock)))
        return -1;
    if (st->kind == KIND_MANY) {
        snprintf(v, sizeof v, "%zu", st->nkeys);
        if (env_add(st, "DISTLOCK_KEY_COUNT", 0, v))
            return -1;
        for (size_t i = 0; i < st->nkeys; i++) {
            if (env_add(st, "DISTLOCK_KEY", i + 1, st->keys[i]))
                return -1;
            snprintf(v, sizeof v, "%lld", (long long)distlock_lock_fence_at(st->lock, i));
            if (st->o.fence && env_add(st, "DISTLOCK_FENCE", i + 1, v))
                return -1;
        }
    } else if (st->o.fence) {
        snprintf(v, sizeof v, "%lld", (long long)distlock_lock_fence(st->lock));
        if (env_add(st, "DISTLOCK_FENCE", 0, v))
            return -1;
    }
    if (st->kind == KIND_PERMIT) {
        snprintf(v, sizeof v, "%ld", st->o.permits);
        if (env_add(st, "DISTLOCK_PERMITS", 0, v))
            return -1;
    }
    for (size_t k = 0; k < st->nenv_own; k++)
        st->env[j++] = st->env_own[k];
    st->env[j] = NULL;
    return 0;
}

/* In the child, between fork and exec: only async-signal-safe calls (the
 * parent has threads). Gives the command the caller's signal mask and
 * dispositions; on failure reports errno on errfd and exits 126 or 127. */
static void exec_command(const struct run_state *st, int errfd) __attribute__((noreturn));
static void exec_command(const struct run_state *st, int errfd)
{
    /* Its own group (the parent sets it too: whichever runs first), given
     * the terminal before it can read from it. */
    setpgid(0, 0);
    if (st->give_tty)
        (void)tcsetpgrp(st->tty, getpid());
    /* distlock renews the lease only while it lives: if it dies (SIGKILL,
     * as `timeout -k` sends to its own group, which the command is no longer
     * in; OOM killer), the lease runs out within the TTL while nothing stops
     * the command. SIGKILL, not SIGTERM: nobody is left to send SIGKILL
     * after a grace, and a command that ignores SIGTERM would run on without
     * the lock for as long as it likes. It reaches the command only, not
     * what the command started (its group). Checked after it is set: a
     * distlock that died before would never send it. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != st->parent)
        _exit(CLI_EXIT_SOFTWARE);
    sigaction(SIGCHLD, &st->old_chld, NULL);
    sigaction(SIGPIPE, &st->old_pipe, NULL);
    sigprocmask(SIG_SETMASK, &st->orig_mask, NULL);
    execvpe(st->cmd[0], st->cmd, st->env);
    int e = errno;
    ssize_t w = write(errfd, &e, sizeof e);
    (void)w;
    _exit(e == ENOENT ? CLI_EXIT_NOT_FOUND : CLI_EXIT_CANNOT_EXEC);
}

/* Start the command (st->pid, st->t_start), holding the lock, and wait until
 * it has exec'd or failed to (then say why: the child exits 126 or 127, and
 * is reaped and its status passed on like any command's). Returns RUN_GO_ON
 * once a child exists, else CLI_EXIT_SOFTWARE. */
static int spawn_command(struct run_state *st)
{
    st->lost_fd = distlock_client_lost_fd(st->c);
    int errpipe[2];
    if (make_env(st) < 0) {
        cli_err("cannot start the command: out of memory");
        return CLI_EXIT_SOFTWARE;
    }
    if (pipe2(errpipe, O_CLOEXEC) < 0) {
        cli_err("cannot start the command: %s", strerror(errno));
        return CLI_EXIT_SOFTWARE;
    }
    /* Nothing to close here: every descriptor the library opens is
     * close-on-exec (its sockets, the subscriber's pipe, the lost eventfd,
     * the resolver's pipe), and so are ours (sfd, errpipe). The command gets
     * exactly the caller's descriptors, as with flock(1); cli/tests/run.sh
     * t_descriptors checks it. */
    /* The controlling terminal, whatever stdin is (`echo | distlock run`
     * at a prompt has one too, and a command may read it, as sudo and ssh
     * do). It goes to the command's group now only if distlock is in its
     * foreground (not a background job); continued() gives it later when
     * distlock is brought to the foreground. */
    st->tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    st->give_tty = st->tty >= 0 && tcgetpgrp(st->tty) == getpgrp();
    st->parent = getpid();
    st->t_start = now_ms();
    st->pid = fork();
    if (st->pid < 0) {
        cli_err("fork: %s", strerror(errno));
        close(errpipe[0]);
        close(errpipe[1]);
        return CLI_EXIT_SOFTWARE;
    }
    if (st->pid == 0) {
        close(errpipe[0]);
        exec_command(st, errpipe[1]);
    }
    close(errpipe[1]);
    setpgid(st->pid, st->pid);  /* EACCES once it has exec'd: it did it itself */
    if (st->give_tty)
        (void)tcsetpgrp(st->tty, st->pid);
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
        cli_err("cannot run '%s': %s", st->cmd[0], strerror(exec_errno));
    return RUN_GO_ON;
}

/* Why the lock is lost, in the library's words (distlock_lock_lost() sets
 * them as the detail): only a lock the servers said is no longer ours is
 * called gone; with servers that do not reply in time it may still be
 * there, but nothing vouches for it. A release that found it not ours (the
 * flag not set) is the first kind. */
static const char *lost_why(const struct run_state *st)
{
    if (distlock_lock_lost(st->lock))
        return distlock_last_error();
    return "it was deleted, expired or taken over (the servers no longer hold our token)";
}

/* The lock was found lost while the command runs: say so, and act as
 * --on-lost says. term (the default): --kill-signal now, SIGKILL once
 * --grace has passed; returns the time to send it at (or -1). kill: SIGKILL
 * now. ignore: the command goes on. The signals go to the command's process
 * group, so a script's children stop with it. */
static long on_lost(struct run_state *st)
{
    const struct run_opts *o = &st->o;
    int sig = o->on_lost == ON_LOST_KILL ? SIGKILL : o->kill_sig;
    st->lost = 1;
    if (o->on_lost == ON_LOST_IGNORE) {
        cli_err("lost %s while the command was running: %s; the command goes "
                "on WITHOUT the lock (--on-lost=ignore)", st->what, lost_why(st));
        return -1;
    }
    char g[32], then[48] = "";
    if (o->on_lost == ON_LOST_TERM && sig != SIGKILL && o->grace_ms > 0)
        snprintf(then, sizeof then, ", SIGKILL after %s", cli_fmt_ms(o->grace_ms, g, sizeof g));
    cli_err("lost %s while the command was running: %s; stopping the command "
            "(pid %ld): %s now%s (--on-lost=%s)",
            st->what, lost_why(st), (long)st->pid, sig == SIGKILL ? "SIGKILL" : strsignal(sig),
            then, on_lost_names[o->on_lost]);
    kill(-st->pid, sig);
    st->killed_for_lost = 1;
    if (o->grace_ms > 0 && sig != SIGKILL)
        return now_ms() + o->grace_ms;
    return -1;
}

/* distlock was continued (SIGCONT: the shell's fg or bg, or stopped_command
 * resuming). In the foreground (the terminal is distlock's group's) the
 * terminal goes to the command's group, which is continued: a command a
 * background distlock saw stopped by SIGTTIN now reads the terminal. In the
 * background nothing changes. */
static void continued(struct run_state *st)
{
    if (st->tty < 0 || tcgetpgrp(st->tty) != getpgrp())
        return;
    st->tty_stopped = 0;
    (void)tcsetpgrp(st->tty, st->pid);
    kill(-st->pid, SIGCONT);
}

/* The command stopped. With the terminal (Ctrl-Z reaches its group), as a
 * shell's job would: distlock takes the terminal back and stops itself, so
 * the shell that started it sees its job stopped and gets the terminal;
 * when continued (fg or bg) it gives the terminal back if it is in the
 * foreground, and continues the command's group. Stopped by SIGTTIN or
 * SIGTTOU (it used the terminal without having it): if distlock is in the
 * foreground the terminal goes to the command's group, which is continued;
 * if distlock is a background job the command stays stopped, as a shell
 * leaves such a job, while distlock goes on renewing, and is resumed when
 * distlock is brought to the foreground (continued(), or the check every
 * GROUP_POLL_MS in supervise(): `fg` sends no SIGCONT to a job that is not
 * stopped). Stopped by someone else's signal: left as it is. */
static void stopped_command(struct run_state *st, int sig)
{
    if (st->tty < 0)
        return;
    if (sig == SIGTTIN || sig == SIGTTOU) {
        st->tty_stopped = 1;
        continued(st);
        return;
    }
    if (tcgetpgrp(st->tty) != st->pid)
        return;
    (void)tcsetpgrp(st->tty, getpgrp());
    kill(getpid(), SIGSTOP);
    if (tcgetpgrp(st->tty) == getpgrp())
        (void)tcsetpgrp(st->tty, st->pid);
    kill(-st->pid, SIGCONT);
}

/* The command has exited: the terminal is distlock's again; after a lost
 * lock whatever the command left running in its group is killed too (it got
 * the signal with the command; the group's id cannot be reused while any
 * member lives, so this reaches only them). */
static void command_done(struct run_state *st)
{
    if (st->tty >= 0 && tcgetpgrp(st->tty) == st->pid)
        (void)tcsetpgrp(st->tty, getpgrp());
    if (st->killed_for_lost)
        kill(-st->pid, SIGKILL);
}

/* Is anything left in the command's process group? Only ESRCH says no (EPERM:
 * a member runs as another user). */
static int group_alive(pid_t pgid)
{
    return kill(-pgid, 0) == 0 || errno != ESRCH;
}

/* Until the command has exited, and then until what it left running in its
 * process group (`worker &`) has exited too, as flock(1)'s lock lasts while
 * any inheritor of the descriptor lives: forward signals to the group, watch
 * for the loss of the lock (on_lost; SIGKILL once --grace has passed), reap
 * the command into st->status. The group is polled every GROUP_POLL_MS
 * once the command is reaped. The lock is renewed meanwhile by the library's
 * thread. */
static void supervise(struct run_state *st)
{
    int reaped = 0, stop = 0;
    long kill_deadline = -1;
    char d[32];
    for (;;) {
        struct pollfd pf[2];
        int n = 0;
        pf[n].fd = st->sfd; pf[n].events = POLLIN; pf[n].revents = 0; n++;
        if (st->lost_fd >= 0 && !st->lost) {
            pf[n].fd = st->lost_fd; pf[n].events = POLLIN; pf[n].revents = 0; n++;
        }
        int timeout = -1;
        if (st->lost_fd < 0 && !st->lost)
            timeout = LOST_POLL_MS;
        if ((reaped || st->tty_stopped) && (timeout < 0 || GROUP_POLL_MS < timeout))
            timeout = GROUP_POLL_MS;
        if (kill_deadline >= 0) {
            long left = kill_deadline - now_ms();
            if (left < 0) left = 0;
            if (timeout < 0 || left < timeout) timeout = (int)left;
        }
        if (poll(pf, (nfds_t)n, timeout) < 0 && errno != EINTR) {
            cli_err("poll: %s", strerror(errno));
            break; /* still reap the child below */
        }
        int chld = 0, cont = 0;
        take_signals(st->sfd, st->pid, &stop, &chld, &cont, st->o.co.verbose);
        if ((cont || st->tty_stopped) && !reaped)
            continued(st);
        if (chld && !reaped && waitpid(st->pid, &st->status, WNOHANG | WUNTRACED) == st->pid) {
            if (WIFSTOPPED(st->status)) {
                stopped_command(st, WSTOPSIG(st->status));
                continue;
            }
            reaped = 1;
            command_done(st);
            if (st->killed_for_lost || !group_alive(st->pid))
                return;
            if (!st->o.co.quiet)
                cli_err("the command exited; holding %s until what it left running in its "
                        "process group (%ld) has exited too", st->name, (long)st->pid);
        }
        if (reaped && !group_alive(st->pid))
            return;
        int fd_says = 0;
        if (n > 1 && (pf[1].revents & POLLIN)) {
            uint64_t cnt;
            ssize_t r = read(st->lost_fd, &cnt, sizeof cnt);
            (void)r;
            fd_says = 1;
        }
        if (!st->lost && (fd_says || distlock_lock_lost(st->lock))) {
            kill_deadline = on_lost(st);
            if (reaped && st->o.on_lost == ON_LOST_IGNORE)
                return;  /* --on-lost=ignore: nothing left to hold */
        }
        if (kill_deadline >= 0 && now_ms() >= kill_deadline) {
            cli_err("the command (pid %ld) is still running %s after losing the lock "
                    "(--grace); sending SIGKILL to its process group", (long)st->pid,
                    cli_fmt_ms(st->o.grace_ms, d, sizeof d));
            kill(-st->pid, SIGKILL);
            kill_deadline = -1;
        }
    }
    if (!reaped) {
        /* poll failed: wait for the command the plain way. */
        while (waitpid(st->pid, &st->status, 0) < 0 && errno == EINTR)
            ;
        command_done(st);
    }
}

/* The exit status a shell would give for the command's wait status. */
static int command_exit_status(int wstatus)
{
    return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus)
         : WIFSIGNALED(wstatus) ? 128 + WTERMSIG(wstatus) : CLI_EXIT_SOFTWARE;
}

/* Release the lock once the command has exited, and say how it went: a lock
 * found lost only now is reported (st->lost), a failed release too. A lock
 * already lost is released only to tidy up (compare-and-delete: another
 * owner's key is safe); its lease has ended, so a failure then says that
 * nothing is held rather than "it expires by itself". */
static void release_lock(struct run_state *st)
{
    long ran = now_ms() - st->t_start;
    char d[32];
    int rc = distlock_release(st->lock);
    if (rc == DISTLOCK_ENOTOWNER) {
        if (!st->lost)
            cli_err("lost %s before the command ended: %s; the command "
                    "finished WITHOUT the lock", st->what, lost_why(st));
        st->lost = 1;
    } else if (rc != DISTLOCK_OK) {
        char what[600];
        if (st->lost || distlock_lock_lost(st->lock))
            snprintf(what, sizeof what, "could not release %s, lost earlier (its lease has "
                     "already ended: nothing is held)", st->name);
        else
            snprintf(what, sizeof what, "could not release %s (it expires by itself "
                     "within %s)", st->name, cli_fmt_ms(st->o.ttl_ms, d, sizeof d));
        cli_report(what, rc);
    }
    if (st->o.co.verbose) {
        const char *what = rc == DISTLOCK_OK ? "released" : "did not release";
        if (WIFSIGNALED(st->status))
            cli_err("%s %s; the command ran %s and was killed by %s", what, st->name,
                    cli_fmt_ms(ran, d, sizeof d), strsignal(WTERMSIG(st->status)));
        else
            cli_err("%s %s; the command ran %s and exited with status %d", what, st->name,
                    cli_fmt_ms(ran, d, sizeof d), command_exit_status(st->status));
    }
}

/* What is held, in st->kind and, for messages, st->what: "the lock on
 * 'k'", "the read lock on 'k'", "a permit of the semaphore 'k'", "the
 * locks on 'a', 'b' and 'c'" (the first keys and a count past 300 bytes). */
static void describe(struct run_state *st)
{
    const struct run_opts *o = &st->o;
    st->kind = o->permits_given ? KIND_PERMIT : st->nkeys > 1 ? KIND_MANY
             : o->shared ? KIND_READ : KIND_LOCK;
    if (st->kind == KIND_LOCK)
        snprintf(st->what, sizeof st->what, "the lock on '%.200s'", st->key);
    else if (st->kind == KIND_READ)
        snprintf(st->what, sizeof st->what, "the read lock on '%.200s'", st->key);
    else if (st->kind == KIND_PERMIT)
        snprintf(st->what, sizeof st->what, "a permit of the semaphore '%.200s'", st->key);
    if (st->kind == KIND_LOCK)
        snprintf(st->name, sizeof st->name, "'%.200s'", st->key);
    if (st->kind != KIND_MANY) {
        if (st->kind != KIND_LOCK)
            memcpy(st->name, st->what, sizeof st->name);
        return;
    }
    size_t off = (size_t)snprintf(st->what, sizeof st->what, "the locks on");
    for (size_t i = 0; i < st->nkeys; i++) {
        const char *sep = i == 0 ? " " : i + 1 == st->nkeys ? " and " : ", ";
        if (off + strlen(st->keys[i]) + 8 > 300) {
            snprintf(st->what + off, sizeof st->what - off, " and %zu more keys", st->nkeys - i);
            break;
        }
        off += (size_t)snprintf(st->what + off, sizeof st->what - off, "%s'%s'", sep,
                                st->keys[i]);
    }
    memcpy(st->name, st->what, sizeof st->name);
}

/* parse -> block signals -> make the client -> acquire -> spawn -> supervise
 * -> release -> exit status; any step up to spawn may end the run with its
 * status, and run_state_free() cleans up after every one. */
int cli_run(int argc, char **argv)
{
    struct run_state st;
    run_state_init(&st);
    int rc = parse_run(argc, argv, &st.o, &st.keys, &st.nkeys, &st.cmd);
    if (rc != RUN_GO_ON)
        goto out;
    st.key = st.keys[0];
    describe(&st);
    if ((rc = block_signals(&st)) != RUN_GO_ON ||
        (rc = make_client(&st)) != RUN_GO_ON ||
        (rc = acquire_lock(&st)) != RUN_GO_ON ||
        (rc = spawn_command(&st)) != RUN_GO_ON)
        goto out;
    supervise(&st);
    release_lock(&st);
    rc = st.killed_for_lost ? (int)st.o.lost_exit : command_exit_status(st.status);
out:
    run_state_free(&st);
    return rc;
}
