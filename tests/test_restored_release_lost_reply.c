/* test_restored_release_lost_reply.c -- a restored handle's release
 * (distlock_lock_restore()) whose reply is lost: "distlock_release()
 * compare-and-deletes that token (DISTLOCK_OK when it held the key on a
 * quorum, DISTLOCK_ENOTOWNER when not)". The token held the key and this
 * release deleted it; the first send's reply is lost (the proxy resets the
 * connection as the reply comes back), the core resends on a fresh
 * connection and finds the key gone. The verdict must still be
 * DISTLOCK_OK: the key was ours and our release removed it, so "not ours"
 * (and lost) would tell the caller its lock was gone before its work ended.
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

static void test_restored_release_with_lost_reply_is_ok(void **state)
{
    fixture *f = *state;
    rh_cluster *rc = f->rc;
    fp_proxy *fp = f->fp;
    const char *key = "rr:lost-reply", *tok = "restored-owner-token";
    distlock_client *c = new_client(fp_uris(fp));
    connect_every_node(rc, c, "rr:connect");
    for (int i = 0; i < rc->n; i++)
        assert_int_equal(rh_set(rc, i, 0, key, tok, 30000), 0);

    distlock_lock *l = NULL;
    assert_rc(distlock_lock_restore(c, key, tok, &l), DISTLOCK_OK);
    char hex[256];
    fp_hex(key, hex, sizeof hex);
    for (int i = 0; i < rc->n; i++)
        assert_int_equal(fp_cmd(fp, NULL, 0, "hold-match %d up %s", i, hex), 0);
    struct rel r = { .l = l };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, release_main, &r), 0);
    for (int i = 0; i < rc->n; i++) {
        assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held %d up 1 10000", i), 0);
        int conn = held_conn(fp, i);
        assert_true(conn > 0);
        /* the release runs on the server; its reply is cut after 1 byte */
        assert_int_equal(fp_cmd(fp, NULL, 0, "reset-after %d:%d down 1", i, conn), 0);
        assert_int_equal(fp_cmd(fp, NULL, 0, "unhold %d:%d up", i, conn), 0);
    }
    pthread_join(th, NULL);
    int gone = rh_count_holding(rc, key, tok) == 0;
    printf("# restored release, replies lost: %s, key gone: %d, lost: %d\n",
           distlock_strerror(r.rc), gone, distlock_lock_lost(l));
    assert_true(gone);
    assert_rc(r.rc, DISTLOCK_OK);
    assert_int_equal(distlock_lock_lost(l), 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_restored_release_with_lost_reply_is_ok, heal),
    };
    printf("# one node\n");
    int failed = cmocka_run_group_tests_name("one node", tests, group_setup1, group_teardown);
    printf("# three nodes\n");
    failed += cmocka_run_group_tests_name("three nodes", tests, group_setup3, group_teardown);
    return failed;
}
