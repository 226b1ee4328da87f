/*
 * distlock_lock.c -- the Distlock\Lock class: one held lease (a lock, a
 * read lock, a semaphore's permit or a lock on several keys: one handle of
 * the core for all), obtained from Distlock\Client (distlock_client.c), never
 * constructed, cloned or serialized. A Lock that goes away while held
 * releases it (locks are never persistent).
 *
 * A lost lease. The core finds an AUTO_RENEW lock lost on its
 * renewal thread, where no PHP code may run; it sets the lock's flag (an
 * atomic the core keeps, read by isLost()), and that is all. A Lock with an
 * onLost callback is on a list (module globals); every function and method
 * of the extension starts with a safe point (dl_lost_safe_point) that looks
 * at the flags of the listed locks and calls the callbacks of those found
 * lost, once each, in the PHP thread, before the call does its own work. So
 * a long-running worker (a CLI daemon) keeps its lease renewed in the
 * background while its PHP code runs, and hears of the loss at its next call
 * into the extension, or when it asks: check() throws LockLostException.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#include "php.h"

#include "php_distlock_int.h"

static zend_object_handlers dl_lock_handlers;

typedef struct dl_lock_obj {
    distlock_lock *l;
    long ttl_ms;
    bool released;              /* release() was called */
    bool lost_told;             /* the onLost callback was called (once) */
    bool restored;              /* from Client::restoreLock(): ttl_ms is 0 (no acquire
                                   TTL), validity 0 until an extend succeeds */
    bool abandoned;             /* abandon() was called: l is NULL (the core freed the
                                   handle), the key keeps the token until its TTL */
    zval a_keys, a_token, a_fences; /* what keys(), token() and fences() answer after
                                       abandon(): kept from the handle, which is gone */
    zval on_lost;               /* the callback, or UNDEF */
    struct dl_lock_obj *w_prev, *w_next; /* on the watch list while on_lost is set
                                            and not yet called */
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
    o->released = false;
    o->lost_told = false;
    o->restored = false;
    o->abandoned = false;
    ZVAL_UNDEF(&o->a_keys);
    ZVAL_UNDEF(&o->a_token);
    ZVAL_UNDEF(&o->a_fences);
    ZVAL_UNDEF(&o->on_lost);
    o->w_prev = o->w_next = NULL;
    return &o->std;
}

/* ------------------------------------------------ onLost and safe points */

#define DL_WATCH_HEAD() ((dl_lock_obj *)DISTLOCK_G(lost_watch))

static bool dl_watched(const dl_lock_obj *o)
{
    return o->w_prev != NULL || DL_WATCH_HEAD() == o;
}

static void dl_watch_add(dl_lock_obj *o)
{
    if (dl_watched(o)) {
        return;
    }
    o->w_prev = NULL;
    o->w_next = DL_WATCH_HEAD();
    if (o->w_next) {
        o->w_next->w_prev = o;
    }
    DISTLOCK_G(lost_watch) = o;
}

static void dl_watch_remove(dl_lock_obj *o)
{
    if (!dl_watched(o)) {
        return;
    }
    if (o->w_prev) {
        o->w_prev->w_next = o->w_next;
    } else {
        DISTLOCK_G(lost_watch) = o->w_next;
    }
    if (o->w_next) {
        o->w_next->w_prev = o->w_prev;
    }
    o->w_prev = o->w_next = NULL;
}

void dl_lost_rinit(void)
{
    DISTLOCK_G(lost_watch) = NULL;
    DISTLOCK_G(in_safe_point) = false;
}

/* Call one lock's callback with the lock; it holds its own references to
 * both, so the callback may drop the Lock or replace its own callback. */
static void dl_call_on_lost(dl_lock_obj *o)
{
    zval fn, arg, ret;

    ZVAL_COPY(&fn, &o->on_lost);
    ZVAL_OBJ_COPY(&arg, &o->std);
    ZVAL_UNDEF(&ret);
    call_user_function(NULL, NULL, &fn, &ret, 1, &arg);
    zval_ptr_dtor(&ret);
    zval_ptr_dtor(&arg);
    zval_ptr_dtor(&fn);
}

