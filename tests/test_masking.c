/* test_masking.c -- no message shows a password, whatever the server list
 * looks like: a property test over random, mostly malformed, server lists
 * (random schemes, user names, passwords full of '/ ? # @ : , % & =' and
 * spaces, query parameters in random case), through distlock_client_new()
 * (which parses and does not connect): its distlock_last_error() when it
 * refuses the list, every distlock_client_node_uri() when it accepts it.
 *
 * The property, precisely: each password is made of URI delimiters
 * ("/?#@:,% &=") and of marker bytes: 'Q', 'X', 'J', 'Z' and every byte
 * 0x80..0xff, with at least one marker. Nothing else in a generated list
 * (schemes, user names, hosts, option names and values) contains a marker,
 * and neither does any text of the library's own, so a marker in a message
 * can only come from a password: no message may contain a marker byte.
 * The delimiters are there to move the parser's idea of where a password
 * ends; they cannot be told apart from the message's own ':' and '/', so
 * they are not checked themselves, but a password that leaked in part
 * would carry markers with it (at most 3 delimiters in a row).
 *
 * Deterministic: seed 20261126 unless DISTLOCK_TEST_SEED is set; the case
 * that fails is printed with its seed and index. No server needed. */
#include <ctype.h>

#include "test_common.h"

#define CASES 20000

static uint64_t rng;

static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static uint32_t below(uint32_t n)
{
    return next() % n;
}

static const char *pick(const char *const *v, size_t n)
{
    return v[below((uint32_t)n)];
}
#define PICK(v) pick(v, sizeof(v) / sizeof(v[0]))

static int is_marker(unsigned char b)
{
    return b >= 0x80 || b == 'Q' || b == 'X' || b == 'J' || b == 'Z';
}

typedef struct buf {
    char s[2048];
    size_t n;
} buf;

static void put(buf *b, const char *s)
{
    size_t l = strlen(s);
    if (b->n + l < sizeof(b->s)) {
        memcpy(b->s + b->n, s, l + 1);
        b->n += l;
    }
}

static void put_c(buf *b, char c)
{
    char s[2] = { c, 0 };
    if (c != '\0')
        put(b, s);
}

/* A password: delimiters and markers, at least one marker, at most 3
 * delimiters in a row. Without ':' where it stands alone before the '@'
 * (a ':' there would make what precedes it a user name, which is shown). */
static void put_password_of(buf *b, const char *delims);

static void put_password(buf *b)
{
    put_password_of(b, "/?#@:,% &=");
}

static void put_password_of(buf *b, const char *delims)
{
    static const char letters[] = "QXJZ";
    int len = 1 + (int)below(20), run = 0, markers = 0;
    for (int i = 0; i < len || markers == 0; i++) {
        if (run < 3 && below(2)) {
            put_c(b, delims[below((uint32_t)strlen(delims))]);
            run++;
        } else {
            put_c(b, below(2) ? letters[below(4)] : (char)(0x80 + below(0x80)));
            run = 0;
            markers++;
        }
    }
}

/* A user name: shown in node URIs, so no markers (and no '%': "%51"
 * decodes to 'Q'). */
static void put_user(buf *b)
{
    static const char chars[] = "abcdefgh0123456789/?#:, ";
    int len = (int)below(8);
    for (int i = 0; i < len; i++)
        put_c(b, chars[below(sizeof(chars) - 1)]);
}

static void put_random_case(buf *b, const char *name)
{
    int mode = (int)below(3);  /* 0 as is, 1 random case, 2 upper */
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (mode == 2 || (mode == 1 && below(2)))
            c = (char)toupper((unsigned char)c);
        put_c(b, c);
    }
}

static void put_query(buf *b)
{
    static const char *const names[] = { "sentinel_password", "password", "sentinel_user",
                                         "tls_ca_file", "tls_insecure", "db", "tls_key",
                                         "tls_server_name", "sentinel%5Fpassword", "pass" };
    static const char *const values[] = { "1", "0", "/tmp/ca.pem", "svc", "a%20b", "" };
    static const char *const shown[] = { "sentinel_user", "tls_ca_file", "tls_insecure", "db",
                                         "tls_key", "tls_server_name" };
    int np = 1 + (int)below(3);
    put_c(b, '?');
    for (int i = 0; i < np; i++) {
        if (i)
            put_c(b, '&');
        size_t at = b->n;
        put_random_case(b, PICK(names));
        int is_shown = 0;
        for (size_t k = 0; k < sizeof(shown) / sizeof(shown[0]); k++)
            is_shown |= strcmp(b->s + at, shown[k]) == 0;
        if (below(8) == 0)
            continue;  /* a name without '=' */
        put_c(b, '=');
        /* a secret only where the grammar does not show the value */
        if (!is_shown && below(4))
            put_password(b);
        else
            put(b, PICK(values));
    }
}

