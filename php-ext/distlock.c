/*
 * distlock.c -- PHP extension over libdistlock: the module.
 *
 *  - distributedLock() / distributedUnlock(): drop-ins for the ERP userland
 *    pair (distlock_compat.c).
 *  - Distlock\Client / Distlock\Lock: the OO API for new code
 *    (distlock_client.c, distlock_lock.c).
 *
 * Here: the INI entries and module globals, MINIT (the classes of the stub,
 * the persistent-client resource type), MINFO, and the argument checks the
 * functions and methods share. The jobs of the other files are listed in
 * php_distlock_int.h.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <string.h>

#include "php.h"
#include "php_ini.h"
#include "php_main.h"
#include "SAPI.h"
#include "ext/standard/info.h"
#include "ext/spl/spl_exceptions.h"
#include "zend_attributes.h"
#include "zend_exceptions.h"

#include "php_distlock_int.h"
#include "distlock_arginfo.h"

ZEND_DECLARE_MODULE_GLOBALS(distlock)

zend_class_entry *dl_ce_exception;
zend_class_entry *dl_ce_config;
zend_class_entry *dl_ce_conn;
zend_class_entry *dl_ce_acquire;
zend_class_entry *dl_ce_renewal;
zend_class_entry *dl_ce_lost;
zend_class_entry *dl_ce_timeout;

/* ------------------------------------------------------------------ INI */

/* phpinfo() / php --ri: distlock.servers as the library's messages show it
 * (distlock_servers_mask()), distlock.password as *** (ini_get() still
 * gives the values). */
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
    if (servers) {
        /* a masked run of one byte reads "***": at most 3 bytes per byte */
        size_t size = ZSTR_LEN(value) * 3 + 16;
        shown = zend_string_alloc(size, 0);
        if (distlock_servers_mask(ZSTR_VAL(value), ZSTR_VAL(shown), size) != DISTLOCK_OK) {
            strcpy(ZSTR_VAL(shown), "(not shown)");
        }
        ZSTR_LEN(shown) = strlen(ZSTR_VAL(shown));
    } else {
        shown = zend_string_init("***", 3, 0);
    }
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
PHP_INI_END()

/* distlock.<name> for every row of the library's option table, made from
 * the table at MINIT: "" (the default) leaves the option at the library's
 * default; the library checks a value when a client is made with it
 * (Distlock\ConfigurationException naming the option). */
static zend_ini_entry_def dl_option_ini[DL_OPTIONS_MAX + 1];
static char dl_option_ini_names[DL_OPTIONS_MAX][96];

static ZEND_INI_MH(dl_on_update_option)
{
    (void)entry; (void)mh_arg2; (void)mh_arg3; (void)stage;
    DISTLOCK_G(opt_ini)[(uintptr_t)mh_arg1] = new_value ? ZSTR_VAL(new_value) : NULL;
    return SUCCESS;
}

static zend_result dl_register_option_ini(int type, int module_number)
{
    const distlock_option_info *o;
    size_t n = 0;

    for (; (o = distlock_option_at(n)) != NULL; n++) {
        if (n == DL_OPTIONS_MAX) {
            php_error_docref(NULL, E_CORE_ERROR, "distlock: the library has more than %d options;"
                             " rebuild the extension against it", DL_OPTIONS_MAX);
            return FAILURE;
        }
        zend_ini_entry_def *d = &dl_option_ini[n];
        snprintf(dl_option_ini_names[n], sizeof dl_option_ini_names[n], "distlock.%s", o->name);
        d->name = dl_option_ini_names[n];
        d->name_length = (uint16_t)strlen(d->name);
        d->on_modify = dl_on_update_option;
        d->mh_arg1 = (void *)(uintptr_t)n;
        d->value = "";
        d->value_length = 0;
        d->modifiable = PHP_INI_ALL;
        /* the one secret among them: phpinfo() shows *** */
        d->displayer = o->id == DISTLOCK_OPT_PASSWORD ? dl_display_password : NULL;
    }
    memset(&dl_option_ini[n], 0, sizeof dl_option_ini[n]);
    return zend_register_ini_entries_ex(dl_option_ini, module_number, type);
}

static PHP_GINIT_FUNCTION(distlock)
{
#if defined(COMPILE_DL_DISTLOCK) && defined(ZTS)
    ZEND_TSRMLS_CACHE_UPDATE();
#endif
    memset(distlock_globals, 0, sizeof(*distlock_globals));
}

static PHP_GSHUTDOWN_FUNCTION(distlock)
{
    dl_client_cache_gshutdown(distlock_globals);
}

/* ---------------------------------------------------------------- module */

PHP_MINIT_FUNCTION(distlock)
{
    REGISTER_INI_ENTRIES();
    if (dl_register_option_ini(type, module_number) != SUCCESS) {
        return FAILURE;
    }

    dl_client_cache_minit(module_number);

    dl_ce_exception = register_class_Distlock_Exception(spl_ce_RuntimeException);
    dl_ce_config = register_class_Distlock_ConfigurationException(dl_ce_exception);
    dl_ce_conn = register_class_Distlock_ConnectionException(dl_ce_exception);
    dl_ce_acquire = register_class_Distlock_AcquireException(dl_ce_conn);
    dl_ce_renewal = register_class_Distlock_RenewalException(dl_ce_conn);
    dl_ce_lost = register_class_Distlock_LockLostException(dl_ce_exception);
    dl_ce_timeout = register_class_Distlock_LockTimeoutException(dl_ce_exception);

    dl_client_minit(register_class_Distlock_Client());
    dl_lock_minit(register_class_Distlock_Lock());

    return SUCCESS;
}

PHP_MSHUTDOWN_FUNCTION(distlock)
{
    /* The persistent clients are freed with EG(persistent_list), by the engine. */
    UNREGISTER_INI_ENTRIES();
    return SUCCESS;
}

PHP_RINIT_FUNCTION(distlock)
{
#if defined(COMPILE_DL_DISTLOCK) && defined(ZTS)
    ZEND_TSRMLS_CACHE_UPDATE();
#endif
    dl_lost_rinit();
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
    PHP_RINIT(distlock),
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

