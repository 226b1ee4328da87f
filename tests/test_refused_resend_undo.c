/* test_refused_resend_undo.c -- a failed acquire's undo (acquire.c
 * undo_node()) where a resend was refused.
 *
 * undo_node() leaves a node alone when its reply is a refusal (an error:
 * OOM, NOPERM, READONLY, LOADING...), on the ground that the refused
 * command created nothing. But the reply it judges is the one of the LAST
 * send: when the first send's reply was lost (connection reset as the
 * reply came back) and the call was resent on a fresh connection, the
 * first send may have run the SET, and the resend's refusal says nothing
 * about that. The key is then left behind with a fresh token nobody knows:
 * a plain handle acquire that failed blocks the key for the whole TTL
 * (SPEC: "On failure, release on all nodes, including those that did not
 * answer"; SPEC, "no partial set left behind" in spirit).
 *
 * Three real redis-servers behind the fault-injecting proxy; node 1's
 * first reply is lost, its resend is refused with OOM (maxmemory reached
 * meanwhile). */
#include <pthread.h>

#include "test_common.h"
#include "test_proxy_cluster.h"

DEFINE_PROXY_GROUP(3)

static void set_maxmemory(proxy_env *e, int i, const char *v)
{
    redisReply *r = rh_command(e->rc, i, 0, "CONFIG SET maxmemory %s", v);
    assert_non_null(r);
    freeReplyObject(r);
}

typedef struct { distlock_client *c; const char *k; int r; char err[512]; } ar2_acq;

static void *acquire_thread(void *p)
{
    ar2_acq *a = p;
    distlock_lock *l = NULL;
    a->r = distlock_acquire(a->c, a->k, 20000, 0, 0, &l);
    snprintf(a->err, sizeof a->err, "%s", a->r == DISTLOCK_OK ? "" : distlock_last_error());
    if (l)
        distlock_release(l);
    return NULL;
}

static void test_failed_acquire_undoes_a_node_whose_resend_was_refused(void **state)
{
    proxy_env *e = *state;
    const char *K = "ar2:refused-resend";
    char hex[64];
    distlock_client *c = proxied_client(e);
    warm_up(c);
    assert_int_equal(rh_set(e->rc, 0, 0, K, "foreign", 60000), 0);

    /* node 1: the request runs, its reply is lost; the resend (SET NX GET
     * on the next connection) is held until the server is out of memory */
    int id1 = lib_conn(e, 1);
    fp_ok(e->fp, "reset-after 1:%d down 1", id1);
    fp_ok(e->fp, "hold-match 1:next up %s", fp_hex("*7\r\n$3\r\nSET\r\n", hex, sizeof hex));

    /* a plain handle acquire (fresh token) in another thread */
    pthread_t th;
    ar2_acq a = { c, K, -99, "" };
    int held = 0;
    assert_int_equal(pthread_create(&th, NULL, acquire_thread, &a), 0);
    held = fp_cmd(e->fp, NULL, 0, "wait-held 1 up 1 5000") == 0;
    char v[64] = "";
    int had = rh_get(e->rc, 1, 0, K, v, sizeof v);
    printf("# resend held: %d; node 1 holds '%s' (the first send ran)\n", held,
           had == 1 ? v : "(nothing)");
    set_maxmemory(e, 1, "1");
    fp_ok(e->fp, "unhold 1");
    pthread_join(th, NULL);
    set_maxmemory(e, 1, "0");
    printf("# acquire: %d (%s)\n", a.r, a.err);

    int left = 0;
    RH_WAIT_UNTIL((left = rh_get(e->rc, 1, 0, K, v, sizeof v)) != 1, 3000);
    printf("# node 1 after the failed acquire: %s (pttl %lld ms)\n", left == 1 ? v : "(none)",
           rh_pttl(e->rc, 1, 0, K));
    distlock_client_free(c);
    assert_true(held);
    assert_int_not_equal(a.r, DISTLOCK_OK);
    if (left == 1) {
        print_error("the failed acquire left its key on node 1 (value %s, a fresh token nobody "
                    "knows): its first send ran, the resend was refused (OOM) and the undo "
                    "skipped the node as 'refused'\n", v);
        fail();
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_failed_acquire_undoes_a_node_whose_resend_was_refused, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
