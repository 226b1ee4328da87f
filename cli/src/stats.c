/*
 * stats.c -- the client's metrics in the distlock command.
 *
 * A `distlock run` process is short-lived, so there is nothing to scrape
 * while it runs. What it can do:
 *  - with -v, print its own client's counters on stderr at exit;
 *  - with --stats-file FILE, add its counters to FILE: "name value" lines,
 *    updated under flock(2) and replaced by rename(2), so the counters
 *    accumulate over every run that names FILE (monotonic, as Prometheus
 *    expects of a counter) and a reader never sees half a file;
 *  - `distlock stats [--prometheus] [FILE]` prints FILE, as it is or in the
 *    Prometheus text exposition format (for node_exporter's textfile
 *    collector: docs/observability.md "Metrics").
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "cli.h"

struct entries {
    size_t n;
    distlock_stat *e;
};

static int client_entries(distlock_client *c, struct entries *out)
{
    out->n = 0;
    out->e = NULL;
    size_t n = 0;
    if (distlock_client_stats(c, NULL, 0, &n) != DISTLOCK_OK || n == 0)
        return -1;
    if ((out->e = calloc(n, sizeof(*out->e))) == NULL)
        return -1;
    if (distlock_client_stats(c, out->e, n, &out->n) != DISTLOCK_OK) {
        free(out->e);
        out->e = NULL;
        return -1;
    }
    return 0;
}

void cli_stats_verbose(const struct cli_common *co, distlock_client *c)
{
    struct entries s;
    if (!co->verbose || co->quiet || c == NULL || client_entries(c, &s) != 0)
        return;
    fprintf(stderr, "%s: stats of this run:\n", cli_prog);
    for (size_t k = 0; k < s.n; k++)
        if (s.e[k].value != 0 || strstr(s.e[k].name, "_bucket") == NULL)
            fprintf(stderr, "  %s %" PRIu64 "\n", s.e[k].name, s.e[k].value);
    free(s.e);
}

/* Read "name value" lines of f into *s (appending); bad lines are skipped. */
static int read_file(FILE *f, struct entries *s)
{
    char line[256];
    while (fgets(line, sizeof line, f)) {
        char name[DISTLOCK_STAT_NAME_MAX];
        unsigned long long v;
        if (line[0] == '#' || sscanf(line, "%87s %llu", name, &v) != 2)
            continue;
        distlock_stat *e = realloc(s->e, (s->n + 1) * sizeof(*e));
        if (e == NULL)
            return -1;
        s->e = e;
        snprintf(s->e[s->n].name, sizeof s->e[s->n].name, "%s", name);
        s->e[s->n++].value = v;
    }
    return 0;
}

/* Add this client's counters to `file` (created if missing). 0, or -1 with
 * a message printed. */
int cli_stats_save(const char *file, distlock_client *c)
{
    struct entries mine, all = {0, NULL};
    if (client_entries(c, &mine) != 0) {
        cli_err("--stats-file: cannot read the client's stats");
        return -1;
    }
    int fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) {
        cli_err("--stats-file %s: %s", file, strerror(errno));
        if (fd >= 0)
            close(fd);
        free(mine.e);
        return -1;
    }
    /* Under the lock, the file may have been replaced by a writer before
     * us: read the current one by name. */
    FILE *in = fopen(file, "r");
    if (in) {
        (void)read_file(in, &all);
        fclose(in);
    }
    for (size_t k = 0; k < mine.n; k++) {
        size_t j = 0;
        while (j < all.n && strcmp(all.e[j].name, mine.e[k].name) != 0)
            j++;
        if (j < all.n) {
            all.e[j].value += mine.e[k].value;
            continue;
        }
        distlock_stat *e = realloc(all.e, (all.n + 1) * sizeof(*e));
        if (e == NULL)
            break;
        all.e = e;
        all.e[all.n++] = mine.e[k];
    }
    char *tmp = NULL;
    int rc = -1;
    if (asprintf(&tmp, "%s.%d.tmp", file, (int)getpid()) >= 0) {
        FILE *out = fopen(tmp, "w");
        if (out) {
            fprintf(out, "# distlock counters, summed over every run (distlock stats)\n");
            for (size_t k = 0; k < all.n; k++)
                fprintf(out, "%s %" PRIu64 "\n", all.e[k].name, all.e[k].value);
            rc = fclose(out) == 0 && rename(tmp, file) == 0 ? 0 : -1;
        }
        if (rc != 0) {
            cli_err("--stats-file %s: %s", file, strerror(errno));
            unlink(tmp);
        }
    }
    free(tmp);
    close(fd);  /* after the rename: the next writer reads our file */
    free(mine.e);
    free(all.e);
    return rc;
}

/* ------------------------------------------------------------ exposition */

/* The family of an entry: its name without labels, "_bucket" etc. */
static void family(const char *name, char *out, size_t size, const char **kind)
{
    size_t len = strcspn(name, "{");
    snprintf(out, size, "%.*s", (int)len, name);
    *kind = "counter";
    static const char *const suffix[] = {"_bucket", "_sum", "_count"};
    for (int i = 0; i < 3; i++) {
        size_t sl = strlen(suffix[i]), ol = strlen(out);
        if (ol > sl && strcmp(out + ol - sl, suffix[i]) == 0) {
            out[ol - sl] = '\0';
            *kind = "histogram";
            break;
        }
    }
}

