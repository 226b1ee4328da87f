/* wait.c -- waking waiters without polling.
 *
 * The release script PUBLISHes on "distlock:<key>". Each client runs one
 * subscriber thread, started by its first wait, whose subscription
 * connections (pubsub.c: one per node, shared by all the client's waits)
 * carry the channels its waiters need; it wakes the longest-waiting waiter
 * for that key when a message arrives. Waiters still re-check on their own
 * timer, for locks that simply expire or whose holders publish nothing.
 *
 * Waiters sleep in distlock__sleep (cancel.c), so a cancel interrupts them;
 * this thread wakes one by writing its eventfd.
 *
 * A waiter subscribes, then tries again, so a release in between is not
 * missed; it waits for the subscription to be confirmed by at least one
 * node, unless no node can confirm it (down, or an ACL user without
 * channel rights): then it relies on its re-checks at once.
 *
 * A channel can also be held (distlock__channel_hold): a multi holds its
 * key's channel from its first waiter until no acquire of the key is left
 * there, so the acquires it serves one after the other keep one
 * subscription instead of an UNSUBSCRIBE and a SUBSCRIBE each. The rule
 * above still holds: a waiter registered on a held channel counts as
 * subscribed only once a node confirmed the channel (at once if it was,
 * else when it is), and then tries again; a release published before
 * that try is seen by the try, one published after it reaches the waiter
 * (registered before the try, on a confirmed channel). A held channel
 * that lapses is confirmed again as any; the waiters registered then are
 * woken for a re-check as above.
 *
 * A subscription can lapse while a waiter sleeps (its connection broke, was
 * found dead by its PING, or led to a master that was replaced: pubsub.c;
 * a Cluster slot moved away) and be confirmed again later; a release
 * published in between reached no one here. The confirmation that ends
 * such a gap, or the first one for a waiter that went on unconfirmed,
 * wakes that channel's sleeping waiters for one re-check each (an attempt,
 * not a grant): a release missed in the gap is then seen at once instead
 * of at the waiter's next timer. A node confirming that a waiter never
 * counted on while others did (the other nodes' first confirmations after
 * a waiter settled) wakes no one: nothing was missed there that the nodes
 * already confirmed could not have told.
 *
 * Local turns: a blocking call's plain waiter (w->turns, multi.c) re-checks
 * only while no such waiter of the client asking the same (a lock, a read
 * lock, a permit of P: w->turn_group) has waited longer for its key
 * (the first of its turn queue: one record per key and group, so that a
 * waiter's timer asks one lock and no walk); the others keep their timers
 * but send nothing when they
 * fire (never later than the end of the holder's lease as the one with the
 * turn last saw it: a call that joined never looked at the key itself, and
 * the one with the turn may leave before that end; a shorter lease it sees
 * later sets their timers again: saw_holder), so when the one with
 * the turn leaves, the next has it at its next
 * timer, and no other call is woken by that leave (a cancel of one call
 * wakes no other). Groups apart, since one kind can be refused where another
 * gets in (a reader behind a waiting writer's intent, a permit of 1 where
 * one of 2 fits). A writer noted among the key's waiting writers takes
 * turns no more (multi.c): its entry lives only as long as its own attempts
 * refresh it, and the intent it keeps up must outlast the others' leaves.
 * A new blocking call that would take turns (not fair, a wait budget)
 * joins them when the client already has such a waiter of its key and
 * group (distlock__waiter_turn_to_join, acquire_api.c): it sends no first
 * attempt, registers and subscribes as any waiter, and waits for its turn
 * like the others, so calls that keep arriving add no attempts beside the
 * turn holder's and do not take a key that frees ahead of the older
 * waiters. Its first look at the key is the re-check its turn gives it
 * (after its subscription, so no release is missed), or its deadline's.
 * A release wakes the longest waiter and each group's waiter with the
 * turn. Only a waiter that won a read lock or a permit wakes the next at
 * once (it may share the key: readers behind a writer all enter at its
 * release, one after the other). A waiter that leaves without the key
 * (pass_wake: a cancel, its deadline) with such a wake not acted on passes
 * it on as the message would now (distlock__waiter_remove): the release's
 * one wake of the key went to it, and the others would sleep to their
 * timers while the key is free.
 *
 * On a Redis Cluster node a release SPUBLISHes in its key's slot (the
 * shard channel, protocol.c): each channel is handed to pubsub.c with its
 * shard name, which it SSUBSCRIBEs on the slot's master (or SUBSCRIBEs on a
 * 5.0/6.x cluster, where the release scripts fall back to PUBLISH).
 *
 * The thread's loop is interest -> wait -> advance over pubsub.c's
 * connections and its wake-up pipe. No network or name-resolution work
 * happens under the client mutex (pubsub.c releases it to connect). The
 * subscriber's state lives in the client (c->sub), so a forked child can
 * drop it without a byte on the parent's sockets.
 *
 * Layer: 6 background
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* A channel the waiters need (distlock:<key>), or one held (refs). */
typedef struct sub_chan {
    struct sub_chan *next;
    char *name;
    long refs;                /* held: distlock__channel_hold()s not undone */
} sub_chan;

