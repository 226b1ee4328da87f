/* test_badinput.c -- every entry point rejects bad input with the documented
 * code and a detail message, and never crashes. Linked against the static
 * library (proves libdistlock.a links on its own). */
#include "test_common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

DEFINE_GROUP(1)

static void test_version(void **state)
{
    (void)state;
    assert_int_equal(distlock_version_number(), DISTLOCK_VERSION_NUMBER);
    assert_string_equal(distlock_version_string(), DISTLOCK_VERSION_STRING);
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", DISTLOCK_VERSION_MAJOR, DISTLOCK_VERSION_MINOR,
             DISTLOCK_VERSION_PATCH);
    assert_string_equal(DISTLOCK_VERSION_STRING, want);
}

static void test_strerror(void **state)
{
    (void)state;
    const int codes[] = { DISTLOCK_OK, DISTLOCK_NOTACQUIRED, DISTLOCK_EINVAL, DISTLOCK_ENOMEM,
                          DISTLOCK_ECONN, DISTLOCK_ETIMEDOUT, DISTLOCK_ENOQUORUM,
                          DISTLOCK_ENOTOWNER, DISTLOCK_EPROTO, DISTLOCK_ECLOSED };
    const size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        const char *s = distlock_strerror(codes[i]);
        assert_non_null(s);
        assert_true(s[0] != '\0');
        for (size_t j = 0; j < i; j++) assert_string_not_equal(s, distlock_strerror(codes[j]));
    }
    const int unknown[] = { 2, 42, -9, -1000, 2147483647, -2147483647 - 1 };
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *s = distlock_strerror(unknown[i]);
        assert_non_null(s);
        assert_true(s[0] != '\0');
    }
    assert_non_null(distlock_last_error());
}

