/* redis_harness.c -- see redis_harness.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "redis_harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

long long rh_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long rh_tcp_unread(int port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    if (f == NULL)
        return -1;
    char line[512];
    long most = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned lport = 0, st = 0;
        unsigned long tx = 0, rx = 0;
        if (sscanf(line, " %*d: %*x:%x %*x:%*x %x %lx:%lx", &lport, &st, &tx, &rx) == 4 &&
            (int)lport == port && st == 1 /* ESTABLISHED */ && (long)rx > most)
            most = (long)rx;
    }
    fclose(f);
    return most;
}

void rh_sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

int rh_is_hex32(const char *s)
{
    if (!s || strlen(s) != 32) return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
    return 1;
}

/* A port nobody listens on right now (a hint only: the server may still lose
 * the race, which spawn_on_port detects). */
static int port_looks_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

static redisContext *connect_port(int port, long timeout_ms)
{
    struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!ctx) return NULL;
    if (ctx->err) { redisFree(ctx); return NULL; }
    redisSetTimeout(ctx, tv);
    return ctx;
}

/* The pid the server on `port` reports, or -1. Used to make sure we talk to
 * our own child and not to some other server that holds the port. */
static long server_pid(int port)
{
    redisContext *ctx = connect_port(port, 500);
    if (!ctx) return -1;
    long pid = -1;
    redisReply *r = redisCommand(ctx, "INFO server");
    if (r && r->type == REDIS_REPLY_STRING) {
        const char *p = strstr(r->str, "process_id:");
        if (p) pid = strtol(p + 11, NULL, 10);
    }
    if (r) freeReplyObject(r);
    redisFree(ctx);
    return pid;
}

static int server_major;
static pthread_once_t server_major_once = PTHREAD_ONCE_INIT;

static void ask_server_major(void)
{
    FILE *f = popen("redis-server --version 2>/dev/null", "r");
    char line[256];
    if (f && fgets(line, sizeof line, f)) {
        const char *v = strstr(line, " v=");  /* "Redis server v=7.0.15 sha=..." */
        if (v) server_major = atoi(v + 3);
    }
    if (f) pclose(f);
}

int rh_server_major(void)
{
    /* asked once: PATH does not change under a test */
    pthread_once(&server_major_once, ask_server_major);
    return server_major;
}

