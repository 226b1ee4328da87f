/* clock.c -- every duration is measured on CLOCK_MONOTONIC: wall-clock
 * jumps must not stretch or shrink a lock's validity. */
#include <time.h>

#include "internal.h"

uint64_t distlock__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t distlock__now_ms(void)
{
    return distlock__now_us() / 1000u;
}
