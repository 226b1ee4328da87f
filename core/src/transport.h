/* transport.h -- layer 1: talking to N Redis nodes in parallel.
 *
 * Endpoints, connections, the handshake (AUTH, SELECT, CLIENT ID, INFO
 * server for the run_id, SCRIPT LOAD of the scripts its owner gives it),
 * RESP encoding, and the round: one request per node, sent at once and
 * collected by one poll() loop, each node bounded by its own deadline, with
 * the replies every connection owes kept in order. It knows no lock, no
 * key and no script text of its own: requests carry an opaque ordering
 * tag, scripts are an index into the owner's table, and a "fallback" is any
 * request the owner wants sent when the server answers the first one with
 * a given error.
 *
 * May call: base (error.c, clock.c, uri.c's node configuration).
 * Called by: protocol users above (operations, background threads).
 */
#ifndef DISTLOCK_TRANSPORT_H
#define DISTLOCK_TRANSPORT_H

#include "base.h"

/* ------------------------------------------------------------ resolve.c */
#define DISTLOCK__RESOLVE_MAX 4
typedef struct distlock__resolve distlock__resolve;
int distlock__host_is_numeric(const char *host);
/* Start resolving host on a helper thread; NULL on ENOMEM. */
distlock__resolve *distlock__resolve_start(const char *host);
/* Readable once the result is in. */
int distlock__resolve_fd(const distlock__resolve *r);
/* 0: addresses in addr[0..*naddr); -1: failed (err says why); 1: not yet. */
int distlock__resolve_take(distlock__resolve *r, char (*addr)[DISTLOCK__ADDR_LEN], int *naddr, char *err,
                           size_t errlen);
void distlock__resolve_drop(distlock__resolve *r);
/* getaddrinfo now, on this thread (helper threads only); 0 or -1. */
int distlock__resolve_now(const char *host, char (*addr)[DISTLOCK__ADDR_LEN], int *naddr, char *err,
                          size_t errlen);
/* Run another lookup that ends in addresses on the helper thread: fn fills
 * addr/naddr (and *port, else 0: the node's own) or err; free_arg(arg) runs
 * when neither side needs it any more. NULL on ENOMEM (arg freed). */
typedef int (*distlock__resolve_fn)(void *arg, char (*addr)[DISTLOCK__ADDR_LEN], int *naddr, int *port,
                                    char *err, size_t errlen);
distlock__resolve *distlock__resolve_start_fn(distlock__resolve_fn fn, void *arg,
                                              void (*free_arg)(void *));
/* Once taken: the port the lookup found, 0 if none (use the node's). */
int distlock__resolve_port(distlock__resolve *r);

/* ------------------------------------------------------------ streams: net.c, tls.c, stream.c */
/* A connection's bytes, plain or TLS alike (the idea of hiredis'
 * redisContextFuncs): the hiredis context holds the socket, the output
 * buffer and the reply reader; the functions move the bytes: net.c's over
 * the socket itself, tls.c's through an SSL session (impl); stream.c
 * opens them. Everything above asks the stream and never whether it is
 * TLS. A zeroed stream (ctx
 * NULL) is closed. */
typedef struct distlock__stream distlock__stream;
typedef struct distlock__stream_funcs {
    /* Flush the output buffer (MSG_NOSIGNAL: a closed peer raises no
     * SIGPIPE); TLS: drive the handshake first, the output waits for it.
     * REDIS_OK (*done, if given: nothing left), or REDIS_ERR with ctx->err. */
    int (*write)(distlock__stream *s, int *done);
    /* Feed the reader what has arrived, without a buffer on the caller's
     * stack; REDIS_OK (nothing yet is fine), REDIS_ERR with ctx->err on a
     * closed or broken connection. TLS: a completed handshake also flushes
     * the output that waited for it. */
    int (*read)(distlock__stream *s);
    /* poll() events to wait for: POLLIN, and POLLOUT while there is output
     * (during a TLS handshake: the direction it needs). */
    int (*events)(const distlock__stream *s);
    /* Its handshake is done (plain: always). */
    int (*up)(const distlock__stream *s);
    /* The handshake failed because the server's certificate did not verify
     * (the server is up: refusing it is the answer, not trying elsewhere). */
    int (*cert_refused)(const distlock__stream *s);
    /* Free impl without a byte written (also in a forked child). */
    void (*free_impl)(void *impl);
} distlock__stream_funcs;
struct distlock__stream {
    redisContext *ctx;                  /* hiredis' reader and output buffer, and the fd */
    const distlock__stream_funcs *fn;
    void *impl;                         /* the TLS session, or NULL for plain */
};
struct distlock__transport;
struct ssl_ctx_st;  /* OpenSSL's SSL_CTX */

/* Open a non-blocking stream to node i of t at a numeric address and port
 * (0: the node's own; a Sentinel node's master: the sentinels' answer), or
 * its Unix socket when addr is NULL; TLS for a rediss:// node, its
 * certificate checked against host (NULL: see distlock__tls_start). 0, or
 * -1 with status and err (s stays closed). */
int distlock__stream_open_node(distlock__stream *s, struct distlock__transport *t, int i,
                               const char *addr, int port, const char *host, int *status,
                               char *err, size_t errlen);
/* How a thread of its own opens streams to servers that are no node of t
 * but take node i's settings (its sentinels: sentinel.c): for a TLS node a
 * context of the caller's own (see tls.c on why not the node's), the
 * server name option and whether verification is off; nothing for a plain
 * one. It may outlive the client. */
