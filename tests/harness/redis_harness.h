/*
 * redis_harness.h -- throwaway redis-server processes for the C tests.
 *
 * Same settings as tests/harness/redis.sh: loopback only, a random free port,
 * no persistence, a Unix socket DIR/redis-PORT.sock, DEBUG allowed locally.
 * Every server is a child of the test process (killed by the kernel if the
 * test process dies: PR_SET_PDEATHSIG) and is stopped by rh_stop_all().
 *
 * The rh_* query helpers talk to a node directly with hiredis, behind the
 * library's back, so a test can check what is really stored on each node.
 *
 * Faults on single connections (delay, hold, a request that arrives after the
 * client dropped the connection, reset mid-reply, partition, slow accept):
 * put tests/harness/faultproxy.py in front of the nodes with fp_front(rc)
 * from faultproxy.h. Slow/failing name resolution: slowdns.h. See
 * tests/harness/README.md.
 */
#ifndef DISTLOCK_REDIS_HARNESS_H
#define DISTLOCK_REDIS_HARNESS_H

#include <stddef.h>
#include <sys/types.h>
#include <hiredis/hiredis.h>

#define RH_MAX_NODES 8

typedef struct rh_node {
    int port;
    int tls_port;  /* rh_start_tls: its TLS port (the plain port stays, for the rh_* helpers) */
    pid_t pid;     /* 0 when not running (killed) */
    int stopped;   /* SIGSTOPped */
    char sock[108];
    char ip[16];   /* rh_start_cluster_mode_tls_at: also bound there, and announced */
} rh_node;

typedef struct rh_cluster {
    int n;
    char dir[64];
    rh_node node[RH_MAX_NODES];
    char uris[RH_MAX_NODES * 40];
    int aof;       /* started by rh_start_aof: appendonly + appendfsync always */
    char tls_certs[64];   /* rh_start_tls: the certificates' directory */
    char tls_name[32];    /* the server's certificate: tls_certs/NAME.crt, NAME.key */
    int tls_auth_clients; /* --tls-auth-clients yes */
    int cluster_mode;     /* rh_start_cluster_mode: cluster-enabled yes (bus port = port + 10000) */
} rh_cluster;

/* Start n servers (1..RH_MAX_NODES). NULL (message on stderr) on failure. */
rh_cluster *rh_start(int n);
/* The same with persistence: appendonly yes + appendfsync always (each write
 * is on disk before its reply is sent), so a node that is SIGKILLed and then
 * rh_restart()ed comes back with every key it acknowledged (Redlock's
 * assumption). The AOF directories live in the temp dir and go with it. */
rh_cluster *rh_start_aof(int n);
/* TLS: make a fresh CA and certificates with tests/harness/certs.sh into a
 * new temp dir (written to dir); 0 on success. rh_remove_certs removes it. */
int rh_make_certs(char *dir, size_t size);
void rh_remove_certs(const char *dir);
/* n servers with a TLS port each (rc->node[i].tls_port) besides the plain
 * one, presenting certs/NAME.crt ("server", "expired", "wrongname",
 * "badca": see certs.sh), trusting certs/ca.crt for client certificates,
 * requiring one when auth_clients. */
rh_cluster *rh_start_tls(int n, const char *certs, const char *name, int auth_clients);
/* rediss://127.0.0.1:TLSPORT[?query],... of the nodes in mask. */
const char *rh_tls_uris_mask(const rh_cluster *rc, unsigned mask, const char *query, char *buf,
                             size_t size);
/* n servers with cluster-enabled yes (not yet a cluster: see
 * cluster_harness.h), each with its cluster bus port (port + 10000) free. */
rh_cluster *rh_start_cluster_mode(int n);
/* Cluster mode with TLS (certs/server.crt): --tls-cluster and
 * --tls-replication yes, so the bus and replication use TLS and CLUSTER
 * SLOTS announces the TLS ports; the plain port stays for the rh_* helpers
 * only (no client is ever told of it). */
rh_cluster *rh_start_cluster_mode_tls(int n, const char *certs);
/* The same with server i also bound to ips[i] (a loopback address such as
 * 127.0.0.2) and announcing it (cluster-announce-ip): the cluster names
 * its nodes by those addresses. The cluster bus listens only where the
 * server was bound at start, hence an option of the start. */
rh_cluster *rh_start_cluster_mode_tls_at(int n, const char *certs, const char *const *ips);
/* Stop every server (SIGCONT, SIGTERM, then SIGKILL), remove the temp dir,
 * free. NULL is a no-op. */
void rh_stop_all(rh_cluster *rc);

