/* test_multi_writer_won_while_leaving.c -- a multi's writer (exclusive
 * acquire) that waited for read locks has won the key and is leaving the
 * registry of waiting writers: its last request, held here by the fault
 * proxy. What distlock.h promises of that moment:
 *  - distlock_op_cancel: "it ends DISTLOCK_ECANCELED at the next
 *    distlock_multi_perform(), with nothing held ... a lock it won is
 *    released";
 *  - distlock_op_free of a running op: it "is cancelled and freed when it
 *    ends"; nothing of it may stay held (with DISTLOCK_AUTO_RENEW a lock
 *    nobody has a handle of would be renewed by the client forever);
 *  - a grant that comes after its ttl was used up is undone and tried
 *    again, never handed out: here the leave is held until the lease it won
 *    has ended on the server (the blocking call's side of that rule:
 *    test_writer_lease_at_handout.c).
 * One node behind the fault proxy; the readers use another client. */
#include "test_common.h"
#include "test_multi_drive.h"

#include "harness/faultproxy.h"

#include <stdio.h>
#include <string.h>

/* the lease of the writer that must not be handed out late: short, so that
 * it ends while its leave is held */
#define LEASE_MS 400

typedef struct env {
    rh_cluster *rc;
    fp_proxy *fp;
} env;

static int group_setup(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    static env e;
    if ((e.rc = rh_start(1)) == NULL || (e.fp = fp_front(e.rc)) == NULL)
        return -1;
    *state = &e;
    return 0;
}

static int group_teardown(void **state)
{
    env *e = *state;
    fp_stop(e->fp);
    rh_stop_all(e->rc);
    return 0;
}

static int heal(void **state)
{
    env *e = *state;
    return fp_cmd(e->fp, NULL, 0, "heal") == 0 ? 0 : -1;
}

/* Until the writer's registry entry is on the server: its first attempt
 * (which saw the read lock) went through. */
static void wait_registered(env *e, distlock_multi *m, const char *key)
{
    char wk[128];
    snprintf(wk, sizeof(wk), "{%s}:writers", key);
    long long end = rh_now_ms() + 10000;
    for (;;) {
        redisReply *r = rh_command(e->rc, 0, 0, "EXISTS %s", wk);
        int there = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        freeReplyObject(r);
        if (there)
            return;
        if (rh_now_ms() > end) {
            print_error("the writer never registered (%s)\n", wk);
            fail();
        }
        multi_turn(m, 20);
    }
}

/* Drive m until the proxy holds the writer's registry leave: the writer won
 * the key (the leave is sent only after its winning attempt came back) and
 * its op is now on its last request. */
static void drive_until_leave_held(env *e, distlock_multi *m, distlock_op *op)
{
    long long end = rh_now_ms() + 10000;
    for (;;) {
        multi_turn(m, 20);
        assert_false(distlock_op_done(op));
        if (fp_cmd(e->fp, NULL, 0, "wait-held 0 up 1 1") == 0)
            return;
        if (rh_now_ms() > end) {
            print_error("the writer's leave was never held\n");
            fail();
        }
    }
}

/* The writer waits for a read lock, which then goes; its leave of the
 * registry of waiting writers is held at the proxy. */
static void writer_won_and_leaving(env *e, distlock_multi *m, distlock_client *readers,
                                   const char *key, long ttl_ms, unsigned flags,
                                   distlock_op **op)
{
    char pattern[256], hex[600];
    distlock_lock *r = NULL;
    assert_rc(distlock_acquire(readers, key, 30000, 0, DISTLOCK_SHARED, &r), DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, key, ttl_ms, 20000, flags, NULL, op), DISTLOCK_OK);
    wait_registered(e, m, key);
    /* only the leave carries the registry followed by the channel */
    snprintf(pattern, sizeof(pattern), "{%s}:writers\r\n$%zu\r\ndistlock:%s\r\n", key,
             9 + strlen(key), key);
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "hold-match 0 up %s",
                            fp_hex(pattern, hex, sizeof(hex))), 0);
    assert_rc(distlock_release(r), DISTLOCK_OK);
    distlock_lock_free(r);
    drive_until_leave_held(e, m, *op);
    /* the writer holds the key now */
    assert_true(rh_pttl(e->rc, 0, 0, key) > 0);
}

