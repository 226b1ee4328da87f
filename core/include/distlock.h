/*
 * distlock.h -- distributed locks on Redis: one algorithm for 1..N nodes.
 *
 * This is the only public header of libdistlock. Everything here is part of
 * the stable ABI.
 *
 * Conventions (they hold for every function unless its comment says otherwise):
 *  - Functions that can fail return an int status: DISTLOCK_OK (0),
 *    DISTLOCK_NOTACQUIRED (1, someone else holds the lock: not an error), or a
 *    negative distlock_status error. distlock_strerror() names the code and
 *    distlock_last_error() gives this thread's detail message for the last
 *    failing call.
 *  - Times are milliseconds, measured with the monotonic clock.
 *  - Output parameters come last, with no exception
 *    (distlock_client_new(servers, &c), distlock_acquire(..., &lock)).
 *  - Strings passed in are copied; the library never keeps caller pointers.
 *    Strings returned are owned by the object they come from and stay valid
 *    until that object is freed.
 *  - "Blocks" means the call performs network I/O. A network round trip to N
 *    nodes is done in parallel from the calling thread and is bounded by the
 *    client's per-node timeouts (DISTLOCK_OPT_CONNECT_TIMEOUT_MS when a node
 *    must be (re)connected, else DISTLOCK_OPT_COMMAND_TIMEOUT_MS).
 *  - A distlock_client may be shared by any number of threads. A distlock_lock
 *    handle must not be used from two threads at the same time.
 *  - Every file descriptor the library opens (sockets, pipes, eventfds) is
 *    close-on-exec: none leaks into a program the caller executes.
 *  - After fork(), the child never reads or writes sockets opened by its
 *    parent: it opens its own on first use. Locks acquired by the parent can
 *    be inspected but not released or extended through their handles in the
 *    child (use distlock_release_token() deliberately if that is intended).
 */
#ifndef DISTLOCK_H
#define DISTLOCK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built for Linux (poll() and eventfd; a multi's one
 * descriptor is an epoll descriptor; fork handling, getrandom): symbols
 * are exported by visibility. */
#if defined(__GNUC__) && __GNUC__ >= 4
#  define DISTLOCK_API __attribute__((visibility("default")))
#else
#  define DISTLOCK_API
#endif

/* ---------------------------------------------------------------- version */
#define DISTLOCK_VERSION_MAJOR 0
#define DISTLOCK_VERSION_MINOR 1
#define DISTLOCK_VERSION_PATCH 0
#define DISTLOCK_VERSION_NUMBER \
    (DISTLOCK_VERSION_MAJOR * 10000 + DISTLOCK_VERSION_MINOR * 100 + DISTLOCK_VERSION_PATCH)
#define DISTLOCK_VERSION_STRING "0.1.0"

/* The version of the library actually loaded (compare with the macros). */
DISTLOCK_API unsigned distlock_version_number(void);
DISTLOCK_API const char *distlock_version_string(void);

/* ---------------------------------------------------------------- status */
/* Values are pinned: they never change meaning once released. Each status
 * has one meaning, whatever the call:
 *  - a node that cannot be reached (refused, reset, name not resolved, or no
 *    reply within its timeout) makes a one-node client return ECONN; with
 *    N > 1 nodes it is one of the nodes that did not answer, and the call
 *    fails with ENOQUORUM only when fewer than a quorum answered;
 *  - a lock held by another owner is NOTACQUIRED (after the wait budget,
 *    if one was given, ran out) -- never an error status;
 *  - ETIMEDOUT is only "the call outlived its lease". */
typedef enum {
    DISTLOCK_OK = 0,
    DISTLOCK_NOTACQUIRED = 1,   /* held by another owner (not an error) */
    DISTLOCK_EINVAL = -1,       /* invalid argument or configuration (detail names it) */
    DISTLOCK_ENOMEM = -2,       /* out of memory; the client stays usable */
    DISTLOCK_ECONN = -3,        /* the node could not be reached or did not reply in time (N = 1) */
    DISTLOCK_ETIMEDOUT = -4,    /* a quorum granted or renewed, but after the ttl was used
                                   up: nothing is held (an acquire is undone) */
    DISTLOCK_ENOQUORUM = -5,    /* N > 1: fewer than a quorum of nodes answered */
    DISTLOCK_ENOTOWNER = -6,    /* not the owner: lock expired, lost or released */
    DISTLOCK_EPROTO = -7,       /* a node refused or answered unexpectedly (authentication,
                                   ACL, wrong type of a side key, malformed reply) */
    DISTLOCK_ECLOSED = -8,      /* use after close / not usable in this process */
    DISTLOCK_ECANCELED = -9,    /* cancelled (distlock_client_cancel()); nothing is held */
    DISTLOCK_ESYS = -10,        /* the system refused a resource: random source, thread,
                                   file descriptor (detail names it) */
    /* The lowest status this version of the header knows: bindings size
     * their tables with it. A later version may add lower ones. */
    DISTLOCK_STATUS_MIN = DISTLOCK_ESYS
} distlock_status;

/* Static text for a status code; never NULL, never to be freed. */
DISTLOCK_API const char *distlock_strerror(int status);

/* Detail message of the last call that failed in the calling thread, e.g.
 * "redis://10.0.0.5:6379: Connection refused". Never NULL (empty if none).
 * Valid until this thread's next distlock call. Don't free. */
DISTLOCK_API const char *distlock_last_error(void);

/*
 * `servers` (a server list, as given to distlock_client_new(), valid or not)
 * as messages show it: the library's one masking rule (docs/errors.md):
 * everything between "scheme://" and an entry's last '@' (user included)
 * and the value of every query option but the non-secret ones become
 * "***"; the rest is copied as given. For a front end that echoes a server
 * list (a refused --servers, an INI setting in phpinfo()). Writes a
 * NUL-terminated text into out (the caller's, `size` bytes, size >= 16),
 * cut to fit (a cut never shows a piece of a password). Returns DISTLOCK_OK;
 * DISTLOCK_EINVAL for NULL servers or out, or size < 16 (out untouched);
 * DISTLOCK_ENOMEM (out is then "(not shown)"). Thread-safe; does not block,
 * does no I/O, keeps no reference to either buffer.
 */
DISTLOCK_API int distlock_servers_mask(const char *servers, char *out, size_t size);

/* ---------------------------------------------------------------- client */
typedef struct distlock_client distlock_client;
typedef struct distlock_lock distlock_lock;

/*
 * Create a client for `servers`: one URI or a list of N independent nodes
 * (N >= 1, at most 64; quorum N/2+1), separated by whitespace or by a comma
 * before the next "scheme://" (other commas separate the hosts of one
 * Sentinel or Cluster URI):
 *     redis://[user[:password]@]host[:port][/db]
 *     rediss://[user[:password]@]host[:port][/db][?tls options]   (TLS)
 *     unix:///path/to.sock[?db=N]
 *     redis-sentinel://[user[:password]@]host[:port][,host[:port]...]/MASTER[/db][?options]
 *     rediss-sentinel://...   (TLS to the sentinels and to the master)
 *     redis-cluster://[user[:password]@]host[:port][,host[:port]...][?options]
 *     rediss-cluster://...    (a Redis Cluster, given by its seed nodes)
 * Query options: tls_ca_file, tls_ca_dir, tls_cert, tls_key,
 * tls_server_name, tls_insecure=0|1 (TLS schemes); sentinel_user,
 * sentinel_password (Sentinel schemes); db (unix://). Values are %-decoded.
 * Duplicate nodes are rejected (also 127.1 vs 127.0.0.1); names that prove
 * to be one server when connected make operations fail with DISTLOCK_EINVAL.
 * Messages never contain a password. Does not connect (connections are made
 * lazily and re-made after failures). *out receives the client, which the
 * caller frees with distlock_client_free(). Thread-safe; does not block.
 */
