/*
 * distlock_client_cache.c -- one persistent distlock_client per configuration.
 *
 * One distlock_client per distinct configuration (servers, timeouts,
 * username, password, WAIT replicas and timeout) lives in EG(persistent_list) for the life of the worker
 * process (pemalloc'd by the core, freed with the persistent list at
 * MSHUTDOWN). The core reconnects lazily after failures and, after fork(),
 * opens its own sockets in the child (pid check), so PHP-FPM / php-cgi
 * children that inherit a client from their master never share its sockets:
 * nothing here needs fork handling of its own. Client objects and the
 * compat functions borrow these clients; they never free them.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#include "php.h"
#include "zend_smart_str.h"

#include "php_distlock_int.h"

static int le_distlock_pclient;

void dl_config_from_ini(dl_config *cfg)
{
    cfg->servers = DISTLOCK_G(servers) ? DISTLOCK_G(servers) : "";
    cfg->connect_ms = DISTLOCK_G(connect_timeout_ms);
    cfg->command_ms = DISTLOCK_G(command_timeout_ms);
    cfg->username = DISTLOCK_G(username) ? DISTLOCK_G(username) : "";
    cfg->password = DISTLOCK_G(password) ? DISTLOCK_G(password) : "";
    cfg->wait_replicas = DISTLOCK_G(wait_replicas);
    cfg->wait_ms = DISTLOCK_G(wait_timeout_ms);
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
    DISTLOCK_G(last).wait_replicas = cfg->wait_replicas;
    DISTLOCK_G(last).wait_ms = cfg->wait_ms;
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
distlock_client *dl_client_for(const dl_config *cfg)
{
    smart_str key = {0};
    zend_resource *le;
    distlock_client *c = NULL;
    int st;

    if (DISTLOCK_G(last).client != NULL
        && DISTLOCK_G(last).connect_ms == cfg->connect_ms
        && DISTLOCK_G(last).command_ms == cfg->command_ms
        && DISTLOCK_G(last).wait_replicas == cfg->wait_replicas
        && DISTLOCK_G(last).wait_ms == cfg->wait_ms
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
    /* WAIT for replicas */
    smart_str_appendc(&key, '\x01');
    smart_str_append_long(&key, cfg->wait_replicas);
    smart_str_appendc(&key, '\x01');
    smart_str_append_long(&key, cfg->wait_ms);
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
        || (*cfg->password && (st = distlock_client_set_str(c, DISTLOCK_OPT_PASSWORD, cfg->password)) != DISTLOCK_OK)
        /* WAIT for replicas */
        || (st = distlock_client_set(c, DISTLOCK_OPT_WAIT_REPLICAS, (long)cfg->wait_replicas)) != DISTLOCK_OK
        || (st = distlock_client_set(c, DISTLOCK_OPT_WAIT_TIMEOUT_MS, (long)cfg->wait_ms)) != DISTLOCK_OK) {
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

distlock_client *dl_ini_client(void)
{
    dl_config cfg;

    dl_config_from_ini(&cfg);
    return dl_client_for(&cfg);
}

void dl_client_cache_minit(int module_number)
{
    le_distlock_pclient = zend_register_list_destructors_ex(NULL, dl_pclient_dtor,
                                                            "distlock client", module_number);
}

/* The copies of the last configuration are persistent memory of each thread's globals. */
void dl_client_cache_gshutdown(zend_distlock_globals *g)
{
    if (g->last.servers) pefree(g->last.servers, 1);
    if (g->last.username) pefree(g->last.username, 1);
    if (g->last.password) pefree(g->last.password, 1);
    memset(&g->last, 0, sizeof(g->last));
}
