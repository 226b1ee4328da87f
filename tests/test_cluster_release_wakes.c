/* test_cluster_release_wakes.c -- on a Redis Cluster of any supported
 * server version, a release wakes a waiting client within a few ms, not at
 * its next re-check (5 s apart here, so only the notification can be this
 * fast):
 *   - Redis 7.0+ and Valkey: the release SPUBLISHes on the key's shard
 *     channel and the waiter SSUBSCRIBEs on the slot's master (no classic
 *     subscription anywhere);
 *   - Redis 5.0 / 6.x (no sharded pub/sub): the release falls back to
 *     PUBLISH, which the cluster broadcasts to every node, and the waiter
 *     SUBSCRIBEs to the same channel name on the slot's master;
 *   - for a plain waiter, a fair waiter (the fair script names the next),
 *     and a waiter whose key's slot moved to another master while it waited.
 * scripts/server-matrix.sh runs it against each version's own build. */
#include "test_common.h"
#include "cluster_harness.h"

#include <pthread.h>

/* the library's shard channel rule (distlock_static: not exported) */
size_t distlock__shard_channel_name(char *buf, const char *key);

static rh_rcl *CL;
static int SHARDED;  /* the servers have SPUBLISH / SSUBSCRIBE (7.0+) */

static int group_setup(void **state)
{
    (void)state;
    CL = rh_rcl_start_n(3, 0);
    if (CL == NULL)
        return -1;
    SHARDED = rh_server_major() >= 7;
    printf("redis-server major version %d: releases %s\n", rh_server_major(),
           SHARDED ? "SPUBLISH" : "PUBLISH (no sharded pub/sub)");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    rh_rcl_stop(CL);
    return 0;
}

/* Classic subscribers to channel on server i (PUBSUB NUMSUB). */
static long numsub_at(int i, const char *channel)
{
    long n = -1;
    redisReply *r = rh_command(CL->rc, i, 0, "PUBSUB NUMSUB %s", channel);
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        n = (long)r->element[1]->integer;
    if (r) freeReplyObject(r);
    return n;
}

static long numsub_all(const char *channel)
{
    long total = 0;
    for (int i = 0; i < CL->rc->n; i++)
        total += numsub_at(i, channel);
    return total;
}

/* The waiter's subscriptions to sch on server i, of the kind the servers
 * use: sharded on 7.0+, classic before. */
static long subscribers_at(int i, const char *sch)
{
    return SHARDED ? rh_rcl_shardnumsub(CL, i, sch) : numsub_at(i, sch);
}

struct waiter_arg {
    distlock_client *c;
    const char *key;
    int flags;
    int rc;
    long long got_ms;
    char detail[300];
};

static void *waiter(void *p)
{
    struct waiter_arg *w = p;
    distlock_lock *l = NULL;
    w->rc = distlock_acquire(w->c, w->key, 30000, 20000, w->flags, &l);
    w->got_ms = rh_now_ms();
    snprintf(w->detail, sizeof w->detail, "%s", distlock_last_error());
    if (l) {
        distlock_release(l);
        distlock_lock_free(l);
    }
    return NULL;
}

/* Holder takes key; w waits for it, subscribed (as the version allows) on
 * the master of key's slot. If migrate_to >= 0 the slot then moves there
 * while w waits. Returns the ms from the release to w's wake-up. */
