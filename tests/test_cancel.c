/* test_cancel.c -- cancelling a waiting acquire: distlock_client_cancel()
 * from another thread and from a signal handler, the interrupt hook (a
 * flag-only signal handler, as in Python), calls started after a cancel,
 * fair waiters leaving the queue, a cancel racing a release, and fork; and a
 * call's own cancel (distlock_acquire_with's args->cancel): it ends the
 * calls that carry it and wakes no other, fired before the call, from a
 * signal handler, while the winning attempt's replies are on the wire, and
 * for a fair waiter.
 *
 * "The waiter is waiting" is observed on the server: its subscriber
 * connection shows up in PUBSUB NUMSUB distlock:<key> (it subscribes before
 * it sleeps). Re-checks are set seconds apart, so a prompt return can only
 * come from the cancel. */
#include "test_common.h"
#include "harness/faultproxy.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int group_setup1(void **state)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    return (*state = rh_start(1)) ? 0 : -1;
}
static int group_setup3(void **state) { return (*state = rh_start(3)) ? 0 : -1; }
static int group_teardown(void **state)
{
    rh_stop_all(*state);
    return 0;
}
static int heal(void **state) { return rh_heal(*state) == 0 ? 0 : -1; }

/* A correctness bound, not a benchmark: the wait is interrupted, not left
 * to run into its re-check (5 s) or its budget (forever). */
static long prompt_ms(void)
{
    return getenv("DISTLOCK_TEST_SLOW") ? 1000 : 500;
}

/* Subscribers of distlock:<key> on node i. */
static long long numsub(rh_cluster *rc, int i, const char *key)
{
    redisReply *r = rh_command(rc, i, 0, "PUBSUB NUMSUB distlock:%s", key);
    long long n = -1;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_INTEGER)
        n = r->element[1]->integer;
    if (r)
        freeReplyObject(r);
    return n;
}

static long long queue_len(rh_cluster *rc, int i, const char *key)
{
    redisReply *r = rh_command(rc, i, 0, "ZCARD {%s}:q", key);
    long long n = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r)
        freeReplyObject(r);
    return n;
}

/* A client whose waits re-check only every few seconds. */
static distlock_client *slow_client(rh_cluster *rc)
{
    distlock_client *c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MIN_MS, 5000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MAX_MS, 5000), DISTLOCK_OK);
    /* these tests race cancels against releases, not against timeouts: under
     * valgrind on a busy machine a reply can take longer than the default */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 500 * slow_factor()),
              DISTLOCK_OK);
    return c;
}

struct waiter {
    distlock_client *c;
    const char *key;
    long wait;
    unsigned flags;
    int pre_flag;          /* set *flag before acquiring (a signal just before the sleep) */
    distlock_cancel *cancel;  /* the call's own cancel (distlock_acquire_with), or NULL */
    const char *owner;     /* a DISTLOCK_REENTRANT owner id, or NULL */
    atomic_int asked;      /* interrupt hook calls (count_asked): one before each sleep,
                            * and one right after an attempt that won */
    int rc;
    char detail[256];
    long long t_done;
    distlock_lock *lock;
    atomic_int done;
};

static atomic_int intr_flag;
static _Thread_local struct waiter *this_waiter;

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    this_waiter = w;
    if (w->pre_flag)
        atomic_store(&intr_flag, 1);
    distlock_acquire_args a = { .size = sizeof a, .owner = w->owner, .cancel = w->cancel };
    w->rc = distlock_acquire_with(w->c, w->key, 30000, w->wait, w->flags, &a, &w->lock);
    w->t_done = rh_now_ms();
    snprintf(w->detail, sizeof w->detail, "%s", distlock_last_error());
    atomic_store(&w->done, 1);
    return NULL;
}

static void start_waiter(pthread_t *t, struct waiter *w)
{
    assert_int_equal(pthread_create(t, NULL, waiter_main, w), 0);
}

/* The waiter's subscription is on every node: it is in its wait. */
static void until_waiting(rh_cluster *rc, const char *key, long long subscribers)
{
    for (int i = 0; i < rc->n; i++)
        assert_true(RH_WAIT_UNTIL(numsub(rc, i, key) >= subscribers, 10000));
}

static void check_cancelled(struct waiter *w, long long t_cancel, const char *what)
{
    long long lat = w->t_done - t_cancel;
    printf("# %s: ECANCELED %lld ms after the cancel (\"%s\")\n", what, lat, w->detail);
    if (w->rc != DISTLOCK_ECANCELED) {
        print_error("%s: rc %d (%s), expected DISTLOCK_ECANCELED: %s\n", what, w->rc,
                    distlock_strerror(w->rc), w->detail);
        fail();
    }
    assert_null(w->lock);
    assert_non_null(strstr(w->detail, "cancelled"));
    if (lat > prompt_ms()) {
        print_error("%s: returned %lld ms after the cancel\n", what, lat);
        fail();
    }
}

/* (1) Another thread cancels a wait without limit. */
static void test_cancel_from_thread(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder = new_client(rh_uris(rc));
    connect_every_node(rc, holder, "c:holder:connect");  /* its key is counted on every node */
    distlock_lock *hl = NULL;
    assert_rc(distlock_acquire(holder, "c:thr", 30000, 0, 0, &hl), DISTLOCK_OK);
    distlock_client *wc = slow_client(rc);
    struct waiter w = { .c = wc, .key = "c:thr", .wait = DISTLOCK_WAIT_FOREVER };
    pthread_t t;
    start_waiter(&t, &w);
    until_waiting(rc, "c:thr", 1);
    long long t0 = rh_now_ms();
    assert_rc(distlock_client_cancel(wc), DISTLOCK_OK);
    pthread_join(t, NULL);
    check_cancelled(&w, t0, "cancel from another thread");
    /* The holder's key is untouched, and nothing of the waiter is left. */
    assert_holding(rc, "c:thr", distlock_lock_token(hl), rc->n);
    assert_rc(distlock_release(hl), DISTLOCK_OK);
    assert_holding(rc, "c:thr", NULL, 0);
    distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(holder);
}

