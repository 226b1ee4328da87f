/* fuzz_ttl.c -- libFuzzer target: the one seconds-to-milliseconds TTL rule,
 * distlock_ttl_from_seconds(), which is the C part of the PHP and Python
 * argument conversion (every ttl in seconds goes through it; the rest of
 * their conversion is Zend / SWIG code that needs the interpreter). Input:
 * exactly 8 bytes are a double's bits (NaN, infinities, subnormals, -0);
 * anything else is text read by strtod, as a user would type it.
 * Checks: granted values lie in 1..DISTLOCK_TTL_MAX, are never shorter than
 * asked (but for the few ulps of the binary product, see admin.c) and never a
 * whole millisecond longer; refusals say why. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "distlock.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    double s;
    if (size == sizeof(double)) {
        memcpy(&s, data, sizeof s);
    } else {
        char buf[128];
        size_t n = size < sizeof buf - 1 ? size : sizeof buf - 1;
        memcpy(buf, data, n);
        buf[n] = '\0';
        s = strtod(buf, NULL);
    }
    long ms = -12345;
    int rc = distlock_ttl_from_seconds(s, &ms);
    if (rc == DISTLOCK_OK) {
        if (!(s > 0.0) || !isfinite(s) || ms < 1 || ms > DISTLOCK_TTL_MAX)
            abort();
        double want = s * 1000.0;
        if ((double)ms < want - want * 8 * DBL_EPSILON)
            abort();  /* shorter than asked */
        if ((double)ms - 1.0 >= want)
            abort();  /* a whole millisecond more than asked */
    } else if (rc != DISTLOCK_EINVAL || distlock_last_error()[0] == '\0') {
        abort();
    } else if (s > 0.0 && isfinite(s) && s * 1000.0 <= (double)DISTLOCK_TTL_MAX - 1.0) {
        abort();  /* refused a value well inside the range */
    }
    return 0;
}
