/* resp.c -- the one RESP encoder. Requests are encoded here,
 * straight into the output buffer: hiredis' redisFormatSdsCommandArgv
 * (sdscatfmt per argument) was ~40% of the client's instructions per
 * lock+unlock.
 *
 * Layer: 1 transport */
#include <stdlib.h>
#include <string.h>

#include <hiredis/sds.h>

#include "transport.h"

static char *resp_header(char *p, char type, size_t n)
{
    *p++ = type;
    p += distlock__ltoa(p, (long long)n);
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/* Written straight into the context's output buffer: no copy, no stack
 * buffer. */
int distlock__resp_append(redisContext *ctx, int argc, const char **argv, const size_t *len)
{
    /* Room for the worst case (20 digits a number): sizing costs no
     * division, and sdsMakeRoomFor only makes sure of the capacity. */
    size_t total = 1 + 20 + 2;
    for (int a = 0; a < argc; a++)
        total += 1 + 20 + 2 + len[a] + 2;
    sds grown = sdsMakeRoomFor(ctx->obuf, total);
    if (grown == NULL)
        return -1;
    ctx->obuf = grown;
    char *p0 = ctx->obuf + sdslen(ctx->obuf), *p = p0;
    p = resp_header(p, '*', (size_t)argc);
    for (int a = 0; a < argc; a++) {
        p = resp_header(p, '$', len[a]);
        memcpy(p, argv[a], len[a]);
        p += len[a];
        *p++ = '\r';
        *p++ = '\n';
    }
    sdsIncrLen(ctx->obuf, (int)(p - p0));
    return 0;
}

int distlock__resp_append_raw(redisContext *ctx, const char *p, size_t n)
{
    sds grown = sdscatlen(ctx->obuf, p, n);
    if (grown == NULL)
        return -1;
    ctx->obuf = grown;
    return 0;
}
