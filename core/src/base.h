/* base.h -- layer 0: what every layer may use. Error details, the clock,
 * random tokens, the server-list grammar. Calls nothing of the library. */
#ifndef DISTLOCK_BASE_H
#define DISTLOCK_BASE_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "distlock.h"
#include "stats.h"

#define DISTLOCK__HIDDEN __attribute__((visibility("hidden")))

/* ------------------------------------------------------------ error.c */
/* Record the thread's detail message and return `status` (for `return`). */
int distlock__fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void distlock__clear_error(void);
/* The thread's detail message, copied (NULL if out of memory), to keep it
 * across a cleanup call that records its own; free() it. */
char *distlock__error_copy(void);
/* What a message may quote of a server's error reply s: its length, at most
 * cap, cut before "with args beginning with" (a server quotes the
 * arguments of a command it refuses: they may hold a password or a token).
 * distlock__fail() and the per-node messages apply the same cut. */
int distlock__reply_shown_len(const char *s, int cap);
/* What a message may say of a refused AUTH (or HELLO) reply s: its first
 * word only (WRONGPASS, NOPERM, ERR...) and a fixed description, never the
 * server's text (it may quote the password). Returns out. */
const char *distlock__handshake_refusal(const char *s, char *out, size_t size);
/* Cut msg (in place) before any "with args beginning with" it quotes. */
void distlock__cut_args(char *msg);

/* A zeroed block, for an object made and freed on every call (a handle, a
 * run, a multi's operation): glibc's calloc bypasses its per-thread cache,
 * so a calloc'd block costs an arena round trip each way, and compilers
 * turn malloc + memset back into calloc. The memset goes through a
 * volatile pointer (error.c), which they cannot see through. */
void *distlock__zalloc(size_t n);

/* Decimal text of v into buf (at least 21 bytes), NUL-terminated; returns
 * the length. snprintf costs more than the rest of a request's encoding. */
static inline size_t distlock__ltoa(char *buf, long long v)
{
    char tmp[21];
    size_t n = 0, len = 0;
    /* A request's RESP headers are mostly one or two digits (argument
     * counts and lengths): 8 of them per SET, on every node. */
    if (v >= 0 && v < 100) {
        if (v >= 10)
            buf[len++] = (char)('0' + v / 10);
        buf[len++] = (char)('0' + v % 10);
        buf[len] = '\0';
        return len;
    }
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        buf[len++] = '-';
    while (n)
        buf[len++] = tmp[--n];
    buf[len] = '\0';
    return len;
}

/* ------------------------------------------------------------ clock.c */
uint64_t distlock__now_us(void);  /* CLOCK_MONOTONIC */
pid_t distlock__getpid(void);     /* cached; reset in a forked child */
/* The fork gate. A library thread that runs OpenSSL (the +switch-master
 * subscriber, the resolver's helpers, which run the lookups of a Sentinel
 * node's master) holds it while it works and lets go of it only to wait
 * (poll, getaddrinfo): fork() waits for every holder to let go (an atfork
 * handler takes it exclusively). So a child never starts with a lock of
 * OpenSSL or of the allocator held by a thread it does not have, which
 * its first call would wait for forever. Not recursive; never held across
 * a user's callback (which may fork). */
void distlock__fork_gate_enter(void);
void distlock__fork_gate_leave(void);
/* The gate's last leave by a joinable thread that nobody else joins (the
 * resolver's helpers), returning from its start function next. Its exit
 * still runs code that takes locks (thread-local destructors: OpenSSL's
 * per-thread state; a sanitizer's allocator cache), so it is joined before
 * fork() goes on, or by a later such thread once it has ended (never
 * waited for by one: a slow exit holds up no other): none is left for a
 * fork to catch half-exited. */
void distlock__fork_gate_exit(void);
/* In a forked child: replace the eventfd `fd` shared with the parent by a
 * fresh one under the same number (a user may hold the number). 0 or -1. */
int distlock__eventfd_renew(int fd);

/* ------------------------------------------------------------ token.c */
uint64_t distlock__random_u64(void);