typedef struct distlock__stream_cfg {
    struct ssl_ctx_st *tls;     /* NULL: plain */
    char *server_name;          /* NULL: the host connected to */
    int insecure;
} distlock__stream_cfg;
/* 0, or -1 with status and err: node i's TLS context cannot be built. */
int distlock__stream_cfg_init(distlock__stream_cfg *sc, struct distlock__transport *t, int i,
                              int *status, char *err, size_t errlen);
void distlock__stream_cfg_clear(distlock__stream_cfg *sc);
/* Open a stream to cfg (a configuration that is no node: cfg->uri names it
 * in errors) at the numeric addr (port 0: cfg's) with sc's settings, the
 * certificate checked against host unless sc names a server. 0, or -1 with
 * status and err (s stays closed). */
int distlock__stream_open(distlock__stream *s, const distlock__node_cfg *cfg,
                          const distlock__stream_cfg *sc, const char *addr, int port,
                          const char *host, int *status, char *err, size_t errlen);
/* Close without I/O (fork-safe: frees the TLS session without a
 * close_notify, closes our fd); a closed stream: no-op. */
void distlock__stream_close(distlock__stream *s);
static inline int distlock__stream_write(distlock__stream *s, int *done)
{
    return s->fn->write(s, done);
}
static inline int distlock__stream_read(distlock__stream *s)
{
    return s->fn->read(s);
}
static inline int distlock__stream_events(const distlock__stream *s)
{
    return s->fn->events(s);
}
static inline int distlock__stream_fd(const distlock__stream *s)
{
    return s->ctx->fd;
}
static inline int distlock__stream_up(const distlock__stream *s)
{
    return s->fn->up(s);
}
static inline int distlock__stream_cert_refused(const distlock__stream *s)
{
    return s->fn->cert_refused(s);
}

/* The one blocking wait on the transport's own descriptors: poll pfd[0..np)
 * until one is ready or until_us (monotonic; UINT64_MAX: no limit), the
 * milliseconds rounded up here. Returns the count ready (revents set), or
 * 0: none (timed out, a signal, or poll() itself failed, ENOMEM: then it
 * waited a little, at most 10 ms, and nothing is known about the
 * descriptors; the callers' own deadlines end their loops). */
struct pollfd;
int distlock__poll_wait(struct pollfd *pfd, int np, uint64_t until_us);
/* distlock__poll_wait for a thread that holds the fork gate (base.h): it
 * lets go of the gate while it waits, so that a fork() waits for none of
 * its waits (the subscriber's, a lookup's). */
int distlock__poll_wait_gated(struct pollfd *pfd, int np, uint64_t until_us);

/* The most elements a reply (or one of its arrays) may announce: more is a
 * protocol error, not an allocation of that size (hiredis 0.14 makes the
 * element table before the elements arrive). Every reader of ours is capped
 * (the streams' open does it); distlock__reader_refused() returns the
 * count a refused header announced on this thread since the last call
 * (0: none), and clears it. */
#define DISTLOCK__REPLY_ELEMENTS_MAX (1 << 20)
int distlock__reader_cap(redisReader *r);
long long distlock__reader_refused(void);

/* net.c, tls.c and stream.c only: the two kinds of stream, the plain
 * connect every stream starts with (its reader capped, close-on-exec; 0,
 * or -1 with status and err naming cfg->uri), and the helpers both kinds
 * share (tls.c uses net.c's, never the other way: the layers check). */
extern const distlock__stream_funcs distlock__stream_plain, distlock__stream_tls;
int distlock__stream_open_plain(distlock__stream *s, const distlock__node_cfg *cfg,
                                const char *addr, int port, int *status, char *err,
                                size_t errlen);
/* Fail the stream's context (REDIS_ERR_IO, REDIS_ERR_EOF...) with why;
 * returns REDIS_ERR. */
int distlock__stream_fail(distlock__stream *s, int type, const char *why);
/* n bytes of the output buffer went out. */
void distlock__stream_sent(distlock__stream *s, size_t n);
/* The per-thread buffer reads go through (not the caller's stack). */
#define DISTLOCK__STREAM_RBUF (16 * 1024)
char *distlock__stream_rbuf(void);

/* ------------------------------------------------------------ tls.c */
/* Client-wide TLS settings (distlock__tp_set_tls); a node's URI wins. */
enum { DISTLOCK__TLS_CA_FILE = 0, DISTLOCK__TLS_CA_DIR, DISTLOCK__TLS_CERT, DISTLOCK__TLS_KEY,
       DISTLOCK__TLS_SERVER_NAME, DISTLOCK__TLS_NOPT };
/* Make the connected (or connecting) plain stream s to node i, at the
 * numeric address peer, a TLS one (its context built on first use); -1
 * with status and err (naming the node) on failure, s unchanged: a CA /
 * certificate / key file that does not load. The certificate is checked
 * against (and SNI names) the server name option, else host (the host the
 * connection was opened to, when it is not the node's own: a Cluster
 * master's, from CLUSTER SLOTS or MOVED), else the node's host (never a
 * Cluster node's: that is its first seed), else peer (a Sentinel node's
 * master: the sentinels' address; a Cluster master's). */
int distlock__tls_start(distlock__stream *s, struct distlock__transport *t, int i,
                        const char *peer, const char *host, int *status, char *err,
                        size_t errlen);
/* The same with a context of one's own (a sentinel's connection, on the
 * lookup thread): certificate checked against name unless insecure;
 * errors name uri. */
int distlock__tls_session(distlock__stream *s, struct ssl_ctx_st *ctx, const char *name,
                          int insecure, const char *uri, int *status, char *err,
                          size_t errlen);
