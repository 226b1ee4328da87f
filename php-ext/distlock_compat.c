/*
 * distlock_compat.c -- distributedLock() / distributedUnlock(): drop-ins for
 * the ERP userland pair (seeds/000, "Redis 分布式锁在 ERP 应用"), same
 * defaults, results and exception, on the C core's token-carrying calls,
 * with the client of the INI configuration (distlock_client_cache.c).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <string.h>

#include "php.h"

#include "php_distlock_int.h"

/* A caller's token ($random): at most DISTLOCK_TOKEN_MAX bytes, no NUL. */
static bool dl_check_token(uint32_t argn, const zend_string *tok)
{
    if (ZSTR_LEN(tok) > DISTLOCK_TOKEN_MAX) {
        zend_argument_value_error(argn, "must be at most %d bytes long", DISTLOCK_TOKEN_MAX);
        return false;
    }
    if (memchr(ZSTR_VAL(tok), '\0', ZSTR_LEN(tok)) != NULL) {
        zend_argument_value_error(argn, "must not contain any null bytes");
        return false;
    }
    return true;
}

/* PHP's truthiness of a string: '' and '0' are false. */
static bool dl_str_falsy(const zend_string *s)
{
    return ZSTR_LEN(s) == 0 || (ZSTR_LEN(s) == 1 && ZSTR_VAL(s)[0] == '0');
}

/* distributedLock(string $key = '', int|float $ttl = 60, string|int|null $random = null,
 *                 string $tipMsg = ''): string|int
 * A float $ttl is taken as it is (no "implicit conversion loses precision"
 * deprecation, which an int parameter gives), rounded up by the one TTL rule. */
PHP_FUNCTION(distributedLock)
{
    zend_string *key = ZSTR_EMPTY_ALLOC();
    zval ttl_default, *ttl = NULL;
    long ttl_ms;
    zend_string *rnd_str = NULL;
    zend_long rnd_long = 0;
    bool rnd_null = true;
    zend_string *tip = NULL;
    char tok[DISTLOCK_TOKEN_MAX + 1];
    const char *token;
    distlock_client *c;
    int st;

    ZEND_PARSE_PARAMETERS_START(0, 4)
        Z_PARAM_OPTIONAL
        Z_PARAM_STR(key)
        Z_PARAM_NUMBER(ttl)
        Z_PARAM_STR_OR_LONG_OR_NULL(rnd_str, rnd_long, rnd_null)
        Z_PARAM_STR(tip)
    ZEND_PARSE_PARAMETERS_END();
    DL_SAFE_POINT();

    if (!dl_check_key(1, key)) {
        RETURN_THROWS();
    }
    if (ttl == NULL) {
        ZVAL_LONG(&ttl_default, 60);
        ttl = &ttl_default;
    }
    /* Seconds, int as the seed takes them or float, through the one TTL rule. */
    if (!dl_ttl_from_seconds(2, zval_get_double(ttl), &ttl_ms)) {
        RETURN_THROWS();
    }

    /* The seed: `$random = $random ? $random : mt_rand(0, 9999999);` -- any
     * falsy value (null, 0, '', '0') means "make one"; ours is a CSPRNG token. */
    if (rnd_str != NULL && !dl_str_falsy(rnd_str)) {
        if (!dl_check_token(3, rnd_str)) {
            RETURN_THROWS();
        }
        token = ZSTR_VAL(rnd_str);
    } else if (rnd_str == NULL && !rnd_null && rnd_long != 0) {
        /* The bytes phpredis sends for an int: its decimal form. */
        snprintf(tok, sizeof(tok), ZEND_LONG_FMT, rnd_long);
        token = tok;
    } else {
        rnd_str = NULL;
        rnd_long = 0;
        st = distlock_token_generate(tok, sizeof(tok));
        if (st != DISTLOCK_OK) {
            dl_throw_status(st, "token generation", NULL, 0);
            RETURN_THROWS();
        }
        token = tok;
    }

    if ((c = dl_ini_client()) == NULL) {
        RETURN_THROWS();
    }
    /* STRICT: plain SET NX like the seed, so a second call with the same
     * explicit $random throws as it does there. (A connection that broke
     * under the call is the core's to handle: it resends once on a fresh
     * one, and a strict acquire resent that way takes its own token over.) */
    st = distlock_acquire_token(c, ZSTR_VAL(key), ttl_ms, token, DISTLOCK_STRICT, NULL);
    if (st == DISTLOCK_NOTACQUIRED) {
        zend_string *msg;

        if (tip != NULL && ZSTR_LEN(tip) > 0) {
            msg = zend_string_copy(tip);
        } else {
            /* $ttl as the seed's `'...' . $ttl . '...'` writes it (60, 1.5). */
            zend_string *t = zval_get_string(ttl);

            msg = strpprintf(0, "请求过于频繁,相同业务单号%s秒内仅允许请求1次!", ZSTR_VAL(t));
            zend_string_release(t);
        }
        dl_throw_held(msg);
        zend_string_release(msg);
        RETURN_THROWS();
    }
    if (st != DISTLOCK_OK) {
        dl_throw_status_in(st, DL_IN_ACQUIRE, "distributedLock", ZSTR_VAL(key), ZSTR_LEN(key));
        RETURN_THROWS();
    }

    /* The value used, as given (string or int), else the generated token. */
    if (rnd_str != NULL) {
        RETURN_STR_COPY(rnd_str);
    }
    if (rnd_long != 0) {
        RETURN_LONG(rnd_long);
    }
    RETURN_STRING(tok);
}

/* distributedUnlock(string $key = '', string|int $random = 0): true|int */
PHP_FUNCTION(distributedUnlock)
{
    zend_string *key = ZSTR_EMPTY_ALLOC();
    zend_string *rnd_str = NULL;
    zend_long rnd_long = 0;
    char tok[32];
    const char *token;
    distlock_client *c;
    int st;

    ZEND_PARSE_PARAMETERS_START(0, 2)
        Z_PARAM_OPTIONAL
        Z_PARAM_STR(key)
        Z_PARAM_STR_OR_LONG(rnd_str, rnd_long)
    ZEND_PARSE_PARAMETERS_END();
    DL_SAFE_POINT();

    if (!dl_check_key(1, key)) {
        RETURN_THROWS();
    }
    if (rnd_str != NULL) {
        if (!dl_check_token(2, rnd_str)) {
            RETURN_THROWS();
        }
        /* No lock taken through distributedLock() ever holds the empty
         * token (a falsy $random is replaced), so there is nothing to
         * release: the seed's script would not match either. */
        if (ZSTR_LEN(rnd_str) == 0) {
            RETURN_LONG(1);
        }
        token = ZSTR_VAL(rnd_str);
    } else {
        snprintf(tok, sizeof(tok), ZEND_LONG_FMT, rnd_long);
        token = tok;
    }

    if ((c = dl_ini_client()) == NULL) {
        RETURN_THROWS();
    }
    st = distlock_release_token(c, ZSTR_VAL(key), token);
    if (st == DISTLOCK_OK) {
        RETURN_TRUE;
    }
    if (st == DISTLOCK_ENOTOWNER || st == DISTLOCK_NOTACQUIRED) {
        RETURN_LONG(1); /* the seed: `$ret = 1` whenever the script did not delete */
    }
    /* Unreachable server: the seed's phpredis call throws RedisException; we
     * throw Distlock\ConnectionException, which `catch (Exception $e)` catches too. */
    dl_throw_status(st, "distributedUnlock", ZSTR_VAL(key), ZSTR_LEN(key));
    RETURN_THROWS();
}
