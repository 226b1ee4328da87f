/* stream.c -- opening a connection's stream: to node i (plain or TLS by
 * its configuration), or to a server that is no node but takes a node's
 * settings (a sentinel: sentinel.c). The one file that chooses between
 * net.c's plain stream and tls.c's; everything else uses the stream's
 * functions (transport.h).
 *
 * Layer: 1 transport */
#include <stdlib.h>

#include "transport.h"

int distlock__stream_open_node(distlock__stream *s, distlock__transport *t, int i,
                               const char *addr, int port, const char *host, int *status,
                               char *err, size_t errlen)
{
    const distlock__node_cfg *cfg = &t->nodes[i];
    if (distlock__stream_open_plain(s, cfg, addr, port, status, err, errlen) != 0)
        return -1;
    /* checked against host (a Cluster master's own), else as tls.c says:
     * the URI's host, or addr (a Sentinel node's master, a Cluster master) */
    if (cfg->tls.enabled && distlock__tls_start(s, t, i, addr, host, status, err, errlen) != 0) {
        distlock__stream_close(s);
        return -1;
    }
    return 0;
}

int distlock__stream_cfg_init(distlock__stream_cfg *sc, distlock__transport *t, int i,
                              int *status, char *err, size_t errlen)
{
    *sc = (distlock__stream_cfg){ NULL, NULL, 0 };
    if (!t->nodes[i].tls.enabled)
        return 0;
    sc->tls = distlock__tls_ctx_new(t, i, &sc->server_name, &sc->insecure, status, err, errlen);
    return sc->tls ? 0 : -1;
}

void distlock__stream_cfg_clear(distlock__stream_cfg *sc)
{
    distlock__tls_ctx_free(sc->tls);  /* sessions hold references of their own */
    free(sc->server_name);
    *sc = (distlock__stream_cfg){ NULL, NULL, 0 };
}

int distlock__stream_open(distlock__stream *s, const distlock__node_cfg *cfg,
                          const distlock__stream_cfg *sc, const char *addr, int port,
                          const char *host, int *status, char *err, size_t errlen)
{
    if (distlock__stream_open_plain(s, cfg, addr, port, status, err, errlen) != 0)
        return -1;
    if (sc->tls && distlock__tls_session(s, sc->tls, sc->server_name ? sc->server_name : host,
                                         sc->insecure, cfg->uri, status, err, errlen) != 0) {
        distlock__stream_close(s);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ wait.c only, until it moves */

redisContext *distlock__node_connect(distlock__transport *t, int i, const char *addr, int port,
                                     const char *host, distlock__tls **tls, int *status,
                                     char *err, size_t errlen)
{
    distlock__stream s;
    *tls = NULL;
    if (distlock__stream_open_node(&s, t, i, addr, port, host, status, err, errlen) != 0)
        return NULL;
    *tls = s.impl;
    return s.ctx;
}

static distlock__stream pair_stream(redisContext *ctx, distlock__tls *tls)
{
    return (distlock__stream){ ctx, tls ? &distlock__stream_tls : &distlock__stream_plain, tls };
}

int distlock__write(redisContext *ctx, distlock__tls *tls, int *done)
{
    distlock__stream s = pair_stream(ctx, tls);
    return distlock__stream_write(&s, done);
}

int distlock__read(redisContext *ctx, distlock__tls *tls)
{
    distlock__stream s = pair_stream(ctx, tls);
    return distlock__stream_read(&s);
}

int distlock__events(const redisContext *ctx, const distlock__tls *tls)
{
    distlock__stream s = pair_stream((redisContext *)ctx, (distlock__tls *)tls);
    return distlock__stream_events(&s);
}
