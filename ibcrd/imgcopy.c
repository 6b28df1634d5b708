/* imgcopy.c - see imgcopy.h.  Plain reads and writes with a large buffer:
 * the storage may be any filesystem (NFS, Lustre, tmpfs), so nothing
 * clever that only some support (holes are looked for with SEEK_DATA,
 * which every filesystem answers, if only with "all data"). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errbuf.h"
#include "common/safedir.h"
#include "common/zimg.h"
#include "imgcopy.h"

#define COPY_BUF (4 * 1024 * 1024)

static int copy_file (int sdir, int ddir, const char *name, char *buf, int compress,
                      uint64_t *bytes, imgcopy_progress_f cb, void *arg)
{
    char zname[300];
    int in, out, saved;
    struct stat isb;

    snprintf (zname, sizeof (zname), "%s%s", name, compress ? ".zst" : "");
    /* The task folder is the job user's (their criu wrote it): a file
     * swapped for a FIFO or a device must not block or be read. */
    if ((in = openat (sdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0)
        return -1;
    if (fstat (in, &isb) < 0 || !S_ISREG (isb.st_mode)) {
        close (in);
        errno = EINVAL;
        return -1;
    }
    /* A file with another name too: a hard link made in the user's
     * folder, maybe to a file of someone else's (where the kernel lets
     * it: fs.protected_hardlinks=0).  CRIU makes each image once. */
    if (isb.st_nlink != 1) {
        close (in);
        errno = EMLINK;
        return -1;
    }
    if ((out = openat (ddir, zname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600))
        < 0) {
        saved = errno;
        close (in);
        errno = saved;
        return -1;
    }
    if (compress) {
        uint64_t written;
        /* No more than the file had when opened (see below). */
        if (zimg_compress_fd (in, out, (uint64_t)isb.st_size, &written) < 0)
            goto error;
        *bytes += written;
        if (cb) {
            struct stat sb;
            if (fstat (in, &sb) == 0)
                cb (arg, (uint64_t)sb.st_size);
        }
        goto sync;
    }
    /* The bytes the file had when opened, no more: its folder is the
     * user's, who could grow it while root copies, without end.  Holes
     * stay holes (SEEK_DATA; a filesystem without it gives the whole file
     * as data): a sparse file planted there costs its user nothing, and
     * must not cost the storage its full size. */
    off_t end = isb.st_size;
    for (off_t pos = 0; pos < end;) {
        off_t data = lseek (in, pos, SEEK_DATA), hole;
        if (data < 0 && errno == ENXIO)
            data = end; /* only a hole is left */
        else if (data < 0 && errno == EINVAL)
            data = pos; /* not told: all data */
        else if (data < 0)
            goto error;
        if (data > end)
            data = end;
        hole = data < end ? lseek (in, data, SEEK_HOLE) : end;
        if (hole < 0 && errno == EINVAL)
            hole = end;
        else if (hole < 0)
            goto error;
        if (hole > end)
            hole = end;
        if (cb && data > pos)
            cb (arg, (uint64_t)(data - pos));
        for (pos = data; pos < hole;) {
            size_t want = hole - pos < COPY_BUF ? (size_t)(hole - pos) : COPY_BUF;
            ssize_t n = pread (in, buf, want, pos), off = 0;
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                goto error;
            if (n == 0) { /* shrunk since: copy what there is */
                end = pos;
                break;
            }
            if (cb)
                cb (arg, (uint64_t)n);
            while (off < n) {
                ssize_t w = pwrite (out, buf + off, n - off, pos + off);
                if (w < 0 && errno == EINTR)
                    continue;
                if (w <= 0) {
                    if (w == 0)
                        errno = ENOSPC;
                    goto error;
                }
                off += w;
            }
            *bytes += n;
            pos += n;
        }
        if (pos < hole) /* shrunk */
            break;
        pos = hole;
    }
    /* The size, with a hole at the end if the file has one. */
    if (ftruncate (out, end) < 0)
        goto error;
sync:
    if (fsync (out) < 0 || close (out) < 0) {
        out = -1;
        goto error;
    }
    close (in);
    return 0;
error:
    saved = errno;
    close (in);
    if (out >= 0)
        close (out);
    errno = saved;
    return -1;
}

uint64_t imgcopy_dir_size (const char *dir)
{
    DIR *d = opendir (dir);
    struct dirent *e;
    uint64_t n = 0;

    if (!d)
        return 0;
    while ((e = readdir (d))) {
        struct stat sb;
        if (fstatat (dirfd (d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG (sb.st_mode))
            n += (uint64_t)sb.st_size;
    }
    closedir (d);
    return n;
}

/* The folder of path's last component, opened through trusted folders
 * (safedir.h), and that last component in *name. */
static int parent_open (const char *path, char *parent, size_t plen, const char **name, char *err,
                        size_t len)
{
    const char *slash = strrchr (path, '/');

    if (!slash || slash == path || !slash[1] || (size_t)(slash - path) >= plen)
        return errnprintf (err, len, EINVAL, "%s: not an absolute path to a folder", path);
    memcpy (parent, path, slash - path);
    parent[slash - path] = '\0';
    *name = slash + 1;
    return safedir_open (parent, err, len);
}

int imgcopy_dirat (int sdir, int ddir, const char *src, const char *dst, int compress,
                   uint64_t *bytes, char *err, size_t len, imgcopy_progress_f cb, void *arg)
{
    int saved, fd = -1;
    char *buf = NULL;
    DIR *d = NULL;
    struct dirent *e;

    *bytes = 0;
    /* Its own fd for the listing: readdir must start at the beginning. */
    if ((fd = openat (sdir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || !(d = fdopendir (fd))
        || !(buf = malloc (COPY_BUF))) {
        saved = errno ? errno : ENOMEM;
        if (fd >= 0 && !d)
            close (fd);
        snprintf (err, len, "cannot read %s: %s", src, strerror (saved));
        goto out;
    }
    while ((e = readdir (d))) {
        struct stat sb;
        if (fstatat (sdir, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG (sb.st_mode))
            continue;
        if (copy_file (sdir, ddir, e->d_name, buf, compress, bytes, cb, arg) < 0) {
            saved = errno;
            snprintf (
                err, len, "cannot copy %s/%s to %s: %s%s", src, e->d_name, dst, strerror (saved),
                saved == ENOSPC || saved == EDQUOT
                    ? " (the checkpoint storage is full: free space or lower retention)"
                    : saved == EMLINK ? " (the file has other names, hard links made in the dump "
                                        "folder after CRIU wrote it: not an image of this dump)"
                                      : "");
            goto out;
        }
    }
    if (fsync (ddir) < 0) {
        saved = errno;
        snprintf (err, len, "cannot sync %s: %s", dst, strerror (saved));
        goto out;
    }
    saved = 0;
out:
    if (d)
        closedir (d);
    free (buf);
    errno = saved;
    return saved ? -1 : 0;
}

int imgcopy_dir (const char *src, const char *dst, int compress, uint64_t *bytes, char *err,
                 size_t len, imgcopy_progress_f cb, void *arg)
{
    char parent[PATH_MAX], why[1024];
    const char *name;
    int sdir = -1, pdir = -1, ddir = -1, rc = -1, saved;

    *bytes = 0;
    /* Staging and the generation are root's: opened through trusted
     * folders only, and the task folder below by fd, never followed. */
    /* The generation's staging is root's; the task folder in it belongs
     * to the job's user, whose criu wrote it: opened by fd, never
     * followed, and only regular files are read from it. */
    if ((pdir = parent_open (src, parent, sizeof (parent), &name, why, sizeof (why))) < 0
        || (sdir = openat (pdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        saved = errno;
        snprintf (err, len, "cannot open the images %s: %s", src,
                  pdir < 0 ? why : strerror (saved));
        goto out;
    }
    close (pdir);
    pdir = -1;
    if ((pdir = parent_open (dst, parent, sizeof (parent), &name, why, sizeof (why))) < 0
        || (ddir = safedir_mkdirat (pdir, name, 0700, NULL)) < 0) {
        saved = errno;
        snprintf (err, len, "cannot create %s: %s", dst, pdir < 0 ? why : strerror (saved));
        goto out;
    }
    rc = imgcopy_dirat (sdir, ddir, src, dst, compress, bytes, err, len, cb, arg);
    saved = errno;
out:
    if (sdir >= 0)
        close (sdir);
    if (pdir >= 0)
        close (pdir);
    if (ddir >= 0)
        close (ddir);
    errno = saved;
    return rc;
}
