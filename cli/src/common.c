/*
 * common.c -- option values shared by every verb, number and duration
 * parsing, the client factory and the mapping of library statuses to exit
 * statuses.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

const char *cli_prog = "distlock";

void cli_common_init(struct cli_common *co)
{
    const char *env = getenv("DISTLOCK_SERVERS");
    co->servers = (env && *env) ? env : CLI_DEFAULT_SERVERS;
    co->connect_timeout_ms = -1;
    co->timeout_ms = -1;
    co->verbose = 0;
    co->quiet = 0;
    co->owner_info = 0;
    co->owner_label = NULL;
    /* TLS */
    static const char *const tls_env[5] = { "DISTLOCK_TLS_CA_FILE", "DISTLOCK_TLS_CA_DIR",
                                            "DISTLOCK_TLS_CERT", "DISTLOCK_TLS_KEY",
                                            "DISTLOCK_TLS_SERVER_NAME" };
    for (int k = 0; k < 5; k++) {
        const char *e = getenv(tls_env[k]);
        co->tls[k] = e && *e ? e : NULL;
    }
    env = getenv("DISTLOCK_TLS_INSECURE");
    co->tls_insecure = env && strcmp(env, "1") == 0;
    co->wait_replicas = -1;
    co->wait_timeout_ms = -1;
}

/* WAIT for replicas: a count (0..64) or a duration (1ms..60s). */
static int parse_wait(int replicas, const char *s, long *out)
{
    if (replicas)
        return cli_parse_int(s, 0, 64, out);
    return cli_parse_duration(s, 0, out) || *out < 1 || *out > 60000 ? -1 : 0;
}

const char *cli_arg_shown(const char *arg, char *buf, size_t size)
{
    const char *uri = strstr(arg, "://");
    if (uri == NULL && strchr(arg, '@') == NULL)
        return arg;
    /* "--servres=redis://..." (a mistyped option): its name, then the value */
    const char *eq = strchr(arg, '=');
    size_t name = arg[0] == '-' && eq && (uri == NULL || eq < uri) ? (size_t)(eq - arg) + 1 : 0;
    if (name + 16 > size || name > INT_MAX)
        name = 0;
    snprintf(buf, size, "%.*s", (int)name, arg);
    if (distlock_servers_mask(arg + name, buf + name, size - name) != DISTLOCK_OK)
        snprintf(buf, size, "(not shown)");
    return buf;
}

/* Format and write to stderr: every message of the command goes through
 * here. The library's text is already masked; echoes of arguments go
 * through cli_arg_shown() where they are formatted. */
static void vprint(const char *fmt, va_list ap, const char *suffix)
{
    vfprintf(stderr, fmt, ap);
    fputs(suffix, stderr);
}

void cli_err(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", cli_prog);
    va_start(ap, fmt);
    vprint(fmt, ap, "\n");
    va_end(ap);
}

int cli_usage_error(const char *verb, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s%s%s: ", cli_prog, verb ? " " : "", verb ? verb : "");
    va_start(ap, fmt);
    vprint(fmt, ap, "");
    va_end(ap);
    fprintf(stderr, "\nTry '%s%s%s --help' for more information.\n", cli_prog,
            verb ? " " : "", verb ? verb : "");
    return CLI_EXIT_USAGE;
}

/* A plain decimal number with an optional unit (ms, s, m/min, h; bare:
 * seconds) as seconds. 0, or -1 when it is not one. */
static int parse_seconds(const char *s, double *seconds)
{
    if (!s || !*s)
        return -1;
    /* strtod would accept hex, "nan", "inf" and leading blanks: check by hand
     * that the number is plain decimal first. */
    const char *p = s;
    int digits = 0;
    while (isdigit((unsigned char)*p)) { p++; digits++; }
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) { p++; digits++; }
    }
    if (!digits)
        return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end != p)
        return -1;
    if (!*end || !strcmp(end, "s")) *seconds = v;
    else if (!strcmp(end, "ms")) *seconds = v / 1000.0;
    else if (!strcmp(end, "m") || !strcmp(end, "min")) *seconds = v * 60.0;
    else if (!strcmp(end, "h")) *seconds = v * 3600.0;
    else return -1;
    return 0;
}

int cli_parse_duration(const char *s, int allow_forever, long *out_ms)
{
    if (!s || !*s)
        return -1;
    if (allow_forever && (!strcasecmp(s, "forever") || !strcasecmp(s, "infinity") ||
                          !strcasecmp(s, "inf") || !strcmp(s, "-1"))) {
        *out_ms = DISTLOCK_WAIT_FOREVER;
        return 0;
    }
    double v;
    if (parse_seconds(s, &v))
        return -1;
    v *= 1000.0;
    if (!(v >= 0.0) || v > (double)LONG_MAX / 2)
        return -1;
    *out_ms = (long)llround(v);
    return 0;
}

int cli_parse_ttl(const char *s, long *out_ms, const char **why)
{
    double v;
    *why = "a duration such as 30s or 500ms";
    if (parse_seconds(s, &v))
        return -1;
    /* The library's one TTL rule: rounded up to whole ms, 1..DISTLOCK_TTL_MAX. */
    if (distlock_ttl_from_seconds(v, out_ms) != DISTLOCK_OK) {
        *why = distlock_last_error();
        return -1;
    }
    return 0;
}

