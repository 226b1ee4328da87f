/* test_redlock.c -- the same lock over 5 (and 4) independent nodes. */
#include "test_common.h"

#define N 5
DEFINE_GROUP(N)

static void test_quorum_sizes(void **state)
{
    rh_cluster *rc = *state;
    char buf[512];
    const int want[N + 1] = { 0, 1, 2, 2, 3, 3 };
    for (int n = 1; n <= N; n++) {
        distlock_client *c = new_client(rh_uris_mask(rc, (1u << n) - 1, buf, sizeof buf));
        assert_int_equal(distlock_client_node_count(c), n);
        assert_int_equal(distlock_client_quorum(c), want[n]);
        distlock_client_free(c);
    }
}

static void test_all_up(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL, *l2 = NULL;
    assert_rc(distlock_acquire(c, "rl", 30000, 0, 0, &l), DISTLOCK_OK);
    const char *tok = distlock_lock_token(l);
    assert_holding_quorum(rc, "rl", tok, N);
    for (int i = 0; i < N; i++) {   /* a fresh client's grant: a quorum holds */
        long long p = rh_pttl(rc, i, 0, "rl");
        assert_true(p == -2 || (p > 0 && p <= 30000));
    }
    long v = distlock_lock_validity_ms(l);
    assert_true(v > 0 && v <= 30000 - default_drift(30000));

    distlock_client *c2 = new_client(rh_uris(rc));
    assert_rc(distlock_acquire(c2, "rl", 30000, 0, 0, &l2), DISTLOCK_NOTACQUIRED);
    assert_null(l2);
    assert_holding_quorum(rc, "rl", tok, N);

    assert_rc(distlock_extend(l, 60000), DISTLOCK_OK);
    int extended = 0;
    for (int i = 0; i < N; i++) extended += rh_pttl(rc, i, 0, "rl") > 30000;
    assert_true(extended >= distlock_client_quorum(c));

    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_holding(rc, "rl", NULL, 0);
    assert_rc(distlock_acquire(c2, "rl", 30000, 0, 0, &l2), DISTLOCK_OK);
    assert_holding_quorum(rc, "rl", distlock_lock_token(l2), N);
    distlock_lock_free(l2);
    distlock_lock_free(l);
    assert_holding(rc, "rl", NULL, 0);
    distlock_client_free(c);
    distlock_client_free(c2);
}

static void check_with_killed(rh_cluster *rc, int killed, int expect_ok)
{
    distlock_client *c = new_client(rh_uris(rc));
    /* A killed node refuses connections at once, so these timeouts cost
     * nothing; they only have to be long enough that a LIVE node is never
     * given up on a loaded machine (with two killed every live node is
     * needed for the quorum). */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 5000), DISTLOCK_OK);
    for (int i = 0; i < killed; i++) assert_int_equal(rh_kill(rc, i), 0);
    distlock_lock *l = NULL;
    if (expect_ok) {
        assert_rc(distlock_acquire(c, "kill", 30000, 0, 0, &l), DISTLOCK_OK);
        assert_non_null(l);
        assert_holding_quorum(rc, "kill", distlock_lock_token(l), N);
        assert_rc(distlock_extend(l, 30000), DISTLOCK_OK);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        assert_holding(rc, "kill", NULL, 0);
        distlock_lock_free(l);
    } else {
        assert_not_acquired(distlock_acquire(c, "kill", 30000, 0, 0, &l), &l);
        /* Failed acquires undo themselves on every node that said yes. */
        assert_holding(rc, "kill", NULL, 0);
        /* The token pair fails the same way and leaves nothing either. */
        int r = distlock_acquire_token(c, "kill", 30000, "tok-k", 0, NULL);
        assert_true(r == DISTLOCK_NOTACQUIRED || r < 0);
        assert_holding(rc, "kill", NULL, 0);
    }
    distlock_client_free(c);
}

static void test_one_killed(void **state) { check_with_killed(*state, 1, 1); }
static void test_two_killed(void **state) { check_with_killed(*state, 2, 1); }
static void test_three_killed(void **state) { check_with_killed(*state, 3, 0); }

/* With two nodes killed every live node is needed for the quorum. One of
 * them loses its script cache (SCRIPT FLUSH) before an extend and before a
 * release: it answers NOSCRIPT and gets the call again as EVAL, while the
 * other nodes of the round got EVALSHA. A request for several nodes is
 * encoded once per round and form; were the resend given the EVALSHA bytes
 * again, that node would refuse once more and the round miss its quorum. */
