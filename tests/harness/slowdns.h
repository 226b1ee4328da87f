/*
 * slowdns.h -- slow / failing name resolution for tests (slowdns.c).
 *
 * slowdns.c defines getaddrinfo(). A lookup of a name listed in the rules
 * sleeps MS milliseconds, then resolves to the given numeric address (through
 * the real getaddrinfo, so ports/hints/freeaddrinfo behave normally) or fails
 * with EAI_NONAME ("fail"). Other names go to the real getaddrinfo untouched.
 *
 * Rules: "name=MS=ADDR;name=MS=fail;..." (names compared case-insensitively),
 * from the environment variable DISTLOCK_SLOWDNS at the first lookup, or set
 * with slowdns_set() at any time. Example:
 *     DISTLOCK_SLOWDNS='slow.test=1000=127.0.0.1;dead.test=1500=fail'
 *
 * Two ways to use it:
 *  - LD_PRELOAD=.../libslowdns.so (PHP, Python, the CLI, any binary). Under
 *    ASan also set ASAN_OPTIONS=verify_asan_link_order=0 (ASan wants to be
 *    first in the library list) -- or link it in instead:
 *  - link the object library distlock_slowdns into a test executable
 *    (CMake: target_link_libraries(test_x PRIVATE distlock_slowdns)). The
 *    executable's getaddrinfo then also serves libdistlock.so and libhiredis
 *    (the symbol is exported from the executable), with or without ASan/TSan,
 *    whose own getaddrinfo interceptors are what RTLD_NEXT finds then.
 */
#ifndef DISTLOCK_SLOWDNS_H
#define DISTLOCK_SLOWDNS_H

/* Replace the rules (NULL or "": no rules; everything passes through).
 * 0 on success, -1 if rules is malformed (the old rules are kept). */
int slowdns_set(const char *rules);
/* getaddrinfo() calls for name since the start or the last reset (name NULL:
 * all calls), whether or not a rule matched. */
int slowdns_calls(const char *name);
void slowdns_reset_calls(void);

#endif
