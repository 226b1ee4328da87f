/* uri.c -- the server list. The grammar is SPEC.md's:
 *   redis://[user[:password]@]host[:port][/db]
 *   rediss://[user[:password]@]host[:port][/db][?tls options]
 *   unix:///path/to.sock[?db=N]
 *   redis-sentinel://[user[:password]@]host[:port][,host[:port]...]/MASTER[/db][?options]
 *   rediss-sentinel://...   (TLS to the sentinels and to the master)
 *   redis-cluster://[user[:password]@]host[:port][,host[:port]...][?options]
 *   rediss-cluster://...    (a Redis Cluster, given by seed nodes; db 0 only)
 * Nodes are separated by whitespace, or by a comma followed by "scheme://";
 * any other comma separates the hosts of one (Sentinel or Cluster) URI. Options:
 * tls_ca_file, tls_ca_dir, tls_cert, tls_key, tls_server_name,
 * tls_insecure=0|1 (TLS schemes), sentinel_user, sentinel_password
 * (Sentinel schemes), db (unix://). Values are %-decoded.
 *
 * Layer: 0 base */
#include <arpa/inet.h>
#include <ctype.h>
#include <sys/un.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base.h"

static char *dup_range(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* Percent-decoding lets passwords carry '@', ':' or ','. */
static char *decode(const char *s, size_t n, int *bad)
{
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            if (i + 2 >= n) {
                *bad = 1;
                break;
            }
            if (!isxdigit((unsigned char)s[i + 1]) || !isxdigit((unsigned char)s[i + 2])) {
                *bad = 1;
                break;
            }
            char hx[3] = { s[i + 1], s[i + 2], 0 };
            *o++ = (char)strtol(hx, NULL, 16);
            i += 2;
        } else {
            *o++ = s[i];
        }
    }
    *o = '\0';
    return out;
}

/* Parse a non-negative decimal number of the whole range [s, s+n). */
static int parse_num(const char *s, size_t n, long max, long *out)
{
    long v = 0;
    if (n == 0 || n > 10)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

/* ------------------------------------------------------------ masking
 *
 * What a message may show of a server list. The parser's view of a
 * malformed entry is not to be trusted (an unescaped '/', '?' or ',' in a
 * password moves its idea of where the credentials end), so masking has
 * its own, simpler and wider, rules, applied to the list before anything
 * is parsed:
 *  - a masking unit runs from one known "scheme://" (after a comma or
 *    whitespace) to the next: a password that holds ",," or " , " stays in
 *    its unit even where the parser splits it;
 *  - in a unit, everything between its "scheme://" (or its start, if it
 *    does not open with a well-formed scheme) and its LAST '@' is masked:
 *    the user, the password and whatever an unescaped '/', '?', '#' or ':'
 *    made of them;
 *  - in the query (from the first '?' after the scheme), the value of
 *    every parameter is masked unless its name is, exactly, one of the
 *    options whose values are not secrets (tls_ca_file ... db); so
 *    sentinel_password=, Sentinel_Password=, sentinel%5Fpassword= or
 *    password= are all masked. A masked value runs to the next "&name="
 *    (or "?name=") of such a shown option, so a '&' inside a password hides
 *    the rest too; a shown value ends at the first '&', '?', ',' or space
 *    (what follows may be another option, or another entry); a name alone,
 *    without '=', has no value to hide.
 * Each masked run is shown as "***". */

static const char *const shown_options[] = {
    "tls_ca_file", "tls_ca_dir", "tls_cert", "tls_key", "tls_server_name", "tls_insecure",
    "sentinel_user", "db",
};

/* The length of "name=" when p opens with a shown option, else 0. */
static size_t is_shown_option(const char *p, const char *end)
{
    for (size_t k = 0; k < sizeof(shown_options) / sizeof(shown_options[0]); k++) {
        size_t n = strlen(shown_options[k]);
        if ((size_t)(end - p) > n && memcmp(p, shown_options[k], n) == 0 && p[n] == '=')
            return n + 1;
    }
    return 0;
}

/* After "scheme://" when s opens with one (letters, digits, + - .), else NULL. */
static const char *after_scheme(const char *s, const char *end)
{
    const char *x = s;
    if (x >= end || !isalpha((unsigned char)*x))
        return NULL;
    while (x < end && (isalnum((unsigned char)*x) || *x == '+' || *x == '-' || *x == '.'))
        x++;
    return end - x >= 3 && memcmp(x, "://", 3) == 0 ? x + 3 : NULL;
}

/* Does one of the node schemes the grammar knows open p (any case)? */
static int known_scheme_at(const char *p, const char *end)
{
    static const char *const known[] = { "redis://", "rediss://", "unix://", "redis-sentinel://",
                                         "rediss-sentinel://", "redis-cluster://",
                                         "rediss-cluster://" };
    for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
        size_t n = strlen(known[k]);
        if ((size_t)(end - p) >= n && strncasecmp(p, known[k], n) == 0)
            return 1;
    }
    return 0;
}