/* A new context with node i's settings, the caller's own (one thread's
 * at a time; it may outlive the client: distlock__tls_ctx_free), with the
 * server name option (a malloc'ed copy, or NULL) and whether verification
 * is off. NULL with status and err: the context cannot be built. */
struct ssl_ctx_st *distlock__tls_ctx_new(struct distlock__transport *t, int i,
                                         char **server_name, int *insecure, int *status,
                                         char *err, size_t errlen);
void distlock__tls_ctx_free(struct ssl_ctx_st *ctx);
/* t->mu held: forget every built context (the options changed). */
void distlock__tls_ctx_drop_all(struct distlock__transport *t);

/* ------------------------------------------------------------ resp.c */
/* The one RESP encoder: append a command to the context's output buffer. */
int distlock__resp_append(redisContext *ctx, int argc, const char **argv, const size_t *len);
/* Append n bytes already encoded (a request encoded once for several nodes). */
int distlock__resp_append_raw(redisContext *ctx, const char *p, size_t n);

/* ------------------------------------------------------------ sentinel.c */
/* A node of kind DISTLOCK__NODE_SENTINEL has no fixed address: its master
 * is asked of its sentinels (SENTINEL GET-MASTER-ADDR-BY-NAME, in turn, each
 * within its share of budget_ms) on the resolver's helper thread, and the
 * answer is kept per node in the transport (distlock__endpoint). */
struct distlock__transport;
/* Node i's master; a rediss-sentinel:// node's sentinels are asked over TLS
 * with the node's TLS settings (certificates checked against each
 * sentinel's host, or the server name option). */
distlock__resolve *distlock__sentinel_start(struct distlock__transport *t, int i, long budget_ms);
/* The cached master of node i: 1 with addr/port and *state, else 0 (none
 * known: ask the sentinels). */
int distlock__ep_get(struct distlock__transport *t, int i, char *addr, int *port,
                     unsigned *state);
/* What a connection to node i made now, at addr:port (a lookup's answer),
 * records as its state. A lookup that names the master a sentinel's
 * announcement just replaced (the sentinel asked had not heard of the
 * failover yet) gets the announced one instead: addr (48 bytes) and *port
 * are rewritten, connect there. */
unsigned distlock__ep_learn(struct distlock__transport *t, int i, char *addr, int *port);
/* A connection made under `state` found its server is not the master (or
 * is gone): forget the address, unless another one was learnt meanwhile,
 * or it is a replica whose promotion was announced moments ago (sentinel.c:
 * the call fails, the next one tries it again). */
void distlock__ep_forget(struct distlock__transport *t, int i, unsigned state);
/* A connection made under `state` may still be used (same master known). */
int distlock__ep_current(struct distlock__transport *t, int i, unsigned state);
/* Announcements: the first lookup of a transport starts one thread that
 * holds a SUBSCRIBE +failover-state-wait-promotion +promoted-slave
 * +switch-master connection to every sentinel of each Sentinel node and
 * records the new master the first announcement names, so connections to
 * the old master are closed before their next call instead of at their
 * first error (sentinel.c says why every sentinel, and why these events).
 * Stopped (joined) by distlock__tp_free; a forked child drops it without
 * writing a byte and starts its own at its next lookup. */
void distlock__sentinel_watch_stop(struct distlock__transport *t);
void distlock__sentinel_watch_after_fork(struct distlock__transport *t);

/* ------------------------------------------------------------ requests */
/* A Lua script the transport keeps loaded on every connection: the owner's
 * table is given at init; requests name a script by its index. */
typedef struct distlock__script {
    const char *name;
    const char *body;
} distlock__script;

/* One request to one node: EVALSHA of script `script` with nkeys keys
 * followed by the other arguments (argv, argc in all), or a plain command
 * when script is -1. The arrays are the caller's. A call may run twice (a
 * resend on a fresh connection after the first broke, result.resent): the
 * owner only gives calls that are safe to repeat. */
typedef struct distlock__call {
    int script;              /* index in the transport's script table, or -1 */
    int nkeys;
    int argc;
    const char **argv;
    const size_t *argvlen;
    /* Sent instead when the server answers with an error starting with
     * fallback_on (e.g. a syntax an older server lacks), or NULL. The
     * result then says fell_back. */
    const struct distlock__call *fallback;
    const char *fallback_on;
    /* A second error prefix that brings the same fallback (or NULL); the
     * result then says fell_back = 2 (a reply about this key, not about
     * the server's version). */
    const char *fallback_also;
    /* The fallback is also sent in the call's place, without trying the
     * call first, on a server whose handshake said its version is below
     * this (major * 10000 + minor * 100 + patch; 0: never). A refusal costs
     * a round trip per node, and a round that ends at quorum leaves the
     * nodes still refusing without the fallback: so the fallback goes out
     * at once wherever the refusal is known in advance. */
    int fallback_below;
    /* A trailing request: it only follows the earlier requests of its tag
     * (its owner's word that it may run after them in any order with them
     * settled, e.g. a release of an attempt). On a node known hung it is
     * queued behind the requests of its tag, without being waited for; if
     * none of its tag was sent there it is not sent at all; it does not
     * wait for the CLIENT KILLs of the connections that carry them, and
     * is not held back by one still open on another connection (round.c). */
    int trailing;
    /* Ordering domain chosen by the caller, 0 for none. The transport
     * guarantees that a request with tag T executes on its node after every
     * earlier request with tag T of this transport that can still execute
     * there (see round.c). */
    uint64_t tag;
    /* What the requests of this tag are about, in the owner's words, for
     * the failures the ordering causes ("an earlier request for <subject>
     * ...", e.g. "this lock"); NULL: "this request's ordering tag". */
    const char *subject;
    /* For a trailing request: nodes where the requests it follows may have
     * run (or may yet): there it is queued even on a hung connection,
     * unwaited. */
    uint64_t must_mask;
    /* WAIT for replicas: when wait_replicas > 0, `WAIT wait_replicas
     * wait_ms` is written right behind the request on the same connection
     * (pipelined: no extra round trip) and the result is DONE only once its
     * reply is in too, with the count in `acked`. The transport only
     * reports the count; what it means is its owner's business. */
    int wait_replicas;
    long wait_ms;
    /* On a Redis Cluster node only: run script cl_script instead (> 0;
     * 0: the same script everywhere), with argv[cl_chan_arg] replaced by
     * cl_chan (its sharded pub/sub channel: protocol.c). */
    int cl_script;
    int cl_chan_arg;
    const char *cl_chan;
    size_t cl_chan_len;
} distlock__call;

