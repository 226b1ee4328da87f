/* test_owner.c -- owner metadata (DISTLOCK_OPT_OWNER_INFO): the hash
 * {key}:owner beside a lock, written, renewed and deleted by the lock's own
 * scripts with the lock's TTL; distlock_admin_owner() reads it back, and only
 * for the token the lock key holds now, into a growable distlock_owner_info
 * (a size too small refused, nothing written past the caller's size).
 *
 * Real redis-servers; the keys are read behind the library's back
 * (rh_pttl, EXISTS, HGET) to check what is on the node. */
#include <sys/time.h>
#include <unistd.h>

#include "test_common.h"

#define N 3
DEFINE_GROUP(N)

static distlock_client *owner_client(rh_cluster *rc, unsigned mask, int on, const char *label)
{
    char buf[512];
    distlock_client *c = new_client(rh_uris_mask(rc, mask, buf, sizeof buf));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_OWNER_INFO, on), DISTLOCK_OK);
    if (label)
        assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_OWNER_LABEL, label), DISTLOCK_OK);
    return c;
}

static long long wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static long long exists(rh_cluster *rc, int i, const char *key)
{
    redisReply *r = rh_command(rc, i, 0, "EXISTS %s", key);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

/* Nodes of rc where key exists. */
static int count_existing(rh_cluster *rc, const char *key)
{
    int n = 0;
    for (int i = 0; i < rc->n; i++)
        n += exists(rc, i, key) == 1;
    return n;
}

/* Nodes of rc where key's PTTL is in (lo, hi]. */
static int count_pttl_in(rh_cluster *rc, const char *key, long long lo, long long hi)
{
    int n = 0;
    for (int i = 0; i < rc->n; i++) {
        long long p = rh_pttl(rc, i, 0, key);
        n += p > lo && p <= hi;
    }
    return n;
}

/* The lock's TTL and its owner record's, read in one MULTI so they are
 * taken at the same instant. */
/* How far apart the lock's and its record's PTTLs may read (see below). */
#define SAME_TTL_SLACK_MS 50

static void both_pttl(rh_cluster *rc, const char *key, const char *okey, long long *lk,
                      long long *ok)
{
    redisContext *x = rh_connect(rc, 0, 0);
    assert_non_null(x);
    redisAppendCommand(x, "MULTI");
    redisAppendCommand(x, "PTTL %s", key);
    redisAppendCommand(x, "PTTL %s", okey);
    redisAppendCommand(x, "EXEC");
    redisReply *r = NULL;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(redisGetReply(x, (void **)&r), REDIS_OK);
        if (i < 3)
            freeReplyObject(r);
    }
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 2);
    *lk = r->element[0]->integer;
    *ok = r->element[1]->integer;
    freeReplyObject(r);
    redisFree(x);
}

