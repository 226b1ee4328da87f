/* test_sentinel_call_resent_when_another_call_forgets_master.c -- a release
 * or an extend out on a Sentinel node's master that is healthy but slow,
 * when ANOTHER call of the same client times out there and forgets the
 * master (sentinel_timed_out -> distlock__ep_forget): the call out is then
 * handled as from a broken connection (round.c looks every 200 ms whether
 * its node still leads to that server), asks the sentinels, is told the
 * same master, and is resent on a new connection after CLIENT KILL of the
 * old one, while its first send has already run (it was in the server's
 * socket). A resent release or extend after its first send ran must still
 * say what is true: the release OK (the key gone, not ENOTOWNER), the
 * extend OK (the key there with its token and the new TTL).
 *
 * The master is made slow by stopping it (SIGSTOP: the kernel still
 * takes its connections and their bytes, it answers nothing); the other
 * call is a release on a connection of its own, made while the master is
 * stopped, so the connect timeout (shorter than the command timeout the
 * call under test has) ends it first. The test wakes the master (SIGCONT)
 * once it has seen both: the other call ended, and the call under test
 * opened its new connection; the master then runs the first send, which
 * was in its socket, before the new connection's CLIENT KILL and resend
 * (they follow the handshake's replies). The order is observed, not timed:
 * a fixed sleep would end too early where the call is slow to reach the
 * socket (a loaded machine, TSan), and the call would then be answered
 * where it was first sent. Real processes only: tests/harness/sentinels.py
 * (1 master, 2 replicas, 3 sentinels). */
#include "test_common.h"
#include "harness/sentinel_harness.h"
#include "test_sentinel_calls.h"

#define DATA_PASS "data-pw-1"
/* The other call ends at the connect timeout, the call under test follows
 * within 200 ms (long before its own command timeout) and has the connect
 * timeout again for its new connection's handshake: the test wakes the
 * master within it. */
#define CONNECT_TIMEOUT_MS 1000
#define COMMAND_TIMEOUT_MS 4000
#define TTL_MS 30000
#define EXTEND_TTL_MS 90000

/* The client's reconnections (every node: distlock_client_stats names
 * them per node). The call under test re-made its connection iff it
 * followed; the other call's connection was its first. */
static uint64_t reconnects(distlock_client *c)
{
    distlock_stat st[256];
    size_t n = 0;
    uint64_t sum = 0;
    assert_rc(distlock_client_stats(c, st, 256, &n), DISTLOCK_OK);
    for (size_t k = 0; k < n && k < 256; k++)
        if (strncmp(st[k].name, "node_reconnects_total", 21) == 0)
            sum += st[k].value;
    return sum;
}

/* EVALSHA with the key and the token, and the script's other arguments:
 * more than a sentinel's PING or a replica's REPLCONF ACK (the other
 * clients that write to the master while it sleeps). */
#define REQUEST_BYTES_MIN 90

