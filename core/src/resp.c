/* resp.c -- the one RESP encoder (transport). Requests are encoded here,
 * into a stack buffer when they fit: hiredis' redisFormatSdsCommandArgv
 * (sdscatfmt per argument) was ~40% of the client's instructions per
 * lock+unlock. */
#include <stdlib.h>
#include <string.h>

#include "transport.h"

static char *resp_header(char *p, char type, size_t n)
{
    *p++ = type;
    p += distlock__ltoa(p, (long long)n);
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

int distlock__resp_append(redisContext *ctx, int argc, const char **argv, const size_t *len)
{
    char stack[512], *buf = stack, *p;  /* a lock request with a short key fits */
    size_t total = 16;
    int rc;

    for (int a = 0; a < argc; a++)
        total += len[a] + 28;
    if (total > sizeof(stack) && (buf = malloc(total)) == NULL)
        return -1;
    p = resp_header(buf, '*', (size_t)argc);
    for (int a = 0; a < argc; a++) {
        p = resp_header(p, '$', len[a]);
        memcpy(p, argv[a], len[a]);
        p += len[a];
        *p++ = '\r';
        *p++ = '\n';
    }
    rc = redisAppendFormattedCommand(ctx, buf, (size_t)(p - buf)) == REDIS_OK ? 0 : -1;
    if (buf != stack)
        free(buf);
    return rc;
}