/* (2) A signal handler calls distlock_client_cancel(). */
static distlock_client *volatile sig_client;

static void on_usr1(int sig)
{
    (void)sig;
    distlock_client_cancel(sig_client);
}

static void test_cancel_from_signal_handler(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder = new_client(rh_uris(rc));
    connect_every_node(rc, holder, "c:holder:connect");  /* its key is counted on every node */
    distlock_lock *hl = NULL;
    assert_rc(distlock_acquire(holder, "c:sig", 30000, 0, 0, &hl), DISTLOCK_OK);
    distlock_client *wc = slow_client(rc);
    sig_client = wc;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);

    /* The handler runs on the waiting thread itself... */
    struct waiter w = { .c = wc, .key = "c:sig", .wait = DISTLOCK_WAIT_FOREVER };
    pthread_t t;
    start_waiter(&t, &w);
    until_waiting(rc, "c:sig", 1);
    long long t0 = rh_now_ms();
    assert_int_equal(pthread_kill(t, SIGUSR1), 0);
    pthread_join(t, NULL);
    check_cancelled(&w, t0, "handler on the waiting thread");

    /* ...or on another thread (here: this one). Another key: the first
     * waiter's subscription to c:sig may still stand, and the signal must
     * come only once this call is in its wait (a cancel before the call
     * started does not concern it). */
    distlock_lock *hl2 = NULL;
    assert_rc(distlock_acquire(holder, "c:sig2", 30000, 0, 0, &hl2), DISTLOCK_OK);
    struct waiter w2 = { .c = wc, .key = "c:sig2", .wait = DISTLOCK_WAIT_FOREVER };
    start_waiter(&t, &w2);
    until_waiting(rc, "c:sig2", 1);
    t0 = rh_now_ms();
    assert_int_equal(raise(SIGUSR1), 0);
    pthread_join(t, NULL);
    check_cancelled(&w2, t0, "handler on another thread");

    sigaction(SIGUSR1, &old, NULL);
    assert_holding(rc, "c:sig", distlock_lock_token(hl), rc->n);
    assert_holding(rc, "c:sig2", distlock_lock_token(hl2), rc->n);
    distlock_lock_free(hl2);
    distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(holder);
}

/* The interrupt hook, with a handler that only sets a flag (Python's way):
 * a signal on the waiting thread interrupts its sleep (EINTR) and the hook
 * cancels; a flag already set when the call starts (the signal came just
 * before the sleep) is seen before the first sleep. */
static void on_usr2(int sig)
{
    (void)sig;
    atomic_store(&intr_flag, 1);
}

static int hook_calls;

static int intr_hook(void *arg)
{
    (void)arg;
    __atomic_add_fetch(&hook_calls, 1, __ATOMIC_RELAXED);
    return atomic_exchange(&intr_flag, 0);
}

static void test_interrupt_hook(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder = new_client(rh_uris(rc));
    connect_every_node(rc, holder, "c:holder:connect");  /* its key is counted on every node */
    distlock_lock *hl = NULL;
    assert_rc(distlock_acquire(holder, "c:hook", 30000, 0, 0, &hl), DISTLOCK_OK);
    distlock_client *wc = slow_client(rc);
    assert_rc(distlock_client_on_interrupt(wc, intr_hook, NULL), DISTLOCK_OK);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr2;
    sa.sa_flags = SA_RESTART;  /* poll() is interrupted all the same */
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR2, &sa, &old), 0);
    atomic_store(&intr_flag, 0);

    struct waiter w = { .c = wc, .key = "c:hook", .wait = DISTLOCK_WAIT_FOREVER };
    pthread_t t;
    start_waiter(&t, &w);
    until_waiting(rc, "c:hook", 1);
    long long t0 = rh_now_ms();
    assert_int_equal(pthread_kill(t, SIGUSR2), 0);
    pthread_join(t, NULL);
    check_cancelled(&w, t0, "flag-only handler + interrupt hook");
    assert_true(__atomic_load_n(&hook_calls, __ATOMIC_RELAXED) >= 1);

    struct waiter w2 = { .c = wc, .key = "c:hook", .wait = DISTLOCK_WAIT_FOREVER, .pre_flag = 1 };
    t0 = rh_now_ms();
    start_waiter(&t, &w2);
    pthread_join(t, NULL);
    check_cancelled(&w2, t0, "flag set just before the wait");

    /* Hook removed: a pending flag is nobody's business any more. */
    assert_rc(distlock_client_on_interrupt(wc, NULL, NULL), DISTLOCK_OK);
    atomic_store(&intr_flag, 1);
    assert_rc(distlock_acquire(wc, "c:hook", 30000, 200, 0, &w2.lock), DISTLOCK_NOTACQUIRED);
    atomic_store(&intr_flag, 0);

    sigaction(SIGUSR2, &old, NULL);
    assert_holding(rc, "c:hook", distlock_lock_token(hl), rc->n);
    distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(holder);
}

/* (3) A cancel concerns the calls under way, not later ones. */
static void test_later_calls_unaffected(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_lock *hl = NULL, *l = NULL;
    assert_rc(distlock_acquire(holder, "c:later", 30000, 0, 0, &hl), DISTLOCK_OK);
    distlock_client *wc = new_client(rh_uris(rc));
    assert_rc(distlock_client_cancel(wc), DISTLOCK_OK);  /* nothing under way */
    assert_rc(distlock_client_cancel(wc), DISTLOCK_OK);
    long long t0 = rh_now_ms();
    assert_rc(distlock_acquire(wc, "c:later", 30000, 300, 0, &l), DISTLOCK_NOTACQUIRED);
    long long took = rh_now_ms() - t0;
    printf("# acquire started after two cancels waited its 300 ms budget: %lld ms\n", took);
    assert_true(took >= 280);

    /* A waiter started after a cancel gets the lock when it is released. */
    struct waiter w = { .c = wc, .key = "c:later", .wait = 20000 };
    pthread_t t;
    start_waiter(&t, &w);
    until_waiting(rc, "c:later", 1);
    assert_rc(distlock_release(hl), DISTLOCK_OK);
    pthread_join(t, NULL);
    assert_rc(w.rc, DISTLOCK_OK);
    assert_holding_quorum(rc, "c:later", distlock_lock_token(w.lock), rc->n);
    distlock_lock_free(w.lock);
    assert_rc(distlock_client_cancel(NULL), DISTLOCK_EINVAL);
    distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(holder);
}