/* Mark the masked bytes of one unit [s, end) in mk (1: masked). */
static void mask_unit(const char *s, const char *end, unsigned char *mk)
{
    const char *a = after_scheme(s, end), *at = NULL;
    for (const char *x = s; x < end; x++)
        if (*x == '@')
            at = x;
    if (at) {
        const char *from = a && a <= at ? a : s;
        memset(mk + (from - s), 1, (size_t)(at - from));
    }
    const char *q = memchr(a ? a : s, '?', (size_t)(end - (a ? a : s)));
    for (const char *p = q ? q + 1 : end; p < end;) {
        size_t shown = is_shown_option(p, end);
        if (shown) {  /* its value, up to anything that may start something else */
            const char *x = p + shown;
            while (x < end && *x != '&' && *x != '?' && *x != ',' && !isspace((unsigned char)*x))
                x++;
            p = x + 1;
            continue;
        }
        const char *eq = p;
        while (eq < end && *eq != '&' && *eq != '?' && *eq != '=')
            eq++;
        if (eq == end || *eq != '=') {  /* a name alone: no value to hide */
            p = eq + 1;
            continue;
        }
        const char *v = eq + 1, *ve = v;
        while (ve < end && !((*ve == '&' || *ve == '?') && is_shown_option(ve + 1, end)))
            ve++;
        memset(mk + (v - s), 1, (size_t)(ve - v));
        p = ve + 1;
    }
}

/* Marks for the whole list (strlen(list) bytes, 1: masked), unit by unit.
 * NULL when out of memory: callers then show no part of the list. */
static unsigned char *mask_list(const char *list)
{
    size_t len = strlen(list);
    unsigned char *mk = calloc(len + 1, 1);
    if (mk == NULL)
        return NULL;
    const char *end = list + len, *us = list;
    for (const char *x = list; x <= end; x++) {
        int boundary = x == end;
        if (!boundary && (isspace((unsigned char)*x) || *x == ',')) {
            const char *y = x + 1;
            while (y < end && isspace((unsigned char)*y))
                y++;
            boundary = known_scheme_at(y, end);
        }
        if (boundary) {
            mask_unit(us, x, mk + (us - list));
            us = x + 1;
        }
    }
    return mk;
}

/* [from, to) of list as it may be shown: masked runs as "***", cut to fit
 * size. mk NULL: nothing of it. */
static void render(const char *list, const unsigned char *mk, const char *from, const char *to,
                   char *out, size_t size)
{
    size_t o = 0;
    if (mk == NULL) {
        snprintf(out, size, "(not shown)");
        return;
    }
    for (const char *p = from; p < to && o + 4 < size; p++) {
        if (!mk[p - list]) {
            out[o++] = *p;
        } else if (p == from || !mk[p - 1 - list]) {
            memcpy(out + o, "***", 3);
            o += 3;
        }
    }
    out[o] = '\0';
}

/* Is any byte of [from, to) masked? (a name echoed in a message must not be) */
static int any_masked(const unsigned char *mk, size_t from, size_t to)
{
    if (mk == NULL)
        return 1;
    for (size_t i = from; i < to; i++)
        if (mk[i])
            return 1;
    return 0;
}