int cli_parse_int(const char *s, long lo, long hi, long *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static const struct { const char *name; int sig; } signals[] = {
    {"HUP", SIGHUP}, {"INT", SIGINT}, {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"ALRM", SIGALRM},
};

int cli_parse_signal(const char *s, int *out)
{
    long n;
    if (cli_parse_int(s, 1, 64, &n) == 0) {
        *out = (int)n;
        return 0;
    }
    if (!strncasecmp(s, "SIG", 3))
        s += 3;
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) {
        if (!strcasecmp(s, signals[i].name)) {
            *out = signals[i].sig;
            return 0;
        }
    }
    return -1;
}

const char *cli_fmt_ms(long ms, char *buf, size_t size)
{
    if (ms < 1000)
        snprintf(buf, size, "%ldms", ms);
    else
        snprintf(buf, size, "%ld.%03lds", ms / 1000, ms % 1000);
    return buf;
}

int cli_common_option(struct cli_common *co, int opt, const char *arg)
{
    long v;
    switch (opt) {
    case 's':
        if (!*arg) {
            cli_err("--servers needs at least one URI");
            return -1;
        }
        co->servers = arg;
        return 1;
    case CLI_OPT_CONNECT_TIMEOUT:
    case CLI_OPT_TIMEOUT:
        if (cli_parse_duration(arg, 0, &v) || v < 1 || v > INT_MAX) {
            cli_err("invalid %s '%s' (a duration such as 500ms or 2s)",
                    opt == CLI_OPT_TIMEOUT ? "--timeout" : "--connect-timeout", arg);
            return -1;
        }
        if (opt == CLI_OPT_TIMEOUT) co->timeout_ms = v;
        else co->connect_timeout_ms = v;
        return 1;
    case CLI_OPT_TLS_FIRST:   /* TLS */
    case CLI_OPT_TLS_FIRST + 1:
    case CLI_OPT_TLS_FIRST + 2:
    case CLI_OPT_TLS_FIRST + 3:
    case CLI_OPT_TLS_FIRST + 4:
        if (!*arg) {
            cli_err("--tls-* options need a value");
            return -1;
        }
        co->tls[opt - CLI_OPT_TLS_FIRST] = arg;
        return 1;
    case CLI_OPT_TLS_INSECURE:
        co->tls_insecure = 1;
        return 1;
    case CLI_OPT_WAIT_REPLICAS:
    case CLI_OPT_WAIT_REPLICAS_TIMEOUT: {
        int replicas = opt == CLI_OPT_WAIT_REPLICAS;
        if (parse_wait(replicas, arg, replicas ? &co->wait_replicas : &co->wait_timeout_ms)) {
            cli_err(replicas ? "invalid --wait-replicas '%s' (a number of replicas, 0 to 64)"
                             : "invalid --wait-replicas-timeout '%s' (a duration from 1ms to 60s)",
                    arg);
            return -1;
        }
        return 1;
    }
    case CLI_OPT_OWNER_INFO:
    case CLI_OPT_OWNER_LABEL:
        co->owner_info = 1;
        if (opt == CLI_OPT_OWNER_LABEL)
            co->owner_label = arg;
        return 1;
    case 'v':
        co->verbose = 1;
        co->quiet = 0;
        return 1;
    case 'q':
        co->quiet = 1;
        co->verbose = 0;
        return 1;
    }
    return 0;
}

int cli_exit_for_status(int status)
{
    switch (status) {
    case DISTLOCK_OK: return CLI_EXIT_OK;
    case DISTLOCK_NOTACQUIRED: return CLI_EXIT_CONFLICT;   /* held by another owner: only this */
    case DISTLOCK_EINVAL: return CLI_EXIT_USAGE;
    case DISTLOCK_ECONN:        /* unreachable, or silent past --timeout (one node) */
    case DISTLOCK_ETIMEDOUT:    /* granted after the ttl was used up: nothing held */
    case DISTLOCK_ENOQUORUM:
    case DISTLOCK_EPROTO: return CLI_EXIT_UNAVAILABLE;
    case DISTLOCK_ENOTOWNER: return CLI_EXIT_NO;
    case DISTLOCK_ECANCELED: return CLI_EXIT_CANCELED;
    default: return CLI_EXIT_SOFTWARE;  /* ENOMEM, ECLOSED, ESYS, a newer status */
    }
}

int cli_report(const char *what, int status)
{
    const char *detail = distlock_last_error();
    if (detail && *detail)
        cli_err("%s: %s: %s", what, distlock_strerror(status), detail);
    else
        cli_err("%s: %s", what, distlock_strerror(status));
    return cli_exit_for_status(status);
}

int cli_getopt_error(const char *verb, int opt, char **argv)
{
    char buf[512];
    const char *arg = cli_arg_shown(argv[optind - 1], buf, sizeof buf);
    if (opt == ':')
        return cli_usage_error(verb, "option '%s' needs a value", arg);
    if (optopt)
        return cli_usage_error(verb, "unknown option '-%c'", optopt);
    return cli_usage_error(verb, "unknown option '%s'", arg);
}

