/* test_cluster_tls_own_address.c -- rediss-cluster://: every master's
 * certificate is checked against that master's own address (the one
 * CLUSTER SLOTS and MOVED give), never against the first seed's. A real TLS
 * cluster of 3 masters whose servers are bound to and announce 127.0.0.2,
 * .3 and .4 (loopback is all of 127.0.0.0/8), each serving a certificate
 * valid for its own address only (tests/harness/certs.sh ip2..ip4;
 * cluster_harness.h rh_rcl_start_tls_own_ips):
 *   (a) locks on keys of all three masters, each stored on its slot's master;
 *   (b) a waiter woken over the SSUBSCRIBE connection to a master that is
 *       not the first seed, within 1 s of the release (re-check: 5 s);
 *   (c) a master that serves the first seed's certificate (valid for
 *       127.0.0.2 only) is refused with OpenSSL's reason, no lock is taken
 *       there, the other masters still serve, and a subscriber does not
 *       subscribe on it either;
 *   (d) with tls_server_name set, that name is what every master is checked
 *       against: 127.0.0.2 serves, the other two are refused. */
#include "test_common.h"
#include "test_tls_cluster.h"

#include <pthread.h>
#include <unistd.h>

static int group_setup(void **state)
{
    (void)state;
    int r = tls_cluster_setup(rh_rcl_start_tls_own_ips);
    if (r == 0) printf("cluster: %s\n", CL->uri);
    return r;
}

/* The master (server index) that owns slot: server 0's CLUSTER SLOTS, its
 * TLS port mapped to the index. */
static int owner(int slot)
{
    int m = rh_rcl_owner(CL, 0, slot);
    assert_true(m >= 0 && m < 3);
    return m;
}

/* The client routes key to master m's own address (127.0.0.(m+2):TLSPORT),
 * and m holds key with token (NULL: not at all). */
static void assert_on_master(distlock_client *c, const char *key, int m, const char *token)
{
    char want[64];
    snprintf(want, sizeof want, "127.0.0.%d:%d", m + 2, CL->rc->node[m].tls_port);
    int slot = -1;
    assert_held_and_routed(c, key, m, token, want, &slot);
}

/* (a) */
static void test_each_master_with_own_certificate(void **state)
{
    (void)state;
    distlock_client *c = tls_client(uri);
    static const int slots[] = { 0, 8000, 16383 };
    int seen[3] = { 0 };
    for (size_t k = 0; k < 3; k++) {
        char key[64];
        rh_rcl_key_in_slot(CL, "own", slots[k], key, sizeof key);
        int m = owner(slots[k]);
        seen[m] = 1;
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(c, key, 10000, 0, 0, &l), DISTLOCK_OK);
        assert_on_master(c, key, m, distlock_lock_token(l));
        printf("TLS own address: %s locked on 127.0.0.%d (its certificate: IP:127.0.0.%d only)\n",
               key, m + 2, m + 2);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        assert_on_master(c, key, m, NULL);
        distlock_lock_free(l);
    }
    assert_int_equal(seen[0] + seen[1] + seen[2], 3);
    distlock_client_free(c);
}

/* (b) */
/* A key (prefix:N) of a slot whose owner is not the first seed (127.0.0.2),
 * and its shard channel; returns the owner. */
static int key_off_first_seed(const char *prefix, char *key, size_t ksize, char *sch, size_t ssize)
{
    static const int slots[] = { 0, 8000, 16383 };
    for (size_t k = 0; k < 3; k++) {
        if (owner(slots[k]) == 0)
            continue;
        rh_rcl_key_in_slot(CL, prefix, slots[k], key, ksize);
        snprintf(sch, ssize, "distlock:{%s}", key);
        assert_int_equal(rh_rcl_keyslot(CL, sch), slots[k]);
        return owner(slots[k]);
    }
    fail();
    return -1;
}

static void test_waiter_woken_by_master_off_first_seed(void **state)
{
    (void)state;
    distlock_client *holder = tls_client(uri), *w = tls_client(uri);
    assert_rc(distlock_client_set(w, DISTLOCK_OPT_RETRY_MIN_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(w, DISTLOCK_OPT_RETRY_MAX_MS, 5000), DISTLOCK_OK);
    char key[64], sch[96];
    int m = key_off_first_seed("owk", key, sizeof key, sch, sizeof sch);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &l), DISTLOCK_OK);
    long before = rh_rcl_shardnumsub(CL, m, sch);
    struct waiter_arg a = { w, key, -99, 0, "" };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, waiter, &a), 0);
    if (!RH_WAIT_UNTIL(rh_rcl_shardnumsub(CL, m, sch) > before, 10000)) {
        print_error("no sharded subscriber to %s on 127.0.0.%d; waiter rc %d (%s)\n", sch, m + 2,
                    a.rc, a.detail);
        distlock_client_cancel(w);
        pthread_join(th, NULL);
        fail();
    }
    assert_int_equal(a.rc, -99);  /* still waiting */
    long long t0 = rh_now_ms();
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    pthread_join(th, NULL);
    if (a.rc != DISTLOCK_OK) print_error("waiter: %d (%s)\n", a.rc, a.detail);
    assert_rc(a.rc, DISTLOCK_OK);
    long ms = (long)(a.got_ms - t0);
    printf("TLS own address: waiter (SSUBSCRIBE at 127.0.0.%d) woken %ld ms after the release "
           "(re-check 5000 ms)\n", m + 2, ms);
    assert_true(ms < 1000);
    distlock_client_free(w);
    distlock_client_free(holder);
}

/* TLS handshakes server i failed so far: the lines its log has for them
 * ("Error accepting a client connection: ..."; INFO counts only the
 * connections that completed one). */
