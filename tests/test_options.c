/* test_options.c -- the option table is the one place the option rules
 * live: every row's default is what a fresh client uses, its min and max
 * are enforced by the setters at both edges, the lookups by name, by id and
 * by position agree, and ids say the type (below DISTLOCK_OPT_STRING_FIRST:
 * integer, else string). Unknown names and ids fail with a detail naming
 * them. No server is needed: nothing here connects. */
#include "test_common.h"

#include <limits.h>

/* core/src/client.c (linked statically): an integer option's live value. */
int distlock__client_option_value(distlock_client *c, distlock_option opt, long *v);

static distlock_client *fresh(void)
{
    distlock_client *c = NULL;
    assert_rc(distlock_client_new("redis://127.0.0.1:1", &c), DISTLOCK_OK);
    return c;
}

static void assert_detail_has(const char *want)
{
    if (strstr(distlock_last_error(), want) == NULL) {
        print_error("detail \"%s\" lacks \"%s\"\n", distlock_last_error(), want);
        fail();
    }
}

static size_t rows(void)
{
    size_t n = 0;
    while (distlock_option_at(n) != NULL)
        n++;
    return n;
}

static void test_ids_say_the_type(void **state)
{
    (void)state;
    const distlock_option_info *o;
    size_t n = rows();
    assert_true(n >= 19);
    for (size_t i = 0; (o = distlock_option_at(i)) != NULL; i++) {
        assert_non_null(o->name);
        assert_non_null(o->summary);
        assert_true(o->summary[0] != '\0');
        if ((int)o->id < DISTLOCK_OPT_STRING_FIRST) {
            assert_int_equal(o->type, DISTLOCK_OPTION_LONG);
            assert_true(o->id >= 1);
            assert_true(o->min <= o->default_value && o->default_value <= o->max);
        } else {
            assert_int_equal(o->type, DISTLOCK_OPTION_STRING);
            assert_true((int)o->id < 200);
            assert_int_equal(o->default_value, 0);
            assert_int_equal(o->min, 0);
            assert_true(o->max > 0);
        }
        /* names are the front ends' spelling: lower case and underscores */
        for (const char *p = o->name; *p; p++)
            assert_true((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_');
        /* integer rows first, each group by id */
        if (i > 0) {
            const distlock_option_info *prev = distlock_option_at(i - 1);
            assert_true(prev->type < o->type || (prev->type == o->type && prev->id < o->id));
        }
    }
}

static void test_lookups_agree(void **state)
{
    (void)state;
    const distlock_option_info *o;
    for (size_t i = 0; (o = distlock_option_at(i)) != NULL; i++) {
        assert_ptr_equal(distlock_option_by_name(o->name), o);
        assert_ptr_equal(distlock_option_by_id(o->id), o);
        for (size_t j = 0; j < i; j++) {  /* names and ids are unique */
            assert_true(strcmp(distlock_option_at(j)->name, o->name) != 0);
            assert_true(distlock_option_at(j)->id != o->id);
        }
    }
    assert_ptr_equal(distlock_option_by_id(DISTLOCK_OPT_WAIT_REPLICAS),
                     distlock_option_by_name("wait_replicas"));
    assert_null(distlock_option_at(rows()));
    assert_null(distlock_option_at((size_t)-1));
}

static void test_unknown_names_and_ids(void **state)
{
    (void)state;
    assert_null(distlock_option_by_name("nope"));
    assert_detail_has("unknown option \"nope\"");
    assert_null(distlock_option_by_name("conect_timeout_ms"));
    assert_detail_has("unknown option \"conect_timeout_ms\" (did you mean \"connect_timeout_ms\"?)");
    assert_null(distlock_option_by_name(""));
    assert_detail_has("unknown option \"\"");
    assert_null(distlock_option_by_name(NULL));
    assert_true(distlock_last_error()[0] != '\0');
    assert_null(distlock_option_by_id((distlock_option)0));
    assert_detail_has("unknown option id 0");
    assert_null(distlock_option_by_id((distlock_option)99));
    assert_detail_has("unknown option id 99");
    assert_null(distlock_option_by_id((distlock_option)-1));
    assert_detail_has("unknown option id -1");

    distlock_client *c = fresh();
    assert_fails(distlock_client_set(c, (distlock_option)42, 1), DISTLOCK_EINVAL);
    assert_detail_has("unknown option id 42");
    assert_fails(distlock_client_set_str(c, (distlock_option)142, "x"), DISTLOCK_EINVAL);
    assert_detail_has("unknown option id 142");
    distlock_client_free(c);
}

static void test_defaults_are_what_a_fresh_client_uses(void **state)
{
    (void)state;
    const distlock_option_info *o;
    distlock_client *c = fresh();
    for (size_t i = 0; (o = distlock_option_at(i)) != NULL; i++) {
        if (o->type != DISTLOCK_OPTION_LONG)
            continue;
        long v = LONG_MIN;
        assert_rc(distlock__client_option_value(c, o->id, &v), DISTLOCK_OK);
        if (v != o->default_value) {
            print_error("%s: a fresh client uses %ld, the table says %ld\n", o->name, v,
                        o->default_value);
            fail();
        }
    }
    distlock_client_free(c);
}

/* Each integer option is accepted at min and max (and takes that value),
 * refused one past either edge with the core's detail naming it, and the
 * refused value leaves the option as it was. */
static void test_ranges_enforced_at_both_edges(void **state)
{
    (void)state;
    const distlock_option_info *o;
    char want[160];
    for (size_t i = 0; (o = distlock_option_at(i)) != NULL; i++) {
        if (o->type != DISTLOCK_OPTION_LONG)
            continue;
        distlock_client *c = fresh();
        long v;
        long edges[2] = { o->min, o->max };
        for (int e = 0; e < 2; e++) {
            assert_rc(distlock_client_set(c, o->id, edges[e]), DISTLOCK_OK);
            assert_rc(distlock__client_option_value(c, o->id, &v), DISTLOCK_OK);
            assert_int_equal(v, edges[e]);
        }
        long outside[2] = { o->min - 1, o->max + 1 };
        for (int e = 0; e < 2; e++) {
            assert_fails(distlock_client_set(c, o->id, outside[e]), DISTLOCK_EINVAL);
            snprintf(want, sizeof want, "option \"%s\": value %ld out of range %ld..%ld", o->name,
                     outside[e], o->min, o->max);
            assert_detail_has(want);
            assert_rc(distlock__client_option_value(c, o->id, &v), DISTLOCK_OK);
            assert_int_equal(v, o->max);
        }
        /* the same rule for the same value as text */
        snprintf(want, sizeof want, "%ld", o->max + 1);
        assert_fails(distlock_client_set_str(c, o->id, want), DISTLOCK_EINVAL);
        assert_detail_has("out of range");
        snprintf(want, sizeof want, "%ld", o->min);
        assert_rc(distlock_client_set_str(c, o->id, want), DISTLOCK_OK);
        assert_rc(distlock__client_option_value(c, o->id, &v), DISTLOCK_OK);
        assert_int_equal(v, o->min);
        distlock_client_free(c);
    }
}

static void test_types_enforced(void **state)
{
    (void)state;
    const distlock_option_info *o;
    distlock_client *c = fresh();
    char want[160];
    static char longest[DISTLOCK_OWNER_LABEL_MAX + 2];
    for (size_t i = 0; (o = distlock_option_at(i)) != NULL; i++) {
        if (o->type == DISTLOCK_OPTION_LONG) {
            assert_fails(distlock_client_set_str(c, o->id, "1s"), DISTLOCK_EINVAL);
            snprintf(want, sizeof want, "option \"%s\" takes an integer, got \"1s\"", o->name);
            assert_detail_has(want);
        } else {
            assert_fails(distlock_client_set(c, o->id, 1), DISTLOCK_EINVAL);
            snprintf(want, sizeof want, "option \"%s\" takes a string", o->name);
            assert_detail_has(want);
        }
    }
    /* a string option's max is its longest value in bytes */
    o = distlock_option_by_id(DISTLOCK_OPT_OWNER_LABEL);
    assert_int_equal(o->max, DISTLOCK_OWNER_LABEL_MAX);
    memset(longest, 'x', DISTLOCK_OWNER_LABEL_MAX);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_OWNER_LABEL, longest), DISTLOCK_OK);
    longest[DISTLOCK_OWNER_LABEL_MAX] = 'x';
    assert_fails(distlock_client_set_str(c, DISTLOCK_OPT_OWNER_LABEL, longest), DISTLOCK_EINVAL);
    assert_detail_has("option \"owner_label\": 257 bytes, at most 256");
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_USERNAME, NULL), DISTLOCK_OK);
    distlock_client_free(c);
}

