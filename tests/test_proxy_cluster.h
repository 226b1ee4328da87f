/* test_proxy_cluster.h -- real redis-servers with the fault-injecting proxy
 * in front of them (listener L -> node L), and helpers to drive the proxy
 * and to read the library's proxied connections. Include after
 * test_common.h. */
#ifndef DISTLOCK_TEST_PROXY_CLUSTER_H
#define DISTLOCK_TEST_PROXY_CLUSTER_H

#include <strings.h>

#include "harness/faultproxy.h"

typedef struct proxy_env {
    rh_cluster *rc;
    fp_proxy *fp;
} proxy_env;

/* Assert a proxy command answered ok (it has taken effect when it returns). */
#define fp_ok(fp, ...) do {                                                   \
        char rep__[512];                                                      \
        if (fp_cmd((fp), rep__, sizeof rep__, __VA_ARGS__) != 0) {            \
            print_error("faultproxy command failed: %s\n", rep__);           \
            fail();                                                           \
        }                                                                     \
    } while (0)

/* Deliver what the proxy holds on one connection. The fixed library may
 * have closed that connection server-side first (CLIENT KILL of a lost
 * connection carrying an earlier request of the same lock): then the
 * server dropped the held bytes and the proxy no longer has the
 * connection, which is exactly the protection, not a test failure. */
#define fp_unhold_or_killed(fp, ...) do {                                             char rep__[512];                                                              if (fp_cmd((fp), rep__, sizeof rep__, __VA_ARGS__) != 0) {                        if (strstr(rep__, "no connection") == NULL) {                                     print_error("faultproxy command failed: %s\n", rep__);                       fail();                                                                   }                                                                             printf("# held connection already closed by the server (killed): "                    "its requests can no longer run\n");                              }                                                                         } while (0)

/* Group: NODES servers, a proxy in front of them (started from the main
 * thread, see faultproxy.h). */
#define DEFINE_PROXY_GROUP(NODES)                                             \
    static int group_setup(void **state) {                                    \
        setvbuf(stdout, NULL, _IOLBF, 0);                                     \
        proxy_env *e = calloc(1, sizeof *e);                                     \
        if (!e) return -1;                                                    \
        e->rc = rh_start(NODES);                                              \
        if (!e->rc) { free(e); return -1; }                                   \
        e->fp = fp_front(e->rc);                                              \
        if (!e->fp) { rh_stop_all(e->rc); free(e); return -1; }               \
        *state = e;                                                           \
        return 0;                                                             \
    }                                                                         \
    static int group_teardown(void **state) {                                 \
        proxy_env *e = *state;                                                   \
        fp_stop(e->fp);                                                       \
        rh_stop_all(e->rc);                                                   \
        free(e);                                                              \
        return 0;                                                             \
    }                                                                         \
    /* Per test: no fault left in the proxy; every node up, empty, no        \
     * cached scripts, no ACL user of an earlier test. */                    \
    static int heal(void **state) {                                           \
        proxy_env *e = *state;                                                   \
        if (fp_cmd(e->fp, NULL, 0, "heal") != 0) return -1;                   \
        if (rh_heal(e->rc) != 0) return -1;                                   \
        for (int i = 0; i < e->rc->n; i++) {                                  \
            redisReply *r = rh_command(e->rc, i, 0, "ACL DELUSER app");       \
            if (r) freeReplyObject(r);                                        \
            r = rh_command(e->rc, i, 0, "ACL SETUSER default on nopass ~* &* +@all"); \
            if (r) freeReplyObject(r);                                        \
            r = rh_command(e->rc, i, 0, "ACL LOG RESET");                     \
            if (r) freeReplyObject(r);                                        \
        }                                                                     \
        return 0;                                                             \
    }

/* A client on the proxy's listeners (every node behind the proxy). */
static inline distlock_client *proxied_client(proxy_env *e)
{
    return new_client(fp_uris(e->fp));
}

/* Calls return at quorum, leaving the slowest node's reply on its way:
 * one inspect per node reads every reply still owed on the client's
 * connection set (single-threaded use: the same set serves every call), so
 * no late reply of an earlier call meets a fault armed afterwards. */
static inline void sync_conns(distlock_client *c)
{
    int n = distlock_client_node_count(c);
    for (int i = 0; i < n; i++) {
        int r = distlock_admin_holder(c, "proxy:sync", i, NULL);
        if (r != 0) {
            print_error("sync inspect of node %d: %d (%s)\n", i, r, distlock_last_error());
            fail();
        }
    }
}

/* One acquire/release on a scratch key: the client's connection set is
 * open and authenticated on every node afterwards, with no reply owed. */
static inline void warm_up(distlock_client *c)
{
    assert_rc(distlock_acquire_token(c, "proxy:warm", 10000, "warm", 0, NULL), DISTLOCK_OK);
    assert_rc(distlock_release_token(c, "proxy:warm", "warm"), DISTLOCK_OK);
    sync_conns(c);
}

/* The newest connection of listener l: after warm_up() from one thread,
 * the library's connection to node l. */
static inline int lib_conn(proxy_env *e, int l)
{
    int id = fp_last_conn(e->fp, l);
    if (id < 0) {
        print_error("no proxied connection on listener %d\n", l);
        fail();
    }
    return id;
}

/* One proxy connection's counters (-1 id if it is gone). */
static inline fp_conn conn_info(proxy_env *e, int l, int id)
{
    fp_conn all[256], none;
    memset(&none, 0, sizeof none);
    none.id = -1;
    int n = fp_conns(e->fp, l, all, 256);
    for (int k = 0; k < n; k++)
        if (all[k].id == id) return all[k];
    return none;
}

/* The proxy has read everything the library wrote so far: a control round
 * trip is answered only after the proxy's loop has taken in data that was
 * already waiting on its sockets (held bytes are counted then). */
static inline void proxy_settle(proxy_env *e)
{
    fp_ok(e->fp, "ping");
    fp_ok(e->fp, "ping");
}

/* How many library connections (not the harness's) of node i last ran a
 * command starting with `cmd` (CLIENT LIST). */
static inline int node_ran(proxy_env *e, int i, const char *cmd)
{
    long long ids[64];
    return rh_lib_conn_ids(e->rc, i, cmd, ids, 64);
}

/* Print, then fail, unless key is absent from every node (the rh_* reads
 * use fresh connections: two round trips each, so bytes the proxy already
 * delivered to a node have been executed by the time they look). */
#define assert_no_key_anywhere(e, key) do {                                   \
        for (int i__ = 0; i__ < (e)->rc->n; i__++) {                          \
            char v__[256];                                                    \
            int g__ = rh_get((e)->rc, i__, 0, (key), v__, sizeof v__);        \
            if (g__ != 0) {                                                   \
                print_error("node %d still holds %s = \"%s\" (pttl %lld ms)\n", i__, (key), \
                            g__ == 1 ? v__ : "<error>", rh_pttl((e)->rc, i__, 0, (key))); \
                fail();                                                       \
            }                                                                 \
        }                                                                     \
    } while (0)

static inline int contains_ci(const char *hay, const char *needle)
{
    return hay && strcasestr(hay, needle) != NULL;
}

#endif
