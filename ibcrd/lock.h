/* lock.h - what makes ibcrd the only daemon on its socket: a lock file
 * held for the daemon's life, the pid file.
 *
 * Order at start (as munged does): secure folder (ibcrd.c, with
 * common/safedir.h, as for storage and staging), lock, remove a stale
 * socket (safe only while holding the lock), bind, pid file last, so that
 * a pid file always names a daemon that is serving.
 */
#ifndef IBCRD_LOCK_H
#define IBCRD_LOCK_H

#include <stddef.h>

/* Take the exclusive lock '<socket>.lock'.  Returns the fd to keep open,
 * or -1 with a message (naming the running daemon's pid when another one
 * holds it, errno EADDRINUSE). */
int lock_acquire (const char *socket, const char *pidfile, char *err, size_t len);

/* Write our pid (atomically, by rename).  0 or -1 with a message. */
int lock_write_pidfile (const char *pidfile, char *err, size_t len);

/* The pid recorded in pidfile, or -1. */
long lock_read_pidfile (const char *pidfile);

#endif
