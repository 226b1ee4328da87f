/*
 * distlock_mask.c -- the one place where the PHP extension hides passwords.
 *
 * Whatever the extension shows of a server URI goes through here: exception
 * messages (the library's detail quotes a bad URI as written), var_dump() /
 * print_r() / debug_zval_dump() of a Client, Client::servers(), and the
 * phpinfo() / `php --ri distlock` display of distlock.servers (and of
 * distlock.password, shown as *** when set). Two layers:
 *
 *  1. Patterns. In any "scheme://..." of the text, the password of the
 *     userinfo ("user:PASSWORD@", up to the URI's last '@', so a raw '@' or
 *     '/' in a password is still covered) and the value of every query
 *     parameter whose name contains "pass" become "***".
 *  2. Known secrets. Where the configuration is at hand (making a client),
 *     its passwords (option/INI, and those of the server list as written,
 *     %-decoded and in the pieces a malformed list is cut into) are replaced
 *     wherever they still appear.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "php.h"
#include "zend_smart_str.h"
#include "ext/standard/php_string.h"

#include "distlock_mask.h"

#define DL_MASK "***"

static int dl_scheme_char(int c)
{
    return isalnum(c) || c == '+' || c == '-' || c == '.';
}

/* Does a URI start at s[i]: "scheme://" (the scheme may be empty)? */
static int dl_uri_at(const char *s, size_t i, size_t n)
{
    while (i < n && dl_scheme_char((unsigned char)s[i]))
        i++;
    return n - i >= 3 && memcmp(s + i, "://", 3) == 0;
}

/* End of the URI body starting at b: where the next ",scheme://" starts, or
 * (free text) at white space, quotes and angle brackets. */
static size_t dl_body_end(const char *s, size_t b, size_t n, int list)
{
    size_t e = b;
    for (; e < n; e++) {
        unsigned char c = (unsigned char)s[e];
        if (!list && (isspace(c) || c == '\'' || c == '"' || c == '`' || c == '<' || c == '>'))
            break;
        if (c == ',' && dl_uri_at(s, e + 1, n))
            break;
    }
    return e;
}

/* Does the parameter name s[0..n) name a password? */
static int dl_secret_param(const char *s, size_t n)
{
    for (size_t i = 0; i + 4 <= n; i++)
        if (strncasecmp(s + i, "pass", 4) == 0)
            return 1;
    return 0;
}

static void dl_secrets_add_uri_password(dl_secrets *s, const char *p, size_t n);

/* Walk one URI body s[b..e): copy it to out (if not NULL) with the secrets
 * masked, and add each secret to found (if not NULL). */
static void dl_walk_body(const char *s, size_t b, size_t e, smart_str *out, dl_secrets *found)
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
                smart_str_appendl(out, s + b, (size_t)(colon + 1 - (s + b)));
                smart_str_appendl(out, DL_MASK, sizeof(DL_MASK) - 1);
            }
            if (found)
                dl_secrets_add_uri_password(found, colon + 1, (size_t)(at - colon - 1));
            pos = (size_t)(at - s);
        }
    }
    /* Query parameters (a '?' or '&' anywhere after the userinfo). */
    while (pos < e) {
        size_t k = pos, name, eq;

        while (k < e && s[k] != '?' && s[k] != '&')
            k++;
        if (out)
            smart_str_appendl(out, s + pos, (k < e ? k + 1 : e) - pos);
        if (k >= e)
            break;
        name = eq = k + 1;
        while (eq < e && s[eq] != '=' && s[eq] != '&' && s[eq] != '#')
            eq++;
        if (eq < e && s[eq] == '=' && dl_secret_param(s + name, eq - name)) {
            size_t v = eq + 1, ve = v;

            while (ve < e && s[ve] != '&' && s[ve] != '#')
                ve++;
            if (out) {
                smart_str_appendl(out, s + name, v - name);
                smart_str_appendl(out, DL_MASK, sizeof(DL_MASK) - 1);
            }
            if (found && ve > v)
                dl_secrets_add_uri_password(found, s + v, ve - v);
            pos = ve;
        } else {
            pos = k + 1;
        }
    }
}