DISTLOCK_API int distlock_client_new(const char *servers, distlock_client **out);

/* Release every lock still held through this client (best effort, bounded by
 * the timeouts; not restored handles, see distlock_lock_restore()), stop its
 * background thread, close its sockets and free it.
 * NULL is a no-op. No other thread may use the client during or after this. */
DISTLOCK_API void distlock_client_free(distlock_client *c);

/* As distlock_client_free(), with every release left out: each lock still
 * held through the client is abandoned (distlock_lock_abandon()): nothing
 * is sent, the renewal stops and the keys keep their tokens until their TTLs
 * run out, as if the holder had died. For runtimes whose garbage collector
 * drops a client together with locks it must not release behind their
 * holder's back (Python's cyclic collector, interpreter exit). Handles left
 * report DISTLOCK_ECLOSED and are freed with distlock_lock_free(), which then
 * sends nothing. NULL is a no-op. No other thread may use the client during
 * or after this. */
DISTLOCK_API void distlock_client_abandon(distlock_client *c);

/* ---------------------------------------------------------------- options
 * Every option is one row of the library's option table (name, id, type,
 * range, default, summary; distlock_option_by_name() and friends below).
 * The table is the one place the rules live: distlock_client_set() and
 * distlock_client_set_str() check against it, and front ends look options up
 * in it by name (PHP's options array keys, Python's keyword arguments, the
 * CLI's --option NAME=VALUE) instead of keeping their own list or ranges.
 *
 * Ids are grouped by type: an id below DISTLOCK_OPT_STRING_FIRST is an
 * integer option (distlock_client_set), an id >= DISTLOCK_OPT_STRING_FIRST
 * (100) is a string option (distlock_client_set_str). New options take the
 * next free id of their group.
 *
 * WAIT for replicas (DISTLOCK_OPT_WAIT_*):
 * DISTLOCK_OPT_WAIT_REPLICAS = n > 0: after every acquire, extend and fence
 * raise on a node, `WAIT n t` is sent pipelined right behind it on the same
 * connection (no extra round trip), t = DISTLOCK_OPT_WAIT_TIMEOUT_MS. A node
 * counts toward the quorum only if at least n of its replicas acknowledged
 * within t; otherwise it counts as a failed node (fail-closed): an attempt
 * left without a quorum is undone on every node it reached, and the detail
 * says "<node>: 0 of 1 replicas acknowledged within 100 ms" (an attempt that
 * still won keeps that node's key until its release, which covers it). On
 * one node the acquire then fails with DISTLOCK_ENOQUORUM.
 * Releases send no WAIT. The watchdog's renewals are extends: a node whose
 * replicas did not acknowledge a renewal does not count for it. Each node's
 * budget becomes its timeout + t. WAIT does not make Redis strongly
 * consistent: see docs/wait.md.
 *
 * TLS (rediss:// nodes; see docs/tls.md): the TLS options are
 * client-wide defaults; a node's URI query option (tls_ca_file=...,
 * tls_insecure=0|1, ...) wins for that node. Changing one re-makes the
 * connections (when next used) and their TLS contexts. A bad file makes
 * the node's operations fail with DISTLOCK_EINVAL naming the node, the
 * file and the reason; a failed handshake (certificate not trusted,
 * expired, name mismatch, a server not speaking TLS) fails that node
 * with DISTLOCK_ECONN "<node>: TLS: <reason>".
 *
 * Owner metadata (DISTLOCK_OPT_OWNER_*; see "distlock_admin_owner" below).
 */
#define DISTLOCK_OPT_STRING_FIRST 100  /* an id >= 100 is a string option */
/* Defaults and ranges are not repeated here: they are the option table's
 * (distlock_option_by_id(); docs/reference/distlock_option.md is generated
 * from it). */
typedef enum {
    /* -- integer options (ids 1..99): distlock_client_set -- */
    DISTLOCK_OPT_CONNECT_TIMEOUT_MS = 1, /* connect + first reply, per node */
    DISTLOCK_OPT_COMMAND_TIMEOUT_MS = 2, /* one node's reply */
    DISTLOCK_OPT_DRIFT_PPM = 3,          /* drift = ttl*ppm/1e6 + min */
    DISTLOCK_OPT_DRIFT_MIN_MS = 4,       /* the drift's fixed part */
    DISTLOCK_OPT_RETRY_MIN_MS = 5,       /* first backoff step while waiting */
    DISTLOCK_OPT_RETRY_MAX_MS = 6,       /* backoff cap = re-check interval */
    DISTLOCK_OPT_TLS_VERIFY = 7,         /* 1: verify the server's certificate
                                          * chain and name. 0: DO NOT verify (anyone on
                                          * the path can impersonate the node); each TLS
                                          * context built so writes one warning line to
                                          * stderr. Same as tls_insecure=1 in a URI. */
    DISTLOCK_OPT_WAIT_REPLICAS = 8,      /* replicas to wait for; 0: off */
    DISTLOCK_OPT_WAIT_TIMEOUT_MS = 9,    /* how long to wait for them */
    DISTLOCK_OPT_STATS = 10,             /* 1: keep distlock_client_stats()'s
                                          * counters; 0: stop counting (they keep
                                          * their values) */
    DISTLOCK_OPT_OWNER_INFO = 11,        /* 1: every acquire through
                                          * this client also stores who holds the
                                          * lock in its side key {key}:owner */
    DISTLOCK_OPT_MULTI_RUNS = 12,        /* per distlock_multi: operations with a
                                          * round on the wire at once, each on its
                                          * own connection set (one connection per
                                          * node), so a multi opens at most this many
                                          * connections per node; the others wait
                                          * their turn (see "non-blocking" below) */
    /* -- string options (ids 100..199): distlock_client_set_str; NULL or ""
     *    unsets (the default) -- */
    DISTLOCK_OPT_USERNAME = 100,         /* ACL user for every node */
    DISTLOCK_OPT_PASSWORD = 101,         /* password for every node */
    DISTLOCK_OPT_TLS_CA_FILE = 102,      /* PEM file of trusted CAs (default: the
                                          * system store) */
    DISTLOCK_OPT_TLS_CA_DIR = 103,       /* hashed directory of trusted CAs */
    DISTLOCK_OPT_TLS_CERT = 104,         /* client certificate chain, PEM (mutual TLS) */
    DISTLOCK_OPT_TLS_KEY = 105,          /* its private key, PEM (default: in TLS_CERT) */
    DISTLOCK_OPT_TLS_SERVER_NAME = 106,  /* name sent as SNI and checked against the
                                          * certificate (default: the URI's host; an IP
                                          * address is checked against the IP entries) */
    DISTLOCK_OPT_OWNER_LABEL = 107       /* a label stored with the owner (at most
                                          * DISTLOCK_OWNER_LABEL_MAX bytes) */
} distlock_option;

typedef enum { DISTLOCK_OPTION_LONG = 1, DISTLOCK_OPTION_STRING = 2 } distlock_option_type;

