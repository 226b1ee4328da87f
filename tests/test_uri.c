/* test_uri.c -- URI forms reach the right server and database; ACL auth. */
#include "test_common.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

DEFINE_GROUP(1)

/* Acquire `key` through `uri` and check it landed on db `db` only. */
static void check_db(rh_cluster *rc, const char *uri, int db)
{
    distlock_client *c = new_client(uri);
    distlock_lock *l = NULL;
    char buf[64];
    assert_rc(distlock_acquire(c, "dbkey", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, db, "dbkey", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(l));
    for (int other = 0; other < 8; other++)
        if (other != db) assert_int_equal(rh_get(rc, 0, other, "dbkey", NULL, 0), 0);
    /* Inspect goes to the same db. */
    distlock_holder_info h = { .size = sizeof h };
    assert_rc(distlock_admin_holder(c, "dbkey", 0, &h), 1);
    assert_string_equal(h.token, distlock_lock_token(l));
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, db, "dbkey", NULL, 0), 0);
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_tcp_default_db(void **state)
{
    rh_cluster *rc = *state;
    char uri[128];
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", rc->node[0].port);
    check_db(rc, uri, 0);
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d/", rc->node[0].port);
    /* A trailing slash with no db: either db 0 or refused, never another db. */
    distlock_client *c = NULL;
    int r = distlock_client_new(uri, &c);
    if (r == DISTLOCK_OK) {
        distlock_client_free(c);
        check_db(rc, uri, 0);
    } else {
        assert_rc(r, DISTLOCK_EINVAL);
    }
}

static void test_tcp_db(void **state)
{
    rh_cluster *rc = *state;
    char uri[128];
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d/3", rc->node[0].port);
    check_db(rc, uri, 3);
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d/0", rc->node[0].port);
    check_db(rc, uri, 0);
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d/15", rc->node[0].port);
    check_db(rc, uri, 15);
}

static void test_unix_socket(void **state)
{
    rh_cluster *rc = *state;
    char uri[256];
    snprintf(uri, sizeof uri, "unix://%s", rc->node[0].sock);
    check_db(rc, uri, 0);
    snprintf(uri, sizeof uri, "unix://%s?db=5", rc->node[0].sock);
    check_db(rc, uri, 5);
    /* Unix and TCP URIs of the same server, different dbs, are two distinct
     * nodes as far as the URI goes; their keys do not meet. */
    snprintf(uri, sizeof uri, "unix://%s?db=2", rc->node[0].sock);
    distlock_client *cu = new_client(uri);
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d/4", rc->node[0].port);
    distlock_client *ct = new_client(uri);
    distlock_lock *a = NULL, *b = NULL;
    assert_rc(distlock_acquire(cu, "same", 30000, 0, 0, &a), DISTLOCK_OK);
    assert_rc(distlock_acquire(ct, "same", 30000, 0, 0, &b), DISTLOCK_OK);
    char buf[64];
    assert_int_equal(rh_get(rc, 0, 2, "same", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(a));
    assert_int_equal(rh_get(rc, 0, 4, "same", buf, sizeof buf), 1);
    assert_string_equal(buf, distlock_lock_token(b));
    distlock_lock_free(a);
    distlock_lock_free(b);
    distlock_client_free(cu);
    distlock_client_free(ct);
}

static void test_unix_missing_socket(void **state)
{
    rh_cluster *rc = *state;
    char uri[256];
    snprintf(uri, sizeof uri, "unix://%s/nope.sock", rc->dir);
    distlock_client *c = new_client(uri);
    distlock_lock *l = NULL;
    int r = distlock_acquire(c, "k", 30000, 0, 0, &l);
    assert_true(r < 0);
    assert_null(l);
    assert_non_null(strstr(distlock_last_error(), "nope.sock"));
    distlock_client_free(c);
}

static void test_acl_auth(void **state)
{
    rh_cluster *rc = *state;
    redisReply *r = rh_command(rc, 0, 0, "ACL SETUSER dltest on >s3cret ~* &* +@all");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);

    char uri[256];
    snprintf(uri, sizeof uri, "redis://dltest:s3cret@127.0.0.1:%d/1", rc->node[0].port);
    check_db(rc, uri, 1);
    /* The password never shows in the node URI. */
    distlock_client *c = new_client(uri);
    const char *shown = distlock_client_node_uri(c, 0);
    assert_non_null(shown);
    assert_null(strstr(shown, "s3cret"));
    assert_non_null(strstr(shown, "***"));
    distlock_client_free(c);

    /* Credentials as options instead of in the URI. */
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", rc->node[0].port);
    distlock_lock *l = NULL;
    int st;
    r = rh_command(rc, 0, 0, "ACL SETUSER onlyopt on >p4ss ~lockns:* &* +@all");
    assert_non_null(r);
    freeReplyObject(r);
    c = new_client(uri);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_USERNAME, "onlyopt"), DISTLOCK_OK);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_PASSWORD, "p4ss"), DISTLOCK_OK);
    assert_rc(distlock_acquire(c, "lockns:a", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "lockns:a", NULL, 0), 1);
    distlock_lock_free(l);
    l = NULL;
    /* That user may not touch other keys: a server error, not "held by someone". */
    st = distlock_acquire(c, "other:a", 30000, 0, 0, &l);
    assert_true(st < 0);
    assert_null(l);
    distlock_client_free(c);

    r = rh_command(rc, 0, 0, "ACL DELUSER dltest onlyopt");
    assert_non_null(r);
    freeReplyObject(r);
}

