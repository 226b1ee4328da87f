/* test_cluster_tls.c -- rediss-cluster://: a real Redis
 * Cluster of 3 masters + 3 replicas whose clients speak TLS only (tls-cluster yes:
 * CLUSTER SLOTS asked over TLS announces the TLS ports; the plain ports
 * serve the harness's own checks; tests/harness/cluster_harness.h
 * rh_rcl_start_tls), with a CA and certificates made for this run by
 * tests/harness/certs.sh, the CA given in the URI (tls_ca_file=):
 *   (a) locks on keys in slots of all three masters: acquire, extend,
 *       release, each stored on its slot's master;
 *   (b) a MOVED followed over TLS (a slot migrated under a warm map);
 *   (c) a waiter woken over the TLS SSUBSCRIBE connection within 1 s of the
 *       release (its re-check is 5 s apart);
 *   (d) a CA that did not sign the servers' certificates: DISTLOCK_ECONN
 *       with "certificate verify failed", never a lock;
 *   (e) redis-cluster:// (plain) pointed at the TLS ports: a clean error
 *       within its connect timeout;
 *   (f) each master has a replica (replication over TLS); CLUSTER FAILOVER
 *       of one: the client follows to the promoted replica's TLS port. */
#include "test_common.h"
#include "test_tls_cluster.h"

#include <pthread.h>
#include <unistd.h>

/* 3 masters with a replica each. */
static rh_rcl *start_with_replicas(const char *dir)
{
    return rh_rcl_start_tls(3, 1, dir);
}

static int group_setup(void **state)
{
    (void)state;
    return tls_cluster_setup(start_with_replicas);
}

/* Does the master that owns key's slot hold it with this value (asked over
 * the harness's own connection), and does the client route key to that
 * master's TLS port? */
static void assert_on_owner(distlock_client *c, const char *key, const char *token)
{
    int slot = rh_rcl_keyslot(CL, key), m = rh_rcl_owner(CL, 0, slot);
    assert_true(m >= 0);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", CL->rc->node[m].tls_port);
    int cslot = -1;
    assert_held_and_routed(c, key, m, token, want, &cslot);
    assert_int_equal(cslot, slot);
}

/* (a) */
static void test_locks_all_masters(void **state)
{
    (void)state;
    distlock_client *c = tls_client(uri);
    static const int slots[] = { 0, 3000, 6000, 8000, 11000, 16383 };
    int seen[16] = { 0 }, masters = 0;
    for (size_t k = 0; k < sizeof slots / sizeof slots[0]; k++) {
        char key[64];
        rh_rcl_key_in_slot(CL, "tcl", slots[k], key, sizeof key);
        int m = rh_rcl_owner(CL, 0, slots[k]);
        assert_true(m >= 0 && m < 16);
        masters += !seen[m]++;
        distlock_lock *l = NULL;
        /* The ttl outlasts the connect budget: under valgrind on a busy
         * machine a first handshake took over 10 s. */
        long ttl = getenv("DISTLOCK_TEST_SLOW") ? connect_ms() + 10000 : 10000;
        assert_rc(distlock_acquire(c, key, ttl, 0, 0, &l), DISTLOCK_OK);
        assert_on_owner(c, key, distlock_lock_token(l));
        assert_rc(distlock_extend(l, 3 * ttl), DISTLOCK_OK);
        assert_true(rh_pttl(CL->rc, m, 0, key) > ttl);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        assert_on_owner(c, key, NULL);
        distlock_lock_free(l);
    }
    assert_int_equal(masters, 3);
    distlock_client_free(c);
}

/* Number of MOVED errors the masters answered so far. */
static long moved_count(void)
{
    long total = 0;
    const char *needle = "errorstat_MOVED:count=";
    for (int i = 0; i < CL->rc->n; i++) {
        redisReply *r = rh_command(CL->rc, i, 0, "INFO errorstats");
        const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, needle) : NULL;
        if (p) total += strtol(p + strlen(needle), NULL, 10);
        if (r) freeReplyObject(r);
    }
    return total;
}

/* A key of slot (prefix...) in key, locked and released once through c:
 * the client's slot map is warm. */