int distlock_servers_mask(const char *servers, char *out, size_t size)
{
    if (servers == NULL || out == NULL || size < 16)
        return distlock__fail(DISTLOCK_EINVAL, "distlock_servers_mask: %s",
                              servers == NULL ? "servers is NULL" : out == NULL ? "out is NULL"
                                                                   : "size < 16");
    unsigned char *mk = mask_list(servers);  /* NULL: render shows none of it */
    int rc = mk ? DISTLOCK_OK : distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    render(servers, mk, servers, servers + strlen(servers), out, size);
    free(mk);
    return rc;
}

/* host[:port] or [v6]:port in [p, end): *host allocated. */
static int parse_hostport(const char *p, const char *end, int defport, char **host, int *port,
                          const char *safe)
{
    const char *hp_end = end, *portp = NULL;
    long v;
    *host = NULL;
    if (p < end && *p == '[') {  /* [IPv6] */
        const char *rb = memchr(p, ']', (size_t)(end - p));
        if (!rb)
            return distlock__fail(DISTLOCK_EINVAL, "'%s': unterminated [IPv6 address]", safe);
        *host = dup_range(p + 1, (size_t)(rb - p - 1));
        if (rb + 1 < end) {
            if (rb[1] != ':')
                return distlock__fail(DISTLOCK_EINVAL, "'%s': junk after ]", safe);
            portp = rb + 2;
        }
    } else {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        if (colon) {
            portp = colon + 1;
            hp_end = colon;
        }
        *host = dup_range(p, (size_t)(hp_end - p));
    }
    if (!*host)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    if ((*host)[0] == '\0')
        return distlock__fail(DISTLOCK_EINVAL, "'%s': no host", safe);
    for (const char *h = *host; *h; h++)
        if (!isalnum((unsigned char)*h) && !strchr(".-_:%", *h))
            return distlock__fail(DISTLOCK_EINVAL, "'%s': invalid character in host name", safe);
    *port = defport;
    if (portp) {
        if (parse_num(portp, (size_t)(end - portp), 65535, &v) != 0 || v == 0)
            return distlock__fail(DISTLOCK_EINVAL, "'%s': port must be a number 1..65535", safe);
        *port = (int)v;
    }
    return DISTLOCK_OK;
}

/* The query "k=v&k=v" in [q, end) (q after the '?'); mk: the entry's
 * masks, from s0 (an option name is echoed only where it is not masked). */
