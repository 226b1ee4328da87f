/* test_grammar.c -- the server-list grammar of SPEC.md: node separators,
 * TLS and Sentinel URIs, their options, and the errors for what is not in
 * the grammar. No server is needed: a client does not connect when made.
 *
 * A TLS or Sentinel node may be refused by a build whose transport does
 * not serve that kind yet: then the refusal must name the node as parsed
 * (which is what is checked), never accept it as something else. */
#include "test_common.h"

/* The URI of node i as the library shows it, whether the client was made
 * or the kind of node refused ("<uri>: ... not supported ..."). */
static void shown(const char *list, int n, int i, char *out, size_t size)
{
    distlock_client *c = NULL;
    int r = distlock_client_new(list, &c);
    if (r == DISTLOCK_OK) {
        assert_int_equal(distlock_client_node_count(c), n);
        snprintf(out, size, "%s", distlock_client_node_uri(c, i));
        distlock_client_free(c);
        return;
    }
    const char *d = distlock_last_error();
    assert_int_equal(r, DISTLOCK_EINVAL);
    assert_non_null(strstr(d, "not supported"));
    snprintf(out, size, "%.*s", (int)(strstr(d, ": ") - d), d);
    (void)i;
}

static void refused(const char *list, const char *needle)
{
    distlock_client *c = NULL;
    int r = distlock_client_new(list, &c);
    if (r != DISTLOCK_EINVAL || strstr(distlock_last_error(), needle) == NULL)
        fail_msg("'%s': got %d (%s), expected EINVAL mentioning '%s'", list, r,
                 distlock_last_error(), needle);
    assert_null(c);
}

static void test_separators(void **state)
{
    (void)state;
    distlock_client *c = NULL;
    /* comma + scheme, whitespace, both */
    assert_rc(distlock_client_new("redis://a:1,redis://b:2 redis://c:3 ,  redis://d:4", &c),
              DISTLOCK_OK);
    assert_int_equal(distlock_client_node_count(c), 4);
    assert_string_equal(distlock_client_node_uri(c, 2), "redis://c:3");
    assert_int_equal(distlock_client_quorum(c), 3);
    distlock_client_free(c);
    /* a comma not followed by a scheme is inside a URI: one host only there */
    refused("redis://a:1,b:2", "takes one host");
    refused("redis://a:1,,redis://b:2", "empty entry #2");
    refused("redis://a:1 , ", "empty entry");
}

static void test_sentinel(void **state)
{
    (void)state;
    char u[256];
    shown("redis-sentinel://s1:26379,s2,[::1]:26380/orders", 1, 0, u, sizeof u);
    assert_string_equal(u, "redis-sentinel://s1:26379,s2:26379,[::1]:26380/orders");
    shown("redis-sentinel://app:secret@s1,s2/orders/3?sentinel_user=sen&sentinel_password=p%40ss",
          1, 0, u, sizeof u);
    assert_string_equal(u, "redis-sentinel://app:***@s1:26379,s2:26379/orders/3");
    /* SPEC.md's example: a Sentinel group, a TLS master (and a plain one) */
    shown("redis-sentinel://s1:26379,s2:26379,s3:26379/orders,rediss://10.0.0.7:6380,"
          "redis://10.0.0.8", 3, 0, u, sizeof u);
    /* (Sentinel nodes are served: while TLS is not, the refusal names the
     * rediss:// node instead) */
    assert_true(strstr(u, "redis-sentinel://s1:26379,s2:26379,s3:26379/orders") != NULL ||
                strcmp(u, "rediss://10.0.0.7:6380") == 0);
    refused("redis-sentinel://s1,s2", "names its master");
    refused("redis-sentinel://s1,s2/", "names its master");
    refused("redis-sentinel://s1/m?tls_ca_file=/x", "need rediss://");
    refused("redis-sentinel://s1/m/x", "/db must be a number");
    refused("redis-sentinel://s1/m,redis-sentinel://s1:26379/m", "duplicate node");
}

static void test_cluster(void **state)
{
    (void)state;
    char u[256];
    shown("redis-cluster://c1:7000,c2,[::1]:7001", 1, 0, u, sizeof u);
    assert_string_equal(u, "redis-cluster://c1:7000,c2:6379,[::1]:7001");
    shown("redis-cluster://app:secret@c1:7000,c2:7000", 1, 0, u, sizeof u);
    assert_string_equal(u, "redis-cluster://app:***@c1:7000,c2:7000");
    /* SPEC.md's example: a Sentinel group, a TLS master and a cluster */
    shown("redis-sentinel://s1:26379,s2:26379,s3:26379/orders,rediss://10.0.0.7:6380,"
          "redis-cluster://c1:7000,c2:7000", 3, 2, u, sizeof u);
    assert_string_equal(u, "redis-cluster://c1:7000,c2:7000");
    refused("redis-cluster://c1:7000/2", "only database 0");
    refused("redis-cluster://c1?tls_ca_file=/x", "or rediss-cluster://");
    refused("redis-cluster://c1?sentinel_user=x", "only for redis-sentinel://");
    refused("redis-cluster://c1:7000,c2:7000,redis-cluster://c2:7000", "duplicate node");
    refused("redis-cluster://c1:0", "port");
}

static void test_tls(void **state)
{
    (void)state;
    char u[256];
    shown("rediss://u:pw@h:6380/2?tls_ca_file=/etc/ca.pem&tls_server_name=redis.example",
          1, 0, u, sizeof u);
    assert_string_equal(u, "rediss://u:***@h:6380/2");
    /* the opt-out shows in every message about the node */
    shown("rediss://h?tls_insecure=1", 1, 0, u, sizeof u);
    assert_string_equal(u, "rediss://h:6379?tls_insecure=1");
    refused("redis://h?tls_ca_file=/x", "need rediss://");
    refused("rediss://h?tls_insecure=2", "tls_insecure must be 0 or 1");
    refused("rediss://h?tls_cert=", "empty value");
    refused("rediss://h?tls_nope=1", "unknown option 'tls_nope'");
    refused("rediss://h?sentinel_user=x", "only for redis-sentinel://");
    refused("rediss://h?tls_key", "needs a value");
}

static void test_passwords_never_shown(void **state)
{
    (void)state;
    static const char *const lists[] = {
        "redis-sentinel://u:TOPSECRET@s1,s2/m?sentinel_password=TOPSECRET&nope=1",
        "redis-sentinel://s1/m?sentinel_password=TOPSECRET&tls_cert=x",
        "rediss://u:TOPSECRET@h?tls_bogus=1",
        "redis-sentinel://u:TOPSECRET@s1,s2",
        "redis://u:TOP SECRET@h:99999",
        "redis://u:TOP,SECRET@h:99999",
    };
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++) {
        distlock_client *c = NULL;
        assert_int_equal(distlock_client_new(lists[k], &c), DISTLOCK_EINVAL);
        if (strstr(distlock_last_error(), "TOP"))
            fail_msg("password in '%s'", distlock_last_error());
    }
}

static void test_unix(void **state)
{
    (void)state;
    char u[256];
    shown("unix:///tmp/x.sock?db=3", 1, 0, u, sizeof u);
    assert_string_equal(u, "unix:///tmp/x.sock?db=3");
    refused("unix:///tmp/x.sock?tls_cert=x", "need rediss://");
    refused("unix:///tmp/x.sock?db=x", "?db= must be a number");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_separators),
        cmocka_unit_test(test_sentinel),
        cmocka_unit_test(test_cluster),
        cmocka_unit_test(test_tls),
        cmocka_unit_test(test_passwords_never_shown),
        cmocka_unit_test(test_unix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