static void test_stored_with_same_ttl(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = owner_client(rc, 0x1, 1, "job 42");
    distlock_lock *l = NULL;
    char host[256] = "";
    gethostname(host, sizeof host);
    long long before = wall_ms();
    assert_rc(distlock_acquire(c, "o1", 30000, 0, 0, &l), DISTLOCK_OK);
    long long lk, ok;
    both_pttl(rc, "o1", "{o1}:owner", &lk, &ok);
    assert_true(lk > 20000 && lk <= 30000);
    /* Same PX, same script. Redis 7.0 reads the clock for each command's
     * expiry, so the clock may move between the two: by a millisecond
     * usually, by more when the server is descheduled inside the script on
     * a loaded machine (fresh-debian under its valgrind lane saw more than
     * 1 ms). A record set apart from the lock, or with another TTL, would
     * be off by far more than SAME_TTL_SLACK_MS. */
    assert_true(ok - lk >= -SAME_TTL_SLACK_MS && ok - lk <= SAME_TTL_SLACK_MS);

    distlock_owner_info o;
    memset(&o, 0x55, sizeof o);  /* every field must be written */
    o.size = sizeof o;
    assert_rc(distlock_admin_owner(c, "o1", -1, &o), 1);
    assert_int_equal(o.size, sizeof o);  /* the caller's, never changed */
    assert_string_equal(o.host, host);
    assert_int_equal(o.pid, getpid());
    assert_string_equal(o.program, "test_owner");
    assert_string_equal(o.label, "job 42");
    assert_true(o.since_ms >= before - 1000 && o.since_ms <= wall_ms() + 1000);
    assert_true(o.pttl_ms > 20000 && o.pttl_ms <= 30000);
    assert_rc(distlock_admin_owner(c, "o1", 0, NULL), 1);

    /* extend renews the record with the lock */
    assert_rc(distlock_extend(l, 90000), DISTLOCK_OK);
    both_pttl(rc, "o1", "{o1}:owner", &lk, &ok);
    assert_true(lk > 60000);
    assert_true(ok - lk >= -SAME_TTL_SLACK_MS && ok - lk <= SAME_TTL_SLACK_MS);

    /* release deletes it in the same script */
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_int_equal(exists(rc, 0, "o1"), 0);
    assert_int_equal(exists(rc, 0, "{o1}:owner"), 0);
    assert_rc(distlock_admin_owner(c, "o1", -1, &o), 0);
    assert_string_equal(o.host, "");
    distlock_client_free(c);
}

/* Three nodes: every node holds the record; the watchdog's batched renewal
 * keeps it alive past its first TTL. The client first connects every node
 * (a fresh client's first round may end at the quorum before the last
 * connection is ready, and that request is never sent), and the records
 * are awaited: a round returns at the quorum, the last node's request may
 * still be on its way. */