/* Walk every URI of s (whatever precedes a "://" is its scheme). */
static void dl_walk(const char *s, int list, smart_str *out, dl_secrets *found)
{
    size_t n = strlen(s), copied = 0;
    const char *hit;

    while ((hit = strstr(s + copied, "://")) != NULL) {
        size_t b = (size_t)(hit - s) + 3, e = dl_body_end(s, b, n, list);

        if (out)
            smart_str_appendl(out, s + copied, b - copied);
        dl_walk_body(s, b, e, out, found);
        copied = e;
    }
    if (out)
        smart_str_appendl(out, s + copied, n - copied);
}

/* ------------------------------------------------------------ secrets */

void dl_secrets_add(dl_secrets *s, const char *p, size_t n)
{
    uint32_t at;

    if (n == 0)
        return;
    for (uint32_t i = 0; i < s->n; i++)
        if (ZSTR_LEN(s->v[i]) == n && memcmp(ZSTR_VAL(s->v[i]), p, n) == 0)
            return;
    s->v = erealloc(s->v, (s->n + 1) * sizeof(*s->v));
    /* Longest first: a secret is never half-replaced by one it contains. */
    at = s->n;
    while (at > 0 && ZSTR_LEN(s->v[at - 1]) < n) {
        s->v[at] = s->v[at - 1];
        at--;
    }
    s->v[at] = zend_string_init(p, n, 0);
    s->n++;
}

static int dl_hexval(int c)
{
    return isdigit(c) ? c - '0' : tolower(c) - 'a' + 10;
}

/* A password found in a server list: as written, %-decoded (as the library
 * uses it), and the comma-separated pieces the list parser cuts it into. */
static void dl_secrets_add_uri_password(dl_secrets *s, const char *p, size_t n)
{
    char *dec;
    size_t k = 0;

    if (n == 0)
        return;
    dl_secrets_add(s, p, n);
    dec = emalloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '%' && i + 2 < n && isxdigit((unsigned char)p[i + 1])
            && isxdigit((unsigned char)p[i + 2])) {
            dec[k++] = (char)(dl_hexval((unsigned char)p[i + 1]) * 16 + dl_hexval((unsigned char)p[i + 2]));
            i += 2;
        } else {
            dec[k++] = p[i];
        }
    }
    dl_secrets_add(s, dec, k);
    efree(dec);
    if (memchr(p, ',', n) != NULL) { /* the pieces a malformed list is cut into */
        for (size_t a = 0, i = 0; i <= n; i++) {
            if (i == n || p[i] == ',') {
                dl_secrets_add(s, p + a, i - a);
                a = i + 1;
            }
        }
    }
}

void dl_secrets_add_servers(dl_secrets *s, const char *servers)
{
    if (servers != NULL)
        dl_walk(servers, 1, NULL, s);
}

void dl_secrets_free(dl_secrets *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        zend_string_release(s->v[i]);
    if (s->v != NULL)
        efree(s->v);
    s->v = NULL;
    s->n = 0;
}

/* ------------------------------------------------------------ masking */

static zend_string *dl_mask(const char *text, int list, const dl_secrets *secrets)
{
    smart_str out = {0};
    zend_string *r;

    dl_walk(text ? text : "", list, &out, NULL);
    smart_str_0(&out);
    r = out.s ? out.s : ZSTR_EMPTY_ALLOC();
    for (uint32_t i = 0; secrets != NULL && i < secrets->n; i++) {
        zend_string *sec = secrets->v[i];
        zend_string *next = php_str_to_str(ZSTR_VAL(r), ZSTR_LEN(r), ZSTR_VAL(sec), ZSTR_LEN(sec),
                                           DL_MASK, sizeof(DL_MASK) - 1);

        zend_string_release(r);
        r = next;
    }
    return r;
}

zend_string *dl_mask_text(const char *text, const dl_secrets *secrets)
{
    return dl_mask(text, 0, secrets);
}

zend_string *dl_mask_servers(const char *servers, const dl_secrets *secrets)
{
    return dl_mask(servers, 1, secrets);
}
