/*
 * distlock.c -- PHP extension over libdistlock.
 *
 *  - distributedLock() / distributedUnlock(): drop-ins for the ERP userland
 *    pair (seeds/000, "Redis 分布式锁在 ERP 应用"), same defaults, results and
 *    exception, on the C core's token-carrying calls.
 *  - Distlock\Client / Distlock\Lock: the OO API for new code.
 *
 * One distlock_client per distinct configuration lives in EG(persistent_list)
 * for the life of the worker process (pemalloc'd by the core, freed at
 * MSHUTDOWN). The core reconnects lazily after failures and, after fork(),
 * opens its own sockets in the child (pid check), so PHP-FPM / php-cgi
 * children that inherit a client from their master never share its sockets:
 * nothing here needs fork handling of its own.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "php.h"
#include "php_ini.h"
#include "php_main.h"
#include "SAPI.h"
#include "ext/standard/info.h"
#include "ext/spl/spl_exceptions.h"
#include "zend_attributes.h"
#include "zend_exceptions.h"
#include "zend_smart_str.h"

#include <distlock.h>

#include "php_distlock.h"
#include "distlock_arginfo.h"
#include "distlock_mask.h"

ZEND_DECLARE_MODULE_GLOBALS(distlock)

static int le_distlock_pclient;

static zend_class_entry *dl_ce_exception;
static zend_class_entry *dl_ce_config;
static zend_class_entry *dl_ce_conn;
static zend_class_entry *dl_ce_lost;
static zend_class_entry *dl_ce_timeout;
static zend_class_entry *dl_ce_client;
static zend_class_entry *dl_ce_lock;

static zend_object_handlers dl_client_handlers;
static zend_object_handlers dl_lock_handlers;

/* Longest TTL in whole seconds the core accepts (DISTLOCK_TTL_MAX is in ms). */
#define DL_TTL_MAX_S (DISTLOCK_TTL_MAX / 1000)

/* Flags Client::tryLock()/lock() accept. */
#define DL_OO_FLAGS (DISTLOCK_FENCING | DISTLOCK_AUTO_RENEW)

/* ------------------------------------------------------------------ INI */

/* phpinfo() / php --ri: distlock.servers with its passwords masked,
 * distlock.password as *** (ini_get() still gives the values). */
static void dl_ini_display(zend_ini_entry *ini_entry, int type, bool servers)
{
    zend_string *value = ini_entry->value, *shown;

    if (type == ZEND_INI_DISPLAY_ORIG && ini_entry->modified) {
        value = ini_entry->orig_value;
    }
    if (value == NULL || ZSTR_LEN(value) == 0) {
        PUTS(sapi_module.phpinfo_as_text ? "no value" : "<i>no value</i>");
        return;
    }
    shown = servers ? dl_mask_servers(ZSTR_VAL(value), NULL) : zend_string_init("***", 3, 0);
    if (sapi_module.phpinfo_as_text) {
        PHPWRITE(ZSTR_VAL(shown), ZSTR_LEN(shown));
    } else {
        php_html_puts(ZSTR_VAL(shown), ZSTR_LEN(shown));
    }
    zend_string_release(shown);
}

static ZEND_INI_DISP(dl_display_servers)
{
    dl_ini_display(ini_entry, type, true);
}

static ZEND_INI_DISP(dl_display_password)
{
    dl_ini_display(ini_entry, type, false);
}

PHP_INI_BEGIN()
    STD_PHP_INI_ENTRY_EX("distlock.servers", "redis://127.0.0.1:6379", PHP_INI_ALL, OnUpdateString,
                         servers, zend_distlock_globals, distlock_globals, dl_display_servers)
    STD_PHP_INI_ENTRY("distlock.connect_timeout_ms", "1000", PHP_INI_ALL, OnUpdateLong,
                      connect_timeout_ms, zend_distlock_globals, distlock_globals)
    STD_PHP_INI_ENTRY("distlock.command_timeout_ms", "500", PHP_INI_ALL, OnUpdateLong,
                      command_timeout_ms, zend_distlock_globals, distlock_globals)
    STD_PHP_INI_ENTRY("distlock.username", "", PHP_INI_ALL, OnUpdateString,
                      username, zend_distlock_globals, distlock_globals)
    STD_PHP_INI_ENTRY_EX("distlock.password", "", PHP_INI_ALL, OnUpdateString,
                         password, zend_distlock_globals, distlock_globals, dl_display_password)