static int handshakes_failed(int i)
{
    char path[160], line[1024];
    snprintf(path, sizeof path, "%s/redis-%d.log", CL->rc->dir, CL->rc->node[i].port);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, "Error accepting a client connection") != NULL;
    if (f) fclose(f);
    return n;
}

/* (c) */
static void test_master_with_first_seed_certificate_refused(void **state)
{
    (void)state;
    char key[64], sch[96], other[64];
    int m = key_off_first_seed("imp", key, sizeof key, sch, sizeof sch);
    const char *own_cert = m == 1 ? "ip3" : "ip4";
    distlock_lock *l = NULL;

    /* m now serves the certificate of the first seed's address, 127.0.0.2 */
    assert_int_equal(rh_rcl_set_cert(CL, m, "ip2"), 0);
    distlock_client *c = tls_client(uri);
    int rc = distlock_acquire(c, key, 10000, 0, 0, &l);
    const char *e = distlock_last_error();
    printf("TLS own address: master 127.0.0.%d with 127.0.0.2's certificate: %d (%s)\n", m + 2, rc,
           rc == DISTLOCK_OK ? "granted" : e);
    assert_fails(rc, DISTLOCK_ECONN);
    assert_null(l);
    if (!strstr(e, "certificate verify failed: IP address mismatch")) {
        print_error("last_error \"%s\" lacks \"certificate verify failed: IP address mismatch\"\n", e);
        fail();
    }
    char buf[64];
    assert_int_equal(rh_get(CL->rc, m, 0, key, buf, sizeof buf), 0);
    /* the others, each with its own certificate, still serve this client */
    for (int s = 0; s < 16384; s += 8000) {
        int o = owner(s);
        if (o == m) continue;
        rh_rcl_key_in_slot(CL, "imo", s, other, sizeof other);
        assert_rc(distlock_acquire(c, other, 10000, 0, 0, &l), DISTLOCK_OK);
        assert_on_master(c, other, o, distlock_lock_token(l));
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }

    /* Clients whose connections to every master were made while m had its
     * own certificate (they stay up): a holder, and a waiter whose
     * subscriber connects to m only after m took 127.0.0.2's again. */
    assert_int_equal(rh_rcl_set_cert(CL, m, own_cert), 0);
    distlock_client *holder = tls_client(uri), *w = tls_client(uri);
    assert_rc(distlock_client_set(w, DISTLOCK_OPT_RETRY_MIN_MS, 2000), DISTLOCK_OK);
    assert_rc(distlock_client_set(w, DISTLOCK_OPT_RETRY_MAX_MS, 2000), DISTLOCK_OK);
    for (int k = 0; k < 2; k++) {
        assert_rc(distlock_acquire(k ? w : holder, key, 30000, 0, 0, &l), DISTLOCK_OK);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    assert_int_equal(rh_rcl_set_cert(CL, m, "ip2"), 0);

    /* The subscriber's connection to m is refused as well: while the
     * waiter waits, its subscriber tries m again and again (m logs each
     * handshake that failed), and no SSUBSCRIBE arrives there. */
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &l), DISTLOCK_OK);
    long subs0 = rh_rcl_shardnumsub(CL, m, sch);
    int failed0 = handshakes_failed(m);
    struct waiter_arg a = { w, key, -99, 0, "" };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, waiter, &a), 0);
    int tried = RH_WAIT_UNTIL(handshakes_failed(m) >= failed0 + 3, 20000);
    long subs = rh_rcl_shardnumsub(CL, m, sch);
    printf("TLS own address: subscriber: %d handshakes refused at 127.0.0.%d, %ld sharded "
           "subscribers (before: %ld); waiter %d (%s)\n", handshakes_failed(m) - failed0, m + 2,
           subs, subs0, a.rc, a.rc == -99 ? "waiting" : a.detail);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    pthread_join(th, NULL);
    assert_true(tried);
    assert_int_equal(subs, subs0);
    assert_rc(a.rc, DISTLOCK_OK);  /* its re-check found the lock free */

    assert_int_equal(rh_rcl_set_cert(CL, m, own_cert), 0);
    distlock_client_free(c);
    distlock_client_free(w);
    distlock_client_free(holder);
}

/* (d) */
static void test_server_name_option_checked_for_every_master(void **state)
{
    (void)state;
    char named[800];
    snprintf(named, sizeof named, "%s&tls_server_name=127.0.0.2", uri);
    distlock_client *c = tls_client(named);
    distlock_lock *l = NULL;
    for (int s = 0; s < 16384; s += 8000) {
        char key[64];
        int m = owner(s);
        rh_rcl_key_in_slot(CL, "osn", s, key, sizeof key);
        if (m == 0) {  /* 127.0.0.2's own certificate names 127.0.0.2 */
            assert_rc(distlock_acquire(c, key, 10000, 0, 0, &l), DISTLOCK_OK);
            assert_rc(distlock_release(l), DISTLOCK_OK);
            distlock_lock_free(l);
            continue;
        }
        assert_fails(distlock_acquire(c, key, 10000, 0, 0, &l), DISTLOCK_ECONN);
        assert_null(l);
        const char *e = distlock_last_error();
        printf("TLS own address: tls_server_name=127.0.0.2, master 127.0.0.%d: %s\n", m + 2, e);
        if (!strstr(e, "certificate verify failed: IP address mismatch")) {
            print_error("last_error \"%s\" lacks \"certificate verify failed: IP address mismatch\"\n", e);
            fail();
        }
    }
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_master_with_own_certificate),
        cmocka_unit_test(test_waiter_woken_by_master_off_first_seed),
        cmocka_unit_test(test_master_with_first_seed_certificate_refused),
        cmocka_unit_test(test_server_name_option_checked_for_every_master),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
