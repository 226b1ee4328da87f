/*
 * chaos.c -- randomized safety checker for libdistlock.
 *
 * For each configuration (3 and 5 nodes) it starts persistent redis-servers
 * (appendonly yes + appendfsync always: a node killed and restarted keeps
 * what it acknowledged, Redlock's documented assumption), puts the fault
 * proxy (tests/harness/faultproxy.py) in front of them, and lets several
 * worker PROCESSES (fork), each with several threads, contend on a few keys
 * through the public API while the main thread injects random faults:
 * per-connection delays, holds then unholds, detaches, a "stale undo"
 * sequence (hold a majority's connections, detach them, let the clients
 * reconnect and win, then deliver the held bytes), partitions of one node,
 * resets, resets in the middle of a reply, slow accepts, SIGKILL + restart
 * and SIGSTOP/SIGCONT of a node.
 *
 * Workers use plain, fencing (try and waiting), auto-renewed and fair
 * handles, and the token pair distlock_acquire_token/release_token with ONE
 * token per thread reused across every call (as the PHP compatibility
 * functions allow a caller to do).
 *
 * A fenced resource in shared memory (MAP_SHARED + a process-shared robust
 * mutex, for the checker's own bookkeeping) records every critical section:
 * key, holder, enter time, the lease's valid-until (monotonic), fence, exit
 * time. The run FAILS on
 *   overlap        two holders of one key inside at once while both leases
 *                  are valid (a holder past its lease is counted as
 *                  "overran": that is what fences are for);
 *   stale fence    a holder within its lease presenting a fence <= the
 *                  highest fence the resource already accepted for the key
 *                  from another section;
 *   held but gone  right after an acquire returned OK, and again just before
 *                  the release while the lease is valid, the nodes (read
 *                  directly with hiredis, bypassing the proxy) holding our
 *                  token + the nodes down/paused/partitioned/unreachable
 *                  during the check are fewer than the quorum. A check that
 *                  ends after the lease's validity is exempt.
 *
 * Usage: test_chaos [--seed S] [--seconds T] [--nodes 3,5] [--procs P] [--threads K]
 *                   [--fault-rate X]  (fault frequency multiplier; 0: no faults, a baseline)
 *                   [--token-reuse all|retries|none]  (the token pair's token: one per
 *                   thread for every call (default), fresh after each section, or fresh
 *                   for every call)
 *                   [--faults delay,hold,...]  (only these fault kinds; names as printed)
 *                   [--no-wait]  (handles only try: no retries inside distlock_acquire)
 *   Environment: DISTLOCK_CHAOS_SECONDS (per configuration, default 24),
 *   DISTLOCK_CHAOS_SEED, DISTLOCK_CHAOS_FAULTS, DISTLOCK_CHAOS_TOKEN_REUSE (as
 *   the options; the options win). The seed is printed; --seed S replays the same
 *   fault schedule and workload choices (timing makes the interleaving
 *   differ, so a replay reproduces the conditions, not the exact run).
 *
 * Prints one line per configuration:
 *   chaos: nodes=3 seed=.. sections=N (...) faults=M (delay=.. ...) overlaps=0
 *          stale_fences=0 held_but_gone=0 overran=K ...
 * and details of the first violations. Exit status 0 only without
 * violations (and with a workload that actually ran).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <hiredis/hiredis.h>

#include "distlock.h"
#include "harness/redis_harness.h"
#include "harness/faultproxy.h"

#define MAXN 5
#define NKEYS 4
#define MAX_INSIDE 48
#define MAX_RECORDS 65536
#define MAX_LOG 16
#define LOG_LEN 3000
#define FLOG_N 16
#define FLOG_LEN 160
#define MAX_PROCS 8
#define MAX_THREADS 8
#define HIST_N 8

/* ------------------------------------------------------------ utilities */

static long long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static void sleep_us(long long us)
{
    if (us <= 0) return;
    struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000L };
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

/* splitmix64: small, seedable, good enough for a fault schedule. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static long rnd(uint64_t *s, long n) { return n <= 0 ? 0 : (long)(rng_next(s) % (uint64_t)n); }
static long rrange(uint64_t *s, long lo, long hi) { return lo + rnd(s, hi - lo + 1); }

/* Default drift (DISTLOCK_OPT_DRIFT_PPM 10000, DRIFT_MIN_MS 2). */
static long drift_ms(long ttl) { return ttl / 100 + 2; }

/* ------------------------------------------------------------ shared state */

enum kind { K_TOKEN, K_FENCE, K_FENCE_WAIT, K_PLAIN, K_RENEW, K_FAIR, K_COUNT };
static const char *kind_name[K_COUNT] = { "token", "fence", "fence_wait", "plain", "renew",
                                          "fair" };

enum fault {
    F_DELAY, F_HOLD, F_STALE_UNDO, F_DETACH, F_PARTITION, F_RESET, F_RESET_MID, F_SLOW_ACCEPT,
    F_KILL, F_PAUSE, F_COUNT
};
static const char *fault_name[F_COUNT] = { "delay", "hold", "stale_undo", "detach", "partition",
                                           "reset", "reset_mid", "slow_accept", "kill", "pause" };
/* Relative weights of the injector's choices (--faults keeps a subset). */
static int fault_weight[F_COUNT] = { 14, 9, 16, 5, 5, 6, 7, 4, 4, 5 };

typedef struct section {
    long long id;
    int key, proc, thread, kind;
    int64_t fence;
    long long t_enter, t_exit, valid_until;  /* us, monotonic; t_exit 0 while inside */
    long long flagged[4];                    /* ids already reported overlapping with it */
    long acq_ms, wait_ms;                    /* the acquire call's duration, its wait budget */
    int gone;                                /* a held check already failed */
    int victim;                              /* counted in victims[] */
    char token[12];                          /* prefix, for the report */
} section;

typedef struct keystate {
    int inside[MAX_INSIDE];   /* slots of sections inside, -1 free */
    int64_t max_fence;        /* highest fence the resource accepted */
    long long max_fence_sec;  /* section that presented it */
} keystate;

typedef struct shared {
    pthread_mutex_t mu;
    _Atomic int stop;
    int n, quorum;
    long long t_start;
    int ports[MAXN];          /* the redis-servers themselves (not the proxy) */
    int faulty[MAXN];         /* killed / paused / partitioned right now */
    unsigned epoch[MAXN];     /* bumped on every change of faulty[i] */
    keystate key[NKEYS];
    long long nsec;
    /* counters */
    long long sections, by_kind[K_COUNT];
    long long victims[K_COUNT];   /* sections whose lease was broken, by kind */
    long long acq_ok, acq_notacq, acq_err, rel_ok, rel_notowner, rel_err;
    long long acq_errs[9];    /* by -status: ECONN, ETIMEDOUT, ENOQUORUM, ... */
    long long overlaps, stale_fences, held_but_gone, overran, fenced_off, fence_writes;
    long long checks, checks_exempt, lost;
    int nlog;
    char log[MAX_LOG][LOG_LEN];
    int flog_next;
    char flog[FLOG_N][FLOG_LEN];   /* the injector's recent actions */
    section sec[MAX_RECORDS];
} shared;

static shared *S;

