/* test_sentinel_call_following_announcement_keeps_its_budget.c -- a call
 * that follows an announced failover (it was out on the old master when the
 * sentinels named another) stays within a Sentinel node's documented
 * budget: "a call costs at most: command timeout + 2 x (lookup + connect)"
 * (docs/sentinel.md, "Following a failover").
 *
 * The worst case for the bound: the announcement comes late in the call's
 * command timeout, and the new master does not answer either (here paused
 * as soon as it is named: a host that hangs during its promotion). The old
 * master is paused with a release (one round) in its socket; SENTINEL FAILOVER to one
 * sentinel (the leader) late in the call's budget; no automatic failover
 * and no abort within the test (down-after and failover-timeout long).
 * Real processes only: tests/harness/sentinels.py. */
#include "test_common.h"
#include "harness/sentinel_harness.h"
#include "test_sentinel_calls.h"

#define DATA_PASS "data-pw-1"
#define KEY "follow-keeps-budget"
#define CONNECT_TIMEOUT_MS 300
#define COMMAND_TIMEOUT_MS 4000
/* the sentinels' lookup: the connect timeout, and the call's backstop half
 * of it over that for their answer (nodekind.c sentinel_open) */
#define LOOKUP_MS (CONNECT_TIMEOUT_MS + CONNECT_TIMEOUT_MS / 2)
#define BUDGET_MS (COMMAND_TIMEOUT_MS + 2 * (LOOKUP_MS + CONNECT_TIMEOUT_MS))
/* scheduling on a loaded machine under sanitizers */
#define SLACK_MS 500
/* the failover is asked for this long into the call's command timeout */
#define FAILOVER_AT_MS 3000

static void test_call_following_announcement_keeps_its_budget(void **state)
{
    (void)state;
    setvbuf(stdout, NULL, _IOLBF, 0);
    rh_sentinels_opts opts = { .data_pass = DATA_PASS, .down_after_ms = 60000,
                               .failover_timeout_ms = 60000 };
    rh_sentinels *g = rh_sentinels_start(&opts);
    assert_non_null(g);
    int old = rh_sentinels_master(g);
    assert_true(old > 0);
    char token[64];
    sentinel_call o = { .op = SC_RELEASE, .key = KEY, .token = token };
    o.c = sentinel_call_client(g, CONNECT_TIMEOUT_MS, COMMAND_TIMEOUT_MS, KEY "-warm");
    assert_true(RH_WAIT_UNTIL(client_listens_on(g, 0), 10000));
    /* the call: a release (one round, no undo after it) */
    assert_rc(distlock_token_generate(token, sizeof token), DISTLOCK_OK);
    assert_rc(distlock_acquire_token(o.c, KEY, 60000, token, 0, NULL), DISTLOCK_OK);

    redisContext *sub = sentinel_connect(g, 0);
    assert_non_null(sub);
    redisReply *r = redisCommand(sub, "SUBSCRIBE +failover-state-wait-promotion");
    assert_non_null(r);
    freeReplyObject(r);

    assert_int_equal(rh_sentinels_signal(g, old, 1), 0);
    pthread_t th;
    long long started = rh_now_ms();  /* (the call's start, as the thread begins) */
    sentinel_call_start(&o, &th);
    /* the scenario's timing: the failover late in the call's budget */
    rh_sleep_ms(FAILOVER_AT_MS);
    redisContext *sc = sentinel_connect(g, 0);
    assert_non_null(sc);
    r = redisCommand(sc, "SENTINEL FAILOVER mymaster");
    int forced = r && r->type == REDIS_REPLY_STATUS;
    if (r)
        freeReplyObject(r);
    redisFree(sc);
    int promoted = -1;
    long long announced = -1;
    while (forced && announced < 0) {
        void *p = NULL;
        if (redisGetReply(sub, &p) != REDIS_OK)
            break;
        redisReply *m = p;
        if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 &&
            strcmp(m->element[0]->str, "message") == 0) {
            /* "slave IP:PORT IP PORT @ NAME OLDIP OLDPORT" */
            char ip[64];
            int port = 0;
            if (sscanf(m->element[2]->str, "slave %*s %63s %d", ip, &port) == 2 && port > 0) {
                promoted = port;
                announced = rh_now_ms();
                (void)rh_sentinels_signal(g, promoted, 1);  /* it hangs as it is named */
            }
        }
        freeReplyObject(m);
    }
    redisFree(sub);
    int ended = RH_WAIT_UNTIL(atomic_load(&o.done), 3 * COMMAND_TIMEOUT_MS);
    long long took = o.ended_ms - started;
    printf("old master %d paused; failover asked %d ms into the call, announced %lld ms into it "
           "(new master %d, paused at once); the call took %lld ms (budget %d ms: command %d + "
           "2 x (lookup %d + connect %d)): rc %d %s\n",
           old, FAILOVER_AT_MS, announced - started, promoted, ended ? took : -1, BUDGET_MS,
           COMMAND_TIMEOUT_MS, LOOKUP_MS, CONNECT_TIMEOUT_MS, o.rc, o.detail);
    if (promoted > 0)
        (void)rh_sentinels_signal(g, promoted, 0);
    (void)rh_sentinels_signal(g, old, 0);
    if (ended)
        assert_int_equal(pthread_join(th, NULL), 0);
    distlock_client_free(o.c);
    rh_sentinels_stop(g);
    assert_true(forced && promoted > 0);
    assert_true(ended);
    assert_true(took <= BUDGET_MS + SLACK_MS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_call_following_announcement_keeps_its_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
