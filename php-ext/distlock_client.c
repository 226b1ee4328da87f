/*
 * distlock_client.c -- the Distlock\Client class: a handle on the worker's
 * persistent client of one configuration (distlock_client_cache.c), from
 * the INI or the constructor's arguments; tryLock() / lock() make
 * Distlock\Lock objects (distlock_lock.c).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#include "php.h"

#include "php_distlock_int.h"

/* Flags Client::tryLock()/lock() accept. */
#define DL_OO_FLAGS (DISTLOCK_FENCING | DISTLOCK_AUTO_RENEW)

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

static bool dl_option_long(zval *v, const char *name, zend_long *out)
{
    if (Z_TYPE_P(v) != IS_LONG) {
        zend_argument_type_error(2, "option \"%s\" must be of type int, %s given", name,
                                 zend_zval_type_name(v));
        return false;
    }
    *out = Z_LVAL_P(v);
    return true;
}

static bool dl_option_string(zval *v, const char *name, const char **out)
{
    if (Z_TYPE_P(v) != IS_STRING) {
        zend_argument_type_error(2, "option \"%s\" must be of type string, %s given", name,
                                 zend_zval_type_name(v));
        return false;
    }
    if (memchr(Z_STRVAL_P(v), '\0', Z_STRLEN_P(v)) != NULL) {
        zend_argument_value_error(2, "option \"%s\" must not contain any null bytes", name);
        return false;
    }
    *out = Z_STRVAL_P(v);
    return true;
}

/* Index of a TLS string option's name, -1 if it is not one. */
static int dl_tls_option(const zend_string *name)
{
    for (int k = 0; k < 5; k++)
        if (zend_string_equals_cstr(name, dl_tls_names[k], strlen(dl_tls_names[k])))
            return k;
    return -1;
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
                zend_argument_value_error(2, "must have string keys (connect_timeout_ms, "
                                             "command_timeout_ms, username, password, tls_ca_file, tls_ca_dir, tls_cert, tls_key, "
                                             "tls_server_name, tls_verify)");
                RETURN_THROWS();
            }
            if (zend_string_equals_literal(name, "connect_timeout_ms")) {
                if (!dl_option_long(v, ZSTR_VAL(name), &cfg.connect_ms)) RETURN_THROWS();
            } else if (zend_string_equals_literal(name, "command_timeout_ms")) {
                if (!dl_option_long(v, ZSTR_VAL(name), &cfg.command_ms)) RETURN_THROWS();
            } else if (zend_string_equals_literal(name, "username")) {
                if (!dl_option_string(v, ZSTR_VAL(name), &cfg.username)) RETURN_THROWS();
            } else if (zend_string_equals_literal(name, "password")) {
                if (!dl_option_string(v, ZSTR_VAL(name), &cfg.password)) RETURN_THROWS();
            } else if (zend_string_equals_literal(name, "tls_verify")) {   /* TLS */
                if (Z_TYPE_P(v) != IS_TRUE && Z_TYPE_P(v) != IS_FALSE) {
                    zend_argument_type_error(2, "option \"tls_verify\" must be of type bool, %s given",
                                             zend_zval_type_name(v));
                    RETURN_THROWS();
                }
                cfg.tls_verify = Z_TYPE_P(v) == IS_TRUE;
            } else if (dl_tls_option(name) >= 0) {
                if (!dl_option_string(v, ZSTR_VAL(name), &cfg.tls[dl_tls_option(name)])) RETURN_THROWS();
            /* WAIT for replicas */
            } else if (zend_string_equals_literal(name, "wait_replicas")) {
                if (!dl_option_long(v, ZSTR_VAL(name), &cfg.wait_replicas)) RETURN_THROWS();
            } else if (zend_string_equals_literal(name, "wait_timeout_ms")) {
                if (!dl_option_long(v, ZSTR_VAL(name), &cfg.wait_ms)) RETURN_THROWS();
            /* owner metadata */
            } else if (zend_string_equals_literal(name, "owner_info")) {
                if (Z_TYPE_P(v) != IS_TRUE && Z_TYPE_P(v) != IS_FALSE) {
                    zend_argument_type_error(2, "option \"owner_info\" must be of type bool, %s given",
                                             zend_zval_type_name(v));
                    RETURN_THROWS();
                }
                cfg.owner_info = Z_TYPE_P(v) == IS_TRUE;
            } else if (zend_string_equals_literal(name, "owner_label")) {
                if (!dl_option_string(v, ZSTR_VAL(name), &cfg.owner_label)) RETURN_THROWS();
            } else {
                zend_argument_value_error(2, "has an unknown option \"%s\" (known: connect_timeout_ms, "
                                             "command_timeout_ms, username, password, tls_ca_file, tls_ca_dir, tls_cert, tls_key, "
                                             "tls_server_name, tls_verify, wait_replicas, wait_timeout_ms, owner_info, owner_label)", ZSTR_VAL(name));
                RETURN_THROWS();
            }
        } ZEND_HASH_FOREACH_END();
    }
    if ((c = dl_client_for(&cfg)) == NULL) {
        RETURN_THROWS();
    }
    dl_client_from(Z_OBJ_P(ZEND_THIS))->c = c;
}

