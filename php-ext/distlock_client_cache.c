/*
 * distlock_client_cache.c -- one persistent distlock_client per configuration.
 *
 * One distlock_client per distinct configuration (servers, timeouts,
 * username, password, WAIT replicas and timeout, owner metadata) lives in EG(persistent_list) for the life of the worker
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

const char *const dl_tls_names[5] = { "tls_ca_file", "tls_ca_dir", "tls_cert", "tls_key",
                                      "tls_server_name" };
static const distlock_option dl_tls_opts[5] = {
    DISTLOCK_OPT_TLS_CA_FILE, DISTLOCK_OPT_TLS_CA_DIR, DISTLOCK_OPT_TLS_CERT,
    DISTLOCK_OPT_TLS_KEY, DISTLOCK_OPT_TLS_SERVER_NAME
};

void dl_config_from_ini(dl_config *cfg)
{
    cfg->servers = DISTLOCK_G(servers) ? DISTLOCK_G(servers) : "";
    cfg->connect_ms = DISTLOCK_G(connect_timeout_ms);
    cfg->command_ms = DISTLOCK_G(command_timeout_ms);
    cfg->username = DISTLOCK_G(username) ? DISTLOCK_G(username) : "";
    cfg->password = DISTLOCK_G(password) ? DISTLOCK_G(password) : "";
    for (int k = 0; k < 5; k++)
        cfg->tls[k] = DISTLOCK_G(tls)[k] ? DISTLOCK_G(tls)[k] : "";
    cfg->tls_verify = DISTLOCK_G(tls_verify);
    cfg->wait_replicas = DISTLOCK_G(wait_replicas);
    cfg->wait_ms = DISTLOCK_G(wait_timeout_ms);
    cfg->owner_info = DISTLOCK_G(owner_info);
    cfg->owner_label = DISTLOCK_G(owner_label) ? DISTLOCK_G(owner_label) : "";
}

static void dl_last_clear(void)
{
    if (DISTLOCK_G(last).servers) pefree(DISTLOCK_G(last).servers, 1);
    if (DISTLOCK_G(last).username) pefree(DISTLOCK_G(last).username, 1);
    if (DISTLOCK_G(last).password) pefree(DISTLOCK_G(last).password, 1);
    for (int k = 0; k < 5; k++)
        if (DISTLOCK_G(last).tls[k]) pefree(DISTLOCK_G(last).tls[k], 1);
    if (DISTLOCK_G(last).owner_label) pefree(DISTLOCK_G(last).owner_label, 1);
    memset(&DISTLOCK_G(last), 0, sizeof(DISTLOCK_G(last)));
}

static void dl_last_set(const dl_config *cfg, distlock_client *c)
{
    dl_last_clear();
    DISTLOCK_G(last).servers = pestrdup(cfg->servers, 1);
    DISTLOCK_G(last).username = pestrdup(cfg->username, 1);
    DISTLOCK_G(last).password = pestrdup(cfg->password, 1);
    for (int k = 0; k < 5; k++)
        DISTLOCK_G(last).tls[k] = pestrdup(cfg->tls[k], 1);
    DISTLOCK_G(last).tls_verify = cfg->tls_verify;
    DISTLOCK_G(last).connect_ms = cfg->connect_ms;
    DISTLOCK_G(last).command_ms = cfg->command_ms;
    DISTLOCK_G(last).wait_replicas = cfg->wait_replicas;
    DISTLOCK_G(last).wait_ms = cfg->wait_ms;
    DISTLOCK_G(last).owner_info = cfg->owner_info;
    DISTLOCK_G(last).owner_label = pestrdup(cfg->owner_label, 1);
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

/* TLS settings equal to the last configuration's. */
static bool dl_same_tls(const dl_config *cfg)
{
    if (DISTLOCK_G(last).tls_verify != cfg->tls_verify)
        return false;
    for (int k = 0; k < 5; k++)
        if (strcmp(DISTLOCK_G(last).tls[k], cfg->tls[k]) != 0)
            return false;
    return true;
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
        && DISTLOCK_G(last).owner_info == cfg->owner_info
        && strcmp(DISTLOCK_G(last).owner_label, cfg->owner_label) == 0
        && strcmp(DISTLOCK_G(last).servers, cfg->servers) == 0
        && strcmp(DISTLOCK_G(last).username, cfg->username) == 0
        && strcmp(DISTLOCK_G(last).password, cfg->password) == 0
        && dl_same_tls(cfg)) {
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
    for (int k = 0; k < 5; k++) {   /* TLS */
        smart_str_appendc(&key, '\x01');
        smart_str_appends(&key, cfg->tls[k]);
    }
    smart_str_appendc(&key, '\x01');
    smart_str_append_long(&key, cfg->tls_verify);
    /* WAIT for replicas */
    smart_str_appendc(&key, '\x01');
    smart_str_append_long(&key, cfg->wait_replicas);
    smart_str_appendc(&key, '\x01');
    smart_str_append_long(&key, cfg->wait_ms);
    /* owner metadata */
    smart_str_appendc(&key, '\x01');
    smart_str_append_long(&key, cfg->owner_info);
    smart_str_appendc(&key, '\x01');
    smart_str_appends(&key, cfg->owner_label);
    smart_str_0(&key);

    le = zend_hash_find_ptr(&EG(persistent_list), key.s);
    if (le != NULL && le->type == le_distlock_pclient && le->ptr != NULL) {
        smart_str_free(&key);
        dl_last_set(cfg, (distlock_client *)le->ptr);
        return (distlock_client *)le->ptr;
    }

    st = distlock_client_new(cfg->servers, &c);
    if (st != DISTLOCK_OK) {
        dl_throw_config(st, "invalid servers (distlock.servers or Client's $servers)");
        smart_str_free(&key);
        return NULL;
    }
    if ((st = distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, (long)cfg->connect_ms)) != DISTLOCK_OK
        || (st = distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, (long)cfg->command_ms)) != DISTLOCK_OK
        || (*cfg->username && (st = distlock_client_set_str(c, DISTLOCK_OPT_USERNAME, cfg->username)) != DISTLOCK_OK)
        || (*cfg->password && (st = distlock_client_set_str(c, DISTLOCK_OPT_PASSWORD, cfg->password)) != DISTLOCK_OK)
        || (cfg->tls_verify != 1 && (st = distlock_client_set(c, DISTLOCK_OPT_TLS_VERIFY, (long)cfg->tls_verify)) != DISTLOCK_OK)
        /* WAIT for replicas */
        || (st = distlock_client_set(c, DISTLOCK_OPT_WAIT_REPLICAS, (long)cfg->wait_replicas)) != DISTLOCK_OK
        || (st = distlock_client_set(c, DISTLOCK_OPT_WAIT_TIMEOUT_MS, (long)cfg->wait_ms)) != DISTLOCK_OK
        /* owner metadata: a label implies it; the core refuses a label too long */
        || (*cfg->owner_label && (st = distlock_client_set_str(c, DISTLOCK_OPT_OWNER_LABEL, cfg->owner_label)) != DISTLOCK_OK)
        || ((cfg->owner_info || *cfg->owner_label) && (st = distlock_client_set(c, DISTLOCK_OPT_OWNER_INFO, 1)) != DISTLOCK_OK)) {
        dl_throw_config(st, "invalid client option");
        distlock_client_free(c);
        smart_str_free(&key);
        return NULL;
    }
    for (int k = 0; k < 5; k++) {   /* TLS */
        if (*cfg->tls[k] && (st = distlock_client_set_str(c, dl_tls_opts[k], cfg->tls[k])) != DISTLOCK_OK) {
            dl_throw_config(st, "invalid TLS option");
            distlock_client_free(c);
            smart_str_free(&key);
            return NULL;
        }
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
    for (int k = 0; k < 5; k++)
        if (g->last.tls[k]) pefree(g->last.tls[k], 1);
    if (g->last.owner_label) pefree(g->last.owner_label, 1);
    memset(&g->last, 0, sizeof(g->last));
}
