/* test_cluster.c -- Redis Cluster nodes: a real cluster of 3
 * masters + 3 replicas (tests/harness/cluster_harness.h).
 *   - the slot function against CLUSTER KEYSLOT of the server, many keys;
 *   - locks on keys spread over all slots, stored on the slot's owner;
 *   - hash-tag keys and the brace edge cases with fencing and fair mode
 *     (side keys in the key's slot; a key whose side keys cannot be is a
 *     clear error, never a CROSSSLOT);
 *   - a MOVED followed: one extra round trip per moved key (counted from
 *     the servers' errorstats);
 *   - resharding under load: a slot with live locks migrated while several
 *     processes contend on its keys: 0 overlaps, 0 errors;
 *   - auto-renewal: one script call per master per pass (counted from the
 *     servers' commandstats), and locks of a slot migrated (also half
 *     migrated) renewed every pass, on the new master once moved;
 *   - failover: CLUSTER FAILOVER of a replica, then SIGKILL of a master. */
#include "test_common.h"
#include "cluster_harness.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* the library's own slot function (distlock_static: not exported) */
unsigned distlock__key_slot(const char *key, size_t len);
size_t distlock__shard_channel_name(char *buf, const char *key);

static rh_rcl *CL;

static int group_setup(void **state)
{
    (void)state;
    CL = rh_rcl_start();
    return CL ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    rh_rcl_stop(CL);
    return 0;
}

/* Number of MOVED / ASK errors the running masters answered so far. */
static long errorstat(const char *name)
{
    long total = 0;
    char needle[64];
    snprintf(needle, sizeof needle, "errorstat_%s:count=", name);
    for (int i = 0; i < CL->rc->n; i++) {
        if (CL->rc->node[i].pid <= 0) continue;
        redisReply *r = rh_command(CL->rc, i, 0, "INFO errorstats");
        const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, needle) : NULL;
        if (p) total += strtol(p + strlen(needle), NULL, 10);
        if (r) freeReplyObject(r);
    }
    return total;
}

/* Does the master that owns key's slot hold it with this value? */
static int owner_holds(const char *key, const char *token)
{
    int slot = rh_rcl_keyslot(CL, key);
    int m = rh_rcl_owner(CL, 0, slot);
    char buf[128];
    if (m < 0) return -1;
    int got = rh_get(CL->rc, m, 0, key, buf, sizeof buf);
    return got == 1 && strcmp(buf, token) == 0;
}

static void test_keyslot(void **state)
{
    (void)state;
    static const char *const fixed[] = {
        "", "a", "foo", "{user1000}.following", "{user1000}.followers", "foo{}{bar}",
        "foo{{bar}}zap", "foo{bar}{zap}", "{}", "{", "}", "}{", "{}x", "a}b", "a{b",
        "order:{42}", "{order:{42}}:fence", "{{}}", "x{y}z{w}", "123456789",
    };
    for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++) {
        int want = rh_rcl_keyslot(CL, fixed[k]);
        if ((int)distlock__key_slot(fixed[k], strlen(fixed[k])) != want) {
            print_error("key '%s': slot %u, server says %d\n", fixed[k],
                        distlock__key_slot(fixed[k], strlen(fixed[k])), want);
            fail();
        }
    }
    /* the specification's check value: CRC16("123456789") = 0x31C3 */
    assert_int_equal(distlock__key_slot("123456789", 9), 0x31C3 & 16383);
    /* pseudo-random keys with braces sprinkled in, one pipeline */
    redisContext *ctx = rh_connect(CL->rc, 0, 0);
    assert_non_null(ctx);
    char keys[2000][24];
    unsigned seed = 12345;
    for (int k = 0; k < 2000; k++) {
        int len = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 20;
        for (int j = 0; j < len; j++) {
            unsigned v = (seed = seed * 1103515245u + 12345u) >> 16;
            keys[k][j] = v % 7 == 0 ? '{' : v % 7 == 1 ? '}' : (char)('a' + v % 26);
        }
        keys[k][len] = '\0';
        redisAppendCommand(ctx, "CLUSTER KEYSLOT %s", keys[k]);
    }
    for (int k = 0; k < 2000; k++) {
        redisReply *r = NULL;
        assert_int_equal(redisGetReply(ctx, (void **)&r), REDIS_OK);
        assert_int_equal(r->type, REDIS_REPLY_INTEGER);
        if ((long long)distlock__key_slot(keys[k], strlen(keys[k])) != r->integer) {
            print_error("key '%s': slot %u, server says %lld\n", keys[k],
                        distlock__key_slot(keys[k], strlen(keys[k])), r->integer);
            fail();
        }
        freeReplyObject(r);
    }
    redisFree(ctx);
}

/* Keys over the whole slot range: each lock lives on its slot's owner. */
static void test_all_slots(void **state)
{
    (void)state;
    distlock_client *c = new_client(CL->uri);
    assert_int_equal(distlock_client_node_count(c), 1);
    char key[64];
    int per_master[8] = { 0 };
    for (int slot = 0; slot < 16384; slot += 97) {
        rh_rcl_key_in_slot(CL, "spread", slot, key, sizeof key);
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(c, key, 30000, 0, 0, &l), DISTLOCK_OK);
        assert_int_equal(owner_holds(key, distlock_lock_token(l)), 1);
        per_master[rh_rcl_owner(CL, 0, slot)]++;
        assert_rc(distlock_release(l), DISTLOCK_OK);
        assert_int_equal(owner_holds(key, distlock_lock_token(l)), 0);
        distlock_lock_free(l);
    }
    int masters = 0;
    for (int i = 0; i < 6; i++) masters += per_master[i] > 0;
    assert_int_equal(masters, 3);
    /* distlock_admin_cluster_route: the slot, and the master that owns it */
    for (int slot = 50; slot < 16384; slot += 4000) {
        rh_rcl_key_in_slot(CL, "route", slot, key, sizeof key);
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(c, key, 30000, 0, 0, &l), DISTLOCK_OK);
        int got = -1;
        char master[64], want[64];
        assert_int_equal(distlock_admin_cluster_route(c, key, 0, &got, master, sizeof master), 1);
        assert_int_equal(got, slot);
        snprintf(want, sizeof want, "127.0.0.1:%d", CL->rc->node[rh_rcl_owner(CL, 0, slot)].port);
        assert_string_equal(master, want);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    assert_int_equal(distlock_admin_cluster_route(c, "k", 1, NULL, NULL, 0), DISTLOCK_EINVAL);
    assert_int_equal(distlock_admin_cluster_route(c, "", 0, NULL, NULL, 0), DISTLOCK_EINVAL);
    distlock_client_free(c);
    char plain[64];
    snprintf(plain, sizeof plain, "redis://127.0.0.1:%d", CL->rc->node[0].port);
    c = new_client(plain);
    int slot = -7;
    assert_int_equal(distlock_admin_cluster_route(c, "k", 0, &slot, NULL, 0), 0);  /* not a cluster */
    assert_int_equal(slot, -7);
    distlock_client_free(c);
}

