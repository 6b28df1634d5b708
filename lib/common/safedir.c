/* safedir.c - see safedir.h.  The walk opens "/" and then each component
 * with openat(O_NOFOLLOW|O_DIRECTORY), checking each one through its fd,
 * so what is checked is what is used: nothing can be swapped between the
 * check and the next step. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safedir.h"
#include "errbuf.h"

#define SAFEDIR_HOPS 40  /* links and ".." followed in one walk */
#define SAFEDIR_DEPTH 64 /* folders deep, for rmtree */

static int trusted_owner (uid_t uid)
{
    return uid == 0 || uid == geteuid ();
}

/* A group whose write permission on a folder above gives nobody else
 * anything: root's, or ours (a checkout made with umask 002). */
static int trusted_group (gid_t gid)
{
    return gid == 0 || gid == getegid ();
}

/* Whether the folder 'path' (stat sb) may be trusted: the folder itself
 * (last) or one above it.  0, or -1 with EPERM and the reason in err. */
static int check_dir (const char *path, const struct stat *sb, int last, char *err, size_t len)
{
    mode_t m = sb->st_mode;

    if (!S_ISDIR (m))
        return errnprintf (err, len, ENOTDIR, "%s is not a folder", path);
    if (!trusted_owner (sb->st_uid) && geteuid () == 0)
        return errnprintf (err, len, EPERM,
                           "folder %s is owned by uid %u, not by root: its owner "
                           "could choose where root writes; remove it (or, if it is meant to be "
                           "there, chown root:root %s and chmod go-w %s)",
                           path, (unsigned)sb->st_uid, path, path);
    if (!trusted_owner (sb->st_uid))
        return errnprintf (err, len, EPERM,
                           "folder %s is owned by uid %u, not by root or by us "
                           "(uid %u): its owner could replace what we put there; use a folder "
                           "of our own",
                           path, (unsigned)sb->st_uid, (unsigned)geteuid ());
    if (last && (m & (S_IWGRP | S_IWOTH)))
        return errnprintf (err, len, EPERM,
                           "folder %s is writable by group or others (mode "
                           "%04o): run chmod go-w %s, or use a folder only root can write",
                           path, (unsigned)(m & 07777), path);
    if (!last && ((m & S_IWOTH) || ((m & S_IWGRP) && !trusted_group (sb->st_gid)))
        && !(m & S_ISVTX))
        return errnprintf (err, len, EPERM,
                           "folder %s is writable by others without the sticky "
                           "bit (mode %04o): anyone could rename what is below it; run chmod go-w "
                           "%s, or use another folder",
                           path, (unsigned)(m & 07777), path);
    return 0;
}

