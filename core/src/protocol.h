/* protocol.h -- layer 2: the lock protocol on one node (protocol.c).
 *
 * May call: transport (for its request and reply types), base.
 * Called by: quorum, operations, background threads. */
#ifndef DISTLOCK_PROTOCOL_H
#define DISTLOCK_PROTOCOL_H

#include "transport.h"

/* The scripts, by index in distlock__scripts (given to the transport). */
enum {
    DISTLOCK__S_ACQUIRE, DISTLOCK__S_RELEASE, DISTLOCK__S_EXTEND,
    DISTLOCK__S_RAISE, DISTLOCK__S_INSPECT, DISTLOCK__S_FAIR, DISTLOCK__S_LEAVE,
    DISTLOCK__S_FAIR_UNDO,
    /* the same with SPUBLISH, for Redis Cluster nodes (cl_script) */
    DISTLOCK__S_RELEASE_SH, DISTLOCK__S_FAIR_SH, DISTLOCK__S_LEAVE_SH,
    DISTLOCK__S_FAIR_UNDO_SH,
    /* batched renewal of keys of many slots on one cluster master (watchdog) */
    DISTLOCK__S_EXTEND_MULTI,
    /* zset leases: a read lock's or a semaphore permit's acquire; a
     * waiting writer's intent withdrawn (and its _SH variant) */
    DISTLOCK__S_ZACQUIRE, DISTLOCK__S_WRITE_LEAVE, DISTLOCK__S_WRITE_LEAVE_SH,
    /* several keys (distlock_acquire_many, keyset.c): one call per node, or
     * per hash slot on a Redis Cluster node, for all keys of the set */
    DISTLOCK__S_ACQUIRE_MANY, DISTLOCK__S_RELEASE_MANY, DISTLOCK__S_RELEASE_MANY_SH,
    DISTLOCK__S_EXTEND_MANY, DISTLOCK__S_RAISE_MANY,
    DISTLOCK__S_COUNT
};
extern const distlock__script distlock__scripts[DISTLOCK__S_COUNT] DISTLOCK__HIDDEN;

/* The error an older server gives SET ... NX GET (Redis < 7) and
 * SCAN ... TYPE (Redis < 6). */
#define DISTLOCK__SYNTAX_ERROR "ERR syntax"
/* SET ... NX GET exists from Redis 7.0 (major * 10000 + minor * 100 + patch,
 * as the transport reads a server's version from its handshake). */
#define DISTLOCK__SET_GET_SINCE 70000

/* SCAN ... TYPE string for a server without TYPE (Redis 5): EVAL it with 0
 * keys and ARGV cursor pattern count; answers as SCAN does ({cursor,
 * keys}), keeping only the string keys of the step. */
extern const char distlock__scan_strings_script[] DISTLOCK__HIDDEN;
/* The same step keeping the string keys and the zsets that are read locks
 * or semaphores (the semaphore marker, `__write__`, or a lowest score above
 * 10^12: tokens scored by their expiry in ms since the epoch). */
extern const char distlock__scan_leases_script[] DISTLOCK__HIDDEN;

/* Keys kept beside a lock key (queue, fence counter) in the same Redis
 * Cluster hash slot; buf must hold DISTLOCK__SIDEKEY_MAX bytes. */
#define DISTLOCK__SIDEKEY_MAX (DISTLOCK_KEY_MAX + 32)
void distlock__sidekey(char *buf, const char *key, const char *suffix);
/* The suffix of a lock's fence counter ({key}:fence). */
#define DISTLOCK__FENCE_SUFFIX ":fence"
/* The suffix of a lock's owner metadata ({key}:owner, a hash). */
#define DISTLOCK__OWNER_SUFFIX ":owner"
/* The suffix of a key's registry of waiting writers ({key}:writers, a
 * sorted set: writer -> the end of its intent), kept so that one writer's
 * leave does not withdraw the intent the others still need. */
