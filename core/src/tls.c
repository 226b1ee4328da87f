/* tls.c -- the TLS stream under a connection, with OpenSSL.
 *
 * A rediss:// node's connection is the same non-blocking socket and the
 * same hiredis context (output buffer, reply reader) as a plain one; only
 * the bytes pass through an SSL session: this file's stream functions
 * (distlock__stream_tls) use tls_send / tls_recv where net.c's plain ones
 * use send / recv. The handshake is driven by those same calls from the
 * round's poll() loop (tls_events says which way to wait), so it is bounded by the
 * node's connect deadline like the TCP connect; the handshake commands
 * (AUTH, SELECT, CLIENT ID, SCRIPT LOAD) wait in the output buffer until
 * TLS is up.
 *
 * Our own BIO writes with send(MSG_NOSIGNAL): OpenSSL's socket BIO uses
 * write(2), which raises SIGPIPE on a connection the server closed.
 *
 * Contexts: one SSL_CTX per TLS node, built at its first connection under
 * tp.mu from the node's URI options, else the client's (distlock__tp_set_tls).
 * Changing a client option drops the built contexts and reconnects. A
 * rediss-sentinel:// node's sentinels are reached with the same settings
 * through a context of their own: each lookup and the +switch-master
 * subscriber (sentinel.c, their own threads) build one
 * (distlock__stream_cfg_init) and open sessions with distlock__tls_session. Not
 * the node's shared one: OpenSSL 3.0 fills a certificate name's cached
 * encoding lazily during verification, unlocked, and ThreadSanitizer
 * reports two threads verifying through one context as a data race. The certificate of a
 * Sentinel node's master is checked against the address the sentinels
 * gave, a Cluster master's against its own host from CLUSTER SLOTS or MOVED
 * (never the first seed's), each unless tls_server_name is set.
 * Verification is on unless tls_insecure=1 / DISTLOCK_OPT_TLS_VERIFY 0,
 * and turning it off writes one warning line to stderr per context built.
 *
 * Fork: a child frees its parent's sessions without a byte written
 * (SSL_free without SSL_shutdown; the BIO does not close the fd). It
 * must not find a lock of OpenSSL (or of its allocator) held by a parent
 * thread: the library's own threads hold the fork gate (base.h) while
 * they call OpenSSL.
 *
 * Layer: 1 transport
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <hiredis/sds.h>

#include "transport.h"

/* A TLS stream's impl: its session. */
typedef struct distlock__tls distlock__tls;
struct distlock__tls {
    SSL *ssl;
    int up;      /* handshake done */
    int got;     /* application data received */
    short want;  /* during the handshake: POLLIN or POLLOUT */
};

/* ------------------------------------------------------------ our BIO */

