/* lock.h - what makes ibcrd the only daemon on its socket: a secure socket
 * folder, a lock file held for the daemon's life, the pid file.
 *
 * Order at start (as munged does): secure folder, lock, remove a stale
 * socket (safe only while holding the lock), bind, pid file last, so that
 * a pid file always names a daemon that is serving.
 */
#ifndef IBCRD_LOCK_H
#define IBCRD_LOCK_H

#include <stddef.h>

/* Create the folder of 'path' (mode 0755, owned by us) if missing, and
 * refuse one that others could write into: it must be ours and not group-
 * or world-writable, and no folder above it may be writable by others (or
 * by a group other than root's or ours) unless sticky.  0, or -1 with a message in err. */
int lock_secure_dir (const char *path, char *err, size_t len);

/* Take the exclusive lock '<socket>.lock'.  Returns the fd to keep open,
 * or -1 with a message (naming the running daemon's pid when another one
 * holds it, errno EADDRINUSE). */
int lock_acquire (const char *socket, const char *pidfile, char *err, size_t len);

/* Write our pid (atomically, by rename).  0 or -1 with a message. */
int lock_write_pidfile (const char *pidfile, char *err, size_t len);

/* The pid recorded in pidfile, or -1. */
long lock_read_pidfile (const char *pidfile);

#endif
