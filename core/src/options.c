/* options.c -- the option table, the one place that says
 * which options exist, their names, types, ranges and defaults. The setters
 * (client.c) check against it, distlock_client_new() takes its defaults from
 * it, and the front ends look options up in it by name rather than keeping a
 * list or ranges of their own.
 *
 * Rows: integer options first, by id, then string options, by id
 * (distlock_option_at walks them in this order).
 *
 * Layer: 7 API
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define MS_MAX 3600000L  /* an hour: longer than any sane per-node wait */
#define STRING_MAX 4096L /* a path, a name, a credential */

static const distlock_option_info table[] = {
    { "connect_timeout_ms", DISTLOCK_OPT_CONNECT_TIMEOUT_MS, DISTLOCK_OPTION_LONG, 1, MS_MAX, 1000,
      "per node: connect + first reply, in ms" },
    { "command_timeout_ms", DISTLOCK_OPT_COMMAND_TIMEOUT_MS, DISTLOCK_OPTION_LONG, 1, MS_MAX, 500,
      "per node: one reply, in ms" },
    { "drift_ppm", DISTLOCK_OPT_DRIFT_PPM, DISTLOCK_OPTION_LONG, 0, 500000, 10000,
      "clock drift allowance: ttl*ppm/1e6 + drift_min_ms" },
    { "drift_min_ms", DISTLOCK_OPT_DRIFT_MIN_MS, DISTLOCK_OPTION_LONG, 0, MS_MAX, 2,
      "clock drift allowance added to every lease, in ms" },
    { "retry_min_ms", DISTLOCK_OPT_RETRY_MIN_MS, DISTLOCK_OPTION_LONG, 1, MS_MAX, 2,
      "first backoff step of a waiting acquire, in ms" },
    { "retry_max_ms", DISTLOCK_OPT_RETRY_MAX_MS, DISTLOCK_OPTION_LONG, 1, MS_MAX, 100,
      "backoff cap of a waiting acquire (its re-check interval), in ms" },
    { "tls_verify", DISTLOCK_OPT_TLS_VERIFY, DISTLOCK_OPTION_LONG, 0, 1, 1,
      "1: verify the server's TLS certificate and name; 0: DO NOT verify" },
    { "wait_replicas", DISTLOCK_OPT_WAIT_REPLICAS, DISTLOCK_OPTION_LONG, 0, 64, 0,
      "WAIT for this many replicas after each grant, extend, fence raise (0: off)" },
    { "wait_timeout_ms", DISTLOCK_OPT_WAIT_TIMEOUT_MS, DISTLOCK_OPTION_LONG, 1, 60000, 100,
      "how long WAIT waits for the replicas, in ms" },
    { "stats", DISTLOCK_OPT_STATS, DISTLOCK_OPTION_LONG, 0, 1, 1,
      "1: keep the client's counters; 0: stop counting" },
    { "owner_info", DISTLOCK_OPT_OWNER_INFO, DISTLOCK_OPTION_LONG, 0, 1, 0,
      "1: every acquire also stores who holds the lock in {key}:owner" },
    /* Each run on the wire holds one connection set (a connection per
     * node); the bound keeps a multi's sockets per node at this. */
    { "multi_runs", DISTLOCK_OPT_MULTI_RUNS, DISTLOCK_OPTION_LONG, 1, 1024, 16,
      "per multi: operations on the wire at once (connections per node); the rest wait in turn" },
    { "username", DISTLOCK_OPT_USERNAME, DISTLOCK_OPTION_STRING, 0, STRING_MAX, 0,
      "ACL user for every node" },
    { "password", DISTLOCK_OPT_PASSWORD, DISTLOCK_OPTION_STRING, 0, STRING_MAX, 0,
      "password for every node" },
    { "tls_ca_file", DISTLOCK_OPT_TLS_CA_FILE, DISTLOCK_OPTION_STRING, 0, STRING_MAX, 0,
      "PEM file of trusted CAs (default: the system store)" },
    { "tls_ca_dir", DISTLOCK_OPT_TLS_CA_DIR, DISTLOCK_OPTION_STRING, 0, STRING_MAX, 0,
      "hashed directory of trusted CAs" },
    { "tls_cert", DISTLOCK_OPT_TLS_CERT, DISTLOCK_OPTION_STRING, 0, STRING_MAX, 0,
      "client certificate chain, PEM (mutual TLS)" },
    { "tls_key", DISTLOCK_OPT_TLS_KEY, DISTLOCK_OPTION_STRING, 0, STRING_MAX, 0,
      "its private key, PEM (default: in tls_cert)" },
    { "tls_server_name", DISTLOCK_OPT_TLS_SERVER_NAME, DISTLOCK_OPTION_STRING, 0, STRING_MAX, 0,
      "name sent as SNI and checked against the certificate (default: the URI's host)" },
    { "owner_label", DISTLOCK_OPT_OWNER_LABEL, DISTLOCK_OPTION_STRING, 0,
      DISTLOCK_OWNER_LABEL_MAX, 0, "a label stored with the owner metadata" },
};
#define NROWS (sizeof(table) / sizeof(table[0]))

