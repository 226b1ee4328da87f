/* test_holder.c -- distlock_admin_holder(): who holds a key, on how many
 * nodes, for how long, from one round to every node (node -1) or from one
 * node alone; its growable distlock_holder_info (a size too small refused,
 * nothing written past the caller's size) and the names of its kinds
 * (distlock_holder_kind_name()); distlock_admin_scan() and
 * distlock_admin_fence() (what `distlock list` and `status --json` read);
 * and distlock_ttl_from_seconds(), the one seconds-to-milliseconds TTL rule
 * of every front end.
 *
 * Three real nodes; the one-node cases use node 0 alone. Keys are written
 * behind the library's back (rh_set, HSET) to make each picture. */
#include <math.h>

#include "test_common.h"

#define N 3
DEFINE_GROUP(N)

#define TOK_BUF (DISTLOCK_TOKEN_MAX + 1)

typedef struct seen {
    int rc, nodes, answered, taken;
    long pttl;
    char token[TOK_BUF];
} seen;

/* distlock_admin_holder(c, key, node) with every field of its info
 * pre-filled with garbage: each must be written. */
static seen holder_of(distlock_client *c, const char *key, int node)
{
    seen s;
    distlock_holder_info h;
    memset(&h, 0x55, sizeof h);
    h.size = sizeof h;
    s.rc = distlock_admin_holder(c, key, node, &h);
    assert_int_equal(h.size, sizeof h);  /* the caller's, never changed */
    s.nodes = h.nodes;
    s.answered = h.answered;
    s.taken = h.taken;
    s.pttl = h.pttl_ms;
    assert_non_null(memchr(h.token, '\0', sizeof h.token));
    memcpy(s.token, h.token, sizeof s.token);
    return s;
}

/* The verdict of every node. */
static seen holder(distlock_client *c, const char *key)
{
    return holder_of(c, key, -1);
}

static distlock_client *client_of(rh_cluster *rc, unsigned mask, long timeout_ms)
{
    char buf[512];
    distlock_client *c = new_client(rh_uris_mask(rc, mask, buf, sizeof buf));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, timeout_ms), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, timeout_ms), DISTLOCK_OK);
    return c;
}

static void make_wrongtype(rh_cluster *rc, int i, const char *key)
{
    redisReply *r = rh_command(rc, i, 0, "HSET %s field value", key);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
}

/* ------------------------------------------------------------ one node */

static void test_one_node(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_of(rc, 0x1, 1000);
    seen s = holder(c, "h1");
    assert_rc(s.rc, 0);
    assert_string_equal(s.token, "");
    assert_int_equal(s.nodes, 0);
    assert_int_equal(s.pttl, 0);
    assert_int_equal(s.answered, 1);
    assert_int_equal(s.taken, 0);

    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "h1", 30000, 0, 0, &l), DISTLOCK_OK);
    s = holder(c, "h1");
    assert_rc(s.rc, 1);
    assert_string_equal(s.token, distlock_lock_token(l));
    assert_int_equal(s.nodes, 1);
    assert_true(s.pttl > 20000 && s.pttl <= 30000);
    assert_int_equal(s.answered, 1);
    assert_int_equal(s.taken, 1);
    /* node 0 alone says the same; no info wanted: the answer alone */
    s = holder_of(c, "h1", 0);
    assert_rc(s.rc, 1);
    assert_string_equal(s.token, distlock_lock_token(l));
    assert_int_equal(s.nodes, 1);
    assert_true(s.pttl > 20000 && s.pttl <= 30000);
    assert_int_equal(s.answered, 1);
    assert_int_equal(s.taken, 1);
    assert_rc(distlock_admin_holder(c, "h1", -1, NULL), 1);
    assert_rc(distlock_admin_holder(c, "h1", 0, NULL), 1);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    assert_rc(holder(c, "h1").rc, 0);

    /* a foreign lock without expiry */
    assert_int_equal(rh_set(rc, 0, 0, "h1", "php:42", 0), 0);
    s = holder(c, "h1");
    assert_rc(s.rc, 1);
    assert_string_equal(s.token, "php:42");
    assert_int_equal(s.pttl, -1);

    /* a key of another type: someone else's, answered, no token, no error */
    make_wrongtype(rc, 0, "h1w");
    s = holder(c, "h1w");
    assert_rc(s.rc, 0);
    assert_string_equal(s.token, "");
    assert_int_equal(s.nodes, 0);
    assert_int_equal(s.answered, 1);
    assert_int_equal(s.taken, 1);

    /* the one node hung: its own error, ECONN */
    assert_int_equal(rh_pause(rc, 0), 0);
    s = holder(c, "h1");
    assert_int_equal(s.answered, 0);
    assert_fails(s.rc, DISTLOCK_ECONN);
    assert_int_equal(rh_resume(rc, 0), 0);
    distlock_client_free(c);
}

