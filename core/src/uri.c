/* uri.c -- the server list: "redis://[user[:password]@]host[:port][/db]" or
 * "unix:///path/to.sock[?db=N]", comma-separated for N independent nodes. */
#include <arpa/inet.h>
#include <ctype.h>
#include <sys/un.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

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

/* The entry as it may be shown in a message: any password replaced by ***
 * (in the userinfo, and in password= / sentinel_password= parameters). */
static void redact(const char *s, size_t len, char *out, size_t size)
{
    static const char *const params[] = { "password=", "sentinel_password=" };
    const char *end = s + len, *p = s, *at = NULL, *colon = NULL;
    const char *auth = memmem(s, len, "://", 3);
    size_t o = 0;

    {   /* userinfo: after "scheme://", or from the start without a scheme */
        const char *a = auth ? auth + 3 : s, *stop = a;
        while (stop < end && *stop != '/' && *stop != '?')
            stop++;
        for (const char *x = a; x < stop; x++)
            if (*x == '@')
                at = x;
        if (at)
            colon = memchr(a, ':', (size_t)(at - a));
    }
    while (p < end && o + 24 < size) {
        const char *skip_to = NULL;
        if (colon && p == colon + 1)
            skip_to = at;
        for (int k = 0; k < 2 && !skip_to && p > s && (p[-1] == '?' || p[-1] == '&'); k++) {
            size_t n = strlen(params[k]);
            if ((size_t)(end - p) >= n && strncmp(p, params[k], n) == 0) {
                memcpy(out + o, p, n);
                o += n;
                p += n;
                skip_to = p;
                while (skip_to < end && *skip_to != '&')
                    skip_to++;
            }
        }
        if (skip_to) {
            memcpy(out + o, "***", 3);
            o += 3;
            p = skip_to;
            continue;
        }
        out[o++] = *p++;
    }
    out[o] = '\0';
}

/* The whole list, each entry redacted (cut to fit). */
static void redact_list(const char *list, char *out, size_t size)
{
    size_t o = 0;
    for (const char *p = list;; ) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char one[600];
        redact(p, len < 500 ? len : 500, one, sizeof(one));
        int w = snprintf(out + o, size - o, "%s%s", p == list ? "" : ",", one);
        if (w < 0 || (size_t)w >= size - o)
            break;
        o += (size_t)w;
        if (!comma)
            break;
        p = comma + 1;
    }
}

