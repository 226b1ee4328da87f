/* test_sentinel_tls.c -- rediss-sentinel:// against a Sentinel group that
 * speaks only TLS (tests/harness/sentinels.py --tls-dir: 1 master, 2
 * replicas, 3 sentinels, `port 0`, `tls-replication yes`, client
 * certificates required, certificates from tests/harness/certs.sh for this
 * run). The client's TLS options (CA, client certificate and key) serve the
 * sentinels and the master alike: lock, extend, release, wait; the options
 * given in the URI; a wrong CA, a missing client certificate and a plain
 * redis-sentinel:// URI each fail with an error naming the sentinel; a
 * fork() leaves the parent's sessions alone; a SENTINEL FAILOVER is
 * followed over TLS within milliseconds of its +switch-master notice. */
#include "test_common.h"
#include "harness/sentinel_harness.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#define CONNECT_MS 1000
#define COMMAND_MS 1000

static char certs[64];
static rh_sentinels *g;

static int group_setup(void **state)
{
    (void)state;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (rh_make_certs(certs, sizeof certs) != 0)
        return -1;
    rh_sentinels_opts o = { 0 };
    o.tls_dir = certs;
    g = rh_sentinels_start(&o);
    return g ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    rh_sentinels_stop(g);
    rh_remove_certs(certs);
    return 0;
}

static const char *path(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", certs, name);
    return buf;
}

/* Under valgrind or sanitizers (DISTLOCK_TEST_SLOW) handshakes are slow. */
static long budget(long ms)
{
    return getenv("DISTLOCK_TEST_SLOW") ? ms * 10 : ms;
}

static distlock_client *plain_opts_client(const char *uri)
{
    distlock_client *c = new_client(uri);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, budget(CONNECT_MS)),
              DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, budget(COMMAND_MS)),
              DISTLOCK_OK);
    return c;
}

/* The test CA (or `ca`), and the client certificate the servers require. */
static distlock_client *tls_client(const char *uri, const char *ca)
{
    char f[128];
    distlock_client *c = plain_opts_client(uri);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_TLS_CA_FILE,
                                      path(ca ? ca : "ca.crt", f, sizeof f)), DISTLOCK_OK);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_TLS_CERT, path("client.crt", f, sizeof f)),
              DISTLOCK_OK);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_TLS_KEY, path("client.key", f, sizeof f)),
              DISTLOCK_OK);
    return c;
}

static void assert_error_has(const char *a, const char *b)
{
    const char *e = distlock_last_error();
    if (strstr(e, a) == NULL || (b && strstr(e, b) == NULL)) {
        print_error("last_error \"%s\" lacks \"%s\"%s%s%s\n", e, a, b ? " or \"" : "",
                    b ? b : "", b ? "\"" : "");
        fail();
    }
}

/* Acquire, extend, release on the current master, seen by the harness's
 * own TLS client. */
static void lock_unlock(distlock_client *c, const char *key)
{
    int master = rh_sentinels_master(g);
    assert_true(master > 0);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, key, 10000, 0, 0, &l), DISTLOCK_OK);
    assert_int_equal(rh_sentinels_has(g, master, key, distlock_lock_token(l)), 1);
    assert_rc(distlock_extend(l, 20000), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_int_equal(rh_sentinels_has(g, master, key, NULL), 0);
}

struct waiter {
    distlock_client *c;
    int rc;
};

static void *wait_main(void *arg)
{
    struct waiter *w = arg;
    distlock_lock *l = NULL;
    w->rc = distlock_acquire(w->c, "st-wait", 30000, 20000, 0, &l);
    if (l) {
        distlock_release(l);
        distlock_lock_free(l);
    }
    return NULL;
}

static void test_lock_unlock_wait(void **state)
{
    (void)state;
    assert_int_equal(strncmp(g->uri, "rediss-sentinel://", 18), 0);
    distlock_client *c = tls_client(g->uri, NULL);
    lock_unlock(c, "st-basic");

    /* A waiter is woken by the release: its subscriber reaches the master
     * through the sentinels, over TLS as well (retries 20 s apart: only
     * the notification can wake it in time). */
    distlock_client *c2 = tls_client(g->uri, NULL);
    assert_rc(distlock_client_set(c2, DISTLOCK_OPT_RETRY_MIN_MS, 20000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c2, DISTLOCK_OPT_RETRY_MAX_MS, 20000), DISTLOCK_OK);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "st-wait", 30000, 0, 0, &l), DISTLOCK_OK);
    struct waiter w = { c2, -100 };
    pthread_t th;
    int master = rh_sentinels_master(g);
    assert_int_equal(pthread_create(&th, NULL, wait_main, &w), 0);
    /* the waiter subscribed on the master (through the sentinels, TLS) */
    assert_true(RH_WAIT_UNTIL(rh_sentinels_cmd(g, 5000, "channels %d", master) > 0,
                              budget(10000)));
    assert_int_equal(w.rc, -100);
    long long released = rh_now_ms();
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    pthread_join(th, NULL);
    assert_rc(w.rc, DISTLOCK_OK);
    long long woke = rh_now_ms() - released;
    printf("rediss-sentinel: waiter done %lld ms after the release\n", woke);
    assert_true(woke < 10000);  /* its retries were 20 s apart */
    distlock_client_free(c2);
    distlock_client_free(c);
}

