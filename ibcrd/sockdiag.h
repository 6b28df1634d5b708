/* sockdiag.h - which unix socket is at the other end of one of ours.
 *
 * CRIU must be told that libibcr's control socket leads out of the dumped
 * tree (--external unix[INO]), and INO is the inode of the task's end,
 * which only the kernel knows: NETLINK_SOCK_DIAG answers it for the
 * inode of our end.
 */
#ifndef IBCRD_SOCKDIAG_H
#define IBCRD_SOCKDIAG_H

#include <stdint.h>

/* Inode of the socket connected to our unix socket fd.  0 and *peer, or
 * -1 with errno (ENOENT: not connected). */
int sockdiag_unix_peer (int fd, uint64_t *peer);

/* Inode of a socket, pipe or file fd (fstat). 0 or -1+errno. */
int sockdiag_inode (int fd, uint64_t *ino);

#endif
