/* conn.h -- shared by the transport's own files (conn.c, request.c,
 * round.c, pool.c, and pubsub.c for a MOVED its SSUBSCRIBE gets) and by
 * nothing else. */
#ifndef DISTLOCK_CONN_H
#define DISTLOCK_CONN_H

#include "transport.h"

/* Kinds of replies a connection can owe. */
enum {
    DISTLOCK__K_CALL = 0,   /* an operation's request */
    DISTLOCK__K_AUTH,       /* handshake: AUTH, SELECT, CLIENT ID, INFO server, SCRIPT LOAD */
    DISTLOCK__K_SELECT,
    DISTLOCK__K_ID,
    DISTLOCK__K_INFO,       /* INFO server: the server's run_id (its incarnation) */
    DISTLOCK__K_LOAD,
    DISTLOCK__K_KILL,       /* CLIENT KILL ID of a connection left behind */
    DISTLOCK__K_NODE_HS,    /* the node kind's handshake request (Sentinel: ROLE) */
    DISTLOCK__K_WAIT,       /* WAIT n t behind a call (arg: t in ms) */
    DISTLOCK__K_ASKING,     /* the node kind's request before a call (Cluster: ASKING) */
    DISTLOCK__K_NODE        /* a node kind's request nothing waits for (CLUSTER SLOTS) */
};

/* conn.c: the FIFO of owed replies */
/* (inline: every request and reply goes through them) */
static inline distlock__owed *distlock__q_at(distlock__conn *conn, int k)
{
    return &conn->q[(conn->qhead + k) % conn->qcap];
}

int distlock__q_grow(distlock__conn *conn);

static inline int distlock__q_push(distlock__conn *conn, uint64_t tag, int kind, int arg,
                                   distlock__result *owner)
{
    if (conn->qlen == conn->qcap && distlock__q_grow(conn) != 0)
        return -1;
    distlock__owed *o = &conn->q[(conn->qhead + conn->qlen) % conn->qcap];
    o->tag = tag;
    o->sent_us = distlock__now_us();
    o->kind = kind;
    o->arg = arg;
    o->owner = owner;
    conn->qlen++;
    return 0;
}

static inline distlock__owed distlock__q_pop(distlock__conn *conn)
{
    distlock__owed o = conn->q[conn->qhead];
    conn->qhead = (conn->qhead + 1) % conn->qcap;
    conn->qlen--;
    return o;
}

int distlock__owes_kind(distlock__conn *conn, int kind);
int distlock__owes_tag(distlock__conn *conn, uint64_t tag);

/* conn.c: requests left behind (t->mu is taken inside unless _locked) */
int distlock__stale_maybe(distlock__transport *t, int node, uint64_t tag);
void distlock__stale_add_locked(distlock__transport *t, int node, uint64_t tag,
                                const distlock__conn *conn, int open);
void distlock__stale_done(distlock__transport *t, int node, uint64_t tag, uint64_t serial);
/* The server incarnation run (0: unknown) confirmed srv_id closed. */
void distlock__stale_killed(distlock__transport *t, int node, long long srv_id, uint64_t run);
/* Might runs a and b be one server incarnation? Unknown (0) might be any. */
static inline int distlock__same_run(uint64_t a, uint64_t b)
{
    return a == 0 || b == 0 || a == b;
}
/* distlock__stale_find's *elsewhere bits */
#define DISTLOCK__STALE_OPEN 1          /* on another open connection of ours */
#define DISTLOCK__STALE_OTHER_MASTER 2  /* on another master of a Cluster node */
int distlock__stale_find(distlock__transport *t, int node, uint64_t tag,
                         const distlock__conn *conn, long long *ids, int max,
                         int *elsewhere);

