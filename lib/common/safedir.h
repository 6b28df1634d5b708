/* safedir.h - folders root may write into, and work below them by fds.
 *
 * A folder is trusted when nobody but root (or the caller's own uid) can
 * change what it holds or where it is:
 *   - it and every folder above it is owned by root or by the caller's
 *     effective uid;
 *   - it is not writable by group or others;
 *   - a folder above it may be writable by others only with the sticky bit
 *     (as /tmp and /var/tmp: then nobody else can rename or remove what is
 *     ours), or group-writable when the group is root's or the caller's
 *     effective group (for root, the same);
 *   - a symbolic link on the way (as /var/run -> /run) is followed only
 *     when it is owned by root or us and lies in a trusted folder, since
 *     then only a trusted owner could have made it.
 * A path a user could have prepared (a staging folder created by them
 * first, a link of theirs on the way) is refused with a message that names
 * the folder and the fix.
 *
 * Below a folder, the *at functions work from directory fds with
 * O_NOFOLLOW: they never walk a path, never follow a link, never chown,
 * chmod or remove by name.  This file must never call a path-taking
 * system call on anything below the folder it was given.
 *
 * Errors: -1 with errno (EPERM: untrusted; ENOTDIR: not a folder; ELOOP:
 * too many links) and, where err is not NULL, one line in err.
 */
#ifndef IBCR_COMMON_SAFEDIR_H
#define IBCR_COMMON_SAFEDIR_H

#include <stddef.h>
#include <sys/types.h>

/* Create the folder path if missing (missing parents 0755, the folder
 * itself 'mode', exactly, whatever the umask) and check that it and every
 * folder above it is trusted.  An existing trusted folder is kept as it
 * is.  0, or -1 with errno and err. */
int safedir_ensure (const char *path, mode_t mode, char *err, size_t len);

/* Open the existing folder path after checking that it and every folder
 * above it is trusted.  An O_RDONLY|O_DIRECTORY|O_CLOEXEC fd, or -1 with
 * errno (ENOENT when missing) and err. */
int safedir_open (const char *path, char *err, size_t len);

/* The folder 'name' in dfd, created with exactly 'mode' when missing.  An
 * existing one must be a real folder (not a link), owned by root or us
 * and not writable by group or others (EPERM otherwise).  Its fd, or -1
 * with errno; *created (may be NULL) tells whether it was made here. */
int safedir_mkdirat (int dfd, const char *name, mode_t mode, int *created);

/* The folder 'name' in dfd, opened O_DIRECTORY|O_NOFOLLOW (no checks of
 * owner or mode).  Its fd, or -1 with errno (ELOOP or ENOTDIR for a link
 * or a file). */
int safedir_openat (int dfd, const char *name);

/* rm -rf of 'name' in dfd that never follows a link: folders are opened
 * O_NOFOLLOW and emptied through their fds, everything else is unlinked.
 * A missing name is not an error.  0 or -1 with errno. */
int safedir_rmtreeat (int dfd, const char *name);

/* safedir_rmtreeat of the last component of path in its folder, which
 * must be trusted as a folder above is (safedir_open; sticky allowed, so
 * that a folder of ours in /tmp can go).  0 or -1 with errno and err. */
int safedir_rmtree (const char *path, char *err, size_t len);

#endif