/* Side keys share the key's slot: hash tags and the brace edge cases. */
static void test_side_keys(void **state)
{
    (void)state;
    distlock_client *c = new_client(CL->uri);
    static const char *const good[] = { "order:{42}", "{42}:x", "plain", "a{b", "x{y}z{w}",
                                        "{{}}", "{order:{42}}" };
    static const char *const bad[] = { "a}b", "{}x", "}{", "{}", "x{}{y}" };
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        const char *key = good[k];
        int slot = rh_rcl_keyslot(CL, key);
        int m = rh_rcl_owner(CL, 0, slot);
        distlock_lock *l = NULL;
        for (int round = 0; round < 2; round++) {
            assert_rc(distlock_acquire(c, key, 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
            assert_int_equal(distlock_lock_fence(l), round + 1);
            assert_rc(distlock_release(l), DISTLOCK_OK);
            distlock_lock_free(l);
        }
        /* the counter is on the key's master, under a name of its slot */
        redisReply *r = rh_command(CL->rc, m, 0, "KEYS %s*", key[0] == '{' ? "{" : "");
        int found = 0;
        for (size_t j = 0; r && j < r->elements; j++) {
            const char *name = r->element[j]->str;
            if (strstr(name, ":fence") == NULL || strstr(name, key) == NULL) continue;
            char want[64];
            if (strchr(key, '{') && strchr(strchr(key, '{'), '}') && strchr(key, '{')[1] != '}')
                snprintf(want, sizeof want, "%s:fence", key);
            else
                snprintf(want, sizeof want, "{%s}:fence", key);
            if (strcmp(name, want) != 0) continue;
            found = 1;
            assert_int_equal(rh_rcl_keyslot(CL, name), slot);
        }
        if (r) freeReplyObject(r);
        if (!found) {
            print_error("no fence counter for '%s' on its master\n", key);
            fail();
        }
        /* fair mode: a queue in the same slot (no CROSSSLOT) */
        assert_rc(distlock_acquire(c, key, 30000, 0, DISTLOCK_FAIR | DISTLOCK_FENCING, &l),
                  DISTLOCK_OK);
        distlock_lock *l2 = NULL;
        distlock_client *c2 = new_client(CL->uri);
        assert_rc(distlock_acquire(c2, key, 30000, 50, DISTLOCK_FAIR, &l2), DISTLOCK_NOTACQUIRED);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        assert_rc(distlock_acquire(c2, key, 30000, 2000, DISTLOCK_FAIR, &l2), DISTLOCK_OK);
        assert_rc(distlock_release(l2), DISTLOCK_OK);
        distlock_lock_free(l);
        distlock_lock_free(l2);
        distlock_client_free(c2);
    }
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(c, bad[k], 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_EINVAL);
        assert_null(l);
        assert_non_null(strstr(distlock_last_error(), "hash tag"));
        assert_rc(distlock_acquire(c, bad[k], 30000, 0, DISTLOCK_FAIR, &l), DISTLOCK_EINVAL);
        /* a plain lock needs no side key */
        assert_rc(distlock_acquire(c, bad[k], 30000, 0, 0, &l), DISTLOCK_OK);
        assert_int_equal(owner_holds(bad[k], distlock_lock_token(l)), 1);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    distlock_client_free(c);

    /* Owner metadata: the record is a side key too, in the key's slot on
     * its master; for a bad key every acquire of such a client (handles and
     * token pairs) is refused up front, never a CROSSSLOT. */
    distlock_client *co = new_client(CL->uri);
    assert_rc(distlock_client_set(co, DISTLOCK_OPT_OWNER_INFO, 1), DISTLOCK_OK);
    for (size_t k = 0; k < sizeof good / sizeof good[0]; k++) {
        const char *key = good[k];
        int slot = rh_rcl_keyslot(CL, key), m = rh_rcl_owner(CL, 0, slot);
        char ok[80];
        if (strchr(key, '{') && strchr(strchr(key, '{'), '}') && strchr(key, '{')[1] != '}')
            snprintf(ok, sizeof ok, "%s:owner", key);
        else
            snprintf(ok, sizeof ok, "{%s}:owner", key);
        assert_int_equal(rh_rcl_keyslot(CL, ok), slot);
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(co, key, 30000, 0, 0, &l), DISTLOCK_OK);
        redisReply *r = rh_command(CL->rc, m, 0, "HGET %s token", ok);
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STRING);
        assert_string_equal(r->str, distlock_lock_token(l));
        freeReplyObject(r);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
        assert_true(RH_WAIT_UNTIL(rh_pttl(CL->rc, m, 0, ok) == -2, 3000));
    }
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(co, bad[k], 30000, 0, 0, &l), DISTLOCK_EINVAL);
        assert_null(l);
        assert_non_null(strstr(distlock_last_error(), "owner record"));
        assert_rc(distlock_acquire_token(co, bad[k], 30000, "tok-bad", 0, NULL), DISTLOCK_EINVAL);
        assert_int_equal(owner_holds(bad[k], "tok-bad"), 0);
    }
    distlock_client_free(co);
}

