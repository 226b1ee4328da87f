/* test_run_steps.c -- the core's operations as runs (core/src/run.h),
 * driven from one thread by the test's own poll() over every run's
 * descriptors, as the non-blocking API drives them.
 *
 *  - Runs interleaved on one thread keep their own status and error
 *    detail: a lost acquire (key held by another owner), a release of a key
 *    that is not ours, a won acquire and a release that succeeds, on 1 and
 *    on 3 nodes; the details are read only once every run is over, so a
 *    detail taken from the thread's one buffer instead of the run's own
 *    would name the other run's key.
 *  - A run stuck on a paused node (SIGSTOP: the kernel accepts, nothing
 *    answers) does not stall the others of the same loop: runs of a 3-node
 *    and a 1-node client finish while it still waits, and it ends at its own
 *    timeout. */
#include "test_common.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

#define N 4
DEFINE_GROUP(N)

enum { MAX_RUNS = 4, MAX_PFD = 64 };

typedef struct slot {
    distlock__run *r;
    const char *what;
    int over;            /* interest returned 0 */
    long long over_ms;   /* when (rh_now_ms) */
    int rc;
    char detail[512];
    /* for the acquires: what they ask, what they got */
    distlock__acq_req rq;
    distlock__attempt att;
} slot;

/* Drive every run until all are over: one poll() over all their
 * descriptors at once, each run's revents handed back to it. Finish is
 * left to the caller. Returns the number of poll() calls. */
static int drive(slot *s, int n)
{
    int polls = 0;
    for (;;) {
        struct pollfd all[MAX_PFD];
        struct pollfd *mine[MAX_RUNS];
        int first[MAX_RUNS], count[MAX_RUNS], np = 0, running = 0;
        uint64_t next = UINT64_MAX;
        for (int k = 0; k < n; k++) {
            count[k] = 0;
            if (s[k].over)
                continue;
            uint64_t nk;
            int m = distlock__run_interest(s[k].r, &mine[k], &nk);
            if (m == 0) {
                s[k].over = 1;
                s[k].over_ms = rh_now_ms();
                continue;
            }
            assert_true(np + m <= MAX_PFD);
            first[k] = np;
            count[k] = m;
            memcpy(&all[np], mine[k], (size_t)m * sizeof(*all));
            np += m;
            running++;
            if (nk < next)
                next = nk;
        }
        if (running == 0)
            return polls;
        uint64_t now = distlock__now_us();
        int wait_ms = next == UINT64_MAX ? -1 : next > now ? (int)((next - now + 999) / 1000) : 0;
        int pr = poll(all, (nfds_t)np, wait_ms);
        assert_true(pr >= 0 || errno == EINTR);
        polls++;
        for (int k = 0; k < n; k++) {
            if (count[k] == 0)
                continue;
            for (int j = 0; j < count[k]; j++)
                mine[k][j].revents = pr > 0 ? all[first[k] + j].revents : 0;
            distlock__run_advance(s[k].r);
        }
    }
}

static void finish(slot *s)
{
    s->rc = distlock__run_finish(s->r);
    s->r = NULL;
    snprintf(s->detail, sizeof s->detail, "%s", distlock_last_error());
}

static void start_acquire(slot *s, distlock_client *c, const char *key, char *token)
{
    int rc = -999;
    distlock_token_generate(token, 33);
    s->rq = (distlock__acq_req){ .key = key, .token = token, .ttl_ms = 30000,
                                 .kind = DISTLOCK__LOCK };
    s->r = distlock__acquire_start(c, &s->rq, &s->att, &rc);
    if (s->r == NULL) {
        print_error("acquire_start(%s) = %d: %s\n", key, rc, distlock_last_error());
        fail();
    }
    assert_int_equal(rc, DISTLOCK_OK);
}

static void start_release(slot *s, distlock_client *c, const char *key, const char *token)
{
    int rc = -999;
    s->r = distlock__release_lease_start(c, 0, key, token, 0, 0, ~0ull, 0, NULL, &rc);
    if (s->r == NULL) {
        print_error("release_lease_start(%s) = %d: %s\n", key, rc, distlock_last_error());
        fail();
    }
    assert_int_equal(rc, DISTLOCK_OK);
}

/* Four runs of one client on `uris` (n nodes), interleaved: each ends with
 * its own status and its own detail. */
