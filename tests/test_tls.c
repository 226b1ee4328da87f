/* test_tls.c -- rediss:// nodes against real `redis-server --tls-port`, with a
 * CA and certificates made for this run by tests/harness/certs.sh: locks,
 * waits and renewals over TLS on 1 and 3 nodes; verification on by default;
 * CA from the client option or the URI; mutual TLS; each bad certificate and
 * a plain server behind rediss:// failing with the node and the reason; a
 * handshake that never completes costing its connect timeout; fork; the
 * TLS files opened close-on-exec. */
#include "test_common.h"
#include "harness/faultproxy.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static char certs[64];
static rh_cluster *good;   /* 3 nodes, certificate valid for 127.0.0.1 */

static int group_setup(void **state)
{
    (void)state;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (rh_make_certs(certs, sizeof certs) != 0)
        return -1;
    good = rh_start_tls(3, certs, "server", 0);
    return good ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    rh_stop_all(good);
    rh_remove_certs(certs);
    return 0;
}

static int heal(void **state)
{
    (void)state;
    return rh_heal(good) == 0 ? 0 : -1;
}

static const char *path(const char *name, char *buf, size_t size)
{
    snprintf(buf, size, "%s/%s", certs, name);
    return buf;
}

/* Under valgrind (DISTLOCK_TEST_SLOW) a first handshake, OpenSSL's
 * initialisation included, takes longer than the default 1 s. */
static int slow(void)
{
    return getenv("DISTLOCK_TEST_SLOW") != NULL;
}

static distlock_client *tls_new(const char *uris)
{
    distlock_client *c = new_client(uris);
    /* Under valgrind a TLS handshake can take over a second. A connection
     * re-made inside a call (after a TLS option changed) is bounded by the
     * command timeout, a first one by the connect timeout: widen both. */
    if (slow()) {
        assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, 20000), DISTLOCK_OK);
        assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, 20000), DISTLOCK_OK);
    }
    return c;
}

static distlock_client *tls_client(const char *uris)
{
    char ca[128];
    distlock_client *c = tls_new(uris);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_TLS_CA_FILE, path("ca.crt", ca, sizeof ca)),
              DISTLOCK_OK);
    return c;
}

/* The detail of the last failure contains every one of the strings. */
static void assert_error_has(const char *a, const char *b)
{
    const char *e = distlock_last_error();
    if (strstr(e, a) == NULL || (b && strstr(e, b) == NULL)) {
        print_error("last_error \"%s\" lacks \"%s\"%s%s%s\n", e, a, b ? " or \"" : "",
                    b ? b : "", b ? "\"" : "");
        fail();
    }
    assert_null(strstr(e, "secret"));  /* never a password */
}

static void lock_unlock(distlock_client *c, rh_cluster *rc, int nodes)
{
    distlock_lock *l = NULL;
    assert_rc(distlock_acquire(c, "tls:k", 10000, 0, 0, &l), DISTLOCK_OK);
    /* a quorum: a first round may end before the last TLS handshake */
    assert_holding_quorum(rc, "tls:k", distlock_lock_token(l), nodes);
    assert_rc(distlock_extend(l, 20000), DISTLOCK_OK);
    int extended = 0;
    for (int i = 0; i < nodes; i++) extended += rh_pttl(rc, i, 0, "tls:k") > 10000;
    assert_true(extended >= nodes / 2 + 1);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    assert_holding(rc, "tls:k", NULL, 0);
    distlock_lock_free(l);
}

static void test_tls_one_node(void **state)
{
    (void)state;
    char uris[256];
    distlock_client *c = tls_client(rh_tls_uris_mask(good, 1, NULL, uris, sizeof uris));
    assert_string_equal(distlock_client_node_uri(c, 0), uris);
    lock_unlock(c, good, 1);
    distlock_client_free(c);
}

static void test_tls_three_nodes(void **state)
{
    (void)state;
    char uris[512];
    distlock_client *c = tls_client(rh_tls_uris_mask(good, 7, NULL, uris, sizeof uris));
    for (int k = 0; k < 3; k++)
        lock_unlock(c, good, 3);
    distlock_client_free(c);
}