PHP_INI_END()

static PHP_GINIT_FUNCTION(distlock)
{
#if defined(COMPILE_DL_DISTLOCK) && defined(ZTS)
    ZEND_TSRMLS_CACHE_UPDATE();
#endif
    memset(distlock_globals, 0, sizeof(*distlock_globals));
}

static PHP_GSHUTDOWN_FUNCTION(distlock)
{
    if (distlock_globals->last.servers) pefree(distlock_globals->last.servers, 1);
    if (distlock_globals->last.username) pefree(distlock_globals->last.username, 1);
    if (distlock_globals->last.password) pefree(distlock_globals->last.password, 1);
    memset(&distlock_globals->last, 0, sizeof(distlock_globals->last));
}

/* ----------------------------------------------------------- exceptions */

/* Map a core error status to the class PHP code should catch. */
static zend_class_entry *dl_class_for(int st)
{
    switch (st) {
    case DISTLOCK_ECONN:
    case DISTLOCK_ETIMEDOUT:
    case DISTLOCK_ENOQUORUM:
    case DISTLOCK_EPROTO:
        return dl_ce_conn;
    case DISTLOCK_ENOTOWNER:
        return dl_ce_lost;
    default:
        return dl_ce_exception;
    }
}

/* Throw for a core error. The core's per-thread detail names the server
 * ("redis://127.0.0.1:6379: Connection refused"), passwords masked
 * (distlock_mask.c); the status text says what kind of failure it was.
 * EINVAL left after our own checks is a bad argument: ValueError, like any
 * PHP function's. */
static void dl_throw_status(int st, const char *what, const char *key, size_t key_len)
{
    const char *kind = distlock_strerror(st);
    zend_string *detail = dl_mask_text(*distlock_last_error() ? distlock_last_error() : kind, NULL);
    int shown = key_len > 64 ? 64 : (int)key_len;

    if (st == DISTLOCK_EINVAL) {
        zend_value_error("distlock: %s: %s", what, ZSTR_VAL(detail));
    } else if (key != NULL) {
        zend_throw_exception_ex(dl_class_for(st), DISTLOCK_PHP_CODE_BASE - st,
                                "distlock: %s \"%.*s%s\" failed: %s (%s)", what, shown, key,
                                key_len > (size_t)shown ? "..." : "", ZSTR_VAL(detail), kind);
    } else {
        zend_throw_exception_ex(dl_class_for(st), DISTLOCK_PHP_CODE_BASE - st,
                                "distlock: %s failed: %s (%s)", what, ZSTR_VAL(detail), kind);
    }
    zend_string_release(detail);
}

/* A Distlock\ConfigurationException for a configuration the core refused:
 * its detail may quote the server list or an option as given, so besides
 * the URI patterns every password of the configuration is masked. */
static void dl_throw_config(int st, const char *what, const char *servers, const char *password)
{
    dl_secrets secrets = {0};
    zend_string *detail;

    dl_secrets_add_servers(&secrets, servers);
    dl_secrets_add(&secrets, password, strlen(password));
    detail = dl_mask_text(*distlock_last_error() ? distlock_last_error() : distlock_strerror(st), &secrets);
    zend_throw_exception_ex(dl_ce_config, DISTLOCK_PHP_CODE_BASE - st, "distlock: %s: %s", what,
                            ZSTR_VAL(detail));
    zend_string_release(detail);
    dl_secrets_free(&secrets);
}

