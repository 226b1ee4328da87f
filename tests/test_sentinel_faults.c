/* test_sentinel_faults.c -- faults against "Following the sentinels' word"
 * (README, Redis Sentinel): from the moment the sentinels name another
 * master, no new grant is taken from the old one beyond a short grace
 * (200 ms). Real processes only: tests/harness/sentinels.py (1 master, 2
 * replicas, 3 sentinels, the other replica's resync delayed so the old
 * master stays a master for seconds after the promotion), the fault proxy
 * in front of the sentinels, slowdns for a sentinel's host name.
 *
 * Each test makes a failover with SENTINEL FAILOVER sent to one sentinel
 * (the failover's leader), waits until that sentinel names the promoted
 * replica, waits out the grace, and then takes one lock with the client
 * under test: the rule says it is not granted by the old master (which
 * still accepts writes until Sentinel converts it). */
#include "test_common.h"
#include "harness/sentinel_harness.h"
#include "harness/faultproxy.h"
#include "harness/slowdns.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#define DATA_PASS "data-pw-1"
#define SENT_USER "sentuser"
#define SENT_PASS "sent-pw-2"
#define DOWN_AFTER_MS 1000
#define FAILOVER_TIMEOUT_MS 3000
#define CONNECT_MS 300
#define COMMAND_MS 300
#define RESYNC_DELAY_S 5
#define GRACE_BOUND_MS 200

static int setup_slow_resync(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    rh_sentinels_opts o = { .data_pass = DATA_PASS, .sentinel_user = SENT_USER, .sentinel_pass = SENT_PASS,
                            .down_after_ms = DOWN_AFTER_MS, .failover_timeout_ms = FAILOVER_TIMEOUT_MS,
                            .resync_delay_s = RESYNC_DELAY_S };
    rh_sentinels *g = rh_sentinels_start(&o);
    if (!g) return -1;
    *state = g;
    return 0;
}

static int teardown(void **state)
{
    rh_sentinels_stop(*state);
    return 0;
}

/* The value of key on the data node at port: 1 (copied), 0 absent, -1 error. */
static int data_get(int port, const char *key, char *buf, size_t size)
{
    redisContext *c = rh_auth_connect(port, NULL, DATA_PASS);
    if (!c) return -1;
    redisReply *r = redisCommand(c, "GET %s", key);
    redisFree(c);
    if (!r) return -1;
    int rc = r->type == REDIS_REPLY_STRING ? 1 : r->type == REDIS_REPLY_NIL ? 0 : -1;
    if (rc == 1 && buf) snprintf(buf, size, "%s", r->str);
    freeReplyObject(r);
    return rc;
}

static int role_is(int port, const char *role)
{
    redisContext *c = rh_auth_connect(port, NULL, DATA_PASS);
    if (!c) return 0;
    redisReply *r = redisCommand(c, "ROLE");
    redisFree(c);
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 && strcmp(r->element[0]->str, role) == 0;
    if (r) freeReplyObject(r);
    return ok;
}

/* The master sentinel k names (port), 0 on error. */
static int sentinel_names(rh_sentinels *g, int k)
{
    redisContext *c = rh_auth_connect(g->sentinel_port[k], SENT_USER, SENT_PASS);
    if (!c) return 0;
    redisReply *r = redisCommand(c, "SENTINEL GET-MASTER-ADDR-BY-NAME mymaster");
    redisFree(c);
    int port = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? atoi(r->element[1]->str) : 0;
    if (r) freeReplyObject(r);
    return port;
}

/* sentinel.c's thread subscribes each sentinel to five announcement
 * channels: in the sentinel's CLIENT LIST such a connection shows sub=5 (a
 * test's own SUBSCRIBE connection, with fewer channels, does not count). */
#define ANNOUNCEMENT_CHANNELS 5

/* On sentinel k: how many connections are subscribed to the announcement
 * channels, and the newest one's CLIENT id (ids only grow); -1 on error. */
static int subscriptions_on(rh_sentinels *g, int k, long long *newest)
{
    redisContext *c = rh_auth_connect(g->sentinel_port[k], SENT_USER, SENT_PASS);
    if (!c) return -1;
    redisReply *r = redisCommand(c, "CLIENT LIST");
    redisFree(c);
    if (!r || (r->type != REDIS_REPLY_STRING && r->type != 14 /* VERB */)) {
        if (r) freeReplyObject(r);
        return -1;
    }
    char want[32];
    snprintf(want, sizeof want, " sub=%d ", ANNOUNCEMENT_CHANNELS);
    int n = 0;
    long long top = 0;
    for (const char *line = r->str; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const char *hit = strstr(line, want);
        if (hit && hit < line + len && strncmp(line, "id=", 3) == 0) {
            n++;
            long long id = atoll(line + 3);
            if (id > top) top = id;
        }
        line = end ? end + 1 : NULL;
    }
    freeReplyObject(r);
    if (newest) *newest = top;
    return n;
}

/* Every sentinel k in mask has a subscription newer than since[k] (NULL:
 * any) and at least at_least of them. */
static int subscribed(rh_sentinels *g, unsigned mask, const long long *since, int at_least)
{
    for (int k = 0; k < 3; k++) {
        if (!(mask & (1u << k))) continue;
        long long newest = 0;
        int n = subscriptions_on(g, k, &newest);
        if (n < at_least || n < 1 || (since && newest <= since[k])) return 0;
    }
    return 1;
}

/* The newest subscription's id on each sentinel now (0: none). */
static void newest_subscriptions(rh_sentinels *g, long long ids[3])
{
    for (int k = 0; k < 3; k++) {
        ids[k] = 0;
        (void)subscriptions_on(g, k, &ids[k]);
    }
}

/* Wait until the client's listening thread is subscribed to the sentinels
 * in mask (what the sentinels say, not a guess of how long it takes). */
#define ALL_SENTINELS 0x7u
#define SUBSCRIBE_WAIT_MS 10000
static void wait_subscribed(rh_sentinels *g, unsigned mask)
{
    assert_true(RH_WAIT_UNTIL(subscribed(g, mask, NULL, 1), SUBSCRIBE_WAIT_MS));
}

/* The group's master before a test's failover: the first data node. */
static int first_master(rh_sentinels *g)
{
    int old = rh_sentinels_master(g);
    assert_int_equal(old, g->data_port[0]);
    return old;
}

/* SENTINEL FAILOVER to sentinel k; waits until k names another master than
 * old: its port, and *named_ms when it was first seen. -1 on failure. */
static int failover_via(rh_sentinels *g, int k, int old, long long *named_ms)
{
    redisContext *c = rh_auth_connect(g->sentinel_port[k], SENT_USER, SENT_PASS);
    if (!c) return -1;
    int ok = 0;
    for (int tries = 0; tries < 200 && !ok; tries++) {
        redisReply *r = redisCommand(c, "SENTINEL FAILOVER mymaster");
        ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        if (!ok) rh_sleep_ms(50);  /* retry pace while the sentinel refuses (a failover under way) */
    }
    if (!ok) {
        redisFree(c);
        return -1;
    }
    long long end = rh_now_ms() + 30000;
    int port = -1;
    while (rh_now_ms() < end) {
        redisReply *r = redisCommand(c, "SENTINEL GET-MASTER-ADDR-BY-NAME mymaster");
        int p = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? atoi(r->element[1]->str) : 0;
        if (r) freeReplyObject(r);
        if (p > 0 && p != old) {
            *named_ms = rh_now_ms();
            port = p;
            break;
        }
        rh_sleep_ms(2);  /* the polling interval: the naming time's resolution */
    }
    redisFree(c);
    return port;
}

static distlock_client *sentinel_client(const char *uris)
{
    distlock_client *c = new_client(uris);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, CONNECT_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, COMMAND_MS), DISTLOCK_OK);
    return c;
}

/* A URI of the group with these sentinel host:port entries. */
static void group_uri(char *buf, size_t size, const char *hosts)
{
    snprintf(buf, size, "redis-sentinel://:%s@%s/mymaster?sentinel_user=%s&sentinel_password=%s",
             DATA_PASS, hosts, SENT_USER, SENT_PASS);
}

