/* test_stale_request.c -- no request sent for an earlier
 * attempt, or an earlier ownership, may delete, shorten or overwrite a later
 * grant, whatever connections are used or re-made in between, with or
 * without concurrent threads, for handles and for the token pair.
 *
 * Three real redis-servers behind the fault-injecting proxy. The earlier
 * request (an attempt's undo, a release, an extend) is held by the proxy on
 * the library's connection to node 2; the library then drops or bypasses
 * that connection, a later grant is made with the same token, and only then
 * does the proxy deliver the held bytes to node 2. A later grant must still
 * be held on a quorum while it is valid, and nobody else may get the key. */
#include "test_common.h"
#include "test_proxy_cluster.h"

#include <pthread.h>
#include <stdatomic.h>

DEFINE_PROXY_GROUP(3)

/* After the stale bytes reached node 2: the later grant `r2` (made at
 * t_granted with `validity` ms) must still hold on a quorum, and a third
 * client must not get the key once the foreign holder on node `foreign`
 * (-1: none) has let go. A later attempt that failed must have left
 * nothing behind. Returns 0, or 1 with the reason in why (the caller frees
 * its client and threads first, then fails). */
static int check_later_grant(proxy_env *e, const char *key, const char *token, int r2,
                             long validity, long long t_granted, int foreign, char *why,
                             size_t size)
{
    why[0] = '\0';
    if (r2 != DISTLOCK_OK) {
        printf("# the later acquire failed cleanly: %d\n", r2);
        if (r2 != DISTLOCK_NOTACQUIRED && r2 >= 0) {
            snprintf(why, size, "the later acquire returned %d\n", r2);
            return 1;
        }
        int left = -1;
        if (!RH_WAIT_UNTIL((left = rh_count_holding(e->rc, key, token)) == 0, 3000)) {
            snprintf(why, size, "a failed acquire left %s = %s on %d node(s)\n", key, token, left);
            return 1;
        }
        return 0;
    }
    int holding = rh_count_holding(e->rc, key, token);
    long long age = rh_now_ms() - t_granted;
    printf("# later grant: validity %ld ms, %lld ms ago; held with its token on %d of 3 nodes\n",
           validity, age, holding);
    if (age < validity && holding < 2) {
        snprintf(why, size, "a stale request deleted the later grant of %s: %s is held on %d "
                 "node(s) while its owner still has %lld ms of validity\n", key, token, holding,
                 validity - age);
        /* and the consequence: */
    }
    if (foreign >= 0) rh_del(e->rc, foreign, 0, key);
    distlock_client *c3 = new_client(rh_uris(e->rc));
    int r3 = distlock_acquire_token(c3, key, 10000, "third", 0, NULL);
    age = rh_now_ms() - t_granted;
    if (r3 == DISTLOCK_OK && age < validity) {
        size_t off = strlen(why);
        snprintf(why + off, size - off, "two owners of %s: a third client acquired it while "
                 "the later grant had %lld ms of validity left\n", key, validity - age);
    }
    distlock_client_free(c3);
    return why[0] != '\0';
}

#define assert_check_ok(bad, why) do {                                        \
        if (bad) {                                                            \
            print_error("%s", why);                                           \
            fail();                                                           \
        }                                                                     \
    } while (0)

/* (a) Token pair, one thread. The first attempt cannot win (foreign values
 * on nodes 0 and 1), its SET and its undo queue unanswered on the held
 * connection to node 2; the library sees that connection closed (detach)
 * and re-makes it; the second attempt with the same token wins on nodes 0
 * and 2; then the first attempt's undo reaches node 2. */
