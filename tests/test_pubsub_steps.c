/* test_pubsub_steps.c -- the transport's subscription connections
 * (core/src/pubsub.c), driven from the test's own poll() loop as the
 * subscriber thread drives them (interest -> poll -> advance), on a
 * client's transport.
 *
 *  - A channel is confirmed on every node (one callback per node), a
 *    PUBLISH on any node arrives as one message with its payload (an empty
 *    one as ""), and an unsubscribed channel leaves every server.
 *  - A node that dies is reported (its subscriptions lost, the others
 *    still confirmed), is connected to again once it is back and
 *    confirms the channel again; with every node down none can confirm.
 *  - A forked child frees the parent's subscriptions without a byte on
 *    the parent's connections: the servers still count them, and a
 *    message still reaches the parent. */
#include "test_common.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"

#define N 3
DEFINE_GROUP(N)

#define DRIVE_MS 10000

typedef struct rec {
    pthread_mutex_t mu;
    distlock__pubsub *ps;
    struct pollfd *pfd;
    const char *name;        /* the test's channel (one per test: a failed
                              * one leaves its subscriptions behind) */
    int msgs;
    char chan[64], payload[64];
    int up[N], lost[N];      /* callbacks per node: confirmed, lost (chan NULL) */
} rec;

static void on_message(void *arg, const char *chan, const char *payload)
{
    rec *r = arg;
    r->msgs++;
    snprintf(r->chan, sizeof r->chan, "%s", chan);
    snprintf(r->payload, sizeof r->payload, "%s", payload);
}

static void on_subscription(void *arg, const char *chan, int node, int up)
{
    rec *r = arg;
    assert_true(node >= 0 && node < N);
    if (up) {
        assert_non_null(chan);
        r->up[node]++;
    } else if (chan == NULL) {
        r->lost[node]++;
    }
}

static void rec_init(rec *r, distlock_client *c, const char *name)
{
    memset(r, 0, sizeof(*r));
    r->name = name;
    pthread_mutex_init(&r->mu, NULL);
    const distlock__pubsub_cb cb = { on_message, on_subscription, r };
    pthread_mutex_lock(&r->mu);
    r->ps = distlock__pubsub_new(&c->tp, &r->mu, &cb);
    pthread_mutex_unlock(&r->mu);
    assert_non_null(r->ps);
    r->pfd = calloc((size_t)distlock__pubsub_pollfd_max(r->ps), sizeof(*r->pfd));
    assert_non_null(r->pfd);
}

static void rec_free(rec *r)
{
    pthread_mutex_lock(&r->mu);
    distlock__pubsub_free(r->ps, 0);
    pthread_mutex_unlock(&r->mu);
    free(r->pfd);
    pthread_mutex_destroy(&r->mu);
}

/* Drive the connections until cond(r, arg) (checked with r->mu held) or
 * DRIVE_MS; 1 if it came true. */
static int drive_until(rec *r, int (*cond)(rec *, void *), void *arg)
{
    long long end = rh_now_ms() + DRIVE_MS;
    pthread_mutex_lock(&r->mu);
    while (!cond(r, arg)) {
        if (rh_now_ms() >= end) {
            pthread_mutex_unlock(&r->mu);
            return 0;
        }
        uint64_t next;
        int np = distlock__pubsub_interest(r->ps, r->pfd, &next);
        pthread_mutex_unlock(&r->mu);
        uint64_t now = distlock__now_us();
        /* at most 50 ms: conditions on the servers are looked at again */
        if (next > now + 50000)
            next = now + 50000;
        int pr = poll(r->pfd, (nfds_t)np, next > now ? (int)((next - now + 999) / 1000) : 0);
        assert_true(pr >= 0 || errno == EINTR);
        pthread_mutex_lock(&r->mu);
        for (int k = 0; pr <= 0 && k < np; k++)
            r->pfd[k].revents = 0;
        distlock__pubsub_advance(r->ps, r->pfd, np);
    }
    pthread_mutex_unlock(&r->mu);
    return 1;
}

static int confirmed_is(rec *r, void *arg)
{
    return distlock__pubsub_confirmed(r->ps, r->name) == *(uint64_t *)arg;
}

static int msgs_are(rec *r, void *arg)
{
    return r->msgs >= *(int *)arg;
}

static int none_can_confirm(rec *r, void *arg)
{
    (void)arg;
    return !distlock__pubsub_can_confirm(r->ps);
}

static rh_cluster *g_rc;

/* PUBSUB NUMSUB name on node i (-1: no answer). */
static long long numsub(rh_cluster *rc, int i, const char *name)
{
    redisReply *rep = rh_command(rc, i, 0, "PUBSUB NUMSUB %s", name);
    long long n = -1;
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[1]->type == REDIS_REPLY_INTEGER)
        n = rep->element[1]->integer;
    if (rep)
        freeReplyObject(rep);
    return n;
}