static BIO_METHOD *bio_meth;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static int bio_write(BIO *b, const char *buf, int len)
{
    ssize_t n;
    BIO_clear_retry_flags(b);
    do
        n = send(BIO_get_fd(b, NULL), buf, (size_t)len, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        BIO_set_retry_write(b);
    return (int)n;
}

static int bio_read(BIO *b, char *buf, int len)
{
    ssize_t n;
    BIO_clear_retry_flags(b);
    do
        n = recv(BIO_get_fd(b, NULL), buf, (size_t)len, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        BIO_set_retry_read(b);
    return (int)n;
}

static int bio_puts(BIO *b, const char *s)
{
    return bio_write(b, s, (int)strlen(s));
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    switch (cmd) {
    case BIO_C_SET_FD:
        BIO_set_data(b, (void *)(intptr_t)*(int *)ptr);
        BIO_set_init(b, 1);
        (void)num;
        return 1;
    case BIO_C_GET_FD: {
        int fd = (int)(intptr_t)BIO_get_data(b);
        if (ptr)
            *(int *)ptr = fd;
        return fd;
    }
    case BIO_CTRL_FLUSH:
        return 1;
    default:
        return 0;
    }
}

static void bio_init_once(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "distlock socket");
    if (m && BIO_meth_set_write(m, bio_write) && BIO_meth_set_read(m, bio_read) &&
        BIO_meth_set_puts(m, bio_puts) && BIO_meth_set_ctrl(m, bio_ctrl))
        bio_meth = m;
    else if (m)
        BIO_meth_free(m);
}

/* ------------------------------------------------------------ errors */

/* The reason OpenSSL gives for the last failure, with a hint for a server
 * that does not speak TLS on that port. */
static void ssl_reason(SSL *ssl, int rc, int code, char *err, size_t errlen)
{
    long vr = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
    unsigned long e = ERR_peek_last_error();
    if (code == SSL_ERROR_SSL && vr != X509_V_OK) {
        snprintf(err, errlen, "TLS: certificate verify failed: %s",
                 X509_verify_cert_error_string(vr));
    } else if (e != 0) {
        char buf[120];
        ERR_error_string_n(e, buf, sizeof(buf));
        const char *why = ERR_reason_error_string(e);
        int r = ERR_GET_REASON(e);
        int not_tls = r == SSL_R_WRONG_VERSION_NUMBER || r == SSL_R_PACKET_LENGTH_TOO_LONG ||
                      r == SSL_R_UNEXPECTED_EOF_WHILE_READING;
        snprintf(err, errlen, "TLS: %s%s", why ? why : buf,
                 not_tls && !(ssl && SSL_is_init_finished(ssl))
                     ? " (does the server speak TLS on this port?)" : "");
    } else if (code == SSL_ERROR_SYSCALL && rc < 0 && errno != 0) {
        snprintf(err, errlen, "TLS: %s", strerror(errno));
    } else {
        snprintf(err, errlen, "%s",
                 ssl && SSL_is_init_finished(ssl) ? "Server closed the connection"
                                                  : "TLS: connection closed during the handshake "
                                                    "(does the server speak TLS on this port?)");
    }
    ERR_clear_error();
}

/* ------------------------------------------------------------ contexts */

static const char *opt_or(const char *node, const char *client)
{
    return node ? node : client;
}

static int node_insecure(const distlock__transport *t, const distlock__node_cfg *cfg)
{
    return cfg->tls.insecure > 0 || (cfg->tls.insecure < 0 && !t->tls_verify);
}

/* ------------------------------------------------------------ files */

/* OpenSSL's own loaders (SSL_CTX_load_verify_locations, the *_file
 * functions, the system store and a CA directory looked up during each
 * verification) open their files with fopen() without "e": a fork and
 * exec on another thread meanwhile hands the program executed a
 * descriptor of the file, the client's private key included. So the
 * library reads every TLS file itself, through a close-on-exec
 * descriptor, and gives OpenSSL the bytes; a CA directory is read whole
 * when the context is built. */
#define TLS_FILE_MAX (16 * 1024 * 1024)  /* no certificate file comes near */

/* The bytes of file in a memory BIO (cleansed when freed: a key's), or
 * NULL with errno set. */
static BIO *file_bio(const char *file)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    /* the buffer on the heap: this runs on a call's deepest stack path
     * (a connection opened inside a round), which has a budget */
    enum { CHUNK = 16384 };
    BIO *b = BIO_new(BIO_s_secmem());
    char *buf = malloc(CHUNK);
    size_t total = 0;
    int e = b && buf ? 0 : ENOMEM;
    while (e == 0) {
        ssize_t n = read(fd, buf, CHUNK);
        if (n == 0)
            break;
        if (n < 0) {
            if (errno != EINTR)
                e = errno;
            continue;
        }
        total += (size_t)n;
        if (total > TLS_FILE_MAX)
            e = EFBIG;
        else if (BIO_write(b, buf, (int)n) != (int)n)
            e = ENOMEM;
    }
    if (buf)
        OPENSSL_cleanse(buf, CHUNK);
    free(buf);
    close(fd);
    if (e != 0) {
        BIO_free(b);
        errno = e;
        return NULL;
    }
    return b;
}

/* The certificates and CRLs of a PEM file into store, as
 * X509_load_cert_crl_file does: how many, or -1. */
static int load_ca_file(X509_STORE *store, const char *file)
{
    BIO *b = file_bio(file);
    if (b == NULL)
        return -1;
    STACK_OF(X509_INFO) *infos = PEM_X509_INFO_read_bio(b, NULL, NULL, NULL);
    BIO_free(b);
    if (infos == NULL)
        return -1;
    int n = 0;
    for (int k = 0; k < sk_X509_INFO_num(infos) && n >= 0; k++) {
        X509_INFO *xi = sk_X509_INFO_value(infos, k);
        if ((xi->x509 && X509_STORE_add_cert(store, xi->x509) != 1) ||
            (xi->crl && X509_STORE_add_crl(store, xi->crl) != 1))
            n = -1;
        else
            n += (xi->x509 != NULL) + (xi->crl != NULL);
    }
    sk_X509_INFO_pop_free(infos, X509_INFO_free);
    return n;
}