/* \Exception($msg, 500002), binary-safe message, as the seed throws it. */
static void dl_throw_held(zend_string *msg)
{
    zval ex;

    object_init_ex(&ex, zend_ce_exception);
    zend_update_property_str(zend_ce_exception, Z_OBJ(ex), "message", sizeof("message") - 1, msg);
    zend_update_property_long(zend_ce_exception, Z_OBJ(ex), "code", sizeof("code") - 1,
                              DISTLOCK_PHP_CODE_HELD);
    zend_throw_exception_object(&ex);
}

/* ------------------------------------------------------- argument checks */

/* A lock key: 1..DISTLOCK_KEY_MAX bytes, no NUL (the C API takes C strings). */
static bool dl_check_key(uint32_t argn, const zend_string *key)
{
    if (ZSTR_LEN(key) == 0) {
        zend_argument_value_error(argn, "must not be empty");
        return false;
    }
    if (ZSTR_LEN(key) > DISTLOCK_KEY_MAX) {
        zend_argument_value_error(argn, "must be at most %d bytes long", DISTLOCK_KEY_MAX);
        return false;
    }
    if (memchr(ZSTR_VAL(key), '\0', ZSTR_LEN(key)) != NULL) {
        zend_argument_value_error(argn, "must not contain any null bytes");
        return false;
    }
    return true;
}

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

/* Seconds (float) to milliseconds in [min_ms, max_ms]; false + ValueError otherwise. */
static bool dl_seconds_to_ms(uint32_t argn, double s, long min_ms, long max_ms, long *out)
{
    double ms = s * 1000.0;

    if (!zend_finite(s) || ms < (double)min_ms - 0.5 || ms > (double)max_ms + 0.5) {
        zend_argument_value_error(argn, "must be between %.3F and %.3F seconds",
                                  (double)min_ms / 1000.0, (double)max_ms / 1000.0);
        return false;
    }
    *out = (long)llround(ms);
    if (*out < min_ms) {
        *out = min_ms;
    }
    return true;
}

/* --------------------------------------------- persistent client cache */

typedef struct {
    const char *servers;
    zend_long connect_ms;
    zend_long command_ms;
    const char *username;
    const char *password;
} dl_config;

static void dl_config_from_ini(dl_config *cfg)
{
    cfg->servers = DISTLOCK_G(servers) ? DISTLOCK_G(servers) : "";
    cfg->connect_ms = DISTLOCK_G(connect_timeout_ms);
    cfg->command_ms = DISTLOCK_G(command_timeout_ms);
    cfg->username = DISTLOCK_G(username) ? DISTLOCK_G(username) : "";
    cfg->password = DISTLOCK_G(password) ? DISTLOCK_G(password) : "";
}

static void dl_last_clear(void)
{
    if (DISTLOCK_G(last).servers) pefree(DISTLOCK_G(last).servers, 1);
    if (DISTLOCK_G(last).username) pefree(DISTLOCK_G(last).username, 1);
    if (DISTLOCK_G(last).password) pefree(DISTLOCK_G(last).password, 1);
    memset(&DISTLOCK_G(last), 0, sizeof(DISTLOCK_G(last)));
}

static void dl_last_set(const dl_config *cfg, distlock_client *c)
{
    dl_last_clear();
    DISTLOCK_G(last).servers = pestrdup(cfg->servers, 1);
    DISTLOCK_G(last).username = pestrdup(cfg->username, 1);
    DISTLOCK_G(last).password = pestrdup(cfg->password, 1);
    DISTLOCK_G(last).connect_ms = cfg->connect_ms;
    DISTLOCK_G(last).command_ms = cfg->command_ms;
    DISTLOCK_G(last).client = c;
}

static void dl_pclient_dtor(zend_resource *res)
{
    if (DISTLOCK_G(last).client == res->ptr) {
        dl_last_clear();
    }
    distlock_client_free((distlock_client *)res->ptr);
    res->ptr = NULL;
}