/* Start redis-server on port; wait until it answers as our child. */
static int spawn_on_port(rh_cluster *rc, int i, int port)
{
    /* options of Redis 7.0+, left out for older servers (scripts/server-matrix.sh),
     * which allow DEBUG anyway and keep the AOF in --dir */
    int modern = rh_server_major() >= 7;
    char portstr[16], sock[108], logf[128];
    snprintf(portstr, sizeof portstr, "%d", port);
    snprintf(sock, sizeof sock, "%s/redis-%d.sock", rc->dir, port);
    snprintf(logf, sizeof logf, "%s/redis-%d.log", rc->dir, port);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        /* Dies with the test process, whatever happens to it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) { dup2(devnull, 0); dup2(devnull, 1); dup2(devnull, 2); }
        char aofdir[64], tlsport[16], crt[512], key[512], ca[512], nodes[64], ccrt[512], ckey[512];
        snprintf(aofdir, sizeof aofdir, "redis-%d-aof", port);
        const char *argv[56];
        int a = 0;
        argv[a++] = "redis-server";
        argv[a++] = "--port"; argv[a++] = portstr;
        argv[a++] = "--bind"; argv[a++] = "127.0.0.1";
        if (rc->node[i].ip[0]) argv[a++] = rc->node[i].ip;
        argv[a++] = "--save"; argv[a++] = "";
        argv[a++] = "--dir"; argv[a++] = rc->dir;
        argv[a++] = "--logfile"; argv[a++] = logf;
        argv[a++] = "--unixsocket"; argv[a++] = sock;
        argv[a++] = "--unixsocketperm"; argv[a++] = "700";
        if (modern) { argv[a++] = "--enable-debug-command"; argv[a++] = "local"; }
        argv[a++] = "--daemonize"; argv[a++] = "no";
        if (rc->aof) {
            argv[a++] = "--appendonly"; argv[a++] = "yes";
            argv[a++] = "--appendfsync"; argv[a++] = "always";
            if (modern) { argv[a++] = "--appenddirname"; argv[a++] = aofdir; }
        } else {
            argv[a++] = "--appendonly"; argv[a++] = "no";
        }
        if (rc->cluster_mode) {
            /* its nodes.conf starts with "redis-": rh_stop_all removes it */
            snprintf(nodes, sizeof nodes, "redis-%d-nodes.conf", port);
            argv[a++] = "--cluster-enabled"; argv[a++] = "yes";
            argv[a++] = "--cluster-config-file"; argv[a++] = nodes;
            argv[a++] = "--cluster-node-timeout"; argv[a++] = "2000";
            if (rc->node[i].ip[0]) { argv[a++] = "--cluster-announce-ip"; argv[a++] = rc->node[i].ip; }
        }
        if (rc->tls_certs[0]) {
            /* TLS on its own port; the plain port stays for the harness. */
            snprintf(tlsport, sizeof tlsport, "%d", rc->node[i].tls_port);
            snprintf(crt, sizeof crt, "%s/%s.crt", rc->tls_certs, rc->tls_name);
            snprintf(key, sizeof key, "%s/%s.key", rc->tls_certs, rc->tls_name);
            snprintf(ca, sizeof ca, "%s/ca.crt", rc->tls_certs);
            argv[a++] = "--tls-port"; argv[a++] = tlsport;
            argv[a++] = "--tls-cert-file"; argv[a++] = crt;
            argv[a++] = "--tls-key-file"; argv[a++] = key;
            argv[a++] = "--tls-ca-cert-file"; argv[a++] = ca;
            argv[a++] = "--tls-auth-clients"; argv[a++] = rc->tls_auth_clients ? "yes" : "no";
            if (rc->cluster_mode) {
                /* bus, replication and the ports CLUSTER SLOTS announces: TLS
                 * (the bus port is then the TLS port + 10000); the bus is
                 * mutual TLS, server.crt is for serverAuth only */
                snprintf(ccrt, sizeof ccrt, "%s/client.crt", rc->tls_certs);
                snprintf(ckey, sizeof ckey, "%s/client.key", rc->tls_certs);
                argv[a++] = "--tls-cluster"; argv[a++] = "yes";
                argv[a++] = "--tls-replication"; argv[a++] = "yes";
                argv[a++] = "--tls-client-cert-file"; argv[a++] = ccrt;
                argv[a++] = "--tls-client-key-file"; argv[a++] = ckey;
            }
        }
        argv[a] = NULL;
        execvp("redis-server", (char *const *)argv);
        _exit(127);
    }
    long long end = rh_now_ms() + 10000;
    while (rh_now_ms() < end) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) return -1;   /* port taken, or no binary */
        if (server_pid(port) == (long)pid) {
            rc->node[i].port = port;
            rc->node[i].pid = pid;
            rc->node[i].stopped = 0;
            snprintf(rc->node[i].sock, sizeof rc->node[i].sock, "%s", sock);
            return 0;
        }
        rh_sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static void build_uris(rh_cluster *rc)
{
    rh_uris_mask(rc, (1u << rc->n) - 1, rc->uris, sizeof rc->uris);
}

/* Ports for the servers, outside the kernel's ephemeral range: a port in
 * that range can be taken as the local port of some outgoing connection
 * (ours or a parallel test's) while its server is down, and rh_restart then
 * could not bind it again. */
static void port_range(int *lo, int *span)
{
    int elo = 32768, ehi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &elo, &ehi) != 2) elo = 32768, ehi = 60999;
        fclose(f);
    }
    if (elo - 10000 >= 2000) {
        *lo = 10000, *span = elo - 10000;
    } else {
        *lo = ehi + 1, *span = 65535 - ehi;
    }
}

