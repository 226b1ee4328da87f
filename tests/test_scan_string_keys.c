/* test_scan_string_keys.c -- distlock_admin_scan() (what `distlock list` reads)
 * gives exactly the string keys of a node, whatever the server version:
 *   - Redis 6.0+ filters with SCAN ... TYPE string; Redis 5.0 refuses TYPE
 *     (a syntax error) and the library falls back to a script that does
 *     the same SCAN step and keeps the string keys;
 *   - that script's steps give the same keys as a filter in the client
 *     (SCAN, then TYPE of each key) and, where the server has it, as
 *     SCAN ... TYPE string: so the fallback is checked on every version,
 *     not only on the 5.0 server of scripts/server-matrix.sh.
 * One real node with keys of every type, many more than a step's COUNT. */
#include "test_common.h"

/* the fallback script (distlock_static: not exported) */
extern const char distlock__scan_strings_script[];

#define N 1
DEFINE_GROUP(N)

#define NKEYS 300

typedef struct keyset {
    char *key[4 * NKEYS];
    int n;
} keyset;

static int keyset_has(const keyset *s, const char *k)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->key[i], k) == 0)
            return 1;
    return 0;
}

/* Adds k unless present (SCAN may give a key twice). */
static void keyset_add(keyset *s, const char *k, size_t len)
{
    char *copy = strndup(k, len);
    assert_non_null(copy);
    if (keyset_has(s, copy) || s->n == (int)(sizeof s->key / sizeof s->key[0])) {
        free(copy);
        return;
    }
    s->key[s->n++] = copy;
}

static void keyset_free(keyset *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->key[i]);
    s->n = 0;
}

static void assert_same_keys(const keyset *a, const keyset *b, const char *what)
{
    for (int i = 0; i < a->n; i++)
        if (!keyset_has(b, a->key[i])) {
            print_error("%s: '%s' only on one side (%d vs %d keys)\n", what, a->key[i], a->n, b->n);
            fail();
        }
    assert_int_equal(a->n, b->n);
}

static void command_ok(rh_cluster *rc, const char *cmd, const char *key)
{
    redisReply *r = rh_command(rc, 0, 0, cmd, key);
    assert_non_null(r);
    if (r->type == REDIS_REPLY_ERROR)
        print_error("%s %s: %s\n", cmd, key, r->str);
    assert_int_not_equal(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
}

/* NKEYS keys of each type under "sk:", a lock with a fence counter, and a
 * key named like a fence counter that no lock owns a counter for. */
static void fill(rh_cluster *rc)
{
    char key[64];
    for (int i = 0; i < NKEYS; i++) {
        snprintf(key, sizeof key, "sk:str:%d", i);
        assert_int_equal(rh_set(rc, 0, 0, key, "tok", 0), 0);
        snprintf(key, sizeof key, "sk:hash:%d", i);
        command_ok(rc, "HSET %s f v", key);
        snprintf(key, sizeof key, "sk:list:%d", i);
        command_ok(rc, "RPUSH %s v", key);
        snprintf(key, sizeof key, "sk:set:%d", i);
        command_ok(rc, "SADD %s v", key);
    }
    command_ok(rc, "ZADD %s 1 v", "sk:zset");
    command_ok(rc, "XADD %s * f v", "sk:stream");
    assert_int_equal(rh_set(rc, 0, 0, "{sk:str:0}:fence", "3", 0), 0);  /* a fence counter */
}

/* The keys of every step of `SCAN cursor MATCH sk:* COUNT 10 TYPE string`
 * (TYPED), of the fallback script with the same arguments (SCRIPT), or of
 * SCAN without TYPE filtered by a TYPE per key (CLIENT_FILTER), into s. */
enum { TYPED, SCRIPT, CLIENT_FILTER };

static void scan_server(rh_cluster *rc, int how, keyset *s)
{
    char cursor[32] = "0";
    int steps = 0;
    do {
        redisReply *r = how == TYPED
            ? rh_command(rc, 0, 0, "SCAN %s MATCH sk:* COUNT 10 TYPE string", cursor)
            : how == SCRIPT
            ? rh_command(rc, 0, 0, "EVAL %s 0 %s sk:* 10", distlock__scan_strings_script, cursor)
            : rh_command(rc, 0, 0, "SCAN %s MATCH sk:* COUNT 10", cursor);
        assert_non_null(r);
        if (r->type == REDIS_REPLY_ERROR)
            print_error("scan step (%d): %s\n", how, r->str);
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        assert_int_equal(r->elements, 2);
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements; i++) {
            const redisReply *k = r->element[1]->element[i];
            if (how == CLIENT_FILTER) {
                redisReply *t = rh_command(rc, 0, 0, "TYPE %b", k->str, k->len);
                assert_non_null(t);
                int is_string = t->type == REDIS_REPLY_STATUS && strcmp(t->str, "string") == 0;
                freeReplyObject(t);
                if (!is_string)
                    continue;
            }
            keyset_add(s, k->str, k->len);
        }
        freeReplyObject(r);
        steps++;
    } while (strcmp(cursor, "0") != 0 && steps < 10000);
    assert_string_equal(cursor, "0");
    assert_true(steps > 10);  /* COUNT-bounded steps, not one */
}

