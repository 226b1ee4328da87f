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

/* Queue a library option. The names are the option table's; a name the
 * table lacks is a bug of this file, reported like any unknown option. */
static int add_setting(struct cli_common *co, const char *flag, const char *name,
                       enum cli_value_kind kind, const char *text, long value)
{
    const distlock_option_info *o = distlock_option_by_name(name);
    if (o == NULL) {
        cli_err("%s: %s", flag, distlock_last_error());
        return -1;
    }
    if (co->nset == CLI_SETTINGS_MAX) {
        cli_err("%s: more than %d options", flag, CLI_SETTINGS_MAX);
        return -1;
    }
    co->set[co->nset++] = (struct cli_setting){ flag, o, kind, text, value };
    return 0;
}

void cli_common_init(struct cli_common *co, const char *verb)
{
    const char *env = getenv("DISTLOCK_SERVERS");
    co->verb = verb;
    co->servers = (env && *env) ? env : CLI_DEFAULT_SERVERS;
    co->verbose = 0;
    co->quiet = 0;
    co->nset = 0;
    /* The environment first, so the flags (queued later) win. */
    static const struct { const char *env, *name; enum cli_value_kind kind; } envs[] = {
        { "DISTLOCK_TLS_CA_FILE", "tls_ca_file", CLI_VALUE_TEXT },
        { "DISTLOCK_TLS_CA_DIR", "tls_ca_dir", CLI_VALUE_TEXT },
        { "DISTLOCK_TLS_CERT", "tls_cert", CLI_VALUE_TEXT },
        { "DISTLOCK_TLS_KEY", "tls_key", CLI_VALUE_TEXT },
        { "DISTLOCK_TLS_SERVER_NAME", "tls_server_name", CLI_VALUE_TEXT },
        { "DISTLOCK_WAIT_REPLICAS", "wait_replicas", CLI_VALUE_TEXT },
        { "DISTLOCK_WAIT_REPLICAS_TIMEOUT", "wait_timeout_ms", CLI_VALUE_DURATION },
        /* credentials from the environment keep them out of `ps` output */
        { "DISTLOCK_USERNAME", "username", CLI_VALUE_TEXT },
        { "DISTLOCK_PASSWORD", "password", CLI_VALUE_TEXT },
    };
    for (size_t k = 0; k < sizeof envs / sizeof envs[0]; k++) {
        const char *e = getenv(envs[k].env);
        if (e && *e)
            (void)add_setting(co, envs[k].env, envs[k].name, envs[k].kind, e, 0);
    }
    env = getenv("DISTLOCK_TLS_INSECURE");
    if (env && strcmp(env, "1") == 0)
        (void)add_setting(co, "DISTLOCK_TLS_INSECURE", "tls_verify", CLI_VALUE_LONG, NULL, 0);
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
    static const char *const tls_flag[5] = { "--tls-ca-file", "--tls-ca-dir", "--tls-cert",
                                             "--tls-key", "--tls-server-name" };
    static const char *const tls_name[5] = { "tls_ca_file", "tls_ca_dir", "tls_cert", "tls_key",
                                             "tls_server_name" };
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
    case CLI_OPT_WAIT_REPLICAS_TIMEOUT: {
        const char *flag = opt == CLI_OPT_TIMEOUT ? "--timeout"
                           : opt == CLI_OPT_CONNECT_TIMEOUT ? "--connect-timeout"
                                                            : "--wait-replicas-timeout";
        /* the duration's syntax is the command's; its range the library's */
        if (cli_parse_duration(arg, 0, &v)) {
            cli_err("invalid %s '%s' (a duration such as 500ms or 2s)", flag, arg);
            return -1;
        }
        return add_setting(co, flag,
                           opt == CLI_OPT_TIMEOUT ? "command_timeout_ms"
                           : opt == CLI_OPT_CONNECT_TIMEOUT ? "connect_timeout_ms"
                                                            : "wait_timeout_ms",
                           CLI_VALUE_LONG, NULL, v) ? -1 : 1;
    }
    case CLI_OPT_TLS_FIRST:   /* TLS */
    case CLI_OPT_TLS_FIRST + 1:
    case CLI_OPT_TLS_FIRST + 2:
    case CLI_OPT_TLS_FIRST + 3:
    case CLI_OPT_TLS_FIRST + 4:
        if (!*arg) {
            cli_err("--tls-* options need a value");
            return -1;
        }
        return add_setting(co, tls_flag[opt - CLI_OPT_TLS_FIRST], tls_name[opt - CLI_OPT_TLS_FIRST],
                           CLI_VALUE_TEXT, arg, 0) ? -1 : 1;
    case CLI_OPT_TLS_INSECURE:
        return add_setting(co, "--tls-insecure", "tls_verify", CLI_VALUE_LONG, NULL, 0) ? -1 : 1;
    case CLI_OPT_WAIT_REPLICAS:
        return add_setting(co, "--wait-replicas", "wait_replicas", CLI_VALUE_TEXT, arg, 0) ? -1 : 1;
    case CLI_OPT_OWNER_LABEL:  /* a label implies --owner-info */
        if (add_setting(co, "--owner-label", "owner_label", CLI_VALUE_TEXT, arg, 0))
            return -1;
        return add_setting(co, "--owner-label", "owner_info", CLI_VALUE_LONG, NULL, 1) ? -1 : 1;
    case CLI_OPT_OWNER_INFO:
        return add_setting(co, "--owner-info", "owner_info", CLI_VALUE_LONG, NULL, 1) ? -1 : 1;
    case CLI_OPT_OPTION: {
        /* --option NAME=VALUE: the name is looked up now (a usage error
         * names it, and the closest known name); the value, as text, is the
         * library's to check. Messages show the name, never the value. */
        const char *eq = strchr(arg, '=');
        char name[64];
        if (eq == NULL || eq == arg || (size_t)(eq - arg) >= sizeof name) {
            char buf[512];
            cli_err("--option '%s': NAME=VALUE expected (see --help)",
                            cli_arg_shown(eq ? "(too long)" : arg, buf, sizeof buf));
            return -1;
        }
        memcpy(name, arg, (size_t)(eq - arg));
        name[eq - arg] = '\0';
        const distlock_option_info *o = distlock_option_by_name(name);
        if (o == NULL) {
            cli_err("--option: %s", distlock_last_error());
            return -1;
        }
        return add_setting(co, "--option", o->name, CLI_VALUE_TEXT, eq + 1, 0) ? -1 : 1;
    }
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

const char *cli_common_help(void)
{
    static char text[8192];
    static const char flags[] =
"  -s, --servers URIS          comma-separated Redis URIs (default: $DISTLOCK_SERVERS,\n"
"                              else " CLI_DEFAULT_SERVERS ")\n"
"      --connect-timeout DUR   per-node connect timeout (connect_timeout_ms)\n"
"      --timeout DUR           per-node reply timeout (command_timeout_ms)\n"
"      --wait-replicas N       a node's grant counts only once N of its replicas\n"
"                              acknowledged it (WAIT; wait_replicas, 0: off;\n"
"                              $DISTLOCK_WAIT_REPLICAS)\n"
"      --wait-replicas-timeout DUR\n"
"                              how long WAIT waits for them (wait_timeout_ms;\n"
"                              $DISTLOCK_WAIT_REPLICAS_TIMEOUT)\n"
"      --owner-info            locks taken also store who holds them (host, pid,\n"
"                              program, since) in KEY's side key {KEY}:owner,\n"
"                              same TTL; `distlock status` shows it\n"
"      --owner-label TEXT      a label stored with it (implies --owner-info)\n"
"      --option NAME=VALUE     set any library option below (repeatable; the\n"
"                              last one wins, flags and environment included)\n"
"  -v, --verbose               say what happens on stderr\n"
"  -q, --quiet                 no messages, only the exit status\n"
"  -h, --help                  this help\n"
"TLS (rediss:// nodes; a URI's own tls_* options win):\n"
"      --tls-ca-file FILE      trusted CAs, PEM (default: the system store)\n"
"      --tls-ca-dir DIR        trusted CAs, hashed directory\n"
"      --tls-cert FILE         client certificate, PEM (mutual TLS)\n"
"      --tls-key FILE          its private key (default: in --tls-cert)\n"
"      --tls-server-name NAME  name to verify and send as SNI (default: the host)\n"
"      --tls-insecure          DO NOT verify the server's certificate (warns)\n"
"  Environment: DISTLOCK_TLS_CA_FILE, _CA_DIR, _CERT, _KEY, _SERVER_NAME,\n"
"  DISTLOCK_TLS_INSECURE=1 (the flags win).\n"
"Library options (--option NAME=VALUE; the library's table: default, range):\n";
    if (text[0])
        return text;
    size_t off = (size_t)snprintf(text, sizeof text, "%s", flags);
    const distlock_option_info *o;
    for (size_t i = 0; (o = distlock_option_at(i)) != NULL && off < sizeof text; i++) {
        if (o->type == DISTLOCK_OPTION_LONG)
            off += (size_t)snprintf(text + off, sizeof text - off,
                                    "  %-18s %ld (%ld..%ld): %s\n", o->name, o->default_value,
                                    o->min, o->max, o->summary);
        else
            off += (size_t)snprintf(text + off, sizeof text - off,
                                    "  %-18s text, up to %ld bytes: %s\n", o->name, o->max,
                                    o->summary);
    }
    return text;
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
    /* The options, each checked by the library; of an option given more
     * than once (the environment, a flag, --option) only the last counts. */
    for (int k = 0; k < co->nset; k++) {
        const struct cli_setting *st = &co->set[k];
        long v = st->value;
        int later = 0;
        for (int j = k + 1; j < co->nset && !later; j++)
            later = co->set[j].opt == st->opt;
        if (later)
            continue;
        if (st->kind == CLI_VALUE_DURATION && cli_parse_duration(st->text, 0, &v)) {
            cli_err("invalid %s '%s' (a duration such as 500ms or 2s)", st->flag, st->text);
            distlock_client_free(c);
            return CLI_EXIT_USAGE;
        }
        rc = st->kind == CLI_VALUE_TEXT ? distlock_client_set_str(c, st->opt->id, st->text)
                                        : distlock_client_set(c, st->opt->id, v);
        if (rc != DISTLOCK_OK) {
            /* before the free: the detail is read here. A bad value is a
             * usage error (64), said with the library's message. */
            if (rc == DISTLOCK_EINVAL)
                rc = cli_usage_error(co->verb, "%s: %s", st->flag, distlock_last_error());
            else
                rc = cli_report(st->flag, rc);
            distlock_client_free(c);
            return rc;
        }
    }
    if (co->verbose) {
        int n = distlock_client_node_count(c), q = distlock_client_quorum(c);
        for (int i = 0; i < n; i++)
            cli_err("server %s (%d of %d, quorum %d)", distlock_client_node_uri(c, i), i + 1, n, q);
    }
    *out = c;
    return 0;
}