static void test_watchdog_renews(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = owner_client(rc, 0x7, 1, NULL);
    connect_every_node(rc, c, "o2:connect");
    distlock_lock *l = NULL, *l2 = NULL;
    /* short, so that three TTLs pass in the test; longer where the build is
     * slow (valgrind, TSan): a renewal every TTL/3 must get through there */
    const long ttl = slow_bound(600, 1500);
    assert_rc(distlock_acquire(c, "o2", ttl, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "o2b", ttl, 0, DISTLOCK_AUTO_RENEW, &l2), DISTLOCK_OK);
    assert_true(RH_WAIT_UNTIL(count_existing(rc, "{o2}:owner") == N &&
                              count_existing(rc, "{o2b}:owner") == N, 3000));
    /* three TTLs pass: only renewals keep the keys */
    long long t_end = rh_now_ms() + 3 * ttl;
    while (rh_now_ms() < t_end)
        rh_sleep_ms(100);
    assert_int_equal(distlock_lock_lost(l), 0);
    for (int i = 0; i < N; i++) {
        assert_int_equal(exists(rc, i, "{o2}:owner"), 1);
        assert_int_equal(exists(rc, i, "{o2b}:owner"), 1);
        long long p = rh_pttl(rc, i, 0, "{o2}:owner");
        assert_true(p > 0 && p <= ttl);
    }
    distlock_owner_info o = { .size = sizeof o };
    assert_rc(distlock_admin_owner(c, "o2", -1, &o), 1);
    assert_string_equal(o.label, "");
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_rc(distlock_release(l2), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_lock_free(l2);
    assert_true(RH_WAIT_UNTIL(count_existing(rc, "{o2}:owner") == 0 &&
                              count_existing(rc, "{o2b}:owner") == 0, 3000));
    distlock_client_free(c);
}

static void test_gone_after_expiry(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = owner_client(rc, 0x1, 1, NULL);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "o3", 300, 0, 0, &l), DISTLOCK_OK);
    assert_int_equal(exists(rc, 0, "{o3}:owner"), 1);
    /* wait for the server to expire the lock key, then the record must be
     * gone as well (same PX: expired at the same millisecond) */
    long long t_end = rh_now_ms() + 5000;
    while (exists(rc, 0, "o3") && rh_now_ms() < t_end)
        rh_sleep_ms(20);
    assert_int_equal(exists(rc, 0, "o3"), 0);
    assert_int_equal(exists(rc, 0, "{o3}:owner"), 0);
    assert_rc(distlock_admin_owner(c, "o3", -1, NULL), 0);
    assert_fails(distlock_release(l), DISTLOCK_ENOTOWNER);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_absent_without_option(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = owner_client(rc, 0x1, 0, "ignored");
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "o4", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_int_equal(exists(rc, 0, "o4"), 1);
    assert_int_equal(exists(rc, 0, "{o4}:owner"), 0);
    distlock_owner_info o = { .size = sizeof o };
    assert_rc(distlock_admin_owner(c, "o4", -1, &o), 0);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);

    /* a foreign holder (a plain token string: old client, PHP seed code) */
    assert_int_equal(rh_set(rc, 0, 0, "o4", "foreign-token", 30000), 0);
    assert_rc(distlock_admin_owner(c, "o4", 0, &o), 0);
    /* a stale record of an earlier holder is not shown for a new one */
    distlock_client *c2 = owner_client(rc, 0x1, 1, NULL);
    assert_int_equal(rh_del(rc, 0, 0, "o4"), 1);
    assert_rc(distlock_acquire(c2, "o4", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_int_equal(rh_del(rc, 0, 0, "o4"), 1);
    assert_int_equal(rh_set(rc, 0, 0, "o4", "another-token", 30000), 0);
    assert_int_equal(exists(rc, 0, "{o4}:owner"), 1);
    assert_rc(distlock_admin_owner(c2, "o4", -1, &o), 0);
    distlock_lock_free(l);
    distlock_client_free(c2);
    distlock_client_free(c);
}

static void test_label(void **state)
{
    rh_cluster *rc = *state;
    const char *label = "q\"uote\\back\nnl\ttab\x01\x7f caf\xc3\xa9 {x}:owner";
    distlock_client *c = owner_client(rc, 0x1, 1, label);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "o5", 30000, 0, 0, &l), DISTLOCK_OK);
    distlock_owner_info o = { .size = sizeof o };
    assert_rc(distlock_admin_owner(c, "o5", -1, &o), 1);
    assert_string_equal(o.label, label);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);

    /* the longest label fits; one byte more is EINVAL and changes nothing */
    char big[DISTLOCK_OWNER_LABEL_MAX + 2];
    memset(big, 'L', sizeof big - 1);
    big[DISTLOCK_OWNER_LABEL_MAX] = '\0';
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_OWNER_LABEL, big), DISTLOCK_OK);
    big[DISTLOCK_OWNER_LABEL_MAX] = 'L';
    big[DISTLOCK_OWNER_LABEL_MAX + 1] = '\0';
    assert_fails(distlock_client_set_str(c, DISTLOCK_OPT_OWNER_LABEL, big), DISTLOCK_EINVAL);
    assert_non_null(strstr(distlock_last_error(), "at most 256"));
    assert_rc(distlock_acquire(c, "o5", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_admin_owner(c, "o5", -1, &o), 1);
    assert_int_equal(strlen(o.label), DISTLOCK_OWNER_LABEL_MAX);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    /* bad values of the switch, bad nodes */
    assert_fails(distlock_client_set(c, DISTLOCK_OPT_OWNER_INFO, 2), DISTLOCK_EINVAL);
    assert_fails(distlock_client_set(c, DISTLOCK_OPT_OWNER_LABEL, 1), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_owner(c, "o5", 1, &o), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_owner(c, "o5", -2, &o), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_owner(NULL, "o5", -1, &o), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_owner(c, "", -1, &o), DISTLOCK_EINVAL);
    distlock_client_free(c);
}