/* A wait cancelled just as its attempt wins gives the lock back. The hook
 * asks the server: it cancels once the key holds anything but the holder's
 * token (and nothing else is), which is only true right after the winning
 * attempt, in the check that follows it. */
struct won_hook {
    rh_cluster *rc;
    const char *key;
    char holder[64];
    int fired;
};

static int won_hook(void *arg)
{
    struct won_hook *h = arg;
    char v[64];
    if (rh_get(h->rc, 0, 0, h->key, v, sizeof v) == 1 && strcmp(v, h->holder) != 0) {
        h->fired++;
        return 1;
    }
    return 0;
}

static void test_won_then_cancelled(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_lock *hl = NULL;
    assert_rc(distlock_acquire(holder, "c:won", 30000, 0, 0, &hl), DISTLOCK_OK);
    distlock_client *wc = slow_client(rc);
    struct won_hook h = { .rc = rc, .key = "c:won" };
    snprintf(h.holder, sizeof h.holder, "%s", distlock_lock_token(hl));
    assert_rc(distlock_client_on_interrupt(wc, won_hook, &h), DISTLOCK_OK);
    struct waiter w = { .c = wc, .key = "c:won", .wait = DISTLOCK_WAIT_FOREVER };
    pthread_t t;
    start_waiter(&t, &w);
    until_waiting(rc, "c:won", 1);
    long long t0 = rh_now_ms();
    assert_rc(distlock_release(hl), DISTLOCK_OK);  /* wakes the waiter, which wins */
    pthread_join(t, NULL);
    check_cancelled(&w, t0, "won, then cancelled");
    assert_int_equal(h.fired, 1);
    assert_non_null(strstr(w.detail, "was released"));
    assert_holding(rc, "c:won", NULL, 0);
    distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(holder);
}

/* (4) A cancelled fair waiter leaves the queue. */
static void test_fair_waiter_leaves_queue(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder = new_client(rh_uris(rc));
    connect_every_node(rc, holder, "c:holder:connect");  /* its key is counted on every node */
    distlock_lock *hl = NULL;
    assert_rc(distlock_acquire(holder, "c:fair", 30000, 0, 0, &hl), DISTLOCK_OK);
    distlock_client *wc = slow_client(rc);
    struct waiter w = { .c = wc, .key = "c:fair", .wait = DISTLOCK_WAIT_FOREVER,
                        .flags = DISTLOCK_FAIR };
    pthread_t t;
    start_waiter(&t, &w);
    until_waiting(rc, "c:fair", 1);
    for (int i = 0; i < rc->n; i++)
        assert_true(RH_WAIT_UNTIL(queue_len(rc, i, "c:fair") == 1, 5000));
    long long t0 = rh_now_ms();
    assert_rc(distlock_client_cancel(wc), DISTLOCK_OK);
    pthread_join(t, NULL);
    check_cancelled(&w, t0, "fair waiter");
    for (int i = 0; i < rc->n; i++)
        assert_true(RH_WAIT_UNTIL(queue_len(rc, i, "c:fair") == 0, 3000));
    assert_holding(rc, "c:fair", distlock_lock_token(hl), rc->n);
    distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(holder);
}

/* (5) A cancel racing the release the waiter waits for: whichever wins,
 * either the waiter holds the lock (OK) or nothing is left (ECANCELED). */
struct releaser {
    distlock_lock *l;
    atomic_int *go;
    int rc;
};

static void *releaser_main(void *arg)
{
    struct releaser *r = arg;
    while (!atomic_load(r->go))
        ;
    r->rc = distlock_release(r->l);
    return NULL;
}

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void test_cancel_races_release(void **state)
{
    rh_cluster *rc = *state;
    int iters = 20;
    const char *it = getenv("DISTLOCK_TEST_ITERATIONS");
    if (it && atoi(it) > 0)
        iters = atoi(it) < 40 ? atoi(it) : 40;
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_client *wc = slow_client(rc);
    int got = 0, cancelled = 0, undone = 0;
    for (int i = 0; i < iters; i++) {
        distlock_lock *hl = NULL;
        assert_rc(distlock_acquire(holder, "c:race", 30000, 0, 0, &hl), DISTLOCK_OK);
        struct waiter w = { .c = wc, .key = "c:race", .wait = DISTLOCK_WAIT_FOREVER };
        atomic_int go = 0;
        struct releaser r = { .l = hl, .go = &go };
        pthread_t tw, tr;
        start_waiter(&tw, &w);
        until_waiting(rc, "c:race", 1);
        assert_int_equal(pthread_create(&tr, NULL, releaser_main, &r), 0);
        atomic_store(&go, 1);
        /* Cancel at a different point of the release and of the waiter's
         * wake-up and attempt each time: 0 to ~2 ms after the release starts. */
        long long until = now_us() + (long long)i * 2000 / iters * 1;
        while (now_us() < until)
            ;
        assert_rc(distlock_client_cancel(wc), DISTLOCK_OK);
        pthread_join(tr, NULL);
        pthread_join(tw, NULL);
        assert_rc(r.rc, DISTLOCK_OK);
        if (w.rc == DISTLOCK_OK) {
            got++;
            /* A quorum is what a grant promises: the last node may have
             * refused while the holder's release was still on its way. */
            int on = rh_count_holding(rc, "c:race", distlock_lock_token(w.lock));
            if (on < rc->n / 2 + 1) {
                print_error("iteration %d: the lock won is held on %d node(s)\n", i, on);
                fail();
            }
            assert_rc(distlock_release(w.lock), DISTLOCK_OK);
            distlock_lock_free(w.lock);
        } else {
            if (w.rc != DISTLOCK_ECANCELED) {
                print_error("iteration %d: rc %d (%s): %s\n", i, w.rc, distlock_strerror(w.rc),
                            w.detail);
                fail();
            }
            cancelled++;
            undone += strstr(w.detail, "was released") != NULL;
        }
        assert_holding(rc, "c:race", NULL, 0);  /* nothing left behind */
        distlock_lock_free(hl);
        /* The next waiter's subscription must be its own. */
        for (int n = 0; n < rc->n; n++)
            assert_true(RH_WAIT_UNTIL(numsub(rc, n, "c:race") == 0, 5000));
    }
    printf("# cancel racing a release, %d rounds: %d acquired, %d cancelled (%d of them after "
           "winning: the lock given back)\n", iters, got, cancelled, undone);
    distlock_client_free(wc);
    distlock_client_free(holder);
}