/* A slot moved to another master: the next call gets MOVED once, follows
 * it, and the map is right from then on. */
static void test_moved(void **state)
{
    (void)state;
    distlock_client *c = new_client(CL->uri);
    char key[3][64];
    int slot[3] = { 100, 6000, 12000 };
    distlock_lock *l = NULL;
    for (int k = 0; k < 3; k++) {
        rh_rcl_key_in_slot(CL, "mv", slot[k], key[k], sizeof key[k]);
        assert_rc(distlock_acquire(c, key[k], 30000, 0, 0, &l), DISTLOCK_OK);  /* map warm */
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    long moved0 = errorstat("MOVED");
    /* move the first slot only */
    int from = rh_rcl_owner(CL, 0, slot[0]), to = rh_rcl_owner(CL, 0, slot[1]);
    assert_int_not_equal(from, to);
    assert_int_equal(rh_rcl_migrate_slot(CL, slot[0], from, to, 10, NULL, NULL), 0);
    for (int rep = 0; rep < 5; rep++) {
        assert_rc(distlock_acquire(c, key[0], 30000, 0, 0, &l), DISTLOCK_OK);
        assert_int_equal(owner_holds(key[0], distlock_lock_token(l)), 1);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    long extra = errorstat("MOVED") - moved0;
    printf("moved key: %ld extra round trip(s) for 5 acquire/release pairs\n", extra);
    assert_int_equal(extra, 1);
    /* move it back, and the second one away: one MOVED each */
    assert_int_equal(rh_rcl_migrate_slot(CL, slot[0], to, from, 10, NULL, NULL), 0);
    assert_int_equal(rh_rcl_migrate_slot(CL, slot[1], to, from, 10, NULL, NULL), 0);
    moved0 = errorstat("MOVED");
    for (int k = 0; k < 2; k++) {
        assert_rc(distlock_acquire(c, key[k], 30000, 0, 0, &l), DISTLOCK_OK);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    extra = errorstat("MOVED") - moved0;
    printf("2 moved keys: %ld extra round trip(s)\n", extra);
    assert_true(extra >= 1 && extra <= 2);  /* the first MOVED's CLUSTER SLOTS may fix both */
    assert_int_equal(rh_rcl_migrate_slot(CL, slot[1], from, to, 10, NULL, NULL), 0);
    distlock_client_free(c);
}

/* ---- a waiter woken by a release (pub/sub on a cluster) ---- */
struct waiter_arg {
    distlock_client *c;
    const char *key;
    int flags;
    int rc;
    long long got_ms;
    char detail[300];
};

static void *waiter(void *p)
{
    struct waiter_arg *w = p;
    distlock_lock *l = NULL;
    w->rc = distlock_acquire(w->c, w->key, 30000, 20000, w->flags, &l);
    w->got_ms = rh_now_ms();
    snprintf(w->detail, sizeof w->detail, "%s", distlock_last_error());
    if (l) {
        distlock_release(l);
        distlock_lock_free(l);
    }
    return NULL;
}

/* Subscribers to channel on any running server. */
static long numsub(const char *channel)
{
    long total = 0;
    for (int i = 0; i < CL->rc->n; i++) {
        if (CL->rc->node[i].pid <= 0) continue;
        redisReply *r = rh_command(CL->rc, i, 0, "PUBSUB NUMSUB %s", channel);
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
            total += (long)r->element[1]->integer;
        if (r) freeReplyObject(r);
    }
    return total;
}

/* The release of key publishes on a cluster with SPUBLISH on this channel
 * (key without braces: the whole key is the hash tag, so it is in key's
 * slot), written independently of the library's rule. */
static void shard_channel(char *ch, size_t size, const char *key)
{
    if (strchr(key, '{') || strchr(key, '}')) {  /* the library's (test_wakeup_keys checks it) */
        char buf[1100];
        size_t n = distlock__shard_channel_name(buf, key);
        assert_true(n < size);
        memcpy(ch, buf, n + 1);
        return;
    }
    snprintf(ch, size, "distlock:{%s}", key);
}

/* Holder takes key, w waits for it; the waiter must be SSUBSCRIBEd on the
 * master of the key's slot (and not SUBSCRIBEd anywhere). If migrate_to >=
 * 0, the slot then moves there under the waiting waiter, which must
 * SSUBSCRIBE on the new master. Returns the ms from release to wake-up. */
static long woken_after_release_moving(distlock_client *holder, distlock_client *w,
                                       const char *key, int migrate_to, int flags)
{
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &l), DISTLOCK_OK);
    char ch[96], sch[96];
    snprintf(ch, sizeof ch, "distlock:%s", key);
    shard_channel(sch, sizeof sch, key);
    int slot = rh_rcl_keyslot(CL, key), owner = rh_rcl_owner(CL, 0, slot);
    assert_int_equal(rh_rcl_keyslot(CL, sch), slot);
    /* A waiter of an earlier call on w unsubscribes after it ends, on the
     * subscriber's thread: counted before that, it would hide the new one. */
    if (!RH_WAIT_UNTIL(rh_rcl_shardnumsub(CL, owner, sch) == 0, 10000)) {
        print_error("an earlier subscriber to %s on server %d never left\n", sch, owner);
        fail();
    }
    long before = rh_rcl_shardnumsub(CL, owner, sch);
    struct waiter_arg a = { w, key, flags, -99, 0, "" };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, waiter, &a), 0);
    if (!RH_WAIT_UNTIL(rh_rcl_shardnumsub(CL, owner, sch) > before, 10000)) {
        print_error("no new sharded subscriber to %s on server %d (%ld before, %ld now); waiter rc %d (%s)\n",
                    sch, owner, before, rh_rcl_shardnumsub(CL, owner, sch), a.rc, a.detail);
        fail();
    }
    assert_int_equal(numsub(ch), 0);  /* no classic subscription: releases SPUBLISH */
    if (migrate_to >= 0) {
        assert_int_equal(rh_rcl_migrate_slot(CL, slot, owner, migrate_to, 10, NULL, NULL), 0);
        /* the old master dropped it (sunsubscribe); the waiter follows */
        if (!RH_WAIT_UNTIL(rh_rcl_shardnumsub(CL, migrate_to, sch) > 0, 10000)) {
            print_error("waiter not SSUBSCRIBEd on the new master %d of slot %d (old: %ld)\n",
                        migrate_to, slot, rh_rcl_shardnumsub(CL, owner, sch));
            fail();
        }
        assert_int_equal(rh_rcl_shardnumsub(CL, owner, sch), 0);
        assert_int_equal(a.rc, -99);  /* still waiting */
    }
    long long t0 = rh_now_ms();
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    pthread_join(th, NULL);
    assert_rc(a.rc, DISTLOCK_OK);
    return (long)(a.got_ms - t0);
}