/* A CA directory as `openssl rehash` lays it out (a certificate under
 * its subject's hash and a number, NNNNNNNN.D; ':' between directories,
 * as OpenSSL takes them), looked up as OpenSSL's own directory lookup
 * does: when a verification needs an issuer the store does not hold yet,
 * its files are read into the store, then the store answers. Only their
 * opening is ours (close-on-exec). CRLs are not looked up: CRL checks are
 * not enabled. */
static X509_LOOKUP_METHOD *dir_meth;
static pthread_once_t dir_once = PTHREAD_ONCE_INIT;

static int dir_by_subject(X509_LOOKUP *lu, X509_LOOKUP_TYPE type, const X509_NAME *name,
                          X509_OBJECT *ret)
{
    const char *dirs = X509_LOOKUP_get_method_data(lu);
    X509_STORE *store = X509_LOOKUP_get_store(lu);
    if (type != X509_LU_X509 || dirs == NULL || store == NULL)
        return 0;
    unsigned long hash = X509_NAME_hash_ex(name, NULL, NULL, NULL);
    /* on the heap: a handshake's verification runs on a call's stack */
    char *file = malloc(PATH_MAX);
    while (file && *dirs) {
        size_t len = strcspn(dirs, ":");
        /* the numbers follow each other from 0: the first missing ends them */
        for (int k = 0; len > 0; k++)
            if (snprintf(file, PATH_MAX, "%.*s/%08lx.%d", (int)len, dirs, hash, k) >= PATH_MAX ||
                load_ca_file(store, file) < 0)
                break;
        dirs += len + (dirs[len] == ':');
    }
    free(file);
    ERR_clear_error();  /* a file that does not load is passed over, as there */
    X509_STORE_lock(store);
    X509_OBJECT *o = X509_OBJECT_retrieve_by_subject(X509_STORE_get0_objects(store), type, name);
    X509 *x = o ? X509_OBJECT_get0_X509(o) : NULL;
    int ok = x != NULL && X509_OBJECT_set1_X509(ret, x) == 1;
    /* ret borrows the store's reference, as from OpenSSL's own lookups:
     * their caller (X509_STORE_CTX_get_by_subject) takes one of its own */
    if (ok)
        X509_free(x);
    X509_STORE_unlock(store);
    return ok;
}

static void dir_free(X509_LOOKUP *lu)
{
    free(X509_LOOKUP_get_method_data(lu));
}

static void dir_meth_init(void)
{
    X509_LOOKUP_METHOD *m = X509_LOOKUP_meth_new("distlock CA directory");
    if (m && (X509_LOOKUP_meth_set_get_by_subject(m, dir_by_subject) != 1 ||
              X509_LOOKUP_meth_set_free(m, dir_free) != 1)) {
        X509_LOOKUP_meth_free(m);
        m = NULL;
    }
    dir_meth = m;
}

/* Look issuers up in dirs; 0, or -1 (out of memory). */
static int add_ca_dirs(X509_STORE *store, const char *dirs)
{
    pthread_once(&dir_once, dir_meth_init);
    char *copy = dir_meth ? strdup(dirs) : NULL;
    X509_LOOKUP *lu = copy ? X509_STORE_add_lookup(store, dir_meth) : NULL;
    if (lu == NULL || X509_LOOKUP_set_method_data(lu, copy) != 1) {
        free(copy);
        return -1;
    }
    return 0;
}

/* The system store, as SSL_CTX_set_default_verify_paths names it: its file
 * (read now, as there) and its directories (SSL_CERT_FILE, SSL_CERT_DIR
 * override them). A missing file is not an error, as there. */
static int add_default_store(X509_STORE *store)
{
    const char *file = secure_getenv(X509_get_default_cert_file_env());
    const char *dirs = secure_getenv(X509_get_default_cert_dir_env());
    (void)load_ca_file(store, file ? file : X509_get_default_cert_file());
    ERR_clear_error();
    return add_ca_dirs(store, dirs ? dirs : X509_get_default_cert_dir());
}

