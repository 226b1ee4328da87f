/* test_lease_clock.c -- the lease clock (watchdog.c): an auto-renewed lock
 * is said lost only when it is gone or its validity ended with no renewal
 * confirmed; and many auto-renewed locks do not keep the process busy.
 * Three real redis-servers behind the fault-injecting proxy. */
#include "test_common.h"
#include "test_proxy_cluster.h"

#include <stdatomic.h>
#include <sys/resource.h>
#include <unistd.h>

DEFINE_PROXY_GROUP(3)

static void connect_all(distlock_client *c, const char *key)
{
    distlock_lock *l = NULL;
    char k[128];
    snprintf(k, sizeof k, "%s:warm", key);
    assert_rc(distlock_acquire(c, k, 5000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
}

/* One node of three frozen (the proxy holds its traffic) while the lock is
 * held: each renewal is confirmed by the two others at once, a quorum, long
 * before the validity ends. The round still waits for the frozen node up
 * to the command timeout (the default 500 ms), the next renewal goes out
 * only after that round, and the lease clock finds the validity ended
 * "unconfirmed" and calls the lock lost, while a quorum holds it with our
 * token, renewed in time. (Before the lease clock the same schedule kept
 * the lock; with a command timeout over the ttl it was lost either way.) */
static void test_renewal_confirmed_by_a_quorum_in_time_is_not_lost(void **state)
{
    proxy_env *e = *state;
    const char *key = "lc:quorum-in-time";
    distlock_client *c = new_client(fp_uris(e->fp));
    connect_all(c, key);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, key, 900, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    const char *tok = distlock_lock_token(l);
    fp_ok(e->fp, "hold 2");
    long long t0 = rh_now_ms();
    int lost_at = -1, held_at_loss = 0;
    long long pttl_at_loss = -2;
    while (rh_now_ms() - t0 < 2500 && lost_at < 0) {
        int held = rh_count_holding(e->rc, key, tok);
        long long pttl = rh_pttl(e->rc, 0, 0, key);
        if (distlock_lock_lost(l)) {
            lost_at = (int)(rh_now_ms() - t0);
            held_at_loss = held;
            pttl_at_loss = pttl;
            printf("# lost after %d ms: \"%s\"; just before, %d node(s) held our token, PTTL on "
                   "node 0 %lld ms (renewed there at about %lld ms)\n", lost_at,
                   distlock_last_error(), held, pttl, lost_at - (900 - pttl));
        }
        rh_sleep_ms(20);
    }
    /* The renewals reached the two live nodes (their PTTL was reset well
     * after the acquire) and their replies came back at once: a quorum
     * confirmed each long before the validity ended. */
    if (lost_at >= 0 && held_at_loss >= 2 && pttl_at_loss > 100) {
        print_error("said lost after %d ms (ttl 900 ms) while a quorum (%d nodes) held the key "
                    "with our token, renewed in time (PTTL %lld ms on node 0)\n", lost_at,
                    held_at_loss, pttl_at_loss);
        fail();
    }
    fp_ok(e->fp, "heal");
    distlock_lock_abandon(l);
    distlock_client_free(c);
}

/* Two lost callbacks at once, one on each background thread: lock B is
 * found gone by the renewal thread, and its callback (slow here, which only
 * widens the window) holds that thread, so lock A's validity ends unrenewed
 * and the lease clock calls A's callback, which frees B's handle. distlock.h:
 * "Freeing the handle elsewhere unregisters the callback and waits for a call
 * under way, so fn never receives a freed handle". distlock_lock_free() skips
 * that wait on either background thread (distlock__watchdog_is_self), so it
 * returns while B's callback still runs with the handle it just freed. */
static struct {
    distlock_lock *lb;
    atomic_int b_running, b_done, a_called, free_returned_while_b_ran;
} two;

static void cb_b(distlock_lock *l, void *arg)
{
    (void)l, (void)arg;
    atomic_store(&two.b_running, 1);
    /* up to 2 s, or until A's callback says it has freed us */
    for (int i = 0; i < 200 && !atomic_load(&two.a_called); i++)
        rh_sleep_ms(10);
    atomic_store(&two.b_running, 0);
    atomic_store(&two.b_done, 1);
}

static void cb_a(distlock_lock *l, void *arg)
{
    (void)l, (void)arg;
    distlock_lock *lb = two.lb;
    two.lb = NULL;
    if (lb) {
        distlock_lock_free(lb);
        if (atomic_load(&two.b_running))
            atomic_store(&two.free_returned_while_b_ran, 1);
    }
    atomic_store(&two.a_called, 1);
}

static void test_freeing_a_handle_from_the_other_threads_callback_waits_for_its_callback(void **state)
{
    proxy_env *e = *state;
    distlock_client *c = new_client(rh_uris(e->rc));
    distlock_lock *la = NULL, *lb = NULL;
    memset(&two, 0, sizeof two);
    assert_rc(distlock_acquire(c, "lc:two:a", 600, 0, DISTLOCK_AUTO_RENEW, &la), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "lc:two:b", 600, 0, DISTLOCK_AUTO_RENEW, &lb), DISTLOCK_OK);
    two.lb = lb;
    assert_rc(distlock_lock_on_lost(la, cb_a, NULL), DISTLOCK_OK);
    assert_rc(distlock_lock_on_lost(lb, cb_b, NULL), DISTLOCK_OK);
    for (int i = 0; i < e->rc->n; i++)
        freeReplyObject(rh_command(e->rc, i, 0, "DEL lc:two:b"));
    long long t0 = rh_now_ms();
    while (rh_now_ms() - t0 < 5000 && !(atomic_load(&two.a_called) && atomic_load(&two.b_done)))
        rh_sleep_ms(10);
    printf("# A's callback %s, B's callback %s; free(B) from A's callback returned %s\n",
           atomic_load(&two.a_called) ? "ran" : "did not run",
           atomic_load(&two.b_done) ? "returned" : "did not return",
           atomic_load(&two.free_returned_while_b_ran) ? "while B's callback still ran"
                                                       : "after B's callback");
    assert_true(atomic_load(&two.a_called) && atomic_load(&two.b_done));
    if (atomic_load(&two.free_returned_while_b_ran)) {
        print_error("distlock_lock_free(B) returned while B's lost callback was still running "
                    "with that handle\n");
        fail();
    }
    distlock_lock_free(la);
    distlock_client_free(c);
}

/* 1000 auto-renewed locks with a 60 s ttl: between renewals (every 20 s)
 * neither background thread should use measurable CPU. */
static void test_many_auto_renewed_locks_leave_the_process_idle(void **state)
{
    proxy_env *e = *state;
    enum { N = 1000 };
    distlock_client *c = new_client(rh_uris(e->rc));
    distlock_lock **l = calloc(N, sizeof *l);
    char k[64];
    for (int i = 0; i < N; i++) {
        snprintf(k, sizeof k, "lc:many:%d", i);
        assert_rc(distlock_acquire(c, k, 60000, 0, DISTLOCK_AUTO_RENEW, &l[i]), DISTLOCK_OK);
    }
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    long long t0 = rh_now_ms();
    rh_sleep_ms(3000);
    getrusage(RUSAGE_SELF, &r1);
    long long wall = rh_now_ms() - t0;
    long long cpu = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) * 1000LL +
                    (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1000 +
                    (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1000LL +
                    (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1000;
    long csw = (r1.ru_nvcsw - r0.ru_nvcsw) + (r1.ru_nivcsw - r0.ru_nivcsw);
    printf("# %d locks idle %lld ms: %lld ms CPU, %ld context switches\n", N, wall, cpu, csw);
    assert_true(cpu < 300);
    for (int i = 0; i < N; i++) {
        assert_int_equal(distlock_lock_lost(l[i]), 0);
        assert_rc(distlock_release(l[i]), DISTLOCK_OK);
        distlock_lock_free(l[i]);
    }
    free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_renewal_confirmed_by_a_quorum_in_time_is_not_lost, heal),
        cmocka_unit_test_setup(test_freeing_a_handle_from_the_other_threads_callback_waits_for_its_callback, heal),
        cmocka_unit_test_setup(test_many_auto_renewed_locks_leave_the_process_idle, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