/* Three acquires and releases of c on the current master. */
static void use_master(distlock_client *c)
{
    for (int k = 0; k < 3; k++) {
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(c, "s-warm", 10000, 0, 0, &l), DISTLOCK_OK);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
}

/* Pool a connection of c, a sentinel_client, on the current master. The
 * tests' short timeouts are for the faults they make: the warm-up, on a
 * healthy group, has seconds (under TSan on a loaded machine a first
 * connect with its lookup and handshake took more than 300 ms), then c
 * has sentinel_client's timeouts again. */
static void warm(distlock_client *c)
{
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 10000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 10000), DISTLOCK_OK);
    use_master(c);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, CONNECT_MS), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, COMMAND_MS), DISTLOCK_OK);
}

/* One acquire of key by c, GRACE_BOUND_MS + 50 ms after named: 1 if it was
 * granted by the old master (holds the token there, not on the new one). */
static int probe_on_old(distlock_client *c, const char *key, int old, int now_master,
                        long long named, int *rc_out, long long *started)
{
    long long at = named + GRACE_BOUND_MS + 50;
    while (rh_now_ms() < at) rh_sleep_ms(1);  /* the probe's moment is what is tested */
    distlock_lock *l = NULL;
    *started = rh_now_ms() - named;
    int rc = distlock_acquire(c, key, 30000, 0, 0, &l);
    *rc_out = rc;
    if (rc != DISTLOCK_OK) {
        printf("faults: probe %s: status %d '%s'\n", key, rc, distlock_last_error());
        return 0;
    }
    char on_old[128] = "", on_new[128] = "";
    int h_old = data_get(old, key, on_old, sizeof on_old);
    int h_new = data_get(now_master, key, on_new, sizeof on_new);
    int bad = h_old == 1 && strcmp(on_old, distlock_lock_token(l)) == 0 &&
              !(h_new == 1 && strcmp(on_new, distlock_lock_token(l)) == 0);
    printf("faults: probe %s started %lld ms after the naming: granted; on the old master %d: %s; "
           "on the new master %d: %s; the old master's ROLE is still master: %d\n",
           key, *started, old, h_old == 1 ? "yes" : "no", now_master, h_new == 1 ? "yes" : "no",
           role_is(old, "master"));
    distlock_lock_abandon(l);  /* still held: a second holder would overlap it */
    return bad;
}

/* Sentinel 0 fails the group over (another master is named), then c
 * probes key (probe_on_old): 1 if the old master granted it. *named_ms
 * (unless NULL) gets when the new master was first named. */
static int probe_after_naming(rh_sentinels *g, distlock_client *c, const char *key, int old,
                              long long *named_ms)
{
    long long named = 0;
    int now_master = failover_via(g, 0, old, &named);
    assert_true(now_master > 0);
    if (named_ms) *named_ms = named;
    long long started;
    int rc;
    return probe_on_old(c, key, old, now_master, named, &rc, &started);
}

/* The group's URI with its three sentinels reached through fp's listeners. */
static void proxied_group_uri(char *buf, size_t size, fp_proxy *fp)
{
    char hosts[256];
    snprintf(hosts, sizeof hosts, "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", fp_port(fp, 0),
             fp_port(fp, 1), fp_port(fp, 2));
    group_uri(buf, size, hosts);
}

/* One command on the server at port as (user, pass); 1 if it answered OK. */
static int command_ok(int port, const char *user, const char *pass, const char *cmd)
{
    redisContext *c = rh_auth_connect(port, user, pass);
    if (!c) return 0;
    redisReply *r = redisCommand(c, cmd);
    redisFree(c);
    int ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    if (r) freeReplyObject(r);
    return ok;
}

/* Sentinel 0 hears of a failover only from another sentinel's hello: a
 * PUBLISH on __sentinel__:hello, sent to it directly or to the data nodes,
 * whose channel it subscribes to. deaf 1: it reaches the data nodes as a
 * user of its own that may use no channel (SENTINEL SET auth-user drops its
 * links, the new ones cannot subscribe) and the sentinels' user may not
 * PUBLISH to it; it lags for as long as the test wants, not as long as luck
 * gives, and still answers lookups with the master it knew. The other
 * sentinels are untouched. deaf 0: both allowed again. 1 on success. */
#define DEAF_USER "hellodeaf"
static int hellos_to_sentinel_0(rh_sentinels *g, int deaf)
{
    int ok = 1;
    for (int k = 0; k < 3; k++)
        ok &= command_ok(g->data_port[k], NULL, DATA_PASS,
                         deaf ? "ACL SETUSER " DEAF_USER " on >" DATA_PASS " allkeys +@all resetchannels"
                              : "ACL SETUSER " DEAF_USER " allchannels");
    if (deaf)
        ok &= command_ok(g->sentinel_port[0], SENT_USER, SENT_PASS,
                         "SENTINEL SET mymaster auth-user " DEAF_USER);
    ok &= command_ok(g->sentinel_port[0], SENT_USER, SENT_PASS,
                     deaf ? "ACL SETUSER " SENT_USER " -publish" : "ACL SETUSER " SENT_USER " +publish");
    return ok;
}

/* A client whose master is not known when the failover is under way (a
 * fresh one here; the same holds for one whose connection broke) looks it
 * up. The leader names the promoted replica at once (+promoted-slave,
 * GET-MASTER-ADDR-BY-NAME); the other sentinels follow on its next hello
 * (up to 2 s later; here sentinel 0 is kept from hearing it). A lookup
 * that takes the word of sentinel 0 (first in the URI) is told the old
 * master, and the client has not heard the leader's announcement (its
 * subscriptions start with that first lookup, after the announcement was
 * published): it takes grants from the old master while another client,
 * moved by the announcement, takes them from the new one. */
static void test_fresh_client_does_not_take_the_old_master_from_a_lagging_sentinel(void **state)
{
    rh_sentinels *g = *state;
    int old = first_master(g);
    /* client 1: subscribed, pooled on the old master */
    distlock_client *c1 = sentinel_client(g->uri);
    warm(c1);
    wait_subscribed(g, ALL_SENTINELS);
    assert_true(hellos_to_sentinel_0(g, 1));
    long long named = 0;
    int now_master = failover_via(g, 2, old, &named);  /* sentinel 2 leads */
    assert_true(now_master > 0);
    int s0_before = sentinel_names(g, 0);
    /* client 2: new now, with the group's URI (sentinel 0 first) */
    int rc1 = -1, rc2 = -1;
    long long t1 = 0, t2 = 0;
    distlock_client *c2 = sentinel_client(g->uri);
    int c2_old = probe_on_old(c2, "s-two", old, now_master, named, &rc2, &t2);
    /* sentinel 0 cannot have switched in between: what it names after the
     * probe is what it named during client 2's lookup */
    int s0_after = sentinel_names(g, 0);
    int c1_old = probe_on_old(c1, "s-two", old, now_master, named, &rc1, &t1);
    distlock_client_free(c2);
    int healed = hellos_to_sentinel_0(g, 0);
    printf("faults: sentinel 2 (leader) named %d; sentinel 0 named %d before and %d after "
           "client 2's lookup (old master %d); client 2: status %d, on the old master %d; "
           "client 1: status %d, on the old master %d; both hold s-two: %s\n",
           now_master, s0_before, s0_after, old, rc2, c2_old, rc1, c1_old,
           rc1 == DISTLOCK_OK && rc2 == DISTLOCK_OK ? "YES" : "no");
    distlock_client_free(c1);
    assert_true(healed);
    /* the lag the test is about really happened */
    assert_int_equal(s0_before, old);
    assert_int_equal(s0_after, old);
    /* the rule: no grant from the old master once another is named */
    assert_false(c2_old);
    assert_false(c1_old);
}

/* One sentinel of the URI has a host name that does not resolve (its DNS
 * answers a failure after 8 s: a zone whose servers time out). The thread
 * that listens to every sentinel resolves it on each retry, blocking in
 * getaddrinfo; the other two sentinels' announcements wait meanwhile. */