/* The fair and the fenced scripts store it too (with the fence counter
 * still working) on every node, and their releases delete it. Every node:
 * the client connects each first, and the records are awaited (as in
 * test_watchdog_renews). */
static void test_fair_and_fenced(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = owner_client(rc, 0x7, 1, "ff");
    connect_every_node(rc, c, "o6:connect");
    distlock_lock *l = NULL;
    const unsigned flags[3] = { DISTLOCK_FAIR, DISTLOCK_FENCING, DISTLOCK_FAIR | DISTLOCK_FENCING };
    for (int k = 0; k < 3; k++) {
        assert_rc(distlock_acquire(c, "o6", 30000, 1000, flags[k], &l), DISTLOCK_OK);
        if (flags[k] & DISTLOCK_FENCING)
            assert_true(distlock_lock_fence(l) >= 1);
        int got = 0;
        if (!RH_WAIT_UNTIL((got = count_pttl_in(rc, "{o6}:owner", 20000, 30000)) == N, 3000))
            fail_msg("{o6}:owner with a PTTL in (20000, 30000] on %d node(s), expected %d "
                     "(flags %u)", got, N, flags[k]);
        distlock_owner_info o = { .size = sizeof o };
        assert_rc(distlock_admin_owner(c, "o6", -1, &o), 1);
        assert_string_equal(o.label, "ff");
        assert_rc(distlock_release(l), DISTLOCK_OK);
        distlock_lock_free(l);
        assert_true(RH_WAIT_UNTIL(count_existing(rc, "{o6}:owner") == 0, 3000));
    }
    distlock_client_free(c);
}

/* An attempt that wins one node of three and loses the quorum is undone
 * there: the record goes with the lock (release script; fair undo). */
static void test_undo_takes_it_back(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = owner_client(rc, 0x7, 1, NULL);
    distlock_lock *l = NULL;
    const unsigned flags[2] = { 0, DISTLOCK_FAIR };
    for (int k = 0; k < 2; k++) {
        assert_int_equal(rh_set(rc, 1, 0, "o7", "foreign", 30000), 0);
        assert_int_equal(rh_set(rc, 2, 0, "o7", "foreign", 30000), 0);
        assert_fails(distlock_acquire(c, "o7", 30000, k ? 50 : 0, flags[k], &l), DISTLOCK_NOTACQUIRED);
        assert_int_equal(exists(rc, 0, "o7"), 0);
        assert_int_equal(exists(rc, 0, "{o7}:owner"), 0);
        for (int i = 1; i < N; i++)
            assert_int_equal(exists(rc, i, "{o7}:owner"), 0);
        assert_rc(distlock_admin_owner(c, "o7", -1, NULL), 0);
        for (int i = 1; i < N; i++)
            assert_int_equal(rh_del(rc, i, 0, "o7"), 1);
    }
    distlock_client_free(c);
}

/* distlock_owner_info as 0.1.0 declares it: what a program built against
 * 0.1.0 passes to every later library, whatever later headers add. */
typedef struct owner_info_0_1_0 {
    size_t size;
    char host[256];
    long pid;
    char program[256];
    long long since_ms;
    char label[DISTLOCK_OWNER_LABEL_MAX + 1];
    long pttl_ms;
} owner_info_0_1_0;
/* ... which is today's header's, field for field */
_Static_assert(offsetof(owner_info_0_1_0, host) == offsetof(distlock_owner_info, host) &&
               offsetof(owner_info_0_1_0, pid) == offsetof(distlock_owner_info, pid) &&
               offsetof(owner_info_0_1_0, program) == offsetof(distlock_owner_info, program) &&
               offsetof(owner_info_0_1_0, since_ms) == offsetof(distlock_owner_info, since_ms) &&
               offsetof(owner_info_0_1_0, label) == offsetof(distlock_owner_info, label) &&
               offsetof(owner_info_0_1_0, pttl_ms) == offsetof(distlock_owner_info, pttl_ms),
               "distlock_owner_info no longer starts with its 0.1.0 layout");

