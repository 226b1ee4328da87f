/* test_tls_cluster.h -- a Redis Cluster its clients reach over TLS only
 * (cluster_harness.h), as the cmocka group of a test file: the certificates,
 * the cluster, its rediss-cluster:// URI with the CA, clients with a
 * connect timeout that fits valgrind, a waiting-acquire thread, and the
 * check that a key is held on a master and routed to a given address.
 * Include after test_common.h; define the group setup with
 * tls_cluster_setup(). */
#ifndef DISTLOCK_TEST_TLS_CLUSTER_H
#define DISTLOCK_TEST_TLS_CLUSTER_H

#include "cluster_harness.h"

static char certs[64];
static rh_rcl *CL;
static char uri[700];   /* CL->uri?tls_ca_file=certs/ca.crt */

/* Under valgrind (DISTLOCK_TEST_SLOW) a first handshake takes longer. */
static inline long connect_ms(void)
{
    return getenv("DISTLOCK_TEST_SLOW") ? 20000 : 1000;
}

/* New certificates, the cluster start(certs) makes, and uri. */
static inline int tls_cluster_setup(rh_rcl *(*start)(const char *certs))
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (rh_make_certs(certs, sizeof certs) != 0) return -1;
    CL = start(certs);
    if (!CL) return -1;
    snprintf(uri, sizeof uri, "%s?tls_ca_file=%s/ca.crt", CL->uri, certs);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    rh_rcl_stop(CL);
    rh_remove_certs(certs);
    return 0;
}

static inline distlock_client *tls_client(const char *u)
{
    distlock_client *c = new_client(u);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, connect_ms()), DISTLOCK_OK);
    return c;
}

/* Master m holds key with token (NULL: not at all), asked over the
 * harness's own connection, and the client routes key to `route`
 * (host:port); *slot gets the slot the client computed. */
static inline void assert_held_and_routed(distlock_client *c, const char *key, int m,
                                          const char *token, const char *route, int *slot)
{
    char buf[128];
    int got = rh_get(CL->rc, m, 0, key, buf, sizeof buf);
    if (token) {
        assert_int_equal(got, 1);
        assert_string_equal(buf, token);
    } else {
        assert_int_equal(got, 0);
    }
    assert_int_equal(distlock_admin_cluster_route(c, key, 0, slot, buf, sizeof buf), 1);
    assert_string_equal(buf, route);
}

/* A waiting acquire (ttl 30 s, wait 20 s) on its own thread: rc stays -99
 * until it returns; got_ms is when. */
struct waiter_arg {
    distlock_client *c;
    const char *key;
    int rc;
    long long got_ms;
    char detail[300];
};

static void *waiter(void *p)
{
    struct waiter_arg *w = p;
    distlock_lock *l = NULL;
    w->rc = distlock_acquire(w->c, w->key, 30000, 20000, 0, &l);
    w->got_ms = rh_now_ms();
    snprintf(w->detail, sizeof w->detail, "%s", distlock_last_error());
    if (l) {
        distlock_release(l);
        distlock_lock_free(l);
    }
    return NULL;
}

#endif
