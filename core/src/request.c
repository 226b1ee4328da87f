/* request.c -- what the transport writes on a connection: the handshake
 * (AUTH, SELECT, CLIENT ID, INFO server, SCRIPT LOAD of the owner's
 * scripts), a call (EVALSHA, or EVAL while the SHA1 is unknown), CLIENT
 * KILL; and what it learns from the handshake's replies (SHA1s, the
 * server's identity, its run_id).
 *
 * Layer: 1 transport */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <hiredis/sds.h>

#include "conn.h"


/* Encode a command in RESP ourselves, into a stack buffer when it fits:
 * hiredis' redisFormatSdsCommandArgv (sdscatfmt per argument) was ~40% of
 * the client's instructions per lock+unlock. */
int distlock__append_cmd(distlock__conn *conn, distlock__result *owner, int kind, int arg,
                      uint64_t tag, int argc, const char **argv, const size_t *len)
{
    if (distlock__resp_append(conn->stream.ctx, argc, argv, len) != 0 || distlock__q_push(conn, tag, kind, arg, owner) != 0)
        return -1;
    return 0;
}

/* The one AUTH command: node i's credentials (the transport's, set by the
 * owner, else the URI's). t->mu held. Returns argc, 0 when there are none. */
static int auth_argv(const distlock__transport *t, int i, const char **argv, size_t *len)
{
    const distlock__node_cfg *cfg = &t->nodes[i];
    const char *user = t->username ? t->username : cfg->user;
    const char *pass = t->password ? t->password : cfg->pass;
    int k = 0;
    if (pass == NULL)
        return 0;
    argv[k] = "AUTH", len[k] = 4, k++;
    if (user)
        argv[k] = user, len[k] = strlen(user), k++;
    argv[k] = pass, len[k] = strlen(pass), k++;
    return k;
}