/* The CA named in the URI (no client option) is used for that node. */
static void test_tls_uri_options(void **state)
{
    (void)state;
    char q[200], uris[512];
    snprintf(q, sizeof q, "tls_ca_file=%s/ca.crt", certs);
    distlock_client *c = tls_new(rh_tls_uris_mask(good, 7, q, uris, sizeof uris));
    lock_unlock(c, good, 3);
    distlock_client_free(c);
}

/* Verification is on by default: the test CA is not in the system store. */
static void test_tls_verify_default_system_store(void **state)
{
    (void)state;
    char uris[256];
    distlock_client *c = tls_new(rh_tls_uris_mask(good, 1, NULL, uris, sizeof uris));
    distlock_lock *l = NULL;
    assert_fails(distlock_acquire(c, "tls:k", 10000, 0, 0, &l), DISTLOCK_ECONN);
    assert_error_has(uris, "TLS: certificate verify failed: ");
    assert_holding(good, "tls:k", NULL, 0);
    distlock_client_free(c);
}

typedef struct waiter {
    distlock_client *c;
    int rc;
    long long got; /* rh_now_ms() when the acquire returned */
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    distlock_lock *l = NULL;
    w->rc = distlock_acquire(w->c, "tls:w", 10000, 8000 * slow_factor(), 0, &l);
    w->got = rh_now_ms();
    if (l) {
        distlock_release(l);
        distlock_lock_free(l);
    }
    return NULL;
}

/* A waiter over TLS gets the lock when the holder releases it (the
 * subscriber's connections are TLS too), and an auto-renewed lock outlives
 * its ttl. */
static void test_tls_wait_and_renew(void **state)
{
    (void)state;
    char uris[512];
    distlock_client *a = tls_client(rh_tls_uris_mask(good, 7, NULL, uris, sizeof uris));
    distlock_client *b = tls_client(uris);
    distlock_lock *l = NULL;
    /* The handshakes are done first: three of them under valgrind take
     * longer than the short ttl below. */
    connect_nodes(good, a, "tls:warm", 3);
    long ttl = 600 * slow_factor();
    assert_rc(distlock_acquire(a, "tls:w", ttl, 0, DISTLOCK_AUTO_RENEW, &l), DISTLOCK_OK);
    long long t0 = rh_now_ms();
    waiter w = { b, 1, 0 };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_thread, &w), 0);
    /* Held well past its ttl: renewed over TLS. */
    RH_WAIT_UNTIL(rh_now_ms() - t0 > 5 * ttl / 2, 6 * ttl);
    assert_false(distlock_lock_lost(l));
    assert_holding_quorum(good, "tls:w", distlock_lock_token(l), 3);
    assert_rc(distlock_release(l), DISTLOCK_OK);
    long long released = rh_now_ms();
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_rc(w.rc, DISTLOCK_OK);
    printf("waiter got the lock %lld ms after the release\n", w.got - released);
    distlock_lock_free(l);
    distlock_client_free(a);
    distlock_client_free(b);
}

static void expect_bad(const char *name, const char *query, const char *why1, const char *why2)
{
    rh_cluster *rc = rh_start_tls(1, certs, name, 0);
    assert_non_null(rc);
    char uris[512];
    distlock_client *c = tls_client(rh_tls_uris_mask(rc, 1, query, uris, sizeof uris));
    distlock_lock *l = NULL;
    assert_fails(distlock_acquire(c, "tls:bad", 10000, 0, 0, &l), DISTLOCK_ECONN);
    printf("%s: %s\n", name, distlock_last_error());
    assert_error_has(distlock_client_node_uri(c, 0), why1);
    if (why2)
        assert_error_has(why2, NULL);
    assert_null(l);
    assert_int_equal(rh_count_holding(rc, "tls:bad", NULL), 0);
    distlock_client_free(c);
    rh_stop_all(rc);
}

static void test_tls_expired(void **state)
{
    (void)state;
    expect_bad("expired", NULL, "certificate verify failed", "certificate has expired");
}