static int parse_query(const char *q, const char *end, distlock__node_cfg *cfg, const char *safe,
                       const char *s0, const unsigned char *mk)
{
    static const struct { const char *name; int tls, sentinel, unix_; } known[] = {
        { "tls_ca_file", 1, 0, 0 }, { "tls_ca_dir", 1, 0, 0 }, { "tls_cert", 1, 0, 0 },
        { "tls_key", 1, 0, 0 }, { "tls_server_name", 1, 0, 0 }, { "tls_insecure", 1, 0, 0 },
        { "sentinel_user", 0, 1, 0 }, { "sentinel_password", 0, 1, 0 }, { "db", 0, 0, 1 },
    };
    while (q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q)), *stop = amp ? amp : end;
        const char *eq = memchr(q, '=', (size_t)(stop - q));
        int bad = 0, k = -1;
        int hidden = any_masked(mk, (size_t)(q - s0), (size_t)((eq ? eq : stop) - s0));
        if (!eq && hidden)
            return distlock__fail(DISTLOCK_EINVAL, "'%s': an option without a value (a '?' or "
                                  "'&' in a password must be %%-escaped: %%3F, %%26)", safe);
        if (!eq)
            return distlock__fail(DISTLOCK_EINVAL, "'%s': option '%.*s' needs a value", safe,
                                  (int)(stop - q > 40 ? 40 : stop - q), q);
        for (size_t x = 0; x < sizeof(known) / sizeof(known[0]) && k < 0; x++)
            if ((size_t)(eq - q) == strlen(known[x].name) &&
                strncmp(q, known[x].name, (size_t)(eq - q)) == 0)
                k = (int)x;
        if (k < 0 && hidden)
            return distlock__fail(DISTLOCK_EINVAL, "'%s': an unknown option, not shown: it may "
                                  "be part of a password (option names are lowercase; a '?' "
                                  "or '&' in a password must be %%-escaped: %%3F, %%26)", safe);
        if (k < 0)
            return distlock__fail(DISTLOCK_EINVAL, "'%s': unknown option '%.*s' (option names "
                                  "are lowercase: sentinel_password, tls_ca_file, ...)", safe,
                                  (int)(eq - q > 40 ? 40 : eq - q), q);
        if ((known[k].tls && !cfg->tls.enabled) ||
            (known[k].sentinel && cfg->kind != DISTLOCK__NODE_SENTINEL) ||
            (known[k].unix_ && !cfg->path))
            return distlock__fail(DISTLOCK_EINVAL, "'%s': option '%s' does not apply to this "
                                  "kind of node (%s)", safe, known[k].name,
                                  known[k].tls ? "TLS options need rediss://, rediss-sentinel:// "
                                                 "or rediss-cluster://"
                                  : known[k].sentinel ? "only for redis-sentinel:// nodes"
                                  : "only for unix:// nodes");
        char *v = decode(eq + 1, (size_t)(stop - eq - 1), &bad);
        if (!v)
            return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        if (bad || v[0] == '\0') {
            free(v);
            return distlock__fail(DISTLOCK_EINVAL, "'%s': option '%s' has %s", safe,
                                  known[k].name, bad ? "a bad %-escape" : "an empty value");
        }
        char **slot = NULL;
        switch (k) {
        case 0: slot = &cfg->tls.ca_file; break;
        case 1: slot = &cfg->tls.ca_dir; break;
        case 2: slot = &cfg->tls.cert; break;
        case 3: slot = &cfg->tls.key; break;
        case 4: slot = &cfg->tls.server_name; break;
        case 6: slot = &cfg->sentinel_user; break;
        case 7: slot = &cfg->sentinel_pass; break;
        default: break;
        }
        if (slot) {
            free(*slot);
            *slot = v;
        } else {
            long n;
            int isdb = k == 8;
            int ok = parse_num(v, strlen(v), isdb ? INT_MAX : 1, &n) == 0;
            free(v);
            if (!ok)
                return distlock__fail(DISTLOCK_EINVAL, "'%s': %s", safe,
                                      isdb ? "?db= must be a number >= 0"
                                           : "tls_insecure must be 0 or 1");
            if (isdb)
                cfg->db = (int)n;
            else
                cfg->tls.insecure = (int)n;
        }
        q = amp ? amp + 1 : end;
    }
    return DISTLOCK_OK;
}

static const struct { const char *prefix; int kind, tls; } schemes[] = {
    { "redis://", DISTLOCK__NODE_MASTER, 0 },
    { "rediss://", DISTLOCK__NODE_MASTER, 1 },
    { "redis-sentinel://", DISTLOCK__NODE_SENTINEL, 0 },
    { "rediss-sentinel://", DISTLOCK__NODE_SENTINEL, 1 },
    { "redis-cluster://", DISTLOCK__NODE_CLUSTER, 0 },
    { "rediss-cluster://", DISTLOCK__NODE_CLUSTER, 1 },
};

