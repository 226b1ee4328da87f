/*
 * list.c -- machine-readable views of locks: `distlock status --json` (one
 * key) and `distlock list PATTERN` (the keys that match, found with SCAN).
 *
 * JSON (documented in distlock(1) and cli/README.md; fields are only ever
 * added): one object per key,
 *   {"key", "verdict": "held"|"free"|"not_held"|"unknown", "held": bool,
 *    "token": the token on the most nodes or null, "holder_nodes",
 *    "nodes_total", "quorum", "answered", "kind": "lock"|"readers"|
 *    "semaphore"|"other"|"free", "holders" and "permits" (readers and
 *    semaphores only), "writer" (readers only: a writer waits or holds),
 *    "ttl_ms": the holder's shortest
 *    TTL left (-1: no expiry) or null, "fence": the highest fence counter
 *    or null, "owner": the holder's owner metadata {"host", "pid",
 *    "program", "since_ms", "label", "ttl_ms"} or null (none stored, or
 *    not held), "error": why the verdict is unknown (only then),
 *    "nodes": [{"uri" (password masked), "state": "held"|"free"|"taken"|
 *    "error", "token", "ttl_ms", "fence", "error" (only for "error")}]}.
 * Strings: bytes outside printable ASCII are written \u00XX, one per byte,
 * so any token (another implementation's) gives valid JSON.
 *
 * `list` is bounded: each SCAN step asks the server for O(--count) work
 * (distlock_admin_scan: MATCH, COUNT, the type of each key), it stops once --limit keys
 * were found, and every key found costs one round for the verdict plus one
 * read per node (and, when held, one round for its owner metadata).
 */
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ------------------------------------------------------------ JSON out */

/* "kind" (the core's name of it), and for read locks and semaphores
 * "holders" and "permits" (as distlock_holder_info has them: live members,
 * the latest acquire's P). */
static void json_kind(FILE *f, const distlock_holder_info *h)
{
    fprintf(f, ", \"kind\": \"%s\"", distlock_holder_kind_name(h->kind));
    if (h->kind == DISTLOCK_HOLDER_READERS || h->kind == DISTLOCK_HOLDER_SEMAPHORE)
        fprintf(f, ", \"holders\": %ld", h->holders);
    if (h->kind == DISTLOCK_HOLDER_SEMAPHORE)
        fprintf(f, ", \"permits\": %ld", h->permits);
    if (h->kind == DISTLOCK_HOLDER_READERS)
        fprintf(f, ", \"writer\": %s", h->writer ? "true" : "false");
}

