/* fuzz_servers.c -- libFuzzer target: the server-list grammar (core/src/uri.c)
 * on arbitrary text, through the parser itself and through the public
 * distlock_client_new(), which parses, refuses the kinds the transport does
 * not serve yet (TLS, Sentinel) and sets a client up without connecting.
 * Checks, beyond "no crash, no leak, no UB": every parsed node has a shown
 * URI, a Sentinel node names its master and at least one sentinel, a TCP
 * node has a port in 1..65535; a client's node count and URIs match. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';  /* the API takes a C string: a NUL inside ends it */

    distlock__node_cfg *nodes = NULL;
    int n = 0;
    if (distlock__parse_servers(text, &nodes, &n) == DISTLOCK_OK) {
        if (n < 1)
            abort();
        for (int i = 0; i < n; i++) {
            const distlock__node_cfg *c = &nodes[i];
            if (c->uri == NULL)
                abort();
            if (c->kind == DISTLOCK__NODE_SENTINEL &&
                (c->master == NULL || c->nsentinels < 1 || c->sentinels == NULL))
                abort();
            if (c->kind != DISTLOCK__NODE_SENTINEL && c->host && (c->port < 1 || c->port > 65535))
                abort();
        }
        distlock__free_nodes(nodes, n);
    }

    distlock_client *cl = NULL;
    if (distlock_client_new(text, &cl) == DISTLOCK_OK) {
        int count = distlock_client_node_count(cl);
        if (count < 1 || distlock_client_quorum(cl) != count / 2 + 1)
            abort();
        for (int i = 0; i < count; i++)
            if (distlock_client_node_uri(cl, i) == NULL)
                abort();
        distlock_client_free(cl);
    } else if (cl != NULL) {
        abort();  /* a failed call leaves *out NULL */
    }
    (void)distlock_last_error();

    /* the front ends' echo of a list: whole, and cut to a small buffer */
    char shown[64], *whole = malloc(size * 3 + 16);
    if (distlock_servers_mask(text, shown, 16 + size % 48) != DISTLOCK_OK ||
        strlen(shown) >= 16 + size % 48)
        abort();
    if (whole && (distlock_servers_mask(text, whole, size * 3 + 16) != DISTLOCK_OK ||
                  strlen(whole) > size * 3))
        abort();
    free(whole);
    free(text);
    return 0;
}