static int parse_unix(const char *s, size_t len, distlock__node_cfg *cfg, const char *safe,
                      const unsigned char *mk, char *shown, size_t shown_size)
{
    const char *path = s + 7, *end = s + len, *q = memchr(path, '?', (size_t)(end - path));
    const char *pend = q ? q : end;
    if (pend - path < 2)
        return distlock__fail(DISTLOCK_EINVAL, "'%s': unix:// needs a socket path", safe);
    if ((size_t)(pend - path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return distlock__fail(DISTLOCK_EINVAL,
                              "'%s': socket path of %d bytes is longer than the %d the "
                              "system allows", safe, (int)(pend - path),
                              (int)sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
    cfg->path = dup_range(path, (size_t)(pend - path));
    if (!cfg->path)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    int rc = q ? parse_query(q + 1, end, cfg, safe, s, mk) : DISTLOCK_OK;
    if (rc != DISTLOCK_OK)
        return rc;
    char dbpart[24] = "", path_shown[sizeof(((struct sockaddr_un *)0)->sun_path) * 4];
    if (cfg->db)
        snprintf(dbpart, sizeof(dbpart), "?db=%d", cfg->db);
    /* A path with an '@' may be a malformed unix://user:password@/path:
     * shown as masked as in a message. */
    render(s, mk, path, pend, path_shown, sizeof(path_shown));
    snprintf(shown, shown_size, "unix://%s%s", path_shown, dbpart);
    return DISTLOCK_OK;
}

/* Is x (in the query that opens at the '?' q) part of an option's name,
 * not of its value? */
static int in_option_name(const char *q, const char *x)
{
    for (const char *y = x; y > q; y--) {
        if (y[-1] == '=')
            return 0;
        if (y[-1] == '&' || y[-1] == '?')
            return 1;
    }
    return 1;
}

/* One entry [s, s+len); safe: the entry as messages show it (masked), mk:
 * its masks (mask_list's, from s). */
static int parse_one(const char *s, size_t len, distlock__node_cfg *cfg, const char *safe,
                     const unsigned char *mk)
{
    char shown[700];
    long v;
    int bad = 0, rc, si = -1;

    memset(cfg, 0, sizeof(*cfg));
    cfg->tls.insecure = -1;
    if (len >= 8 && strncmp(s, "unix:///", 8) == 0) {
        if ((rc = parse_unix(s, len, cfg, safe, mk, shown, sizeof(shown))) != DISTLOCK_OK)
            return rc;
        goto done;
    }
    for (size_t x = 0; x < sizeof(schemes) / sizeof(schemes[0]); x++)
        if (len > strlen(schemes[x].prefix) &&
            strncmp(s, schemes[x].prefix, strlen(schemes[x].prefix)) == 0)
            si = (int)x;
    if (si < 0)
        return distlock__fail(DISTLOCK_EINVAL,
                              "'%s': expected redis://host[:port][/db], rediss://..., "
                              "unix:///path[?db=N], redis-sentinel://host[:port],.../MASTER "
                              "or redis-cluster://host[:port],...",
                              safe);
    cfg->kind = schemes[si].kind;
    cfg->tls.enabled = schemes[si].tls;
    int sentinel = cfg->kind == DISTLOCK__NODE_SENTINEL;
    int cluster = cfg->kind == DISTLOCK__NODE_CLUSTER;  /* seeds listed like sentinels */
    const char *p = s + strlen(schemes[si].prefix), *end = s + len;
    const char *q = memchr(p, '?', (size_t)(end - p)), *mend = q ? q : end;
    const char *slash = memchr(p, '/', (size_t)(mend - p));
    const char *auth_end = NULL;
    for (const char *x = p; x < (slash ? slash : mend); x++)
        if (*x == '@')
            auth_end = x;  /* the last '@' before the path */
    /* An '@' in the path, or in the query outside an option's value: a
     * password with an unescaped '/' or '?' (the parser would take its
     * start for a host, the rest for a path or a master name). */
    for (const char *x = slash ? slash : mend; x < end; x++)
        if (*x == '@' && (x < mend || in_option_name(q, x)))
            return distlock__fail(DISTLOCK_EINVAL, "'%s': an '@' after the host: a '/', '?' or "
                                  "'#' in a user name or password must be %%-escaped (%%2F, "
                                  "%%3F, %%23)", safe);
    int user_shown = 0;
    if (auth_end) {
        const char *colon = memchr(p, ':', (size_t)(auth_end - p));
        /* An '@' in the user name: where the credentials end is a guess */
        user_shown = colon && !memchr(p, '@', (size_t)(colon - p));
        if (colon) {
            if (colon > p)
                cfg->user = decode(p, (size_t)(colon - p), &bad);
            cfg->pass = decode(colon + 1, (size_t)(auth_end - colon - 1), &bad);
        } else {
            cfg->user = decode(p, (size_t)(auth_end - p), &bad);
        }
        if (bad)
            return distlock__fail(DISTLOCK_EINVAL, "'%s': bad %%-escape in the credentials",
                                  safe);
        p = auth_end + 1;
    }
    const char *hend = slash ? slash : mend;
    /* hosts */
    char hosts_shown[400] = "";
    size_t hs = 0;
    for (const char *h = p;;) {
        const char *comma = memchr(h, ',', (size_t)(hend - h)), *he = comma ? comma : hend;
        char *host = NULL;
        int port = 0;
        if (comma && !sentinel && !cluster)
            return distlock__fail(DISTLOCK_EINVAL,
                                  "'%s': %s takes one host (separate nodes with \",%s\")", safe,
                                  schemes[si].prefix, schemes[si].prefix);
        if ((rc = parse_hostport(h, he, sentinel ? 26379 : 6379, &host, &port, safe)) !=
            DISTLOCK_OK) {
            free(host);
            return rc;
        }
        if (cluster && !cfg->host) {  /* the first seed is also the node's address */
            cfg->host = strdup(host);
            cfg->port = port;
            if (!cfg->host) {
                free(host);
                return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
            }
        }
        if (sentinel || cluster) {
            distlock__hostport *g = realloc(cfg->sentinels,
                                            sizeof(*g) * (size_t)(cfg->nsentinels + 1));
            if (!g) {
                free(host);
                return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
            }
            cfg->sentinels = g;
            g[cfg->nsentinels++] = (distlock__hostport){ host, port };
        } else {
            cfg->host = host;
            cfg->port = port;
        }
        int v6 = strchr(host, ':') != NULL;
        int w = snprintf(hosts_shown + hs, sizeof(hosts_shown) - hs, "%s%s%s%s:%d",
                         hs ? "," : "", v6 ? "[" : "", host, v6 ? "]" : "", port);
        if (w > 0 && (size_t)w < sizeof(hosts_shown) - hs)
            hs += (size_t)w;
        if (!comma)
            break;
        if (cfg->nsentinels >= 16)
            return distlock__fail(DISTLOCK_EINVAL, "'%s': more than 16 %s", safe,
                                  cluster ? "seed nodes" : "sentinels");
        h = comma + 1;
    }
    /* path: [/db] for a master, /MASTER[/db] for a Sentinel node */
    const char *path = slash ? slash + 1 : NULL;
    if (sentinel) {
        const char *ms = path, *me = path ? memchr(path, '/', (size_t)(mend - path)) : NULL;
        if (!me)
            me = mend;
        if (!ms || ms == me)
            return distlock__fail(DISTLOCK_EINVAL,
                                  "'%s': a Sentinel node names its master: "
                                  "redis-sentinel://host[:port],.../MASTER", safe);
        cfg->master = decode(ms, (size_t)(me - ms), &bad);
        if (!cfg->master)
            return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        if (bad)
            return distlock__fail(DISTLOCK_EINVAL, "'%s': bad %%-escape in the master name", safe);
        path = me < mend ? me + 1 : NULL;
    }
    if (cluster && path && path < mend)
        return distlock__fail(DISTLOCK_EINVAL, "'%s': a Redis Cluster has only database 0 "
                              "(no /db)", safe);
    if (path && path < mend) {
        if (parse_num(path, (size_t)(mend - path), INT_MAX, &v) != 0)
            return distlock__fail(DISTLOCK_EINVAL, "'%s': /db must be a number >= 0", safe);
        cfg->db = (int)v;
    }
    if (q && (rc = parse_query(q + 1, end, cfg, safe, s, mk)) != DISTLOCK_OK)
        return rc;
    char dbpart[16] = "", master[200] = "";
    if (cfg->db)
        snprintf(dbpart, sizeof(dbpart), "/%d", cfg->db);
    if (sentinel)
        snprintf(master, sizeof(master), "/%s", cfg->master);
    /* A user without a password is never sent (no AUTH without one), and
     * "redis://secret@host" is how some clients spell a password: shown
     * masked, like a password; so is a user name with an '@'. */
    snprintf(shown, sizeof(shown), "%s%s%s%s%s%s%s%s", schemes[si].prefix,
             cfg->user && user_shown ? cfg->user : cfg->user ? "***" : "",
             cfg->pass ? ":***" : "",
             (cfg->user || cfg->pass) ? "@" : "", hosts_shown, master, dbpart,
             cfg->tls.insecure == 1 ? "?tls_insecure=1" : "");
done:
    cfg->uri = strdup(shown);
    if (!cfg->uri)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    return DISTLOCK_OK;
}

void distlock__node_cfg_clear(distlock__node_cfg *cfg)
{
    free(cfg->uri);
    free(cfg->host);
    free(cfg->path);
    free(cfg->user);
    free(cfg->pass);
    free(cfg->tls.ca_file);
    free(cfg->tls.ca_dir);
    free(cfg->tls.cert);
    free(cfg->tls.key);
    free(cfg->tls.server_name);
    for (int i = 0; i < cfg->nsentinels; i++)
        free(cfg->sentinels[i].host);
    free(cfg->sentinels);
    free(cfg->master);
    free(cfg->sentinel_user);
    free(cfg->sentinel_pass);
}

static int copy_str(char **dst, const char *src)
{
    *dst = NULL;
    return src && (*dst = strdup(src)) == NULL ? -1 : 0;
}

int distlock__node_cfg_copy(distlock__node_cfg *dst, const distlock__node_cfg *src)
{
    *dst = *src;
    dst->sentinels = NULL;
    dst->nsentinels = 0;
    int bad = copy_str(&dst->uri, src->uri) | copy_str(&dst->host, src->host) |
              copy_str(&dst->path, src->path) | copy_str(&dst->user, src->user) |
              copy_str(&dst->pass, src->pass) | copy_str(&dst->master, src->master) |
              copy_str(&dst->sentinel_user, src->sentinel_user) |
              copy_str(&dst->sentinel_pass, src->sentinel_pass) |
              copy_str(&dst->tls.ca_file, src->tls.ca_file) |
              copy_str(&dst->tls.ca_dir, src->tls.ca_dir) |
              copy_str(&dst->tls.cert, src->tls.cert) | copy_str(&dst->tls.key, src->tls.key) |
              copy_str(&dst->tls.server_name, src->tls.server_name);
    if (!bad && src->nsentinels > 0) {
        dst->sentinels = calloc((size_t)src->nsentinels, sizeof(*dst->sentinels));
        bad = dst->sentinels == NULL;
        for (int k = 0; !bad && k < src->nsentinels; k++) {
            dst->sentinels[k].port = src->sentinels[k].port;
            bad = copy_str(&dst->sentinels[k].host, src->sentinels[k].host);
            dst->nsentinels = k + 1;
        }
    }
    if (bad) {
        distlock__node_cfg_clear(dst);
        return -1;
    }
    return 0;
}

void distlock__free_nodes(distlock__node_cfg *nodes, int n)
{
    for (int i = 0; nodes && i < n; i++)
        distlock__node_cfg_clear(&nodes[i]);
    free(nodes);
}

/* One spelling per address: 127.1, 127.0.0.1 and 0x7f.0.0.1 are one IPv4
 * address; IPv6 in its canonical text; names lowercased (names that only
 * resolve to the same server are caught when connecting, round.c). */
static void canonical_host(const char *host, char *out, size_t size)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        inet_ntop(AF_INET6, &a6, out, (socklen_t)size);
    } else if (inet_aton(host, &a4) != 0) {
        inet_ntop(AF_INET, &a4, out, (socklen_t)size);
    } else {
        size_t i = 0;
        for (; host[i] && i + 1 < size; i++)
            out[i] = (char)tolower((unsigned char)host[i]);
        out[i] = '\0';
    }
}

static int same_hostport(const char *host_a, int port_a, const char *host_b, int port_b)
{
    char ha[DISTLOCK__HOST_LEN], hb[DISTLOCK__HOST_LEN];
    if (port_a != port_b)
        return 0;
    canonical_host(host_a, ha, sizeof(ha));
    canonical_host(host_b, hb, sizeof(hb));
    return strcmp(ha, hb) == 0;
}

/* Two entries that are certainly one lock node: one socket path, one
 * address, or one Sentinel-managed master named through a common sentinel.
 * (A master and a Sentinel node that resolves to it are caught when
 * connected: round.c.) */
static int same_server(const distlock__node_cfg *a, const distlock__node_cfg *b)
{
    if (a->path || b->path)
        return a->path && b->path && strcmp(a->path, b->path) == 0;
    if (a->kind != b->kind)
        return 0;
    if (a->kind == DISTLOCK__NODE_MASTER)
        return same_hostport(a->host, a->port, b->host, b->port);
    if (a->kind == DISTLOCK__NODE_SENTINEL && strcmp(a->master, b->master) != 0)
        return 0;
    for (int i = 0; i < a->nsentinels; i++)
        for (int j = 0; j < b->nsentinels; j++)
            if (same_hostport(a->sentinels[i].host, a->sentinels[i].port, b->sentinels[j].host,
                              b->sentinels[j].port))
                return 1;
    return 0;
}

/* Does a new node start at p: "scheme://" (letters, digits, + - .)? */
static int starts_node(const char *p)
{
    const char *x = p;
    if (!isalpha((unsigned char)*x))
        return 0;
    while (isalnum((unsigned char)*x) || *x == '+' || *x == '-' || *x == '.')
        x++;
    return strncmp(x, "://", 3) == 0;
}

/* The end of the entry that starts at p: whitespace or a comma followed
 * (after optional whitespace) by "scheme://" or the end. Other commas
 * belong to the entry (the hosts of a Sentinel URI). *next: where the next
 * starts. */
static const char *entry_end(const char *p, const char **next)
{
    const char *x = p;
    for (; *x; x++) {
        if (isspace((unsigned char)*x) || *x == ',') {
            /* A separator only before another node (or the end): a raw
             * space or comma in a password stays inside its URI, where
             * the parser's message can mask it. */
            const char *y = x + 1;
            while (isspace((unsigned char)*y))
                y++;
            if (*y == '\0' || *y == ',' || starts_node(y))
                break;
        }
    }
    *next = *x ? x + 1 : NULL;
    return x;
}

int distlock__parse_servers(const char *servers, distlock__node_cfg **out, int *nout)
{
    distlock__node_cfg *nodes = NULL;
    int n = 0, rc = DISTLOCK_OK;
    const char *p = servers;

    if (servers == NULL || *servers == '\0')
        return distlock__fail(DISTLOCK_EINVAL, "no servers given (expected redis://host:port,...)");
    if (strlen(servers) > 65536)
        return distlock__fail(DISTLOCK_EINVAL, "server list too long");
    unsigned char *mk = mask_list(servers);  /* NULL: messages show none of the list */
    for (;;) {
        const char *next, *a = p, *b;
        int comma = 0;
        while (isspace((unsigned char)*a))
            a++;
        if (*a == ',' && a > servers && isspace((unsigned char)a[-1]) && n > 0) {
            comma = 1;
            /* "uri1 , uri2": the comma after whitespace separates too */
            a++;
            while (isspace((unsigned char)*a))
                a++;
        }
        b = entry_end(a, &next);
        if (a == b) {
            if (next == NULL && n > 0 && b > p && !comma)  /* trailing whitespace */
                break;
            char shown[512];
            render(servers, mk, servers, servers + strlen(servers), shown, sizeof(shown));
            rc = distlock__fail(DISTLOCK_EINVAL, "empty entry #%d in server list '%s'", n + 1,
                                shown);
            goto fail;
        }
        if (n >= DISTLOCK__MAX_NODES) {
            rc = distlock__fail(DISTLOCK_EINVAL, "more than %d servers", DISTLOCK__MAX_NODES);
            goto fail;
        }
        distlock__node_cfg *grown = realloc(nodes, sizeof(*nodes) * (size_t)(n + 1));
        if (!grown) {
            rc = distlock__fail(DISTLOCK_ENOMEM, "out of memory");
            goto fail;
        }
        nodes = grown;
        char safe[600];
        render(servers, mk, a, b, safe, sizeof(safe));
        rc = parse_one(a, (size_t)(b - a), &nodes[n], safe, mk ? mk + (a - servers) : NULL);
        n++;
        if (rc != DISTLOCK_OK)
            goto fail;
        for (int i = 0; i < n - 1; i++)
            if (same_server(&nodes[i], &nodes[n - 1])) {
                rc = distlock__fail(DISTLOCK_EINVAL,
                                    "duplicate node %s: Redlock needs independent servers",
                                    nodes[n - 1].uri);
                goto fail;
            }
        if (!next)
            break;
        p = next;
    }
    free(mk);
    *out = nodes;
    *nout = n;
    return DISTLOCK_OK;
fail:
    free(mk);
    distlock__free_nodes(nodes, n);
    return rc;
}
