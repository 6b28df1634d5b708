/* sp_reg.c - see sp_reg.h.
 *
 * Frames are lib/common/proto.h's.  The connection is made from
 * slurmstepd as root, so ibcrd identifies it as root (SO_PEERCRED) and
 * accepts the job's uid and the init's pid named in the request; the
 * task's own processes never hold this fd.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/errbuf.h"
#include "common/proto.h"
#include "common/taskns.h"
#include "sp_reg.h"
#include "common/clock.h"

static int left_ms (long deadline)
{
    long left = deadline - mono_ms ();
    return left > 0 ? (int)left : 0;
}

/* Connect without waiting past the deadline: a unix connect blocks when
 * the listener's backlog is full, which is what a stuck daemon looks like. */
static int connect_deadline (const char *path, long deadline)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct pollfd pfd;
    socklen_t sl = sizeof (int);
    int fd, soerr = 0, flags;

    if (strlen (path) >= sizeof (sa.sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy (sa.sun_path, path);
    if ((fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
        return -1;
    if (connect (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0) {
        if (errno != EINPROGRESS && errno != EAGAIN)
            goto error;
        pfd.fd = fd;
        pfd.events = POLLOUT;
        if (poll (&pfd, 1, left_ms (deadline)) <= 0) {
            errno = ETIMEDOUT;
            goto error;
        }
        if (getsockopt (fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
            goto error;
        if (soerr) {
            errno = soerr;
            goto error;
        }
    }
    /* proto_send writes on a blocking fd; bound it like the rest. */
    if ((flags = fcntl (fd, F_GETFL)) < 0 || fcntl (fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
        goto error;
    {
        int ms = left_ms (deadline) + 1;
        struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
        (void)setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof (tv));
    }
    return fd;
error : {
    int err = errno;
    (void)close (fd);
    errno = err;
}
    return -1;
}

/* A request whose fields could not all be set: dropped, NULL. */
static json_object *req_drop (json_object *req)
{
    json_object_put (req);
    return NULL;
}

/* One request and its reply; req is consumed (NULL: it could not be built,
 * "out of memory").  0 when the reply is of type "ok", or -1 with a
 * message in err (the daemon's own for an "error" reply). */
static int exchange (int fd, json_object *req, long deadline, const char *what, char *err,
                     size_t errlen)
{
    json_object *reply = NULL;
    const char *type;
    int rc = -1, refused = 0;

    if (!req) {
        snprintf (err, errlen, "out of memory");
        return -1;
    }
    if (proto_send (fd, req) < 0) {
        snprintf (err, errlen, "cannot send the %s request: %s", what,
                  errno == EAGAIN ? "timed out" : strerror (errno));
        goto out;
    }
    if (proto_recv_timeout (fd, 0, left_ms (deadline), &reply) < 0) {
        snprintf (err, errlen, "no answer to the %s request: %s", what,
                  errno == ETIMEDOUT ? "timed out" : strerror (errno));
        goto out;
    }
    if (!reply) {
        snprintf (err, errlen,
                  "no answer to the %s request: ibcrd closed the "
                  "connection (see its log)",
                  what);
        goto out;
    }
    type = proto_type (reply);
    if (!type || strcmp (type, "ok") != 0) {
        snprintf (err, errlen, "ibcrd refused the %s request: %s", what,
                  proto_get_str (reply, "message", "(no message)"));
        refused = 1;
        goto out;
    }
    rc = 0;
out : {
    /* ibcrd's reason, for callers that act on it (EEXIST: the job
         * has checkpoints this plugin did not find). */
    int e = refused ? (int)proto_get_int (reply, "errno", EPROTO) : ECOMM;
    json_object_put (reply);
    json_object_put (req);
    errno = rc ? e : 0;
}
    return rc;
}

/* exchange() on fd, a connection to path that the caller opened for this
 * request alone: on failure err names path and fd is closed.  fd, or -1. */
static int exchange_or_close (int fd, const char *path, json_object *req, long deadline,
                              const char *what, char *err, size_t errlen)
{
    char why[512];

    if (!req) {
        snprintf (err, errlen, "out of memory");
        (void)close (fd);
        return -1;
    }
    if (exchange (fd, req, deadline, what, why, sizeof (why)) < 0) {
        snprintf (err, errlen, "ibcrd at %s: %s", path, why);
        (void)close (fd);
        return -1;
    }
    return fd;
}

int sp_reg_open (const char *path, int timeout_ms, char *err, size_t errlen)
{
    long deadline = mono_ms () + timeout_ms;
    int fd;

    if ((fd = connect_deadline (path, deadline)) < 0)
        return errprintf (
            err, errlen, "cannot reach ibcrd at %s: %s%s", path,
            errno == ETIMEDOUT ? "timed out" : strerror (errno),
            errno == ENOENT || errno == ECONNREFUSED ? " (is ibcrd running on this node?)" : "");
    return exchange_or_close (fd, path, proto_new ("ping"), deadline, "ping", err, errlen);
}

int sp_reg_register (int fd, const struct sp_task_id *id, pid_t init_pid, pid_t app_pid,
                     int timeout_ms, char *err, size_t errlen)
{
    long deadline = mono_ms () + timeout_ms;
    json_object *req = proto_new ("register");

    if (req
        && (proto_set_str (req, "job", id->job) < 0 || proto_set_str (req, "step", id->step) < 0
            || proto_set_int (req, "rank", id->rank) < 0
            || proto_set_int (req, "local_task", id->local) < 0
            || proto_set_int (req, "ntasks", id->ntasks) < 0
            || proto_set_str (req, "node", id->node) < 0
            || proto_set_int (req, "uid", id->uid) < 0
            /* The pid ibcrd checkpoints is the task's init; inside its
                 * namespace it is TASKNS_FIRST_PID, under the holder, and
                 * the application is its child. */
            || proto_set_int (req, "pid", init_pid) < 0
            || proto_set_int (req, "ns_pid", TASKNS_FIRST_PID) < 0
            || proto_set_int (req, "app_pid", app_pid) < 0
            || proto_set_int (req, "interval_ms", (int64_t)id->interval_ms) < 0
            || proto_set_str (req, "source", "spank") < 0
            || (id->leader[0] && proto_set_str (req, "leader", id->leader) < 0)
            || (id->restored && proto_set_bool (req, "restored", 1) < 0)
            /* The leader resumes ranks of one generation only. */
            || (id->restored_gen > 0 && proto_set_int (req, "restored_gen", id->restored_gen) < 0)
            /* For the leader's restore timeline, as ibcr restart says it
                 * (ibcrd(8), TIMELINE). */
            || (id->restored && id->restore_ms >= 0
                && proto_set_int (req, "restore_ms", id->restore_ms) < 0)
            || (id->fresh_after[0] && proto_set_str (req, "requeued_fresh", id->fresh_after) < 0)))
        req = req_drop (req);
    return exchange (fd, req, deadline, "register", err, errlen);
}

int sp_reg_term (int fd, const struct sp_task_id *id, int wait_ms, char *err, size_t errlen)
{
    /* ibcrd answers at wait_ms at the latest; a little more for the
     * answer to arrive, then give up on it. */
    long deadline = mono_ms () + wait_ms + 2000;
    json_object *req = proto_new ("term");

    if (req
        && (proto_set_str (req, "job", id->job) < 0 || proto_set_str (req, "step", id->step) < 0
            || proto_set_int (req, "rank", id->rank) < 0
            || proto_set_int (req, "wait_ms", wait_ms) < 0))
        req = req_drop (req);
    return exchange (fd, req, deadline, "term", err, errlen);
}

int sp_reg_ctl_attach (const char *path, const struct sp_task_id *id, int timeout_ms, char *err,
                       size_t errlen)
{
    long deadline = mono_ms () + timeout_ms;
    json_object *req;
    int fd;

    if ((fd = sp_reg_open (path, timeout_ms, err, errlen)) < 0)
        return -1;
    req = proto_new ("ctl-attach");
    if (req
        && (proto_set_str (req, "job", id->job) < 0 || proto_set_int (req, "rank", id->rank) < 0))
        req = req_drop (req);
    return exchange_or_close (fd, path, req, deadline, "ctl-attach", err, errlen);
}

int sp_reg_resume (int fd, const struct sp_task_id *id, int timeout_ms, char *err, size_t errlen)
{
    long deadline = mono_ms () + timeout_ms;
    json_object *req = proto_new ("resume-restored");

    if (req && proto_set_str (req, "job", id->job) < 0)
        req = req_drop (req);
    return exchange (fd, req, deadline, "resume-restored", err, errlen);
}