int rh_kill(rh_cluster *rc, int i);     /* SIGKILL and reap; 0 on success */
int rh_pause(rh_cluster *rc, int i);    /* SIGSTOP */
int rh_resume(rh_cluster *rc, int i);   /* SIGCONT */
int rh_restart(rh_cluster *rc, int i);  /* kill if running, start on the same port */
/* Bring the cluster back to a clean state for the next test: resume stopped
 * nodes, restart dead ones, FLUSHALL and SCRIPT FLUSH everywhere. 0 on success. */
int rh_heal(rh_cluster *rc);

/* Comma list redis://127.0.0.1:P,... of all nodes, or of the nodes whose bit
 * is set in mask (written to buf). */
const char *rh_uris(const rh_cluster *rc);
const char *rh_uris_mask(const rh_cluster *rc, unsigned mask, char *buf, size_t size);

/* Connection name the harness gives its own connections. */
#define RH_CLIENT_NAME "rh-harness"

/* A fresh hiredis connection to node i, database db (caller frees). NULL on error. */
redisContext *rh_connect(const rh_cluster *rc, int i, int db);
/* Run one command on node i / db; returns the reply (caller frees) or NULL. */
redisReply *rh_command(const rh_cluster *rc, int i, int db, const char *fmt, ...);

/* GET: 1 and the value copied to buf when the key exists, 0 when absent, -1 on error. */
int rh_get(const rh_cluster *rc, int i, int db, const char *key, char *buf, size_t size);
/* PTTL: ms left, -1 no expiry, -2 absent, -3 on error. */
long long rh_pttl(const rh_cluster *rc, int i, int db, const char *key);
/* SET key val [PX px] (px <= 0: no expiry). 0 on success. */
int rh_set(const rh_cluster *rc, int i, int db, const char *key, const char *val, long px);
/* DEL: number of keys deleted, -1 on error. */
int rh_del(const rh_cluster *rc, int i, int db, const char *key);
int rh_script_flush(const rh_cluster *rc, int i);
int rh_flushall(const rh_cluster *rc, int i);
/* Ids of node i's client connections that are not the harness's own and
 * whose last command starts with cmd_prefix (NULL: any command, including
 * none yet). Returns how many were stored in ids (at most max), -1 on error. */
int rh_lib_conn_ids(const rh_cluster *rc, int i, const char *cmd_prefix, long long *ids, int max);
/* How many such connections are not listed in before[0..nbefore). */
int rh_new_lib_conns(const rh_cluster *rc, int i, const char *cmd_prefix,
                     const long long *before, int nbefore);

/* Number of nodes (among the running ones) where key holds exactly `token`
 * (token NULL: holds anything). */
int rh_count_holding(const rh_cluster *rc, const char *key, const char *token);
/* Make node i unresponsive for `ms` milliseconds with DEBUG SLEEP, sent
 * asynchronously; returns once the node is seen busy. 0 on success. */
int rh_debug_sleep(const rh_cluster *rc, int i, long ms);

/* Monotonic clock in milliseconds. */
long long rh_now_ms(void);
/* Bytes a server-side connection on the loopback port has received and its
 * server not read (the most of any connection; the kernel's, /proc/net/tcp):
 * while the server is stopped, a request written to it shows here. -1 on
 * error. */
long rh_tcp_unread(int port);
/* The major version of the redis-server on PATH (Valkey's own: 8), 0 if unknown. */
int rh_server_major(void);

/* Poll `cond` every few ms until it is true or timeout_ms passes; evaluates
 * to 1 if it became true. For waiting on a condition, never as a sleep. */
#define RH_WAIT_UNTIL(cond, timeout_ms) ({                                   \
        long long rh__end = rh_now_ms() + (timeout_ms);                      \
        int rh__ok = 0;                                                      \
        for (;;) {                                                           \
            if (cond) { rh__ok = 1; break; }                                 \
            if (rh_now_ms() > rh__end) break;                                \
            rh_sleep_ms(5);                                                  \
        }                                                                    \
        rh__ok; })
void rh_sleep_ms(long ms);

/* True if s is exactly 32 lowercase hex characters. */
int rh_is_hex32(const char *s);

/* ---- replicas (WAIT for replicas) ----
 * Make node `replica` a replica of node `master` (REPLICAOF), then poll
 * INFO replication until its link is up and the master lists it online.
 * 0 on success. rh_heal() does not undo it (FLUSHALL fails on a replica:
 * flush the master and wait for rh_dbsize() of the replica to be 0). */
int rh_replicate(rh_cluster *rc, int replica, int master);
/* DBSIZE of node i, -1 on error. */
int rh_dbsize(const rh_cluster *rc, int i);
/* A connection to 127.0.0.1:port (2 s timeouts) authenticated with AUTH
 * [user] pass (user NULL: the default user), or NULL. */
redisContext *rh_auth_connect(int port, const char *user, const char *pass);
/* 1 if a TCP connect to 127.0.0.1:port is refused at once (nothing listens). */
int rh_port_refused(int port);

#endif