/* One row of the option table. Owned by the library, static (never freed,
 * never changes); later versions may add fields at the end only. */
typedef struct distlock_option_info {
    const char *name;          /* "connect_timeout_ms": lower case, underscores; the
                                * spelling every front end uses */
    distlock_option id;
    distlock_option_type type; /* LONG iff id < DISTLOCK_OPT_STRING_FIRST */
    long min, max;             /* LONG: accepted range (inclusive); STRING: 0 and the
                                * longest value accepted, in bytes */
    long default_value;        /* LONG: the default; STRING: 0 (default is unset/NULL) */
    const char *summary;       /* one line, for --help and docs */
} distlock_option_info;

/* The option called `name` ("connect_timeout_ms"). NULL if there is none,
 * with a detail naming it (and the closest known name, if one is close).
 * Thread-safe; does not block. */
DISTLOCK_API const distlock_option_info *distlock_option_by_name(const char *name);
/* The option with id `id`. NULL if there is none, with a detail naming it. */
DISTLOCK_API const distlock_option_info *distlock_option_by_id(distlock_option id);
/* The i-th row of the table (0, 1, ...: integer options first, by id, then
 * string options, by id); NULL after the last. Sets no detail. */
DISTLOCK_API const distlock_option_info *distlock_option_at(size_t i);

/* Set an integer / string option. Applies to operations started afterwards.
 * Checked against the option table: an unknown id, an integer out of the
 * row's min..max, a string longer than its max, and a string option given
 * to the integer setter give DISTLOCK_EINVAL with a detail naming the option
 * ("option \"wait_replicas\": value 65 out of range 0..64").
 * distlock_client_set_str() also takes an integer option, as its value in
 * decimal ("500"; the front ends pass configuration text through as it
 * comes), and refuses text that is not exactly one integer ("500ms", "").
 * Thread-safe. */
DISTLOCK_API int distlock_client_set(distlock_client *c, distlock_option opt, long value);
DISTLOCK_API int distlock_client_set_str(distlock_client *c, distlock_option opt,
                                         const char *value);

/* Number of nodes and the quorum. */
DISTLOCK_API int distlock_client_node_count(const distlock_client *c);
DISTLOCK_API int distlock_client_quorum(const distlock_client *c);

/* ---------------------------------------------------------------- locks */
#define DISTLOCK_KEY_MAX 1024          /* bytes, excluding the NUL */
#define DISTLOCK_TOKEN_MAX 256         /* bytes of a caller-supplied token */
#define DISTLOCK_TTL_MAX 2147483647L   /* ms (about 24.8 days) */
#define DISTLOCK_WAIT_FOREVER (-1L)

/* The one TTL rule: a ttl is milliseconds, 1..DISTLOCK_TTL_MAX (acquire and
 * extend also refuse one not above the clock-drift allowance). Front ends
 * that take seconds (PHP, Python, the CLI) convert with this function:
 * rounded UP to the next whole millisecond, so a lease is never shorter than
 * asked (0.0001 s is 1 ms, 1.0005 s is 1001 ms; a product within a few ulps
 * of a whole millisecond is that millisecond: 0.07 s is 70 ms). Not a
 * finite number > 0, or more than DISTLOCK_TTL_MAX ms once rounded:
 * DISTLOCK_EINVAL with a detail naming the value. Does not block. */
DISTLOCK_API int distlock_ttl_from_seconds(double seconds, long *ttl_ms);

/* acquire flags; unknown bits give DISTLOCK_EINVAL */
#define DISTLOCK_FENCING    (1u << 0)  /* return a fencing token (distlock_lock_fence) */
#define DISTLOCK_AUTO_RENEW (1u << 1)  /* background renewal at ttl/3 until release */
#define DISTLOCK_REENTRANT  (1u << 2)  /* same owner re-acquiring gets a counted handle */
#define DISTLOCK_FAIR       (1u << 3)  /* waiters are served in arrival order */
/* acquire flag: a read lock (distlock_acquire / distlock_acquire_with): it
 * shares `key` with other readers and excludes writers (a plain acquire of
 * the same key). Not with DISTLOCK_FENCING, DISTLOCK_FAIR, DISTLOCK_REENTRANT
 * (DISTLOCK_EINVAL). See docs/shared-locks.md. */
#define DISTLOCK_SHARED     (1u << 4)

#define DISTLOCK_PERMITS_MAX 1000000L   /* permits of a semaphore: 1..this */

/*
 * Acquire `key` for `ttl_ms` (1..DISTLOCK_TTL_MAX) with a fresh 128-bit token.
 * wait_ms = 0 tries once; > 0 waits up to that long; DISTLOCK_WAIT_FOREVER
 * waits without limit. Waiting never busy-polls: a release made by distlock
 * wakes waiters at once, and they re-check with jittered backoff (at most
 * DISTLOCK_OPT_RETRY_MAX_MS apart) for locks that simply expire. Waiting
 * calls of one client for one key (not DISTLOCK_FAIR) take turns: only the
 * longest-waiting one of each kind re-checks; the next has the turn when
 * it leaves. A call arriving while such a waiter of its kind waits joins
 * the queue: no first attempt, it looks at its turn or tries once at its
 * deadline (wait_ms 0 is never held back).
 * Returns DISTLOCK_OK and *out (free with distlock_lock_free()), or
 * DISTLOCK_NOTACQUIRED when still held by another owner once the wait budget
 * is spent (*out = NULL), or an error. Within a wait budget, an attempt
 * granted only after its ttl was used up (undone) is tried once more before
 * DISTLOCK_ETIMEDOUT is returned; any other error of an attempt (no quorum
 * could answer: DISTLOCK_ECONN, _ENOQUORUM, _EPROTO...) ends the wait with it,
 * nothing held, as redis-py's and symfony/lock's waits raise. Blocks;
 * thread-safe.
 * A wait can be interrupted: see distlock_client_cancel() (DISTLOCK_ECANCELED),
 * and distlock_acquire_with() for a cancel of one call.
 */
DISTLOCK_API int distlock_acquire(distlock_client *c, const char *key, long ttl_ms,
                                  long wait_ms, unsigned flags, distlock_lock **out);

/* A cancel for chosen calls (distlock_acquire_with()'s args->cancel): firing
 * it ends every call that carries it, and only those. Made with
 * distlock_cancel_new() (DISTLOCK_OK and *out, DISTLOCK_ENOMEM or
 * DISTLOCK_ESYS when no eventfd can be made; does not block), freed with
 * distlock_cancel_free() (NULL: no-op), which must not run while a call that
 * carries it is under way or may still start. A cancel belongs to the
 * process that made it (not shared across fork()).
 * distlock_cancel_fire(): async-signal-safe (an atomic exchange and at most
 * one write(); errno is preserved and this thread's detail message is left
 * alone), thread-safe, idempotent and sticky: once fired it stays fired, so
 * a call that starts afterwards returns DISTLOCK_ECANCELED at once. Returns
 * DISTLOCK_OK, or DISTLOCK_EINVAL for NULL (no detail message). */
typedef struct distlock_cancel distlock_cancel;
DISTLOCK_API int distlock_cancel_new(distlock_cancel **out);
DISTLOCK_API int distlock_cancel_fire(distlock_cancel *cancel);
DISTLOCK_API void distlock_cancel_free(distlock_cancel *cancel);

