/* test_release_unheard_holder_no_verdict.c -- a release that cannot hear
 * one of the nodes that granted the lock has no verdict: the lock was held
 * on a quorum (the unheard node and one that deleted it), so it was neither
 * "not held with this token on a quorum" nor lost. The caller must be told
 * what distlock_release() promises for a release without a verdict (a
 * status that says "retry": the key may still hold the token there), not
 * DISTLOCK_ENOTOWNER ("expired, lost or already released", no retry), and
 * the handle must not be marked lost.
 *
 * 3 nodes: node 1 holds a stray of another owner (a concurrent attempt's
 * partial grant, as many waiters of one key leave for a moment), the lock
 * is granted on nodes 0 and 2, node 2 is stopped, then the release: node 0
 * deletes it, node 1 says not ours, node 2 does not answer. */
#include "test_common.h"

static int group_setup(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    return (*state = rh_start(3)) ? 0 : -1;
}
static int group_teardown(void **state)
{
    rh_stop_all(*state);
    return 0;
}

static void test_release_with_a_granting_node_unheard_is_not_a_loss(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "unheard-holder";
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 300), DISTLOCK_OK);
    assert_int_equal(rh_set(rc, 1, 0, key, "another-owners-stray-grant", 60000), 0);

    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, key, 30000, 0, 0, &l), DISTLOCK_OK);
    const char *token = distlock_lock_token(l);
    char buf[128];
    assert_int_equal(rh_get(rc, 0, 0, key, buf, sizeof buf), 1);
    assert_string_equal(buf, token);
    assert_int_equal(rh_get(rc, 2, 0, key, buf, sizeof buf), 1);
    assert_string_equal(buf, token);  /* held on a quorum: nodes 0 and 2 */
    assert_false(distlock_lock_lost(l));

    assert_int_equal(rh_pause(rc, 2), 0);
    int rr = distlock_release(l);
    char why[512];
    snprintf(why, sizeof why, "%s", distlock_last_error());
    int lost = distlock_lock_lost(l);
    printf("# release with node 2 stopped: %d (%s); lost %d\n", rr, why, lost);
    assert_int_equal(rh_resume(rc, 2), 0);
    assert_int_not_equal(rr, DISTLOCK_ENOTOWNER);
    assert_int_not_equal(rr, DISTLOCK_OK);
    assert_false(lost);

    /* the retry the status invites: nothing of ours is left (node 2 also
     * runs the first release's delete once it goes on) */
    (void)distlock_release(l);
    assert_true(RH_WAIT_UNTIL(rh_count_holding(rc, key, token) == 0, 3000));
    distlock_lock_free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_with_a_granting_node_unheard_is_not_a_loss),
    };
    return cmocka_run_group_tests_name("release_unheard_holder_no_verdict", tests, group_setup,
                                       group_teardown);
}
