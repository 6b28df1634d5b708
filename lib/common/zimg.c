/* zimg.c - see zimg.h.  Streaming zstd with 4 MiB buffers: images may be
 * many GiB and must never be held in memory whole. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef HAVE_ZSTD
#include <zstd.h>
#endif

#include "zimg.h"

#define ZBUF (4 * 1024 * 1024)

/* How long name's stem is when it ends in ".zst" (a compressed image file),
 * else 0. */
static size_t zst_stem (const char *name)
{
    size_t n = strlen (name);

    return n > 4 && !strcmp (name + n - 4, ".zst") ? n - 4 : 0;
}

int zimg_dir_compressed (const char *dir)
{
    DIR *d = opendir (dir);
    struct dirent *e;
    int found = 0;

    if (!d)
        return 0;
    while (!found && (e = readdir (d)))
        found = zst_stem (e->d_name) > 0;
    closedir (d);
    return found;
}

/* read() that carries on when a signal interrupted it. */
static ssize_t read_retry (int fd, void *buf, size_t len)
{
    ssize_t n;

    while ((n = read (fd, buf, len)) < 0 && errno == EINTR)
        continue;
    return n;
}

static int write_all (int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len) {
        ssize_t w = write (fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return -1;
        }
        p += w;
        len -= w;
    }
    return 0;
}

#ifdef HAVE_ZSTD
int zimg_available (void)
{
    return 1;
}

int zimg_compress_fd (int in, int out, uint64_t max, uint64_t *written)
{
    ZSTD_CCtx *cx = ZSTD_createCCtx ();
    char *ib = malloc (ZBUF), *ob = malloc (ZBUF);
    int rc = -1, saved = ENOMEM;

    *written = 0;
    if (!cx || !ib || !ob)
        goto out;
    ZSTD_CCtx_setParameter (cx, ZSTD_c_compressionLevel, 1);
    for (;;) {
        ssize_t n = max ? read_retry (in, ib, max < ZBUF ? (size_t)max : ZBUF) : 0;
        if (n > 0)
            max -= (uint64_t)n;
        if (n < 0) {
            saved = errno;
            goto out;
        }
        ZSTD_EndDirective mode = n == 0 ? ZSTD_e_end : ZSTD_e_continue;
        ZSTD_inBuffer zi = { ib, (size_t)n, 0 };
        size_t left;
        do {
            ZSTD_outBuffer zo = { ob, ZBUF, 0 };
            left = ZSTD_compressStream2 (cx, &zo, &zi, mode);
            if (ZSTD_isError (left)) {
                saved = EIO;
                goto out;
            }
            if (write_all (out, ob, zo.pos) < 0) {
                saved = errno;
                goto out;
            }
            *written += zo.pos;
        } while (mode == ZSTD_e_end ? left != 0 : zi.pos < zi.size);
        if (n == 0)
            break;
    }
    rc = 0;
out:
    ZSTD_freeCCtx (cx);
    free (ib);
    free (ob);
    if (rc < 0)
        errno = saved;
    return rc;
}

static int decompress_fd (int in, int out)
{
    ZSTD_DCtx *dx = ZSTD_createDCtx ();
    char *ib = malloc (ZBUF), *ob = malloc (ZBUF);
    int rc = -1, saved = ENOMEM;
    size_t last = 0;

    if (!dx || !ib || !ob)
        goto out;
    for (;;) {
        ssize_t n = read_retry (in, ib, ZBUF);
        if (n < 0) {
            saved = errno;
            goto out;
        }
        if (n == 0)
            break;
        ZSTD_inBuffer zi = { ib, (size_t)n, 0 };
        while (zi.pos < zi.size) {
            ZSTD_outBuffer zo = { ob, ZBUF, 0 };
            last = ZSTD_decompressStream (dx, &zo, &zi);
            if (ZSTD_isError (last)) {
                saved = EBADMSG;
                goto out;
            }
            if (write_all (out, ob, zo.pos) < 0) {
                saved = errno;
                goto out;
            }
        }
    }
    if (last != 0) { /* the frame was cut short */
        saved = EBADMSG;
        goto out;
    }
    rc = 0;
out:
    ZSTD_freeDCtx (dx);
    free (ib);
    free (ob);
    if (rc < 0)
        errno = saved;
    return rc;
}
#else
int zimg_available (void)
{
    return 0;
}

int zimg_compress_fd (int in, int out, uint64_t max, uint64_t *written)
{
    (void)in;
    (void)out;
    (void)max;
    *written = 0;
    errno = ENOTSUP;
    return -1;
}

static int decompress_fd (int in, int out)
{
    (void)in;
    (void)out;
    errno = ENOTSUP;
    return -1;
}
#endif

static int copy_fd (int in, int out)
{
    char *buf = malloc (ZBUF);
    ssize_t n;
    int saved;

    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    while ((n = read_retry (in, buf, ZBUF)) > 0 && write_all (out, buf, (size_t)n) == 0)
        continue;
    saved = errno;
    free (buf);
    errno = saved;
    return n == 0 ? 0 : -1; /* n > 0: the write failed */
}

int zimg_decompress_dir (const char *src, const char *dst, char *err, size_t len)
{
    DIR *d = opendir (src);
    struct dirent *e;
    int sfd = -1, dfd = -1, saved = 0;

    if (!d || mkdir (dst, 0700) < 0 || (sfd = dirfd (d)) < 0
        || (dfd = open (dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        saved = errno;
        snprintf (err, len, "cannot prepare %s from %s: %s", dst, src, strerror (saved));
        goto out;
    }
    while ((e = readdir (d))) {
        char name[256];
        size_t stem = zst_stem (e->d_name);
        int z = stem > 0, in, out, rc;
        struct stat sb;

        if (fstatat (sfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG (sb.st_mode))
            continue;
        snprintf (name, sizeof (name), "%.*s", (int)(z ? stem : strlen (e->d_name)), e->d_name);
        if ((in = openat (sfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
            saved = errno;
            snprintf (err, len, "cannot read %s/%s: %s", src, e->d_name, strerror (saved));
            goto out;
        }
        if ((out = openat (dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
            saved = errno;
            close (in);
            snprintf (err, len, "cannot write %s/%s: %s", dst, name, strerror (saved));
            goto out;
        }
        rc = z ? decompress_fd (in, out) : copy_fd (in, out);
        saved = errno;
        close (in);
        close (out);
        if (rc < 0) {
            snprintf (err, len, "cannot %s %s/%s: %s%s", z ? "decompress" : "copy", src, e->d_name,
                      strerror (saved),
                      saved == ENOTSUP ? " (this ibcr was "
                                         "built without libzstd: install libzstd-dev and rebuild)"
                                       : "");
            goto out;
        }
        saved = 0;
    }
out:
    if (d)
        closedir (d);
    if (dfd >= 0)
        close (dfd);
    errno = saved;
    return saved ? -1 : 0;
}