static void test_tls_wrong_name(void **state)
{
    (void)state;
    expect_bad("wrongname", NULL, "certificate verify failed", "IP address mismatch");
    char q[64];
    snprintf(q, sizeof q, "tls_server_name=localhost");
    expect_bad("wrongname", q, "certificate verify failed", "hostname mismatch");
}

static void test_tls_other_ca(void **state)
{
    (void)state;
    expect_bad("badca", NULL, "certificate verify failed",
               "unable to get local issuer certificate");
}

/* The name to check can be given: a certificate for wrong.example is
 * accepted for that name (client option). */
static void test_tls_server_name_option(void **state)
{
    (void)state;
    rh_cluster *rc = rh_start_tls(1, certs, "wrongname", 0);
    assert_non_null(rc);
    char uris[256];
    distlock_client *c = tls_client(rh_tls_uris_mask(rc, 1, NULL, uris, sizeof uris));
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_TLS_SERVER_NAME, "wrong.example"),
              DISTLOCK_OK);
    lock_unlock(c, rc, 1);
    distlock_client_free(c);
    rh_stop_all(rc);
}

/* The explicit opt-out: a certificate from an unknown CA is accepted with
 * DISTLOCK_OPT_TLS_VERIFY 0 and with tls_insecure=1 (a warning on stderr). */
static void test_tls_insecure(void **state)
{
    (void)state;
    rh_cluster *rc = rh_start_tls(1, certs, "badca", 0);
    assert_non_null(rc);
    char uris[256];
    distlock_client *c = tls_new(rh_tls_uris_mask(rc, 1, NULL, uris, sizeof uris));
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_TLS_VERIFY, 0), DISTLOCK_OK);
    lock_unlock(c, rc, 1);
    /* back on: refused again */
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_TLS_VERIFY, 1), DISTLOCK_OK);
    distlock_lock *l = NULL;
    assert_fails(distlock_acquire(c, "tls:k", 10000, 0, 0, &l), DISTLOCK_ECONN);
    distlock_client_free(c);
    c = tls_new(rh_tls_uris_mask(rc, 1, "tls_insecure=1", uris, sizeof uris));
    lock_unlock(c, rc, 1);
    distlock_client_free(c);
    assert_rc(distlock_client_set(c = tls_new(uris), DISTLOCK_OPT_TLS_VERIFY, 2),
              DISTLOCK_EINVAL);
    distlock_client_free(c);
    rh_stop_all(rc);
}

/* Mutual TLS: a server that requires a client certificate refuses us
 * without one (clear error), accepts us with one. */
static void test_tls_mutual(void **state)
{
    (void)state;
    rh_cluster *rc = rh_start_tls(1, certs, "server", 1);
    assert_non_null(rc);
    char uris[256], f[128];
    distlock_client *c = tls_client(rh_tls_uris_mask(rc, 1, NULL, uris, sizeof uris));
    distlock_lock *l = NULL;
    assert_fails(distlock_acquire(c, "tls:m", 10000, 0, 0, &l), DISTLOCK_ECONN);
    printf("no client cert: %s\n", distlock_last_error());
    assert_error_has(uris, "TLS: ");
    assert_true(strstr(distlock_last_error(), "certificate required") ||
                strstr(distlock_last_error(), "client certificate required?"));
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_TLS_CERT, path("client.crt", f, sizeof f)),
              DISTLOCK_OK);
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_TLS_KEY, path("client.key", f, sizeof f)),
              DISTLOCK_OK);
    lock_unlock(c, rc, 1);
    /* a key that does not belong to the certificate */
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_TLS_KEY, path("server.key", f, sizeof f)),
              DISTLOCK_OK);
    assert_fails(distlock_acquire(c, "tls:m", 10000, 0, 0, &l), DISTLOCK_EINVAL);
    assert_error_has(uris, "key values mismatch");
    /* a file that does not exist */
    assert_rc(distlock_client_set_str(c, DISTLOCK_OPT_TLS_KEY, "/nonexistent/k.pem"), DISTLOCK_OK);
    assert_fails(distlock_acquire(c, "tls:m", 10000, 0, 0, &l), DISTLOCK_EINVAL);
    assert_error_has(uris, "/nonexistent/k.pem");
    distlock_client_free(c);
    /* the same through the URI */
    char q[400];
    snprintf(q, sizeof q, "tls_ca_file=%s/ca.crt&tls_cert=%s/client.crt&tls_key=%s/client.key",
             certs, certs, certs);
    c = tls_new(rh_tls_uris_mask(rc, 1, q, uris, sizeof uris));
    lock_unlock(c, rc, 1);
    distlock_client_free(c);
    rh_stop_all(rc);
}