static long woken_after_release(distlock_client *holder, distlock_client *w, const char *key)
{
    return woken_after_release_moving(holder, w, key, -1, 0);
}

/* The shard channel of every kind of key is in the key's slot (as the
 * server counts), so the release script may SPUBLISH on it; waiters on a
 * key with a '}' but no hash tag (its channel has a numeric tag) and fair
 * waiters (the fair script names the next) are woken at once too. */
static void test_wakeup_keys(void **state)
{
    (void)state;
    static const char *const keys[] = { "order:{42}", "{42}:x", "plain", "a{b", "x{y}z{w}",
                                        "{{}}", "{order:{42}}", "a}b", "{}x", "}{", "{}",
                                        "x{}{y}" };
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        char ch[1100];
        distlock__shard_channel_name(ch, keys[k]);
        if (rh_rcl_keyslot(CL, ch) != rh_rcl_keyslot(CL, keys[k])) {
            print_error("shard channel '%s' of '%s' is not in its slot\n", ch, keys[k]);
            fail();
        }
    }
    distlock_client *holder = new_client(CL->uri), *w = new_client(CL->uri);
    assert_rc(distlock_client_set(w, DISTLOCK_OPT_RETRY_MIN_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(w, DISTLOCK_OPT_RETRY_MAX_MS, 5000), DISTLOCK_OK);
    long brace = woken_after_release_moving(holder, w, "wk}x", -1, 0);
    long tagged = woken_after_release_moving(holder, w, "wk:{7}", -1, 0);
    long fair = woken_after_release_moving(holder, w, "wkfair", -1, DISTLOCK_FAIR);
    printf("woken (SSUBSCRIBE) %ld ms after the release ('}' without a tag), %ld ms (hash tag), "
           "%ld ms (fair waiter)\n", brace, tagged, fair);
    assert_true(brace < 1000);
    assert_true(tagged < 1000);
    assert_true(fair < 1000);
    distlock_client_free(w);
    distlock_client_free(holder);
}

/* A waiter is woken by the release within a few ms (its re-check is 5 s
 * apart here, so only the wake-up can be this fast), also once the key's
 * slot moved to another master. */