static void sh_lock(void)
{
    int r = pthread_mutex_lock(&S->mu);
    if (r == EOWNERDEAD)   /* a worker was SIGKILLed holding it (end of run) */
        pthread_mutex_consistent(&S->mu);
}
static void sh_unlock(void) { pthread_mutex_unlock(&S->mu); }

static double rel_s(long long t) { return (double)(t - S->t_start) / 1e6; }

/* Append a violation report (mutex held). */
static void vlog_locked(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void vlog_locked(const char *fmt, ...)
{
    if (S->nlog >= MAX_LOG) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(S->log[S->nlog++], LOG_LEN, fmt, ap);
    va_end(ap);
}

/* The injector's recent actions, oldest first, into buf. Mutex held. */
static void recent_faults_locked(char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int k = 0; k < FLOG_N && off < size; k++) {
        const char *e = S->flog[(S->flog_next + k) % FLOG_N];
        if (e[0])
            off += (size_t)snprintf(buf + off, size - off, "\n      %s", e);
    }
}

static void flog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void flog(const char *fmt, ...)
{
    char line[FLOG_LEN];
    va_list ap;
    va_start(ap, fmt);
    int k = snprintf(line, sizeof line, "%7.3f ", rel_s(now_us()));
    vsnprintf(line + k, sizeof line - (size_t)k, fmt, ap);
    va_end(ap);
    sh_lock();
    snprintf(S->flog[S->flog_next], FLOG_LEN, "%s", line);
    S->flog_next = (S->flog_next + 1) % FLOG_N;
    sh_unlock();
}

static void describe(const section *s, char *buf, size_t size)
{
    char ex[32];
    if (s->t_exit) snprintf(ex, sizeof ex, "%.3f", rel_s(s->t_exit));
    else snprintf(ex, sizeof ex, "(inside)");
    snprintf(buf, size, "#%lld p%d.t%d %s tok=%s.. acquire took %ld ms (wait %ld) enter=%.3f "
             "valid_until=%.3f exit=%s fence=%" PRId64,
             s->id, s->proc, s->thread, kind_name[s->kind], s->token, s->acq_ms, s->wait_ms,
             rel_s(s->t_enter), rel_s(s->valid_until), ex, s->fence);
}

/* The section whose lease was broken: the holder found its key gone, or of
 * two overlapping holders the one inside first. Mutex held. */
static void victim_locked(section *s)
{
    if (!s->victim) {
        s->victim = 1;
        S->victims[s->kind]++;
    }
}

static int already_flagged(const section *a, const section *b)
{
    for (int k = 0; k < 4; k++)
        if (a->flagged[k] == b->id || b->flagged[k] == a->id) return 1;
    return 0;
}
static void flag_pair(section *a, const section *b)
{
    for (int k = 0; k < 4; k++)
        if (a->flagged[k] == 0) { a->flagged[k] = b->id; return; }
}

/* s's lease is (again) valid from `now`: any other holder of the key inside
 * with a valid lease is an overlap. Mutex held. */
static void scan_overlaps_locked(section *s, long long now)
{
    keystate *ks = &S->key[s->key];
    for (int k = 0; k < MAX_INSIDE; k++) {
        int o = ks->inside[k];
        if (o < 0 || &S->sec[o] == s) continue;
        section *x = &S->sec[o];
        if (x->valid_until > now && s->valid_until > now && !already_flagged(x, s)) {
            char a[300], b[300], f[FLOG_N * (FLOG_LEN + 8)];
            flag_pair(s, x);
            S->overlaps++;
            victim_locked(x->t_enter <= s->t_enter ? x : s);
            describe(x, a, sizeof a);
            describe(s, b, sizeof b);
            recent_faults_locked(f, sizeof f);
            vlog_locked("OVERLAP on key %d at %.3f s: both inside with valid leases\n"
                        "    first:  %s\n    second: %s\n    recent faults:%s",
                        s->key, rel_s(now), a, b, f);
        }
    }
}

/* The fenced resource: accept a fence greater than any seen; a holder within
 * its lease presenting a fence not above the highest accepted from another
 * section is a violation; a holder past its lease is simply fenced off.
 * Mutex held. */
static void present_fence_locked(section *s, long long now)
{
    keystate *ks = &S->key[s->key];
    S->fence_writes++;
    if (s->fence > ks->max_fence) {
        ks->max_fence = s->fence;
        ks->max_fence_sec = s->id;
    } else if (s->fence == ks->max_fence && ks->max_fence_sec == s->id) {
        /* our own earlier write */
    } else if (now < s->valid_until) {
        char a[300], f[FLOG_N * (FLOG_LEN + 8)];
        S->stale_fences++;
        describe(s, a, sizeof a);
        recent_faults_locked(f, sizeof f);
        vlog_locked("STALE FENCE on key %d at %.3f s: fence %" PRId64 " <= %" PRId64
                    " (accepted from #%lld) within the lease\n    holder: %s\n    recent faults:%s",
                    s->key, rel_s(now), s->fence, ks->max_fence, ks->max_fence_sec, a, f);
    } else {
        S->fenced_off++;
    }
}

/* ------------------------------------------------------------ workers */

typedef struct hist {
    char op;        /* A acquire_token, R release_token */
    int rc;
    long long t;    /* start, us */
    long ms;        /* duration */
} hist;

typedef struct wctx {
    int proc, thread;
    int token_role;               /* mostly the token pair, with one reused token */
    uint64_t rng;
    distlock_client *c;
    redisContext *dc[MAXN];       /* direct connections to the servers */
    char token[40];
    char keyname[NKEYS][32];
    hist h[HIST_N];
    int hn;
    long cmd_timeout;
} wctx;

static void hist_push(wctx *w, char op, int rc, long long t0)
{
    hist *e = &w->h[w->hn++ % HIST_N];
    e->op = op;
    e->rc = rc;
    e->t = t0;
    e->ms = (long)((now_us() - t0) / 1000);
}

static void hist_str(const wctx *w, char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    int first = w->hn > HIST_N ? w->hn - HIST_N : 0;
    for (int k = first; k < w->hn && off < size; k++) {
        const hist *e = &w->h[k % HIST_N];
        off += (size_t)snprintf(buf + off, size - off, " %s@%.3f(%ldms)=%s",
                                e->op == 'A' ? "acquire_token" : "release_token", rel_s(e->t),
                                e->ms, e->rc == 0 ? "OK" : distlock_strerror(e->rc));
    }
}

/* GET key on node i directly: 1 (value in buf), 0 (absent), -1 (unreachable). */
static int direct_get(wctx *w, int i, const char *key, char *buf, size_t size)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        int reused = w->dc[i] != NULL;
        if (!w->dc[i]) {
            struct timeval tv = { 0, 150000 };
            redisContext *ctx = redisConnectWithTimeout("127.0.0.1", S->ports[i], tv);
            if (!ctx || ctx->err) {
                if (ctx) redisFree(ctx);
                return -1;
            }
            redisSetTimeout(ctx, tv);
            w->dc[i] = ctx;
        }
        redisReply *r = redisCommand(w->dc[i], "GET %s", key);
        if (!r) {
            redisFree(w->dc[i]);
            w->dc[i] = NULL;
            if (reused) continue;   /* a connection the server closed (restart) */
            return -1;
        }
        int ret = -1;
        if (r->type == REDIS_REPLY_NIL) {
            ret = 0;
        } else if (r->type == REDIS_REPLY_STRING) {
            ret = 1;
            snprintf(buf, size, "%.*s", (int)r->len, r->str);
        }
        freeReplyObject(r);
        return ret;
    }
    return -1;
}

