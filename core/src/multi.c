/* multi.c -- the non-blocking API: operations of one client driven from
 * the caller's event loop (distlock_multi, distlock.h).
 *
 * Each operation is a small state machine over layer-5 runs (run.c): an
 * acquire is a wait cut at its sleeps, with the rules that live in
 * handle.c (checks, the held record, the request, the re-check times, the
 * deadline, the statuses and details); a release or an extend is one run
 * between handle.c's begin and end. This is the one driver of a wait: a
 * blocking acquire that must wait goes on as an acquire op of a multi of
 * its own, driven on the calling thread (distlock__acquire_wait, below).
 *
 * What a multi watches, all in ONE epoll descriptor (distlock_multi_fd):
 *  - its eventfd: the subscriber thread (wait.c) wakes a waiting acquire
 *    through its sleeper (cancel.c), which here is on this eventfd and marks
 *    itself woken; a cancel passed on by another thread does the same;
 *  - the client's cancel eventfd (distlock_client_cancel), passed on to the
 *    client's other sleepers as a sleeping call would;
 *  - the eventfd of each args->cancel an acquire carries (once fired it
 *    stays readable: dropped from the set when seen);
 *  - the descriptors each run asks for (distlock__run_interest), set again
 *    after every step of the run (a run may reconnect: the same number can
 *    name a new socket, so a registration is always renewed, never trusted).
 * Times (a run's next_us, a waiter's re-check, a deadline) are one per
 * operation in a binary heap; distlock_multi_timeout() is its top.
 *
 * The local queue: per key, one acquire is active (it has an attempt on the
 * wire or a waiter registered); the others wait in FIFO order without a
 * round, and the next becomes active when the active one ends. That bounds
 * a multi's connections per key; it is for non-fair acquires only: a
 * DISTLOCK_FAIR acquire joins the servers' queue at once (the servers' queue
 * is the order across processes, which a local turn would give away).
 *
 * Slots: a run holds a connection set (one connection per node) from its
 * start to its end, so the runs on the wire at once are the multi's
 * connections per node. At most DISTLOCK_OPT_MULTI_RUNS ops hold a slot;
 * an op takes one before the first run of a chain of runs it makes in one
 * step (an attempt, then its undo or a queue leave) and gives it back when
 * the step leaves it with no run (asleep, done), so the pool's sets are
 * reused and never more than the bound. Ops without a slot wait in two
 * FIFO queues: releases, extends and an acquire's clean-up runs first,
 * then acquires' attempts. Releases and extends go first because they
 * free keys others wait for and keep leases alive (an extend behind a
 * thousand attempts to a slow node could see its lease expire); they
 * cannot starve attempts, as each is one call of the caller's, and they
 * never wait behind attempts queued before them. An acquire waiting for a
 * slot keeps its deadline and its cancels.
 *
 * Layer: 7 API */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "internal.h"

enum { OP_ACQUIRE, OP_RELEASE, OP_EXTEND };

/* An operation's states (what it waits for). */
enum {
    S_QUEUED,    /* an acquire behind the key's active one: nothing sent */
    S_START,     /* an acquire just made active: its first attempt goes out */
    S_FIRST,     /* its first attempt on the wire */
    S_ENTER,     /* its first attempt must wait: the wait's channel, subscription */
    S_SUB,       /* waiting for its subscription's confirmation */
    S_LOOP,      /* about to try again */
    S_TRY,       /* an attempt of its wait on the wire */
    S_WONLEAVE,  /* a writer that won leaving the registry of waiting writers */
    S_LATEUNDO,  /* releasing a grant whose lease ended before that leave came back */
    S_JUDGE,     /* an attempt's outcome decides: the wait ends or goes on */
    S_SLEEP,     /* waiting for a release, its re-check time or a cancel */
    S_SPLIT,     /* fair: stepping out of every queue (then a pause: S_SLEEP) */
    S_UNDO,      /* releasing a lock won after a cancel */
    S_OUT,       /* its wait is over: what it leaves behind goes */
    S_WLEAVE,    /* a writer leaving the registry of waiting writers */
    S_QLEAVE,    /* a fair waiter leaving the queue */
    S_REL,       /* a release on the wire */
    S_EXT_WAIT,  /* an extend waiting for a renewal of the lock on the wire */
    S_EXT,       /* an extend on the wire */
    S_DONE
};

/* What a descriptor in the epoll set is (the table is indexed by fd). */
enum { FD_NONE = 0, FD_RUN, FD_CANCEL };

/* A renewal of the lock on the wire: its end writes the multi's eventfd
 * (distlock__extend_begin_or_wake), and the extends waiting for it
 * (m->ext_waiters) go on. One lock has one such waker: another multi's
 * extend of the same lock may take it over, so an extend also looks again
 * this much later. */
#define EXT_RETRY_US 50000u

typedef struct mkey {
    struct mkey *next;        /* hash chain */
    char *key;
    distlock_op *active;
    distlock_op *head, *tail; /* queued, FIFO (op->qprev/qnext) */
    long try_once;            /* how many queued have wait_ms 0 (fail_try_once) */
    char *held_ch;            /* its channel, held from its first waiter (key_hold_channel) */
} mkey;

typedef struct cwatch {      /* an args->cancel in the epoll set */
    struct cwatch *next;
    distlock_cancel *cancel;
    int fd, refs, watched;
} cwatch;

typedef struct fdslot {
    distlock_op *op;
    cwatch *cw;
    int kind;
} fdslot;

#define NBUCKETS 256
#define NEV 16                /* epoll events read at a time */

struct distlock_multi {
    distlock_client *c;
    pid_t pid;
    int epfd, evfd;
    int cancel_watched;       /* the client's cancel eventfd is in the set */
    unsigned seen_gen;        /* c->cancel_gen at the last look */
    uint64_t next_id;
    int running;
    distlock_op *ops;         /* every op not freed (prev/next) */
    distlock_op *sleepers;    /* ops with a sleeper registered (sl_prev/sl_next) */
    distlock_op *ext_waiters; /* extends waiting for a renewal's end (ew_prev/ew_next) */
    distlock_op *step_head, *step_tail;
    distlock_op *done_head, *done_tail;
    distlock_op **heap;
    size_t nheap, capheap;
    int heap_short;           /* a time could not be kept (ENOMEM): look every ms */
    fdslot *fds;
    int nfds;
    cwatch *cwatches;
    /* slots (see the top): ops holding one, and the two FIFO queues */
    long wire;
    distlock_op *sq_head[2], *sq_tail[2];  /* [0] releases, extends, clean-up; [1] attempts */
    distlock_op *stepping;    /* the op op_step is in (NULL once it freed it) */
    mkey *keys[NBUCKETS];
    struct epoll_event ev[NEV];  /* perform's */
};

struct distlock_op {
    distlock_multi *m;
    uint64_t id;
    int type, state;
    int rc;                   /* the operation's status, once decided */
    char *err;                /* ... and its detail (NULL: none) */
    int run_rc;               /* the status of its last run */
    int user_freed, handed, cancel_req, kick;
    distlock_op *prev, *next;
    distlock_op *sl_prev, *sl_next;
    distlock_op *ew_prev, *ew_next;
    int ew_on;
    int sleeper_on;
    distlock_op *step_prev, *step_next;
    int in_step;
    distlock_op *done_prev, *done_next;
    int in_doneq;
    int has_slot, in_sq;      /* holds a slot; waits for one in sq_head[sq_which] */
    int sq_which;
    distlock_op *sq_prev, *sq_next;
    uint64_t at;              /* its time in the heap, UINT64_MAX: none */
    size_t hidx;              /* its index in the heap while at != UINT64_MAX */
    /* the run on the wire, its poll set */
    distlock__run *run;
    struct pollfd *pfd;
    int np;
    int *wfds;                /* fds registered for this run */
    int nw, capw;
    /* an acquire */
    mkey *k;
    distlock_op *qprev, *qnext;
    distlock__held *h;
    distlock_lock *l;         /* allocated up front (handle.c) */
    distlock_lock *won;       /* the handle won, until taken */
    cwatch *cw;
    distlock_cancel *cancel;
    int given;
    int embedded;             /* a blocking acquire's wait (distlock__acquire_wait) */
    long wait_ms;
    unsigned gen;
    uint64_t t_start;         /* the call's start (the deadline's origin) */
    uint64_t deadline, wake_at, sub_deadline;
    distlock__acq_req rq;
    distlock__attempt att;
    uint64_t first_t0;
    uint64_t reached;         /* nodes its attempts were sent to (a fair queue place,
                                 a writer's intent: only there) */
    int readers, late, fair, subscribed, waiter_on, notice, entered_wait;
    int first_won;  /* S_WONLEAVE after a first attempt's win (not a later one's) */
    int sub_pause;            /* a blocking acquire's wait sleeps once before its first look
                               * at its subscription (unsettled when its waiter was added) */
    long backoff;
    unsigned named;
    char *ch;
    distlock__waiter w;
    /* a release or an extend */
    distlock_lock *lock;
    int retry;
    uint64_t until, sent;
    long ttl_ms;
};

/* ------------------------------------------------------------ checks */

static int forked(const distlock_multi *m)
{
    return m->pid != distlock__getpid();
}

static int usable_multi(const distlock_multi *m)
{
    if (m == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "multi must not be NULL");
    if (forked(m))
        return distlock__fail(DISTLOCK_EINVAL, "this multi was created in process %d: it cannot "
                              "be used in forked child %d (free it there, then make a new one)",
                              (int)m->pid, (int)distlock__getpid());
    return DISTLOCK_OK;
}

