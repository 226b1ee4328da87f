/* internal.h -- the core's layers, and who may call what.
 *
 *   layer 7  API           options.c client.c handle.c pair.c admin.c ttl.c keyset_api.c
 *                          multi.c acquire_api.c
 *                          (distlock.h)
 *   layer 6  background    wait.c watchdog.c cancel.c
 *   layer 5  operations    acquire.c ops.c run.c held.c keyset.c
 *   layer 4  client state  state.c                            (this file)
 *   layer 3  quorum        quorum.c                           (quorum.h)
 *   layer 2  protocol      protocol.c                         (protocol.h)
 *   layer 1  transport     pool.c round.c request.c conn.c resp.c net.c
 *                          stream.c resolve.c sentinel.c tls.c cluster.c
 *                          nodekind.c pubsub.c  (transport.h)
 *   layer 0  base          error.c clock.c token.c uri.c slot.c  (base.h)
 *                          stats.c (counters, histograms)     (stats.h)
 *
 * A file calls only into its own layer and the layers below; nothing below
 * the client state knows a lock handle or a client. The background layer's
 * after-fork hooks are reached through function pointers set by the API
 * layer (client.c), not by name. Each .c file declares its layer on a
 * "Layer: N name" line of its header comment; tests/check-layers.py checks
 * the objects' references against them, and this map and core/README.md's
 * against the declarations. See core/README.md. */
#ifndef DISTLOCK_INTERNAL_H
#define DISTLOCK_INTERNAL_H

#include "quorum.h"

/* Token-pair acquires remembered per client (pair.c): a ring, the oldest
 * replaced first. */
#define DISTLOCK__TP_RECENT 32

typedef struct distlock__waiter distlock__waiter;
typedef struct distlock__turn_queue distlock__turn_queue;
typedef struct distlock__held distlock__held;

struct distlock_client {
    int n;                      /* = tp.n = q.n, immutable */
    int quorum;                 /* = q.quorum */
    distlock__node_cfg *nodes;  /* owned here; tp and q point at them */
    distlock__transport tp;     /* connections (its own lock: tp.mu) */
    distlock__quorum q;         /* quorum size, drift allowance */
    distlock__stats stats;      /* counters and histograms (stats.c); tp.stats points here */

    pthread_mutex_t mu;         /* options, held list, reentrancy, background state */
    _Atomic pid_t pid;          /* process that owns the sockets */
    _Atomic pid_t reinit_pid;   /* forked child that is re-initialising mu */
    /* after-fork hooks of the layers above the client's state (background
     * threads), set by distlock_client_new; called with mu held */
    void (*after_fork[3])(distlock_client *c);

    /* set under mu (kept ordered), read by waiting calls without it: atomic */
    _Atomic long retry_min_ms;
    _Atomic long retry_max_ms;
    _Atomic int no_set_get;  /* a node rejected SET ... NX GET (Redis < 7) */
    /* WAIT for replicas (DISTLOCK_OPT_WAIT_*): read by operations without mu */
    _Atomic long wait_replicas;
    _Atomic long wait_timeout_ms;
    /* owner metadata (DISTLOCK_OPT_OWNER_INFO, read without mu; the label
     * under mu) */
    _Atomic int owner_info;
    /* DISTLOCK_OPT_MULTI_RUNS: runs one multi keeps on the wire at once
     * (multi.c reads it at each run it starts) */
    _Atomic long multi_runs;
    char owner_label[DISTLOCK_OWNER_LABEL_MAX + 1];

    /* token pair (pair.c, mu): the nodes the latest acquires may hold,
     * so their releases skip a hung node they never reached. lock: its key
     * and token, NUL-separated (malloc'd), which identify the entry; the
     * tag only finds it fast (a hash: two locks may share one) */
    struct { uint64_t tag, maybe, until; char *lock; } tp_recent[DISTLOCK__TP_RECENT];
    int tp_next;

    /* locks acquired through this client and not yet released; for renewal,
     * reentrancy and release at client free */
    distlock__held *held;

    /* watchdog.c */
    pthread_t wd_thread;
    int wd_running;
    /* the lease clock: a second thread that marks an auto-renewed lock lost
     * when its validity ends unconfirmed, while the renewal thread may be
     * blocked on a round that has not answered */
    pthread_t wd_clock;
    int wd_clock_running;
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
    _Atomic unsigned nwaiters;  /* length of waiters (c->mu), read without it by a new
                                 * call before it looks for a turn to join */
    struct distlock__sub *sub;  /* the subscriber's connections and channels */
    distlock__turn_queue *turn_queues;  /* waiters taking turns, per key and turn group (c->mu) */

    /* cancel.c: cancelling blocking calls (distlock_client_cancel) */
    _Atomic unsigned cancel_gen;      /* bumped by every cancel */
    int cancel_fd;                    /* eventfd written by every cancel */
    struct distlock__sleeper *sleepers;  /* calls now waiting (c->mu) */
    distlock_interrupt_fn intr_fn;    /* distlock_client_on_interrupt (c->mu) */
    void *intr_arg;
};

