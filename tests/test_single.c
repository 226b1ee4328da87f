/* test_single.c -- the lock on one Redis node (N = 1, quorum 1). */
#include "test_common.h"

DEFINE_GROUP(1)

static void test_counts(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    assert_int_equal(distlock_client_node_count(c), 1);
    assert_int_equal(distlock_client_quorum(c), 1);
    const char *u = distlock_client_node_uri(c, 0);
    assert_non_null(u);
    char port[16];
    snprintf(port, sizeof port, ":%d", rc->node[0].port);
    assert_non_null(strstr(u, port));
    distlock_client_free(c);
}

static void test_two_clients_exclude(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c1 = new_client(rh_uris(rc)), *c2 = new_client(rh_uris(rc));
    distlock_lock *l1 = NULL, *l2 = (distlock_lock *)0, *l3 = NULL;
    char buf[64];

    assert_rc(distlock_acquire(c1, "excl", 30000, 0, 0, &l1), DISTLOCK_OK);
    assert_non_null(l1);
    assert_int_equal(rh_get(rc, 0, 0, "excl", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(l1));
    assert_string_equal(distlock_lock_key(l1), "excl");

    assert_rc(distlock_acquire(c2, "excl", 30000, 0, 0, &l2), DISTLOCK_NOTACQUIRED);
    assert_null(l2);
    /* Even the same client: a second acquire of a held key is refused. */
    assert_rc(distlock_acquire(c1, "excl", 30000, 0, 0, &l2), DISTLOCK_NOTACQUIRED);
    assert_null(l2);
    assert_int_equal(rh_get(rc, 0, 0, "excl", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(l1));

    assert_rc(distlock_release(l1), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "excl", NULL, 0), 0);
    assert_int_equal(distlock_lock_validity_ms(l1), 0);

    assert_rc(distlock_acquire(c2, "excl", 30000, 0, 0, &l3), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "excl", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(l3));
    assert_string_not_equal(distlock_lock_token(l1), distlock_lock_token(l3));

    distlock_lock_free(l1);
    distlock_lock_free(l3);
    assert_int_equal(rh_get(rc, 0, 0, "excl", NULL, 0), 0);   /* free released it */
    distlock_client_free(c1);
    distlock_client_free(c2);
}

static void test_wrong_token_release(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    char buf[64];
    assert_rc(distlock_acquire_token(c, "wt", 30000, "token-A", 0, NULL), DISTLOCK_OK);
    assert_fails(distlock_release_token(c, "wt", "token-B"), DISTLOCK_ENOTOWNER);
    assert_int_equal(rh_get(rc, 0, 0, "wt", buf, sizeof buf), 1);
    assert_string_equal(buf, "token-A");
    assert_fails(distlock_extend_token(c, "wt", "token-B", 60000, NULL), DISTLOCK_ENOTOWNER);
    assert_true(rh_pttl(rc, 0, 0, "wt") <= 30000);
    assert_rc(distlock_release_token(c, "wt", "token-A"), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "wt", NULL, 0), 0);
    /* Releasing a free key is ENOTOWNER as well. */
    assert_fails(distlock_release_token(c, "wt", "token-A"), DISTLOCK_ENOTOWNER);
    distlock_client_free(c);
}