/* ------------------------------------------------------------ timers */

static int heap_less(const distlock_multi *m, size_t a, size_t b)
{
    return m->heap[a]->at < m->heap[b]->at;
}

static void heap_swap(distlock_multi *m, size_t a, size_t b)
{
    distlock_op *t = m->heap[a];
    m->heap[a] = m->heap[b];
    m->heap[b] = t;
    m->heap[a]->hidx = a;
    m->heap[b]->hidx = b;
}

static void heap_fix(distlock_multi *m, size_t i)
{
    while (i > 0 && heap_less(m, i, (i - 1) / 2)) {
        heap_swap(m, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, s = i;
        if (l < m->nheap && heap_less(m, l, s))
            s = l;
        if (r < m->nheap && heap_less(m, r, s))
            s = r;
        if (s == i)
            break;
        heap_swap(m, i, s);
        i = s;
    }
}

static void timer_clear(distlock_op *op)
{
    distlock_multi *m = op->m;
    if (op->at == UINT64_MAX)
        return;
    size_t i = op->hidx;
    op->at = UINT64_MAX;
    m->nheap--;
    if (i != m->nheap) {
        m->heap[i] = m->heap[m->nheap];
        m->heap[i]->hidx = i;
        heap_fix(m, i);
    }
}

/* at: a monotonic time (us); UINT64_MAX: none. A heap that cannot grow
 * (ENOMEM) leaves the multi's timeout at 1 ms from then on, so that the
 * time missed is still looked at. */
static int timer_set(distlock_op *op, uint64_t at)
{
    distlock_multi *m = op->m;
    if (at == UINT64_MAX) {
        timer_clear(op);
        return 0;
    }
    if (op->at != UINT64_MAX) {
        op->at = at;
        heap_fix(m, op->hidx);
        return 0;
    }
    if (m->nheap == m->capheap) {
        size_t cap = m->capheap ? 2 * m->capheap : 64;
        distlock_op **h = realloc(m->heap, cap * sizeof(*h));
        if (h == NULL) {
            m->heap_short = 1;
            return -1;
        }
        m->heap = h;
        m->capheap = cap;
    }
    op->at = at;
    op->hidx = m->nheap;
    m->heap[m->nheap++] = op;
    heap_fix(m, op->hidx);
    return 0;
}

/* ------------------------------------------------------------ lists */

static void step_push(distlock_op *op)
{
    distlock_multi *m = op->m;
    if (op->in_step || op->state == S_DONE)
        return;
    op->in_step = 1;
    op->step_next = NULL;
    op->step_prev = m->step_tail;
    if (m->step_tail)
        m->step_tail->step_next = op;
    else
        m->step_head = op;
    m->step_tail = op;
}

static distlock_op *step_pop(distlock_multi *m)
{
    distlock_op *op = m->step_head;
    if (op) {
        m->step_head = op->step_next;
        if (m->step_head == NULL)
            m->step_tail = NULL;
        else
            m->step_head->step_prev = NULL;
        op->in_step = 0;
    }
    return op;
}

static void step_remove(distlock_op *op)
{
    distlock_multi *m = op->m;
    if (!op->in_step)
        return;
    /* doubly linked: tens of thousands of ops end in one perform */
    if (op->step_prev)
        op->step_prev->step_next = op->step_next;
    else
        m->step_head = op->step_next;
    if (op->step_next)
        op->step_next->step_prev = op->step_prev;
    else
        m->step_tail = op->step_prev;
    op->step_prev = op->step_next = NULL;
    op->in_step = 0;
}

static void done_push(distlock_op *op)
{
    distlock_multi *m = op->m;
    op->in_doneq = 1;
    op->done_next = NULL;
    op->done_prev = m->done_tail;
    if (m->done_tail)
        m->done_tail->done_next = op;
    else
        m->done_head = op;
    m->done_tail = op;
}

static void doneq_remove(distlock_op *op)
{
    distlock_multi *m = op->m;
    if (!op->in_doneq)
        return;
    if (op->done_prev)
        op->done_prev->done_next = op->done_next;
    else
        m->done_head = op->done_next;
    if (op->done_next)
        op->done_next->done_prev = op->done_prev;
    else
        m->done_tail = op->done_prev;
    op->done_prev = op->done_next = NULL;
    op->in_doneq = 0;
}

static void wake_loop(distlock_multi *m)
{
    uint64_t one = 1;
    ssize_t w = write(m->evfd, &one, sizeof one);
    (void)w;  /* EAGAIN: already far from zero, readable anyway */
}

/* ------------------------------------------------------------ slots */

static void sq_remove(distlock_op *op)
{
    distlock_multi *m = op->m;
    if (!op->in_sq)
        return;
    int q = op->sq_which;
    /* doubly linked: thousands of ops that wait for a slot may end at once */
    if (op->sq_prev)
        op->sq_prev->sq_next = op->sq_next;
    else
        m->sq_head[q] = op->sq_next;
    if (op->sq_next)
        op->sq_next->sq_prev = op->sq_prev;
    else
        m->sq_tail[q] = op->sq_prev;
    op->sq_prev = op->sq_next = NULL;
    op->in_sq = 0;
}

static long slot_limit(const distlock_multi *m)
{
    long lim = atomic_load_explicit(&m->c->multi_runs, memory_order_relaxed);
    return lim < 1 ? 1 : lim;
}

/* Free slots to the queues' heads, releases and clean-ups first: they go
 * to their next step holding it. */
static void slot_fill(distlock_multi *m)
{
    long lim = slot_limit(m);
    while (m->wire < lim) {
        int q = m->sq_head[0] ? 0 : 1;
        distlock_op *op = m->sq_head[q];
        if (op == NULL)
            return;
        sq_remove(op);
        op->has_slot = 1;
        m->wire++;
        step_push(op);
    }
}

/* 1: op holds a slot (it may start a run); 0: it waits in its queue (its
 * place kept across calls) and gets its next step when one is free.
 * urgent: a release, an extend or an acquire's clean-up. */
static int slot_take(distlock_op *op, int urgent)
{
    distlock_multi *m = op->m;
    int q = urgent ? 0 : 1;
    if (op->has_slot)
        return 1;
    if (op->in_sq && op->sq_which != q && urgent)
        sq_remove(op);  /* an acquire cancelled while it waited: clean-up now */
    if (!op->in_sq) {
        if (m->wire < slot_limit(m) && m->sq_head[0] == NULL && (urgent || m->sq_head[1] == NULL)) {
            op->has_slot = 1;
            m->wire++;
            return 1;
        }
        op->in_sq = 1;
        op->sq_which = q;
        op->sq_next = NULL;
        op->sq_prev = m->sq_tail[q];
        if (m->sq_tail[q])
            m->sq_tail[q]->sq_next = op;
        else
            m->sq_head[q] = op;
        m->sq_tail[q] = op;
    }
    return 0;
}

static void slot_put(distlock_op *op)
{
    sq_remove(op);
    if (!op->has_slot)
        return;
    op->has_slot = 0;
    op->m->wire--;
    slot_fill(op->m);
}

/* ------------------------------------------------------------ descriptors */

static fdslot *slot_of(distlock_multi *m, int fd)
{
    if (fd < 0)
        return NULL;
    if (fd >= m->nfds) {
        int n = m->nfds ? m->nfds : 64;
        while (n <= fd)
            n *= 2;
        fdslot *t = realloc(m->fds, (size_t)n * sizeof(*t));
        if (t == NULL)
            return NULL;
        memset(t + m->nfds, 0, (size_t)(n - m->nfds) * sizeof(*t));
        m->fds = t;
        m->nfds = n;
    }
    return &m->fds[fd];
}

/* Add or renew fd in the set (level-triggered). */
static int ep_set(distlock_multi *m, int fd, uint32_t events)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = events;
    ev.data.fd = fd;
    if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev) == 0)
        return 0;
    if (errno == EEXIST && epoll_ctl(m->epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
        return 0;
    return -1;
}

static void ep_del(distlock_multi *m, int fd)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    (void)epoll_ctl(m->epfd, EPOLL_CTL_DEL, fd, &ev);  /* closed since: gone already */
}

/* The run's fds not in its new poll set leave the set (if still this op's:
 * a number closed by this run may be another's by now). */
static void run_unwatch(distlock_op *op, const struct pollfd *keep, int nkeep)
{
    distlock_multi *m = op->m;
    int j = 0;
    for (int i = 0; i < op->nw; i++) {
        int fd = op->wfds[i], kept = 0;
        for (int k = 0; k < nkeep && !kept; k++)
            kept = keep[k].fd == fd;
        if (kept) {
            op->wfds[j++] = fd;
            continue;
        }
        if (fd < m->nfds && m->fds[fd].kind == FD_RUN && m->fds[fd].op == op) {
            ep_del(m, fd);
            m->fds[fd].kind = FD_NONE;
            m->fds[fd].op = NULL;
        }
    }
    op->nw = j;
}

static int run_watch(distlock_op *op)
{
    distlock_multi *m = op->m;
    run_unwatch(op, op->pfd, op->np);
    if (op->capw < op->np) {
        int *w = realloc(op->wfds, (size_t)op->np * sizeof(int));
        if (w == NULL)
            return -1;
        op->wfds = w;
        op->capw = op->np;
    }
    op->nw = 0;
    for (int k = 0; k < op->np; k++) {
        int fd = op->pfd[k].fd;
        if (fd < 0)
            continue;
        uint32_t ev = ((op->pfd[k].events & POLLIN) ? EPOLLIN : 0) |
                      ((op->pfd[k].events & POLLOUT) ? EPOLLOUT : 0);
        fdslot *s = slot_of(m, fd);
        if (s == NULL || ep_set(m, fd, ev) != 0)
            return -1;
        s->kind = FD_RUN;
        s->op = op;
        op->wfds[op->nw++] = fd;
    }
    return 0;
}

