/* test_redirect_deadline.c -- a call's redirects spend its own deadline.
 *
 * A real Redis Cluster (3 masters, no replicas). The master that owns the
 * key's slot announces the fault proxy's port as its address
 * (cluster-announce-port), and the proxy forwards that port to ANOTHER
 * master, delaying every reply by 450 ms. So the cluster says "the slot is
 * at P", and whatever is sent to P reaches a master that answers MOVED to
 * P, 450 ms later, every time: a server that answers MOVED slowly, as many
 * times as the client follows it.
 *
 * With 500 ms command timeouts, an acquire (wait 0) must end within its
 * own deadline (one command timeout) plus its undo's (another one), not
 * after 5 redirects of 450 ms each, twice. */
#include "test_common.h"

#include "harness/cluster_harness.h"
#include "harness/faultproxy.h"

#define CMD_MS 500L
#define MOVED_DELAY_MS 450
/* the acquire's budget and its undo's, plus scheduling slack on a shared,
 * loaded 2-core machine (5 slow redirects alone are 2,250 ms) */
#define BOUND_MS (2 * CMD_MS + 500)

typedef struct env {
    rh_rcl *cl;
    fp_proxy *fp;
    int owner, other;
    char key[64];
} env;

static int group_setup(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    env *e = calloc(1, sizeof *e);
    if (e == NULL || (e->cl = rh_rcl_start_n(3, 0)) == NULL) {
        free(e);
        return -1;
    }
    *state = e;
    return 0;
}

static int group_teardown(void **state)
{
    env *e = *state;
    fp_stop(e->fp);
    rh_rcl_stop(e->cl);
    free(e);
    return 0;
}

/* The owner of the key's slot announces the proxy's port; the proxy leads
 * to another master. Returns once that master's CLUSTER SLOTS says so. */
static void route_slot_through_proxy(env *e)
{
    snprintf(e->key, sizeof e->key, "redirect:slow");
    int slot = rh_rcl_keyslot(e->cl, e->key);
    assert_true(slot >= 0);
    e->owner = rh_rcl_owner(e->cl, 0, slot);
    assert_true(e->owner >= 0);
    e->other = -1;
    for (int i = 0; i < e->cl->rc->n && e->other < 0; i++)
        if (i != e->owner && rh_rcl_is_master(e->cl, i))
            e->other = i;
    assert_true(e->other >= 0);
    int target = e->cl->rc->node[e->other].port;
    e->fp = fp_start(&target, 1);
    assert_non_null(e->fp);
    int p = fp_port(e->fp, 0);
    /* the bus keeps its real port: only what clients are told changes */
    redisReply *r = rh_command(e->cl->rc, e->owner, 0, "CONFIG SET cluster-announce-bus-port %d",
                               e->cl->rc->node[e->owner].port + 10000);
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    r = rh_command(e->cl->rc, e->owner, 0, "CONFIG SET cluster-announce-port %d", p);
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    char want[32];
    snprintf(want, sizeof want, "MOVED %d 127.0.0.1:%d", slot, p);
    /* gossip carries the new address to the other master: poll its answer */
    assert_true(RH_WAIT_UNTIL(({
        redisReply *g = rh_command(e->cl->rc, e->other, 0, "GET %s", e->key);
        int ok = g && g->type == REDIS_REPLY_ERROR && strcmp(g->str, want) == 0;
        if (g) freeReplyObject(g);
        ok; }), 10000));
}