static void warm_key(distlock_client *c, const char *prefix, int slot, char *key, size_t size)
{
    rh_rcl_key_in_slot(CL, prefix, slot, key, size);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, key, 30000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
}

/* (b) */
static void test_moved(void **state)
{
    (void)state;
    distlock_client *c = tls_client(uri);
    char key[64];
    int slot = 500;
    distlock_lock *l = NULL;
    warm_key(c, "tmv", slot, key, sizeof key);
    int from = rh_rcl_owner(CL, 0, slot), to = rh_rcl_owner(CL, 0, 15000);
    assert_int_not_equal(from, to);
    long moved0 = moved_count();
    assert_int_equal(rh_rcl_migrate_slot(CL, slot, from, to, 10, NULL, NULL), 0);
    for (int rep = 0; rep < 3; rep++) {
        assert_rc(distlock_acquire(c, key, 30000, 0, 0, &l), DISTLOCK_OK);
        assert_int_equal(rh_rcl_owner(CL, 0, slot), to);
        assert_on_owner(c, key, distlock_lock_token(l));
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    long extra = moved_count() - moved0;
    printf("TLS: moved key: %ld MOVED answered for 3 acquire/release pairs\n", extra);
    assert_int_equal(extra, 1);
    assert_int_equal(rh_rcl_migrate_slot(CL, slot, to, from, 10, NULL, NULL), 0);
    distlock_client_free(c);
}

/* (c) */
/* The master has an SSUBSCRIBE client that came in on its TLS port
 * (CLIENT LIST: laddr=127.0.0.1:TLSPORT ... cmd=ssubscribe). */
static int subscriber_on_tls_port(int m)
{
    redisReply *r = rh_command(CL->rc, m, 0, "CLIENT LIST");
    char needle[64];
    snprintf(needle, sizeof needle, "laddr=127.0.0.1:%d", CL->rc->node[m].tls_port);
    int found = 0;
    for (char *line = r && r->type == REDIS_REPLY_STRING ? r->str : NULL; line && *line;) {
        char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf ? n : sizeof buf - 1), line);
        if (strstr(buf, needle) && strstr(buf, " cmd=ssubscribe")) found = 1;
        line = end ? end + 1 : NULL;
    }
    if (r) freeReplyObject(r);
    return found;
}

static void test_wakeup(void **state)
{
    (void)state;
    distlock_client *holder = tls_client(uri), *w = tls_client(uri);
    assert_rc(distlock_client_set(w, DISTLOCK_OPT_RETRY_MIN_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(w, DISTLOCK_OPT_RETRY_MAX_MS, 5000), DISTLOCK_OK);
    char key[64], sch[96];
    int slot = 9000;
    rh_rcl_key_in_slot(CL, "twk", slot, key, sizeof key);
    snprintf(sch, sizeof sch, "distlock:{%s}", key);
    assert_int_equal(rh_rcl_keyslot(CL, sch), slot);
    int m = rh_rcl_owner(CL, 0, slot);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &l), DISTLOCK_OK);
    long before = rh_rcl_shardnumsub(CL, m, sch);
    struct waiter_arg a = { w, key, -99, 0, "" };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, waiter, &a), 0);
    if (!RH_WAIT_UNTIL(rh_rcl_shardnumsub(CL, m, sch) > before, 10000)) {
        print_error("no sharded subscriber to %s on master %d; waiter rc %d (%s)\n", sch, m, a.rc,
                    a.detail);
        fail();
    }
    assert_true(subscriber_on_tls_port(m));
    assert_int_equal(a.rc, -99);  /* still waiting */
    long long t0 = rh_now_ms();
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    pthread_join(th, NULL);
    if (a.rc != DISTLOCK_OK) print_error("waiter: %d (%s)\n", a.rc, a.detail);
    assert_rc(a.rc, DISTLOCK_OK);
    long ms = (long)(a.got_ms - t0);
    printf("TLS: waiter (SSUBSCRIBE over TLS) woken %ld ms after the release (re-check 5000 ms)\n",
           ms);
    assert_true(ms < 1000);
    distlock_client_free(w);
    distlock_client_free(holder);
}