/* ------------------------------------------------------------ options.c */
/* The table's row for id; NULL (no detail) if there is none. */
const distlock_option_info *distlock__option_find(distlock_option id);
/* EINVAL with the detail naming the option unless v fits its row: an
 * integer option and min <= v <= max. */
int distlock__option_check_long(const distlock_option_info *o, long v);
/* An integer option's value from text (a decimal integer), then checked. */
int distlock__option_parse_long(const distlock_option_info *o, const char *text, long *v);
/* A string option's value: at most max bytes. */
int distlock__option_check_string(const distlock_option_info *o, const char *v);
/* client.c: an integer option's current value on c (for tests). */
int distlock__client_option_value(distlock_client *c, distlock_option opt, long *v);

/* ------------------------------------------------------------ state.c */
/* Lock c->mu; in a forked child, first reset what came from the parent
 * (the transport's connections, the held list, the background threads'
 * state through their after-fork hooks). */
void distlock__lock(distlock_client *c);
/* The transport's pool, after the fork check. */
distlock__connset *distlock__checkout(distlock_client *c);
distlock__connset *distlock__checkout_pref(distlock_client *c, uint64_t set_id);
void distlock__checkin(distlock_client *c, distlock__connset *cs);
/* Start an operation: EINVAL if the client is unusable, else check out a
 * connection set (ENOMEM). */
int distlock__begin(distlock_client *c, distlock__connset **cs);
/* 1..max bytes, not NULL; `what` names it in the detail. */
int distlock__check_text(const char *what, const char *s, size_t max);
int distlock__check_key(const char *key);
/* A caller's token (the token pair, args->token, distlock_lock_restore):
 * 1..DISTLOCK_TOKEN_MAX bytes; the one check all of them make. */
int distlock__check_token(const char *token);
/* EINVAL (with the detail) once two nodes were found to be one server. */
int distlock__check_usable(distlock_client *c);

/* ------------------------------------------------------------ operations: held.c, acquire.c, ops.c */
/* A held ownership: one per (key, token) acquired through the client. */
struct distlock__held {
    distlock__held *next;
    distlock_client *client;
    char *key;
    char *token;
    /* A waiting plain writer's name in the key's registry of waiting
     * writers (distlock__acq_req_init), the same for its whole wait. Not
     * its token: a caller's token may be used by several waits at once
     * (threads, processes, hosts of one owner), and each wait must be its
     * own entry, or the first to leave would withdraw the intent while
     * another still waits. */
    char writer[33];
    /* distlock_acquire_many(): its nkeys keys, in the caller's order
     * (keys[0] is `key` too), and with DISTLOCK_FENCING one fence per key;
     * NULL for a single-key lock (nkeys 1) */
    char **keys;
    int64_t *fences;
    size_t nkeys;
    long ttl_ms;
    unsigned flags;
    _Atomic uint64_t valid_until_us;  /* monotonic */
    uint64_t set_pref;           /* connection set of its acquire (distlock__tp_checkout_pref) */
    uint64_t maybe;              /* nodes that may hold it (distlock__attempt) */
    int64_t fence;
    int kind;                    /* DISTLOCK__LOCK, _READ (zset), _PERMIT (zset) */
    long permits;                /* _PERMIT: the semaphore's permits, else 0 */
    int quorum;                  /* grants it needs (distlock__lease_quorum) */
    uint64_t acquired_us;        /* monotonic, for the hold-time histogram (0: not counted) */
    _Atomic int lost;            /* 0, or why: DISTLOCK__LOST_GONE / _UNCONFIRMED */
    int released;
    int abandoned;               /* a handle was abandoned: no handle deletes the key */
    int restored;                /* distlock_lock_restore(): only distlock_release() deletes */
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
    int renewing_multi;       /* ... that renewal is a multi's extend (distlock_multi_extend),
                                 driven by the thread `renewer` only */
    pthread_t renewer;
    int renew_waker;          /* 1 + an eventfd written when the renewal on the wire ends
                                 (a multi's extend waits for it), 0: none */
    uint64_t inflight_until_us; /* while renewing: the validity that renewal gives if a
                                   quorum confirms it in time (from before its send) */
    unsigned gen;             /* bumped by every extend: a batch sent before is stale */
    distlock_lost_fn lost_fn;
    void *lost_arg;
    distlock_lock *lost_handle;
    int cb_running;           /* the lost callback runs now (on a watchdog thread) */
    pthread_t cb_thread;      /* the thread running it, while cb_running */
};

struct distlock_lock {
    distlock__held *h;
    int released;             /* this handle's release done */
    int resend;               /* ... but the servers gave no verdict (refused,
                               * unreachable): the next release sends again */
};

