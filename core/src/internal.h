/* internal.h -- shared between the core's files; never installed. */
#ifndef DISTLOCK_INTERNAL_H
#define DISTLOCK_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

#include "distlock.h"

#define DISTLOCK__HIDDEN __attribute__((visibility("hidden")))

/* ------------------------------------------------------------ error.c */
/* Record the thread's detail message and return `status` (for `return`). */
int distlock__fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void distlock__clear_error(void);

/* Decimal text of v into buf (at least 21 bytes), NUL-terminated; returns
 * the length. snprintf costs more than the rest of a request's encoding. */
static inline size_t distlock__ltoa(char *buf, long long v)
{
    char tmp[21];
    size_t n = 0, len = 0;
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

/* ------------------------------------------------------------ token.c */
int distlock__random_bytes(void *buf, size_t n);
uint64_t distlock__random_u64(void);

/* ------------------------------------------------------------ uri.c */
typedef struct distlock__node_cfg {
    char *uri;        /* as shown to users, password replaced by *** */
    char *host;       /* TCP host, or NULL for a Unix socket */
    int port;
    char *path;       /* Unix socket path, or NULL */
    int db;
    char *user;       /* from the URI, may be NULL */
    char *pass;       /* from the URI, may be NULL */
} distlock__node_cfg;

int distlock__parse_servers(const char *servers, distlock__node_cfg **out, int *n);
void distlock__free_nodes(distlock__node_cfg *nodes, int n);

/* ------------------------------------------------------------ scripts */
typedef struct distlock__script {
    const char *name;
    const char *body;
} distlock__script;

enum {
    DISTLOCK__S_ACQUIRE, DISTLOCK__S_RELEASE, DISTLOCK__S_EXTEND,
    DISTLOCK__S_RAISE, DISTLOCK__S_INSPECT, DISTLOCK__S_FAIR, DISTLOCK__S_LEAVE,
    DISTLOCK__S_FAIR_UNDO, DISTLOCK__S_COUNT
};
extern const distlock__script distlock__scripts[DISTLOCK__S_COUNT] DISTLOCK__HIDDEN;

/* ------------------------------------------------------------ resolve.c */
#define DISTLOCK__RESOLVE_MAX 4
typedef struct distlock__resolve distlock__resolve;
int distlock__host_is_numeric(const char *host);
/* Start resolving host on a helper thread; NULL on ENOMEM. */
distlock__resolve *distlock__resolve_start(const char *host);
/* Readable once the result is in. */
int distlock__resolve_fd(const distlock__resolve *r);
/* 0: addresses in addr[0..*naddr); -1: failed (err says why); 1: not yet. */
int distlock__resolve_take(distlock__resolve *r, char (*addr)[48], int *naddr, char *err,
                           size_t errlen);
void distlock__resolve_drop(distlock__resolve *r);

/* ------------------------------------------------------------ node.c / round.c */
/* Kinds of replies a connection can owe. */
enum {
    DISTLOCK__K_CALL = 0,   /* an operation's request */
    DISTLOCK__K_AUTH,       /* handshake: AUTH, SELECT, CLIENT ID, SCRIPT LOAD */
    DISTLOCK__K_SELECT,
    DISTLOCK__K_ID,
    DISTLOCK__K_LOAD,
    DISTLOCK__K_KILL        /* CLIENT KILL ID of a connection left behind */
};

struct distlock__result;

/* One reply a connection owes, in the order the requests were written. */
typedef struct distlock__owed {
    uint64_t tag;                   /* ordering domain of the request (0: none) */
    uint64_t sent_us;
    int kind;                       /* DISTLOCK__K_* */
    int arg;                        /* K_LOAD: script index */
    struct distlock__result *owner; /* the round waiting for it, or NULL: left behind */
} distlock__owed;

/* One connection to one node, owned by one connection set. */
typedef struct distlock__conn {
    redisContext *ctx;
    uint64_t serial;        /* client-unique number of this connection */
    long long srv_id;       /* the server's CLIENT ID for it, -1 unknown */
    int hs_pending;         /* handshake replies still due: not ready before 0 */
    unsigned cred_gen;      /* credentials it authenticated with */
    uint64_t used_us;       /* last round on this connection */
    distlock__owed *q;      /* replies due, FIFO ring */
    int qhead, qlen, qcap;
    distlock__resolve *resolving;  /* name lookup in progress, or NULL */
} distlock__conn;

/* A connection to every node; checked out of the client's pool by one
 * operation at a time, so operations of different threads run in parallel. */
typedef struct distlock__connset {
    struct distlock__connset *next;      /* in the pool */
    struct distlock__connset *all_next;  /* every set of the client */
    int in_use;
    /* Scratch for the operation that has the set checked out, sized by the
     * node count (not by the 64-node limit, on the stack): the results and
     * calls of its main round (a) and of a follow-up round (b). */
    struct distlock__result *res_a, *res_b;
    const struct distlock__call **calls_a, **calls_b;
    distlock__conn conns[];  /* client->n of them */
} distlock__connset;

/* One request to one node: EVALSHA of a script with nkeys keys followed by
 * the other arguments (argv, argc in all), or a plain command when script
 * is -1. The arrays are the caller's. */
typedef struct distlock__call {
    int script;              /* DISTLOCK__S_*, or -1 for a plain command */
    int nkeys;
    int argc;
    const char **argv;
    const size_t *argvlen;
    /* sent instead when the server rejects a plain command's syntax (an
     * older Redis), or NULL */
    const struct distlock__call *fallback;
    /* An undo (release of an attempt): on a node known hung it is queued
     * behind the requests of the same tag it must follow, without being
     * waited for; if none was sent there it is not sent at all. */
    int undo;
    /* Ordering domain (the protocol's hash of key and token), 0 for none.
     * The transport guarantees that a request with tag T executes on its
     * node after every earlier request with tag T of this client that can
     * still execute there (see round.c). */
    uint64_t tag;
    /* For an undo: nodes that may hold what it undoes (they granted, or may
     * have): there it is queued even on a hung connection, unwaited. */
    uint64_t must_mask;
} distlock__call;

enum { DISTLOCK__R_UNSENT = 0, DISTLOCK__R_PENDING, DISTLOCK__R_DONE, DISTLOCK__R_FAILED };

typedef struct distlock__result {
    int state;
    int status;          /* for FAILED: DISTLOCK_E* */
    redisReply *reply;   /* for DONE: the reply (may be an error reply) */
    int sent;            /* the request was written: it may have run */
    int resent;          /* sent again on a fresh connection after the first broke */
    /* private to round.c */
    int pre;             /* CLIENT KILLs still to confirm before sending */
    int deferred;        /* the call waits for the handshake / kills */
    int retried;         /* NOSCRIPT / syntax fallback used */
    int fresh;           /* this round opened the connection */
    uint64_t deadline_us;
    const distlock__call *call;
    char err[192];       /* for FAILED: what went wrong on this node */
} distlock__result;

/* Decides whether a round can stop before every node answered; `res` has
 * client->n entries. Returns nonzero to stop. */
typedef int (*distlock__decide_fn)(const distlock__result *res, int n, void *arg);

struct distlock_client;
/* Send calls[i] (NULL: nothing for node i) to every node in parallel and
 * collect replies until every node answered, failed, or `decide` says the
 * outcome is known. Replies are owned by res[] (distlock__round_clear). */
void distlock__round(struct distlock_client *c, distlock__connset *cs,
                     const distlock__call *const *calls, distlock__result *res,
                     distlock__decide_fn decide, void *arg);
void distlock__round_clear(distlock__result *res, int n);
/* Close a connection of node i; what it still owes is remembered (round.c). */
void distlock__conn_close(struct distlock_client *c, int i, distlock__conn *conn);
/* Drop a connection inherited across fork: no I/O, nothing remembered. */
void distlock__conn_forget(distlock__conn *conn);
/* redisBufferWrite without SIGPIPE (send with MSG_NOSIGNAL). */
int distlock__write(redisContext *ctx, int *done);
/* Start a non-blocking connection to node cfg at a numeric address (or its
 * Unix socket when addr is NULL); NULL with err set on failure. */
redisContext *distlock__node_connect(const distlock__node_cfg *cfg, const char *addr,
                                     int *status, char *err, size_t errlen);

/* Requests left behind (their replies not read) that carry a tag: a later
 * request with the same tag on another connection must not overtake them.
 * Kept per client, under c->mu. */
typedef struct distlock__stale {
    int node;
    uint64_t tag;
    uint64_t serial;        /* connection that carries them */
    long long srv_id;       /* its server-side id, -1 unknown */
    int open;               /* still open on our side (else closed: orphaned) */
    int count;              /* requests */
} distlock__stale;

/* ------------------------------------------------------------ cancel.c
 * Cancelling blocking calls, and the one way a waiting call sleeps. A call
 * notes distlock__cancel_gen() when it starts; a sleeper carries it. */
typedef struct distlock__sleeper {
    struct distlock__sleeper *next;   /* c->sleepers (c->mu) */
    int fd;                           /* eventfd: a release or a cancel wakes it; -1 if none */
    unsigned gen;                     /* c->cancel_gen when the call started */
} distlock__sleeper;

int distlock__cancel_init(distlock_client *c);        /* distlock_client_new */
void distlock__cancel_free(distlock_client *c);       /* distlock_client_free */
void distlock__cancel_after_fork(distlock_client *c); /* c->mu held, in the child */
unsigned distlock__cancel_gen(distlock_client *c);
/* Register / unregister a waiting call (c->mu not held). Never fails: without
 * an eventfd the sleeper still sees a cancel at its next re-check. */
void distlock__sleeper_start(distlock_client *c, distlock__sleeper *s, unsigned gen);
void distlock__sleeper_end(distlock_client *c, distlock__sleeper *s);
/* Wake the sleeper (any thread; c->mu held or not, s registered). */
void distlock__sleeper_wake(distlock__sleeper *s);
/* Sleep until woken, deadline_us (UINT64_MAX: none) or a cancel: 0, or
 * DISTLOCK_ECANCELED (no detail set). Calls the interrupt hook (c->mu not held). */
int distlock__sleep(distlock_client *c, distlock__sleeper *s, uint64_t deadline_us);
/* Nonzero if the call of s is cancelled; ask_hook: ask the interrupt hook too. */
int distlock__cancelled(distlock_client *c, const distlock__sleeper *s, int ask_hook);

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

/* ------------------------------------------------------------ client.c */
typedef struct distlock__waiter distlock__waiter;
typedef struct distlock__held distlock__held;

struct distlock_client {
    int n;
    int quorum;
    distlock__node_cfg *nodes;

    pthread_mutex_t mu;         /* pool, options, held list, reentrancy table */
    _Atomic pid_t pid;          /* process that owns the sockets */
    _Atomic pid_t reinit_pid;   /* forked child that is re-initialising mu */
    distlock__connset *pool;
    distlock__connset *all_sets;
    pthread_cond_t pool_cond;   /* a set was checked in */

    long connect_timeout_ms;
    long command_timeout_ms;
    long drift_ppm;
    long drift_min_ms;
    long retry_min_ms;
    long retry_max_ms;
    /* SHA1 of each script, learnt from the servers' SCRIPT LOAD replies (we
     * load every script when a connection is made), so no SHA1 code here. */
    char sha[DISTLOCK__S_COUNT][41];
    _Atomic int sha_ok[DISTLOCK__S_COUNT];  /* sha[s] is set (then immutable) */
    _Atomic int no_set_get;  /* a node rejected SET ... NX GET (Redis < 7) */
    char *username;
    char *password;
    _Atomic unsigned cred_gen;  /* bumped when the credentials change */

    /* round.c: requests left behind with a tag (c->mu), and how many */
    distlock__stale *stale;
    int nstale, stale_cap;
    /* token pair (lock.c, c->mu): the nodes the latest acquires may hold,
     * so their releases skip a hung node they never reached */
    struct { uint64_t tag, maybe, until; } tp_recent[32];
    int tp_next;
    /* counting filter over (node, tag) of the entries: most requests find
     * their bucket empty and skip the list (and its lock) */
    _Atomic unsigned short stale_filter[256];
    _Atomic uint64_t conn_serial;
    /* node i's server as seen when connected ("ip:port" or "unix:dev:ino"),
     * to refuse two nodes that are one server (c->mu) */
    char (*peer)[64];
    _Atomic int config_error;   /* two nodes are one server: unusable */
    char config_detail[256];

    /* locks acquired through this client and not yet released; for renewal,
     * reentrancy and release at client free */
    distlock__held *held;

    /* watchdog.c */
    pthread_t wd_thread;
    int wd_running;
    int wd_stop;
    pthread_cond_t wd_cond;
    int wd_busy;                /* a renewal batch is on the wire */
    int lost_fd;                /* eventfd, -1 until asked for */

    /* wait.c: one subscriber thread per client shared by all waits */
    pthread_t sub_thread;
    int sub_running;
    int sub_stop;
    int sub_wake[2];            /* pipe to wake the subscriber thread */
    distlock__waiter *waiters;
    struct distlock__sub *sub;  /* the subscriber's connections and channels */

    /* ---- cancel.c: cancelling blocking calls (distlock_client_cancel) ---- */
    _Atomic unsigned cancel_gen;      /* bumped by every cancel */
    int cancel_fd;                    /* eventfd written by every cancel */
    struct distlock__sleeper *sleepers;  /* calls now waiting (c->mu) */
    distlock_interrupt_fn intr_fn;    /* distlock_client_on_interrupt (c->mu) */
    void *intr_arg;
    /* ---- end cancel.c ---- */
};

/* Lock c->mu; in a forked child, first reset what came from the parent. */
void distlock__lock(distlock_client *c);
distlock__connset *distlock__checkout(distlock_client *c);
/* Check out `pref` if it is one of ours, waiting (bounded) while another
 * thread uses it; else any set. A preference only: requests on other
 * connections are ordered by the transport; this keeps a release on the
 * connections its acquire may still be queued on, where it cannot overtake
 * it (which would leave a key behind until its TTL). */
distlock__connset *distlock__checkout_pref(distlock_client *c, distlock__connset *pref);
void distlock__checkin(distlock_client *c, distlock__connset *cs);
/* Called with c->mu held: forget everything inherited across fork(). */
void distlock__after_fork_locked(distlock_client *c);
int distlock__check_key(const char *key);
/* EINVAL (with the detail) once two nodes were found to be one server. */
int distlock__check_usable(distlock_client *c);
int distlock__check_ttl(const distlock_client *c, long ttl_ms);
long distlock__drift_ms(const distlock_client *c, long ttl_ms);

/* ------------------------------------------------------------ lock.c */
/* A held ownership: one per (key, token) acquired through the client. */
struct distlock__held {
    distlock__held *next;
    distlock_client *client;
    char *key;
    char *token;
    long ttl_ms;
    unsigned flags;
    _Atomic uint64_t valid_until_us;  /* monotonic */
    distlock__connset *cs_pref;  /* see distlock__checkout_pref */
    uint64_t maybe;              /* nodes that may hold it (distlock__attempt) */
    int64_t fence;
    _Atomic int lost;
    int released;
    pid_t pid;
    /* reentrancy */
    char *owner;              /* owner id, NULL unless REENTRANT */
    int owner_thread;         /* owner is `thread` (no explicit owner id) */
    pthread_t thread;
    int count;                /* acquisitions not yet released */
    int refs;                 /* handles alive */
    /* watchdog (c->mu) */
    uint64_t renew_at_us;
    long retry_ms;            /* backoff after a renewal that reached no quorum, 0 if none */
    int renewing;             /* in a renewal batch on the wire */
    unsigned gen;             /* bumped by every extend: a batch sent before is stale */
    distlock_lost_fn lost_fn;
    void *lost_arg;
    distlock_lock *lost_handle;
    int cb_running;           /* the lost callback runs now (on the watchdog thread) */
};

struct distlock_lock {
    distlock__held *h;
    int released;             /* this handle's release done */
};

/* What one acquire attempt saw, for the wait loop. */
typedef struct distlock__attempt {
    int granted;        /* nodes that granted */
    int behind;         /* fair: nodes where the lock is free but another waiter is first */
    long holder_pttl;   /* longest remaining TTL of the holder seen, ms (0: unknown) */
    int head;           /* fair: first in the queue on some node */
    distlock__connset *cs;  /* on success: the set whose connections it used */
    uint64_t maybe;         /* on success: nodes that granted or may have */
} distlock__attempt;

/* Core operations on N nodes, shared by handles and the token pair. */
int distlock__acquire_once(distlock_client *c, const char *key, const char *token, long ttl_ms,
                           unsigned flags, int fair, long queue_ttl_ms, uint64_t *valid_until_us,
                           int64_t *fence, distlock__attempt *att);
/* valid_until_us: the lease's end if known (0 if not): a release resent
 * after its first send ran is then recognised as done. */
int distlock__release_keytoken(distlock_client *c, const char *key, const char *token,
                               uint64_t valid_until_us, distlock__connset *pref, uint64_t maybe);
int distlock__extend_keytoken(distlock_client *c, const char *key, const char *token,
                              long ttl_ms, uint64_t *valid_until_us);
int distlock__leave_queue(distlock_client *c, const char *key, const char *token);
/* Drop one reference (c->mu held); the last one unlinks and frees h. */
void distlock__held_unref_locked(distlock_client *c, distlock__held *h);
/* Keys kept beside a lock key (queue, fence counter) in the same Redis
 * Cluster hash slot; buf must hold DISTLOCK__SIDEKEY_MAX bytes. */
#define DISTLOCK__SIDEKEY_MAX (DISTLOCK_KEY_MAX + 32)
void distlock__sidekey(char *buf, const char *key, const char *suffix);

/* ------------------------------------------------------------ watchdog.c */
int distlock__watchdog_start(distlock_client *c);   /* c->mu held */
/* The one renewal schedule: ttl/3 after a renewal that took effect. */
uint64_t distlock__renew_at(uint64_t from_us, long ttl_ms);
/* The one validity rule: a lease taken (or renewed) by requests sent at
 * t0_us for ttl_ms lasts until t0 + ttl - drift; 0 if that is not positive. */
uint64_t distlock__valid_until(const distlock_client *c, uint64_t t0_us, long ttl_ms);
void distlock__watchdog_stop(distlock_client *c);
void distlock__watchdog_after_fork(distlock_client *c);   /* c->mu held, in the child */
void distlock__mark_lost(distlock__held *h);        /* c->mu held */

/* ------------------------------------------------------------ wait.c */
struct distlock__waiter {
    distlock__waiter *next;
    char *channel;
    const char *token;        /* fair waiters: our token, else NULL */
    int head;                 /* fair waiters: first in the queue, so releases concern us */
    int notified;
    int subscribed;
    distlock__sleeper sl;     /* the call's sleeper (cancel.c), started by the caller */
};
/* Register / unregister a waiter for key (c->mu not held); w->sl must be
 * started. Registering waits (bounded) until the subscription is confirmed
 * so no release is missed; DISTLOCK_ECANCELED (w not registered) if the call
 * is cancelled meanwhile, DISTLOCK_ESYS if the subscriber cannot start. */
int distlock__waiter_add(distlock_client *c, distlock__waiter *w);
void distlock__waiter_remove(distlock_client *c, distlock__waiter *w);
/* Fair waiters: record whether we are at the head of the queue. */
void distlock__waiter_set_head(distlock_client *c, distlock__waiter *w, int head);
/* Wait until deadline_us, or until notified if `notice` (w registered):
 * returns 1 if notified, 0 at the deadline, DISTLOCK_ECANCELED if the call
 * is cancelled (no detail set). */
int distlock__waiter_wait(distlock_client *c, distlock__waiter *w, uint64_t deadline_us,
                          int notice);
void distlock__subscriber_stop(distlock_client *c);
void distlock__subscriber_after_fork(distlock_client *c); /* c->mu held, in the child */

#endif