static void test_stale_undo_token_pair(void **state)
{
    proxy_env *e = *state;
    const char *K = "stale:1a";
    distlock_client *c = proxied_client(e);
    warm_up(c);
    int c2 = lib_conn(e, 2);
    assert_int_equal(rh_set(e->rc, 0, 0, K, "foreign", 60000), 0);
    assert_int_equal(rh_set(e->rc, 1, 0, K, "foreign", 60000), 0);

    fp_ok(e->fp, "hold 2:%d up", c2);
    int r1 = distlock_acquire_token(c, K, 10000, "tok", 0, NULL);
    printf("# first attempt: %d (%s)\n", r1, distlock_last_error());
    assert_true(r1 == DISTLOCK_NOTACQUIRED || r1 < 0);
    proxy_settle(e);
    printf("# held on the library's connection to node 2: %lld bytes\n",
           conn_info(e, 2, c2).held_up);
    assert_true(conn_info(e, 2, c2).held_up > 0);

    fp_ok(e->fp, "detach 2:%d", c2);          /* the library sees it closed */
    assert_int_equal(rh_del(e->rc, 0, 0, K), 1);
    long validity = 0;
    int r2 = distlock_acquire_token(c, K, 10000, "tok", 0, &validity);
    long long t2 = rh_now_ms();
    printf("# second attempt, same token: %d (%s)\n", r2,
           r2 == DISTLOCK_OK ? "" : distlock_last_error());
    fp_unhold_or_killed(e->fp, "unhold 2:%d up", c2);       /* the first attempt's bytes reach node 2 */
    char why[1024];
    int bad = check_later_grant(e, K, "tok", r2, validity, t2, 1, why, sizeof why);
    distlock_client_free(c);
    assert_check_ok(bad, why);
}

/* (b) Handles, a waiting acquire: its first attempt fails and queues its
 * undo on the held connection to node 2 (same token for every attempt of
 * one acquire); that connection is dropped, a later attempt of the same
 * acquire wins, then the early undo arrives. */
struct waiter_arg {
    distlock_client *c;
    const char *key;
    distlock_lock *l;
    int rc;
    long long t_done;
    char err[512];
};

static void *waiter_main(void *p)
{
    struct waiter_arg *a = p;
    a->rc = distlock_acquire(a->c, a->key, 10000, 8000, 0, &a->l);
    a->t_done = rh_now_ms();
    snprintf(a->err, sizeof a->err, "%s", distlock_last_error());
    return NULL;
}

static void test_stale_undo_waiting_handle(void **state)
{
    proxy_env *e = *state;
    const char *K = "stale:1b";
    distlock_client *c = proxied_client(e);
    /* Node 2's connection must stay until the test drops it: with the
     * default 500 ms a retry of the waiter would find it owing a reply
     * past its timeout first and replace it (killing it: the protection
     * this test checks from another side). */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 4000 * slow_factor()),
              DISTLOCK_OK);
    warm_up(c);
    int c2 = lib_conn(e, 2);
    int c0 = lib_conn(e, 0);
    assert_int_equal(rh_set(e->rc, 0, 0, K, "foreign", 60000), 0);
    assert_int_equal(rh_set(e->rc, 1, 0, K, "foreign", 60000), 0);

    fp_ok(e->fp, "hold 2:%d up", c2);
    struct waiter_arg a = { c, K, NULL, -100, 0, "" };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, waiter_main, &a), 0);
    /* Its first attempt reached the held connection; the waiter subscribes
     * (a second connection to node 0) once that attempt, undo included, is
     * over (bounded: the test stands without it). */
    fp_ok(e->fp, "wait-held 2:%d up 1 10000", c2);
    int subscribed = RH_WAIT_UNTIL(fp_last_conn(e->fp, 0) > c0, 3000);
    printf("# the waiter %s\n", subscribed ? "subscribed after its first attempt" : "did not subscribe");
    proxy_settle(e);
    printf("# held on the library's connection to node 2: %lld bytes\n",
           conn_info(e, 2, c2).held_up);
    assert_true(conn_info(e, 2, c2).held_up > 0);

    fp_ok(e->fp, "detach 2:%d", c2);
    assert_int_equal(rh_del(e->rc, 0, 0, K), 1);   /* the next attempt can win */
    pthread_join(th, NULL);
    printf("# waiting acquire: %d (%s)\n", a.rc, a.rc == DISTLOCK_OK ? "" : a.err);
    long validity = a.l ? distlock_lock_validity_ms(a.l) : 0;
    long long t2 = rh_now_ms();
    fp_unhold_or_killed(e->fp, "unhold 2:%d up", c2);
    char why[1024];
    int bad = check_later_grant(e, K, a.l ? distlock_lock_token(a.l) : "none", a.rc, validity,
                                t2, 1, why, sizeof why);
    distlock_lock_free(a.l);
    distlock_client_free(c);
    assert_check_ok(bad, why);
}