const distlock_option_info *distlock_option_at(size_t i)
{
    return i < NROWS ? &table[i] : NULL;
}

const distlock_option_info *distlock__option_find(distlock_option id)
{
    for (size_t i = 0; i < NROWS; i++)
        if (table[i].id == id)
            return &table[i];
    return NULL;
}

const distlock_option_info *distlock_option_by_id(distlock_option id)
{
    const distlock_option_info *o;

    distlock__clear_error();
    if ((o = distlock__option_find(id)) == NULL)
        distlock__fail(DISTLOCK_EINVAL, "unknown option id %d", (int)id);
    return o;
}

/* Edit distance of two short names (the typo a suggestion should catch);
 * names longer than the row buffer count as far apart. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la >= 64 || lb >= 64)
        return (size_t)-1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            diag = up;
            row[j] = best;
        }
    }
    return row[lb];
}

/* The caller's text, as a message may quote it: cut, and not at all when it
 * may carry a secret (a URI, user@password, name=value given whole). */
static const char *shown(const char *text)
{
    if (text == NULL)
        return "(null)";
    if (strchr(text, '@') || strstr(text, "://") || strchr(text, '='))
        return "(not shown)";
    return text;
}

const distlock_option_info *distlock_option_by_name(const char *name)
{
    const distlock_option_info *near = NULL;
    size_t best = 4;  /* more edits than 3 is another word, not a typo */

    distlock__clear_error();
    if (name == NULL) {
        distlock__fail(DISTLOCK_EINVAL, "option name must not be NULL");
        return NULL;
    }
    for (size_t i = 0; i < NROWS; i++) {
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
        size_t d = distance(name, table[i].name);
        if (d < best) {
            best = d;
            near = &table[i];
        }
    }
    if (near)
        distlock__fail(DISTLOCK_EINVAL, "unknown option \"%.64s\" (did you mean \"%s\"?)",
                       shown(name), near->name);
    else
        distlock__fail(DISTLOCK_EINVAL, "unknown option \"%.64s\"", shown(name));
    return NULL;
}

int distlock__option_check_long(const distlock_option_info *o, long v)
{
    if (o->type != DISTLOCK_OPTION_LONG)
        return distlock__fail(DISTLOCK_EINVAL, "option \"%s\" takes a string, not an integer",
                              o->name);
    if (v < o->min || v > o->max)
        return distlock__fail(DISTLOCK_EINVAL, "option \"%s\": value %ld out of range %ld..%ld",
                              o->name, v, o->min, o->max);
    return DISTLOCK_OK;
}

int distlock__option_parse_long(const distlock_option_info *o, const char *text, long *v)
{
    char *end;

    /* The text form command lines and ini files give: a decimal integer,
     * nothing around it. The value is not secret (integer options only). */
    errno = 0;
    *v = text ? strtol(text, &end, 10) : 0;
    if (text == NULL || *text == '\0' || *end != '\0' || isspace((unsigned char)text[0]) ||
        errno == ERANGE) {
        return distlock__fail(DISTLOCK_EINVAL, "option \"%s\" takes an integer, got \"%.40s\"",
                              o->name, shown(text));
    }
    return distlock__option_check_long(o, *v);
}

int distlock__option_check_string(const distlock_option_info *o, const char *v)
{
    size_t n = v ? strlen(v) : 0;
    if (n > (size_t)o->max)
        return distlock__fail(DISTLOCK_EINVAL, "option \"%s\": %zu bytes, at most %ld", o->name, n,
                              o->max);
    return DISTLOCK_OK;
}
