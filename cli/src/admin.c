/*
 * admin.c -- `distlock status` (who holds a key, for how long: the core's
 * verdict from one round, distlock_admin_holder(); then each node's view for
 * display) and `distlock release` (administrative release).
 */
#include <ctype.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* Tokens written by other implementations may hold any bytes: print them
 * with C-style escapes so the output stays one line per node. */
static void print_token(FILE *f, const char *t)
{
    for (const unsigned char *p = (const unsigned char *)t; *p; p++) {
        if (*p == '\\') fputs("\\\\", f);
        else if (isprint(*p) && *p != ' ') fputc(*p, f);
        else fprintf(f, "\\x%02x", *p);
    }
}

static int parse_common_only(int argc, char **argv, const char *verb, struct cli_common *co,
                             const struct option *longopts, const char *shortopts,
                             int (*extra)(int opt, const char *arg, void *ctx), void *ctx,
                             void (*help)(FILE *))
{
    int opt;
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        int r = cli_common_option(co, opt, optarg);
        if (r < 0)
            return cli_usage_error(verb, "invalid option value");
        if (r > 0)
            continue;
        if (opt == 'h') {
            help(stdout);
            return CLI_EXIT_OK;
        }
        if (opt == ':' || opt == '?')
            return cli_getopt_error(verb, opt, argv);
        if (extra && (r = extra(opt, optarg, ctx)) >= 0)
            return r;
    }
    if (optind >= argc)
        return cli_usage_error(verb, "missing KEY");
    if (optind + 1 < argc)
        return cli_usage_error(verb, "one KEY only (extra argument '%s')",
                               cli_arg_shown(argv[optind + 1], (char[256]){0}, 256));
    if (!argv[optind][0])
        return cli_usage_error(verb, "KEY is empty");
    return -1;
}

static const struct option status_longopts[] = {
    CLI_COMMON_LONGOPTS,
    {"json", no_argument, NULL, 'J'},
    {NULL, 0, NULL, 0}
};

static int status_extra(int opt, const char *arg, void *ctx)
{
    (void)arg;
    if (opt == 'J') {
        *(int *)ctx = 1;
        return -1;
    }
    return cli_usage_error("status", "unexpected option");
}

/* A read lock's or a semaphore's holders, "2 of 3 permits held" / "2
 * readers, a writer waiting" (a live `__write__`: our writer's intent, or a
 * symfony writer), into buf; "" for other kinds. Returns buf. */
static const char *members_text(const distlock_holder_info *h, char *buf, size_t size)
{
    buf[0] = '\0';
    if (h->kind == DISTLOCK_HOLDER_SEMAPHORE)
        snprintf(buf, size, "%ld of %ld permit%s held", h->holders, h->permits,
                 h->permits == 1 ? "" : "s");
    else if (h->kind == DISTLOCK_HOLDER_READERS)
        snprintf(buf, size, "%ld reader%s%s", h->holders, h->holders == 1 ? "" : "s",
                 h->writer ? ", a writer waiting" : "");
    return buf;
}

/* One node's line of the table under the verdict: read on its own
 * (distlock_admin_holder() of node i) after the verdict, for display only
 * (the lock may have changed in between; the verdict and the exit status
 * never use it). */
