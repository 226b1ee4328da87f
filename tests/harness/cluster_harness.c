/* cluster_harness.c -- see cluster_harness.h. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "cluster_harness.h"

#define MAXSERVERS 16

/* CRC16-CCITT (XModem), the hash of the Redis Cluster specification; the
 * harness's own, to pick keys in a slot (checked against CLUSTER KEYSLOT). */
static unsigned crc16(const char *s, size_t n)
{
    unsigned crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (unsigned)(unsigned char)s[i] << 8;
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return crc;
}

static int slot_of(const char *key)
{
    size_t n = strlen(key);
    const char *o = strchr(key, '{');
    if (o) {
        const char *cl = strchr(o + 1, '}');
        if (cl && cl > o + 1)
            return (int)(crc16(o + 1, (size_t)(cl - o - 1)) & 16383);
    }
    return (int)(crc16(key, n) & 16383);
}

static int run_cli(char *const argv[])
{
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) { dup2(devnull, 0); dup2(devnull, 1); }
        execvp("redis-cli", argv);
        _exit(127);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* cmd: a command without arguments that need quoting ("CLUSTER INFO") */
static int info_has(rh_rcl *c, int i, const char *cmd, const char *needle)
{
    char a[32], b[32];
    int n = sscanf(cmd, "%31s %31s", a, b);
    redisReply *r = n == 2 ? rh_command(c->rc, i, 0, "%s %s", a, b) : rh_command(c->rc, i, 0, "%s", a);
    int ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, needle) != NULL;
    if (r) freeReplyObject(r);
    return ok;
}

int rh_rcl_index_of_port(rh_rcl *c, int port)
{
    for (int i = 0; i < c->rc->n; i++)
        if (c->rc->node[i].port == port || (c->rc->node[i].tls_port && c->rc->node[i].tls_port == port))
            return i;
    return -1;
}

long rh_rcl_shardnumsub(rh_rcl *c, int i, const char *channel)
{
    long n = -1;
    redisReply *r = rh_command(c->rc, i, 0, "PUBSUB SHARDNUMSUB %s", channel);
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        n = (long)r->element[1]->integer;
    if (r) freeReplyObject(r);
    return n;
}

int rh_rcl_owner(rh_rcl *c, int i, int slot)
{
    redisReply *r = rh_command(c->rc, i, 0, "CLUSTER SLOTS");
    int owner = -1;
    for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
        redisReply *e = r->element[k];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) continue;
        if (slot < e->element[0]->integer || slot > e->element[1]->integer) continue;
        owner = rh_rcl_index_of_port(c, (int)e->element[2]->element[1]->integer);
    }
    if (r) freeReplyObject(r);
    return owner;
}

int rh_rcl_is_master(rh_rcl *c, int i)
{
    redisReply *r = rh_command(c->rc, i, 0, "ROLE");
    int m = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
            strcmp(r->element[0]->str, "master") == 0;
    if (r) freeReplyObject(r);
    return m;
}

int rh_rcl_replica_of(rh_rcl *c, int m)
{
    for (int i = 0; i < c->rc->n; i++) {
        if (i == m || c->rc->node[i].pid <= 0) continue;
        redisReply *r = rh_command(c->rc, i, 0, "ROLE");
        int hit = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
                  strcmp(r->element[0]->str, "slave") == 0 &&
                  rh_rcl_index_of_port(c, (int)r->element[2]->integer) == m;  /* TLS: tls_port */
        if (r) freeReplyObject(r);
        if (hit) return i;
    }
    return -1;
}

static int all_agree(rh_rcl *c, int slot)
{
    int owner = -2;
    for (int i = 0; i < c->rc->n; i++) {
        if (c->rc->node[i].pid <= 0) continue;
        if (!info_has(c, i, "CLUSTER INFO", "cluster_state:ok")) return 0;
        if (!rh_rcl_is_master(c, i)) continue;
        int o = rh_rcl_owner(c, i, slot);
        if (o < 0 || (owner != -2 && o != owner)) return 0;
        owner = o;
    }
    return 1;
}

