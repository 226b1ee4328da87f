/* test_sentinel_tls_master_address.c -- rediss-sentinel://: the master's
 * certificate is checked against the address the sentinels name, never
 * against the sentinels' own host. Two real TLS Sentinel groups (1 master,
 * 1 sentinel each; tests/harness/sentinels.py --data-ip): the sentinels at
 * 127.0.0.1 (certs.sh's server.crt: 127.0.0.1, ::1, localhost), the master
 * at 127.0.0.2 (loopback is all of 127.0.0.0/8), named so by the sentinels:
 *   (a) the master serves a certificate valid for 127.0.0.2 only (ip2.crt):
 *       lock, extend, release;
 *   (b) the master serves the sentinels' certificate (valid for 127.0.0.1,
 *       not for 127.0.0.2): refused with OpenSSL's reason, nothing written. */
#include "test_common.h"
#include "harness/sentinel_harness.h"

static char certs[64];
static rh_sentinels *own, *other;  /* (a) the master's own certificate, (b) the sentinels' */

static rh_sentinels *start(const char *data_cert)
{
    rh_sentinels_opts o = { 0 };
    o.tls_dir = certs;
    o.replicas = -1;
    o.sentinels = 1;
    o.quorum = 1;
    o.data_ip = "127.0.0.2";
    o.data_cert = data_cert;
    return rh_sentinels_start(&o);
}

static int group_setup(void **state)
{
    (void)state;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (rh_make_certs(certs, sizeof certs) != 0)
        return -1;
    own = start("ip2");
    other = own ? start("server") : NULL;
    return own && other ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    rh_sentinels_stop(other);
    rh_sentinels_stop(own);
    rh_remove_certs(certs);
    return 0;
}

/* The test CA and the client certificate the servers require, as URI
 * options. */
static distlock_client *tls_client(const rh_sentinels *g)
{
    char uri[800];
    snprintf(uri, sizeof uri, "%s?tls_ca_file=%s/ca.crt&tls_cert=%s/client.crt&tls_key=%s/client.key",
             g->uri, certs, certs, certs);
    distlock_client *c = new_client(uri);
    long ms = getenv("DISTLOCK_TEST_SLOW") ? 20000 : 2000;
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, ms), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, ms), DISTLOCK_OK);
    return c;
}

/* (a) */
static void test_master_checked_against_address_sentinels_name(void **state)
{
    (void)state;
    distlock_client *c = tls_client(own);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "stm-own", 10000, 0, 0, &l), DISTLOCK_OK);
    assert_int_equal(rh_sentinels_has(own, own->data_port[0], "stm-own", distlock_lock_token(l)), 1);
    printf("Sentinel TLS: master 127.0.0.2:%d (certificate for 127.0.0.2 only) named by the "
           "sentinel at 127.0.0.1:%d: granted\n", own->data_port[0], own->sentinel_port[0]);
    assert_rc(distlock_extend(l, 20000), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_int_equal(rh_sentinels_has(own, own->data_port[0], "stm-own", NULL), 0);
    distlock_client_free(c);
}

/* (b) */
static void test_master_with_sentinels_certificate_refused(void **state)
{
    (void)state;
    distlock_client *c = tls_client(other);
    distlock_lock *l = NULL;
    int rc = distlock_acquire(c, "stm-other", 10000, 0, 0, &l);
    const char *e = distlock_last_error();
    printf("Sentinel TLS: master 127.0.0.2:%d serving the sentinels' certificate (127.0.0.1): "
           "%d (%s)\n", other->data_port[0], rc, rc == DISTLOCK_OK ? "granted" : e);
    assert_fails(rc, DISTLOCK_ECONN);
    assert_null(l);
    if (!strstr(e, "certificate verify failed: IP address mismatch")) {
        print_error("last_error \"%s\" lacks \"certificate verify failed: IP address mismatch\"\n", e);
        fail();
    }
    assert_int_equal(rh_sentinels_has(other, other->data_port[0], "stm-other", NULL), 0);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_master_checked_against_address_sentinels_name),
        cmocka_unit_test(test_master_with_sentinels_certificate_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