/* After fork the child has its own cancel channel: the parent's cancel ends
 * the parent's wait only, the child's the child's, each promptly. */
static void test_fork_separate(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder = new_client(rh_uris(rc));
    connect_every_node(rc, holder, "c:holder:connect");  /* its key is counted on every node */
    distlock_lock *hl = NULL, *l = NULL;
    assert_rc(distlock_acquire(holder, "c:fork", 30000, 0, 0, &hl), DISTLOCK_OK);
    distlock_client *wc = slow_client(rc);
    assert_rc(distlock_acquire(wc, "c:fork:warm", 1000, 0, 0, &l), DISTLOCK_OK);  /* connected */
    distlock_lock_free(l);

    int go[2], res[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(res), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct waiter w = { .c = wc, .key = "c:fork", .wait = DISTLOCK_WAIT_FOREVER };
        pthread_t t;
        long out[3] = { 0, 0, 0 };
        if (pthread_create(&t, NULL, waiter_main, &w) != 0)
            _exit(2);
        char b;
        if (read(go[0], &b, 1) != 1)
            _exit(3);
        out[0] = atomic_load(&w.done);  /* must still be waiting */
        long long t0 = rh_now_ms();
        distlock_client_cancel(wc);
        pthread_join(t, NULL);
        out[1] = w.rc;
        out[2] = (long)(w.t_done - t0);
        distlock_client_free(wc);  /* stops the child's subscriber thread */
        if (write(res[1], out, sizeof out) != (ssize_t)sizeof out)
            _exit(4);
        _exit(0);
    }
    struct waiter w = { .c = wc, .key = "c:fork", .wait = DISTLOCK_WAIT_FOREVER };
    pthread_t t;
    start_waiter(&t, &w);
    until_waiting(rc, "c:fork", 2);  /* the parent's and the child's subscriber */
    long long t0 = rh_now_ms();
    assert_rc(distlock_client_cancel(wc), DISTLOCK_OK);
    pthread_join(t, NULL);
    check_cancelled(&w, t0, "parent after fork");
    assert_int_equal(write(go[1], "g", 1), 1);
    long out[3];
    assert_int_equal(read(res[0], out, sizeof out), (ssize_t)sizeof out);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    printf("# child: waiting still after the parent's cancel: %s; its own cancel: rc %ld in %ld ms\n",
           out[0] ? "no" : "yes", out[1], out[2]);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], DISTLOCK_ECANCELED);
    assert_true(out[2] <= prompt_ms());
    close(go[0]), close(go[1]), close(res[0]), close(res[1]);
    assert_holding(rc, "c:fork", distlock_lock_token(hl), rc->n);
    distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(holder);
}

/* ------------------------------------------------ a call's own cancel */

/* An interrupt hook that only counts: it runs in the waiting thread before
 * each of its sleeps (so a call woken by anything but a release sleeps again
 * and counts), and once right after an attempt that won. */
static int count_asked(void *arg)
{
    (void)arg;
    if (this_waiter)
        atomic_fetch_add(&this_waiter->asked, 1);
    return 0;
}

/* A client whose waits never re-check on their own within a test (30 s):
 * a sleep that ends was ended by a release or a cancel. */
static distlock_client *still_client(const char *uris)
{
    distlock_client *c = new_client(uris);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MIN_MS, 30000), DISTLOCK_OK);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_RETRY_MAX_MS, 30000), DISTLOCK_OK);
    assert_rc(distlock_client_on_interrupt(c, count_asked, NULL), DISTLOCK_OK);
    return c;
}

/* Two waiters on one client, one cancel each: firing A's ends A while the
 * holder still holds the key; B is not even woken, and gets the lock on the
 * release. */