static int servers_count(rec *r, void *arg)
{
    (void)r;
    long long want = *(long long *)arg;
    for (int i = 0; i < N; i++)
        if (numsub(g_rc, i, r->name) != want)
            return 0;
    return 1;
}

static void publish(rh_cluster *rc, int i, const char *name, const char *payload)
{
    redisReply *rep = rh_command(rc, i, 0, "PUBLISH %s %b", name, payload, strlen(payload));
    assert_non_null(rep);
    assert_int_equal(rep->type, REDIS_REPLY_INTEGER);
    assert_int_equal(rep->integer, 1);  /* one subscriber: ours */
    freeReplyObject(rep);
}

static void subscribe_everywhere(rec *r)
{
    uint64_t all = (1u << N) - 1;
    pthread_mutex_lock(&r->mu);
    assert_int_equal(distlock__pubsub_subscribe(r->ps, r->name, NULL), 0);
    pthread_mutex_unlock(&r->mu);
    assert_true(drive_until(r, confirmed_is, &all));
}

static void test_messages_and_confirmations_on_every_node(void **state)
{
    rh_cluster *rc = g_rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    rec r;
    rec_init(&r, c, "ps:messages");
    subscribe_everywhere(&r);
    for (int i = 0; i < N; i++)
        assert_int_equal(r.up[i], 1);
    int want = 1;
    publish(rc, 1, r.name, "hello");
    assert_true(drive_until(&r, msgs_are, &want));
    assert_string_equal(r.chan, r.name);
    assert_string_equal(r.payload, "hello");
    want = 2;
    publish(rc, 2, r.name, "");
    assert_true(drive_until(&r, msgs_are, &want));
    assert_string_equal(r.payload, "");
    assert_int_equal(r.msgs, 2);

    pthread_mutex_lock(&r.mu);
    distlock__pubsub_unsubscribe(r.ps, r.name);
    assert_int_equal(distlock__pubsub_confirmed(r.ps, r.name), 0);
    pthread_mutex_unlock(&r.mu);
    long long zero = 0;
    assert_true(drive_until(&r, servers_count, &zero));
    rec_free(&r);
    distlock_client_free(c);
}

static void test_node_lost_then_back(void **state)
{
    rh_cluster *rc = g_rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    rec r;
    rec_init(&r, c, "ps:lost");
    subscribe_everywhere(&r);

    assert_int_equal(rh_kill(rc, 2), 0);
    uint64_t two = 3;
    assert_true(drive_until(&r, confirmed_is, &two));
    assert_true(r.lost[2] >= 1);
    assert_int_equal(r.lost[0] + r.lost[1], 0);
    pthread_mutex_lock(&r.mu);
    assert_true(distlock__pubsub_can_confirm(r.ps));
    pthread_mutex_unlock(&r.mu);

    assert_int_equal(rh_restart(rc, 2), 0);
    uint64_t all = (1u << N) - 1;
    assert_true(drive_until(&r, confirmed_is, &all));
    assert_int_equal(r.up[2], 2);
    int want = 1;
    publish(rc, 2, r.name, "back");
    assert_true(drive_until(&r, msgs_are, &want));
    assert_string_equal(r.payload, "back");

    for (int i = 0; i < N; i++)
        assert_int_equal(rh_kill(rc, i), 0);
    assert_true(drive_until(&r, none_can_confirm, NULL));
    pthread_mutex_lock(&r.mu);
    assert_int_equal(distlock__pubsub_confirmed(r.ps, r.name), 0);
    pthread_mutex_unlock(&r.mu);
    rec_free(&r);
    distlock_client_free(c);
}

static void test_forked_child_frees_without_a_byte(void **state)
{
    rh_cluster *rc = g_rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    rec r;
    rec_init(&r, c, "ps:fork");
    subscribe_everywhere(&r);
    long long one = 1;
    assert_true(servers_count(&r, &one));

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* the parent's state, as the client's after-fork hook drops it */
        distlock__pubsub_free(r.ps, 1);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* nothing was written: every subscription is still there */
    assert_true(servers_count(&r, &one));
    int want = 1;
    publish(rc, 0, r.name, "after-fork");
    assert_true(drive_until(&r, msgs_are, &want));
    assert_string_equal(r.payload, "after-fork");
    rec_free(&r);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_messages_and_confirmations_on_every_node, heal),
        cmocka_unit_test_setup(test_node_lost_then_back, heal),
        cmocka_unit_test_setup(test_forked_child_frees_without_a_byte, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
