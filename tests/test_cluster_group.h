/* test_cluster_group.h -- a Redis Cluster (cluster_harness.h) as the cmocka
 * group of a test file: CL, started by DEFINE_CLUSTER_GROUP(start) with the
 * expression start (e.g. rh_rcl_start_n(3, 0)) and stopped after the group.
 * Include after test_common.h. */
#ifndef DISTLOCK_TEST_CLUSTER_GROUP_H
#define DISTLOCK_TEST_CLUSTER_GROUP_H

#include "harness/cluster_harness.h"

static rh_rcl *CL;

#define DEFINE_CLUSTER_GROUP(start)                                           \
    static int group_setup(void **state) {                                    \
        (void)state;                                                          \
        setvbuf(stdout, NULL, _IOLBF, 0);                                     \
        CL = (start);                                                         \
        return CL ? 0 : -1;                                                   \
    }                                                                         \
    static int group_teardown(void **state) {                                 \
        (void)state;                                                          \
        rh_rcl_stop(CL);                                                      \
        return 0;                                                             \
    }

#endif
