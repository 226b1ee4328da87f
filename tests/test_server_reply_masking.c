/* test_server_reply_masking.c -- a server's own error reply may quote the
 * password the library sent: Redis answers a command it does not know with
 * "ERR unknown command 'AUTH', with args beginning with: 'user' 'PASSWORD'"
 * (AUTH disabled by `rename-command AUTH ""`, a common hardening step, or
 * a server that is not the one the operator meant). The library quotes
 * the reply to a failed AUTH in its message, so no message may show it
 * unless the password is masked out of it: no byte of a password in
 * distlock_last_error().
 *
 * One real redis-server, started here with `--rename-command AUTH ""` (the
 * harness has no option for it). */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_common.h"

#define PASSWORD "S3CRETPW9"

typedef struct server {
    pid_t pid;
    int port;
    char dir[64];
} server;

/* A port nobody listens on now (the kernel's pick for port 0). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static int group_setup(void **state)
{
    server *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    snprintf(s->dir, sizeof s->dir, "/tmp/dl-authecho-XXXXXX");
    if (!mkdtemp(s->dir) || (s->port = free_port()) < 0)
        return -1;
    char port[16], log[128];
    snprintf(port, sizeof port, "%d", s->port);
    snprintf(log, sizeof log, "%s/redis.log", s->dir);
    s->pid = fork();
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--save",
               "", "--dir", s->dir, "--logfile", log, "--daemonize", "no",
               "--rename-command", "AUTH", "", (char *)NULL);
        _exit(127);
    }
    /* ready once it answers PING */
    if (!RH_WAIT_UNTIL(({
            redisContext *ctx = redisConnect("127.0.0.1", s->port);
            int up = 0;
            if (ctx && !ctx->err) {
                redisReply *r = redisCommand(ctx, "PING");
                up = r && r->type == REDIS_REPLY_STATUS;
                freeReplyObject(r);
            }
            redisFree(ctx);
            up;
        }), 10000))
        return -1;
    *state = s;
    return 0;
}

static int group_teardown(void **state)
{
    server *s = *state;
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s->dir);
    if (system(cmd) != 0)
        return -1;
    free(s);
    return 0;
}

/* Acquire through a URI with PASSWORD in it: it fails (AUTH is unknown to
 * the server), and its message must not quote the password. */
static void acquire_must_not_show(server *s, const char *userinfo)
{
    char uri[256];
    snprintf(uri, sizeof uri, "redis://%s@127.0.0.1:%d", userinfo, s->port);
    distlock_client *c = new_client(uri);
    distlock_lock *l = NULL;
    int rc = distlock_acquire(c, "authecho:k", 5000, 0, 0, &l);
    const char *msg = distlock_last_error();
    printf("acquire via redis://%s@...: %d (%s): \"%s\"\n", userinfo, rc, distlock_strerror(rc),
           msg);
    assert_int_not_equal(rc, DISTLOCK_OK);
    if (strstr(msg, PASSWORD) != NULL) {
        print_error("the password is in the message: \"%s\"\n", msg);
        fail();
    }
    distlock_lock_free(l);
    distlock_client_free(c);
}

static void test_auth_reply_quoting_the_password_user_and_password(void **state)
{
    acquire_must_not_show(*state, "dlu:" PASSWORD);
}

static void test_auth_reply_quoting_the_password_password_only(void **state)
{
    acquire_must_not_show(*state, ":" PASSWORD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auth_reply_quoting_the_password_user_and_password),
        cmocka_unit_test(test_auth_reply_quoting_the_password_password_only),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
