/* test_one_server_under_two_names.c -- a server list that names one server
 * twice, by addresses that differ (its Unix socket and its TCP port; a TCP
 * proxy in front of it and its own port), is refused (docs/servers.md:
 * "names that turn out to be the same server make the first operation
 * that connects fail with DISTLOCK_EINVAL naming both").
 *
 * Why it matters to the lock: an acquire's SET on the first name grants;
 * the same SET on the second name then finds this acquire's own token,
 * which counts as granted (a retry after a lost reply). One server would
 * make a quorum of 2 of 3, next to a third node held by another owner.
 *
 * Three real redis-servers; node 0 is named twice, node 2 holds another
 * owner's key. */
#include "test_common.h"
#include "test_proxy_cluster.h"

DEFINE_PROXY_GROUP(3)

static void acquire_is_refused(proxy_env *e, const char *uris, const char *K)
{
    assert_int_equal(rh_set(e->rc, 2, 0, K, "foreign", 60000), 0);
    distlock_client *c = new_client(uris);
    distlock_lock *l = NULL;
    int r = distlock_acquire(c, K, 20000, 0, 0, &l);
    char err[512];
    snprintf(err, sizeof err, "%s", r == DISTLOCK_OK ? "" : distlock_last_error());
    printf("# acquire over %s: %d (%s)\n", uris, r, err);
    if (l) {
        distlock_release(l);
        distlock_lock_free(l);
    }
    distlock_client_free(c);
    assert_rc(r, DISTLOCK_EINVAL);
    assert_non_null(strstr(err, "same server"));
    /* nothing of this acquire on node 0 (its grant there was undone) */
    char v[64];
    assert_int_not_equal(rh_get(e->rc, 0, 0, K, v, sizeof v), 1);
}

static void test_unix_socket_and_tcp_port_of_one_server_are_refused(void **state)
{
    proxy_env *e = *state;
    char uris[512];
    snprintf(uris, sizeof uris, "unix://%s,redis://127.0.0.1:%d,redis://127.0.0.1:%d",
             e->rc->node[0].sock, e->rc->node[0].port, e->rc->node[2].port);
    acquire_is_refused(e, uris, "twice:unix-tcp");
}

static void test_proxy_and_direct_address_of_one_server_are_refused(void **state)
{
    proxy_env *e = *state;
    char uris[512];
    snprintf(uris, sizeof uris, "redis://127.0.0.1:%d,redis://127.0.0.1:%d,redis://127.0.0.1:%d",
             fp_port(e->fp, 0), e->rc->node[0].port, e->rc->node[2].port);
    acquire_is_refused(e, uris, "twice:proxy-direct");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_unix_socket_and_tcp_port_of_one_server_are_refused, heal),
        cmocka_unit_test_setup(test_proxy_and_direct_address_of_one_server_are_refused, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
