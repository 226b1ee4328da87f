/* test_stuck_connection_replacement.c -- a stuck connection (one that owes
 * replies past its timeout) is replaced on the next call, and whatever it
 * carries never runs after a later request of the same lock, whatever
 * happens to the server meanwhile. Real redis-servers behind the
 * fault-injecting proxy; a "stuck" connection is one whose bytes the proxy
 * holds both ways (a NAT that dropped it).
 *
 *  a) the server restarted while the connection was stuck (its EOF is held
 *     too, as a dropped NAT entry would): client ids start again from 1, so
 *     the old connection's id now names another, innocent client of the
 *     server. The replacement must not kill it.
 *  b) CLIENT KILL refused (an ACL user without +client|kill): the call is
 *     not sent, and no later call lets the stuck connection's release of
 *     the same lock run after a later grant of it.
 *  c) the node is a host name whose address changed (a DNS failover, as a
 *     managed Redis's primary endpoint does) while its connection was
 *     stuck: the replacement lands on another server, where the old id
 *     means nothing ("ERR No such client") -- that must not count as the
 *     stuck connection being killed: when the name points back at the
 *     first server, the stuck connection's release of a lock must not
 *     delete a later grant of that lock there.
 *  d) the replacement's own CLIENT KILL never answers (held): the call
 *     times out unsent; the next call replaces the replacement; the first
 *     stuck connection's release still never runs after a later grant.
 *  e) many threads of one client meet their stuck connections at once:
 *     each pays at most one timeout, then every call is served.
 *  f) Redlock N = 3, node 2's connection stuck and node 1 slow (below the
 *     timeout): the acquire after the stuck call is granted on 3 nodes.
 *  g) the watchdog's renewal is held on a stuck connection: the next
 *     renewal replaces it and the lock is not lost.
 *  h) fork after a connection got stuck carrying a release: the child takes
 *     the same lock again with the same token (the token pair, as the PHP
 *     compatibility functions allow); the parent's stuck release, delivered
 *     late, must not delete the child's grant.
 */
#include "test_common.h"
#include "test_proxy_cluster.h"

#include <hiredis/hiredis.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness/slowdns.h"

DEFINE_PROXY_GROUP(3)

#define CMD_MS 300L

static distlock_client *client_uri(const char *uri)
{
    distlock_client *c = new_client(uri);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, CMD_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, CMD_MS), DISTLOCK_OK);
    return c;
}

static long long client_id_of(redisContext *x)
{
    redisReply *r = redisCommand(x, "CLIENT ID");
    long long id = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r) freeReplyObject(r);
    return id;
}

static int alive(redisContext *x)
{
    redisReply *r = redisCommand(x, "PING");
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok;
}

#define MAX_INNOCENT 256

static void test_stuck_connection_replaced_after_restart_kills_no_innocent_client(void **state)
{
    proxy_env *e = *state;
    char uris[256];
    distlock_client *c = client_uri(fp_uris_mask(e->fp, 0x1, uris, sizeof uris));
    warm_up(c);
    long long lib[64];
    int nlib = rh_lib_conn_ids(e->rc, 0, NULL, lib, 64);
    assert_true(nlib >= 1);
    long long max_id = 0;
    for (int k = 0; k < nlib; k++)
        if (lib[k] > max_id) max_id = lib[k];
    int stuck = lib_conn(e, 0);
    fp_ok(e->fp, "hold 0:%d", stuck);

    /* One timeout on the stuck connection: it is now known to be late. */
    assert_fails(distlock_admin_holder(c, "stuck:restart", 0, NULL), DISTLOCK_ECONN);
    printf("# stuck connection (server ids of the library's: max %lld): inspect ECONN (\"%s\")\n",
           max_id, distlock_last_error());

    /* The server restarts; the stuck connection's EOF is held by the proxy,
     * as a NAT that dropped the connection would: the client cannot know. */
    assert_int_equal(rh_restart(e->rc, 0), 0);

    /* Other clients of the restarted server: ids from 1 again, one of them
     * gets the stuck connection's old id. */
    redisContext *inn[MAX_INNOCENT];
    long long inn_id[MAX_INNOCENT];
    int ninn = 0;
    while (ninn < MAX_INNOCENT) {
        redisContext *x = redisConnect("127.0.0.1", e->rc->node[0].port);
        assert_true(x && !x->err);
        inn[ninn] = x;
        inn_id[ninn] = client_id_of(x);
        assert_true(inn_id[ninn] > 0);
        ninn++;
        if (inn_id[ninn - 1] > max_id) break;
    }
    printf("# after the restart: %d other clients, ids %lld..%lld\n", ninn, inn_id[0],
           inn_id[ninn - 1]);

    /* The next call replaces the stuck connection: CLIENT KILL ID <old id>
     * on the restarted server. */
    int rc = distlock_admin_holder(c, "stuck:restart", 0, NULL);
    printf("# next call: %d (\"%s\")\n", rc, rc == 0 ? "" : distlock_last_error());

    int killed = 0;
    for (int k = 0; k < ninn; k++) {
        if (!alive(inn[k])) {
            printf("# an innocent client of the restarted server (id %lld) was killed\n",
                   inn_id[k]);
            killed++;
        }
        redisFree(inn[k]);
    }
    fp_ok(e->fp, "heal");
    distlock_client_free(c);
    if (killed) {
        print_error("replacing a stuck connection after a server restart killed %d innocent "
                    "client(s) of that server: CLIENT KILL ID with the id the stuck connection "
                    "had before the restart (ids start again from 1)\n", killed);
        fail();
    }
}

