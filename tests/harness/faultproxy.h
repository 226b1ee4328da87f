/*
 * faultproxy.h -- C side of tests/harness/faultproxy.py, the fault-injecting
 * TCP proxy (read the top of faultproxy.py for the full command protocol).
 *
 *     rh_cluster *rc = rh_start(3);
 *     fp_proxy *fp = fp_front(rc);              // listener L = node L
 *     distlock_client_new(fp_uris(fp), &c);     // the library talks to the proxy
 *     fp_cmd(fp, NULL, 0, "hold-match 1 up %s", hex);   // 0 once in effect
 *     ...
 *     fp_stop(fp);                               // kills and reaps the process
 *
 * The proxy is a child process (python3) that dies with the test process:
 * its stdin is a pipe from us (it exits at EOF) and it has PR_SET_PDEATHSIG
 * (note: that fires when the THREAD that called fp_start exits, so start it
 * from the main thread or a thread that outlives the proxy).
 *
 * A proxy handle may be used from several threads (one control connection
 * behind a mutex; a blocking wait-* command blocks the others meanwhile).
 * Environment: DISTLOCK_PYTHON (default python3), DISTLOCK_FAULTPROXY (path
 * of faultproxy.py; default: the one next to this file, compiled in).
 */
#ifndef DISTLOCK_FAULTPROXY_H
#define DISTLOCK_FAULTPROXY_H

#include <stddef.h>
#include "redis_harness.h"

#define FP_MAX_TARGETS 16

typedef struct fp_proxy fp_proxy;

/* Spawn a proxy in front of 127.0.0.1:target_ports[0..n). NULL (message on
 * stderr) on failure. */
fp_proxy *fp_start(const int *target_ports, int n);
/* A proxy in front of every node of rc, listener i -> node i. */
fp_proxy *fp_front(const rh_cluster *rc);
/* Stop the process (stdin EOF, then SIGKILL after 5 s), reap it, free.
 * NULL is a no-op. */
void fp_stop(fp_proxy *p);

/* Listening port of listener l (-1 if out of range), the control port. */
int fp_port(const fp_proxy *p, int l);
int fp_control_port(const fp_proxy *p);
int fp_count(const fp_proxy *p);
/* redis://127.0.0.1:LP0,... over every listener / the listeners in mask. */
const char *fp_uris(const fp_proxy *p);
const char *fp_uris_mask(const fp_proxy *p, unsigned mask, char *buf, size_t size);

/* Send one command (printf format, no newline), wait for its one-line answer.
 * 0 on "ok", -1 on "err ..." or I/O failure (the answer / reason goes to
 * reply when reply != NULL, and "err" answers are printed on stderr). */
int fp_cmd(fp_proxy *p, char *reply, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The "conns" answer, parsed. */
typedef struct fp_conn {
    int l, id;
    char state[16];
    long long up_bytes, down_bytes, held_up, held_down;
} fp_conn;
/* Connections of listener l (l < 0: all), at most max stored, ascending id.
 * Returns how many were stored, -1 on error. */
int fp_conns(fp_proxy *p, int l, fp_conn *out, int max);
/* Id of the newest live connection of listener l, -1 if none. */
int fp_last_conn(fp_proxy *p, int l);

/* One counter of the "stats" answer (conns, resets, held_bytes,
 * delayed_chunks, dropped_bytes, live), -1 on error. */
long long fp_stat(fp_proxy *p, const char *name);

/* Hex encoding of s (for hold-match), written to buf; returns buf. */
const char *fp_hex(const char *s, char *buf, size_t size);

#endif
