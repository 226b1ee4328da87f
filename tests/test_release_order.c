/* test_release_order.c -- a release must never overtake
 * its acquire.
 *
 * An acquire returns at quorum while its request to node 2 is still held
 * by the proxy; then the lock is released, and only afterwards does the
 * proxy deliver the held acquire to node 2. If the release went to node 2
 * on another connection it ran first, found nothing, and the late acquire
 * then leaves a stale key there for the whole TTL. Fixed: once release has
 * returned and the held traffic is delivered, no key of ours remains on any
 * node. Covered: a plain acquire; a fencing acquire whose node 2 timed out
 * while another thread uses the connection set; a plain acquire while
 * another thread keeps the connection set longer than the command timeout;
 * distlock_client_set_str(PASSWORD) between acquire and release. */
#include "test_common.h"
#include "test_proxy_cluster.h"

#include <pthread.h>
#include <stdatomic.h>

DEFINE_PROXY_GROUP(3)

/* Everything the library sent has reached the proxy; then node 2's held
 * bytes go out. The proxy forwards what it already read before it executes
 * a later control command, so a release the library sent on another
 * connection reaches node 2 before the held acquire does. */
static void deliver_held(proxy_env *e, int l, int id)
{
    proxy_settle(e);
    fp_unhold_or_killed(e->fp, "unhold %d:%d up", l, id);
}

/* Another thread's call on the client's (only) connection set, kept busy
 * until the proxy lets its request to node 0 through. */
struct busy_arg {
    distlock_client *c;
    int rc;
    atomic_int done;
};

static void *busy_main(void *p)
{
    struct busy_arg *a = p;
    a->rc = distlock_admin_holder(a->c, "order:other", 0, NULL);
    atomic_store(&a->done, 1);
    return NULL;
}

/* Plain acquire, one thread: the lock remembers the connection set its
 * request to node 2 is queued on, and the release follows it there. */
static void test_release_after_held_acquire(void **state)
{
    proxy_env *e = *state;
    const char *K = "order:11a";
    distlock_client *c = proxied_client(e);
    warm_up(c);
    int c2 = lib_conn(e, 2);
    fp_ok(e->fp, "hold 2:%d up", c2);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, K, 10000, 0, 0, &l), DISTLOCK_OK);
    int r = distlock_release(l);
    printf("# release while node 2 holds the acquire: %d\n", r);
    deliver_held(e, 2, c2);
    distlock_lock_free(l);
    distlock_client_free(c);
    assert_rc(r, DISTLOCK_OK);
    assert_no_key_anywhere(e, K);
}

/* Plain acquire, one thread, then many other locks taken and released
 * while node 2 still holds the acquire: each of their releases is queued
 * behind it on node 2's connection, until the library gives that
 * connection up (it owes too many replies) and re-makes it. The release of
 * the first lock must still not overtake its acquire. */
static void test_release_after_held_acquire_conn_remade(void **state)
{
    proxy_env *e = *state;
    const char *K = "order:11e";
    distlock_client *c = proxied_client(e);
    warm_up(c);
    int c2 = lib_conn(e, 2);
    fp_ok(e->fp, "hold 2:%d up", c2);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, K, 10000, 0, 0, &l), DISTLOCK_OK);
    int pairs = 0;
    for (; pairs < 400 && fp_last_conn(e->fp, 2) == c2; pairs++) {
        distlock_lock *o = NULL;
        assert_rc(distlock_acquire(c, "order:11e-other", 10000, 0, 0, &o), DISTLOCK_OK);
        assert_rc(distlock_release(o), DISTLOCK_OK);
        distlock_lock_free(o);
    }
    printf("# %d other acquire/release pairs; the library %s node 2's connection\n", pairs,
           fp_last_conn(e->fp, 2) == c2 ? "kept" : "re-made");
    int r = distlock_release(l);
    printf("# release: %d (%s)\n", r, r == DISTLOCK_OK ? "" : distlock_last_error());
    deliver_held(e, 2, c2);
    distlock_lock_free(l);
    distlock_client_free(c);
    assert_no_key_anywhere(e, K);
}

/* Fencing acquire, one thread: it waits for node 2, which times out (held),
 * and succeeds on nodes 0 and 1; the release follows. */
static void test_release_after_fencing_timeout(void **state)
{
    proxy_env *e = *state;
    const char *K = "order:11f";
    distlock_client *c = proxied_client(e);
    warm_up(c);
    int c2 = lib_conn(e, 2);
    fp_ok(e->fp, "hold 2:%d up", c2);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, K, 10000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
    int r = distlock_release(l);
    printf("# release after a fencing acquire whose node 2 timed out: %d (%s)\n", r,
           r == DISTLOCK_OK ? "" : distlock_last_error());
    deliver_held(e, 2, c2);
    distlock_lock_free(l);
    distlock_client_free(c);
    assert_no_key_anywhere(e, K);
}

