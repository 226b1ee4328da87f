/*
 * cli.h -- shared pieces of the distlock command: option values, parsing of
 * durations and numbers, the client factory and the exit statuses.
 */
#ifndef DISTLOCK_CLI_H
#define DISTLOCK_CLI_H

#include <stdio.h>

#include "distlock.h"

/* Exit statuses (documented in distlock(1) and cli/README.md). The values
 * below 64 and from 126 up belong to the command `run` executes. */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_NO = 1,             /* status: not held; release: nothing released */
    CLI_EXIT_USAGE = 64,         /* EX_USAGE: bad arguments */
    CLI_EXIT_NOINPUT = 66,       /* EX_NOINPUT: stats: the file cannot be read */
    CLI_EXIT_UNAVAILABLE = 69,   /* EX_UNAVAILABLE: no usable answer from the servers:
                                    unreachable / silent, no quorum, server error, a grant
                                    that came after the ttl was used up */
    CLI_EXIT_SOFTWARE = 70,      /* EX_SOFTWARE: out of memory, fork failed, the system
                                    refused a resource, internal error */
    CLI_EXIT_CONFLICT = 75,      /* EX_TEMPFAIL: lock held elsewhere (default of --conflict-exit-code) */
    CLI_EXIT_LOST = 79,          /* lock lost, command terminated (default of --lost-exit-code) */
    CLI_EXIT_CANNOT_EXEC = 126,  /* command found but not executable */
    CLI_EXIT_NOT_FOUND = 127,    /* command not found */
    CLI_EXIT_CANCELED = 130      /* 128+SIGINT: a wait cancelled (run: 128+N of the signal) */
};

#define CLI_DEFAULT_SERVERS "redis://127.0.0.1:6379"
#define CLI_DEFAULT_TTL_MS 30000L

/* One library option to set on the client, from a flag or the environment.
 * The option table (distlock_option_by_name) says what the option is and
 * the library checks the value when cli_client() sets it: the command keeps
 * no ranges or defaults of its own. */
enum cli_value_kind {
    CLI_VALUE_LONG,      /* `value` (a flag's duration already in ms, a switch) */
    CLI_VALUE_TEXT,      /* `text`, given to the library as it is */
    CLI_VALUE_DURATION   /* `text`, a duration (cli_parse_duration) from the environment */
};
struct cli_setting {
    const char *flag;    /* as the user wrote it ("--timeout", "DISTLOCK_WAIT_REPLICAS",
                          * "--option"), for messages; never the value */
    const distlock_option_info *opt;
    enum cli_value_kind kind;
    const char *text;
    long value;
};
#define CLI_SETTINGS_MAX 64

/* Options every verb accepts. */
struct cli_common {
    const char *verb;            /* "run", ... for usage errors */
    const char *servers;         /* --servers, else $DISTLOCK_SERVERS, else the default */
    int verbose;                 /* -v */
    int quiet;                   /* -q */
    /* Library options, set in this order (so a later one wins): the
     * environment's first (DISTLOCK_WAIT_REPLICAS, DISTLOCK_TLS_*, ...), then
     * the flags (--timeout, --tls-ca-file, --option NAME=VALUE, ...). */
    struct cli_setting set[CLI_SETTINGS_MAX];
    int nset;
};

extern const char *cli_prog;     /* "distlock" */

void cli_common_init(struct cli_common *co, const char *verb);

/* Handle one of the common options (returns 1 if `opt` was one, 0 if not,
 * -1 after printing a usage error). The long option table entries for them
 * are CLI_COMMON_LONGOPTS; their short letters are in CLI_COMMON_SHORTOPTS. */
int cli_common_option(struct cli_common *co, int opt, const char *arg);
/* The common options' help: the flags, then the library's option table
 * (names, defaults, summaries) for --option. */
const char *cli_common_help(void);
#define CLI_OPT_CONNECT_TIMEOUT 1000
#define CLI_OPT_TIMEOUT 1001
#define CLI_OPT_TLS_FIRST 1010   /* TLS: 1010..1014 the strings, 1015 --tls-insecure */
#define CLI_OPT_TLS_INSECURE 1015
#define CLI_OPT_WAIT_REPLICAS 1020          /* WAIT for replicas */
#define CLI_OPT_WAIT_REPLICAS_TIMEOUT 1021
#define CLI_OPT_OWNER_INFO 1030             /* owner metadata */
#define CLI_OPT_OWNER_LABEL 1031
#define CLI_OPT_OPTION 1040                 /* --option NAME=VALUE: any library option */
#define CLI_COMMON_SHORTOPTS "s:vqh"
#define CLI_COMMON_LONGOPTS \
    {"servers", required_argument, NULL, 's'}, \
    {"connect-timeout", required_argument, NULL, CLI_OPT_CONNECT_TIMEOUT}, \
    {"timeout", required_argument, NULL, CLI_OPT_TIMEOUT}, \
    {"wait-replicas", required_argument, NULL, CLI_OPT_WAIT_REPLICAS}, \
    {"wait-replicas-timeout", required_argument, NULL, CLI_OPT_WAIT_REPLICAS_TIMEOUT}, \
    {"owner-info", no_argument, NULL, CLI_OPT_OWNER_INFO}, \
    {"owner-label", required_argument, NULL, CLI_OPT_OWNER_LABEL}, \
    {"option", required_argument, NULL, CLI_OPT_OPTION}, \
    {"verbose", no_argument, NULL, 'v'}, \
    {"quiet", no_argument, NULL, 'q'}, \
    {"help", no_argument, NULL, 'h'}, \
    {"tls-ca-file", required_argument, NULL, CLI_OPT_TLS_FIRST}, \
    {"tls-ca-dir", required_argument, NULL, CLI_OPT_TLS_FIRST + 1}, \
    {"tls-cert", required_argument, NULL, CLI_OPT_TLS_FIRST + 2}, \
    {"tls-key", required_argument, NULL, CLI_OPT_TLS_FIRST + 3}, \
    {"tls-server-name", required_argument, NULL, CLI_OPT_TLS_FIRST + 4}, \
    {"tls-insecure", no_argument, NULL, CLI_OPT_TLS_INSECURE}