enum { DISTLOCK__R_UNSENT = 0, DISTLOCK__R_PENDING, DISTLOCK__R_DONE, DISTLOCK__R_FAILED };

typedef struct distlock__result {
    int state;
    int status;          /* for FAILED: DISTLOCK_ECONN, EPROTO, EINVAL or ENOMEM */
    redisReply *reply;   /* for DONE: the reply (may be an error reply) */
    int sent;            /* the request was written: it may have run */
    int resent;          /* sent again on a fresh connection after the first broke */
    int fell_back;       /* the call's fallback was sent instead (2: for fallback_also) */
    int script;          /* the script index of the call that was sent (-1: a plain
                          * command); read this, not call->script: `call` points at
                          * the caller's request, often gone once the round returned */
    /* WAIT (call->wait_replicas > 0): the replicas asked for and the time
     * given, copied when sent; acked: the count WAIT answered, -1 none yet
     * or WAIT answered an error (wait_err then has its text) */
    int wait_n;
    long wait_ms;
    long long acked;
    char wait_err[96];
    /* private to the transport */
    int pre;             /* CLIENT KILLs still to confirm before sending */
    int deferred;        /* the call waits for the handshake / kills */
    int retried;         /* NOSCRIPT / fallback already used */
    int fresh;           /* this round opened the connection */
    int reresolved;      /* a Sentinel node's master was asked again for it */
    int redirects;       /* Cluster node: MOVED / ASK / dead masters followed */
    int ask;             /* Cluster node: send ASKING first, to master ask - 1 (0: no) */
    int tries;           /* Cluster node: TRYAGAIN answers so far */
    int share;           /* Cluster node: deadline_us is a new master's share of
                          * cap_us (nodekind.c cl_open): past it, unanswered, it is
                          * treated as refused */
    uint64_t retry_at_us;  /* Cluster node: resend then (after TRYAGAIN), 0: no */
    uint64_t deadline_us;
    /* The call's own deadline on this node: a redirect, re-route or resend
     * within the round keeps it (0: none yet, the round's first start). */
    uint64_t cap_us;
    long budget_ms;      /* the timeout behind deadline_us (for the message) */
    /* A connection that owed replies past its timeout was replaced for this
     * call: its server-side id, to be killed on the new connection before
     * the call is sent, and the endpoint state and server incarnation it
     * was made under (the kill goes only to the same server: round.c). */
    int replaced;
    long long replaced_id;
    unsigned replaced_ep;
    uint64_t replaced_run;
    /* The CLIENT KILLs this call needs are decided once its connection's
     * handshake told which server incarnation it is on (add_kills). */
    int kills_due;
    /* Cluster node: conns[i] leads to another master than the call's, where
     * an earlier request of its tag is left behind: only its CLIENT KILLs
     * go there; then the call is routed again (nodekind.c cl_clear_first). */
    int clearing;
    const distlock__call *call;   /* valid only while the round runs */
    char err[DISTLOCK__ERR_LEN];       /* for FAILED: what went wrong on this node */
} distlock__result;

/* Decides whether a round can stop before every node answered; `res` has
 * n entries. Returns nonzero to stop. */
typedef int (*distlock__decide_fn)(const distlock__result *res, int n, void *arg);

/* ------------------------------------------------------------ connections */
/* One reply a connection owes, in the order the requests were written. */
typedef struct distlock__owed {
    uint64_t tag;                   /* ordering domain of the request (0: none) */
    uint64_t sent_us;
    int kind;                       /* DISTLOCK__K_* (conn.c) */
    int arg;                        /* K_LOAD: script index */
    struct distlock__result *owner; /* the round waiting for it, or NULL: left behind */
} distlock__owed;

/* One connection to one node, owned by one connection set. */
typedef struct distlock__conn {
    distlock__stream stream;  /* closed (stream.ctx NULL): no connection */
    uint64_t serial;        /* transport-unique number of this connection */
    long long srv_id;       /* the server's CLIENT ID for it, -1 unknown */
    /* The server incarnation it is on: a hash of INFO server's run_id (new
     * at every start of redis-server), 0 unknown (INFO refused). A client
     * id means something only with it: ids start again from 1 after a
     * restart, and a host name or a service address can lead to another
     * server. */
    uint64_t srv_run;
    /* Its INFO server's redis_version as major * 10000 + minor * 100 +
     * patch, 0 unknown (INFO refused): see call->fallback_below. */
    int srv_ver;
    int hs_pending;         /* handshake replies still due: not ready before 0 */
    unsigned cred_gen;      /* credentials it authenticated with */
    uint64_t used_us;       /* last round on this connection */
    /* Known to owe replies past its timeout: a round timed out on it, or
     * it replaces a stuck one and has not answered yet (then the node
     * itself is hung: the next call fails at once rather than waiting on
     * yet another connection). Any reply clears it. */
    int late;
    distlock__owed *q;      /* replies due, FIFO ring */
    int qhead, qlen, qcap;
    distlock__resolve *resolving;  /* name lookup in progress, or NULL */
    unsigned ep_state;      /* Sentinel node: the endpoint state it was made under */
} distlock__conn;

