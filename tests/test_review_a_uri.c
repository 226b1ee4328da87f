/* test_review_a_uri.c -- review items 12, 13 and 14 (Unix socket paths):
 * the server list.
 *
 *  12  no password ever appears in distlock_last_error() (bad URIs echoed
 *      the whole entry, password included) or distlock_client_node_uri().
 *  13  one server named twice is not two nodes: textual/numeric duplicates
 *      (127.1 = 127.0.0.1, ::1 spellings) are DISTLOCK_EINVAL at
 *      distlock_client_new(); names that resolve to the same endpoint
 *      (localhost) are DISTLOCK_EINVAL at the first operation that
 *      connects, naming both nodes, with no key left behind.
 *  14  a Unix socket path longer than sun_path holds (107 bytes) is
 *      DISTLOCK_EINVAL naming the limit (it was silently truncated). */
#include "test_common.h"
#include "test_thread_control.h"

DEFINE_GROUP(1)

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

/* ------------------------------------------------------------ item 12 */

static void test_review12_no_password_in_errors(void **state)
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
    assert_true(distlock_inspect(c, "k12", 0, NULL, 0, NULL) < 0);
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
        int r = distlock_client_new(&c, bad[i]);
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
    assert_rc(distlock_client_new(&c, list), DISTLOCK_EINVAL);
    check_text("distlock_client_new error", "(70000-byte list)", distlock_last_error());
    free(list);

    if (leaks) {
        print_error("%d message(s) showed the password\n", leaks);
        fail();
    }
}

/* ------------------------------------------------------------ item 13 */

/* client_new must refuse `list` (textually one server twice). */
static int refused_at_new(const char *list)
{
    distlock_client *c = NULL;
    int r = distlock_client_new(&c, list);
    if (r == DISTLOCK_EINVAL && c == NULL && distlock_last_error()[0] != '\0') return 1;
    print_error("distlock_client_new(\"%s\") = %d (%s), %d node(s) quorum %d: one server "
                "named twice was accepted\n", list, r, distlock_strerror(r),
                c ? distlock_client_node_count(c) : 0, c ? distlock_client_quorum(c) : 0);
    distlock_client_free(c);
    return 0;
}

static void test_review13_textual_duplicates(void **state)
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
    /* The review's example: three names, one server, quorum 2. */
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
    int r = distlock_client_new(&c, list);
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

static void test_review13_same_endpoint(void **state)
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

/* ------------------------------------------------------------ item 14 */

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

static void test_review14_unix_path_too_long(void **state)
{
    (void)state;
    char uri[600];
    distlock_client *c = NULL;
    /* 107 bytes (+ NUL) is what sockaddr_un holds: fine. */
    unix_uri(uri, sizeof uri, 107);
    assert_rc(distlock_client_new(&c, uri), DISTLOCK_OK);
    distlock_client_free(c);
    const size_t lens[] = { 108, 109, 200, 400 };
    int ok = 1;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        c = NULL;
        unix_uri(uri, sizeof uri, lens[i]);
        int r = distlock_client_new(&c, uri);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_review12_no_password_in_errors, heal),
        cmocka_unit_test_setup(test_review13_textual_duplicates, heal),
        cmocka_unit_test_setup(test_review13_same_endpoint, heal),
        cmocka_unit_test_setup(test_review14_unix_path_too_long, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