static long woken_after_release(distlock_client *holder, distlock_client *w, const char *key,
                                int flags, int migrate_to)
{
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &l), DISTLOCK_OK);
    char ch[96], sch[1100];
    snprintf(ch, sizeof ch, "distlock:%s", key);
    distlock__shard_channel_name(sch, key);
    int slot = rh_rcl_keyslot(CL, key), owner = rh_rcl_owner(CL, 0, slot);
    assert_int_equal(rh_rcl_keyslot(CL, sch), slot);
    long before = subscribers_at(owner, sch);
    struct waiter_arg a = { w, key, flags, -99, 0, "" };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, waiter, &a), 0);
    int subscribed = RH_WAIT_UNTIL(subscribers_at(owner, sch) > before, 10000);
    if (subscribed) {
        if (SHARDED)
            assert_int_equal(numsub_all(sch), 0);  /* 7.0+: sharded only, as before */
        if (strcmp(ch, sch) != 0)  /* (the same name for a key with a hash tag) */
            assert_int_equal(numsub_all(ch), 0);  /* never the plain node's channel */
    }
    if (subscribed && migrate_to >= 0) {
        assert_int_equal(rh_rcl_migrate_slot(CL, slot, owner, migrate_to, 10, NULL, NULL), 0);
        /* 7.0+: the old master dropped it (sunsubscribe) and the waiter
         * follows; classic: the subscription stays on the old master, which
         * hears the new master's broadcast PUBLISH */
        if (SHARDED && !RH_WAIT_UNTIL(rh_rcl_shardnumsub(CL, migrate_to, sch) > 0, 10000))
            subscribed = 0;
    }
    /* released in any case, and the waiter joined before any failure, so
     * the failure says how late the waiter was */
    long long t0 = rh_now_ms();
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    pthread_join(th, NULL);
    long ms = (long)(a.got_ms - t0);
    if (!subscribed) {
        print_error("no %s subscriber to %s on master %d (%ld before); the waiter got the lock "
                    "%ld ms after the release (rc %d: %s)\n", SHARDED ? "sharded" : "classic",
                    sch, migrate_to >= 0 ? migrate_to : owner, before, ms, a.rc, a.detail);
        fail();
    }
    assert_rc(a.rc, DISTLOCK_OK);
    return ms;
}

static distlock_client *slow_rechecking_client(void)
{
    distlock_client *w = new_client(CL->uri);
    assert_rc(distlock_client_set(w, DISTLOCK_OPT_RETRY_MIN_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(w, DISTLOCK_OPT_RETRY_MAX_MS, 5000), DISTLOCK_OK);
    return w;
}

static void test_release_wakes_waiter(void **state)
{
    (void)state;
    distlock_client *holder = new_client(CL->uri), *w = slow_rechecking_client();
    long plain = woken_after_release(holder, w, "wake:plain", 0, -1);
    long tagged = woken_after_release(holder, w, "wake:{7}", 0, -1);
    printf("waiter woken %ld ms after the release (plain key), %ld ms (hash tag)\n", plain, tagged);
    assert_true(plain < 1000);
    assert_true(tagged < 1000);
    distlock_client_free(w);
    distlock_client_free(holder);
}

static void test_release_wakes_fair_waiter(void **state)
{
    (void)state;
    distlock_client *holder = new_client(CL->uri), *w = slow_rechecking_client();
    long fair = woken_after_release(holder, w, "wake:fair", DISTLOCK_FAIR, -1);
    printf("fair waiter woken %ld ms after the release\n", fair);
    assert_true(fair < 1000);
    distlock_client_free(w);
    distlock_client_free(holder);
}

static void test_release_wakes_waiter_after_slot_moved(void **state)
{
    (void)state;
    distlock_client *holder = new_client(CL->uri), *w = slow_rechecking_client();
    char key[64];
    int slot = 2000;
    rh_rcl_key_in_slot(CL, "wake", slot, key, sizeof key);
    int from = rh_rcl_owner(CL, 0, slot), to = rh_rcl_owner(CL, 0, 14000);
    assert_true(from >= 0 && to >= 0 && from != to);
    long ms = woken_after_release(holder, w, key, 0, to);
    printf("waiter woken %ld ms after the release, its slot moved while it waited\n", ms);
    assert_true(ms < 1000);
    assert_int_equal(rh_rcl_owner(CL, 0, slot), to);
    distlock_client_free(w);
    distlock_client_free(holder);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_wakes_waiter),
        cmocka_unit_test(test_release_wakes_fair_waiter),
        cmocka_unit_test(test_release_wakes_waiter_after_slot_moved),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