static void test_wakeup(void **state)
{
    (void)state;
    distlock_client *holder = new_client(CL->uri), *w = new_client(CL->uri);
    assert_rc(distlock_client_set(w, DISTLOCK_OPT_RETRY_MIN_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(w, DISTLOCK_OPT_RETRY_MAX_MS, 5000), DISTLOCK_OK);
    char key[64];
    int slot = 2000;
    rh_rcl_key_in_slot(CL, "wk", slot, key, sizeof key);
    long ms1 = woken_after_release(holder, w, key);
    int from = rh_rcl_owner(CL, 0, slot), to = rh_rcl_owner(CL, 0, 14000);
    assert_int_equal(rh_rcl_migrate_slot(CL, slot, from, to, 10, NULL, NULL), 0);
    long ms2 = woken_after_release(holder, w, key);
    /* the slot moves back while the waiter waits: it follows (sunsubscribe,
     * then SSUBSCRIBE on the new master) and is still woken at once */
    long ms4 = woken_after_release_moving(holder, w, key, from, 0);
    assert_int_equal(rh_rcl_owner(CL, 0, slot), from);
    /* the first seed is down: calls and the subscriber use the next ones
     * (w's subscription gone first, so a new one shows in SHARDNUMSUB) */
    distlock_client_free(w);
    w = NULL;
    char sch[96];
    shard_channel(sch, sizeof sch, key);
    assert_true(RH_WAIT_UNTIL(rh_rcl_shardnumsub(CL, from, sch) == 0, 10000));
    char uri[300];
    snprintf(uri, sizeof uri, "redis-cluster://127.0.0.1:1,%s", CL->uri + strlen("redis-cluster://"));
    distlock_client *w2 = new_client(uri);
    assert_rc(distlock_client_set(w2, DISTLOCK_OPT_RETRY_MIN_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(w2, DISTLOCK_OPT_RETRY_MAX_MS, 5000), DISTLOCK_OK);
    long ms3 = woken_after_release(holder, w2, key);
    printf("waiter (SSUBSCRIBE) woken %ld ms after the release; %ld ms after its slot migrated; "
           "%ld ms after it migrated while waiting; %ld ms with its first seed down\n", ms1, ms2,
           ms4, ms3);
    assert_true(ms1 < 1000);
    assert_true(ms4 < 1000);
    assert_true(ms2 < 1000);
    assert_true(ms3 < 1000);
    distlock_client_free(w2);
    distlock_client_free(holder);
}

/* Auto-renewed locks over several slots (batched per master), one of
 * them migrated while held: every lock lives on for several TTLs. */
static void test_renew(void **state)
{
    (void)state;
    distlock_client *c = new_client(CL->uri);
    enum { NK = 6 };
    int slots[NK] = { 10, 10, 5500, 5501, 11000, 16000 };
    char key[NK][64];
    distlock_lock *l[NK];
    for (int k = 0; k < NK; k++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "rn%d", k);
        rh_rcl_key_in_slot(CL, prefix, slots[k], key[k], sizeof key[k]);
        assert_rc(distlock_acquire(c, key[k], 1500, 0, DISTLOCK_AUTO_RENEW, &l[k]), DISTLOCK_OK);
    }
    /* four TTLs (1.5 s: renewals every 0.5 s stay on time under sanitizers on a busy machine) */
    long long end = rh_now_ms() + 6000;
    int migrated = 0, checks = 0;
    while (rh_now_ms() < end) {
        for (int k = 0; k < NK; k++) {
            assert_false(distlock_lock_lost(l[k]));
            assert_int_equal(owner_holds(key[k], distlock_lock_token(l[k])), 1);
        }
        checks++;
        if (!migrated && rh_now_ms() > end - 4000) {
            int from = rh_rcl_owner(CL, 0, slots[2]), to = rh_rcl_owner(CL, 0, slots[5]);
            assert_int_equal(rh_rcl_migrate_slot(CL, slots[2], from, to, 10, NULL, NULL), 0);
            migrated = 1;
        }
        rh_sleep_ms(50);  /* sampling period of the check, not a synchronisation */
    }
    for (int k = 0; k < NK; k++) {
        assert_rc(distlock_release(l[k]), DISTLOCK_OK);
        distlock_lock_free(l[k]);
    }
    int back_to = rh_rcl_owner(CL, 0, slots[3]), now_at = rh_rcl_owner(CL, 0, slots[2]);
    assert_int_equal(rh_rcl_migrate_slot(CL, slots[2], now_at, back_to, 10, NULL, NULL), 0);
    printf("auto-renewal: %d locks on 5 slots held for 4 TTLs (one slot migrated), %d checks\n",
           NK, checks);
    distlock_client_free(c);
}

/* ---- batched renewal: one call per master, moved keys followed ---- */

/* 96 auto-renewed locks on 96 slots spread over the 3 masters: each
 * renewal pass costs each master one script call, not one per slot (32). */
static void test_renew_per_master(void **state)
{
    (void)state;
    enum { NK = 96, PASSES = 3 };
    /* a pass every 2 s; the acquires (under 1 s, ttl/6, even under
     * valgrind) coalesce into one pass */
    long ttl = 6000;
    distlock_client *c = new_client(CL->uri);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_OWNER_INFO, 1), DISTLOCK_OK);
    char key[NK][64];
    distlock_lock *l[NK];
    int master[NK], masters[3], nm = 0, slots_of[3] = { 0, 0, 0 };
    for (int k = 0; k < NK; k++) {
        int slot = 7 + k * (16384 / NK);
        char prefix[16];
        snprintf(prefix, sizeof prefix, "pm%d", k);
        rh_rcl_key_in_slot(CL, prefix, slot, key[k], sizeof key[k]);
        master[k] = rh_rcl_owner(CL, 0, slot);
        assert_true(master[k] >= 0);
        int j = 0;
        while (j < nm && masters[j] != master[k]) j++;
        if (j == nm) {
            assert_true(nm < 3);
            masters[nm++] = master[k];
        }
        slots_of[j]++;
    }
    assert_int_equal(nm, 3);
    long long ta = rh_now_ms();
    for (int k = 0; k < NK; k++)
        assert_rc(distlock_acquire(c, key[k], ttl, 0, DISTLOCK_AUTO_RENEW, &l[k]), DISTLOCK_OK);
    ta = rh_now_ms() - ta;
    uint64_t fail0 = client_stat(c, "renewal_failed_total");
    /* after a first full pass (the locks acquired at different moments
     * coalesce into one), count the script calls of the next passes */
    uint64_t r0 = wait_renewed(c, 0, NK, 1);
    long calls0[3];
    for (int j = 0; j < nm; j++)
        calls0[j] = script_calls(CL->rc, masters[j]);
    wait_renewed(c, r0, NK, PASSES);
    long calls[3];
    for (int j = 0; j < nm; j++)
        calls[j] = script_calls(CL->rc, masters[j]) - calls0[j];
    uint64_t r1 = client_stat(c, "renewal_total");
    long passes = (long)((r1 - r0 + NK - 1) / NK);
    printf("renewal: %d locks on %d slots (%d/%d/%d per master, acquired in %lld ms), %ld passes: "
           "script calls per master %ld/%ld/%ld (one batch per slot would be %ld/%ld/%ld)\n",
           NK, NK, slots_of[0], slots_of[1], slots_of[2], ta, passes, calls[0], calls[1], calls[2],
           passes * slots_of[0], passes * slots_of[1], passes * slots_of[2]);
    for (int j = 0; j < nm; j++) {
        /* one per pass; +1: a pass may be under way while we read */
        assert_true(calls[j] >= passes - 1);
        assert_true(calls[j] <= passes + 1);
    }
    assert_int_equal(client_stat(c, "renewal_failed_total"), fail0);
    /* the lock and its owner hash were both renewed, on their master */
    for (int k = 0; k < NK; k++) {
        assert_false(distlock_lock_lost(l[k]));
        assert_int_equal(owner_holds(key[k], distlock_lock_token(l[k])), 1);
        char ok[96];
        snprintf(ok, sizeof ok, "{%.63s}:owner", key[k]);
        redisReply *r = rh_command(CL->rc, master[k], 0, "PTTL %s", ok);
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_INTEGER);
        assert_true(r->integer > 0);  /* ttl 6 s, 7+ s (4 passes) after the acquire */
        freeReplyObject(r);
    }
    for (int k = 0; k < NK; k++) {
        assert_rc(distlock_release(l[k]), DISTLOCK_OK);
        distlock_lock_free(l[k]);
    }
    distlock_client_free(c);
}