static void test_own_cancel_ends_only_its_call(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder = new_client(rh_uris(rc));
    connect_every_node(rc, holder, "c:holder:connect");  /* its key is counted on every node */
    distlock_lock *hl = NULL;
    assert_rc(distlock_acquire(holder, "c:own", 60000, 0, 0, &hl), DISTLOCK_OK);
    distlock_client *wc = still_client(rh_uris(rc));
    distlock_cancel *ka = NULL, *kb = NULL;
    assert_rc(distlock_cancel_new(&ka), DISTLOCK_OK);
    assert_rc(distlock_cancel_new(&kb), DISTLOCK_OK);
    struct waiter a = { .c = wc, .key = "c:own", .wait = DISTLOCK_WAIT_FOREVER, .cancel = ka };
    struct waiter b = { .c = wc, .key = "c:own", .wait = DISTLOCK_WAIT_FOREVER, .cancel = kb };
    pthread_t ta, tb;
    /* A, the first waiter of the key, sleeps once until its subscription is
     * confirmed, then once until a wake-up: its second sleep means the
     * channel is confirmed. B then joins a confirmed channel without a
     * sleep, so its first sleep is its wait for a wake-up. */
    start_waiter(&ta, &a);
    until_waiting(rc, "c:own", 1);
    assert_true(RH_WAIT_UNTIL(atomic_load(&a.asked) >= 2, 10000));
    start_waiter(&tb, &b);
    assert_true(RH_WAIT_UNTIL(atomic_load(&b.asked) >= 1, 10000));
    assert_int_equal(atomic_load(&b.asked), 1);

    long long t0 = rh_now_ms();
    assert_rc(distlock_cancel_fire(ka), DISTLOCK_OK);
    pthread_join(ta, NULL);
    check_cancelled(&a, t0, "own cancel of one of two waiters");
    assert_holding(rc, "c:own", distlock_lock_token(hl), rc->n);  /* still the holder's */
    assert_int_equal(atomic_load(&b.done), 0);
    /* B is not woken by A's cancel: a wake-up would be a second sleep at
     * once. That something does NOT happen only a window can show: B's
     * count stays 1 for 300 ms after A returned (a wake-up shows in under
     * 1 ms; the holder holds the key for 60 s and re-checks are 30 s apart,
     * so nothing else can wake B meanwhile). */
    assert_false(RH_WAIT_UNTIL(atomic_load(&b.asked) > 1, 300));

    assert_rc(distlock_release(hl), DISTLOCK_OK);
    pthread_join(tb, NULL);
    assert_rc(b.rc, DISTLOCK_OK);
    /* B was woken by the release and won; under load its first attempt may
     * meet a node that has not run the release yet, and sleep once more
     * until the next node's wake-up: 2 or more asks, never fewer. */
    printf("# the other waiter: interrupt hook asked %d time(s): its sleep(s) and the check "
           "after winning\n", atomic_load(&b.asked));
    assert_true(atomic_load(&b.asked) >= 2);
    /* B's grant holds a quorum; the third node may have refused B's request
     * if it came before the release reached that node (the release wakes B
     * from the first nodes that run it), and a grant needs only a quorum. */
    int on = -1;
    if (!RH_WAIT_UNTIL((on = rh_count_holding(rc, "c:own", distlock_lock_token(b.lock))) >=
                       distlock_client_quorum(b.c), 3000))
        fail_msg("c:own holds B's token on %d node(s), a quorum is %d", on,
                 distlock_client_quorum(b.c));
    /* Firing a cancel whose call is over changes nothing. */
    assert_rc(distlock_cancel_fire(kb), DISTLOCK_OK);
    assert_rc(distlock_release(b.lock), DISTLOCK_OK);
    assert_holding(rc, "c:own", NULL, 0);
    distlock_lock_free(b.lock);
    distlock_cancel_free(ka);
    distlock_cancel_free(kb);
    distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(holder);
}

/* Sticky: a call that starts after its cancel was fired returns ECANCELED at
 * once and takes nothing, whether it would wait, try once, or re-enter a
 * reentrant ownership; the same cancel ends every later call too, and the
 * client serves calls without it as usual. */
static void test_own_cancel_fired_before_the_call(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    distlock_cancel *k = NULL;
    distlock_lock *l = NULL, *owned = NULL;
    assert_rc(distlock_cancel_new(&k), DISTLOCK_OK);
    assert_rc(distlock_cancel_fire(k), DISTLOCK_OK);
    assert_rc(distlock_cancel_fire(k), DISTLOCK_OK);  /* idempotent */
    distlock_acquire_args a = { .size = sizeof a, .cancel = k };
    long waits[] = { DISTLOCK_WAIT_FOREVER, 5000, 0 };
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        long long t0 = rh_now_ms();
        int r = distlock_acquire_with(c, "c:before", 30000, waits[i], 0, &a, &l);
        long long took = rh_now_ms() - t0;
        printf("# fired before a call with wait %ld: rc %d in %lld ms (\"%s\")\n", waits[i], r,
               took, distlock_last_error());
        assert_rc(r, DISTLOCK_ECANCELED);
        assert_null(l);
        assert_non_null(strstr(distlock_last_error(), "nothing was sent"));
        assert_true(took <= prompt_ms());
        assert_holding(rc, "c:before", NULL, 0);  /* a free key, not taken */
    }
    /* A reentrant owner's re-acquire is cancelled too, before its extend:
     * the ownership keeps its one count. */
    assert_rc(acquire_as(c, "c:before", 30000, 0, DISTLOCK_REENTRANT, "job", &owned),
              DISTLOCK_OK);
    distlock_acquire_args ra = { .size = sizeof ra, .owner = "job", .cancel = k };
    assert_rc(distlock_acquire_with(c, "c:before", 30000, 0, DISTLOCK_REENTRANT, &ra, &l),
              DISTLOCK_ECANCELED);
    assert_null(l);
    assert_rc(distlock_release(owned), DISTLOCK_OK);
    assert_holding(rc, "c:before", NULL, 0);  /* the only count is gone */
    distlock_lock_free(owned);
    /* Without the cancel: served. */
    assert_rc(distlock_acquire(c, "c:before", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_holding_quorum(rc, "c:before", distlock_lock_token(l), rc->n);
    distlock_lock_free(l);
    distlock_cancel_free(k);
    distlock_client_free(c);
}

/* A signal handler fires a call's cancel: on the waiting thread, and on
 * another thread (errno there is left as it was). */
static distlock_cancel *volatile sig_cancel;

static void on_usr1_fire(int sig)
{
    (void)sig;
    distlock_cancel_fire(sig_cancel);
}

static void test_own_cancel_from_signal_handler(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder = new_client(rh_uris(rc));
    connect_every_node(rc, holder, "c:holder:connect");  /* its key is counted on every node */
    distlock_lock *hl = NULL;
    distlock_lock *hl2 = NULL;
    assert_rc(distlock_acquire(holder, "c:ksig", 30000, 0, 0, &hl), DISTLOCK_OK);
    assert_rc(distlock_acquire(holder, "c:ksig2", 30000, 0, 0, &hl2), DISTLOCK_OK);
    distlock_client *wc = still_client(rh_uris(rc));
    distlock_cancel *k1 = NULL, *k2 = NULL;
    assert_rc(distlock_cancel_new(&k1), DISTLOCK_OK);
    assert_rc(distlock_cancel_new(&k2), DISTLOCK_OK);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1_fire;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);

    sig_cancel = k1;
    struct waiter w = { .c = wc, .key = "c:ksig", .wait = DISTLOCK_WAIT_FOREVER, .cancel = k1 };
    pthread_t t;
    start_waiter(&t, &w);
    /* the first waiter of its key: its second sleep is its wait */
    assert_true(RH_WAIT_UNTIL(atomic_load(&w.asked) >= 2, 10000));
    long long t0 = rh_now_ms();
    assert_int_equal(pthread_kill(t, SIGUSR1), 0);
    pthread_join(t, NULL);
    check_cancelled(&w, t0, "own cancel fired by a handler on the waiting thread");

    /* On this thread: the handler runs inside raise(), and errno survives
     * the fire. Another key, so that the waiter is again the first of its
     * key and countably asleep. */
    sig_cancel = k2;
    struct waiter w2 = { .c = wc, .key = "c:ksig2", .wait = DISTLOCK_WAIT_FOREVER, .cancel = k2 };
    start_waiter(&t, &w2);
    assert_true(RH_WAIT_UNTIL(atomic_load(&w2.asked) >= 2, 10000));
    t0 = rh_now_ms();
    errno = EDOM;
    assert_int_equal(raise(SIGUSR1), 0);
    int e = errno;
    pthread_join(t, NULL);
    assert_int_equal(e, EDOM);
    check_cancelled(&w2, t0, "own cancel fired by a handler on another thread");

    sigaction(SIGUSR1, &old, NULL);
    assert_holding(rc, "c:ksig", distlock_lock_token(hl), rc->n);
    assert_holding(rc, "c:ksig2", distlock_lock_token(hl2), rc->n);
    distlock_lock_free(hl2);
    distlock_cancel_free(k1);
    distlock_cancel_free(k2);
    distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(holder);
}

