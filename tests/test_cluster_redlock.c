/* test_cluster_redlock.c -- a Redlock whose nodes are Redis Clusters:
 * quorum over the N nodes, each cluster one vote.
 *
 * Three small clusters of 3 masters and no replicas each
 * (rh_rcl_start_n(3, 0)): 9 redis-server processes, which a 2-core machine
 * can carry; what is tested is the client's quorum over clusters, not the
 * clusters' own failover (test_cluster.c does that).
 *
 * - lock / second owner refused / extend / release over the three clusters,
 *   on keys of many slots: the key is on the slot's master of every cluster;
 * - a mixed list redis-cluster://,redis-cluster://,redis://, and
 *   redis-cluster://,redis://,redis-sentinel:// (the group's master hung:
 *   the other two decide);
 * - auto-renewal over cluster,cluster,redis: each pass renews every lock on
 *   all three nodes with one script call per master of each cluster;
 * - fencing over clusters: the fence only increases, and each cluster's
 *   counter sits on the key's slot master;
 * - one whole cluster hung (its 3 masters SIGSTOPped) or killed: still
 *   granted on the other two, within about one timeout (a fenced acquire
 *   waits that timeout); extend and release work; a resumed cluster keeps
 *   nothing of the released locks;
 * - two clusters down: not acquired, and no key left on any cluster
 *   (also not on the hung one once it resumes). */
#include "test_common.h"
#include "cluster_harness.h"
#include "sentinel_harness.h"

#include <signal.h>
#include <time.h>

#define NCL 3

#define MASTERS 3

static rh_rcl *cl[NCL];

static int group_setup(void **state)
{
    (void)state;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int k = 0; k < NCL; k++)
        if ((cl[k] = rh_rcl_start_n(MASTERS, 0)) == NULL)
            return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int k = 0; k < NCL; k++)
        rh_rcl_stop(cl[k]);
    return 0;
}

static distlock_client *client(const char *uris, long timeout_ms)
{
    distlock_client *c = new_client(uris);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, timeout_ms), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, timeout_ms), DISTLOCK_OK);
    return c;
}

static const char *clusters_uri(char *buf, size_t size)
{
    snprintf(buf, size, "%s,%s,%s", cl[0]->uri, cl[1]->uri, cl[2]->uri);
    return buf;
}

static int usable(rh_rcl *c, int i)
{
    return c->rc->node[i].pid > 0 && !c->rc->node[i].stopped;
}

/* Does cluster k hold key (with token; NULL: anything) on the master that
 * owns its slot? 1 yes, 0 no, -1 the cluster is down (no usable server). */
static int cluster_holds(int k, const char *key, const char *token)
{
    rh_rcl *c = cl[k];
    int ask = -1;
    for (int i = 0; i < c->rc->n && ask < 0; i++)
        if (usable(c, i)) ask = i;
    if (ask < 0) return -1;
    int m = rh_rcl_owner(c, ask, rh_rcl_keyslot(c, key));
    if (m < 0 || !usable(c, m)) return -1;
    char buf[128];
    int got = rh_get(c->rc, m, 0, key, buf, sizeof buf);
    if (got != 1) return 0;
    return token == NULL || strcmp(buf, token) == 0;
}

/* The clusters (of mask) that hold key; waits up to 3 s for `want` since a
 * call returns on a quorum while the last cluster's reply may be on its way. */
static void assert_clusters_hold(unsigned mask, const char *key, const char *token, int want)
{
    int got = -1;
    int ok = RH_WAIT_UNTIL(({
        got = 0;
        for (int k = 0; k < NCL; k++)
            if (mask & (1u << k)) got += cluster_holds(k, key, token) == 1;
        got == want; }), 3000);
    if (!ok) {
        print_error("%s held (%s) on %d cluster(s) of mask %x, expected %d\n", key,
                    token ? token : "anything", got, mask, want);
        fail();
    }
}