static rh_cluster *start_cluster(int n, int aof, const char *certs, const char *name,
                                 int auth_clients, int cluster_mode, const char *const *ips)
{
    if (n < 1 || n > RH_MAX_NODES) return NULL;
    rh_cluster *rc = calloc(1, sizeof *rc);
    if (!rc) return NULL;
    for (int i = 0; ips && i < n; i++)
        snprintf(rc->node[i].ip, sizeof rc->node[i].ip, "%s", ips[i]);
    rc->aof = aof;
    rc->cluster_mode = cluster_mode;
    if (certs) {
        snprintf(rc->tls_certs, sizeof rc->tls_certs, "%s", certs);
        snprintf(rc->tls_name, sizeof rc->tls_name, "%s", name ? name : "server");
        rc->tls_auth_clients = auth_clients;
    }
    snprintf(rc->dir, sizeof rc->dir, "/tmp/dltest-XXXXXX");
    if (!mkdtemp(rc->dir)) { perror("mkdtemp"); free(rc); return NULL; }
    srandom((unsigned)(getpid() ^ (unsigned)rh_now_ms()));
    int lo, span;
    port_range(&lo, &span);
    if (cluster_mode)
        span -= 10000;  /* the bus port (port + 10000) stays in the range too */
    for (int i = 0; i < n; i++) {
        int ok = 0;
        for (int tries = 0; tries < 50 && !ok; tries++) {
            int port = lo + (int)(random() % span);
            int dup = 0;
            for (int j = 0; j < i; j++) dup |= rc->node[j].port == port;
            for (int j = 0; j < i && cluster_mode; j++)
                dup |= rc->node[j].port + 10000 == port || rc->node[j].port == port + 10000;
            if (dup || !port_looks_free(port)) continue;
            if (cluster_mode && !port_looks_free(port + 10000)) continue;
            if (rc->tls_certs[0]) {
                int tp = lo + (int)(random() % span);
                for (int j = 0; j < i; j++) dup |= rc->node[j].tls_port == tp || rc->node[j].port == tp;
                if (dup || tp == port || !port_looks_free(tp)) continue;
                if (cluster_mode) {  /* tls-cluster: the bus is on tp + 10000 */
                    for (int j = 0; j < i; j++)
                        dup |= rc->node[j].tls_port == tp + 10000 || rc->node[j].port == tp + 10000 ||
                               rc->node[j].port + 10000 == tp;
                    if (dup || tp + 10000 == port || tp == port + 10000 || !port_looks_free(tp + 10000))
                        continue;
                }
                rc->node[i].tls_port = tp;
            }
            ok = spawn_on_port(rc, i, port) == 0;
        }
        rc->n = i + ok;
        if (!ok) {
            fprintf(stderr, "redis_harness: could not start redis-server #%d\n", i);
            rh_stop_all(rc);
            return NULL;
        }
    }
    build_uris(rc);
    return rc;
}

rh_cluster *rh_start(int n) { return start_cluster(n, 0, NULL, NULL, 0, 0, NULL); }
rh_cluster *rh_start_aof(int n) { return start_cluster(n, 1, NULL, NULL, 0, 0, NULL); }
rh_cluster *rh_start_cluster_mode(int n) { return start_cluster(n, 0, NULL, NULL, 0, 1, NULL); }
rh_cluster *rh_start_cluster_mode_tls(int n, const char *certs)
{
    return start_cluster(n, 0, certs, "server", 0, 1, NULL);
}
rh_cluster *rh_start_cluster_mode_tls_at(int n, const char *certs, const char *const *ips)
{
    return start_cluster(n, 0, certs, "server", 0, 1, ips);
}
rh_cluster *rh_start_tls(int n, const char *certs, const char *name, int auth_clients)
{
    return start_cluster(n, 0, certs, name, auth_clients, 0, NULL);
}

int rh_make_certs(char *dir, size_t size)
{
    snprintf(dir, size, "/tmp/dlcerts-XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return -1; }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "bash '%s/certs.sh' '%s'", DISTLOCK_HARNESS_DIR, dir);
    return system(cmd) == 0 ? 0 : -1;
}

void rh_remove_certs(const char *dir)
{
    char cmd[600];
    if (strncmp(dir, "/tmp/dlcerts-", 13) != 0 || strchr(dir, '\'') != NULL) return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "redis_harness: could not remove %s\n", dir);
}

