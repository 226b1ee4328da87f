/* sentinel_harness.c -- see sentinel_harness.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sentinel_harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One line from the script's stdout, within the deadline. */
static int read_line(rh_sentinels *s, char *line, size_t cap, long long deadline)
{
    for (;;) {
        char *nl = memchr(s->rbuf, '\n', s->rlen);
        if (nl) {
            size_t n = (size_t)(nl - s->rbuf);
            snprintf(line, cap, "%.*s", (int)n, s->rbuf);
            memmove(s->rbuf, nl + 1, s->rlen - n - 1);
            s->rlen -= n + 1;
            return 0;
        }
        if (s->rlen >= sizeof s->rbuf - 1) return -1;
        long long left = deadline - now_ms();
        if (left <= 0) return -1;
        struct pollfd pfd = { .fd = s->out_fd, .events = POLLIN };
        int r = poll(&pfd, 1, (int)left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        ssize_t got = read(s->out_fd, s->rbuf + s->rlen, sizeof s->rbuf - 1 - s->rlen);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return -1;
        s->rlen += (size_t)got;
    }
}

static int parse_ports(const char *line, const char *key, int *ports)
{
    const char *p = strstr(line, key);
    if (!p) return -1;
    p += strlen(key);
    for (int i = 0; i < 3; i++)
        ports[i] = 0;
    for (int i = 0; i < 3; i++) {
        char *end;
        ports[i] = (int)strtol(p, &end, 10);          /* port */
        if (*end != ':') return -1;
        strtol(end + 1, &end, 10);                    /* pid */
        if (*end != ',') break;
        p = end + 1;
    }
    return 0;
}

rh_sentinels *rh_sentinels_start(const rh_sentinels_opts *o)
{
    const char *script = getenv("DISTLOCK_SENTINELS_PY");
    if (!script || !*script) script = RH_SENTINELS_SCRIPT;
    const char *python = getenv("DISTLOCK_PYTHON");
    if (!python || !*python) python = "python3";
    char down[24], fo[24];
    snprintf(down, sizeof down, "%d", o && o->down_after_ms ? o->down_after_ms : 1000);
    snprintf(fo, sizeof fo, "%d", o && o->failover_timeout_ms ? o->failover_timeout_ms : 3000);
    char *argv[30], nrep[16], nsent[16], quorum[16], resync[16];
    int a = 0;
    argv[a++] = (char *)python;
    argv[a++] = (char *)script;
    argv[a++] = "--down-after-ms";
    argv[a++] = down;
    argv[a++] = "--failover-timeout-ms";
    argv[a++] = fo;
    if (o && o->data_pass) { argv[a++] = "--data-pass"; argv[a++] = (char *)o->data_pass; }
    if (o && o->sentinel_user) { argv[a++] = "--sentinel-user"; argv[a++] = (char *)o->sentinel_user; }
    if (o && o->sentinel_pass) { argv[a++] = "--sentinel-pass"; argv[a++] = (char *)o->sentinel_pass; }
    if (o && o->tls_dir) { argv[a++] = "--tls-dir"; argv[a++] = (char *)o->tls_dir; }
    if (o && o->data_ip) { argv[a++] = "--data-ip"; argv[a++] = (char *)o->data_ip; }
    if (o && o->data_cert) { argv[a++] = "--data-cert"; argv[a++] = (char *)o->data_cert; }
    snprintf(nrep, sizeof nrep, "%d", o && o->replicas ? (o->replicas < 0 ? 0 : o->replicas) : 2);
    snprintf(nsent, sizeof nsent, "%d", o && o->sentinels ? o->sentinels : 3);
    snprintf(quorum, sizeof quorum, "%d", o && o->quorum ? o->quorum : 2);
    argv[a++] = "--replicas";
    argv[a++] = nrep;
    argv[a++] = "--sentinels";
    argv[a++] = nsent;
    argv[a++] = "--quorum";
    argv[a++] = quorum;
    if (o && o->resync_delay_s > 0) {
        snprintf(resync, sizeof resync, "%d", o->resync_delay_s);
        argv[a++] = "--resync-delay-s";
        argv[a++] = resync;
    }
    argv[a] = NULL;

    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) return NULL;
    if (pipe2(out, O_CLOEXEC) != 0) { close(in[0]); close(in[1]); return NULL; }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) { close(in[0]); close(in[1]); close(out[0]); close(out[1]); return NULL; }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0) _exit(127);
        if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
            for (int fd = 3; fd < 1024; fd++) close(fd);
        }
        execvp(python, argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    rh_sentinels *s = calloc(1, sizeof *s);
    if (!s) { close(in[1]); close(out[0]); kill(pid, SIGKILL); waitpid(pid, NULL, 0); return NULL; }
    s->pid = pid;
    s->in_fd = in[1];
    s->out_fd = out[0];
    char line[1024];
    /* sentinels.py may start the group up to 3 times (40 s each at most) on
     * fresh ports when a start fails: its ready line can take that long. */
    if (read_line(s, line, sizeof line, now_ms() + 150000) != 0 || strncmp(line, "ready ", 6) != 0 ||
        parse_ports(line, "data=", s->data_port) != 0 ||
        parse_ports(line, "sentinels=", s->sentinel_port) != 0 || !strstr(line, "uri=")) {
        fprintf(stderr, "sentinels.py did not start: %s\n", line);
        rh_sentinels_stop(s);
        return NULL;
    }
    snprintf(s->uri, sizeof s->uri, "%s", strstr(line, "uri=") + 4);
    return s;
}