int cli_client(const struct cli_common *co, distlock_client **out)
{
    distlock_client *c = NULL;
    int rc = distlock_client_new(co->servers, &c);
    if (rc != DISTLOCK_OK) {
        /* Shown as the library's message shows it (distlock_servers_mask):
         * masked before it is cut short, so a cut never leaves a piece of
         * a password. */
        char what[256], shown[1024];
        if (distlock_servers_mask(co->servers, shown, sizeof shown) != DISTLOCK_OK)
            snprintf(shown, sizeof shown, "(not shown)");
        snprintf(what, sizeof what, "bad --servers/DISTLOCK_SERVERS '%.200s%s'", shown,
                 strlen(shown) > 200 ? "..." : "");
        return cli_report(what, rc);
    }
    if (co->connect_timeout_ms > 0 &&
        (rc = distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, co->connect_timeout_ms))) {
        rc = cli_report("--connect-timeout", rc); /* before the free: it reads the detail */
        distlock_client_free(c);
        return rc;
    }
    if (co->timeout_ms > 0 &&
        (rc = distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, co->timeout_ms))) {
        rc = cli_report("--timeout", rc);
        distlock_client_free(c);
        return rc;
    }
    /* WAIT for replicas: the options, else the environment */
    static const char *const wait_env[2] = { "DISTLOCK_WAIT_REPLICAS",
                                             "DISTLOCK_WAIT_REPLICAS_TIMEOUT" };
    for (int k = 0; k < 2; k++) {
        long v = k == 0 ? co->wait_replicas : co->wait_timeout_ms;
        const char *env = getenv(wait_env[k]);
        if (v < 0 && env && *env && parse_wait(k == 0, env, &v)) {
            cli_err(k == 0 ? "invalid %s '%s' (a number of replicas, 0 to 64)"
                           : "invalid %s '%s' (a duration from 1ms to 60s)", wait_env[k], env);
            distlock_client_free(c);
            return CLI_EXIT_USAGE;
        }
        if (v >= 0 && (rc = distlock_client_set(c, k == 0 ? DISTLOCK_OPT_WAIT_REPLICAS
                                                          : DISTLOCK_OPT_WAIT_TIMEOUT_MS, v))) {
            rc = cli_report(k == 0 ? "--wait-replicas" : "--wait-replicas-timeout", rc);
            distlock_client_free(c);
            return rc;
        }
    }
    /* owner metadata: the library checks the label (EINVAL when too long) */
    if (co->owner_info && ((rc = distlock_client_set(c, DISTLOCK_OPT_OWNER_INFO, 1)) ||
                           (co->owner_label && (rc = distlock_client_set_str(
                                                    c, DISTLOCK_OPT_OWNER_LABEL, co->owner_label))))) {
        rc = cli_report("--owner-label", rc);
        distlock_client_free(c);
        return rc;
    }
    /* Credentials from the environment keep them out of `ps` output. */
    const char *user = getenv("DISTLOCK_USERNAME");
    const char *pass = getenv("DISTLOCK_PASSWORD");
    if (user && *user && (rc = distlock_client_set_str(c, DISTLOCK_OPT_USERNAME, user))) {
        rc = cli_report("DISTLOCK_USERNAME", rc);
        distlock_client_free(c);
        return rc;
    }
    if (pass && *pass && (rc = distlock_client_set_str(c, DISTLOCK_OPT_PASSWORD, pass))) {
        rc = cli_report("DISTLOCK_PASSWORD", rc);
        distlock_client_free(c);
        return rc;
    }
    /* TLS */
    static const distlock_option tls_opt[5] = {
        DISTLOCK_OPT_TLS_CA_FILE, DISTLOCK_OPT_TLS_CA_DIR, DISTLOCK_OPT_TLS_CERT,
        DISTLOCK_OPT_TLS_KEY, DISTLOCK_OPT_TLS_SERVER_NAME
    };
    static const char *const tls_flag[5] = { "--tls-ca-file", "--tls-ca-dir", "--tls-cert",
                                             "--tls-key", "--tls-server-name" };
    for (int k = 0; k < 5; k++) {
        if (co->tls[k] && (rc = distlock_client_set_str(c, tls_opt[k], co->tls[k]))) {
            rc = cli_report(tls_flag[k], rc);
            distlock_client_free(c);
            return rc;
        }
    }
    if (co->tls_insecure && (rc = distlock_client_set(c, DISTLOCK_OPT_TLS_VERIFY, 0))) {
        rc = cli_report("--tls-insecure", rc);
        distlock_client_free(c);
        return rc;
    }
    if (co->verbose) {
        int n = distlock_client_node_count(c), q = distlock_client_quorum(c);
        for (int i = 0; i < n; i++)
            cli_err("server %s (%d of %d, quorum %d)", distlock_client_node_uri(c, i), i + 1, n, q);
    }
    *out = c;
    return 0;
}