static void print_node_line(distlock_client *c, const char *key, int i)
{
    char d[32];
    distlock_holder_info h = { .size = sizeof h };
    int st = distlock_admin_holder(c, key, i, &h);
    const char *uri = distlock_client_node_uri(c, i);  /* masked by the library */
    printf("  %s  ", uri ? uri : "?");
    if (st < 0) {
        const char *detail = distlock_last_error();  /* masked by the library */
        printf("error: %s%s%s\n", distlock_strerror(st), *detail ? ": " : "", detail);
    } else if (h.kind == DISTLOCK_HOLDER_SEMAPHORE || h.kind == DISTLOCK_HOLDER_READERS) {
        char m[128];
        printf("%s  %s\n", distlock_holder_kind_name(h.kind), members_text(&h, m, sizeof m));
    } else if (st == 0 && h.taken) {
        printf("taken  by a value of another type (not a lock token)\n");
    } else if (st == 0) {
        printf("free\n");
    } else {
        if (h.pttl_ms >= 0)
            printf("held  expires in %s  token ", cli_fmt_ms(h.pttl_ms, d, sizeof d));
        else
            printf("held  no expiry  token ");
        print_token(stdout, h.token);
        putchar('\n');
    }
    /* A Redis Cluster node: the key's slot and its master (learnt by the
     * inspect above). */
    int slot = 0;
    char master[300];
    if (distlock_admin_cluster_route(c, key, i, &slot, master, sizeof master) == 1)
        printf("    slot %d, master %s\n", slot, master[0] ? master : "not known");
}

int cli_status(int argc, char **argv)
{
    struct cli_common co;
    int json = 0;
    cli_common_init(&co, "status");
    int rc = parse_common_only(argc, argv, "status", &co, status_longopts,
                               ":" CLI_COMMON_SHORTOPTS, status_extra, &json, cli_help_status);
    if (rc >= 0)
        return rc;
    const char *key = argv[optind];
    distlock_client *c = NULL;
    if ((rc = cli_client(&co, &c)) != 0)
        return rc;

    /* The verdict is the core's, from one round to every node. */
    int n = distlock_client_node_count(c), quorum = distlock_client_quorum(c);
    distlock_holder_info h = { .size = sizeof h };
    int st = distlock_admin_holder(c, key, -1, &h);
    if (st == DISTLOCK_EINVAL) {
        char what[128];
        snprintf(what, sizeof what, "'%.80s'", key);
        rc = cli_report(what, st);
        distlock_client_free(c);
        return rc;
    }
    const char *verdict;
    /* A semaphore or read locks: no token holds the key (the verdict is
     * 0); its live members do, as many as the library counted. */
    int members = st == 0 && (h.kind == DISTLOCK_HOLDER_SEMAPHORE ||
                              h.kind == DISTLOCK_HOLDER_READERS);
    if (members) {
        verdict = h.kind == DISTLOCK_HOLDER_SEMAPHORE ? "semaphore" : "read locks";
        rc = h.holders > 0 ? CLI_EXIT_OK : CLI_EXIT_NO;
    } else if (st == 1) {
        verdict = "held";
        rc = CLI_EXIT_OK;
    } else if (st == 0 && h.taken == 0) {
        verdict = "free";
        rc = CLI_EXIT_NO;
    } else if (st == 0) {
        verdict = "not held by any owner on a quorum";
        rc = CLI_EXIT_NO;
    } else {
        verdict = st == DISTLOCK_ENOQUORUM || st == DISTLOCK_ECONN
                      ? "unknown (too many nodes did not answer)"
                      : st == DISTLOCK_EPROTO ? "unknown (a node answered with an error)"
                                              : distlock_strerror(st);
        rc = cli_exit_for_status(st);
    }
    if (json) {
        /* -q still prints the JSON: it is what was asked for. */
        cli_status_json(c, key, st, &h);
    } else if (!co.quiet) {
        char d[32], m[128];
        if (members) {
            printf("%s: %s: %s (%d of %d node%s answered, quorum %d)\n", key, verdict,
                   members_text(&h, m, sizeof m), h.answered, n, n == 1 ? "" : "s", quorum);
        } else {
            printf("%s: %s", key, verdict);
            if (st == 1) {
                printf(" by ");
                print_token(stdout, h.token);
            }
            printf(" (held on %d of %d node%s, quorum %d", h.nodes, n, n == 1 ? "" : "s",
                   quorum);
            if (h.answered < n)
                printf(", %d not answering", n - h.answered);
            if (st == 1 && h.pttl_ms >= 0)
                printf("; expires in %s", cli_fmt_ms(h.pttl_ms, d, sizeof d));
            else if (st == 1)
                printf("; no expiry");
            else if (h.nodes > 0) {
                printf("; most common token ");
                print_token(stdout, h.token);
            }
            if (h.taken > h.nodes)
                printf("; other tokens or values on %d", h.taken - h.nodes);
            printf(")\n");
        }
        distlock_owner_info o = { .size = sizeof o };
        if (st == 1 && distlock_admin_owner(c, key, -1, &o) == 1) {
            char since[64];
            time_t t = (time_t)(o.since_ms / 1000);
            struct tm tm;
            strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
            printf("owner: host ");
            print_token(stdout, o.host);
            printf(" pid %ld program ", o.pid);
            print_token(stdout, o.program);
            printf(" since %s", since);
            if (o.label[0]) {
                printf(" label ");
                print_token(stdout, o.label);
            }
            putchar('\n');
        }
        printf("per node (each read on its own after the verdict, for display):\n");
        for (int i = 0; i < n; i++)
            print_node_line(c, key, i);
        fflush(stdout);
    }
    distlock_client_free(c);
    return rc;
}