/* A plain server behind rediss:// (its plain port). */
static void test_tls_plain_server(void **state)
{
    (void)state;
    char uris[128];
    snprintf(uris, sizeof uris, "rediss://127.0.0.1:%d", good->node[0].port);
    distlock_client *c = tls_client(uris);
    const long to = slow() ? 5000 : 300;
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, to), DISTLOCK_OK);
    distlock_lock *l = NULL;
    long long t0 = rh_now_ms();
    assert_fails(distlock_acquire(c, "tls:p", 10000, 0, 0, &l), DISTLOCK_ECONN);
    printf("plain server: %s (%lld ms)\n", distlock_last_error(), rh_now_ms() - t0);
    assert_error_has(uris, "TLS");
    assert_error_has("does the server speak TLS on this port?", NULL);
    assert_true(rh_now_ms() - t0 < to + (slow() ? 3000 : 300));
    distlock_client_free(c);
}

/* A TLS node that accepts TCP but never answers the handshake (the proxy
 * holds the ClientHello) costs its connect timeout, not more; the other two
 * nodes make the quorum. */
static void test_tls_handshake_hang(void **state)
{
    (void)state;
    int ports[3] = { good->node[0].tls_port, good->node[1].tls_port, good->node[2].tls_port };
    fp_proxy *fp = fp_start(ports, 3);
    assert_non_null(fp);
    char uris[512];
    snprintf(uris, sizeof uris, "rediss://127.0.0.1:%d,rediss://127.0.0.1:%d,rediss://127.0.0.1:%d",
             fp_port(fp, 0), fp_port(fp, 1), fp_port(fp, 2));
    distlock_client *c = tls_client(uris);
    const long to = slow() ? 5000 : 400;
    char within[64];
    snprintf(within, sizeof within, "TLS handshake not done within %ld ms", to);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, to), DISTLOCK_OK);
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold 2 up"), 0);
    distlock_lock *l = NULL;
    long long t0 = rh_now_ms();
    assert_rc(distlock_acquire(c, "tls:h", 10000, 0, 0, &l), DISTLOCK_OK);
    long long took = rh_now_ms() - t0;
    printf("acquire with one node hung in the handshake: %lld ms\n", took);
    assert_true(took < to + (slow() ? 3000 : 300));
    assert_rc(distlock_release(l), DISTLOCK_OK);
    distlock_lock_free(l);
    distlock_client_free(c);

    /* One node, hung: fails after its connect timeout, saying so. */
    snprintf(uris, sizeof uris, "rediss://127.0.0.1:%d", fp_port(fp, 2));
    c = tls_client(uris);
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, to), DISTLOCK_OK);
    t0 = rh_now_ms();
    assert_fails(distlock_acquire(c, "tls:h", 10000, 0, 0, &l), DISTLOCK_ECONN);
    took = rh_now_ms() - t0;
    printf("one hung node: %lld ms: %s\n", took, distlock_last_error());
    assert_true(took >= to - 10 && took < to + (slow() ? 3000 : 300));
    assert_error_has(uris, within);
    distlock_client_free(c);
    fp_stop(fp);
}

/* A forked child locks over a TLS connection of its own (the parent's
 * session is dropped without a byte written, and the parent's connection
 * still works afterwards). */
