/* multi_poll.c -- the non-blocking API from a plain poll() loop.
 *
 * Five acquires of one key and one of another, all started at once from
 * one thread: the multi serves the key's acquires one after the other (each
 * winner releases through the multi, which hands the key to the next at
 * once), and the other key's acquire is not held up by them.
 *
 *   multi_poll [SERVERS]       (default redis://127.0.0.1:6379)
 *
 * Exit status 0 when every acquire won and every release succeeded. */
#include <distlock.h>
#include <poll.h>
#include <stdio.h>

#define N 6

int main(int argc, char **argv)
{
    const char *servers = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
    distlock_client *c;
    distlock_multi *m;
    if (distlock_client_new(servers, &c) != DISTLOCK_OK ||
        distlock_multi_new(c, &m) != DISTLOCK_OK) {
        fprintf(stderr, "%s\n", distlock_last_error());
        return 1;
    }
    distlock_op *acq[N], *rel[N];
    distlock_lock *lock[N];          /* a handle lives until its release is done */
    int won = 0, released = 0, failed = 0;
    for (int i = 0; i < N; i++) {
        /* ttl 10 s, waiting up to 10 s */
        const char *key = i < N - 1 ? "example:shared-key" : "example:other-key";
        if (distlock_multi_acquire(m, key, 10000, 10000, 0, NULL, &acq[i]) != DISTLOCK_OK) {
            fprintf(stderr, "acquire %d: %s\n", i, distlock_last_error());
            return 1;
        }
    }
    while (won + failed < N || released < won) {
        /* wait for the multi's one descriptor, at most until its timeout */
        struct pollfd p = { distlock_multi_fd(m), POLLIN, 0 };
        long t = distlock_multi_timeout(m);
        poll(&p, 1, t < 0 ? 1000 : (int)t);
        if (distlock_multi_perform(m) < 0)
            return 1;
        distlock_op *op;
        while ((op = distlock_multi_done(m)) != NULL) {
            if (distlock_op_status(op) != DISTLOCK_OK) {
                fprintf(stderr, "op %llu: %s\n", (unsigned long long)distlock_op_id(op),
                        distlock_op_error(op));
                failed++;
                continue;
            }
            distlock_lock *l = distlock_op_take_lock(op);
            if (l != NULL) {  /* an acquire won: do the work, then release */
                printf("op %llu holds %s\n", (unsigned long long)distlock_op_id(op),
                       distlock_lock_key(l));
                lock[won] = l;
                if (distlock_multi_release(m, l, &rel[won]) != DISTLOCK_OK) {
                    fprintf(stderr, "release: %s\n", distlock_last_error());
                    return 1;
                }
                won++;
            } else {
                released++;  /* a release finished */
            }
        }
    }
    for (int i = 0; i < N; i++)
        distlock_op_free(acq[i]);
    for (int i = 0; i < won; i++) {
        distlock_op_free(rel[i]);
        distlock_lock_free(lock[i]);
    }
    printf("%d acquired, %d released, %d failed\n", won, released, failed);
    distlock_multi_free(m);
    distlock_client_free(c);
    return won == N && released == N && failed == 0 ? 0 : 1;
}