static void test_unresolvable_sentinel_name_does_not_mute_the_others(void **state)
{
    rh_sentinels *g = *state;
    int old = first_master(g);
    assert_int_equal(slowdns_set("dead-sentinel.test=8000=fail"), 0);
    char hosts[256], uri[512];
    snprintf(hosts, sizeof hosts, "127.0.0.1:%d,127.0.0.1:%d,dead-sentinel.test:26379",
             g->sentinel_port[0], g->sentinel_port[1]);
    group_uri(uri, sizeof uri, hosts);
    distlock_client *c = sentinel_client(uri);
    warm(c);
    wait_subscribed(g, 0x3u);
    int on_old = probe_after_naming(g, c, "s-dns", old, NULL);
    long long f0 = rh_now_ms();
    distlock_client_free(c);
    printf("faults: distlock_client_free took %lld ms\n", rh_now_ms() - f0);
    slowdns_set(NULL);
    assert_false(on_old);
}

/* distlock_client_free while the listening thread is inside a sentinel's
 * name lookup: bounded by the connect timeout like the rest of the thread's
 * waits (it stops on the wake pipe), not by the resolver. */
static void test_client_free_is_bounded_while_a_sentinel_name_resolves(void **state)
{
    rh_sentinels *g = *state;
    assert_int_equal(slowdns_set("dead-sentinel.test=8000=fail"), 0);
    char hosts[256], uri[512];
    snprintf(hosts, sizeof hosts, "127.0.0.1:%d,dead-sentinel.test:26379", g->sentinel_port[0]);
    group_uri(uri, sizeof uri, hosts);
    distlock_client *c = sentinel_client(uri);
    warm(c);
    /* the listening thread is inside the lookup (8 s) */
    assert_true(RH_WAIT_UNTIL(slowdns_calls("dead-sentinel.test") >= 1, 5000));
    long long f0 = rh_now_ms();
    distlock_client_free(c);
    long long took = rh_now_ms() - f0;
    printf("faults: distlock_client_free took %lld ms (connect timeout %d ms)\n", took, CONNECT_MS);
    slowdns_set(NULL);
    assert_true(took <= 1000);
}

/* The sentinels were unreachable from the client for 12 s (a network
 * partition between the client and the sentinels' hosts; the data nodes
 * stay reachable), then the network heals. The README: retried every 1-2 s
 * while they fail. A doubling backoff (1, 2, 4, 8, 16 s ... up to 30 s)
 * would be at 8-16 s by then, so for that long after the heal nothing is
 * heard although every sentinel is up and
 * reachable; a failover then is followed only at the old master's
 * conversion. */
static void test_sentinels_heard_again_soon_after_an_outage(void **state)
{
    rh_sentinels *g = *state;
    int old = first_master(g);
    fp_proxy *fp = fp_start(g->sentinel_port, 3);
    assert_non_null(fp);
    char uri[512];
    proxied_group_uri(uri, sizeof uri, fp);
    distlock_client *c = sentinel_client(uri);
    warm(c);
    wait_subscribed(g, ALL_SENTINELS);
    long long before_cut[3];
    newest_subscriptions(g, before_cut);
    /* the partition: the subscriptions break (reset), reconnections are
     * black-holed */
    assert_int_equal(fp_cmd(fp, NULL, 0, "partition * on"), 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "reset *"), 0);
    long long cut = rh_now_ms();
    while (rh_now_ms() - cut < 12000) {
        use_master(c);  /* the client keeps working on the master meanwhile */
        rh_sleep_ms(500);  /* its pace: the outage's length is what is tested */
    }
    assert_int_equal(fp_cmd(fp, NULL, 0, "heal"), 0);
    long long healed = rh_now_ms();
    /* every sentinel subscribed again (new connections): README, retried
     * every 1-2 s while they fail; a doubling backoff would be at 8-16 s */
    int back = RH_WAIT_UNTIL(subscribed(g, ALL_SENTINELS, before_cut, 1), 20000);
    long long back_ms = rh_now_ms() - healed;
    int on_old = probe_after_naming(g, c, "s-outage", old, NULL);
    char reply[512] = "";
    fp_cmd(fp, reply, sizeof reply, "accepted");
    printf("faults: sentinels unreachable for 12 s; subscribed again %lld ms after the heal; "
           "proxy %s\n", back_ms, reply);
    distlock_client_free(c);
    fp_stop(fp);
    assert_true(back);
    assert_true(back_ms <= 5000);
    assert_false(on_old);
}

/* Every subscription goes silent without a FIN or RST (the sentinels' hosts
 * rebooted, or a middlebox dropped the idle connections' state): the
 * sentinels themselves are up again and answer new connections. Nothing
 * writes on the subscriptions (no PING, no keepalive), so the thread never
 * finds out and never subscribes again. */
static void test_silent_subscriptions_are_replaced(void **state)
{
    rh_sentinels *g = *state;
    int old = first_master(g);
    fp_proxy *fp = fp_start(g->sentinel_port, 3);
    assert_non_null(fp);
    char uri[512];
    proxied_group_uri(uri, sizeof uri, fp);
    distlock_client *c = sentinel_client(uri);
    warm(c);
    wait_subscribed(g, ALL_SENTINELS);
    long long silenced[3];
    newest_subscriptions(g, silenced);
    /* black-hole the connections open now (the subscriptions), only them */
    fp_conn conns[32];
    int n = fp_conns(fp, -1, conns, 32), cut = 0;
    for (int k = 0; k < n; k++)
        if (strcmp(conns[k].state, "open") == 0 &&
            fp_cmd(fp, NULL, 0, "partition %d:%d on", conns[k].l, conns[k].id) == 0)
            cut++;
    printf("faults: %d subscription connection(s) silenced\n", cut);
    /* new connections work: each silent one is replaced by a new subscription */
    long long t_cut = rh_now_ms();
    int replaced = RH_WAIT_UNTIL(subscribed(g, ALL_SENTINELS, silenced, 1), 20000);
    printf("faults: replaced after %lld ms\n", rh_now_ms() - t_cut);
    int on_old = probe_after_naming(g, c, "s-silent", old, NULL);
    distlock_client_free(c);
    fp_stop(fp);
    assert_int_equal(cut, 3);
    assert_true(replaced);
    assert_false(on_old);
}

/* README: "each sentinel gets an equal share of what is left of [the
 * lookup's budget], so a hung sentinel costs its share and the next one is
 * asked". A sentinel whose host name does not resolve in time (DNS slow or
 * failing after 8 s), listed first, before two healthy ones. */
static void test_unresolvable_first_sentinel_costs_only_its_share(void **state)
{
    rh_sentinels *g = *state;
    int master = rh_sentinels_master(g);
    assert_true(master > 0);
    assert_int_equal(slowdns_set("dead-sentinel.test=8000=fail"), 0);
    char hosts[256], uri[512];
    snprintf(hosts, sizeof hosts, "dead-sentinel.test:26379,127.0.0.1:%d,127.0.0.1:%d",
             g->sentinel_port[0], g->sentinel_port[1]);
    group_uri(uri, sizeof uri, hosts);
    distlock_client *c = sentinel_client(uri);
    int ok = 0, tries = 0;
    long long t0 = rh_now_ms(), first_ok = -1;
    char last[512] = "";
    while (rh_now_ms() - t0 < 5000) {
        distlock_lock *l = NULL;
        tries++;
        int rc = distlock_acquire(c, "s-first-dead", 10000, 0, 0, &l);
        if (rc == DISTLOCK_OK) {
            ok++;
            if (first_ok < 0) first_ok = rh_now_ms() - t0;
            distlock_release(l);
            distlock_lock_free(l);
        } else {
            snprintf(last, sizeof last, "%d '%s'", rc, distlock_last_error());
        }
    }
    printf("faults: first sentinel's name unresolvable (8 s): %d of %d acquires granted in 5 s; "
           "first at %lld ms (-1: none); last failure %s\n", ok, tries, first_ok, last);
    long long f0 = rh_now_ms();
    distlock_client_free(c);
    printf("faults: distlock_client_free took %lld ms\n", rh_now_ms() - f0);
    slowdns_set(NULL);
    assert_true(first_ok >= 0 && first_ok <= 2 * CONNECT_MS + COMMAND_MS + 500);
}