/* A connection to every node; checked out of the pool by one operation at a
 * time, so operations of different threads run in parallel. */
typedef struct distlock__connset {
    struct distlock__connset *next;      /* in the pool */
    struct distlock__connset *all_next;  /* every set of the transport */
    uint64_t id;                         /* names it for distlock__tp_checkout_pref */
    int in_use;
    /* Scratch for the operation that has the set checked out, sized by the
     * node count: the results and calls of its main round (a) and of a
     * follow-up round (b). */
    distlock__result *res_a, *res_b;
    const distlock__call **calls_a, **calls_b;
    /* distlock__round's poll set: a descriptor per node and the node each
     * one is for (on the heap: N may be up to DISTLOCK__MAX_NODES, and the
     * round is on the deepest path of the entry points' stack budget);
     * pfd has one entry more, for a blocking run's cancel */
    struct pollfd *pfd;
    int *pfd_node;
    struct distlock__clconns **cl;  /* n entries (NULL: not a cluster node), or NULL if none is */
    /* The current round's call as encoded for the first node it went to
     * (distlock__append_call_enc), in that node's form (script, sharded,
     * EVALSHA or EVAL): the other nodes of the round that take the same
     * form get these bytes as they are, not encoded again. Forgotten at
     * each distlock__round_begin (a set's calls are rebuilt in place
     * between rounds); the buffer stays for the next round. */
    struct {
        const struct distlock__call *call;
        int script, sharded, sha;
        char *buf;
        size_t len, cap;
    } enc;
    distlock__conn conns[];  /* n of them */
} distlock__connset;

/* Requests left behind (their replies not read) that carry a tag: a later
 * request with the same tag on another connection must not overtake them. */
typedef struct distlock__stale {
    int node;
    uint64_t tag;
    uint64_t serial;        /* connection that carries them */
    long long srv_id;       /* its server-side id, -1 unknown */
    uint64_t run;           /* server incarnation of that connection, 0 unknown */
    int open;               /* still open on our side (else closed: orphaned) */
    int count;              /* requests */
    unsigned ep_gen;        /* Sentinel node: which master (endpoint generation) */
} distlock__stale;

/* A Sentinel node's master as last learnt. state = generation << 1 | known;
 * the generation changes only when the address does, so a connection to the
 * same server after a passing error still orders its requests with CLIENT
 * KILL (round.c); one to another server does not need to (see there). */
typedef struct distlock__endpoint {
    _Atomic unsigned state;
    char addr[DISTLOCK__ADDR_LEN];          /* under tp.mu */
    int port;
    /* The master a sentinel's announcement replaced (under tp.mu), while
     * the generation is still announced_gen: sentinel.c's rule for a
     * lookup that names it. */
    char replaced_addr[DISTLOCK__ADDR_LEN];
    int replaced_port;
    unsigned announced_gen;
    /* A promotion announced before it is done: until then (monotonic us,
     * 0: none) a failed connection to it does not forget it. */
    _Atomic uint64_t promoting_until_us;
    /* Meanwhile, the replica found not yet the master: lookups fail at once
     * ("failover in progress") until then, then try it again (sentinel.c). */
    _Atomic uint64_t promoting_retry_us;
} distlock__endpoint;

/* ------------------------------------------------------------ cluster.c */
/* A Redis Cluster node (DISTLOCK__NODE_CLUSTER): its slot map, learnt from
 * CLUSTER SLOTS (asked in every handshake with one of its masters) and from
 * MOVED replies; its masters, each with a generation that stands for its
 * address (the ordering of requests left behind is per server, as for a
 * Sentinel node's masters: round.c). Under tp.mu. */
#define DISTLOCK__CL_MASTERS 64  /* masters known at once: up to 64 (cluster.c gives the
                                    entry of one that owns no slot, and can no longer
                                    receive a request of ours, to a new address) */
typedef struct distlock__clmaster {
    char host[DISTLOCK__HOST_LEN];
    int port;
    int down;               /* a connection to it failed: route its slots elsewhere */
    unsigned gen;
    int users;              /* connection sets whose conns[i] leads here now */
} distlock__clmaster;
typedef struct distlock__clmap {
    unsigned char owner[DISTLOCK__SLOTS];  /* master index + 1; 0: unknown */
    distlock__clmaster m[DISTLOCK__CL_MASTERS];
    int nm;
    int nseeds;             /* m[0..nseeds): the URI's seeds, never given away */
    unsigned next_gen;
} distlock__clmap;
/* A connection set's connections to one cluster node's masters: the one in
 * use is in conns[i] (master `cur`), the others wait here. */
typedef struct distlock__clconns {
    int cur;                /* master of conns[i], -1: none yet */
    distlock__conn c[DISTLOCK__CL_MASTERS];
} distlock__clconns;

/* ------------------------------------------------------------ nodekind.c */
/* What makes a plain node, a Sentinel node and a Cluster node differ, as
 * one table of hooks per kind, chosen per node at distlock__tp_init
 * (t->kind[i]): the round, the connections and the handshake call through
 * it and test no kind themselves. A NULL hook: nothing to do (a plain
 * node's hot path pays one pointer test where it did nothing before). The
 * hooks run on the round's thread, inside its steps (conn.h has what they
 * may do to a node's call: restart it, open a connection, flush). */
