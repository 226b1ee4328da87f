/*
 * distlock_errors.c -- what PHP code catches when a call of the core fails.
 *
 * One table maps each status of core/include/distlock.h to an exception
 * class, a code and the start of the message. The exception classes
 * themselves are declared in the stub (distlock.stub.php) and registered by
 * MINIT (distlock.c).
 *
 * Codes: 500002 is the ERP userland code's "lock held" code, thrown with
 * class \Exception exactly as the seed does, and the code of every "held by
 * another owner" (NOTACQUIRED); the core's errors are 500010 - status
 * (EINVAL -1 -> 500011 ... ESYS -10 -> 500020), so no code collides with
 * 500002.
 *
 * The same table is written out for every front end in docs/errors.md ("Statuses
 * in each front end"); Python's (python/distlock/_errors.py) and the CLI's
 * (cli/src/common.c) agree with it.
 *
 * Three failures a lock's owner must tell apart get three classes:
 * acquiring failed (AcquireException: a ConnectionException thrown by an
 * acquire; "held" stays LockTimeoutException / null / 500002), renewing
 * failed (RenewalException: a ConnectionException thrown by extend(); the
 * lease is not known lost) and the lease is gone (LockLostException). The
 * first two subclass ConnectionException, so code that catches it as before
 * still does; the call's context (dl_context) picks the subclass.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#include "php.h"
#include "zend_exceptions.h"

#include "php_distlock_int.h"

typedef struct {
    int status;              /* DISTLOCK_* of core/include/distlock.h */
    zend_class_entry **ce;   /* Distlock\Client / Lock; NULL: ValueError (a bad argument:
                                a bug to fix, not a busy lock) */
    zend_class_entry **compat_ce; /* distributedLock() / distributedUnlock() */
    zend_long code;          /* getCode() (a ValueError's stays 0) */
    const char *prefix;      /* the message starts with it */
} dl_status_row;

/* DISTLOCK_OK throws nothing. Where a status is an answer rather than an
 * error, the caller says so before getting here: NOTACQUIRED is tryLock()'s
 * null, distributedUnlock()'s 1 (as is ENOTOWNER, and Lock::release()'s
 * false). NOTACQUIRED, and only it, means "held by another owner": the
 * seed's \Exception 500002 from distributedLock() (dl_throw_held), a
 * LockTimeoutException 500002 from a lock() that waited in vain
 * (dl_throw_wait_timeout). ETIMEDOUT is never "held": a quorum granted only
 * after the ttl was used up, and nothing is held. A configuration the core
 * refused is ConfigurationException with the status's code
 * (dl_throw_config). */
static const dl_status_row dl_status_map[] = {
    /* NOTACQUIRED: no prefix, the message is the caller's ($tipMsg, the seed's text) */
    { DISTLOCK_NOTACQUIRED, &dl_ce_timeout,   &zend_ce_exception, DISTLOCK_PHP_CODE_HELD,     "" },
    { DISTLOCK_EINVAL,      NULL,             NULL,               DISTLOCK_PHP_CODE_INVALID,  "distlock: " },
    { DISTLOCK_ENOMEM,      &dl_ce_exception, &dl_ce_exception,   DISTLOCK_PHP_CODE_NOMEM,    "distlock: " },
    { DISTLOCK_ECONN,       &dl_ce_conn,      &dl_ce_conn,        DISTLOCK_PHP_CODE_CONN,     "distlock: " },
    { DISTLOCK_ETIMEDOUT,   &dl_ce_conn,      &dl_ce_conn,        DISTLOCK_PHP_CODE_TIMEDOUT, "distlock: " },
    { DISTLOCK_ENOQUORUM,   &dl_ce_conn,      &dl_ce_conn,        DISTLOCK_PHP_CODE_NOQUORUM, "distlock: " },
    { DISTLOCK_ENOTOWNER,   &dl_ce_lost,      &dl_ce_lost,        DISTLOCK_PHP_CODE_NOTOWNER, "distlock: " },
    { DISTLOCK_EPROTO,      &dl_ce_conn,      &dl_ce_conn,        DISTLOCK_PHP_CODE_PROTO,    "distlock: " },
    { DISTLOCK_ECLOSED,     &dl_ce_exception, &dl_ce_exception,   DISTLOCK_PHP_CODE_CLOSED,   "distlock: " },
    { DISTLOCK_ECANCELED,   &dl_ce_exception, &dl_ce_exception,   DISTLOCK_PHP_CODE_CANCELED, "distlock: " },
    { DISTLOCK_ESYS,        &dl_ce_exception, &dl_ce_exception,   DISTLOCK_PHP_CODE_SYSTEM,   "distlock: " },
};

/* The row of a status; a status this extension does not know yet (a newer
 * core) is a Distlock\Exception with code 500010 - status. */
static dl_status_row dl_row(int st)
{
    size_t i;
    dl_status_row other = { st, &dl_ce_exception, &dl_ce_exception, DISTLOCK_PHP_CODE_BASE - st,
                            "distlock: " };

    for (i = 0; i < sizeof(dl_status_map) / sizeof(dl_status_map[0]); i++) {
        if (dl_status_map[i].status == st) {
            return dl_status_map[i];
        }
    }
    return other;
}