static void test_tls_fork(void **state)
{
    (void)state;
    char uris[512];
    distlock_client *c = tls_client(rh_tls_uris_mask(good, 7, NULL, uris, sizeof uris));
    lock_unlock(c, good, 3);   /* the parent has TLS connections now */
    long long before[64];
    int nbefore = rh_lib_conn_ids(good, 0, NULL, before, 64);
    assert_true(nbefore >= 1);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGABRT, SIG_DFL);
        distlock_lock *l = NULL;
        if (distlock_acquire(c, "tls:child", 30000, 0, 0, &l) != DISTLOCK_OK)
            _exit(10);
        if (rh_count_holding(good, "tls:child", distlock_lock_token(l)) < 2)
            _exit(11);
        if (distlock_release(l) != DISTLOCK_OK)
            _exit(12);
        distlock_lock_free(l);
        distlock_client_free(c);
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* The child wrote nothing on the parent's sessions (a close_notify
     * would have made the server close them): every connection the parent
     * had is still open on the server, after the child's own round trips. */
    long long after[64];
    int nafter = rh_lib_conn_ids(good, 0, NULL, after, 64);
    for (int i = 0; i < nbefore; i++) {
        int found = 0;
        for (int j = 0; j < nafter; j++)
            found |= after[j] == before[i];
        if (!found) {
            print_error("the parent's connection id %lld is gone after the child ran\n", before[i]);
            fail();
        }
    }
    lock_unlock(c, good, 3);   /* the parent's sessions are intact */
    distlock_client_free(c);
}

/* A TLS connection that owes a reply past its timeout (the proxy holds it
 * both ways) is replaced on the next call: a new TLS session, CLIENT KILL
 * ID of the stuck one, then the call. The stuck
 * connection's release, delivered at last, does not run. */
static void test_tls_stuck_connection_replaced(void **state)
{
    (void)state;
    int port = good->node[0].tls_port;
    fp_proxy *fp = fp_start(&port, 1);
    assert_non_null(fp);
    char uris[128], rep[256];
    snprintf(uris, sizeof uris, "rediss://127.0.0.1:%d", fp_port(fp, 0));
    distlock_client *c = tls_client(uris);
    const long to = slow() ? 5000 : 300;
    assert_rc(distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, to), DISTLOCK_OK);
    assert_rc(distlock_acquire_token(c, "tls:stuck", 30000, "tls-stuck", 0, NULL), DISTLOCK_OK);
    int stuck = fp_last_conn(fp, 0);
    assert_true(stuck > 0);
    assert_int_equal(fp_cmd(fp, NULL, 0, "hold 0:%d", stuck), 0);
    long long t0 = rh_now_ms();
    assert_fails(distlock_release_token(c, "tls:stuck", "tls-stuck"), DISTLOCK_ECONN);
    printf("# stuck TLS connection: release ECONN in %lld ms\n", rh_now_ms() - t0);
    t0 = rh_now_ms();
    int rc = distlock_acquire_token(c, "tls:stuck:next", 30000, "tls-stuck", 0, NULL);
    printf("# next call over a new TLS connection: %d in %lld ms (\"%s\")\n", rc,
           rh_now_ms() - t0, rc == 0 ? "" : distlock_last_error());
    assert_rc(rc, DISTLOCK_OK);
    /* the stuck one's release, delivered now, must not run */
    if (fp_cmd(fp, rep, sizeof rep, "unhold 0:%d", stuck) != 0)
        assert_non_null(strstr(rep, "no connection"));
    assert_int_equal(fp_cmd(fp, NULL, 0, "wait-closed 0:%d 3000", stuck), 0);
    assert_holding(good, "tls:stuck", "tls-stuck", 1);
    assert_rc(distlock_release_token(c, "tls:stuck", "tls-stuck"), DISTLOCK_OK);
    assert_rc(distlock_release_token(c, "tls:stuck:next", "tls-stuck"), DISTLOCK_OK);
    distlock_client_free(c);
    fp_stop(fp);
}

/* Every opening of a file under the test's certificate directory while
 * files_counted is set: how many, and how many without close-on-exec
 * (O_CLOEXEC, or fopen's "e"), each of which a fork and exec on another
 * thread would hand to the program executed. The definitions here take the
 * place of libc's for the library and OpenSSL (the executable's symbols
 * come first); they open the file themselves or pass it on to the next
 * definition (ASan's, then libc's). */
static atomic_int files_counted, files_opened, files_inheritable;

static void file_opened(const char *file, int cloexec)
{
    if (!atomic_load(&files_counted) || strncmp(file, certs, strlen(certs)) != 0)
        return;
    atomic_fetch_add(&files_opened, 1);
    if (!cloexec) {
        atomic_fetch_add(&files_inheritable, 1);
        printf("# opened without close-on-exec: %s\n", file);
    }
}

