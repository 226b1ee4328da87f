/* faultproxy.c -- see faultproxy.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "faultproxy.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#ifndef FP_SCRIPT
#error "FP_SCRIPT (path of faultproxy.py) must be defined by the build"
#endif

/* Longest a control command may take: wait-* commands carry their own
 * timeouts, this only guards against a hung proxy. */
#define FP_IO_TIMEOUT_MS 300000

struct fp_proxy {
    pid_t pid;
    int stdin_fd;          /* write end of the proxy's stdin */
    int ctl_fd;
    int n;
    int control_port;
    int port[FP_MAX_TARGETS];
    char uris[FP_MAX_TARGETS * 40];
    pthread_mutex_t mu;
    char rbuf[8192];       /* bytes read from the control socket, not consumed */
    size_t rlen;
};

static long long now_ms(void) { return rh_now_ms(); }

/* Read one '\n'-terminated line from fd with a deadline; the line (without
 * the newline) goes to out. Leftover bytes stay in buf/len. 0 on success. */
static int read_line(int fd, char *buf, size_t cap, size_t *len, char *out, size_t outsz,
                     long long deadline)
{
    for (;;) {
        char *nl = memchr(buf, '\n', *len);
        if (nl) {
            size_t l = (size_t)(nl - buf);
            if (out && outsz) snprintf(out, outsz, "%.*s", (int)l, buf);
            memmove(buf, nl + 1, *len - l - 1);
            *len -= l + 1;
            return 0;
        }
        if (*len >= cap - 1) return -1;      /* line too long */
        long long left = deadline - now_ms();
        if (left <= 0) return -1;
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        int r = poll(&pfd, 1, left > 1000000 ? 1000000 : (int)left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        ssize_t got = read(fd, buf + *len, cap - 1 - *len);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) return -1;
        *len += (size_t)got;
    }
}

static int connect_control(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) { close(fd); return -1; }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void kill_and_reap(pid_t pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
}

fp_proxy *fp_start(const int *target_ports, int n)
{
    if (n < 1 || n > FP_MAX_TARGETS) {
        fprintf(stderr, "faultproxy: 1..%d targets, not %d\n", FP_MAX_TARGETS, n);
        return NULL;
    }
    const char *script = getenv("DISTLOCK_FAULTPROXY");
    if (!script || !*script) script = FP_SCRIPT;
    const char *python = getenv("DISTLOCK_PYTHON");
    if (!python || !*python) python = "python3";

    /* argv built before fork: the child only calls async-signal-safe functions. */
    char targets[FP_MAX_TARGETS][32];
    char *argv[3 + 2 * FP_MAX_TARGETS + 1];
    int a = 0;
    argv[a++] = (char *)python;
    argv[a++] = (char *)script;
    for (int i = 0; i < n; i++) {
        snprintf(targets[i], sizeof targets[i], "127.0.0.1:%d", target_ports[i]);
        argv[a++] = "--target";
        argv[a++] = targets[i];
    }
    argv[a] = NULL;

    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) { perror("faultproxy: pipe"); return NULL; }
    if (pipe2(out, O_CLOEXEC) != 0) {
        perror("faultproxy: pipe");
        close(in[0]); close(in[1]);
        return NULL;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        perror("faultproxy: fork");
        close(in[0]); close(in[1]); close(out[0]); close(out[1]);
        return NULL;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        /* dup2 clears FD_CLOEXEC on the new descriptors. */
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0) _exit(127);
        /* Nothing else of ours (hiredis sockets have no CLOEXEC): a socket the
         * test closes must really close, not live on in the proxy. */
        if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
            long max = sysconf(_SC_OPEN_MAX);
            for (int fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++) close(fd);
        }
        execvp(python, argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);

    fp_proxy *p = calloc(1, sizeof *p);
    if (!p) {
        close(in[1]); close(out[0]);
        kill_and_reap(pid);
        return NULL;
    }
    p->pid = pid;
    p->stdin_fd = in[1];
    p->ctl_fd = -1;
    p->n = n;
    pthread_mutex_init(&p->mu, NULL);

    char line[512], buf[1024];
    size_t len = 0;
    int ok = read_line(out[0], buf, sizeof buf, &len, line, sizeof line, now_ms() + 20000) == 0;
    close(out[0]);
    if (!ok || strncmp(line, "ready ", 6) != 0) {
        fprintf(stderr, "faultproxy: %s did not start (%s)\n", script, ok ? line : "no ready line");
        fp_stop(p);
        return NULL;
    }
    const char *cp = strstr(line, "control="), *lp = strstr(line, "listen=");
    if (!cp || !lp) {
        fprintf(stderr, "faultproxy: bad ready line: %s\n", line);
        fp_stop(p);
        return NULL;
    }
    p->control_port = atoi(cp + 8);
    const char *s = lp + 7;
    for (int i = 0; i < n; i++) {
        char *end;
        p->port[i] = (int)strtol(s, &end, 10);
        if (end == s || p->port[i] <= 0) {
            fprintf(stderr, "faultproxy: bad ready line: %s\n", line);
            fp_stop(p);
            return NULL;
        }
        s = *end == ',' ? end + 1 : end;
    }
    fp_uris_mask(p, (n >= 32 ? ~0u : (1u << n) - 1), p->uris, sizeof p->uris);
    p->ctl_fd = connect_control(p->control_port);
    if (p->ctl_fd < 0) {
        fprintf(stderr, "faultproxy: cannot connect to control port %d\n", p->control_port);
        fp_stop(p);
        return NULL;
    }
    return p;
}