/* Durations: a decimal number with an optional unit ms, s, m or h; a bare
 * number is seconds (as with flock -w and timeout(1)). Returns 0 and the value
 * in milliseconds, or -1. With allow_forever, "forever", "infinity", "inf"
 * and "-1" give DISTLOCK_WAIT_FOREVER. */
int cli_parse_duration(const char *s, int allow_forever, long *out_ms);
/* A lease (--ttl): a duration as above, converted by the library's one TTL
 * rule (distlock_ttl_from_seconds: rounded up to whole milliseconds, 1 ms to
 * DISTLOCK_TTL_MAX). Returns 0 and the milliseconds, or -1 and in *why what
 * is wrong (valid until the next library call). */
int cli_parse_ttl(const char *s, long *out_ms, const char **why);
/* A decimal integer in [lo, hi]; returns 0 or -1. */
int cli_parse_int(const char *s, long lo, long hi, long *out);
/* A signal name (TERM, SIGTERM) or number; returns 0 or -1. */
int cli_parse_signal(const char *s, int *out);

/* Format a duration for humans ("1.250s", "980ms"). Returns buf. */
const char *cli_fmt_ms(long ms, char *buf, size_t size);

/* Passwords are never printed. The library's messages and node URIs are
 * masked by the library and printed as they are; what the command echoes of
 * its own arguments goes through cli_arg_shown(): an argument that may hold
 * a URI ("://" or '@' in it) is shown as the library shows a server list
 * (distlock_servers_mask(); "--name=" kept before it), into buf (size
 * bytes, >= 16); any other is returned as it is. */
const char *cli_arg_shown(const char *arg, char *buf, size_t size);

/* Print "distlock: <fmt>\n" on stderr (the library's texts come masked). */
void cli_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Print a usage error (echoed arguments through cli_arg_shown()) and the hint to see --help;
 * returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Make the client from the common options. On failure prints why and returns
 * the exit status (non-zero); on success returns 0 and *out. */
int cli_client(const struct cli_common *co, distlock_client **out);

/* The exit status for a library status: the one mapping of the command, the
 * CLI column of docs/errors.md's "Statuses in each front end" (OK 0; held by
 * another owner, also once --wait ran out, 75 and only that; invalid 64;
 * unreachable / no quorum / server error / granted after the ttl was used up
 * 69; not the owner 1; cancelled 130; anything else 70). */
int cli_exit_for_status(int status);
/* Print "distlock: <what>: <strerror>[: <detail>]" for a library status;
 * returns cli_exit_for_status(status). */
int cli_report(const char *what, int status);
/* The usage error for what getopt_long returned as ':' (missing value) or
 * '?' (unknown option); returns CLI_EXIT_USAGE. */
int cli_getopt_error(const char *verb, int opt, char **argv);

/* Verbs. argv[0] is the verb name. */
int cli_run(int argc, char **argv);
int cli_status(int argc, char **argv);
int cli_release(int argc, char **argv);
int cli_list(int argc, char **argv);          /* list.c */

/* Metrics (stats.c): -v prints the client's counters at exit; --stats-file
 * adds them to a file that `distlock stats` prints (also as Prometheus text). */
void cli_stats_verbose(const struct cli_common *co, distlock_client *c);
int cli_stats_save(const char *file, distlock_client *c);
void cli_stats_prometheus(FILE *f, const distlock_stat *e, size_t n);
int cli_stats(int argc, char **argv);
void cli_help_stats(FILE *f);

/* Help texts. */
void cli_help_main(FILE *f);
void cli_help_run(FILE *f);
void cli_help_status(FILE *f);
void cli_help_release(FILE *f);
void cli_help_list(FILE *f);                  /* list.c */

/* `status --json` (list.c): the verdict distlock_admin_holder() gave (st and
 * its info), then each node read on its own, as one JSON object on stdout. */
void cli_status_json(distlock_client *c, const char *key, int st,
                     const distlock_holder_info *h);

#endif