static void test_bad_input(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_of(rc, 0x1, 1000);
    seen s = holder_of(NULL, "k", -1);
    assert_fails(s.rc, DISTLOCK_EINVAL);
    assert_int_equal(s.nodes, 0);  /* zeroed on every return */
    assert_string_equal(s.token, "");
    assert_fails(distlock_admin_holder(c, "", -1, NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_holder(c, NULL, -1, NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_holder(c, "k", 1, NULL), DISTLOCK_EINVAL);  /* one node: 0 */
    assert_fails(distlock_admin_holder(c, "k", -2, NULL), DISTLOCK_EINVAL);
    assert_non_null(strstr(distlock_last_error(), "node -2 out of range -1..0"));
    distlock_client_free(c);
}

/* ------------------------------------------------------------ three nodes */

static void test_three_free_and_held(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_of(rc, 0x7, 1000);
    seen s = holder(c, "h3");
    assert_rc(s.rc, 0);
    assert_string_equal(s.token, "");
    assert_int_equal(s.answered, 3);
    assert_int_equal(s.taken, 0);

    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "h3", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_holding(rc, "h3", distlock_lock_token(l), 3);
    s = holder(c, "h3");
    assert_rc(s.rc, 1);
    assert_string_equal(s.token, distlock_lock_token(l));
    assert_int_equal(s.nodes, 3);
    assert_int_equal(s.answered, 3);
    assert_int_equal(s.taken, 3);
    assert_true(s.pttl > 20000 && s.pttl <= 30000);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_three_quorum_and_minority(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_of(rc, 0x7, 1000);
    /* on 2 of 3: held; pttl is the shorter of the two */
    assert_int_equal(rh_set(rc, 0, 0, "h2", "tokA", 50000), 0);
    assert_int_equal(rh_set(rc, 2, 0, "h2", "tokA", 20000), 0);
    seen s = holder(c, "h2");
    assert_rc(s.rc, 1);
    assert_string_equal(s.token, "tokA");
    assert_int_equal(s.nodes, 2);
    assert_int_equal(s.taken, 2);
    assert_true(s.pttl > 10000 && s.pttl <= 20000);
    /* no expiry on one of them: the other's TTL is the shortest */
    assert_int_equal(rh_set(rc, 2, 0, "h2", "tokA", 0), 0);
    s = holder(c, "h2");
    assert_rc(s.rc, 1);
    assert_true(s.pttl > 40000 && s.pttl <= 50000);
    assert_int_equal(rh_set(rc, 0, 0, "h2", "tokA", 0), 0);
    assert_int_equal(holder(c, "h2").pttl, -1);

    /* on 1 of 3: not held, the token is still named */
    assert_int_equal(rh_del(rc, 2, 0, "h2"), 1);
    s = holder(c, "h2");
    assert_rc(s.rc, 0);
    assert_string_equal(s.token, "tokA");
    assert_int_equal(s.nodes, 1);
    assert_int_equal(s.answered, 3);
    assert_int_equal(s.taken, 1);
    distlock_client_free(c);
}

static void test_three_split(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_of(rc, 0x7, 1000);
    assert_int_equal(rh_set(rc, 0, 0, "hs", "tokA", 30000), 0);
    assert_int_equal(rh_set(rc, 1, 0, "hs", "tokB", 30000), 0);
    assert_int_equal(rh_set(rc, 2, 0, "hs", "tokC", 30000), 0);
    seen s = holder(c, "hs");
    assert_rc(s.rc, 0);
    assert_string_equal(s.token, "tokA");  /* a tie: the first in node order */
    assert_int_equal(s.nodes, 1);
    assert_int_equal(s.answered, 3);
    assert_int_equal(s.taken, 3);
    /* a majority token that is no quorum is still the one named */
    assert_int_equal(rh_set(rc, 0, 0, "hs", "tokC", 30000), 0);
    assert_int_equal(rh_del(rc, 1, 0, "hs"), 1);
    s = holder(c, "hs");
    assert_rc(s.rc, 1);
    assert_string_equal(s.token, "tokC");
    assert_int_equal(s.nodes, 2);
    distlock_client_free(c);
}

static void test_three_wrongtype(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_of(rc, 0x7, 1000);
    for (int i = 0; i < N; i++)
        make_wrongtype(rc, i, "hw");
    seen s = holder(c, "hw");
    assert_rc(s.rc, 0);
    assert_string_equal(s.token, "");
    assert_int_equal(s.answered, 3);
    assert_int_equal(s.taken, 3);
    /* one node of another type, a token on the two others: held */
    assert_int_equal(rh_del(rc, 1, 0, "hw"), 1);
    assert_int_equal(rh_del(rc, 2, 0, "hw"), 1);
    assert_int_equal(rh_set(rc, 1, 0, "hw", "tokA", 30000), 0);
    assert_int_equal(rh_set(rc, 2, 0, "hw", "tokA", 30000), 0);
    s = holder(c, "hw");
    assert_rc(s.rc, 1);
    assert_string_equal(s.token, "tokA");
    assert_int_equal(s.nodes, 2);
    assert_int_equal(s.taken, 3);
    distlock_client_free(c);
}

static void test_three_one_stopped(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_of(rc, 0x7, 500);
    assert_rc(holder(c, "hx").rc, 0);  /* connections made */
    for (int i = 0; i < N; i++)
        assert_int_equal(rh_set(rc, i, 0, "hx", "tokA", 30000), 0);
    assert_int_equal(rh_pause(rc, 2), 0);
    /* held on the two that answer: a verdict */
    seen s = holder(c, "hx");
    assert_rc(s.rc, 1);
    assert_string_equal(s.token, "tokA");
    assert_int_equal(s.nodes, 2);
    assert_int_equal(s.answered, 2);
    /* free on both that answer: the silent one cannot make a quorum */
    s = holder(c, "hx-free");
    assert_rc(s.rc, 0);
    assert_int_equal(s.answered, 2);
    /* one token on one of the two: the silent node decides -> no verdict */
    assert_int_equal(rh_del(rc, 1, 0, "hx"), 1);
    s = holder(c, "hx");
    assert_fails(s.rc, DISTLOCK_ENOQUORUM);
    assert_non_null(strstr(distlock_last_error(), "2 of 3 nodes answered"));
    assert_string_equal(s.token, "tokA");
    assert_int_equal(s.nodes, 1);
    assert_int_equal(s.answered, 2);
    assert_int_equal(rh_resume(rc, 2), 0);
    distlock_client_free(c);
}

static void test_three_two_stopped(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_of(rc, 0x7, 1000);
    assert_rc(holder(c, "hy").rc, 0);  /* connections made: the command timeout applies */
    for (int i = 0; i < N; i++)
        assert_int_equal(rh_set(rc, i, 0, "hy", "tokA", 30000), 0);
    assert_int_equal(rh_pause(rc, 1), 0);
    assert_int_equal(rh_pause(rc, 2), 0);
    long long t0 = rh_now_ms();
    seen s = holder(c, "hy");
    long long took = rh_now_ms() - t0;
    assert_fails(s.rc, DISTLOCK_ENOQUORUM);
    assert_int_equal(s.answered, 1);
    assert_int_equal(s.nodes, 1);
    /* one round: the two silent nodes cost one timeout together, not two */
    print_message("holder with 2 of 3 nodes hung (1 s timeout): %lld ms\n", took);
    assert_true(took < 1800);
    assert_int_equal(rh_resume(rc, 1), 0);
    assert_int_equal(rh_resume(rc, 2), 0);
    distlock_client_free(c);
}

/* node = i: that node alone, whatever the others hold or whether they
 * answer. */
static void test_three_each_node(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_of(rc, 0x7, 500);
    assert_int_equal(rh_set(rc, 0, 0, "he", "tokA", 0), 0);
    make_wrongtype(rc, 1, "he");
    seen s = holder_of(c, "he", 0);
    assert_rc(s.rc, 1);
    assert_string_equal(s.token, "tokA");
    assert_int_equal(s.nodes, 1);
    assert_int_equal(s.pttl, -1);
    assert_int_equal(s.answered, 1);
    assert_int_equal(s.taken, 1);
    /* another type: taken, answered, no token, no error */
    s = holder_of(c, "he", 1);
    assert_rc(s.rc, 0);
    assert_string_equal(s.token, "");
    assert_int_equal(s.nodes, 0);
    assert_int_equal(s.pttl, 0);
    assert_int_equal(s.answered, 1);
    assert_int_equal(s.taken, 1);
    s = holder_of(c, "he", 2);
    assert_rc(s.rc, 0);
    assert_int_equal(s.answered, 1);
    assert_int_equal(s.taken, 0);
    /* a hung node: its own error; the others are not asked */
    assert_int_equal(rh_pause(rc, 2), 0);
    s = holder_of(c, "he", 2);
    assert_fails(s.rc, DISTLOCK_ECONN);
    assert_int_equal(s.answered, 0);
    assert_rc(holder_of(c, "he", 0).rc, 1);
    assert_int_equal(rh_resume(rc, 2), 0);
    distlock_client_free(c);
}

/* ------------------------------------------------------------ the info's size */

/* distlock_holder_info as 0.1.0 declares it: what a program built against
 * 0.1.0 passes to every later library, whatever later headers add. */
typedef struct holder_info_0_1_0 {
    size_t size;
    char token[DISTLOCK_TOKEN_MAX + 1];
    int nodes;
    long pttl_ms;
    int answered;
    int taken;
} holder_info_0_1_0;
/* ... which is today's header's, field for field */
_Static_assert(offsetof(holder_info_0_1_0, token) == offsetof(distlock_holder_info, token) &&
               offsetof(holder_info_0_1_0, nodes) == offsetof(distlock_holder_info, nodes) &&
               offsetof(holder_info_0_1_0, pttl_ms) == offsetof(distlock_holder_info, pttl_ms) &&
               offsetof(holder_info_0_1_0, answered) == offsetof(distlock_holder_info, answered) &&
               offsetof(holder_info_0_1_0, taken) == offsetof(distlock_holder_info, taken),
               "distlock_holder_info no longer starts with its 0.1.0 layout");

#define GUARD 0xA5
#define GUARD_BYTES 64

/* The 0.1.0 struct with guard bytes right after it. */
typedef struct guarded_holder {
    holder_info_0_1_0 info;
    unsigned char guard[GUARD_BYTES];
} guarded_holder;

static void assert_guard(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != GUARD) {
            print_error("byte %zu past the caller's size was written: 0x%02x\n", i, p[i]);
            fail();
        }
}

/* Size = the 0.1.0 layout: every field filled, not one byte after it. */
static void test_info_written_within_size(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_of(rc, 0x7, 1000);
    distlock_lock *l = NULL;
    /* the fields below are about all three nodes: a first round may end at
     * the quorum before the third connection is up, so connect first */
    connect_every_node(rc, c, "hz:connect");
    assert_rc(distlock_acquire(c, "hz", 30000, 0, 0, &l), DISTLOCK_OK);
    /* the acquire returns at a quorum; its third request may still be on
     * the way (valgrind's pace) */
    assert_holding(rc, "hz", distlock_lock_token(l), 3);
    guarded_holder g;
    memset(&g, GUARD, sizeof g);
    g.info.size = sizeof g.info;
    assert_rc(distlock_admin_holder(c, "hz", -1, (distlock_holder_info *)&g.info), 1);
    assert_string_equal(g.info.token, distlock_lock_token(l));
    assert_int_equal(g.info.nodes, 3);
    assert_true(g.info.pttl_ms > 20000 && g.info.pttl_ms <= 30000);
    assert_int_equal(g.info.answered, 3);
    assert_int_equal(g.info.taken, 3);
    assert_int_equal(g.info.size, sizeof g.info);
    assert_guard(g.guard, sizeof g.guard);
    /* one node, and an error return (zeroed fields): the same bound */
    memset(&g, GUARD, sizeof g);
    g.info.size = sizeof g.info;
    assert_rc(distlock_admin_holder(c, "hz", 2, (distlock_holder_info *)&g.info), 1);
    assert_string_equal(g.info.token, distlock_lock_token(l));
    assert_guard(g.guard, sizeof g.guard);
    memset(&g, GUARD, sizeof g);
    g.info.size = sizeof g.info;
    assert_fails(distlock_admin_holder(c, "hz", 3, (distlock_holder_info *)&g.info),
                 DISTLOCK_EINVAL);
    assert_int_equal(g.info.nodes, 0);
    assert_guard(g.guard, sizeof g.guard);

    /* a later header's bigger struct: this version's fields (those added
     * after 0.1.0 too: kind...), zeros after them up to its size, nothing
     * past it */
    struct { distlock_holder_info info; unsigned char guard[GUARD_BYTES]; } g2;
    memset(&g2, GUARD, sizeof g2);
    g2.info.size = sizeof g2.info + 16;
    assert_rc(distlock_admin_holder(c, "hz", -1, &g2.info), 1);
    assert_string_equal(g2.info.token, distlock_lock_token(l));
    assert_int_equal(g2.info.kind, DISTLOCK_HOLDER_LOCK);
    for (int i = 0; i < 16; i++)
        assert_int_equal(g2.guard[i], 0);
    assert_guard(g2.guard + 16, sizeof g2.guard - 16);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);
}

/* A size smaller than the 0.1.0 layout (a caller that forgot it, or a
 * struct of some other type): refused, with a detail that says how to set
 * it, before anything is written or sent. */
static void test_info_size_too_small(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_of(rc, 0x7, 1000);
    size_t sizes[] = { 0, sizeof(size_t), offsetof(holder_info_0_1_0, taken),
                       offsetof(holder_info_0_1_0, taken) + sizeof(int) - 1 };
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        guarded_holder g, before;
        memset(&g, GUARD, sizeof g);
        g.info.size = sizes[k];
        before = g;
        assert_fails(distlock_admin_holder(c, "hz", -1, (distlock_holder_info *)&g.info),
                     DISTLOCK_EINVAL);
        print_message("size %zu: \"%s\"\n", sizes[k], distlock_last_error());
        assert_non_null(strstr(distlock_last_error(), "distlock_holder_info.size"));
        assert_non_null(strstr(distlock_last_error(), "sizeof(distlock_holder_info)"));
        assert_memory_equal(&g, &before, sizeof g);  /* not one byte written */
    }
    distlock_client_free(c);
}

