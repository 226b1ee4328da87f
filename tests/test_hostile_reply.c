/* test_hostile_reply.c -- a broken or hostile node's reply header.
 *
 * hiredis 0.14 sizes an array's element table from its header alone, so a
 * node (or anything between us and it) that sends "*201234552\r\n" would
 * make the client allocate 1.6 GB and then wait for elements that never
 * come (found by tests/fuzz/fuzz_replies). The transport refuses a header
 * above DISTLOCK__REPLY_ELEMENTS_MAX: the call ends in DISTLOCK_EPROTO
 * naming the count, before its timeout, leaves no key behind, and the next
 * call works on a fresh connection.
 * Real redis-servers behind the fault-injecting proxy, which holds the
 * real reply and puts the hostile header in front of it. */
#include <pthread.h>

#include "test_common.h"
#include "test_proxy_cluster.h"

DEFINE_PROXY_GROUP(1)

typedef struct inject_arg {
    proxy_env *e;
    const char *hex;
    int ok;
    char rep[512];
} inject_arg;

/* Once the reply of the call in flight is held: the bytes in front of it,
 * then everything is let through. */
static void *inject_before_reply(void *p)
{
    inject_arg *a = p;
    a->ok = fp_cmd(a->e->fp, a->rep, sizeof a->rep, "wait-held 0 down 1 20000") == 0 &&
            fp_cmd(a->e->fp, a->rep, sizeof a->rep, "inject 0 down %s", a->hex) == 0 &&
            fp_cmd(a->e->fp, a->rep, sizeof a->rep, "unhold 0 down") == 0;
    return NULL;
}

static void huge_header(void **state, const char *header, const char *count)
{
    proxy_env *e = *state;
    distlock_client *c = proxied_client(e);
    /* A long reply timeout: without the cap the call would sit out all of
     * it waiting for the elements and end in ECONN, not EPROTO. */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 20000), DISTLOCK_OK);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "hostile:warm", 10000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);

    char hex[128];
    inject_arg a = { .e = e, .hex = fp_hex(header, hex, sizeof hex) };
    fp_ok(e->fp, "hold 0 down");
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, inject_before_reply, &a), 0);
    int r = distlock_acquire(c, "hostile:key", 10000, 0, 0, &l);
    char err[512];
    snprintf(err, sizeof err, "%s", distlock_last_error());
    pthread_join(th, NULL);
    if (!a.ok) {
        print_error("faultproxy: %s\n", a.rep);
        fail();
    }
    printf("# acquire after %s: %d (%s)\n", count, r, err);
    assert_int_equal(r, DISTLOCK_EPROTO);
    assert_non_null(strstr(err, count));
    assert_non_null(strstr(err, "elements"));

    /* The script ran on the server (its real reply came behind the header):
     * the failed acquire takes its key back. */
    assert_true(RH_WAIT_UNTIL(rh_pttl(e->rc, 0, 0, "hostile:key") == -2, 5000));
    /* and the client goes on, on a new connection */
    assert_rc(distlock_acquire(c, "hostile:key", 10000, 0, 0, &l), DISTLOCK_OK);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_array_header_too_big(void **state)
{
    huge_header(state, "*201234552\r\n", "201234552");
}

/* The cap counts each array: a small outer one with a huge inner one. */
static void test_nested_header_too_big(void **state)
{
    huge_header(state, "*2\r\n:1\r\n*2000000\r\n", "2000000");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_array_header_too_big, heal),
        cmocka_unit_test_setup(test_nested_header_too_big, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