static void put_entry(buf *b)
{
    static const char *const schemes[] = {
        "redis://", "rediss://", "redis-sentinel://", "rediss-sentinel://", "redis-cluster://",
        "rediss-cluster://", "unix://", "unix:///", "REDIS://", "Redis-Sentinel://", "redis:/",
        "redis:", "redis//", "", "http://", "redis-sentinel:/", "re dis://", "://", "redis:///",
    };
    static const char *const hosts[] = { "127.0.0.1:6379", "h1:1,h2:2", "[::1]:7000", "", "h",
                                         "10.0.0.1:63x9", "h:0", "s1:26379,s2:26379", "/tmp/r.sock",
                                         "bad host" };
    static const char *const paths[] = { "", "", "/0", "/mymaster", "/mymaster/2", "/x", "/" };
    put(b, PICK(schemes));
    switch (below(6)) {
    case 0: break;                                                 /* no credentials */
    case 1: put_c(b, ':'); put_password(b); put_c(b, '@'); break;  /* :password@ */
    case 2: put_password_of(b, "/?#@,% &="); put_c(b, '@'); break; /* a lone secret */
    default: put_user(b); put_c(b, ':'); put_password(b); put_c(b, '@'); break;
    }
    put(b, PICK(hosts));
    put(b, PICK(paths));
    if (below(2))
        put_query(b);
}

static void put_list(buf *b)
{
    static const char *const seps[] = { ",", ", ", " ", ",,", " , ", ",redis://10.0.0.9:6379," };
    int n = 1 + (int)below(3);
    b->n = 0;
    b->s[0] = '\0';
    if (below(8) == 0)
        put(b, PICK(seps));
    for (int i = 0; i < n; i++) {
        if (i)
            put(b, PICK(seps));
        put_entry(b);
    }
    if (below(8) == 0)
        put(b, PICK(seps));
}

static void show(const char *what, const unsigned char *s)
{
    printf("%s: \"", what);
    for (; *s; s++)
        printf(*s >= 0x20 && *s < 0x7f && *s != '"' && *s != '\\' ? "%c" : "\\x%02x", *s);
    printf("\"\n");
}

static int leaks_in(const char *msg)
{
    for (const unsigned char *p = (const unsigned char *)msg; p && *p; p++)
        if (is_marker(*p))
            return 1;
    return 0;
}