/* Acquire until the clusters of mask (and `plain`'s server 0, if given) all
 * took the write. A round ends once a quorum answered: a call still waiting
 * for a new connection (a cluster's master this client has not talked to
 * yet) gets a short grace, then is not sent (core/src/round.c), so a fresh
 * client's first lock may be on only a quorum of the clusters. Returns the
 * lock, held on all of them. */
static distlock_lock *lock_everywhere(distlock_client *c, const char *key, unsigned flags,
                                      unsigned mask, rh_cluster *plain)
{
    int want = 0;
    for (int k = 0; k < NCL; k++) want += (mask >> k) & 1u;
    for (int tries = 0; tries < 50; tries++) {
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(c, key, 30000, 0, flags, &l), DISTLOCK_OK);
        const char *tok = distlock_lock_token(l);
        char buf[128];
        int all = RH_WAIT_UNTIL(({
            int got = 0;
            for (int k = 0; k < NCL; k++)
                if (mask & (1u << k)) got += cluster_holds(k, key, tok) == 1;
            got == want && (!plain || (rh_get(plain, 0, 0, key, buf, sizeof buf) == 1 &&
                                       strcmp(buf, tok) == 0)); }), 1000);
        if (all)
            return l;
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    fail_msg("'%s' never on every node", key);
    return NULL;
}

/* pttl of key on cluster k's slot master */
static long long cluster_pttl(int k, const char *key)
{
    rh_rcl *c = cl[k];
    int m = rh_rcl_owner(c, 0, rh_rcl_keyslot(c, key));
    return m < 0 ? -3 : rh_pttl(c->rc, m, 0, key);
}

static void masters_signal(int k, int (*fn)(rh_cluster *, int))
{
    for (int i = 0; i < cl[k]->rc->n; i++)
        if (cl[k]->rc->node[i].pid > 0) assert_int_equal(fn(cl[k]->rc, i), 0);
}

/* ------------------------------------------------------------ all up */

