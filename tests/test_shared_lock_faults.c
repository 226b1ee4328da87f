/* test_shared_lock_faults.c -- read locks and writers on 3 independent
 * nodes while one node fails, against real redis-server processes
 * (docs/shared-locks.md, "N nodes": a reader and a writer each need a
 * quorum, and two quorums share a node, so they cannot both hold):
 *   - one node paused for half of a run of reader and writer threads: no
 *     reader is ever inside with a writer, and every acquire still
 *     succeeds on the two others;
 *   - one node killed and restarted empty (no persistence) while a reader
 *     holds all three: the writer is still refused by the two that kept
 *     the read lock, and gets the key once the reader releases; then a
 *     reader is refused by the writer's quorum. (A lease granted on exactly
 *     a quorum that includes the wiped node is the documented weakness of
 *     every lock: guarantees.md.) */
#include "test_common.h"

#include <pthread.h>
#include <stdatomic.h>

#define N 3
DEFINE_GROUP(N)

static distlock_client *client_all(const rh_cluster *rc)
{
    char buf[1024];
    distlock_client *c = new_client(rh_uris_mask(rc, (1u << N) - 1, buf, sizeof buf));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 300 * slow_factor()),
              DISTLOCK_OK);
    return c;
}

/* Nodes where token is a member of the read locks' sorted set `key`. */
static int members_on(const rh_cluster *rc, const char *key, const char *token)
{
    int k = 0;
    for (int i = 0; i < N; i++) {
        redisReply *r = rh_command(rc, i, 0, "ZSCORE %s %s", key, token);
        if (r && r->type == REDIS_REPLY_STRING)
            k++;
        if (r)
            freeReplyObject(r);
    }
    return k;
}

typedef struct room {
    distlock_client *c;
    atomic_int readers, writers, bad, reads, writes, errors, stop;
} room;

static void inside(room *rm, int writer)
{
    atomic_int *mine = writer ? &rm->writers : &rm->readers;
    int before = atomic_fetch_add(mine, 1);
    if (atomic_load(&rm->writers) > 1 || (atomic_load(&rm->writers) && atomic_load(&rm->readers)))
        atomic_fetch_add(&rm->bad, 1);
    (void)before;
    sleep_until_ms(rh_now_ms() + 2);  /* the scenario: a short critical section */
    if (atomic_load(&rm->writers) > 1 || (atomic_load(&rm->writers) && atomic_load(&rm->readers)))
        atomic_fetch_add(&rm->bad, 1);
    atomic_fetch_sub(mine, 1);
}

static void *worker(void *arg, unsigned flags)
{
    room *rm = arg;
    while (!atomic_load(&rm->stop)) {
        distlock_lock *l = NULL;
        int r = distlock_acquire(rm->c, "faulty", 5000, 20000, flags, &l);
        if (r != DISTLOCK_OK) {
            print_error("%s: %s\n", flags ? "reader" : "writer", distlock_last_error());
            atomic_fetch_add(&rm->errors, 1);
            continue;
        }
        inside(rm, flags == 0);
        atomic_fetch_add(flags ? &rm->reads : &rm->writes, 1);
        (void)distlock_release(l);
        distlock_lock_free(l);
    }
    return NULL;
}

static void *reader(void *arg) { return worker(arg, DISTLOCK_SHARED); }
static void *writer(void *arg) { return worker(arg, 0); }

static void test_paused_node_keeps_readers_and_writers_apart(void **state)
{
    rh_cluster *rc = *state;
    room rm = { .c = client_all(rc) };
    pthread_t t[6];
    for (int i = 0; i < 6; i++)
        assert_int_equal(pthread_create(&t[i], NULL, i < 4 ? reader : writer, &rm), 0);
    /* a first stretch with every node, then node 2 paused for as long */
    assert_true(RH_WAIT_UNTIL(atomic_load(&rm.writes) >= 5 && atomic_load(&rm.reads) >= 10,
                              20000));
    assert_int_equal(rh_pause(rc, 2), 0);
    int w0 = atomic_load(&rm.writes), r0 = atomic_load(&rm.reads);
    int enough = RH_WAIT_UNTIL(atomic_load(&rm.writes) >= w0 + 5 &&
                               atomic_load(&rm.reads) >= r0 + 10, 30000);
    assert_int_equal(rh_resume(rc, 2), 0);
    atomic_store(&rm.stop, 1);
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    printf("# 3 nodes, node 2 paused half the run: %d reads, %d writes (%d and %d while "
           "paused), %d overlaps, %d errors\n", atomic_load(&rm.reads), atomic_load(&rm.writes),
           atomic_load(&rm.reads) - r0, atomic_load(&rm.writes) - w0, atomic_load(&rm.bad),
           atomic_load(&rm.errors));
    assert_true(enough);
    assert_int_equal(atomic_load(&rm.bad), 0);
    assert_int_equal(atomic_load(&rm.errors), 0);
    distlock_client_free(rm.c);
}

static void test_node_restarted_empty_keeps_the_writer_out(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_all(rc);
    /* the reader must be on every node: a fresh client's first round may
     * end at the quorum before its last connection is ready, and that
     * request is never sent */
    connect_every_node(rc, c, "wiped:connect");
    distlock_lock *r = NULL, *w = NULL, *r2 = NULL;
    assert_rc(distlock_acquire(c, "wiped", 30000, 0, DISTLOCK_SHARED, &r), DISTLOCK_OK);
    /* the grant is on every node (a round returns at a quorum; the third
     * request is on its way) */
    assert_true(RH_WAIT_UNTIL(members_on(rc, "wiped", distlock_lock_token(r)) == N, 3000));
    assert_int_equal(rh_kill(rc, 2), 0);
    assert_int_equal(rh_restart(rc, 2), 0);  /* back, empty */
    assert_int_equal(members_on(rc, "wiped", distlock_lock_token(r)), N - 1);
    int rc_w = distlock_acquire(c, "wiped", 30000, 0, 0, &w);
    printf("# writer after node 2 came back empty, the reader on nodes 0 and 1: %s\n",
           distlock_strerror(rc_w));
    assert_rc(rc_w, DISTLOCK_NOTACQUIRED);
    assert_null(w);
    assert_rc(distlock_release(r), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "wiped", 30000, 2000, 0, &w), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "wiped", 30000, 0, DISTLOCK_SHARED, &r2),
              DISTLOCK_NOTACQUIRED);
    assert_null(r2);
    assert_rc(distlock_release(w), DISTLOCK_OK);
    distlock_lock_free(w);
    distlock_lock_free(r);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_paused_node_keeps_readers_and_writers_apart, heal),
        cmocka_unit_test_setup(test_node_restarted_empty_keeps_the_writer_out, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
