/* test_review_a_password.c -- review item 5: distlock_client_set_str(c,
 * DISTLOCK_OPT_PASSWORD, ...), documented thread-safe, while other threads
 * make fresh connections. set_str freed the old password under the client
 * mutex while a connection handshake on another thread read it without the
 * mutex: a use-after-free (ASan), a data race (TSan), and in a plain build
 * now and then an AUTH with garbage (WRONGPASS). Fixed: every operation
 * succeeds and the sanitizers are quiet. (Its own file: a sanitizer report
 * ends the process.) */
#include "test_common.h"
#include "test_thread_control.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

DEFINE_GROUP(1)

#define PW_A "pwA-0123456789abcdefghijklmnopqrstuvwxyz"
#define PW_B "pwB-0123456789abcdefghijklmnopqrstuvwxyz"

struct pw_shared {
    distlock_client *c;
    atomic_int stop;
    long long deadline;
};

struct pw_worker {
    struct pw_shared *s;
    char key[32];
    long iterations;
    int bad_rc;            /* first failing status, 0 if none */
    char bad_what[64];
    char bad_detail[512];
};

static void *pw_setter(void *arg)
{
    struct pw_shared *s = arg;
    long i = 0;
    while (!atomic_load(&s->stop)) {
        int r = distlock_client_set_str(s->c, DISTLOCK_OPT_PASSWORD, (i++ & 1) ? PW_A : PW_B);
        if (r != DISTLOCK_OK) return (void *)(intptr_t)r;
    }
    return NULL;
}

static void *pw_locker(void *arg)
{
    struct pw_worker *w = arg;
    while (rh_now_ms() < w->s->deadline && !w->bad_rc) {
        distlock_lock *l = NULL;
        int r = distlock_acquire(w->s->c, w->key, 10000, 0, 0, &l);
        if (r != DISTLOCK_OK) {
            w->bad_rc = r;
            snprintf(w->bad_what, sizeof w->bad_what, "acquire #%ld", w->iterations + 1);
            snprintf(w->bad_detail, sizeof w->bad_detail, "%s", distlock_last_error());
            break;
        }
        r = distlock_release(l);
        if (r != DISTLOCK_OK) {
            w->bad_rc = r;
            snprintf(w->bad_what, sizeof w->bad_what, "release #%ld", w->iterations + 1);
            snprintf(w->bad_detail, sizeof w->bad_detail, "%s", distlock_last_error());
        }
        distlock_lock_free(l);
        w->iterations++;
    }
    return NULL;
}

static void test_review5_set_password_while_connecting(void **state)
{
    rh_cluster *rc = *state;
    /* A user with two valid passwords: every value the setter writes works. */
    node_command_ok(rc, 0, "ACL SETUSER u5 reset on >%s >%s ~* &* +@all", PW_A, PW_B);
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_USERNAME, "u5"), DISTLOCK_OK);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_PASSWORD, PW_A), DISTLOCK_OK);

    struct pw_shared s = { .c = c, .deadline = rh_now_ms() + 1500 };
    struct pw_worker w[2] = { { .s = &s }, { .s = &s } };
    snprintf(w[0].key, sizeof w[0].key, "pw5:0");
    snprintf(w[1].key, sizeof w[1].key, "pw5:1");
    pthread_t ts, tw[2];
    assert_int_equal(pthread_create(&ts, NULL, pw_setter, &s), 0);
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&tw[i], NULL, pw_locker, &w[i]), 0);
    for (int i = 0; i < 2; i++) pthread_join(tw[i], NULL);
    atomic_store(&s.stop, 1);
    void *setter_rc = NULL;
    pthread_join(ts, &setter_rc);
    distlock_client_free(c);
    node_command_ok(rc, 0, "ACL DELUSER u5");

    printf("# %ld + %ld acquire/release pairs while the password was being set\n",
           w[0].iterations, w[1].iterations);
    assert_int_equal((int)(intptr_t)setter_rc, DISTLOCK_OK);
    for (int i = 0; i < 2; i++) {
        if (w[i].bad_rc != DISTLOCK_OK) {
            print_error("thread %d: %s = %d (%s): \"%s\"\n", i, w[i].bad_what, w[i].bad_rc,
                        distlock_strerror(w[i].bad_rc), w[i].bad_detail);
            fail();
        }
        assert_true(w[i].iterations > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_review5_set_password_while_connecting, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
