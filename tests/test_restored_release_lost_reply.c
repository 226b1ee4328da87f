/* test_restored_release_lost_reply.c -- a restored handle's release
 * (distlock_lock_restore()) whose reply is lost. The token held the key and
 * the first send deleted it; its reply is lost (the proxy resets the
 * connection as the reply comes back), the core resends on a fresh
 * connection and finds the key gone. A restored handle knows nothing of its
 * own of the key (it acquired nothing), so nothing proves the key gone was
 * ours: the release returns DISTLOCK_ENOTOWNER and marks the handle lost,
 * as documented ("retry-safe but not provable"). What must hold whatever
 * the verdict: the resend is a compare-and-delete, so a key another owner
 * took between the lost reply and the resend keeps that owner's token.
 *
 * Real redis-servers behind the fault proxy; keys set and read behind the
 * library's back. */
#include <pthread.h>

#include "test_common.h"
#include "harness/faultproxy.h"

typedef struct {
    rh_cluster *rc;
    fp_proxy *fp;
} fixture;

static int group_setup(void **state, int n)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    fixture *f = calloc(1, sizeof *f);
    if (!f || !(f->rc = rh_start(n)) || !(f->fp = fp_front(f->rc)))
        return -1;
    *state = f;
    return 0;
}
static int group_setup1(void **state) { return group_setup(state, 1); }
static int group_setup3(void **state) { return group_setup(state, 3); }
static int group_teardown(void **state)
{
    fixture *f = *state;
    fp_stop(f->fp);
    rh_stop_all(f->rc);
    free(f);
    return 0;
}
static int heal(void **state)
{
    fixture *f = *state;
    return fp_cmd(f->fp, NULL, 0, "heal") == 0 && rh_heal(f->rc) == 0 ? 0 : -1;
}

/* The connection of listener l with request bytes held, -1 if none. */
static int held_conn(fp_proxy *fp, int l)
{
    fp_conn cs[32];
    int n = fp_conns(fp, l, cs, 32);
    for (int i = 0; i < n; i++)
        if (cs[i].held_up > 0)
            return cs[i].id;
    return -1;
}

struct rel {
    distlock_lock *l;
    int rc;
};
static void *release_main(void *arg)
{
    struct rel *r = arg;
    r->rc = distlock_release(r->l);
    return NULL;
}

/* Arm a hold of the release's requests to every node (count: the first
 * send, and with 2 its resend too), start the release, and cut each first
 * send's reply after 1 byte, once the server has run it. */
static void release_with_replies_lost(fixture *f, const char *key, int count, struct rel *r,
                                      pthread_t *th)
{
    rh_cluster *rc = f->rc;
    fp_proxy *fp = f->fp;
    char hex[256];
    fp_hex(key, hex, sizeof hex);
    for (int i = 0; i < rc->n; i++)
        assert_int_equal(fp_cmd(fp, NULL, 0, "hold-match %d up %s %d", i, hex, count), 0);
    assert_int_equal(pthread_create(th, NULL, release_main, r), 0);
    for (int i = 0; i < rc->n; i++) {
        assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held %d up 1 10000", i), 0);
        int conn = held_conn(fp, i);
        assert_true(conn > 0);
        assert_int_equal(fp_cmd(fp, NULL, 0, "reset-after %d:%d down 1", i, conn), 0);
        assert_int_equal(fp_cmd(fp, NULL, 0, "unhold %d:%d up", i, conn), 0);
    }
}

/* The first send deleted the key, its reply was lost, the resend finds it
 * gone: DISTLOCK_ENOTOWNER and lost (not provable), the key gone. */
static void test_restored_release_lost_reply_resend_finds_key_gone_is_notowner(void **state)
{
    fixture *f = *state;
    rh_cluster *rc = f->rc;
    const char *key = "rr:lost-reply", *tok = "restored-owner-token";
    distlock_client *c = new_client(fp_uris(f->fp));
    connect_every_node(rc, c, "rr:connect");
    for (int i = 0; i < rc->n; i++)
        assert_int_equal(rh_set(rc, i, 0, key, tok, 30000), 0);

    distlock_lock *l = NULL;
    assert_rc(distlock_lock_restore(c, key, tok, &l), DISTLOCK_OK);
    struct rel r = { .l = l };
    pthread_t th;
    release_with_replies_lost(f, key, 1, &r, &th);
    pthread_join(th, NULL);
    int left = rh_count_holding(rc, key, tok);
    printf("# restored release, replies lost: %s, nodes still holding: %d, lost: %d\n",
           distlock_strerror(r.rc), left, distlock_lock_lost(l));
    assert_int_equal(left, 0);
    for (int i = 0; i < rc->n; i++)
        assert_int_equal(rh_get(rc, i, 0, key, NULL, 0), 0);
    assert_rc(r.rc, DISTLOCK_ENOTOWNER);
    assert_int_equal(distlock_lock_lost(l), 1);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* Another owner takes the key between the lost reply and the resend (held
 * by the proxy meanwhile): the resend compare-and-deletes nothing of
 * theirs; DISTLOCK_ENOTOWNER and lost; their key keeps its token. */
static void test_restored_release_lost_reply_resend_leaves_new_owner_key(void **state)
{
    fixture *f = *state;
    rh_cluster *rc = f->rc;
    fp_proxy *fp = f->fp;
    const char *key = "rr:lost-reply-new-owner", *tok = "restored-owner-token";
    distlock_client *c = new_client(fp_uris(fp));
    connect_every_node(rc, c, "rr:connect");
    for (int i = 0; i < rc->n; i++)
        assert_int_equal(rh_set(rc, i, 0, key, tok, 30000), 0);

    distlock_lock *l = NULL;
    assert_rc(distlock_lock_restore(c, key, tok, &l), DISTLOCK_OK);
    struct rel r = { .l = l };
    pthread_t th;
    release_with_replies_lost(f, key, 2, &r, &th);
    for (int i = 0; i < rc->n; i++) {
        /* the resend, on a fresh connection, is held: the key is free now,
         * and another owner takes it */
        assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held %d up 1 10000", i), 0);
        int conn = held_conn(fp, i);
        assert_true(conn > 0);
        assert_int_equal(rh_get(rc, i, 0, key, NULL, 0), 0);
        assert_int_equal(rh_set(rc, i, 0, key, "new-owner-token", 30000), 0);
        assert_int_equal(fp_cmd(fp, NULL, 0, "unhold %d:%d up", i, conn), 0);
    }
    pthread_join(th, NULL);
    int theirs = rh_count_holding(rc, key, "new-owner-token");
    printf("# restored release, replies lost, key retaken before the resend: %s, new owner's "
           "nodes kept: %d of %d, lost: %d\n", distlock_strerror(r.rc), theirs, rc->n,
           distlock_lock_lost(l));
    assert_int_equal(theirs, rc->n);
    assert_rc(r.rc, DISTLOCK_ENOTOWNER);
    assert_int_equal(distlock_lock_lost(l), 1);
    distlock_lock_free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_restored_release_lost_reply_resend_finds_key_gone_is_notowner, heal),
        cmocka_unit_test_setup(test_restored_release_lost_reply_resend_leaves_new_owner_key, heal),
    };
    printf("# one node\n");
    int failed = cmocka_run_group_tests_name("one node", tests, group_setup1, group_teardown);
    printf("# three nodes\n");
    failed += cmocka_run_group_tests_name("three nodes", tests, group_setup3, group_teardown);
    return failed;
}