/* A failover aborted after +failover-state-wait-promotion: the replica the
 * leader selected refuses SLAVEOF NO ONE (its default user may not run it,
 * so the leader's MULTI ... EXEC is aborted), never reports master, and the
 * leader gives up at failover-timeout (-failover-abort-slave-timeout). The
 * old master stays the master and the sentinels keep naming it; the client,
 * moved to the replica by the announcement, must come back. */
struct looper {
    distlock_client *c;
    atomic_int stop;
    atomic_int n;       /* read by the main thread while the loop runs */
    long long t[20000];
    int rc[20000];
    char first_err[512], last_err[512];
};

static void *loop_main(void *arg)
{
    struct looper *lp = arg;
    while (!atomic_load(&lp->stop) && lp->n < 20000) {
        distlock_lock *l = NULL;
        char key[32];
        snprintf(key, sizeof key, "s-abort-%d", lp->n);  /* one a release missed blocks no other */
        int rc = distlock_acquire(lp->c, key, 10000, 0, 0, &l);
        int k = atomic_load(&lp->n);
        lp->t[k] = rh_now_ms();
        lp->rc[k] = rc;
        atomic_store(&lp->n, k + 1);  /* after the record: the main thread reads records < n */
        if (rc != DISTLOCK_OK) {
            if (!lp->first_err[0])
                snprintf(lp->first_err, sizeof lp->first_err, "%d '%s'", rc, distlock_last_error());
            snprintf(lp->last_err, sizeof lp->last_err, "%d '%s'", rc, distlock_last_error());
        }
        if (l) {
            distlock_release(l);
            distlock_lock_free(l);
        }
        rh_sleep_ms(5);  /* the pace of an application's calls, not a synchronisation */
    }
    return NULL;
}

/* The looper's newest call (since from: its index) was granted. */
static int looper_granted_since(struct looper *lp, int from, long long after_ms)
{
    int n = atomic_load(&lp->n);
    for (int k = from; k < n; k++)
        if (lp->rc[k] == DISTLOCK_OK && lp->t[k] >= after_ms) return 1;
    return 0;
}

/* The looper's calls (since from: its index) include a failed one. */
static int looper_failed_since(struct looper *lp, int from)
{
    int n = atomic_load(&lp->n);
    for (int k = from; k < n; k++)
        if (lp->rc[k] != DISTLOCK_OK) return 1;
    return 0;
}

/* The replicas refuse SLAVEOF (their default user, the leader's, may not
 * run it: its MULTI ... EXEC is aborted): a failover's leader announces
 * +failover-state-wait-promotion, no replica ever reports master, and the
 * leader gives up at failover-timeout (-failover-abort-slave-timeout). */
static void replicas_refuse_promotion(rh_sentinels *g)
{
    for (int k = 1; k < 3; k++) {
        redisContext *d = rh_auth_connect(g->data_port[k], NULL, DATA_PASS);
        assert_non_null(d);
        redisReply *r = redisCommand(d, "ACL SETUSER default -slaveof -replicaof");
        assert_true(r && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
        redisFree(d);
    }
}

/* The test's own subscription to sentinel 0 (the leader of the test's
 * failovers), directly, to what only the leader announces. */
static redisContext *leader_announcements(rh_sentinels *g)
{
    redisContext *sub = rh_auth_connect(g->sentinel_port[0], SENT_USER, SENT_PASS);
    assert_non_null(sub);
    struct timeval tv = { 20, 0 };
    redisSetTimeout(sub, tv);
    redisReply *r = redisCommand(sub, "SUBSCRIBE +failover-state-wait-promotion -failover-abort-slave-timeout");
    assert_non_null(r);
    freeReplyObject(r);
    void *p = NULL;
    assert_int_equal(redisGetReply(sub, &p), REDIS_OK);  /* the second confirmation */
    freeReplyObject(p);
    return sub;
}

/* Reads sub until a message on channel: when it came, 0 if none did. */
static long long next_announcement(redisContext *sub, const char *channel)
{
    for (;;) {
        void *p = NULL;
        if (redisGetReply(sub, &p) != REDIS_OK) return 0;
        redisReply *m = p;
        int hit = m->type == REDIS_REPLY_ARRAY && m->elements == 3 &&
                  strcmp(m->element[0]->str, "message") == 0 && strcmp(m->element[1]->str, channel) == 0;
        freeReplyObject(m);
        if (hit) return rh_now_ms();
    }
}

static void test_aborted_failover_after_wait_promotion_comes_back(void **state)
{
    rh_sentinels *g = *state;
    int old = first_master(g);
    replicas_refuse_promotion(g);
    struct looper *lp = calloc(1, sizeof *lp);
    lp->c = sentinel_client(g->uri);
    warm(lp->c);
    wait_subscribed(g, ALL_SENTINELS);
    redisContext *sub = rh_auth_connect(g->sentinel_port[0], SENT_USER, SENT_PASS);
    assert_non_null(sub);
    struct timeval tv = { 20, 0 };
    redisSetTimeout(sub, tv);
    redisReply *r = redisCommand(sub, "SUBSCRIBE +failover-state-wait-promotion -failover-abort-slave-timeout");
    assert_non_null(r);
    freeReplyObject(r);
    for (int k = 0; k < 1; k++) {  /* the two other subscribe confirmations */
        void *p = NULL;
        assert_int_equal(redisGetReply(sub, &p), REDIS_OK);
        freeReplyObject(p);
    }
    redisContext *sc = rh_auth_connect(g->sentinel_port[0], SENT_USER, SENT_PASS);
    r = redisCommand(sc, "SENTINEL FAILOVER mymaster");
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(sc);
    long long t_wp = 0, t_abort = 0;
    pthread_t th;
    int started = 0;
    while (!t_abort) {
        void *p = NULL;
        if (redisGetReply(sub, &p) != REDIS_OK) break;
        redisReply *m = p;
        if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 && strcmp(m->element[0]->str, "message") == 0) {
            printf("faults: %s %s\n", m->element[1]->str, m->element[2]->str);
            if (strcmp(m->element[1]->str, "+failover-state-wait-promotion") == 0 && !t_wp) {
                t_wp = rh_now_ms();
                started = pthread_create(&th, NULL, loop_main, lp) == 0;
            } else if (strcmp(m->element[1]->str, "-failover-abort-slave-timeout") == 0) {
                t_abort = rh_now_ms();
            }
        }
        freeReplyObject(m);
    }
    redisFree(sub);
    if (started) {
        /* until the first grant after the abort (at most 3 s) */
        (void)RH_WAIT_UNTIL(t_abort && looper_granted_since(lp, 0, t_abort), 3000);
        atomic_store(&lp->stop, 1);
        pthread_join(th, NULL);
    }
    int names = sentinel_names(g, 0), still = role_is(old, "master");
    int fails_before = 0, ok_before = 0, fails_after = 0, ok_after = 0;
    long long first_ok_after = -1;
    for (int k = 0; k < lp->n; k++) {
        int after = lp->t[k] >= t_abort;
        if (lp->rc[k] == DISTLOCK_OK) {
            if (after) { ok_after++; if (first_ok_after < 0) first_ok_after = lp->t[k] - t_abort; }
            else ok_before++;
        } else {
            if (after) fails_after++; else fails_before++;
        }
    }
    printf("faults: aborted %lld ms after wait-promotion; sentinels name %d (old %d, still master %d); "
           "between: %d granted %d failed; after the abort, until its first grant (at most 3 s): %d "
           "granted (first %lld ms after) %d failed\n", t_abort - t_wp, names, old, still, ok_before, fails_before,
           ok_after, first_ok_after, fails_after);
    printf("faults: first failure %s; last failure %s\n", lp->first_err, lp->last_err);
    distlock_client_free(lp->c);
    free(lp);
    assert_true(t_wp > 0 && t_abort > 0);
    assert_int_equal(names, old);
    assert_true(ok_after > 0 && first_ok_after <= 1000);
}

