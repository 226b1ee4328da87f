/*
 * distlock_client.c -- the Distlock\Client class: a handle on the worker's
 * persistent client of one configuration (distlock_client_cache.c), from
 * the INI or the constructor's arguments; tryLock() / lock() (locks and
 * read locks), trySemaphore() / semaphore() (permits) and tryLockMany() /
 * lockMany() (several keys) make Distlock\Lock objects (distlock_lock.c).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>
#include <time.h>

#include "php.h"

#include "php_distlock_int.h"

/* Client's flag constants: a bit outside them is a ValueError here. Which
 * of them each acquire takes (SHARED not with FENCING, a semaphore only
 * AUTO_RENEW...) is the core's rule: its EINVAL, with a detail naming the
 * flag, is the ValueError then. */
#define DL_OO_FLAGS (DISTLOCK_FENCING | DISTLOCK_AUTO_RENEW | DISTLOCK_SHARED)
#define DL_OO_FLAGS_TEXT "Client::FENCING, Client::AUTO_RENEW and Client::SHARED"

static zend_object_handlers dl_client_handlers;

typedef struct {
    distlock_client *c;   /* borrowed from the persistent cache */
    zend_object std;
} dl_client_obj;

static inline dl_client_obj *dl_client_from(zend_object *o)
{
    return (dl_client_obj *)((char *)o - XtOffsetOf(dl_client_obj, std));
}

static zend_object *dl_client_create(zend_class_entry *ce)
{
    dl_client_obj *o = zend_object_alloc(sizeof(dl_client_obj), ce);

    zend_object_std_init(&o->std, ce);
    object_properties_init(&o->std, ce);
    o->std.handlers = &dl_client_handlers;
    o->c = NULL;
    return &o->std;
}

static distlock_client *dl_this_client(zval *this_zv)
{
    dl_client_obj *o = dl_client_from(Z_OBJ_P(this_zv));

    if (o->c == NULL) {
        zend_throw_error(NULL, "Distlock\\Client is not initialized (its constructor did not complete)");
        return NULL;
    }
    return o->c;
}

/* $options[name] = v into cfg: the row comes from the library's option
 * table (an unknown name: ValueError with the library's message, which names
 * the closest known one); the value's PHP type picks the setter (int and
 * bool: an integer, string: text, which the library parses for an integer
 * option). The library checks the value when the client is made. */
static bool dl_option(dl_config *cfg, zend_string *name, zval *v)
{
    const distlock_option_info *o = distlock_option_by_name(ZSTR_VAL(name));
    size_t i = 0;

    if (o == NULL || memchr(ZSTR_VAL(name), '\0', ZSTR_LEN(name)) != NULL) {
        zend_argument_value_error(2, "has an %s", o ? "option name with a null byte"
                                                     : distlock_last_error());
        return false;
    }
    while (distlock_option_at(i) != o)
        i++;
    if (i >= DL_OPTIONS_MAX) {   /* MINIT refuses a table this long */
        zend_argument_value_error(2, "has option \"%s\" this build cannot hold", o->name);
        return false;
    }
    switch (Z_TYPE_P(v)) {
    case IS_NULL:   /* the INI value, else the library's default */
        return true;
    case IS_LONG:
    case IS_TRUE:
    case IS_FALSE:
        cfg->kind[i] = DL_OPT_LONG;
        cfg->lv[i] = Z_TYPE_P(v) == IS_LONG ? Z_LVAL_P(v) : Z_TYPE_P(v) == IS_TRUE;
        return true;
    case IS_STRING:
        if (memchr(Z_STRVAL_P(v), '\0', Z_STRLEN_P(v)) != NULL) {
            zend_argument_value_error(2, "option \"%s\" must not contain any null bytes", o->name);
            return false;
        }
        cfg->kind[i] = DL_OPT_TEXT;
        cfg->sv[i] = Z_STRVAL_P(v);
        return true;
    default:
        zend_argument_type_error(2, "option \"%s\" must be of type int|string|bool, %s given",
                                 o->name, zend_zval_type_name(v));
        return false;
    }
}

