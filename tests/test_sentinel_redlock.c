/* test_sentinel_redlock.c -- a Redlock over independent Sentinel groups,
 * and a mixed list (two groups and a plain master).
 *
 * Three groups, each a master, one replica and ONE sentinel with quorum 1
 * (tests/harness/sentinels.py --replicas 1 --sentinels 1 --quorum 1): 9
 * redis-server processes, which a 2-core machine can carry. One sentinel per
 * group is enough here: what is tested is the client's quorum over groups,
 * not Sentinel's own agreement (test_sentinel.c runs 3 sentinels).
 *
 * - a lock over the three groups is written on each group's master;
 * - the mixed list redis-sentinel://,redis-sentinel://,redis:// likewise;
 * - a workload of three clients on one key while group 0's master is
 *   SIGKILLed and its replica promoted: locks keep being granted with the
 *   other two groups' quorum during the outage and after, no two holders
 *   ever overlap, and every failure is a clean status. */
#include "test_common.h"
#include "harness/sentinel_harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define NGROUPS 3
#define CONNECT_MS 300
#define COMMAND_MS 300

static rh_sentinels *grp[NGROUPS];

static int group_setup(void **state)
{
    (void)state;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int k = 0; k < NGROUPS; k++) {
        rh_sentinels_opts o = { .replicas = 1, .sentinels = 1, .quorum = 1,
                                .down_after_ms = 1000, .failover_timeout_ms = 3000 };
        if ((grp[k] = rh_sentinels_start(&o)) == NULL)
            return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int k = 0; k < NGROUPS; k++)
        rh_sentinels_stop(grp[k]);
    return 0;
}

static distlock_client *client(const char *uris)
{
    distlock_client *c = new_client(uris);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, CONNECT_MS * slow_factor()),
              DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, COMMAND_MS * slow_factor()),
              DISTLOCK_OK);
    return c;
}

/* "uri0,uri1,uri2" of the groups */
static const char *groups_uri(char *buf, size_t size)
{
    snprintf(buf, size, "%s,%s,%s", grp[0]->uri, grp[1]->uri, grp[2]->uri);
    return buf;
}

/* Acquire until every node took the write: the first rounds may end on a
 * quorum before a slower node's sentinel lookup is done (its call is then
 * not sent). Returns the lock, held on every node. */
static distlock_lock *lock_everywhere(distlock_client *c, const char *key, int nsent)
{
    for (int tries = 0; tries < 100; tries++) {
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(c, key, 30000, 0, 0, &l), DISTLOCK_OK);
        int all = 1;
        for (int k = 0; k < nsent; k++) {
            int m = rh_sentinels_master(grp[k]);
            all &= m > 0 && rh_sentinels_has(grp[k], m, key, distlock_lock_token(l)) == 1;
        }
        if (all)
            return l;
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    fail_msg("'%s' never on every node", key);
    return NULL;
}

