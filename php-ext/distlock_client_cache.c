/*
 * distlock_client_cache.c -- one persistent distlock_client per configuration.
 *
 * One distlock_client per distinct configuration (servers and the library
 * options set) lives in EG(persistent_list) for the life of the worker
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
#include <strings.h>

#include "php.h"
#include "zend_smart_str.h"

#include "php_distlock_int.h"

static int le_distlock_pclient;

/* An INI text for an integer option: php.ini's On/Off/Yes/No/True/False as
 * PHP reads them for a switch, anything else as written (the core parses
 * it and names the option when it is not an integer). */
static const char *dl_ini_text(const distlock_option_info *o, const char *v)
{
    if (o->type != DISTLOCK_OPTION_LONG)
        return v;
    if (!strcasecmp(v, "on") || !strcasecmp(v, "yes") || !strcasecmp(v, "true"))
        return "1";
    if (!strcasecmp(v, "off") || !strcasecmp(v, "no") || !strcasecmp(v, "false") ||
        !strcasecmp(v, "none"))
        return "0";
    return v;
}

void dl_config_from_ini(dl_config *cfg)
{
    const distlock_option_info *o;

    memset(cfg, 0, sizeof(*cfg));
    cfg->servers = DISTLOCK_G(servers) ? DISTLOCK_G(servers) : "";
    for (size_t i = 0; i < DL_OPTIONS_MAX && (o = distlock_option_at(i)) != NULL; i++) {
        const char *v = DISTLOCK_G(opt_ini)[i];
        if (v != NULL && *v) {
            cfg->kind[i] = DL_OPT_TEXT;
            cfg->sv[i] = dl_ini_text(o, v);
        }
    }
}

static void dl_last_clear(void)
{
    if (DISTLOCK_G(last).key) pefree(DISTLOCK_G(last).key, 1);
    memset(&DISTLOCK_G(last), 0, sizeof(DISTLOCK_G(last)));
}

static void dl_last_set(const smart_str *key, distlock_client *c)
{
    dl_last_clear();
    DISTLOCK_G(last).key = pemalloc(ZSTR_LEN(key->s), 1);
    memcpy(DISTLOCK_G(last).key, ZSTR_VAL(key->s), ZSTR_LEN(key->s));
    DISTLOCK_G(last).key_len = ZSTR_LEN(key->s);
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

/* Set every option of cfg on c, in table order; the core checks each. */
static int dl_apply(distlock_client *c, const dl_config *cfg)
{
    const distlock_option_info *o;
    bool label = false, info_given = false;
    int st;

    for (size_t i = 0; i < DL_OPTIONS_MAX && (o = distlock_option_at(i)) != NULL; i++) {
        if (cfg->kind[i] == DL_OPT_UNSET)
            continue;
        st = cfg->kind[i] == DL_OPT_LONG ? distlock_client_set(c, o->id, (long)cfg->lv[i])
                                         : distlock_client_set_str(c, o->id, cfg->sv[i]);
        if (st != DISTLOCK_OK)
            return st;
        if (o->id == DISTLOCK_OPT_OWNER_LABEL)
            label = cfg->kind[i] == DL_OPT_TEXT && *cfg->sv[i];
        if (o->id == DISTLOCK_OPT_OWNER_INFO)
            info_given = true;
    }
    /* owner metadata: a label implies it, unless owner_info says otherwise */
    if (label && !info_given)
        return distlock_client_set(c, DISTLOCK_OPT_OWNER_INFO, 1);
    return DISTLOCK_OK;
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

    /* \x01 cannot occur in a URI or an INI string in practice; it keeps
     * "a" + "bc" and "ab" + "c" apart. */
    smart_str_appends(&key, "distlock\x01");
    smart_str_appends(&key, cfg->servers);
    for (size_t i = 0; i < DL_OPTIONS_MAX; i++) {
        smart_str_appendc(&key, '\x01');
        smart_str_appendc(&key, (char)('0' + cfg->kind[i]));
        if (cfg->kind[i] == DL_OPT_LONG)
            smart_str_append_long(&key, cfg->lv[i]);
        else if (cfg->kind[i] == DL_OPT_TEXT)
            smart_str_appends(&key, cfg->sv[i]);
    }
    smart_str_0(&key);

    if (DISTLOCK_G(last).client != NULL && DISTLOCK_G(last).key_len == ZSTR_LEN(key.s)
        && memcmp(DISTLOCK_G(last).key, ZSTR_VAL(key.s), ZSTR_LEN(key.s)) == 0) {
        smart_str_free(&key);
        return (distlock_client *)DISTLOCK_G(last).client;
    }
    le = zend_hash_find_ptr(&EG(persistent_list), key.s);
    if (le != NULL && le->type == le_distlock_pclient && le->ptr != NULL) {
        dl_last_set(&key, (distlock_client *)le->ptr);
        smart_str_free(&key);
        return (distlock_client *)DISTLOCK_G(last).client;
    }

    st = distlock_client_new(cfg->servers, &c);
    if (st != DISTLOCK_OK) {
        dl_throw_config(st, "invalid servers (distlock.servers or Client's $servers)");
        smart_str_free(&key);
        return NULL;
    }
    if ((st = dl_apply(c, cfg)) != DISTLOCK_OK) {
        /* the core's message names the option and what is wrong with it */
        dl_throw_config(st, "invalid client option");
        distlock_client_free(c);
        smart_str_free(&key);
        return NULL;
    }
    /* A signal whose PHP handler must run while a call waits (a queue
     * worker's SIGTERM, its job timeout's SIGALRM) ends the core's wait:
     * Client's waits run the handler and wait on (distlock_client.c). */
    (void)distlock_client_on_interrupt(c, dl_engine_interrupted, NULL);
    {
        /* The persistent list outlives the request: its key must be
         * persistent memory too, not the request-allocated smart_str. */
        zend_string *pkey = zend_string_init(ZSTR_VAL(key.s), ZSTR_LEN(key.s), 1);

        zend_register_persistent_resource_ex(pkey, c, le_distlock_pclient);
        zend_string_release(pkey);
    }
    dl_last_set(&key, c);
    smart_str_free(&key);
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

/* The copy of the last configuration's key is persistent memory of each thread's globals. */
void dl_client_cache_gshutdown(zend_distlock_globals *g)
{
    if (g->last.key) pefree(g->last.key, 1);
    memset(&g->last, 0, sizeof(g->last));
}