/* (c) Two threads share the client. The first attempt's undo is held on
 * connection set S1's link to node 2; while another thread is busy on S1
 * (its request held on node 0), the next attempt with the same token runs
 * on another connection set and wins; then S1's bytes reach node 2. */
struct inspect_arg {
    distlock_client *c;
    int rc;
    atomic_int done;
};

static void *inspect_main(void *p)
{
    struct inspect_arg *a = p;
    a->rc = distlock_admin_holder(a->c, "stale:other", 0, NULL);
    atomic_store(&a->done, 1);
    return NULL;
}

static void test_stale_undo_other_connection_set(void **state)
{
    proxy_env *e = *state;
    const char *K = "stale:1c";
    distlock_client *c = proxied_client(e);
    /* A wide window for the second thread's round on S1. */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 1500), DISTLOCK_OK);
    warm_up(c);
    int c0 = lib_conn(e, 0), c2 = lib_conn(e, 2);
    assert_int_equal(rh_set(e->rc, 0, 0, K, "foreign", 60000), 0);
    assert_int_equal(rh_set(e->rc, 1, 0, K, "foreign", 60000), 0);

    fp_ok(e->fp, "hold 2:%d up", c2);
    int r1 = distlock_acquire_token(c, K, 10000, "tok", 0, NULL);
    printf("# first attempt: %d (%s)\n", r1, distlock_last_error());
    assert_true(r1 == DISTLOCK_NOTACQUIRED || r1 < 0);
    proxy_settle(e);
    printf("# held on S1's connection to node 2: %lld bytes\n", conn_info(e, 2, c2).held_up);
    assert_true(conn_info(e, 2, c2).held_up > 0);

    /* Another thread takes S1 and waits on node 0. */
    fp_ok(e->fp, "hold 0:%d up", c0);
    struct inspect_arg b = { c, -100, 0 };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, inspect_main, &b), 0);
    fp_ok(e->fp, "wait-held 0:%d up 1 10000", c0);

    assert_int_equal(rh_del(e->rc, 0, 0, K), 1);
    long validity = 0;
    int r2 = distlock_acquire_token(c, K, 10000, "tok", 0, &validity);
    long long t2 = rh_now_ms();
    int busy = !b.done;
    char err2[512];
    snprintf(err2, sizeof err2, "%s", r2 == DISTLOCK_OK ? "" : distlock_last_error());
    printf("# second attempt, same token, while S1 is %s: %d (%s)\n", busy ? "busy" : "FREE", r2,
           err2);
    fp_unhold_or_killed(e->fp, "unhold 2:%d up", c2);
    char why[1024];
    int bad = check_later_grant(e, K, "tok", r2, validity, t2, 1, why, sizeof why);
    /* Node 2 was skipped (node 1 is foreign's: no quorum), and the detail
     * says why in the lock's words: the transport takes them from the
     * call (its subject), knowing no lock itself. "Held by another owner",
     * or no quorum when node 0's new connection (a second set: S1 is
     * busy) was not ready within the round's grace on a loaded machine. */
    if (!bad && busy && ((r2 != DISTLOCK_NOTACQUIRED && r2 != DISTLOCK_ENOQUORUM) ||
                         !strstr(err2, "an earlier request for this lock is still on its way on "
                                       "another connection: not sent"))) {
        snprintf(why, sizeof why, "the second attempt should fail on node 2 with \"an earlier "
                 "request for this lock is still on its way on another connection\": %d (%s)\n",
                 r2, err2);
        bad = 1;
    }
    fp_unhold_or_killed(e->fp, "unhold 0:%d up", c0);
    pthread_join(th, NULL);
    distlock_client_free(c);
    assert_check_ok(bad, why);
}

/* (d) Token pair: the release of ownership 1 is held on node 2; the library
 * drops that connection; ownership 2 (same token) is granted -- on node 2
 * it finds ownership 1's key, still there, and takes it over -- and then
 * ownership 1's release reaches node 2. */