/* The cancel is fired while the winning attempt's replies are held on the
 * wire (the fault proxy): the servers already hold the waiter's token when
 * the fire comes. The call gives it back: ECANCELED, nothing held on any
 * node. wait: a waiting call (the key held first, then released) or a
 * try-once call (the key free). */
static void won_while_fired(rh_cluster *rc, const char *key, long wait)
{
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_lock *hl = NULL;
    distlock_client *wc = still_client(fp_uris(fp));
    /* a reply held here must not time out */
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 20000), DISTLOCK_OK);
    connect_every_node(rc, wc, "c:warm");
    distlock_cancel *k = NULL;
    assert_rc(distlock_cancel_new(&k), DISTLOCK_OK);
    struct waiter w = { .c = wc, .key = key, .wait = wait, .cancel = k };
    pthread_t t;
    char hex[64];
    fp_hex(key, hex, sizeof hex);
    if (wait != 0) {
        assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &hl), DISTLOCK_OK);
        start_waiter(&t, &w);
        /* Its second sleep: subscribed (the SUBSCRIBE carries the key), tried
         * again, and asleep until a wake-up; nothing of it is on the wire. */
        until_waiting(rc, key, 1);
        assert_true(RH_WAIT_UNTIL(atomic_load(&w.asked) >= 2, 10000));
    }
    /* The next request carrying the key, on every node: the attempt. */
    for (int l = 0; l < rc->n; l++)
        assert_int_equal(fp_cmd(fp, NULL, 0, "hold-match %d up %s", l, hex), 0);
    if (wait != 0)
        assert_rc(distlock_release(hl), DISTLOCK_OK);  /* wakes the waiter: it tries */
    else
        start_waiter(&t, &w);
    int conn[8];
    for (int l = 0; l < rc->n; l++) {
        assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held %d up 1 15000", l), 0);
        fp_conn cs[64];
        int nc = fp_conns(fp, l, cs, 64);
        conn[l] = -1;
        for (int i = 0; i < nc; i++)
            if (cs[i].held_up > 0)
                conn[l] = cs[i].id;
        assert_true(conn[l] > 0);
        /* it runs on the server now; its reply waits */
        assert_int_equal(fp_cmd(fp, NULL, 0, "hold %d:%d down", l, conn[l]), 0);
        assert_int_equal(fp_cmd(fp, NULL, 0, "unhold %d:%d up", l, conn[l]), 0);
        assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held %d:%d down 1 10000", l, conn[l]), 0);
    }
    /* Won on the servers: every node holds a token, not the holder's. */
    char v[64];
    for (int l = 0; l < rc->n; l++) {
        assert_int_equal(rh_get(rc, l, 0, key, v, sizeof v), 1);
        if (hl)
            assert_string_not_equal(v, distlock_lock_token(hl));
    }
    assert_int_equal(atomic_load(&w.done), 0);
    long long t0 = rh_now_ms();
    assert_rc(distlock_cancel_fire(k), DISTLOCK_OK);
    for (int l = 0; l < rc->n; l++)
        assert_int_equal(fp_cmd(fp, NULL, 0, "unhold %d:%d down", l, conn[l]), 0);
    pthread_join(t, NULL);
    check_cancelled(&w, t0, wait ? "own cancel while the waiter's winning replies were held"
                                 : "own cancel while a try-once's winning replies were held");
    assert_non_null(strstr(w.detail, "was released"));
    assert_holding(rc, key, NULL, 0);
    distlock_cancel_free(k);
    if (hl)
        distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(holder);
    fp_stop(fp);
}

static void test_own_cancel_while_won_waiting(void **state)
{
    won_while_fired(*state, "c:kwon", DISTLOCK_WAIT_FOREVER);
}

static void test_own_cancel_while_won_try_once(void **state)
{
    won_while_fired(*state, "c:kwon0", 0);
}

/* A fair waiter cancelled by its own cancel leaves the queue: the waiter
 * behind it is served when the holder releases. */