static void test_noscript_on_a_node_the_quorum_needs(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 5000), DISTLOCK_OK);
    for (int i = 0; i < 2; i++)
        assert_int_equal(rh_kill(rc, i), 0);
    for (int k = 2; k < N; k++) {  /* each live node in turn */
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(c, "nosq", 30000, 0, 0, &l), DISTLOCK_OK);
        assert_int_equal(rh_script_flush(rc, k), 0);
        assert_rc(distlock_extend(l, 60000), DISTLOCK_OK);
        assert_true(rh_pttl(rc, k, 0, "nosq") > 30000);
        assert_int_equal(rh_script_flush(rc, k), 0);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        assert_int_equal(rh_get(rc, k, 0, "nosq", NULL, 0), 0);
        distlock_lock_free(l);
    }
    distlock_client_free(c);
}

/* A lock that loses its quorum while held: extend must fail. */
static void test_extend_loses_quorum(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 500), DISTLOCK_OK);
    /* deleted from nodes 0 and 1 below: each connection up first (a first
     * round may end at the quorum, its request to a node still connecting
     * unsent), and each node seen holding it (a grant ends at 3 of 5) */
    connect_every_node(rc, c, "xq:connect");
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "xq", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_holding(rc, "xq", distlock_lock_token(l), N);
    /* Two owners' keys vanish (e.g. restarts without persistence) and a third dies. */
    assert_int_equal(rh_del(rc, 0, 0, "xq"), 1);
    assert_int_equal(rh_del(rc, 1, 0, "xq"), 1);
    assert_int_equal(rh_kill(rc, 2), 0);
    int r = distlock_extend(l, 30000);
    assert_true(r < 0);
    assert_true(distlock_lock_lost(l) == 1 || r != DISTLOCK_ENOTOWNER);
    /* The nodes where it was lost did not get the key back. */
    assert_int_equal(rh_get(rc, 0, 0, "xq", NULL, 0), 0);
    assert_int_equal(rh_get(rc, 1, 0, "xq", NULL, 0), 0);
    /* Release still cleans what is left (reported as not owned on a quorum). */
    r = distlock_release(l);
    assert_true(r < 0);
    assert_holding(rc, "xq", NULL, 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_foreign_on_three(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    for (int i = 0; i < 3; i++) assert_int_equal(rh_set(rc, i, 0, "fk", "foreign", 60000), 0);
    assert_rc(distlock_acquire(c, "fk", 30000, 0, 0, &l), DISTLOCK_NOTACQUIRED);
    assert_null(l);
    assert_holding(rc, "fk", "foreign", 3);
    assert_holding(rc, "fk", NULL, 3);   /* ours is on none */
    assert_rc(distlock_acquire_token(c, "fk", 30000, "tok-mine", 0, NULL), DISTLOCK_NOTACQUIRED);
    assert_holding(rc, "fk", "tok-mine", 0);
    assert_holding(rc, "fk", "foreign", 3);
    distlock_client_free(c);
}

static void test_foreign_on_two(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    for (int i = 0; i < 2; i++) assert_int_equal(rh_set(rc, i, 0, "fk2", "foreign", 60000), 0);
    assert_rc(distlock_acquire(c, "fk2", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_holding(rc, "fk2", distlock_lock_token(l), 3);
    assert_holding(rc, "fk2", "foreign", 2);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_holding(rc, "fk2", "foreign", 2);
    assert_holding(rc, "fk2", NULL, 2);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* Release needs the key on a quorum to say OK. */
static void test_release_minority(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    /* deleted from nodes 0..2 below: each connection up first (a first
     * round may end at the quorum, its request to a node still connecting
     * unsent), and each node seen holding it (a grant ends at 3 of 5) */
    connect_every_node(rc, c, "rm:connect");
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "rm", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_holding(rc, "rm", distlock_lock_token(l), N);
    for (int i = 0; i < 3; i++) assert_int_equal(rh_del(rc, i, 0, "rm"), 1);
    assert_fails(distlock_release(l), DISTLOCK_ENOTOWNER);
    assert_holding(rc, "rm", NULL, 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_stopped_node(void **state)
{
    rh_cluster *rc = *state;
    const long timeout = 200;
    const long margin = getenv("DISTLOCK_TEST_SLOW") ? 3000 : 1500;
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, timeout), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, timeout), DISTLOCK_OK);
    distlock_lock *l = NULL;
    /* Connect everywhere first. */
    assert_rc(distlock_acquire(c, "stop", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    l = NULL;

    assert_int_equal(rh_pause(rc, 4), 0);
    long long t0 = rh_now_ms();
    int r = distlock_acquire(c, "stop", 30000, 0, 0, &l);
    long long took = rh_now_ms() - t0;
    assert_rc(r, DISTLOCK_OK);
    if (took > timeout + margin) {
        print_error("acquire with one SIGSTOPped node took %lld ms (timeout %ld)\n", took, timeout);
        fail();
    }
    assert_holding_quorum(rc, "stop", distlock_lock_token(l), N);
    long v = distlock_lock_validity_ms(l);
    assert_true(v > 0 && v <= 30000 - default_drift(30000));

    t0 = rh_now_ms();
    assert_rc(distlock_extend(l, 30000), DISTLOCK_OK);
    took = rh_now_ms() - t0;
    assert_true(took <= timeout + margin);

    t0 = rh_now_ms();
    assert_rc(distlock_release(l), DISTLOCK_OK);
    took = rh_now_ms() - t0;
    if (took > timeout + margin) {
        print_error("release with one SIGSTOPped node took %lld ms\n", took);
        fail();
    }
    assert_holding(rc, "stop", NULL, 0);
    distlock_lock_free(l);
    l = NULL;

    /* Also a client that has to connect to the stopped node first. */
    distlock_client *c2 = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c2, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, timeout), DISTLOCK_OK);
    assert_rc(distlock_client_set(c2, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, timeout), DISTLOCK_OK);
    t0 = rh_now_ms();
    assert_rc(distlock_acquire(c2, "stop2", 30000, 0, 0, &l), DISTLOCK_OK);
    took = rh_now_ms() - t0;
    if (took > timeout + margin) {
        print_error("first acquire with one SIGSTOPped node took %lld ms\n", took);
        fail();
    }
    assert_holding_quorum(rc, "stop2", distlock_lock_token(l), N);

    assert_int_equal(rh_resume(rc, 4), 0);
    /* Back: the node serves later operations again (bounded retries). */
    distlock_lock *l3 = NULL;
    int seen = 0;
    for (int tries = 0; tries < 50 && !seen; tries++) {
        assert_rc(distlock_acquire(c, "stop3", 30000, 0, 0, &l3), DISTLOCK_OK);
        seen = rh_get(rc, 4, 0, "stop3", NULL, 0) == 1;
        assert_rc(distlock_release(l3), DISTLOCK_OK);
        distlock_lock_free(l3);
        l3 = NULL;
    }
    assert_true(seen);
    distlock_lock_free(l);
    distlock_client_free(c);
    distlock_client_free(c2);
}

/* Three nodes hung: no quorum, and it still costs only about one timeout. */
static void test_three_stopped(void **state)
{
    rh_cluster *rc = *state;
    const long timeout = 200;
    const long margin = getenv("DISTLOCK_TEST_SLOW") ? 3000 : 1500;
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, timeout), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, timeout), DISTLOCK_OK);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "st3", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    l = NULL;
    for (int i = 0; i < 3; i++) assert_int_equal(rh_pause(rc, i), 0);
    long long t0 = rh_now_ms();
    assert_not_acquired(distlock_acquire(c, "st3", 30000, 0, 0, &l), &l);
    long long took = rh_now_ms() - t0;
    if (took > 2 * timeout + margin) {   /* acquire round + undo round */
        print_error("failed acquire with three hung nodes took %lld ms\n", took);
        fail();
    }
    assert_holding(rc, "st3", NULL, 0);   /* counts the two live ones */
    /* Resumed, the hung nodes get the late SETs and, queued behind them,
     * the undo of the failed acquire: none keeps the failed owner's key
     * (TTL 30 s), and the key is free for the next owner at once. */
    for (int i = 0; i < 3; i++) assert_int_equal(rh_resume(rc, i), 0);
    assert_holding(rc, "st3", NULL, 0);   /* all five */
    distlock_client *c2 = new_client(rh_uris(rc));
    assert_rc(distlock_acquire(c2, "st3", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_holding_quorum(rc, "st3", distlock_lock_token(l), N);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c2);
    distlock_client_free(c);
}

/* The same on a single node: the acquire times out on the paused node; once
 * it resumes, the undo queued behind the SET removes the key. */
static void test_hung_single_node_undo(void **state)
{
    rh_cluster *rc = *state;
    char uri[256];
    distlock_client *c = new_client(rh_uris_mask(rc, 1, uri, sizeof uri));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 200), DISTLOCK_OK);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "hung1", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    l = NULL;
    assert_int_equal(rh_pause(rc, 0), 0);
    assert_true(distlock_acquire(c, "hung1", 30000, 0, 0, &l) < 0);
    assert_null(l);
    assert_int_equal(rh_resume(rc, 0), 0);
    assert_holding(rc, "hung1", NULL, 0);
    assert_rc(distlock_acquire(c, "hung1", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_holding(rc, "hung1", NULL, 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* One SIGSTOPped node of five, command timeout 1 s: once the node is known
 * hung (it has owed a reply for longer than the timeout), an acquire or a
 * release costs a few ms, not the timeout. And after it resumes, the
 * requests it got while stopped leave no key behind. */
static void test_known_hung_node_is_cheap(void **state)
{
    rh_cluster *rc = *state;
    const long timeout = 1000;
    const long bound = getenv("DISTLOCK_TEST_SLOW") ? 400 : 150;   /* "a few ms", generously */
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, timeout), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, timeout), DISTLOCK_OK);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "kh", 30000, 0, 0, &l), DISTLOCK_OK);   /* connect */
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    l = NULL;

    assert_int_equal(rh_pause(rc, 4), 0);
    long long t0 = rh_now_ms();
    assert_rc(distlock_acquire(c, "kh", 30000, 0, 0, &l), DISTLOCK_OK);
    long long first = rh_now_ms() - t0;
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    l = NULL;
    /* The node's reply has been owed for longer than the command timeout
     * (this waits for time to pass, the condition itself). */
    while (rh_now_ms() - t0 < timeout + 200) rh_sleep_ms(20);

    long long worst_acq = 0, worst_rel = 0;
    for (int i = 0; i < 10; i++) {
        long long a0 = rh_now_ms();
        assert_rc(distlock_acquire(c, "kh", 30000, 0, 0, &l), DISTLOCK_OK);
        long long a = rh_now_ms() - a0;
        assert_holding(rc, "kh", distlock_lock_token(l), N - 1);
        long long r0 = rh_now_ms();
        assert_rc(distlock_release(l), DISTLOCK_OK);
        long long r = rh_now_ms() - r0;
        distlock_lock_free(l);
        l = NULL;
        if (a > worst_acq) worst_acq = a;
        if (r > worst_rel) worst_rel = r;
    }
    printf("# one node stopped: first acquire %lld ms; once known hung: worst acquire %lld ms, "
           "worst release %lld ms (command timeout %ld ms)\n", first, worst_acq, worst_rel, timeout);
    if (worst_acq > bound || worst_rel > bound) {
        print_error("with a known-hung node an acquire took up to %lld ms, a release %lld ms "
                    "(bound %ld, command timeout %ld)\n", worst_acq, worst_rel, bound, timeout);
        fail();
    }
    assert_int_equal(rh_resume(rc, 4), 0);
    assert_holding(rc, "kh", NULL, 0);   /* all five, node 4 included */
    distlock_client_free(c);
}