static void interleaved_keep_their_details(rh_cluster *rc, const char *uris, int n)
{
    distlock_client *c = new_client(uris);
    char held_tok[33], mine_tok[33], t_lost[33], t_won[33];
    /* held by another owner on every node */
    distlock_token_generate(held_tok, sizeof held_tok);
    for (int i = 0; i < n; i++)
        assert_int_equal(rh_set(rc, i, 0, "runs:held-by-other", "another-owner", 30000), 0);
    /* ours (granted through the blocking path), released by a run */
    distlock_token_generate(mine_tok, sizeof mine_tok);
    assert_rc(distlock_acquire_token(c, "runs:ours", 30000, mine_tok, 0, NULL), DISTLOCK_OK);

    slot s[MAX_RUNS];
    memset(s, 0, sizeof s);
    start_acquire(&s[0], c, "runs:held-by-other", t_lost);
    start_release(&s[1], c, "runs:not-ours", held_tok);
    start_acquire(&s[2], c, "runs:free", t_won);
    start_release(&s[3], c, "runs:ours", mine_tok);
    int polls = drive(s, 4);
    for (int k = 0; k < 4; k++)
        finish(&s[k]);
    printf("# %d node(s), 4 runs in %d poll() calls: lost acquire %d \"%s\"; release of another's "
           "key %d \"%s\"; won acquire %d; release of ours %d\n", n, polls, s[0].rc, s[0].detail,
           s[1].rc, s[1].detail, s[2].rc, s[3].rc);

    /* the starts returned before their runs were over: the loop drove them */
    assert_true(polls > 0);
    assert_int_equal(s[0].rc, DISTLOCK_NOTACQUIRED);
    assert_int_equal(s[1].rc, DISTLOCK_ENOTOWNER);
    assert_int_equal(s[2].rc, DISTLOCK_OK);
    assert_int_equal(s[3].rc, DISTLOCK_OK);
    if (strstr(s[0].detail, "runs:held-by-other") == NULL ||
        strstr(s[0].detail, "runs:not-ours") != NULL) {
        print_error("the lost acquire's detail is \"%s\": not its own\n", s[0].detail);
        fail();
    }
    if (strstr(s[1].detail, "runs:not-ours") == NULL ||
        strstr(s[1].detail, "runs:held-by-other") != NULL) {
        print_error("the refused release's detail is \"%s\": not its own\n", s[1].detail);
        fail();
    }
    /* what the runs did on the servers */
    assert_int_equal(rh_count_holding(rc, "runs:free", t_won), n);
    assert_int_equal(rh_count_holding(rc, "runs:ours", NULL), 0);
    assert_int_equal(rh_count_holding(rc, "runs:held-by-other", "another-owner"), n);
    assert_int_equal(rh_count_holding(rc, "runs:held-by-other", t_lost), 0);
    assert_true(s[2].att.valid_until_us > distlock__now_us());
    assert_rc(distlock_release_token(c, "runs:free", t_won), DISTLOCK_OK);
    distlock_client_free(c);
}

static void test_runs_interleaved_keep_their_details_1_node(void **state)
{
    rh_cluster *rc = *state;
    char buf[256];
    interleaved_keep_their_details(rc, rh_uris_mask(rc, 1u, buf, sizeof buf), 1);
}

static void test_runs_interleaved_keep_their_details_3_nodes(void **state)
{
    rh_cluster *rc = *state;
    char buf[512];
    interleaved_keep_their_details(rc, rh_uris_mask(rc, 7u, buf, sizeof buf), 3);
}

/* Node 3 paused: its client's run waits out its timeout while the runs of
 * a 3-node client (nodes 0..2) and a 1-node client (node 0) in the same
 * loop finish. */
static void test_run_on_paused_node_does_not_stall_the_others(void **state)
{
    rh_cluster *rc = *state;
    enum { STUCK_TIMEOUT_MS = 4000 };
    char b1[256], b3[512], b0[256];
    distlock_client *stuck = new_client(rh_uris_mask(rc, 8u, b1, sizeof b1));
    distlock_client *three = new_client(rh_uris_mask(rc, 7u, b3, sizeof b3));
    distlock_client *one = new_client(rh_uris_mask(rc, 1u, b0, sizeof b0));
    assert_rc(distlock_client_set(stuck, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, STUCK_TIMEOUT_MS),
              DISTLOCK_OK);
    assert_rc(distlock_client_set(stuck, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, STUCK_TIMEOUT_MS),
              DISTLOCK_OK);
    char one_tok[33], t_stuck[33], t_three[33];
    distlock_token_generate(one_tok, sizeof one_tok);
    assert_rc(distlock_acquire_token(one, "runs:one", 30000, one_tok, 0, NULL), DISTLOCK_OK);
    assert_int_equal(rh_pause(rc, 3), 0);

    slot s[3];
    memset(s, 0, sizeof s);
    long long t0 = rh_now_ms();
    start_acquire(&s[0], stuck, "runs:stuck", t_stuck);
    start_acquire(&s[1], three, "runs:three", t_three);
    start_release(&s[2], one, "runs:one", one_tok);
    (void)drive(s, 3);
    for (int k = 0; k < 3; k++)
        finish(&s[k]);
    assert_int_equal(rh_resume(rc, 3), 0);
    printf("# node 3 paused: its run over after %lld ms (%d: \"%s\"); the 3-node acquire after "
           "%lld ms (%d), the 1-node release after %lld ms (%d)\n", s[0].over_ms - t0, s[0].rc,
           s[0].detail, s[1].over_ms - t0, s[1].rc, s[2].over_ms - t0, s[2].rc);

    assert_int_equal(s[1].rc, DISTLOCK_OK);
    assert_int_equal(s[2].rc, DISTLOCK_OK);
    assert_int_equal(s[0].rc, DISTLOCK_ECONN);
    /* the others were over while the stuck one still waited */
    assert_true(s[1].over_ms < s[0].over_ms);
    assert_true(s[2].over_ms < s[0].over_ms);
    /* and the stuck one ended at its timeout, not before */
    assert_true(s[0].over_ms - t0 >= STUCK_TIMEOUT_MS - 50);
    assert_int_equal(rh_count_holding(rc, "runs:three", t_three), 3);
    assert_int_equal(rh_count_holding(rc, "runs:one", NULL), 0);
    assert_rc(distlock_release_token(three, "runs:three", t_three), DISTLOCK_OK);
    distlock_client_free(stuck);
    distlock_client_free(three);
    distlock_client_free(one);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_runs_interleaved_keep_their_details_1_node, heal),
        cmocka_unit_test_setup(test_runs_interleaved_keep_their_details_3_nodes, heal),
        cmocka_unit_test_setup(test_run_on_paused_node_does_not_stall_the_others, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