const char *rh_tls_uris_mask(const rh_cluster *rc, unsigned mask, const char *query, char *buf,
                             size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < rc->n; i++) {
        if (!(mask & (1u << i))) continue;
        int w = snprintf(buf + off, size - off, "%srediss://127.0.0.1:%d%s%s", off ? "," : "",
                         rc->node[i].tls_port, query && *query ? "?" : "", query ? query : "");
        if (w < 0 || (size_t)w >= size - off) break;
        off += (size_t)w;
    }
    return buf;
}

/* Remove dir/name, and its files if it is a directory (one level: an AOF dir). */
static void remove_entry(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (unlink(path) == 0 || errno != EISDIR) return;
    DIR *d = opendir(path);
    struct dirent *e;
    char sub[1024];
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        unlink(sub);
    }
    if (d) closedir(d);
    rmdir(path);
}

static void stop_pid(pid_t pid)
{
    kill(pid, SIGCONT);
    kill(pid, SIGTERM);
    long long end = rh_now_ms() + 3000;
    while (rh_now_ms() < end) {
        if (waitpid(pid, NULL, WNOHANG) == pid) return;
        rh_sleep_ms(5);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

void rh_stop_all(rh_cluster *rc)
{
    if (!rc) return;
    for (int i = 0; i < rc->n; i++) {
        if (rc->node[i].pid > 0) stop_pid(rc->node[i].pid);
        rc->node[i].pid = 0;
    }
    if (!getenv("DISTLOCK_TEST_KEEP")) {
        /* Logs and sockets of every server started here, including the
         * attempts that lost their port to someone else. */
        DIR *d = opendir(rc->dir);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (strncmp(e->d_name, "redis-", 6) != 0 && strcmp(e->d_name, "dump.rdb") != 0)
                continue;
            remove_entry(rc->dir, e->d_name);
        }
        if (d) closedir(d);
        rmdir(rc->dir);
    }
    free(rc);
}

int rh_kill(rh_cluster *rc, int i)
{
    if (i < 0 || i >= rc->n || rc->node[i].pid <= 0) return -1;
    kill(rc->node[i].pid, SIGKILL);
    waitpid(rc->node[i].pid, NULL, 0);
    rc->node[i].pid = 0;
    rc->node[i].stopped = 0;
    return 0;
}

int rh_pause(rh_cluster *rc, int i)
{
    if (i < 0 || i >= rc->n || rc->node[i].pid <= 0) return -1;
    if (kill(rc->node[i].pid, SIGSTOP) != 0) return -1;
    rc->node[i].stopped = 1;
    return 0;
}

int rh_resume(rh_cluster *rc, int i)
{
    if (i < 0 || i >= rc->n || rc->node[i].pid <= 0) return -1;
    if (kill(rc->node[i].pid, SIGCONT) != 0) return -1;
    rc->node[i].stopped = 0;
    return 0;
}

int rh_restart(rh_cluster *rc, int i)
{
    if (i < 0 || i >= rc->n) return -1;
    if (rc->node[i].pid > 0) rh_kill(rc, i);
    /* The port was ours a moment ago; retry briefly if the kernel still has it. */
    for (int tries = 0; tries < 20; tries++) {
        if (spawn_on_port(rc, i, rc->node[i].port) == 0) return 0;
        rh_sleep_ms(50);
    }
    fprintf(stderr, "redis_harness: could not restart node %d on port %d\n", i, rc->node[i].port);
    return -1;
}

int rh_heal(rh_cluster *rc)
{
    for (int i = 0; i < rc->n; i++) {
        if (rc->node[i].pid > 0 && rc->node[i].stopped) rh_resume(rc, i);
        if (rc->node[i].pid <= 0 && rh_restart(rc, i) != 0) return -1;
        if (rh_flushall(rc, i) != 0 || rh_script_flush(rc, i) != 0) return -1;
    }
    return 0;
}

const char *rh_uris(const rh_cluster *rc)
{
    return rc->uris;
}

const char *rh_uris_mask(const rh_cluster *rc, unsigned mask, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < rc->n; i++) {
        if (!(mask & (1u << i))) continue;
        int w = snprintf(buf + len, size - len, "%sredis://127.0.0.1:%d",
                         len ? "," : "", rc->node[i].port);
        if (w < 0 || (size_t)w >= size - len) break;
        len += (size_t)w;
    }
    return buf;
}