struct release_ctx {
    int force;
    const char *token;
};

static int release_extra(int opt, const char *arg, void *ctx)
{
    struct release_ctx *r = ctx;
    if (opt == 'f') {
        r->force = 1;
        return -1;
    }
    if (opt == 'T') {
        if (!*arg)
            return cli_usage_error("release", "--token is empty");
        r->token = arg;
        return -1;
    }
    return cli_usage_error("release", "unexpected option");
}

static const struct option release_longopts[] = {
    CLI_COMMON_LONGOPTS,
    {"force", no_argument, NULL, 'f'},
    {"token", required_argument, NULL, 'T'},
    {NULL, 0, NULL, 0}
};

int cli_release(int argc, char **argv)
{
    struct cli_common co;
    struct release_ctx r = {0, NULL};
    cli_common_init(&co, "release");
    int rc = parse_common_only(argc, argv, "release", &co, release_longopts,
                               ":" CLI_COMMON_SHORTOPTS "fT:", release_extra, &r,
                               cli_help_release);
    if (rc >= 0)
        return rc;
    const char *key = argv[optind];
    if (!r.force && !r.token)
        return cli_usage_error("release", "refusing to delete a lock that may belong to a "
                               "running job: give --force (delete it whoever holds it) or "
                               "--token TOKEN (delete it only if TOKEN holds it)");
    if (r.force && r.token)
        return cli_usage_error("release", "--force and --token exclude each other");

    distlock_client *c = NULL;
    if ((rc = cli_client(&co, &c)) != 0)
        return rc;
    int n = distlock_client_node_count(c);
    if (r.token) {
        rc = distlock_release_token(c, key, r.token);
        if (rc == DISTLOCK_OK) {
            if (!co.quiet)
                printf("%s: released\n", key);
        } else if (rc == DISTLOCK_ENOTOWNER) {
            if (!co.quiet)
                cli_err("'%s' is not held by that token; nothing released", key);
        } else {
            char what[128];
            snprintf(what, sizeof what, "cannot release '%.80s'", key);
            cli_report(what, rc);
        }
        rc = cli_exit_for_status(rc); /* 0, 1 (not that token's) or the error's */
    } else {
        int deleted = 0;
        rc = distlock_admin_force_release(c, key, &deleted);
        if (rc == DISTLOCK_OK) {
            if (!co.quiet) {
                if (deleted > 0)
                    printf("%s: force-released (deleted on %d of %d node%s)\n", key, deleted,
                           n, n == 1 ? "" : "s");
                else
                    printf("%s: was not held; nothing deleted\n", key);
            }
            rc = deleted > 0 ? CLI_EXIT_OK : CLI_EXIT_NO;
        } else {
            char what[160];
            snprintf(what, sizeof what, "cannot force-release '%.80s' (deleted on %d of %d "
                     "nodes)", key, deleted, n);
            rc = cli_report(what, rc);
        }
    }
    distlock_client_free(c);
    return rc;
}