/* Absolute expiry (unix ms) of key on server i. */
static long long pexpiretime(int i, const char *key)
{
    redisReply *r = rh_command(CL->rc, i, 0, "PEXPIRETIME %s", key);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

struct mig_arg {
    distlock_client *c;
    int nk;
    int passes;  /* full passes seen while the slot was half migrated */
};

/* Between two keys of the migration: one full renewal pass while the slot
 * is MIGRATING on the source (some of its keys there, some on the target). */
static void pass_between(void *p)
{
    struct mig_arg *a = p;
    uint64_t r = client_stat(a->c, "renewal_total");
    /* two: the first may have started before this key moved */
    wait_renewed(a->c, r, a->nk, 2);
    a->passes++;
}

/* Locks in a slot that moves to another master, among locks of other
 * slots of both masters: renewed every pass (also while the slot is half
 * migrated), on the new master once it moved; none lost or late. */
static void test_renew_moved(void **state)
{
    (void)state;
    enum { NMOVE = 4, NOTHER = 6, NK = NMOVE + NOTHER };
    long ttl = 3000;
    distlock_client *c = new_client(CL->uri);
    int slot = 777;  /* moves */
    int from = rh_rcl_owner(CL, 0, slot), to = -1, other_slot[NOTHER];
    /* other slots: three of the source's, three of the target's */
    int n_from = 0, n_to = 0;
    for (int s = 50; s < 16384 && (n_from < 3 || n_to < 3); s += 97) {
        int o = rh_rcl_owner(CL, 0, s);
        if (s == slot) continue;
        if (o == from && n_from < 3) {
            other_slot[n_from++] = s;
        } else if (o != from && (to < 0 || o == to) && n_to < 3) {
            to = o;
            other_slot[3 + n_to++] = s;
        }
    }
    assert_true(from >= 0 && to >= 0 && from != to && n_from == 3 && n_to == 3);
    char key[NK][64];
    distlock_lock *l[NK];
    for (int k = 0; k < NK; k++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "mr%d", k);
        rh_rcl_key_in_slot(CL, prefix, k < NMOVE ? slot : other_slot[k - NMOVE], key[k],
                           sizeof key[k]);
        assert_rc(distlock_acquire(c, key[k], ttl, 0, DISTLOCK_AUTO_RENEW, &l[k]), DISTLOCK_OK);
    }
    uint64_t fail0 = client_stat(c, "renewal_failed_total");
    uint64_t r0 = wait_renewed(c, 0, NK, 1);
    long moved0 = errorstat("MOVED"), asked0 = errorstat("ASK");

    /* 1. right after a pass, one key per MIGRATE, a full pass (two) after
     * each key while the slot is split between the two masters */
    struct mig_arg a = { c, NK, 0 };
    assert_int_equal(rh_rcl_migrate_slot(CL, slot, from, to, 1, pass_between, &a), 0);
    assert_int_equal(rh_rcl_owner(CL, 0, slot), to);
    long long e0[NMOVE];
    for (int k = 0; k < NMOVE; k++) {
        e0[k] = pexpiretime(to, key[k]);
        assert_true(e0[k] > 0);
    }
    /* 2. the next pass renews them on their new master */
    uint64_t r1 = client_stat(c, "renewal_total");
    wait_renewed(c, r1, NK, 2);
    for (int k = 0; k < NMOVE; k++) {
        long long e1 = pexpiretime(to, key[k]);
        assert_true(e1 > e0[k]);
        assert_int_equal(owner_holds(key[k], distlock_lock_token(l[k])), 1);
    }
    for (int k = 0; k < NK; k++)
        assert_false(distlock_lock_lost(l[k]));
    long moved1 = errorstat("MOVED"), asked1 = errorstat("ASK");
    uint64_t failed = client_stat(c, "renewal_failed_total") - fail0;
    printf("renewal across a migration: %d locks (%d in the moving slot), %d passes while it was "
           "split, %llu renewals, %llu failed, %ld MOVED and %ld ASK answered\n", NK, NMOVE,
           a.passes, (unsigned long long)(client_stat(c, "renewal_total") - r0),
           (unsigned long long)failed, moved1 - moved0, asked1 - asked0);
    assert_int_equal(failed, 0);
    assert_true(asked1 - asked0 > 0);  /* the split slot's migrated keys: ASK */
    for (int k = 0; k < NK; k++) {
        assert_rc(distlock_release(l[k]), DISTLOCK_OK);
        distlock_lock_free(l[k]);
    }
    assert_int_equal(rh_rcl_migrate_slot(CL, slot, to, from, 10, NULL, NULL), 0);
    distlock_client_free(c);
}

/* ---- contention under resharding / failover (several processes) ---- */
#define NPROC 4
#define NKEYS 3
struct shared {
    _Atomic int stop;
    _Atomic long ops;          /* acquire/release pairs done */
    _Atomic long overlaps;     /* two owners inside one key's critical section */
    _Atomic long errors;       /* a status other than OK from acquire or release */
    _Atomic int inside[NKEYS];
    int64_t last_fence[NKEYS]; /* FENCING: the last fence seen inside, per key */
    _Atomic long fence_bad;    /* a fence not above the previous owner's */
    char last_error[256];
    _Atomic long max_call_ms;  /* longest acquire or release */
    _Atomic long statuses[16]; /* by ST(status) */
    char first[16][200];       /* the first detail per status */
};