static void test_three_clusters(void **state)
{
    (void)state;
    char uri[2048];
    distlock_client *c = client(clusters_uri(uri, sizeof uri), 5000 * slow_factor());
    distlock_client *c2 = client(uri, 5000 * slow_factor());
    assert_int_equal(distlock_client_node_count(c), NCL);
    char key[64];
    for (int slot = 11; slot < 16384; slot += 1500) {
        rh_rcl_key_in_slot(cl[0], "rlc", slot, key, sizeof key);
        distlock_lock *l = lock_everywhere(c, key, 0, 7, NULL), *l2 = NULL;
        const char *tok = distlock_lock_token(l);
        long v = distlock_lock_validity_ms(l);
        assert_true(v > 0 && v <= 30000 - default_drift(30000));
        /* another owner is refused: every cluster says no */
        assert_rc(distlock_acquire(c2, key, 30000, 0, 0, &l2), DISTLOCK_NOTACQUIRED);
        assert_null(l2);
        assert_clusters_hold(7, key, tok, NCL);
        assert_rc(distlock_extend(l, 60000), DISTLOCK_OK);
        assert_true(RH_WAIT_UNTIL(cluster_pttl(0, key) > 30000 && cluster_pttl(1, key) > 30000 &&
                                  cluster_pttl(2, key) > 30000, 3000));
        assert_rc(distlock_release(l), DISTLOCK_OK);
        assert_clusters_hold(7, key, NULL, 0);
        distlock_lock_free(l);
        /* free for the next owner at once */
        l2 = lock_everywhere(c2, key, 0, 7, NULL);
        assert_rc(distlock_release(l2), DISTLOCK_OK);
        assert_clusters_hold(7, key, NULL, 0);
        distlock_lock_free(l2);
    }
    distlock_client_free(c);
    distlock_client_free(c2);
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* n acquire/release pairs on one key; prints the acquire's median and p99
 * (microseconds) and the pairs/s. Every pair must succeed. */
static void measure(const char *what, const char *uris, int n)
{
    distlock_client *c = client(uris, 5000 * slow_factor());
    long long *us = calloc((size_t)n, sizeof *us);
    assert_non_null(us);
    struct timespec a, b, t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
        distlock_lock *l = NULL;
        clock_gettime(CLOCK_MONOTONIC, &a);
        assert_rc(distlock_acquire(c, "lat{1}", 30000, 0, 0, &l), DISTLOCK_OK);
        clock_gettime(CLOCK_MONOTONIC, &b);
        us[i] = (b.tv_sec - a.tv_sec) * 1000000LL + (b.tv_nsec - a.tv_nsec) / 1000;
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    qsort(us, (size_t)n, sizeof *us, cmp_ll);
    printf("%-28s %d pairs: acquire median %lld us, p99 %lld us; %.0f pairs/s\n", what, n,
           us[n / 2], us[n * 99 / 100], n / secs);
    free(us);
    distlock_client_free(c);
}

/* The cost of clusters as Redlock nodes: the same pairs over 3 clusters and
 * over 3 plain masters (figures only; the pairs must all succeed). */
static void test_latency(void **state)
{
    (void)state;
    int n = getenv("DISTLOCK_TEST_SLOW") ? 100 : 500;
    rh_cluster *plain = rh_start(3);
    assert_non_null(plain);
    char uri[2048];
    for (int round = 0; round < 2; round++) {
        measure("redlock over 3 clusters", clusters_uri(uri, sizeof uri), n);
        measure("redlock over 3 plain masters", rh_uris(plain), n);
    }
    rh_stop_all(plain);
}

/* Two clusters and a plain master. */
static void test_mixed(void **state)
{
    (void)state;
    rh_cluster *plain = rh_start(1);
    assert_non_null(plain);
    char uri[2048];
    snprintf(uri, sizeof uri, "%s,%s,redis://127.0.0.1:%d", cl[0]->uri, cl[1]->uri,
             plain->node[0].port);
    distlock_client *c = client(uri, 5000 * slow_factor());
    assert_int_equal(distlock_client_node_count(c), 3);
    distlock_lock *l = lock_everywhere(c, "mixed{7}", 0, 3, plain), *l2 = NULL;
    const char *tok = distlock_lock_token(l);
    assert_clusters_hold(3, "mixed{7}", tok, 2);
    assert_holding(plain, "mixed{7}", tok, 1);
    assert_rc(distlock_acquire(c, "mixed{7}", 30000, 0, 0, &l2), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_extend(l, 60000), DISTLOCK_OK);
    assert_true(RH_WAIT_UNTIL(rh_pttl(plain, 0, 0, "mixed{7}") > 30000, 3000));
    /* the plain master down: the two clusters are a quorum */
    assert_int_equal(rh_kill(plain, 0), 0);
    assert_rc(distlock_extend(l, 30000), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_clusters_hold(3, "mixed{7}", NULL, 0);
    distlock_lock_free(l);
    distlock_client_free(c);
    rh_stop_all(plain);
}

/* pexpiretime (absolute expiry, unix ms) of key on server i of rc */
static long long pexpiretime(const rh_cluster *rc, int i, const char *key)
{
    redisReply *r = rh_command(rc, i, 0, "PEXPIRETIME %s", key);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

/* Auto-renewal over two clusters and a plain master: every pass renews
 * each lock on all three nodes, with one script call per master of each
 * cluster (the rounds carry every node's calls in parallel), not one per
 * slot. */
static void test_renew_mixed(void **state)
{
    (void)state;
    enum { NK = 24, PASSES = 2 };
    long ttl = 3000;
    rh_cluster *plain = rh_start(1);
    assert_non_null(plain);
    char uri[2048];
    snprintf(uri, sizeof uri, "%s,%s,redis://127.0.0.1:%d", cl[0]->uri, cl[1]->uri,
             plain->node[0].port);
    distlock_client *c = client(uri, 5000 * slow_factor());
    char key[NK][64];
    distlock_lock *l[NK];
    for (int k = 0; k < NK; k++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "rnm%d", k);
        rh_rcl_key_in_slot(cl[0], prefix, 11 + k * (16384 / NK), key[k], sizeof key[k]);
        /* every master's connection made, so the locks below land everywhere */
        distlock_lock *w = lock_everywhere(c, key[k], 0, 3, plain);
        assert_rc(distlock_release(w), DISTLOCK_OK);
        distlock_lock_free(w);
    }
    for (int k = 0; k < NK; k++)
        assert_rc(distlock_acquire(c, key[k], ttl, 0, DISTLOCK_AUTO_RENEW, &l[k]), DISTLOCK_OK);
    /* after a first pass, where each lock is: the slot's master of each
     * cluster (m[k][0..1]) and the plain master */
    uint64_t r0 = wait_renewed(c, 0, NK, 1);
    int m[NK][2];
    long long e0[NK][3];
    for (int k = 0; k < NK; k++) {
        const char *tok = distlock_lock_token(l[k]);
        assert_clusters_hold(3, key[k], tok, 2);
        assert_holding(plain, key[k], tok, 1);
        for (int j = 0; j < 2; j++) {
            m[k][j] = rh_rcl_owner(cl[j], 0, rh_rcl_keyslot(cl[j], key[k]));
            assert_true(m[k][j] >= 0);
            e0[k][j] = pexpiretime(cl[j]->rc, m[k][j], key[k]);
        }
        e0[k][2] = pexpiretime(plain, 0, key[k]);
    }
    long calls0[2][MASTERS], pcalls0 = script_calls(plain, 0);
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < MASTERS; i++)
            calls0[j][i] = script_calls(cl[j]->rc, i);
    wait_renewed(c, r0, NK, PASSES);
    long calls[2][MASTERS], pcalls = script_calls(plain, 0) - pcalls0;
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < MASTERS; i++)
            calls[j][i] = script_calls(cl[j]->rc, i) - calls0[j][i];
    long passes = (long)((client_stat(c, "renewal_total") - r0 + NK - 1) / NK);
    printf("renewal over cluster,cluster,redis: %d locks on %d slots, %ld passes: script calls "
           "%ld/%ld/%ld and %ld/%ld/%ld per cluster master, %ld on the plain master\n", NK, NK,
           passes, calls[0][0], calls[0][1], calls[0][2], calls[1][0], calls[1][1], calls[1][2],
           pcalls);
    assert_true(pcalls >= passes - 1 && pcalls <= passes + 1);
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < MASTERS; i++)
            assert_true(calls[j][i] >= passes - 1 && calls[j][i] <= passes + 1);
    /* renewed on all three nodes */
    for (int k = 0; k < NK; k++) {
        assert_false(distlock_lock_lost(l[k]));
        for (int j = 0; j < 2; j++)
            assert_true(pexpiretime(cl[j]->rc, m[k][j], key[k]) > e0[k][j]);
        assert_true(pexpiretime(plain, 0, key[k]) > e0[k][2]);
    }
    for (int k = 0; k < NK; k++) {
        assert_rc(distlock_release(l[k]), DISTLOCK_OK);
        distlock_lock_free(l[k]);
    }
    distlock_client_free(c);
    rh_stop_all(plain);
}

