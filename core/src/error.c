/* error.c -- static status texts and the per-thread detail message.
 * The detail lives in thread-local storage (libgit2's git_error_last model),
 * not on the client, because one client is shared by many threads. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base.h"

static _Thread_local char last_error[512];

int distlock__fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return status;
}

void distlock__clear_error(void)
{
    last_error[0] = '\0';
}

char *distlock__error_copy(void)
{
    return strdup(last_error);
}

const char *distlock_last_error(void)
{
    return last_error;
}

const char *distlock_strerror(int status)
{
    switch (status) {
    case DISTLOCK_OK: return "success";
    case DISTLOCK_NOTACQUIRED: return "lock is held by another owner";
    case DISTLOCK_EINVAL: return "invalid argument";
    case DISTLOCK_ENOMEM: return "out of memory";
    case DISTLOCK_ECONN: return "node unreachable or not replying";
    case DISTLOCK_ETIMEDOUT: return "the ttl was used up before the call completed";
    case DISTLOCK_ENOQUORUM: return "quorum of nodes unreachable";
    case DISTLOCK_ENOTOWNER: return "not the lock owner (expired, lost or released)";
    case DISTLOCK_EPROTO: return "server error or unexpected reply";
    case DISTLOCK_ECLOSED: return "not usable (closed, or inherited across fork)";
    case DISTLOCK_ECANCELED: return "cancelled";
    case DISTLOCK_ESYS: return "system resource unavailable";
    default: return "unknown status";
    }
}

unsigned distlock_version_number(void)
{
    return DISTLOCK_VERSION_NUMBER;
}

const char *distlock_version_string(void)
{
    return DISTLOCK_VERSION_STRING;
}