PHP_METHOD(Distlock_Client, __construct)
{
    zend_string *servers = NULL;
    HashTable *options = NULL;
    dl_config cfg;
    zend_string *name;
    zval *v;
    distlock_client *c;

    ZEND_PARSE_PARAMETERS_START(0, 2)
        Z_PARAM_OPTIONAL
        Z_PARAM_STR_OR_NULL(servers)
        Z_PARAM_ARRAY_HT(options)
    ZEND_PARSE_PARAMETERS_END();
    DL_SAFE_POINT();

    dl_config_from_ini(&cfg);
    if (servers != NULL) {
        if (ZSTR_LEN(servers) == 0 || memchr(ZSTR_VAL(servers), '\0', ZSTR_LEN(servers)) != NULL) {
            zend_argument_value_error(1, "must be a non-empty server list without null bytes");
            RETURN_THROWS();
        }
        cfg.servers = ZSTR_VAL(servers);
    }
    if (options != NULL) {
        ZEND_HASH_FOREACH_STR_KEY_VAL(options, name, v) {
            ZVAL_DEREF(v);
            if (name == NULL) {
                zend_argument_value_error(2, "must have string keys (the library's option names)");
                RETURN_THROWS();
            }
            if (!dl_option(&cfg, name, v)) {
                RETURN_THROWS();
            }
        } ZEND_HASH_FOREACH_END();
    }
    if ((c = dl_client_for(&cfg)) == NULL) {
        RETURN_THROWS();
    }
    dl_client_from(Z_OBJ_P(ZEND_THIS))->c = c;
}

/* ------------------------------------------- waits that let PHP's signal handlers run */

/* Called by the core in the waiting call's thread (the request's), before
 * each sleep and when a signal interrupts one. pcntl's handler, with
 * pcntl_async_signals(true), only queues the signal and sets
 * EG(vm_interrupt) for the engine to run the PHP handler at its next check,
 * which never comes while the call waits in C. Without async signals it
 * sets nothing: the signal waits for the script's pcntl_signal_dispatch(),
 * and so does the wait. */
int dl_engine_interrupted(void *unused)
{
    (void)unused;
    return zend_atomic_bool_load_ex(&EG(vm_interrupt)) ? 1 : 0;
}

static uint64_t dl_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* What the engine does at its interrupt check, from inside a call: the
 * pending pcntl handlers run now (pcntl_signal_dispatch(), when pcntl is
 * loaded). false when the call must end instead of waiting on: a handler
 * threw (or exit()ed: an unwind exit is an exception too), or the request's
 * time limit is up (the flag is left set: the engine ends the request once
 * the call returns). *cleared: EG(vm_interrupt) was cleared here, so the
 * caller sets it again when the call ends, and an interrupt another
 * extension asked for still reaches its zend_interrupt_function. */
static bool dl_run_interrupts(bool *cleared)
{
    zend_function *dispatch;
    zval rv;

    if (zend_atomic_bool_load_ex(&EG(timed_out))) {
        return false;
    }
    zend_atomic_bool_store_ex(&EG(vm_interrupt), false);
    *cleared = true;
    dispatch = zend_hash_str_find_ptr(EG(function_table), "pcntl_signal_dispatch",
                                      sizeof("pcntl_signal_dispatch") - 1);
    if (dispatch != NULL) {
        ZVAL_UNDEF(&rv);
        zend_call_known_function(dispatch, NULL, NULL, &rv, 0, NULL, NULL);
        zval_ptr_dtor(&rv);
    }
    return EG(exception) == NULL;
}

/* One acquire of the core (a lock, a permit, several keys) for wait_ms. */
typedef int (*dl_attempt_fn)(distlock_client *c, const void *what, long wait_ms,
                             distlock_lock **out);

/* A waiting acquire that PHP's signal handlers interrupt: the core ends the
 * wait (DISTLOCK_ECANCELED, nothing held) when dl_engine_interrupted() says
 * so; the handlers run here and the wait goes on with what is left of the
 * budget (the same deadline: a budget spent in the handlers is one last
 * attempt). A handler's exception ends it: DISTLOCK_ECANCELED with
 * EG(exception) set, nothing held. A cancel that is not the engine's
 * (distlock_client_cancel()) is returned as it is. */