static void test_no_password_byte_in_any_message(void **state)
{
    (void)state;
    const char *env = getenv("DISTLOCK_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : 20261126u;
    int refused = 0, accepted = 0, failures = 0;
    static buf b;
    rng = seed * 0x9E3779B97F4A7C15ull | 1u;
    for (int k = 0; k < CASES && failures < 5; k++) {
        put_list(&b);
        distlock_client *c = NULL;
        const char *leak = NULL, *what = NULL;
        /* the front ends' echo of a list: whole, and cut to a small buffer */
        static char shown[4096];
        size_t cut = 16 + below(48);
        if (distlock_servers_mask(b.s, shown, below(2) ? sizeof(shown) : cut) != DISTLOCK_OK ||
            leaks_in(shown)) {
            show("server list", (const unsigned char *)b.s);
            show("distlock_servers_mask", (const unsigned char *)shown);
            printf("seed %llu, case %d\n", (unsigned long long)seed, k);
            failures++;
        }
        if (distlock_client_new(b.s, &c) == DISTLOCK_OK) {
            accepted++;
            for (int i = 0; i < distlock_client_node_count(c) && !leak; i++)
                if (leaks_in(distlock_client_node_uri(c, i)))
                    leak = distlock_client_node_uri(c, i), what = "distlock_client_node_uri";
            if (leak) {
                show("server list", (const unsigned char *)b.s);
                show(what, (const unsigned char *)leak);
                printf("seed %llu, case %d\n", (unsigned long long)seed, k);
                failures++;
            }
            distlock_client_free(c);
            continue;
        }
        refused++;
        if (leaks_in(distlock_last_error()) ||
            leaks_in(distlock_strerror(DISTLOCK_EINVAL))) {
            show("server list", (const unsigned char *)b.s);
            show("distlock_last_error", (const unsigned char *)distlock_last_error());
            printf("seed %llu, case %d\n", (unsigned long long)seed, k);
            failures++;
        }
    }
    printf("# %d server lists: %d refused, %d accepted, %d showed a password byte\n",
           refused + accepted, refused, accepted, failures);
    assert_int_equal(failures, 0);
    /* the generator reaches both sides of the parser */
    assert_true(refused > CASES / 2);
    assert_true(accepted > 0);
}

/* The tracker's spellings, each with its own reason: refused, without
 * the password in the message. ('#' needs no escape: our grammar has no
 * fragment, redis://u:S3#CRET@host:1 is a valid URI with that password.) */
static void test_malformed_spellings(void **state)
{
    (void)state;
    static const char *const lists[] = {
        "redis://u:S3/CRET@host:1",                              /* '/' in the password */
        "redis://u:S3?CRET@host:1",                              /* '?' */
        "redis://u:S3,,CRET@host:1",                             /* ",," splits the entry */
        "redis://u:S3 , CRET@host:1",
        "redis-sentinel://h:26379/m?Sentinel_Password=S3CRET",  /* case variant */
        "redis-sentinel://h:26379/m?SENTINEL_PASSWORD=S3CRET&db=1",
        "redis-sentinel://h:26379/m?sentinel%5Fpassword=S3CRET",
        "redis-sentinel://h:26379/m?sentinel_password=S3&CRET=1",  /* '&' in it */
        "redis-sentinel://h:26379/m?sentinel_password=S3&CRET",
        "rediss://u:S3?x=CRET@host:1",
        "redis-sentinel://u:S3/CRET@h:26379/m",
    };
    for (size_t k = 0; k < sizeof(lists) / sizeof(lists[0]); k++) {
        distlock_client *c = NULL;
        int rc = distlock_client_new(lists[k], &c);
        const char *msg = rc == DISTLOCK_OK ? distlock_client_node_uri(c, 0)
                                            : distlock_last_error();
        printf("# %s -> %d \"%s\"\n", lists[k], rc, msg);
        if (strstr(msg, "S3") || strstr(msg, "CRET")) {
            print_error("\"%s\" shows its password: \"%s\"\n", lists[k], msg);
            fail();
        }
        assert_int_equal(rc, DISTLOCK_EINVAL);
        assert_null(c);
    }
}

/* distlock_servers_mask() shows a list as the library's messages quote it
 * (the front ends' echo of a refused list, PHP's phpinfo()). */
static void test_servers_mask_shows_what_messages_show(void **state)
{
    (void)state;
    static const struct { const char *list, *shown; } cases[] = {
        { "redis://bob:S3CRET@127.0.0.1:99999", "redis://***@127.0.0.1:99999" },
        { "redis://S3CRET@127.0.0.1:99999", "redis://***@127.0.0.1:99999" },
        { "redis-sentinel://h1:26379/m?auth=S3CRET", "redis-sentinel://h1:26379/m?auth=***" },
        { "redis-sentinel://h1:26379/m?sentinel_p%61ssword=S3CRET",
          "redis-sentinel://h1:26379/m?sentinel_p%61ssword=***" },
        { "redis://127.0.0.1:6379,redis://u:S3CRET@h:1,,redis://h:3",
          "redis://127.0.0.1:6379,redis://***@h:1,,redis://h:3" },
        { "rediss://h:1?tls_ca_file=/ca.pem&tls_server_name=n", /* nothing secret */
          "rediss://h:1?tls_ca_file=/ca.pem&tls_server_name=n" },
    };
    char out[256];
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        assert_int_equal(distlock_servers_mask(cases[k].list, out, sizeof(out)), DISTLOCK_OK);
        printf("# %s -> %s\n", cases[k].list, out);
        assert_string_equal(out, cases[k].shown);
        distlock_client *c = NULL;
        if (distlock_client_new(cases[k].list, &c) != DISTLOCK_OK)  /* the message agrees */
            assert_non_null(strstr(distlock_last_error(), k == 4 ? "redis://***@h:1" : out));
        distlock_client_free(c);
    }
    /* cut to fit: never a piece of the password */
    for (size_t size = 16; size < 40; size++) {
        assert_int_equal(distlock_servers_mask(cases[0].list, out, size), DISTLOCK_OK);
        assert_true(strlen(out) < size);
        assert_null(strstr(out, "S3"));
    }
    assert_int_equal(distlock_servers_mask(NULL, out, sizeof(out)), DISTLOCK_EINVAL);
    assert_int_equal(distlock_servers_mask("redis://h", NULL, 64), DISTLOCK_EINVAL);
    assert_int_equal(distlock_servers_mask("redis://h", out, 15), DISTLOCK_EINVAL);
    assert_int_equal(distlock_servers_mask("", out, sizeof(out)), DISTLOCK_OK);
    assert_string_equal(out, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_servers_mask_shows_what_messages_show),
        cmocka_unit_test(test_malformed_spellings),
        cmocka_unit_test(test_no_password_byte_in_any_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