int rh_rcl_wait_ok(rh_rcl *c, long timeout_ms)
{
    return RH_WAIT_UNTIL(all_agree(c, 0) && all_agree(c, 8000) && all_agree(c, 16383), timeout_ms)
               ? 0 : -1;
}

rh_rcl *rh_rcl_start(void)
{
    return rh_rcl_start_n(3, 1);
}

static rh_rcl *start(int masters, int replicas, int spares, const char *certs, int own_ips);

rh_rcl *rh_rcl_start_n(int masters, int replicas)
{
    return start(masters, replicas, 0, NULL, 0);
}

rh_rcl *rh_rcl_start_tls(int masters, int replicas, const char *certs)
{
    return start(masters, replicas, 0, certs, 0);
}

rh_rcl *rh_rcl_start_tls_own_ips(const char *certs)
{
    return start(3, 0, 0, certs, 1);
}

rh_rcl *rh_rcl_start_spares(int masters, int spares)
{
    return start(masters, 0, spares, NULL, 0);
}

int rh_rcl_set_cert(rh_rcl *c, int i, const char *name)
{
    char crt[512], key[512];
    snprintf(crt, sizeof crt, "%s/%s.crt", c->rc->tls_certs, name);
    snprintf(key, sizeof key, "%s/%s.key", c->rc->tls_certs, name);
    redisReply *r = rh_command(c->rc, i, 0, "CONFIG SET tls-cert-file %s tls-key-file %s", crt, key);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r && !ok) fprintf(stderr, "cluster_harness: set cert %s: %s\n", name, r->str);
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

static const char *const own_ip[] = { "127.0.0.2", "127.0.0.3", "127.0.0.4" };

static rh_rcl *start(int masters, int replicas, int spares, const char *certs, int own_ips)
{
    int members = masters * (1 + replicas), nservers = members + spares;
    if (masters < 3 || replicas < 0 || spares < 0 || nservers > MAXSERVERS ||
        (own_ips && (nservers > 3 || !certs))) {
        fprintf(stderr, "cluster_harness: %d masters x %d replicas + %d spares not supported\n",
                masters, replicas, spares);
        return NULL;
    }
    rh_rcl *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->rc = own_ips ? rh_start_cluster_mode_tls_at(nservers, certs, own_ip)
            : certs ? rh_start_cluster_mode_tls(nservers, certs) : rh_start_cluster_mode(nservers);
    if (!c->rc) { free(c); return NULL; }
    /* each server's certificate is valid for its own address only (certs.sh
     * ip2..ip4); swapped at run time (the TLS port takes it at once) */
    for (int i = 0; own_ips && i < nservers; i++) {
        char name[8];
        snprintf(name, sizeof name, "ip%d", i + 2);
        if (rh_rcl_set_cert(c, i, name) != 0) { rh_rcl_stop(c); return NULL; }
    }
    char addr[MAXSERVERS][32];
    char reps[16], ca[512];
    char *argv[MAXSERVERS + 12];
    int a = 0;
    argv[a++] = "redis-cli";
    if (certs) {
        /* it reaches the nodes again at the (TLS) ports CLUSTER NODES shows */
        snprintf(ca, sizeof ca, "%s/ca.crt", certs);
        argv[a++] = "--tls";
        argv[a++] = "--cacert";
        argv[a++] = ca;
    }
    argv[a++] = "--cluster";
    argv[a++] = "create";
    size_t u = (size_t)snprintf(c->uri, sizeof c->uri, "%s", certs ? "rediss-cluster://" : "redis-cluster://");
    for (int i = 0; i < members; i++) {
        snprintf(addr[i], sizeof addr[i], "%s:%d", own_ips ? own_ip[i] : "127.0.0.1",
                 certs ? c->rc->node[i].tls_port : c->rc->node[i].port);
        argv[a++] = addr[i];
        u += (size_t)snprintf(c->uri + u, sizeof c->uri - u, "%s%s", i ? "," : "", addr[i]);
    }
    argv[a++] = "--cluster-replicas";
    snprintf(reps, sizeof reps, "%d", replicas);
    argv[a++] = reps;
    argv[a++] = "--cluster-yes";
    argv[a] = NULL;
    if (run_cli(argv) != 0) {
        fprintf(stderr, "cluster_harness: redis-cli --cluster create failed\n");
        rh_rcl_stop(c);
        return NULL;
    }
    /* spares join as masters without slots: nobody names them yet */
    for (int i = members; i < nservers; i++) {
        redisReply *r = rh_command(c->rc, i, 0, "CLUSTER MEET 127.0.0.1 %d", c->rc->node[0].port);
        int ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        if (!ok) {
            fprintf(stderr, "cluster_harness: CLUSTER MEET failed\n");
            rh_rcl_stop(c);
            return NULL;
        }
    }
    /* every node knows all the others, and agrees on the owners */
    char known[48];
    snprintf(known, sizeof known, "cluster_known_nodes:%d\r", nservers);
    int ok = RH_WAIT_UNTIL(({
        int all = 1;
        for (int i = 0; i < nservers && all; i++)
            all = info_has(c, i, "CLUSTER INFO", known);
        all; }), 20000);
    if (!ok || rh_rcl_wait_ok(c, 20000) != 0) {
        fprintf(stderr, "cluster_harness: the cluster did not become ok\n");
        rh_rcl_stop(c);
        return NULL;
    }
    /* and every replica has synced (a failover test needs one in sync) */
    ok = RH_WAIT_UNTIL(({
        int all = 1;
        for (int i = 0; i < nservers && all; i++)
            if (!rh_rcl_is_master(c, i))
                all = info_has(c, i, "INFO replication", "master_link_status:up");
        all; }), 20000);
    if (!ok) {
        fprintf(stderr, "cluster_harness: replicas did not sync\n");
        rh_rcl_stop(c);
        return NULL;
    }
    return c;
}