/* ------------------------------------------------------------ kind names */

/* The name of what the verdict found on `key` (every node). */
static const char *kind_seen(distlock_client *c, const char *key, int want_rc)
{
    distlock_holder_info h = { .size = sizeof h };
    assert_rc(distlock_admin_holder(c, key, -1, &h), want_rc);
    return distlock_holder_kind_name(h.kind);
}

/* distlock_holder_kind_name(): each kind of the enum has the name every
 * front end prints; any other int is "other", never NULL; the same static
 * string every time; distlock_last_error() left alone. Then the names of
 * real keys: free, a lock, read locks, a semaphore, a value of another
 * type. */
static void test_kind_names(void **state)
{
    static const struct { int kind; const char *name; } known[] = {
        { DISTLOCK_HOLDER_FREE, "free" },       { DISTLOCK_HOLDER_LOCK, "lock" },
        { DISTLOCK_HOLDER_READERS, "readers" }, { DISTLOCK_HOLDER_SEMAPHORE, "semaphore" },
        { DISTLOCK_HOLDER_OTHER, "other" },
    };
    for (size_t k = 0; k < sizeof known / sizeof *known; k++) {
        const char *name = distlock_holder_kind_name(known[k].kind);
        assert_non_null(name);
        assert_string_equal(name, known[k].name);
        assert_ptr_equal(name, distlock_holder_kind_name(known[k].kind));
    }
    static const int outside[] = { -1, DISTLOCK_HOLDER_OTHER + 1, 100, INT32_MIN, INT32_MAX };
    for (size_t k = 0; k < sizeof outside / sizeof *outside; k++) {
        const char *name = distlock_holder_kind_name(outside[k]);
        assert_non_null(name);
        assert_string_equal(name, "other");
    }
    /* no call of its own: the detail of the caller's last failure stays */
    assert_fails(distlock_admin_holder(NULL, "k", -1, NULL), DISTLOCK_EINVAL);
    char detail[256];
    snprintf(detail, sizeof detail, "%s", distlock_last_error());
    distlock_holder_kind_name(DISTLOCK_HOLDER_LOCK);
    distlock_holder_kind_name(-1);
    assert_string_equal(distlock_last_error(), detail);

    rh_cluster *rc = *state;
    distlock_client *c = client_of(rc, 0x7, 1000);
    distlock_lock *l = NULL, *r = NULL, *s = NULL;
    assert_string_equal(kind_seen(c, "hk:free", 0), "free");
    assert_rc(distlock_acquire(c, "hk:lock", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_string_equal(kind_seen(c, "hk:lock", 1), "lock");
    assert_rc(distlock_acquire(c, "hk:read", 30000, 0, DISTLOCK_SHARED, &r), DISTLOCK_OK);
    assert_string_equal(kind_seen(c, "hk:read", 0), "readers");
    assert_rc(distlock_semaphore_acquire(c, "hk:sem", 2, 30000, 0, 0, NULL, &s), DISTLOCK_OK);
    assert_string_equal(kind_seen(c, "hk:sem", 0), "semaphore");
    for (int i = 0; i < N; i++)
        make_wrongtype(rc, i, "hk:hash");
    assert_string_equal(kind_seen(c, "hk:hash", 0), "other");
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_rc(distlock_release(r), DISTLOCK_OK);
    assert_rc(distlock_release(s), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_lock_free(r);
    distlock_lock_free(s);
    distlock_client_free(c);
}

/* ------------------------------------------------------------ the TTL rule */

static void ttl_ok(double s, long want)
{
    long ms = -5;
    int rc = distlock_ttl_from_seconds(s, &ms);
    if (rc != DISTLOCK_OK || ms != want) {
        print_error("ttl_from_seconds(%.17g) = %d, %ld ms; expected %ld ms (%s)\n", s, rc, ms,
                    want, distlock_last_error());
        fail();
    }
}

static void ttl_bad(double s, const char *named)
{
    long ms = -5;
    assert_fails(distlock_ttl_from_seconds(s, &ms), DISTLOCK_EINVAL);
    assert_int_equal(ms, -5);
    if (!strstr(distlock_last_error(), named)) {
        print_error("detail \"%s\" does not name %s\n", distlock_last_error(), named);
        fail();
    }
}

static void test_ttl_rule(void **state)
{
    (void)state;
    ttl_ok(0.0001, 1);        /* rounded up: never shorter than asked */
    ttl_ok(1.0005, 1001);
    ttl_ok(0.001, 1);
    ttl_ok(0.07, 70);         /* 70.00000000000001 in doubles: still 70 */
    ttl_ok(1.0, 1000);
    ttl_ok(30, 30000);
    ttl_ok(5e-324, 1);
    ttl_ok(2147483.647, DISTLOCK_TTL_MAX);
    ttl_bad(2147483.6471, "2147483.6471");
    ttl_bad(1e300, "1e+300");
    ttl_bad(0.0, "got 0");
    ttl_bad(-1.5, "got -1.5");
    ttl_bad(NAN, "nan");
    ttl_bad(INFINITY, "inf");
    ttl_bad(-INFINITY, "-inf");
    assert_fails(distlock_ttl_from_seconds(1.0, NULL), DISTLOCK_EINVAL);
}

/* The rule's result is the lease on the server. */
static void test_ttl_rule_on_server(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_of(rc, 0x1, 1000);
    long ms = 0;
    assert_rc(distlock_ttl_from_seconds(1.0005, &ms), DISTLOCK_OK);
    assert_rc(distlock_acquire_token(c, "httl", ms, "tok", 0, NULL), DISTLOCK_OK);
    long long p = rh_pttl(rc, 0, 0, "httl");
    print_message("1.0005 s -> %ld ms; PTTL right after: %lld\n", ms, p);
    assert_true(p > 900 && p <= 1001);
    distlock_client_free(c);
}

/* ------------------------------------------------------------ scan, fence */

typedef struct found { int n, stop_at; char keys[64][64]; } found;

static int collect(const char *key, size_t len, void *arg)
{
    found *f = arg;
    assert_true(len < sizeof f->keys[0] && strlen(key) == len);
    if (f->n < 64)
        memcpy(f->keys[f->n], key, len + 1);
    f->n++;
    return f->stop_at > 0 && f->n >= f->stop_at;
}

static int has_key(const found *f, const char *k)
{
    for (int i = 0; i < f->n && i < 64; i++)
        if (!strcmp(f->keys[i], k))
            return 1;
    return 0;
}

/* Strings that match, in COUNT-bounded steps to cursor 0; never other types,
 * never a fence counter; a nonzero return ends the step. */
static void test_scan(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = client_of(rc, 0x7, 1000);
    char key[32];
    for (int i = 0; i < 30; i++) {
        snprintf(key, sizeof key, "sc:%d", i);
        assert_int_equal(rh_set(rc, 1, 0, key, "tok", 30000), 0);
    }
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "other:%d", i);
        assert_int_equal(rh_set(rc, 1, 0, key, "x", 0), 0);
    }
    make_wrongtype(rc, 1, "sc:hash");
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "sc:fenced", 30000, 0, DISTLOCK_FENCING, &l), DISTLOCK_OK);
    assert_int_equal(rh_set(rc, 1, 0, "sc:{t}x:fence", "5", 0), 0); /* sc:{t}x's counter */
    assert_int_equal(rh_set(rc, 1, 0, "sc:plain:fence", "a lock", 0), 0); /* a lock key */

    found f = {0};
    unsigned long long cursor = 0;
    int steps = 0, total = 0, r;
    do {
        r = distlock_admin_scan(c, 1, "sc:*", 10, &cursor, collect, &f);
        assert_true(r >= 0);
        total += r;
        steps++;
    } while (cursor != 0 && steps < 1000);
    print_message("scan of 233 keys, COUNT 10: %d steps, %d keys given\n", steps, total);
    assert_int_equal(cursor, 0);
    assert_true(steps >= 10);  /* COUNT-bounded: many steps, not one */
    assert_int_equal(total, f.n);
    assert_true(has_key(&f, "sc:0") && has_key(&f, "sc:29") && has_key(&f, "sc:fenced"));
    assert_true(has_key(&f, "sc:plain:fence"));
    assert_false(has_key(&f, "sc:hash"));          /* TYPE string */
    assert_false(has_key(&f, "{sc:fenced}:fence")); /* no MATCH anyway */
    assert_false(has_key(&f, "sc:{t}x:fence"));     /* a fence counter */
    assert_int_equal(f.n, 32);  /* 30 + sc:fenced + sc:plain:fence (no repeats here) */

    /* The fence counter of sc:fenced ({sc:fenced}:fence) is never given,
     * though it is a string the pattern matches; fn may be NULL. */
    assert_int_equal(rh_set(rc, 1, 0, "{sc:x}", "a lock", 0), 0);
    /* Nor is the registry of writers waiting for read locks of sc:rw
     * ({sc:rw}:writers): a zset of tokens scored by expiry, which would
     * read as read locks. */
    redisReply *zr = rh_command(rc, 1, 0, "ZADD {sc:rw}:writers 9999999999999 abc123");
    assert_non_null(zr);
    assert_int_equal(zr->type, REDIS_REPLY_INTEGER);
    freeReplyObject(zr);
    cursor = 0;
    int counters = 0;
    do {
        found g = {0};
        r = distlock_admin_scan(c, 1, "{*", 1000, &cursor, collect, &g);
        assert_true(r >= 0);
        counters += g.n;
        assert_false(has_key(&g, "{sc:fenced}:fence"));
        assert_false(has_key(&g, "{sc:rw}:writers"));
    } while (cursor != 0);
    assert_int_equal(counters, 1);  /* {sc:x} only */
    cursor = 0;
    do {
        assert_true(distlock_admin_scan(c, 1, NULL, 1000, &cursor, NULL, NULL) >= 0);
    } while (cursor != 0);

    /* stop early: fn's nonzero return ends the step */
    found one = {.stop_at = 1};
    cursor = 0;
    do {
        r = distlock_admin_scan(c, 1, "sc:*", 1000, &cursor, collect, &one);
        assert_true(r >= 0 && r <= 1);
    } while (cursor != 0 && one.n == 0);
    assert_int_equal(one.n, 1);

    /* fence counters, per node */
    int64_t fence = -7;
    for (int i = 0; i < N; i++) {
        assert_rc(distlock_admin_fence(c, "sc:fenced", i, &fence), 1);
        assert_int_equal(fence, distlock_lock_fence(l));
    }
    assert_rc(distlock_admin_fence(c, "sc:0", 1, &fence), 0);
    assert_int_equal(fence, 0);
    assert_rc(distlock_admin_fence(c, "sc:{t}x", 1, &fence), 1);
    assert_int_equal(fence, 5);
    assert_int_equal(rh_set(rc, 0, 0, "{sc:bad}:fence", "x", 0), 0);
    assert_fails(distlock_admin_fence(c, "sc:bad", 0, &fence), DISTLOCK_EPROTO);
    assert_non_null(strstr(distlock_last_error(), "not an integer"));

    /* bad input */
    cursor = 0;
    assert_fails(distlock_admin_scan(NULL, 0, "*", 10, &cursor, NULL, NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_scan(c, 3, "*", 10, &cursor, NULL, NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_scan(c, -1, "*", 10, &cursor, NULL, NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_scan(c, 0, "*", 0, &cursor, NULL, NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_scan(c, 0, "*", 100001, &cursor, NULL, NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_scan(c, 0, "", 10, &cursor, NULL, NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_scan(c, 0, "*", 10, NULL, NULL, NULL), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_fence(c, "", 0, &fence), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_fence(c, "k", 5, &fence), DISTLOCK_EINVAL);
    assert_fails(distlock_admin_fence(NULL, "k", 0, &fence), DISTLOCK_EINVAL);

    /* a stopped node: its own error, bounded by the timeout */
    assert_int_equal(rh_pause(rc, 2), 0);
    cursor = 0;
    assert_fails(distlock_admin_scan(c, 2, "*", 10, &cursor, NULL, NULL), DISTLOCK_ECONN);
    assert_fails(distlock_admin_fence(c, "sc:fenced", 2, &fence), DISTLOCK_ECONN);
    assert_int_equal(rh_resume(rc, 2), 0);

    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_one_node, heal),
        cmocka_unit_test_setup(test_bad_input, heal),
        cmocka_unit_test_setup(test_three_free_and_held, heal),
        cmocka_unit_test_setup(test_three_quorum_and_minority, heal),
        cmocka_unit_test_setup(test_three_split, heal),
        cmocka_unit_test_setup(test_three_wrongtype, heal),
        cmocka_unit_test_setup(test_three_one_stopped, heal),
        cmocka_unit_test_setup(test_three_two_stopped, heal),
        cmocka_unit_test_setup(test_three_each_node, heal),
        cmocka_unit_test_setup(test_info_written_within_size, heal),
        cmocka_unit_test_setup(test_info_size_too_small, heal),
        cmocka_unit_test_setup(test_kind_names, heal),
        cmocka_unit_test(test_ttl_rule),
        cmocka_unit_test_setup(test_ttl_rule_on_server, heal),
        cmocka_unit_test_setup(test_scan, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