fp_proxy *fp_front(const rh_cluster *rc)
{
    int ports[FP_MAX_TARGETS];
    if (!rc || rc->n > FP_MAX_TARGETS) return NULL;
    for (int i = 0; i < rc->n; i++) ports[i] = rc->node[i].port;
    return fp_start(ports, rc->n);
}

void fp_stop(fp_proxy *p)
{
    if (!p) return;
    if (p->ctl_fd >= 0) close(p->ctl_fd);
    if (p->stdin_fd >= 0) close(p->stdin_fd);   /* EOF: the proxy exits */
    if (p->pid > 0) {
        long long end = now_ms() + 5000;
        int reaped = 0;
        while (!reaped && now_ms() < end) {
            pid_t r = waitpid(p->pid, NULL, WNOHANG);
            if (r == p->pid || (r < 0 && errno == ECHILD)) reaped = 1;
            else rh_sleep_ms(5);
        }
        if (!reaped) kill_and_reap(p->pid);
    }
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int fp_port(const fp_proxy *p, int l) { return p && l >= 0 && l < p->n ? p->port[l] : -1; }
int fp_control_port(const fp_proxy *p) { return p ? p->control_port : -1; }
int fp_count(const fp_proxy *p) { return p ? p->n : 0; }
const char *fp_uris(const fp_proxy *p) { return p->uris; }

const char *fp_uris_mask(const fp_proxy *p, unsigned mask, char *buf, size_t size)
{
    size_t len = 0;
    if (!size) return buf;
    buf[0] = '\0';
    for (int i = 0; i < p->n; i++) {
        if (i < 32 && !(mask & (1u << i))) continue;
        int w = snprintf(buf + len, size - len, "%sredis://127.0.0.1:%d", len ? "," : "",
                         p->port[i]);
        if (w < 0 || (size_t)w >= size - len) break;
        len += (size_t)w;
    }
    return buf;
}

static int write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

int fp_cmd(fp_proxy *p, char *reply, size_t size, const char *fmt, ...)
{
    char cmd[4096], resp[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd - 1, fmt, ap);
    va_end(ap);
    if (reply && size) reply[0] = '\0';
    if (!p || n < 0 || (size_t)n >= sizeof cmd - 1) return -1;
    cmd[n++] = '\n';
    cmd[n] = '\0';

    pthread_mutex_lock(&p->mu);
    int rc = -1;
    if (p->ctl_fd >= 0 && write_all(p->ctl_fd, cmd, (size_t)n) == 0 &&
        read_line(p->ctl_fd, p->rbuf, sizeof p->rbuf, &p->rlen, resp, sizeof resp,
                  now_ms() + FP_IO_TIMEOUT_MS) == 0) {
        rc = strncmp(resp, "ok", 2) == 0 && (resp[2] == '\0' || resp[2] == ' ') ? 0 : -1;
        if (rc != 0)
            fprintf(stderr, "faultproxy: \"%.*s\" -> %s\n", n - 1, cmd, resp);
    } else {
        snprintf(resp, sizeof resp, "err io: control connection failed");
        fprintf(stderr, "faultproxy: \"%.*s\": control connection failed\n", n - 1, cmd);
        if (p->ctl_fd >= 0) { close(p->ctl_fd); p->ctl_fd = -1; }
        p->rlen = 0;
    }
    pthread_mutex_unlock(&p->mu);
    if (reply && size) snprintf(reply, size, "%s", resp);
    return rc;
}

int fp_conns(fp_proxy *p, int l, fp_conn *out, int max)
{
    char resp[8192];
    int rc = l >= 0 ? fp_cmd(p, resp, sizeof resp, "conns %d", l)
                    : fp_cmd(p, resp, sizeof resp, "conns");
    if (rc != 0) return -1;
    int k = 0;
    char *save = NULL;
    strtok_r(resp, " ", &save);                     /* "ok" */
    for (char *w = strtok_r(NULL, " ", &save); w && k < max; w = strtok_r(NULL, " ", &save)) {
        fp_conn c;
        memset(&c, 0, sizeof c);
        if (sscanf(w, "%d:%d:%15[^:]:%lld:%lld:%lld:%lld", &c.l, &c.id, c.state,
                   &c.up_bytes, &c.down_bytes, &c.held_up, &c.held_down) == 7)
            out[k++] = c;
    }
    return k;
}

int fp_last_conn(fp_proxy *p, int l)
{
    fp_conn c[256];
    int n = fp_conns(p, l, c, 256);
    return n > 0 ? c[n - 1].id : -1;
}

long long fp_stat(fp_proxy *p, const char *name)
{
    char resp[1024], key[64];
    if (fp_cmd(p, resp, sizeof resp, "stats") != 0) return -1;
    snprintf(key, sizeof key, " %s=", name);
    const char *at = strstr(resp, key);
    return at ? strtoll(at + strlen(key), NULL, 10) : -1;
}

const char *fp_hex(const char *s, char *buf, size_t size)
{
    static const char digits[] = "0123456789abcdef";
    size_t k = 0;
    if (!size) return buf;
    for (; *s && k + 2 < size; s++) {
        buf[k++] = digits[(unsigned char)*s >> 4];
        buf[k++] = digits[(unsigned char)*s & 15];
    }
    buf[k] = '\0';
    return buf;
}
