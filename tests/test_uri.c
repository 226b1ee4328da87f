/* test_uri.c -- URI forms reach the right server and database; ACL auth.
 *
 * The server list: no password ever appears in distlock_last_error() (a bad
 * URI must not be echoed whole, password included) or
 * distlock_client_node_uri(); one server named twice is not two nodes:
 * textual/numeric duplicates (127.1 = 127.0.0.1, ::1 spellings) are
 * DISTLOCK_EINVAL at distlock_client_new(); names that resolve to the same
 * endpoint (localhost) are DISTLOCK_EINVAL at the first operation that
 * connects, naming both nodes, with no key left behind; a Unix socket path
 * longer than sun_path holds (107 bytes) is DISTLOCK_EINVAL naming the limit
 * (never silently truncated). */
#include "test_common.h"

#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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
    node_command_ok(rc, 0, "ACL SETUSER dltest on >s3cret ~* &* +@all");

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
    node_command_ok(rc, 0, "ACL SETUSER onlyopt on >p4ss ~lockns:* &* +@all");
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

    node_command_ok(rc, 0, "ACL DELUSER dltest onlyopt");
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

/* Every socket() of this process while sockets_counted is set: how many,
 * and how many were made without SOCK_CLOEXEC (inheritable until a later
 * fcntl, so a fork and exec on another thread in between leaks them). The
 * definition here takes the place of libc's for the library and hiredis
 * (the executable's symbols come first) and makes the system call itself. */
static atomic_int sockets_counted, sockets_made, sockets_inheritable;

int socket(int domain, int type, int protocol)
{
    int fd = (int)syscall(SYS_socket, domain, type, protocol);
    if (fd >= 0 && atomic_load(&sockets_counted)) {
        atomic_fetch_add(&sockets_made, 1);
        if (!(type & SOCK_CLOEXEC))
            atomic_fetch_add(&sockets_inheritable, 1);
    }
    return fd;
}

/* Every socket the library opens (TCP and Unix, plain and scripted calls,
 * the release-notification subscription) is close-on-exec from its
 * creation: a command the caller execs, even from another thread while a
 * connection is being opened, must not inherit them. */
static void test_sockets_born_close_on_exec(void **state)
{
    rh_cluster *rc = *state;
    char tcp[128], unx[256];
    snprintf(tcp, sizeof tcp, "redis://127.0.0.1:%d/1", rc->node[0].port);
    snprintf(unx, sizeof unx, "unix://%s?db=2", rc->node[0].sock);
    atomic_store(&sockets_made, 0);
    atomic_store(&sockets_inheritable, 0);
    atomic_store(&sockets_counted, 1);
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
    for (int i = 0; i < 2; i++) {
        assert_rc(distlock_release(l[i]), DISTLOCK_OK);
        assert_rc(distlock_release(lf[i]), DISTLOCK_OK);
        distlock_lock_free(l[i]);
        distlock_lock_free(lf[i]);
        distlock_client_free(c[i]);
    }
    atomic_store(&sockets_counted, 0);
    int made = atomic_load(&sockets_made), inheritable = atomic_load(&sockets_inheritable);
    printf("# %d socket(s) opened acquiring and waiting over TCP and a Unix socket; %d of them "
           "without SOCK_CLOEXEC\n", made, inheritable);
    assert_true(made >= 2);   /* one per client at least */
    assert_int_equal(inheritable, 0);
}

#define SECRET "S3cretPassw0rd"

/* Any recognisable piece of the secret, plain or %-escaped. */
static const char *secret_piece(const char *s)
{
    static const char *const pieces[] = { SECRET, "S3cret", "Passw0rd", "assw0rd" };
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++)
        if (s && strstr(s, pieces[i])) return pieces[i];
    return NULL;
}

static int leaks;

static void check_text(const char *what, const char *input, const char *text)
{
    const char *p = secret_piece(text);
    if (p) {
        print_error("%s for \"%s\" shows the password (\"%s\"): \"%s\"\n", what, input, p, text);
        leaks++;
    }
}