/* One acquire attempt: what it asks for. */
typedef struct distlock__acq_req {
    const char *key;
    const char *token;
    long ttl_ms;
    unsigned flags;          /* DISTLOCK_FENCING, DISTLOCK_STRICT are read */
    int fair;                /* the fair script: served in arrival order */
    long queue_ttl_ms;       /* fair: how long our queue entry lives; 0: try only */
    int kind;                /* DISTLOCK__LOCK, DISTLOCK__READ, DISTLOCK__PERMIT */
    long permits;            /* DISTLOCK__PERMIT: the semaphore's permits */
    int quorum;              /* grants it needs (distlock__lease_quorum) */
    const char *writer;      /* a waiting writer (a lock): its name in the key's registry
                                of waiting writers for its whole wait (held.writer: one
                                per wait, not its token), else NULL */
    int held_known;          /* this client was granted key+token and the lease has not
                                ended (pair.c's recent grants): only then does a node
                                that already held our token prove the caller held it */
} distlock__acq_req;

/* What a lease is: a lock (a string key), a read lock or a semaphore
 * permit (members of a zset at the key: protocol.c). */
enum { DISTLOCK__LOCK = 0, DISTLOCK__READ, DISTLOCK__PERMIT };

/* What it got, and saw (for the wait loop). */
typedef struct distlock__attempt {
    int granted;             /* nodes that granted */
    int readers;             /* a lock: a waiting writer's intent may be on some node
                                (one held read locks at the key, or, for a writer,
                                one did not answer the script: acquire.c, observe) */
    int saw_readers;         /* a lock: some node answered that read locks hold the key
                                (a writer noted in the registry: it takes no local turns,
                                wait.c; an unheard node is no such answer) */
    int behind;              /* fair: nodes where the lock is free but another waiter is first */
    long holder_pttl;        /* longest remaining TTL of the holder seen, ms (0: unknown) */
    int head;                /* fair: first in the queue on some node */
    int split;               /* fair: the queues disagree on the order (see acquire.c) */
    uint64_t reached;        /* nodes its first request was sent to: a fair waiter's
                                queue place can be only there */
    /* on success: */
    uint64_t valid_until_us; /* the lease's end (monotonic) */
    int64_t fence;           /* FENCING: the fence, else -1 */
    uint64_t set_id;         /* the connection set it used */
    uint64_t maybe;          /* nodes that granted or may have */
    /* when its requests went out, and when its grant was checked (0: not
     * granted); a waiting acquire reports its first attempt's start. The
     * metrics use these clock reads instead of their own. */
    uint64_t t0_us, t1_us;
} distlock__attempt;

/* run.c: an operation as a run, one that never blocks: a chain of rounds
 * on one connection set, advanced by whoever waits for its descriptors
 * (run.h says what it holds; acquire.c and ops.c make them). */
typedef struct distlock__run distlock__run;   /* on the heap; opaque outside acquire.c/ops.c */
/* Advance as far as possible without waiting; returns np > 0 with
 * (*pfd)[0..np) to wait for (struct pollfd: the run's connection set's poll
 * set) and *next_us the monotonic time (us) by which to call it again even
 * if nothing is ready (UINT64_MAX: none); 0 once finished. */
int distlock__run_interest(distlock__run *r, struct pollfd **pfd, uint64_t *next_us);
/* After waiting: (*pfd)[k].revents set by the caller (all 0: nothing
 * happened). */
void distlock__run_advance(distlock__run *r);
/* Only once interest returned 0: its status; the thread's error detail is
 * set to the run's own (captured as its steps set it: runs interleaved on
 * one thread do not mix theirs); outputs filled; the run freed. */
int distlock__run_finish(distlock__run *r);
/* The blocking driver: interest / poll() / advance until 0, then finish. */
int distlock__run_wait(distlock__run *r);
/* The same, also watching `cfd` (a call's cancel, distlock__cancel_fd;
 * -1: as distlock__run_wait): once it is readable (fired), the run is told
 * to drop what it has not sent. A descriptor, not the cancel: the cancel is
 * a layer above (cancel.c), and its caller knows it. */
int distlock__run_wait_fd(distlock__run *r, int cfd);
/* Its caller no longer waits for requests not yet written: each request
 * still waiting for its connection (a name or a Sentinel lookup, a connect,
 * a handshake), in this round and the run's later ones, is not sent and
 * fails ("not sent"); requests on the wire are still waited for (their
 * replies decide), and trailing requests still go out where they have
 * something to settle (a request of their tag may have reached the node:
 * round.c). Nothing of such a request reached its node, so the run's
 * outcome stays true. For a cancelled acquire, and the give-back of what
 * it won: it ends without waiting for connections. */
void distlock__run_drop_unsent(distlock__run *r);
/* The starts take the arguments of the blocking function of the same name,
 * plus int *rc; the caller keeps every argument (strings, rq, att, outputs)
 * alive until finish. NULL with *rc (and the detail) when nothing was
 * started (unusable client, bad key for a cluster, ENOMEM...). A start
 * never blocks: it sends the first round; a preferred connection set in
 * use is not waited for (any set: the requests' tags keep the order,
 * round.c). The blocking functions are their start + distlock__run_wait. */