/* SSL_CTX_use_certificate_chain_file from file's bytes: the first
 * certificate is the client's, the ones after it its chain. */
static int use_cert_chain(SSL_CTX *ctx, const char *file)
{
    BIO *b = file_bio(file);
    if (b == NULL)
        return 0;
    X509 *x = PEM_read_bio_X509_AUX(b, NULL, NULL, NULL);
    int ok = x && SSL_CTX_use_certificate(ctx, x) == 1 && SSL_CTX_clear_chain_certs(ctx) == 1;
    X509 *ca;
    while (ok && (ca = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
        if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
            X509_free(ca);
            ok = 0;
        }
    }
    /* the chain ends at the end of the file, not at a broken certificate */
    unsigned long e = ERR_peek_last_error();
    if (ok && e != 0) {
        if (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)
            ERR_clear_error();
        else
            ok = 0;
    }
    X509_free(x);
    BIO_free(b);
    return ok;
}

/* SSL_CTX_use_PrivateKey_file (PEM) from file's bytes; *none says so
 * when the file holds no key at all (OpenSSL 3's decoders call that
 * "unsupported"). */
static int use_key(SSL_CTX *ctx, const char *file, const char **none)
{
    BIO *b = file_bio(file);
    if (b == NULL)
        return 0;
    EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, SSL_CTX_get_default_passwd_cb(ctx),
                                          SSL_CTX_get_default_passwd_cb_userdata(ctx));
    BIO_free(b);
    unsigned long e = ERR_peek_last_error();
    if (k == NULL && (ERR_GET_REASON(e) == ERR_GET_REASON(ERR_R_UNSUPPORTED) ||
                      ERR_GET_REASON(e) == PEM_R_NO_START_LINE))
        *none = "no PEM private key found";
    int ok = k && SSL_CTX_use_PrivateKey(ctx, k) == 1;
    EVP_PKEY_free(k);
    return ok;
}