static int dl_wait(distlock_client *c, dl_attempt_fn attempt, const void *what, long wait_ms,
                   distlock_lock **out)
{
    uint64_t deadline = wait_ms > 0 ? dl_now_ms() + (uint64_t)wait_ms : 0;
    bool cleared = false;
    int st;

    for (;;) {
        st = attempt(c, what, wait_ms, out);
        if (st != DISTLOCK_ECANCELED || !zend_atomic_bool_load_ex(&EG(vm_interrupt))) {
            break;
        }
        if (!dl_run_interrupts(&cleared)) {
            break;
        }
        if (wait_ms > 0) {
            uint64_t now = dl_now_ms();
            wait_ms = deadline > now ? (long)(deadline - now) : 0;
        }
    }
    if (cleared) {
        zend_atomic_bool_store_ex(&EG(vm_interrupt), true);
    }
    return st;
}

/* After an acquire that returned a Lock: a signal still pending (one a
 * handler raised, one that came during the last round trip) runs its
 * handler here, not at the engine's check after the call, because a
 * handler that throws there leaves the returned Lock alive, unreachable,
 * until the request ends (the engine does not free a call's result when its
 * interrupt throws). Here its exception ends the call and the Lock is
 * destroyed at once, which releases it: nothing held. (Wrapped first, so a
 * handler's fatal error still releases it at the request's end.) */
static void dl_run_pending_handlers(zval *return_value)
{
    bool cleared = false;

    if (Z_TYPE_P(return_value) != IS_OBJECT || !zend_atomic_bool_load_ex(&EG(vm_interrupt))) {
        return;
    }
    if (!dl_run_interrupts(&cleared) && EG(exception) != NULL) {
        zval_ptr_dtor(return_value);
        ZVAL_NULL(return_value);
    }
    if (cleared) {
        zend_atomic_bool_store_ex(&EG(vm_interrupt), true);
    }
}

/* The outcome of an acquire of the core, for all of Client's: a Lock, null
 * (held, no waiting), a LockTimeoutException (held after the wait), or the
 * status table's exception. `what` names the call in messages, `key` the
 * (first) key, `more` how many keys follow it, `doing` and `why_held` the
 * words of the timeout. */
typedef struct {
    const char *what, *doing, *why_held;
    const char *key;
    size_t key_len, more;
} dl_acquire_words;

static void dl_acquired(zval *return_value, int st, distlock_lock *l, long ttl_ms, bool blocking,
                        double timeout_s, const dl_acquire_words *w)
{
    if (st == DISTLOCK_OK) {
        dl_lock_wrap(return_value, l, ttl_ms);
        return;
    }
    /* Held by other owners (after the wait, for a waiting call); every other
     * status, ETIMEDOUT included ("granted too late, nothing held"), is the
     * error the status table (distlock_errors.c) maps it to. */
    if (st == DISTLOCK_NOTACQUIRED) {
        if (!blocking) {
            ZVAL_NULL(return_value);
            return;
        }
        dl_throw_wait_timeout(w->doing, w->key, w->key_len, w->more, timeout_s, w->why_held);
        return;
    }
    dl_throw_status_in(st, DL_IN_ACQUIRE, w->what, w->key, w->key_len);
}

static bool dl_check_flags(uint32_t argn, zend_long flags)
{
    if ((flags & ~(zend_long)DL_OO_FLAGS) != 0) {
        zend_argument_value_error(argn, "must be 0 or a combination of " DL_OO_FLAGS_TEXT);
        return false;
    }
    return true;
}

/* A caller's token: the C API takes a C string, so a NUL byte is refused
 * here; its length and what it may be used with are the core's rules
 * (EINVAL, a ValueError with the core's detail). */
static bool dl_check_token_bytes(uint32_t argn, const zend_string *token)
{
    if (memchr(ZSTR_VAL(token), '\0', ZSTR_LEN(token)) != NULL) {
        zend_argument_value_error(argn, "must not contain any null bytes");
        return false;
    }
    return true;
}