/* ------------------------------------------ no password in any message */

static void test_no_password_in_errors(void **state)
{
    rh_cluster *rc = *state;
    int port = rc->node[0].port;
    char uri[256];
    leaks = 0;

    /* Errors from a real server refusing the password (ACL). */
    node_command_ok(rc, 0, "ACL SETUSER u12 reset on >R1ghtOne ~* &* +@all");
    snprintf(uri, sizeof uri, "redis://u12:" SECRET "@127.0.0.1:%d", port);
    distlock_client *c = new_client(uri);
    distlock_lock *l = NULL;
    assert_true(distlock_acquire(c, "k12", 30000, 0, 0, &l) < 0);
    check_text("acquire error (wrong password in the URI)", uri, distlock_last_error());
    assert_true(distlock_acquire(c, "k12", 30000, 200, 0, &l) != DISTLOCK_OK);
    check_text("waiting acquire error (wrong password in the URI)", uri, distlock_last_error());
    assert_true(distlock_admin_holder(c, "k12", 0, NULL) < 0);
    check_text("inspect error (wrong password in the URI)", uri, distlock_last_error());
    check_text("distlock_client_node_uri", uri, distlock_client_node_uri(c, 0));
    distlock_client_free(c);
    c = new_client(rh_uris(rc));
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_USERNAME, "u12"), DISTLOCK_OK);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_PASSWORD, SECRET), DISTLOCK_OK);
    assert_true(distlock_acquire(c, "k12", 30000, 0, 0, &l) < 0);
    check_text("acquire error (wrong DISTLOCK_OPT_PASSWORD)", "set_str(PASSWORD)",
               distlock_last_error());
    assert_true(distlock_extend_token(c, "k12", "tok", 1000, NULL) < 0);
    check_text("extend_token error (wrong DISTLOCK_OPT_PASSWORD)", "set_str(PASSWORD)",
               distlock_last_error());
    distlock_client_free(c);
    node_command_ok(rc, 0, "ACL DELUSER u12");

    /* Shown node URIs. */
    const char *good[] = {
        "redis://admin:" SECRET "@127.0.0.1:6379",
        "redis://:" SECRET "@127.0.0.1:6380/2",
        "redis://admin:S3cret%40Passw0rd@[::1]:6381",
        "redis://admin:S3cret%2CPassw0rd@localhost",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        c = new_client(good[i]);
        const char *shown = distlock_client_node_uri(c, 0);
        assert_non_null(shown);
        check_text("distlock_client_node_uri", good[i], shown);
        if (!strstr(shown, "***")) {
            print_error("distlock_client_node_uri for \"%s\" = \"%s\": no *** for the password\n",
                        good[i], shown);
            leaks++;
        }
        distlock_client_free(c);
    }

    /* Every malformed shape we could think of, each with a password. */
    const char *bad[] = {
        "redis://admin:" SECRET "@10.0.0.1:63x9",                 /* bad port */
        "redis://admin:" SECRET "@10.0.0.1:0",
        "redis://admin:" SECRET "@10.0.0.1:70000",
        "redis://admin:" SECRET "@10.0.0.1:6379?x=1",
        "redis://admin:" SECRET "@10.0.0.1:6379/x",               /* bad db */
        "redis://admin:" SECRET "@10.0.0.1:6379/-1",
        "redis://admin:" SECRET "@10.0.0.1:6379/0/1",
        "redis://admin:" SECRET "%zz@10.0.0.1:6379",              /* bad escape */
        "redis://admin:" SECRET "%4@10.0.0.1:6379",
        "redis://admin%zz:" SECRET "@10.0.0.1:6379",              /* bad escape in the user */
        "redis://admin:" SECRET "@10.0.0.1:6379,,redis://10.0.0.2:6379",   /* empty entry */
        "redis://admin:" SECRET "@10.0.0.1:6379, ,redis://10.0.0.2:6379",
        "redis://admin:" SECRET "@10.0.0.1:6379,",
        ",redis://admin:" SECRET "@10.0.0.1:6379",
        "redis://10.0.0.2:6379,redis://admin:" SECRET "@10.0.0.1:6379,,",
        "redis://admin:" SECRET "@10.0.0.1:6379,redis://admin:" SECRET "@10.0.0.1:6379", /* dup */
        "redis://10.0.0.1:6379,redis://admin:" SECRET "@10.0.0.1:6379",
        "redis://admin:" SECRET "@10.0.0.1:6379,redis://10.0.0.1",
        "rediss://admin:" SECRET "@10.0.0.1:6379",                /* unknown scheme */
        "http://admin:" SECRET "@10.0.0.1:6379",
        "REDIS://admin:" SECRET "@10.0.0.1:6379",
        "unix://admin:" SECRET "@/tmp/redis.sock",
        "admin:" SECRET "@10.0.0.1:6379",
        "redis://admin:" SECRET "@",                              /* no host */
        "redis://admin:" SECRET "@:6379",
        "redis://admin:" SECRET "@/3",
        "redis://admin:" SECRET "@bad host:6379",                 /* bad host */
        "redis://admin:" SECRET "@10.0.0.1!:6379",
        "redis://admin:" SECRET "@[::1",                          /* IPv6 */
        "redis://admin:" SECRET "@[::1]x",
        "redis://admin:" SECRET "@[::1]:x",
        "redis://:" SECRET "@10.0.0.1:63x9",                      /* password only */
        "redis://admin:S3cret%50assw0rd@10.0.0.1:63x9",           /* escaped */
        "redis://admin:S3cret@Passw0rd@10.0.0.1:63x9",            /* '@' in it */
        "  redis://admin:" SECRET "@10.0.0.1:63x9  ",
        "redis://admin:" SECRET "@10.0.0.1:6379,redis://10.0.0.2:63x9",
        "redis://admin:" SECRET "@10.0.0.1:6379,garbage",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = NULL;
        int r = distlock_client_new(bad[i], &c);
        if (r == DISTLOCK_OK) {
            /* Not malformed after all; its shown URIs must still hide it. */
            for (int n = 0; n < distlock_client_node_count(c); n++)
                check_text("distlock_client_node_uri", bad[i], distlock_client_node_uri(c, n));
            distlock_client_free(c);
            continue;
        }
        assert_int_equal(r, DISTLOCK_EINVAL);
        assert_null(c);
        assert_true(distlock_last_error()[0] != '\0');
        check_text("distlock_client_new error", bad[i], distlock_last_error());
    }
    /* A list that is too long, with a password in it. */
    size_t big = 70000;
    char *list = malloc(big + 1);
    assert_non_null(list);
    snprintf(list, big + 1, "redis://admin:" SECRET "@10.0.0.1:6379");
    memset(list + strlen(list), 'x', big - strlen(list));
    list[big] = '\0';
    assert_rc(distlock_client_new(list, &c), DISTLOCK_EINVAL);
    check_text("distlock_client_new error", "(70000-byte list)", distlock_last_error());
    free(list);

    if (leaks) {
        print_error("%d message(s) showed the password\n", leaks);
        fail();
    }
}