/* t->mu held */
static SSL_CTX *build_ctx(distlock__transport *t, int i, int warn, int *status, char *err,
                          size_t errlen)
{
    const distlock__node_cfg *cfg = &t->nodes[i];
    const char *ca_file = opt_or(cfg->tls.ca_file, t->tls_opt[DISTLOCK__TLS_CA_FILE]);
    const char *ca_dir = opt_or(cfg->tls.ca_dir, t->tls_opt[DISTLOCK__TLS_CA_DIR]);
    const char *cert = opt_or(cfg->tls.cert, t->tls_opt[DISTLOCK__TLS_CERT]);
    const char *key = opt_or(cfg->tls.key, t->tls_opt[DISTLOCK__TLS_KEY]);
    int insecure = node_insecure(t, cfg);
    const char *what = "create a TLS context";
    const char *file = NULL, *none = NULL;

    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL)
        goto fail;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* One recv() per read, not one for a record's header and one for its
     * body; what it reads beyond a record waits in OpenSSL's buffer, which
     * tls_read empties (tls_pending) before it returns. */
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_verify(ctx, insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    if (ca_file) {
        what = "load the CA file", file = ca_file;
        errno = 0;
        int n = load_ca_file(store, ca_file);
        if (n == 0)
            none = "no certificate or crl found";
        if (n <= 0)
            goto fail;
    }
    if (ca_dir && add_ca_dirs(store, ca_dir) != 0) {
        what = "load the CA directory", file = ca_dir;
        goto fail;
    }
    if (!ca_file && !ca_dir && add_default_store(store) != 0) {
        what = "load the system CA store";
        goto fail;
    }
    if (key && !cert) {
        snprintf(err, errlen, "%s: TLS: a client key (tls_key) needs a client certificate (tls_cert)",
                 cfg->uri);
        *status = DISTLOCK_EINVAL;
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (cert) {
        what = "load the client certificate", file = cert;
        errno = 0;
        if (!use_cert_chain(ctx, cert))
            goto fail;
        what = "load the client key", file = key ? key : cert;
        errno = 0;
        if (!use_key(ctx, file, &none))
            goto fail;
        what = "match the client key to its certificate";
        if (SSL_CTX_check_private_key(ctx) != 1)
            goto fail;
    }
    if (insecure && warn)
        fprintf(stderr, "distlock: WARNING: TLS certificate verification is OFF for %s: "
                        "anyone on the path can impersonate this node\n", cfg->uri);
    return ctx;
fail: {
        unsigned long e = ERR_peek_last_error();
        const char *why = none ? none : e ? ERR_reason_error_string(e) : NULL;
        snprintf(err, errlen, "%s: TLS: cannot %s%s%s: %s", cfg->uri, what, file ? " " : "",
                 file ? file : "", why ? why : (errno ? strerror(errno) : "unknown error"));
        *status = ctx ? DISTLOCK_EINVAL : DISTLOCK_ENOMEM;
        ERR_clear_error();
        SSL_CTX_free(ctx);
        return NULL;
    }
}

void distlock__tls_ctx_drop_all(distlock__transport *t)
{
    for (int i = 0; t->tls_ctx && i < t->n; i++) {
        SSL_CTX_free(t->tls_ctx[i]);
        t->tls_ctx[i] = NULL;
    }
}

/* ------------------------------------------------------------ sessions */

/* t->mu held: node i's context, built on first use (NULL: status, err). */
static SSL_CTX *node_ctx(distlock__transport *t, int i, int *status, char *err, size_t errlen)
{
    if (t->tls_ctx[i] == NULL)
        t->tls_ctx[i] = build_ctx(t, i, 1, status, err, errlen);
    return t->tls_ctx[i];
}

int distlock__tls_session(distlock__stream *s, struct ssl_ctx_st *ctx, const char *name,
                          int insecure, const char *uri, int *status, char *err, size_t errlen)
{
    int fd = s->ctx->fd;
    pthread_once(&bio_once, bio_init_once);
    distlock__tls *tls = calloc(1, sizeof(*tls));
    SSL *ssl = tls && bio_meth ? SSL_new(ctx) : NULL;  /* holds its own reference to ctx */
    BIO *bio = ssl ? BIO_new(bio_meth) : NULL;
    if (bio == NULL) {
        SSL_free(ssl);
        free(tls);
        ERR_clear_error();
        *status = DISTLOCK_ENOMEM;
        snprintf(err, errlen, "%s: out of memory", uri);
        return -1;
    }
    BIO_set_fd(bio, fd, BIO_NOCLOSE);
    SSL_set_bio(ssl, bio, bio);
    SSL_set_connect_state(ssl);
    /* An IP address is checked against the certificate's IP entries and
     * not sent as SNI (RFC 6066). */
    const char *nm = name ? name : "";
    unsigned char ip[16];
    int is_ip = inet_pton(AF_INET, nm, ip) == 1 || inet_pton(AF_INET6, nm, ip) == 1;
    int ok = 1;
    if (!is_ip && nm[0])
        ok &= SSL_set_tlsext_host_name(ssl, nm) == 1;
    if (!insecure && nm[0]) {
        if (is_ip)
            ok &= X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), nm) == 1;
        else
            ok &= SSL_set1_host(ssl, nm) == 1;
    }
    if (!insecure && !nm[0]) {
        ok = 0;  /* nothing to check the certificate against: refuse */
    }
    if (!ok) {
        SSL_free(ssl);
        free(tls);
        ERR_clear_error();
        *status = DISTLOCK_EINVAL;
        snprintf(err, errlen, "%s: TLS: unusable server name \"%.100s\"", uri, nm);
        return -1;
    }
    tls->ssl = ssl;
    tls->want = POLLOUT;
    s->fn = &distlock__stream_tls;
    s->impl = tls;
    return 0;
}

int distlock__tls_start(distlock__stream *s, distlock__transport *t, int i, const char *peer,
                        const char *host, int *status, char *err, size_t errlen)
{
    const distlock__node_cfg *cfg = &t->nodes[i];
    pthread_mutex_lock(&t->mu);
    SSL_CTX *ctx = node_ctx(t, i, status, err, errlen);
    if (ctx)
        SSL_CTX_up_ref(ctx);  /* the options may change (and drop it) once mu is let go */
    const char *name = opt_or(cfg->tls.server_name, t->tls_opt[DISTLOCK__TLS_SERVER_NAME]);
    int insecure = node_insecure(t, cfg);
    /* The name checked (and sent as SNI) is the server name option, else
     * the host this connection was opened to. A Cluster node's cfg->host is
     * only its first seed: each master is checked against its own host (or,
     * given none, the address connected to), or whoever holds the seed's
     * certificate could stand in for every master. A Sentinel node has no
     * cfg->host: its master is checked against the sentinels' address. */
    const char *own = host ? host
                      : t->kind[i]->addressed && cfg->host ? cfg->host : peer;
    char namebuf[DISTLOCK__HOST_LEN];
    snprintf(namebuf, sizeof(namebuf), "%s", name ? name : own ? own : "");
    pthread_mutex_unlock(&t->mu);
    if (ctx == NULL)
        return -1;
    int rc = distlock__tls_session(s, ctx, namebuf, insecure, cfg->uri, status, err, errlen);
    SSL_CTX_free(ctx);
    return rc;
}