static cwatch *cancel_watch(distlock_multi *m, distlock_cancel *k)
{
    int fd = distlock__cancel_fd(k);
    if (fd < 0)
        return NULL;
    cwatch *cw = m->cwatches;
    while (cw && cw->cancel != k)
        cw = cw->next;
    if (cw == NULL) {
        fdslot *s = slot_of(m, fd);
        if (s == NULL || (cw = calloc(1, sizeof(*cw))) == NULL)
            return NULL;
        if (ep_set(m, fd, EPOLLIN) != 0) {
            free(cw);
            return NULL;
        }
        cw->cancel = k;
        cw->fd = fd;
        cw->watched = 1;
        cw->next = m->cwatches;
        m->cwatches = cw;
        s->kind = FD_CANCEL;
        s->cw = cw;
    }
    cw->refs++;
    return cw;
}

static void cancel_unwatch(distlock_multi *m, cwatch *cw)
{
    if (cw == NULL || --cw->refs > 0)
        return;
    if (cw->watched) {
        ep_del(m, cw->fd);
        m->fds[cw->fd].kind = FD_NONE;
        m->fds[cw->fd].cw = NULL;
    }
    for (cwatch **pp = &m->cwatches; *pp; pp = &(*pp)->next)
        if (*pp == cw) {
            *pp = cw->next;
            break;
        }
    free(cw);
}

/* ------------------------------------------------------------ runs */

/* Drive op's run as far as it goes: 1 when it finished (op->run_rc, and
 * the thread's detail, are its), 0 when it waits (descriptors and time set). */
static int run_drive(distlock_op *op)
{
    uint64_t next = UINT64_MAX;
    struct pollfd *pfd = NULL;
    int np = distlock__run_interest(op->run, &pfd, &next);
    if (np == 0) {
        run_unwatch(op, NULL, 0);
        op->pfd = NULL;
        op->np = 0;
        timer_clear(op);
        op->run_rc = distlock__run_finish(op->run);
        op->run = NULL;
        return 1;
    }
    op->pfd = pfd;
    op->np = np;
    if (run_watch(op) != 0 && next > distlock__now_us() + 1000u)
        next = distlock__now_us() + 1000u;  /* cannot watch: look every ms */
    (void)timer_set(op, next);
    return 0;
}

/* Started (op->run), or finished at once (NULL: op->run_rc with its detail). */
static int run_begin(distlock_op *op, distlock__run *r, int rc)
{
    op->run = r;
    if (r == NULL) {
        op->run_rc = rc;
        return 1;
    }
    return run_drive(op);
}

/* A step of a run woken by its descriptors or its time: what happened is
 * read with a poll() of its own set that does not wait. */
static int run_step(distlock_op *op)
{
    if (op->np > 0) {
        for (int k = 0; k < op->np; k++)
            op->pfd[k].revents = 0;
        if (poll(op->pfd, (nfds_t)op->np, 0) < 0)
            for (int k = 0; k < op->np; k++)
                op->pfd[k].revents = 0;
    }
    /* Out of the set before the run may close them: epoll keeps a
     * registration for as long as the open file lives, and a forked child's
     * copy keeps a socket we closed alive (its registration, readable for
     * good, would make the descriptor spin). run_drive adds what the run
     * still wants. */
    run_unwatch(op, NULL, 0);
    distlock__run_advance(op->run);
    return run_drive(op);
}

/* ------------------------------------------------------------ keys */

static unsigned key_hash(const char *s)
{
    unsigned h = 2166136261u;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h % NBUCKETS;
}

static mkey *key_get(distlock_multi *m, const char *key)
{
    unsigned b = key_hash(key);
    mkey *k = m->keys[b];
    while (k && strcmp(k->key, key) != 0)
        k = k->next;
    if (k)
        return k;
    if ((k = calloc(1, sizeof(*k))) == NULL || (k->key = strdup(key)) == NULL) {
        free(k);
        return NULL;
    }
    k->next = m->keys[b];
    m->keys[b] = k;
    return k;
}

static void key_put(distlock_multi *m, mkey *k)
{
    if (k->active || k->head)
        return;
    if (k->held_ch) {
        distlock__channel_unhold(m->c, k->held_ch);
        free(k->held_ch);
    }
    for (mkey **pp = &m->keys[key_hash(k->key)]; *pp; pp = &(*pp)->next)
        if (*pp == k) {
            *pp = k->next;
            break;
        }
    free(k->key);
    free(k);
}

/* The key's active acquire registered its waiter on channel `ch`: the
 * channel stays subscribed until no acquire of the key is left here
 * (key_put), so the next one to wait does not find it dropped by the
 * subscriber in between (wait.c); without memory, it is not held. */
static void key_hold_channel(distlock_multi *m, mkey *k, const char *ch)
{
    if (k->held_ch || (k->held_ch = strdup(ch)) == NULL)
        return;
    if (distlock__channel_hold(m->c, ch) != 0) {
        free(k->held_ch);
        k->held_ch = NULL;
    }
}

/* Every op enters and leaves its key's queue here, so that k->try_once is
 * right whatever the path (a call, a cancel, a deadline, the turn passed
 * on in finish). */
static void queue_push(mkey *k, distlock_op *op)
{
    if (op->wait_ms == 0)
        k->try_once++;
    op->qnext = NULL;
    op->qprev = k->tail;
    if (k->tail)
        k->tail->qnext = op;
    else
        k->head = op;
    k->tail = op;
}

/* op queued at its key (doubly linked: thousands of waiters of one key
 * cancelled at once each leave in O(1)) */
static void queue_remove(distlock_op *op)
{
    mkey *k = op->k;
    if (op->wait_ms == 0)
        k->try_once--;
    if (op->qprev)
        op->qprev->qnext = op->qnext;
    else
        k->head = op->qnext;
    if (op->qnext)
        op->qnext->qprev = op->qprev;
    else
        k->tail = op->qprev;
    op->qprev = op->qnext = NULL;
}

/* ------------------------------------------------------------ finishing */

static void set_err(distlock_op *op, int rc)
{
    op->rc = rc;
    free(op->err);
    op->err = NULL;
    if (rc != DISTLOCK_OK)
        op->err = distlock__error_copy();
}

/* The acquire's sleeper, on the multi's eventfd: a release of its key (the
 * subscriber) or a cancel passed on wakes it there. */
static void sleeper_on(distlock_op *op)
{
    distlock_multi *m = op->m;
    if (op->embedded)
        distlock__sleeper_start_private(m->c, &op->w.sl, op->gen, op->cancel, m->evfd,
                                        m->epfd);
    else
        distlock__sleeper_start_on(m->c, &op->w.sl, op->gen, op->cancel, m->evfd);
    op->sleeper_on = 1;
    op->sl_prev = NULL;
    op->sl_next = m->sleepers;
    if (m->sleepers)
        m->sleepers->sl_prev = op;
    m->sleepers = op;
}

static void sleeper_off(distlock_op *op)
{
    distlock_multi *m = op->m;
    if (!op->sleeper_on)
        return;
    distlock__sleeper_end(m->c, &op->w.sl);
    if (op->sl_prev)
        op->sl_prev->sl_next = op->sl_next;
    else
        m->sleepers = op->sl_next;
    if (op->sl_next)
        op->sl_next->sl_prev = op->sl_prev;
    op->sleeper_on = 0;
}

static void op_release_memory(distlock_op *op);

static void ext_wait_on(distlock_op *op)
{
    distlock_multi *m = op->m;
    if (op->ew_on)
        return;
    op->ew_on = 1;
    op->ew_prev = NULL;
    op->ew_next = m->ext_waiters;
    if (m->ext_waiters)
        m->ext_waiters->ew_prev = op;
    m->ext_waiters = op;
}

static void ext_wait_off(distlock_op *op)
{
    distlock_multi *m = op->m;
    if (!op->ew_on)
        return;
    if (op->ew_prev)
        op->ew_prev->ew_next = op->ew_next;
    else
        m->ext_waiters = op->ew_next;
    if (op->ew_next)
        op->ew_next->ew_prev = op->ew_prev;
    op->ew_on = 0;
}

/* An acquire that won a read lock or a permit, which others may share: the
 * next local waiter of its key looks at once (wait.c). */
static int won_shared(const distlock_op *op)
{
    return op->type == OP_ACQUIRE && op->rc == DISTLOCK_OK && op->rq.kind != DISTLOCK__LOCK;
}

/* op ended with op->rc (and op->err): the next of its key goes, it is
 * counted, and handed out (or freed, if its owner let go of it). */