static void dl_acquire(INTERNAL_FUNCTION_PARAMETERS, zend_string *key, double ttl, long wait_ms,
                       zend_long flags, bool blocking, double timeout_s)
{
    distlock_client *c;
    distlock_lock *l = NULL;
    long ttl_ms;
    int st;

    if ((c = dl_this_client(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    if (!dl_check_key(1, key)) {
        RETURN_THROWS();
    }
    if (!dl_ttl_from_seconds(2, ttl, &ttl_ms)) {
        RETURN_THROWS();
    }
    if ((flags & ~(zend_long)DL_OO_FLAGS) != 0) {
        zend_argument_value_error(blocking ? 4 : 3,
                                  "must be 0 or a combination of Client::FENCING and Client::AUTO_RENEW");
        RETURN_THROWS();
    }
    st = distlock_acquire(c, ZSTR_VAL(key), ttl_ms, wait_ms, (unsigned)flags, &l);
    if (st == DISTLOCK_OK) {
        dl_lock_wrap(return_value, l, ttl_ms);
        return;
    }
    /* Held by another owner (after the wait, for lock()); every other status,
     * ETIMEDOUT included ("granted too late, nothing held"), is the error the
     * status table (distlock_errors.c) maps it to. */
    if (st == DISTLOCK_NOTACQUIRED) {
        if (!blocking) {
            RETURN_NULL();
        }
        dl_throw_lock_timeout(key, timeout_s);
        RETURN_THROWS();
    }
    dl_throw_status_in(st, DL_IN_ACQUIRE, "lock", ZSTR_VAL(key), ZSTR_LEN(key));
    RETURN_THROWS();
}

PHP_METHOD(Distlock_Client, tryLock)
{
    zend_string *key;
    double ttl = 60.0;
    zend_long flags = 0;

    ZEND_PARSE_PARAMETERS_START(1, 3)
        Z_PARAM_STR(key)
        Z_PARAM_OPTIONAL
        Z_PARAM_DOUBLE(ttl)
        Z_PARAM_LONG(flags)
    ZEND_PARSE_PARAMETERS_END();
    DL_SAFE_POINT();

    dl_acquire(INTERNAL_FUNCTION_PARAM_PASSTHRU, key, ttl, 0, flags, false, 0.0);
}

PHP_METHOD(Distlock_Client, lock)
{
    zend_string *key;
    double ttl = 60.0;
    double timeout = 0.0;
    bool timeout_null = true;
    zend_long flags = 0;
    long wait_ms = DISTLOCK_WAIT_FOREVER;

    ZEND_PARSE_PARAMETERS_START(1, 4)
        Z_PARAM_STR(key)
        Z_PARAM_OPTIONAL
        Z_PARAM_DOUBLE(ttl)
        Z_PARAM_DOUBLE_OR_NULL(timeout, timeout_null)
        Z_PARAM_LONG(flags)
    ZEND_PARSE_PARAMETERS_END();
    DL_SAFE_POINT();

    if (!timeout_null && !dl_seconds_to_ms(3, timeout, 0, DISTLOCK_TTL_MAX, &wait_ms)) {
        RETURN_THROWS();
    }
    dl_acquire(INTERNAL_FUNCTION_PARAM_PASSTHRU, key, ttl, wait_ms, flags, true, timeout);
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