/* ------------------------------------------- one server named twice */

/* client_new must refuse `list` (textually one server twice). */
static int refused_at_new(const char *list)
{
    distlock_client *c = NULL;
    int r = distlock_client_new(list, &c);
    if (r == DISTLOCK_EINVAL && c == NULL && distlock_last_error()[0] != '\0') return 1;
    print_error("distlock_client_new(\"%s\") = %d (%s), %d node(s) quorum %d: one server "
                "named twice was accepted\n", list, r, distlock_strerror(r),
                c ? distlock_client_node_count(c) : 0, c ? distlock_client_quorum(c) : 0);
    distlock_client_free(c);
    return 0;
}

static void test_duplicate_spellings_of_one_server(void **state)
{
    rh_cluster *rc = *state;
    int p = rc->node[0].port, ok = 1;
    char list[512];
    const char *pairs[][2] = {
        { "127.0.0.1", "127.1" },
        { "[::1]", "[0:0:0:0:0:0:0:1]" },
        { "[::1]", "[::0:1]" },
        { "[::1]", "[0000::0001]" },
        { "[fe80::1]", "[FE80:0::1]" },
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        snprintf(list, sizeof list, "redis://%s:%d,redis://%s:%d", pairs[i][0], p, pairs[i][1], p);
        ok &= refused_at_new(list);
    }
    /* Three names, one server: two of them would make a quorum. */
    snprintf(list, sizeof list, "redis://127.0.0.1:%d,redis://localhost:%d,redis://127.1:%d", p,
             p, p);
    ok &= refused_at_new(list);
    /* The same with the default port. */
    ok &= refused_at_new("redis://127.0.0.1,redis://127.1:6379");
    assert_true(ok);
}

