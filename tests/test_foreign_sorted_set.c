/* test_foreign_sorted_set.c -- a key holding another library's sorted set
 * (a leaderboard: members scored 10 and 20) under a lock's name, against a
 * real redis-server. guarantees.md: "A key of another type under the
 * lock's name (another library's structure) is treated as held by someone
 * else"; errors.md: WRONGTYPE is EPROTO. So a lock, a read lock, a permit
 * and a set of keys on it are never granted, and the sorted set is left
 * exactly as it was (both members, their scores, no expiry); the holder
 * report calls it a value of another type. */
#include "test_common.h"

#define N 1
DEFINE_GROUP(N)

static void make_board(const rh_cluster *rc, const char *key)
{
    node_command_ok(rc, 0, "ZADD %s 10 alice 20 bob", key);
}

/* The board is untouched: both members with their scores, no TTL. */
static void assert_board_intact(const rh_cluster *rc, const char *key)
{
    redisReply *r = rh_command(rc, 0, 0, "ZRANGE %s 0 -1 WITHSCORES", key);
    assert_non_null(r);
    int ok = r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
             strcmp(r->element[0]->str, "alice") == 0 && strcmp(r->element[1]->str, "10") == 0 &&
             strcmp(r->element[2]->str, "bob") == 0 && strcmp(r->element[3]->str, "20") == 0;
    if (!ok) {
        printf("board %s now has %zu elements:", key,
               r->type == REDIS_REPLY_ARRAY ? r->elements : (size_t)0);
        for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
            printf(" %s", r->element[i]->str);
        printf("\n");
    }
    freeReplyObject(r);
    assert_true(ok);
    assert_int_equal(rh_pttl(rc, 0, 0, key), -1);
}

static void test_lock_on_foreign_sorted_set_not_granted(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    make_board(rc, "board:lock");
    distlock_lock *l = NULL;
    int rc_ = distlock_acquire(c, "board:lock", 10000, 0, 0, &l);
    printf("lock on a leaderboard: %s (%s)\n", distlock_strerror(rc_), distlock_last_error());
    assert_board_intact(rc, "board:lock");
    assert_true(rc_ != DISTLOCK_OK);
    assert_null(l);
    distlock_client_free(c);
}

static void test_waiting_lock_on_foreign_sorted_set_not_granted(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    make_board(rc, "board:wait");
    distlock_lock *l = NULL;
    int rc_ = distlock_acquire(c, "board:wait", 10000, 200, 0, &l);
    printf("waiting lock on a leaderboard: %s (%s)\n", distlock_strerror(rc_),
           distlock_last_error());
    assert_board_intact(rc, "board:wait");
    assert_true(rc_ != DISTLOCK_OK);
    assert_null(l);
    distlock_client_free(c);
}

static void test_read_lock_on_foreign_sorted_set_not_granted(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    make_board(rc, "board:read");
    distlock_lock *l = NULL;
    int rc_ = distlock_acquire(c, "board:read", 10000, 0, DISTLOCK_SHARED, &l);
    printf("read lock on a leaderboard: %s (%s)\n", distlock_strerror(rc_),
           distlock_last_error());
    assert_board_intact(rc, "board:read");
    assert_true(rc_ != DISTLOCK_OK);
    assert_null(l);
    distlock_client_free(c);
}

static void test_permit_and_set_on_foreign_sorted_set_not_granted(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    make_board(rc, "board:sem");
    distlock_lock *l = NULL;
    assert_rc(distlock_semaphore_acquire(c, "board:sem", 3, 10000, 0, 0, NULL, &l),
              DISTLOCK_EPROTO);
    assert_board_intact(rc, "board:sem");
    const char *keys[] = { "board:free", "board:sem" };
    assert_rc(distlock_acquire_many(c, keys, 2, 10000, 0, 0, NULL, &l), DISTLOCK_EPROTO);
    assert_board_intact(rc, "board:sem");
    distlock_client_free(c);
}

/* distlock_admin_holder(): a value of another type (DISTLOCK_HOLDER_OTHER,
 * taken), not read locks with 0 holders. */
static void test_holder_says_other_type(void **state)
{
    rh_cluster *rc = *state;
    distlock_client *c = new_client(rh_uris(rc));
    make_board(rc, "board:holder");
    distlock_holder_info info = { .size = sizeof info };
    int r = distlock_admin_holder(c, "board:holder", 0, &info);
    printf("holder of a leaderboard: %d, kind %d, taken %d, holders %ld\n", r, info.kind,
           info.taken, info.holders);
    assert_int_equal(r, 0);
    assert_int_equal(info.kind, DISTLOCK_HOLDER_OTHER);
    assert_int_equal(info.taken, 1);
    assert_board_intact(rc, "board:holder");
    distlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_lock_on_foreign_sorted_set_not_granted, heal),
        cmocka_unit_test_setup(test_waiting_lock_on_foreign_sorted_set_not_granted, heal),
        cmocka_unit_test_setup(test_read_lock_on_foreign_sorted_set_not_granted, heal),
        cmocka_unit_test_setup(test_permit_and_set_on_foreign_sorted_set_not_granted, heal),
        cmocka_unit_test_setup(test_holder_says_other_type, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