typedef struct {
    const char *key;
    long ttl_ms;
    unsigned flags;
    distlock_acquire_args *args;
} dl_lock_attempt;

static int dl_attempt_lock(distlock_client *c, const void *what, long wait_ms, distlock_lock **out)
{
    const dl_lock_attempt *a = what;

    return distlock_acquire_with(c, a->key, a->ttl_ms, wait_ms, a->flags, a->args, out);
}

/* token: NULL for a fresh token, else args->token (argument token_argn). */
static void dl_acquire(INTERNAL_FUNCTION_PARAMETERS, zend_string *key, double ttl, long wait_ms,
                       zend_long flags, bool blocking, double timeout_s, zend_string *token,
                       uint32_t token_argn)
{
    distlock_client *c;
    distlock_lock *l = NULL;
    long ttl_ms;
    int st;
    dl_acquire_words w = { "lock", "lock", "held by another owner", ZSTR_VAL(key), ZSTR_LEN(key), 0 };
    distlock_acquire_args args = { .size = sizeof args };

    if ((c = dl_this_client(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    if (!dl_check_key(1, key)) {
        RETURN_THROWS();
    }
    if (!dl_ttl_from_seconds(2, ttl, &ttl_ms)) {
        RETURN_THROWS();
    }
    if (!dl_check_flags(blocking ? 4 : 3, flags)) {
        RETURN_THROWS();
    }
    if (token != NULL) {
        if (!dl_check_token_bytes(token_argn, token)) {
            RETURN_THROWS();
        }
        args.token = ZSTR_VAL(token);
    }
    {
        dl_lock_attempt a = { ZSTR_VAL(key), ttl_ms, (unsigned)flags, &args };

        st = dl_wait(c, dl_attempt_lock, &a, wait_ms, &l);
    }
    if (EG(exception)) {   /* a signal handler's: nothing is held */
        RETURN_THROWS();
    }
    dl_acquired(return_value, st, l, ttl_ms, blocking, timeout_s, &w);
    dl_run_pending_handlers(return_value);
}

PHP_METHOD(Distlock_Client, tryLock)
{
    zend_string *key;
    double ttl = 60.0;
    zend_long flags = 0;
    zend_string *token = NULL;

    ZEND_PARSE_PARAMETERS_START(1, 4)
        Z_PARAM_STR(key)
        Z_PARAM_OPTIONAL
        Z_PARAM_DOUBLE(ttl)
        Z_PARAM_LONG(flags)
        Z_PARAM_STR_OR_NULL(token)
    ZEND_PARSE_PARAMETERS_END();
    DL_SAFE_POINT();

    dl_acquire(INTERNAL_FUNCTION_PARAM_PASSTHRU, key, ttl, 0, flags, false, 0.0, token, 4);
}

PHP_METHOD(Distlock_Client, lock)
{
    zend_string *key;
    double ttl = 60.0;
    double timeout = 0.0;
    bool timeout_null = true;
    zend_long flags = 0;
    zend_string *token = NULL;
    long wait_ms = DISTLOCK_WAIT_FOREVER;

    ZEND_PARSE_PARAMETERS_START(1, 5)
        Z_PARAM_STR(key)
        Z_PARAM_OPTIONAL
        Z_PARAM_DOUBLE(ttl)
        Z_PARAM_DOUBLE_OR_NULL(timeout, timeout_null)
        Z_PARAM_LONG(flags)
        Z_PARAM_STR_OR_NULL(token)
    ZEND_PARSE_PARAMETERS_END();
    DL_SAFE_POINT();

    if (!timeout_null && !dl_seconds_to_ms(3, timeout, 0, DISTLOCK_TTL_MAX, &wait_ms)) {
        RETURN_THROWS();
    }
    dl_acquire(INTERNAL_FUNCTION_PARAM_PASSTHRU, key, ttl, wait_ms, flags, true, timeout, token, 5);
}

typedef struct {
    const char *key;
    long permits, ttl_ms;
    unsigned flags;
} dl_permit_attempt;

static int dl_attempt_permit(distlock_client *c, const void *what, long wait_ms,
                             distlock_lock **out)
{
    const dl_permit_attempt *a = what;

    return distlock_semaphore_acquire(c, a->key, a->permits, a->ttl_ms, wait_ms, a->flags, NULL,
                                      out);
}

/* A permit of a semaphore: the same shape as a lock, with the permits
 * (checked by the core: 1..DISTLOCK_PERMITS_MAX) after the key. */
static void dl_acquire_permit(INTERNAL_FUNCTION_PARAMETERS, zend_string *key, zend_long permits,
                              double ttl, long wait_ms, zend_long flags, bool blocking,
                              double timeout_s)
{
    distlock_client *c;
    distlock_lock *l = NULL;
    long ttl_ms;
    int st;
    dl_acquire_words w = { "semaphore", "get a permit of", "all its permits are held",
                           ZSTR_VAL(key), ZSTR_LEN(key), 0 };

    if ((c = dl_this_client(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    if (!dl_check_key(1, key)) {
        RETURN_THROWS();
    }
    if (!dl_ttl_from_seconds(3, ttl, &ttl_ms)) {
        RETURN_THROWS();
    }
    if (!dl_check_flags(blocking ? 5 : 4, flags)) {
        RETURN_THROWS();
    }
    {
        dl_permit_attempt a = { ZSTR_VAL(key), (long)permits, ttl_ms, (unsigned)flags };

        st = dl_wait(c, dl_attempt_permit, &a, wait_ms, &l);
    }
    if (EG(exception)) {   /* a signal handler's: nothing is held */
        RETURN_THROWS();
    }
    dl_acquired(return_value, st, l, ttl_ms, blocking, timeout_s, &w);
    dl_run_pending_handlers(return_value);
}

PHP_METHOD(Distlock_Client, trySemaphore)
{
    zend_string *key;
    zend_long permits;
    double ttl = 60.0;
    zend_long flags = 0;

    ZEND_PARSE_PARAMETERS_START(2, 4)
        Z_PARAM_STR(key)
        Z_PARAM_LONG(permits)
        Z_PARAM_OPTIONAL
        Z_PARAM_DOUBLE(ttl)
        Z_PARAM_LONG(flags)
    ZEND_PARSE_PARAMETERS_END();
    DL_SAFE_POINT();

    dl_acquire_permit(INTERNAL_FUNCTION_PARAM_PASSTHRU, key, permits, ttl, 0, flags, false, 0.0);
}

PHP_METHOD(Distlock_Client, semaphore)
{
    zend_string *key;
    zend_long permits;
    double ttl = 60.0;
    double timeout = 0.0;
    bool timeout_null = true;
    zend_long flags = 0;
    long wait_ms = DISTLOCK_WAIT_FOREVER;

    ZEND_PARSE_PARAMETERS_START(2, 5)
        Z_PARAM_STR(key)
        Z_PARAM_LONG(permits)
        Z_PARAM_OPTIONAL
        Z_PARAM_DOUBLE(ttl)
        Z_PARAM_DOUBLE_OR_NULL(timeout, timeout_null)
        Z_PARAM_LONG(flags)
    ZEND_PARSE_PARAMETERS_END();
    DL_SAFE_POINT();

    if (!timeout_null && !dl_seconds_to_ms(4, timeout, 0, DISTLOCK_TTL_MAX, &wait_ms)) {
        RETURN_THROWS();
    }
    dl_acquire_permit(INTERNAL_FUNCTION_PARAM_PASSTHRU, key, permits, ttl, wait_ms, flags, true,
                      timeout);
}

typedef struct {
    const char **keys;
    size_t n;
    long ttl_ms;
    unsigned flags;
} dl_keys_attempt;

static int dl_attempt_keys(distlock_client *c, const void *what, long wait_ms, distlock_lock **out)
{
    const dl_keys_attempt *a = what;

    return distlock_acquire_many(c, a->keys, a->n, a->ttl_ms, wait_ms, a->flags, NULL, out);
}

/* All of $keys or none. The array's values, in its order, are the keys; a
 * value that is not a string is a TypeError, a null byte a ValueError (the
 * C API takes C strings). Their count, length, emptiness and repetition are
 * the core's rules (EINVAL naming the key: a ValueError). */
static void dl_acquire_keys(INTERNAL_FUNCTION_PARAMETERS, HashTable *keys, double ttl,
                            long wait_ms, zend_long flags, bool blocking, double timeout_s)
{
    distlock_client *c;
    distlock_lock *l = NULL;
    const char **ks;
    size_t n = 0;
    long ttl_ms;
    int st;
    zval *v;
    dl_acquire_words w = { blocking ? "lockMany" : "tryLockMany", "lock",
                           "held by another owner", "", 0, 0 };

    if ((c = dl_this_client(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    if (!dl_ttl_from_seconds(2, ttl, &ttl_ms)) {
        RETURN_THROWS();
    }
    if (!dl_check_flags(blocking ? 4 : 3, flags)) {
        RETURN_THROWS();
    }
    ks = safe_emalloc(zend_hash_num_elements(keys) ? zend_hash_num_elements(keys) : 1,
                      sizeof(*ks), 0);
    ZEND_HASH_FOREACH_VAL(keys, v) {
        ZVAL_DEREF(v);
        if (Z_TYPE_P(v) != IS_STRING) {
            zend_argument_type_error(1, "must contain only strings, %s given",
                                     zend_zval_type_name(v));
            efree(ks);
            RETURN_THROWS();
        }
        if (memchr(Z_STRVAL_P(v), '\0', Z_STRLEN_P(v)) != NULL) {
            zend_argument_value_error(1, "must not contain keys with null bytes");
            efree(ks);
            RETURN_THROWS();
        }
        ks[n++] = Z_STRVAL_P(v);
    } ZEND_HASH_FOREACH_END();
    if (n > 0) {
        w.key = ks[0];
        w.key_len = strlen(ks[0]);
        w.more = n - 1;
    }
    {
        dl_keys_attempt a = { ks, n, ttl_ms, (unsigned)flags };

        st = dl_wait(c, dl_attempt_keys, &a, wait_ms, &l);
    }
    if (EG(exception)) {   /* a signal handler's: nothing is held */
        efree(ks);
        RETURN_THROWS();
    }
    /* w names the array's strings: they outlive the call (the array is the
     * caller's, held by the call frame). */
    dl_acquired(return_value, st, l, ttl_ms, blocking, timeout_s, &w);
    efree(ks);
    dl_run_pending_handlers(return_value);
}

PHP_METHOD(Distlock_Client, tryLockMany)
{
    HashTable *keys;
    double ttl = 60.0;
    zend_long flags = 0;

    ZEND_PARSE_PARAMETERS_START(1, 3)
        Z_PARAM_ARRAY_HT(keys)
        Z_PARAM_OPTIONAL
        Z_PARAM_DOUBLE(ttl)
        Z_PARAM_LONG(flags)
    ZEND_PARSE_PARAMETERS_END();
    DL_SAFE_POINT();

    dl_acquire_keys(INTERNAL_FUNCTION_PARAM_PASSTHRU, keys, ttl, 0, flags, false, 0.0);
}

PHP_METHOD(Distlock_Client, lockMany)
{
    HashTable *keys;
    double ttl = 60.0;
    double timeout = 0.0;
    bool timeout_null = true;
    zend_long flags = 0;
    long wait_ms = DISTLOCK_WAIT_FOREVER;

    ZEND_PARSE_PARAMETERS_START(1, 4)
        Z_PARAM_ARRAY_HT(keys)
        Z_PARAM_OPTIONAL
        Z_PARAM_DOUBLE(ttl)
        Z_PARAM_DOUBLE_OR_NULL(timeout, timeout_null)
        Z_PARAM_LONG(flags)
    ZEND_PARSE_PARAMETERS_END();
    DL_SAFE_POINT();

    if (!timeout_null && !dl_seconds_to_ms(3, timeout, 0, DISTLOCK_TTL_MAX, &wait_ms)) {
        RETURN_THROWS();
    }
    dl_acquire_keys(INTERNAL_FUNCTION_PARAM_PASSTHRU, keys, ttl, wait_ms, flags, true, timeout);
}

/* A Lock for an ownership taken elsewhere (distlock_lock_restore): no I/O,
 * nothing checked on the servers; its release compare-and-deletes the token. */
PHP_METHOD(Distlock_Client, restoreLock)
{
    zend_string *key, *token;
    distlock_client *c;
    distlock_lock *l = NULL;
    int st;

    ZEND_PARSE_PARAMETERS_START(2, 2)
        Z_PARAM_STR(key)
        Z_PARAM_STR(token)
    ZEND_PARSE_PARAMETERS_END();
    DL_SAFE_POINT();

    if ((c = dl_this_client(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    if (!dl_check_key(1, key) || !dl_check_token_bytes(2, token)) {
        RETURN_THROWS();
    }
    st = distlock_lock_restore(c, ZSTR_VAL(key), ZSTR_VAL(token), &l);
    if (st != DISTLOCK_OK) {
        dl_throw_status(st, "restoreLock", ZSTR_VAL(key), ZSTR_LEN(key));
        RETURN_THROWS();
    }
    dl_lock_wrap_restored(return_value, l);
}

/* The quorum verdict of distlock_admin_holder() (every node, one round),
 * with the names of Python's Client.holder(): the verdict is the core's,
 * this only translates it. No verdict (ENOQUORUM, a node's error) throws. */
PHP_METHOD(Distlock_Client, holder)
{
    zend_string *key;
    distlock_client *c;
    distlock_holder_info h = { .size = sizeof h };
    int st;

    ZEND_PARSE_PARAMETERS_START(1, 1)
        Z_PARAM_STR(key)
    ZEND_PARSE_PARAMETERS_END();
    DL_SAFE_POINT();

    if ((c = dl_this_client(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    if (!dl_check_key(1, key)) {
        RETURN_THROWS();
    }
    st = distlock_admin_holder(c, ZSTR_VAL(key), -1, &h);
    if (st < 0) {
        dl_throw_status(st, "holder", ZSTR_VAL(key), ZSTR_LEN(key));
        RETURN_THROWS();
    }
    array_init_size(return_value, 8);
    add_assoc_bool(return_value, "held", st == 1);
    if (h.nodes > 0) {
        add_assoc_string(return_value, "token", h.token);
    } else {
        add_assoc_null(return_value, "token");
    }
    add_assoc_long(return_value, "nodes", h.nodes);
    /* ttl: the shortest lease left among the nodes holding the token; null
     * when none holds one or it never expires (pttl -1). */
    if (h.nodes > 0 && h.pttl_ms >= 0) {
        add_assoc_double(return_value, "ttl", (double)h.pttl_ms / 1000.0);
    } else {
        add_assoc_null(return_value, "ttl");
    }
    add_assoc_long(return_value, "answered", h.answered);
    add_assoc_long(return_value, "taken", h.taken);
    add_assoc_string(return_value, "kind", distlock_holder_kind_name(h.kind));
    add_assoc_long(return_value, "holders", (zend_long)h.holders);
}

/* Administrative override (distlock_admin_force_release): the nodes where
 * something was deleted; a node that did not answer or refused throws. */
PHP_METHOD(Distlock_Client, forceRelease)
{
    zend_string *key;
    distlock_client *c;
    int deleted = 0, st;

    ZEND_PARSE_PARAMETERS_START(1, 1)
        Z_PARAM_STR(key)
    ZEND_PARSE_PARAMETERS_END();
    DL_SAFE_POINT();

    if ((c = dl_this_client(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    if (!dl_check_key(1, key)) {
        RETURN_THROWS();
    }
    st = distlock_admin_force_release(c, ZSTR_VAL(key), &deleted);
    if (st != DISTLOCK_OK) {
        dl_throw_status(st, "forceRelease", ZSTR_VAL(key), ZSTR_LEN(key));
        RETURN_THROWS();
    }
    RETURN_LONG(deleted);
}

/* The table itself, not a copy: a row the library adds shows up here with
 * no change to the extension. */
PHP_METHOD(Distlock_Client, options)
{
    const distlock_option_info *o;

    ZEND_PARSE_PARAMETERS_NONE();
    DL_SAFE_POINT();
    array_init(return_value);
    for (size_t i = 0; (o = distlock_option_at(i)) != NULL; i++) {
        zval row;
        int is_long = o->type == DISTLOCK_OPTION_LONG;

        array_init_size(&row, 5);
        add_assoc_string(&row, "type", is_long ? "int" : "string");
        add_assoc_long(&row, "min", o->min);
        add_assoc_long(&row, "max", o->max);
        if (is_long)
            add_assoc_long(&row, "default", o->default_value);
        else
            add_assoc_null(&row, "default");
        add_assoc_string(&row, "summary", o->summary);
        add_assoc_zval(return_value, o->name, &row);
    }
}

PHP_METHOD(Distlock_Client, servers)
{
    distlock_client *c;
    int i, n;

    ZEND_PARSE_PARAMETERS_NONE();
    DL_SAFE_POINT();
    if ((c = dl_this_client(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    n = distlock_client_node_count(c);
    array_init_size(return_value, n > 0 ? (uint32_t)n : 0);
    for (i = 0; i < n; i++) {
        const char *uri = distlock_client_node_uri(c, i);  /* masked by the library */
        add_next_index_string(return_value, uri ? uri : "");
    }
}

PHP_METHOD(Distlock_Client, quorum)
{
    distlock_client *c;

    ZEND_PARSE_PARAMETERS_NONE();
    DL_SAFE_POINT();
    if ((c = dl_this_client(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    RETURN_LONG(distlock_client_quorum(c));
}

PHP_METHOD(Distlock_Client, stats)
{
    distlock_client *c;
    distlock_stat *e;
    size_t n = 0, got = 0;

    ZEND_PARSE_PARAMETERS_NONE();
    DL_SAFE_POINT();
    if ((c = dl_this_client(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    if (distlock_client_stats(c, NULL, 0, &n) != DISTLOCK_OK) {
        zend_throw_error(NULL, "distlock_client_stats: %s", distlock_last_error());
        RETURN_THROWS();
    }
    e = safe_emalloc(n ? n : 1, sizeof(*e), 0);
    if (distlock_client_stats(c, e, n, &got) != DISTLOCK_OK) {
        efree(e);
        zend_throw_error(NULL, "distlock_client_stats: %s", distlock_last_error());
        RETURN_THROWS();
    }
    array_init_size(return_value, (uint32_t)got);
    for (size_t k = 0; k < got; k++) {
        /* PHP ints are signed 64-bit: a counter past 2^63 saturates */
        zend_long v = e[k].value > (uint64_t)ZEND_LONG_MAX ? ZEND_LONG_MAX : (zend_long)e[k].value;
        add_assoc_long(return_value, e[k].name, v);
    }
    efree(e);
}

static HashTable *dl_client_debug_info(zend_object *obj, int *is_temp)
{
    dl_client_obj *o = dl_client_from(obj);
    zval arr, servers;
    int i, n;

    *is_temp = 1;
    array_init(&arr);
    if (o->c != NULL) {
        n = distlock_client_node_count(o->c);
        array_init(&servers);
        for (i = 0; i < n; i++) {
            const char *uri = distlock_client_node_uri(o->c, i);  /* masked by the library */
            add_next_index_string(&servers, uri ? uri : "");
        }
        add_assoc_zval(&arr, "servers", &servers);
        add_assoc_long(&arr, "quorum", distlock_client_quorum(o->c));
    }
    return Z_ARRVAL(arr);
}

zend_class_entry *dl_ce_client;

void dl_client_minit(zend_class_entry *ce)
{
    dl_ce_client = ce;
    dl_ce_client->create_object = dl_client_create;
    memcpy(&dl_client_handlers, zend_get_std_object_handlers(), sizeof(zend_object_handlers));
    dl_client_handlers.offset = XtOffsetOf(dl_client_obj, std);
    dl_client_handlers.clone_obj = NULL;
    dl_client_handlers.get_debug_info = dl_client_debug_info;
}
