/* ttl.c -- the one TTL rule. A ttl is milliseconds,
 * 1..DISTLOCK_TTL_MAX; front ends that take seconds (PHP, Python, the CLI)
 * turn them into milliseconds here, so the rounding and the bounds are
 * written once. Pure arithmetic: no client, no I/O.
 *
 * Layer: 7 API
 */
#include <float.h>
#include <math.h>  /* isfinite: a macro */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

/* The shortest decimal text that reads back as v, so a detail names the
 * value the caller wrote (0.07, not 0.070000000000000007). */
static void fmt_double(char *buf, size_t size, double v)
{
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, size, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

int distlock_ttl_from_seconds(double seconds, long *ttl_ms)
{
    char v[40];

    distlock__clear_error();
    if (ttl_ms == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "ttl_ms must not be NULL");
    if (!isfinite(seconds) || !(seconds > 0.0)) {
        fmt_double(v, sizeof v, seconds);
        return distlock__fail(DISTLOCK_EINVAL,
                              "ttl must be a finite number of seconds > 0, got %s", v);
    }
    double ms = seconds * 1000.0;
    /* (truncation is floor here: ms > 0; and no libm needed) */
    double whole = ms < (double)DISTLOCK_TTL_MAX + 1.0 ? (double)(long)ms : ms;
    /* Rounded up, so a lease is never shorter than asked -- except for the
     * error of the binary product itself: 0.07 s is 70.00000000000001 ms in
     * doubles, and is 70 ms, not 71. A few ulps of tolerance. */
    if (ms - whole > whole * 4 * DBL_EPSILON)
        whole += 1.0;
    if (whole > (double)DISTLOCK_TTL_MAX) {
        fmt_double(v, sizeof v, seconds);
        return distlock__fail(DISTLOCK_EINVAL,
                              "ttl must be at most %ld.%03ld seconds (DISTLOCK_TTL_MAX ms), got %s",
                              DISTLOCK_TTL_MAX / 1000, DISTLOCK_TTL_MAX % 1000, v);
    }
    *ttl_ms = (long)whole;
    return DISTLOCK_OK;
}
