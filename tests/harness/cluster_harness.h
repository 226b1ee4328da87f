/* cluster_harness.h -- a Redis Cluster for C tests: 3 masters + 3 replicas
 * (real redis-server processes with cluster-enabled yes on free loopback
 * ports, made a cluster with `redis-cli --cluster create ... --cluster-replicas
 * 1 --cluster-yes`). rh_rcl_start returns once every node reports
 * cluster_state:ok and agrees on the slot owners. Stop with rh_rcl_stop.
 *
 * The servers are an rh_cluster (redis_harness.h): rh_command(rc, i, 0, ...)
 * talks to server i directly, rh_kill(rc, i) kills it. */
#ifndef DISTLOCK_CLUSTER_HARNESS_H
#define DISTLOCK_CLUSTER_HARNESS_H

#include "redis_harness.h"

typedef struct rh_rcl {
    rh_cluster *rc;          /* 6 servers (rh_rcl_start_n: masters * (1 + replicas)) */
    char uri[512];           /* redis-cluster://127.0.0.1:P1,127.0.0.1:P2,... (all of them) */
} rh_rcl;

/* NULL on failure (printed). */
rh_rcl *rh_rcl_start(void);
/* A cluster of `masters` (>= 3) masters with `replicas` replicas each (0: none,
 * masters * (1 + replicas) <= 16 servers); rh_rcl_start() is (3, 1). The uri
 * lists every server. */
rh_rcl *rh_rcl_start_n(int masters, int replicas);
/* The same over TLS only for clients (certs: a tests/harness/certs.sh
 * directory; the servers use certs/server.crt): tls-cluster and
 * tls-replication yes, created with redis-cli --tls; uri is
 * rediss-cluster://127.0.0.1:TLSPORT,... (no query: append the CA). The
 * plain ports stay for the rh_* helpers (rh_command); a client asking
 * CLUSTER SLOTS over TLS is told the TLS ports only (over a plain
 * connection Redis 7.0 answers with the plain ones: rh_rcl_owner maps
 * either to the server's index). */
rh_rcl *rh_rcl_start_tls(int masters, int replicas, const char *certs);
/* A TLS cluster of 3 masters (no replicas) whose servers are bound to, and
 * announce, 127.0.0.2, .3 and .4 (and 127.0.0.1, for the rh_* helpers), each
 * serving certs/ipN.crt, valid for its own address only; uri lists them
 * (rediss-cluster://127.0.0.2:TLSPORT,...). */
rh_rcl *rh_rcl_start_tls_own_ips(const char *certs);
/* Server i serves certs/NAME.crt (and NAME.key) to new TLS connections from
 * now on (CONFIG SET). 0 on success. */
int rh_rcl_set_cert(rh_rcl *c, int i, const char *name);
/* A plain cluster of `masters` masters (no replicas), and `spares` more
 * servers (the last ones) that joined it (CLUSTER MEET) as masters without
 * slots: CLUSTER SLOTS names them only once a slot is moved there. The uri
 * lists the masters only. */
rh_rcl *rh_rcl_start_spares(int masters, int spares);
void rh_rcl_stop(rh_rcl *c);
/* CLUSTER KEYSLOT key, asked of a server; -1 on error. */
int rh_rcl_keyslot(rh_rcl *c, const char *key);
/* The server index (into c->rc) of the master that owns slot, as server i
 * sees it (CLUSTER SLOTS); -1 if none. */
int rh_rcl_owner(rh_rcl *c, int i, int slot);
/* Sharded subscribers to channel on server i (PUBSUB SHARDNUMSUB counts the
 * server's own), -1 on error. */
long rh_rcl_shardnumsub(rh_rcl *c, int i, const char *channel);
/* Index of the first running server that is a master / a replica of master m. */
int rh_rcl_replica_of(rh_rcl *c, int m);
/* Move slot from master `from` to master `to` (CLUSTER SETSLOT IMPORTING /
 * MIGRATING, MIGRATE of every key in batches of `batch`, with `between`
 * called after each batch (may be NULL), then SETSLOT NODE on both and the
 * others). 0 on success. */
int rh_rcl_migrate_slot(rh_rcl *c, int slot, int from, int to, int batch,
                        void (*between)(void *), void *arg);
/* Wait (bounded) until every running server reports cluster_state:ok and
 * the running masters' CLUSTER SLOTS agree on slot's owner. 0 on success. */
int rh_rcl_wait_ok(rh_rcl *c, long timeout_ms);
/* A key (written to buf) of the form prefix:N that hashes to slot. */
const char *rh_rcl_key_in_slot(rh_rcl *c, const char *prefix, int slot, char *buf, size_t size);
/* Is server i a master now (ROLE)? */
int rh_rcl_is_master(rh_rcl *c, int i);
/* Server index listening on port (plain or TLS), -1 if none. */
int rh_rcl_index_of_port(rh_rcl *c, int port);

/* The port / the host name (the endpoint, written to host) that server i's
 * CLUSTER SLOTS gives for slot's master: -1 if none (rh_rcl_slot_host: or
 * if the endpoint is not a string). */
int rh_rcl_slot_port(rh_rcl *c, int i, int slot);
int rh_rcl_slot_host(rh_rcl *c, int i, int slot, char *host, size_t size);
/* 1 if server i answered the command without an error (else the error is
 * printed to stderr and 0 returned). */
int rh_rcl_command_ok(rh_rcl *c, int i, const char *fmt, ...);
/* Server i announces `port` to the cluster (and its own bus port, port +
 * 10000 of the port it listens on): 1 on success, as rh_rcl_command_ok. */
int rh_rcl_announce_port(rh_rcl *c, int i, int port);
/* After its master died: wait until server `replica` is a master and the
 * cluster is ok again (timeout_ms for each). 0 on success. */
int rh_rcl_wait_promoted(rh_rcl *c, int replica, long timeout_ms);

#endif