/* Names that resolve to one endpoint: refused no later than the first
 * operation that connects, naming both nodes, leaving no key. */
static void expect_same_server(rh_cluster *rc, const char *a, const char *b, int *ok)
{
    int p = rc->node[0].port;
    char list[256], sa[96], sb[96];
    snprintf(list, sizeof list, "redis://%s:%d,redis://%s:%d", a, p, b, p);
    snprintf(sa, sizeof sa, "%s:%d", a, p);
    snprintf(sb, sizeof sb, "%s:%d", b, p);
    distlock_client *c = NULL;
    int r = distlock_client_new(list, &c);
    if (r == DISTLOCK_EINVAL) return;   /* caught even earlier */
    assert_rc(r, DISTLOCK_OK);
    distlock_lock *l = NULL;
    r = distlock_acquire(c, "k13", 30000, 0, 0, &l);
    char detail[512];
    snprintf(detail, sizeof detail, "%s", distlock_last_error());
    int left = rh_get(rc, 0, 0, "k13", NULL, 0);
    if (r != DISTLOCK_EINVAL) {
        print_error("\"%s\": acquire = %d (%s) on %d nodes (quorum %d) that are one server; "
                    "key left on the server: %s\n", list, r, distlock_strerror(r),
                    distlock_client_node_count(c), distlock_client_quorum(c), left ? "yes" : "no");
        *ok = 0;
    } else if (!strstr(detail, sa) || !strstr(detail, sb)) {
        print_error("\"%s\": refused, but the detail does not name both nodes: \"%s\"\n", list,
                    detail);
        *ok = 0;
    }
    if (r == DISTLOCK_EINVAL && left != 0) {
        print_error("\"%s\": the refused acquire left k13 on the server\n", list);
        *ok = 0;
    }
    /* Still refused on the next try. */
    distlock_lock *l2 = NULL;
    if (r == DISTLOCK_EINVAL) {
        int r2 = distlock_acquire(c, "k13", 30000, 0, 0, &l2);
        if (r2 != DISTLOCK_EINVAL) {
            print_error("\"%s\": second acquire = %d\n", list, r2);
            *ok = 0;
        }
    }
    distlock_lock_free(l2);
    distlock_lock_free(l);
    distlock_client_free(c);
    rh_del(rc, 0, 0, "k13");
}

static void test_names_resolving_to_one_endpoint(void **state)
{
    rh_cluster *rc = *state;
    int ok = 1;
    expect_same_server(rc, "localhost", "127.0.0.1", &ok);
    expect_same_server(rc, "127.0.0.1", "localhost", &ok);
    /* Other inet_aton() spellings of 127.0.0.1: at the latest here. */
    expect_same_server(rc, "127.0.0.1", "127.0.1", &ok);
    expect_same_server(rc, "127.0.0.1", "2130706433", &ok);
    assert_true(ok);
}

/* ------------------------------------------ a Unix path too long */