static void finish(distlock_op *op)
{
    distlock_multi *m = op->m;
    timer_clear(op);
    slot_put(op);
    sleeper_off(op);
    if (op->ew_on) {
        /* ended while waiting for a renewal: its end must not write an
         * eventfd that may be closed by then */
        ext_wait_off(op);
        distlock__renewal_unwake(op->lock->h, m->evfd);
    }
    if (op->waiter_on) {
        op->w.pass_now = won_shared(op);
        op->w.pass_wake = op->rc != DISTLOCK_OK;
        distlock__waiter_remove(m->c, &op->w);
        op->waiter_on = 0;
    }
    cancel_unwatch(m, op->cw);
    op->cw = NULL;
    if (op->type == OP_ACQUIRE && op->k == NULL) {
        /* a fair acquire or a blocking acquire's wait: never in the local
         * queue (multi_acquire, distlock__acquire_wait) */
    } else if (op->type == OP_ACQUIRE) {
        mkey *k = op->k;
        if (k->active == op) {
            k->active = k->head;
            if (k->head) {
                queue_remove(k->active);
                k->active->state = S_START;
                step_push(k->active);
            }
        } else {
            queue_remove(op);
        }
        key_put(m, k);
        op->k = NULL;
    }
    if (op->type == OP_ACQUIRE && op->embedded) {
        /* A blocking acquire's wait: its caller registers the grant, with
         * the set it came on as the release's preferred one (no run of this
         * multi holds it once the call returns), and counts the call. */
        op->h = NULL;
        free(op->ch);
        op->ch = NULL;
    } else if (op->type == OP_ACQUIRE) {
        if (op->rc == DISTLOCK_OK) {
            /* No preferred connection set for its release: a blocking release
             * (distlock_release, distlock_lock_free, a front end's close) on
             * this thread would wait for that set, which a run of a multi
             * driven by this very thread may hold (seconds of stall). Any set
             * will do: the requests' tags keep one key+token's order
             * (round.c). */
            op->att.set_id = 0;
            op->rc = distlock__held_register(m->c, op->h, op->l, &op->att, &op->won);
            if (op->rc != DISTLOCK_OK)
                set_err(op, op->rc);  /* the handle was freed there */
        } else {
            distlock__held_free(op->h);
            free(op->l);
        }
        op->h = NULL;
        op->l = NULL;
        free(op->ch);
        op->ch = NULL;
        if (distlock__stats_on(&m->c->stats))
            distlock__stats_acquire(&m->c->stats, op->rc,
                                    distlock__stats_span(op->first_t0, op->att.t1_us));
    }
    op->state = S_DONE;
    m->running--;
    step_remove(op);
    if (op->user_freed) {
        /* nobody can take what it won: it goes back (blocking, as
         * distlock_op_free of a done op does), never stays held */
        if (op->won)
            distlock_lock_free(op->won);
        op->won = NULL;
        op_release_memory(op);
        return;
    }
    done_push(op);
}

/* ------------------------------------------------------------ an acquire */

/* Its own cancel (distlock_op_cancel, args'): it ends even a first attempt. */
static int own_cancel_fired(const distlock_op *op)
{
    return op->cancel_req || distlock__cancel_fired(op->cancel);
}

/* Was the acquire cancelled? Its own cancel, and once it waits (wait_ms !=
 * 0) a client cancel since it started. */
static int acq_cancelled(const distlock_op *op)
{
    return own_cancel_fired(op) ||
           (op->wait_ms != 0 && distlock__cancel_gen(op->m->c) != op->gen);
}

/* Where a waiter's leave (of the fair queues, of the writers' registry)
 * goes: every node, or, cancelled, only those its attempts were sent to,
 * the only ones where it can have noted anything; a node none of them
 * reached (the cancel dropped the request while its connection was being
 * made) is not waited for. */
static uint64_t leave_nodes(const distlock_op *op)
{
    return acq_cancelled(op) ? op->reached : ~0ull;
}

/* A lock won after a cancel goes back (the status is the cancel's). The
 * release goes to every node the attempt may have reached (att.maybe); a
 * node whose connection is still being made got nothing of it (the cancel
 * dropped the request there), and the cancelled call does not wait for
 * that connection to send it a release (distlock__run_drop_unsent). */
static int undo_start(distlock_op *op)
{
    int rc = DISTLOCK_OK;
    distlock__run *r = distlock__release_lease_start(op->m->c, 0, op->h->key, op->h->token,
                                                     op->att.valid_until_us, op->att.set_id,
                                                     op->att.maybe, 0, NULL, &rc);
    if (r)
        distlock__run_drop_unsent(r);
    op->state = S_UNDO;
    return run_begin(op, r, rc);
}

/* A try-once acquire queued behind one that waits fails as a refused try:
 * the key was held at that one's last try. */
static inline __attribute__((always_inline)) void fail_queued_try_once(distlock_op *q)
{
    distlock__fail(DISTLOCK_NOTACQUIRED, "'%s' is held: another acquire of this multi "
                   "waits for it", q->k->key);
    set_err(q, DISTLOCK_NOTACQUIRED);
    finish(q);
}

/* The key's active acquire now waits: the try-once acquires queued behind
 * it fail. The walk is skipped when there are none (k->try_once), as it is
 * for nearly every wait: thousands of waiters queued at one key would
 * otherwise be walked each time the next of them starts its wait. */
static inline __attribute__((always_inline)) void fail_try_once(mkey *k)
{
    for (distlock_op *q = k->head, *next; q && k->try_once > 0; q = next) {
        next = q->qnext;
        if (q->wait_ms == 0)
            fail_queued_try_once(q);
    }
}

/* Blocking calls of this client waiting for one key take turns (wait.c):
 * only the longest-waiting one re-checks (and a release wakes it). 1 when
 * op has the turn; else 0 and op->wake_at is its next re-check time (or its
 * deadline, when it tries once), at which it looks again, having sent
 * nothing. The time is drawn before asking (the draw is a system call,
 * kept out of the client's lock) and kept only without the turn. Out of
 * acq_step, whose frame is on the blocking acquire's stack budget. */
static __attribute__((noinline)) int has_turn_else_timer(distlock_op *op)
{
    long backoff = op->backoff;
    uint64_t at = distlock__recheck_at(op->m->c, 0, op->deadline, &backoff);
    if (distlock__waiter_turn_or_timer(op->m->c, &op->w, &at))
        return 1;
    op->backoff = backoff;
    op->wake_at = at;
    return 0;
}