/* Text buffers shared across files, named for what they hold. */
#define DISTLOCK__NUM_LEN 24    /* a 64-bit integer in decimal: sign, 20 digits, NUL */
#define DISTLOCK__ADDR_LEN 48   /* a numeric address (INET6_ADDRSTRLEN is 46) */
#define DISTLOCK__HOST_LEN 256  /* a host name (DNS allows 253 bytes) and its NUL */
#define DISTLOCK__ERR_LEN 192   /* one node's failure: a round's result, a lookup's error */

/* ------------------------------------------------------------ uri.c */
/* Nodes of one client at most: a set of nodes is a uint64_t bit mask
 * (node i: bit i) throughout the core. */
#define DISTLOCK__MAX_NODES 64
enum { DISTLOCK__NODE_MASTER = 0, DISTLOCK__NODE_SENTINEL = 1, DISTLOCK__NODE_CLUSTER = 2 };

/* slot.c: the Redis Cluster hash slot of a key (0..16383): CRC16 (XModem)
 * of its hash tag -- the bytes between the first '{' and the first '}'
 * after it, when there are any -- else of the whole key. */
#define DISTLOCK__SLOTS 16384
unsigned distlock__key_slot(const char *key, size_t len);

typedef struct distlock__hostport {
    char *host;
    int port;
} distlock__hostport;

/* TLS settings of one node from its URI (rediss://, rediss-sentinel://);
 * what is not given there comes from the client's options. */
typedef struct distlock__tls_cfg {
    int enabled;
    char *ca_file, *ca_dir, *cert, *key, *server_name;  /* NULL: not given */
    int insecure;     /* -1 not given; 1 tls_insecure=1; 0 tls_insecure=0 */
} distlock__tls_cfg;

/* One node of the server list (uri.c parses the grammar of SPEC.md). */
typedef struct distlock__node_cfg {
    char *uri;        /* as shown to users, password replaced by *** */
    char *host;       /* TCP host, or NULL for a Unix socket or a Sentinel node */
    int port;
    char *path;       /* Unix socket path, or NULL */
    int db;
    char *user;       /* the data node's, from the URI, may be NULL */
    char *pass;       /* the data node's, from the URI, may be NULL */
    int kind;         /* DISTLOCK__NODE_MASTER, _SENTINEL or _CLUSTER */
    distlock__tls_cfg tls;
    /* kind SENTINEL: the sentinels to ask for `master`, and their
     * credentials (NULL: none); host is NULL and port 0.
     * kind CLUSTER: `sentinels` lists its seed nodes (host and port are
     * the first one's); the slot map is learnt from them (cluster.c). */
    distlock__hostport *sentinels;
    int nsentinels;
    char *master;
    char *sentinel_user;
    char *sentinel_pass;
} distlock__node_cfg;

int distlock__parse_servers(const char *servers, distlock__node_cfg **out, int *n);
void distlock__free_nodes(distlock__node_cfg *nodes, int n);
/* One node's configuration: free what it owns / deep-copy it (-1: out of
 * memory, dst then owns nothing). */
void distlock__node_cfg_clear(distlock__node_cfg *cfg);
int distlock__node_cfg_copy(distlock__node_cfg *dst, const distlock__node_cfg *src);

/* ------------------------------------------------------------ threads */
/* The signals a thread may block: all but those raised by a fault (blocked,
 * they would kill the process without running its handlers). */
static inline void distlock__blockable_signals(sigset_t *set)
{
    sigfillset(set);
    sigdelset(set, SIGSEGV);
    sigdelset(set, SIGBUS);
    sigdelset(set, SIGFPE);
    sigdelset(set, SIGILL);
    sigdelset(set, SIGTRAP);
    sigdelset(set, SIGABRT);
}

/* pthread_create for the library's own threads (subscriber, watchdog,
 * resolver): they take no signal, so a signal sent to the process (Ctrl-C)
 * reaches a caller's thread, where it can interrupt a waiting call. */
static inline int distlock__thread_create(pthread_t *t, const pthread_attr_t *attr,
                                          void *(*fn)(void *), void *arg)
{
    sigset_t set, old;
    distlock__blockable_signals(&set);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    int e = pthread_create(t, attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return e;
}

#endif
