/* sentinel_harness.h -- a Sentinel-managed group for C tests: 1 master,
 * 2 replicas, 3 sentinels by default (real redis-server processes), driven
 * through sentinels.py (see its header), over TLS if asked. Call from the
 * main thread. */
#ifndef DISTLOCK_SENTINEL_HARNESS_H
#define DISTLOCK_SENTINEL_HARNESS_H

#include <sys/types.h>

typedef struct rh_sentinels {
    pid_t pid;              /* sentinels.py */
    int in_fd, out_fd;
    char rbuf[2048];
    size_t rlen;
    int data_port[3];       /* data_port[0] is the first master; 0: none */
    int sentinel_port[3];
    char uri[512];          /* redis-sentinel://... with the credentials given */
} rh_sentinels;

typedef struct rh_sentinels_opts {
    const char *data_pass;       /* requirepass/masterauth of the data nodes, or NULL */
    const char *sentinel_user;   /* the sentinels' ACL user (default user off), or NULL */
    const char *sentinel_pass;   /* the sentinels' password, or NULL */
    int down_after_ms;           /* 0: 1000 */
    int failover_timeout_ms;     /* 0: 3000 */
    const char *tls_dir;         /* certs.sh's directory: TLS only, client certs required */
    int replicas;                /* 0: 2; -1: none */
    int sentinels;               /* 0: 3 */
    int quorum;                  /* 0: 2 */
    int resync_delay_s;          /* 0: none; else a failover ends seconds after its
                                    promotion (sentinels.py --resync-delay-s) */
    const char *data_ip;         /* the data nodes listen (and are named) there only, e.g.
                                    127.0.0.2; NULL: 127.0.0.1 */
    const char *data_cert;       /* with tls_dir: the data nodes' certificate (NAME.crt,
                                    NAME.key in tls_dir), e.g. "ip2"; NULL: server */
} rh_sentinels_opts;

/* NULL on failure (printed). Waits until the group is ready. */
rh_sentinels *rh_sentinels_start(const rh_sentinels_opts *o);
void rh_sentinels_stop(rh_sentinels *s);
/* One command of sentinels.py; the port it answers, 0 for a bare "ok",
 * -1 on error (printed). */
int rh_sentinels_cmd(rh_sentinels *s, long timeout_ms, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The current master's port (confirmed by ROLE). */
int rh_sentinels_master(rh_sentinels *s);
/* SENTINEL FAILOVER; returns the new master's port once it is one. */
int rh_sentinels_failover(rh_sentinels *s);
/* SIGSTOP / SIGCONT of a data node. */
int rh_sentinels_signal(rh_sentinels *s, int port, int stop);
/* SIGKILL of a data node. */
int rh_sentinels_kill(rh_sentinels *s, int port);
/* The data node at port holds key: 1 with the value `value`, 2 with
 * another, 0 absent, -1 error (through the harness's own client, which
 * speaks TLS to a TLS group). */
int rh_sentinels_has(rh_sentinels *s, int port, const char *key, const char *value);
/* Waits until the sentinels name a master other than old_port; its port. */
int rh_sentinels_wait_master_not(rh_sentinels *s, int old_port, long timeout_ms);

#endif