/* The replica the leader selected is slow to run SLAVEOF NO ONE (busy: here
 * CLIENT PAUSE 1500 ALL on it just before the failover, as a long command,
 * a fork or a stall would): the leader announces
 * +failover-state-wait-promotion at once, the client moves, finds the
 * replica not answering / still a replica, and after one connect timeout
 * goes back to the old master, which grants until +promoted-slave (up to
 * the leader's next INFO, 1 s, after the replica finally runs it). What the
 * old master grants after the replica ran SLAVEOF NO ONE is lost. */
struct grant_rec {
    long long t;        /* the acquire's start */
    char key[32];
    char token[64];
};

struct granter {
    distlock_client *c;
    atomic_int stop;
    atomic_int granted;  /* the main thread waits for the first grant */
    int n, failed;
    struct grant_rec g[20000];
};

static void *granter_main(void *arg)
{
    struct granter *gr = arg;
    int seq = 0;
    while (!atomic_load(&gr->stop) && gr->n < 20000) {
        distlock_lock *l = NULL;
        char key[32];
        snprintf(key, sizeof key, "s-slow-%d", seq++);
        long long t0 = rh_now_ms();
        int rc = distlock_acquire(gr->c, key, 120000, 0, 0, &l);
        if (rc == DISTLOCK_OK) {
            struct grant_rec *g = &gr->g[gr->n++];
            g->t = t0;
            snprintf(g->key, sizeof g->key, "%s", key);
            snprintf(g->token, sizeof g->token, "%s", distlock_lock_token(l));
            distlock_lock_abandon(l);  /* kept: is it still there after the failover? */
            atomic_fetch_add(&gr->granted, 1);
        } else {
            gr->failed++;
        }
        rh_sleep_ms(2);  /* the pace of an application's calls, not a synchronisation */
    }
    return NULL;
}

static void test_slow_promotion_keeps_the_client_off_the_old_master(void **state)
{
    rh_sentinels *g = *state;
    int old = first_master(g);
    struct granter *gr = calloc(1, sizeof *gr);
    gr->c = sentinel_client(g->uri);
    warm(gr->c);
    wait_subscribed(g, ALL_SENTINELS);
    redisContext *sub = rh_auth_connect(g->sentinel_port[0], SENT_USER, SENT_PASS);
    assert_non_null(sub);
    struct timeval tv = { 20, 0 };
    redisSetTimeout(sub, tv);
    redisReply *r = redisCommand(sub, "SUBSCRIBE +failover-state-wait-promotion +promoted-slave");
    assert_non_null(r);
    freeReplyObject(r);
    void *p = NULL;
    assert_int_equal(redisGetReply(sub, &p), REDIS_OK);
    freeReplyObject(p);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, granter_main, gr), 0);
    assert_true(RH_WAIT_UNTIL(atomic_load(&gr->granted) >= 1, 5000));  /* it is granting */
    /* the replica to be promoted (data[1], by priority) is busy for 1.5 s */
    redisContext *d = rh_auth_connect(g->data_port[1], NULL, DATA_PASS);
    assert_non_null(d);
    r = redisCommand(d, "CLIENT PAUSE 1500 ALL");
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(d);
    redisContext *sc = rh_auth_connect(g->sentinel_port[0], SENT_USER, SENT_PASS);
    r = redisCommand(sc, "SENTINEL FAILOVER mymaster");
    assert_true(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(sc);
    long long t_cmd = rh_now_ms(), t_wp = 0, t_ps = 0;
    while (!t_ps) {
        p = NULL;
        if (redisGetReply(sub, &p) != REDIS_OK) break;
        redisReply *m = p;
        if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 && strcmp(m->element[0]->str, "message") == 0) {
            printf("faults: %lld ms: %s %s\n", rh_now_ms() - t_cmd, m->element[1]->str, m->element[2]->str);
            if (strcmp(m->element[1]->str, "+failover-state-wait-promotion") == 0 && !t_wp) t_wp = rh_now_ms();
            if (strcmp(m->element[1]->str, "+promoted-slave") == 0) t_ps = rh_now_ms();
        }
        freeReplyObject(m);
    }
    redisFree(sub);
    /* a second more of grants after the promotion (what is measured), then
     * until the old master is converted */
    rh_sleep_ms(1000);
    atomic_store(&gr->stop, 1);
    pthread_join(th, NULL);
    int converted = RH_WAIT_UNTIL(role_is(old, "slave"), 30000);
    int now_master = g->data_port[1];
    int late = 0, lost = 0, lost_late = 0;
    long long last_late = -1, last_lost = -1;
    for (int k = 0; k < gr->n; k++) {
        const struct grant_rec *x = &gr->g[k];
        char v[128] = "";
        int there = data_get(now_master, x->key, v, sizeof v) == 1 && strcmp(v, x->token) == 0;
        if (!there) {
            lost++;
            if (x->t >= t_wp + GRACE_BOUND_MS) {
                lost_late++;
                if (x->t - t_wp > last_lost) last_lost = x->t - t_wp;
            }
        }
        if (t_wp && x->t >= t_wp + GRACE_BOUND_MS && x->t < t_ps) {
            late++;
            if (x->t - t_wp > last_late) last_late = x->t - t_wp;
        }
    }
    printf("faults: wait-promotion %lld ms after the command, +promoted-slave %lld ms after it; "
           "grants started between wait-promotion + %d ms and +promoted-slave: %d (last %lld ms "
           "after wait-promotion); grants lost (not on the new master after the failover): %d, "
           "%d of them started later than wait-promotion + %d ms (last %lld ms after); "
           "failed calls %d; old master converted %d\n",
           t_wp - t_cmd, t_ps - t_wp, GRACE_BOUND_MS, late, last_late, lost, lost_late,
           GRACE_BOUND_MS, last_lost, gr->failed, converted);
    distlock_client_free(gr->c);
    free(gr);
    assert_true(t_wp > 0 && t_ps > 0);
    /* the rule: what the old master grants after the sentinels named the
     * new one (beyond the grace) is none; a fortiori none is lost */
    assert_int_equal(lost_late, 0);
}

/* The setup of the resubscription tests: the replicas refuse SLAVEOF, so
 * a failover stays under way until the leader gives up (set_timeout, a
 * SENTINEL SET of its failover-timeout); a looper client whose sentinel
 * connections go through *fp, its connection made, subscribed to every
 * sentinel. */
static struct looper *looper_through_proxy_while_promotion_refused(rh_sentinels *g,
                                                                   const char *set_timeout,
                                                                   fp_proxy **fp)
{
    replicas_refuse_promotion(g);
    assert_true(command_ok(g->sentinel_port[0], SENT_USER, SENT_PASS, set_timeout));
    *fp = fp_start(g->sentinel_port, 3);
    assert_non_null(*fp);
    char uri[512];
    proxied_group_uri(uri, sizeof uri, *fp);
    struct looper *lp = calloc(1, sizeof *lp);
    assert_non_null(lp);
    lp->c = sentinel_client(uri);
    warm(lp->c);
    wait_subscribed(g, ALL_SENTINELS);
    return lp;
}

/* The client's subscription to the failover's leader is being replaced
 * (silent: its PING unanswered) when the leader announces
 * +failover-state-wait-promotion: the announcement is published while the
 * client has no subscription there and is never heard, and only the leader
 * says it (the others learn of the failover on its hello after the
 * promotion). The replicas refuse SLAVEOF here, so the failover stays
 * under way until the leader gives up (failover-timeout); meanwhile only
 * the old master grants. Once the client is subscribed to the leader
 * again, the rule holds as if it had heard it: no grant (the old master's
 * are the only ones) until the abort. */