/* The worker's client for this configuration, created on first use and kept
 * in EG(persistent_list) so its connections outlive the request. NULL with a
 * Distlock\ConfigurationException thrown if the configuration is invalid
 * (nothing is contacted here: the core connects lazily). */
static distlock_client *dl_client_for(const dl_config *cfg)
{
    smart_str key = {0};
    zend_resource *le;
    distlock_client *c = NULL;
    int st;

    if (DISTLOCK_G(last).client != NULL
        && DISTLOCK_G(last).connect_ms == cfg->connect_ms
        && DISTLOCK_G(last).command_ms == cfg->command_ms
        && strcmp(DISTLOCK_G(last).servers, cfg->servers) == 0
        && strcmp(DISTLOCK_G(last).username, cfg->username) == 0
        && strcmp(DISTLOCK_G(last).password, cfg->password) == 0) {
        return (distlock_client *)DISTLOCK_G(last).client;
    }

    /* \x01 cannot occur in a URI or an INI string in practice; it keeps
     * "a" + "bc" and "ab" + "c" apart. */
    smart_str_appends(&key, "distlock\x01");
    smart_str_appends(&key, cfg->servers);
    smart_str_appendc(&key, '\x01');
    smart_str_append_long(&key, cfg->connect_ms);
    smart_str_appendc(&key, '\x01');
    smart_str_append_long(&key, cfg->command_ms);
    smart_str_appendc(&key, '\x01');
    smart_str_appends(&key, cfg->username);
    smart_str_appendc(&key, '\x01');
    smart_str_appends(&key, cfg->password);
    smart_str_0(&key);

    le = zend_hash_find_ptr(&EG(persistent_list), key.s);
    if (le != NULL && le->type == le_distlock_pclient && le->ptr != NULL) {
        smart_str_free(&key);
        dl_last_set(cfg, (distlock_client *)le->ptr);
        return (distlock_client *)le->ptr;
    }

    st = distlock_client_new(&c, cfg->servers);
    if (st != DISTLOCK_OK) {
        dl_throw_config(st, "invalid servers (distlock.servers or Client's $servers)", cfg->servers,
                        cfg->password);
        smart_str_free(&key);
        return NULL;
    }
    if ((st = distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, (long)cfg->connect_ms)) != DISTLOCK_OK
        || (st = distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, (long)cfg->command_ms)) != DISTLOCK_OK
        || (*cfg->username && (st = distlock_client_set_str(c, DISTLOCK_OPT_USERNAME, cfg->username)) != DISTLOCK_OK)
        || (*cfg->password && (st = distlock_client_set_str(c, DISTLOCK_OPT_PASSWORD, cfg->password)) != DISTLOCK_OK)) {
        dl_throw_config(st, "invalid client option", cfg->servers, cfg->password);
        distlock_client_free(c);
        smart_str_free(&key);
        return NULL;
    }
    {
        /* The persistent list outlives the request: its key must be
         * persistent memory too, not the request-allocated smart_str. */
        zend_string *pkey = zend_string_init(ZSTR_VAL(key.s), ZSTR_LEN(key.s), 1);

        zend_register_persistent_resource_ex(pkey, c, le_distlock_pclient);
        zend_string_release(pkey);
    }
    smart_str_free(&key);
    dl_last_set(cfg, c);
    return c;
}

static distlock_client *dl_ini_client(void)
{
    dl_config cfg;

    dl_config_from_ini(&cfg);
    return dl_client_for(&cfg);
}

/* ------------------------------------------------------ compat functions */

/* distributedLock(string $key = '', int $ttl = 60, string|int|null $random = null,
 *                 string $tipMsg = ''): string|int */
