/* distlock_mask.h -- the one place where the PHP extension hides passwords. */
#ifndef DISTLOCK_MASK_H
#define DISTLOCK_MASK_H

#include "php.h"

/* Strings to hide wherever they appear, besides what the URI patterns catch
 * (request memory; longest first). Zero-initialise, free with dl_secrets_free(). */
typedef struct {
    zend_string **v;
    uint32_t n;
} dl_secrets;

/* A password of n bytes, as given (an option or INI value). */
void dl_secrets_add(dl_secrets *s, const char *p, size_t n);
/* Every password of a server list: userinfo passwords and *pass* query
 * parameters, as written, %-decoded, and the comma-separated pieces a
 * malformed list is cut into. */
void dl_secrets_add_servers(dl_secrets *s, const char *servers);
void dl_secrets_free(dl_secrets *s);

/* A copy of `text` (free text: an error message...) with the password of
 * every URI in it replaced by "***": the userinfo password ("user:***@") and
 * the value of any query parameter whose name contains "pass" ("password=***",
 * "sentinel_password=***"), for any scheme (redis, rediss, unix,
 * redis-sentinel, redis-cluster...); then every secret of `secrets` (may be
 * NULL). In free text a URI also ends at white space and quotes. */
zend_string *dl_mask_text(const char *text, const dl_secrets *secrets);
/* The same for a server list (a URI ends only where ",scheme://" starts). */
zend_string *dl_mask_servers(const char *servers, const dl_secrets *secrets);

#endif