bool dl_lost_safe_point(void)
{
    dl_lock_obj *o, *next;
    zend_object **due;
    uint32_t n = 0, i;

    /* Nothing watched (the common case), or a callback calling into the
     * extension: its call does not run the callbacks again. */
    if (DL_WATCH_HEAD() == NULL || DISTLOCK_G(in_safe_point)) {
        return true;
    }
    for (o = DL_WATCH_HEAD(); o; o = o->w_next) {
        n += distlock_lock_lost(o->l) != 0;
    }
    if (n == 0) {
        return true;
    }
    /* Take the due ones off the list first (a callback may free any Lock,
     * or set a callback), holding a reference to each. */
    due = safe_emalloc(n, sizeof(*due), 0);
    n = 0;
    for (o = DL_WATCH_HEAD(); o; o = next) {
        next = o->w_next;
        if (distlock_lock_lost(o->l)) {
            dl_watch_remove(o);
            o->lost_told = true;
            GC_ADDREF(&o->std);
            due[n++] = &o->std;
        }
    }
    DISTLOCK_G(in_safe_point) = true;
    for (i = 0; i < n; i++) {
        o = dl_lock_from(due[i]);
        /* After a callback threw, the others wait for the next safe point. */
        if (EG(exception) == NULL && Z_TYPE(o->on_lost) != IS_UNDEF) {
            dl_call_on_lost(o);
        } else if (EG(exception) != NULL && Z_TYPE(o->on_lost) != IS_UNDEF) {
            o->lost_told = false;
            dl_watch_add(o);
        }
        OBJ_RELEASE(due[i]);
    }
    DISTLOCK_G(in_safe_point) = false;
    efree(due);
    return EG(exception) == NULL;
}

/* A Lock that goes away while held releases it (locks are never persistent:
 * the last reference, the end of the request or of the process frees it). */
static void dl_lock_free(zend_object *obj)
{
    dl_lock_obj *o = dl_lock_from(obj);

    dl_watch_remove(o);
    if (o->l != NULL) {
        /* In a child after fork() the core frees an inherited handle
         * without releasing the parent's lock. */
        distlock_lock_free(o->l);
        o->l = NULL;
    }
    zval_ptr_dtor(&o->on_lost);
    ZVAL_UNDEF(&o->on_lost);
    zval_ptr_dtor(&o->a_keys);
    zval_ptr_dtor(&o->a_token);
    zval_ptr_dtor(&o->a_fences);
    zend_object_std_dtor(obj);
}

/* The callback may hold the Lock (a closure using $lock): a cycle the
 * collector must see. */
static HashTable *dl_lock_get_gc(zend_object *obj, zval **table, int *n)
{
    dl_lock_obj *o = dl_lock_from(obj);

    if (Z_TYPE(o->on_lost) != IS_UNDEF) {
        *table = &o->on_lost;
        *n = 1;
    } else {
        *table = NULL;
        *n = 0;
    }
    return zend_std_get_properties(obj);
}

/* The handle, for a method that needs it; NULL with an exception thrown
 * when there is none: never obtained from a Client, or abandoned (the
 * handle is gone, and with it any right to release or extend the key). */