static void test_stuck_connection_kill_refused_no_stale_release_after_regrant(void **state)
{
    proxy_env *e = *state;
    const char *key = "stuck:refused", *tok = "stuck-refused-owner";
    redisReply *x = rh_command(e->rc, 0, 0,
                               "ACL SETUSER app on >pw ~* &* +@all -client|kill");
    assert_true(x && x->type == REDIS_REPLY_STATUS);
    freeReplyObject(x);
    char uri[128];
    snprintf(uri, sizeof uri, "redis://app:pw@127.0.0.1:%d", fp_port(e->fp, 0));
    distlock_client *c = client_uri(uri);
    warm_up(c);

    assert_rc(distlock_acquire_token(c, key, 1000, tok, 0, NULL), DISTLOCK_OK);
    int stuck = lib_conn(e, 0);
    fp_ok(e->fp, "hold 0:%d", stuck);
    /* the release is held on the stuck connection */
    assert_fails(distlock_release_token(c, key, tok), DISTLOCK_ECONN);
    rh_sleep_ms(1100);  /* the first grant expires */

    /* Later calls: the replacement's kill is refused. Whatever they report,
     * once one of them re-grants key to tok, the stale release must not run
     * after it. */
    int granted = 0;
    for (int k = 0; k < 4; k++) {
        int rc = distlock_acquire_token(c, key, 30000, tok, 0, NULL);
        printf("# acquire after a refused kill (%d): %d (\"%s\")\n", k, rc,
               rc == DISTLOCK_OK ? "" : distlock_last_error());
        granted |= rc == DISTLOCK_OK;
        int rc2 = distlock_acquire_token(c, "stuck:refused:other", 30000, tok, 0, NULL);
        printf("# another key (%d): %d (\"%s\")\n", k, rc2,
               rc2 == DISTLOCK_OK ? "" : distlock_last_error());
    }
    fp_unhold_or_killed(e->fp, "unhold 0:%d", stuck);
    fp_ok(e->fp, "wait-closed 0:%d 3000", stuck);
    int holding = rh_count_holding(e->rc, key, tok);
    printf("# granted later: %d; key holds the token after the stale release: %d\n", granted,
           holding);
    fp_ok(e->fp, "heal");
    distlock_client_free(c);
    if (granted && holding == 0) {
        print_error("a release held on a stuck connection whose CLIENT KILL was refused ran "
                    "after a later grant of the same lock, and deleted it\n");
        fail();
    }
}

/* A redis-server of our own on 127.0.0.2:port (the proxy has port on
 * 127.0.0.1 only). */