static FILE *fopen_as(const char *name, const char *file, const char *mode)
{
    FILE *(*next)(const char *, const char *) =
        (FILE *(*)(const char *, const char *))dlsym(RTLD_NEXT, name);
    FILE *f = next(file, mode);
    if (f)
        file_opened(file, strchr(mode, 'e') != NULL);
    return f;
}

static int openat_counted(int dir, const char *file, int flags, va_list ap)
{
    mode_t mode = (flags & (O_CREAT | O_TMPFILE)) ? va_arg(ap, mode_t) : 0;
    int fd = (int)syscall(SYS_openat, dir, file, flags, mode);
    if (fd >= 0)
        file_opened(file, (flags & O_CLOEXEC) != 0);
    return fd;
}

/* Both spellings of each: OpenSSL calls fopen and fopen64, open; this
 * file's <stdio.h> may map one to the other, hence the names in asm. */
FILE *counted_fopen(const char *file, const char *mode) __asm__("fopen");
FILE *counted_fopen64(const char *file, const char *mode) __asm__("fopen64");
int counted_open(const char *file, int flags, ...) __asm__("open");
int counted_open64(const char *file, int flags, ...) __asm__("open64");
int counted_openat(int dir, const char *file, int flags, ...) __asm__("openat");
int counted_openat64(int dir, const char *file, int flags, ...) __asm__("openat64");

FILE *counted_fopen(const char *file, const char *mode)
{
    return fopen_as("fopen", file, mode);
}

FILE *counted_fopen64(const char *file, const char *mode)
{
    return fopen_as("fopen64", file, mode);
}

#define COUNTED_OPEN(dir)                                   \
    va_list ap;                                             \
    va_start(ap, flags);                                    \
    int fd = openat_counted((dir), file, flags, ap);        \
    va_end(ap);                                             \
    return fd

int counted_open(const char *file, int flags, ...) { COUNTED_OPEN(AT_FDCWD); }
int counted_open64(const char *file, int flags, ...) { COUNTED_OPEN(AT_FDCWD); }
int counted_openat(int dir, const char *file, int flags, ...) { COUNTED_OPEN(dir); }
int counted_openat64(int dir, const char *file, int flags, ...) { COUNTED_OPEN(dir); }

/* The files a TLS client reads (its CA file or CA directory, its
 * certificate and its private key) are close-on-exec from their opening,
 * as its sockets are: a program another thread forks and executes while a
 * client builds its TLS context must not inherit a descriptor of the
 * client's private key. */
static void test_tls_files_opened_close_on_exec(void **state)
{
    (void)state;
    rh_cluster *rc = rh_start_tls(1, certs, "server", 1);
    assert_non_null(rc);
    /* a CA directory as c_rehash makes it: the CA under its subject hash */
    char cmd[512], q[600], uris[256];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/cadir && cp %s/ca.crt %s/cadir/ && "
             "openssl rehash %s/cadir", certs, certs, certs, certs);
    assert_int_equal(system(cmd), 0);
    atomic_store(&files_opened, 0);
    atomic_store(&files_inheritable, 0);
    atomic_store(&files_counted, 1);
    for (int dir = 0; dir < 2; dir++) {
        snprintf(q, sizeof q, "%s=%s/%s&tls_cert=%s/client.crt&tls_key=%s/client.key",
                 dir ? "tls_ca_dir" : "tls_ca_file", certs, dir ? "cadir" : "ca.crt", certs,
                 certs);
        distlock_client *c = tls_new(rh_tls_uris_mask(rc, 1, q, uris, sizeof uris));
        lock_unlock(c, rc, 1);
        distlock_client_free(c);
    }
    atomic_store(&files_counted, 0);
    int opened = atomic_load(&files_opened), inheritable = atomic_load(&files_inheritable);
    printf("# %d TLS file opening(s) by clients with a CA file, a CA directory, a certificate "
           "and a key; %d of them without close-on-exec\n", opened, inheritable);
    assert_true(opened >= 6);   /* CA, certificate and key, for each client */
    assert_int_equal(inheritable, 0);
    rh_stop_all(rc);
}