struct distlock__sub {
    distlock__pubsub *ps;
    sub_chan *chans;
    sub_chan *held;           /* channels kept subscribed between waiters */
    /* the thread's poll array: its wake-up pipe, then pubsub.c's entries
     * (kept here, made with the rest, so that a forked child frees it) */
    struct pollfd *pfd;
};

static sub_chan *find_chan(struct distlock__sub *sub, const char *name)
{
    sub_chan *ch = sub->chans;
    while (ch && strcmp(ch->name, name) != 0)
        ch = ch->next;
    return ch;
}

static void chan_free(sub_chan *ch)
{
    free(ch->name);
    free(ch);
}

/* c->mu held. Can a waiter on `name` stop waiting for the confirmation? */
static int settled(distlock_client *c, const char *name)
{
    distlock__pubsub *ps = c->sub->ps;
    if (distlock__pubsub_confirmed(ps, name) != 0)
        return 1;
    return !distlock__pubsub_can_confirm(ps);  /* no node can confirm: rely on re-checks */
}

/* c->mu held: w goes on waiting; what it counts on from now. */
static void mark_subscribed(distlock_client *c, distlock__waiter *w)
{
    w->subscribed = 1;
    w->covered = distlock__pubsub_confirmed(c->sub->ps, w->channel);
    w->lost = 0;
}

static void wake_settled(distlock_client *c)
{
    for (distlock__waiter *w = c->waiters; w; w = w->next)
        if (!w->subscribed && settled(c, w->channel)) {
            mark_subscribed(c, w);
            distlock__sleeper_wake(&w->sl);
        }
}

/* c->mu held (pubsub.c's callback): a subscription confirmed or lost. */
static void on_subscription(void *arg, const char *chan, int node, int up)
{
    distlock_client *c = arg;
    uint64_t bit = 1ull << node;
    for (distlock__waiter *w = c->waiters; w; w = w->next) {
        if (!w->subscribed || (chan && strcmp(w->channel, chan) != 0))
            continue;
        if (!up) {
            /* lost (chan NULL: the node's connection, or one of them;
             * only the channels no longer confirmed there lapsed) */
            if (distlock__pubsub_confirmed(c->sub->ps, w->channel) & bit)
                continue;
            w->lost |= w->covered & bit;
            w->covered &= ~bit;
        } else if (!(w->covered & bit)) {
            /* confirmed again after a gap, or at last for a waiter that
             * went on without: one re-check (see the top of the file) */
            int gap = w->covered == 0 || (w->lost & bit) != 0;
            w->covered |= bit;
            w->lost &= ~bit;
            if (gap) {
                w->notified = 1;
                distlock__sleeper_wake(&w->sl);
            }
        }
    }
    wake_settled(c);
}

/* The waiters of one key channel and turn group taking turns (registered
 * with w->turns), in the order they registered: the first, the longest
 * waiting, has the turn. One record per group, so that a waiter's "my
 * turn?", the lease its timer is capped by, and a release's wake of the
 * one with the turn are answered without walking the client's waiters.
 * Waiters join at registration and leave at their removal or when they
 * take turns no more (stop_turns); a forked child drops the records with
 * the waiters; the last one to leave frees it. */