/* Throw for a core error. The core's per-thread detail names the server
 * ("redis://127.0.0.1:6379: Connection refused"), passwords masked by the
 * core (docs/errors.md); the status text says what kind of failure it was.
 * EINVAL left after our own checks is a bad argument: ValueError, like any
 * PHP function's. */
void dl_throw_status(int st, const char *what, const char *key, size_t key_len)
{
    dl_throw_status_in(st, DL_IN_OTHER, what, key, key_len);
}

void dl_throw_status_in(int st, dl_context in, const char *what, const char *key, size_t key_len)
{
    dl_status_row row = dl_row(st);

    /* "No usable answer from the servers" while acquiring or renewing. */
    if (row.ce == &dl_ce_conn && in == DL_IN_ACQUIRE) {
        row.ce = &dl_ce_acquire;
    } else if (row.ce == &dl_ce_conn && in == DL_IN_RENEW) {
        row.ce = &dl_ce_renewal;
    }
    const char *kind = distlock_strerror(st);
    const char *detail = *distlock_last_error() ? distlock_last_error() : kind;
    int shown = key_len > 64 ? 64 : (int)key_len;

    if (row.ce == NULL) {
        zend_value_error("%s%s: %s", row.prefix, what, detail);
    } else if (key != NULL) {
        zend_throw_exception_ex(*row.ce, row.code, "%s%s \"%.*s%s\" failed: %s (%s)", row.prefix,
                                what, shown, key, key_len > (size_t)shown ? "..." : "",
                                detail, kind);
    } else {
        zend_throw_exception_ex(*row.ce, row.code, "%s%s failed: %s (%s)", row.prefix, what,
                                detail, kind);
    }
}

/* A Distlock\ConfigurationException for a configuration the core refused:
 * its detail quotes the server list as the core masks it, never an option's
 * value. */
void dl_throw_config(int st, const char *what)
{
    dl_status_row row = dl_row(st);
    const char *detail = *distlock_last_error() ? distlock_last_error() : distlock_strerror(st);

    zend_throw_exception_ex(dl_ce_config, row.code, "%s%s: %s", row.prefix, what, detail);
}

/* distributedLock(): \Exception($msg, 500002), binary-safe message, as the
 * seed throws it. */
void dl_throw_held(zend_string *msg)
{
    dl_status_row row = dl_row(DISTLOCK_NOTACQUIRED);
    zval ex;

    object_init_ex(&ex, *row.compat_ce);
    zend_update_property_str(*row.compat_ce, Z_OBJ(ex), "message", sizeof("message") - 1, msg);
    zend_update_property_long(*row.compat_ce, Z_OBJ(ex), "code", sizeof("code") - 1, row.code);
    zend_throw_exception_object(&ex);
}

/* A waiting acquire (Client::lock(), semaphore(), lockMany()) did not get
 * its lease within its timeout: other owners held it (NOTACQUIRED) all
 * along. `doing` is what it could not do ("lock", "get a permit of"), `key`
 * the key (the first of several: `more` counts the others), `why_held` who
 * holds it; for several keys the core's detail instead, which names the key
 * found held. (A single key's NOTACQUIRED needs no detail, and the thread's
 * detail may then be a node's failure within the same round.) */
void dl_throw_wait_timeout(const char *doing, const char *key, size_t key_len, size_t more,
                           double timeout_s, const char *why_held)
{
    dl_status_row row = dl_row(DISTLOCK_NOTACQUIRED);
    const char *detail = more > 0 ? distlock_last_error() : "";
    int shown = key_len > 64 ? 64 : (int)key_len;
    char others[64] = "";

    if (more > 0) {
        snprintf(others, sizeof(others), " and %zu more key%s", more, more > 1 ? "s" : "");
    }
    zend_throw_exception_ex(*row.ce, row.code,
                            "%scould not %s \"%.*s%s\"%s within %.3F seconds: %s",
                            "distlock: ", doing, shown, key, key_len > (size_t)shown ? "..." : "",
                            others, timeout_s, *detail ? detail : why_held);
}

/* Lock::check(): the lease is gone (why: "was found lost", "expired"...). */
void dl_throw_lost(const char *key, size_t key_len, const char *why)
{
    dl_status_row row = dl_row(DISTLOCK_ENOTOWNER);
    int shown = key_len > 64 ? 64 : (int)key_len;

    zend_throw_exception_ex(*row.ce, row.code, "%slock \"%.*s%s\" %s", row.prefix, shown, key,
                            key_len > (size_t)shown ? "..." : "", why);
}

/* A method that needs the handle, called after Lock::abandon(): the handle
 * is gone, so is the right to release or extend (code CLOSED: used after
 * the object let go of it, as after a close). */
void dl_throw_abandoned(const char *key, size_t key_len)
{
    dl_status_row row = dl_row(DISTLOCK_ECLOSED);
    int shown = key_len > 64 ? 64 : (int)key_len;

    zend_throw_exception_ex(*row.ce, row.code,
                            "%slock \"%.*s%s\" was abandoned (Lock::abandon()): it can no longer "
                            "be released or extended; the key keeps its token until its TTL",
                            row.prefix, shown, key, key_len > (size_t)shown ? "..." : "");
}