static void acq_step(distlock_op *op)
{
    distlock_multi *m = op->m;
    distlock_client *c = m->c;
    const char *key = op->h->key;
    int rc;
    for (;;) {
        switch (op->state) {
        case S_QUEUED:
            if (acq_cancelled(op)) {
                set_err(op, distlock__wait_cancelled(key, op->t_start, ""));
                finish(op);
                return;
            }
            if (distlock__now_us() >= op->deadline) {
                set_err(op, distlock__wait_expired(key, op->wait_ms));
                finish(op);
                return;
            }
            (void)timer_set(op, op->deadline);
            return;

        case S_START:
            timer_clear(op);
            if (own_cancel_fired(op)) {
                distlock__fail(DISTLOCK_ECANCELED, "acquiring '%s' cancelled before it "
                               "started; nothing was sent", key);
                set_err(op, DISTLOCK_ECANCELED);
                finish(op);
                return;
            }
            if (!slot_take(op, 0)) {
                /* waiting for a slot: nothing sent yet, as in S_QUEUED */
                if (acq_cancelled(op)) {
                    set_err(op, distlock__wait_cancelled(key, op->t_start, ""));
                    finish(op);
                } else if (distlock__now_us() >= op->deadline) {
                    distlock__fail(DISTLOCK_NOTACQUIRED, "'%s' not tried within %ld ms: the "
                                   "multi's %ld runs on the wire (DISTLOCK_OPT_MULTI_RUNS) were "
                                   "busy all that time; nothing was sent", key, op->wait_ms,
                                   slot_limit(m));
                    set_err(op, DISTLOCK_NOTACQUIRED);
                    finish(op);
                } else {
                    (void)timer_set(op, op->deadline);
                }
                return;
            }
            sleeper_on(op);
            if ((rc = distlock__acq_req_init(c, op->h, op->given, op->wait_ms, &op->rq)) !=
                DISTLOCK_OK) {
                set_err(op, rc);  /* nothing was sent */
                finish(op);
                return;
            }
            op->fair = op->rq.fair;
            op->state = S_FIRST;
            rc = DISTLOCK_OK;
            if (!run_begin(op, distlock__acquire_start(c, &op->rq, &op->att, &rc), rc))
                return;
            continue;

        case S_FIRST:
            /* Cancelled: the requests still waiting for their connection
             * are never sent (the call does not wait for a lookup or a
             * connect); those on the wire are waited for (their replies
             * decide what the cancel must undo, below). */
            if (op->run && own_cancel_fired(op))
                distlock__run_drop_unsent(op->run);
            if (op->run && !run_step(op))
                return;
            rc = op->run_rc;
            if (!op->embedded)
                set_err(op, rc);  /* a blocking acquire's came with it */
            op->readers = op->att.readers;
            op->reached |= op->att.reached;
            op->first_t0 = op->att.t0_us;
            if (own_cancel_fired(op)) {
                distlock__first_cancelled(key, rc == DISTLOCK_OK);
                set_err(op, DISTLOCK_ECANCELED);
                if (rc == DISTLOCK_OK) {
                    if (!undo_start(op))
                        return;
                    continue;
                }
                op->state = S_OUT;
                continue;
            }
            op->late = rc == DISTLOCK_ETIMEDOUT;
            if (distlock__won_writer_leaves(rc, &op->rq, &op->att)) {
                /* won at once, but its intent may stand where it did not
                 * grant: it leaves as a later attempt's win does, before
                 * the lock is the caller's */
                if (!slot_take(op, 1))
                    return;  /* S_FIRST again when it has one (nothing sent yet) */
                op->first_won = 1;
                op->state = S_WONLEAVE;
                if (!run_begin(op, distlock__write_leave_start(c, key, op->rq.writer, ~0ull, &rc),
                               rc))
                    return;
                continue;
            }
            if (distlock__first_attempt_ends(rc, op->wait_ms)) {
                finish(op);
                return;
            }
            op->state = S_ENTER;
            continue;

        case S_ENTER:
            if ((op->ch = malloc(DISTLOCK__SIDEKEY_MAX)) == NULL) {
                set_err(op, distlock__fail(DISTLOCK_ENOMEM, "out of memory"));
                op->state = S_OUT;
                continue;
            }
            distlock__channel_name(op->ch, key);
            op->w.channel = op->ch;
            op->w.token = op->fair ? op->h->token : NULL;
            op->w.head = op->att.head;
            /* a writer that found read locks takes no turns (wait.c); one
             * whose round merely ended before a slow node answered does */
            op->w.turns = op->embedded && !op->fair && !op->att.saw_readers;
            op->w.turn_group = distlock__turn_group(&op->rq);
            op->backoff = c->retry_min_ms;
            op->entered_wait = 1;
            if (op->k)
                fail_try_once(op->k);
            int settled_at_add = 0;
            if (distlock__waiter_add_start(c, &op->w, &settled_at_add) == DISTLOCK_OK) {
                op->waiter_on = 1;
                op->sub_pause = op->embedded && !settled_at_add;
                if (op->k)
                    key_hold_channel(m, op->k, op->ch);
                op->sub_deadline = distlock__now_us() +
                                   (uint64_t)c->tp.connect_timeout_ms * 1000u;
                /* the confirmation is awaited within the wait's budget: a
                 * node that never confirms must not push the call's end
                 * (its try at the deadline) to the connect timeout */
                if (op->sub_deadline > op->deadline)
                    op->sub_deadline = op->deadline;
                op->state = S_SUB;
            } else {
                op->state = S_LOOP;  /* no subscriber: re-checks only */
            }
            continue;

        case S_SUB:
            if (acq_cancelled(op)) {
                set_err(op, distlock__wait_cancelled(key, op->t_start, ""));
                op->state = S_OUT;
                continue;
            }
            if (op->sub_pause) {
                /* Unsettled at the add: a blocking wait sleeps once first,
                 * as when its add and its first look were one step under
                 * the client's lock (the hook is asked before each sleep).
                 * Settled since: woken here (a second wake if the
                 * confirmation's came first; one read drains both), so the
                 * loop is back at once. */
                op->sub_pause = 0;
                if (distlock__waiter_settled(c, &op->w, op->sub_deadline))
                    distlock__sleeper_wake(&op->w.sl);
                (void)timer_set(op, op->sub_deadline);
                return;
            }
            /* unconfirmed at the deadline: the re-checks cover it */
            if (!distlock__waiter_settled(c, &op->w, op->sub_deadline)) {
                (void)timer_set(op, op->sub_deadline);
                return;
            }
            op->subscribed = 1;
            op->state = S_LOOP;
            continue;

        case S_LOOP:
            timer_clear(op);
            if (acq_cancelled(op)) {
                set_err(op, distlock__wait_cancelled(key, op->t_start, ""));
                op->state = S_OUT;
                continue;
            }
            if (op->waiter_on && op->w.turns && distlock__now_us() < op->deadline &&
                !has_turn_else_timer(op)) {
                op->notice = op->subscribed;
                op->state = S_SLEEP;
                continue;
            }
            if (!slot_take(op, 0)) {
                if (distlock__now_us() >= op->deadline) {
                    set_err(op, distlock__wait_expired(key, op->wait_ms));
                    op->state = S_OUT;
                    continue;
                }
                (void)timer_set(op, op->deadline);
                return;
            }
            if (!op->fair && !op->given &&
                (rc = distlock_token_generate(op->h->token, 33)) != DISTLOCK_OK) {
                set_err(op, rc);
                op->state = S_OUT;
                continue;
            }
            op->rq.queue_ttl_ms = distlock__queue_ttl(c);
            op->named = op->fair ? distlock__waiter_named(c, &op->w) : 0;
            op->state = S_TRY;
            rc = DISTLOCK_OK;
            if (!run_begin(op, distlock__acquire_start(c, &op->rq, &op->att, &rc), rc))
                return;
            continue;

        case S_TRY:
            if (op->run && acq_cancelled(op))  /* as in S_FIRST */
                distlock__run_drop_unsent(op->run);
            if (op->run && !run_step(op))
                return;
            rc = op->run_rc;
            set_err(op, rc);
            op->readers |= op->att.readers;
            op->reached |= op->att.reached;
            if (op->att.saw_readers && op->w.turns)  /* a writer noted in the registry (wait.c) */
                distlock__waiter_stop_turns(c, &op->w);
            /* a blocking acquire asks its client's interrupt hook too, as
             * it does before each sleep (distlock__acquire_wait) */
            if (rc == DISTLOCK_OK &&
                (acq_cancelled(op) || (op->embedded && distlock__cancelled(c, &op->w.sl, 1)))) {
                set_err(op, distlock__wait_cancelled(key, op->t_start,
                                                     "; the lock won meanwhile was released"));
                if (!undo_start(op))
                    return;
                continue;
            }
            if (rc == DISTLOCK_OK && op->readers && op->rq.writer) {
                /* a writer that won leaves the registry of waiting writers
                 * (the acquire script did if it won on the zset; not if the
                 * readers were gone and the key free): its entry would keep
                 * a later intent up after it gave up. Then its grant is
                 * judged again (distlock__grant_outlived). */
                if (!slot_take(op, 1))
                    return;  /* S_TRY again when it has one (nothing sent yet) */
                op->state = S_WONLEAVE;
                if (!run_begin(op, distlock__write_leave_start(c, key, op->rq.writer, ~0ull, &rc),
                               rc))
                    return;
                continue;
            }
            op->state = S_JUDGE;
            continue;

        case S_WONLEAVE:
            if (op->run && !run_step(op))
                return;
            if (acq_cancelled(op)) {
                set_err(op, distlock__wait_cancelled(key, op->t_start,
                                                     "; the lock won meanwhile was released"));
                if (!undo_start(op))
                    return;
                continue;
            }
            if ((rc = distlock__grant_outlived(&op->rq, &op->att)) != DISTLOCK_OK) {
                set_err(op, rc);
                if (!slot_take(op, 1))
                    return;  /* S_WONLEAVE again when it has one */
                op->state = S_LATEUNDO;
                if (!run_begin(op, distlock__release_lease_start(c, 0, key, op->h->token,
                                                                 op->att.valid_until_us,
                                                                 op->att.set_id, op->att.maybe,
                                                                 0, NULL, &rc), rc))
                    return;
                continue;
            }
            op->state = S_JUDGE;
            continue;

        case S_LATEUNDO:
            if (op->run && !run_step(op))
                return;
            /* the late grant's status and detail stand, whatever the release said;
             * a first attempt's late grant enters the wait, as one that
             * came late at once (distlock__first_attempt_ends) */
            op->state = op->first_won ? S_ENTER : S_JUDGE;
            if (op->first_won)
                op->late = 1, op->first_won = 0;
            continue;

        case S_JUDGE: {
            rc = op->rc;
            if (rc != DISTLOCK_OK && rc != DISTLOCK_NOTACQUIRED && acq_cancelled(op)) {
                set_err(op, distlock__wait_cancelled(key, op->t_start, ""));
                op->state = S_OUT;
                continue;
            }
            if (distlock__attempt_ends_wait(rc, &op->late)) {
                op->state = S_OUT;
                continue;
            }
            if (op->fair)
                distlock__waiter_set_head(c, &op->w, op->att.head, op->named);
            if (op->waiter_on && op->w.turns)
                distlock__waiter_saw_holder(c, &op->w, op->att.holder_pttl);
            uint64_t now = distlock__now_us();
            if (now >= op->deadline) {
                if (rc == DISTLOCK_NOTACQUIRED)
                    set_err(op, distlock__wait_expired(key, op->wait_ms));
                op->state = S_OUT;  /* ETIMEDOUT keeps its detail */
                continue;
            }
            if (op->fair && op->att.split) {
                /* The queues disagree on the order (acquire.c, real_split):
                 * nobody can win. Out of every queue, and back after a
                 * random pause, so they agree. Anything else that lost keeps
                 * its place and sleeps, woken by a release or a leave. */
                op->state = S_SPLIT;
                if (!run_begin(op, distlock__leave_queue_start(c, key, op->h->token, ~0ull, &rc),
                               rc))
                    return;
                continue;
            }
            op->wake_at = distlock__recheck_at(c, op->att.holder_pttl, op->deadline,
                                               &op->backoff);
            op->notice = op->subscribed;
            op->state = S_SLEEP;
            continue;
        }

        case S_SPLIT:
            if (op->run && !run_step(op))
                return;
            op->wake_at = distlock__split_pause_at(c);
            op->notice = 0;
            op->state = S_SLEEP;
            continue;

        case S_SLEEP: {
            if (acq_cancelled(op)) {
                set_err(op, distlock__wait_cancelled(key, op->t_start, ""));
                op->state = S_OUT;
                continue;
            }
            int go = op->kick;
            op->kick = 0;
            /* a release, or (turns) the one before won a lease we may share,
             * or the one with the turn saw a lease ending before our timer
             * (wait.c) */
            if ((op->notice || op->w.turns) && distlock__waiter_take_wake(c, &op->w, op->notice))
                go = 1;
            if (!go && distlock__now_us() < op->wake_at) {
                (void)timer_set(op, op->wake_at);
                return;
            }
            op->state = S_LOOP;
            continue;
        }

        case S_UNDO:
            if (op->run && !run_step(op))
                return;
            /* the cancel's status and detail stand, whatever the release said */
            op->state = S_OUT;
            continue;

        case S_OUT:
            if (op->waiter_on) {
                op->w.pass_now = won_shared(op);
                op->w.pass_wake = op->rc != DISTLOCK_OK;  /* wait.c */
                distlock__waiter_remove(c, &op->w);
                op->waiter_on = 0;
            }
            sleeper_off(op);
            if (op->readers && op->rc != DISTLOCK_OK) {
                /* a writer that gives up leaves the registry of waiting
                 * writers and withdraws the intent if no other writer still
                 * waits: the readers it kept out need not wait for the
                 * intent's end (one that won left it in S_WONLEAVE) */
                if (!slot_take(op, 1))
                    return;
                op->state = S_WLEAVE;
                if (!run_begin(op, distlock__write_leave_start(c, key, op->rq.writer,
                                                               leave_nodes(op), &rc), rc))
                    return;
                continue;
            }
            op->state = S_WLEAVE;
            continue;

        case S_WLEAVE:
            if (op->run && !run_step(op))
                return;
            if (op->fair && op->rc != DISTLOCK_OK) {
                if (!slot_take(op, 1))
                    return;
                op->state = S_QLEAVE;
                if (!run_begin(op, distlock__leave_queue_start(c, key, op->h->token,
                                                               leave_nodes(op), &rc), rc))
                    return;
                continue;
            }
            op->state = S_QLEAVE;
            continue;

        case S_QLEAVE:
            if (op->run && !run_step(op))
                return;
            if (op->rc == DISTLOCK_OK && acq_cancelled(op)) {
                set_err(op, distlock__wait_cancelled(key, op->t_start,
                                                     "; the lock won meanwhile was released"));
                if (!undo_start(op))
                    return;
                continue;
            }
            op->att.t0_us = op->first_t0;
            finish(op);
            return;

        default:
            return;
        }
    }
}