static void test_stale_release_earlier_ownership(void **state)
{
    proxy_env *e = *state;
    const char *K = "stale:1d";
    distlock_client *c = proxied_client(e);
    warm_up(c);
    int c2 = lib_conn(e, 2);

    assert_rc(distlock_acquire_token(c, K, 10000, "tok", 0, NULL), DISTLOCK_OK);
    fp_ok(e->fp, "hold 2:%d up", c2);
    assert_rc(distlock_release_token(c, K, "tok"), DISTLOCK_OK);   /* quorum: nodes 0, 1 */
    proxy_settle(e);
    printf("# release of ownership 1 held on node 2's connection: %lld bytes\n",
           conn_info(e, 2, c2).held_up);
    assert_true(conn_info(e, 2, c2).held_up > 0);
    fp_ok(e->fp, "detach 2:%d", c2);

    /* Someone else takes node 1 in between. */
    assert_int_equal(rh_set(e->rc, 1, 0, K, "foreign", 60000), 0);
    long validity = 0;
    int r2 = distlock_acquire_token(c, K, 10000, "tok", 0, &validity);
    long long t2 = rh_now_ms();
    printf("# ownership 2, same token: %d (%s)\n", r2,
           r2 == DISTLOCK_OK ? "" : distlock_last_error());
    fp_unhold_or_killed(e->fp, "unhold 2:%d up", c2);       /* ownership 1's release reaches node 2 */
    char why[1024];
    int bad = check_later_grant(e, K, "tok", r2, validity, t2, 1, why, sizeof why);
    distlock_client_free(c);
    assert_check_ok(bad, why);
}

/* (d') The same with an extend of ownership 1 to a short TTL: delivered
 * after ownership 2 (same token, 30 s) was granted, it must not shorten it. */
static void test_stale_extend_earlier_ownership(void **state)
{
    proxy_env *e = *state;
    const char *K = "stale:1d2";
    distlock_client *c = proxied_client(e);
    warm_up(c);
    int c2 = lib_conn(e, 2);

    assert_rc(distlock_acquire_token(c, K, 30000, "tok", 0, NULL), DISTLOCK_OK);
    fp_ok(e->fp, "hold 2:%d up", c2);
    assert_rc(distlock_extend_token(c, K, "tok", 1000, NULL), DISTLOCK_OK);  /* nodes 0, 1 */
    proxy_settle(e);
    printf("# extend of ownership 1 held on node 2's connection: %lld bytes\n",
           conn_info(e, 2, c2).held_up);
    assert_true(conn_info(e, 2, c2).held_up > 0);
    fp_ok(e->fp, "detach 2:%d", c2);
    assert_rc(distlock_release_token(c, K, "tok"), DISTLOCK_OK);

    long validity = 0;
    assert_rc(distlock_acquire_token(c, K, 30000, "tok", 0, &validity), DISTLOCK_OK);
    long long t2 = rh_now_ms();
    int before = rh_count_holding(e->rc, K, "tok");
    fp_unhold_or_killed(e->fp, "unhold 2:%d up", c2);       /* ownership 1's extend reaches node 2 */
    long long pttl[3];
    char v[64];
    int bad = -1;
    for (int i = 0; i < 3; i++) {
        pttl[i] = rh_get(e->rc, i, 0, K, v, sizeof v) == 1 && strcmp(v, "tok") == 0
                      ? rh_pttl(e->rc, i, 0, K) : -2;
        if (pttl[i] != -2 && pttl[i] <= 20000 && bad < 0) bad = i;
    }
    long long age = rh_now_ms() - t2;
    printf("# ownership 2 (ttl 30000, validity %ld, %lld ms ago) on %d node(s): pttl %lld / %lld "
           "/ %lld (-2: not ours)\n", validity, age, before, pttl[0], pttl[1], pttl[2]);
    distlock_client_free(c);
    assert_true(before >= 2);
    if (bad >= 0) {
        print_error("ownership 1's late extend shortened ownership 2 on node %d: pttl %lld ms "
                    "left of a 30000 ms grant made %lld ms ago\n", bad, pttl[bad], age);
        fail();
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_stale_undo_token_pair, heal),
        cmocka_unit_test_setup(test_stale_undo_waiting_handle, heal),
        cmocka_unit_test_setup(test_stale_undo_other_connection_set, heal),
        cmocka_unit_test_setup(test_stale_release_earlier_ownership, heal),
        cmocka_unit_test_setup(test_stale_extend_earlier_ownership, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
