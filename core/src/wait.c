/* wait.c -- waking waiters without polling.
 *
 * The release script PUBLISHes on "distlock:<key>". Each client runs one subscriber
 * thread, started by its first wait, holding one SUBSCRIBE connection per
 * node shared by all the client's waits; it subscribes to the channels its
 * waiters need and wakes the longest-waiting one for that key when a message
 * arrives. Waiters still re-check on their own timer, for locks
 * that simply expire or whose holders publish nothing. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define RECONNECT_MS 200

typedef struct sub_node {
    redisContext *ctx;
    uint64_t retry_at_us;
} sub_node;

/* Channels this thread has asked the nodes for. */
typedef struct sub_chan {
    struct sub_chan *next;
    char *name;
} sub_chan;

static void abs_deadline(struct timespec *ts, uint64_t until_us)
{
    ts->tv_sec = (time_t)(until_us / 1000000u);
    ts->tv_nsec = (long)(until_us % 1000000u) * 1000;
}

static void send_cmd(redisContext *ctx, const char *verb, const char *arg)
{
    const char *argv[2] = { verb, arg };
    size_t len[2] = { strlen(verb), strlen(arg) };
    redisAppendCommandArgv(ctx, 2, argv, len);
}

static void node_open(distlock_client *c, int i, sub_node *sn, sub_chan *chans)
{
    int st;
    char err[192];
    const distlock__node_cfg *cfg = &c->nodes[i];
    sn->ctx = distlock__node_connect(cfg, c->connect_timeout_ms, 1, &st, err, sizeof(err));
    if (sn->ctx == NULL) {
        sn->retry_at_us = distlock__now_us() + RECONNECT_MS * 1000u;
        return;
    }
    const char *user = c->username ? c->username : cfg->user;
    const char *pass = c->password ? c->password : cfg->pass;
    if (pass) {
        const char *argv[3];
        size_t len[3];
        int k = 0;
        argv[k] = "AUTH", len[k] = 4, k++;
        if (user)
            argv[k] = user, len[k] = strlen(user), k++;
        argv[k] = pass, len[k] = strlen(pass), k++;
        redisAppendCommandArgv(sn->ctx, k, argv, len);
    }
    for (sub_chan *ch = chans; ch; ch = ch->next)
        send_cmd(sn->ctx, "SUBSCRIBE", ch->name);
}

static void node_drop(sub_node *sn)
{
    if (sn->ctx)
        redisFree(sn->ctx);
    sn->ctx = NULL;
    sn->retry_at_us = distlock__now_us() + RECONNECT_MS * 1000u;
}

/* c->mu held */
static void on_reply(distlock_client *c, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str, *chan = r->element[1]->str;
    int is_msg = strcmp(kind, "message") == 0, is_sub = strcmp(kind, "subscribe") == 0;
    if (!is_msg && !is_sub)
        return;
    const char *payload = is_msg && r->element[2]->type == REDIS_REPLY_STRING ? r->element[2]->str : "";
    distlock__waiter *oldest = NULL;
    for (distlock__waiter *w = c->waiters; w; w = w->next) {
        if (strcmp(w->channel, chan) != 0)
            continue;
        if (is_sub) {
            w->subscribed = 1;
            pthread_cond_signal(&w->cond);
        } else if (payload[0] != '\0') {
            /* A fair acquire names the new head of the queue. */
            if (w->token && strcmp(w->token, payload) == 0)
                w->head = 1;
        } else if (w->token == NULL || w->head) {
            oldest = w;  /* the list is newest first */
        }
    }
    /* A release frees one lock: wake one of our waiters it concerns, the
     * longest waiting plain one or our fair waiter at the queue's head;
     * fair waiters further back are not woken (no herd), and the others
     * keep their re-check timers. */
    if (oldest) {
        oldest->notified = 1;
        pthread_cond_signal(&oldest->cond);
    }
}