static distlock_lock *dl_this_lock(zval *this_zv)
{
    dl_lock_obj *o = dl_lock_from(Z_OBJ_P(this_zv));

    if (o->abandoned) {
        zval *first = zend_hash_index_find(Z_ARRVAL(o->a_keys), 0);

        dl_throw_abandoned(Z_STRVAL_P(first), Z_STRLEN_P(first));
        return NULL;
    }
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

void dl_lock_wrap_restored(zval *zv, distlock_lock *l)
{
    dl_lock_wrap(zv, l, 0);
    dl_lock_from(Z_OBJ_P(zv))->restored = true;
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
    DL_SAFE_POINT();
    if ((l = dl_this_lock(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    st = distlock_release(l);
    dl_lock_from(Z_OBJ_P(ZEND_THIS))->released = true;
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
    DL_SAFE_POINT();

    if (dl_this_lock(ZEND_THIS) == NULL) {
        RETURN_THROWS();
    }
    ttl_ms = o->ttl_ms;
    if (ttl_null && ttl_ms == 0) {   /* restored, never extended: no TTL to repeat */
        zend_argument_value_error(1, "must be given for a lock from Client::restoreLock() "
                                     "until an extend() gave it a TTL");
        RETURN_THROWS();
    }
    if (!ttl_null && !dl_ttl_from_seconds(1, ttl, &ttl_ms)) {
        RETURN_THROWS();
    }
    st = distlock_extend(o->l, ttl_ms);
    if (st == DISTLOCK_OK) {
        o->ttl_ms = ttl_ms;
        RETURN_DOUBLE((double)distlock_lock_validity_ms(o->l) / 1000.0);
    }
    /* ENOTOWNER: LockLostException; no usable answer: RenewalException
     * (the lease is not known lost, validity() tells how long it lasts). */
    dl_throw_status_in(st, DL_IN_RENEW, "extend", distlock_lock_key(o->l),
                       strlen(distlock_lock_key(o->l)));
    RETURN_THROWS();
}

/* The Lock as dl_this_lock() sees it, for the methods that only read: they
 * answer after abandon() too (no handle: o->l is NULL, o->abandoned set). */
static dl_lock_obj *dl_this_obj(zval *this_zv)
{
    dl_lock_obj *o = dl_lock_from(Z_OBJ_P(this_zv));

    if (!o->abandoned && dl_this_lock(this_zv) == NULL) {
        return NULL;
    }
    return o;
}

/* keys() and fences() of a handle, also kept by abandon(). */
static void dl_keys_of(const distlock_lock *l, zval *out)
{
    size_t i, n = distlock_lock_key_count(l);

    array_init_size(out, (uint32_t)n);
    for (i = 0; i < n; i++) {
        add_next_index_string(out, distlock_lock_key_at(l, i));
    }
}

static void dl_fences_of(const distlock_lock *l, zval *out)
{
    size_t i, n;

    /* Fenced or not is one flag for every key: the first key says it. */
    if (distlock_lock_fence_at(l, 0) < 0) {
        ZVAL_NULL(out);
        return;
    }
    n = distlock_lock_key_count(l);
    array_init_size(out, (uint32_t)n);
    for (i = 0; i < n; i++) {
        add_next_index_long(out, (zend_long)distlock_lock_fence_at(l, i));
    }
}

PHP_METHOD(Distlock_Lock, abandon)
{
    dl_lock_obj *o = dl_lock_from(Z_OBJ_P(ZEND_THIS));

    ZEND_PARSE_PARAMETERS_NONE();
    DL_SAFE_POINT();
    if (dl_this_lock(ZEND_THIS) == NULL) {   /* also a second abandon() */
        RETURN_THROWS();
    }
    dl_keys_of(o->l, &o->a_keys);
    ZVAL_STRING(&o->a_token, distlock_lock_token(o->l));
    dl_fences_of(o->l, &o->a_fences);
    /* An abandoned lock is never found lost (its renewal stops): its callback
     * can never be due, so it goes too (nor can a safe point whose callback
     * threw put this lock, now without a handle, back on the watch list). */
    dl_watch_remove(o);
    zval_ptr_dtor(&o->on_lost);
    ZVAL_UNDEF(&o->on_lost);
    distlock_lock_abandon(o->l);
    o->l = NULL;
    o->abandoned = true;
}

PHP_METHOD(Distlock_Lock, validity)
{
    dl_lock_obj *o;

    ZEND_PARSE_PARAMETERS_NONE();
    DL_SAFE_POINT();
    if ((o = dl_this_obj(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    RETURN_DOUBLE(o->abandoned ? 0.0 : (double)distlock_lock_validity_ms(o->l) / 1000.0);
}

PHP_METHOD(Distlock_Lock, isHeld)
{
    dl_lock_obj *o;

    ZEND_PARSE_PARAMETERS_NONE();
    DL_SAFE_POINT();
    if ((o = dl_this_obj(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    RETURN_BOOL(!o->abandoned && distlock_lock_validity_ms(o->l) > 0 && !distlock_lock_lost(o->l));
}

PHP_METHOD(Distlock_Lock, isLost)
{
    dl_lock_obj *o;

    ZEND_PARSE_PARAMETERS_NONE();
    DL_SAFE_POINT();
    if ((o = dl_this_obj(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    /* Abandoned is not lost: nobody found the key gone, this object let go. */
    RETURN_BOOL(!o->abandoned && distlock_lock_lost(o->l));
}

PHP_METHOD(Distlock_Lock, check)
{
    dl_lock_obj *o;
    zval *first;

    ZEND_PARSE_PARAMETERS_NONE();
    DL_SAFE_POINT();
    if ((o = dl_this_obj(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    if (o->abandoned) {
        first = zend_hash_index_find(Z_ARRVAL(o->a_keys), 0);
        dl_throw_lost(Z_STRVAL_P(first), Z_STRLEN_P(first), "was abandoned (Lock::abandon())");
        return;
    }
    const char *key = distlock_lock_key(o->l);
    if (o->released) {
        dl_throw_lost(key, strlen(key), "was released");
    } else if (distlock_lock_lost(o->l)) {
        dl_throw_lost(key, strlen(key), "was found lost (expired, deleted or taken over)");
    } else if (o->restored && o->ttl_ms == 0) {
        dl_throw_lost(key, strlen(key), "is not known held (Client::restoreLock() checks nothing "
                                        "on the servers; extend() it to know)");
    } else if (distlock_lock_validity_ms(o->l) <= 0) {
        dl_throw_lost(key, strlen(key), "has expired (its validity ran out)");
    }
}

PHP_METHOD(Distlock_Lock, onLost)
{
    dl_lock_obj *o = dl_lock_from(Z_OBJ_P(ZEND_THIS));
    zend_fcall_info fci = empty_fcall_info;
    zend_fcall_info_cache fcc = empty_fcall_info_cache;

    ZEND_PARSE_PARAMETERS_START(1, 1)
        Z_PARAM_FUNC_OR_NULL(fci, fcc)
    ZEND_PARSE_PARAMETERS_END();
    /* Abandoned: no handle to watch (dl_this_lock() throws). */
    if (dl_this_lock(ZEND_THIS) == NULL) {
        RETURN_THROWS();
    }
    zval_ptr_dtor(&o->on_lost);
    ZVAL_UNDEF(&o->on_lost);
    if (ZEND_FCI_INITIALIZED(fci)) {
        ZVAL_COPY(&o->on_lost, &fci.function_name);
        if (!o->lost_told) {
            dl_watch_add(o);
        }
    } else {
        dl_watch_remove(o);
    }
    /* A safe point too: a lock already lost hears of it now. */
    DL_SAFE_POINT();
}

PHP_METHOD(Distlock_Lock, key)
{
    dl_lock_obj *o;

    ZEND_PARSE_PARAMETERS_NONE();
    DL_SAFE_POINT();
    if ((o = dl_this_obj(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    if (o->abandoned) {
        RETURN_COPY(zend_hash_index_find(Z_ARRVAL(o->a_keys), 0));
    }
    RETURN_STRING(distlock_lock_key(o->l));
}

PHP_METHOD(Distlock_Lock, keys)
{
    dl_lock_obj *o;

    ZEND_PARSE_PARAMETERS_NONE();
    DL_SAFE_POINT();
    if ((o = dl_this_obj(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    if (o->abandoned) {
        RETURN_COPY(&o->a_keys);
    }
    dl_keys_of(o->l, return_value);
}

PHP_METHOD(Distlock_Lock, token)
{
    dl_lock_obj *o;

    ZEND_PARSE_PARAMETERS_NONE();
    DL_SAFE_POINT();
    if ((o = dl_this_obj(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    if (o->abandoned) {
        RETURN_COPY(&o->a_token);
    }
    RETURN_STRING(distlock_lock_token(o->l));
}

PHP_METHOD(Distlock_Lock, fence)
{
    dl_lock_obj *o;
    int64_t f;

    ZEND_PARSE_PARAMETERS_NONE();
    DL_SAFE_POINT();
    if ((o = dl_this_obj(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    if (o->abandoned) {
        if (Z_TYPE(o->a_fences) == IS_NULL) {
            RETURN_NULL();
        }
        RETURN_COPY(zend_hash_index_find(Z_ARRVAL(o->a_fences), 0));
    }
    f = distlock_lock_fence(o->l);
    if (f < 0) {
        RETURN_NULL();
    }
    RETURN_LONG((zend_long)f);
}

PHP_METHOD(Distlock_Lock, fences)
{
    dl_lock_obj *o;

    ZEND_PARSE_PARAMETERS_NONE();
    DL_SAFE_POINT();
    if ((o = dl_this_obj(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    if (o->abandoned) {
        RETURN_COPY(&o->a_fences);
    }
    dl_fences_of(o->l, return_value);
}

/* var_dump() / print_r(): what a developer wants to see; never the token
 * (debug output ends up in logs, and the token is what releases the lock). */
static HashTable *dl_lock_debug_info(zend_object *obj, int *is_temp)
{
    dl_lock_obj *o = dl_lock_from(obj);
    zval arr;

    *is_temp = 1;
    array_init(&arr);
    if (o->abandoned) {
        zval *first = zend_hash_index_find(Z_ARRVAL(o->a_keys), 0);

        add_assoc_str(&arr, "key", zend_string_copy(Z_STR_P(first)));
        add_assoc_bool(&arr, "held", false);
        add_assoc_bool(&arr, "abandoned", true);
    } else if (o->l != NULL) {
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
        /* A lock on several keys shows them all (key and fence: the first). */
        if (distlock_lock_key_count(o->l) > 1) {
            zval keys;

            array_init(&keys);
            for (size_t i = 0; i < distlock_lock_key_count(o->l); i++) {
                add_next_index_string(&keys, distlock_lock_key_at(o->l, i));
            }
            add_assoc_zval(&arr, "keys", &keys);
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
    dl_lock_handlers.get_gc = dl_lock_get_gc;
}
