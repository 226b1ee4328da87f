/*
 * php_distlock_int.h -- what the files of the distlock extension share
 * (private: not installed, not for other extensions).
 *
 * The extension is split by job, as php-src ext/random is:
 *   distlock.c               the module: INI, globals, MINIT/MINFO, argument checks
 *   distlock_client_cache.c  the persistent client per configuration
 *   distlock_errors.c        the exception classes' one status -> exception mapping
 *   distlock_compat.c        distributedLock() / distributedUnlock()
 *   distlock_client.c        Distlock\Client
 *   distlock_lock.c          Distlock\Lock, its onLost callbacks and safe points
 */
#ifndef PHP_DISTLOCK_INT_H
#define PHP_DISTLOCK_INT_H

#include "php.h"

#include <distlock.h>

#include "php_distlock.h"

ZEND_EXTERN_MODULE_GLOBALS(distlock)

/* What the files share stays inside distlock.so (these were file statics
 * before the split): not exported, so no other module can bind to them. */
#if defined(__GNUC__) && !defined(_WIN32)
#pragma GCC visibility push(hidden)
#endif

/* The classes, registered from the stub by MINIT (distlock.c). */
extern zend_class_entry *dl_ce_exception;  /* Distlock\Exception */
extern zend_class_entry *dl_ce_config;     /* Distlock\ConfigurationException */
extern zend_class_entry *dl_ce_conn;       /* Distlock\ConnectionException */
extern zend_class_entry *dl_ce_acquire;    /* Distlock\AcquireException */
extern zend_class_entry *dl_ce_renewal;    /* Distlock\RenewalException */
extern zend_class_entry *dl_ce_lost;       /* Distlock\LockLostException */
extern zend_class_entry *dl_ce_timeout;    /* Distlock\LockTimeoutException */
extern zend_class_entry *dl_ce_client;     /* Distlock\Client */
extern zend_class_entry *dl_ce_lock;       /* Distlock\Lock */

/* ------------------------------------------- distlock.c: argument checks */

/* A lock key: 1..DISTLOCK_KEY_MAX bytes, no NUL. false + ValueError otherwise. */
bool dl_check_key(uint32_t argn, const zend_string *key);
/* Seconds (float) to milliseconds in [min_ms, max_ms]; false + ValueError otherwise. */
bool dl_seconds_to_ms(uint32_t argn, double s, long min_ms, long max_ms, long *out);
/* Every TTL in seconds goes through this: the library's one TTL rule. */
bool dl_ttl_from_seconds(uint32_t argn, double s, long *out);

/* ------------------------------------- distlock_client_cache.c: clients */

/* One configuration: the INI values, or a Client's constructor arguments.
 * Options by their row in the library's option table (distlock_option_at):
 * the extension keeps no list, range or default of its own; the core checks
 * each value when the client is made. */
typedef enum { DL_OPT_UNSET = 0, DL_OPT_LONG, DL_OPT_TEXT } dl_opt_kind;
typedef struct {
    const char *servers;
    unsigned char kind[DL_OPTIONS_MAX];  /* dl_opt_kind */
    zend_long lv[DL_OPTIONS_MAX];        /* DL_OPT_LONG: an int (a bool is 0/1) */
    const char *sv[DL_OPTIONS_MAX];      /* DL_OPT_TEXT: as given (the core parses an
                                          * integer option's text) */
} dl_config;

void dl_config_from_ini(dl_config *cfg);
/* The worker's persistent client for this configuration (created on first
 * use); NULL with a Distlock\ConfigurationException thrown if it is invalid. */
distlock_client *dl_client_for(const dl_config *cfg);
/* The same for the INI configuration (the compat functions). */
distlock_client *dl_ini_client(void);
void dl_client_cache_minit(int module_number);
void dl_client_cache_gshutdown(zend_distlock_globals *g);

/* -------------------------------------------- distlock_errors.c: throwing */

/* Throw for a core error status, as the status table maps it. `what` names
 * the call ("distributedLock", "release"...), `key` (may be NULL) the lock. */
void dl_throw_status(int st, const char *what, const char *key, size_t key_len);
/* The same, for a call that acquires or renews: a ConnectionException
 * becomes an AcquireException or a RenewalException (its subclasses). */
typedef enum { DL_IN_OTHER = 0, DL_IN_ACQUIRE, DL_IN_RENEW } dl_context;
void dl_throw_status_in(int st, dl_context in, const char *what, const char *key, size_t key_len);
/* Distlock\LockLostException for Lock::check(): "lock "<key>" <why>". */
void dl_throw_lost(const char *key, size_t key_len, const char *why);
/* Distlock\Exception (code CLOSED) for Lock::release() / extend() / onLost()
 * after Lock::abandon(): "lock "<key>" was abandoned ...". */
void dl_throw_abandoned(const char *key, size_t key_len);
/* Distlock\ConfigurationException for a configuration the core refused
 * (the core's message, masked by the core). */
void dl_throw_config(int st, const char *what);
/* The compat \Exception($msg, 500002): the key is held by another owner. */
void dl_throw_held(zend_string *msg);
/* Distlock\LockTimeoutException: a waiting acquire gave up after timeout_s
 * ("could not <doing> "<key>" [and <more> more keys] within ...: <why_held>",
 * for several keys the core's detail, naming the key held, after the colon). */
void dl_throw_wait_timeout(const char *doing, const char *key, size_t key_len, size_t more,
                           double timeout_s, const char *why_held);

/* --------------------------------- distlock_client.c / distlock_lock.c */

/* Set up a class registered by the module (distlock.c). */
void dl_client_minit(zend_class_entry *ce);
void dl_lock_minit(zend_class_entry *ce);
/* Make `zv` a new Distlock\Lock owning `l` (acquired with ttl_ms). */
void dl_lock_wrap(zval *zv, distlock_lock *l, long ttl_ms);
/* The same for a handle of distlock_lock_restore(): no acquire TTL (extend()
 * needs one), not known held until an extend succeeds. */
void dl_lock_wrap_restored(zval *zv, distlock_lock *l);

/* A safe point (distlock_lock.c): call the onLost callbacks of the locks
 * found lost since the last one, in this thread. Every function and method
 * of the extension starts with it (DL_SAFE_POINT), after its arguments are
 * parsed. Returns false when a callback threw: the call then returns at
 * once with that exception. */
bool dl_lost_safe_point(void);
#define DL_SAFE_POINT() do { if (!dl_lost_safe_point()) { RETURN_THROWS(); } } while (0)
/* Request start: no lock is watched yet. */
void dl_lost_rinit(void);

#if defined(__GNUC__) && !defined(_WIN32)
#pragma GCC visibility pop
#endif

#endif /* PHP_DISTLOCK_INT_H */