/* acquire.c: one attempt on every node; a lost one is undone. The
 * blocking one watches `cancel_fd` (the call's cancel, distlock__cancel_fd;
 * -1: none): fired, the attempt sends nothing more
 * (distlock__run_drop_unsent); its caller sees the cancel. */
distlock__run *distlock__acquire_start(distlock_client *c, const distlock__acq_req *rq,
                                       distlock__attempt *att, int *rc);
int distlock__acquire_once(distlock_client *c, const distlock__acq_req *rq, distlock__attempt *att,
                           int cancel_fd);
/* ops.c */
/* valid_until_us: the lease's end if known (0 if not): a release resent
 * after its first send ran is then recognised as done. */
int distlock__release_keytoken(distlock_client *c, const char *key, const char *token,
                               uint64_t valid_until_us, uint64_t set_pref, uint64_t maybe);
/* The same, telling when its requests went out (*sent_us, if it got that
 * far; the end of a hold, for the metrics, without a clock read of its own). */
int distlock__release_keytoken_at(distlock_client *c, const char *key, const char *token,
                                  uint64_t valid_until_us, uint64_t set_pref, uint64_t maybe,
                                  uint64_t *sent_us);
int distlock__extend_keytoken(distlock_client *c, const char *key, const char *token,
                              long ttl_ms, uint64_t *valid_until_us);
/* The same for a lease needing `need` grants (0: the quorum; a permit's:
 * distlock__lease_quorum). retried: this release is sent again after one
 * that got no verdict (its "not ours" within the lease are its own). */
int distlock__release_lease(distlock_client *c, int need, const char *key, const char *token,
                            uint64_t valid_until_us, uint64_t set_pref, uint64_t maybe,
                            int retried, uint64_t *sent_us);
distlock__run *distlock__release_lease_start(distlock_client *c, int need, const char *key,
                                             const char *token, uint64_t valid_until_us,
                                             uint64_t set_pref, uint64_t maybe, int retried,
                                             uint64_t *sent_us, int *rc);
int distlock__extend_lease(distlock_client *c, int need, const char *key, const char *token,
                           long ttl_ms, uint64_t *valid_until_us);
distlock__run *distlock__extend_lease_start(distlock_client *c, int need, const char *key,
                                            const char *token, long ttl_ms,
                                            uint64_t *valid_until_us, int *rc);
/* A writer that waited for readers gives up: its intent goes (protocol.c).
 * Its start: NULL (*rc ENOMEM, no detail) when it cannot start; the intent
 * and the registry entry then expire with their scores. `nodes` (~0 for
 * all): where it goes, e.g. only where its attempts were sent
 * (distlock__attempt's reached), the only nodes where it noted anything. */
void distlock__write_leave(distlock_client *c, const char *key, const char *writer);
distlock__run *distlock__write_leave_start(distlock_client *c, const char *key,
                                           const char *writer, uint64_t nodes, int *rc);
/* A fair waiter leaves the queues: of every node, or (the start's `nodes`,
 * ~0 for all) of those its attempts were sent to (distlock__attempt's
 * reached), the only ones where it can have a place. */
int distlock__leave_queue(distlock_client *c, const char *key, const char *token);
distlock__run *distlock__leave_queue_start(distlock_client *c, const char *key,
                                           const char *token, uint64_t nodes, int *rc);
/* held.c: the records of held ownerships (c->mu held for all three) */
/* Free a record that was never linked. */
void distlock__held_free(distlock__held *h);
/* A renewal of h ended: wake the multi's extend that waits for it, if any
 * (h->renew_waker, set by distlock__extend_begin_or_wake). */
void distlock__renewal_ended(distlock__held *h);
/* Drop one reference; the last one unlinks and frees h. */
void distlock__held_unref_locked(distlock_client *c, distlock__held *h);
/* Why a lock is lost (distlock_lock_lost() says it): the servers said
 * the key no longer holds our token on enough nodes; or its validity ended
 * with no renewal confirmed (servers not replying in time: it may still be
 * held there, but nothing vouches for it). */
enum { DISTLOCK__LOST_GONE = 1, DISTLOCK__LOST_UNCONFIRMED = 2 };
/* Mark h lost for `why`: flag, and the client's lost eventfd. Returns 1 if
 * this call marked it, 0 if it was lost already (its first reason stays). */
int distlock__mark_lost(distlock__held *h, int why);