static void test_restarted_node(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 500), DISTLOCK_OK);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "rs", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_holding_quorum(rc, "rs", distlock_lock_token(l), N);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    l = NULL;

    assert_int_equal(rh_kill(rc, 2), 0);
    assert_rc(distlock_acquire(c, "rs", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_holding_quorum(rc, "rs", distlock_lock_token(l), N);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    l = NULL;

    /* Same port, empty and without the scripts. */
    assert_int_equal(rh_restart(rc, 2), 0);
    int seen = 0;
    for (int tries = 0; tries < 50 && !seen; tries++) {
        assert_rc(distlock_acquire(c, "rs", 30000, 0, 0, &l), DISTLOCK_OK);
        char buf[64];
        seen = rh_get(rc, 2, 0, "rs", buf, sizeof buf) == 1 &&
               strcmp(buf, distlock_lock_token(l)) == 0;
        assert_rc(distlock_release(l), DISTLOCK_OK);
        /* a release returns once a quorum deleted it (bounded wait) */
        if (seen) assert_true(RH_WAIT_UNTIL(rh_get(rc, 2, 0, "rs", NULL, 0) == 0, 3000));
        distlock_lock_free(l);
        l = NULL;
    }
    if (!seen) {
        print_error("the restarted node never got the key again\n");
        fail();
    }
    /* Restart all of them: the client comes back on every node. */
    for (int i = 0; i < N; i++) assert_int_equal(rh_restart(rc, i), 0);
    seen = 0;
    for (int tries = 0; tries < 50 && !seen; tries++) {
        int r = distlock_acquire(c, "rs", 30000, 0, 0, &l);
        if (r != DISTLOCK_OK) { assert_null(l); continue; }
        seen = rh_count_holding(rc, "rs", distlock_lock_token(l)) == N;
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
        l = NULL;
    }
    assert_true(seen);
    distlock_client_free(c);
}

/* Even N = 4: quorum 3. */
static void test_four_nodes(void **state)
{
    rh_cluster *rc = *state;
    char buf[512];
    distlock_client *c = new_client(rh_uris_mask(rc, 0x0f, buf, sizeof buf));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 500), DISTLOCK_OK);
    assert_int_equal(distlock_client_quorum(c), 3);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "four", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_holding_quorum(rc, "four", distlock_lock_token(l), 4);
    assert_int_equal(rh_get(rc, 4, 0, "four", NULL, 0), 0);   /* node 4 is not in the set */
    distlock_lock_free(l);
    l = NULL;

    /* Foreign on two of four: 2 < 3, not acquired, nothing of ours left. */
    for (int i = 0; i < 2; i++) assert_int_equal(rh_set(rc, i, 0, "four", "foreign", 60000), 0);
    assert_rc(distlock_acquire(c, "four", 30000, 0, 0, &l), DISTLOCK_NOTACQUIRED);
    assert_null(l);
    assert_holding(rc, "four", NULL, 2);
    for (int i = 0; i < 2; i++) assert_int_equal(rh_del(rc, i, 0, "four"), 1);

    assert_int_equal(rh_kill(rc, 0), 0);
    assert_rc(distlock_acquire(c, "four", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_holding(rc, "four", distlock_lock_token(l), 3);
    distlock_lock_free(l);
    l = NULL;
    assert_int_equal(rh_kill(rc, 1), 0);
    assert_not_acquired(distlock_acquire(c, "four", 30000, 0, 0, &l), &l);
    assert_holding(rc, "four", NULL, 0);
    distlock_client_free(c);
}

/* Validity accounts for slow nodes: three nodes answer only after 400 ms. */
static void test_slow_quorum_validity(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 3000), DISTLOCK_OK);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "sv", 1000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    l = NULL;

    for (int i = 0; i < 3; i++) assert_int_equal(rh_debug_sleep(rc, i, 500), 0);
    long long t0 = rh_now_ms();
    int r = distlock_acquire(c, "sv", 10000, 0, 0, &l);
    long long took = rh_now_ms() - t0;
    assert_rc(r, DISTLOCK_OK);
    long v = distlock_lock_validity_ms(l);
    if (v > 10000 - 250 - default_drift(10000)) {
        print_error("validity %ld after a %lld ms acquire whose quorum needed a node "
                    "sleeping 500 ms\n", v, took);
        fail();
    }
    distlock_lock_free(l);
    l = NULL;

    /* Same with a TTL shorter than the wait: must not succeed. */
    for (int i = 0; i < 3; i++) assert_int_equal(rh_debug_sleep(rc, i, 600), 0);
    r = distlock_acquire(c, "sv2", 200, 0, 0, &l);
    if (r == DISTLOCK_OK) {
        print_error("acquired with ttl 200 although the quorum answered after ~600 ms "
                    "(validity %ld)\n", distlock_lock_validity_ms(l));
        fail();
    }
    assert_null(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_quorum_sizes, heal),
        cmocka_unit_test_setup(test_all_up, heal),
        cmocka_unit_test_setup(test_one_killed, heal),
        cmocka_unit_test_setup(test_two_killed, heal),
        cmocka_unit_test_setup(test_three_killed, heal),
        cmocka_unit_test_setup(test_noscript_on_a_node_the_quorum_needs, heal),
        cmocka_unit_test_setup(test_extend_loses_quorum, heal),
        cmocka_unit_test_setup(test_foreign_on_three, heal),
        cmocka_unit_test_setup(test_foreign_on_two, heal),
        cmocka_unit_test_setup(test_release_minority, heal),
        cmocka_unit_test_setup(test_stopped_node, heal),
        cmocka_unit_test_setup(test_three_stopped, heal),
        cmocka_unit_test_setup(test_hung_single_node_undo, heal),
        cmocka_unit_test_setup(test_known_hung_node_is_cheap, heal),
        cmocka_unit_test_setup(test_restarted_node, heal),
        cmocka_unit_test_setup(test_four_nodes, heal),
        cmocka_unit_test_setup(test_slow_quorum_validity, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
