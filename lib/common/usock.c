/* usock.c - see usock.h. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto.h"
#include "usock.h"

static int fill_addr (struct sockaddr_un *sa, const char *path)
{
    memset (sa, 0, sizeof (*sa));
    sa->sun_family = AF_UNIX;
    if (!path || !*path) {
        errno = EINVAL;
        return -1;
    }
    if (strlen (path) >= sizeof (sa->sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy (sa->sun_path, path);
    return 0;
}

int usock_listen (const char *path, int backlog)
{
    struct sockaddr_un sa;
    int fd, saved;

    if (fill_addr (&sa, path) < 0)
        return -1;
    if ((fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return -1;
    if (bind (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0)
        goto error;
    /* Anyone may connect: who they are is checked per message. */
    if (chmod (path, 0666) < 0 || listen (fd, backlog) < 0) {
        saved = errno;
        unlink (path);
        errno = saved;
        goto error;
    }
    return fd;
error:
    saved = errno;
    close (fd);
    errno = saved;
    return -1;
}

int usock_connect (const char *path)
{
    struct sockaddr_un sa;
    int fd, saved;

    if (fill_addr (&sa, path) < 0)
        return -1;
    if ((fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return -1;
    while (connect (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0) {
        if (errno == EINTR)
            continue;
        saved = errno;
        close (fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int usock_peercred (int fd, uid_t *uid, gid_t *gid, pid_t *pid)
{
    struct ucred cr;
    socklen_t len = sizeof (cr);

    if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
        return -1;
    if (uid)
        *uid = cr.uid;
    if (gid)
        *gid = cr.gid;
    if (pid)
        *pid = cr.pid;
    return 0;
}

const char *usock_client_path (const char *configured)
{
    const char *e = getenv ("IBCR_SOCKET");
    return e && *e ? e : configured;
}

int usock_request (int fd, json_object *req, int timeout_ms, json_object **reply)
{
    *reply = NULL;
    if (proto_send (fd, req) < 0)
        return -1;
    if (proto_recv_timeout (fd, 0, timeout_ms, reply) < 0)
        return -1;
    if (!*reply) {
        errno = ECONNRESET;
        return -1;
    }
    return 0;
}
