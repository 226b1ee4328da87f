/*
 * distlock_lock.c -- the Distlock\Lock class: one held lock, obtained from
 * Distlock\Client::tryLock() / lock() (distlock_client.c), never
 * constructed, cloned or serialized. A Lock that goes away while held
 * releases it (locks are never persistent).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#include "php.h"

#include "php_distlock_int.h"

static zend_object_handlers dl_lock_handlers;

typedef struct {
    distlock_lock *l;
    long ttl_ms;
    zend_object std;
} dl_lock_obj;

static inline dl_lock_obj *dl_lock_from(zend_object *o)
{
    return (dl_lock_obj *)((char *)o - XtOffsetOf(dl_lock_obj, std));
}

static zend_object *dl_lock_create(zend_class_entry *ce)
{
    dl_lock_obj *o = zend_object_alloc(sizeof(dl_lock_obj), ce);

    zend_object_std_init(&o->std, ce);
    object_properties_init(&o->std, ce);
    o->std.handlers = &dl_lock_handlers;
    o->l = NULL;
    o->ttl_ms = 0;
    return &o->std;
}

/* A Lock that goes away while held releases it (locks are never persistent:
 * the last reference, the end of the request or of the process frees it). */
static void dl_lock_free(zend_object *obj)
{
    dl_lock_obj *o = dl_lock_from(obj);

    if (o->l != NULL) {
        /* In a child after fork() the core frees an inherited handle
         * without releasing the parent's lock. */
        distlock_lock_free(o->l);
        o->l = NULL;
    }
    zend_object_std_dtor(obj);
}

static distlock_lock *dl_this_lock(zval *this_zv)
{
    dl_lock_obj *o = dl_lock_from(Z_OBJ_P(this_zv));

    if (o->l == NULL) {
        zend_throw_error(NULL, "Distlock\\Lock is not initialized (obtain one from Distlock\\Client)");
        return NULL;
    }
    return o->l;
}

void dl_lock_wrap(zval *zv, distlock_lock *l, long ttl_ms)
{
    dl_lock_obj *o;

    object_init_ex(zv, dl_ce_lock);
    o = dl_lock_from(Z_OBJ_P(zv));
    o->l = l;
    o->ttl_ms = ttl_ms;
}

PHP_METHOD(Distlock_Lock, __construct)
{
    ZEND_PARSE_PARAMETERS_NONE();
    zend_throw_error(NULL, "Distlock\\Lock cannot be constructed directly: use Distlock\\Client::tryLock() or lock()");
}

PHP_METHOD(Distlock_Lock, release)
{
    distlock_lock *l;
    int st;

    ZEND_PARSE_PARAMETERS_NONE();
    if ((l = dl_this_lock(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    st = distlock_release(l);
    if (st == DISTLOCK_OK) {
        RETURN_TRUE;
    }
    if (st == DISTLOCK_ENOTOWNER) {
        RETURN_FALSE;
    }
    dl_throw_status(st, "release", distlock_lock_key(l), strlen(distlock_lock_key(l)));
    RETURN_THROWS();
}

PHP_METHOD(Distlock_Lock, extend)
{
    double ttl = 0.0;
    bool ttl_null = true;
    dl_lock_obj *o = dl_lock_from(Z_OBJ_P(ZEND_THIS));
    long ttl_ms;
    int st;

    ZEND_PARSE_PARAMETERS_START(0, 1)
        Z_PARAM_OPTIONAL
        Z_PARAM_DOUBLE_OR_NULL(ttl, ttl_null)
    ZEND_PARSE_PARAMETERS_END();

    if (dl_this_lock(ZEND_THIS) == NULL) {
        RETURN_THROWS();
    }
    ttl_ms = o->ttl_ms;
    if (!ttl_null && !dl_ttl_from_seconds(1, ttl, &ttl_ms)) {
        RETURN_THROWS();
    }
    st = distlock_extend(o->l, ttl_ms);
    if (st == DISTLOCK_OK) {
        o->ttl_ms = ttl_ms;
        RETURN_DOUBLE((double)distlock_lock_validity_ms(o->l) / 1000.0);
    }
    dl_throw_status(st, "extend", distlock_lock_key(o->l), strlen(distlock_lock_key(o->l)));
    RETURN_THROWS();
}

PHP_METHOD(Distlock_Lock, validity)
{
    distlock_lock *l;

    ZEND_PARSE_PARAMETERS_NONE();
    if ((l = dl_this_lock(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    RETURN_DOUBLE((double)distlock_lock_validity_ms(l) / 1000.0);
}

PHP_METHOD(Distlock_Lock, isHeld)
{
    distlock_lock *l;

    ZEND_PARSE_PARAMETERS_NONE();
    if ((l = dl_this_lock(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    RETURN_BOOL(distlock_lock_validity_ms(l) > 0 && !distlock_lock_lost(l));
}

PHP_METHOD(Distlock_Lock, isLost)
{
    distlock_lock *l;

    ZEND_PARSE_PARAMETERS_NONE();
    if ((l = dl_this_lock(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    RETURN_BOOL(distlock_lock_lost(l));
}

PHP_METHOD(Distlock_Lock, key)
{
    distlock_lock *l;

    ZEND_PARSE_PARAMETERS_NONE();
    if ((l = dl_this_lock(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    RETURN_STRING(distlock_lock_key(l));
}

PHP_METHOD(Distlock_Lock, token)
{
    distlock_lock *l;

    ZEND_PARSE_PARAMETERS_NONE();
    if ((l = dl_this_lock(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    RETURN_STRING(distlock_lock_token(l));
}

PHP_METHOD(Distlock_Lock, fence)
{
    distlock_lock *l;
    int64_t f;

    ZEND_PARSE_PARAMETERS_NONE();
    if ((l = dl_this_lock(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    f = distlock_lock_fence(l);
    if (f < 0) {
        RETURN_NULL();
    }
    RETURN_LONG((zend_long)f);
}

/* var_dump() / print_r(): what a developer wants to see; never the token
 * (debug output ends up in logs, and the token is what releases the lock). */
static HashTable *dl_lock_debug_info(zend_object *obj, int *is_temp)
{
    dl_lock_obj *o = dl_lock_from(obj);
    zval arr;

    *is_temp = 1;
    array_init(&arr);
    if (o->l != NULL) {
        int64_t f = distlock_lock_fence(o->l);

        add_assoc_string(&arr, "key", distlock_lock_key(o->l));
        add_assoc_double(&arr, "validity", (double)distlock_lock_validity_ms(o->l) / 1000.0);
        add_assoc_bool(&arr, "held", distlock_lock_validity_ms(o->l) > 0 && !distlock_lock_lost(o->l));
        add_assoc_bool(&arr, "lost", distlock_lock_lost(o->l));
        if (f >= 0) {
            add_assoc_long(&arr, "fence", (zend_long)f);
        } else {
            add_assoc_null(&arr, "fence");
        }
    }
    return Z_ARRVAL(arr);
}

zend_class_entry *dl_ce_lock;

void dl_lock_minit(zend_class_entry *ce)
{
    dl_ce_lock = ce;
    dl_ce_lock->create_object = dl_lock_create;
    memcpy(&dl_lock_handlers, zend_get_std_object_handlers(), sizeof(zend_object_handlers));
    dl_lock_handlers.offset = XtOffsetOf(dl_lock_obj, std);
    dl_lock_handlers.free_obj = dl_lock_free;
    dl_lock_handlers.clone_obj = NULL;
    dl_lock_handlers.get_debug_info = dl_lock_debug_info;
}