/* ------------------------------------------------------------ release, extend */

static void rel_step(distlock_op *op)
{
    distlock__held *h = op->lock->h;
    if (op->state == S_START) {
        int rc = DISTLOCK_OK;
        if (!slot_take(op, 1))
            return;
        op->state = S_REL;
        if (!run_begin(op, distlock__release_lease_start(op->m->c, h->quorum, h->key, h->token,
                                                         op->until, h->set_pref, h->maybe,
                                                         op->retry, &op->sent, &rc), rc))
            return;
    } else if (op->run && !run_step(op)) {
        return;
    }
    int rc = distlock__release_end(op->lock, op->run_rc, op->retry, op->sent);
    set_err(op, rc);
    if (rc == DISTLOCK_OK) {
        /* a release of a key our acquires wait for: the next tries now */
        unsigned b = key_hash(op->lock->h->key);
        mkey *k = op->m->keys[b];
        while (k && strcmp(k->key, op->lock->h->key) != 0)
            k = k->next;
        if (k && k->active && k->active->state == S_SLEEP) {
            k->active->kick = 1;
            step_push(k->active);
        }
    }
    finish(op);
}

static void ext_step(distlock_op *op)
{
    int rc;
    distlock__held *h = op->lock->h;
    if (op->state == S_EXT_WAIT) {
        if ((rc = distlock__extend_check(op->lock, op->ttl_ms)) != DISTLOCK_OK) {
            set_err(op, rc);
            finish(op);
            return;
        }
        if (!slot_take(op, 1))
            return;
        if (distlock__extend_begin_or_wake(h, op->ttl_ms, op->m->evfd) != 0) {
            ext_wait_on(op);
            (void)timer_set(op, distlock__now_us() + EXT_RETRY_US);
            return;
        }
        ext_wait_off(op);
        timer_clear(op);
        op->state = S_EXT;
        rc = DISTLOCK_OK;
        op->until = 0;
        if (!run_begin(op, distlock__extend_lease_start(op->m->c, h->quorum, h->key, h->token,
                                                        op->ttl_ms, &op->until, &rc), rc))
            return;
    } else if (op->run && !run_step(op)) {
        return;
    }
    set_err(op, distlock__extend_end(h, op->ttl_ms, op->run_rc, op->until));
    finish(op);
}

static void op_step(distlock_op *op)
{
    distlock_multi *m = op->m;
    if (op->state == S_DONE)
        return;
    m->stepping = op;
    if (op->type == OP_ACQUIRE)
        acq_step(op);
    else if (op->type == OP_RELEASE)
        rel_step(op);
    else
        ext_step(op);
    /* a step that leaves no run on the wire (asleep, waiting for a renewal)
     * gives its slot back; finish() did for an op that ended (maybe freed) */
    if (m->stepping == op && op->has_slot && op->run == NULL)
        slot_put(op);
    m->stepping = NULL;
}

/* ------------------------------------------------------------ the API */

static int multi_make(distlock_client *c, distlock_multi **out);
static void multi_close(distlock_multi *m);

int distlock_multi_new(distlock_client *c, distlock_multi **out)
{
    distlock__clear_error();
    if (out)
        *out = NULL;
    if (c == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "client must not be NULL");
    if (out == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "out must not be NULL");
    int rc;
    if ((rc = distlock__check_usable(c)) != DISTLOCK_OK)
        return rc;
    return multi_make(c, out);
}

/* A multi of c (usable), leaving the thread's detail alone on success. */
static int multi_make(distlock_client *c, distlock_multi **out)
{
    distlock_multi *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    m->c = c;
    m->pid = distlock__getpid();
    m->epfd = epoll_create1(EPOLL_CLOEXEC);
    m->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    /* the client's state as of this process (a forked child's first use
     * renews its cancel eventfd: take the number after that) */
    distlock__lock(c);
    int cfd = c->cancel_fd;
    pthread_mutex_unlock(&c->mu);
    m->seen_gen = distlock__cancel_gen(c);
    if (m->epfd < 0 || m->evfd < 0 || ep_set(m, m->evfd, EPOLLIN) != 0) {
        int e = errno;
        if (m->epfd >= 0)
            close(m->epfd);
        if (m->evfd >= 0)
            close(m->evfd);
        free(m);
        return distlock__fail(DISTLOCK_ESYS, "cannot create the multi's descriptors: %s",
                              strerror(e));
    }
    /* Without it a client cancel still reaches the multi's waiting acquires
     * through their sleepers, when another sleeper of the client passes it
     * on, or at their next re-check. */
    m->cancel_watched = cfd >= 0 && ep_set(m, cfd, EPOLLIN) == 0;
    *out = m;
    return DISTLOCK_OK;
}

static distlock_op *op_new(distlock_multi *m, int type)
{
    distlock_op *op = distlock__zalloc(sizeof(*op));
    if (op == NULL)
        return NULL;
    op->m = m;
    op->id = ++m->next_id;
    op->type = type;
    op->at = UINT64_MAX;
    op->deadline = UINT64_MAX;
    op->next = m->ops;
    if (m->ops)
        m->ops->prev = op;
    m->ops = op;
    return op;
}

/* The op's memory, once it ended (or never started). */
static void op_release_memory(distlock_op *op)
{
    distlock_multi *m = op->m;
    if (m->stepping == op)
        m->stepping = NULL;
    if (op->prev)
        op->prev->next = op->next;
    else if (m->ops == op)
        m->ops = op->next;
    if (op->next)
        op->next->prev = op->prev;
    free(op->wfds);
    free(op->err);
    free(op);
}

static void op_started(distlock_op *op)
{
    op->m->running++;
    step_push(op);
    wake_loop(op->m);
}

static int multi_acquire(distlock_multi *m, const char *key, long permits, long ttl_ms,
                         long wait_ms, unsigned flags, const distlock_acquire_args *args,
                         distlock_op **out)
{
    const char *token;
    int rc;
    distlock__clear_error();
    if (out)
        *out = NULL;
    if ((rc = usable_multi(m)) != DISTLOCK_OK)
        return rc;
    if (out == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "out must not be NULL");
    distlock_lock *unused;
    if ((rc = distlock__acquire_check(m->c, key, permits, ttl_ms, wait_ms, flags, args, &unused,
                                      &token)) != DISTLOCK_OK)
        return rc;
    if (flags & DISTLOCK_REENTRANT)
        return distlock__fail(DISTLOCK_EINVAL, "DISTLOCK_REENTRANT is not available through a "
                              "multi: use distlock_acquire_with()");
    distlock_op *op = op_new(m, OP_ACQUIRE);
    if (op == NULL)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    op->h = distlock__held_new(m->c, key, token, permits, ttl_ms, flags, NULL, 0, &op->l, &rc);
    /* Fair acquires do not take turns here: each joins the servers' queue
     * at once, as blocking fair waiters do, so that the servers' order is
     * the order of the calls across processes (a local turn would let a
     * later waiter of another process in ahead of ours). */
    int fair = (flags & DISTLOCK_FAIR) != 0;
    if (op->h == NULL || (!fair && (op->k = key_get(m, key)) == NULL)) {
        if (op->h) {
            distlock__held_free(op->h);
            free(op->l);
            rc = distlock__fail(DISTLOCK_ENOMEM, "out of memory");
        }
        op_release_memory(op);
        return rc;
    }
    op->cancel = args ? args->cancel : NULL;
    op->given = token != NULL;
    op->wait_ms = wait_ms;
    op->gen = distlock__cancel_gen(m->c);  /* cancels from now on concern it */
    op->t_start = distlock__now_us();
    op->deadline = wait_ms == 0 ? UINT64_MAX : distlock__wait_deadline(wait_ms, op->t_start);
    op->cw = cancel_watch(m, op->cancel);
    if (fair) {
        op->state = S_START;
    } else if (op->k->active == NULL) {
        op->k->active = op;
        op->state = S_START;
    } else if (wait_ms == 0 && op->k->active->entered_wait) {
        /* refused at once (see distlock.h): still an op, handed out done */
        op->state = S_QUEUED;
        queue_push(op->k, op);
        op_started(op);
        /* the only try-once queued: those queued before it failed when
         * the active one entered its wait */
        fail_queued_try_once(op);
        *out = op;
        distlock__clear_error();
        return DISTLOCK_OK;
    } else {
        op->state = S_QUEUED;
        queue_push(op->k, op);
    }
    op_started(op);
    *out = op;
    return DISTLOCK_OK;
}