static void test_promotion_announced_while_resubscribing_keeps_the_client_off_the_old_master(void **state)
{
    rh_sentinels *g = *state;
    int old = first_master(g);
    /* the leader's patience: long enough for the client to subscribe again
     * (within 2 s of the release below) well before the abort */
    fp_proxy *fp = NULL;
    struct looper *lp = looper_through_proxy_while_promotion_refused(
        g, "SENTINEL SET mymaster failover-timeout 8000", &fp);
    long long before[3];
    newest_subscriptions(g, before);
    int sub0 = fp_last_conn(fp, 0);
    assert_true(sub0 > 0);
    redisContext *sub = leader_announcements(g);
    /* Everything between the client and the leader stops: its
     * subscription goes silent (and is replaced), and so do the new ones. */
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold 0"), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, loop_main, lp), 0);
    assert_true(command_ok(g->sentinel_port[0], SENT_USER, SENT_PASS, "SENTINEL FAILOVER mymaster"));
    long long t_wp = next_announcement(sub, "+failover-state-wait-promotion"), t_resub = 0;
    /* The client gave the silent subscription up (its next one, a new
     * connection, comes only after it closed that one), so the announcement
     * held on it is never delivered; then the leader is reachable again and
     * the client subscribes anew, after the announcement. */
    assert_true(RH_WAIT_UNTIL(fp_last_conn(fp, 0) > sub0, 5000));
    assert_int_equal(fp_cmd(fp, NULL, 0, "unhold 0"), 0);
    if (RH_WAIT_UNTIL(subscribed(g, 0x1u, before, 1), SUBSCRIBE_WAIT_MS))
        t_resub = rh_now_ms();
    long long t_abort = next_announcement(sub, "-failover-abort-slave-timeout");
    redisFree(sub);
    /* until the first grant after the abort (at most 3 s): the client comes back */
    (void)RH_WAIT_UNTIL(t_abort && looper_granted_since(lp, 0, t_abort), 3000);
    atomic_store(&lp->stop, 1);
    pthread_join(th, NULL);
    int late = 0, failed = 0, ok_after = 0;
    long long first_late = -1;
    for (int k = 0; k < lp->n; k++) {
        if (lp->t[k] >= t_abort) {
            ok_after += lp->rc[k] == DISTLOCK_OK;
        } else if (t_resub && lp->t[k] >= t_resub + GRACE_BOUND_MS) {
            if (lp->rc[k] == DISTLOCK_OK) {
                if (first_late < 0) first_late = lp->t[k] - t_resub;
                late++;
            } else {
                failed++;
            }
        }
    }
    printf("faults: wait-promotion heard by the test; the client subscribed to the leader again %lld ms "
           "after it, the leader aborted %lld ms after it; between the resubscription + %d ms and the "
           "abort: %d granted by the old master %d (first %lld ms after the resubscription), %d failed "
           "(first failure %s); after the abort: %d granted\n",
           t_resub ? t_resub - t_wp : -1, t_abort - t_wp, GRACE_BOUND_MS, late, old, first_late,
           failed, lp->first_err[0] ? lp->first_err : "none", ok_after);
    distlock_client_free(lp->c);
    free(lp);
    fp_stop(fp);
    assert_true(t_wp > 0 && t_resub > 0 && t_abort > t_resub + GRACE_BOUND_MS + 1000);
    assert_int_equal(late, 0);
    assert_true(ok_after > 0);
}

/* The other way round: the client heard +failover-state-wait-promotion
 * and keeps off the old master, and its subscription to the leader is
 * being replaced when the leader gives the failover up
 * (-failover-abort-slave-timeout, published only by the leader). Once
 * subscribed to the leader again, the client must come back to the old
 * master, which the sentinels still name, rather than fail every call
 * until the 180 s bound of a promotion nobody announces. */
static void test_abort_announced_while_resubscribing_brings_the_client_back(void **state)
{
    rh_sentinels *g = *state;
    int old = first_master(g);
    fp_proxy *fp = NULL;
    struct looper *lp = looper_through_proxy_while_promotion_refused(
        g, "SENTINEL SET mymaster failover-timeout 4000", &fp);
    redisContext *sub = leader_announcements(g);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, loop_main, lp), 0);
    assert_true(command_ok(g->sentinel_port[0], SENT_USER, SENT_PASS, "SENTINEL FAILOVER mymaster"));
    long long t_wp = next_announcement(sub, "+failover-state-wait-promotion");
    /* the client heard it: its calls fail ("failover in progress") */
    assert_true(RH_WAIT_UNTIL(looper_failed_since(lp, 0), 5000));
    long long before[3];
    newest_subscriptions(g, before);
    int sub0 = fp_last_conn(fp, 0);
    assert_true(sub0 > 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold 0"), 0);
    long long t_abort = next_announcement(sub, "-failover-abort-slave-timeout");
    redisFree(sub);
    /* the abort is held on the silenced subscription, given up unheard */
    assert_true(RH_WAIT_UNTIL(fp_last_conn(fp, 0) > sub0, 5000));
    assert_int_equal(fp_cmd(fp, NULL, 0, "unhold 0"), 0);
    long long t_resub = 0;
    if (RH_WAIT_UNTIL(subscribed(g, 0x1u, before, 1), SUBSCRIBE_WAIT_MS))
        t_resub = rh_now_ms();
    int n0 = atomic_load(&lp->n);
    (void)RH_WAIT_UNTIL(t_resub && looper_granted_since(lp, n0, t_resub), 3000);
    atomic_store(&lp->stop, 1);
    pthread_join(th, NULL);
    long long first_ok = -1;
    int failed = 0;
    for (int k = n0; k < lp->n; k++) {
        if (lp->rc[k] == DISTLOCK_OK) {
            if (first_ok < 0) first_ok = lp->t[k] - t_resub;
        } else if (first_ok < 0) {
            failed++;
        }
    }
    int names = sentinel_names(g, 0);
    printf("faults: aborted %lld ms after wait-promotion (held from the client); the client subscribed "
           "to the leader again %lld ms after the abort; then %d calls failed before its first grant, "
           "%lld ms after the resubscription (-1: none in 3 s); the calls' last failure %s; the "
           "sentinels name %d (old %d)\n", t_abort - t_wp, t_resub ? t_resub - t_abort : -1, failed,
           first_ok, lp->last_err[0] ? lp->last_err : "none", names, old);
    distlock_client_free(lp->c);
    free(lp);
    fp_stop(fp);
    assert_true(t_wp > 0 && t_abort > 0 && t_resub > 0);
    assert_int_equal(names, old);
    assert_true(first_ok >= 0 && first_ok <= 1000);
}

/* fork() with the listening thread running: the child uses the client and
 * frees it; it writes nothing on the parent's subscriptions, and the parent
 * still follows the next failover. (The child keeps the master it knew: it
 * makes no lookup, so its listening thread does not start -- the sentinels'
 * CLIENT LIST shows no subscription of its own.) */
