/*
 * main.c -- the distlock command: verb dispatch, help and version.
 */
#include <string.h>

#include "cli.h"

void cli_help_main(FILE *f)
{
    fprintf(f,
"Usage: distlock run [options] KEY -- COMMAND [ARGS...]\n"
"       distlock run -n N [options] KEY -- COMMAND [ARGS...]   (a semaphore)\n"
"       distlock run --shared [options] KEY -- COMMAND [ARGS...]   (a read lock)\n"
"       distlock run [options] KEY1 KEY2... -- COMMAND [ARGS...]   (all or none)\n"
"       distlock status [--json] [options] KEY\n"
"       distlock list [--json] [--limit N] [options] PATTERN\n"
"       distlock release (--force | --token TOKEN) [options] KEY\n"
"       distlock stats [--prometheus] [FILE]\n"
"       distlock help [VERB] | --help | --version\n"
"\n"
"Distributed locks on Redis, like flock(1) across hosts.\n"
"\n"
"Verbs:\n"
"  run      acquire KEY, run COMMAND while the lease is renewed, release it when\n"
"           COMMAND exits, and exit with COMMAND's status (-n N: one of N permits;\n"
"           --shared: a read lock; several keys: all of them or none)\n"
"  status   show whether KEY is held, by which token and for how long, per node;\n"
"           a semaphore's permits held, a key's readers\n"
"  list     the locks whose keys match PATTERN (SCAN, bounded), their kind, TTL\n"
"           left per node\n"
"  release  administrative release of KEY (--force: whoever holds it)\n"
"  stats    print the counters 'run --stats-file' accumulated (--prometheus)\n"
"\n"
"Servers: --servers URI[,URI...], else $DISTLOCK_SERVERS, else %s.\n"
"One URI is a single-instance lock; N URIs of independent masters are Redlock\n"
"(quorum N/2+1). URI: redis://[user[:password]@]host[:port][/db],\n"
"unix:///path/to.sock[?db=N], rediss:// (TLS),\n"
"redis-sentinel://HOST[:PORT][,...]/MASTER, redis-cluster://HOST[:PORT][,...],\n"
"rediss-sentinel://, rediss-cluster:// (see distlock(1)).\n"
"\n"
"Exit statuses: 64 bad arguments, 69 servers unreachable or silent / no quorum\n"
"(never \"held\"), 70 internal error, 75 lock held elsewhere (run; see\n"
"--conflict-exit-code), 79 lock lost and command terminated (run --on-lost),\n"
"130 wait cancelled. See distlock(1).\n"
"\n"
"'distlock VERB --help' describes each verb.\n", CLI_DEFAULT_SERVERS);
}

void cli_help_run(FILE *f)
{
    fprintf(f,
"Usage: distlock run [options] KEY [--] COMMAND [ARGS...]\n"
"       distlock run -n N [options] KEY [--] COMMAND [ARGS...]\n"
"       distlock run --shared [options] KEY [--] COMMAND [ARGS...]\n"
"       distlock run [options] KEY1 KEY2... -- COMMAND [ARGS...]\n"
"\n"
"Acquire the lock KEY (at once, or waiting up to --wait), run COMMAND with the\n"
"lease renewed every TTL/3 while it runs, release the lock when COMMAND exits,\n"
"and exit with COMMAND's status (128+N if a signal N killed it).\n"
"If the lock is not obtained, COMMAND is not run: a message says why and\n"
"distlock exits with status 75 (or --conflict-exit-code).\n"
"\n"
"What is held:\n"
"  KEY                         the lock KEY (exclusive; also excludes readers)\n"
"  -n, --permits N KEY         one of the N permits of the semaphore KEY: at most\n"
"                              N runs hold one at once, across hosts (N: 1..%ld)\n"
"      --shared KEY            a read lock on KEY (like flock -s): readers share\n"
"                              KEY, a plain run (a writer) excludes them\n"
"  KEY1 KEY2... -- COMMAND     the locks on every KEY, all or none, as one lease\n"
"                              (the first '--' after KEY1 ends the keys; without\n"
"                              one the first word is the one KEY)\n"
"-n and --shared take one KEY, and exclude each other. --fence is for locks\n"
"(one KEY or several), not for -n or --shared.\n"
"\n"
"Options:\n"
"  -t, --ttl DUR               lease time; renewed at TTL/3 (default 30s)\n"
"  -w, --wait DUR              wait up to DUR for the lock, 'forever' for no limit\n"
"                              (default 0: fail at once)\n"
"      --nonblock              fail at once if the lock is held (same as --wait 0)\n"
"  -E, --conflict-exit-code N  exit status when the lock is held elsewhere (default 75)\n"
"      --on-lost ACTION        if the lock is lost while COMMAND runs: 'term'\n"
"                              (default: send --kill-signal, then SIGKILL after\n"
"                              --grace), 'kill' (SIGKILL at once) or 'ignore'\n"
"                              (say so, COMMAND goes on without the lock, its\n"
"                              status is kept); term and kill exit with\n"
"                              --lost-exit-code\n"
"  -k, --kill-on-lost          same as --on-lost term (the default)\n"
"      --kill-signal SIG       first signal of --on-lost term (default TERM)\n"
"      --grace DUR             then SIGKILL if still running (default 10s; 0: never;\n"
"                              older name: --kill-after)\n"
"      --lost-exit-code N      exit status after --on-lost term/kill acted (default 79)\n"
"      --fence                 also take a fencing token: $DISTLOCK_FENCE (several\n"
"                              keys: $DISTLOCK_FENCE_1.. in the order of the keys)\n"
"      --stats-file FILE       at exit, add this run's counters to FILE\n"
"                              ($DISTLOCK_STATS_FILE; see 'distlock stats'; -v\n"
"                              prints them on stderr)\n"
"%s"
"\n"
"DUR is a number with an optional unit: ms, s (the default), m, h; e.g. 500ms,\n"
"1.5, 30s, 2m. Options go before KEY; everything after KEY [--] is COMMAND.\n"
"\n"
"COMMAND gets $DISTLOCK_KEY and $DISTLOCK_TOKEN (the lock's owner token); with\n"
"several keys also $DISTLOCK_KEY_COUNT and $DISTLOCK_KEY_1.. (DISTLOCK_KEY is the\n"
"first); with -n, $DISTLOCK_PERMITS. It runs\n"
"in distlock's process group; HUP, INT, QUIT, TERM, USR1 and USR2 sent to\n"
"distlock are forwarded to it (terminal-generated ones reach it directly), and\n"
"the lock stays held until it has exited. If the lock is lost while it runs\n"
"(expired, deleted, taken over), distlock says so on stderr and stops COMMAND\n"
"(--on-lost term, the default; exit 79); with --on-lost ignore COMMAND goes on\n"
"and distlock exits with its status.\n"
"\n"
"Exit status: COMMAND's status; 75 lock held elsewhere (-n: every permit taken;\n"
"several keys: one of them held); 79 lost (--on-lost term/kill);\n"
"64 bad arguments (also -n out of range, a key given twice, a flag the primitive\n"
"does not take); 69 servers unreachable or silent, no quorum, a key of another\n"
"kind (a semaphore locked as a lock...), or the lock\n"
"granted only after the ttl was used up (nothing held); 70 internal error;\n"
"126 COMMAND not executable; 127 COMMAND not found; 128+N killed by signal N.\n",
        (long)DISTLOCK_PERMITS_MAX, cli_common_help());
}

