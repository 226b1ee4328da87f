/* test_cluster_release_wakes_waiter_after_master_paused.c -- "a release
 * wakes waiters at once (pub/sub)" (README) on a Redis Cluster whose
 * master stops answering without closing its sockets (SIGSTOP: a hung
 * host) and is replaced by its replica (docs/cluster.md: a failover
 * followed).
 *
 * The waiter SSUBSCRIBEs the key's shard channel on the slot's master; the
 * key is replicated (WAIT), the master paused, its replica promoted; the
 * holder's release then runs on the new master, which SPUBLISHes there.
 * The waiter's re-checks are 15-30 s apart and the holder's TTL 60 s, so
 * only the release notification can end the wait within 1.5 s; none falls
 * in the pause and the promotion (4 s under TSan on a loaded machine), and
 * the master is paused only once it answered both of the waiter's
 * attempts (attempt_commands_on). Real
 * processes only: 3 masters + 3 replicas. */
#include "test_common.h"
#include "test_wake_waiter.h"

#include "test_cluster_group.h"

DEFINE_CLUSTER_GROUP(rh_rcl_start_n(3, 1))

/* the library's shard channel rule (distlock_static: not exported) */
size_t distlock__shard_channel_name(char *buf, const char *key);

#define RECHECK_MS 30000
#define WAKE_BOUND_MS 1500

static void test_release_on_promoted_replica_wakes_waiter_subscribed_on_paused_master(void **state)
{
    (void)state;
    int n = CL->rc->n;
    const char *K = "{paused-wake}held", *K2 = "{paused-wake}other";  /* one slot */
    char sch[1100];
    distlock__shard_channel_name(sch, K);
    int s = rh_rcl_keyslot(CL, K), x = rh_rcl_owner(CL, 0, s);
    assert_true(x >= 0);
    int rx = rh_rcl_replica_of(CL, x);
    assert_true(rx >= 0);

    distlock_client *holder = new_client(CL->uri), *wc = new_client(CL->uri);
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_RETRY_MIN_MS, RECHECK_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_RETRY_MAX_MS, RECHECK_MS), DISTLOCK_OK);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, K, 60000, 0, 0, &held), DISTLOCK_OK);
    redisReply *r = rh_command(CL->rc, x, 0, "WAIT 1 5000");
    assert_true(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
    freeReplyObject(r);

    long long attempts = attempt_commands_run(CL->rc, x);
    wake_waiter w;
    wake_waiter_start(&w, wc, K, 5000, 50000);
    assert_true(RH_WAIT_UNTIL(rh_rcl_shardnumsub(CL, x, sch) == 1 &&
                              attempt_commands_run(CL->rc, x) >= attempts + 2, 10000));

    assert_int_equal(rh_pause(CL->rc, x), 0);
    /* (rh_rcl_wait_promoted also waits for the paused server's cluster_state) */
    assert_true(RH_WAIT_UNTIL(rh_rcl_is_master(CL, rx), 30000));
    for (int i = 0; i < n; i++)
        if (i != x && rh_rcl_is_master(CL, i))
            assert_true(RH_WAIT_UNTIL(rh_rcl_slot_port(CL, i, s) == CL->rc->node[rx].port, 10000));

    /* the waiter's client, on another thread, learns the slot's new master
     * (a call on another key of the slot), as its attempt after a wake-up
     * would: only the wake-up is tested here */
    distlock_lock *other = NULL;
    assert_true(RH_WAIT_UNTIL(distlock_acquire(wc, K2, 5000, 0, 0, &other) == DISTLOCK_OK, 20000));
    assert_rc(distlock_release(other), DISTLOCK_OK);
    distlock_lock_free(other);
    /* the holder follows the failover */
    long long released = 0;
    assert_true(RH_WAIT_UNTIL(release_ok_started_at(held, &released), 20000));
    long on_new = rh_rcl_shardnumsub(CL, rx, sch);
    int woke = wake_waiter_join(&w, 60000);
    long long gap = woke ? w.got_ms - released : -1;
    printf("master %d paused, replica %d promoted (shard subscribers there at the release: %ld); "
           "waiter's acquire ended %lld ms after the release (rc %d; bound %d ms, re-checks %d-%d "
           "ms apart)%s%s\n",
           x, rx, on_new, gap, w.rc, WAKE_BOUND_MS, RECHECK_MS / 2, RECHECK_MS,
           w.rc ? ": " : "", w.detail);
    (void)rh_resume(CL->rc, x);
    distlock_lock_free(held);
    distlock_client_free(holder);
    distlock_client_free(wc);
    assert_true(woke);
    assert_true(gap >= 0 && gap < WAKE_BOUND_MS);
    assert_rc(w.rc, DISTLOCK_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_on_promoted_replica_wakes_waiter_subscribed_on_paused_master),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