int distlock_multi_acquire(distlock_multi *m, const char *key, long ttl_ms, long wait_ms,
                           unsigned flags, const distlock_acquire_args *args, distlock_op **out)
{
    return multi_acquire(m, key, 0, ttl_ms, wait_ms, flags, args, out);
}

int distlock_multi_semaphore_acquire(distlock_multi *m, const char *key, long permits,
                                     long ttl_ms, long wait_ms, unsigned flags,
                                     const distlock_acquire_args *args, distlock_op **out)
{
    if (permits < 1 || permits > DISTLOCK_PERMITS_MAX) {
        distlock__clear_error();
        if (out)
            *out = NULL;
        return distlock__fail(DISTLOCK_EINVAL, "permits %ld: use 1..%ld (DISTLOCK_PERMITS_MAX)",
                              permits, (long)DISTLOCK_PERMITS_MAX);
    }
    return multi_acquire(m, key, permits, ttl_ms, wait_ms, flags, args, out);
}

/* A lock of this multi's client, of one key (a key set's release and
 * extend stay blocking in this slice). */
static int multi_lock_check(distlock_multi *m, distlock_lock *l, distlock_op **out)
{
    int rc;
    if (out)
        *out = NULL;
    if ((rc = usable_multi(m)) != DISTLOCK_OK)
        return rc;
    if (out == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "out must not be NULL");
    if (l == NULL)
        return distlock__fail(DISTLOCK_EINVAL, "lock must not be NULL");
    if (l->h->client != NULL && l->h->client != m->c)
        return distlock__fail(DISTLOCK_EINVAL, "the lock is another client's: use a multi of "
                              "its client");
    if (l->h->keys != NULL)
        return distlock__fail(DISTLOCK_EINVAL, "a lock of distlock_acquire_many() is released "
                              "and extended by distlock_release() / distlock_extend()");
    return DISTLOCK_OK;
}

int distlock_multi_release(distlock_multi *m, distlock_lock *l, distlock_op **out)
{
    int rc;
    distlock__clear_error();
    if ((rc = multi_lock_check(m, l, out)) != DISTLOCK_OK)
        return rc;
    distlock_op *op = op_new(m, OP_RELEASE);
    if (op == NULL)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    op->lock = l;
    rc = distlock__release_begin(l, 1, &op->retry, &op->until);
    if (rc != DISTLOCK_OK) {
        /* decided without I/O (an error, or nothing to send): an op that is
         * done at its first perform, as the blocking call returns at once */
        op->rc = rc == 1 ? DISTLOCK_OK : rc;
        if (rc != 1)
            set_err(op, rc);
        op->run = NULL;
        op->sent = 0;
        op_started(op);
        op->state = S_DONE;  /* no release_end: nothing was sent */
        op->m->running--;
        step_remove(op);
        done_push(op);
        *out = op;
        distlock__clear_error();
        return DISTLOCK_OK;
    }
    op->state = S_START;
    op_started(op);
    *out = op;
    return DISTLOCK_OK;
}

int distlock_multi_extend(distlock_multi *m, distlock_lock *l, long ttl_ms, distlock_op **out)
{
    int rc;
    distlock__clear_error();
    if ((rc = multi_lock_check(m, l, out)) != DISTLOCK_OK ||
        (rc = distlock__extend_check(l, ttl_ms)) != DISTLOCK_OK)
        return rc;
    distlock_op *op = op_new(m, OP_EXTEND);
    if (op == NULL)
        return distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    op->lock = l;
    op->ttl_ms = ttl_ms;
    op->state = S_EXT_WAIT;
    op_started(op);
    *out = op;
    return DISTLOCK_OK;
}

int distlock_multi_fd(const distlock_multi *m)
{
    if (usable_multi(m) != DISTLOCK_OK)
        return -1;
    return m->epfd;
}

long distlock_multi_timeout(distlock_multi *m)
{
    if (m == NULL || forked(m))
        return -1;
    if (m->step_head)
        return 0;
    if (m->heap_short && m->running > 0)
        return 1;
    if (m->nheap == 0)
        return -1;
    uint64_t at = m->heap[0]->at, now = distlock__now_us();
    if (at <= now)
        return 0;
    uint64_t ms = (at - now + 999u) / 1000u;
    return ms > 86400000u ? 86400000L : (long)ms;
}

/* Every op whose cancel may have come: to its next step. */
static void cancel_scan(distlock_multi *m)
{
    for (distlock_op *op = m->ops; op; op = op->next)
        if (op->type == OP_ACQUIRE && op->state != S_DONE && acq_cancelled(op))
            step_push(op);
}

static int perform(distlock_multi *m);

int distlock_multi_perform(distlock_multi *m)
{
    int rc;
    distlock__clear_error();
    if ((rc = usable_multi(m)) != DISTLOCK_OK)
        return rc;
    return perform(m);
}

static int perform(distlock_multi *m)
{
    distlock_client *c = m->c;
    /* A few at a time, into the multi (off this frame: it is on the 4 KB
     * stack budget's path, under a blocking acquire's frames too). The set
     * is level-triggered: a descriptor reported stays ready until its op
     * reads it below, and epoll reports the others on the next calls
     * (round robin), so the calls are bounded by the descriptors there are
     * (those left are reported by the next perform). */
    struct epoll_event *ev = m->ev;
    int woke = 0, scan = 0, n, rounds = m->nfds / NEV + 2;
    do {
        n = epoll_wait(m->epfd, ev, NEV, 0);
        for (int i = 0; i < n; i++) {
            int fd = ev[i].data.fd;
            if (fd == m->evfd) {
                uint64_t v;
                ssize_t r = read(m->evfd, &v, sizeof v);
                (void)r;
                woke = 1;
            } else if (m->cancel_watched && fd == c->cancel_fd) {
                distlock__cancel_pass_on(c);
                scan = 1;
            } else if (fd < m->nfds && m->fds[fd].kind == FD_RUN && m->fds[fd].op) {
                step_push(m->fds[fd].op);
            } else if (fd < m->nfds && m->fds[fd].kind == FD_CANCEL && m->fds[fd].cw) {
                /* fired for good: stays readable, so it leaves the set */
                cwatch *cw = m->fds[fd].cw;
                ep_del(m, fd);
                cw->watched = 0;
                m->fds[fd].kind = FD_NONE;
                m->fds[fd].cw = NULL;
                scan = 1;
            } else {
                ep_del(m, fd);  /* a stale registration: nobody's now */
            }
        }
    } while (n == NEV && --rounds > 0);
    unsigned gen = distlock__cancel_gen(c);
    if (gen != m->seen_gen) {
        m->seen_gen = gen;
        scan = 1;
    }
    if (woke) {
        for (distlock_op *op = m->sleepers; op; op = op->sl_next)
            if (distlock__sleeper_take_woken(&op->w.sl))
                step_push(op);
        for (distlock_op *op = m->ext_waiters; op; op = op->ew_next)
            step_push(op);  /* a renewal may have ended: each looks */
    }
    if (scan)
        cancel_scan(m);
    uint64_t now = distlock__now_us();
    while (m->nheap > 0 && m->heap[0]->at <= now) {
        distlock_op *op = m->heap[0];
        timer_clear(op);
        step_push(op);
    }
    distlock_op *op;
    while ((op = step_pop(m)) != NULL)
        op_step(op);
    return m->running;
}

/* ------------------------------------------------------------ a blocking acquire's wait */

/* What the first attempt left behind, when its wait cannot go on for want
 * of a multi (ENOMEM, no descriptor): a writer's grant that must leave
 * stays, after its leave; a grant (its call's cancel fired while it was
 * out) goes back, a writer leaves the registry of waiting
 * writers, a fair waiter the queue. The status is the cancel's if it
 * fired, else the multi's failure. */