struct distlock__turn_queue {
    distlock__turn_queue *next;     /* the client's records (c->turn_queues) */
    long group;                     /* the members' turn_group */
    distlock__waiter *first, *last; /* never NULL: the channel is first->channel */
    /* the end of the key's lease as the one with the turn last saw it
     * (monotonic us, 0: unknown; kept when the turn passes on: the next
     * one has not looked yet) */
    uint64_t end_us;
    /* no member's timer (check_at_us) is later: a lease seen ending after
     * it wakes nobody, and saw_holder looks at no member (an upper bound,
     * made exact at each walk) */
    uint64_t timers_until_us;
};

/* c->mu held: w (with turns) joins its group's queue, last; 0, or -1 if no
 * record can be made for a new group (ENOMEM). */
static int turn_join(distlock_client *c, distlock__waiter *w)
{
    distlock__turn_queue *q = c->turn_queues;
    while (q && (q->group != w->turn_group || strcmp(q->first->channel, w->channel) != 0))
        q = q->next;
    if (q == NULL) {
        if ((q = calloc(1, sizeof(*q))) == NULL)
            return -1;
        q->group = w->turn_group;
        q->next = c->turn_queues;
        c->turn_queues = q;
    }
    w->tq = q;
    w->turn_next = NULL;
    *(q->last ? &q->last->turn_next : &q->first) = w;
    q->last = w;
    return 0;
}

/* c->mu held: w leaves its queue (if in one); the one with the turn after
 * that, or NULL (the queue is gone). Walks the queue up to w, as the
 * removal from the client's list walks that (once per waiter, not per
 * timer). */
static distlock__waiter *turn_leave(distlock_client *c, distlock__waiter *w)
{
    distlock__turn_queue *q = w->tq;
    if (q == NULL)
        return NULL;
    distlock__waiter *before = NULL;
    for (distlock__waiter *o = q->first; o != w; o = o->turn_next)
        before = o;
    *(before ? &before->turn_next : &q->first) = w->turn_next;
    if (q->last == w)
        q->last = before;
    w->tq = NULL;
    w->turn_next = NULL;
    if (q->first)
        return q->first;
    distlock__turn_queue **pp = &c->turn_queues;
    while (*pp != q)
        pp = &(*pp)->next;
    *pp = q->next;
    free(q);
    return NULL;
}

/* c->mu held: wake the waiter with the turn of each turn group on chan
 * (but `woken`, already woken). */
static void wake_turn_holders(distlock_client *c, const char *chan, distlock__waiter *woken)
{
    for (distlock__turn_queue *q = c->turn_queues; q; q = q->next)
        if (q->first != woken && strcmp(q->first->channel, chan) == 0) {
            q->first->notified = 1;
            distlock__sleeper_wake(&q->first->sl);
        }
}

/* c->mu held: a release on chan frees one lock: wake one of our waiters it
 * concerns, the longest waiting plain one or our fair waiter at the
 * queue's head; fair waiters further back are not woken (no herd), and the
 * others keep their re-check timers. */
static void wake_for_release(distlock_client *c, const char *chan)
{
    distlock__waiter *oldest = NULL;
    for (distlock__waiter *w = c->waiters; w; w = w->next)
        if (strcmp(w->channel, chan) == 0 && (w->token == NULL || w->head))
            oldest = w;  /* the list is newest first */
    if (oldest) {
        oldest->notified = 1;
        distlock__sleeper_wake(&oldest->sl);
    }
    /* and the waiters with a turn (see the top), when the longest waiter is
     * not one of them: it may be a key set's, or ask for something else (a
     * read lock, a permit of another size), and the one with the turn would
     * else wait for its timer while the others of its group send nothing */
    wake_turn_holders(c, chan, oldest);
}

/* c->mu held (pubsub.c's callback): a release (or a fair acquire naming
 * the next) on chan. */
static void on_message(void *arg, const char *chan, const char *payload)
{
    distlock_client *c = arg;
    if (payload[0] == '\0') {
        wake_for_release(c, chan);
        return;
    }
    /* A fair acquire names the new head of the queue (counted: an attempt
     * on the wire meanwhile must not undo it). */
    for (distlock__waiter *w = c->waiters; w; w = w->next)
        if (strcmp(w->channel, chan) == 0 && w->token && strcmp(w->token, payload) == 0) {
            w->head = 1;
            w->named++;
        }
}

/* c->mu held: subscribe to `name` if it is not yet (failures are tried
 * again on the subscriber's next turn). */