/* Never a password in a message: a name or an integer option's text that may
 * carry one (a URI, user@secret, name=value) is refused without being
 * echoed; other text is quoted, so that a typo is easy to see. */
static void assert_detail_lacks(const char *secret)
{
    if (strstr(distlock_last_error(), secret) != NULL) {
        print_error("detail \"%s\" shows \"%s\"\n", distlock_last_error(), secret);
        fail();
    }
}

static void test_secrets_in_names_and_values_never_echoed(void **state)
{
    (void)state;
    const char *secret[] = { "redis://:s3cret@db:6379", "rediss://bob:s3cret@db", "bob@s3cret",
                             "password=s3cret" };
    distlock_client *c = fresh();
    for (size_t i = 0; i < sizeof secret / sizeof secret[0]; i++) {
        assert_null(distlock_option_by_name(secret[i]));
        assert_detail_has("unknown option");
        assert_detail_lacks("s3cret");
        assert_fails(distlock_client_set_str(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, secret[i]),
                     DISTLOCK_EINVAL);
        assert_detail_has("option \"connect_timeout_ms\" takes an integer");
        assert_detail_lacks("s3cret");
    }
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids_say_the_type),
        cmocka_unit_test(test_lookups_agree),
        cmocka_unit_test(test_unknown_names_and_ids),
        cmocka_unit_test(test_defaults_are_what_a_fresh_client_uses),
        cmocka_unit_test(test_ranges_enforced_at_both_edges),
        cmocka_unit_test(test_types_enforced),
        cmocka_unit_test(test_secrets_in_names_and_values_never_echoed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