void rh_rcl_stop(rh_rcl *c)
{
    if (!c) return;
    rh_stop_all(c->rc);
    free(c);
}

int rh_rcl_keyslot(rh_rcl *c, const char *key)
{
    for (int i = 0; i < c->rc->n; i++) {
        if (c->rc->node[i].pid <= 0) continue;
        redisReply *r = rh_command(c->rc, i, 0, "CLUSTER KEYSLOT %s", key);
        int s = r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
        if (r) freeReplyObject(r);
        return s;
    }
    return -1;
}

const char *rh_rcl_key_in_slot(rh_rcl *c, const char *prefix, int slot, char *buf, size_t size)
{
    (void)c;
    for (unsigned long n = 0;; n++) {
        snprintf(buf, size, "%s:%lu", prefix, n);
        if (slot_of(buf) == slot) return buf;
    }
}

static int myid(rh_rcl *c, int i, char *id, size_t size)
{
    redisReply *r = rh_command(c->rc, i, 0, "CLUSTER MYID");
    int ok = r && r->type == REDIS_REPLY_STRING;
    if (ok) snprintf(id, size, "%s", r->str);
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

static int ok_reply(redisReply *r)
{
    int ok = r && r->type != REDIS_REPLY_ERROR;
    if (r && !ok) fprintf(stderr, "cluster_harness: %s\n", r->str);
    if (r) freeReplyObject(r);
    return ok;
}

int rh_rcl_migrate_slot(rh_rcl *c, int slot, int from, int to, int batch,
                        void (*between)(void *), void *arg)
{
    char fid[64], tid[64];
    if (myid(c, from, fid, sizeof fid) || myid(c, to, tid, sizeof tid)) return -1;
    if (!ok_reply(rh_command(c->rc, to, 0, "CLUSTER SETSLOT %d IMPORTING %s", slot, fid)) ||
        !ok_reply(rh_command(c->rc, from, 0, "CLUSTER SETSLOT %d MIGRATING %s", slot, tid)))
        return -1;
    for (;;) {
        redisReply *keys = rh_command(c->rc, from, 0, "CLUSTER GETKEYSINSLOT %d %d", slot, batch);
        if (!keys || keys->type != REDIS_REPLY_ARRAY) { if (keys) freeReplyObject(keys); return -1; }
        size_t nk = keys->elements;
        if (nk == 0) { freeReplyObject(keys); break; }
        const char *argv[8 + 256];
        size_t len[8 + 256];
        char port[16];
        /* with tls-cluster yes MIGRATE speaks TLS: the target's TLS port */
        snprintf(port, sizeof port, "%d",
                 c->rc->node[to].tls_port ? c->rc->node[to].tls_port : c->rc->node[to].port);
        int a = 0;
        argv[a] = "MIGRATE"; len[a++] = 7;
        argv[a] = "127.0.0.1"; len[a++] = 9;
        argv[a] = port; len[a++] = strlen(port);
        argv[a] = ""; len[a++] = 0;
        argv[a] = "0"; len[a++] = 1;
        argv[a] = "5000"; len[a++] = 4;
        argv[a] = "KEYS"; len[a++] = 4;
        for (size_t k = 0; k < nk && k < 256; k++) {
            argv[a] = keys->element[k]->str;
            len[a++] = keys->element[k]->len;
        }
        redisContext *ctx = rh_connect(c->rc, from, 0);
        redisReply *m = ctx ? redisCommandArgv(ctx, a, argv, len) : NULL;
        freeReplyObject(keys);
        int ok = ok_reply(m);
        if (ctx) redisFree(ctx);
        if (!ok) return -1;
        if (between) between(arg);
    }
    /* the new owner first (it then answers for the slot), then the old one */
    if (!ok_reply(rh_command(c->rc, to, 0, "CLUSTER SETSLOT %d NODE %s", slot, tid)) ||
        !ok_reply(rh_command(c->rc, from, 0, "CLUSTER SETSLOT %d NODE %s", slot, tid)))
        return -1;
    for (int i = 0; i < c->rc->n; i++)
        if (i != from && i != to && c->rc->node[i].pid > 0 && rh_rcl_is_master(c, i))
            ok_reply(rh_command(c->rc, i, 0, "CLUSTER SETSLOT %d NODE %s", slot, tid));
    return RH_WAIT_UNTIL(all_agree(c, slot), 10000) ? 0 : -1;
}

/* The master entry of server i's CLUSTER SLOTS that covers slot (NULL if
 * none); *all is the reply to free. */
static redisReply *slot_master(rh_rcl *c, int i, int slot, redisReply **all)
{
    redisReply *r = rh_command(c->rc, i, 0, "CLUSTER SLOTS"), *m = NULL;
    for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
        redisReply *e = r->element[k];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) continue;
        if (slot >= e->element[0]->integer && slot <= e->element[1]->integer)
            m = e->element[2];
    }
    *all = r;
    return m;
}