/* The "held but gone" check: our token on enough nodes for a quorum, counting
 * nodes that are (or became) down, paused, partitioned or unreachable during
 * the check as holding. Only a check that completes within the lease counts. */
static void check_held(wctx *w, int key, const char *token, long long valid_until, int slot,
                       const char *where)
{
    int n = S->n, faulty0[MAXN], faulty1[MAXN];
    unsigned ep0[MAXN], ep1[MAXN];
    char state[MAXN + 1], val[300];

    sh_lock();
    for (int i = 0; i < n; i++) faulty0[i] = S->faulty[i], ep0[i] = S->epoch[i];
    sh_unlock();
    int res[MAXN];
    for (int i = 0; i < n; i++) {
        if (faulty0[i]) { res[i] = -2; continue; }
        int g = direct_get(w, i, w->keyname[key], val, sizeof val);
        res[i] = g == 1 ? (strcmp(val, token) == 0 ? 1 : 2) : g;
    }
    sh_lock();
    for (int i = 0; i < n; i++) faulty1[i] = S->faulty[i], ep1[i] = S->epoch[i];
    long long t_end = now_us();
    S->checks++;
    if (t_end >= valid_until) {
        S->checks_exempt++;
        sh_unlock();
        return;
    }
    int holding = 0, down = 0;
    for (int i = 0; i < n; i++) {
        int changed = faulty1[i] || ep1[i] != ep0[i];
        switch (res[i]) {
        case 1: holding++; state[i] = 'T'; break;
        case -2: down++; state[i] = 'D'; break;
        case -1: down++; state[i] = 'x'; break;
        default:
            if (changed) { down++; state[i] = 'd'; }
            else state[i] = res[i] == 0 ? '-' : 'o';
        }
    }
    state[n] = '\0';
    if (holding + down < S->quorum && !(slot >= 0 && S->sec[slot].gone)) {
        char a[300] = "(not entered yet)", h[HIST_N * 64], f[FLOG_N * (FLOG_LEN + 8)];
        S->held_but_gone++;   /* sections found so, not checks */
        if (slot >= 0) {
            S->sec[slot].gone = 1;
            victim_locked(&S->sec[slot]);
        }
        if (slot >= 0) describe(&S->sec[slot], a, sizeof a);
        hist_str(w, h, sizeof h);
        recent_faults_locked(f, sizeof f);
        vlog_locked("HELD BUT GONE on key %d at %.3f s (%s, %.0f ms of lease left): "
                    "nodes [%s] (T ours, - absent, o another token, D/d/x down) = %d holding + %d down < quorum %d\n"
                    "    holder: %s\n    its token calls:%s\n    recent faults:%s",
                    key, rel_s(t_end), where, (double)(valid_until - t_end) / 1000.0, state,
                    holding, down, S->quorum, a, w->token_role ? h : " (handles)", f);
    }
    sh_unlock();
}

static int enter(wctx *w, int key, int kind, int64_t fence, long long valid_until,
                 const char *token, long long t_acq, long wait_ms)
{
    sh_lock();
    long long now = now_us();
    int slot = (int)(S->nsec % MAX_RECORDS);
    section *s = &S->sec[slot];
    memset(s, 0, sizeof *s);
    s->id = ++S->nsec;
    s->key = key;
    s->proc = w->proc;
    s->thread = w->thread;
    s->kind = kind;
    s->fence = fence;
    s->t_enter = now;
    s->valid_until = valid_until;
    s->acq_ms = (long)((now - t_acq) / 1000);
    s->wait_ms = wait_ms;
    snprintf(s->token, sizeof s->token, "%.8s", token);
    S->sections++;
    S->by_kind[kind]++;
    scan_overlaps_locked(s, now);
    keystate *ks = &S->key[key];
    for (int k = 0; k < MAX_INSIDE; k++)
        if (ks->inside[k] < 0) { ks->inside[k] = slot; break; }
    if (fence >= 0)
        present_fence_locked(s, now);
    sh_unlock();
    return slot;
}

/* A renewed lease: valid until at least new_until from now on. */
static void refresh(int slot, long long new_until, int present)
{
    sh_lock();
    long long now = now_us();
    section *s = &S->sec[slot];
    if (new_until > s->valid_until) {
        s->valid_until = new_until;
        scan_overlaps_locked(s, now);
    }
    if (present && s->fence >= 0)
        present_fence_locked(s, now);
    sh_unlock();
}

static long long leave(int slot)
{
    sh_lock();
    long long now = now_us();
    section *s = &S->sec[slot];
    s->t_exit = now;
    if (now > s->valid_until) S->overran++;
    keystate *ks = &S->key[s->key];
    for (int k = 0; k < MAX_INSIDE; k++)
        if (ks->inside[k] == slot) ks->inside[k] = -1;
    long long vu = s->valid_until;
    sh_unlock();
    return vu;
}

static long long section_valid_until(int slot)
{
    sh_lock();
    long long v = S->sec[slot].valid_until;
    sh_unlock();
    return v;
}

static void count_acquire(int rc)
{
    sh_lock();
    if (rc == DISTLOCK_OK) S->acq_ok++;
    else if (rc == DISTLOCK_NOTACQUIRED) S->acq_notacq++;
    else {
        S->acq_err++;
        if (rc < 0 && rc >= -8) S->acq_errs[-rc]++;
    }
    sh_unlock();
}

static void count_release(int rc)
{
    sh_lock();
    if (rc == DISTLOCK_OK) S->rel_ok++;
    else if (rc == DISTLOCK_ENOTOWNER) S->rel_notowner++;
    else S->rel_err++;
    sh_unlock();
}

/* How long to stay inside, in us, for a lease of `validity_ms`: mostly well
 * within it, sometimes past it (an overrunning holder). */
static long long hold_time_us(wctx *w, long validity_ms, int long_sections)
{
    long pct = rnd(&w->rng, 100) < 7 ? rrange(&w->rng, 105, 160)
             : long_sections ? rrange(&w->rng, 50, 95) : rrange(&w->rng, 20, 90);
    return (long long)validity_ms * 10 * pct;
}

static void backoff(wctx *w) { sleep_us(rrange(&w->rng, 1, 15) * 1000LL); }

/* --token-reuse: all (default: one token per thread for every call, as a PHP
 * caller passing its own $random may do), retries (a fresh token after each
 * section, the same one for the attempts before it), none (a fresh token for
 * every call: then only the library's own reuse remains). */
enum { REUSE_ALL, REUSE_RETRIES, REUSE_NONE };
static int token_reuse = REUSE_ALL;
/* --no-wait: handles only try once (distlock_acquire's wait loop retries with
 * the same token; with --token-reuse none this leaves no token reuse at all). */
static int no_wait;

