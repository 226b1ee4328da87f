/* test_cluster_waiter_shard_churn.c -- a waiter on a redis-cluster:// node
 * is woken by the release at once (SSUBSCRIBE on its slot's master), also
 * after its slot's master was named at more than 64 addresses over time.
 *
 * docs/cluster.md: "A waiter is woken 0-2 ms after a release (its re-check set 5 s
 * apart; SSUBSCRIBEd on the key's master)"; "Masters come and go ... once
 * 64 addresses were named (pods rescheduled, failovers), a new one takes the
 * entry of a master that owns no slot". The transport's table of masters
 * does that (cluster.c); the subscriber's own table of shard connections
 * (wait.c shard_find, DISTLOCK__CL_MASTERS entries) only grows: once 64
 * addresses were used, a channel whose master is at a new address is never
 * SSUBSCRIBEd again, and every waiter on it waits for its re-check.
 *
 * Real servers only: 3 masters, no replicas; 5 fault proxies of 14
 * listeners each, all forwarding to master Y (70 live addresses for it).
 * Y announces them in turn (cluster-announce-port); for each, a holder
 * takes the key, a waiter (re-check 5 s apart) waits for it, and the
 * holder releases: the waiter must be SSUBSCRIBEd on Y and woken within
 * 1 s of the release. */
#include "test_common.h"

#include <pthread.h>

#include "test_cluster_group.h"
#include "harness/faultproxy.h"

#define NPROXY 5
#define PER_PROXY 14
#define NADDR (NPROXY * PER_PROXY)
#define WAKE_BOUND_MS 1000

DEFINE_CLUSTER_GROUP(rh_rcl_start_n(3, 0))

struct waiter_arg {
    distlock_client *c;
    const char *key;
    int rc;
    long long got_ms;
};

static void *waiter(void *p)
{
    struct waiter_arg *a = p;
    distlock_lock *l = NULL;
    a->rc = distlock_acquire(a->c, a->key, 30000, 20000, 0, &l);
    a->got_ms = rh_now_ms();
    if (l) {
        (void)distlock_release(l);
        distlock_lock_free(l);
    }
    return NULL;
}

static void test_waiter_woken_at_once_after_more_than_64_master_addresses(void **state)
{
    (void)state;
    const char *W = "wake:churn";
    const char *ch = "distlock:{wake:churn}";
    int s = rh_rcl_keyslot(CL, W);
    int y = rh_rcl_owner(CL, 0, s);
    assert_true(y >= 0 && y < 3);
    assert_int_equal(rh_rcl_keyslot(CL, ch), s);

    int yport = CL->rc->node[y].port, targets[PER_PROXY], addr[NADDR];
    for (int k = 0; k < PER_PROXY; k++)
        targets[k] = yport;
    fp_proxy *fp[NPROXY];
    for (int j = 0; j < NPROXY; j++) {
        fp[j] = fp_start(targets, PER_PROXY);
        assert_non_null(fp[j]);
        for (int k = 0; k < PER_PROXY; k++)
            addr[j * PER_PROXY + k] = fp_port(fp[j], k);
    }

    char uri[256];
    snprintf(uri, sizeof uri, "redis-cluster://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", yport,
             CL->rc->node[(y + 1) % 3].port, CL->rc->node[(y + 2) % 3].port);
    distlock_client *h = new_client(uri), *w = new_client(uri);
    assert_rc(distlock_client_set(w, DISTLOCK_OPT_RETRY_MAX_MS, 5000), DISTLOCK_OK);

    int late = 0, first_late = -1;
    long worst = 0;
    for (int k = 0; k < NADDR; k++) {
        assert_true(rh_rcl_announce_port(CL, y, addr[k]));
        /* every client connection to Y closes: the next ones ask CLUSTER
         * SLOTS in their handshake and learn the new address */
        redisReply *r = rh_command(CL->rc, y, 0, "CLIENT KILL TYPE normal SKIPME yes");
        assert_true(r && r->type == REDIS_REPLY_INTEGER);
        freeReplyObject(r);
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(h, W, 30000, 0, 0, &l), DISTLOCK_OK);
        struct waiter_arg a = { w, W, -99, 0 };
        pthread_t th;
        long long t_start = rh_now_ms();
        assert_int_equal(pthread_create(&th, NULL, waiter, &a), 0);
        int subscribed = RH_WAIT_UNTIL(rh_rcl_shardnumsub(CL, y, ch) > 0, 2000);
        if (!subscribed)  /* the re-checks only: let them space out */
            while (rh_now_ms() - t_start < 6000)
                rh_sleep_ms(50);
        long long t0 = rh_now_ms();
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
        pthread_join(th, NULL);
        assert_rc(a.rc, DISTLOCK_OK);
        long woke = (long)(a.got_ms - t0);
        if (woke > worst)
            worst = woke;
        if (!subscribed || woke > WAKE_BOUND_MS) {
            if (late++ == 0)
                first_late = k;
            printf("# address %d (127.0.0.1:%d): %s, woken %ld ms after the release\n", k + 1,
                   addr[k], subscribed ? "SSUBSCRIBEd" : "NOT SSUBSCRIBEd", woke);
        }
    }
    printf("# %d master addresses in turn: %d waiters not woken within %d ms (first: address "
           "%d), worst %ld ms\n", NADDR, late, WAKE_BOUND_MS, first_late + 1, worst);
    assert_true(rh_rcl_announce_port(CL, y, 0));
    distlock_client_free(w);
    distlock_client_free(h);
    for (int j = 0; j < NPROXY; j++)
        fp_stop(fp[j]);
    assert_int_equal(late, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waiter_woken_at_once_after_more_than_64_master_addresses),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