static pid_t start_server_on(const char *addr, int port)
{
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) { dup2(fd, 1); dup2(fd, 2); }
        execlp("redis-server", "redis-server", "--port", p, "--bind", addr, "--save", "",
               "--appendonly", "no", "--protected-mode", "no", (char *)NULL);
        _exit(127);
    }
    for (int k = 0; k < 100; k++) {
        redisContext *x = redisConnect(addr, port);
        if (x && !x->err && alive(x)) { redisFree(x); return pid; }
        if (x) redisFree(x);
        rh_sleep_ms(50);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

static void test_stuck_connection_replaced_on_another_server_after_dns_change(void **state)
{
    proxy_env *e = *state;
    const char *key = "stuck:dns", *tok = "stuck-dns-owner";
    int port = fp_port(e->fp, 0);
    /* server A: node 0 behind the proxy at 127.0.0.1:port; server B at
     * 127.0.0.2:port; "flip.test" names A first */
    pid_t b = start_server_on("127.0.0.2", port);
    if (b < 0) {
        /* all of 127.0.0.0/8 is loopback on Linux: a set-up failure, not a skip */
        print_error("cannot start a server on 127.0.0.2:%d\n", port);
        fail();
    }
    slowdns_set("flip.test=0=127.0.0.1");
    char uri[128];
    snprintf(uri, sizeof uri, "redis://flip.test:%d", port);
    distlock_client *c = client_uri(uri);
    warm_up(c);

    assert_rc(distlock_acquire_token(c, key, 1000, tok, 0, NULL), DISTLOCK_OK);
    assert_holding(e->rc, key, tok, 1);
    int stuck = lib_conn(e, 0);
    long long ids[16];
    int nids = rh_lib_conn_ids(e->rc, 0, NULL, ids, 16);
    printf("# the library's connection(s) on A: %d, id %lld\n", nids, nids > 0 ? ids[0] : -1);
    fp_ok(e->fp, "hold 0:%d", stuck);
    /* the release is held on the stuck connection (to A) */
    assert_fails(distlock_release_token(c, key, tok), DISTLOCK_ECONN);
    printf("# release held on the stuck connection: ECONN (\"%s\")\n", distlock_last_error());

    /* DNS failover: the name now points at B. The next call replaces the
     * stuck connection with one to B and "kills" its id there. */
    slowdns_set("flip.test=0=127.0.0.2");
    int rc = distlock_admin_holder(c, "stuck:dns:probe", 0, NULL);
    printf("# next call (on B): %d (\"%s\")\n", rc, rc == 0 ? "" : distlock_last_error());
    {
        /* it was served by B: B has run the library's handshake (CLIENT ID)
         * and, or not, a CLIENT KILL of A's id (it must not count) */
        redisContext *x = redisConnect("127.0.0.2", port);
        assert_true(x && !x->err);
        redisReply *r = redisCommand(x, "CLIENT LIST");
        printf("# B's clients now:\n%s", r && r->type == REDIS_REPLY_STRING ? r->str : "?\n");
        freeReplyObject(r);
        r = redisCommand(x, "INFO commandstats");
        assert_true(r && r->type == REDIS_REPLY_STRING);
        const char *k = strstr(r->str, "cmdstat_client|kill:");
        const char *nl = k ? strchr(k, '\r') : NULL;
        printf("# B ran CLIENT KILL: %.*s\n", k ? (int)(nl ? nl - k : 40) : 2, k ? k : "no");
        const char *id = strstr(r->str, "cmdstat_client|id:");
        nl = id ? strchr(id, '\r') : NULL;
        printf("# B ran CLIENT ID: %.*s\n", id ? (int)(nl ? nl - id : 40) : 2, id ? id : "no");
        assert_non_null(id);
        freeReplyObject(r);
        redisFree(x);
    }

    /* Failback: the name points at A again, B goes away. The first grant
     * on A has expired meanwhile; the same owner takes the lock again. */
    slowdns_set("flip.test=0=127.0.0.1");
    kill(b, SIGKILL);
    waitpid(b, NULL, 0);
    rh_sleep_ms(1100);
    assert_int_equal(rh_count_holding(e->rc, key, NULL), 0);
    rc = distlock_acquire_token(c, key, 30000, tok, 0, NULL);
    if (rc != DISTLOCK_OK)  /* the first try may meet B's closed connection */
        rc = distlock_acquire_token(c, key, 30000, tok, 0, NULL);
    printf("# acquire after the failback (on A): %d (\"%s\")\n", rc,
           rc == DISTLOCK_OK ? "" : distlock_last_error());
    int granted = rc == DISTLOCK_OK && rh_count_holding(e->rc, key, tok) == 1;

    /* The stuck connection's bytes arrive at last. */
    fp_unhold_or_killed(e->fp, "unhold 0:%d", stuck);
    fp_ok(e->fp, "wait-closed 0:%d 3000", stuck);
    proxy_settle(e);
    int holding = rh_count_holding(e->rc, key, tok);
    printf("# granted after the failback: %d; A holds it after the stuck connection's bytes "
           "arrived: %d\n", granted, holding);
    fp_ok(e->fp, "heal");
    slowdns_set("");
    distlock_client_free(c);
    if (granted && holding == 0) {
        print_error("a release left on a stuck connection ran after a later grant of the same "
                    "lock and deleted it: the replacement landed on another server (DNS "
                    "change), whose \"ERR No such client\" counted as the stuck connection "
                    "killed\n");
        fail();
    }
}

static void test_stuck_connection_kill_unanswered_then_replaced_again_no_stale_release(void **state)
{
    proxy_env *e = *state;
    const char *key = "stuck:killheld", *tok = "stuck-killheld-owner";
    char uris[256], hex[64];
    distlock_client *c = client_uri(fp_uris_mask(e->fp, 0x1, uris, sizeof uris));
    warm_up(c);
    assert_rc(distlock_acquire_token(c, key, 1000, tok, 0, NULL), DISTLOCK_OK);
    int stuck = lib_conn(e, 0);
    fp_ok(e->fp, "hold 0:%d", stuck);
    assert_fails(distlock_release_token(c, key, tok), DISTLOCK_ECONN);

    /* the replacement's CLIENT KILL is held on its way to the server */
    fp_ok(e->fp, "hold-match 0:next up %s", fp_hex("KILL", hex, sizeof hex));
    long long t0 = rh_now_ms();
    int rc = distlock_admin_holder(c, "stuck:killheld:probe", 0, NULL);
    printf("# call whose replacement's kill is held: %d in %lld ms (\"%s\")\n", rc,
           rh_now_ms() - t0, rc == 0 ? "" : distlock_last_error());
    int second = lib_conn(e, 0);
    rh_sleep_ms(1100);  /* the first grant expires */
    t0 = rh_now_ms();
    rc = distlock_acquire_token(c, key, 30000, tok, 0, NULL);
    printf("# acquire next: %d in %lld ms (\"%s\")\n", rc, rh_now_ms() - t0,
           rc == 0 ? "" : distlock_last_error());
    /* The replacement completed its handshake (the kill is sent once the
     * handshake told which server it is on), so it is replaced in turn,
     * and both stuck connections are killed first. (Were the kill pipelined
     * with the handshake and held with it, the node would count as hung and
     * fail at once until the connection is given up, STALE_CLOSE_US, 30 s;
     * keep trying until then.) */
    long long t1 = rh_now_ms();
    int tries = 0;
    while (rc != DISTLOCK_OK && rh_now_ms() - t1 < 40000) {
        rh_sleep_ms(250);
        tries++;
        rc = distlock_acquire_token(c, key, 30000, tok, 0, NULL);
    }
    printf("# granted after %d more tries, %lld ms (\"%s\")\n", tries, rh_now_ms() - t1,
           rc == 0 ? "" : distlock_last_error());
    int granted = rc == DISTLOCK_OK;
    fp_unhold_or_killed(e->fp, "unhold 0:%d", second);
    fp_unhold_or_killed(e->fp, "unhold 0:%d", stuck);
    fp_ok(e->fp, "wait-closed 0:%d 3000", stuck);
    proxy_settle(e);
    int holding = rh_count_holding(e->rc, key, tok);
    printf("# granted: %d, holding after the stuck bytes arrived: %d\n", granted, holding);
    fp_ok(e->fp, "heal");
    distlock_client_free(c);
    if (granted && holding == 0) {
        print_error("the first stuck connection's release ran after a later grant\n");
        fail();
    }
}

#define NTHREADS 6

typedef struct th_arg {
    distlock_client *c;
    int k;
    int fails_after_first;
    int ok;
    long long worst_ms;
} th_arg;

static void *hammer(void *p)
{
    th_arg *a = p;
    char key[64];
    for (int j = 0; j < 12; j++) {
        snprintf(key, sizeof key, "stuck:th:%d:%d", a->k, j);
        long long t0 = rh_now_ms();
        int rc = distlock_acquire_token(a->c, key, 10000, "stuck-th", 0, NULL);
        if (rc == DISTLOCK_OK)
            rc = distlock_release_token(a->c, key, "stuck-th");
        long long took = rh_now_ms() - t0;
        if (took > a->worst_ms) a->worst_ms = took;
        if (rc == DISTLOCK_OK) a->ok++;
        else if (j > 1) a->fails_after_first++;
    }
    return NULL;
}

static void test_stuck_connections_many_threads_each_one_timeout(void **state)
{
    proxy_env *e = *state;
    char uris[256];
    distlock_client *c = client_uri(fp_uris_mask(e->fp, 0x1, uris, sizeof uris));
    /* open several connection sets */
    th_arg a[NTHREADS];
    pthread_t th[NTHREADS];
    memset(a, 0, sizeof a);
    for (int k = 0; k < NTHREADS; k++) {
        a[k].c = c, a[k].k = k;
        assert_int_equal(pthread_create(&th[k], NULL, hammer, &a[k]), 0);
    }
    for (int k = 0; k < NTHREADS; k++) pthread_join(th[k], NULL);
    fp_conn all[64];
    int n = fp_conns(e->fp, 0, all, 64);
    printf("# %d library connections; all held now\n", n);
    for (int k = 0; k < n; k++)
        fp_ok(e->fp, "hold 0:%d", all[k].id);
    memset(a, 0, sizeof a);
    long long t0 = rh_now_ms();
    for (int k = 0; k < NTHREADS; k++) {
        a[k].c = c, a[k].k = k;
        assert_int_equal(pthread_create(&th[k], NULL, hammer, &a[k]), 0);
    }
    int bad = 0;
    for (int k = 0; k < NTHREADS; k++) {
        pthread_join(th[k], NULL);
        printf("# thread %d: %d/12 ok, %d failures after its second call, worst %lld ms\n", k,
               a[k].ok, a[k].fails_after_first, a[k].worst_ms);
        bad += a[k].fails_after_first;
    }
    printf("# all threads done in %lld ms\n", rh_now_ms() - t0);
    fp_ok(e->fp, "heal");
    distlock_client_free(c);
    if (bad) {
        print_error("%d calls failed after each thread had paid its timeout\n", bad);
        fail();
    }
}

static void test_stuck_connection_redlock_one_stuck_one_slow(void **state)
{
    proxy_env *e = *state;
    const char *key = "stuck:redlock", *tok = "stuck-redlock-owner";
    distlock_client *c = client_uri(fp_uris(e->fp));
    warm_up(c);
    int stuck = lib_conn(e, 2);
    fp_ok(e->fp, "hold 2:%d", stuck);
    fp_ok(e->fp, "delay 1 120 down");  /* well below the 300 ms timeout */
    long long t0 = rh_now_ms();
    int rc = distlock_acquire_token(c, key, 30000, tok, 0, NULL);
    printf("# acquire with node 2 stuck, node 1 slow: %d in %lld ms (\"%s\")\n", rc,
           rh_now_ms() - t0, rc == 0 ? "" : distlock_last_error());
    if (rc == DISTLOCK_OK)
        assert_rc(distlock_release_token(c, key, tok), DISTLOCK_OK);
    sync_conns(c);
    t0 = rh_now_ms();
    rc = distlock_acquire_token(c, key, 30000, tok, 0, NULL);
    printf("# next acquire: %d in %lld ms (\"%s\"), on %d nodes\n", rc, rh_now_ms() - t0,
           rc == 0 ? "" : distlock_last_error(), rh_count_holding(e->rc, key, tok));
    assert_rc(rc, DISTLOCK_OK);
    assert_holding(e->rc, key, tok, 3);
    assert_rc(distlock_release_token(c, key, tok), DISTLOCK_OK);
    fp_unhold_or_killed(e->fp, "unhold 2:%d", stuck);
    fp_ok(e->fp, "heal");
    distlock_client_free(c);
}

static void test_stuck_connection_watchdog_renewal_replaced_lock_kept(void **state)
{
    proxy_env *e = *state;
    const char *key = "stuck:watchdog";
    char uris[256], hex[64];
    distlock_client *c = client_uri(fp_uris_mask(e->fp, 0x1, uris, sizeof uris));
    warm_up(c);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, key, 3000, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    sync_conns(c);
    /* the next bytes naming the key -- the first renewal, at ttl/3 -- and
     * everything after them on that connection are held, both ways */
    fp_ok(e->fp, "hold-match 0 both %s", fp_hex(key, hex, sizeof hex));
    fp_ok(e->fp, "wait-held 0 up 1 5000");
    long long t0 = rh_now_ms();
    printf("# a renewal is held on its connection\n");
    rh_sleep_ms(4000);  /* past the ttl: only later renewals keep it */
    long validity = distlock_lock_validity_ms(l);
    long long pttl = rh_pttl(e->rc, 0, 0, key);
    printf("# %lld ms later: lost %d, validity %ld ms, server PTTL %lld ms\n", rh_now_ms() - t0,
           distlock_lock_lost(l), validity, pttl);
    int lost = distlock_lock_lost(l);
    assert_rc(distlock_release(l), lost ? DISTLOCK_ENOTOWNER : DISTLOCK_OK);
    distlock_lock_free(l);
    fp_ok(e->fp, "heal");
    distlock_client_free(c);
    if (lost || pttl <= 0) {
        print_error("a renewal held on a stuck connection lost the lock: the stuck connection "
                    "was not replaced by the next renewal\n");
        fail();
    }
}

static void test_stuck_connection_fork_child_regrant_not_deleted_by_parent_release(void **state)
{
    proxy_env *e = *state;
    const char *key = "stuck:fork", *tok = "stuck-fork-owner";
    char uris[256];
    distlock_client *c = client_uri(fp_uris_mask(e->fp, 0x1, uris, sizeof uris));
    warm_up(c);
    assert_rc(distlock_acquire_token(c, key, 1000, tok, 0, NULL), DISTLOCK_OK);
    int stuck = lib_conn(e, 0);
    fp_ok(e->fp, "hold 0:%d", stuck);
    assert_fails(distlock_release_token(c, key, tok), DISTLOCK_ECONN);
    rh_sleep_ms(1100);  /* the first grant expires */
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int rc = distlock_acquire_token(c, key, 30000, tok, 0, NULL);
        distlock_client_free(c);  /* writes nothing on the parent's sockets */
        _exit(rc == DISTLOCK_OK ? 0 : 10 - rc);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    int granted = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    printf("# the child's acquire of the same lock and token: %s (status %d)\n",
           granted ? "granted" : "not granted", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    long long answered = conn_info(e, 0, stuck).down_bytes;
    fp_unhold_or_killed(e->fp, "unhold 0:%d", stuck);
    /* the parent keeps the socket (no close to wait for): the server's
     * answer to the released bytes coming back shows they ran */
    assert_true(RH_WAIT_UNTIL(conn_info(e, 0, stuck).id < 0 ||
                              conn_info(e, 0, stuck).down_bytes > answered, 5000));
    proxy_settle(e);
    int holding = rh_count_holding(e->rc, key, tok);
    printf("# the key holds the child's grant after the parent's stuck bytes arrived: %d\n",
           holding);
    fp_ok(e->fp, "heal");
    distlock_client_free(c);
    if (granted && holding == 0) {
        print_error("a release left on the parent's stuck connection deleted the grant a forked "
                    "child made later with the same key and token\n");
        fail();
    }
    /* not by refusing the child: it kills the parent's stuck connection
     * (from its own) and is granted */
    assert_true(granted);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_stuck_connection_replaced_after_restart_kills_no_innocent_client,
                               heal),
        cmocka_unit_test_setup(test_stuck_connection_kill_refused_no_stale_release_after_regrant,
                               heal),
        cmocka_unit_test_setup(test_stuck_connection_replaced_on_another_server_after_dns_change,
                               heal),
        cmocka_unit_test_setup(
            test_stuck_connection_kill_unanswered_then_replaced_again_no_stale_release, heal),
        cmocka_unit_test_setup(test_stuck_connections_many_threads_each_one_timeout, heal),
        cmocka_unit_test_setup(test_stuck_connection_redlock_one_stuck_one_slow, heal),
        cmocka_unit_test_setup(test_stuck_connection_watchdog_renewal_replaced_lock_kept, heal),
        cmocka_unit_test_setup(
            test_stuck_connection_fork_child_regrant_not_deleted_by_parent_release, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
