/* slowdns.c -- see slowdns.h. Built as libslowdns.so (LD_PRELOAD) and as the
 * object library distlock_slowdns (linked into a test executable). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "slowdns.h"

#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/socket.h>

#define SD_EXPORT __attribute__((visibility("default")))

#define SD_MAX_RULES 32
#define SD_MAX_NAMES 64
#define SD_NAME 256

typedef struct sd_rule {
    char name[SD_NAME];
    long ms;
    int fail;
    char addr[64];
} sd_rule;

typedef struct sd_count {
    char name[SD_NAME];
    int calls;
} sd_count;

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

static pthread_mutex_t sd_mu = PTHREAD_MUTEX_INITIALIZER;
static int sd_loaded;                 /* rules read from the environment / set */
static sd_rule sd_rules[SD_MAX_RULES];
static int sd_nrules;
static sd_count sd_counts[SD_MAX_NAMES];
static int sd_ncounts, sd_total;

/* Parse rules into out; -1 if malformed. */
static int parse_rules(const char *s, sd_rule *out, int *n)
{
    *n = 0;
    if (!s) return 0;
    while (*s) {
        const char *end = strchr(s, ';');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len > 0) {
            char item[SD_NAME + 96];
            if (len >= sizeof item || *n >= SD_MAX_RULES) return -1;
            memcpy(item, s, len);
            item[len] = '\0';
            char *e1 = strchr(item, '='), *e2 = e1 ? strchr(e1 + 1, '=') : NULL;
            if (!e1 || !e2 || e1 == item) return -1;
            *e1 = *e2 = '\0';
            sd_rule *r = &out[*n];
            if (strlen(item) >= sizeof r->name || strlen(e2 + 1) >= sizeof r->addr) return -1;
            char *num_end;
            errno = 0;
            r->ms = strtol(e1 + 1, &num_end, 10);
            if (errno || num_end == e1 + 1 || *num_end || r->ms < 0) return -1;
            memcpy(r->name, item, strlen(item) + 1);   /* length checked above */
            r->fail = strcmp(e2 + 1, "fail") == 0;
            snprintf(r->addr, sizeof r->addr, "%s", r->fail ? "" : e2 + 1);
            if (!r->fail && !r->addr[0]) return -1;
            (*n)++;
        }
        if (!end) break;
        s = end + 1;
    }
    return 0;
}

/* Caller holds sd_mu. */
static void load_env_locked(void)
{
    if (sd_loaded) return;
    sd_loaded = 1;
    const char *env = getenv("DISTLOCK_SLOWDNS");
    if (env && parse_rules(env, sd_rules, &sd_nrules) != 0) {
        fprintf(stderr, "slowdns: malformed DISTLOCK_SLOWDNS=%s (ignored)\n", env);
        sd_nrules = 0;
    }
}

SD_EXPORT int slowdns_set(const char *rules)
{
    sd_rule tmp[SD_MAX_RULES];
    int n;
    if (parse_rules(rules, tmp, &n) != 0) return -1;
    pthread_mutex_lock(&sd_mu);
    sd_loaded = 1;
    memcpy(sd_rules, tmp, sizeof(sd_rule) * (size_t)n);
    sd_nrules = n;
    pthread_mutex_unlock(&sd_mu);
    return 0;
}

SD_EXPORT int slowdns_calls(const char *name)
{
    int v = 0;
    pthread_mutex_lock(&sd_mu);
    if (!name) {
        v = sd_total;
    } else {
        for (int i = 0; i < sd_ncounts; i++)
            if (strcasecmp(sd_counts[i].name, name) == 0) v = sd_counts[i].calls;
    }
    pthread_mutex_unlock(&sd_mu);
    return v;
}

SD_EXPORT void slowdns_reset_calls(void)
{
    pthread_mutex_lock(&sd_mu);
    sd_ncounts = 0;
    sd_total = 0;
    pthread_mutex_unlock(&sd_mu);
}

static gai_fn real_gai(void)
{
    static gai_fn fn;           /* benign: every thread stores the same value */
    gai_fn f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (gai_fn)dlsym(RTLD_NEXT, "getaddrinfo");
        __atomic_store_n(&fn, f, __ATOMIC_RELEASE);
    }
    return f;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

SD_EXPORT int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                          struct addrinfo **res)
{
    gai_fn real = real_gai();
    if (!real) return EAI_SYSTEM;
    long ms = -1;
    int fail = 0;
    char addr[64] = "";
    pthread_mutex_lock(&sd_mu);
    load_env_locked();
    sd_total++;
    if (node) {
        int i;
        for (i = 0; i < sd_ncounts; i++)
            if (strcasecmp(sd_counts[i].name, node) == 0) break;
        if (i < sd_ncounts) {
            sd_counts[i].calls++;
        } else if (sd_ncounts < SD_MAX_NAMES && strlen(node) < SD_NAME) {
            snprintf(sd_counts[sd_ncounts].name, SD_NAME, "%s", node);
            sd_counts[sd_ncounts++].calls = 1;
        }
        for (i = 0; i < sd_nrules; i++) {
            if (strcasecmp(sd_rules[i].name, node) == 0) {
                ms = sd_rules[i].ms;
                fail = sd_rules[i].fail;
                snprintf(addr, sizeof addr, "%s", sd_rules[i].addr);
                break;
            }
        }
    }
    pthread_mutex_unlock(&sd_mu);
    if (ms < 0) return real(node, service, hints, res);
    if (ms > 0) sleep_ms(ms);
    if (fail) return EAI_NONAME;
    struct addrinfo h;
    memset(&h, 0, sizeof h);
    if (hints) h = *hints;
    h.ai_flags |= AI_NUMERICHOST;
    h.ai_flags &= ~AI_CANONNAME;
    return real(addr, service, &h, res);
}
