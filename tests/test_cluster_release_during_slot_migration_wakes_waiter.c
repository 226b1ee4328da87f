/* test_cluster_release_during_slot_migration_wakes_waiter.c -- "a release
 * wakes waiters at once (pub/sub)" (README) on a Redis Cluster while the
 * key's slot is being migrated (docs/cluster.md: MOVED / ASK followed).
 *
 * The waiter SSUBSCRIBEs the key's shard channel on the slot's owner. The
 * slot is then put in MIGRATING / IMPORTING state and the key MIGRATEd to
 * the importing master; before the slot is handed over (SETSLOT NODE), the
 * holder releases: its script is redirected with ASK and runs on the
 * importing master. The migration then stays open up to 2 s (until the
 * waiter is done, if sooner). The waiter's re-checks are 5 s apart and the holder's
 * TTL 30 s, so only the release notification can end the wait within a
 * second. Real processes only: 3 masters (tests/harness/cluster_harness.c). */
#include "test_common.h"
#include "cluster_harness.h"

#include <pthread.h>
#include <stdatomic.h>

/* the library's shard channel rule (distlock_static: not exported) */
size_t distlock__shard_channel_name(char *buf, const char *key);

#define RECHECK_MS 5000
#define WAKE_BOUND_MS 1000
/* how long the migration stays open after the release, unless the waiter
 * is done first (a real resharding moves a slot's keys for much longer) */
#define OPEN_AFTER_RELEASE_MS 2000

typedef struct waiter_arg {
    distlock_client *c;
    const char *key;
    int rc;
    long long got_ms;
    atomic_int done;
} waiter_arg;

static void *waiter_main(void *p)
{
    waiter_arg *w = p;
    distlock_lock *l = NULL;
    w->rc = distlock_acquire(w->c, w->key, 30000, 20000, 0, &l);
    w->got_ms = rh_now_ms();
    if (l) {
        (void)distlock_release(l);
        distlock_lock_free(l);
    }
    atomic_store(&w->done, 1);
    return NULL;
}

typedef struct release_arg {
    rh_rcl *cl;
    distlock_lock *held;
    const char *key;
    int to;
    int rc;
    long long released_ms;
    int key_moved;
    atomic_int *waiter_done;
} release_arg;

/* After the key's batch was MIGRATEd, before SETSLOT NODE: release. */
static void release_between_batches(void *p)
{
    release_arg *r = p;
    if (r->released_ms)
        return;
    r->key_moved = 1;  /* its batch (the slot's only key) was MIGRATEd */
    r->rc = distlock_release(r->held);
    r->released_ms = rh_now_ms();
    (void)RH_WAIT_UNTIL(atomic_load(r->waiter_done), OPEN_AFTER_RELEASE_MS);
}

static void test_release_during_migration_wakes_waiter_subscribed_on_old_owner(void **state)
{
    (void)state;
    setvbuf(stdout, NULL, _IOLBF, 0);
    rh_rcl *cl = rh_rcl_start_n(3, 0);
    assert_non_null(cl);
    char key[64], sch[1100];
    int slot = 2000;
    rh_rcl_key_in_slot(cl, "migrating-wake", slot, key, sizeof key);
    distlock__shard_channel_name(sch, key);
    int from = rh_rcl_owner(cl, 0, slot), to = rh_rcl_owner(cl, 0, 14000);
    assert_true(from >= 0 && to >= 0 && from != to);

    distlock_client *holder = new_client(cl->uri), *wc = new_client(cl->uri);
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_RETRY_MIN_MS, RECHECK_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_RETRY_MAX_MS, RECHECK_MS), DISTLOCK_OK);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &held), DISTLOCK_OK);

    waiter_arg w = { .c = wc, .key = key, .rc = -99 };
    atomic_init(&w.done, 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, waiter_main, &w), 0);
    assert_true(RH_WAIT_UNTIL(rh_rcl_shardnumsub(cl, from, sch) == 1, 10000));

    release_arg r = { .cl = cl, .held = held, .key = key, .to = to, .rc = -99, .waiter_done = &w.done };
    assert_int_equal(rh_rcl_migrate_slot(cl, slot, from, to, 10, release_between_batches, &r), 0);
    long long handed_over = rh_now_ms();
    assert_true(r.key_moved);
    int woke = RH_WAIT_UNTIL(atomic_load(&w.done), 25000);
    if (woke) pthread_join(th, NULL);
    long long gap = woke ? w.got_ms - r.released_ms : -1;
    printf("released (rc %d) with the slot migrating, %lld ms before it was handed over; waiter's "
           "acquire ended %lld ms after the release (rc %d; bound %d ms, re-checks %d-%d ms apart)\n",
           r.rc, handed_over - r.released_ms, gap, w.rc, WAKE_BOUND_MS, RECHECK_MS / 2, RECHECK_MS);
    distlock_lock_free(held);
    distlock_client_free(holder);
    distlock_client_free(wc);
    rh_rcl_stop(cl);
    assert_rc(r.rc, DISTLOCK_OK);
    assert_true(woke);
    assert_rc(w.rc, DISTLOCK_OK);
    assert_true(gap >= 0 && gap < WAKE_BOUND_MS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_during_migration_wakes_waiter_subscribed_on_old_owner),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