static void test_expiry(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c1 = new_client(rh_uris(rc)), *c2 = new_client(rh_uris(rc));
    distlock_lock *l1 = NULL, *l2 = NULL;
    assert_rc(distlock_acquire(c1, "exp", 150, 0, 0, &l1), DISTLOCK_OK);
    long long pttl = rh_pttl(rc, 0, 0, "exp");
    assert_true(pttl > 0 && pttl <= 150);
    assert_true(RH_WAIT_UNTIL(rh_get(rc, 0, 0, "exp", NULL, 0) == 0, 5000));
    assert_int_equal(distlock_lock_validity_ms(l1), 0);
    assert_rc(distlock_acquire(c2, "exp", 30000, 0, 0, &l2), DISTLOCK_OK);
    /* The first owner's lease is over: its release must not touch the new owner. */
    assert_fails(distlock_release(l1), DISTLOCK_ENOTOWNER);
    char buf[64];
    assert_int_equal(rh_get(rc, 0, 0, "exp", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(l2));
    assert_rc(distlock_release(l2), DISTLOCK_OK);
    distlock_lock_free(l1);
    distlock_lock_free(l2);
    distlock_client_free(c1);
    distlock_client_free(c2);
}

static void test_extend(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "ext", 2000, 0, 0, &l), DISTLOCK_OK);
    long long p0 = rh_pttl(rc, 0, 0, "ext");
    assert_true(p0 > 0 && p0 <= 2000);
    long v0 = distlock_lock_validity_ms(l);
    assert_true(v0 > 0 && v0 <= 2000);

    assert_rc(distlock_extend(l, 60000), DISTLOCK_OK);
    long long p1 = rh_pttl(rc, 0, 0, "ext");
    assert_true(p1 > 2000 && p1 <= 60000);
    long v1 = distlock_lock_validity_ms(l);
    assert_true(v1 > 2000 && v1 <= 60000 - default_drift(60000));
    assert_int_equal(distlock_lock_lost(l), 0);

    /* Lost behind our back: extend must say so and must not recreate the key. */
    assert_int_equal(rh_del(rc, 0, 0, "ext"), 1);
    assert_fails(distlock_extend(l, 60000), DISTLOCK_ENOTOWNER);
    assert_int_equal(rh_get(rc, 0, 0, "ext", NULL, 0), 0);
    assert_int_equal(distlock_lock_lost(l), 1);
    assert_int_equal(distlock_lock_validity_ms(l), 0);

    /* Taken by someone else: extend must not touch their TTL. */
    distlock_lock *l2 = NULL;
    assert_rc(distlock_acquire(c, "ext2", 2000, 0, 0, &l2), DISTLOCK_OK);
    assert_int_equal(rh_set(rc, 0, 0, "ext2", "foreign", 5000), 0);
    assert_fails(distlock_extend(l2, 60000), DISTLOCK_ENOTOWNER);
    assert_true(rh_pttl(rc, 0, 0, "ext2") <= 5000);
    distlock_lock_free(l2);
    char buf[64];
    assert_int_equal(rh_get(rc, 0, 0, "ext2", buf, sizeof buf), 1);
    assert_string_equal(buf, "foreign");

    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_extend_token(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    long v = -1;
    assert_rc(distlock_acquire_token(c, "extt", 1000, "tok-1", 0, &v), DISTLOCK_OK);
    assert_true(v > 0 && v <= 1000 - default_drift(1000));
    assert_rc(distlock_extend_token(c, "extt", "tok-1", 50000, &v), DISTLOCK_OK);
    assert_true(v > 1000 && v <= 50000 - default_drift(50000));
    assert_true(rh_pttl(rc, 0, 0, "extt") > 1000);
    assert_rc(distlock_release_token(c, "extt", "tok-1"), DISTLOCK_OK);
    assert_fails(distlock_extend_token(c, "extt", "tok-1", 50000, &v), DISTLOCK_ENOTOWNER);
    assert_int_equal(rh_get(rc, 0, 0, "extt", NULL, 0), 0);
    distlock_client_free(c);
}

static void test_idempotent_reacquire(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    char buf[64];
    long v = -1;
    assert_rc(distlock_acquire_token(c, "idem", 1000, "tok-same", 0, &v), DISTLOCK_OK);
    assert_true(rh_pttl(rc, 0, 0, "idem") <= 1000);
    /* Same token again (a retry after a lost reply): succeeds and refreshes the TTL. */
    assert_rc(distlock_acquire_token(c, "idem", 60000, "tok-same", 0, &v), DISTLOCK_OK);
    assert_true(v > 1000);
    assert_true(rh_pttl(rc, 0, 0, "idem") > 1000);
    /* Plain SET NX semantics with STRICT. */
    assert_rc(distlock_acquire_token(c, "idem", 60000, "tok-same", DISTLOCK_STRICT, &v),
              DISTLOCK_NOTACQUIRED);
    /* Another token never gets it. */
    assert_rc(distlock_acquire_token(c, "idem", 60000, "tok-other", 0, &v), DISTLOCK_NOTACQUIRED);
    assert_rc(distlock_acquire_token(c, "idem", 60000, "tok-other", DISTLOCK_STRICT, NULL),
              DISTLOCK_NOTACQUIRED);
    assert_int_equal(rh_get(rc, 0, 0, "idem", buf, sizeof buf), 1);
    assert_string_equal(buf, "tok-same");
    assert_rc(distlock_release_token(c, "idem", "tok-same"), DISTLOCK_OK);
    /* STRICT on a free key acquires. */
    assert_rc(distlock_acquire_token(c, "idem", 60000, "tok-other", DISTLOCK_STRICT, NULL),
              DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "idem", buf, sizeof buf), 1);
    assert_string_equal(buf, "tok-other");
    assert_rc(distlock_release_token(c, "idem", "tok-other"), DISTLOCK_OK);
    distlock_client_free(c);
}

