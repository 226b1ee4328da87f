/* php_distlock.h -- the distlock PHP extension (PHP 8.2+, hand-written against the Zend API). */
#ifndef PHP_DISTLOCK_H
#define PHP_DISTLOCK_H

extern zend_module_entry distlock_module_entry;
#define phpext_distlock_ptr &distlock_module_entry

#define PHP_DISTLOCK_VERSION "0.1.0"

/* Exception codes. 500002 is the ERP userland code's "lock held" code, thrown
 * with class \Exception exactly as the seed does, and the code of every
 * "held by another owner" (NOTACQUIRED) the extension throws. The errors of
 * the C core map to 500010 - status (EINVAL -1 -> 500011 ... ECLOSED -8 ->
 * 500018, ECANCELED -9 -> 500019, ESYS -10 -> 500020), so no code collides
 * with 500002. Which status throws which class with which code: the one
 * table in distlock_errors.c. */
#define DISTLOCK_PHP_CODE_HELD     500002
#define DISTLOCK_PHP_CODE_BASE     500010
#define DISTLOCK_PHP_CODE_INVALID  (DISTLOCK_PHP_CODE_BASE + 1)
#define DISTLOCK_PHP_CODE_NOMEM    (DISTLOCK_PHP_CODE_BASE + 2)
#define DISTLOCK_PHP_CODE_CONN     (DISTLOCK_PHP_CODE_BASE + 3)
#define DISTLOCK_PHP_CODE_TIMEDOUT (DISTLOCK_PHP_CODE_BASE + 4)
#define DISTLOCK_PHP_CODE_NOQUORUM (DISTLOCK_PHP_CODE_BASE + 5)
#define DISTLOCK_PHP_CODE_NOTOWNER (DISTLOCK_PHP_CODE_BASE + 6)
#define DISTLOCK_PHP_CODE_PROTO    (DISTLOCK_PHP_CODE_BASE + 7)
#define DISTLOCK_PHP_CODE_CLOSED   (DISTLOCK_PHP_CODE_BASE + 8)
#define DISTLOCK_PHP_CODE_CANCELED (DISTLOCK_PHP_CODE_BASE + 9)
#define DISTLOCK_PHP_CODE_SYSTEM   (DISTLOCK_PHP_CODE_BASE + 10)

/* Room for the rows of the library's option table (checked at MINIT). */
#define DL_OPTIONS_MAX 48

ZEND_BEGIN_MODULE_GLOBALS(distlock)
    char *servers;               /* distlock.servers */
    /* distlock.<name> of every row of the library's option table
     * (distlock_option_at(i)): the INI text, NULL when empty (the library's
     * default) */
    char *opt_ini[DL_OPTIONS_MAX];
    /* The client of the last configuration used (its persistent-list key,
     * pemalloc'd), so that calls with an unchanged configuration skip the
     * persistent-list lookup. */
    struct {
        char *key;
        size_t key_len;
        void *client;                        /* distlock_client *, owned by the list */
    } last;
    /* Locks with an onLost callback not yet called (distlock_lock.c): a
     * list through the Lock objects, emptied as they are freed. */
    void *lost_watch;
    bool in_safe_point;          /* onLost callbacks are running */
ZEND_END_MODULE_GLOBALS(distlock)

#define DISTLOCK_G(v) ZEND_MODULE_GLOBALS_ACCESSOR(distlock, v)

#if defined(ZTS) && defined(COMPILE_DL_DISTLOCK)
ZEND_TSRMLS_CACHE_EXTERN()
#endif

#endif /* PHP_DISTLOCK_H */