#define ST(rc) ((rc) + 8 >= 0 && (rc) + 8 < 15 ? (rc) + 8 : 15)
static void note_call(struct shared *sh, long long t0, int rc)
{
    long ms = (long)(rh_now_ms() - t0);
    long cur = atomic_load(&sh->max_call_ms);
    while (ms > cur && !atomic_compare_exchange_weak(&sh->max_call_ms, &cur, ms))
        ;
    if (atomic_fetch_add(&sh->statuses[ST(rc)], 1) == 0)
        snprintf(sh->first[ST(rc)], sizeof sh->first[0], "%s", distlock_last_error());
}

static void contender(struct shared *sh, const char (*keys)[64], unsigned flags, int id)
{
    distlock_client *c = NULL;
    /* A reply's wait widened with the build's slowness (sanitizers): an
     * error here is a redirect not followed, not a CPU busy elsewhere. */
    if (distlock_client_new(CL->uri, &c) != DISTLOCK_OK ||
        distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 500 * slow_factor()) !=
            DISTLOCK_OK) {
        atomic_fetch_add(&sh->errors, 1);
        _exit(1);
    }
    unsigned seed = (unsigned)id * 7919u + 1;
    while (!atomic_load(&sh->stop)) {
        int k = (int)((seed = seed * 1103515245u + 12345u) >> 16) % NKEYS;
        distlock_lock *l = NULL;
        long long t0 = rh_now_ms();
        int rc = distlock_acquire(c, keys[k], 10000, 10000, flags, &l);
        note_call(sh, t0, rc);
        if (rc != DISTLOCK_OK) {
            if (atomic_fetch_add(&sh->errors, 1) == 0)
                snprintf(sh->last_error, sizeof sh->last_error, "acquire: %s: %s",
                         distlock_strerror(rc), distlock_last_error());
            usleep(10000);  /* as an application would, before trying again */
            continue;
        }
        if (atomic_fetch_add(&sh->inside[k], 1) != 0)
            atomic_fetch_add(&sh->overlaps, 1);
        if (flags & DISTLOCK_FENCING) {
            if (distlock_lock_fence(l) <= sh->last_fence[k])
                atomic_fetch_add(&sh->fence_bad, 1);
            sh->last_fence[k] = distlock_lock_fence(l);
        }
        usleep(500);  /* the protected work */
        atomic_fetch_sub(&sh->inside[k], 1);
        t0 = rh_now_ms();
        rc = distlock_release(l);
        note_call(sh, t0, rc);
        if (rc != DISTLOCK_OK && atomic_fetch_add(&sh->errors, 1) == 0)
            snprintf(sh->last_error, sizeof sh->last_error, "release: %s: %s",
                     distlock_strerror(rc), distlock_last_error());
        distlock_lock_free(l);
        atomic_fetch_add(&sh->ops, 1);
    }
    distlock_client_free(c);
    _exit(0);
}

static struct shared *SH;

/* between migrated batches: let the contenders make progress */
static void let_progress(void *arg)
{
    (void)arg;
    long o = atomic_load(&SH->ops);
    RH_WAIT_UNTIL(atomic_load(&SH->ops) >= o + 2, 10000);
}

static void start_contenders(pid_t *pids, const char (*keys)[64], unsigned flags)
{
    memset(SH, 0, sizeof *SH);
    for (int p = 0; p < NPROC; p++) {
        pids[p] = fork();
        assert_true(pids[p] >= 0);
        if (pids[p] == 0)
            contender(SH, keys, flags, p);
    }
}

