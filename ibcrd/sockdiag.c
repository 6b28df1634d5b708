/* sockdiag.c - see sockdiag.h.  One exact-match request (by inode, no
 * cookie) with UDIAG_SHOW_PEER; the answer's UNIX_DIAG_PEER attribute is
 * the peer's inode. */
#include "config.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "sockdiag.h"

int sockdiag_inode (int fd, uint64_t *ino)
{
    struct stat sb;

    if (fstat (fd, &sb) < 0)
        return -1;
    *ino = sb.st_ino;
    return 0;
}

int sockdiag_unix_peer (int fd, uint64_t *peer)
{
    struct {
        struct nlmsghdr nlh;
        struct unix_diag_req req;
    } msg;
    char buf[8192];
    uint64_t ino;
    struct timeval tv = { .tv_sec = 2 };
    int nl, saved;
    ssize_t n;

    if (sockdiag_inode (fd, &ino) < 0)
        return -1;
    if ((nl = socket (AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG)) < 0)
        return -1;
    setsockopt (nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof (tv));
    memset (&msg, 0, sizeof (msg));
    msg.nlh.nlmsg_len = sizeof (msg);
    msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.nlh.nlmsg_flags = NLM_F_REQUEST;
    msg.req.sdiag_family = AF_UNIX;
    msg.req.udiag_states = -1;
    msg.req.udiag_ino = (uint32_t)ino;
    msg.req.udiag_show = UDIAG_SHOW_PEER;
    msg.req.udiag_cookie[0] = msg.req.udiag_cookie[1] = (uint32_t)~0U;
    if (send (nl, &msg, sizeof (msg), 0) < 0 || (n = recv (nl, buf, sizeof (buf), 0)) < 0)
        goto error;
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK (h, (size_t)n);
         h = NLMSG_NEXT (h, n)) {
        if (h->nlmsg_type == NLMSG_ERROR) {
            struct nlmsgerr *e = NLMSG_DATA (h);
            errno = e->error ? -e->error : ENOENT;
            goto error;
        }
        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
            continue;
        struct unix_diag_msg *m = NLMSG_DATA (h);
        int alen = h->nlmsg_len - NLMSG_LENGTH (sizeof (*m));
        for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK (a, alen); a = RTA_NEXT (a, alen))
            if (a->rta_type == UNIX_DIAG_PEER) {
                uint32_t p;
                memcpy (&p, RTA_DATA (a), sizeof (p));
                close (nl);
                *peer = p;
                return 0;
            }
    }
    errno = ENOENT;
error:
    saved = errno;
    close (nl);
    errno = saved;
    return -1;
}