static const char *help_for(const char *fam)
{
    static const struct { const char *fam, *help; } h[] = {
        {"acquire_granted_total", "Acquires that got the lock."},
        {"acquire_refused_total", "Acquires refused: held by another owner (after any wait)."},
        {"acquire_failed_total", "Acquires that failed, by status."},
        {"release_total", "Releases that deleted the lock."},
        {"release_failed_total", "Releases that failed (not the owner any more, or errors)."},
        {"extend_total", "Extends that renewed the lease on a quorum."},
        {"extend_failed_total", "Extends that failed."},
        {"renewal_total", "Automatic renewals of one lock that succeeded."},
        {"renewal_failed_total", "Automatic renewals of one lock that renewed nothing."},
        {"lost_total", "Held locks found lost."},
        {"acquire_wait_us", "Duration of acquire calls, whatever their outcome."},
        {"hold_us", "Time from acquire to release of a lock."},
        {"node_errors_total", "Requests to a node that failed or got an error reply."},
        {"node_timeouts_total", "Requests to a node that got no reply in time."},
        {"node_reconnects_total", "Connections re-made to a node."},
    };
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++)
        if (!strcmp(h[i].fam, fam))
            return h[i].help;
    return "distlock metric.";
}

/* Print one entry: microseconds become seconds (Prometheus' base unit),
 * in the name, the bucket bounds and the sum. */
static void print_sample(FILE *f, const char *name, uint64_t value)
{
    const char *us = strstr(name, "_us_");
    if (us == NULL) {
        fprintf(f, "distlock_%s %" PRIu64 "\n", name, value);
        return;
    }
    const char *rest = us + 3, *le = strstr(rest, "{le=\"");
    fprintf(f, "distlock_%.*s_seconds", (int)(us - name), name);
    if (le == NULL)
        fprintf(f, "%s", rest);
    else if (le[5] == '+')
        fprintf(f, "%.*s{le=\"+Inf\"}", (int)(le - rest), rest);
    else
        fprintf(f, "%.*s{le=\"%g\"}", (int)(le - rest), rest, strtod(le + 5, NULL) / 1e6);
    if (strcmp(rest, "_sum") == 0)
        fprintf(f, " %.6f\n", (double)value / 1e6);
    else
        fprintf(f, " %" PRIu64 "\n", value);
}

void cli_stats_prometheus(FILE *f, const distlock_stat *e, size_t n)
{
    char last[DISTLOCK_STAT_NAME_MAX] = "";
    for (size_t k = 0; k < n; k++) {
        char fam[DISTLOCK_STAT_NAME_MAX], pfam[DISTLOCK_STAT_NAME_MAX + 16];
        const char *kind;
        family(e[k].name, fam, sizeof fam, &kind);
        if (strcmp(fam, last) != 0) {
            const char *us = strstr(fam, "_us");
            if (us && us[3] == '\0')
                snprintf(pfam, sizeof pfam, "distlock_%.*s_seconds", (int)(us - fam), fam);
            else
                snprintf(pfam, sizeof pfam, "distlock_%s", fam);
            fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", pfam, help_for(fam), pfam, kind);
            snprintf(last, sizeof last, "%s", fam);
        }
        print_sample(f, e[k].name, e[k].value);
    }
}

void cli_help_stats(FILE *f)
{
    fprintf(f,
"Usage: distlock stats [--prometheus] [FILE]\n"
"\n"
"Print the counters that 'distlock run --stats-file FILE' accumulated over\n"
"every run that named FILE (default: $DISTLOCK_STATS_FILE): acquires granted,\n"
"refused and failed by status, the wait and hold time histograms, releases,\n"
"renewals, lost locks, and each node's errors, timeouts and reconnects.\n"
"\n"
"Options:\n"
"  -p, --prometheus            the Prometheus text exposition format (times in\n"
"                              seconds), e.g. for node_exporter's textfile\n"
"                              collector\n"
"  -h, --help                  this help\n"
"\n"
"Exit status: 0; 66 FILE cannot be read; 64 bad arguments.\n");
}

int cli_stats(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"prometheus", no_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}
    };
    int opt, prom = 0;
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":ph", longopts, NULL)) != -1) {
        if (opt == 'p')
            prom = 1;
        else if (opt == 'h') {
            cli_help_stats(stdout);
            return CLI_EXIT_OK;
        } else
            return cli_getopt_error("stats", opt, argv);
    }
    if (optind + 1 < argc)
        return cli_usage_error("stats", "one FILE only (extra argument '%s')",
                               cli_arg_shown(argv[optind + 1], (char[256]){0}, 256));
    const char *file = optind < argc ? argv[optind] : getenv("DISTLOCK_STATS_FILE");
    if (file == NULL || file[0] == '\0')
        return cli_usage_error("stats", "missing FILE (or $DISTLOCK_STATS_FILE)");
    FILE *in = fopen(file, "r");
    struct entries s = {0, NULL};
    if (in == NULL) {
        cli_err("stats: %s: %s", file, strerror(errno));
        return CLI_EXIT_NOINPUT;
    }
    int rc = read_file(in, &s);
    fclose(in);
    if (rc != 0) {
        free(s.e);
        cli_err("stats: out of memory");
        return CLI_EXIT_SOFTWARE;
    }
    if (prom)
        cli_stats_prometheus(stdout, s.e, s.n);
    else
        for (size_t k = 0; k < s.n; k++)
            printf("%s %" PRIu64 "\n", s.e[k].name, s.e[k].value);
    free(s.e);
    return CLI_EXIT_OK;
}