static void run(int op, const char *what, int kill_refused)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    rh_sentinels_opts opts = { .data_pass = DATA_PASS, .down_after_ms = 60000,
                               .failover_timeout_ms = 3000 };
    rh_sentinels *g = rh_sentinels_start(&opts);
    assert_non_null(g);
    int master = rh_sentinels_master(g);
    assert_true(master > 0);
    for (int k = 0; kill_refused && k < 3; k++) {
        /* the data nodes' user may not CLIENT KILL (an ACL that leaves it out) */
        redisContext *d = rh_auth_connect(g->data_port[k], NULL, DATA_PASS);
        assert_non_null(d);
        redisReply *r = redisCommand(d, "ACL SETUSER default -client|kill");
        assert_true(r && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
        redisFree(d);
    }
    distlock_client *c = sentinel_call_client(g, CONNECT_TIMEOUT_MS, COMMAND_TIMEOUT_MS,
                                              "resent-when-forgotten-warm");
    char key[64], token[64], other_token[64];
    snprintf(key, sizeof key, "resent-when-forgotten-%s-%d", op == SC_RELEASE ? "release" : "extend",
             kill_refused);
    assert_rc(distlock_token_generate(token, sizeof token), DISTLOCK_OK);
    assert_rc(distlock_token_generate(other_token, sizeof other_token), DISTLOCK_OK);
    long validity = 0;
    assert_rc(distlock_acquire_token(c, key, TTL_MS, token, 0, &validity), DISTLOCK_OK);

    uint64_t reconnects_before = reconnects(c);

    /* The master is stopped; the call under test goes out on the client's
     * connection (made above) and waits in the master's socket. */
    assert_int_equal(rh_sentinels_signal(g, master, 1), 0);
    long long stopped = rh_now_ms();
    sentinel_call o = { .c = c, .op = op, .key = key, .token = token, .ttl_ms = EXTEND_TTL_MS };
    pthread_t th, th2;
    sentinel_call_start(&o, &th);
    int queued = RH_WAIT_UNTIL(rh_tcp_unread(master) >= REQUEST_BYTES_MIN, 500);
    long long out_ms = rh_now_ms();

    /* Another call of the client, on a connection of its own: its connect
     * timeout ends while the master sleeps, and it forgets the master. A
     * release of a lock nobody holds: nothing after it asks the sentinels
     * again (a failed acquire's undo would, and the master known again at
     * once would leave the call under test nothing to see). */
    sentinel_call f = { .c = c, .op = SC_RELEASE, .key = "resent-when-forgotten-other",
                        .token = other_token };
    sentinel_call_start(&f, &th2);

    /* The other call timed out and forgot the master, and the call under
     * test followed: a new connection (the client's reconnections count
     * it once its socket is open, before its handshake is answered). */
    int seen = RH_WAIT_UNTIL(atomic_load(&f.done) && reconnects(c) > reconnects_before, 20000);
    long long woke = rh_now_ms();
    assert_int_equal(rh_sentinels_signal(g, master, 0), 0);
    int ended = RH_WAIT_UNTIL(atomic_load(&o.done) && atomic_load(&f.done), 20000);
    uint64_t followed = reconnects(c) - reconnects_before;
    char kills[160] = "none";
    redisContext *d = rh_auth_connect(master, NULL, DATA_PASS);
    redisReply *cs = d ? redisCommand(d, "INFO commandstats") : NULL;
    const char *at = cs && cs->type == REDIS_REPLY_STRING ? strstr(cs->str, "cmdstat_client|kill:")
                                                           : NULL;
    long kill_calls = 0, kill_rejected = 0;
    if (at) {
        snprintf(kills, sizeof kills, "%.*s", (int)strcspn(at, "\r\n"), at);
        const char *p = strstr(kills, "calls=");
        kill_calls = p ? atol(p + 6) : 0;
        p = strstr(kills, "rejected_calls=");
        kill_rejected = p ? atol(p + 15) : 0;
    }
    if (cs)
        freeReplyObject(cs);
    if (d)
        redisFree(d);
    printf("%s: the master's CLIENT KILL count: %s\n", what, kills);
    int has = rh_sentinels_has(g, master, key, token);
    long long pttl = pttl_on(master, DATA_PASS, key);
    printf("%s: master %d stopped; the call in its socket %lld ms after: %d; the other call "
           "ended %lld ms after: rc %d %s; the new connection seen: %d, the master woken %lld ms "
           "after the stop; the call ended %lld ms after: rc %d %s (validity %ld ms); the master "
           "has the key with the token: %d, PTTL %lld ms; reconnections: %llu\n",
           what, master, out_ms - stopped, queued, f.ended_ms - stopped, f.rc, f.detail, seen,
           woke - stopped, o.ended_ms - stopped, o.rc, o.detail, o.validity, has, pttl,
           (unsigned long long)followed);
    if (ended) {
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_int_equal(pthread_join(th2, NULL), 0);
    }
    distlock_client_free(c);
    rh_sentinels_stop(g);
    assert_true(ended);
    assert_true(queued);
    assert_true(seen);
    assert_true(f.rc != DISTLOCK_OK);  /* it timed out: the master was forgotten */
    /* the call under test was resent on a new connection, after CLIENT KILL
     * of its old one (the only call here with a request left behind) */
    assert_true(followed >= 1);
    assert_true(kill_calls + kill_rejected >= 1);
    assert_rc(o.rc, DISTLOCK_OK);
    if (op == SC_RELEASE) {
        assert_int_equal(has, 0);
    } else {
        assert_int_equal(has, 1);
        assert_true(pttl > TTL_MS);
    }
}

static void test_release_resent_after_another_call_forgot_the_master(void **state)
{
    (void)state;
    run(SC_RELEASE, "release", 0);
}

static void test_extend_resent_after_another_call_forgot_the_master(void **state)
{
    (void)state;
    run(SC_EXTEND, "extend", 0);
}

/* The same where the server refuses CLIENT KILL: the release out on the
 * healthy master was answered there once it woke, and is still. */
static void test_release_when_another_call_forgot_the_master_kill_refused(void **state)
{
    (void)state;
    run(SC_RELEASE, "release, CLIENT KILL refused", 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_resent_after_another_call_forgot_the_master),
        cmocka_unit_test(test_extend_resent_after_another_call_forgot_the_master),
        cmocka_unit_test(test_release_when_another_call_forgot_the_master_kill_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
