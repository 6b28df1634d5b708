/* lock.c - see lock.h. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lock.h"

static int mkdir_p (char *dir, mode_t mode)
{
    struct stat st;

    if (stat (dir, &st) == 0)
        return S_ISDIR (st.st_mode) ? 0 : (errno = ENOTDIR, -1);
    char *slash = strrchr (dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        int rc = mkdir_p (dir, mode);
        *slash = '/';
        if (rc < 0)
            return -1;
    }
    if (mkdir (dir, mode) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

int lock_secure_dir (const char *path, char *err, size_t len)
{
    char dir[PATH_MAX];
    struct stat st;
    char *slash;

    if (strlen (path) >= sizeof (dir) || path[0] != '/') {
        snprintf (err, len, "socket path %s: must be an absolute path under %d bytes",
                  path, PATH_MAX);
        return -1;
    }
    strcpy (dir, path);
    slash = strrchr (dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else
        *slash = '\0';
    if (mkdir_p (dir, 0755) < 0) {
        snprintf (err, len, "cannot create socket folder %s: %s", dir, strerror (errno));
        return -1;
    }
    if (stat (dir, &st) < 0) {
        snprintf (err, len, "socket folder %s: %s", dir, strerror (errno));
        return -1;
    }
    if (st.st_uid != geteuid ()) {
        snprintf (err, len, "socket folder %s is owned by uid %u, not by us (uid %u): "
                  "another user could replace the socket; use a folder of our own",
                  dir, (unsigned)st.st_uid, (unsigned)geteuid ());
        return -1;
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf (err, len, "socket folder %s is writable by group or others (mode %04o): "
                  "run chmod go-w on it or choose another folder", dir,
                  (unsigned)(st.st_mode & 07777));
        return -1;
    }
    /* Folders above: writable by others only if sticky (like /tmp), or
     * someone could rename our folder away and put theirs in its place.
     * Group write is fine when the group is root's or ours (a checkout
     * made with umask 002): nobody else gains anything from it. */
    while ((slash = strrchr (dir, '/')) && dir[1]) {
        if (slash == dir)
            slash[1] = '\0';
        else
            *slash = '\0';
        if (stat (dir, &st) < 0)
            break;
        int untrusted_group = (st.st_mode & S_IWGRP) && st.st_gid != 0 && st.st_gid != getegid ();
        if (((st.st_mode & S_IWOTH) || untrusted_group) && !(st.st_mode & S_ISVTX)) {
            snprintf (err, len, "folder %s above the socket is writable by others without "
                      "the sticky bit (mode %04o); fix its mode or move the socket",
                      dir, (unsigned)(st.st_mode & 07777));
            return -1;
        }
    }
    return 0;
}

long lock_read_pidfile (const char *pidfile)
{
    FILE *f = fopen (pidfile, "r");
    long pid = -1;

    if (f) {
        if (fscanf (f, "%ld", &pid) != 1)
            pid = -1;
        fclose (f);
    }
    return pid;
}

int lock_acquire (const char *socket, const char *pidfile, char *err, size_t len)
{
    char path[PATH_MAX];
    int fd;

    if (snprintf (path, sizeof (path), "%s.lock", socket) >= (int)sizeof (path)) {
        snprintf (err, len, "lock file name for %s is too long", socket);
        errno = ENAMETOOLONG;
        return -1;
    }
    if ((fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0) {
        snprintf (err, len, "cannot open lock file %s: %s", path, strerror (errno));
        return -1;
    }
    if (flock (fd, LOCK_EX | LOCK_NB) < 0) {
        int saved = errno;
        long pid = lock_read_pidfile (pidfile);
        if (saved == EWOULDBLOCK) {
            if (pid > 0)
                snprintf (err, len, "another ibcrd (pid %ld) is already serving %s; stop it "
                          "first or give this one another socket", pid, socket);
            else
                snprintf (err, len, "another ibcrd holds %s, so it is serving %s; stop it "
                          "first or give this one another socket", path, socket);
            saved = EADDRINUSE;
        } else
            snprintf (err, len, "cannot lock %s: %s", path, strerror (saved));
        close (fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int lock_write_pidfile (const char *pidfile, char *err, size_t len)
{
    char tmp[PATH_MAX];
    FILE *f;

    if (snprintf (tmp, sizeof (tmp), "%s.tmp", pidfile) >= (int)sizeof (tmp)) {
        snprintf (err, len, "pid file name %s is too long", pidfile);
        return -1;
    }
    if (!(f = fopen (tmp, "w"))) {
        snprintf (err, len, "cannot write pid file %s: %s", tmp, strerror (errno));
        return -1;
    }
    fprintf (f, "%ld\n", (long)getpid ());
    if (fclose (f) != 0 || rename (tmp, pidfile) < 0) {
        snprintf (err, len, "cannot write pid file %s: %s", pidfile, strerror (errno));
        unlink (tmp);
        return -1;
    }
    return 0;
}