static void test_own_cancel_fair_waiter_leaves_queue(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_lock *hl = NULL;
    assert_rc(distlock_acquire(holder, "c:kfair", 30000, 0, DISTLOCK_FAIR, &hl), DISTLOCK_OK);
    distlock_client *wc = still_client(rh_uris(rc));
    distlock_cancel *ka = NULL;
    assert_rc(distlock_cancel_new(&ka), DISTLOCK_OK);
    struct waiter a = { .c = wc, .key = "c:kfair", .wait = DISTLOCK_WAIT_FOREVER,
                        .flags = DISTLOCK_FAIR, .cancel = ka };
    struct waiter b = { .c = wc, .key = "c:kfair", .wait = DISTLOCK_WAIT_FOREVER,
                        .flags = DISTLOCK_FAIR };
    pthread_t ta, tb;
    start_waiter(&ta, &a);
    for (int i = 0; i < rc->n; i++)
        assert_true(RH_WAIT_UNTIL(queue_len(rc, i, "c:kfair") == 1, 10000));
    start_waiter(&tb, &b);  /* second in the queue, behind a */
    for (int i = 0; i < rc->n; i++)
        assert_true(RH_WAIT_UNTIL(queue_len(rc, i, "c:kfair") == 2, 10000));
    long long t0 = rh_now_ms();
    assert_rc(distlock_cancel_fire(ka), DISTLOCK_OK);
    pthread_join(ta, NULL);
    check_cancelled(&a, t0, "fair waiter, own cancel");
    for (int i = 0; i < rc->n; i++)
        assert_true(RH_WAIT_UNTIL(queue_len(rc, i, "c:kfair") == 1, 3000));
    assert_int_equal(atomic_load(&b.done), 0);
    assert_rc(distlock_release(hl), DISTLOCK_OK);
    pthread_join(tb, NULL);
    assert_rc(b.rc, DISTLOCK_OK);
    assert_holding_quorum(rc, "c:kfair", distlock_lock_token(b.lock), rc->n);
    distlock_lock_free(b.lock);
    distlock_cancel_free(ka);
    distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(holder);
}

/* A reentrant owner's re-acquire is cancelled while its extend (the
 * check that the lease is still ours) is held on the wire: the call returns
 * ECANCELED with no new handle, so the ownership keeps its one count and
 * the owner's one release frees the key on every node. */
static void test_own_cancel_while_reentrant_extend_on_wire(void **state)
{
    rh_cluster *rc = *state;
    const char *key = "c:kre";
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *c = new_client(fp_uris(fp));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 20000), DISTLOCK_OK);
    connect_every_node(rc, c, "c:warm");
    distlock_lock *owned = NULL;
    assert_rc(acquire_as(c, key, 30000, 0, DISTLOCK_REENTRANT, "job", &owned), DISTLOCK_OK);
    assert_holding(rc, key, distlock_lock_token(owned), rc->n);
    distlock_cancel *k = NULL;
    assert_rc(distlock_cancel_new(&k), DISTLOCK_OK);
    char hex[64];
    fp_hex(key, hex, sizeof hex);
    for (int l = 0; l < rc->n; l++)
        assert_int_equal(fp_cmd(fp, NULL, 0, "hold-match %d up %s", l, hex), 0);
    struct waiter w = { .c = c, .key = key, .wait = 0, .flags = DISTLOCK_REENTRANT,
                        .owner = "job", .cancel = k };
    pthread_t t;
    start_waiter(&t, &w);
    for (int l = 0; l < rc->n; l++)
        assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held %d up 1 15000", l), 0);
    assert_int_equal(atomic_load(&w.done), 0);
    long long t0 = rh_now_ms();
    assert_rc(distlock_cancel_fire(k), DISTLOCK_OK);
    for (int l = 0; l < rc->n; l++)
        assert_int_equal(fp_cmd(fp, NULL, 0, "unhold %d", l), 0);
    pthread_join(t, NULL);
    if (w.lock) {
        print_error("re-acquire cancelled during its extend returned rc %d (%s) and a "
                    "handle\n", w.rc, w.detail);
        distlock_lock_free(w.lock);
        w.lock = NULL;
    }
    check_cancelled(&w, t0, "own cancel while a reentrant re-acquire's extend was held");
    /* One count: the owner's one release frees the key everywhere. */
    assert_rc(distlock_release(owned), DISTLOCK_OK);
    assert_holding(rc, key, NULL, 0);
    distlock_lock_free(owned);
    distlock_cancel_free(k);
    distlock_client_free(c);
    fp_stop(fp);
}

/* A cancel belongs to the process that made it: a forked child that fires
 * its copy neither ends nor wakes the parent's call that carries it (no
 * wake-up at all: the call sleeps on, once, until its own process fires the
 * cancel, which still ends it promptly). */
static void test_own_cancel_fired_in_forked_child(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *holder = new_client(rh_uris(rc));
    connect_every_node(rc, holder, "c:holder:connect");  /* its key is counted on every node */
    distlock_lock *hl = NULL;
    assert_rc(distlock_acquire(holder, "c:kfork", 30000, 0, 0, &hl), DISTLOCK_OK);
    distlock_client *wc = still_client(rh_uris(rc));
    distlock_cancel *k = NULL;
    assert_rc(distlock_cancel_new(&k), DISTLOCK_OK);
    struct waiter w = { .c = wc, .key = "c:kfork", .wait = DISTLOCK_WAIT_FOREVER, .cancel = k };
    pthread_t t;
    start_waiter(&t, &w);
    /* the first waiter of its key: its second sleep is its wait */
    assert_true(RH_WAIT_UNTIL(atomic_load(&w.asked) >= 2, 10000));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Dies at once by SIGKILL: a forked copy of a threaded process has
         * nothing to clean up, and valgrind's leak check (the parent's
         * blocks, still in use there) is not for this copy. */
        if (distlock_cancel_fire(k) != DISTLOCK_OK)
            _exit(1);
        raise(SIGKILL);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* A wake-up would be a new sleep (the hook counts each); none may come. */
    int woken = RH_WAIT_UNTIL(atomic_load(&w.asked) > 2 || atomic_load(&w.done), 1000);
    printf("# parent's call after the child fired its copy: done %d, slept %d time(s)\n",
           atomic_load(&w.done), atomic_load(&w.asked));
    assert_false(woken);
    long long t0 = rh_now_ms();
    assert_rc(distlock_cancel_fire(k), DISTLOCK_OK);
    pthread_join(t, NULL);
    check_cancelled(&w, t0, "own cancel fired by its own process after a child fired its copy");
    assert_holding(rc, "c:kfork", distlock_lock_token(hl), rc->n);
    distlock_cancel_free(k);
    distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(holder);
}