/* keyset.c: all keys of a set or none (distlock_acquire_many), one token */
typedef struct distlock__many_req {
    const char *const *keys;
    size_t nkeys;
    const char *token;
    long ttl_ms;
    unsigned flags;          /* DISTLOCK_FENCING is read */
} distlock__many_req;
typedef struct distlock__many_attempt {
    size_t held_at;          /* NOTACQUIRED: the key another owner holds (index) */
    long holder_pttl;        /* its remaining TTL seen, ms (0: unknown) */
    int64_t *fences;         /* FENCING: the caller's array of nkeys, filled on success */
    uint64_t valid_until_us, set_id, maybe, t0_us, t1_us;  /* as distlock__attempt */
} distlock__many_attempt;
/* One attempt: every node (every slot group, in ascending slot order, on a
 * Redis Cluster) or none; a refused or lost attempt is undone. */
int distlock__acquire_many_once(distlock_client *c, const distlock__many_req *rq,
                                distlock__many_attempt *att);
int distlock__release_many(distlock_client *c, const char *const *keys, size_t nkeys,
                           const char *token, uint64_t valid_until_us, uint64_t set_pref,
                           uint64_t maybe, int retried, uint64_t *sent_us);
int distlock__extend_many(distlock_client *c, const char *const *keys, size_t nkeys,
                          const char *token, long ttl_ms, uint64_t *valid_until_us);
/* The release / extend of a held record, whatever it holds (one key or a
 * set): the one place that tells them apart. */
int distlock__held_release(distlock_client *c, const distlock__held *h, uint64_t valid_until_us,
                           int retried, uint64_t *sent_us);
int distlock__held_extend(distlock_client *c, const distlock__held *h, long ttl_ms,
                          uint64_t *valid_until_us);

/* ------------------------------------------------------------ handle.c */
/* args->token when the caller's struct has that field (its size covers
 * it), else NULL; DISTLOCK_EINVAL for a size below the first layout. The
 * one reading of distlock_acquire_args' size, for every acquire that takes
 * args. */
int distlock__args_token(const distlock_acquire_args *args, const char **token);
/* A waiting acquire's sleep until its next re-check (a lock's or a set's):
 * see handle.c. */
int distlock__wait_recheck(distlock_client *c, distlock__waiter *w, long holder_pttl,
                           uint64_t deadline, int subscribed, long *backoff);
/* The rules of an acquire, shared by the blocking calls and the multi
 * (multi.c), so that both check, wait and register alike: */
/* Every argument check of distlock_acquire_with() / distlock_semaphore_acquire()
 * (permits 0: a lock), clearing the detail first; *token: args->token. */
int distlock__acquire_check(distlock_client *c, const char *key, long permits, long ttl_ms,
                            long wait_ms, unsigned flags, const distlock_acquire_args *args,
                            distlock_lock **out, const char **token);
/* The record of an acquire about to start (not linked), with its handle
 * allocated (*l); NULL with *rc and the detail set. */
distlock__held *distlock__held_new(distlock_client *c, const char *key, const char *token,
                                   long permits, long ttl_ms, unsigned flags, const char *owner,
                                   int owner_thread, distlock_lock **l, int *rc);
/* A won attempt: the record linked into the client (renewed with
 * DISTLOCK_AUTO_RENEW), *out = l. On an error l is freed (and released). */
int distlock__held_register(distlock_client *c, distlock__held *h, distlock_lock *l,
                            const distlock__attempt *att, distlock_lock **out);
/* The request of h's attempts (given: a caller's token, acquired strictly);
 * a waiting plain writer gets its name in the registry of waiting writers
 * here (h->writer). Returns DISTLOCK_OK, or the token generator's error. */
int distlock__acq_req_init(distlock_client *c, distlock__held *h, int given, long wait_ms,
                           distlock__acq_req *rq);
long distlock__queue_ttl(const distlock_client *c);
/* When a waiter re-checks next (jittered backoff, the holder's pttl, the
 * deadline); doubles *backoff up to retry_max. A lease seen is re-checked
 * DISTLOCK__PAST_LEASE_US after its end, once it surely ended. */
#define DISTLOCK__PAST_LEASE_US 500u
uint64_t distlock__recheck_at(distlock_client *c, long holder_pttl, uint64_t deadline,
                              long *backoff);
uint64_t distlock__split_pause_at(distlock_client *c);
uint64_t distlock__wait_deadline(long wait_ms, uint64_t now);
/* After the first attempt of an acquire: 1 if the call ends with rc (a
 * grant, an error, a try-once), 0 if it waits (another owner holds the key,
 * or a grant came too late: tried once more within the wait budget). */
static inline int distlock__first_attempt_ends(int rc, long wait_ms)
{
    return (rc != DISTLOCK_NOTACQUIRED && rc != DISTLOCK_ETIMEDOUT) || wait_ms == 0;
}
/* A waiting writer (rq->writer) that won at its first attempt may have
 * left its intent (`__write__`) on a node that did not grant it
 * (att->readers): it leaves the registry of waiting writers there before
 * the lock is the caller's (multi.c, S_WONLEAVE), as a later attempt's win
 * does, or that intent keeps the node's readers out for the queue TTL with
 * nobody waiting. A win with no writer (wait_ms 0) or with every node
 * heard and none holding read locks pays no round trip. */
