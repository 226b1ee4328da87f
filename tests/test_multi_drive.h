/* test_multi_drive.h -- the tests' event loop for a distlock_multi
 * (include after test_common.h): one turn of poll() on the multi's
 * descriptor up to its timeout, then perform; driving until an op is done
 * or for a while; and the check of an op's status with its detail. */
#ifndef TEST_MULTI_DRIVE_H
#define TEST_MULTI_DRIVE_H

#include <poll.h>

/* One turn of the caller's loop: wait on the multi's descriptor up to its
 * timeout (capped at cap_ms), then perform. Returns perform's count. */
static inline int multi_turn(distlock_multi *m, long cap_ms)
{
    struct pollfd p = { distlock_multi_fd(m), POLLIN, 0 };
    long t = distlock_multi_timeout(m);
    if (t < 0 || t > cap_ms)
        t = cap_ms;
    assert_true(p.fd >= 0);
    (void)poll(&p, 1, (int)t);
    int n = distlock_multi_perform(m);
    assert_true(n >= 0);
    return n;
}

/* Drive m until op is done (at most limit_ms); the ops that finish
 * meanwhile are left in the completion queue. */
static inline void multi_drive_until(distlock_multi *m, distlock_op *op, long limit_ms)
{
    long long end = rh_now_ms() + limit_ms;
    while (!distlock_op_done(op)) {
        if (rh_now_ms() > end) {
            print_error("op %llu not done after %ld ms\n", (unsigned long long)distlock_op_id(op),
                        limit_ms);
            fail();
        }
        multi_turn(m, 50);
    }
}

/* Drive m for ms milliseconds whatever happens. */
static inline void multi_drive_for(distlock_multi *m, long ms)
{
    long long end = rh_now_ms() + ms;
    while (rh_now_ms() < end)
        multi_turn(m, end - rh_now_ms() > 0 ? (long)(end - rh_now_ms()) : 0);
}

#define assert_op(op, want) do {                                              \
        int st__ = distlock_op_status(op);                                    \
        if (st__ != (want)) {                                                 \
            print_error("op status %d (%s), expected %d; error: \"%s\"\n", st__, \
                        distlock_strerror(st__), (int)(want), distlock_op_error(op)); \
            fail();                                                           \
        }                                                                     \
    } while (0)

#endif