static void *subscriber_main(void *arg)
{
    distlock_client *c = arg;
    sub_node nodes[64];
    sub_chan *chans = NULL;
    struct pollfd pfd[65];
    int idx[65];

    memset(nodes, 0, sizeof(nodes));
    pthread_mutex_lock(&c->mu);
    while (!c->sub_stop) {
        uint64_t now = distlock__now_us();
        /* Subscribe to channels newly wanted; unsubscribe from unused ones. */
        for (distlock__waiter *w = c->waiters; w; w = w->next) {
            sub_chan *ch = chans;
            while (ch && strcmp(ch->name, w->channel) != 0)
                ch = ch->next;
            if (ch)
                continue;
            ch = calloc(1, sizeof(*ch));
            if (!ch || !(ch->name = strdup(w->channel))) {
                free(ch);
                continue;
            }
            ch->next = chans;
            chans = ch;
            for (int i = 0; i < c->n; i++)
                if (nodes[i].ctx)
                    send_cmd(nodes[i].ctx, "SUBSCRIBE", ch->name);
        }
        for (sub_chan **pp = &chans; *pp;) {
            sub_chan *ch = *pp;
            distlock__waiter *w = c->waiters;
            while (w && strcmp(w->channel, ch->name) != 0)
                w = w->next;
            if (w) {
                pp = &ch->next;
                continue;
            }
            for (int i = 0; i < c->n; i++)
                if (nodes[i].ctx)
                    send_cmd(nodes[i].ctx, "UNSUBSCRIBE", ch->name);
            *pp = ch->next;
            free(ch->name);
            free(ch);
        }
        int np = 0;
        uint64_t next = now + 1000000u;
        pfd[np].fd = c->sub_wake[0], pfd[np].events = POLLIN, idx[np++] = -1;
        for (int i = 0; i < c->n; i++) {
            sub_node *sn = &nodes[i];
            if (sn->ctx == NULL && chans && now >= sn->retry_at_us)
                node_open(c, i, sn, chans);
            if (sn->ctx == NULL) {
                if (chans && sn->retry_at_us < next)
                    next = sn->retry_at_us;
                continue;
            }
            int done = 0;
            if (distlock__write(sn->ctx, &done) != REDIS_OK) {
                node_drop(sn);
                continue;
            }
            pfd[np].fd = sn->ctx->fd;
            pfd[np].events = POLLIN | (done ? 0 : POLLOUT);
            idx[np++] = i;
        }
        pthread_mutex_unlock(&c->mu);
        int pr = poll(pfd, (nfds_t)np, (int)((next - now) / 1000 + 1));
        pthread_mutex_lock(&c->mu);
        if (pr <= 0)
            continue;
        for (int k = 0; k < np; k++) {
            if (pfd[k].revents == 0)
                continue;
            if (idx[k] < 0) {
                char buf[64];
                while (read(c->sub_wake[0], buf, sizeof(buf)) > 0) {
                }
                continue;
            }
            sub_node *sn = &nodes[idx[k]];
            if (pfd[k].revents & (POLLIN | POLLERR | POLLHUP)) {
                if (redisBufferRead(sn->ctx) != REDIS_OK) {
                    node_drop(sn);
                    continue;
                }
                void *rep;
                while (sn->ctx && redisGetReplyFromReader(sn->ctx, &rep) == REDIS_OK && rep) {
                    redisReply *r = rep;
                    if (r->type == REDIS_REPLY_ERROR) {
                        freeReplyObject(r);
                        node_drop(sn);
                        break;
                    }
                    on_reply(c, r);
                    freeReplyObject(r);
                }
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < c->n; i++)
        if (nodes[i].ctx)
            redisFree(nodes[i].ctx);
    while (chans) {
        sub_chan *next = chans->next;
        free(chans->name);
        free(chans);
        chans = next;
    }
    return NULL;
}

static void wake_subscriber(distlock_client *c)
{
    char one = 1;
    ssize_t w = write(c->sub_wake[1], &one, 1);
    (void)w;
}

int distlock__waiter_add(distlock_client *c, distlock__waiter *w)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);

    distlock__lock(c);
    if (!c->sub_running) {
        if (pipe2(c->sub_wake, O_NONBLOCK | O_CLOEXEC) != 0) {
            pthread_mutex_unlock(&c->mu);
            pthread_cond_destroy(&w->cond);
            return distlock__fail(DISTLOCK_ENOMEM, "pipe: %s", strerror(errno));
        }
        c->sub_stop = 0;
        if (pthread_create(&c->sub_thread, NULL, subscriber_main, c) != 0) {
            close(c->sub_wake[0]);
            close(c->sub_wake[1]);
            c->sub_wake[0] = c->sub_wake[1] = -1;
            pthread_mutex_unlock(&c->mu);
            pthread_cond_destroy(&w->cond);
            return distlock__fail(DISTLOCK_ENOMEM, "cannot start the subscriber thread");
        }
        c->sub_running = 1;
    }
    w->next = c->waiters;
    c->waiters = w;
    /* Is the channel already subscribed by another waiter of ours? */
    for (distlock__waiter *o = w->next; o; o = o->next)
        if (o->subscribed && strcmp(o->channel, w->channel) == 0)
            w->subscribed = 1;
    wake_subscriber(c);
    uint64_t deadline = distlock__now_us() + (uint64_t)c->connect_timeout_ms * 1000u;
    while (!w->subscribed && distlock__now_us() < deadline) {
        struct timespec ts;
        abs_deadline(&ts, deadline);
        pthread_cond_timedwait(&w->cond, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    return DISTLOCK_OK;  /* unconfirmed: the waiter's re-checks cover it */
}

void distlock__waiter_remove(distlock_client *c, distlock__waiter *w)
{
    distlock__lock(c);
    for (distlock__waiter **pp = &c->waiters; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    if (c->sub_running)
        wake_subscriber(c);
    pthread_mutex_unlock(&c->mu);
    pthread_cond_destroy(&w->cond);
}

int distlock__waiter_wait(distlock_client *c, distlock__waiter *w, uint64_t deadline_us)
{
    struct timespec ts;
    abs_deadline(&ts, deadline_us);
    if (w == NULL) {
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        return 0;
    }
    pthread_mutex_lock(&c->mu);
    while (!w->notified && distlock__now_us() < deadline_us)
        if (pthread_cond_timedwait(&w->cond, &c->mu, &ts) == ETIMEDOUT)
            break;
    int notified = w->notified;
    w->notified = 0;
    pthread_mutex_unlock(&c->mu);
    return notified;
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
    }
}

void distlock__waiter_set_head(distlock_client *c, distlock__waiter *w, int head)
{
    pthread_mutex_lock(&c->mu);
    w->head = head;
    pthread_mutex_unlock(&c->mu);
}