/* A CA directory (tls_ca_dir, laid out by `openssl rehash`; the library
 * looks its files up itself, to open them close-on-exec) trusts exactly
 * what the same CA file does: the CA's server verifies; a server of
 * another CA, one whose certificate names another host, and an expired
 * one are refused with OpenSSL's reasons, as with a CA file; an empty
 * directory trusts nothing. */
static void test_tls_ca_dir_trusts_what_its_ca_file_does(void **state)
{
    (void)state;
    char cmd[640], q[600], uris[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s/trustdir %s/emptydir && mkdir -p %s/trustdir "
             "%s/emptydir && cp %s/ca.crt %s/trustdir/ && openssl rehash %s/trustdir",
             certs, certs, certs, certs, certs, certs, certs);
    assert_int_equal(system(cmd), 0);
    snprintf(q, sizeof q, "tls_ca_dir=%s/trustdir", certs);

    rh_cluster *rc = rh_start_tls(1, certs, "server", 0);
    assert_non_null(rc);
    distlock_client *c = tls_new(rh_tls_uris_mask(rc, 1, q, uris, sizeof uris));
    lock_unlock(c, rc, 1);
    distlock_client_free(c);
    rh_stop_all(rc);

    static const struct { const char *name, *why; } bad[] = {
        { "badca", "unable to get local issuer certificate" },
        { "wrongname", "IP address mismatch" },
        { "expired", "certificate has expired" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        rc = rh_start_tls(1, certs, bad[k].name, 0);
        assert_non_null(rc);
        c = tls_new(rh_tls_uris_mask(rc, 1, q, uris, sizeof uris));
        distlock_lock *l = NULL;
        assert_fails(distlock_acquire(c, "tls:bad", 10000, 0, 0, &l), DISTLOCK_ECONN);
        printf("# CA directory, %s: %s\n", bad[k].name, distlock_last_error());
        assert_error_has("certificate verify failed", bad[k].why);
        assert_int_equal(rh_count_holding(rc, "tls:bad", NULL), 0);
        distlock_client_free(c);
        rh_stop_all(rc);
    }

    snprintf(q, sizeof q, "tls_ca_dir=%s/emptydir", certs);
    rc = rh_start_tls(1, certs, "server", 0);
    assert_non_null(rc);
    c = tls_new(rh_tls_uris_mask(rc, 1, q, uris, sizeof uris));
    distlock_lock *l = NULL;
    assert_fails(distlock_acquire(c, "tls:bad", 10000, 0, 0, &l), DISTLOCK_ECONN);
    printf("# empty CA directory: %s\n", distlock_last_error());
    /* (the server sends its chain up to the CA: "self-signed certificate in
     * certificate chain" then, whatever the library) */
    assert_error_has("certificate verify failed", NULL);
    distlock_client_free(c);
    rh_stop_all(rc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_tls_one_node, heal),
        cmocka_unit_test_setup(test_tls_three_nodes, heal),
        cmocka_unit_test_setup(test_tls_uri_options, heal),
        cmocka_unit_test_setup(test_tls_verify_default_system_store, heal),
        cmocka_unit_test_setup(test_tls_wait_and_renew, heal),
        cmocka_unit_test_setup(test_tls_expired, heal),
        cmocka_unit_test_setup(test_tls_wrong_name, heal),
        cmocka_unit_test_setup(test_tls_other_ca, heal),
        cmocka_unit_test_setup(test_tls_server_name_option, heal),
        cmocka_unit_test_setup(test_tls_insecure, heal),
        cmocka_unit_test_setup(test_tls_mutual, heal),
        cmocka_unit_test_setup(test_tls_plain_server, heal),
        cmocka_unit_test_setup(test_tls_handshake_hang, heal),
        cmocka_unit_test_setup(test_tls_fork, heal),
        cmocka_unit_test_setup(test_tls_stuck_connection_replaced, heal),
        cmocka_unit_test_setup(test_tls_files_opened_close_on_exec, heal),
        cmocka_unit_test_setup(test_tls_ca_dir_trusts_what_its_ca_file_does, heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