static int parse_one(const char *s, size_t len, distlock__node_cfg *cfg)
{
    char shown[600], safe[600];
    long v;
    int bad = 0;

    memset(cfg, 0, sizeof(*cfg));
    redact(s, len, safe, sizeof(safe));
    if (len >= 8 && strncmp(s, "unix:///", 8) == 0) {
        const char *path = s + 7, *end = s + len, *q = memchr(path, '?', (size_t)(end - path));
        const char *pend = q ? q : end;
        if (pend - path < 2)
            return distlock__fail(DISTLOCK_EINVAL, "'%s': unix:// needs a socket path", safe);
        if (q) {
            if ((size_t)(end - q) < 5 || strncmp(q, "?db=", 4) != 0 ||
                parse_num(q + 4, (size_t)(end - q - 4), INT_MAX, &v) != 0)
                return distlock__fail(DISTLOCK_EINVAL,
                                      "'%s': only ?db=N (a number >= 0) may follow the path",
                                      safe);
            cfg->db = (int)v;
        }
        if ((size_t)(pend - path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
            return distlock__fail(DISTLOCK_EINVAL,
                                  "'%s': socket path of %d bytes is longer than the %d the "
                                  "system allows", safe, (int)(pend - path),
                                  (int)sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
        cfg->path = dup_range(path, (size_t)(pend - path));
        if (!cfg->path)
            return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        snprintf(shown, sizeof(shown), "unix://%s%.*s", cfg->path, q ? (int)(end - q) : 0,
                 q ? q : "");
    } else if (len >= 8 && strncmp(s, "redis://", 8) == 0) {
        const char *p = s + 8, *end = s + len;
        const char *slash = memchr(p, '/', (size_t)(end - p));
        const char *auth_end = NULL;
        for (const char *x = p; x < (slash ? slash : end); x++)
            if (*x == '@')
                auth_end = x;  /* the last '@' before the path */
        if (auth_end) {
            const char *colon = memchr(p, ':', (size_t)(auth_end - p));
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
        const char *hend = slash ? slash : end, *hp_end = hend, *portp = NULL;
        if (p < hend && *p == '[') {  /* [IPv6] */
            const char *rb = memchr(p, ']', (size_t)(hend - p));
            if (!rb)
                return distlock__fail(DISTLOCK_EINVAL, "'%s': unterminated [IPv6 address]", safe);
            cfg->host = dup_range(p + 1, (size_t)(rb - p - 1));
            if (rb + 1 < hend) {
                if (rb[1] != ':')
                    return distlock__fail(DISTLOCK_EINVAL, "'%s': junk after ]", safe);
                portp = rb + 2;
            }
        } else {
            const char *colon = memchr(p, ':', (size_t)(hend - p));
            if (colon) {
                portp = colon + 1;
                hp_end = colon;
            }
            cfg->host = dup_range(p, (size_t)(hp_end - p));
        }
        if (!cfg->host)
            return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        if (cfg->host[0] == '\0')
            return distlock__fail(DISTLOCK_EINVAL, "'%s': no host", safe);
        for (const char *h = cfg->host; *h; h++)
            if (!isalnum((unsigned char)*h) && !strchr(".-_:%", *h))
                return distlock__fail(DISTLOCK_EINVAL, "'%s': invalid character in host name",
                                      safe);
        cfg->port = 6379;
        if (portp) {
            if (parse_num(portp, (size_t)(hend - portp), 65535, &v) != 0 || v == 0)
                return distlock__fail(DISTLOCK_EINVAL, "'%s': port must be a number 1..65535",
                                      safe);
            cfg->port = (int)v;
        }
        if (slash && slash + 1 < end) {
            if (parse_num(slash + 1, (size_t)(end - slash - 1), INT_MAX, &v) != 0)
                return distlock__fail(DISTLOCK_EINVAL, "'%s': /db must be a number >= 0",
                                      safe);
            cfg->db = (int)v;
        }
        int v6 = strchr(cfg->host, ':') != NULL;
        char dbpart[16] = "";
        if (cfg->db)
            snprintf(dbpart, sizeof(dbpart), "/%d", cfg->db);
        snprintf(shown, sizeof(shown), "redis://%s%s%s%s%s%s:%d%s", cfg->user ? cfg->user : "",
                 cfg->pass ? ":***" : "", (cfg->user || cfg->pass) ? "@" : "", v6 ? "[" : "",
                 cfg->host, v6 ? "]" : "", cfg->port, dbpart);
    } else {
        return distlock__fail(DISTLOCK_EINVAL,
                              "'%s': expected redis://host[:port][/db] or unix:///path[?db=N]",
                              safe);
    }
    cfg->uri = strdup(shown);
    if (!cfg->uri)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    return DISTLOCK_OK;
}

static void free_cfg(distlock__node_cfg *cfg)
{
    free(cfg->uri);
    free(cfg->host);
    free(cfg->path);
    free(cfg->user);
    free(cfg->pass);
}

void distlock__free_nodes(distlock__node_cfg *nodes, int n)
{
    for (int i = 0; nodes && i < n; i++)
        free_cfg(&nodes[i]);
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

static int same_server(const distlock__node_cfg *a, const distlock__node_cfg *b)
{
    char ha[256], hb[256];
    if (a->path || b->path)
        return a->path && b->path && strcmp(a->path, b->path) == 0;
    if (a->port != b->port)
        return 0;
    canonical_host(a->host, ha, sizeof(ha));
    canonical_host(b->host, hb, sizeof(hb));
    return strcmp(ha, hb) == 0;
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
    for (;;) {
        const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
        const char *a = p, *b = end;
        while (a < b && isspace((unsigned char)*a)) a++;
        while (b > a && isspace((unsigned char)b[-1])) b--;
        if (a == b) {
            char shown[512];
            redact_list(servers, shown, sizeof(shown));
            rc = distlock__fail(DISTLOCK_EINVAL, "empty entry #%d in server list '%s'", n + 1,
                                shown);
            goto fail;
        }
        if (n >= 64) {
            rc = distlock__fail(DISTLOCK_EINVAL, "more than 64 servers");
            goto fail;
        }
        distlock__node_cfg *grown = realloc(nodes, sizeof(*nodes) * (size_t)(n + 1));
        if (!grown) {
            rc = distlock__fail(DISTLOCK_ENOMEM, "out of memory");
            goto fail;
        }
        nodes = grown;
        rc = parse_one(a, (size_t)(b - a), &nodes[n]);
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
        if (!comma)
            break;
        p = comma + 1;
    }
    *out = nodes;
    *nout = n;
    return DISTLOCK_OK;
fail:
    distlock__free_nodes(nodes, n);
    return rc;
}