/* The token pair with this thread's one token, reused for every call. */
static void do_token(wctx *w, int key)
{
    long ttl = rrange(&w->rng, 300, 800);
    unsigned flags = rnd(&w->rng, 4) ? DISTLOCK_STRICT : 0;  /* PHP uses STRICT */
    if (token_reuse == REUSE_NONE)
        distlock_token_generate(w->token, sizeof w->token);
    long validity = 0;
    long long t0 = now_us();
    int rc = distlock_acquire_token(w->c, w->keyname[key], ttl, w->token, flags, &validity);
    hist_push(w, 'A', rc, t0);
    count_acquire(rc);
    if (rc != DISTLOCK_OK) {
        backoff(w);
        return;
    }
    long long t1 = now_us();
    long long vu = t1 + validity * 1000LL;
    long long vu2 = t0 + (ttl - drift_ms(ttl)) * 1000LL;
    if (vu2 < vu) vu = vu2;
    int slot = enter(w, key, K_TOKEN, -1, vu, w->token, t0, 0);
    check_held(w, key, w->token, vu, slot, "right after acquire_token");
    long long until = t1 + hold_time_us(w, validity, 1);
    while (now_us() < until) sleep_us(until - now_us() > 40000 ? 40000 : until - now_us());
    if (now_us() < vu)
        check_held(w, key, w->token, vu, slot, "just before release_token");
    leave(slot);
    long long t2 = now_us();
    rc = distlock_release_token(w->c, w->keyname[key], w->token);
    hist_push(w, 'R', rc, t2);
    count_release(rc);
    if (token_reuse == REUSE_RETRIES)
        distlock_token_generate(w->token, sizeof w->token);
}

static void do_handle(wctx *w, int key)
{
    long r = rnd(&w->rng, 100);
    int kind;
    unsigned flags;
    long wait = 0, ttl = rrange(&w->rng, 200, 800);
    if (r < 28) {
        kind = K_FENCE, flags = DISTLOCK_FENCING;
    } else if (r < 48) {
        kind = K_FENCE_WAIT, flags = DISTLOCK_FENCING, wait = rrange(&w->rng, 50, 600);
    } else if (r < 68) {
        kind = K_PLAIN, flags = 0, wait = rnd(&w->rng, 2) ? rrange(&w->rng, 50, 600) : 0;
    } else if (r < 90) {
        kind = K_RENEW, flags = DISTLOCK_AUTO_RENEW | (rnd(&w->rng, 2) ? DISTLOCK_FENCING : 0);
        wait = rnd(&w->rng, 2) ? rrange(&w->rng, 50, 600) : 0;
        ttl = rrange(&w->rng, 300, 700);
    } else {
        kind = K_FAIR, flags = DISTLOCK_FAIR | (rnd(&w->rng, 2) ? DISTLOCK_FENCING : 0);
        wait = rrange(&w->rng, 100, 700);
    }
    if (no_wait) wait = 0;
    distlock_lock *l = NULL;
    long long t0 = now_us();
    int rc = distlock_acquire(w->c, w->keyname[key], ttl, wait, flags, &l);
    count_acquire(rc);
    if (rc != DISTLOCK_OK) {
        backoff(w);
        return;
    }
    long long t1 = now_us();
    long validity = distlock_lock_validity_ms(l);
    long long vu = t1 + validity * 1000LL;
    int64_t fence = (flags & DISTLOCK_FENCING) ? distlock_lock_fence(l) : -1;
    char token[40];
    snprintf(token, sizeof token, "%s", distlock_lock_token(l));
    int slot = enter(w, key, kind, fence, vu, token, t0, wait);
    check_held(w, key, token, vu, slot, "right after acquire");

    if (kind == K_RENEW) {
        /* Held across several renewals; the lease is refreshed from the
         * handle's validity as the watchdog extends it. */
        long long until = t1 + (long long)ttl * 1000LL * rrange(&w->rng, 12, 30) / 10;
        while (now_us() < until && !distlock_lock_lost(l)) {
            sleep_us(ttl * 1000LL / 4);
            long long t = now_us();
            long v = distlock_lock_validity_ms(l);
            refresh(slot, t + v * 1000LL, 1);
        }
        if (distlock_lock_lost(l)) {
            sh_lock();
            S->lost++;
            sh_unlock();
        }
    } else {
        long long until = t1 + hold_time_us(w, validity, 0);
        int presented = 0;
        while (now_us() < until) {
            sleep_us(until - now_us() > 40000 ? 40000 : until - now_us());
            if (fence >= 0 && !presented && now_us() > t1 + (until - t1) / 2) {
                refresh(slot, 0, 1);   /* a second write to the fenced resource */
                presented = 1;
            }
        }
    }
    long long t = now_us();
    long left = distlock_lock_validity_ms(l);
    vu = section_valid_until(slot);
    if (left > 0 && t < vu)
        check_held(w, key, token, vu, slot, "just before release");
    leave(slot);
    rc = distlock_release(l);
    count_release(rc);
    distlock_lock_free(l);
}

static void *worker_thread(void *arg)
{
    wctx *w = arg;
    while (!atomic_load(&S->stop)) {
        int key = (int)rnd(&w->rng, NKEYS);
        if (w->token_role && rnd(&w->rng, 100) < 85)
            do_token(w, key);
        else
            do_handle(w, key);
    }
    for (int i = 0; i < MAXN; i++)
        if (w->dc[i]) redisFree(w->dc[i]);
    return NULL;
}