struct distlock__transport;
/* How often a call out on a node (round.c) and the subscriber's
 * connections (pubsub.c) compare where the node's kind says a connection
 * should lead with where it does (a Sentinel node's endpoint state, a
 * Cluster node's slot map): a few atomic loads, so a failover costs a call
 * or a waiter no more than this on top of the new connection. */
#define DISTLOCK__CURRENT_CHECK_MS 200

typedef struct distlock__node_kind {
    const char *name;
    /* A key moves between the node's servers (Cluster: slots migrate): a
     * request left behind on one of them must be closed there before a
     * later request of its tag goes to another (conn.c stale_find). */
    int keys_move;
    /* Runs call->cl_script (sharded pub/sub) instead of call->script; a
     * subscription goes to each channel's slot master (pubsub.c). */
    int sharded;
    /* The configuration's host names the node's own server (plain). A
     * Cluster node's is only its first seed, a Sentinel node has none: a
     * TLS certificate is then checked against the host or address the
     * connection was opened to (tls.c). */
    int addressed;
    /* Where a connection to node i goes, outside a round (the subscriber's,
     * pubsub.c): 0 at the configuration's address or Unix socket, now; 1
     * a lookup was started (*res: a name resolved, a Sentinel node's
     * master asked); -1 out of memory. NULL: the node has no connection of
     * its own (Cluster: its masters'). */
    int (*lookup)(struct distlock__transport *t, int i, distlock__resolve **res);
    /* start_node, r just reset for r->call: put the connection the call
     * needs into cs->conns[i] (Cluster: its slot's master, or first the
     * master where a request of its tag is left behind). -1: r is final. */
    int (*route)(struct distlock__transport *t, struct distlock__connset *cs,
                 struct distlock__result *r, int i);
    /* May conns[i] still be used (Sentinel: it leads to the master known
     * now)? NULL: yes. Asked before each call, and every
     * DISTLOCK__CURRENT_CHECK_MS of a call out or a subscription. */
    int (*current)(struct distlock__transport *t, int i, const struct distlock__conn *conn);
    /* No connection: where to connect. Opens one (0) or starts a lookup
     * (r->deferred, -1), or fails r (-1). */
    int (*open)(struct distlock__transport *t, struct distlock__connset *cs,
                struct distlock__result *r, int i, uint64_t now, long connect_ms,
                uint64_t wait_us);
    /* The lookup open started answered addr[0..naddr) (port: 0, the
     * node's own): open the connection there, or fail r. */
    void (*resolved)(struct distlock__transport *t, struct distlock__connset *cs,
                     struct distlock__result *r, int i, char (*addr)[DISTLOCK__ADDR_LEN],
                     int naddr, int port);
    /* The lookup failed (r already failed with its reason). */
    void (*lookup_failed)(struct distlock__transport *t, struct distlock__connset *cs,
                          struct distlock__result *r, int i);
    /* The host a new connection's TLS certificate must name (malloc'ed),
     * when it is not the node's own; NULL hook or NULL: tls.c's rule. */
    char *(*tls_host)(struct distlock__transport *t, struct distlock__connset *cs, int i);
    /* Requests of the handshake the call waits for (after INFO server:
     * Sentinel's ROLE), owed as DISTLOCK__K_NODE_HS; and requests behind
     * the handshake nothing waits for (Cluster's CLUSTER SLOTS), owed as
     * DISTLOCK__K_NODE. 0, or -1 (out of memory). */
    int (*handshake)(struct distlock__transport *t, int i, struct distlock__conn *conn,
                     struct distlock__result *r);
    int (*handshake_tail)(struct distlock__transport *t, int i, struct distlock__conn *conn);
    /* The reply to one of those (the caller frees rep). -1: r changed
     * (restarted or failed). */
    int (*reply)(struct distlock__transport *t, struct distlock__connset *cs,
                 struct distlock__result *r, int i, const redisReply *rep);
    /* Requests written right before the call when r->ask is set (Cluster:
     * ASKING after an ASK redirect). 0, or -1 (out of memory). */
    int (*before_call)(struct distlock__conn *conn);
    /* The call's reply is the error err: one that moves the call (MOVED,
     * ASK, TRYAGAIN; READONLY on a Sentinel node). 0: not one of those;
     * 1: the call is sent again later (r->retry_at_us); -1: r changed. */
    int (*error)(struct distlock__transport *t, struct distlock__connset *cs,
                 struct distlock__result *r, int i, const char *err);
    /* The connection broke (before the round's resend on a fresh
     * connection): forget the master / route elsewhere. 1: r changed. */
    int (*broken)(struct distlock__transport *t, struct distlock__connset *cs,
                  struct distlock__result *r, int i);
    /* r's deadline passed: the kind may give the call more time or route
     * it elsewhere (Cluster: a new master's share of it, cl_open). */
    void (*deadline)(struct distlock__transport *t, struct distlock__connset *cs,
                     struct distlock__result *r, int i);
    /* r times out now: the kind's bookkeeping (forget the master, mark it
     * down). 1: it failed r with a detail of its own. */
    int (*timed_out)(struct distlock__transport *t, struct distlock__connset *cs,
                     struct distlock__result *r, int i);
    /* r->clearing: the connection's kills are confirmed; -1 (r changed). */
    int (*cleared)(struct distlock__transport *t, struct distlock__connset *cs,
                   struct distlock__result *r, int i);
    /* Every other connection of the set to node i (Cluster: its other
     * masters'), for fn. */
    void (*each_conn)(struct distlock__transport *t, struct distlock__connset *cs, int i,
                      void (*fn)(struct distlock__transport *t, int i,
                                 struct distlock__conn *conn));
} distlock__node_kind;
extern const distlock__node_kind distlock__kind_plain, distlock__kind_sentinel,
    distlock__kind_cluster;
