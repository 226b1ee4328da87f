/* token.c -- lock tokens from the OS CSPRNG (getrandom, as libuv does), so
 * no other client can guess ours and release our lock.
 *
 * Layer: 0 base */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base.h"

static int random_bytes(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return distlock__fail(DISTLOCK_ESYS, "getrandom: errno %d", errno);
        }
        p += r;
        n -= (size_t)r;
    }
    return DISTLOCK_OK;
}

uint64_t distlock__random_u64(void)
{
    uint64_t v = 0;
    (void)random_bytes(&v, sizeof(v));
    return v;
}

/* A generated token: 16 random bytes (128 bits), 32 hex characters
 * (distlock.h: a buffer of at least 33 bytes). */
#define TOKEN_BYTES 16

/* Tokens come from a small per-thread buffer of getrandom() output, refilled
 * POOL_TOKENS tokens at a time: one system call per 32 locks instead of one
 * per lock. The buffer is dropped in a forked child, which must never hand
 * out the tokens its parent will also use. */
#define POOL_TOKENS 32

static _Thread_local unsigned char pool[POOL_TOKENS * TOKEN_BYTES];
static _Thread_local size_t pool_left;
static _Thread_local pid_t pool_pid;

static int token_bytes(unsigned char out[TOKEN_BYTES])
{
    pid_t me = distlock__getpid();
    if (pool_left < TOKEN_BYTES || pool_pid != me) {
        int rc = random_bytes(pool, sizeof(pool));
        if (rc != DISTLOCK_OK)
            return rc;
        pool_left = sizeof(pool);
        pool_pid = me;
    }
    pool_left -= TOKEN_BYTES;
    memcpy(out, pool + pool_left, TOKEN_BYTES);
    memset(pool + pool_left, 0, TOKEN_BYTES);  /* handed out once */
    return DISTLOCK_OK;
}

int distlock_token_generate(char *buf, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[TOKEN_BYTES];
    int rc;

    if (buf == NULL || size < 2 * TOKEN_BYTES + 1)
        return distlock__fail(DISTLOCK_EINVAL, "token buffer must hold at least %d bytes",
                              2 * TOKEN_BYTES + 1);
    if ((rc = token_bytes(raw)) != DISTLOCK_OK)
        return rc;
    for (int i = 0; i < TOKEN_BYTES; i++) {
        buf[2 * i] = hex[raw[i] >> 4];
        buf[2 * i + 1] = hex[raw[i] & 15];
    }
    buf[2 * TOKEN_BYTES] = '\0';
    return DISTLOCK_OK;
}
