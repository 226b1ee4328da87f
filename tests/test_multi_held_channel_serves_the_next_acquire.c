/* test_multi_held_channel_serves_the_next_acquire.c -- a multi keeps a key's
 * channel subscribed from the key's first queued acquire to its last
 * (docs/non-blocking.md, "The local queue"), and between two of them no
 * waiter is registered: the first won, the next one's first attempt is on
 * the wire. A release published in that window reaches no waiter; the next
 * acquire must still take the key at once (it subscribes, then tries again:
 * wait.c), not at its re-check 20 s later. Also when the subscription's
 * connection was reset in that window (the held channel is subscribed
 * again with no waiter on it). Once the key's last acquire is gone, the
 * channel is unsubscribed.
 *
 * One real node; the multi's client reaches it through the fault proxy (the
 * next acquire's first attempt is held there: its request carries the
 * caller's token, which nothing else sends), the holder and the release
 * directly. Ordering by observed conditions: the proxy's held bytes, the
 * node's subscriber counts, and a witness waiter of another key whose sleep
 * (counted by the interrupt hook) shows that the subscription connection
 * handled the release's message, published before its own. */
#include "test_common.h"
#include "test_multi_drive.h"
#include "test_waiting_threads.h"
#include "harness/faultproxy.h"

#define KEY "heldchan:key"
#define WITNESS_KEY "witness:held"
#define NEXT_TOKEN "held-channel-next-acquire-token"
#define RECHECK_MS 20000
#define WAKE_BOUND_MS 3000

/* The connection of listener 0 that holds bytes in dir, or -1. */
static int conn_holding(fp_proxy *fp, int down)
{
    fp_conn cs[64];
    int n = fp_conns(fp, 0, cs, 64);
    for (int i = 0; i < n; i++)
        if ((down ? cs[i].held_down : cs[i].held_up) > 0)
            return cs[i].id;
    return -1;
}

static void publish(rh_cluster *rc, const char *key)
{
    redisReply *r = rh_command(rc, 0, 0, "PUBLISH distlock:%s %s", key, "");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
}

static void next_acquire_after_release_in_the_window(int reset_subscriber)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    rh_cluster *rc = rh_start(1);
    assert_non_null(rc);
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *c = new_waiting_client(fp_uris(fp), RECHECK_MS, RECHECK_MS);
    distlock_lock *held = NULL;
    assert_rc(distlock_acquire(holder, KEY, 60000, 0, 0, &held), DISTLOCK_OK);
    release_witness witness;
    release_witness_start(&witness, rc, holder, c, WITNESS_KEY);

    distlock_multi *m = NULL;
    assert_rc(distlock_multi_new(c, &m), DISTLOCK_OK);
    distlock_op *first = NULL, *next = NULL;
    distlock_acquire_args next_args = { .size = sizeof next_args, .token = NEXT_TOKEN };
    assert_rc(distlock_multi_acquire(m, KEY, 60000, 40000, 0, NULL, &first), DISTLOCK_OK);
    assert_rc(distlock_multi_acquire(m, KEY, 60000, 40000, 0, &next_args, &next), DISTLOCK_OK);
    long long end = rh_now_ms() + 10000;
    while (key_channel_subscribers(rc, 0, KEY) != 1 && rh_now_ms() < end)
        multi_turn(m, 20);
    assert_int_equal(key_channel_subscribers(rc, 0, KEY), 1);

    /* the holder's release: the first wins; the next one's first attempt
     * is held at the proxy, then runs on the node (the first holds the
     * key: refused), its reply held */
    char hex[80];
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold-match 0 up %s",
                            fp_hex(NEXT_TOKEN, hex, sizeof hex)), 0);
    assert_rc(distlock_release(held), DISTLOCK_OK);
    multi_drive_until(m, first, 10000);
    assert_rc(distlock_op_status(first), DISTLOCK_OK);
    distlock_lock *won = distlock_op_take_lock(first);
    assert_non_null(won);
    int conn = -1;
    end = rh_now_ms() + 10000;
    while ((conn = conn_holding(fp, 0)) < 0 && rh_now_ms() < end)
        multi_turn(m, 20);
    assert_true(conn > 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold 0:%d down", conn), 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "unhold 0:%d up", conn), 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held 0:%d down 1 10000", conn), 0);

    /* the window: no waiter of the key registered, its channel held */
    if (reset_subscriber) {
        redisReply *kill = rh_command(rc, 0, 0, "CLIENT KILL TYPE pubsub");
        assert_true(kill && kill->type == REDIS_REPLY_INTEGER && kill->integer == 1);
        freeReplyObject(kill);
        /* subscribed again for the hold alone (the witness's channel too) */
        assert_true(RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, KEY) == 1 &&
                                  key_channel_subscribers(rc, 0, WITNESS_KEY) == 1, 10000));
    }
    assert_int_equal(key_channel_subscribers(rc, 0, KEY), 1);
    release_witness_mark(&witness);
    assert_rc(distlock_release_token(holder, KEY, distlock_lock_token(won)), DISTLOCK_OK);
    long long released = rh_now_ms();
    publish(rc, WITNESS_KEY);
    release_witness_woken(&witness);

    /* the next one's refused reply: it subscribes, tries again, wins */
    assert_int_equal(fp_cmd(fp, NULL, 0, "unhold 0:%d down", conn), 0);
    multi_drive_until(m, next, 30000);
    long long after = rh_now_ms() - released;
    int next_rc = distlock_op_status(next);
    printf("# %s: the next acquire took the key %lld ms after the release in the window "
           "(rc %d; bound %d ms, re-checks %d ms apart)\n",
           reset_subscriber ? "subscription reset in the window" : "release in the window",
           after, next_rc, WAKE_BOUND_MS, RECHECK_MS);
    distlock_lock *won2 = distlock_op_take_lock(next);
    if (won2) {
        assert_rc(distlock_release(won2), DISTLOCK_OK);
        distlock_lock_free(won2);
    }
    distlock_op_free(first);
    distlock_op_free(next);
    /* no acquire of the key left: its channel goes */
    int unsubscribed = RH_WAIT_UNTIL(key_channel_subscribers(rc, 0, KEY) == 0, 10000);
    distlock_multi_free(m);

    release_witness_stop(&witness);
    distlock_lock_free(won);
    distlock_lock_free(held);
    distlock_client_free(c);
    distlock_client_free(holder);
    fp_stop(fp);
    rh_stop_all(rc);
    assert_rc(next_rc, DISTLOCK_OK);
    assert_true(after >= 0 && after < WAKE_BOUND_MS);
    assert_true(unsubscribed);
}

static void test_release_between_two_acquires_of_a_held_channel_is_seen(void **state)
{
    (void)state;
    next_acquire_after_release_in_the_window(0);
}

static void test_held_channel_resubscribed_without_waiter_after_connection_reset(void **state)
{
    (void)state;
    next_acquire_after_release_in_the_window(1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_between_two_acquires_of_a_held_channel_is_seen),
        cmocka_unit_test(test_held_channel_resubscribed_without_waiter_after_connection_reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