void cli_help_status(FILE *f)
{
    fprintf(f,
"Usage: distlock status [--json] [options] KEY\n"
"\n"
"Show whether KEY is held, by which owner token, on how many nodes and how long\n"
"its lease has left: the library's verdict from one round to every node (a\n"
"semaphore: its permits held of N; read locks: how many). Then\n"
"each node's view, read on its own (for display). Reads only; never changes the\n"
"lock.\n"
"\n"
"Options:\n"
"      --json                  one JSON object instead: key, verdict, held, token,\n"
"                              holder_nodes, nodes_total, quorum, answered, ttl_ms,\n"
"                              kind, holders, permits, writer,\n"
"                              fence, owner (host, pid, program, since_ms, label,\n"
"                              ttl_ms; null if none), nodes[] (uri, state, token,\n"
"                              ttl_ms, fence);\n"
"                              see distlock(1). Printed with -q too.\n"
"%s"
"\n"
"Exit status: 0 held (one token on a quorum of nodes, or any permit or read lock);\n"
"1 not held; 69 unknown\n"
"(the nodes that did not answer could change the verdict); 64 bad arguments.\n", cli_common_help());
}

void cli_help_release(FILE *f)
{
    fprintf(f,
"Usage: distlock release --force [options] KEY\n"
"       distlock release --token TOKEN [options] KEY\n"
"\n"
"Release KEY by hand. With --token, only if TOKEN holds it (compare-and-delete,\n"
"as the owner would). With --force, whoever holds it: the running owner is not\n"
"told until its next renewal finds the lock lost, so use it for stale locks.\n"
"\n"
"Options:\n"
"  -f, --force                 delete KEY on every node, whoever holds it\n"
"      --token TOKEN           delete KEY only where TOKEN holds it\n"
"%s"
"\n"
"Exit status: 0 released; 1 nothing to release (not held / other token);\n"
"69 servers unreachable or no quorum; 64 bad arguments.\n", cli_common_help());
}

/* The verbs: one table for dispatch and help. */
static const struct verb {
    const char *name;
    int (*run)(int argc, char **argv);
    void (*help)(FILE *f);
} verbs[] = {
    {"run", cli_run, cli_help_run},
    {"status", cli_status, cli_help_status},
    {"release", cli_release, cli_help_release},
    {"stats", cli_stats, cli_help_stats},
    {"list", cli_list, cli_help_list},
};

static const struct verb *find_verb(const char *name)
{
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++)
        if (!strcmp(name, verbs[i].name))
            return &verbs[i];
    return NULL;
}

static int help_for(const char *name, FILE *f)
{
    const struct verb *v = name ? find_verb(name) : NULL;
    if (!name)
        cli_help_main(f);
    else if (v)
        v->help(f);
    else
        return cli_usage_error(NULL, "no help for unknown verb '%s'",
                               cli_arg_shown(name, (char[256]){0}, 256));
    return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error(NULL, "missing verb (run, status, release, list)");
    const char *verb = argv[1];
    const struct verb *v = find_verb(verb);
    if (v)
        return v->run(argc - 1, argv + 1);
    if (!strcmp(verb, "help") || !strcmp(verb, "--help") || !strcmp(verb, "-h")) {
        if (argc > 3)
            return cli_usage_error(NULL, "help takes at most one VERB");
        return help_for(argc > 2 ? argv[2] : NULL, stdout);
    }
    if (!strcmp(verb, "version") || !strcmp(verb, "--version") || !strcmp(verb, "-V")) {
        printf("distlock %s (libdistlock %s)\n", DISTLOCK_VERSION_STRING,
               distlock_version_string());
        return CLI_EXIT_OK;
    }
    return cli_usage_error(NULL, "unknown verb '%s' (run, status, release, list)",
                           cli_arg_shown(verb, (char[256]){0}, 256));
}