static inline int distlock__won_writer_leaves(int rc, const distlock__acq_req *rq,
                                             const distlock__attempt *att)
{
    return rc == DISTLOCK_OK && rq->writer != NULL && att->readers;
}
/* DISTLOCK_REENTRANT: another counted handle of the ownership that owner
 * holds of key, once an extend confirmed it; 1 when it holds none. */
int distlock__reacquire(distlock_client *c, const char *key, long ttl_ms, unsigned flags,
                        const char *owner, distlock_cancel *cancel, distlock_lock **out);
/* multi.c: the rest of a blocking acquire (acquire_api.c) whose first
 * attempt (rq, its status rc with the thread's detail, att) must wait or
 * was cancelled: the wait as an operation of a multi of its own, driven on
 * this thread until it ends. Returns its status (detail set), *att the
 * grant; h stays the caller's (registered or freed by it); gen: the client's
 * cancel generation at the call's start. */
int distlock__acquire_wait(distlock_client *c, distlock__held *h, int given, long wait_ms,
                           distlock_cancel *cancel, unsigned gen, const distlock__acq_req *rq,
                           int rc, distlock__attempt *att);
/* After an attempt of a wait: 1 if the wait ends with rc (a grant, an
 * error, a second late grant in a row), 0 if it goes on; *late counts. */
int distlock__attempt_ends_wait(int rc, int *late);
/* The details (and statuses) of a wait's ends: cancelled after the time
 * since t0_us (what: appended), cancelled while the first attempt was out
 * (won: its lock was released), still held after wait_ms. */
int distlock__wait_cancelled(const char *key, uint64_t t0_us, const char *what);
int distlock__first_cancelled(const char *key, int won);
int distlock__wait_expired(const char *key, long wait_ms);
/* After a winning writer's leave of the registry of waiting writers: a
 * grant whose validity ended meanwhile is late (ETIMEDOUT, detail set). */
int distlock__grant_outlived(const distlock__acq_req *rq, const distlock__attempt *att);
/* A release of l in two halves around the round: begin checks and gives up
 * the count (1: done, nothing to send; DISTLOCK_OK: send, with *retry and
 * *until; else the error), end takes the verdict (returns rc). */
int distlock__release_begin(distlock_lock *l, int check_thread, int *retry, uint64_t *until);
int distlock__release_end(distlock_lock *l, int rc, int retry, uint64_t sent);
/* An extend of h in the same way, in step with the watchdog: begin marks it
 * renewing (1 without waiting if a renewal is on the wire and !wait). */
int distlock__extend_check(const distlock_lock *l, long ttl_ms);
/* A wait that could never end (the multi's extend on the wire is driven by
 * this very thread): -1 with the detail set (DISTLOCK_EINVAL). */
int distlock__extend_begin(distlock__held *h, long ttl_ms, int wait);
/* A multi's extend: begins as distlock__extend_begin(h, ttl_ms, 0), or, when
 * a renewal is on the wire, returns 1 and has its end write wake_fd (an
 * eventfd): the renewal's end calls distlock__renewal_ended (held.c);
 * distlock__renewal_unwake: that fd is no longer to be written (c->mu not held). */
int distlock__extend_begin_or_wake(distlock__held *h, long ttl_ms, int wake_fd);
void distlock__renewal_unwake(distlock__held *h, int wake_fd);
int distlock__extend_end(distlock__held *h, long ttl_ms, int rc, uint64_t until);

/* ------------------------------------------------------------ watchdog.c */
int distlock__watchdog_start(distlock_client *c);   /* c->mu held */
void distlock__watchdog_stop(distlock_client *c);
void distlock__watchdog_after_fork(distlock_client *c);   /* c->mu held, in the child */

/* ------------------------------------------------------------ cancel.c
 * Cancelling blocking calls, and the one way a waiting call sleeps. A call
 * notes distlock__cancel_gen() when it starts; a sleeper carries it. */
typedef struct distlock__sleeper {
    struct distlock__sleeper *next;   /* c->sleepers (c->mu) */
    int fd;                           /* eventfd: a release or a cancel wakes it; -1 if none */
    unsigned gen;                     /* c->cancel_gen when the call started */
    distlock_cancel *cancel;          /* the call's own cancel (distlock_acquire_with), or NULL */
    int own_fd;                       /* fd is the sleeper's (closed at its end); 0: a multi's */
    int child_fd;                     /* a blocking call's multi's epoll: with fd, closed in a
                                       * forked child (its thread is not there); -1: none */
    _Atomic int woken;                /* set by every wake, before fd is written */
} distlock__sleeper;

int distlock__cancel_init(distlock_client *c);        /* distlock_client_new */
void distlock__cancel_free(distlock_client *c);       /* distlock_client_free */
void distlock__cancel_after_fork(distlock_client *c); /* c->mu held, in the child */
unsigned distlock__cancel_gen(distlock_client *c);
/* Register / unregister a waiting call (c->mu not held). Never fails: without
 * an eventfd the sleeper still sees a cancel at its next re-check. */