/* The cancel is fired while the attempt is on the wire, and the attempt
 * then fails (its request is held until the reply times out): the
 * call still returns ECANCELED, as it would had the attempt won or lost,
 * not the node's error. wait: a try-once call (the key free), or a waiting
 * call whose re-check is the attempt (the key held, then released). */
static void failed_while_fired(rh_cluster *rc, const char *key, long wait)
{
    fp_proxy *fp = fp_front(rc);
    assert_non_null(fp);
    distlock_client *holder = new_client(rh_uris(rc));
    distlock_lock *hl = NULL;
    distlock_client *wc = still_client(fp_uris(fp));
    connect_every_node(rc, wc, "c:warm");
    /* after the warm-up: a held request fails after this long */
    assert_rc(distlock_client_set(wc, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 1000 * slow_factor()),
              DISTLOCK_OK);
    distlock_cancel *k = NULL;
    assert_rc(distlock_cancel_new(&k), DISTLOCK_OK);
    struct waiter w = { .c = wc, .key = key, .wait = wait, .cancel = k };
    pthread_t t;
    char hex[64];
    fp_hex(key, hex, sizeof hex);
    if (wait != 0) {
        assert_rc(distlock_acquire(holder, key, 30000, 0, 0, &hl), DISTLOCK_OK);
        start_waiter(&t, &w);
        until_waiting(rc, key, 1);
        assert_true(RH_WAIT_UNTIL(atomic_load(&w.asked) >= 2, 10000));
    }
    for (int l = 0; l < rc->n; l++)
        assert_int_equal(fp_cmd(fp, NULL, 0, "hold-match %d up %s", l, hex), 0);
    if (wait != 0)
        assert_rc(distlock_release(hl), DISTLOCK_OK);  /* wakes the waiter: it tries */
    else
        start_waiter(&t, &w);
    for (int l = 0; l < rc->n; l++)
        assert_int_equal(fp_cmd(fp, NULL, 0, "wait-held %d up 1 15000", l), 0);
    assert_int_equal(atomic_load(&w.done), 0);
    long long t0 = rh_now_ms();
    assert_rc(distlock_cancel_fire(k), DISTLOCK_OK);
    pthread_join(t, NULL);  /* the held request is never answered: the attempt fails */
    printf("# own cancel while a %s attempt was out, then failed: rc %d after %lld ms (\"%s\")\n",
           wait ? "waiting call's" : "try-once", w.rc, w.t_done - t0, w.detail);
    if (w.rc != DISTLOCK_ECANCELED) {
        print_error("rc %d (%s), expected DISTLOCK_ECANCELED: %s\n", w.rc,
                    distlock_strerror(w.rc), w.detail);
        fail();
    }
    assert_null(w.lock);
    for (int l = 0; l < rc->n; l++) {  /* the held request never runs */
        assert_int_equal(fp_cmd(fp, NULL, 0, "reset %d", l), 0);
        assert_int_equal(fp_cmd(fp, NULL, 0, "heal %d", l), 0);
    }
    assert_holding(rc, key, NULL, 0);
    distlock_cancel_free(k);
    if (hl)
        distlock_lock_free(hl);
    distlock_client_free(wc);
    distlock_client_free(holder);
    fp_stop(fp);
}

static void test_own_cancel_while_try_once_fails(void **state)
{
    failed_while_fired(*state, "c:kfail0", 0);
}

static void test_own_cancel_while_waiting_attempt_fails(void **state)
{
    failed_while_fired(*state, "c:kfail", DISTLOCK_WAIT_FOREVER);
}

int main(void)
{
    const struct CMUnitTest one[] = {
        cmocka_unit_test_setup(test_cancel_from_thread, heal),
        cmocka_unit_test_setup(test_cancel_from_signal_handler, heal),
        cmocka_unit_test_setup(test_interrupt_hook, heal),
        cmocka_unit_test_setup(test_later_calls_unaffected, heal),
        cmocka_unit_test_setup(test_won_then_cancelled, heal),
        cmocka_unit_test_setup(test_fair_waiter_leaves_queue, heal),
        cmocka_unit_test_setup(test_cancel_races_release, heal),
        cmocka_unit_test_setup(test_fork_separate, heal),
        cmocka_unit_test_setup(test_own_cancel_ends_only_its_call, heal),
        cmocka_unit_test_setup(test_own_cancel_fired_before_the_call, heal),
        cmocka_unit_test_setup(test_own_cancel_from_signal_handler, heal),
        cmocka_unit_test_setup(test_own_cancel_while_won_waiting, heal),
        cmocka_unit_test_setup(test_own_cancel_fair_waiter_leaves_queue, heal),
        cmocka_unit_test_setup(test_own_cancel_while_reentrant_extend_on_wire, heal),
        cmocka_unit_test_setup(test_own_cancel_fired_in_forked_child, heal),
        cmocka_unit_test_setup(test_own_cancel_while_try_once_fails, heal),
        cmocka_unit_test_setup(test_own_cancel_while_waiting_attempt_fails, heal),
    };
    const struct CMUnitTest three[] = {
        cmocka_unit_test_setup(test_cancel_from_thread, heal),
        cmocka_unit_test_setup(test_fair_waiter_leaves_queue, heal),
        cmocka_unit_test_setup(test_cancel_races_release, heal),
        cmocka_unit_test_setup(test_own_cancel_ends_only_its_call, heal),
        cmocka_unit_test_setup(test_own_cancel_while_won_waiting, heal),
        cmocka_unit_test_setup(test_own_cancel_while_won_try_once, heal),
        cmocka_unit_test_setup(test_own_cancel_fair_waiter_leaves_queue, heal),
        cmocka_unit_test_setup(test_own_cancel_while_reentrant_extend_on_wire, heal),
    };
    int failed = cmocka_run_group_tests_name("cancel, 1 node", one, group_setup1, group_teardown);
    failed += cmocka_run_group_tests_name("cancel, 3 nodes", three, group_setup3, group_teardown);
    return failed;
}