static void test_cancel_of_a_writer_that_won_releases_it(void **state)
{
    env *e = *state;
    const char *key = "mcw:cancel";
    distlock_client *c = NULL, *readers = NULL;
    distlock_multi *m = NULL;
    distlock_op *op = NULL;
    assert_rc(distlock_client_new(fp_uris(e->fp), &c), DISTLOCK_OK);
    assert_rc(distlock_client_new(rh_uris(e->rc), &readers), DISTLOCK_OK);
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);

    writer_won_and_leaving(e, m, readers, key, 30000, 0, &op);
    distlock_op_cancel(op);
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "heal"), 0);
    long long end = rh_now_ms() + 10000;
    while (!distlock_op_done(op)) {
        assert_true(rh_now_ms() < end);
        multi_turn(m, 50);
    }
    int st = distlock_op_status(op);
    distlock_lock *l = distlock_op_take_lock(op);
    long long pttl = rh_pttl(e->rc, 0, 0, key);
    printf("cancelled after the win: status %d (%s), handle %s, key pttl %lld\n", st,
           distlock_strerror(st), l ? "handed out" : "none", pttl);
    distlock_lock_free(l);
    distlock_op_free(op);
    distlock_multi_free(m);
    distlock_client_free(readers);
    distlock_client_free(c);
    assert_int_equal(st, DISTLOCK_ECANCELED);
    assert_null(l);
    assert_true(pttl < 0);  /* nothing held */
}

static void test_free_of_a_writer_that_won_leaves_nothing_held(void **state)
{
    env *e = *state;
    const char *key = "mcw:free";
    distlock_client *c = NULL, *readers = NULL;
    distlock_multi *m = NULL;
    distlock_op *op = NULL;
    assert_rc(distlock_client_new(fp_uris(e->fp), &c), DISTLOCK_OK);
    assert_rc(distlock_client_new(rh_uris(e->rc), &readers), DISTLOCK_OK);
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);

    /* auto-renewed: a lock left behind would be renewed for good */
    writer_won_and_leaving(e, m, readers, key, 30000, DISTLOCK_AUTO_RENEW, &op);
    distlock_op_free(op);  /* running: cancelled, freed when it ends */
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "heal"), 0);
    long long end = rh_now_ms() + 10000;
    while (multi_turn(m, 50) > 0)
        assert_true(rh_now_ms() < end);
    assert_null(distlock_multi_done(m));  /* a freed op is not handed out */
    long long pttl = rh_pttl(e->rc, 0, 0, key);
    printf("freed after the win, every op ended: key pttl %lld\n", pttl);
    /* nothing of the freed op may be held: a plain try by another client
     * gets the key */
    distlock_lock *other = NULL;
    int rc = distlock_acquire(readers, key, 5000, 0, 0, &other);
    printf("another client's try: %d (%s)\n", rc, distlock_strerror(rc));
    distlock_lock_free(other);
    distlock_multi_free(m);
    distlock_client_free(readers);
    distlock_client_free(c);
    assert_true(pttl < 0);
    assert_int_equal(rc, DISTLOCK_OK);
}

static void test_writer_not_handed_out_after_its_lease_ended(void **state)
{
    env *e = *state;
    const char *key = "mcw:late";
    distlock_client *c = NULL, *readers = NULL;
    distlock_multi *m = NULL;
    distlock_op *op = NULL;
    assert_rc(distlock_client_new(fp_uris(e->fp), &c), DISTLOCK_OK);
    /* the held leave must outlast the lease, not the node's budget */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 10000), DISTLOCK_OK);
    assert_rc(distlock_client_new(rh_uris(e->rc), &readers), DISTLOCK_OK);
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);

    writer_won_and_leaving(e, m, readers, key, LEASE_MS, 0, &op);
    /* the lease the writer won ends on the server meanwhile */
    long long end = rh_now_ms() + 10000;
    while (rh_pttl(e->rc, 0, 0, key) > 0) {
        assert_true(rh_now_ms() < end);
        multi_turn(m, 20);
        assert_false(distlock_op_done(op));
    }
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "heal"), 0);
    while (!distlock_op_done(op)) {
        assert_true(rh_now_ms() < end);
        multi_turn(m, 50);
    }
    int st = distlock_op_status(op);
    distlock_lock *l = distlock_op_take_lock(op);
    long validity = l ? distlock_lock_validity_ms(l) : -1;
    long long pttl = rh_pttl(e->rc, 0, 0, key);
    printf("writer ended %d (%s) \"%s\"; handle %s, its validity %ld ms, key pttl %lld\n", st,
           distlock_strerror(st), distlock_op_error(op), l ? "handed out" : "none", validity,
           pttl);
    distlock_lock_free(l);
    distlock_op_free(op);
    distlock_multi_free(m);
    distlock_client_free(readers);
    distlock_client_free(c);
    /* either not handed out, or handed out while it is still held */
    if (st == DISTLOCK_OK) {
        assert_true(validity > 0);
        assert_true(pttl > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_cancel_of_a_writer_that_won_releases_it, heal),
        cmocka_unit_test_setup(test_free_of_a_writer_that_won_leaves_nothing_held, heal),
        cmocka_unit_test_setup(test_writer_not_handed_out_after_its_lease_ended, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
