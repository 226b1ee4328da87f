/* test_reentrant.c -- DISTLOCK_REENTRANT: counted on the client per owner;
 * the server still sees one plain token key. */
#include "test_common.h"

#include <pthread.h>

DEFINE_GROUP(1)

static void test_same_thread_counts(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *a = NULL, *b = NULL, *x = NULL;
    char buf[64];
    assert_rc(distlock_acquire(c, "re", 30000, 0, DISTLOCK_REENTRANT, &a), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "re", 30000, 0, DISTLOCK_REENTRANT, &b), DISTLOCK_OK);
    assert_string_equal(distlock_lock_token(a), distlock_lock_token(b));
    assert_int_equal(rh_get(rc, 0, 0, "re", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(a));
    redisReply *r = rh_command(rc, 0, 0, "TYPE re");
    assert_non_null(r);
    assert_string_equal(r->str, "string");
    freeReplyObject(r);
    /* Without the flag, the same thread is just another contender. */
    assert_rc(distlock_acquire(c, "re", 30000, 0, 0, &x), DISTLOCK_NOTACQUIRED);

    /* The inner release keeps the key; the outer one removes it. */
    assert_rc(distlock_release(b), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "re", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(a));
    assert_fails(distlock_release(b), DISTLOCK_ENOTOWNER);   /* that handle is spent */
    assert_int_equal(rh_get(rc, 0, 0, "re", NULL, 0), 1);
    assert_rc(distlock_release(a), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "re", NULL, 0), 0);
    distlock_lock_free(a);
    distlock_lock_free(b);

    /* Three deep, freed instead of released: still counted. */
    distlock_lock *h[3];
    for (int i = 0; i < 3; i++)
        assert_rc(distlock_acquire(c, "re", 30000, 0, DISTLOCK_REENTRANT, &h[i]), DISTLOCK_OK);
    distlock_lock_free(h[2]);
    distlock_lock_free(h[1]);
    assert_int_equal(rh_get(rc, 0, 0, "re", NULL, 0), 1);
    distlock_lock_free(h[0]);
    assert_int_equal(rh_get(rc, 0, 0, "re", NULL, 0), 0);
    distlock_client_free(c);
}

struct other {
    distlock_client *c;
    distlock_lock *lock;      /* a handle of the main thread's */
    int rc_release, rc_acquire;
};

static void *other_thread(void *arg)
{
    struct other *o = arg;
    distlock_lock *mine = NULL;
    o->rc_acquire = distlock_acquire(o->c, "re2", 30000, 0, DISTLOCK_REENTRANT, &mine);
    if (mine) distlock_lock_free(mine);
    o->rc_release = distlock_release(o->lock);
    return NULL;
}

static void test_other_thread(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *a = NULL, *b = NULL;
    assert_rc(distlock_acquire(c, "re2", 30000, 0, DISTLOCK_REENTRANT, &a), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "re2", 30000, 0, DISTLOCK_REENTRANT, &b), DISTLOCK_OK);
    struct other o = { .c = c, .lock = b };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, other_thread, &o), 0);
    pthread_join(t, NULL);
    /* Another thread is another owner: it neither re-enters nor releases. */
    assert_rc(o.rc_acquire, DISTLOCK_NOTACQUIRED);
    assert_rc(o.rc_release, DISTLOCK_ENOTOWNER);
    assert_int_equal(rh_get(rc, 0, 0, "re2", NULL, 0), 1);
    assert_rc(distlock_release(b), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "re2", NULL, 0), 1);
    assert_rc(distlock_release(a), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "re2", NULL, 0), 0);
    distlock_lock_free(a);
    distlock_lock_free(b);
    distlock_client_free(c);
}

struct owner_arg {
    distlock_client *c;
    int rc;
    distlock_lock *lock;
};

static void *owner_thread(void *arg)
{
    struct owner_arg *o = arg;
    o->rc = acquire_as(o->c, "re3", 30000, 0, DISTLOCK_REENTRANT, "job-7", &o->lock);
    return NULL;
}

/* An explicit owner id is shared across threads. */
static void test_explicit_owner(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *a = NULL, *x = NULL;
    assert_rc(acquire_as(c, "re3", 30000, 0, DISTLOCK_REENTRANT, "job-7", &a),
              DISTLOCK_OK);
    struct owner_arg o = { .c = c };
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, owner_thread, &o), 0);
    pthread_join(t, NULL);
    assert_rc(o.rc, DISTLOCK_OK);
    assert_string_equal(distlock_lock_token(o.lock), distlock_lock_token(a));
    /* A different owner id is refused. */
    assert_rc(acquire_as(c, "re3", 30000, 0, DISTLOCK_REENTRANT, "job-8", &x),
              DISTLOCK_NOTACQUIRED);
    assert_null(x);
    /* A different client (another process, in effect) never re-enters. */
    distlock_client *c2 = new_client(rh_uris(rc));
    assert_rc(acquire_as(c2, "re3", 30000, 0, DISTLOCK_REENTRANT, "job-7", &x),
              DISTLOCK_NOTACQUIRED);
    distlock_client_free(c2);
    assert_rc(distlock_release(o.lock), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "re3", NULL, 0), 1);
    assert_rc(distlock_release(a), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "re3", NULL, 0), 0);
    distlock_lock_free(o.lock);
    distlock_lock_free(a);
    distlock_client_free(c);
}

/* Extending through one handle refreshes the shared ownership. */
static void test_reentrant_extend(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_lock *a = NULL, *b = NULL;
    assert_rc(distlock_acquire(c, "re4", 2000, 0, DISTLOCK_REENTRANT, &a), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "re4", 2000, 0, DISTLOCK_REENTRANT, &b), DISTLOCK_OK);
    assert_rc(distlock_extend(b, 60000), DISTLOCK_OK);
    assert_true(rh_pttl(rc, 0, 0, "re4") > 2000);
    assert_true(distlock_lock_validity_ms(a) > 2000);
    distlock_lock_free(b);
    distlock_lock_free(a);
    assert_int_equal(rh_get(rc, 0, 0, "re4", NULL, 0), 0);
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_same_thread_counts, heal),
        cmocka_unit_test_setup(test_other_thread, heal),
        cmocka_unit_test_setup(test_explicit_owner, heal),
        cmocka_unit_test_setup(test_reentrant_extend, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