/* Optional arguments of distlock_acquire_with(). The caller sets `size` to
 * sizeof(distlock_acquire_args) and zeroes what it does not use; a size
 * smaller than the first layout (size, owner, cancel) gives DISTLOCK_EINVAL.
 * Fields are added only at the end, and only the fields that fit in `size`
 * are read: a caller built against a header without `token` passes none. */
typedef struct distlock_acquire_args {
    size_t size;              /* sizeof(distlock_acquire_args) */
    const char *owner;        /* DISTLOCK_REENTRANT owner id, 1..256 bytes; NULL: the
                               * calling thread. Needs DISTLOCK_REENTRANT. */
    distlock_cancel *cancel;  /* NULL: none; fired: this call returns DISTLOCK_ECANCELED */
    const char *token;        /* the lock's token, 1..DISTLOCK_TOKEN_MAX bytes,
                               * NUL-terminated (checked as distlock_acquire_token()'s);
                               * NULL: a fresh 128-bit token. The acquire is strict
                               * (SET NX semantics): a key that already holds this very
                               * token is held by someone (DISTLOCK_NOTACQUIRED, or
                               * waited for), as redis-py and Laravel do; also when a
                               * resend after a lost reply finds it (the call cannot
                               * tell its own first send from another holder of the
                               * token), and a failed attempt undoes only the nodes
                               * whose grant it saw: after a lost reply the call may
                               * fail while the key holds this token until its TTL
                               * (distlock_release_token() deletes it). For a plain
                               * lock, with or without DISTLOCK_FENCING,
                               * DISTLOCK_AUTO_RENEW, DISTLOCK_FAIR; a waiting call keeps
                               * it for every attempt and is woken by releases as with a
                               * fresh token. Refused (DISTLOCK_EINVAL, the detail says
                               * why) with DISTLOCK_SHARED, DISTLOCK_REENTRANT, for
                               * semaphores and distlock_acquire_many(). */
} distlock_acquire_args;

/* As distlock_acquire(), with args (NULL: none, as distlock_acquire()).
 * args->owner, DISTLOCK_REENTRANT: when the owner already holds key, the
 * lease is extended to ttl_ms on a quorum (one round trip) and a counted
 * handle of the same ownership returned; DISTLOCK_ENOTOWNER (and the lock
 * marked lost) if the lease is no longer ours; without a verdict from the
 * servers (DISTLOCK_ENOQUORUM, DISTLOCK_ECONN: a node that holds the lease
 * is down and too few others confirm it) no handle, and the ownership is
 * kept as it was (not marked lost): retry. The re-acquire may add
 * DISTLOCK_AUTO_RENEW, not DISTLOCK_FENCING (DISTLOCK_EINVAL).
 * args->cancel: with the guarantees of distlock_client_cancel(), for this
 * call alone: when it is fired, the call returns DISTLOCK_ECANCELED promptly
 * with nothing held (an attempt that won meanwhile is released, a
 * DISTLOCK_FAIR waiter leaves the queue). A round trip already on the wire
 * ends first; a request still waiting for its connection (a name or
 * Sentinel lookup, a connect, a handshake) is not sent. Fired before the call starts: DISTLOCK_ECANCELED at once,
 * nothing sent, also for a try-once call (wait_ms 0); fired while a try-once
 * attempt is on the wire: DISTLOCK_ECANCELED once it is back (a lock it won
 * is released). Other calls of the client, with another cancel or none, are
 * not woken. */
DISTLOCK_API int distlock_acquire_with(distlock_client *c, const char *key, long ttl_ms,
                                       long wait_ms, unsigned flags,
                                       const distlock_acquire_args *args, distlock_lock **out);

/* One permit of the semaphore `key` with `permits` permits (1..DISTLOCK_PERMITS_MAX):
 * granted while fewer than `permits` unexpired permits are held. Each permit
 * is a lease like a lock (ttl_ms, wait_ms, AUTO_RENEW, release, extend,
 * lost). flags: DISTLOCK_AUTO_RENEW only (others: DISTLOCK_EINVAL). args as
 * distlock_acquire_with() (cancel; owner is refused). DISTLOCK_NOTACQUIRED when
 * all permits stay taken. On N nodes a permit needs more than N*P/(P+1) nodes
 * (docs/semaphores.md). Blocks; thread-safe. */
DISTLOCK_API int distlock_semaphore_acquire(distlock_client *c, const char *key, long permits,
                                            long ttl_ms, long wait_ms, unsigned flags,
                                            const distlock_acquire_args *args,
                                            distlock_lock **out);

/* Release (compare-and-delete on every node). DISTLOCK_OK when it was still
 * held on a quorum; DISTLOCK_ENOTOWNER when it had expired, was lost or was
 * already released (another owner's key is never deleted; a key found not
 * ours marks the handle lost: distlock_lock_lost()). The handle stays
 * valid until distlock_lock_free(). For a reentrant handle, only the last
 * release of an owner reaches Redis; a non-owner releasing gets ENOTOWNER.
 * An ownership one of whose handles was abandoned (distlock_lock_abandon())
 * is never deleted by its other handles: their last release returns
 * DISTLOCK_OK, stops the renewal and sends nothing, so the key keeps the
 * token the abandoned handle was promised until its TTL runs out.
 * A release that ends without a verdict from the servers (DISTLOCK_ECONN,
 * ENOQUORUM, EPROTO...: the key may still hold the token) may be retried
 * with the same handle, which sends it again; the renewal stopped at the
 * first try, so until a retry succeeds the key lasts at most its TTL.
 * distlock_lock_free() retries such a release once (not for a restored
 * handle: see distlock_lock_restore()). A restored handle's release whose
 * reply was lost and whose resend finds the key gone returns
 * DISTLOCK_ENOTOWNER (and marks it lost): retry-safe but not provable, as
 * nothing proves the key gone was its token. Blocks. */
DISTLOCK_API int distlock_release(distlock_lock *lock);

/* Release if still held (errors ignored), then free. NULL is a no-op. A
 * restored handle (distlock_lock_restore()) is not released: nothing is sent,
 * as distlock_lock_abandon(). */
DISTLOCK_API void distlock_lock_free(distlock_lock *lock);

/* Free the handle WITHOUT releasing the lock: nothing is sent, the renewal
 * (DISTLOCK_AUTO_RENEW) stops, and the key keeps this token on the servers
 * until its TTL runs out, as if the holder had died. For runtimes that drop a
 * handle nobody can use any more but must not release behind its holder's
 * back (a garbage-collected Python Lock). A reentrant handle drops only its
 * own count: the ownership is renewed while another handle still holds it.
 * NULL is a no-op. No network I/O; may wait for a lost callback of this
 * handle under way (as distlock_lock_free()). Thread-safe for distinct
 * handles. The ownership is marked abandoned: no handle of it deletes the
 * key any more (see distlock_release()). A reentrant acquire of the same
 * owner whose extend was on its way when the last handle was abandoned
 * takes the ownership back (valid, renewed with DISTLOCK_AUTO_RENEW; still
 * marked abandoned); one racing the last distlock_release() acquires afresh
 * (the released key is deleted meanwhile). */
DISTLOCK_API void distlock_lock_abandon(distlock_lock *lock);

