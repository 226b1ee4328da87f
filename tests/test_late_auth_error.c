/* test_late_auth_error.c -- an AUTH failure that
 * arrives after its handshake timed out must not be swallowed.
 *
 * The server has an ACL user "app"; the client's URI carries a wrong
 * password for it. The default user is left enabled with full rights, so a
 * command run on a connection whose AUTH failed runs as the default user
 * and would write the lock key: that key must never appear. The proxy
 * accepts the first connection but starts forwarding only after 1.5 s,
 * beyond the 1 s connect timeout: the first call times out with the
 * handshake unanswered, and the AUTH error arrives later. Every later call
 * must report the authentication failure (DISTLOCK_EPROTO or
 * DISTLOCK_ECONN, a detail that says so and does not contain the
 * password), never succeed. */
#include "test_common.h"
#include "test_proxy_cluster.h"

DEFINE_PROXY_GROUP(1)

#define WRONG_PW "WRONG-s3cr3t-pw"

static void test_late_auth_error_not_swallowed(void **state)
{
    proxy_env *e = *state;
    const char *K = "auth:14";
    char uri[128], why[1024] = "";
    redisReply *x = rh_command(e->rc, 0, 0, "ACL SETUSER app on >right-pass ~* &* +@all");
    assert_non_null(x);
    assert_int_equal(x->type, REDIS_REPLY_STATUS);
    freeReplyObject(x);
    snprintf(uri, sizeof uri, "redis://app:" WRONG_PW "@127.0.0.1:%d", fp_port(e->fp, 0));
    distlock_client *c = new_client(uri);

    fp_ok(e->fp, "slow-accept 0 1500");
    distlock_lock *l = NULL;
    long long t0 = rh_now_ms();
    int r1 = distlock_acquire(c, K, 10000, 0, 0, &l);
    printf("# call 1 (handshake held back 1.5 s): %d (%s) after %lld ms\n", r1,
           distlock_last_error(), rh_now_ms() - t0);
    if (r1 == DISTLOCK_OK)
        snprintf(why, sizeof why, "call 1 acquired without any answer from the server\n");
    distlock_lock_free(l);
    l = NULL;
    fp_ok(e->fp, "slow-accept 0 0");
    int id = fp_last_conn(e->fp, 0);
    /* The delayed handshake reaches the server and its answers (the AUTH
     * error first) come back -- unless the library dropped the connection. */
    RH_WAIT_UNTIL(conn_info(e, 0, id).id < 0 || conn_info(e, 0, id).down_bytes > 0, 5000);
    fp_conn ci = conn_info(e, 0, id);
    printf("# connection %d: %s, %lld bytes answered\n", id, ci.id < 0 ? "closed" : ci.state,
           ci.down_bytes);

    for (int call = 2; call <= 3 && !why[0]; call++) {
        int r = distlock_acquire(c, K, 10000, 0, 0, &l);
        char detail[512];
        snprintf(detail, sizeof detail, "%s", distlock_last_error());
        printf("# call %d: %d (%s)\n", call, r, r == DISTLOCK_OK ? "" : detail);
        int written = rh_get(e->rc, 0, 0, K, NULL, 0);
        if (r == DISTLOCK_OK || written != 0) {
            snprintf(why, sizeof why, "call %d returned %d and the key is %s on the server: a "
                     "command ran as the default user after AUTH failed\n", call, r,
                     written == 1 ? "set" : "not set");
        } else if (r != DISTLOCK_EPROTO && r != DISTLOCK_ECONN) {
            snprintf(why, sizeof why, "call %d returned %d (%s), not the authentication "
                     "failure (EPROTO or ECONN): \"%s\"\n", call, r, distlock_strerror(r), detail);
        } else if (!contains_ci(detail, "auth") && !strstr(detail, "WRONGPASS")) {
            snprintf(why, sizeof why, "call %d: the detail does not say authentication failed: "
                     "\"%s\"\n", call, detail);
        } else if (strstr(detail, WRONG_PW)) {
            snprintf(why, sizeof why, "call %d: the detail shows the password: \"%s\"\n", call,
                     detail);
        }
        distlock_lock_free(l);
        l = NULL;
    }
    distlock_client_free(c);
    if (why[0]) {
        print_error("%s", why);
        fail();
    }
    assert_int_equal(rh_get(e->rc, 0, 0, K, NULL, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_late_auth_error_not_swallowed, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
