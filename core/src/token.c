/* token.c -- lock tokens from the OS CSPRNG (getrandom, as libuv does), so
 * no other client can guess ours and release our lock. */
#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include "internal.h"

int distlock__random_bytes(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return distlock__fail(DISTLOCK_EPROTO, "getrandom: errno %d", errno);
        }
        p += r;
        n -= (size_t)r;
    }
    return DISTLOCK_OK;
}

uint64_t distlock__random_u64(void)
{
    uint64_t v = 0;
    (void)distlock__random_bytes(&v, sizeof(v));
    return v;
}

int distlock_token_generate(char *buf, size_t size)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char raw[16];
    int rc;

    if (buf == NULL || size < 33)
        return distlock__fail(DISTLOCK_EINVAL, "token buffer must hold at least 33 bytes");
    if ((rc = distlock__random_bytes(raw, sizeof(raw))) != DISTLOCK_OK)
        return rc;
    for (int i = 0; i < 16; i++) {
        buf[2 * i] = hex[raw[i] >> 4];
        buf[2 * i + 1] = hex[raw[i] & 15];
    }
    buf[32] = '\0';
    return DISTLOCK_OK;
}
