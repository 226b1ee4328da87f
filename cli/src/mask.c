/*
 * mask.c -- the one place where the distlock command hides passwords.
 *
 * Every message the command prints goes through cli_mask_text() (cli_err()
 * and cli_usage_error() call it), and everything it prints on stdout that
 * can hold a server URI goes through it too. Two layers:
 *
 *  1. Patterns. In any "scheme://..." found in the text, the password of the
 *     userinfo ("user:PASSWORD@", up to the last '@' of the URI, so a raw
 *     '@' or '/' in a password is still covered) and the value of every
 *     query parameter whose name contains "pass" ("password=",
 *     "sentinel_password=") become "***". This covers redis://, rediss://,
 *     unix://, redis-sentinel://host,host/..., redis-cluster://...
 *  2. Known secrets. The passwords of the configured server list (as
 *     written, %-decoded, and the comma-separated pieces a malformed list
 *     splits them into) and $DISTLOCK_PASSWORD are registered with
 *     cli_secrets_add*() and replaced wherever they still appear (a message
 *     that quotes a piece of a malformed URI, a password with a space...).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

#define MASK "***"

/* ------------------------------------------------------------ buffer */

struct buf {
    char *p;
    size_t len, cap;
    int oom;
};

static void put(struct buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static char *finish(struct buf *b)
{
    put(b, "", 0);
    if (b->oom) {
        free(b->p);
        return NULL;
    }
    return b->p;
}

/* ------------------------------------------------------------ URIs */

static int scheme_char(int c)
{
    return isalnum(c) || c == '+' || c == '-' || c == '.';
}

/* Does a URI start at s[i]: "scheme://" (the scheme may be empty)? */
static int uri_at(const char *s, size_t i, size_t n)
{
    while (i < n && scheme_char((unsigned char)s[i]))
        i++;
    return n - i >= 3 && memcmp(s + i, "://", 3) == 0;
}

/* End of the URI body starting at b: where the next ",scheme://" starts, or
 * (free text) at white space, quotes and angle brackets. */
static size_t body_end(const char *s, size_t b, size_t n, int list)
{
    size_t e = b;
    for (; e < n; e++) {
        unsigned char c = (unsigned char)s[e];
        if (!list && (isspace(c) || c == '\'' || c == '"' || c == '`' || c == '<' || c == '>'))
            break;
        if (c == ',' && uri_at(s, e + 1, n))
            break;
    }
    return e;
}

/* Does the parameter name s[0..n) name a password? */
static int secret_param(const char *s, size_t n)
{
    for (size_t i = 0; i + 4 <= n; i++)
        if (strncasecmp(s + i, "pass", 4) == 0)
            return 1;
    return 0;
}

/* Callback for each secret range found in a URI body. */
typedef void (*found_fn)(const char *s, size_t n, void *ctx);

/* Walk one URI body s[b..e): copy it to out (if not NULL) with secrets
 * masked, and report each secret range to found (if not NULL). */
static void walk_body(const char *s, size_t b, size_t e, struct buf *out, found_fn found,
                      void *ctx)
{
    const char *at = NULL;
    size_t pos = b;
    for (size_t k = b; k < e; k++)
        if (s[k] == '@')
            at = s + k;
    if (at) {
        const char *colon = memchr(s + b, ':', (size_t)(at - (s + b)));
        if (colon && colon + 1 < at) {
            if (out) {
                put(out, s + b, (size_t)(colon + 1 - (s + b)));
                put(out, MASK, sizeof MASK - 1);
            }
            if (found)
                found(colon + 1, (size_t)(at - colon - 1), ctx);
            pos = (size_t)(at - s);
        }
    }
    /* Query parameters (a '?' or '&' anywhere after the userinfo). */
    while (pos < e) {
        size_t k = pos;
        while (k < e && s[k] != '?' && s[k] != '&')
            k++;
        if (out)
            put(out, s + pos, (k < e ? k + 1 : e) - pos);
        if (k >= e)
            break;
        size_t name = k + 1, eq = name;
        while (eq < e && s[eq] != '=' && s[eq] != '&' && s[eq] != '#')
            eq++;
        if (eq < e && s[eq] == '=' && secret_param(s + name, eq - name)) {
            size_t v = eq + 1, ve = v;
            while (ve < e && s[ve] != '&' && s[ve] != '#')
                ve++;
            if (out) {
                put(out, s + name, v - name);
                put(out, MASK, sizeof MASK - 1);
            }
            if (found && ve > v)
                found(s + v, ve - v, ctx);
            pos = ve;
        } else {
            pos = k + 1;
        }
    }
}

/* Walk every URI of s (whatever precedes a "://" is its scheme): copy s
 * with masking into out, report the secrets to found. */
static void walk(const char *s, int list, struct buf *out, found_fn found, void *ctx)
{
    size_t n = strlen(s), copied = 0;
    const char *hit;
    while ((hit = strstr(s + copied, "://")) != NULL) {
        size_t b = (size_t)(hit - s) + 3, e = body_end(s, b, n, list);
        if (out)
            put(out, s + copied, b - copied);
        walk_body(s, b, e, out, found, ctx);
        copied = e;
    }
    if (out)
        put(out, s + copied, n - copied);
}

/* ------------------------------------------------------------ secrets */

static char **secrets;
static size_t nsecrets;

void cli_secrets_add(const char *s, size_t n)
{
    if (n == 0)
        return;
    for (size_t i = 0; i < nsecrets; i++)
        if (strlen(secrets[i]) == n && memcmp(secrets[i], s, n) == 0)
            return;
    char **grown = realloc(secrets, (nsecrets + 1) * sizeof *secrets);
    char *copy = malloc(n + 1);
    if (grown)
        secrets = grown;
    if (!grown || !copy) {
        free(copy);
        return;  /* out of memory: the pattern layer still applies */
    }
    memcpy(copy, s, n);
    copy[n] = '\0';
    /* Longest first, so that a secret is never half-replaced by a shorter
     * one that it contains. */
    size_t at = nsecrets;
    while (at > 0 && strlen(secrets[at - 1]) < n) {
        secrets[at] = secrets[at - 1];
        at--;
    }
    secrets[at] = copy;
    nsecrets++;
}

static int hexval(int c)
{
    return isdigit(c) ? c - '0' : tolower(c) - 'a' + 10;
}

/* A password as written, %-decoded, and its comma-separated pieces. */
static void add_password(const char *s, size_t n, void *ctx)
{
    (void)ctx;
    cli_secrets_add(s, n);
    char *dec = malloc(n + 1);
    if (dec) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
                isxdigit((unsigned char)s[i + 2])) {
                dec[k++] = (char)(hexval((unsigned char)s[i + 1]) * 16 +
                                  hexval((unsigned char)s[i + 2]));
                i += 2;
            } else {
                dec[k++] = s[i];
            }
        }
        cli_secrets_add(dec, k);
        free(dec);
    }
    if (memchr(s, ',', n)) {  /* the pieces a malformed list is cut into */
        for (size_t a = 0, i = 0; i <= n; i++) {
            if (i == n || s[i] == ',') {
                cli_secrets_add(s + a, i - a);
                a = i + 1;
            }
        }
    }
}

void cli_secrets_add_servers(const char *servers)
{
    if (servers)
        walk(servers, 1, NULL, add_password, NULL);
}

/* ------------------------------------------------------------ masking */

static char *replace_secrets(char *s)
{
    for (size_t i = 0; s && i < nsecrets; i++) {
        const char *sec = secrets[i], *hit = strstr(s, sec);
        if (!hit)
            continue;
        size_t n = strlen(sec);
        struct buf b = {0};
        const char *p = s;
        for (; hit; p = hit + n, hit = strstr(p, sec)) {
            put(&b, p, (size_t)(hit - p));
            put(&b, MASK, sizeof MASK - 1);
        }
        put(&b, p, strlen(p));
        free(s);
        s = finish(&b);
    }
    return s;
}

static char *mask(const char *text, int list)
{
    struct buf b = {0};
    walk(text ? text : "", list, &b, NULL, NULL);
    return replace_secrets(finish(&b));
}

char *cli_mask_text(const char *text)
{
    return mask(text, 0);
}

char *cli_mask_servers(const char *servers)
{
    return mask(servers, 1);
}
