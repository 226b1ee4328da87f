/* test_writer_lease_at_handout.c -- the blocking distlock_acquire() hands
 * out a lock whose lease still runs (distlock.h: a grant that comes after
 * its ttl was used up is undone and tried again, never handed out).
 *
 * A writer (exclusive acquire) that waited for read locks wins the key, then
 * leaves the registry of waiting writers; that request is held at the fault
 * proxy until the lease it won has ended on the server (observed: the key is
 * gone), then let through. The call must not return DISTLOCK_OK with a
 * handle whose lease is already over. The writer's call runs in a thread of
 * its own; the readers use another client. One node behind the proxy. */
#include "test_common.h"

#include "harness/faultproxy.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* the writer's lease: short, so that it ends while its leave is held */
#define LEASE_MS 400

typedef struct env {
    rh_cluster *rc;
    fp_proxy *fp;
} env;

typedef struct writer {
    distlock_client *c;
    const char *key;
    int rc;
    char err[512];
    distlock_lock *l;
} writer;

static int group_setup(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    static env e;
    if ((e.rc = rh_start(1)) == NULL || (e.fp = fp_front(e.rc)) == NULL)
        return -1;
    *state = &e;
    return 0;
}

static int group_teardown(void **state)
{
    env *e = *state;
    fp_stop(e->fp);
    rh_stop_all(e->rc);
    return 0;
}

static void *writer_main(void *arg)
{
    writer *w = arg;
    w->rc = distlock_acquire(w->c, w->key, LEASE_MS, 20000, 0, &w->l);
    snprintf(w->err, sizeof(w->err), "%s", w->rc ? distlock_last_error() : "");
    return NULL;
}

/* until k exists (want 1) or is gone (want 0) on the server; fail after 10 s */
static void until_exists(env *e, const char *k, int want)
{
    long long end = rh_now_ms() + 10000;
    for (;;) {
        redisReply *r = rh_command(e->rc, 0, 0, "EXISTS %s", k);
        int there = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        freeReplyObject(r);
        if (there == want)
            return;
        if (rh_now_ms() > end) {
            print_error("%s never %s\n", k, want ? "appeared" : "went");
            fail();
        }
        (void)poll(NULL, 0, 5);  /* the interval between looks (the deadline decides) */
    }
}

static void test_blocking_writer_not_handed_out_after_its_lease_ended(void **state)
{
    env *e = *state;
    const char *key = "bwl:late";
    char wk[128], pattern[256], hex[600];
    distlock_client *readers = NULL;
    distlock_lock *r = NULL;
    writer w;
    memset(&w, 0, sizeof(w));
    w.key = key;
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "heal"), 0);
    assert_rc(distlock_client_new(fp_uris(e->fp), &w.c), DISTLOCK_OK);
    /* the held leave must outlast the lease, not the node's budget */
    assert_rc(distlock_client_set(w.c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 10000), DISTLOCK_OK);
    assert_rc(distlock_client_new(rh_uris(e->rc), &readers), DISTLOCK_OK);
    assert_rc(distlock_acquire(readers, key, 30000, 0, DISTLOCK_SHARED, &r), DISTLOCK_OK);

    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, writer_main, &w), 0);
    snprintf(wk, sizeof(wk), "{%s}:writers", key);
    until_exists(e, wk, 1);  /* the writer waits, registered */
    /* only the leave carries the registry followed by the channel */
    snprintf(pattern, sizeof(pattern), "{%s}:writers\r\n$%zu\r\ndistlock:%s\r\n", key,
             9 + strlen(key), key);
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "hold-match 0 up %s",
                            fp_hex(pattern, hex, sizeof(hex))), 0);
    assert_rc(distlock_release(r), DISTLOCK_OK);
    distlock_lock_free(r);
    /* the writer won and its leave is held; then its lease ends on the server */
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "wait-held 0 up 1 10000"), 0);
    until_exists(e, key, 0);
    assert_int_equal(fp_cmd(e->fp, NULL, 0, "heal"), 0);
    assert_int_equal(pthread_join(t, NULL), 0);

    long validity = w.l ? distlock_lock_validity_ms(w.l) : -1;
    long long pttl = rh_pttl(e->rc, 0, 0, key);
    printf("blocking writer returned %d (%s) \"%s\"; validity %ld ms, key pttl %lld\n", w.rc,
           distlock_strerror(w.rc), w.err, validity, pttl);
    distlock_lock_free(w.l);
    distlock_client_free(readers);
    distlock_client_free(w.c);
    /* either not handed out, or handed out while it is still held */
    if (w.rc == DISTLOCK_OK) {
        assert_true(validity > 0);
        assert_true(pttl > 0);
    } else {
        assert_int_equal(w.rc, DISTLOCK_ETIMEDOUT);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocking_writer_not_handed_out_after_its_lease_ended),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