/* A handle for an ownership taken elsewhere: `token` holding `key` (another
 * process or request, distlock_acquire_token(), a Laravel owner string,
 * args->token). No network I/O: nothing is checked on the servers.
 * distlock_release() compare-and-deletes that token (DISTLOCK_OK when it held
 * the key on a quorum, DISTLOCK_ENOTOWNER when not: another owner's key is
 * never deleted); it is sent even though the handle's validity is 0, and
 * also when another handle of this client with the same token was abandoned
 * (restoring is the caller's explicit claim to the token).
 * distlock_extend(ttl) resets the TTL where the token still holds the key
 * (then the validity is fresh); distlock_lock_validity_ms() is 0 until an
 * extend succeeds; distlock_lock_lost() is 0 until a release or an extend
 * finds it not ours; distlock_lock_fence() -1; no renewal. It is never
 * released implicitly: distlock_lock_free() and distlock_client_free() send
 * nothing for it (as distlock_lock_abandon()), since its token may be another
 * process's lock still in use; only an explicit distlock_release() deletes.
 * A release whose reply was lost and whose resend finds the key gone returns
 * DISTLOCK_ENOTOWNER and marks the handle lost: retry-safe but not provable
 * (the handle acquired nothing, so nothing proves the key gone was ours; a
 * key another owner took meanwhile is never deleted). Thread-safe; does not
 * block. DISTLOCK_EINVAL for a NULL client or out, a bad key or token (the
 * checks of distlock_acquire_token()); DISTLOCK_ENOMEM. */
DISTLOCK_API int distlock_lock_restore(distlock_client *c, const char *key, const char *token,
                                       distlock_lock **out);

/* Reset the lock's TTL to ttl_ms on every node where it is still ours
 * (compare-and-PEXPIRE). Needs a quorum; on success the validity is fresh.
 * DISTLOCK_ENOTOWNER if it was lost. Blocks. */
DISTLOCK_API int distlock_extend(distlock_lock *lock, long ttl_ms);

/* Milliseconds of validity left (0 if released, lost or expired). */
DISTLOCK_API long distlock_lock_validity_ms(const distlock_lock *lock);
DISTLOCK_API const char *distlock_lock_key(const distlock_lock *lock);
DISTLOCK_API const char *distlock_lock_token(const distlock_lock *lock);

/* Fencing token of this ownership (acquired with DISTLOCK_FENCING), else -1.
 * Strictly greater than that of every earlier owner of the key that got one
 * (see docs/guarantees.md "Fencing tokens" for the exact guarantee). */
DISTLOCK_API int64_t distlock_lock_fence(const distlock_lock *lock);

#define DISTLOCK_KEYS_MAX 256           /* keys of distlock_acquire_many(): 1..this */

/* All of keys[0..nkeys-1] (1..DISTLOCK_KEYS_MAX distinct keys) or none, as
 * one lease: one token, one ttl; release, extend and renewal cover every
 * key; lost when any key is lost. flags: DISTLOCK_FENCING (one fence per key,
 * distlock_lock_fence_at()), DISTLOCK_AUTO_RENEW (others: DISTLOCK_EINVAL).
 * DISTLOCK_NOTACQUIRED when some key stays held by another owner (the detail
 * names it); nothing is held then. Blocks; thread-safe. */
DISTLOCK_API int distlock_acquire_many(distlock_client *c, const char *const *keys, size_t nkeys,
                                       long ttl_ms, long wait_ms, unsigned flags,
                                       const distlock_acquire_args *args, distlock_lock **out);

/* Keys of a lock: 1 for a lock, a read lock or a permit; nkeys for
 * distlock_acquire_many(). key_at/fence_at: NULL / -1 for i out of range. */
DISTLOCK_API size_t distlock_lock_key_count(const distlock_lock *lock);
DISTLOCK_API const char *distlock_lock_key_at(const distlock_lock *lock, size_t i);
DISTLOCK_API int64_t distlock_lock_fence_at(const distlock_lock *lock, size_t i);

/* 1 if the lock was found lost (by auto-renewal, extend or release), else 0. When it
 * returns 1 it also sets this thread's distlock_last_error() to why, in
 * words a front end can show as they are: the servers said the key no
 * longer holds our token (it expired, was deleted or taken over), or its
 * validity ended with no renewal confirmed (servers not replying in time:
 * it may still be held there until its TTL runs out, but nothing vouches
 * for it). Does not block, takes no lock. */
DISTLOCK_API int distlock_lock_lost(const distlock_lock *lock);

/* The lost callback, and its contract (tests/test_lost_callback.c):
 *  - When: once per lock, when the client's auto-renewal finds it lost (the
 *    key expired, was deleted or now holds another token, so that no quorum
 *    can renew it), or when its validity ends before a renewal is confirmed
 *    (even if the renewal's replies have not come yet). A loss found by distlock_extend() or distlock_release()
 *    is returned to that caller (DISTLOCK_ENOTOWNER) and shown by
 *    distlock_lock_lost() and the lost fd, but calls no callback.
 *  - Where: on one of the client's background threads (the renewal thread,
 *    or its lease clock for a validity that ended unconfirmed), never on the
 *    caller's; they have every signal blocked. By the time fn runs,
 *    distlock_lock_lost(lock) is 1, distlock_lock_validity_ms(lock) is 0
 *    and the lost fd (distlock_client_lost_fd) has been made readable.
 *  - What it may call: any function of the library on this lock and on the
 *    client (release, extend, another acquire, distlock_lock_free() of this
 *    very handle, which then must not be used again), except
 *    distlock_client_free(). It runs with no library lock held, but the
 *    renewals of the client's other locks wait for it: return quickly, and
 *    leave long work (or a wait for a lock) to another thread.
 *  - Freeing the handle elsewhere unregisters the callback and waits for a
 *    call under way, so fn never receives a freed handle. fn NULL
 *    unregisters. Registering is thread-safe and does not block. */
typedef void (*distlock_lost_fn)(distlock_lock *lock, void *arg);
DISTLOCK_API int distlock_lock_on_lost(distlock_lock *lock, distlock_lost_fn fn, void *arg);

/* A file descriptor that becomes readable when any lock of this client is
 * found lost, for event loops (poll for POLLIN, then read 8 bytes to reset).
 * Owned by the client. Returns -1 with DISTLOCK_ENOMEM detail on failure. */
DISTLOCK_API int distlock_client_lost_fd(distlock_client *c);

/* ---------------------------------------------------------- cancellation */
/*
 * Interrupt the waiting calls of c that are under way: every
 * distlock_acquire() / distlock_acquire_with() of c that is waiting for a
 * lock (wait_ms != 0, first try refused) when this is called, in any thread,
 * returns DISTLOCK_ECANCELED promptly, with nothing held: an attempt that won
 * the lock meanwhile is released, a DISTLOCK_FAIR waiter leaves the queue.
 * Calls started afterwards are not affected. A round trip already on the wire
 * ends first (bounded by the node timeouts); a request still waiting for its
 * connection is not sent; calls that do not wait (wait_ms
 * 0, release, extend...) are not interrupted.
 * Async-signal-safe: may be called from a signal handler (an atomic add and a
 * write(); errno is preserved and this thread's detail message is left
 * alone). Thread-safe. Returns DISTLOCK_OK, or DISTLOCK_EINVAL for a NULL
 * client (with no detail message). Not during or after distlock_client_free().
 * To cancel one call and not the others: distlock_acquire_with()'s cancel.
 */
DISTLOCK_API int distlock_client_cancel(distlock_client *c);