int rh_rcl_slot_port(rh_rcl *c, int i, int slot)
{
    redisReply *all;
    redisReply *m = slot_master(c, i, slot, &all);
    int port = m ? (int)m->element[1]->integer : -1;
    if (all) freeReplyObject(all);
    return port;
}

int rh_rcl_slot_host(rh_rcl *c, int i, int slot, char *host, size_t size)
{
    redisReply *all;
    redisReply *m = slot_master(c, i, slot, &all);
    int ok = m && m->element[0]->type == REDIS_REPLY_STRING;
    if (ok) snprintf(host, size, "%s", m->element[0]->str);
    if (all) freeReplyObject(all);
    return ok ? 0 : -1;
}

int rh_rcl_command_ok(rh_rcl *c, int i, const char *fmt, ...)
{
    redisContext *ctx = rh_connect(c->rc, i, 0);
    if (!ctx) {
        fprintf(stderr, "server %d: cannot connect\n", i);
        return 0;
    }
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    redisFree(ctx);
    int ok = r && r->type != REDIS_REPLY_ERROR;
    if (r && !ok) fprintf(stderr, "server %d: %s\n", i, r->str);
    if (r) freeReplyObject(r);
    return ok;
}

int rh_rcl_announce_port(rh_rcl *c, int i, int port)
{
    return rh_rcl_command_ok(c, i, "CONFIG SET cluster-announce-bus-port %d",
                             c->rc->node[i].port + 10000) &&
           rh_rcl_command_ok(c, i, "CONFIG SET cluster-announce-port %d", port);
}

int rh_rcl_wait_promoted(rh_rcl *c, int replica, long timeout_ms)
{
    if (!RH_WAIT_UNTIL(rh_rcl_is_master(c, replica), timeout_ms)) return -1;
    return rh_rcl_wait_ok(c, timeout_ms);
}
