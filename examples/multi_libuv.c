/* multi_libuv.c -- the non-blocking API on a libuv loop (Debian: libuv1-dev).
 *
 * The multi's one descriptor is a uv_poll_t (readable), its timeout a
 * uv_timer_t re-armed after every perform; completed operations are taken
 * from distlock_multi_done() and dispatched by their id, as a front end
 * keys its futures. Ten "tasks" take turns on one key: each holds it
 * briefly, then releases through the multi, which hands it to the next.
 *
 *   multi_libuv [SERVERS]      (default redis://127.0.0.1:6379)
 *
 * Exit status 0 when every task held the key once. */
#include <distlock.h>
#include <stdio.h>
#include <uv.h>

#define TASKS 10

static distlock_multi *m;
static uv_poll_t poller;
static uv_timer_t timer;
static int held, released, failed;
static distlock_op *acq[TASKS], *rel[TASKS];
static distlock_lock *lock[TASKS];

static void perform(void);

static void on_timer(uv_timer_t *t)
{
    (void)t;
    perform();
}

static void on_readable(uv_poll_t *p, int status, int events)
{
    (void)p, (void)status, (void)events;
    perform();
}

/* Advance the multi, dispatch what finished, re-arm the timer. */
static void perform(void)
{
    if (distlock_multi_perform(m) < 0) {
        fprintf(stderr, "perform: %s\n", distlock_last_error());
        uv_stop(uv_default_loop());
        return;
    }
    distlock_op *op;
    while ((op = distlock_multi_done(m)) != NULL) {
        uint64_t id = distlock_op_id(op);
        if (distlock_op_status(op) != DISTLOCK_OK) {
            fprintf(stderr, "op %llu: %s\n", (unsigned long long)id, distlock_op_error(op));
            failed++;
            continue;
        }
        distlock_lock *l = distlock_op_take_lock(op);
        if (l) {
            printf("task %llu holds %s\n", (unsigned long long)id, distlock_lock_key(l));
            lock[held] = l;
            if (distlock_multi_release(m, l, &rel[held]) != DISTLOCK_OK)
                failed++;
            held++;
        } else {
            released++;
        }
    }
    if (held + failed == TASKS && released == held) {
        uv_poll_stop(&poller);
        uv_timer_stop(&timer);
        return;
    }
    long t = distlock_multi_timeout(m);
    if (t >= 0)
        uv_timer_start(&timer, on_timer, (uint64_t)t, 0);
    else
        uv_timer_stop(&timer);
}

int main(int argc, char **argv)
{
    const char *servers = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    distlock_client *c;
    if (distlock_client_new(servers, &c) != DISTLOCK_OK || distlock_multi_new(c, &m) != DISTLOCK_OK) {
        fprintf(stderr, "%s\n", distlock_last_error());
        return 1;
    }
    uv_loop_t *loop = uv_default_loop();
    uv_poll_init(loop, &poller, distlock_multi_fd(m));
    uv_timer_init(loop, &timer);
    uv_poll_start(&poller, UV_READABLE, on_readable);
    for (int i = 0; i < TASKS; i++)
        if (distlock_multi_acquire(m, "example:uv-key", 10000, 10000, 0, NULL, &acq[i]) !=
            DISTLOCK_OK) {
            fprintf(stderr, "%s\n", distlock_last_error());
            return 1;
        }
    perform();  /* the first step: due at once */
    uv_run(loop, UV_RUN_DEFAULT);
    for (int i = 0; i < TASKS; i++)
        distlock_op_free(acq[i]);
    for (int i = 0; i < held; i++) {
        distlock_op_free(rel[i]);
        distlock_lock_free(lock[i]);
    }
    uv_close((uv_handle_t *)&poller, NULL);
    uv_close((uv_handle_t *)&timer, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    printf("%d held, %d released, %d failed\n", held, released, failed);
    distlock_multi_free(m);
    distlock_client_free(c);
    return held == TASKS && released == TASKS && failed == 0 ? 0 : 1;
}