/*
 * For runtimes whose signal handlers only set a flag (Python): fn is called in
 * the thread of a waiting acquire of c before each of its sleeps and when a
 * signal interrupts one; a nonzero return cancels that call (as above:
 * DISTLOCK_ECANCELED, nothing held), 0 lets it wait on. fn runs with the
 * client's internal lock not held and with the thread's signals blocked (all
 * but SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT): the sleep unblocks
 * them atomically (ppoll), so a signal that arrives just before it still
 * interrupts it. fn must not block for long; it may call
 * distlock_client_cancel(). fn NULL removes the hook. Applies to sleeps that
 * start afterwards. Thread-safe.
 * The library's own threads block signals, so a signal sent to the process
 * is delivered to one of the caller's threads; it interrupts a waiting call
 * at once if it lands on that call's thread, else the call sees it at its
 * next re-check (at most DISTLOCK_OPT_RETRY_MAX_MS later).
 */
typedef int (*distlock_interrupt_fn)(void *arg);
DISTLOCK_API int distlock_client_on_interrupt(distlock_client *c, distlock_interrupt_fn fn,
                                              void *arg);

/* ------------------------------------------------------- non-blocking */
/*
 * Operations of one client driven from the caller's event loop, none of
 * which blocks (docs/non-blocking.md). A multi has ONE descriptor to watch
 * for reading (distlock_multi_fd) and a timeout (distlock_multi_timeout);
 * when either fires, distlock_multi_perform() advances every operation as
 * far as it can without waiting, and distlock_multi_done() hands out the
 * ones that finished, in the order they finished.
 *
 * An acquire of a multi follows the rules of the blocking call of the same
 * arguments (distlock_acquire_with(), distlock_semaphore_acquire()): the
 * same checks and statuses, the same waiting (woken by releases through the
 * client's subscriber thread, re-checks at the holder's TTL, the deadline,
 * DISTLOCK_FAIR queues, a writer's intent), the same cancel guarantees (a
 * lock won after a cancel is released; a fair waiter leaves the queue). The
 * lock it gives (distlock_op_take_lock) is an ordinary handle: the blocking
 * distlock_release() / distlock_extend() work on it, DISTLOCK_AUTO_RENEW
 * renews it on the client's renewal thread. DISTLOCK_REENTRANT is refused
 * (DISTLOCK_EINVAL) by a multi's acquire.
 *
 * Per key, the acquires of one multi wait their turn locally: one of them
 * at a time has an attempt on the wire or waits for a release; the others
 * wait in the order they were started, sending nothing, and the next goes
 * when the one before finishes (won, gave up, cancelled). A release through
 * the multi of a key its acquires wait for lets the next try at once. An
 * acquire that tries once (wait_ms 0) while another acquire of the multi
 * waits for the key fails at once (DISTLOCK_NOTACQUIRED): the key was held
 * at that one's last try. This local queue is for acquires without
 * DISTLOCK_FAIR: a fair acquire joins the servers' queue at once, as a
 * blocking fair waiter does, because that queue is the order across
 * processes (a turn taken locally would let a later waiter of another
 * process in ahead of it).
 *
 * Runs on the wire: each operation with a round on the wire uses a
 * connection set of the client (one connection per node) until the round
 * ends. A multi keeps at most DISTLOCK_OPT_MULTI_RUNS of them at once
 * (read when each round starts), so its connections per node stay within
 * it and the sets are reused; the other operations wait their turn, in
 * the order they asked: releases, extends and the clean-up of an acquire
 * that gave up before the attempts of acquires. An acquire waiting for its
 * turn keeps its deadline (DISTLOCK_NOTACQUIRED, "not tried within N ms")
 * and its cancels.
 *
 * Threads: a multi adds none (it uses the client's background threads). It
 * is used by one thread at a time (its operations too); the client may be
 * used by other threads meanwhile, and distlock_client_cancel() cancels
 * its waiting acquires as those of blocking calls. Free every multi of a
 * client before the client. Fork: a multi (and its operations) belongs to
 * the process that made it; in a forked child every call returns
 * DISTLOCK_EINVAL ("created in process N") and distlock_multi_free() frees
 * it without any I/O.
 */
typedef struct distlock_multi distlock_multi;
typedef struct distlock_op distlock_op;

/* A multi driving operations of c: DISTLOCK_OK and *out; DISTLOCK_EINVAL
 * (NULL c or out), DISTLOCK_ESYS (no epoll or eventfd descriptor),
 * DISTLOCK_ENOMEM. Does not block. */
DISTLOCK_API int distlock_multi_new(distlock_client *c, distlock_multi **out);

/* Free m (NULL: no-op). Running operations are cancelled and driven to
 * their end first, blocking meanwhile (a lock won after the cancel is
 * released, releases and extends on the wire end); then every operation of
 * m is freed, whether the caller freed it or not; a lock an acquire won and
 * nobody took is released (blocking). Handles already taken stay valid. */
DISTLOCK_API void distlock_multi_free(distlock_multi *m);

/* The one descriptor to watch for reading (an epoll descriptor): readable
 * when distlock_multi_perform() has something to do. Owned by m; -1 with
 * DISTLOCK_EINVAL for a NULL m or in a forked child. */
DISTLOCK_API int distlock_multi_fd(const distlock_multi *m);

/* Milliseconds until distlock_multi_perform() is due even if the
 * descriptor stays quiet (0: now), -1 if nothing is timed. */
DISTLOCK_API long distlock_multi_timeout(distlock_multi *m);

/* Advance every operation as far as it can go without waiting; never
 * blocks. Returns how many operations are still running (0: none), or a
 * negative status (DISTLOCK_EINVAL: NULL m, forked child). */
DISTLOCK_API int distlock_multi_perform(distlock_multi *m);

/* The next operation that finished (in the order they finished), or NULL.
 * Each finished operation is handed out once; it stays m's until
 * distlock_op_free(). */
DISTLOCK_API distlock_op *distlock_multi_done(distlock_multi *m);

/* Start an acquire, as distlock_acquire_with() (args: cancel and token;
 * owner and DISTLOCK_REENTRANT are refused). Returns DISTLOCK_OK with *out
 * the running operation; a bad argument returns its status at once (with
 * the detail, *out NULL), as the blocking call would, and nothing starts.
 * The strings and args are copied. Does not block. */
DISTLOCK_API int distlock_multi_acquire(distlock_multi *m, const char *key, long ttl_ms,
                                        long wait_ms, unsigned flags,
                                        const distlock_acquire_args *args, distlock_op **out);

/* Start a semaphore permit's acquire, as distlock_semaphore_acquire(). */
DISTLOCK_API int distlock_multi_semaphore_acquire(distlock_multi *m, const char *key,
                                                  long permits, long ttl_ms, long wait_ms,
                                                  unsigned flags,
                                                  const distlock_acquire_args *args,
                                                  distlock_op **out);

/* Start a release of l, as distlock_release() (its checks and statuses; l
 * stays the caller's, and must outlive the operation). A lock of
 * distlock_acquire_many() is refused (DISTLOCK_EINVAL). Not cancellable:
 * distlock_op_cancel() lets it finish. */
DISTLOCK_API int distlock_multi_release(distlock_multi *m, distlock_lock *l, distlock_op **out);

/* Start an extend of l to ttl_ms, as distlock_extend() (a renewal of l on
 * the wire is waited for, as there). Not cancellable, as a release. */
DISTLOCK_API int distlock_multi_extend(distlock_multi *m, distlock_lock *l, long ttl_ms,
                                       distlock_op **out);