redisContext *rh_connect(const rh_cluster *rc, int i, int db)
{
    if (i < 0 || i >= rc->n || rc->node[i].pid <= 0) return NULL;
    redisContext *ctx = connect_port(rc->node[i].port, 2000);
    if (!ctx) return NULL;
    /* Named, so tests can tell the library's connections from ours in CLIENT LIST. */
    redisReply *n = redisCommand(ctx, "CLIENT SETNAME " RH_CLIENT_NAME);
    if (n) freeReplyObject(n);
    if (db != 0) {
        redisReply *r = redisCommand(ctx, "SELECT %d", db);
        int ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        if (!ok) { redisFree(ctx); return NULL; }
    }
    return ctx;
}

redisReply *rh_command(const rh_cluster *rc, int i, int db, const char *fmt, ...)
{
    redisContext *ctx = rh_connect(rc, i, db);
    if (!ctx) return NULL;
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    redisFree(ctx);
    return r;
}

int rh_get(const rh_cluster *rc, int i, int db, const char *key, char *buf, size_t size)
{
    redisReply *r = rh_command(rc, i, db, "GET %s", key);
    int ret = -1;
    if (r && r->type == REDIS_REPLY_NIL) {
        ret = 0;
    } else if (r && r->type == REDIS_REPLY_STRING) {
        ret = 1;
        if (buf && size) snprintf(buf, size, "%.*s", (int)r->len, r->str);
    }
    if (r) freeReplyObject(r);
    return ret;
}

long long rh_pttl(const rh_cluster *rc, int i, int db, const char *key)
{
    redisReply *r = rh_command(rc, i, db, "PTTL %s", key);
    long long v = -3;
    if (r && r->type == REDIS_REPLY_INTEGER) v = r->integer;
    if (r) freeReplyObject(r);
    return v;
}