/* The token pair remembers its latest leases in a ring of a few dozen
 * entries, each with its key and token (a block reused when an entry is
 * replaced): more keys than the ring holds, of lengths growing then
 * shrinking (the reused blocks grow and shrink), each taken, retaken with
 * its token (a retry) and released; every key holds its own token until
 * its release, which deletes it. */
static void test_token_pair_leases_past_its_ring(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    enum { KEYS = 80 };
    char key[KEYS][128], tok[KEYS][64], v[64];
    for (int i = 0; i < KEYS; i++) {
        int len = i < KEYS / 2 ? 1 + 2 * i : 1 + 2 * (KEYS - 1 - i);
        snprintf(key[i], sizeof key[i], "ring:%0*d", len, i);
        snprintf(tok[i], sizeof tok[i], "t%0*d", 1 + (i * 7) % 60, i);
        assert_rc(distlock_acquire_token(c, key[i], 30000, tok[i], 0, NULL), DISTLOCK_OK);
    }
    for (int i = KEYS - 1; i >= 0; i--) {
        assert_rc(distlock_acquire_token(c, key[i], 30000, tok[i], 0, NULL), DISTLOCK_OK);
        assert_int_equal(rh_get(rc, 0, 0, key[i], v, sizeof v), 1);
        assert_string_equal(v, tok[i]);
    }
    for (int i = 0; i < KEYS; i++) {
        assert_rc(distlock_release_token(c, key[i], tok[i]), DISTLOCK_OK);
        assert_int_equal(rh_get(rc, 0, 0, key[i], NULL, 0), 0);
    }
    distlock_client_free(c);
}

/* Scripts are cached per node; after SCRIPT FLUSH every operation must still
 * work (NOSCRIPT -> EVAL fallback). */
static void test_noscript(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    char buf[64];
    for (int round = 0; round < 3; round++) {
        assert_rc(distlock_acquire(c, "nos", 30000, 0, 0, &l), DISTLOCK_OK);
        assert_int_equal(rh_get(rc, 0, 0, "nos", buf, sizeof buf), 1);
        assert_string_equal(buf, distlock_lock_token(l));
        assert_int_equal(rh_script_flush(rc, 0), 0);
        assert_rc(distlock_extend(l, 40000), DISTLOCK_OK);
        assert_true(rh_pttl(rc, 0, 0, "nos") > 30000);
        assert_int_equal(rh_script_flush(rc, 0), 0);
        assert_rc(distlock_release(l), DISTLOCK_OK);
        assert_int_equal(rh_get(rc, 0, 0, "nos", NULL, 0), 0);
        distlock_lock_free(l);
        l = NULL;
        assert_int_equal(rh_script_flush(rc, 0), 0);
        assert_rc(distlock_acquire_token(c, "nos", 30000, "t", 0, NULL), DISTLOCK_OK);
        assert_int_equal(rh_script_flush(rc, 0), 0);
        assert_rc(distlock_acquire_token(c, "nos", 30000, "t", 0, NULL), DISTLOCK_OK);
        assert_int_equal(rh_script_flush(rc, 0), 0);
        assert_rc(distlock_release_token(c, "nos", "t"), DISTLOCK_OK);
        assert_int_equal(rh_get(rc, 0, 0, "nos", NULL, 0), 0);
        assert_int_equal(rh_script_flush(rc, 0), 0);
    }
    distlock_client_free(c);
}

static void test_validity_bounds(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    const long ttls[] = { 50, 1000, 10000, 600000 };
    for (size_t i = 0; i < sizeof ttls / sizeof ttls[0]; i++) {
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(c, "val", ttls[i], 0, 0, &l), DISTLOCK_OK);
        long v = distlock_lock_validity_ms(l);
        if (!(v > 0 && v <= ttls[i] - default_drift(ttls[i]))) {
            print_error("ttl %ld: validity %ld not in (0, %ld] (ttl minus drift %ld)\n",
                        ttls[i], v, ttls[i] - default_drift(ttls[i]), default_drift(ttls[i]));
            fail();
        }
        long long pttl = rh_pttl(rc, 0, 0, "val");
        assert_true(pttl > 0 && pttl <= ttls[i]);
        assert_true(v <= pttl + 5);   /* never promises more than the server holds */
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
    }
    distlock_client_free(c);
}

/* A node that answers only after the TTL has passed: the acquire must not
 * report success (validity = ttl - elapsed - drift <= 0). */