static int wait_unstarted(distlock_client *c, const distlock__acq_req *rq, int rc,
                          const distlock__attempt *att, distlock_cancel *cancel, int why)
{
    char *detail = distlock__error_copy();
    if (rc == DISTLOCK_OK && !distlock__cancel_fired(cancel)) {
        /* a writer that won and must leave (distlock__won_writer_leaves)
         * leaves on this thread; its lock stands unless its lease ended
         * meanwhile (then it is released, and the late grant's status is
         * the call's: there is no wait to try again in) */
        free(detail);
        distlock__write_leave(c, rq->key, rq->writer);
        if ((why = distlock__grant_outlived(rq, att)) == DISTLOCK_OK) {
            distlock__clear_error();
            return DISTLOCK_OK;
        }
        detail = distlock__error_copy();
        (void)distlock__release_keytoken(c, rq->key, rq->token, att->valid_until_us,
                                         att->set_id, att->maybe);
        distlock__fail(why, "%s", detail ? detail : "");
        free(detail);
        return why;
    }
    if (rc == DISTLOCK_OK)
        (void)distlock__release_keytoken(c, rq->key, rq->token, att->valid_until_us,
                                         att->set_id, att->maybe);
    if (att->readers && rq->writer)
        distlock__write_leave(c, rq->key, rq->writer);
    if (rq->fair)
        (void)distlock__leave_queue(c, rq->key, rq->token);
    if (distlock__cancel_fired(cancel))
        why = distlock__first_cancelled(rq->key, rc == DISTLOCK_OK);
    else
        distlock__fail(why, "cannot wait for '%s': %s", rq->key, detail ? detail : "");
    free(detail);
    return why;
}

/* The blocking acquire's wait: the op a multi's acquire is from its first
 * attempt's end on (S_FIRST), with the first attempt made by the caller,
 * on a multi of its own, driven here until it ends. A multi per waiting
 * call, not one shared by the client's blocking waiters: a multi is driven
 * by one thread, and a shared one would need a thread to drive it for the
 * others (or a hand-over of the driving between waiting threads), while
 * waiting is not the hot path: a private one costs an epoll and an eventfd
 * descriptor for the wait's length.
 *
 * h->token: each new attempt of a plain waiter takes a new token (it is a
 * 33-byte buffer then), so nothing sent for an earlier attempt (an undo
 * still on its way to a slow node) can ever match the attempt that wins. A
 * fair waiter keeps its token: it is its place in the queue; and so does a
 * caller's token (`given`, args->token): it is the caller's name for the
 * lock. For both the transport orders the requests of one token (round.c:
 * an undo runs before the next attempt), and a caller's token is acquired
 * strictly: a key that holds it already is someone's lock.
 *
 * Cancellation (cancel.c): a client cancel since `gen` (the call's start)
 * or the call's own `cancel` ends the wait; one that comes while an attempt
 * is on the wire is seen after it, and if it won, the lock is given back,
 * since the caller asked to stop. Either way nothing is held and a fair
 * waiter leaves the queue. The call's own cancel also ends a first attempt
 * that it saw out (try-once included): it was fired for this call alone.
 * The client's interrupt hook is asked where the call sleeps (nothing on
 * the wire: a re-check's wait, the subscription's confirmation, a fair
 * waiter's pause) and after a win, as a cancel. */
int distlock__acquire_wait(distlock_client *c, distlock__held *h, int given, long wait_ms,
                           distlock_cancel *cancel, unsigned gen, const distlock__acq_req *rq,
                           int rc, distlock__attempt *att)
{
    uint64_t now0 = distlock__now_us();  /* the wait starts after the first attempt */
    distlock_multi *m = NULL;
    distlock_op *op = NULL;
    char *detail = distlock__error_copy();  /* the first attempt's */
    int why = multi_make(c, &m);
    if (why == DISTLOCK_OK && (op = op_new(m, OP_ACQUIRE)) == NULL) {
        multi_close(m);
        why = distlock__fail(DISTLOCK_ENOMEM, "out of memory");
    }
    if (why != DISTLOCK_OK) {
        free(detail);
        return wait_unstarted(c, rq, rc, att, cancel, why);
    }
    op->embedded = 1;
    op->h = h;
    op->given = given;
    op->wait_ms = wait_ms;
    op->cancel = cancel;
    op->gen = gen;
    op->t_start = now0;
    op->deadline = distlock__wait_deadline(wait_ms, now0);
    op->cw = cancel_watch(m, cancel);
    op->rq = *rq;
    op->fair = rq->fair;
    op->att = *att;
    op->run_rc = rc;
    op->rc = rc;
    op->err = rc != DISTLOCK_OK ? detail : (free(detail), NULL);
    sleeper_on(op);
    op->state = S_FIRST;
    op_started(op);
    for (;;) {
        (void)perform(m);
        if (op->state == S_DONE)
            break;
        long t = distlock_multi_timeout(m);
        uint64_t until = t < 0 ? UINT64_MAX : distlock__now_us() + (uint64_t)t * 1000u;
        if (distlock__sleep_fd(c, m->epfd, until, op->run == NULL) == DISTLOCK_ECANCELED) {
            op->cancel_req = 1;  /* the interrupt hook: as a cancel of the call */
            step_push(op);
        }
    }
    *att = op->att;
    rc = op->rc;
    detail = op->err;
    op->err = NULL;
    op_release_memory(op);
    multi_close(m);
    if (rc != DISTLOCK_OK)
        distlock__fail(rc, "%s", detail ? detail : "");
    else
        distlock__clear_error();
    free(detail);
    return rc;
}

distlock_op *distlock_multi_done(distlock_multi *m)
{
    if (m == NULL || forked(m) || m->done_head == NULL)
        return NULL;
    distlock_op *op = m->done_head;
    doneq_remove(op);
    op->handed = 1;
    return op;
}

void distlock_op_cancel(distlock_op *op)
{
    if (op == NULL || op->state == S_DONE || op->type != OP_ACQUIRE || forked(op->m))
        return;
    op->cancel_req = 1;
    step_push(op);
    wake_loop(op->m);
}

int distlock_op_done(const distlock_op *op)
{
    return op != NULL && op->state == S_DONE;
}

int distlock_op_status(const distlock_op *op)
{
    if (op == NULL || op->state != S_DONE)
        return DISTLOCK_EINVAL;
    return op->rc;
}

const char *distlock_op_error(const distlock_op *op)
{
    if (op == NULL || op->state != S_DONE || op->rc == DISTLOCK_OK || op->err == NULL)
        return "";
    return op->err;
}

distlock_lock *distlock_op_take_lock(distlock_op *op)
{
    if (op == NULL || op->state != S_DONE || forked(op->m))
        return NULL;
    distlock_lock *l = op->won;
    op->won = NULL;
    return l;
}

uint64_t distlock_op_id(const distlock_op *op)
{
    return op ? op->id : 0;
}

void distlock_op_free(distlock_op *op)
{
    if (op == NULL)
        return;
    if (forked(op->m)) {
        op->user_freed = 1;  /* memory only, with the multi */
        return;
    }
    if (op->state != S_DONE) {
        op->user_freed = 1;
        distlock_op_cancel(op);
        return;
    }
    doneq_remove(op);
    if (op->won)
        distlock_lock_free(op->won);
    op->won = NULL;
    op_release_memory(op);
}

/* A forked child's copy of a run of the parent's: neither finished (that
 * is I/O) nor freed (run.c has no way yet to drop one without I/O), but kept
 * reachable here until the process ends, so that it is memory held, not
 * memory lost. */
static distlock__run **child_runs;
static size_t nchild_runs;

static void keep_parents_run(distlock__run *r)
{
    if (r == NULL)
        return;
    distlock__run **t = realloc(child_runs, (nchild_runs + 1) * sizeof(*t));
    if (t == NULL)
        return;
    child_runs = t;
    child_runs[nchild_runs++] = r;
}

void distlock_multi_free(distlock_multi *m)
{
    if (m == NULL)
        return;
    if (!forked(m)) {
        /* every running op to its end: acquires cancelled (a lock won is
         * released), releases and extends finished; this blocks */
        for (distlock_op *op = m->ops; op; op = op->next)
            if (op->state != S_DONE && op->type == OP_ACQUIRE) {
                op->cancel_req = 1;
                step_push(op);
            }
        while (distlock_multi_perform(m) > 0) {
            struct pollfd p = { m->epfd, POLLIN, 0 };
            long t = distlock_multi_timeout(m);
            (void)poll(&p, 1, t < 0 ? 1000 : (int)t);
        }
        while (m->ops) {
            distlock_op *op = m->ops;
            if (op->won)
                distlock_lock_free(op->won);
            op->won = NULL;
            op_release_memory(op);
        }
    } else {
        /* A forked child: the parent's runs, waiters and sleepers are only
         * memory here; the client forgets the parent's lists (sleepers and
         * waiters, which point into our ops) at its first use in the child,
         * so that use comes first. Nothing is sent, no lock is released. The
         * runs themselves are kept to the process's end (keep_parents_run). */
        distlock__lock(m->c);
        pthread_mutex_unlock(&m->c->mu);
        while (m->ops) {
            distlock_op *op = m->ops;
            keep_parents_run(op->run);
            if (op->h)
                distlock__held_free(op->h);
            free(op->l);
            free(op->ch);
            distlock_lock_free(op->won);  /* in a child: memory only, nothing sent */
            op_release_memory(op);
        }
    }
    multi_close(m);
}

/* A multi with no op left: its memory and descriptors go (no I/O). */
static void multi_close(distlock_multi *m)
{
    for (int b = 0; b < NBUCKETS; b++)
        while (m->keys[b]) {
            mkey *k = m->keys[b];
            m->keys[b] = k->next;
            free(k->held_ch);  /* a forked child's copy: the hold was the parent's */
            free(k->key);
            free(k);
        }
    while (m->cwatches) {
        cwatch *cw = m->cwatches;
        m->cwatches = cw->next;
        free(cw);
    }
    close(m->epfd);
    close(m->evfd);
    free(m->heap);
    free(m->fds);
    free(m);
}