/* A cluster, a plain master and a Sentinel group (a master and one sentinel,
 * no replica: 2 more processes): one vote each. With the group's master hung
 * the cluster and the plain master are a quorum. */
static int all_three_hold(rh_cluster *plain, rh_sentinels *g, int gm, const char *key,
                          const char *tok)
{
    char buf[128];
    return cluster_holds(0, key, tok) == 1 &&
           rh_get(plain, 0, 0, key, buf, sizeof buf) == 1 && strcmp(buf, tok) == 0 &&
           rh_sentinels_has(g, gm, key, tok) == 1;
}

static void test_mixed_sentinel(void **state)
{
    (void)state;
    rh_cluster *plain = rh_start(1);
    assert_non_null(plain);
    rh_sentinels_opts o = { .replicas = -1, .sentinels = 1, .quorum = 1 };
    rh_sentinels *g = rh_sentinels_start(&o);
    assert_non_null(g);
    int gm = rh_sentinels_master(g);
    assert_true(gm > 0);
    char uri[2048];
    snprintf(uri, sizeof uri, "%s,redis://127.0.0.1:%d,%s", cl[0]->uri, plain->node[0].port,
             g->uri);
    distlock_client *c = client(uri, 1000 * slow_factor());
    distlock_client *c2 = client(uri, 1000 * slow_factor());
    assert_int_equal(distlock_client_node_count(c), 3);
    /* until all three took it (see lock_everywhere) */
    distlock_lock *l = NULL, *l2 = NULL;
    int all = 0;
    for (int tries = 0; tries < 50 && !all; tries++) {
        assert_rc(distlock_acquire(c, "msent{3}", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
        all = RH_WAIT_UNTIL(all_three_hold(plain, g, gm, "msent{3}", distlock_lock_token(l)), 1000);
        if (!all) {
            assert_rc(distlock_release(l), DISTLOCK_OK);
            distlock_lock_free(l);
        }
    }
    assert_true(all);
    int64_t f1 = distlock_lock_fence(l);
    assert_true(f1 >= 1);
    assert_rc(distlock_acquire(c2, "msent{3}", 30000, 0, 0, &l2), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_extend(l, 60000), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_true(RH_WAIT_UNTIL(cluster_holds(0, "msent{3}", NULL) == 0 &&
                              rh_get(plain, 0, 0, "msent{3}", NULL, 0) == 0 &&
                              rh_sentinels_has(g, gm, "msent{3}", NULL) == 0, 3000));
    /* The group's master hung: the cluster and the plain master decide. A
     * plain acquire returns on their quorum and leaves its late write on the
     * hung master's connection; the release queues behind it, so once the
     * master resumes it keeps nothing. */
    assert_int_equal(rh_sentinels_signal(g, gm, 1), 0);
    assert_rc(distlock_acquire(c, "msent{3}", 30000, 0, 0, &l2), DISTLOCK_OK);
    assert_true(RH_WAIT_UNTIL(cluster_holds(0, "msent{3}", distlock_lock_token(l2)) == 1 &&
                              rh_get(plain, 0, 0, "msent{3}", NULL, 0) == 1, 3000));
    assert_rc(distlock_release(l2), DISTLOCK_OK);
    distlock_lock_free(l2);
    assert_int_equal(rh_sentinels_signal(g, gm, 0), 0);
    assert_true(RH_WAIT_UNTIL(rh_sentinels_has(g, gm, "msent{3}", NULL) == 0 &&
                              cluster_holds(0, "msent{3}", NULL) == 0 &&
                              rh_get(plain, 0, 0, "msent{3}", NULL, 0) == 0, 5000));
    /* The same fenced: the fence waits for every live node, so the hung
     * master times out, and a Sentinel node then forgets it and asks the
     * sentinels again on the next call. The release still goes out behind
     * the late write on the old connection (core/src/round.c start_node):
     * resumed, the master keeps nothing (before: the write stayed until its
     * TTL, 30 s). */
    int64_t v0 = -1;
    assert_int_equal(distlock_admin_fence(c, "msent{3}", 2, &v0), 1);
    char v1[32];
    snprintf(v1, sizeof v1, "%lld", (long long)v0 + 1);
    assert_int_equal(rh_sentinels_signal(g, gm, 1), 0);
    assert_rc(distlock_acquire(c, "msent{3}", 30000, 0, DISTLOCK_FENCING, &l2), DISTLOCK_OK);
    int64_t f2 = distlock_lock_fence(l2);
    assert_true(f2 > f1);
    assert_rc(distlock_release(l2), DISTLOCK_OK);
    distlock_lock_free(l2);
    assert_int_equal(rh_sentinels_signal(g, gm, 0), 0);
    /* the late fenced write ran there (its counter moved), then the release */
    assert_true(RH_WAIT_UNTIL(rh_sentinels_has(g, gm, "msent{3}:fence", v1) == 1, 5000));
    assert_int_equal(rh_sentinels_has(g, gm, "msent{3}", NULL), 0);
    assert_true(RH_WAIT_UNTIL(cluster_holds(0, "msent{3}", NULL) == 0 &&
                              rh_get(plain, 0, 0, "msent{3}", NULL, 0) == 0, 5000));
    /* The plain master hung: a fenced acquire (one timeout: the fence waits
     * for every live node), the fence above the last one; resumed, the
     * plain master's late write is followed by the release. */
    assert_int_equal(rh_pause(plain, 0), 0);
    long long t0 = rh_now_ms();
    assert_rc(distlock_acquire(c2, "msent{3}", 30000, 0, DISTLOCK_FENCING, &l2), DISTLOCK_OK);
    long long took = rh_now_ms() - t0;
    printf("cluster + plain (hung) + sentinel group: fenced acquire %lld ms (timeout %ld ms)\n",
           took, 1000 * slow_factor());
    assert_true(distlock_lock_fence(l2) > f2);
    assert_rc(distlock_release(l2), DISTLOCK_OK);
    distlock_lock_free(l2);
    assert_int_equal(rh_resume(plain, 0), 0);
    assert_true(RH_WAIT_UNTIL(rh_sentinels_has(g, gm, "msent{3}", NULL) == 0 &&
                              cluster_holds(0, "msent{3}", NULL) == 0 &&
                              rh_get(plain, 0, 0, "msent{3}", NULL, 0) == 0, 5000));
    distlock_client_free(c);
    distlock_client_free(c2);
    rh_sentinels_stop(g);
    rh_stop_all(plain);
}

/* ------------------------------------------------------------ fencing */

static void test_fencing(void **state)
{
    (void)state;
    char uri[2048];
    distlock_client *a = client(clusters_uri(uri, sizeof uri), 5000 * slow_factor());
    distlock_client *b = client(uri, 5000 * slow_factor());
    const char *keys[] = { "fence-plain", "order:{42}", "fx{a}" };
    for (size_t n = 0; n < sizeof keys / sizeof *keys; n++) {
        const char *key = keys[n];
        int64_t last = -1;
        for (int i = 0; i < 30; i++) {
            distlock_lock *l = NULL;
            assert_rc(distlock_acquire(i % 2 ? b : a, key, 30000, 0, DISTLOCK_FENCING, &l),
                      DISTLOCK_OK);
            int64_t f = distlock_lock_fence(l);
            if (f <= last) {
                print_error("%s: owner %d got fence %lld after %lld\n", key, i, (long long)f,
                            (long long)last);
                fail();
            }
            last = f;
            assert_rc(distlock_release(l), DISTLOCK_OK);
            distlock_lock_free(l);
        }
        /* each cluster's counter is on the key's slot master; none is above
         * the last fence granted, and a quorum (2) holds exactly it (the
         * fence is the highest counter among a quorum's answers) */
        char fkey[96];
        if (strchr(key, '{') && strchr(strchr(key, '{'), '}'))
            snprintf(fkey, sizeof fkey, "%s:fence", key);
        else
            snprintf(fkey, sizeof fkey, "{%s}:fence", key);
        int at_last = 0;
        for (int k = 0; k < NCL; k++) {
            assert_int_equal(rh_rcl_keyslot(cl[k], fkey), rh_rcl_keyslot(cl[k], key));
            int m = rh_rcl_owner(cl[k], 0, rh_rcl_keyslot(cl[k], key));
            assert_true(m >= 0);
            char buf[32];
            long long v = -1;
            int seen = RH_WAIT_UNTIL(rh_get(cl[k]->rc, m, 0, fkey, buf, sizeof buf) == 1 &&
                                     (v = strtoll(buf, NULL, 10)) == last, 1000);
            assert_true(v >= 1 && v <= last);
            int64_t counter = -1;
            assert_int_equal(distlock_admin_fence(a, key, k, &counter), 1);
            assert_true(counter == v);
            at_last += seen;
        }
        assert_true(at_last >= 2);
    }
    distlock_client_free(a);
    distlock_client_free(b);
}

/* ------------------------------------------------------------ clusters down */

/* Cluster 0's masters SIGSTOPped: granted on clusters 1 and 2 within about
 * one timeout; extend and release too. Resumed, cluster 0 gets the late SET
 * and, behind it, the release: it keeps nothing. */
static void test_one_hung(void **state)
{
    (void)state;
    const long timeout = 1000 * slow_factor();
    const long margin = 1500 * slow_factor();
    char uri[2048];
    distlock_client *c = client(clusters_uri(uri, sizeof uri), timeout);
    /* connected to every cluster first (the masters of the key's slot) */
    distlock_lock *l = lock_everywhere(c, "hung{1}", 0, 7, NULL);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    l = NULL;

    masters_signal(0, rh_pause);
    long long t0 = rh_now_ms();
    assert_rc(distlock_acquire(c, "hung{1}", 30000, 0, 0, &l), DISTLOCK_OK);
    long long t_acq = rh_now_ms() - t0;
    assert_clusters_hold(6, "hung{1}", distlock_lock_token(l), 2);
    long v = distlock_lock_validity_ms(l);
    assert_true(v > 0 && v <= 30000 - default_drift(30000));
    t0 = rh_now_ms();
    assert_rc(distlock_extend(l, 30000), DISTLOCK_OK);
    long long t_ext = rh_now_ms() - t0;
    t0 = rh_now_ms();
    assert_rc(distlock_release(l), DISTLOCK_OK);
    long long t_rel = rh_now_ms() - t0;
    printf("one cluster hung (timeout %ld ms): acquire %lld ms, extend %lld ms, release %lld ms\n",
           timeout, t_acq, t_ext, t_rel);
    if (t_acq > timeout + margin || t_ext > timeout + margin || t_rel > timeout + margin) {
        print_error("a call with one hung cluster took more than %ld ms\n", timeout + margin);
        fail();
    }
    assert_clusters_hold(6, "hung{1}", NULL, 0);
    distlock_lock_free(l);
    /* fenced: the fence waits for every live node, so one timeout */
    t0 = rh_now_ms();
    assert_rc(distlock_acquire(c, "hung{1}", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
    long long t_fen = rh_now_ms() - t0;
    printf("one cluster hung: fenced acquire %lld ms\n", t_fen);
    assert_true(distlock_lock_fence(l) >= 1);
    assert_true(t_fen <= timeout + margin);
    assert_clusters_hold(6, "hung{1}", distlock_lock_token(l), 2);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_clusters_hold(6, "hung{1}", NULL, 0);
    distlock_lock_free(l);

    masters_signal(0, rh_resume);
    assert_int_equal(rh_rcl_wait_ok(cl[0], 20000), 0);
    assert_clusters_hold(7, "hung{1}", NULL, 0);
    /* and the resumed cluster votes again */
    distlock_lock *l2 = NULL;
    int seen = 0;
    for (int tries = 0; tries < 50 && !seen; tries++) {
        assert_rc(distlock_acquire(c, "hung{1}", 30000, 0, 0, &l2), DISTLOCK_OK);
        seen = cluster_holds(0, "hung{1}", distlock_lock_token(l2)) == 1;
        assert_rc(distlock_release(l2), DISTLOCK_OK);
        distlock_lock_free(l2);
    }
    assert_true(seen);
    distlock_client_free(c);
}

/* Cluster 2 killed (every master SIGKILLed): refused connections cost
 * nothing, the lock works on clusters 0 and 1. Leaves cluster 2 dead. */
static void test_one_killed(void **state)
{
    (void)state;
    char uri[2048];
    distlock_client *c = client(clusters_uri(uri, sizeof uri), 5000 * slow_factor());
    masters_signal(2, rh_kill);
    distlock_lock *l = NULL, *l2 = NULL;
    long long t0 = rh_now_ms();
    assert_rc(distlock_acquire(c, "killed", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
    long long t_acq = rh_now_ms() - t0;
    int64_t f1 = distlock_lock_fence(l);
    assert_true(f1 >= 1);
    assert_clusters_hold(3, "killed", distlock_lock_token(l), 2);
    distlock_client *c2 = client(uri, 5000 * slow_factor());
    assert_rc(distlock_acquire(c2, "killed", 30000, 0, 0, &l2), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_extend(l, 30000), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_clusters_hold(3, "killed", NULL, 0);
    distlock_lock_free(l);
    /* the fence still increases with one cluster gone */
    assert_rc(distlock_acquire(c2, "killed", 30000, 0, DISTLOCK_FENCING, &l2), DISTLOCK_OK);
    assert_true(distlock_lock_fence(l2) > f1);
    assert_rc(distlock_release(l2), DISTLOCK_OK);
    distlock_lock_free(l2);
    printf("one cluster killed: acquire %lld ms\n", t_acq);
    distlock_client_free(c);
    distlock_client_free(c2);
}

/* Cluster 2 dead (test_one_killed) and cluster 1 hung: no quorum, in about
 * one timeout plus the undo round, and no key anywhere, also on cluster 1
 * once it resumes. */
static void test_two_down(void **state)
{
    (void)state;
    const long timeout = 1000 * slow_factor();
    const long margin = 1500 * slow_factor();
    char uri[2048];
    distlock_client *c = client(clusters_uri(uri, sizeof uri), timeout);
    assert_int_equal(cluster_holds(2, "two", NULL), -1);   /* still dead */
    /* connected to clusters 0 and 1 first */
    distlock_lock *l = lock_everywhere(c, "two", 0, 3, NULL);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    l = NULL;

    masters_signal(1, rh_pause);
    long long t0 = rh_now_ms();
    assert_not_acquired(distlock_acquire(c, "two", 30000, 0, 0, &l), &l);
    long long took = rh_now_ms() - t0;
    printf("two clusters down (one killed, one hung; timeout %ld ms): failed acquire %lld ms\n",
           timeout, took);
    if (took > 2 * timeout + margin) {
        print_error("failed acquire with two clusters down took %lld ms\n", took);
        fail();
    }
    assert_clusters_hold(1, "two", NULL, 0);
    int r = distlock_acquire_token(c, "two", 30000, "tok-two", 0, NULL);
    assert_true(r == DISTLOCK_NOTACQUIRED || r < 0);
    assert_clusters_hold(1, "two", NULL, 0);
    /* fenced: not acquired either, and no lock key left */
    assert_not_acquired(distlock_acquire(c, "two", 30000, 0, DISTLOCK_FENCING, &l), &l);
    assert_clusters_hold(1, "two", NULL, 0);

    masters_signal(1, rh_resume);
    assert_int_equal(rh_rcl_wait_ok(cl[1], 20000), 0);
    assert_clusters_hold(3, "two", NULL, 0);
    /* with cluster 1 back, two of three: granted again */
    assert_rc(distlock_acquire(c, "two", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_clusters_hold(3, "two", distlock_lock_token(l), 2);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_clusters_hold(3, "two", NULL, 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_three_clusters),
        cmocka_unit_test(test_mixed),
        cmocka_unit_test(test_renew_mixed),
        cmocka_unit_test(test_mixed_sentinel),
        cmocka_unit_test(test_latency),
        cmocka_unit_test(test_fencing),
        cmocka_unit_test(test_one_hung),
        cmocka_unit_test(test_one_killed),   /* leaves cluster 2 dead */
        cmocka_unit_test(test_two_down),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
