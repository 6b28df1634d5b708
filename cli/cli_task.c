/* cli_task.c - what "ibcr run" and "ibcr restart" share: they stay with
 * the task they started until it ends, relaying its output, passing on
 * signals, holding its registration with ibcrd, and return its exit code.
 *
 * The task's stdout and stderr are pipes read here, never our own fds
 * passed down: a terminal or a file outside the task would bind its image
 * to this session, while a pipe is handed back fresh at restart
 * (criu --inherit-fd fd[N]:pipe:[INO]) wherever the output goes then.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "common/proc.h"
#include "common/proto.h"
#include "common/restore.h"
#include "common/usock.h"

#ifndef PKGLIBEXECDIR
#define PKGLIBEXECDIR "/usr/local/libexec/ibcr"
#endif

static volatile sig_atomic_t got_sig;

static void on_sig (int sig)
{
    got_sig = sig;
}

const char *cli_init_path (void)
{
    const char *e = getenv ("IBCR_INIT");
    return e && *e ? e : PKGLIBEXECDIR "/ibcr-init";
}

int cli_task_register (struct cli *c, struct cli_task *t, json_object *fields)
{
    const char *path = cli_socket_path (c);
    json_object *req = proto_new ("register"), *rep = NULL;
    int rc = CLI_OK;

    if (!path || !req) {
        json_object_put (fields);
        json_object_put (req);
        return CLI_ERR;
    }
    json_object_object_foreach (fields, key, val)
        json_object_object_add (req, key, json_object_get (val));
    json_object_put (fields);
    proto_set_int (req, "pid", t->init);
    if (t->app > 0)
        proto_set_int (req, "app_pid", t->app);
    if ((t->regfd = usock_connect (path)) < 0) {
        cli_error ("cannot reach ibcrd at %s: %s; the task runs but cannot be "
                   "checkpointed",
                   path, strerror (errno));
        rc = CLI_NODAEMON;
    } else if (usock_request (t->regfd, req, c->timeout_ms, &rep) < 0) {
        cli_error ("no reply from ibcrd at %s to register: %s", path, strerror (errno));
        rc = CLI_NODAEMON;
    } else if (!strcmp (proto_type (rep), "error")) {
        cli_error ("ibcrd refused to register the task: %s", proto_get_str (rep, "message", "?"));
        rc = cli_rc_for_errno ((int)proto_get_int (rep, "errno", EIO));
    }
    if (rc == CLI_OK) {
        t->regreq = json_object_get (req);
        t->sock = strdup (path);
    }
    json_object_put (req);
    json_object_put (rep);
    return rc;
}

/* ibcrd went away (restarted, killed): register again once it is back,
 * so the task can be checkpointed again.  Quiet until it works. */
static void reregister (struct cli_task *t)
{
    json_object *rep = NULL;
    int fd;

    if (!t->regreq || !t->sock || (fd = usock_connect (t->sock)) < 0)
        return;
    /* A restored task was rebuilt long ago: it is an ordinary one now. */
    json_object_object_del (t->regreq, "restored");
    if (usock_request (fd, t->regreq, 2000, &rep) == 0 && !strcmp (proto_type (rep), "ok")) {
        t->regfd = fd;
        fprintf (stderr, "ibcr: registered again with ibcrd at %s\n", t->sock);
    } else
        close (fd);
    json_object_put (rep);
}

/* Copy what is readable on fd to out; -1 at end of file. */
static int pump (int fd, int out)
{
    char buf[65536];
    ssize_t n = read (fd, buf, sizeof (buf));

    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 0 : -1;
    if (n == 0)
        return -1;
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write (out, buf + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break; /* our output is gone: drop, but keep the task running */
        off += w;
    }
    return 0;
}

