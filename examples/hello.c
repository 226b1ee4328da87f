/* hello.c -- take a lock, do the work, release it.
 *   cc hello.c $(pkg-config --cflags --libs distlock) -o hello
 *   ./hello redis://127.0.0.1:6379          (or a comma list for Redlock) */
#include <distlock.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    distlock_client *client;
    distlock_lock *lock;
    const char *servers = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";

    if (distlock_client_new(servers, &client) != DISTLOCK_OK) {
        fprintf(stderr, "bad servers: %s\n", distlock_last_error());
        return 2;
    }
    /* 30 s lease, wait up to 5 s for it */
    int rc = distlock_acquire(client, "order:42", 30000, 5000, 0, &lock);
    if (rc != DISTLOCK_OK) {
        fprintf(stderr, "not acquired (%s): %s\n", distlock_strerror(rc), distlock_last_error());
        distlock_client_free(client);
        return 1;
    }
    printf("holding %s with token %s for %ld ms more\n", distlock_lock_key(lock),
           distlock_lock_token(lock), distlock_lock_validity_ms(lock));
    /* ... the critical section ... */
    rc = distlock_release(lock);   /* DISTLOCK_ENOTOWNER if it had expired */
    printf("release: %s\n", distlock_strerror(rc));
    distlock_lock_free(lock);
    distlock_client_free(client);
    return rc == DISTLOCK_OK ? 0 : 1;
}