int rh_set(const rh_cluster *rc, int i, int db, const char *key, const char *val, long px)
{
    redisReply *r = px > 0 ? rh_command(rc, i, db, "SET %s %s PX %ld", key, val, px)
                           : rh_command(rc, i, db, "SET %s %s", key, val);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

int rh_del(const rh_cluster *rc, int i, int db, const char *key)
{
    redisReply *r = rh_command(rc, i, db, "DEL %s", key);
    int v = -1;
    if (r && r->type == REDIS_REPLY_INTEGER) v = (int)r->integer;
    if (r) freeReplyObject(r);
    return v;
}

static int status_cmd(const rh_cluster *rc, int i, const char *cmd)
{
    redisReply *r = rh_command(rc, i, 0, cmd);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

int rh_script_flush(const rh_cluster *rc, int i) { return status_cmd(rc, i, "SCRIPT FLUSH"); }
int rh_flushall(const rh_cluster *rc, int i) { return status_cmd(rc, i, "FLUSHALL"); }

int rh_count_holding(const rh_cluster *rc, const char *key, const char *token)
{
    int count = 0;
    char buf[512];
    for (int i = 0; i < rc->n; i++) {
        if (rc->node[i].pid <= 0 || rc->node[i].stopped) continue;
        if (rh_get(rc, i, 0, key, buf, sizeof buf) == 1 && (!token || strcmp(buf, token) == 0))
            count++;
    }
    return count;
}

int rh_lib_conn_ids(const rh_cluster *rc, int i, const char *cmd_prefix, long long *ids, int max)
{
    redisReply *r = rh_command(rc, i, 0, "CLIENT LIST");
    int n = 0;
    if (!r) return -1;
    if (r->type == REDIS_REPLY_STRING) {
        char *save = NULL;
        for (char *line = strtok_r(r->str, "\n", &save); line && n < max;
             line = strtok_r(NULL, "\n", &save)) {
            const char *id = strstr(line, "id="), *cmd = strstr(line, " cmd=");
            if (!id || !cmd || strstr(line, " name=" RH_CLIENT_NAME " ")) continue;
            if (cmd_prefix && strncmp(cmd + 5, cmd_prefix, strlen(cmd_prefix)) != 0) continue;
            ids[n++] = strtoll(id + 3, NULL, 10);
        }
    }
    freeReplyObject(r);
    return n;
}

int rh_new_lib_conns(const rh_cluster *rc, int i, const char *cmd_prefix,
                     const long long *before, int nbefore)
{
    long long now[512];
    int n = rh_lib_conn_ids(rc, i, cmd_prefix, now, 512), fresh = 0;
    for (int k = 0; k < n; k++) {
        int old = 0;
        for (int j = 0; j < nbefore; j++) old |= now[k] == before[j];
        fresh += !old;
    }
    return fresh;
}

int rh_debug_sleep(const rh_cluster *rc, int i, long ms)
{
    redisContext *ctx = rh_connect(rc, i, 0);
    if (!ctx) return -1;
    if (redisAppendCommand(ctx, "DEBUG SLEEP %ld.%03ld", ms / 1000, ms % 1000) != REDIS_OK) {
        redisFree(ctx);
        return -1;
    }
    int done = 0;
    while (!done) {
        if (redisBufferWrite(ctx, &done) != REDIS_OK) { redisFree(ctx); return -1; }
    }
    /* Busy once a PING on another connection gets no answer for a while. */
    int busy = 0;
    long long end = rh_now_ms() + ms / 2;
    while (!busy && rh_now_ms() < end) {
        redisContext *probe = connect_port(rc->node[i].port, 30);
        if (!probe) { busy = 1; break; }
        redisReply *r = redisCommand(probe, "PING");
        if (!r) busy = 1; else freeReplyObject(r);
        redisFree(probe);
    }
    /* Closing the sender is fine: the server has the command and executes it. */
    redisFree(ctx);
    return busy ? 0 : -1;
}

/* ---- replicas (WAIT for replicas) ---------------------------------------- */

/* INFO replication of node i contains `needle`. */
static int info_repl_has(const rh_cluster *rc, int i, const char *needle)
{
    redisReply *r = rh_command(rc, i, 0, "INFO replication");
    int yes = r && r->type == REDIS_REPLY_STRING && strstr(r->str, needle) != NULL;
    if (r) freeReplyObject(r);
    return yes;
}

int rh_replicate(rh_cluster *rc, int replica, int master)
{
    char want[64];
    redisReply *r = rh_command(rc, replica, 0, "REPLICAOF 127.0.0.1 %d", rc->node[master].port);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    if (!ok) {
        fprintf(stderr, "redis_harness: REPLICAOF on node %d failed\n", replica);
        return -1;
    }
    /* polled, never slept on: the replica's link is up and the master lists it */
    snprintf(want, sizeof want, "port=%d,state=online", rc->node[replica].port);
    if (!RH_WAIT_UNTIL(info_repl_has(rc, replica, "master_link_status:up") &&
                       info_repl_has(rc, master, want), 20000)) {
        fprintf(stderr, "redis_harness: node %d did not become a replica of node %d\n",
                replica, master);
        return -1;
    }
    return 0;
}

int rh_dbsize(const rh_cluster *rc, int i)
{
    redisReply *r = rh_command(rc, i, 0, "DBSIZE");
    int n = r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
    if (r) freeReplyObject(r);
    return n;
}

int rh_port_refused(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int refused = connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno == ECONNREFUSED;
    close(fd);
    return refused;
}

redisContext *rh_auth_connect(int port, const char *user, const char *pass)
{
    struct timeval tv = { 2, 0 };
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!ctx || ctx->err) {
        if (ctx) redisFree(ctx);
        return NULL;
    }
    redisSetTimeout(ctx, tv);
    redisReply *r = user ? redisCommand(ctx, "AUTH %s %s", user, pass)
                         : redisCommand(ctx, "AUTH %s", pass);
    int ok = r && r->type != REDIS_REPLY_ERROR;
    if (r) freeReplyObject(r);
    if (!ok) {
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}