static void want_chan(struct distlock__sub *sub, const char *name)
{
    if (find_chan(sub, name))
        return;
    sub_chan *ch = calloc(1, sizeof(*ch));
    if (!ch || !(ch->name = strdup(name))) {
        free(ch);
        return;
    }
    /* the release's shard channel, for the Redis Cluster nodes */
    char shard[DISTLOCK__SIDEKEY_MAX];
    int has_shard = strncmp(ch->name, "distlock:", 9) == 0;
    if (has_shard)
        distlock__shard_channel_name(shard, ch->name + 9);
    if (distlock__pubsub_subscribe(sub->ps, ch->name, has_shard ? shard : NULL) != 0) {
        chan_free(ch);
        return;
    }
    ch->next = sub->chans;
    sub->chans = ch;
}

static sub_chan *find_held(struct distlock__sub *sub, const char *name)
{
    sub_chan *h = sub->held;
    while (h && strcmp(h->name, name) != 0)
        h = h->next;
    return h;
}

/* c->mu held: subscribe to channels newly wanted (a waiter's, a held one),
 * drop those neither wants. */
static void sync_channels(distlock_client *c)
{
    struct distlock__sub *sub = c->sub;
    for (distlock__waiter *w = c->waiters; w; w = w->next)
        want_chan(sub, w->channel);
    for (sub_chan *h = sub->held; h; h = h->next)
        want_chan(sub, h->name);
    for (sub_chan **pp = &sub->chans; *pp;) {
        sub_chan *ch = *pp;
        distlock__waiter *w = c->waiters;
        while (w && strcmp(w->channel, ch->name) != 0)
            w = w->next;
        if (w || find_held(sub, ch->name)) {
            pp = &ch->next;
            continue;
        }
        distlock__pubsub_unsubscribe(sub->ps, ch->name);
        *pp = ch->next;
        chan_free(ch);
    }
}