void distlock__sleeper_start(distlock_client *c, distlock__sleeper *s, unsigned gen,
                            distlock_cancel *cancel);
/* Nonzero once cancel (NULL: none) was fired; no lock, any thread. */
int distlock__cancel_fired(const distlock_cancel *cancel);
void distlock__sleeper_end(distlock_client *c, distlock__sleeper *s);
/* The same on a descriptor that is not the sleeper's (a multi's eventfd,
 * multi.c): a wake sets `woken` and writes fd; the end leaves fd open. */
void distlock__sleeper_start_on(distlock_client *c, distlock__sleeper *s, unsigned gen,
                                distlock_cancel *cancel, int fd);
/* The same for a blocking call's wait on a multi of its own (multi.c): fd
 * its eventfd, epfd its epoll; a forked child closes both (the parent's
 * thread that would close them is not in the child). */
void distlock__sleeper_start_private(distlock_client *c, distlock__sleeper *s, unsigned gen,
                                     distlock_cancel *cancel, int fd, int epfd);
/* Was s woken since the last call? (resets the flag) */
int distlock__sleeper_take_woken(distlock__sleeper *s);
/* The eventfd a fire of cancel writes, -1 if none (NULL, or another process's). */
int distlock__cancel_fd(const distlock_cancel *cancel);
/* The client's cancel eventfd was readable: reset it and wake every sleeper
 * whose call is older than the current generation. */
void distlock__cancel_pass_on(distlock_client *c);
/* Wake the sleeper (any thread; c->mu held or not, s registered). */
void distlock__sleeper_wake(distlock__sleeper *s);
/* Sleep until woken, deadline_us (UINT64_MAX: none) or a cancel: 0, or
 * DISTLOCK_ECANCELED (no detail set). Calls the interrupt hook (c->mu not held). */
int distlock__sleep(distlock_client *c, distlock__sleeper *s, uint64_t deadline_us);
/* A blocking call's sleep on a descriptor that is not a sleeper's (the
 * multi of a blocking acquire's wait, multi.c) until it is readable or
 * deadline_us (UINT64_MAX: none): 0; DISTLOCK_ECANCELED when ask_hook and
 * the interrupt hook says stop (asked before the sleep and when a signal
 * interrupts it, the race closed as in distlock__sleep). */
int distlock__sleep_fd(distlock_client *c, int fd, uint64_t deadline_us, int ask_hook);
/* Nonzero if the call of s is cancelled (the client's cancel since it
 * started, or its own cancel); ask_hook: ask the interrupt hook too. */
int distlock__cancelled(distlock_client *c, const distlock__sleeper *s, int ask_hook);

/* ------------------------------------------------------------ wait.c */
struct distlock__waiter {
    distlock__waiter *next;
    char *channel;
    const char *token;        /* fair waiters: our token, else NULL */
    int head;                 /* fair waiters: first in the queue, so releases concern us */
    unsigned named;           /* fair waiters: fair acquires that named us the head so far */
    int notified;
    int subscribed;
    /* Once subscribed: the nodes whose confirmation of the channel the
     * waiter has counted on since (bit i), and those of them that lost it
     * since (wait.c: their confirming again means a re-check). */
    uint64_t covered, lost;
    /* Local turns (wait.c): a blocking call's plain waiter takes turns with
     * the client's other such waiters of its key asking the same thing
     * (turns; turn_group: a lock, a read lock, a permit of P); only the one
     * with the turn re-checks. pass_now: set by the owner before removing a
     * waiter that won a lease others may share (a read lock, a permit), so
     * the next looks at once; go_now: set on that next one, taken by it;
     * recap: set on one without the turn when the one with the turn saw a
     * lease that ends before that one's next re-check (check_at_us), taken
     * by it with go_now: it sets its timer again, sending nothing.
     * pass_wake: set by the owner before removing a waiter that leaves
     * without the key (a cancel, its deadline, an error): a wake it did not
     * take (notified) goes to the waiter the message would have woken next,
     * which may have been the one a release meant, and a go_now not taken
     * to the next with the turn (wait.c); 2: a notified it took but did not
     * act on goes on too. (Bytes,
     * each its own: w's thread reads turns without c->mu while others set
     * go_now, recap under it; small, as a set's wait keeps a waiter in the
     * blocking call's stack frame.) */
    unsigned char turns, pass_now, go_now, recap, pass_wake;
    uint64_t check_at_us;     /* without the turn: its next re-check (monotonic us, 0: none) */
    long turn_group;
    /* registered with turns: its queue (wait.c: the waiters of its key and
     * turn group, the longest waiting first, who has the turn) and the one
     * after it there; tq NULL otherwise */
    distlock__turn_queue *tq;
    distlock__waiter *turn_next;
    distlock__sleeper sl;     /* the call's sleeper (cancel.c), started by the caller */
};
/* c->mu not held: w's last attempt saw the holder's lease end in
 * holder_pttl ms (0: unknown); kept when w has the turn, for the others. */