static void test_three_groups(void **state)
{
    (void)state;
    char uri[1600];
    distlock_client *c = client(groups_uri(uri, sizeof uri));
    assert_int_equal(distlock_client_node_count(c), 3);
    distlock_lock *l = lock_everywhere(c, "rl-three", NGROUPS);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    for (int k = 0; k < NGROUPS; k++)
        assert_int_equal(rh_sentinels_has(grp[k], rh_sentinels_master(grp[k]), "rl-three", NULL),
                         0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* Two groups and a plain master (the harness's plain redis-server). */
static void test_mixed_list(void **state)
{
    (void)state;
    rh_cluster *rc = rh_start(1);
    assert_non_null(rc);
    char uri[1600];
    snprintf(uri, sizeof uri, "%s,%s,redis://127.0.0.1:%d", grp[1]->uri, grp[2]->uri,
             rc->node[0].port);
    distlock_client *c = client(uri);
    distlock_lock *l = NULL;
    for (int tries = 0; tries < 100; tries++) {
        assert_rc(distlock_acquire(c, "rl-mixed", 30000, 0, 0, &l), DISTLOCK_OK);
        int all = rh_get(rc, 0, 0, "rl-mixed", NULL, 0) == 1;
        for (int k = 1; k < NGROUPS; k++)
            all &= rh_sentinels_has(grp[k], rh_sentinels_master(grp[k]), "rl-mixed",
                                    distlock_lock_token(l)) == 1;
        if (all)
            break;
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
        l = NULL;
    }
    assert_non_null(l);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    /* The release returns once a quorum deleted the key: the last node's
     * delete may still be on its way (bounded wait). */
    assert_true(RH_WAIT_UNTIL(rh_get(rc, 0, 0, "rl-mixed", NULL, 0) == 0, 3000));
    for (int k = 1; k < NGROUPS; k++)
        assert_true(RH_WAIT_UNTIL(rh_sentinels_has(grp[k], rh_sentinels_master(grp[k]),
                                                   "rl-mixed", NULL) == 0, 3000));
    distlock_client_free(c);
    rh_stop_all(rc);
}

/* ------------------------------------------------------------ failover */

struct shared {
    atomic_int stop;
    atomic_int inside;           /* holders in the critical section now */
    atomic_int overlaps;
    atomic_int ok, held, errors;
    atomic_llong kill_ms, promoted_ms;
    atomic_int ok_outage;        /* granted between the kill and the promotion */
    atomic_int ok_after;         /* granted after the promotion */
    char uri[1600];
    char bad[256];
    pthread_mutex_t mu;
};

static void *worker(void *arg)
{
    struct shared *s = arg;
    distlock_client *c = new_client(s->uri);
    distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, CONNECT_MS * slow_factor());
    distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, COMMAND_MS * slow_factor());
    while (!atomic_load(&s->stop)) {
        distlock_lock *l = NULL;
        long long t0 = rh_now_ms();
        int rc = distlock_acquire(c, "rl-shared", 10000, 0, 0, &l);
        if (rc == DISTLOCK_OK) {
            if (atomic_fetch_add(&s->inside, 1) != 0)
                atomic_fetch_add(&s->overlaps, 1);
            atomic_fetch_add(&s->ok, 1);
            long long k = atomic_load(&s->kill_ms), p = atomic_load(&s->promoted_ms);
            if (k && t0 > k && !p)
                atomic_fetch_add(&s->ok_outage, 1);
            if (p && t0 > p)
                atomic_fetch_add(&s->ok_after, 1);
            /* the protected work: a millisecond */
            struct timespec ts = { 0, 1000000 };
            nanosleep(&ts, NULL);
            atomic_fetch_sub(&s->inside, 1);
            distlock_release(l);  /* may fail on the dead node: the others' keys go */
            distlock_lock_free(l);
        } else if (rc == DISTLOCK_NOTACQUIRED) {
            atomic_fetch_add(&s->held, 1);
        } else {
            atomic_fetch_add(&s->errors, 1);
            if (distlock_last_error()[0] == '\0' ||
                (rc != DISTLOCK_ECONN && rc != DISTLOCK_ENOQUORUM)) {
                pthread_mutex_lock(&s->mu);
                snprintf(s->bad, sizeof s->bad, "status %d: '%s'", rc, distlock_last_error());
                pthread_mutex_unlock(&s->mu);
            }
        }
    }
    distlock_client_free(c);
    return NULL;
}

static void test_kill_one_groups_master(void **state)
{
    (void)state;
    static struct shared s;
    memset(&s, 0, sizeof s);
    pthread_mutex_init(&s.mu, NULL);
    groups_uri(s.uri, sizeof s.uri);
    /* every group reached once, so the workload starts on all three */
    distlock_client *c = client(s.uri);
    distlock_lock *l = lock_everywhere(c, "rl-warm", NGROUPS);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);

    enum { NW = 3 };
    pthread_t th[NW];
    for (int k = 0; k < NW; k++)
        assert_int_equal(pthread_create(&th[k], NULL, worker, &s), 0);
    /* (no assertion before the threads are joined) */
    int warm = RH_WAIT_UNTIL(atomic_load(&s.ok) >= 30, 20000);
    int old = rh_sentinels_master(grp[0]), now = -1;
    long long t0 = rh_now_ms();
    if (warm && old > 0) {
        atomic_store(&s.kill_ms, rh_now_ms());
        if (rh_sentinels_kill(grp[0], old) == 0)
            now = rh_sentinels_wait_master_not(grp[0], old, 30000);
        atomic_store(&s.promoted_ms, rh_now_ms());
    }
    int after = now > 0 && RH_WAIT_UNTIL(atomic_load(&s.ok_after) >= 30, 20000);
    atomic_store(&s.stop, 1);
    for (int k = 0; k < NW; k++)
        pthread_join(th[k], NULL);
    printf("redlock over %d groups: group 0's master %d killed, %d promoted %lld ms later; "
           "%d granted (%d during the outage, %d after), %d held, %d errors, %d overlaps\n",
           NGROUPS, old, now, atomic_load(&s.promoted_ms) - t0, atomic_load(&s.ok),
           atomic_load(&s.ok_outage), atomic_load(&s.ok_after), atomic_load(&s.held),
           atomic_load(&s.errors), atomic_load(&s.overlaps));
    assert_true(warm);
    assert_true(now > 0 && now != old);
    assert_int_equal(atomic_load(&s.overlaps), 0);
    /* the quorum of the two other groups carried the outage */
    assert_true(atomic_load(&s.ok_outage) > 0);
    assert_true(after);
    if (s.bad[0]) {
        print_error("unclean error: %s\n", s.bad);
        fail();
    }
    /* the lock is on the promoted master again */
    c = client(s.uri);
    l = lock_everywhere(c, "rl-after", NGROUPS);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);
    pthread_mutex_destroy(&s.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_groups),
        cmocka_unit_test(test_mixed_list),
        cmocka_unit_test(test_kill_one_groups_master),  /* last: it changes group 0 */
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