static void test_forked_child_leaves_the_parents_subscriptions_alone(void **state)
{
    rh_sentinels *g = *state;
    int old = first_master(g);
    fp_proxy *fp = fp_start(g->sentinel_port, 3);
    assert_non_null(fp);
    char uri[512];
    proxied_group_uri(uri, sizeof uri, fp);
    distlock_client *c = sentinel_client(uri);
    warm(c);
    wait_subscribed(g, ALL_SENTINELS);
    fp_conn before[32], after[32];
    int nb = fp_conns(fp, -1, before, 32);
    long long t_before = rh_now_ms();
    pid_t pid = fork();
    if (pid == 0) {
        distlock_lock *l = NULL;
        int rc = distlock_acquire(c, "s-child", 10000, 0, 0, &l);
        if (rc == DISTLOCK_OK) {
            distlock_release(l);
            distlock_lock_free(l);
        }
        distlock_client_free(c);
        _exit(rc == DISTLOCK_OK ? 0 : 1);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    int na = fp_conns(fp, -1, after, 32), touched = 0, kept = 0;
    /* The parent itself PINGs each subscription once a second
     * ("*1\r\n$4\r\nPING\r\n", 14 bytes): those, and only those, may
     * have been written meanwhile. */
    long long pings_max = (rh_now_ms() - t_before) / 1000 + 1;
    for (int k = 0; k < nb; k++) {
        if (strcmp(before[k].state, "open") != 0) continue;
        for (int j = 0; j < na; j++)
            if (after[j].id == before[k].id) {
                kept++;
                long long d = after[j].up_bytes - before[k].up_bytes;
                if (d % 14 != 0 || d / 14 > pings_max) touched++;
            }
    }
    long long named = 0;
    int now_master = failover_via(g, 0, old, &named);
    long long started;
    int rc;
    int on_old = now_master > 0 ? probe_on_old(c, "s-forked", old, now_master, named, &rc, &started) : -1;
    printf("faults: child exit status %d; parent's subscription connections still open %d, "
           "written to by someone (beyond the parent's PINGs) since the fork %d; parent's probe after the failover on the "
           "old master %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1, kept, touched, on_old);
    distlock_client_free(c);
    fp_stop(fp);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(kept, 3);
    assert_int_equal(touched, 0);
    assert_int_equal(on_old, 0);
}

/* Sentinel with announce-hostnames yes names servers by host name (in
 * +switch-master, +promoted-slave, GET-MASTER-ADDR-BY-NAME); Kubernetes
 * FQDNs are often longer than 63 characters
 * (redis-node-1.redis-headless.my-namespace.svc.cluster.local and up). A
 * +switch-master naming the group's replica data[1] by such a name (it
 * resolves to 127.0.0.1, slowdns) is delivered on every subscription (the
 * proxy's inject, as the sentinels would send it): the client must go to
 * that server at its next call (found a replica there by ROLE, it then
 * asks the sentinels again: no harm, but the connection shows it moved). */
static long long connections_received(int port)
{
    redisContext *c = rh_auth_connect(port, NULL, DATA_PASS);
    if (!c) return -1;
    redisReply *r = redisCommand(c, "INFO stats");
    redisFree(c);
    long long n = -1;
    const char *f = r && r->type == 14 /* VERB */ ? strstr(r->str, "total_connections_received:")
                    : r && r->type == REDIS_REPLY_STRING ? strstr(r->str, "total_connections_received:")
                    : NULL;
    if (f) n = atoll(f + strlen("total_connections_received:"));
    if (r) freeReplyObject(r);
    return n;
}

static void announcement(rh_sentinels *g, const char *group, const char *name, int expect_moved)
{
    int old = first_master(g);
    int target = g->data_port[1];
    char rule[256];
    snprintf(rule, sizeof rule, "%s=0=127.0.0.1", name);
    assert_int_equal(slowdns_set(rule), 0);
    fp_proxy *fp = fp_start(g->sentinel_port, 3);
    assert_non_null(fp);
    char uri[512];
    proxied_group_uri(uri, sizeof uri, fp);
    distlock_client *c = sentinel_client(uri);
    warm(c);
    wait_subscribed(g, ALL_SENTINELS);
    fp_conn conns[32];
    int n = fp_conns(fp, -1, conns, 32), ns = 0;
    char text[512], msg[1024], hex[2100];
    snprintf(text, sizeof text, "%s 127.0.0.1 %d %s %d", group, old, name, target);
    snprintf(msg, sizeof msg, "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$%zu\r\n%s\r\n",
             strlen(text), text);
    fp_hex(msg, hex, sizeof hex);
    long long before = connections_received(target);
    for (int k = 0; k < n; k++)
        if (strcmp(conns[k].state, "open") == 0 &&
            fp_cmd(fp, NULL, 0, "inject %d:%d down %s", conns[k].l, conns[k].id, hex) == 0)
            ns++;
    /* The thread reads the injected announcement: nothing public shows when
     * it has (and for another group nothing is to happen at all), so this
     * one stays a pause; see the report on waits. */
    rh_sleep_ms(300);
    distlock_lock *l = NULL;
    int rc = distlock_acquire(c, "s-hostname", 10000, 0, 0, &l);
    char err[512];
    snprintf(err, sizeof err, "%s", distlock_last_error());
    if (l) distlock_lock_free(l);
    long long after = connections_received(target);
    printf("faults: +switch-master of %s naming %d as '%s' (%zu characters) on %d subscription(s); "
           "the client's next acquire: status %d '%s'; connections to %d during it: %lld\n",
           group, target, name, strlen(name), ns, rc, err, target, after - before - 1);
    distlock_client_free(c);
    fp_stop(fp);
    slowdns_set(NULL);
    assert_int_equal(ns, 3);
    /* (one of the connections counted is ours, INFO) */
    if (expect_moved)
        assert_true(after - before - 1 >= 1);
    else
        assert_true(after - before - 1 == 0);
}

/* the mechanism, with a short name: the client moves */
static void test_short_hostname_announcement_moves_the_client(void **state)
{
    announcement(*state, "mymaster", "redis-node-1.test", 1);
}

/* the same sentinels monitoring another group: its switch moves nobody here */
static void test_announcement_for_another_group_is_ignored(void **state)
{
    announcement(*state, "mymaster-b", "127.0.0.1", 0);
}

static void test_long_hostname_announcement_moves_the_client(void **state)
{
    announcement(*state, "mymaster", "redis-node-1.redis-sentinel-headless.payments-prod.svc.cluster.local", 1);
}

/* One sentinel of three is partitioned from the client (its host gone:
 * connections accepted by the proxy, nothing ever answers). The thread
 * subscribes one sentinel at a time and waits up to the connect timeout
 * (2 s here, an ordinary setting) for the hung one each time it retries it
 * (1 s, 2 s, 4 s ... after): meanwhile the two healthy sentinels'
 * announcements are not read. A failover then (its leader healthy) is
 * announced while the thread waits. */
static void test_hung_sentinel_does_not_mute_the_others(void **state)
{
    rh_sentinels *g = *state;
    int old = first_master(g);
    fp_proxy *fp = fp_start(g->sentinel_port, 3);
    assert_non_null(fp);
    char uri[512];
    proxied_group_uri(uri, sizeof uri, fp);
    distlock_client *c = new_client(uri);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 2000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, COMMAND_MS), DISTLOCK_OK);
    use_master(c);  /* its own timeouts, already seconds */
    wait_subscribed(g, ALL_SENTINELS);
    char reply[128] = "";
    assert_int_equal(fp_cmd(fp, reply, sizeof reply, "accepted 2"), 0);
    int acc = atoi(reply + 3);
    /* sentinel 2's host goes away: its subscription breaks, new connections hang */
    assert_int_equal(fp_cmd(fp, NULL, 0, "partition 2 on"), 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "reset 2"), 0);
    /* the thread's next attempt at it: it now waits up to 2 s */
    assert_int_equal(fp_cmd(fp, NULL, 0, "wait-conns 2 %d 5000", acc + 1), 0);
    long long t_open = rh_now_ms();
    long long named = 0;
    int on_old = probe_after_naming(g, c, "s-hung", old, &named);
    printf("faults: sentinel 2 hung; the thread's attempt at it began %lld ms before the "
           "naming; probe on the old master %d\n", named - t_open, on_old);
    distlock_client_free(c);
    fp_stop(fp);
    assert_false(on_old);
}

/* distlock_client_free while the thread waits on a hung sentinel (connect
 * timeout 5 s): it stops on its wake pipe at once. And 40 clients on one
 * group (120 subscriptions, 40 threads) all working, then freed. */