/* Fencing acquire: it waits for node 2, which times out (held), and
 * succeeds on nodes 0 and 1. At release time another thread is inside a
 * call on the connection set that carries the held acquire. */
static void test_release_after_fencing_timeout_other_thread(void **state)
{
    proxy_env *e = *state;
    const char *K = "order:11b";
    distlock_client *c = proxied_client(e);
    warm_up(c);
    int c0 = lib_conn(e, 0), c2 = lib_conn(e, 2);
    fp_ok(e->fp, "hold 2:%d up", c2);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, K, 10000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
    printf("# fencing acquire with node 2 held: fence %lld\n", (long long)distlock_lock_fence(l));

    fp_ok(e->fp, "hold 0:%d up", c0);
    struct busy_arg b = { c, -100, 0 };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, busy_main, &b), 0);
    fp_ok(e->fp, "wait-held 0:%d up 1 10000", c0);   /* the other thread has the set */

    int r = distlock_release(l);
    printf("# release while the other thread %s: %d (%s)\n",
           atomic_load(&b.done) ? "had finished" : "still used the set", r,
           r == DISTLOCK_OK ? "" : distlock_last_error());
    deliver_held(e, 2, c2);
    fp_unhold_or_killed(e->fp, "unhold 0:%d up", c0);
    pthread_join(th, NULL);
    distlock_lock_free(l);
    distlock_client_free(c);
    assert_no_key_anywhere(e, K);
}

/* Plain acquire (it returned at quorum with node 2 silent); at release time
 * another thread keeps the connection set longer than the command timeout:
 * its call reconnects to node 0 and that handshake is held. */
static void test_release_after_held_acquire_set_busy(void **state)
{
    proxy_env *e = *state;
    const char *K = "order:11c";
    distlock_client *c = proxied_client(e);
    /* the other thread's reconnect may take far longer than a command */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 5000), DISTLOCK_OK);
    warm_up(c);
    int c0 = lib_conn(e, 0), c2 = lib_conn(e, 2);
    fp_ok(e->fp, "hold 2:%d up", c2);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, K, 10000, 0, 0, &l), DISTLOCK_OK);

    fp_ok(e->fp, "reset 0:%d", c0);          /* the set's link to node 0 breaks */
    fp_ok(e->fp, "hold 0:next up");          /* and its re-made connection hangs */
    struct busy_arg b = { c, -100, 0 };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, busy_main, &b), 0);
    fp_ok(e->fp, "wait-held 0 up 1 10000");  /* the other thread is reconnecting */

    int r = distlock_release(l);
    printf("# release while the other thread %s: %d (%s)\n",
           atomic_load(&b.done) ? "had finished" : "still used the set", r,
           r == DISTLOCK_OK ? "" : distlock_last_error());
    deliver_held(e, 2, c2);
    fp_unhold_or_killed(e->fp, "unhold 0 up");
    pthread_join(th, NULL);
    distlock_lock_free(l);
    distlock_client_free(c);
    assert_no_key_anywhere(e, K);
}

/* ACL user "app" with two passwords; the client changes its password
 * between acquire and release (distlock_client_set_str closes the idle
 * connections, the one carrying the held acquire among them). */
static void test_release_after_held_acquire_set_str(void **state)
{
    proxy_env *e = *state;
    const char *K = "order:11d";
    char uris[512];
    size_t off = 0;
    for (int i = 0; i < 3; i++) {
        redisReply *x = rh_command(e->rc, i, 0, "ACL SETUSER app on >pw-one >pw-two ~* &* +@all");
        assert_non_null(x);
        assert_int_equal(x->type, REDIS_REPLY_STATUS);
        freeReplyObject(x);
        off += (size_t)snprintf(uris + off, sizeof uris - off, "%sredis://app:pw-one@127.0.0.1:%d",
                                i ? "," : "", fp_port(e->fp, i));
    }
    distlock_client *c = new_client(uris);
    warm_up(c);
    int c2 = lib_conn(e, 2);
    fp_ok(e->fp, "hold 2:%d up", c2);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, K, 10000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_PASSWORD, "pw-two"), DISTLOCK_OK);
    int r = distlock_release(l);
    printf("# release after set_str(PASSWORD): %d (%s)\n", r,
           r == DISTLOCK_OK ? "" : distlock_last_error());
    deliver_held(e, 2, c2);
    distlock_lock_free(l);
    distlock_client_free(c);
    assert_no_key_anywhere(e, K);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_release_after_held_acquire, heal),
        cmocka_unit_test_setup(test_release_after_held_acquire_conn_remade, heal),
        cmocka_unit_test_setup(test_release_after_fencing_timeout, heal),
        cmocka_unit_test_setup(test_release_after_fencing_timeout_other_thread, heal),
        cmocka_unit_test_setup(test_release_after_held_acquire_set_busy, heal),
        cmocka_unit_test_setup(test_release_after_held_acquire_set_str, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