#define DISTLOCK__WRITERS_SUFFIX ":writers"
/* 1 if k (len bytes) is the side key `suffix` of some lock key (as
 * distlock__sidekey names it), else 0. */
int distlock__is_sidekey(const char *k, size_t len, const char *suffix);
/* Every side key of key is in key's Redis Cluster hash slot. False only
 * for a key with a '}' but no hash tag (e.g. "a}b", "{}x"): no name of the
 * rule above shares its slot. */
int distlock__sidekeys_in_slot(const char *key);
/* The channel a release of key is published on ("distlock:" key); buf must
 * hold DISTLOCK__SIDEKEY_MAX bytes. Returns its length. */
size_t distlock__channel_name(char *buf, const char *key);
/* 1 when channel is key's release channel (distlock__channel_name's). */
int distlock__channel_is_of(const char *channel, const char *key);
/* The sharded pub/sub channel of key on a Redis Cluster node, in key's
 * slot (SPUBLISH from a script must name a channel of its node; same slot:
 * it migrates with the key): "distlock:" key when key has a hash tag,
 * "distlock:{" key "}" when it has no '}', else "distlock:{N}" key with the
 * smallest N in key's slot. buf: DISTLOCK__SIDEKEY_MAX bytes. Returns its
 * length. */
size_t distlock__shard_channel_name(char *buf, const char *key);
/* Set call's Redis Cluster variant: script sh, with argv[arg] (the channel)
 * replaced by the shard channel in buf (DISTLOCK__SIDEKEY_MAX bytes). */
void distlock__call_sharded(distlock__call *call, int sh, int arg, char *buf, const char *key);
/* The transport's ordering tag for requests about one ownership (key and
 * token): a request never overtakes an earlier one with the same tag. */
uint64_t distlock__lock_tag(const char *key, const char *token);
/* What requests of one lock_tag are about, in the transport's messages
 * about their ordering (distlock__call.subject: "an earlier request for
 * this lock ..."). */
#define DISTLOCK__LOCK_SUBJECT "this lock"

/* What a node's reply to an acquire, release or extend says: 1 granted, 0
 * refused (held by another, or not ours), -1 failed, -2 no answer (yet).
 * An error reply is a failure, never "held" or "not ours": a script or a
 * command the server refused (an ACL without a command it needs, WRONGTYPE
 * for a key of another type, OOM) says nothing about who holds the key. */
int distlock__reply_verdict(const distlock__result *r);
/* The same for key j (0-based) of a reply that answers per key (a set's
 * release or extend: {r1..rm}, 1 done, 0 not ours); an error reply, or
 * an element other than 0 or 1, is a failure (-1) of every key. */
int distlock__reply_key_verdict(const distlock__result *r, size_t j);
/* A grant whose WAIT saw fewer replicas acknowledge than asked (or failed):
 * reply_verdict says -1 for it. */
int distlock__wait_short(const distlock__result *r);
/* An error reply that says the node is unavailable for now rather than
 * that it refused the request: a Redis Cluster that is down (CLUSTERDOWN),
 * a slot still migrating (TRYAGAIN), or redirects beyond the limit (MOVED,
 * ASK). Callers report it as DISTLOCK_ECONN. */
int distlock__reply_unavailable(const distlock__result *r);
/* The node refused the request: an error reply (or the error a script
 * gave as its first element) other than reply_unavailable's. What a
 * refusal means for the lock is the quorum's rule (distlock__verdict). */
int distlock__reply_refused(const distlock__result *r);
/* The error text of a reply or of its first element, else NULL. */
const char *distlock__reply_error(const distlock__result *r);
/* Integer element idx of an array reply, else -1. */
int64_t distlock__reply_int(const distlock__result *r, size_t idx);
/* The node refused because the key already holds this very token. */
int distlock__reply_holds_own(const distlock__result *r, const char *token);
/* The key already held this very token before the request ran (an acquire's
 * reply): holds_own, or the acquire script's refresh ({1, fence, 1}). */
int distlock__reply_held_own(const distlock__result *r, const char *token);

#endif