#define GUARD 0xA5

/* The 0.1.0 struct with guard bytes right after it. */
typedef struct guarded_owner {
    owner_info_0_1_0 info;
    unsigned char guard[64];
} guarded_owner;

static void assert_guard(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != GUARD) {
            print_error("byte %zu past the caller's size was written: 0x%02x\n", i, p[i]);
            fail();
        }
}

/* Size = the 0.1.0 layout: every field filled, not one byte after it; a
 * later header's bigger struct: zeros after this version's fields, up to
 * its size; a size smaller than the 0.1.0 layout: refused, nothing
 * written. */
static void test_info_size(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = owner_client(rc, 0x7, 1, "sized");
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "o8", 30000, 0, 0, &l), DISTLOCK_OK);
    guarded_owner g;
    memset(&g, GUARD, sizeof g);
    g.info.size = sizeof g.info;
    assert_rc(distlock_admin_owner(c, "o8", -1, (distlock_owner_info *)&g.info), 1);
    assert_string_equal(g.info.label, "sized");
    assert_int_equal(g.info.pid, getpid());
    assert_true(g.info.pttl_ms > 20000 && g.info.pttl_ms <= 30000);
    assert_int_equal(g.info.size, sizeof g.info);
    assert_guard(g.guard, sizeof g.guard);
    /* none (zeroed), and an error return: the same bound */
    memset(&g, GUARD, sizeof g);
    g.info.size = sizeof g.info;
    assert_rc(distlock_admin_owner(c, "o8-free", 1, (distlock_owner_info *)&g.info), 0);
    assert_string_equal(g.info.host, "");
    assert_guard(g.guard, sizeof g.guard);
    memset(&g, GUARD, sizeof g);
    g.info.size = sizeof g.info;
    assert_fails(distlock_admin_owner(c, "o8", 3, (distlock_owner_info *)&g.info),
                 DISTLOCK_EINVAL);
    assert_guard(g.guard, sizeof g.guard);

    memset(&g, GUARD, sizeof g);
    g.info.size = sizeof g.info + 16;
    assert_rc(distlock_admin_owner(c, "o8", 0, (distlock_owner_info *)&g.info), 1);
    assert_string_equal(g.info.label, "sized");
    for (int i = 0; i < 16; i++)
        assert_int_equal(g.guard[i], 0);
    assert_guard(g.guard + 16, sizeof g.guard - 16);

    size_t sizes[] = { 0, sizeof(size_t), offsetof(owner_info_0_1_0, pttl_ms),
                       offsetof(owner_info_0_1_0, pttl_ms) + sizeof(long) - 1 };
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        guarded_owner before;
        memset(&g, GUARD, sizeof g);
        g.info.size = sizes[k];
        before = g;
        assert_fails(distlock_admin_owner(c, "o8", -1, (distlock_owner_info *)&g.info),
                     DISTLOCK_EINVAL);
        print_message("size %zu: \"%s\"\n", sizes[k], distlock_last_error());
        assert_non_null(strstr(distlock_last_error(), "distlock_owner_info.size"));
        assert_non_null(strstr(distlock_last_error(), "sizeof(distlock_owner_info)"));
        assert_memory_equal(&g, &before, sizeof g);  /* not one byte written */
    }
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_stored_with_same_ttl, heal),
        cmocka_unit_test_setup(test_watchdog_renews, heal),
        cmocka_unit_test_setup(test_gone_after_expiry, heal),
        cmocka_unit_test_setup(test_absent_without_option, heal),
        cmocka_unit_test_setup(test_label, heal),
        cmocka_unit_test_setup(test_fair_and_fenced, heal),
        cmocka_unit_test_setup(test_info_size, heal),
        cmocka_unit_test_setup(test_undo_takes_it_back, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