/* path = a + "/" + b, or -1 with ENAMETOOLONG. */
static int join (char *buf, size_t len, const char *a, const char *b)
{
    if ((size_t)snprintf (buf, len, "%s%s%s", a, *a && *b ? "/" : "", b) >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

/* The walk behind safedir_ensure (create) and safedir_open; with
 * sticky_ok, the folder itself is checked as one above (a sticky /tmp may
 * hold the folder that safedir_rmtree removes). */
static int walk (const char *path, int create, mode_t mode, int sticky_ok, char *err, size_t len)
{
    char want[PATH_MAX], next[PATH_MAX], cur[PATH_MAX];
    int hops = 0, fd = -1;
    struct stat sb;

    if (!path || path[0] != '/')
        return errnprintf (err, len, EINVAL, "%s: not an absolute path", path ? path : "(null)");
    if (strlen (path) >= sizeof (want))
        return errnprintf (err, len, ENAMETOOLONG, "%s: path too long", path);
    strcpy (want, path);
restart:
    if (fd >= 0)
        close (fd);
    cur[0] = '\0';
    if ((fd = open ("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return errnprintf (err, len, errno, "cannot open /: %s", strerror (errno));
    if (fstat (fd, &sb) < 0
        || check_dir ("/", &sb, !sticky_ok && want[strspn (want, "/")] == '\0', err, len) < 0)
        goto error;
    for (char *p = want; *p;) {
        char *comp, *rest;
        int nfd, last, made = 0;

        while (*p == '/')
            p++;
        if (!*p)
            break;
        comp = p;
        rest = p + strcspn (p, "/");
        p = rest;
        if (*rest)
            *rest++ = '\0', p = rest;
        last = rest[strspn (rest, "/")] == '\0';
        if (!strcmp (comp, "."))
            continue;
        if (!strcmp (comp, "..")) {
            /* Lexically: cur holds no links, they were resolved. */
            char *slash = strrchr (cur, '/');
            if (slash)
                *slash = '\0';
            if (++hops > SAFEDIR_HOPS || join (next, sizeof (next), *cur ? cur : "/", rest) < 0)
                goto toolong;
            strcpy (want, next);
            goto restart;
        }
        nfd = openat (fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0 && errno == ENOENT && create) {
            if (mkdirat (fd, comp, last ? mode : 0755) == 0)
                made = 1;
            else if (errno != EEXIST) {
                errnprintf (err, len, errno, "cannot create %s/%s: %s", cur, comp,
                            strerror (errno));
                goto error;
            }
            nfd = openat (fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (nfd < 0 && (errno == ELOOP || errno == ENOTDIR)
            && fstatat (fd, comp, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK (sb.st_mode)) {
            char target[PATH_MAX], base[PATH_MAX];
            ssize_t n;

            if (!trusted_owner (sb.st_uid)) {
                errnprintf (err, len, EPERM,
                            "%s/%s is a symbolic link owned by uid %u, not by "
                            "root: its owner could choose where root writes; remove it or give "
                            "the real folder's path",
                            cur, comp, (unsigned)sb.st_uid);
                goto error;
            }
            if ((n = readlinkat (fd, comp, target, sizeof (target) - 1)) < 0)
                goto syserr;
            target[n] = '\0';
            if (++hops > SAFEDIR_HOPS) {
                errnprintf (err, len, ELOOP, "%s: too many symbolic links", path);
                goto error;
            }
            if (target[0] == '/') {
                if (join (next, sizeof (next), target, rest) < 0)
                    goto toolong;
            } else if (join (base, sizeof (base), *cur ? cur : "/", target) < 0
                       || join (next, sizeof (next), base, rest) < 0)
                goto toolong;
            strcpy (want, next);
            goto restart;
        }
        if (nfd < 0) {
            errnprintf (err, len, errno, "%s/%s: %s", cur, comp, strerror (errno));
            goto error;
        }
        close (fd);
        fd = nfd;
        if (join (next, sizeof (next), cur, comp) < 0)
            goto toolong;
        if ((size_t)snprintf (cur, sizeof (cur), "%s%s", next[0] == '/' ? "" : "/", next)
            >= sizeof (cur))
            goto toolong;
        /* mkdirat's mode went through the umask: set it exactly. */
        if (made && fchmod (fd, last ? mode : 0755) < 0)
            goto syserr;
        if (fstat (fd, &sb) < 0)
            goto syserr;
        if (check_dir (cur, &sb, last && !sticky_ok, err, len) < 0)
            goto error;
    }
    return fd;
syserr:
    errnprintf (err, len, errno, "%s: %s", *cur ? cur : path, strerror (errno));
    goto error;
toolong:
    errnprintf (err, len, ENAMETOOLONG, "%s: path too long", path);
error : {
    int saved = errno;
    close (fd);
    errno = saved;
}
    return -1;
}

int safedir_ensure (const char *path, mode_t mode, char *err, size_t len)
{
    int fd = walk (path, 1, mode, 0, err, len);

    if (fd < 0)
        return -1;
    close (fd);
    return 0;
}

int safedir_open (const char *path, char *err, size_t len)
{
    return walk (path, 0, 0, 0, err, len);
}

int safedir_openat (int dfd, const char *name)
{
    return openat (dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

int safedir_mkdirat (int dfd, const char *name, mode_t mode, int *created)
{
    struct stat sb;
    int fd, made = 0, saved;

    if (mkdirat (dfd, name, mode) == 0)
        made = 1;
    else if (errno != EEXIST)
        return -1;
    if ((fd = safedir_openat (dfd, name)) < 0)
        return -1;
    if (made && fchmod (fd, mode) < 0)
        goto error;
    if (fstat (fd, &sb) < 0)
        goto error;
    if (!trusted_owner (sb.st_uid) || (sb.st_mode & (S_IWGRP | S_IWOTH))) {
        errno = EPERM;
        goto error;
    }
    if (created)
        *created = made;
    return fd;
error:
    saved = errno;
    close (fd);
    errno = saved;
    return -1;
}

static int rmtree_at (int dfd, const char *name, int depth);

/* Remove everything in the folder fd. */
static int empty_dir (int fd, int depth)
{
    DIR *d;
    struct dirent *e;
    int dup_fd, rc = 0, saved = 0;

    if ((dup_fd = dup (fd)) < 0)
        return -1;
    if (!(d = fdopendir (dup_fd))) {
        saved = errno;
        close (dup_fd);
        errno = saved;
        return -1;
    }
    while ((e = readdir (d))) {
        if (!strcmp (e->d_name, ".") || !strcmp (e->d_name, ".."))
            continue;
        if (rmtree_at (fd, e->d_name, depth + 1) < 0 && !saved) {
            saved = errno;
            rc = -1;
        }
    }
    closedir (d);
    errno = saved;
    return rc;
}

static int rmtree_at (int dfd, const char *name, int depth)
{
    struct stat sb;
    int fd, rc, saved;

    if (depth > SAFEDIR_DEPTH) {
        errno = ELOOP;
        return -1;
    }
    if (fstatat (dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR (sb.st_mode)) {
        if (unlinkat (dfd, name, 0) == 0 || errno == ENOENT)
            return 0;
        if (errno != EISDIR)
            return -1;
        /* Swapped for a folder since the fstatat: remove that. */
    }
    if ((fd = safedir_openat (dfd, name)) < 0) {
        if (errno == ENOENT)
            return 0;
        if (errno != ELOOP && errno != ENOTDIR)
            return -1;
        /* Swapped for a link or a file: remove the name, not its target. */
        return unlinkat (dfd, name, 0) == 0 || errno == ENOENT ? 0 : -1;
    }
    rc = empty_dir (fd, depth);
    saved = errno;
    close (fd);
    if (rc < 0) {
        errno = saved;
        return -1;
    }
    if (unlinkat (dfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return 0;
    return -1;
}

int safedir_rmtreeat (int dfd, const char *name)
{
    /* Nothing may name the folder itself or climb out of it. */
    if (!name || !*name || strchr (name, '/') || !strcmp (name, ".") || !strcmp (name, "..")) {
        errno = EINVAL;
        return -1;
    }
    return rmtree_at (dfd, name, 0);
}

int safedir_rmtree (const char *path, char *err, size_t len)
{
    char parent[PATH_MAX];
    const char *name;
    char *slash;
    int dfd, rc, saved;

    if (!path || path[0] != '/' || strlen (path) >= sizeof (parent))
        return errnprintf (err, len, EINVAL, "%s: not an absolute path", path ? path : "(null)");
    strcpy (parent, path);
    while ((slash = strrchr (parent, '/')) && slash != parent && !slash[1])
        *slash = '\0'; /* trailing slashes */
    slash = strrchr (parent, '/');
    name = path + (slash - parent) + 1;
    if (slash == parent)
        parent[1] = '\0';
    else
        *slash = '\0';
    {
        char base[NAME_MAX + 1];
        size_t n = strcspn (name, "/");
        if (n == 0 || n > NAME_MAX)
            return errnprintf (err, len, EINVAL, "%s: no folder to remove", path);
        memcpy (base, name, n);
        base[n] = '\0';
        if ((dfd = walk (parent, 0, 0, 1, err, len)) < 0)
            return errno == ENOENT ? 0 : -1;
        rc = safedir_rmtreeat (dfd, base);
        saved = errno;
        close (dfd);
        if (rc < 0)
            return errnprintf (err, len, saved, "cannot remove %s: %s", path, strerror (saved));
    }
    return 0;
}