/* The table for a node's configuration. */
const distlock__node_kind *distlock__node_kind_of(const distlock__node_cfg *cfg);

/* ------------------------------------------------------------ the transport */
typedef struct distlock__transport {
    int n;
    const distlock__node_cfg *nodes;
    const distlock__script *scripts;  /* the owner's table, loaded on every connection */
    int nscripts;

    pthread_mutex_t mu;       /* everything below that is not atomic */
    pthread_cond_t pool_cond; /* a set was checked in */
    distlock__connset *pool;
    distlock__connset *all_sets;
    uint64_t next_set_id;

    /* set under mu, read by rounds without it: atomic */
    _Atomic long connect_timeout_ms;  /* connect + first reply */
    _Atomic long command_timeout_ms;  /* one node's reply */
    char *username;
    char *password;
    _Atomic unsigned cred_gen;  /* bumped when the credentials change */

    /* SHA1 of each script, learnt from the servers' SCRIPT LOAD replies */
#define DISTLOCK__SHA1_HEX 40   /* a script's SHA1 as SCRIPT LOAD gives it */
    char (*sha)[DISTLOCK__SHA1_HEX + 1];
    _Atomic int *sha_ok;        /* sha[s] is set (then immutable) */

    /* requests left behind with a tag, and a counting filter over (node,
     * tag) so most requests skip the list (and its lock); a power of 2 */
#define DISTLOCK__STALE_BUCKETS 256
    distlock__stale *stale;
    int nstale, stale_cap;
    _Atomic unsigned short stale_filter[DISTLOCK__STALE_BUCKETS];
    _Atomic uint64_t conn_serial;

    /* node i's server as seen when connected ("ip:port" or "unix:dev:ino"),
     * to refuse two nodes that are one server */
#define DISTLOCK__PEER_LEN 64  /* "ip:port" or "unix:dev:ino" */
    char (*peer)[DISTLOCK__PEER_LEN];
    /* node i's server's identity (a hash of INFO's run_id, 0 unknown): two
     * addresses can lead to one server (its Unix socket and its TCP port, a
     * proxy or a NAT in front of it) */
    uint64_t *peer_run;
    _Atomic int config_error;   /* two nodes are one server: unusable */
    distlock__endpoint *ep;     /* n of them: Sentinel nodes' masters */
    struct distlock__watch *watch;  /* the announcements thread (sentinel.c), under mu */
    char config_detail[256];

    /* TLS (tls.c): the client's settings, and each rediss:// node's
     * SSL_CTX, built at its first connection (under mu) */
    char *tls_opt[DISTLOCK__TLS_NOPT];
    int tls_verify;                   /* 1 (default): verify certificates */
    struct ssl_ctx_st **tls_ctx;      /* n entries */

    /* the owner's counters (stats.c): node errors, timeouts, reconnects;
     * NULL: none (set once before the first round, then read only) */
    distlock__stats *stats;
    /* cluster.c: n entries (NULL: not a cluster node), or NULL if none is */
    distlock__clmap **cl;
    /* nodekind.c: node i's kind, n entries */
    const distlock__node_kind **kind;
} distlock__transport;

/* pool.c */
int distlock__tp_init(distlock__transport *t, const distlock__node_cfg *nodes, int n,
                      const distlock__script *scripts, int nscripts);
void distlock__tp_free(distlock__transport *t);
/* In a forked child, before anything else: forget the parent's connections
 * (no I/O); what they carry (left behind or still awaited) stays listed as
 * requests left behind on closed connections, so the child's requests of
 * the same tags kill them first (from its own connections); fresh lock. */
void distlock__tp_after_fork(distlock__transport *t);
/* Set a timeout (connect: which 0, command: which 1) or a credential
 * (username: 0, password: 1; value copied, NULL clears). */
void distlock__tp_set_timeout(distlock__transport *t, int which, long ms);
int distlock__tp_set_credential(distlock__transport *t, int which, const char *value);
/* TLS settings: a DISTLOCK__TLS_* string (copied; NULL clears), or
 * verification on/off. Existing connections are re-made with them. */
int distlock__tp_set_tls(distlock__transport *t, int which, const char *value);
void distlock__tp_set_tls_verify(distlock__transport *t, int on);
distlock__connset *distlock__tp_checkout(distlock__transport *t);
/* Check out set `id` if it still exists, waiting (bounded) while another
 * operation uses it; else any set. A preference only: requests on other
 * connections are ordered by the tags; this keeps a release on the
 * connections its acquire may still be queued on, where it cannot overtake
 * it (which would leave a key behind until its TTL). */
distlock__connset *distlock__tp_checkout_pref(distlock__transport *t, uint64_t id);
void distlock__tp_checkin(distlock__transport *t, distlock__connset *cs);
/* EINVAL (with the detail) once two nodes were found to be one server. */
int distlock__tp_check_usable(distlock__transport *t);
/* Append AUTH for node i (the transport's credentials, else the URI's) to a
 * connection made elsewhere (the subscriber's); 0 if none was needed. */
int distlock__tp_append_auth(distlock__transport *t, int i, redisContext *ctx);

/* cluster.c (the transport's own files use conn.h's part) */
/* The one reading of a redirect: "MOVED 3999 127.0.0.1:6381" or "ASK 3999
 * 127.0.0.1:6381" (an IPv6 address has colons of its own: the port follows
 * the last one; "MOVED 3999 :6381", an unknown endpoint, gives an empty
 * host). 0 with the slot, host (hostlen bytes at most) and port; -1 if the
 * text is not one (a slot out of range, no port, a host too long). The
 * calls' redirects and the subscriber's SSUBSCRIBE answers both use it. */