static void test_validity_elapsed(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 3000), DISTLOCK_OK);
    distlock_lock *l = NULL;
    /* Connect and load the scripts first. */
    assert_rc(distlock_acquire(c, "slow", 1000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    l = NULL;

    assert_int_equal(rh_debug_sleep(rc, 0, 600), 0);
    long long t0 = rh_now_ms();
    int r = distlock_acquire(c, "slow", 200, 0, 0, &l);
    long long took = rh_now_ms() - t0;
    if (r == DISTLOCK_OK) {
        print_error("acquire with ttl 200 against a node that answered after %lld ms "
                    "succeeded (validity %ld)\n", took, distlock_lock_validity_ms(l));
        fail();
    }
    assert_null(l);
    /* And a long TTL through the same slow node: validity accounts for the wait. */
    assert_int_equal(rh_debug_sleep(rc, 0, 400), 0);
    t0 = rh_now_ms();
    assert_rc(distlock_acquire(c, "slow2", 10000, 0, 0, &l), DISTLOCK_OK);
    took = rh_now_ms() - t0;
    long v = distlock_lock_validity_ms(l);
    if (v > 10000 - 200 - default_drift(10000)) {
        print_error("validity %ld after a %lld ms round (the node slept 400 ms)\n", v, took);
        fail();
    }
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_tokens(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    char seen[20][40];
    for (int i = 0; i < 20; i++) {
        distlock_lock *l = NULL;
        assert_rc(distlock_acquire(c, "tok", 30000, 0, 0, &l), DISTLOCK_OK);
        const char *t = distlock_lock_token(l);
        if (!rh_is_hex32(t)) {
            print_error("token \"%s\" is not 32 lowercase hex characters\n", t);
            fail();
        }
        snprintf(seen[i], sizeof seen[i], "%s", t);
        for (int j = 0; j < i; j++) assert_string_not_equal(seen[i], seen[j]);
        distlock_lock_free(l);
    }
    char buf[33], buf2[33];
    assert_rc(distlock_token_generate(buf, sizeof buf), DISTLOCK_OK);
    assert_true(rh_is_hex32(buf));
    assert_rc(distlock_token_generate(buf2, sizeof buf2), DISTLOCK_OK);
    assert_true(rh_is_hex32(buf2));
    assert_string_not_equal(buf, buf2);
    distlock_client_free(c);
}

static void test_double_release(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL, *l2 = NULL;
    assert_rc(distlock_acquire(c, "dbl", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_fails(distlock_release(l), DISTLOCK_ENOTOWNER);
    /* A new owner in between: the stale handle's release leaves it alone. */
    assert_rc(distlock_acquire(c, "dbl", 30000, 0, 0, &l2), DISTLOCK_OK);
    assert_fails(distlock_release(l), DISTLOCK_ENOTOWNER);
    assert_fails(distlock_extend(l, 30000), DISTLOCK_ENOTOWNER);
    char buf[64];
    assert_int_equal(rh_get(rc, 0, 0, "dbl", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(l2));
    distlock_lock_free(l);   /* must not release l2's key either */
    assert_int_equal(rh_get(rc, 0, 0, "dbl", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(l2));
    distlock_lock_free(l2);
    assert_int_equal(rh_get(rc, 0, 0, "dbl", NULL, 0), 0);
    distlock_client_free(c);
}

static void test_release_after_replaced(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    char buf[64];
    assert_rc(distlock_acquire(c, "repl", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_int_equal(rh_set(rc, 0, 0, "repl", "someone-else", 0), 0);
    assert_fails(distlock_release(l), DISTLOCK_ENOTOWNER);
    assert_int_equal(rh_get(rc, 0, 0, "repl", buf, sizeof buf), 1);
    assert_string_equal(buf, "someone-else");
    assert_int_equal(rh_pttl(rc, 0, 0, "repl"), -1);
    distlock_lock_free(l);
    assert_int_equal(rh_get(rc, 0, 0, "repl", buf, sizeof buf), 1);
    assert_string_equal(buf, "someone-else");
    distlock_client_free(c);
}

/* A key held by a foreign implementation (plain SET NX with a token) excludes us. */
static void test_foreign_holder(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    assert_int_equal(rh_set(rc, 0, 0, "foreign", "php-mt_rand-123", 30000), 0);
    assert_rc(distlock_acquire(c, "foreign", 30000, 0, 0, &l), DISTLOCK_NOTACQUIRED);
    assert_null(l);
    /* And a lock of ours is a plain string key holding the token. */
    assert_rc(distlock_acquire(c, "ours", 30000, 0, 0, &l), DISTLOCK_OK);
    redisReply *r = rh_command(rc, 0, 0, "TYPE ours");
    assert_non_null(r);
    assert_string_equal(r->str, "string");
    freeReplyObject(r);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_node_holder_and_force_release(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    distlock_holder_info h = { .size = sizeof h };
    assert_rc(distlock_admin_holder(c, "insp", 0, &h), 0);
    assert_rc(distlock_acquire(c, "insp", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_admin_holder(c, "insp", 0, &h), 1);
    assert_string_equal(h.token, distlock_lock_token(l));
    assert_true(h.pttl_ms > 0 && h.pttl_ms <= 30000);
    int deleted = -1;
    assert_rc(distlock_admin_force_release(c, "insp", &deleted), DISTLOCK_OK);
    assert_int_equal(deleted, 1);
    assert_int_equal(rh_get(rc, 0, 0, "insp", NULL, 0), 0);
    assert_fails(distlock_release(l), DISTLOCK_ENOTOWNER);
    /* No expiry: pttl -1. */
    assert_int_equal(rh_set(rc, 0, 0, "insp", "x", 0), 0);
    assert_rc(distlock_admin_holder(c, "insp", 0, &h), 1);
    assert_int_equal(h.pttl_ms, -1);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* Freeing the client releases what is still held through it; handles left
 * over report DISTLOCK_ECLOSED until freed. */
static void test_client_free_releases(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "cf", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "cf", NULL, 0), 1);
    distlock_lock_free(l);
    assert_int_equal(rh_get(rc, 0, 0, "cf", NULL, 0), 0);
    assert_rc(distlock_acquire(c, "cf", 30000, 0, 0, &l), DISTLOCK_OK);
    distlock_client_free(c);
    assert_int_equal(rh_get(rc, 0, 0, "cf", NULL, 0), 0);
    /* The handle outlives its client: use after close is reported, then freed. */
    assert_fails(distlock_release(l), DISTLOCK_ECLOSED);
    assert_fails(distlock_extend(l, 1000), DISTLOCK_ECLOSED);
    assert_int_equal(distlock_lock_validity_ms(l), 0);
    assert_string_equal(distlock_lock_key(l), "cf");
    distlock_lock_free(l);
}

/* Keys are bytes: spaces, newlines, UTF-8, the maximum length. */
static void test_key_bytes(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    static char longkey[DISTLOCK_KEY_MAX + 1];
    memset(longkey, 'k', DISTLOCK_KEY_MAX);
    longkey[DISTLOCK_KEY_MAX] = '\0';
    const char *keys[] = { "a key with spaces", "line\nbreak", "\xe9\x94\x81:\xe5\x8d\x95\xe5\x8f\xb7:42",
                           "{slot}:x", "*", longkey };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        distlock_lock *l = NULL;
        char buf[64];
        assert_rc(distlock_acquire(c, keys[i], 30000, 0, 0, &l), DISTLOCK_OK);
        assert_string_equal(distlock_lock_key(l), keys[i]);
        assert_int_equal(rh_get(rc, 0, 0, keys[i], buf, sizeof buf), 1);
        assert_string_equal(buf, distlock_lock_token(l));
        assert_rc(distlock_release(l), DISTLOCK_OK);
        assert_int_equal(rh_get(rc, 0, 0, keys[i], NULL, 0), 0);
        distlock_lock_free(l);
    }
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_counts, heal),
        cmocka_unit_test_setup(test_two_clients_exclude, heal),
        cmocka_unit_test_setup(test_wrong_token_release, heal),
        cmocka_unit_test_setup(test_expiry, heal),
        cmocka_unit_test_setup(test_extend, heal),
        cmocka_unit_test_setup(test_extend_token, heal),
        cmocka_unit_test_setup(test_idempotent_reacquire, heal),
        cmocka_unit_test_setup(test_token_pair_leases_past_its_ring, heal),
        cmocka_unit_test_setup(test_noscript, heal),
        cmocka_unit_test_setup(test_validity_bounds, heal),
        cmocka_unit_test_setup(test_validity_elapsed, heal),
        cmocka_unit_test_setup(test_tokens, heal),
        cmocka_unit_test_setup(test_double_release, heal),
        cmocka_unit_test_setup(test_release_after_replaced, heal),
        cmocka_unit_test_setup(test_foreign_holder, heal),
        cmocka_unit_test_setup(test_node_holder_and_force_release, heal),
        cmocka_unit_test_setup(test_client_free_releases, heal),
        cmocka_unit_test_setup(test_key_bytes, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