static void test_slow_moved_stays_within_deadline(void **state)
{
    env *e = *state;
    if (e->fp == NULL)
        route_slot_through_proxy(e);
    char uri[128];
    snprintf(uri, sizeof uri, "redis-cluster://127.0.0.1:%d", fp_port(e->fp, 0));
    distlock_client *c = new_client(uri);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, CMD_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, CMD_MS), DISTLOCK_OK);

    /* Connected, handshake done and slot map learnt while nothing is slow:
     * the redirects below are followed on an established connection. */
    distlock_holder_info h = { .size = sizeof h };
    int rc = distlock_admin_holder(c, e->key, 0, &h);
    printf("# warm-up inspect through the MOVED loop: %d (%s)\n", rc,
           rc < 0 ? distlock_last_error() : "");
    assert_true(rc < 0);  /* the redirect bound ends it */

    char rep[512];
    assert_int_equal(fp_cmd(e->fp, rep, sizeof rep, "delay 0 %d down", MOVED_DELAY_MS), 0);
    distlock_lock *l = NULL;
    long long t0 = rh_now_ms();
    rc = distlock_acquire(c, e->key, 10000, 0, 0, &l);
    long long took = rh_now_ms() - t0;
    printf("# acquire, wait 0, MOVED after %d ms each time, command timeout %ld ms: %d in %lld "
           "ms (\"%s\")\n", MOVED_DELAY_MS, CMD_MS, rc, took, distlock_last_error());
    assert_null(l);
    assert_int_equal(rc, DISTLOCK_ECONN);
    if (took >= BOUND_MS) {
        print_error("an acquire whose node answers MOVED slowly took %lld ms: each redirect "
                    "restarted the node's deadline (bound: its command timeout, plus the "
                    "undo's, %d ms with slack)\n", took, (int)BOUND_MS);
        fail();
    }
    /* the undo also stays in its budget: nothing is held anywhere */
    assert_int_equal(fp_cmd(e->fp, rep, sizeof rep, "delay 0 0 down"), 0);
    for (int i = 0; i < e->cl->rc->n; i++) {
        redisReply *g = rh_command(e->cl->rc, i, 0, "EXISTS %s", e->key);
        assert_true(g != NULL);
        assert_true(g->type == REDIS_REPLY_ERROR || g->integer == 0);
        freeReplyObject(g);
    }
    distlock_client_free(c);
}

/* The same MOVED loop under a waiting acquire: the wait
 * budget bounds the whole call, each attempt (and its undo) within its own
 * deadline. */
#define WAIT_MS 1500L
static void test_slow_moved_waiting_acquire_stays_within_wait(void **state)
{
    env *e = *state;
    if (e->fp == NULL)
        route_slot_through_proxy(e);
    char uri[128], rep[512];
    snprintf(uri, sizeof uri, "redis-cluster://127.0.0.1:%d", fp_port(e->fp, 0));
    distlock_client *c = new_client(uri);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, CMD_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, CMD_MS), DISTLOCK_OK);
    distlock_holder_info h = { .size = sizeof h };
    assert_true(distlock_admin_holder(c, e->key, 0, &h) < 0);
    assert_int_equal(fp_cmd(e->fp, rep, sizeof rep, "delay 0 %d down", MOVED_DELAY_MS), 0);
    distlock_lock *l = NULL;
    long long t0 = rh_now_ms();
    int rc = distlock_acquire(c, e->key, 10000, WAIT_MS, 0, &l);
    long long took = rh_now_ms() - t0;
    printf("# acquire, wait %ld ms, MOVED after %d ms each time: %d in %lld ms (\"%s\")\n",
           WAIT_MS, MOVED_DELAY_MS, rc, took, distlock_last_error());
    assert_null(l);
    assert_int_equal(fp_cmd(e->fp, rep, sizeof rep, "delay 0 0 down"), 0);
    distlock_client_free(c);
    assert_true(rc < 0);
    if (took >= WAIT_MS + BOUND_MS) {
        print_error("a waiting acquire whose node answers MOVED slowly took %lld ms (bound: "
                    "the wait, %ld ms, plus one attempt and its undo, %d ms)\n", took, WAIT_MS,
                    (int)BOUND_MS);
        fail();
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slow_moved_stays_within_deadline),
        cmocka_unit_test(test_slow_moved_waiting_acquire_stays_within_wait),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
