/* test_old_server_first_acquire.c -- a client's first acquire on servers
 * older than 7.0 (no SET ... NX GET) is placed on every node that answers,
 * not only on the quorum that answered first.
 *
 * Runs on any server: tests/harness/faultproxy.py sits in front of three
 * real redis-servers and makes them look older where they are not: INFO's
 * "redis_version:7." becomes "redis_version:6." (same length) and the GET
 * of a SET ... GET becomes GEX, which a server refuses with "ERR syntax",
 * as 5.0 - 6.2 refuse GET. On 5.0 - 6.2 themselves (scripts/server-matrix.sh)
 * neither rewrite finds anything to change.
 *
 * The third node's SET ... NX GET, if one is sent, is held in the proxy
 * until the acquire has returned: the refusal arrives after the round ended
 * at quorum, and nobody sends the script for it then. The library must not
 * have sent that SET at all: its connection learnt the server's version in
 * the handshake, before the call was written. */
#include "test_common.h"

#include "harness/faultproxy.h"

#define N 3

typedef struct fixture {
    rh_cluster *rc;
    fp_proxy *fp;
} fixture;

static int group_setup(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->rc = rh_start(N);
    if (!f->rc) { free(f); return -1; }
    f->fp = fp_front(f->rc);
    if (!f->fp) { rh_stop_all(f->rc); free(f); return -1; }
    *state = f;
    return 0;
}

static int group_teardown(void **state)
{
    fixture *f = *state;
    fp_stop(f->fp);
    rh_stop_all(f->rc);
    free(f);
    return 0;
}

static int setup(void **state)
{
    fixture *f = *state;
    if (fp_cmd(f->fp, NULL, 0, "heal") != 0) return -1;
    /* A failed test may have left its client open: cut what is still there. */
    if (fp_cmd(f->fp, NULL, 0, "wait-closed * 3000") != 0 &&
        (fp_cmd(f->fp, NULL, 0, "reset *") != 0 ||
         fp_cmd(f->fp, NULL, 0, "wait-closed * 5000") != 0))
        return -1;
    return rh_heal(f->rc) == 0 ? 0 : -1;
}

#define FP(f, ...) assert_int_equal(fp_cmd((f)->fp, NULL, 0, __VA_ARGS__), 0)

/* Listener TARGET's servers look older than 7.0 (see the top). */
static void look_old(fixture *f, const char *target)
{
    char from[64], to[64], gfrom[64], gto[64];
    fp_hex("redis_version:7.", from, sizeof from);
    fp_hex("redis_version:6.", to, sizeof to);
    fp_hex("$3\r\nGET\r\n", gfrom, sizeof gfrom);
    fp_hex("$3\r\nGEX\r\n", gto, sizeof gto);
    FP(f, "rewrite %s down %s %s", target, from, to);
    FP(f, "rewrite %s up %s %s", target, gfrom, gto);
}

/* A fresh client's connections, made without an acquire: each node's
 * handshake is in before the first acquire (a round that ends at quorum
 * does not send a call still waiting for its connection's handshake). */
static distlock_client *connected_client(fixture *f, const char *key)
{
    distlock_client *c = new_client(fp_uris(f->fp));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 2000 * slow_factor()),
              DISTLOCK_OK);
    for (int i = 0; i < N; i++)
        assert_int_equal(distlock_admin_holder(c, key, i, NULL), 0);
    return c;
}

/* Every node looks old; node 2's SET ... NX GET, if sent, is held until the
 * acquire returned. The first acquire is on all three nodes. */
static void test_first_acquire_on_every_node(void **state)
{
    fixture *f = *state;
    char hex[64];
    look_old(f, "*");
    distlock_client *c = connected_client(f, "of1");
    FP(f, "hold-match 2 up %s", fp_hex("*7\r\n$3\r\nSET\r\n", hex, sizeof hex));
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "of1", 30000, 0, 0, &l), DISTLOCK_OK);
    FP(f, "unhold *");
    assert_holding(f->rc, "of1", distlock_lock_token(l), N);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_holding(f->rc, "of1", NULL, 0);
    distlock_client_free(c);
}

/* Only node 2 looks old: nodes 0 and 1 (on 7.0 and later) still get
 * SET ... NX GET, node 2 the script at once; the lock is on all three. */
static void test_mixed_versions(void **state)
{
    fixture *f = *state;
    char hex[64];
    look_old(f, "2");
    distlock_client *c = connected_client(f, "of2");
    long s0 = script_calls(f->rc, 0), s2 = script_calls(f->rc, 2);
    FP(f, "hold-match 2 up %s", fp_hex("*7\r\n$3\r\nSET\r\n", hex, sizeof hex));
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "of2", 30000, 0, 0, &l), DISTLOCK_OK);
    FP(f, "unhold *");
    assert_holding(f->rc, "of2", distlock_lock_token(l), N);
    assert_true(script_calls(f->rc, 2) > s2);
    if (rh_server_major() >= 7)
        assert_int_equal(script_calls(f->rc, 0), s0);  /* the one-round-trip SET */
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_holding(f->rc, "of2", NULL, 0);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_first_acquire_on_every_node, setup),
        cmocka_unit_test_setup(test_mixed_versions, setup),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