static void unix_uri(char *buf, size_t size, size_t pathlen)
{
    /* "/tmp/" then 'a's up to pathlen bytes, ".sock" at the end. */
    char path[512];
    snprintf(path, sizeof path, "/tmp/");
    size_t n = strlen(path);
    while (n < pathlen - 5) path[n++] = 'a';
    memcpy(path + n, ".sock", 6);
    snprintf(buf, size, "unix://%s", path);
    assert_int_equal(strlen(path), pathlen);
}

static void test_unix_path_too_long(void **state)
{
    (void)state;
    char uri[600];
    distlock_client *c = NULL;
    /* 107 bytes (+ NUL) is what sockaddr_un holds: fine. */
    unix_uri(uri, sizeof uri, 107);
    assert_rc(distlock_client_new(uri, &c), DISTLOCK_OK);
    distlock_client_free(c);
    const size_t lens[] = { 108, 109, 200, 400 };
    int ok = 1;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        c = NULL;
        unix_uri(uri, sizeof uri, lens[i]);
        int r = distlock_client_new(uri, &c);
        const char *d = distlock_last_error();
        if (r != DISTLOCK_EINVAL) {
            print_error("unix socket path of %zu bytes: distlock_client_new = %d (%s); it would be "
                        "truncated to 107 bytes\n", lens[i], r, distlock_strerror(r));
            ok = 0;
        } else if (!strstr(d, "107") && !strstr(d, "108")) {
            print_error("unix socket path of %zu bytes refused, but the detail does not name the "
                        "limit: \"%s\"\n", lens[i], d);
            ok = 0;
        }
        distlock_client_free(c);
    }
    assert_true(ok);
}

/* A node at an IPv6 address is reached at that address (the server also
 * listens on ::1 here), its db as for IPv4; an IPv6 port where nothing
 * listens fails at once with the node and the reason. */
static void test_ipv6_node(void **state)
{
    rh_cluster *rc = *state;
    node_command_ok(rc, 0, "CONFIG SET bind %s", "127.0.0.1 ::1");
    char uri[128];
    snprintf(uri, sizeof uri, "redis://[::1]:%d/6", rc->node[0].port);
    check_db(rc, uri, 6);
    distlock_client *c = new_client(uri);
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "v6", 30000, 0, 0, &l), DISTLOCK_OK);
    /* the connection came over IPv6: the server sees it from ::1 */
    redisReply *r = rh_command(rc, 0, 0, "CLIENT LIST");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_STRING);
    const char *from = strstr(r->str, "addr=[::1]:");
    if (from == NULL)
        from = strstr(r->str, "addr=::1:");   /* older servers' spelling */
    int v6 = from != NULL;
    if (v6)
        printf("# the library's connection: %.*s\n", (int)strcspn(from, " "), from);
    freeReplyObject(r);
    assert_true(v6);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);
    node_command_ok(rc, 0, "CONFIG SET bind %s", "127.0.0.1");
    /* nothing listens there any more */
    c = new_client(uri);
    long long t0 = rh_now_ms();
    assert_fails(distlock_acquire(c, "v6", 30000, 0, 0, &l), DISTLOCK_ECONN);
    long long ms = rh_now_ms() - t0;
    printf("# refused IPv6 port: \"%s\" in %lld ms\n", distlock_last_error(), ms);
    assert_non_null(strstr(distlock_last_error(), uri));
    assert_non_null(strstr(distlock_last_error(), "Connection refused"));
    assert_true(ms < 500);   /* a refusal: no wait for the connect timeout */
    distlock_client_free(c);
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
        cmocka_unit_test_setup(test_sockets_born_close_on_exec, heal),
        cmocka_unit_test_setup(test_no_password_in_errors, heal),
        cmocka_unit_test_setup(test_duplicate_spellings_of_one_server, heal),
        cmocka_unit_test_setup(test_names_resolving_to_one_endpoint, heal),
        cmocka_unit_test_setup(test_unix_path_too_long, heal),
        cmocka_unit_test_setup(test_ipv6_node, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