static void test_free_while_waiting_on_a_hung_sentinel_and_many_clients(void **state)
{
    rh_sentinels *g = *state;
    fp_proxy *fp = fp_start(g->sentinel_port, 3);
    assert_non_null(fp);
    char hosts[256], uri[512];
    snprintf(hosts, sizeof hosts, "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", g->sentinel_port[0],
             g->sentinel_port[1], fp_port(fp, 2));
    group_uri(uri, sizeof uri, hosts);
    assert_int_equal(fp_cmd(fp, NULL, 0, "partition 2 on"), 0);
    distlock_client *c = new_client(uri);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 5000), DISTLOCK_OK);
    use_master(c);  /* its own timeouts, already seconds */
    /* the thread's connection to sentinel 2 is open: it waits on it */
    assert_int_equal(fp_cmd(fp, NULL, 0, "wait-conns 2 1 5000"), 0);
    long long f0 = rh_now_ms();
    distlock_client_free(c);
    long long took = rh_now_ms() - f0;
    fp_stop(fp);
    enum { NC = 40 };
    distlock_client *cs[NC];
    long long m0 = rh_now_ms();
    int ok = 0;
    for (int k = 0; k < NC; k++) {
        cs[k] = sentinel_client(g->uri);
        distlock_lock *l = NULL;
        if (distlock_acquire(cs[k], "s-many", 10000, 0, 0, &l) == DISTLOCK_OK) {
            ok++;
            distlock_release(l);
            distlock_lock_free(l);
        }
    }
    long long granted_at = rh_now_ms();
    /* all 40 threads subscribed to every sentinel (120 subscriptions) */
    int all_sub = RH_WAIT_UNTIL(subscribed(g, ALL_SENTINELS, NULL, NC), 20000);
    long long f1 = rh_now_ms();
    for (int k = 0; k < NC; k++) distlock_client_free(cs[k]);
    long long took_many = rh_now_ms() - f1;
    printf("faults: free while waiting on a hung sentinel: %lld ms; %d clients: %d granted in "
           "%lld ms, all subscribed %lld ms later (%d), freed in %lld ms\n", took, NC, ok,
           granted_at - m0, f1 - granted_at, all_sub, took_many);
    assert_true(took < 500);
    assert_int_equal(ok, NC);
    assert_true(all_sub);
    assert_true(took_many < 2000);
}

/* Sentinel k's view (SENTINEL REPLICAS, from its INFO polls) gives the
 * replica at port this replica-priority. */
static int sentinel_sees_priority(rh_sentinels *g, int k, int port, int priority)
{
    redisContext *c = rh_auth_connect(g->sentinel_port[k], SENT_USER, SENT_PASS);
    if (!c) return 0;
    redisReply *r = redisCommand(c, "SENTINEL REPLICAS mymaster");
    redisFree(c);
    int seen = 0;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements && !seen; i++) {
        const redisReply *e = r->element[i];
        int p = 0, prio = -1;
        for (size_t j = 0; e->type == REDIS_REPLY_ARRAY && j + 1 < e->elements; j += 2) {
            if (e->element[j]->type != REDIS_REPLY_STRING || e->element[j + 1]->type != REDIS_REPLY_STRING)
                continue;
            if (strcmp(e->element[j]->str, "port") == 0) p = atoi(e->element[j + 1]->str);
            if (strcmp(e->element[j]->str, "slave-priority") == 0) prio = atoi(e->element[j + 1]->str);
        }
        seen = p == port && prio == priority;
    }
    if (r) freeReplyObject(r);
    return seen;
}

/* A -> B -> A with one sentinel's announcements held back (its connection
 * to the client slow, TCP intact) and delivered late, after both failovers:
 * the stale +switch-master of the first failover (naming B, now a replica)
 * must not cost grants on B nor more than a passing error. */
static void test_stale_announcements_after_two_failovers(void **state)
{
    rh_sentinels *g = *state;
    int a = rh_sentinels_master(g);
    assert_int_equal(a, g->data_port[0]);
    fp_proxy *fp = fp_start(g->sentinel_port, 3);
    assert_non_null(fp);
    char uri[512];
    proxied_group_uri(uri, sizeof uri, fp);
    struct looper *lp = calloc(1, sizeof *lp);
    lp->c = sentinel_client(uri);
    /* Subscriptions are PINGed and replaced when silent for the command
     * timeout: a long one here, so the held subscription stays and its
     * stale announcements do arrive late (the case under test). */
    assert_rc(distlock_client_set(lp->c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 60000), DISTLOCK_OK);
    warm(lp->c);
    wait_subscribed(g, ALL_SENTINELS);
    int sub2 = fp_last_conn(fp, 2);
    assert_true(sub2 > 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold 2:%d down", sub2), 0);
    long long named = 0;
    int b = failover_via(g, 0, a, &named);
    assert_true(b > 0);
    assert_true(RH_WAIT_UNTIL(role_is(a, "slave"), 30000));
    {   /* A is the replica the next failover promotes */
        redisContext *d = rh_auth_connect(a, NULL, DATA_PASS);
        assert_non_null(d);
        redisReply *r = redisCommand(d, "CONFIG SET replica-priority 1");
        assert_true(r && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
        redisFree(d);
    }
    /* the leader (sentinel 0) has it from its INFO polls */
    assert_true(RH_WAIT_UNTIL(sentinel_sees_priority(g, 0, a, 1), 30000));
    int back = failover_via(g, 0, b, &named);
    assert_int_equal(back, a);
    assert_true(RH_WAIT_UNTIL(role_is(b, "slave"), 30000));
    char held[256] = "";
    fp_cmd(fp, held, sizeof held, "conns 2");
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, loop_main, lp), 0);
    /* the client works on A again before the stale announcements arrive */
    assert_true(RH_WAIT_UNTIL(looper_granted_since(lp, 0, 0), 10000));
    int n0 = atomic_load(&lp->n);
    long long t_unhold = rh_now_ms();
    assert_int_equal(fp_cmd(fp, NULL, 0, "unhold 2:%d down", sub2), 0);
    rh_sleep_ms(2000);  /* the calls after the late delivery: what is measured */
    atomic_store(&lp->stop, 1);
    pthread_join(th, NULL);
    int fails_after = 0, ok_after = 0;
    int n_end = atomic_load(&lp->n);
    for (int k = n0; k < n_end; k++)
        if (lp->t[k] >= t_unhold) {
            if (lp->rc[k] == DISTLOCK_OK) ok_after++; else fails_after++;
        }
    printf("faults: A=%d -> B=%d -> A; sentinel 2's subscription held meanwhile (%s); after its "
           "late delivery: %d granted, %d failed (last failure %s)\n", a, b, held, ok_after,
           fails_after, lp->last_err[0] ? lp->last_err : "none");
    distlock_client_free(lp->c);
    free(lp);
    fp_stop(fp);
    assert_true(ok_after > 0);
    assert_true(fails_after <= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fresh_client_does_not_take_the_old_master_from_a_lagging_sentinel,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_unresolvable_sentinel_name_does_not_mute_the_others,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_client_free_is_bounded_while_a_sentinel_name_resolves,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_sentinels_heard_again_soon_after_an_outage,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_silent_subscriptions_are_replaced,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_unresolvable_first_sentinel_costs_only_its_share,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_aborted_failover_after_wait_promotion_comes_back,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_slow_promotion_keeps_the_client_off_the_old_master,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_promotion_announced_while_resubscribing_keeps_the_client_off_the_old_master,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_abort_announced_while_resubscribing_brings_the_client_back,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_forked_child_leaves_the_parents_subscriptions_alone,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_short_hostname_announcement_moves_the_client,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_long_hostname_announcement_moves_the_client,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_announcement_for_another_group_is_ignored,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_hung_sentinel_does_not_mute_the_others,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_free_while_waiting_on_a_hung_sentinel_and_many_clients,
                                        setup_slow_resync, teardown),
        cmocka_unit_test_setup_teardown(test_stale_announcements_after_two_failovers,
                                        setup_slow_resync, teardown),
    };
    /* FAULTS_ONLY=substring: run the matching tests only */
    const char *only = getenv("FAULTS_ONLY");
    struct CMUnitTest pick[sizeof tests / sizeof tests[0]];
    size_t n = 0;
    for (size_t k = 0; k < sizeof tests / sizeof tests[0]; k++)
        if (!only || strstr(tests[k].name, only)) pick[n++] = tests[k];
    return _cmocka_run_group_tests("test_sentinel_faults", pick, n, NULL, NULL);
}