static void worker_process(int p, int nthreads, const char *uris, uint64_t seed, pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(3);
    signal(SIGINT, SIG_IGN);   /* the main process decides when to stop */
    signal(SIGTERM, SIG_DFL);  /* not the parent's flag-setting handler */
    uint64_t rng = seed ^ (0x1000193ULL * (uint64_t)(p + 1));
    distlock_client *c = NULL;
    if (distlock_client_new(uris, &c) != DISTLOCK_OK) {
        fprintf(stderr, "chaos: worker %d: client: %s\n", p, distlock_last_error());
        _exit(4);
    }
    long cmd = rrange(&rng, 50, 150);
    distlock_client_set(c, DISTLOCK_OPT_COMMAND_TIMEOUT_MS, cmd);
    distlock_client_set(c, DISTLOCK_OPT_CONNECT_TIMEOUT_MS, rrange(&rng, 150, 300));
    distlock_client_set(c, DISTLOCK_OPT_RETRY_MAX_MS, 50);

    pthread_t th[MAX_THREADS];
    wctx *ws = calloc((size_t)nthreads, sizeof *ws);
    for (int t = 0; t < nthreads; t++) {
        wctx *w = &ws[t];
        w->proc = p;
        w->thread = t;
        w->token_role = t % 2 == 0;
        w->rng = rng_next(&rng);
        w->c = c;
        w->cmd_timeout = cmd;
        /* One token per thread, reused by every token-pair call it makes. */
        distlock_token_generate(w->token, sizeof w->token);
        for (int k = 0; k < NKEYS; k++)
            snprintf(w->keyname[k], sizeof w->keyname[k], "chaos:k%d", k);
        pthread_create(&th[t], NULL, worker_thread, w);
    }
    for (int t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
    distlock_client_free(c);
    free(ws);
    exit(0);   /* exit, not _exit: sanitizers' exit-time checks run */
}

/* ------------------------------------------------------------ injector */

typedef struct action {
    int used;
    long long due;
    int type;          /* what to undo */
    int node;          /* listener / node */
    int stage;
    int variant;
    int nconn;
    int conn_l[96], conn_id[96];
    char dir[8];
} action;

#define MAX_ACTIONS 32

typedef struct injector {
    rh_cluster *rc;
    fp_proxy *fp;
    uint64_t rng;        /* the schedule: kinds, targets, durations, pauses */
    uint64_t rng_conn;   /* which live connection (their ids depend on timing) */
    int n, quorum;
    long long faults[F_COUNT];
    long long proxy_errors;
    int node_fault[MAXN];      /* a node-level fault is on this node */
    int stale_running;
    action act[MAX_ACTIONS];
} injector;

static action *new_action(injector *in, long long due, int type, int node)
{
    for (int k = 0; k < MAX_ACTIONS; k++) {
        if (!in->act[k].used) {
            action *a = &in->act[k];
            memset(a, 0, sizeof *a);
            a->used = 1;
            a->due = due;
            a->type = type;
            a->node = node;
            return a;
        }
    }
    return NULL;
}

static int pcmd(injector *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int pcmd(injector *in, const char *fmt, ...)
{
    char cmd[1024], reply[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int r = fp_cmd(in->fp, reply, sizeof reply, "%s", cmd);
    if (r != 0) in->proxy_errors++;
    return r;
}

/* A random live connection of listener l: its id, or -1. */
static int pick_conn(injector *in, int l)
{
    fp_conn cs[128];
    int k = fp_conns(in->fp, l, cs, 128), live = 0, ids[128];
    for (int j = 0; j < k; j++)
        if (strcmp(cs[j].state, "open") == 0) ids[live++] = cs[j].id;
    return live ? ids[rnd(&in->rng_conn, live)] : -1;
}

static int conn_alive(injector *in, int l, int id)
{
    fp_conn cs[128];
    int k = fp_conns(in->fp, l, cs, 128);
    for (int j = 0; j < k; j++)
        if (cs[j].id == id) return 1;
    return 0;
}

static void set_faulty(int i, int on)
{
    sh_lock();
    S->faulty[i] = on;
    S->epoch[i]++;
    sh_unlock();
}

static int node_faults_now(injector *in)
{
    int k = 0;
    for (int i = 0; i < in->n; i++) k += in->node_fault[i];
    return k;
}

/* A node for a node-level fault, keeping at most a minority faulty (for
 * liveness only: safety must hold regardless). -1 if none. */
static int pick_node(injector *in)
{
    if (node_faults_now(in) >= in->n - in->quorum) return -1;
    int i = (int)rnd(&in->rng, in->n);
    return in->node_fault[i] ? -1 : i;
}

/* The stale-undo sequence, stage 0: hold (client -> redis) the connections
 * of a random majority of listeners, so acquires in flight time out and
 * their undos queue behind them on the held connections. */
static void stale_undo_start(injector *in, long long now)
{
    int m = (int)rrange(&in->rng, in->quorum, in->n), order[MAXN];
    for (int i = 0; i < in->n; i++) order[i] = i;
    for (int i = in->n - 1; i > 0; i--) {
        int j = (int)rnd(&in->rng, i + 1), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    action *a = new_action(in, now + rrange(&in->rng, 180, 450) * 1000LL, F_STALE_UNDO, 0);
    if (!a) return;
    a->variant = (int)rnd(&in->rng, 10) < 6 ? 0 : 1;
    a->stage = 1;
    char what[128];
    int off = 0;
    unsigned mask = 0;
    for (int k = 0; k < m; k++) mask |= 1u << order[k];
    for (int l = 0; l < in->n; l++) {
        if (!(mask & (1u << l))) continue;
        off += snprintf(what + off, sizeof what - (size_t)off, "%d ", l);
        if (a->variant == 0) {
            /* every connection open now (not the ones made later) */
            fp_conn cs[128];
            int k = fp_conns(in->fp, l, cs, 128);
            for (int j = 0; j < k && a->nconn < 96; j++) {
                if (strcmp(cs[j].state, "open") != 0) continue;
                if (pcmd(in, "hold %d:%d up", l, cs[j].id) == 0) {
                    a->conn_l[a->nconn] = l;
                    a->conn_id[a->nconn++] = cs[j].id;
                }
            }
        } else {
            /* the next connections that send an acquire (SET ... NX) */
            char hex[64];
            pcmd(in, "hold-match %d up %s %ld", l, fp_hex("$3\r\nSET\r\n", hex, sizeof hex),
                 rrange(&in->rng, 2, 6));
        }
    }
    a->node = (int)mask;
    in->stale_running = 1;
    in->faults[F_STALE_UNDO]++;
    flog("stale-undo: hold %s on listeners %s", a->variant ? "next acquires" : "every connection",
         what);
}

static void stale_undo_step(injector *in, action *a, long long now)
{
    unsigned mask = (unsigned)a->node;
    if (a->stage == 1) {
        /* Detach the held connections: the client sees them closed and
         * reconnects, while what they carry stays in the proxy. */
        if (a->variant == 1) {
            a->nconn = 0;
            for (int l = 0; l < in->n; l++) {
                if (!(mask & (1u << l))) continue;
                pcmd(in, "disarm %d", l);
                fp_conn cs[128];
                int k = fp_conns(in->fp, l, cs, 128);
                for (int j = 0; j < k && a->nconn < 96; j++)
                    if (cs[j].held_up > 0) {
                        a->conn_l[a->nconn] = l;
                        a->conn_id[a->nconn++] = cs[j].id;
                    }
            }
        }
        for (int k = 0; k < a->nconn; k++)
            if (conn_alive(in, a->conn_l[k], a->conn_id[k]))
                pcmd(in, "detach %d:%d", a->conn_l[k], a->conn_id[k]);
        flog("stale-undo: detached %d held connection(s)", a->nconn);
        a->stage = 2;
        a->due = now + rrange(&in->rng, 30, 500) * 1000LL;
        return;
    }
    /* Deliver what the detached connections held: late acquires and undos. */
    int delivered = 0;
    for (int k = 0; k < a->nconn; k++)
        if (conn_alive(in, a->conn_l[k], a->conn_id[k]) &&
            pcmd(in, "unhold %d:%d up", a->conn_l[k], a->conn_id[k]) == 0)
            delivered++;
    flog("stale-undo: delivered the held bytes of %d connection(s)", delivered);
    a->used = 0;
    in->stale_running = 0;
}

static void start_fault(injector *in, long long now)
{
    int total = 0;
    for (int f = 0; f < F_COUNT; f++) total += fault_weight[f];
    if (total == 0) return;
    long r = rnd(&in->rng, total);
    int f = 0;
    while (r >= fault_weight[f]) r -= fault_weight[f++];
    int l = (int)rnd(&in->rng, in->n);
    action *a;
    int id;

    switch (f) {
    case F_DELAY: {
        long ms = rrange(&in->rng, 20, 300);
        int whole = rnd(&in->rng, 4) == 0;
        const char *dir = rnd(&in->rng, 3) == 0 ? "up" : rnd(&in->rng, 2) ? "down" : "both";
        id = whole ? 0 : pick_conn(in, l);
        if (!whole && id < 0) return;
        if (whole) pcmd(in, "delay %d %ld %s", l, ms, dir);
        else pcmd(in, "delay %d:%d %ld %s", l, id, ms, dir);
        if ((a = new_action(in, now + rrange(&in->rng, 200, 1500) * 1000LL, F_DELAY, l))) {
            a->conn_id[0] = whole ? -1 : id;
            snprintf(a->dir, sizeof a->dir, "%s", dir);
        }
        if (whole) flog("delay %d (every connection) %ld ms %s", l, ms, dir);
        else flog("delay %d:%d %ld ms %s", l, id, ms, dir);
        break;
    }
    case F_HOLD: {
        int whole = rnd(&in->rng, 4) == 0;
        const char *dir = rnd(&in->rng, 2) ? "up" : "down";
        id = whole ? 0 : pick_conn(in, l);
        if (!whole && id < 0) return;
        if (whole) pcmd(in, "hold %d %s", l, dir);
        else pcmd(in, "hold %d:%d %s", l, id, dir);
        if ((a = new_action(in, now + rrange(&in->rng, 50, 700) * 1000LL, F_HOLD, l))) {
            a->conn_id[0] = whole ? -1 : id;
            snprintf(a->dir, sizeof a->dir, "%s", dir);
        }
        if (whole) flog("hold %d (every connection) %s", l, dir);
        else flog("hold %d:%d %s", l, id, dir);
        break;
    }
    case F_STALE_UNDO:
        if (in->stale_running) return;
        stale_undo_start(in, now);
        return;
    case F_DETACH:
        if ((id = pick_conn(in, l)) < 0) return;
        pcmd(in, "detach %d:%d", l, id);
        flog("detach %d:%d", l, id);
        break;
    case F_PARTITION: {
        int i = pick_node(in);
        if (i < 0) return;
        in->node_fault[i] = 1;
        set_faulty(i, 1);
        pcmd(in, "partition %d on", i);
        new_action(in, now + rrange(&in->rng, 200, 1200) * 1000LL, F_PARTITION, i);
        flog("partition %d on", i);
        break;
    }
    case F_RESET:
        if ((id = pick_conn(in, l)) < 0) return;
        pcmd(in, "reset %d:%d", l, id);
        flog("reset %d:%d", l, id);
        break;
    case F_RESET_MID: {
        long nb = rrange(&in->rng, 1, 40);
        const char *dir = rnd(&in->rng, 4) ? "down" : "up";
        if (rnd(&in->rng, 3) == 0) {
            pcmd(in, "reset-after %d:next %s %ld", l, dir, nb);
            flog("reset-after %d:next %s %ld", l, dir, nb);
        } else {
            if ((id = pick_conn(in, l)) < 0) return;
            pcmd(in, "reset-after %d:%d %s %ld", l, id, dir, nb);
            flog("reset-after %d:%d %s %ld", l, id, dir, nb);
        }
        break;
    }
    case F_SLOW_ACCEPT: {
        long ms = rrange(&in->rng, 50, 500);
        pcmd(in, "slow-accept %d %ld", l, ms);
        new_action(in, now + rrange(&in->rng, 300, 1500) * 1000LL, F_SLOW_ACCEPT, l);
        flog("slow-accept %d %ld", l, ms);
        break;
    }
    case F_KILL: {
        int i = pick_node(in);
        if (i < 0) return;
        in->node_fault[i] = 1;
        set_faulty(i, 1);
        rh_kill(in->rc, i);
        new_action(in, now + rrange(&in->rng, 100, 1000) * 1000LL, F_KILL, i);
        flog("SIGKILL node %d", i);
        break;
    }
    case F_PAUSE: {
        int i = pick_node(in);
        if (i < 0) return;
        in->node_fault[i] = 1;
        set_faulty(i, 1);
        rh_pause(in->rc, i);
        new_action(in, now + rrange(&in->rng, 100, 1000) * 1000LL, F_PAUSE, i);
        flog("SIGSTOP node %d", i);
        break;
    }
    }
    in->faults[f]++;
}

/* Undo a fault (or advance the stale-undo sequence). */
static void run_action(injector *in, action *a, long long now)
{
    int l = a->node;
    switch (a->type) {
    case F_STALE_UNDO:
        stale_undo_step(in, a, now);
        return;
    case F_DELAY:
        if (a->conn_id[0] < 0) pcmd(in, "delay %d 0 %s", l, a->dir);
        else if (conn_alive(in, l, a->conn_id[0])) pcmd(in, "delay %d:%d 0 %s", l, a->conn_id[0], a->dir);
        break;
    case F_HOLD:
        if (a->conn_id[0] < 0) pcmd(in, "unhold %d %s", l, a->dir);
        else if (conn_alive(in, l, a->conn_id[0])) pcmd(in, "unhold %d:%d %s", l, a->conn_id[0], a->dir);
        if (a->conn_id[0] < 0) flog("unhold %d (every connection) %s", l, a->dir);
        else flog("unhold %d:%d %s", l, a->conn_id[0], a->dir);
        break;
    case F_PARTITION: {
        /* End it; the connections that lost bytes in the black hole are
         * reset, as TCP would give up on them. */
        pcmd(in, "partition %d off", l);
        fp_conn cs[128];
        int k = fp_conns(in->fp, l, cs, 128);
        for (int j = 0; j < k; j++)
            if (strcmp(cs[j].state, "open") == 0) pcmd(in, "reset %d:%d", l, cs[j].id);
        flog("partition %d off (+ reset its connections)", l);
        in->node_fault[l] = 0;
        set_faulty(l, 0);
        break;
    }
    case F_SLOW_ACCEPT:
        pcmd(in, "slow-accept %d 0", l);
        break;
    case F_KILL:
        if (rh_restart(in->rc, l) != 0) fprintf(stderr, "chaos: could not restart node %d\n", l);
        flog("node %d restarted", l);
        in->node_fault[l] = 0;
        set_faulty(l, 0);
        break;
    case F_PAUSE:
        rh_resume(in->rc, l);
        flog("SIGCONT node %d", l);
        in->node_fault[l] = 0;
        set_faulty(l, 0);
        break;
    }
    a->used = 0;
}

/* Everything back to normal: nodes up, proxy healed. */
static void heal_all(injector *in)
{
    for (int k = 0; k < MAX_ACTIONS; k++) {
        action *a = &in->act[k];
        if (!a->used) continue;
        if (a->type == F_KILL || a->type == F_PAUSE || a->type == F_PARTITION)
            run_action(in, a, now_us());
        a->used = 0;
    }
    pcmd(in, "heal");
    in->stale_running = 0;
    for (int i = 0; i < in->n; i++) {
        if (in->rc->node[i].pid > 0 && in->rc->node[i].stopped) rh_resume(in->rc, i);
        if (in->rc->node[i].pid <= 0) rh_restart(in->rc, i);
        in->node_fault[i] = 0;
        set_faulty(i, 0);
    }
}

/* ------------------------------------------------------------ main */

static volatile sig_atomic_t interrupted;
static void on_signal(int sig) { (void)sig; interrupted = 1; }

typedef struct config_result {
    int n;
    long long violations;
    int failed_setup;
} config_result;

/* Fresh shared state (the mapping is zeroed or reused after the self-test). */
static void init_shared(int n, const int *ports)
{
    static int initialised;
    if (initialised) pthread_mutex_destroy(&S->mu);
    initialised = 1;
    memset(S, 0, offsetof(shared, sec));
    memset(S->sec, 0, sizeof(section) * 64);   /* the self-test's; the rest is untouched */
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&S->mu, &ma);
    pthread_mutexattr_destroy(&ma);
    S->n = n;
    S->quorum = n / 2 + 1;
    for (int i = 0; i < n; i++) S->ports[i] = ports[i];
    for (int k = 0; k < NKEYS; k++) {
        for (int j = 0; j < MAX_INSIDE; j++) S->key[k].inside[j] = -1;
        S->key[k].max_fence = -1;
    }
    S->t_start = now_us();
}

/* The detectors must fire on what they are meant to catch (else a broken
 * checker would pass vacuously) and stay quiet on expired leases: staged
 * sections, and a held check against the real, empty nodes. */
static int selftest(void)
{
    wctx w;
    memset(&w, 0, sizeof w);
    w.proc = -1;
    for (int k = 0; k < NKEYS; k++)
        snprintf(w.keyname[k], sizeof w.keyname[k], "chaos:k%d", k);
    long long now = now_us(), later = now + 60 * 1000000LL;
    /* expired lease then a valid one: no overlap; the late fence is fenced off */
    int c = enter(&w, 1, K_FENCE, 3, now - 1, "selftst0", now, 0);
    int d = enter(&w, 1, K_FENCE, 4, later, "selftst1", now, 0);
    refresh(c, 0, 1);
    int quiet = S->overlaps == 0 && S->stale_fences == 0 && S->fenced_off == 1;
    /* two valid leases: an overlap; the older, lower fence within its lease: stale */
    int a = enter(&w, 0, K_FENCE, 5, later, "selftst2", now, 0);
    int b = enter(&w, 0, K_FENCE, 6, later, "selftst3", now, 0);
    refresh(a, 0, 1);
    /* a token no node holds, all nodes up, lease valid: held but gone */
    check_held(&w, 0, "selftest-token-held-nowhere", later, a, "self-test");
    /* the same with an expired lease: exempt */
    check_held(&w, 0, "selftest-token-held-nowhere", now - 1, b, "self-test");
    leave(a), leave(b), leave(c), leave(d);
    for (int i = 0; i < MAXN; i++)
        if (w.dc[i]) redisFree(w.dc[i]);
    int ok = quiet && S->overlaps == 1 && S->stale_fences == 1 && S->held_but_gone == 1 &&
             S->checks_exempt == 1;
    if (!ok)
        fprintf(stderr, "chaos: checker self-test FAILED: quiet=%d overlaps=%lld stale_fences=%lld "
                        "held_but_gone=%lld exempt=%lld\n", quiet, S->overlaps, S->stale_fences,
                S->held_but_gone, S->checks_exempt);
    else
        printf("chaos: nodes=%d checker self-test passed (overlap, stale fence, held-but-gone "
               "detected; expired leases exempt)\n", S->n);
    return ok ? 0 : -1;
}

static double fault_rate = 1.0;   /* --fault-rate: 0 = no faults (a baseline) */

static int run_config(int n, uint64_t main_seed, uint64_t seed, double seconds, int nprocs,
                      int nthreads, config_result *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    rh_cluster *rc = rh_start_aof(n);
    if (!rc) { out->failed_setup = 1; return -1; }
    int ports[MAXN];
    for (int i = 0; i < n; i++) ports[i] = rc->node[i].port;
    fp_proxy *fp = fp_start(ports, n);
    if (!fp) { rh_stop_all(rc); out->failed_setup = 1; return -1; }

    S = mmap(NULL, sizeof *S, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (S == MAP_FAILED) { perror("mmap"); fp_stop(fp); rh_stop_all(rc); return -1; }
    init_shared(n, ports);
    if (selftest() != 0) {
        fp_stop(fp);
        rh_stop_all(rc);
        munmap(S, sizeof *S);
        return -1;
    }
    init_shared(n, ports);

    injector in;
    memset(&in, 0, sizeof in);
    in.rc = rc;
    in.fp = fp;
    in.n = n;
    in.quorum = n / 2 + 1;
    in.rng = seed;
    in.rng_conn = seed ^ 0x5bd1e995ULL;

    char uris[512];
    snprintf(uris, sizeof uris, "%s", fp_uris(fp));
    pid_t kids[MAX_PROCS];
    pid_t me = getpid();
    fflush(stdout);
    fflush(stderr);
    for (int p = 0; p < nprocs; p++) {
        uint64_t wseed = rng_next(&in.rng);
        kids[p] = fork();
        if (kids[p] == 0) worker_process(p, nthreads, uris, wseed, me);
        if (kids[p] < 0) { perror("fork"); kids[p] = 0; }
    }

    long long deadline = now_us() + (long long)(seconds * 1e6);
    long long next_fault = now_us() + rrange(&in.rng, 100, 300) * 1000LL;
    int worker_died = 0;
    while (!interrupted && now_us() < deadline) {
        long long now = now_us();
        for (int k = 0; k < MAX_ACTIONS; k++)
            if (in.act[k].used && in.act[k].due <= now) run_action(&in, &in.act[k], now);
        if (now >= next_fault && fault_rate > 0) {
            start_fault(&in, now);
            next_fault = now_us() + (long long)(rrange(&in.rng, 40, 360) * 1000.0 / fault_rate);
        } else if (fault_rate <= 0) {
            next_fault = deadline;
        }
        long long wake = next_fault;
        for (int k = 0; k < MAX_ACTIONS; k++)
            if (in.act[k].used && in.act[k].due < wake) wake = in.act[k].due;
        if (wake > deadline) wake = deadline;
        sleep_us(wake - now_us());
        for (int p = 0; p < nprocs; p++) {
            int st;
            if (kids[p] > 0 && waitpid(kids[p], &st, WNOHANG) == kids[p]) {
                fprintf(stderr, "chaos: worker %d died early (status 0x%x)\n", p, st);
                kids[p] = 0;
                worker_died = 1;
            }
        }
    }

    /* Heal everything so the workers' last releases go through, then stop. */
    heal_all(&in);
    atomic_store(&S->stop, 1);
    long long end = now_us() + 20 * 1000000LL;
    for (int p = 0; p < nprocs; p++) {
        int st = 0;
        if (kids[p] <= 0) continue;
        pid_t r;
        while ((r = waitpid(kids[p], &st, WNOHANG)) == 0 && now_us() < end) sleep_us(10000);
        if (r == 0) {
            fprintf(stderr, "chaos: worker %d did not stop; SIGKILL\n", p);
            kill(kids[p], SIGKILL);
            waitpid(kids[p], &st, 0);
            worker_died = 1;
        } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "chaos: worker %d ended with status 0x%x\n", p, st);
            worker_died = 1;
        }
    }
    long long elapsed_ms = (now_us() - S->t_start) / 1000;

    for (int k = 0; k < S->nlog; k++) printf("chaos: nodes=%d %s\n", n, S->log[k]);
    char fbuf[512];
    int off = 0;
    long long ftotal = 0;
    for (int f = 0; f < F_COUNT; f++) {
        ftotal += in.faults[f];
        off += snprintf(fbuf + off, sizeof fbuf - (size_t)off, "%s%s=%lld", f ? " " : "",
                        fault_name[f], in.faults[f]);
    }
    char kbuf[256], vbuf[256];
    off = 0;
    for (int k = 0; k < K_COUNT; k++)
        off += snprintf(kbuf + off, sizeof kbuf - (size_t)off, "%s%s=%lld", k ? " " : "",
                        kind_name[k], S->by_kind[k]);
    off = 0;
    for (int k = 0; k < K_COUNT; k++)
        off += snprintf(vbuf + off, sizeof vbuf - (size_t)off, "%s%s=%lld", k ? " " : "",
                        kind_name[k], S->victims[k]);
    printf("chaos: nodes=%d seed=%" PRIu64 " seconds=%.1f sections=%lld (%s) faults=%lld (%s) "
           "overlaps=%lld stale_fences=%lld held_but_gone=%lld overran=%lld "
           "broken_leases=(%s) "
           "fenced_off=%lld checks=%lld exempt=%lld acquires=%lld/%lld/%lld(ok/held/err) "
           "acquire_errs=%lld/%lld/%lld/%lld(econn/etimedout/enoquorum/other) "
           "releases=%lld/%lld/%lld(ok/notowner/err) lost=%lld proxy_errs=%lld elapsed_ms=%lld\n",
           n, main_seed, seconds, S->sections, kbuf, ftotal, fbuf, S->overlaps, S->stale_fences,
           S->held_but_gone, S->overran, vbuf, S->fenced_off, S->checks, S->checks_exempt, S->acq_ok,
           S->acq_notacq, S->acq_err, S->acq_errs[3], S->acq_errs[4], S->acq_errs[5],
           S->acq_err - S->acq_errs[3] - S->acq_errs[4] - S->acq_errs[5], S->rel_ok,
           S->rel_notowner, S->rel_err, S->lost, in.proxy_errors, elapsed_ms);
    fflush(stdout);
    out->violations = S->overlaps + S->stale_fences + S->held_but_gone;
    int ok = out->violations == 0 && !worker_died && S->sections > 0 &&
             (ftotal > 0 || fault_rate <= 0) &&
             !interrupted;
    if (S->sections == 0) fprintf(stderr, "chaos: nodes=%d: no critical section at all\n", n);

    fp_stop(fp);
    rh_stop_all(rc);
    pthread_mutex_destroy(&S->mu);
    munmap(S, sizeof *S);
    S = NULL;
    return ok ? 0 : 1;
}

/* --faults: keep only the named kinds. */
static int set_faults(const char *names)
{
    char list[256], *sv = NULL;
    int keep[F_COUNT] = { 0 };
    snprintf(list, sizeof list, "%s", names);
    for (char *f = strtok_r(list, ",", &sv); f; f = strtok_r(NULL, ",", &sv)) {
        int k = 0;
        while (k < F_COUNT && strcmp(f, fault_name[k]) != 0) k++;
        if (k == F_COUNT) {
            fprintf(stderr, "chaos: unknown fault %s\n", f);
            return -1;
        }
        keep[k] = 1;
    }
    for (int k = 0; k < F_COUNT; k++)
        if (!keep[k]) fault_weight[k] = 0;
    return 0;
}

static int set_reuse(const char *v)
{
    if (!strcmp(v, "all")) token_reuse = REUSE_ALL;
    else if (!strcmp(v, "retries")) token_reuse = REUSE_RETRIES;
    else if (!strcmp(v, "none")) token_reuse = REUSE_NONE;
    else {
        fprintf(stderr, "chaos: --token-reuse all|retries|none\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint64_t seed = 0;
    int have_seed = 0;
    double seconds = 24;
    int nprocs = 3, nthreads = 3;
    char nodes[32] = "3,5";
    const char *e;
    if ((e = getenv("DISTLOCK_CHAOS_SECONDS")) && *e) seconds = atof(e);
    if ((e = getenv("DISTLOCK_CHAOS_SEED")) && *e) seed = strtoull(e, NULL, 0), have_seed = 1;
    if ((e = getenv("DISTLOCK_CHAOS_FAULTS")) && *e && set_faults(e) != 0) return 2;
    if ((e = getenv("DISTLOCK_CHAOS_TOKEN_REUSE")) && *e && set_reuse(e) != 0) return 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 0);
            have_seed = 1;
        } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            seconds = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--nodes") && i + 1 < argc) {
            snprintf(nodes, sizeof nodes, "%s", argv[++i]);
        } else if (!strcmp(argv[i], "--procs") && i + 1 < argc) {
            nprocs = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            nthreads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--fault-rate") && i + 1 < argc) {
            fault_rate = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--faults") && i + 1 < argc) {
            if (set_faults(argv[++i]) != 0) return 2;
        } else if (!strcmp(argv[i], "--no-wait")) {
            no_wait = 1;
        } else if (!strcmp(argv[i], "--token-reuse") && i + 1 < argc) {
            if (set_reuse(argv[++i]) != 0) return 2;
        } else {
            fprintf(stderr, "usage: %s [--seed S] [--seconds T] [--nodes 3,5] [--procs P] "
                            "[--threads K] [--fault-rate X] [--token-reuse all|retries|none]\n"
                            "       [--faults delay,hold,stale_undo,detach,partition,reset,"
                            "reset_mid,slow_accept,kill,pause] [--no-wait]\n", argv[0]);
            return 2;
        }
    }
    if (nprocs < 1 || nprocs > MAX_PROCS || nthreads < 1 || nthreads > MAX_THREADS ||
        seconds <= 0) {
        fprintf(stderr, "chaos: bad --procs/--threads/--seconds\n");
        return 2;
    }
    if (!have_seed) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
        seed = rng_next(&s) % 1000000000ULL;
    }
    char fl[256] = "";
    int foff = 0;
    for (int k = 0; k < F_COUNT; k++)
        if (fault_weight[k])
            foff += snprintf(fl + foff, sizeof fl - (size_t)foff, "%s%s", foff ? "," : "",
                             fault_name[k]);
    static const char *reuse_name[] = { "all", "retries", "none" };
    printf("chaos: seed=%" PRIu64 " seconds=%.1f per configuration, nodes=%s, %d processes x %d threads,"
           " token-reuse=%s%s, faults=%s (replay: %s --seed %" PRIu64 " --seconds %g --nodes %s"
           " --token-reuse %s%s --faults %s)\n",
           seed, seconds, nodes, nprocs, nthreads, reuse_name[token_reuse],
           no_wait ? " no-wait" : "", fl, argv[0], seed, seconds, nodes,
           reuse_name[token_reuse], no_wait ? " --no-wait" : "", fl);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int failed = 0;
    char *save = NULL;
    for (char *tok = strtok_r(nodes, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int n = atoi(tok);
        if (n < 1 || n > MAXN) {
            fprintf(stderr, "chaos: nodes must be 1..%d\n", MAXN);
            return 2;
        }
        config_result r;
        uint64_t cs = seed * 1000003ULL + (uint64_t)n;
        if (run_config(n, seed, rng_next(&cs), seconds, nprocs, nthreads, &r) != 0) {
            failed = 1;
            if (r.failed_setup) fprintf(stderr, "chaos: nodes=%d: setup failed\n", n);
        }
        if (interrupted) break;
    }
    printf("chaos: %s (seed %" PRIu64 ")\n", failed ? "FAILED" : "passed", seed);
    return failed ? 1 : 0;
}