int cli_task_wait (struct cli_task *t)
{
    struct sigaction sa = { .sa_handler = on_sig };
    sigset_t block, waitmask;
    int status = 125 << 8, reaped = t->relay < 0;
    time_t last_try = time (NULL);

    sigemptyset (&sa.sa_mask);
    sigaction (SIGINT, &sa, NULL);
    sigaction (SIGTERM, &sa, NULL);
    sigaction (SIGHUP, &sa, NULL);
    sigaction (SIGCHLD, &sa, NULL);
    signal (SIGPIPE, SIG_IGN);
    sigemptyset (&block);
    sigaddset (&block, SIGINT);
    sigaddset (&block, SIGTERM);
    sigaddset (&block, SIGHUP);
    sigaddset (&block, SIGCHLD);
    sigprocmask (SIG_BLOCK, &block, &waitmask);
    /* Until the task ended and both pipes are at end of file: output
     * written just before the exit must not be lost. */
    while (!reaped || t->out_r >= 0 || t->err_r >= 0) {
        struct pollfd pfd[3];
        int n = 0;
        struct timespec tmo = { .tv_sec = 0, .tv_nsec = 200000000 };

        if (t->out_r >= 0)
            pfd[n++] = (struct pollfd){ .fd = t->out_r, .events = POLLIN };
        if (t->err_r >= 0)
            pfd[n++] = (struct pollfd){ .fd = t->err_r, .events = POLLIN };
        if (t->regfd >= 0)
            pfd[n++] = (struct pollfd){ .fd = t->regfd, .events = POLLIN };
        if (t->relay >= 0)
            pfd[n++] = (struct pollfd){ .fd = t->relay, .events = POLLIN };
        ppoll (pfd, n, reaped ? NULL : &tmo, &waitmask);
        for (int i = 0; i < n; i++) {
            if (!pfd[i].revents)
                continue;
            if (pfd[i].fd == t->relay) {
                json_object *o = NULL;
                /* "exited" with the task's wait status, then the end. */
                if (proto_recv (t->relay, 0, &o) == 0 && o && !strcmp (proto_type (o), "exited"))
                    status = (int)proto_get_int (o, "status", 125 << 8);
                else
                    status = 125 << 8;
                json_object_put (o);
                close (t->relay);
                t->relay = -1;
                reaped = 1;
            } else if (pfd[i].fd == t->regfd) {
                char junk[256];
                if (read (t->regfd, junk, sizeof (junk)) <= 0) {
                    fprintf (stderr,
                             "ibcr: warning: ibcrd closed the task's registration "
                             "(did it stop?); the task runs on, without checkpoints until "
                             "ibcrd is back\n");
                    close (t->regfd);
                    t->regfd = -1;
                    last_try = time (NULL);
                }
            } else if (pump (pfd[i].fd, pfd[i].fd == t->out_r ? 1 : 2) < 0) {
                close (pfd[i].fd);
                if (pfd[i].fd == t->out_r)
                    t->out_r = -1;
                else
                    t->err_r = -1;
            }
        }
        if (t->regfd < 0 && !reaped && time (NULL) > last_try) {
            last_try = time (NULL);
            reregister (t);
        }
        if (got_sig && got_sig != SIGCHLD && !reaped)
            kill (t->init, got_sig);
        got_sig = 0;
    }
    if (t->regfd >= 0)
        close (t->regfd);
    json_object_put (t->regreq);
    t->regreq = NULL;
    free (t->sock);
    t->sock = NULL;
    sigprocmask (SIG_SETMASK, &waitmask, NULL);
    return WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
}

/* For "ibcr restart --stopped": true while pid is stopped (or traced). */
int cli_task_stopped (pid_t pid)
{
    char st = proc_state (pid);
    return st == 'T' || st == 't';
}

int cli_relay_open (struct cli *c, json_object *req, const char *ready, json_object **reply,
                    int *rc)
{
    const char *path = cli_socket_path (c);
    int fd;

    *reply = NULL;
    *rc = CLI_NODAEMON;
    if (!path)
        return -1;
    if ((fd = usock_connect (path)) < 0) {
        cli_error ("ibcrd is not running at %s: %s (start it first, or give its socket with "
                   "--socket or IBCR_SOCKET)",
                   path, strerror (errno));
        return -1;
    }
    if (usock_request (fd, req, c->timeout_ms, reply) < 0) {
        cli_error ("no answer from ibcrd at %s to '%s': %s", path, proto_type (req),
                   strerror (errno));
        close (fd);
        return -1;
    }
    if (strcmp (proto_type (*reply), ready)) {
        *rc = cli_rc_for_errno ((int)proto_get_int (*reply, "errno", EIO));
        close (fd);
        return -1;
    }
    return fd;
}

int cli_relay_send_fds (int fd, const int *fds, int n)
{
    char cbuf[CMSG_SPACE ((RESTORE_MAX_CTL + 4) * sizeof (int))] = { 0 }, byte = 'f';
    struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
    struct msghdr mh = { 0 };
    struct cmsghdr *cm;

    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = CMSG_SPACE ((size_t)n * sizeof (int));
    cm = CMSG_FIRSTHDR (&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN ((size_t)n * sizeof (int));
    memcpy (CMSG_DATA (cm), fds, (size_t)n * sizeof (int));
    if (sendmsg (fd, &mh, MSG_NOSIGNAL) < 0) {
        cli_error ("cannot hand the task's files to ibcrd: %s", strerror (errno));
        return -1;
    }
    return 0;
}

json_object *cli_relay_recv (int fd, const char *want, int *rc)
{
    json_object *o = NULL;

    *rc = CLI_OK;
    errno = 0;
    if (proto_recv (fd, 0, &o) < 0 || !o) {
        cli_error ("ibcrd's relay went away before '%s': %s (see ibcrd's log)", want,
                   errno ? strerror (errno) : "it closed the connection");
        *rc = CLI_ERR;
        return NULL;
    }
    if (strcmp (proto_type (o), want)) {
        cli_error ("%s", proto_get_str (o, "message", "unexpected answer from ibcrd"));
        *rc = cli_rc_for_errno ((int)proto_get_int (o, "errno", EIO));
        json_object_put (o);
        return NULL;
    }
    return o;
}