static int collect(const char *key, size_t len, void *arg)
{
    keyset_add(arg, key, len);
    return 0;
}

/* The fallback script keeps exactly the string keys: the same as a filter
 * in the client and, on 6.0+, as SCAN ... TYPE string. */
static void test_fallback_script_keeps_string_keys(void **state)
{
    rh_cluster *rc = *state;
    fill(rc);
    static keyset by_script, by_client, by_type;
    scan_server(rc, SCRIPT, &by_script);
    scan_server(rc, CLIENT_FILTER, &by_client);
    assert_int_equal(by_client.n, NKEYS);  /* sk:str:* ({sk:str:0}:fence does not match) */
    assert_same_keys(&by_script, &by_client, "script vs client filter");
    if (rh_server_major() >= 6) {
        scan_server(rc, TYPED, &by_type);
        assert_same_keys(&by_script, &by_type, "script vs SCAN TYPE string");
        keyset_free(&by_type);
    }
    printf("fallback script: %d string keys of %d, as the client filter%s\n", by_script.n,
           4 * NKEYS + 2, rh_server_major() >= 6 ? " and SCAN ... TYPE string" : "");
    keyset_free(&by_script);
    keyset_free(&by_client);
}

/* distlock_admin_scan gives the string keys only, fence counters left out, on
 * whatever server is on PATH (5.0: through the fallback). */
static void test_scan_gives_string_keys(void **state)
{
    rh_cluster *rc = *state;
    fill(rc);
    distlock_client *c = new_client(rh_uris(rc));
    static keyset got;
    unsigned long long cursor = 0;
    int steps = 0, r;
    do {
        r = distlock_admin_scan(c, 0, "*", 10, &cursor, collect, &got);
        if (r < 0) {
            print_error("distlock_admin_scan = %d (%s): %s\n", r, distlock_strerror(r), distlock_last_error());
            fail();
        }
        steps++;
    } while (cursor != 0 && steps < 10000);
    printf("distlock_admin_scan: %d keys in %d steps\n", got.n, steps);
    assert_int_equal(cursor, 0);
    assert_int_equal(got.n, NKEYS);
    assert_true(keyset_has(&got, "sk:str:0") && keyset_has(&got, "sk:str:299"));
    assert_false(keyset_has(&got, "sk:hash:0"));
    assert_false(keyset_has(&got, "sk:zset"));
    assert_false(keyset_has(&got, "sk:stream"));
    assert_false(keyset_has(&got, "{sk:str:0}:fence"));
    keyset_free(&got);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_fallback_script_keeps_string_keys, heal),
        cmocka_unit_test_setup(test_scan_gives_string_keys, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