/* A key of another type: a server error (WRONGTYPE), never a crash or success. */
static void test_wrongtype(void **state)
{
    rh_cluster *rc = *state;
    redisReply *r = rh_command(rc, 0, 0, "HSET hkey f v");
    assert_non_null(r);
    freeReplyObject(r);
    char uri[128];
    snprintf(uri, sizeof uri, "redis://127.0.0.1:%d", rc->node[0].port);
    distlock_client *c = new_client(uri);
    distlock_lock *l = NULL;
    int st = distlock_acquire(c, "hkey", 30000, 0, 0, &l);
    assert_true(st != DISTLOCK_OK);
    assert_null(l);
    st = distlock_release_token(c, "hkey", "tok");
    assert_true(st < 0);
    r = rh_command(rc, 0, 0, "TYPE hkey");
    assert_non_null(r);
    assert_string_equal(r->str, "hash");
    freeReplyObject(r);
    distlock_client_free(c);
}

/* No key at all in any database of node 0. */
static void assert_server_empty(rh_cluster *rc)
{
    redisReply *r = rh_command(rc, 0, 0, "INFO keyspace");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    if (strstr(r->str, "keys=")) {
        print_error("keys on the server after a refused login:\n%s\n", r->str);
        freeReplyObject(r);
        fail();
    }
    freeReplyObject(r);
}

/* A wrong password while the server's default user is open (the harness
 * connects without AUTH): the call must
 * not run as 'default' (it was pipelined behind the failing AUTH), so
 * nothing is stored; the error names the server and not the password. */
static void test_wrong_password(void **state)
{
    rh_cluster *rc = *state;
    redisReply *r = rh_command(rc, 0, 0, "ACL SETUSER dltest on >s3cret ~* &* +@all");
    assert_non_null(r);
    freeReplyObject(r);
    char uri[128], where[64];
    snprintf(uri, sizeof uri, "redis://dltest:badpw42@127.0.0.1:%d", rc->node[0].port);
    snprintf(where, sizeof where, "127.0.0.1:%d", rc->node[0].port);
    const unsigned flags[] = { 0, DISTLOCK_FENCING, DISTLOCK_FAIR, DISTLOCK_REENTRANT };
    for (size_t f = 0; f < sizeof flags / sizeof flags[0]; f++) {
        distlock_client *c = new_client(uri);
        distlock_lock *l = NULL;
        int st = distlock_acquire(c, "k", 30000, 0, flags[f], &l);
        const char *err = distlock_last_error();
        printf("# wrong password, flags %#x: %d, \"%s\"\n", flags[f], st, err);
        assert_true(st < 0);
        assert_null(l);
        assert_non_null(strstr(err, where));
        assert_null(strstr(err, "badpw42"));
        assert_server_empty(rc);
        /* Also through the options, and by token. */
        assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_PASSWORD, "wrong-again"), DISTLOCK_OK);
        st = distlock_acquire(c, "k", 30000, 0, flags[f], &l);
        assert_true(st < 0);
        assert_null(l);
        assert_null(strstr(distlock_last_error(), "wrong-again"));
        assert_server_empty(rc);
        distlock_client_free(c);
    }
    /* The right password works on the same server (the check can fail). */
    snprintf(uri, sizeof uri, "redis://dltest:s3cret@127.0.0.1:%d", rc->node[0].port);
    distlock_client *c = new_client(uri);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "k", 30000, 0, 0, &l), DISTLOCK_OK);
    assert_int_equal(rh_get(rc, 0, 0, "k", NULL, 0), 1);
    distlock_lock_free(l);
    distlock_client_free(c);
    r = rh_command(rc, 0, 0, "ACL DELUSER dltest");
    assert_non_null(r);
    freeReplyObject(r);
}

