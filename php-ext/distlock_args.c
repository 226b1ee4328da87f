/* distlock_args.c -- argument checks shared by the compatibility functions
 * and the classes: keys, and seconds to milliseconds (the TTL through the
 * library's one TTL rule). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <string.h>

#include "php.h"
#include "php_distlock_int.h"

/* A lock key: 1..DISTLOCK_KEY_MAX bytes, no NUL (the C API takes C strings). */
bool dl_check_key(uint32_t argn, const zend_string *key)
{
    if (ZSTR_LEN(key) == 0) {
        zend_argument_value_error(argn, "must not be empty");
        return false;
    }
    if (ZSTR_LEN(key) > DISTLOCK_KEY_MAX) {
        zend_argument_value_error(argn, "must be at most %d bytes long", DISTLOCK_KEY_MAX);
        return false;
    }
    if (memchr(ZSTR_VAL(key), '\0', ZSTR_LEN(key)) != NULL) {
        zend_argument_value_error(argn, "must not contain any null bytes");
        return false;
    }
    return true;
}

/* A TTL in seconds to milliseconds by the library's one TTL rule
 * (distlock_ttl_from_seconds: rounded up, 1 ms..DISTLOCK_TTL_MAX); false and
 * a ValueError with the library's detail, which names the value, otherwise. */
bool dl_ttl_from_seconds(uint32_t argn, double s, long *out)
{
    if (distlock_ttl_from_seconds(s, out) != DISTLOCK_OK) {
        const char *d = distlock_last_error();
        /* "ttl must be ..." reads "Argument #2 ($ttl) must be ..." */
        if (strncmp(d, "ttl ", 4) == 0) {
            d += 4;
        }
        zend_argument_value_error(argn, "%s", d);
        return false;
    }
    return true;
}

/* Seconds (float) to milliseconds in [min_ms, max_ms]; false + ValueError otherwise. */
bool dl_seconds_to_ms(uint32_t argn, double s, long min_ms, long max_ms, long *out)
{
    double ms = s * 1000.0;

    if (!zend_finite(s) || ms < (double)min_ms - 0.5 || ms > (double)max_ms + 0.5) {
        zend_argument_value_error(argn, "must be between %.3F and %.3F seconds",
                                  (double)min_ms / 1000.0, (double)max_ms / 1000.0);
        return false;
    }
    *out = (long)llround(ms);
    if (*out < min_ms) {
        *out = min_ms;
    }
    return true;
}