int distlock__tp_append_auth(distlock__transport *t, int i, redisContext *ctx)
{
    const char *argv[3];
    size_t len[3];
    pthread_mutex_lock(&t->mu);
    int k = auth_argv(t, i, argv, len), rc = 0;
    if (k > 0)
        rc = distlock__resp_append(ctx, k, argv, len);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* AUTH and SELECT for a fresh connection, CLIENT ID and INFO server (to be
 * able to close it from another connection: its id, and the server
 * incarnation the id belongs to, see the top of round.c) and SCRIPT LOAD of
 * every script, so EVALSHA finds them even on a restarted server and we
 * learn their SHA1. Credentials are read under t->mu: another thread may
 * be replacing them. */
int distlock__append_handshake(distlock__transport *t, int i, distlock__conn *conn, distlock__result *r)
{
    const distlock__node_cfg *cfg = &t->nodes[i];
    const char *argv[3];
    size_t len[3];
    char db[16];
    int rc = 0, n0 = conn->qlen;

    pthread_mutex_lock(&t->mu);
    conn->cred_gen = atomic_load(&t->cred_gen);
    int k = auth_argv(t, i, argv, len);
    if (k > 0)
        rc = distlock__append_cmd(conn, r, DISTLOCK__K_AUTH, 0, 0, k, argv, len);
    pthread_mutex_unlock(&t->mu);
    if (rc == 0 && cfg->db) {
        argv[0] = "SELECT", len[0] = 6;
        argv[1] = db, len[1] = distlock__ltoa(db, cfg->db);
        rc = distlock__append_cmd(conn, r, DISTLOCK__K_SELECT, 0, 0, 2, argv, len);
    }
    if (rc == 0) {
        argv[0] = "CLIENT", len[0] = 6;
        argv[1] = "ID", len[1] = 2;
        rc = distlock__append_cmd(conn, r, DISTLOCK__K_ID, 0, 0, 2, argv, len);
    }
    if (rc == 0) {
        /* run_id: every Redis (5.0 on) and Valkey; pipelined with the rest,
         * so no round trip of its own. */
        argv[0] = "INFO", len[0] = 4;
        argv[1] = "server", len[1] = 6;
        rc = distlock__append_cmd(conn, r, DISTLOCK__K_INFO, 0, 0, 2, argv, len);
    }
    if (rc == 0 && t->kind[i]->handshake)  /* Sentinel: ROLE */
        rc = t->kind[i]->handshake(t, i, conn, r);
    for (int s = 0; rc == 0 && s < t->nscripts; s++) {
        argv[0] = "SCRIPT", len[0] = 6;
        argv[1] = "LOAD", len[1] = 4;
        argv[2] = t->scripts[s].body, len[2] = strlen(t->scripts[s].body);
        rc = distlock__append_cmd(conn, r, DISTLOCK__K_LOAD, s, 0, 3, argv, len);
    }
    conn->hs_pending += conn->qlen - n0;
    if (rc == 0 && t->kind[i]->handshake_tail)  /* Cluster: CLUSTER SLOTS */
        rc = t->kind[i]->handshake_tail(t, i, conn);
    return rc;
}

/* WAIT n t right behind the call, on the same connection: the server
 * answers it once n replicas acknowledged every write of this connection so
 * far (the call's included) or t ms passed. No tag: it writes nothing. */
static __attribute__((noinline)) int append_wait(distlock__conn *conn, distlock__result *owner, const distlock__call *call)
{
    char n[DISTLOCK__NUM_LEN], ms[DISTLOCK__NUM_LEN];
    if (call->wait_replicas <= 0)
        return 0;
    const char *argv[3] = { "WAIT", n, ms };
    size_t len[3] = { 4, distlock__ltoa(n, call->wait_replicas), distlock__ltoa(ms, call->wait_ms) };
    return distlock__append_cmd(conn, owner, DISTLOCK__K_WAIT, (int)call->wait_ms, 0, 3, argv, len);
}

/* The script call itself: EVALSHA when we know the script's SHA1, else EVAL
 * (which also caches it). Not inlined: its argument
 * arrays then leave the stack before append_wait runs, which keeps the
 * deepest path (a trailing call sent from inside a reroute) under the stack budget. */
static __attribute__((noinline)) int append_script(distlock__transport *t,
                                                   distlock__conn *conn, distlock__result *owner,
                                                   const distlock__call *call, int script,
                                                   int sharded, int sha)
{
    const char *sargv[16], **argv = sargv;
    size_t slen[16], *len = slen;
    char nk[DISTLOCK__NUM_LEN];
    int k = 0, rc;

    if (call->argc + 3 > 16) {  /* batched renewals */
        argv = malloc(sizeof(*argv) * (size_t)(call->argc + 3));
        len = malloc(sizeof(*len) * (size_t)(call->argc + 3));
        if (!argv || !len) {
            free(argv);
            free(len);
            return -1;
        }
    }
    if (sha) {
        argv[k] = "EVALSHA", len[k] = 7, k++;
        argv[k] = t->sha[script], len[k] = DISTLOCK__SHA1_HEX, k++;
    } else {
        argv[k] = "EVAL", len[k] = 4, k++;
        argv[k] = t->scripts[script].body;
        len[k] = strlen(argv[k]), k++;
    }
    argv[k] = nk, len[k] = distlock__ltoa(nk, call->nkeys), k++;
    for (int a = 0; a < call->argc; a++) {
        if (sharded && a == call->cl_chan_arg)
            argv[k] = call->cl_chan, len[k] = call->cl_chan_len, k++;
        else
            argv[k] = call->argv[a], len[k] = call->argvlen[a], k++;
    }
    rc = distlock__append_cmd(conn, owner, DISTLOCK__K_CALL, 0, call->tag, k, argv, len);
    if (argv != sargv) {
        free(argv);
        free(len);
    }
    return rc;
}

/* The form node i takes a call in: a Cluster node the sharded script,
 * EVALSHA once the script's SHA1 is known (read once per append: another
 * thread may learn it meanwhile, and the bytes must match the form they
 * are kept under). */
static void call_form(distlock__transport *t, int i, const distlock__call *call, int force_eval,
                      int *script, int *sharded, int *sha)
{
    *script = call->script, *sharded = 0, *sha = 0;
    if (*script >= 0) {
        if (call->cl_script > 0 && t->kind[i]->sharded)
            *script = call->cl_script, *sharded = 1;
        *sha = !force_eval && atomic_load_explicit(&t->sha_ok[*script], memory_order_acquire);
    }
}

static int append_call_in(distlock__transport *t, distlock__conn *conn, distlock__result *owner,
                          const distlock__call *call, int script, int sharded, int sha)
{
    if (script < 0)
        return distlock__append_cmd(conn, owner, DISTLOCK__K_CALL, 0, call->tag, call->argc,
                                    call->argv, call->argvlen) == 0 ? 0 : -1;
    return append_script(t, conn, owner, call, script, sharded, sha);
}

int distlock__append_call(distlock__transport *t, int i, distlock__conn *conn,
                          distlock__result *owner, const distlock__call *call, int force_eval)
{
    int script, sharded, sha;
    call_form(t, i, call, force_eval, &script, &sharded, &sha);
    int rc = append_call_in(t, conn, owner, call, script, sharded, sha);
    return rc == 0 ? append_wait(conn, owner, call) : rc;
}

/* Requests up to this size are kept for the round's other nodes (a batch
 * of renewals can be far larger: encoded per node, not kept). */
#define ENC_KEEP_MAX 4096

int distlock__append_call_enc(distlock__transport *t, int i, distlock__conn *conn,
                              distlock__result *owner, const distlock__call *call,
                              int force_eval, distlock__connset *cs)
{
    int script, sharded, sha;
    call_form(t, i, call, force_eval, &script, &sharded, &sha);
    redisContext *ctx = conn->stream.ctx;
    if (cs->enc.call == call && cs->enc.script == script && cs->enc.sharded == sharded &&
        cs->enc.sha == sha) {
        if (distlock__resp_append_raw(ctx, cs->enc.buf, cs->enc.len) != 0 ||
            distlock__q_push(conn, call->tag, DISTLOCK__K_CALL, 0, owner) != 0)
            return -1;
        return append_wait(conn, owner, call);
    }
    size_t start = sdslen(ctx->obuf);
    if (append_call_in(t, conn, owner, call, script, sharded, sha) != 0)
        return -1;
    if (t->n > 1) {
        /* Keep the bytes for the other nodes; no room to keep them only
         * means encoding them again. */
        size_t n = sdslen(ctx->obuf) - start;
        cs->enc.call = NULL;
        if (n <= ENC_KEEP_MAX && n > cs->enc.cap) {
            char *b = realloc(cs->enc.buf, n);
            if (b != NULL)
                cs->enc.buf = b, cs->enc.cap = n;
        }
        if (n <= cs->enc.cap) {
            memcpy(cs->enc.buf, ctx->obuf + start, n);
            cs->enc.len = n;
            cs->enc.call = call;
            cs->enc.script = script;
            cs->enc.sharded = sharded;
            cs->enc.sha = sha;
        }
    }
    return append_wait(conn, owner, call);
}

int distlock__append_kill(distlock__conn *conn, distlock__result *owner, long long srv_id,
                          int why)
{
    char id[DISTLOCK__NUM_LEN];
    const char *argv[4] = { "CLIENT", "KILL", "ID", id };
    size_t len[4] = { 6, 4, 2, distlock__ltoa(id, srv_id) };
    return distlock__append_cmd(conn, owner, DISTLOCK__K_KILL, why, (uint64_t)srv_id, 4, argv, len);
}

void distlock__learn_sha(distlock__transport *t, int s, const redisReply *rep)
{
    if (rep->type != REDIS_REPLY_STRING || rep->len != DISTLOCK__SHA1_HEX ||
        atomic_load_explicit(&t->sha_ok[s], memory_order_acquire))
        return;
    pthread_mutex_lock(&t->mu);
    if (!atomic_load_explicit(&t->sha_ok[s], memory_order_relaxed)) {
        memcpy(t->sha[s], rep->str, DISTLOCK__SHA1_HEX);
        t->sha[s][DISTLOCK__SHA1_HEX] = '\0';
        atomic_store_explicit(&t->sha_ok[s], 1, memory_order_release);
    }
    pthread_mutex_unlock(&t->mu);
}

uint64_t distlock__run_of(const redisReply *rep)
{
    if (rep->type != REDIS_REPLY_STRING)
        return 0;
    const char *p = rep->str ? strstr(rep->str, "run_id:") : NULL;
    if (p == NULL)
        return 0;
    p += 7;
    uint64_t h = 0xcbf29ce484222325ull;  /* FNV-1a */
    size_t n = 0;
    for (; p < rep->str + rep->len && *p != '\r' && *p != '\n'; p++, n++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    return n == 0 ? 0 : h ? h : 1;
}

int distlock__version_of(const redisReply *rep)
{
    if (rep->type != REDIS_REPLY_STRING || rep->str == NULL)
        return 0;
    const char *p = strstr(rep->str, "redis_version:");
    if (p == NULL)
        return 0;
    p += 14;
    const char *end = rep->str + rep->len;
    int part[3] = { 0, 0, 0 }, k = 0, digits = 0;
    for (; p < end && k < 3; p++) {
        if (*p >= '0' && *p <= '9') {
            if (part[k] < 1000)
                part[k] = part[k] * 10 + (*p - '0');
            digits++;
        } else if (*p == '.') {
            k++;
        } else {
            break;
        }
    }
    if (digits == 0 || part[0] == 0)
        return 0;
    return part[0] * 10000 + (part[1] > 99 ? 99 : part[1]) * 100 + (part[2] > 99 ? 99 : part[2]);
}

/* Two nodes of the list must be two servers: a Redlock whose quorum is one
 * server would silently lose its safety. Names are only known to be the
 * same server once resolved and connected, so this is checked here. */
int distlock__check_peer(distlock__transport *t, int i, distlock__conn *conn)
{
    char me[DISTLOCK__PEER_LEN] = "";
    const distlock__node_cfg *cfg = &t->nodes[i];
    if (cfg->path) {
        struct stat st;
        if (stat(cfg->path, &st) == 0)
            snprintf(me, sizeof(me), "unix:%lu:%lu", (unsigned long)st.st_dev,
                     (unsigned long)st.st_ino);
    } else {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        char ip[DISTLOCK__ADDR_LEN] = "";
        if (getpeername(distlock__stream_fd(&conn->stream), (struct sockaddr *)&ss, &sl) == 0) {
            if (ss.ss_family == AF_INET)
                inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof(ip));
            else if (ss.ss_family == AF_INET6)
                inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip, sizeof(ip));
            /* the port connected to: a Sentinel node's master has no
             * port in the configuration */
            int port = ss.ss_family == AF_INET
                           ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                           : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
            if (ip[0])
                snprintf(me, sizeof(me), "%s:%d", ip, port);
        }
    }
    if (me[0] == '\0')
        return 0;
    int dup = -1;
    pthread_mutex_lock(&t->mu);
    for (int j = 0; j < t->n && dup < 0; j++)
        if (j != i && strcmp(t->peer[j], me) == 0)
            dup = j;
    if (dup < 0) {
        memcpy(t->peer[i], me, sizeof(me));
    } else if (!atomic_load(&t->config_error)) {
        snprintf(t->config_detail, sizeof(t->config_detail),
                 "%s and %s are the same server (%s): Redlock needs independent servers",
                 t->nodes[dup].uri, cfg->uri, me);
        atomic_store(&t->config_error, 1);
    }
    pthread_mutex_unlock(&t->mu);
    return dup < 0 ? 0 : -1;
}

/* The addresses can differ and still lead to one server: its Unix socket
 * and its TCP port, a proxy or a NAT in front of it. Its run_id cannot: an
 * acquire's grant on one name would make the other name answer with the
 * acquire's own token, which counts as granted (a retry after a lost
 * reply), and one server would make two of the quorum. */
int distlock__check_peer_run(distlock__transport *t, int i, uint64_t run)
{
    if (run == 0)
        return 0;
    int dup = -1;
    pthread_mutex_lock(&t->mu);
    for (int j = 0; j < t->n && dup < 0; j++)
        if (j != i && t->peer_run[j] == run)
            dup = j;
    if (dup < 0) {
        t->peer_run[i] = run;
    } else if (!atomic_load(&t->config_error)) {
        snprintf(t->config_detail, sizeof(t->config_detail),
                 "%s and %s are the same server (one run_id): Redlock needs independent servers",
                 t->nodes[dup].uri, t->nodes[i].uri);
        atomic_store(&t->config_error, 1);
    }
    pthread_mutex_unlock(&t->mu);
    return dup < 0 ? 0 : -1;
}