/* Every TLS option in the URI, none set on the client. */
static void test_uri_options(void **state)
{
    (void)state;
    char uri[1024];
    snprintf(uri, sizeof uri, "%s?tls_ca_file=%s/ca.crt&tls_cert=%s/client.crt"
             "&tls_key=%s/client.key", g->uri, certs, certs, certs);
    distlock_client *c = plain_opts_client(uri);
    lock_unlock(c, "st-uri");
    distlock_client_free(c);
}

/* The sentinels' certificates are not signed by the CA we trust: the
 * error names the first sentinel and the reason, and nothing is written. */
static void test_wrong_ca(void **state)
{
    (void)state;
    distlock_client *c = tls_client(g->uri, "otherca.crt");
    distlock_lock *l = NULL;
    assert_fails(distlock_acquire(c, "st-wrongca", 10000, 0, 0, &l), DISTLOCK_ECONN);
    printf("wrong CA: %s\n", distlock_last_error());
    char who[64];
    snprintf(who, sizeof who, "sentinel 127.0.0.1:%d", g->sentinel_port[0]);
    assert_error_has(who, "certificate verify failed");
    int master = rh_sentinels_master(g);
    assert_int_equal(rh_sentinels_has(g, master, "st-wrongca", NULL), 0);
    distlock_client_free(c);
}

/* The sentinels require a client certificate: without one the lookup
 * fails, naming the sentinel. */
static void test_no_client_cert(void **state)
{
    (void)state;
    char f[128];
    distlock_client *c = plain_opts_client(g->uri);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_TLS_CA_FILE, path("ca.crt", f, sizeof f)),
              DISTLOCK_OK);
    distlock_lock *l = NULL;
    assert_fails(distlock_acquire(c, "st-nocert", 10000, 0, 0, &l), DISTLOCK_ECONN);
    printf("no client certificate: %s\n", distlock_last_error());
    char who[64];
    snprintf(who, sizeof who, "sentinel 127.0.0.1:%d", g->sentinel_port[0]);
    assert_error_has(who, "TLS: ");
    distlock_client_free(c);
}

/* redis-sentinel:// (plain) to TLS-only sentinels: a clean failure naming
 * the sentinel, within the budget. */
static void test_plain_scheme(void **state)
{
    (void)state;
    char uri[600];
    snprintf(uri, sizeof uri, "redis-sentinel://%s", g->uri + strlen("rediss-sentinel://"));
    distlock_client *c = plain_opts_client(uri);
    distlock_lock *l = NULL;
    long long t0 = rh_now_ms();
    assert_fails(distlock_acquire(c, "st-plain", 10000, 0, 0, &l), DISTLOCK_ECONN);
    long long took = rh_now_ms() - t0;
    printf("plain scheme to TLS sentinels (%lld ms): %s\n", took, distlock_last_error());
    char who[64];
    snprintf(who, sizeof who, "sentinel 127.0.0.1:%d", g->sentinel_port[0]);
    assert_error_has(who, NULL);
    assert_true(took < budget(CONNECT_MS) + 2000);
    distlock_client_free(c);
}

/* fork() while the client's +switch-master subscriber runs (its TLS
 * session to a sentinel open): the child drops the parent's sessions
 * without a byte and locks through its own; the parent's go on working. */
static void test_fork(void **state)
{
    (void)state;
    distlock_client *c = tls_client(g->uri, NULL);
    lock_unlock(c, "st-fork1");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        distlock_lock *l = NULL;
        int ok = distlock_acquire(c, "st-fork-child", 10000, 0, 0, &l) == DISTLOCK_OK &&
                 distlock_release(l) == DISTLOCK_OK;
        distlock_lock_free(l);
        distlock_client_free(c);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    lock_unlock(c, "st-fork2");
    distlock_client_free(c);
}

/* A SENTINEL FAILOVER: the next calls reach the new master, over TLS.
 * Until Sentinel converts it (seconds after its +switch-master), the old
 * master still takes writes on a connection made before; the client's
 * +switch-master subscriber (sentinel.c) drops such connections as soon as
 * the sentinel announces the new master: within 2 s of the harness seeing
 * the same message, the lock lands on the new master. */
static void test_follow_failover(void **state)
{
    (void)state;
    distlock_client *c = tls_client(g->uri, NULL);
    lock_unlock(c, "st-fo1");  /* connected to the old master, watching */
    int old = rh_sentinels_master(g);
    int now = rh_sentinels_cmd(g, 60000, "failover-notice");
    assert_true(now > 0);
    assert_int_not_equal(now, old);
    long long t0 = rh_now_ms();
    distlock_lock *l = NULL;
    int on_new = 0, tries = 0;
    while (!on_new && rh_now_ms() - t0 < budget(2000)) {
        tries++;
        if (distlock_acquire(c, "st-fo2", 10000, 0, 0, &l) != DISTLOCK_OK)
            continue;
        on_new = rh_sentinels_has(g, now, "st-fo2", distlock_lock_token(l)) == 1;
        if (!on_new) {
            distlock_release(l);
            distlock_lock_free(l);
            l = NULL;
        }
    }
    printf("rediss-sentinel: first lock on the new master after %d call(s), %lld ms after "
           "the +switch-master notice\n", tries, rh_now_ms() - t0);
    assert_true(on_new);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_int_equal(rh_sentinels_has(g, now, "st-fo2", NULL), 0);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lock_unlock_wait),
        cmocka_unit_test(test_uri_options),
        cmocka_unit_test(test_wrong_ca),
        cmocka_unit_test(test_no_client_cert),
        cmocka_unit_test(test_plain_scheme),
        cmocka_unit_test(test_fork),
        cmocka_unit_test(test_follow_failover),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