/* Cancel an acquire: it ends DISTLOCK_ECANCELED at the next
 * distlock_multi_perform(), with nothing held (an attempt on the wire ends
 * first; a lock it won is released; a fair waiter leaves the queue). No
 * effect on a finished operation, a release or an extend. NULL: no-op.
 * The multi's thread only (use args->cancel from other threads). */
DISTLOCK_API void distlock_op_cancel(distlock_op *op);

/* 1 once op finished, else 0 (NULL: 0). */
DISTLOCK_API int distlock_op_done(const distlock_op *op);

/* Once finished: DISTLOCK_OK or the error, as the blocking call returns;
 * before: DISTLOCK_EINVAL. */
DISTLOCK_API int distlock_op_status(const distlock_op *op);

/* Once finished: its detail ("" if DISTLOCK_OK), as distlock_last_error()
 * after the blocking call; valid until distlock_op_free(). "" before. */
DISTLOCK_API const char *distlock_op_error(const distlock_op *op);

/* The handle a finished acquire won, once (the caller owns it then: free
 * it with distlock_lock_free()); NULL otherwise. */
DISTLOCK_API distlock_lock *distlock_op_take_lock(distlock_op *op);

/* A number unique among the operations of one multi (front ends key their
 * futures by it); 0 for NULL. */
DISTLOCK_API uint64_t distlock_op_id(const distlock_op *op);

/* Free op (NULL: no-op). A running operation is cancelled and freed when it
 * ends (it is then not handed out by distlock_multi_done()); a lock a
 * finished acquire won and nobody took is released (blocking). */
DISTLOCK_API void distlock_op_free(distlock_op *op);

/* ------------------------------------------------- token-carrying pair */
/* For callers that keep the token themselves (the PHP compatibility
 * functions, the CLI). token: 1..DISTLOCK_TOKEN_MAX bytes, NUL-terminated.
 * With DISTLOCK_STRICT the acquire fails even if the key already holds this
 * very token (plain SET NX semantics), also when that is found by a resend
 * after a lost reply (another client may use the same token: its own first
 * send cannot be told from that holder's key), and a failed attempt undoes
 * only the nodes whose grant it saw: after a lost reply it may fail with the
 * key holding the token until its TTL (distlock_release_token() deletes it).
 * Without it such an acquire refreshes the TTL and succeeds (idempotent
 * retry after a lost reply). Only
 * DISTLOCK_STRICT is accepted in flags. validity_ms may be NULL. Blocks. */
#define DISTLOCK_STRICT (1u << 8)
DISTLOCK_API int distlock_acquire_token(distlock_client *c, const char *key, long ttl_ms,
                                        const char *token, unsigned flags, long *validity_ms);
/* DISTLOCK_OK when `token` held the key on a quorum and it is now deleted,
 * DISTLOCK_ENOTOWNER when it did not hold it. Blocks. */
DISTLOCK_API int distlock_release_token(distlock_client *c, const char *key, const char *token);
DISTLOCK_API int distlock_extend_token(distlock_client *c, const char *key, const char *token,
                                       long ttl_ms, long *validity_ms);

/* Fill buf (at least 33 bytes) with a fresh 32-hex-character token. */
DISTLOCK_API int distlock_token_generate(char *buf, size_t size);

/* ------------------------------------------------------------- stats */
/* One entry of distlock_client_stats(): a Prometheus-style name with its
 * labels, e.g. "acquire_failed_total{status=\"ECONN\"}", and its value.
 * This layout is frozen; new metrics are new entries, never new fields. */
#define DISTLOCK_STAT_NAME_MAX 88
typedef struct distlock_stat {
    char name[DISTLOCK_STAT_NAME_MAX];
    uint64_t value;
} distlock_stat;

/*
 * The client's counters and histograms since it was created, in one call:
 * up to `cap` entries into out[], and the number of entries this client has
 * into *count (they depend only on the node count: size a buffer with
 * out = NULL, cap = 0, which returns DISTLOCK_OK). Returns DISTLOCK_EINVAL
 * when cap is too small (the first cap entries are filled, *count says how
 * many there are). Entries, in this order (see docs/observability.md):
 *   acquire_granted_total, acquire_refused_total (NOTACQUIRED),
 *   release_total, release_failed_total, extend_total, extend_failed_total,
 *   renewal_total, renewal_failed_total (watchdog, per lock), lost_total,
 *   acquire_failed_total{status="EINVAL"..."ESYS","other"},
 *   acquire_wait_us_{bucket{le="..."},sum,count}  every acquire call's duration,
 *   hold_us_{bucket{le="..."},sum,count}          handle acquire to its release,
 *   node_errors_total{node="i"}, node_timeouts_total{node="i"},
 *   node_reconnects_total{node="i"} for i = 0..N-1.
 * Histograms are cumulative (a bucket counts every value <= le, in us).
 * Each value is exact on its own; entries are read one after the other, so
 * they are not one atomic snapshot. Thread-safe, does not block, does no I/O.
 */
DISTLOCK_API int distlock_client_stats(distlock_client *c, distlock_stat *out, size_t cap,
                                       size_t *count);

/* ------------------------------------------------------------- nodes */
/* Node i (0..N-1) as a URI with any password replaced by "***". */
DISTLOCK_API const char *distlock_client_node_uri(const distlock_client *c, int i);

/* ------------------------------------------------------------- admin */
/*
 * What an operator asks about keys (`distlock status`, `distlock list`,
 * `distlock release --force`): every call is distlock_admin_*. None of them
 * takes or gives up a lock of the caller's; all are thread-safe.
 *
 * Result structs that can grow (distlock_holder_info, distlock_owner_info):
 * the caller sets the first field, `size`, to sizeof its struct before the
 * call, e.g. `distlock_holder_info info = { .size = sizeof info };`. The
 * library refuses a size smaller than the 0.1.0 layout of the struct
 * (DISTLOCK_EINVAL, the detail says so; nothing written), fills the fields
 * it knows that fit in `size`, writes zeros after them up to `size` (fields
 * of a later header), never writes past `size` and never changes `size`.
 * Later versions add fields only at the end.
 */

/* Who holds a key, as distlock_admin_holder() saw it. */
typedef struct distlock_holder_info {
    size_t size;                         /* set by the caller: sizeof(distlock_holder_info) */
    char token[DISTLOCK_TOKEN_MAX + 1];  /* the token held on the most nodes (ties: the first
                                          * in node order), "" if none; any bytes but NUL */
    int nodes;                           /* nodes holding that token */
    long pttl_ms;                        /* shortest remaining TTL among them, -1 if none
                                          * expires, 0 if not held */
    int answered;                        /* nodes that answered */
    int taken;                           /* nodes where the key exists at all (any token,
                                          * or a value of another type) */
    int kind;       /* DISTLOCK_HOLDER_FREE 0, _LOCK 1 (a string token),
                     * _READERS 2 (read locks, maybe a writer's __write__), _SEMAPHORE 3,
                     * _OTHER 4 (a value of another type) -- on the node(s) counted */
    long holders;   /* _READERS / _SEMAPHORE: live members (tokens), max over nodes that answered */
    long permits;   /* _SEMAPHORE: permits as the latest acquire set them; else 0 */
    int writer;     /* _READERS: 1 when a live `__write__` is on a node counted (a writer
                     * waits for the readers, or a symfony writer holds the key); else 0 */
} distlock_holder_info;