int distlock__redirect_parse(const char *err, int *slot, char *host, size_t hostlen, int *port);
/* Node i's master for key now: its address in host/port and the key's
 * slot; 0, or -1 if not a cluster node or none is known. */
int distlock__cl_where(distlock__transport *t, int i, const char *key, char *host,
                       size_t hostlen, int *port, int *slot);
/* The index of the master that owns slot in node i's slot map now, or -1
 * (not a cluster node, slot of unknown owner, or its master known to be
 * down). Two slots with the same index are served by one connection: the
 * watchdog batches their keys into one call per master. */
int distlock__cl_slot_master(distlock__transport *t, int i, unsigned slot);

/* round.c */
/* Send calls[i] (NULL: nothing for node i) to every node in parallel and
 * collect replies until every node answered, failed, or `decide` says the
 * outcome is known. Replies are owned by res[] (distlock__round_clear). */
void distlock__round(distlock__transport *t, distlock__connset *cs,
                     const distlock__call *const *calls, distlock__result *res,
                     distlock__decide_fn decide, void *arg);
/* The same round in steps, for a caller that waits itself (the
 * non-blocking API, which drives many at once): begin sends; interest
 * fills cs->pfd[0..np) (cs->pfd_node[k]: node of entry k) with what to
 * wait for and *next_us with the monotonic time by which to call it again
 * even if nothing is ready (UINT64_MAX: none), and returns np, 0 once the
 * round is over; after waiting, the caller sets cs->pfd[k].revents and
 * calls advance (all zero: nothing happened), then interest again; end
 * closes it. calls[], res[] and the calls they point to must live until
 * end. One round per connection set at a time; nothing here blocks. */
typedef struct distlock__round_run {
    const distlock__call *const *calls;
    distlock__result *res;
    distlock__decide_fn decide;
    void *arg;
    int decided;
    int drop_unsent;       /* the caller waits no more for calls not yet
                            * written (still waiting for their connection):
                            * they are not sent, and fail at the round's end */
    int np;                /* entries interest filled */
    uint64_t start, grace_end;
} distlock__round_run;
void distlock__round_begin(distlock__transport *t, distlock__connset *cs,
                           distlock__round_run *rr, const distlock__call *const *calls,
                           distlock__result *res, distlock__decide_fn decide, void *arg);
int distlock__round_interest(distlock__transport *t, distlock__connset *cs,
                             distlock__round_run *rr, uint64_t *next_us);
void distlock__round_advance(distlock__transport *t, distlock__connset *cs,
                             distlock__round_run *rr);
void distlock__round_end(distlock__transport *t, distlock__connset *cs, distlock__round_run *rr);
void distlock__round_clear(distlock__result *res, int n);

/* pubsub.c: subscription connections (the subscriber's: wait.c). Per node
 * one connection carrying the channels' SUBSCRIBEs, at its address by the
 * node's kind (a Sentinel node's master; on a Cluster node each channel's
 * shard name SSUBSCRIBEd on its slot's master), AUTH through the transport,
 * reconnected after a pause. The state is guarded by the owner's mutex mu:
 * every call below is made with it held; the steps release it around
 * connecting (no network or name-resolution work under it). Driven like a
 * round in steps, by one thread: interest fills pfd[0..np) (room for
 * distlock__pubsub_pollfd_max entries) and *next_us (when to call it
 * again), returns np; the caller waits, sets revents and calls advance with
 * the same entries. The callbacks run inside the steps, mu held. */
struct pollfd;
typedef struct distlock__pubsub distlock__pubsub;
typedef struct distlock__pubsub_cb {
    /* a message on chan (the channel's name as subscribed, also for one
     * that came on its shard channel); payload "" when none */
    void (*message)(void *arg, const char *chan, const char *payload);
    /* chan's subscription confirmed on node (up = 1); or chan NULL: the
     * node lost its subscriptions or cannot confirm them now (up = 0) */
    void (*subscription)(void *arg, const char *chan, int node, int up);
    void *arg;
} distlock__pubsub_cb;
/* NULL on ENOMEM. Nothing is connected before the first channel. */
distlock__pubsub *distlock__pubsub_new(distlock__transport *t, pthread_mutex_t *mu,
                                       const distlock__pubsub_cb *cb);
/* Closes without writing a byte (forked: the lookups running are the
 * parent's threads': their memory is let go, not waited for). NULL: no-op. */
void distlock__pubsub_free(distlock__pubsub *ps, int forked);
int distlock__pubsub_pollfd_max(const distlock__pubsub *ps);
int distlock__pubsub_interest(distlock__pubsub *ps, struct pollfd *pfd, uint64_t *next_us);
void distlock__pubsub_advance(distlock__pubsub *ps, const struct pollfd *pfd, int np);
/* Subscribe chan (again: no-op) on every node; shard (or NULL): the name
 * to SSUBSCRIBE on a Cluster node instead, in its own slot. -1 on ENOMEM. */
int distlock__pubsub_subscribe(distlock__pubsub *ps, const char *chan, const char *shard);
void distlock__pubsub_unsubscribe(distlock__pubsub *ps, const char *chan);
/* The nodes that confirmed chan's subscription now (bit i). */
uint64_t distlock__pubsub_confirmed(const distlock__pubsub *ps, const char *chan);
/* Some node may still confirm subscriptions (not all down or refusing). */
int distlock__pubsub_can_confirm(const distlock__pubsub *ps);

#endif