void rh_sentinels_stop(rh_sentinels *s)
{
    if (!s) return;
    close(s->in_fd);   /* EOF: the script stops the servers and exits */
    long long end = now_ms() + 10000;
    int reaped = 0;
    while (!reaped && now_ms() < end) {
        struct pollfd pfd = { .fd = s->out_fd, .events = POLLIN };
        char buf[256];
        if (poll(&pfd, 1, 100) > 0 && read(s->out_fd, buf, sizeof buf) <= 0) {
            reaped = waitpid(s->pid, NULL, 0) == s->pid;
        } else if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            reaped = 1;
        }
    }
    if (!reaped) { kill(s->pid, SIGKILL); waitpid(s->pid, NULL, 0); }
    close(s->out_fd);
    free(s);
}

int rh_sentinels_cmd(rh_sentinels *s, long timeout_ms, const char *fmt, ...)
{
    char cmd[256], line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof cmd - 1) return -1;
    cmd[n++] = '\n';
    if (write(s->in_fd, cmd, (size_t)n) != n) return -1;
    if (read_line(s, line, sizeof line, now_ms() + timeout_ms) != 0) {
        fprintf(stderr, "sentinels.py: no answer to %.*s\n", n - 1, cmd);
        return -1;
    }
    if (strncmp(line, "ok", 2) != 0) {
        fprintf(stderr, "sentinels.py: %.*s: %s\n", n - 1, cmd, line);
        return -1;
    }
    return line[2] == ' ' ? atoi(line + 3) : 0;
}

int rh_sentinels_master(rh_sentinels *s) { return rh_sentinels_cmd(s, 15000, "master"); }
int rh_sentinels_failover(rh_sentinels *s) { return rh_sentinels_cmd(s, 60000, "failover"); }
int rh_sentinels_kill(rh_sentinels *s, int port) { return rh_sentinels_cmd(s, 10000, "kill %d", port); }
int rh_sentinels_has(rh_sentinels *s, int port, const char *key, const char *value)
{
    return rh_sentinels_cmd(s, 10000, "has %d %s %s", port, key, value ? value : "-");
}

int rh_sentinels_wait_master_not(rh_sentinels *s, int old_port, long timeout_ms)
{
    return rh_sentinels_cmd(s, timeout_ms + 5000, "wait-master-not %d %ld", old_port, timeout_ms);
}

int rh_sentinels_signal(rh_sentinels *s, int port, int stop)
{
    return rh_sentinels_cmd(s, 10000, "%s %d", stop ? "stop" : "cont", port);
}