static void test_bad_uris(void **state)
{
    (void)state;
    const char *bad[] = {
        "", " ", "http://x", "redis://", "redis://h:99999", "redis://h:0", "redis://h:12x",
        "redis://h:-1", "redis://h:", "unix://", "unix:", "redis://a:1,,redis://b:2",
        "redis://a:1,", ",redis://a:1", "redis://a:1/x", "redis://a:1/-1", "redis://a:1/1x",
        "redis://a:1/99999999999999999999", "unix:///tmp/x.sock?db=abc",
        "unix:///tmp/x.sock?db=-1", "unix:///tmp/x.sock?foo=1", "redis://127.0.0.1:1,redis://127.0.0.1:1",
        "redis://a:1,redis://b:2,redis://a:1", "unix:///tmp/x.sock,unix:///tmp/x.sock",
        "redis://[::1", "rediss://x?tls_insecure=2", "rediss://",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        distlock_client *c = NULL;
        int r = distlock_client_new(bad[i], &c);
        if (r != DISTLOCK_EINVAL || c != NULL) {
            print_error("distlock_client_new(\"%s\") = %d (%s), client %p; expected EINVAL\n",
                        bad[i], r, distlock_strerror(r), (void *)c);
            distlock_client_free(c);
            fail();
        }
        if (distlock_last_error()[0] == '\0') {
            print_error("no detail for bad URI \"%s\"\n", bad[i]);
            fail();
        }
    }
    /* An over-long list. */
    size_t big = 70000;
    char *huge = malloc(big + 1);
    assert_non_null(huge);
    memset(huge, 'a', big);
    memcpy(huge, "redis://", 8);
    huge[big] = '\0';
    distlock_client *c = NULL;
    assert_fails(distlock_client_new(huge, &c), DISTLOCK_EINVAL);
    assert_null(c);
    free(huge);
    assert_fails(distlock_client_new("redis://127.0.0.1:1", NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_client_new(NULL, &c), DISTLOCK_EINVAL);
    assert_null(c);
}

static void test_good_uris_parse(void **state)
{
    (void)state;
    const char *good[] = {
        "redis://127.0.0.1:1", "redis://localhost", "redis://h:65535/15", "redis://u:p@h:2/0",
        "redis://:p@h:2", "unix:///tmp/x.sock", "unix:///tmp/x.sock?db=3",
        "redis://a:1,redis://b:1,redis://a:2",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        distlock_client *c = NULL;
        int r = distlock_client_new(good[i], &c);
        if (r != DISTLOCK_OK) {
            print_error("distlock_client_new(\"%s\") = %d: %s\n", good[i], r, distlock_last_error());
            fail();
        }
        assert_non_null(distlock_client_node_uri(c, 0));
        assert_null(distlock_client_node_uri(c, distlock_client_node_count(c)));
        assert_null(distlock_client_node_uri(c, -1));
        distlock_client_free(c);
    }
    distlock_client *c = new_client("redis://a:1,redis://b:1,redis://a:2");
    assert_int_equal(distlock_client_node_count(c), 3);
    assert_int_equal(distlock_client_quorum(c), 2);
    distlock_client_free(c);
}

static void test_options(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    assert_fails(distlock_client_set(c, (distlock_option)999, 1), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set(c, (distlock_option)0, 1), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set(c, (distlock_option)-1, 1), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, -1), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, -5), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set(c, DISTLOCK_OPT_DRIFT_PPM, -1), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set(c, DISTLOCK_OPT_DRIFT_MIN_MS, -1), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set(c, DISTLOCK_OPT_RETRY_MIN_MS, -1), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set(c, DISTLOCK_OPT_RETRY_MAX_MS, -1), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 1L << 40), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set(c, DISTLOCK_OPT_DRIFT_PPM, 1000001), DISTLOCK_EINVAL);
    /* Type mix-ups. */
    assert_fails(distlock_client_set(c, DISTLOCK_OPT_USERNAME, 1), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set(c, DISTLOCK_OPT_PASSWORD, 1), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set_str(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, "100ms"), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set_str(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, ""), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set_str(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set_str(c, (distlock_option)999, "x"), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set(NULL, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 100), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set_str(NULL, DISTLOCK_OPT_USERNAME, "u"), DISTLOCK_EINVAL);
    /* Valid values are accepted, and the client still works after all that. */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 2000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 1000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_DRIFT_PPM, 0), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_DRIFT_MIN_MS, 0), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MIN_MS, 5), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MAX_MS, 50), DISTLOCK_OK);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "opt", 1000, 0, 0, &l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_bad_acquire(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    static char longkey[DISTLOCK_KEY_MAX + 2];
    memset(longkey, 'k', DISTLOCK_KEY_MAX + 1);
    longkey[DISTLOCK_KEY_MAX + 1] = '\0';

    assert_fails(distlock_acquire(NULL, "k", 1000, 0, 0, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire(c, NULL, 1000, 0, 0, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire(c, "", 1000, 0, 0, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire(c, longkey, 1000, 0, 0, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire(c, "k", 0, 0, 0, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire(c, "k", -1, 0, 0, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire(c, "k", DISTLOCK_TTL_MAX + 1L, 0, 0, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire(c, "k", -9223372036854775807L - 1, 0, 0, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire(c, "k", 1000, -2, 0, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire(c, "k", 1000, -1000, 0, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire(c, "k", 1000, 0, 1u << 5, &l), DISTLOCK_EINVAL);  /* the first unknown bit */
    assert_fails(distlock_acquire(c, "k", 1000, 0, 1u << 31, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire(c, "k", 1000, 0, 0xffffffffu, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire(c, "k", 1000, 0, 0, NULL), DISTLOCK_EINVAL);
    assert_fails(acquire_as(c, "k", 1000, 0, 1u << 9, "me", &l), DISTLOCK_EINVAL);
    assert_fails(acquire_as(c, "", 1000, 0, 0, "me", &l), DISTLOCK_EINVAL);
    /* args: a size below the first layout (size, owner, cancel) is no layout */
    distlock_acquire_args small = { .size = offsetof(distlock_acquire_args, token) - 1,
                                    .owner = "me" };
    assert_fails(distlock_acquire_with(c, "k", 1000, 0, DISTLOCK_REENTRANT, &small, &l),
                 DISTLOCK_EINVAL);
    assert_non_null(strstr(distlock_last_error(), "args->size"));
    small.size = 0;
    assert_fails(distlock_acquire_with(c, "k", 1000, 0, DISTLOCK_REENTRANT, &small, &l),
                 DISTLOCK_EINVAL);
    assert_rc(distlock_cancel_new(NULL), DISTLOCK_EINVAL);
    assert_rc(distlock_cancel_fire(NULL), DISTLOCK_EINVAL);
    distlock_cancel_free(NULL);
    assert_null(l);
    /* None of them reached the server. */
    assert_int_equal(rh_get(rc, 0, 0, "k", NULL, 0), 0);

    /* The boundaries are accepted: the longest key and the largest TTL. */
    static char maxkey[DISTLOCK_KEY_MAX + 1];
    memset(maxkey, 'm', DISTLOCK_KEY_MAX);
    maxkey[DISTLOCK_KEY_MAX] = '\0';
    assert_rc(distlock_acquire(c, maxkey, DISTLOCK_TTL_MAX, 0, 0, &l), DISTLOCK_OK);
    assert_true(distlock_lock_validity_ms(l) > 2000000000L);
    assert_true(rh_pttl(rc, 0, 0, maxkey) > 2000000000LL);
    assert_rc(distlock_extend(l, DISTLOCK_TTL_MAX), DISTLOCK_OK);
    assert_fails(distlock_extend(l, 0), DISTLOCK_EINVAL);
    assert_fails(distlock_extend(l, -5), DISTLOCK_EINVAL);
    assert_fails(distlock_extend(l, DISTLOCK_TTL_MAX + 1L), DISTLOCK_EINVAL);
    assert_int_equal(rh_get(rc, 0, 0, maxkey, NULL, 0), 1);   /* bad extend left it alone */
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    l = NULL;
    /* A lease no longer than the drift allowance (2 ms + 1%) can never be
     * valid: a clear EINVAL, not a NOTACQUIRED that looks like contention. */
    assert_fails(distlock_acquire(c, "k", 1, 0, 0, &l), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire(c, "k", 2, 0, 0, &l), DISTLOCK_EINVAL);
    assert_non_null(strstr(distlock_last_error(), "drift"));
    assert_fails(distlock_acquire_token(c, "k", 2, "tok", 0, NULL), DISTLOCK_EINVAL);
    assert_int_equal(rh_get(rc, 0, 0, "k", NULL, 0), 0);   /* nothing was set */
    int r = distlock_acquire(c, "k", 3, 0, 0, &l);          /* 3 ms: valid input */
    assert_true(r != DISTLOCK_EINVAL);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_bad_lock_handles(void **state)
{
    (void)state;
    assert_fails(distlock_release(NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_extend(NULL, 1000), DISTLOCK_EINVAL);
    assert_int_equal(distlock_lock_validity_ms(NULL), 0);
    assert_int_equal(distlock_lock_fence(NULL), -1);
    assert_int_equal(distlock_lock_lost(NULL), 0);
    assert_null(distlock_lock_key(NULL));
    assert_null(distlock_lock_token(NULL));
    assert_true(distlock_lock_on_lost(NULL, NULL, NULL) < 0);
    assert_true(distlock_client_lost_fd(NULL) < 0);
    distlock_lock_free(NULL);
    distlock_client_free(NULL);
    assert_true(distlock_client_node_count(NULL) <= 0);
    assert_true(distlock_client_quorum(NULL) <= 0);
    assert_null(distlock_client_node_uri(NULL, 0));
}

static void test_bad_token_calls(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    char longtok[DISTLOCK_TOKEN_MAX + 2];
    memset(longtok, 't', DISTLOCK_TOKEN_MAX + 1);
    longtok[DISTLOCK_TOKEN_MAX + 1] = '\0';
    long v;
    assert_fails(distlock_acquire_token(c, "k", 1000, "", 0, &v), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire_token(c, "k", 1000, NULL, 0, &v), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire_token(c, "k", 1000, longtok, 0, &v), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire_token(c, "k", 1000, "t", DISTLOCK_FENCING, &v), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire_token(c, "k", 1000, "t", DISTLOCK_AUTO_RENEW, &v), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire_token(c, "k", 1000, "t", 1u << 9, &v), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire_token(c, "k", 0, "t", 0, &v), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire_token(c, "", 1000, "t", 0, &v), DISTLOCK_EINVAL);
    assert_fails(distlock_acquire_token(NULL, "k", 1000, "t", 0, &v), DISTLOCK_EINVAL);
    assert_fails(distlock_release_token(c, "k", ""), DISTLOCK_EINVAL);
    assert_fails(distlock_release_token(c, "k", NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_release_token(c, "k", longtok), DISTLOCK_EINVAL);
    assert_fails(distlock_release_token(c, "", "t"), DISTLOCK_EINVAL);
    assert_fails(distlock_release_token(c, NULL, "t"), DISTLOCK_EINVAL);
    assert_fails(distlock_release_token(NULL, "k", "t"), DISTLOCK_EINVAL);
    assert_fails(distlock_extend_token(c, "k", "", 1000, &v), DISTLOCK_EINVAL);
    assert_fails(distlock_extend_token(c, "k", longtok, 1000, &v), DISTLOCK_EINVAL);
    assert_fails(distlock_extend_token(c, "k", "t", 0, &v), DISTLOCK_EINVAL);
    assert_fails(distlock_extend_token(c, "k", "t", DISTLOCK_TTL_MAX + 1L, &v), DISTLOCK_EINVAL);
    assert_fails(distlock_extend_token(NULL, "k", "t", 1000, &v), DISTLOCK_EINVAL);
    assert_int_equal(rh_get(rc, 0, 0, "k", NULL, 0), 0);
    /* The longest token is fine. */
    longtok[DISTLOCK_TOKEN_MAX] = '\0';
    assert_rc(distlock_acquire_token(c, "k", 1000, longtok, 0, NULL), DISTLOCK_OK);
    char buf[DISTLOCK_TOKEN_MAX + 8];
    assert_int_equal(rh_get(rc, 0, 0, "k", buf, sizeof buf), 1);
    assert_string_equal(buf, longtok);
    assert_rc(distlock_release_token(c, "k", longtok), DISTLOCK_OK);

    char tok[33];
    assert_fails(distlock_token_generate(NULL, 33), DISTLOCK_EINVAL);
    assert_fails(distlock_token_generate(tok, 32), DISTLOCK_EINVAL);
    assert_fails(distlock_token_generate(tok, 0), DISTLOCK_EINVAL);

    /* Admin calls. */
    assert_fails(distlock_admin_holder(c, "k", 1, NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_holder(c, "k", -2, NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_holder(c, "", 0, NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_holder(NULL, "k", 0, NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_force_release(c, "", NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_force_release(NULL, "k", NULL), DISTLOCK_EINVAL);
    distlock_client_free(c);
}

/* A closed port: an error, not "held by someone else", naming the server. */
static void test_connection_refused(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = 0 };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t len = sizeof sa;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    int port = ntohs(sa.sin_port);
    close(fd);   /* bound, never listened: connections are refused */

    char uri[64], needle[32];
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", port);
    snprintf(needle, sizeof needle, "127.0.0.1:%d", port);
    distlock_client *c = new_client(uri);
    distlock_lock *l = NULL;
    long long t0 = rh_now_ms();
    int r = distlock_acquire(c, "k", 1000, 0, 0, &l);
    long long took = rh_now_ms() - t0;
    if (r >= 0) {
        print_error("acquire on a closed port returned %d (%s)\n", r, distlock_strerror(r));
        fail();
    }
    assert_null(l);
    if (!strstr(distlock_last_error(), needle)) {
        print_error("last_error \"%s\" does not name %s\n", distlock_last_error(), needle);
        fail();
    }
    assert_true(took < 5000);
    r = distlock_release_token(c, "k", "t");
    assert_true(r < 0 && r != DISTLOCK_ENOTOWNER);
    assert_non_null(strstr(distlock_last_error(), needle));
    r = distlock_admin_holder(c, "k", 0, NULL);
    assert_true(r < 0);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_strerror),
        cmocka_unit_test(test_bad_uris),
        cmocka_unit_test(test_good_uris_parse),
        cmocka_unit_test_setup(test_options, heal),
        cmocka_unit_test_setup(test_bad_acquire, heal),
        cmocka_unit_test(test_bad_lock_handles),
        cmocka_unit_test_setup(test_bad_token_calls, heal),
        cmocka_unit_test(test_connection_refused),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