PHP_FUNCTION(distributedLock)
{
    zend_string *key = ZSTR_EMPTY_ALLOC();
    zend_long ttl = 60;
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
        Z_PARAM_LONG(ttl)
        Z_PARAM_STR_OR_LONG_OR_NULL(rnd_str, rnd_long, rnd_null)
        Z_PARAM_STR(tip)
    ZEND_PARSE_PARAMETERS_END();

    if (!dl_check_key(1, key)) {
        RETURN_THROWS();
    }
    if (ttl <= 0 || ttl > DL_TTL_MAX_S) {
        zend_argument_value_error(2, "must be between 1 and %ld (seconds)", (long)DL_TTL_MAX_S);
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
    st = distlock_acquire_token(c, ZSTR_VAL(key), (long)ttl * 1000L, token, DISTLOCK_STRICT, NULL);
    if (st == DISTLOCK_NOTACQUIRED) {
        zend_string *msg;

        if (tip != NULL && ZSTR_LEN(tip) > 0) {
            msg = zend_string_copy(tip);
        } else {
            msg = strpprintf(0, "请求过于频繁,相同业务单号" ZEND_LONG_FMT "秒内仅允许请求1次!", ttl);
        }
        dl_throw_held(msg);
        zend_string_release(msg);
        RETURN_THROWS();
    }
    if (st != DISTLOCK_OK) {
        dl_throw_status(st, "distributedLock", ZSTR_VAL(key), ZSTR_LEN(key));
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

/* ------------------------------------------------------------ OO: Client */

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
                                             "command_timeout_ms, username, password)");
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
            } else {
                zend_argument_value_error(2, "has an unknown option \"%s\" (known: connect_timeout_ms, "
                                             "command_timeout_ms, username, password)", ZSTR_VAL(name));
                RETURN_THROWS();
            }
        } ZEND_HASH_FOREACH_END();
    }
    if ((c = dl_client_for(&cfg)) == NULL) {
        RETURN_THROWS();
    }
    dl_client_from(Z_OBJ_P(ZEND_THIS))->c = c;
}