/* distlock_holder_info.kind */
enum distlock_holder_kind {
    DISTLOCK_HOLDER_FREE = 0,
    DISTLOCK_HOLDER_LOCK = 1,
    DISTLOCK_HOLDER_READERS = 2,
    DISTLOCK_HOLDER_SEMAPHORE = 3,
    DISTLOCK_HOLDER_OTHER = 4
};

/* The name of a distlock_holder_info.kind, as every front end shows it:
 * "free", "lock", "readers", "semaphore", "other". Any int outside enum
 * distlock_holder_kind is "other" too (not a kind this library names).
 * A static string, never freed, never NULL. No I/O, does not touch
 * distlock_last_error(); thread-safe. */
DISTLOCK_API const char *distlock_holder_kind_name(int kind);

/*
 * Who holds `key`.
 * node = -1: every node asked in ONE parallel round (the verdict of
 * `distlock status`). Returns 1 when one token holds it on a quorum, 0 when
 * no token does, or an error:
 *  - DISTLOCK_ENOQUORUM (N > 1) when the nodes that did not answer could
 *    change the verdict (always when fewer than a quorum answered; with 3
 *    nodes and one silent, a token on both others is held, a free key is
 *    free, but one token on one of them is no verdict);
 *  - DISTLOCK_EPROTO instead when, that way, a node refused the request
 *    (an ACL without GET): the operator's to fix;
 *  - with N = 1, that node's error (DISTLOCK_ECONN, DISTLOCK_EPROTO).
 * node = i (0..N-1): node i alone. Returns 1 when it holds a token, 0 when
 * it does not (answered is then 1; taken 1 for a value of another type), or
 * that node's error (DISTLOCK_ECONN, DISTLOCK_EPROTO).
 * A key of another type (a hash, a list...) is taken by someone else: the
 * node answered, and holds no token. Read locks and a semaphore hold no
 * single token either (0); out->kind says which, with the live holders
 * (docs/shared-locks.md, docs/semaphores.md).
 * *out (may be NULL: the verdict alone; else its size set, see above) is
 * filled on every return after the round (also on ENOQUORUM, from the nodes
 * that answered), and zeroed on the others (but a refused size).
 * DISTLOCK_EINVAL: NULL client, bad key, node not in -1..N-1, out->size too
 * small. Blocks: one round, bounded by the per-node timeouts. Thread-safe.
 */
DISTLOCK_API int distlock_admin_holder(distlock_client *c, const char *key, int node,
                                       distlock_holder_info *out);

/* Owner metadata (DISTLOCK_OPT_OWNER_INFO): who holds a lock, kept in
 * the hash {key}:owner beside it (same slot, same TTL), written, renewed
 * and deleted by the same scripts as the lock. Read by
 * distlock_admin_owner(). */
#define DISTLOCK_OWNER_LABEL_MAX 256
typedef struct distlock_owner_info {
    size_t size;             /* set by the caller: sizeof(distlock_owner_info) */
    char host[256];          /* gethostname() of the holder */
    long pid;                /* its process id */
    char program[256];       /* its program name (program_invocation_short_name) */
    long long since_ms;      /* when it acquired the lock, ms since the epoch */
    char label[DISTLOCK_OWNER_LABEL_MAX + 1]; /* DISTLOCK_OPT_OWNER_LABEL, "" if none;
                                               * any bytes but NUL */
    long pttl_ms;            /* the record's remaining TTL (-1: none) */
} distlock_owner_info;

/* The owner record of `key`: on node i, or (node = -1) on the first node,
 * in node order, whose record belongs to the token that node holds, asked
 * of every node in one round. Returns 1 (*out filled), 0 when there is
 * none (free, a foreign lock, a lock taken without DISTLOCK_OPT_OWNER_INFO,
 * or a stale record of an earlier holder; *out zeroed), or an error (no
 * node answered: the first one's). A record is shown only when it names
 * the token the lock key holds now. out may be NULL (the answer alone);
 * else its size is set (see above). DISTLOCK_EINVAL: NULL client, bad key,
 * node not in -1..N-1, out->size too small. Blocks: one round.
 * Thread-safe. */
DISTLOCK_API int distlock_admin_owner(distlock_client *c, const char *key, int node,
                                      distlock_owner_info *out);

/* The fence counter of `key` on node i ({key}:fence, kept by DISTLOCK_FENCING
 * acquires): the last fence granted there for this key. Returns 1 and
 * *fence, 0 when the node has no counter for it (no fencing acquire was
 * made there; *fence 0), or an error (EPROTO when the value is not an
 * integer; EINVAL: NULL client, bad key, node not in 0..N-1). fence may be
 * NULL. Blocks on that one node. Thread-safe. */
DISTLOCK_API int distlock_admin_fence(distlock_client *c, const char *key, int node,
                                      int64_t *fence);

/* Keys that may be locks, for listing: one SCAN step on node i,
 * `SCAN *cursor MATCH pattern COUNT count` and the TYPE of each key it
 * found, run as one script (EVAL) in the server, so the server does
 * O(count) work per call and never blocks on a big keyspace.
 * fn(key, len, arg) is called for each key of the step that matches and is
 * a string (a lock), or a sorted set holding read locks or a semaphore
 * (its member `__distlock_semaphore__` or `__write__`, or a lowest score
 * above 10^12: tokens scored by their expiry in ms since the epoch;
 * distlock_admin_holder() tells which), except the fence counters of
 * locks and the registries of waiting writers ({key}:writers, beside read
 * locks); a nonzero return from fn skips the
 * rest of this step. fn runs in the calling thread, with no library lock
 * held. *cursor: 0 to start; on return the cursor of the next step, 0 when
 * the scan of that node is complete (SCAN's guarantees: a key present for
 * the whole scan is returned at least once, maybe more).
 * pattern: a Redis glob (NULL: "*"); count: 1..100000 (a hint to the
 * server). Returns the number of keys passed to fn, or an error. Blocks on
 * that one node. Thread-safe. */
typedef int (*distlock_key_fn)(const char *key, size_t len, void *arg);
DISTLOCK_API int distlock_admin_scan(distlock_client *c, int node, const char *pattern,
                                     long count, unsigned long long *cursor, distlock_key_fn fn,
                                     void *arg);

/* Delete `key` on every node whoever holds it (administrative override).
 * *deleted (may be NULL) receives the number of nodes it was deleted on.
 * Returns DISTLOCK_OK when every node answered (deleted or not there), else
 * EPROTO when a node refused the DEL (an ACL without it), ENOQUORUM when
 * nodes did not answer (one node: its own error); *deleted counts the
 * others. Blocks: one round. Thread-safe. */
DISTLOCK_API int distlock_admin_force_release(distlock_client *c, const char *key,
                                              int *deleted);

/* Node i is a Redis Cluster (redis-cluster://): the hash slot of `key` in
 * *slot, and the master that owns it as this client last learnt it (a call
 * on the key, e.g. distlock_admin_holder(), learns it) as "host:port" in
 * buf (truncated to size-1; "" if not known yet). Returns 1, or 0 when node
 * i is not a cluster (nothing written), or DISTLOCK_EINVAL. Does not block
 * (no network I/O). slot / buf may be NULL. Thread-safe. */
DISTLOCK_API int distlock_admin_cluster_route(distlock_client *c, const char *key, int node,
                                              int *slot, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* DISTLOCK_H */
