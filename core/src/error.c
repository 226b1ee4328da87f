/* error.c -- static status texts and the per-thread detail message.
 * The detail lives in thread-local storage (libgit2's git_error_last model),
 * not on the client, because one client is shared by many threads.
 *
 * Layer: 0 base */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base.h"

static _Thread_local char last_error[512];

/* Where a server's reply starts quoting the arguments of the command it
 * refuses ("ERR unknown command 'AUTH', with args beginning with: 'user'
 * 'PASSWORD'": Redis 6 and later, Valkey): the arguments are what we sent,
 * a password or a token among them. NULL when it does not. */
static const char *args_quote(const char *s, size_t n)
{
    static const char marker[] = "with args beginning with";
    const size_t m = sizeof(marker) - 1;
    for (size_t i = 0; i + m <= n; i++)
        if (strncasecmp(s + i, marker, m) == 0)
            return s + i;
    return NULL;
}

int distlock__reply_shown_len(const char *s, int cap)
{
    size_t n = strnlen(s, cap > 0 ? (size_t)cap : 0);
    const char *a = args_quote(s, strlen(s));
    if (a && (size_t)(a - s) < n) {
        n = (size_t)(a - s);
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == ','))
            n--;
    }
    return (int)n;
}

const char *distlock__handshake_refusal(const char *s, char *out, size_t size)
{
    /* The fixed texts of Redis and Valkey for these words; for any other
     * (ERR: "unknown command 'AUTH', with args beginning with: ...", or a
     * proxy's own text) the word alone. */
    static const struct { const char *word, *what; } known[] = {
        { "WRONGPASS", "invalid user name or password, or the user is disabled" },
        { "NOPERM", "the user may not run this command" },
        { "NOAUTH", "authentication required" },
    };
    /* Whole texts of Redis that quote nothing of ours: shown as they are. */
    static const char *const fixed[] = {
        "ERR invalid password",                              /* Redis 5 */
        "ERR Client sent AUTH, but no password is set",      /* Redis 5 */
        "ERR AUTH <password> called without any password configured for the default user. "
        "Are you sure your configuration is correct?",       /* Redis 6 and later */
    };
    for (size_t k = 0; s && k < sizeof(fixed) / sizeof(fixed[0]); k++)
        if (strcmp(s, fixed[k]) == 0) {
            snprintf(out, size, "%s", s);
            return out;
        }
    size_t w = 0;
    while (s && w < 16 && s[w] >= 'A' && s[w] <= 'Z')
        w++;
    if (s && s[w] != '\0' && s[w] != ' ')
        w = 0;  /* not a plain first word: nothing of it */
    for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
        if (w == strlen(known[k].word) && strncmp(s, known[k].word, w) == 0) {
            snprintf(out, size, "%s (%s)", known[k].word, known[k].what);
            return out;
        }
    snprintf(out, size, "%.*s%s(the server's text is not shown: it may quote the password)",
             (int)w, w ? s : "", w ? " " : "");
    return out;
}

void distlock__cut_args(char *msg)
{
    static const char shown[] = "with args (not shown)";
    char *a = (char *)args_quote(msg, strlen(msg));
    if (a == NULL)
        return;
    /* the text that replaces the quote is shorter than the marker */
    memcpy(a, shown, sizeof(shown));
}

int distlock__fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    distlock__cut_args(last_error);
    return status;
}

void distlock__clear_error(void)
{
    last_error[0] = '\0';
}

char *distlock__error_copy(void)
{
    return strdup(last_error);
}

const char *distlock_last_error(void)
{
    return last_error;
}

const char *distlock_strerror(int status)
{
    switch (status) {
    case DISTLOCK_OK: return "success";
    case DISTLOCK_NOTACQUIRED: return "lock is held by another owner";
    case DISTLOCK_EINVAL: return "invalid argument";
    case DISTLOCK_ENOMEM: return "out of memory";
    case DISTLOCK_ECONN: return "node unreachable or not replying";
    case DISTLOCK_ETIMEDOUT: return "the ttl was used up before the call completed";
    case DISTLOCK_ENOQUORUM: return "quorum of nodes unreachable";
    case DISTLOCK_ENOTOWNER: return "not the lock owner (expired, lost or released)";
    case DISTLOCK_EPROTO: return "server error or unexpected reply";
    case DISTLOCK_ECLOSED: return "not usable (closed, or inherited across fork)";
    case DISTLOCK_ECANCELED: return "cancelled";
    case DISTLOCK_ESYS: return "system resource unavailable";
    default: return "unknown status";
    }
}

unsigned distlock_version_number(void)
{
    return DISTLOCK_VERSION_NUMBER;
}

const char *distlock_version_string(void)
{
    return DISTLOCK_VERSION_STRING;
}

static void *(*volatile zero_fill)(void *, int, size_t) = memset;

void *distlock__zalloc(size_t n)
{
    void *p = malloc(n);
    if (p != NULL)
        zero_fill(p, 0, n);
    return p;
}