/* ------------------------------------------------------------- OO: Lock */

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
    if (!dl_seconds_to_ms(2, ttl, 1, DISTLOCK_TTL_MAX, &ttl_ms)) {
        RETURN_THROWS();
    }
    if ((flags & ~(zend_long)DL_OO_FLAGS) != 0) {
        zend_argument_value_error(blocking ? 4 : 3,
                                  "must be 0 or a combination of Client::FENCING and Client::AUTO_RENEW");
        RETURN_THROWS();
    }
    st = distlock_acquire(c, ZSTR_VAL(key), ttl_ms, wait_ms, (unsigned)flags, &l);
    if (st == DISTLOCK_OK) {
        dl_lock_obj *o;

        object_init_ex(return_value, dl_ce_lock);
        o = dl_lock_from(Z_OBJ_P(return_value));
        o->l = l;
        o->ttl_ms = ttl_ms;
        return;
    }
    if (st == DISTLOCK_NOTACQUIRED || (blocking && st == DISTLOCK_ETIMEDOUT)) {
        if (!blocking) {
            RETURN_NULL();
        }
        zend_throw_exception_ex(dl_ce_timeout, DISTLOCK_PHP_CODE_TIMEDOUT,
                                "distlock: could not lock \"%.*s%s\" within %.3F seconds: "
                                "held by another owner",
                                (int)MIN(ZSTR_LEN(key), 64), ZSTR_VAL(key),
                                ZSTR_LEN(key) > 64 ? "..." : "", timeout_s);
        RETURN_THROWS();
    }
    dl_throw_status(st, "lock", ZSTR_VAL(key), ZSTR_LEN(key));
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
    if ((c = dl_this_client(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    n = distlock_client_node_count(c);
    array_init_size(return_value, n > 0 ? (uint32_t)n : 0);
    for (i = 0; i < n; i++) {
        const char *uri = distlock_client_node_uri(c, i);
        add_next_index_str(return_value, dl_mask_servers(uri ? uri : "", NULL));
    }
}

PHP_METHOD(Distlock_Client, quorum)
{
    distlock_client *c;

    ZEND_PARSE_PARAMETERS_NONE();
    if ((c = dl_this_client(ZEND_THIS)) == NULL) {
        RETURN_THROWS();
    }
    RETURN_LONG(distlock_client_quorum(c));
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
    if (!ttl_null && !dl_seconds_to_ms(1, ttl, 1, DISTLOCK_TTL_MAX, &ttl_ms)) {
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
            const char *uri = distlock_client_node_uri(o->c, i);
            add_next_index_str(&servers, dl_mask_servers(uri ? uri : "", NULL));
        }
        add_assoc_zval(&arr, "servers", &servers);
        add_assoc_long(&arr, "quorum", distlock_client_quorum(o->c));
    }
    return Z_ARRVAL(arr);
}

/* ---------------------------------------------------------------- module */

PHP_MINIT_FUNCTION(distlock)
{
    REGISTER_INI_ENTRIES();

    le_distlock_pclient = zend_register_list_destructors_ex(NULL, dl_pclient_dtor,
                                                            "distlock client", module_number);

    dl_ce_exception = register_class_Distlock_Exception(spl_ce_RuntimeException);
    dl_ce_config = register_class_Distlock_ConfigurationException(dl_ce_exception);
    dl_ce_conn = register_class_Distlock_ConnectionException(dl_ce_exception);
    dl_ce_lost = register_class_Distlock_LockLostException(dl_ce_exception);
    dl_ce_timeout = register_class_Distlock_LockTimeoutException(dl_ce_exception);

    dl_ce_client = register_class_Distlock_Client();
    dl_ce_client->create_object = dl_client_create;
    memcpy(&dl_client_handlers, zend_get_std_object_handlers(), sizeof(zend_object_handlers));
    dl_client_handlers.offset = XtOffsetOf(dl_client_obj, std);
    dl_client_handlers.clone_obj = NULL;
    dl_client_handlers.get_debug_info = dl_client_debug_info;

    dl_ce_lock = register_class_Distlock_Lock();
    dl_ce_lock->create_object = dl_lock_create;
    memcpy(&dl_lock_handlers, zend_get_std_object_handlers(), sizeof(zend_object_handlers));
    dl_lock_handlers.offset = XtOffsetOf(dl_lock_obj, std);
    dl_lock_handlers.free_obj = dl_lock_free;
    dl_lock_handlers.clone_obj = NULL;
    dl_lock_handlers.get_debug_info = dl_lock_debug_info;

    return SUCCESS;
}

PHP_MSHUTDOWN_FUNCTION(distlock)
{
    /* The persistent clients are freed with EG(persistent_list), by the engine. */
    UNREGISTER_INI_ENTRIES();
    return SUCCESS;
}

PHP_MINFO_FUNCTION(distlock)
{
    php_info_print_table_start();
    php_info_print_table_row(2, "distlock support", "enabled");
    php_info_print_table_row(2, "extension version", PHP_DISTLOCK_VERSION);
    php_info_print_table_row(2, "libdistlock version", distlock_version_string());
    php_info_print_table_end();
    DISPLAY_INI_ENTRIES();
}

static const zend_module_dep distlock_deps[] = {
    ZEND_MOD_REQUIRED("spl")
    ZEND_MOD_END
};

zend_module_entry distlock_module_entry = {
    STANDARD_MODULE_HEADER_EX,
    NULL,
    distlock_deps,
    "distlock",
    ext_functions,
    PHP_MINIT(distlock),
    PHP_MSHUTDOWN(distlock),
    NULL,
    NULL,
    PHP_MINFO(distlock),
    PHP_DISTLOCK_VERSION,
    PHP_MODULE_GLOBALS(distlock),
    PHP_GINIT(distlock),
    PHP_GSHUTDOWN(distlock),
    NULL,
    STANDARD_MODULE_PROPERTIES_EX
};

#ifdef COMPILE_DL_DISTLOCK
#ifdef ZTS
ZEND_TSRMLS_CACHE_DEFINE()
#endif
ZEND_GET_MODULE(distlock)
#endif