struct ssl_ctx_st *distlock__tls_ctx_new(distlock__transport *t, int i, char **server_name,
                                         int *insecure, int *status, char *err, size_t errlen)
{
    const distlock__node_cfg *cfg = &t->nodes[i];
    *server_name = NULL;
    pthread_mutex_lock(&t->mu);
    /* the warning, if any, is the node's own context's */
    SSL_CTX *ctx = build_ctx(t, i, 0, status, err, errlen);
    const char *name = opt_or(cfg->tls.server_name, t->tls_opt[DISTLOCK__TLS_SERVER_NAME]);
    *insecure = node_insecure(t, cfg);
    if (ctx && name && (*server_name = strdup(name)) == NULL) {
        *status = DISTLOCK_ENOMEM;
        snprintf(err, errlen, "%s: out of memory", cfg->uri);
        SSL_CTX_free(ctx);
        ctx = NULL;
    }
    pthread_mutex_unlock(&t->mu);
    return ctx;
}

void distlock__tls_ctx_free(struct ssl_ctx_st *ctx)
{
    SSL_CTX_free(ctx);
}

static void distlock__tls_free(distlock__tls *tls)
{
    if (tls == NULL)
        return;
    /* No SSL_shutdown: nothing is written (a forked child must not touch
     * the parent's session, and a closing node needs no goodbye). */
    SSL_free(tls->ssl);
    free(tls);
}

static int tls_pending(const distlock__tls *tls)
{
    return SSL_has_pending(tls->ssl);
}

static int tls_cert_refused(const distlock__stream *s)
{
    const distlock__tls *tls = s->impl;
    return !tls->up && SSL_get_verify_result(tls->ssl) != X509_V_OK;
}

static int tls_up(const distlock__stream *s)
{
    const distlock__tls *tls = s->impl;
    return tls->up;
}

static int tls_events(const distlock__stream *s)
{
    const distlock__tls *tls = s->impl;
    int have_output = s->ctx->obuf && s->ctx->obuf[0] != '\0';
    if (!tls->up)
        return tls->want;
    return POLLIN | (have_output ? POLLOUT : 0);
}

static int tls_handshake(distlock__tls *tls, char *err, size_t errlen)
{
    if (tls->up)
        return 1;
    ERR_clear_error();
    errno = 0;
    int rc = SSL_connect(tls->ssl);
    if (rc == 1) {
        tls->up = 1;
        return 1;
    }
    int code = SSL_get_error(tls->ssl, rc);
    if (code == SSL_ERROR_WANT_READ) {
        tls->want = POLLIN;
        return 0;
    }
    if (code == SSL_ERROR_WANT_WRITE) {
        tls->want = POLLOUT;
        return 0;
    }
    ssl_reason(tls->ssl, rc, code, err, errlen);
    return -1;
}

/* After the handshake: the reason, with a hint while nothing was received
 * yet. With TLS 1.3 a server that wants a client certificate says so after
 * our handshake is done, and its alert is often lost to the reset that our
 * first request causes. */
static void io_reason(distlock__tls *tls, int rc, int code, char *err, size_t errlen)
{
    ssl_reason(tls->ssl, rc, code, err, errlen);
    if (!tls->got && strstr(err, "certificate") == NULL) {
        size_t l = strlen(err);
        snprintf(err + l, errlen - l, " right after the handshake (client certificate "
                                      "required? tls_cert, tls_key)");
    }
}

/* SSL_get_error reads the thread's error queue, which must be empty
 * before each I/O call; ERR_clear_error costs ~840 instructions even on an
 * empty queue (7% of a TLS pair's), ERR_peek_error a fraction: clear only
 * what someone left (every failure here clears after itself). */