static void *subscriber_main(void *arg)
{
    distlock_client *c = arg;
    pthread_setname_np(pthread_self(), "distlock-wakeup");  /* as ps -T and gdb show it */
    struct distlock__sub *sub = c->sub;
    struct pollfd *pfd = sub->pfd;
    pthread_mutex_lock(&c->mu);
    while (!c->sub_stop) {
        sync_channels(c);
        uint64_t next;
        pfd[0] = (struct pollfd){ c->sub_wake[0], POLLIN, 0 };
        int np = distlock__pubsub_interest(sub->ps, pfd + 1, &next);
        pthread_mutex_unlock(&c->mu);
        int pr = distlock__poll_wait(pfd, np + 1, next);
        pthread_mutex_lock(&c->mu);
        if (pr <= 0)
            continue;
        if (pfd[0].revents) {
            char buf[64];
            while (read(c->sub_wake[0], buf, sizeof(buf)) > 0) {
            }
        }
        distlock__pubsub_advance(sub->ps, pfd + 1, np);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static void wake_subscriber(distlock_client *c)
{
    char one = 1;
    ssize_t w = write(c->sub_wake[1], &one, 1);
    (void)w;
}

static void sub_free(distlock_client *c, int forked)
{
    struct distlock__sub *sub = c->sub;
    if (sub == NULL)
        return;
    distlock__pubsub_free(sub->ps, forked);  /* writes nothing, also in a child */
    while (sub->chans) {
        sub_chan *next = sub->chans->next;
        chan_free(sub->chans);
        sub->chans = next;
    }
    while (sub->held) {
        sub_chan *next = sub->held->next;
        chan_free(sub->held);
        sub->held = next;
    }
    free(sub->pfd);
    free(sub);
    c->sub = NULL;
}

/* c->mu held: the subscriber's state, or NULL (ENOMEM). */
static struct distlock__sub *sub_new(distlock_client *c)
{
    const distlock__pubsub_cb cb = { on_message, on_subscription, c };
    struct distlock__sub *sub = calloc(1, sizeof(*sub));
    if (sub == NULL)
        return NULL;
    c->sub = sub;
    if ((sub->ps = distlock__pubsub_new(&c->tp, &c->mu, &cb)) == NULL ||
        (sub->pfd = calloc(1 + (size_t)distlock__pubsub_pollfd_max(sub->ps), sizeof(*sub->pfd))) ==
            NULL) {
        sub_free(c, 0);
        errno = ENOMEM;
        return NULL;
    }
    return sub;
}

/* c->mu held on return when DISTLOCK_OK; not held on an error. */
static int waiter_add_locked(distlock_client *c, distlock__waiter *w)
{
    distlock__lock(c);
    if (!c->sub_running) {
        if (sub_new(c) == NULL || pipe2(c->sub_wake, O_NONBLOCK | O_CLOEXEC) != 0) {
            sub_free(c, 0);
            pthread_mutex_unlock(&c->mu);
            return distlock__fail(DISTLOCK_ESYS, "cannot start waiting: %s", strerror(errno));
        }
        c->sub_stop = 0;
        if (distlock__thread_create(&c->sub_thread, NULL, subscriber_main, c) != 0) {
            close(c->sub_wake[0]);
            close(c->sub_wake[1]);
            c->sub_wake[0] = c->sub_wake[1] = -1;
            sub_free(c, 0);
            pthread_mutex_unlock(&c->mu);
            return distlock__fail(DISTLOCK_ESYS, "cannot start the subscriber thread");
        }
        c->sub_running = 1;
    }
    w->next = c->waiters;
    c->waiters = w;
    atomic_fetch_add_explicit(&c->nwaiters, 1, memory_order_relaxed);
    w->subscribed = 0;
    w->covered = w->lost = 0;
    w->check_at_us = 0;
    w->tq = NULL;
    /* no memory for a new group's record: w re-checks on its own timers,
     * as a waiter that takes no turns (only its thread reads w->turns
     * without c->mu, and this is its thread) */
    if (w->turns && turn_join(c, w) != 0)
        w->turns = 0;
    wake_subscriber(c);
    return DISTLOCK_OK;
}

int distlock__waiter_add_start(distlock_client *c, distlock__waiter *w, int *settled_at_add)
{
    int rc = waiter_add_locked(c, w);
    if (rc == DISTLOCK_OK) {
        *settled_at_add = settled(c, w->channel);
        pthread_mutex_unlock(&c->mu);
    }
    return rc;
}

int distlock__waiter_settled(distlock_client *c, distlock__waiter *w, uint64_t deadline_us)
{
    pthread_mutex_lock(&c->mu);
    int done = w->subscribed || settled(c, w->channel) || distlock__now_us() >= deadline_us;
    if (done && !w->subscribed)
        mark_subscribed(c, w);
    pthread_mutex_unlock(&c->mu);
    return done;
}

int distlock__waiter_take_wake(distlock_client *c, distlock__waiter *w, int notice)
{
    pthread_mutex_lock(&c->mu);
    int go = notice && w->notified;
    if (notice)
        w->notified = 0;
    if (w->turns) {
        go |= w->go_now || w->recap;
        w->go_now = w->recap = 0;
    }
    pthread_mutex_unlock(&c->mu);
    return go;
}

int distlock__waiter_add(distlock_client *c, distlock__waiter *w)
{
    int rc = waiter_add_locked(c, w);
    if (rc != DISTLOCK_OK)
        return rc;
    uint64_t deadline = distlock__now_us() + (uint64_t)c->tp.connect_timeout_ms * 1000u;
    while (!w->subscribed && !settled(c, w->channel) && distlock__now_us() < deadline) {
        pthread_mutex_unlock(&c->mu);
        if (distlock__sleep(c, &w->sl, deadline) == DISTLOCK_ECANCELED) {
            rc = DISTLOCK_ECANCELED;
            distlock__waiter_remove(c, w);
            return rc;
        }
        pthread_mutex_lock(&c->mu);
    }
    if (!w->subscribed)
        mark_subscribed(c, w);
    pthread_mutex_unlock(&c->mu);
    return DISTLOCK_OK;  /* unconfirmed: the waiter's re-checks cover it */
}

int distlock__waiter_turn_or_timer(distlock_client *c, distlock__waiter *w, uint64_t *at)
{
    pthread_mutex_lock(&c->mu);
    distlock__turn_queue *q = w->tq;
    int mine = q == NULL || q->first == w;
    if (!mine) {
        /* no later than the lease's end, as if w had looked itself */
        if (q->end_us > distlock__now_us() && q->end_us + DISTLOCK__PAST_LEASE_US < *at)
            *at = q->end_us + DISTLOCK__PAST_LEASE_US;
        w->check_at_us = *at;
        if (*at > q->timers_until_us)
            q->timers_until_us = *at;
    }
    pthread_mutex_unlock(&c->mu);
    return mine;
}

/* Slack over a lease end before a waiter's timer is set again: the end
 * seen moves from one look to the next by the ms rounding of PTTL and by
 * how late each reply is read (milliseconds on a loaded machine); a lease
 * that really is shorter (another owner's) ends seconds earlier. */
#define RECAP_SLACK_US 25000u

void distlock__waiter_saw_holder(distlock_client *c, distlock__waiter *w, long holder_pttl)
{
    pthread_mutex_lock(&c->mu);
    distlock__turn_queue *q = w->tq;
    if (q == NULL || q->first != w) {
        pthread_mutex_unlock(&c->mu);
        return;  /* the others' timers follow the one with the turn only */
    }
    uint64_t end = holder_pttl > 0 ? distlock__now_us() + (uint64_t)holder_pttl * 1000u : 0;
    q->end_us = end;
    /* The others of the group set their timers by the lease the one with
     * the turn saw then; a lease that ends sooner (the key went to another
     * owner) would be missed if the one with the turn leaves before its
     * end (its deadline, a cancel): those timers are set again (locally,
     * nothing sent). Only the ones whose timer is later are woken, and
     * none is looked at while the lease seen ends after every timer (the
     * same lease seen again and again). A woken one's timer is void until
     * it sets it again (no second wake meanwhile). */
    uint64_t over = end + DISTLOCK__PAST_LEASE_US + RECAP_SLACK_US;
    if (end != 0 && q->timers_until_us > over) {
        uint64_t until = 0;
        for (distlock__waiter *o = w->turn_next; o; o = o->turn_next)
            if (o->check_at_us > over) {
                o->check_at_us = 0;
                o->recap = 1;
                distlock__sleeper_wake(&o->sl);
            } else if (o->check_at_us > until) {
                until = o->check_at_us;
            }
        q->timers_until_us = until;
    }
    pthread_mutex_unlock(&c->mu);
}

int distlock__waiter_turn_to_join(distlock_client *c, const char *key, long turn_group)
{
    /* no waiter at all (the uncontended acquire): no lock taken; one
     * registered meanwhile is missed as if it came after this call */
    if (atomic_load_explicit(&c->nwaiters, memory_order_relaxed) == 0)
        return 0;
    int join = 0;
    distlock__lock(c);  /* in a forked child, forgets the parent's waiters first */
    for (const distlock__turn_queue *q = c->turn_queues; q && !join; q = q->next)
        join = q->group == turn_group && distlock__channel_is_of(q->first->channel, key);
    pthread_mutex_unlock(&c->mu);
    return join;
}

void distlock__waiter_stop_turns(distlock_client *c, distlock__waiter *w)
{
    pthread_mutex_lock(&c->mu);
    w->turns = 0;
    (void)turn_leave(c, w);  /* the next has the turn at its next timer */
    pthread_mutex_unlock(&c->mu);
}

void distlock__waiter_remove(distlock_client *c, distlock__waiter *w)
{
    distlock__lock(c);
    distlock__waiter *next = NULL;
    int found = 0;
    for (distlock__waiter **pp = &c->waiters; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            found = 1;
            *pp = w->next;
            atomic_fetch_sub_explicit(&c->nwaiters, 1, memory_order_relaxed);
            /* (not found: a forked child dropped the list and the queues) */
            int had_turn = w->tq && w->tq->first == w;
            next = turn_leave(c, w);
            /* a read lock or a permit won, or a go_now from one won before
             * that w leaves with, not taken (its call ends without the key):
             * the next may share the key */
            if (!had_turn || !(w->pass_now || (w->pass_wake && w->go_now)))
                next = NULL;
            break;
        }
    if (next) {
        /* a read lock or a permit won: the next may share the key, now */
        next->go_now = 1;
        distlock__sleeper_wake(&next->sl);
    }
    if (found && (w->pass_wake == 2 || (w->pass_wake && w->notified))) {
        /* w leaves without the key, woken (a release, a lapse's re-check)
         * but not having looked since: that wake may have been the only one
         * for the key (a release wakes one waiter and the turn holders), so
         * it goes on to the ones the message would wake now, else the key
         * may stay free while they sleep to their re-checks */
        w->notified = 0;
        wake_for_release(c, w->channel);
    }
    if (c->sub_running)
        wake_subscriber(c);
    pthread_mutex_unlock(&c->mu);
}

int distlock__channel_hold(distlock_client *c, const char *channel)
{
    distlock__lock(c);
    int rc = -1;
    sub_chan *h = c->sub_running ? find_held(c->sub, channel) : NULL;
    if (h) {
        h->refs++;
        rc = 0;
    } else if (c->sub_running && (h = calloc(1, sizeof(*h))) != NULL) {
        if ((h->name = strdup(channel)) == NULL) {
            free(h);
        } else {
            h->refs = 1;
            h->next = c->sub->held;
            c->sub->held = h;
            rc = 0;
        }
    }
    /* no wake: the caller's waiter of the channel is registered, and its
     * subscriber turn subscribes */
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void distlock__channel_unhold(distlock_client *c, const char *channel)
{
    distlock__lock(c);  /* in a forked child: the parent's holds are gone */
    struct distlock__sub *sub = c->sub_running ? c->sub : NULL;
    for (sub_chan **pp = sub ? &sub->held : NULL; pp && *pp; pp = &(*pp)->next) {
        sub_chan *h = *pp;
        if (strcmp(h->name, channel) != 0)
            continue;
        if (--h->refs == 0) {
            *pp = h->next;
            chan_free(h);
            wake_subscriber(c);  /* dropped if no waiter wants it */
        }
        break;
    }
    pthread_mutex_unlock(&c->mu);
}

int distlock__waiter_wait(distlock_client *c, distlock__waiter *w, uint64_t deadline_us,
                          int notice)
{
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int notified = notice && w->notified;
        if (notified)
            w->notified = 0;
        pthread_mutex_unlock(&c->mu);
        if (notified)
            return 1;
        if (distlock__now_us() >= deadline_us)
            return 0;
        if (distlock__sleep(c, &w->sl, deadline_us) == DISTLOCK_ECANCELED)
            return DISTLOCK_ECANCELED;
    }
}

void distlock__subscriber_stop(distlock_client *c)
{
    distlock__lock(c);
    int running = c->sub_running;
    c->sub_stop = 1;
    c->sub_running = 0;
    if (running)
        wake_subscriber(c);
    pthread_mutex_unlock(&c->mu);
    if (running) {
        pthread_join(c->sub_thread, NULL);
        close(c->sub_wake[0]);
        close(c->sub_wake[1]);
        c->sub_wake[0] = c->sub_wake[1] = -1;
        sub_free(c, 0);
    }
}

void distlock__subscriber_after_fork(distlock_client *c)
{
    /* The thread is the parent's; its sockets are closed here (no I/O),
     * and the array it polled with is freed: nothing else holds it. */
    sub_free(c, 1);
    c->sub_running = 0;
    c->waiters = NULL;
    atomic_store(&c->nwaiters, 0);
    while (c->turn_queues) {
        distlock__turn_queue *next = c->turn_queues->next;
        free(c->turn_queues);
        c->turn_queues = next;
    }
    if (c->sub_wake[0] >= 0) {
        close(c->sub_wake[0]);
        close(c->sub_wake[1]);
        c->sub_wake[0] = c->sub_wake[1] = -1;
    }
}

unsigned distlock__waiter_named(distlock_client *c, distlock__waiter *w)
{
    pthread_mutex_lock(&c->mu);
    unsigned named = w->named;
    pthread_mutex_unlock(&c->mu);
    return named;
}

/* An attempt's view is older than a naming that arrived while it was on the
 * wire: the attempt may have run on the servers before the acquire that
 * named us, and saw us still behind it. Taking its "not the head" would
 * leave the next release to wake nobody here, and the new head to its
 * re-check timer. */
void distlock__waiter_set_head(distlock_client *c, distlock__waiter *w, int head,
                               unsigned named_before)
{
    pthread_mutex_lock(&c->mu);
    w->head = head || w->named != named_before;
    pthread_mutex_unlock(&c->mu);
}