static void json_str(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_cstr(FILE *f, const char *s)
{
    if (s)
        json_str(f, s, strlen(s));
    else
        fputs("null", f);
}

/* A library error as text (the library masks its passwords); free() it. */
static char *error_text(int st)
{
    char *buf = NULL;
    const char *detail = distlock_last_error();
    if (asprintf(&buf, "%s%s%s", distlock_strerror(st), *detail ? ": " : "", detail) < 0)
        return NULL;
    return buf;
}

/* A Redis Cluster node: its "slot" and "master" (host:port, as learnt by the
 * inspect before; null if not known). Nothing for other nodes. */
static void json_route(FILE *f, distlock_client *c, const char *key, int i)
{
    int slot = 0;
    char master[300];
    if (distlock_admin_cluster_route(c, key, i, &slot, master, sizeof master) != 1)
        return;
    fprintf(f, ", \"slot\": %d, \"master\": ", slot);
    json_cstr(f, master[0] ? master : NULL);
}

/* One node's object: read on its own (distlock_admin_holder of node i,
 * then its fence counter). Returns that node's fence counter, or -1. */
static int64_t json_node(FILE *f, distlock_client *c, const char *key, int i)
{
    distlock_holder_info h = { .size = sizeof h };
    int64_t fence = -1, v = 0;
    int st = distlock_admin_holder(c, key, i, &h);
    char *err = st < 0 ? error_text(st) : NULL;
    if (st >= 0 && distlock_admin_fence(c, key, i, &v) == 1)
        fence = v;
    const char *uri = distlock_client_node_uri(c, i);  /* masked by the library */
    fputs("{\"uri\": ", f);
    json_cstr(f, uri ? uri : "?");
    json_route(f, c, key, i);
    fprintf(f, ", \"state\": \"%s\"",
            st < 0 ? "error" : st ? "held" : h.taken ? "taken" : "free");
    if (st >= 0)
        json_kind(f, &h);
    fputs(", \"token\": ", f);
    json_cstr(f, st == 1 ? h.token : NULL);
    if (st == 1)
        fprintf(f, ", \"ttl_ms\": %ld", h.pttl_ms);
    else
        fputs(", \"ttl_ms\": null", f);
    if (fence >= 0)
        fprintf(f, ", \"fence\": %lld", (long long)fence);
    else
        fputs(", \"fence\": null", f);
    if (st < 0) {
        fputs(", \"error\": ", f);
        json_cstr(f, err ? err : distlock_strerror(st));
    }
    fputc('}', f);
    free(err);
    return fence;
}

/* The verdict's name, as `status` words it. */
static const char *verdict_name(int st, int taken)
{
    if (st == 1)
        return "held";
    if (st == 0)
        return taken == 0 ? "free" : "not_held";
    return "unknown";
}

/* The whole object for one key: the core's verdict from one round
 * (distlock_admin_holder, node -1), then each node read on its own. `err`
 * is the verdict's error text (st < 0), or NULL. */
static void json_key(FILE *f, distlock_client *c, const char *key, int st,
                     const distlock_holder_info *h, const char *err)
{
    int n = distlock_client_node_count(c);
    int64_t fence = -1;
    fputs("{\"key\": ", f);
    json_cstr(f, key);
    fprintf(f, ", \"verdict\": \"%s\", \"held\": %s", verdict_name(st, h->taken),
            st == 1 ? "true" : "false");
    json_kind(f, h);
    fputs(", \"token\": ", f);
    json_cstr(f, h->nodes > 0 ? h->token : NULL);
    fprintf(f, ", \"holder_nodes\": %d, \"nodes_total\": %d, \"quorum\": %d, \"answered\": %d",
            h->nodes, n, distlock_client_quorum(c), h->answered);
    if (st == 1)
        fprintf(f, ", \"ttl_ms\": %ld", h->pttl_ms);
    else
        fputs(", \"ttl_ms\": null", f);
    distlock_owner_info o = { .size = sizeof o };
    fputs(", \"owner\": ", f);
    if (st == 1 && distlock_admin_owner(c, key, -1, &o) == 1) {
        fputs("{\"host\": ", f);
        json_cstr(f, o.host);
        fprintf(f, ", \"pid\": %ld, \"program\": ", o.pid);
        json_cstr(f, o.program);
        fprintf(f, ", \"since_ms\": %lld, \"label\": ", o.since_ms);
        json_cstr(f, o.label);
        fprintf(f, ", \"ttl_ms\": %ld}", o.pttl_ms);
    } else {
        fputs("null", f);
    }
    if (err) {
        fputs(", \"error\": ", f);
        json_cstr(f, err);
    }
    fputs(", \"nodes\": [", f);
    for (int i = 0; i < n; i++) {
        if (i)
            fputs(", ", f);
        int64_t v = json_node(f, c, key, i);
        if (v > fence)
            fence = v;
    }
    fputc(']', f);
    /* Last, once the nodes were read: the highest counter, which is the
     * fence of the latest fencing acquire (the holder's, if it took one). */
    if (fence >= 0)
        fprintf(f, ", \"fence\": %lld}", (long long)fence);
    else
        fputs(", \"fence\": null}", f);
}

void cli_status_json(distlock_client *c, const char *key, int st,
                     const distlock_holder_info *h)
{
    char *err = st < 0 ? error_text(st) : NULL;
    json_key(stdout, c, key, st, h, st < 0 ? (err ? err : distlock_strerror(st)) : NULL);
    fputc('\n', stdout);
    fflush(stdout);
    free(err);
}

/* ------------------------------------------------------------ key set */

/* The keys found so far: a small open-addressing set (SCAN may return a key
 * twice, and N nodes return the same locks). */
struct keyset {
    char **keys;      /* in insertion order */
    size_t n;
    size_t *slots;    /* index + 1, 0 = empty */
    size_t cap;       /* power of two, > 2 n */
};

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static int keyset_grow(struct keyset *ks)
{
    size_t cap = ks->cap ? ks->cap * 2 : 64;
    size_t *slots = calloc(cap, sizeof *slots);
    char **keys = realloc(ks->keys, cap / 2 * sizeof *keys);
    if (!slots || !keys) {
        free(slots);
        if (keys)
            ks->keys = keys;
        return -1;
    }
    ks->keys = keys;
    for (size_t i = 0; i < ks->n; i++) {
        size_t j = hash_bytes(keys[i], strlen(keys[i])) & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = i + 1;
    }
    free(ks->slots);
    ks->slots = slots;
    ks->cap = cap;
    return 0;
}

/* Add key (len bytes, no NUL inside: a lock key never has one). Returns 1
 * added, 0 already there, -1 out of memory. */
static int keyset_add(struct keyset *ks, const char *key, size_t len)
{
    if ((ks->n + 1) * 2 >= ks->cap && keyset_grow(ks) < 0)
        return -1;
    size_t j = hash_bytes(key, len) & (ks->cap - 1);
    for (; ks->slots[j]; j = (j + 1) & (ks->cap - 1)) {
        const char *k = ks->keys[ks->slots[j] - 1];
        if (strlen(k) == len && memcmp(k, key, len) == 0)
            return 0;
    }
    char *copy = strndup(key, len);
    if (!copy)
        return -1;
    ks->keys[ks->n++] = copy;
    ks->slots[j] = ks->n;
    return 1;
}

static void keyset_free(struct keyset *ks)
{
    for (size_t i = 0; i < ks->n; i++)
        free(ks->keys[i]);
    free(ks->keys);
    free(ks->slots);
}

/* ------------------------------------------------------------ list */

struct list_opts {
    struct cli_common co;
    const char *pattern;
    long limit;
    long count;
    int json;
};

struct scan_ctx {
    struct keyset *ks;
    long limit;
    int oom;
};

static int on_key(const char *key, size_t len, void *arg)
{
    struct scan_ctx *sc = arg;
    if (len == 0 || memchr(key, '\0', len) || len > DISTLOCK_KEY_MAX)
        return 0;  /* no lock key looks like that */
    int r = keyset_add(sc->ks, key, len);
    if (r < 0)
        sc->oom = 1;
    return r < 0 || (long)sc->ks->n >= sc->limit;
}

/* Scan every node until --limit keys are found or every scan is complete.
 * Returns 0, or the number of nodes whose scan failed (said on stderr);
 * *truncated when --limit stopped a scan that had more to read. */
static int scan_nodes(distlock_client *c, const struct list_opts *o, struct keyset *ks,
                      int *truncated)
{
    int n = distlock_client_node_count(c), failed = 0;
    struct scan_ctx sc = {ks, o->limit, 0};
    *truncated = 0;
    for (int i = 0; i < n; i++) {
        unsigned long long cursor = 0;
        do {
            if ((long)ks->n >= o->limit) {
                *truncated = 1;
                break;
            }
            int r = distlock_admin_scan(c, i, o->pattern, o->count, &cursor, on_key, &sc);
            if (r < 0) {
                const char *uri = distlock_client_node_uri(c, i);  /* masked */
                char what[200];
                snprintf(what, sizeof what, "cannot scan %s", uri ? uri : "a node");
                if (!o->co.quiet)
                    cli_report(what, r);
                failed++;
                break;
            }
            if (sc.oom)
                return -1;
        } while (cursor != 0);
    }
    return failed;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One line of the text listing: the verdict, then each node's view. */
static void text_key(distlock_client *c, const char *key, int st, const distlock_holder_info *h)
{
    int n = distlock_client_node_count(c);
    char d[32];
    int members = st == 0 && (h->kind == DISTLOCK_HOLDER_SEMAPHORE ||
                              h->kind == DISTLOCK_HOLDER_READERS);
    printf("%s  %s", key, distlock_holder_kind_name(h->kind));
    if (members && h->kind == DISTLOCK_HOLDER_SEMAPHORE)
        printf("  %ld/%ld permits", h->holders, h->permits);
    else if (members)
        printf("  %ld reader%s%s", h->holders, h->holders == 1 ? "" : "s",
               h->writer ? ", a writer waiting" : "");
    else
        printf("  %s", verdict_name(st, h->taken));
    if (h->nodes > 0)
        printf("  %d/%d", h->nodes, n);
    if (st == 1)
        printf("  %s", h->pttl_ms >= 0 ? cli_fmt_ms(h->pttl_ms, d, sizeof d) : "no-expiry");
    if (h->nodes > 0) {
        printf("  token ");
        for (const unsigned char *p = (const unsigned char *)h->token; *p; p++) {
            if (*p > 0x20 && *p < 0x7f && *p != '\\')
                putchar(*p);
            else
                printf("\\x%02x", *p);
        }
    }
    printf("  [");
    for (int i = 0; i < n; i++) {
        distlock_holder_info one = { .size = sizeof one };
        int r = distlock_admin_holder(c, key, i, &one);
        if (r == 0 && one.kind == DISTLOCK_HOLDER_SEMAPHORE)
            printf("%s%ld/%ld", i ? " " : "", one.holders, one.permits);
        else if (r == 0 && one.kind == DISTLOCK_HOLDER_READERS)
            printf("%s%ld", i ? " " : "", one.holders);
        else
            printf("%s%s", i ? " " : "",
                   r == 1 ? (one.pttl_ms >= 0 ? cli_fmt_ms(one.pttl_ms, d, sizeof d) : "no-expiry")
                          : r < 0 ? "error" : one.taken ? "taken" : "free");
    }
    printf("]\n");
}

static const struct option list_longopts[] = {
    CLI_COMMON_LONGOPTS,
    {"json", no_argument, NULL, 'J'},
    {"limit", required_argument, NULL, 'l'},
    {"count", required_argument, NULL, 'C'},
    {NULL, 0, NULL, 0}
};

void cli_help_list(FILE *f)
{
    fprintf(f,
"Usage: distlock list [options] PATTERN\n"
"\n"
"Show the locks whose keys match PATTERN (a Redis glob: job:*, backup-?), each with\n"
"its kind (lock, readers, semaphore, other), the library's verdict (held /\n"
"not_held / unknown; a semaphore's permits held/N, read locks' count), how many\n"
"nodes hold it, the holder's TTL left and token, and each node's TTL left (or\n"
"count). Keys are found with SCAN (MATCH, COUNT, and each key's type) on every\n"
"node, a bounded amount of server work per step, never KEYS: safe on a big\n"
"keyspace. Every string key that matches is shown (Redis cannot tell a lock from\n"
"another string), and the sorted sets of read locks and semaphores: give a\n"
"pattern that names locks.\n"
"Fence counters ({KEY}:fence) are left out. Reads only.\n"
"\n"
"Options:\n"
"      --json                  one JSON object: {\"pattern\", \"truncated\", \"complete\",\n"
"                              \"locks\": [objects as status --json prints]}\n"
"      --limit N               show at most N locks (default 100; 1..100000)\n"
"      --count N               SCAN COUNT per step (default 1000; 1..100000)\n"
"  -s, --servers URIS          comma-separated Redis URIs (default: $DISTLOCK_SERVERS,\n"
"                              else " CLI_DEFAULT_SERVERS ")\n"
"      --connect-timeout DUR, --timeout DUR, TLS options: as for status\n"
"  -q, --quiet                 no messages on stderr\n"
"\n"
"Exit status: 0 listed (also when nothing matches); 69 a node could not be scanned\n"
"(what the others hold is still listed); 64 bad arguments; 70 out of memory.\n");
}

static int parse_list(int argc, char **argv, struct list_opts *o)
{
    int opt;
    cli_common_init(&o->co, "list");
    o->limit = 100;
    o->count = 1000;
    o->json = 0;
    opterr = 0;
    optind = 1;
    while ((opt = getopt_long(argc, argv, ":" CLI_COMMON_SHORTOPTS, list_longopts, NULL)) != -1) {
        int r = cli_common_option(&o->co, opt, optarg);
        if (r < 0)
            return cli_usage_error("list", "invalid option value");
        if (r > 0)
            continue;
        switch (opt) {
        case 'h':
            cli_help_list(stdout);
            return CLI_EXIT_OK;
        case 'J':
            o->json = 1;
            break;
        case 'l':
        case 'C':
            if (cli_parse_int(optarg, 1, 100000, opt == 'l' ? &o->limit : &o->count))
                return cli_usage_error("list", "invalid %s '%s' (an integer 1..100000)",
                                       opt == 'l' ? "--limit" : "--count", optarg);
            break;
        default:
            return cli_getopt_error("list", opt, argv);
        }
    }
    if (optind >= argc)
        return cli_usage_error("list", "missing PATTERN (e.g. 'job:*')");
    if (optind + 1 < argc)
        return cli_usage_error("list", "one PATTERN only (extra argument '%s')",
                               cli_arg_shown(argv[optind + 1], (char[256]){0}, 256));
    if (!argv[optind][0])
        return cli_usage_error("list", "PATTERN is empty");
    o->pattern = argv[optind];
    return -1;
}

/* Print every key found, sorted: the verdict (one round) and the nodes. */
static void print_keys(distlock_client *c, const struct list_opts *o, struct keyset *ks,
                       int truncated, int complete)
{
    if (ks->n > 0)  /* no keys: ks->keys is NULL, which qsort must not get */
        qsort(ks->keys, ks->n, sizeof *ks->keys, cmp_str);
    if (o->json) {
        fputs("{\"pattern\": ", stdout);
        json_cstr(stdout, o->pattern);
        fprintf(stdout, ", \"truncated\": %s, \"complete\": %s, \"locks\": [",
                truncated ? "true" : "false", complete ? "true" : "false");
    }
    int shown = 0;
    for (size_t i = 0; i < ks->n; i++) {
        distlock_holder_info h = { .size = sizeof h };
        int st = distlock_admin_holder(c, ks->keys[i], -1, &h);
        if (st == 0 && h.taken == 0)
            continue;  /* gone since the scan found it (released, expired) */
        if (o->json) {
            char *err = st < 0 ? error_text(st) : NULL;
            fputs(shown ? ",\n  " : "\n  ", stdout);
            json_key(stdout, c, ks->keys[i], st, &h, st < 0 ? (err ? err : distlock_strerror(st)) : NULL);
            free(err);
        } else {
            text_key(c, ks->keys[i], st, &h);
        }
        shown++;
    }
    if (o->json)
        fputs(shown ? "\n]}\n" : "]}\n", stdout);
    else if (truncated && !o->co.quiet)
        cli_err("stopped at --limit %ld keys; there may be more", o->limit);
    fflush(stdout);
}

int cli_list(int argc, char **argv)
{
    struct list_opts o;
    int rc = parse_list(argc, argv, &o);
    if (rc >= 0)
        return rc;
    distlock_client *c = NULL;
    if ((rc = cli_client(&o.co, &c)) != 0)
        return rc;
    struct keyset ks = {0};
    int truncated = 0;
    int failed = scan_nodes(c, &o, &ks, &truncated);
    if (failed < 0) {
        cli_err("out of memory while listing");
        rc = CLI_EXIT_SOFTWARE;
    } else {
        print_keys(c, &o, &ks, truncated, failed == 0 && !truncated);
        rc = failed ? CLI_EXIT_UNAVAILABLE : CLI_EXIT_OK;
    }
    keyset_free(&ks);
    distlock_client_free(c);
    return rc;
}