/* The socket fds open in this process: fds[] gets them, returns how many. */
static int socket_fds(int *fds, int max)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        int fd = atoi(e->d_name);
        if (fd == dirfd(d)) continue;
        char path[300], target[128];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len <= 0) continue;
        target[len] = '\0';
        if (strncmp(target, "socket:", 7) == 0 && n < max) fds[n++] = fd;
    }
    closedir(d);
    return n;
}

/* Every socket the library opens (TCP and Unix, plain and scripted calls)
 * is close-on-exec: a command the caller execs must not inherit them. */
static void test_sockets_cloexec(void **state)
{
    rh_cluster *rc = *state;
    char tcp[128], unx[256];
    snprintf(tcp, sizeof tcp, "redis://127.0.0.1:%d/1", rc->node[0].port);
    snprintf(unx, sizeof unx, "unix://%s?db=2", rc->node[0].sock);
    int before[256], after[256];
    int nb = socket_fds(before, 256);
    distlock_client *c[2] = { new_client(tcp), new_client(unx) };
    distlock_lock *l[2] = { NULL, NULL }, *lf[2] = { NULL, NULL };
    for (int i = 0; i < 2; i++) {
        assert_rc(distlock_acquire(c[i], "cx", 30000, 0, 0, &l[i]), DISTLOCK_OK);
        assert_rc(distlock_acquire(c[i], "cxf", 30000, 0, DISTLOCK_FENCING, &lf[i]), DISTLOCK_OK);
        /* A wait opens the release-notification subscription too. */
        distlock_lock *w = NULL;
        assert_rc(distlock_acquire(c[i], "cx", 30000, 100, 0, &w), DISTLOCK_NOTACQUIRED);
        assert_null(w);
    }
    int na = socket_fds(after, 256);
    int fresh = 0;
    for (int i = 0; i < na; i++) {
        int old = 0;
        for (int j = 0; j < nb && !old; j++) old = after[i] == before[j];
        if (old) continue;
        fresh++;
        int fl = fcntl(after[i], F_GETFD);
        if (fl < 0 || !(fl & FD_CLOEXEC)) {
            print_error("library socket fd %d is not close-on-exec (F_GETFD = %d)\n", after[i], fl);
            fail();
        }
    }
    printf("# %d new socket fd(s) after acquiring and waiting over TCP and a Unix socket, "
           "all FD_CLOEXEC\n",
           fresh);
    assert_true(fresh >= 2);   /* one per client at least */
    for (int i = 0; i < 2; i++) {
        assert_rc(distlock_release(l[i]), DISTLOCK_OK);
        assert_rc(distlock_release(lf[i]), DISTLOCK_OK);
        distlock_lock_free(l[i]);
        distlock_lock_free(lf[i]);
        distlock_client_free(c[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_tcp_default_db, heal),
        cmocka_unit_test_setup(test_tcp_db, heal),
        cmocka_unit_test_setup(test_unix_socket, heal),
        cmocka_unit_test_setup(test_unix_missing_socket, heal),
        cmocka_unit_test_setup(test_acl_auth, heal),
        cmocka_unit_test_setup(test_wrongtype, heal),
        cmocka_unit_test_setup(test_wrong_password, heal),
        cmocka_unit_test_setup(test_sockets_cloexec, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