/* (d) */
static void test_wrong_ca(void **state)
{
    (void)state;
    char bad[700];
    snprintf(bad, sizeof bad, "%s?tls_ca_file=%s/otherca.crt", CL->uri, certs);
    distlock_client *c = tls_client(bad);
    distlock_lock *l = NULL;
    char key[64];
    rh_rcl_key_in_slot(CL, "tca", 42, key, sizeof key);
    assert_fails(distlock_acquire(c, key, 10000, 0, 0, &l), DISTLOCK_ECONN);
    assert_null(l);
    const char *e = distlock_last_error();
    if (!strstr(e, "certificate verify failed")) {
        print_error("last_error \"%s\" lacks \"certificate verify failed\"\n", e);
        fail();
    }
    printf("TLS: wrong CA: %s\n", e);
    char buf[64];
    assert_int_equal(rh_get(CL->rc, rh_rcl_owner(CL, 0, 42), 0, key, buf, sizeof buf), 0);
    distlock_client_free(c);
}

/* (e) */
static void test_plain_at_tls_ports(void **state)
{
    (void)state;
    char plain[700];
    snprintf(plain, sizeof plain, "redis-cluster://%s", CL->uri + strlen("rediss-cluster://"));
    distlock_client *c = new_client(plain);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 1000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 1000), DISTLOCK_OK);
    distlock_lock *l = NULL;
    char key[64];
    rh_rcl_key_in_slot(CL, "tpl", 7, key, sizeof key);
    long long t0 = rh_now_ms();
    int rc = distlock_acquire(c, key, 10000, 0, 0, &l);
    long ms = (long)(rh_now_ms() - t0);
    printf("TLS: plain redis-cluster:// at the TLS ports: %d (%s) after %ld ms: %s\n", rc,
           distlock_strerror(rc), ms, distlock_last_error());
    assert_rc(rc, DISTLOCK_ECONN);  /* the TLS port resets a plaintext request */
    assert_null(l);
    assert_true(distlock_last_error()[0] != '\0');
    /* the seeds are tried in turn, each within its connect + reply budget */
    assert_true(ms < 3 * 2000 + 2000);
    distlock_client_free(c);
}

/* (f) CLUSTER FAILOVER of a replica (replication over TLS: tls-replication
 * yes): the client follows the MOVED of the demoted master to the promoted
 * replica's TLS port. Last: the topology changes. */
static void test_failover(void **state)
{
    (void)state;
    distlock_client *c = tls_client(uri);
    /* Under valgrind on a busy machine a reply over a TLS connection new
     * since the failover took over 500 ms (the default): following the
     * MOVED is what is tested here, not the reply budget. */
    if (getenv("DISTLOCK_TEST_SLOW"))
        assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 5000), DISTLOCK_OK);
    char key[64];
    int slot = 13000;
    distlock_lock *l = NULL;
    warm_key(c, "tfo", slot, key, sizeof key);
    int m = rh_rcl_owner(CL, 0, slot), r = rh_rcl_replica_of(CL, m);
    assert_true(m >= 0 && r >= 0);
    redisReply *x = rh_command(CL->rc, r, 0, "CLUSTER FAILOVER");
    assert_non_null(x);
    assert_int_not_equal(x->type, REDIS_REPLY_ERROR);
    freeReplyObject(x);
    assert_true(RH_WAIT_UNTIL(rh_rcl_is_master(CL, r) && rh_rcl_owner(CL, r, slot) == r &&
                              !rh_rcl_is_master(CL, m), 30000));
    assert_int_equal(rh_rcl_wait_ok(CL, 30000), 0);
    long moved0 = moved_count();
    assert_rc(distlock_acquire(c, key, 30000, 0, 0, &l), DISTLOCK_OK);
    assert_int_equal(rh_rcl_owner(CL, 0, slot), r);
    assert_on_owner(c, key, distlock_lock_token(l));
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    printf("TLS: after CLUSTER FAILOVER: %ld MOVED followed to the promoted replica\n",
           moved_count() - moved0);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_locks_all_masters),
        cmocka_unit_test(test_moved),
        cmocka_unit_test(test_wakeup),
        cmocka_unit_test(test_wrong_ca),
        cmocka_unit_test(test_plain_at_tls_ports),
        cmocka_unit_test(test_failover),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