static void stop_contenders(pid_t *pids)
{
    atomic_store(&SH->stop, 1);
    for (int p = 0; p < NPROC; p++) {
        int st = 0;
        assert_int_equal(waitpid(pids[p], &st, 0), pids[p]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
}

/* paced: the migration waits for the contenders' progress after every key
 * moved. A fenced acquire of a free lock cannot succeed while its slot
 * migrates (Redis 7.0 answers TRYAGAIN to a script whose keys are not all
 * on one side, and a free lock's key is on neither), so for it the
 * migration runs unpaced and the acquires back off until it is done. */
static void reshard_under_load(unsigned flags, const char *what, int paced)
{
    SH = mmap(NULL, sizeof *SH, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(SH != MAP_FAILED);
    char keys[NKEYS][64];
    int slot = 4242;
    for (int k = 0; k < NKEYS; k++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "rs%d", k);
        rh_rcl_key_in_slot(CL, prefix, slot, keys[k], sizeof keys[k]);
    }
    int a = rh_rcl_owner(CL, 0, slot), b = rh_rcl_owner(CL, 0, 15000);
    assert_int_not_equal(a, b);
    long moved0 = errorstat("MOVED"), ask0 = errorstat("ASK"), try0 = errorstat("TRYAGAIN");
    pid_t pids[NPROC];
    start_contenders(pids, (const char (*)[64])keys, flags);
    assert_true(RH_WAIT_UNTIL(atomic_load(&SH->ops) >= 20, 30000));
    long ops0 = atomic_load(&SH->ops);
    /* a -> b, one key per MIGRATE, contenders running in between; and back */
    assert_int_equal(rh_rcl_migrate_slot(CL, slot, a, b, 1, paced ? let_progress : NULL, NULL), 0);
    let_progress(NULL);
    assert_int_equal(rh_rcl_migrate_slot(CL, slot, b, a, 1, paced ? let_progress : NULL, NULL), 0);
    let_progress(NULL);
    long during = atomic_load(&SH->ops) - ops0;
    stop_contenders(pids);
    long moved = errorstat("MOVED") - moved0, ask = errorstat("ASK") - ask0,
         tryagain = errorstat("TRYAGAIN") - try0;
    printf("resharding (%s): %ld pairs (%ld during the two migrations), %ld overlaps, %ld errors, "
           "MOVED %ld, ASK %ld, TRYAGAIN %ld followed\n", what, atomic_load(&SH->ops), during,
           atomic_load(&SH->overlaps), atomic_load(&SH->errors), moved, ask, tryagain);
    if (atomic_load(&SH->errors))
        printf("first error: %s\n", SH->last_error);
    assert_int_equal(atomic_load(&SH->overlaps), 0);
    assert_int_equal(atomic_load(&SH->errors), 0);
    assert_int_equal(atomic_load(&SH->fence_bad), 0);
    assert_true(during > 0);
    assert_true(moved > 0);
    munmap(SH, sizeof *SH);
}

static void test_reshard(void **state)
{
    (void)state;
    reshard_under_load(0, "plain", 1);
}

static void test_reshard_fenced(void **state)
{
    (void)state;
    reshard_under_load(DISTLOCK_FENCING, "fenced", 0);
}

/* Failover under load: CLUSTER FAILOVER of the slot owner's replica (a
 * graceful handover: no call fails), then SIGKILL of the new master: calls
 * during the fault end in a clean status within their budget, and the
 * client follows the promoted replica. Last test: the topology changes. */
static void test_failover(void **state)
{
    (void)state;
    SH = mmap(NULL, sizeof *SH, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(SH != MAP_FAILED);
    int slot = 9000;
    char keys[NKEYS][64];
    for (int k = 0; k < NKEYS; k++) {
        char prefix[16];
        snprintf(prefix, sizeof prefix, "fo%d", k);
        rh_rcl_key_in_slot(CL, prefix, slot, keys[k], sizeof keys[k]);
    }
    int m = rh_rcl_owner(CL, 0, slot), r = rh_rcl_replica_of(CL, m);
    assert_true(m >= 0 && r >= 0);
    pid_t pids[NPROC];
    start_contenders(pids, (const char (*)[64])keys, 0);
    assert_true(RH_WAIT_UNTIL(atomic_load(&SH->ops) >= 20, 30000));

    /* 1. graceful: the replica takes over */
    long moved0 = errorstat("MOVED");
    redisReply *x = rh_command(CL->rc, r, 0, "CLUSTER FAILOVER");
    assert_non_null(x);
    assert_int_not_equal(x->type, REDIS_REPLY_ERROR);
    freeReplyObject(x);
    assert_true(RH_WAIT_UNTIL(rh_rcl_is_master(CL, r) && rh_rcl_owner(CL, r, slot) == r, 30000));
    assert_int_equal(rh_rcl_wait_ok(CL, 30000), 0);
    long ops1 = atomic_load(&SH->ops);
    assert_true(RH_WAIT_UNTIL(atomic_load(&SH->ops) >= ops1 + 20, 30000));
    long err1 = atomic_load(&SH->errors), ovl1 = atomic_load(&SH->overlaps);
    printf("CLUSTER FAILOVER: %ld pairs after it, %ld errors, %ld overlaps, MOVED %ld followed\n",
           atomic_load(&SH->ops) - ops1, err1, ovl1, errorstat("MOVED") - moved0);
    if (err1)
        printf("first error: %s\n", SH->last_error);
    assert_int_equal(err1, 0);
    assert_int_equal(ovl1, 0);

    /* 2. SIGKILL of the new master: its replica (the old master) is
     * promoted after the node timeout */
    long long t_kill = rh_now_ms();
    assert_int_equal(rh_kill(CL->rc, r), 0);
    assert_true(RH_WAIT_UNTIL(rh_rcl_is_master(CL, m) && rh_rcl_owner(CL, m, slot) == m, 30000));
    long long t_promoted = rh_now_ms();
    long ops2 = atomic_load(&SH->ops);
    assert_true(RH_WAIT_UNTIL(atomic_load(&SH->ops) >= ops2 + 20, 30000));
    long long t_back = rh_now_ms();
    stop_contenders(pids);
    printf("SIGKILL of the master: promoted after %lld ms, locking again %lld ms later; "
           "calls OK %ld, NOTACQUIRED %ld, ECONN %ld; longest call %ld ms; overlaps %ld\n",
           t_promoted - t_kill, t_back - t_promoted, atomic_load(&SH->statuses[ST(0)]),
           atomic_load(&SH->statuses[ST(DISTLOCK_NOTACQUIRED)]),
           atomic_load(&SH->statuses[ST(DISTLOCK_ECONN)]), atomic_load(&SH->max_call_ms),
           atomic_load(&SH->overlaps) - ovl1);
    for (int k = 0; k < 16; k++)
        if (atomic_load(&SH->statuses[k]) && k != ST(0))
            printf("  %s: %ld, first: %s\n", distlock_strerror(k - 8), atomic_load(&SH->statuses[k]),
                   SH->first[k]);
    /* every call ended within its budget (10 s wait) plus the timeouts */
    assert_true(atomic_load(&SH->max_call_ms) < 10000 + 3000);
    /* only clean statuses: OK, NOTACQUIRED, ECONN (the master or the whole
     * cluster unreachable for now: CLUSTERDOWN), ENOTOWNER (a release of a
     * lock the promoted replica never got) */
    long clean = atomic_load(&SH->statuses[ST(0)]) +
                 atomic_load(&SH->statuses[ST(DISTLOCK_NOTACQUIRED)]) +
                 atomic_load(&SH->statuses[ST(DISTLOCK_ECONN)]) +
                 atomic_load(&SH->statuses[ST(DISTLOCK_ENOTOWNER)]);
    long all = 0;
    for (int k = 0; k < 16; k++) all += atomic_load(&SH->statuses[k]);
    assert_int_equal(clean, all);
    munmap(SH, sizeof *SH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keyslot),
        cmocka_unit_test(test_all_slots),
        cmocka_unit_test(test_side_keys),
        cmocka_unit_test(test_moved),
        cmocka_unit_test(test_wakeup),
        cmocka_unit_test(test_wakeup_keys),
        cmocka_unit_test(test_renew),
        cmocka_unit_test(test_renew_per_master),
        cmocka_unit_test(test_renew_moved),
        cmocka_unit_test(test_reshard),
        cmocka_unit_test(test_reshard_fenced),
        cmocka_unit_test(test_failover),  /* last: changes the topology */
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