static void queue_empty(void)
{
    if (ERR_peek_error() != 0)
        ERR_clear_error();
}

static ssize_t tls_send(distlock__tls *tls, const char *buf, size_t len, char *err,
                        size_t errlen)
{
    queue_empty();
    errno = 0;
    int rc = SSL_write(tls->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
    if (rc > 0)
        return rc;
    int code = SSL_get_error(tls->ssl, rc);
    if (code == SSL_ERROR_WANT_WRITE || code == SSL_ERROR_WANT_READ)
        return 0;
    io_reason(tls, rc, code, err, errlen);
    return -1;
}

static ssize_t tls_recv(distlock__tls *tls, char *buf, size_t len, char *err, size_t errlen)
{
    queue_empty();
    errno = 0;
    int rc = SSL_read(tls->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
    if (rc > 0) {
        tls->got = 1;
        return rc;
    }
    int code = SSL_get_error(tls->ssl, rc);
    if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE)
        return 0;
    if (code == SSL_ERROR_ZERO_RETURN || (code == SSL_ERROR_SYSCALL && errno == 0) ||
        (code == SSL_ERROR_SSL &&
         ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING)) {
        ERR_clear_error();
        snprintf(err, errlen, "Server closed the connection");
        return -2;
    }
    io_reason(tls, rc, code, err, errlen);
    return -1;
}

/* ------------------------------------------------------------ the stream */

/* A failure's reason: ssl_reason's longest (a reason and the hint), of
 * which the context's errstr keeps what fits. */
#define WHY_LEN 192

/* net.c's plain_write through the session: the handshake first (the
 * output waits for it), then SSL_write. */
static int tls_write(distlock__stream *s, int *done)
{
    redisContext *ctx = s->ctx;
    distlock__tls *tls = s->impl;
    char why[WHY_LEN];
    if (ctx->err)
        return REDIS_ERR;
    size_t len = sdslen(ctx->obuf);
    int hs = tls_handshake(tls, why, sizeof(why));
    if (hs < 0)
        return distlock__stream_fail(s, REDIS_ERR_IO, why);
    if (hs == 0)
        len = 0;  /* the output waits for the handshake */
    while (len > 0) {
        ssize_t n = tls_send(tls, ctx->obuf, len, why, sizeof(why));
        if (n < 0)
            return distlock__stream_fail(s, REDIS_ERR_IO, why);
        if (n == 0)
            break;
        distlock__stream_sent(s, (size_t)n);
        len = sdslen(ctx->obuf);
    }
    if (done)
        *done = sdslen(ctx->obuf) == 0;
    return REDIS_OK;
}

/* net.c's plain_read through the session. */
static int tls_read(distlock__stream *s)
{
    redisContext *ctx = s->ctx;
    distlock__tls *tls = s->impl;
    char *buf = distlock__stream_rbuf();
    char why[WHY_LEN];
    if (ctx->err)
        return REDIS_ERR;
    int hs = tls_handshake(tls, why, sizeof(why));
    if (hs < 0)
        return distlock__stream_fail(s, REDIS_ERR_IO, why);
    if (hs == 0)
        return REDIS_OK;
    /* Up: what waited for the handshake goes out now. */
    if (tls_write(s, NULL) != REDIS_OK)
        return REDIS_ERR;
    /* Everything OpenSSL has read from the socket is taken now: poll()
     * sees only the socket, not OpenSSL's buffer. What is still in the
     * socket wakes poll() again. */
    do {
        ssize_t n = tls_recv(tls, buf, DISTLOCK__STREAM_RBUF, why, sizeof(why));
        if (n == 0)
            return REDIS_OK;
        if (n < 0)
            return distlock__stream_fail(s, n == -2 ? REDIS_ERR_EOF : REDIS_ERR_IO, why);
        if (redisReaderFeed(ctx->reader, buf, (size_t)n) != REDIS_OK)
            return distlock__stream_fail(s, ctx->reader->err, ctx->reader->errstr);
    } while (tls_pending(tls));
    return REDIS_OK;
}

static void tls_free_impl(void *impl)
{
    distlock__tls_free(impl);
}

const distlock__stream_funcs distlock__stream_tls = {
    tls_write, tls_read, tls_events, tls_up, tls_cert_refused, tls_free_impl
};