void distlock__waiter_saw_holder(distlock_client *c, distlock__waiter *w, long holder_pttl);
/* c->mu not held; w registered with w->turns set. 1 when w has the turn (it
 * re-checks now). Else 0: *at, the caller's next re-check (its backoff's,
 * capped by its deadline), is capped at the end of the holder's lease as
 * the one with the turn last saw it (a waiter without the turn never
 * looked itself) and recorded as w's timer, which a shorter lease seen
 * later sets again (recap). Only w's own thread changes w->turns, so it
 * may look at it unlocked first and skip the call (a multi's waiters take
 * no turns). */
int distlock__waiter_turn_or_timer(distlock_client *c, distlock__waiter *w, uint64_t *at);
/* A blocking acquire's turn group (w->turn_group): a lock, a read lock, a
 * permit of P. */
static inline long distlock__turn_group(const distlock__acq_req *rq)
{
    return rq->kind == DISTLOCK__PERMIT ? 2 + rq->permits : rq->kind;
}
/* c->mu not held. 1 when a new blocking call for key (not fair, a wait
 * budget) joins this client's turns instead of sending its first attempt:
 * a waiter of the same turn group takes turns there (wait.c). */
int distlock__waiter_turn_to_join(distlock_client *c, const char *key, long turn_group);
/* c->mu not held: w takes turns no more (a writer noted among the key's
 * waiting writers must refresh its entry with its own attempts). */
void distlock__waiter_stop_turns(distlock_client *c, distlock__waiter *w);
/* c->mu not held, one lock for a sleeping waiter's wake: 1 if a release
 * notified w since the last call (looked at and reset only with notice),
 * or, w taking turns, a waiter that left asked it to look at once (its
 * pass_now) or the one with the turn saw a lease that ends before w's
 * timer (recap), reset. */
int distlock__waiter_take_wake(distlock_client *c, distlock__waiter *w, int notice);
/* Register / unregister a waiter for key (c->mu not held); w->sl must be
 * started. Registering waits (bounded) until the subscription is confirmed
 * so no release is missed; DISTLOCK_ECANCELED (w not registered) if the call
 * is cancelled meanwhile, DISTLOCK_ESYS if the subscriber cannot start. */
int distlock__waiter_add(distlock_client *c, distlock__waiter *w);
/* The same without waiting for the confirmation (a multi's operation):
 * DISTLOCK_OK once registered; distlock__waiter_settled() tells when the
 * subscription is confirmed, cannot be, or deadline_us passed (then w counts
 * as subscribed, as distlock__waiter_add() leaves it); w->sl is woken when
 * it is confirmed. *settled_at_add: whether it was settled when w was
 * registered (then nothing wakes w->sl for it). */
int distlock__waiter_add_start(distlock_client *c, distlock__waiter *w, int *settled_at_add);
int distlock__waiter_settled(distlock_client *c, distlock__waiter *w, uint64_t deadline_us);
void distlock__waiter_remove(distlock_client *c, distlock__waiter *w);
/* Keep `channel` subscribed while no waiter of it is registered (a multi's
 * key with acquires queued: the next one's waiter finds the subscription
 * confirmed instead of an UNSUBSCRIBE and a SUBSCRIBE per waiter). Taken
 * while a waiter of the channel is registered (the subscriber runs);
 * counted; -1 (nothing held) without memory or subscriber. */
int distlock__channel_hold(distlock_client *c, const char *channel);
void distlock__channel_unhold(distlock_client *c, const char *channel);
/* Fair waiters: w->named before an attempt; after it, record whether the
 * attempt found us at the head of the queue, unless a fair acquire named us
 * the head meanwhile (named moved): that news is newer than the attempt's. */
unsigned distlock__waiter_named(distlock_client *c, distlock__waiter *w);
void distlock__waiter_set_head(distlock_client *c, distlock__waiter *w, int head,
                               unsigned named_before);
/* Wait until deadline_us, or until notified if `notice` (w registered):
 * returns 1 if notified, 0 at the deadline, DISTLOCK_ECANCELED if the call
 * is cancelled (no detail set). */
int distlock__waiter_wait(distlock_client *c, distlock__waiter *w, uint64_t deadline_us,
                          int notice);
void distlock__subscriber_stop(distlock_client *c);
void distlock__subscriber_after_fork(distlock_client *c); /* c->mu held, in the child */

/* WAIT for replicas: what an acquire, extend or fence raise carries (the
 * client's DISTLOCK_OPT_WAIT_*; replicas 0: none). */
static inline void distlock__set_wait(const distlock_client *c, distlock__call *call)
{
    call->wait_replicas = (int)atomic_load(&c->wait_replicas);
    call->wait_ms = atomic_load(&c->wait_timeout_ms);
}

#endif