/* conn.c: closing, failing, leaving behind */
/* Close a connection of node i; what it still owes is remembered. */
void distlock__conn_close(distlock__transport *t, int i, distlock__conn *conn);
/* Drop a connection inherited across fork: no I/O, nothing remembered. */
void distlock__conn_forget(distlock__conn *conn);
/* The detail is "<node uri>: " and the formatted text. */
void distlock__result_fail(distlock__transport *t, distlock__result *r, int i, int status,
                           const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void distlock__node_fail(distlock__transport *t, distlock__conn *conn, distlock__result *r,
                         int i, int status, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void distlock__abandon(distlock__transport *t, int i, distlock__conn *conn, distlock__result *r);

/* request.c */
int distlock__append_cmd(distlock__conn *conn, distlock__result *owner, int kind, int arg,
                         uint64_t tag, int argc, const char **argv, const size_t *len);
int distlock__append_handshake(distlock__transport *t, int i, distlock__conn *conn,
                               distlock__result *r);
/* i: the node (a Redis Cluster node gets call->cl_script, if set) */
int distlock__append_call(distlock__transport *t, int i, distlock__conn *conn,
                          distlock__result *owner, const distlock__call *call, int force_eval);
/* The same, through cs->enc: the bytes of a call already encoded in this
 * round for another node in the same form are appended as they are. */
int distlock__append_call_enc(distlock__transport *t, int i, distlock__conn *conn,
                              distlock__result *owner, const distlock__call *call,
                              int force_eval, distlock__connset *cs);
/* CLIENT KILL ID srv_id; why: 0 an earlier request of the call's tag is on
 * it, 1 it is the stuck connection this one replaces (round.c) */
int distlock__append_kill(distlock__conn *conn, distlock__result *owner, long long srv_id,
                          int why);
void distlock__learn_sha(distlock__transport *t, int s, const redisReply *rep);
/* INFO server's reply: the hash of its run_id, 0 if none (refused). */
uint64_t distlock__run_of(const redisReply *rep);
/* INFO server's reply: redis_version as major * 10000 + minor * 100 + patch,
 * 0 if none (refused, or not a version). Valkey says 7.2.4 there. */
int distlock__version_of(const redisReply *rep);
int distlock__check_peer(distlock__transport *t, int i, distlock__conn *conn);
/* The same by the server's run_id (its INFO, hashed: distlock__run_of),
 * for names whose addresses differ; 0 (unknown) passes. */
int distlock__check_peer_run(distlock__transport *t, int i, uint64_t run);

/* round.c: what a node kind's hooks (nodekind.c) may do to node i's call */
/* (Re)start node i's call `call` (the round's start_node): cap is the
 * deadline it keeps (0: a budget of its own). */
void distlock__round_start(distlock__transport *t, distlock__connset *cs,
                           const distlock__call *call, distlock__result *r, int i, uint64_t now,
                           uint64_t cap);
/* Open the connection to node i at its numeric address(es) (NULL: its
 * Unix socket) and port (0: the node's own), made under endpoint state
 * ep_state, and queue the handshake; r fails if none can be made. */
void distlock__round_open_at(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                             int i, char (*addr)[DISTLOCK__ADDR_LEN], int naddr, int port,
                             unsigned ep_state);
/* conns[i] broke: resend on a fresh connection once, or the kind's broken
 * hook, or fail. */
void distlock__round_broken(distlock__transport *t, distlock__connset *cs, distlock__result *r,
                            int i);
/* Write what conns[i] has queued; a broken connection as above.
 * (inline: a frame of its own on the deepest stack path, a redirect's
 * CLUSTER SLOTS inside a release inside an acquire, costs 64 bytes) */
static inline void distlock__round_flush(distlock__transport *t, distlock__connset *cs,
                                         distlock__result *r, int i)
{
    int done = 0;
    if (distlock__stream_write(&cs->conns[i].stream, &done) != REDIS_OK)
        distlock__round_broken(t, cs, r, i);
}
/* The deadline a restart of node i's call keeps. */
static inline uint64_t distlock__call_deadline(const distlock__result *r)
{
    return r->cap_us ? r->cap_us : r->deadline_us;
}
/* Node i's deadline: now + ms (+ extra_us), but never past the call's own
 * (r->cap_us, once set): a redirect, re-route or resend spends what is left
 * of it, however many there are. */
static inline void distlock__set_deadline(distlock__result *r, uint64_t now, long ms,
                                          uint64_t extra_us)
{
    uint64_t d = now + (uint64_t)ms * 1000u + extra_us;
    if (r->cap_us == 0)
        r->budget_ms = ms;
    r->deadline_us = r->cap_us && d > r->cap_us ? r->cap_us : d;
}
/* "this lock" (the call's subject), or the neutral wording. */
static inline const char *distlock__subject(const distlock__call *call)
{
    return call && call->subject ? call->subject : "this request's ordering tag";
}

/* cluster.c */
#define DISTLOCK__CL_REDIRECTS 5   /* per call: MOVED, ASK, dead masters */
int distlock__cl_init(distlock__transport *t);
void distlock__cl_free(distlock__transport *t);
/* A new connection set's per-master connections (-1: out of memory). */
int distlock__cl_set_init(distlock__transport *t, distlock__connset *cs);
void distlock__cl_set_free(distlock__transport *t, distlock__connset *cs);
/* Put the connection to the master that serves the call (ask >= 0: that
 * master, after an ASK) into cs->conns[i]. */
void distlock__cl_route(distlock__transport *t, distlock__connset *cs, int i,
                        const distlock__call *call, int ask);
/* The current master of cs->conns[i]: its port, the endpoint state its
 * connections carry and, when addr is not NULL and the master is given by
 * a numeric address, that address (48 bytes). 0: numeric, 1: a name (use
 * distlock__cl_resolve), -1: none. */
int distlock__cl_target(distlock__transport *t, distlock__connset *cs, int i, char *addr,
                        int *port, unsigned *ep_state);
/* The current master's host (from CLUSTER SLOTS or MOVED, a name or an
 * address), malloc'ed; NULL if none (or ENOMEM). */
char *distlock__cl_host(distlock__transport *t, distlock__connset *cs, int i);
/* Start resolving the current master's name (NULL on ENOMEM). */
distlock__resolve *distlock__cl_resolve(distlock__transport *t, distlock__connset *cs, int i);
/* A connection to the current master failed (refused, its name does not
 * resolve, no answer to its handshake): route its slots elsewhere. */
void distlock__cl_down(distlock__transport *t, distlock__connset *cs, int i);
/* Is another master than the current one not known to be down? */
int distlock__cl_elsewhere(distlock__transport *t, distlock__connset *cs, int i);
/* A master of node i, other than the one cs->conns[i] leads to, where a
 * request with `tag` is left behind that conns[i] cannot close (another
 * address, not known to be the same server): its index; -1 if none; -2 if
 * that master is no longer in the table. */
int distlock__cl_stale_master(distlock__transport *t, distlock__connset *cs, int i, uint64_t tag);
/* An error reply from master `from` (its host stands for an empty one):
 * MOVED (map updated; returns 1) or ASK (*ask: the master to ask; returns
 * 2); 0 if neither (or unparsable); -1 if its master has no room in the
 * table (cluster.c). */
int distlock__cl_redirect(distlock__transport *t, int i, int from, const char *err, int *ask);
/* A CLUSTER SLOTS reply from master m (its host stands for a NULL or an
 * empty one). */
void distlock__cl_learn(distlock__transport *t, int i, int m, const redisReply *rep);

#endif
