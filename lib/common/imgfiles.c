/* imgfiles.c - see imgfiles.h.
 *
 * files.img is CRIU's: two magic words (the common one, then FILES_MAGIC),
 * then one record per open file, a 32-bit length and a FileEntry in
 * protocol buffers (images/fdinfo.proto): type (1, REG = 1) and reg (3),
 * a RegFileEntry (images/regfile.proto): flags (2), name (6, the path
 * from the mount namespace's root), size (8, set by every CRIU >= 3.15),
 * ext (9, an external file: handed in, never opened by path).  Only those
 * fields are read; the image is the user's, so every length is checked.
 * Beside it, IMGFILES_RECORD (ours) has the sizes CRIU leaves out.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "errbuf.h"
#include "imgfiles.h"

#define IMG_COMMON_MAGIC 0x54564319u
#define IMG_FILES_MAGIC 0x56303138u
#define IMG_FILES_MAX (64u << 20)
#define FD_TYPE_REG 1

struct pb {
    const uint8_t *p, *end;
};

static int pb_varint (struct pb *b, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end)
            return -1;
        uint8_t c = *b->p++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return 0;
    }
    return -1;
}

/* The next field: its number, and its value (varint) or bytes (length
 * delimited); fixed-size fields are skipped over.  1, 0 at the end, -1
 * malformed. */
static int pb_next (struct pb *b, uint32_t *num, uint64_t *v, struct pb *sub)
{
    uint64_t key, len;

    if (b->p >= b->end)
        return 0;
    if (pb_varint (b, &key) < 0)
        return -1;
    *num = (uint32_t)(key >> 3);
    *v = 0;
    sub->p = sub->end = NULL;
    switch (key & 7) {
    case 0:
        return pb_varint (b, v) < 0 ? -1 : 1;
    case 1:
        if (b->end - b->p < 8)
            return -1;
        b->p += 8;
        return 1;
    case 2:
        if (pb_varint (b, &len) < 0 || len > (uint64_t)(b->end - b->p))
            return -1;
        sub->p = b->p;
        sub->end = b->p + len;
        b->p += len;
        return 1;
    case 5:
        if (b->end - b->p < 4)
            return -1;
        b->p += 4;
        return 1;
    }
    return -1;
}

struct regfile {
    uint64_t flags, size;
    int has_size, ext;
    char name[4096];
};

static int reg_parse (struct pb b, struct regfile *r)
{
    struct pb sub;
    uint32_t num;
    uint64_t v;
    int rc;

    memset (r, 0, sizeof (*r));
    while ((rc = pb_next (&b, &num, &v, &sub)) == 1) {
        if (num == 2)
            r->flags = v;
        else if (num == 8) {
            r->size = v;
            r->has_size = 1;
        } else if (num == 9)
            r->ext = v != 0;
        else if (num == 6) {
            size_t n = sub.end - sub.p;
            if (!sub.p || n == 0 || n >= sizeof (r->name) || memchr (sub.p, '\0', n))
                return -1;
            memcpy (r->name, sub.p, n);
            r->name[n] = '\0';
        }
    }
    return rc;
}

static int read_all (const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
    struct stat sb;
    ssize_t n;
    int fd;

    *buf = NULL;
    if ((fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
        if (errno == ENOENT) {
            *len = 0;
            return 0; /* no open file at all */
        }
        return errprintf (err, errlen, "cannot open %s: %s", path, strerror (errno));
    }
    if (fstat (fd, &sb) < 0 || !S_ISREG (sb.st_mode) || sb.st_size > IMG_FILES_MAX
        || !(*buf = malloc (sb.st_size > 0 ? sb.st_size : 1))) {
        errnprintf (err, errlen, EINVAL, "%s is not an image of at most %u bytes", path,
                    IMG_FILES_MAX);
        close (fd);
        return -1;
    }
    n = read (fd, *buf, sb.st_size);
    close (fd);
    if (n != sb.st_size) {
        free (*buf);
        *buf = NULL;
        return errnprintf (err, errlen, EIO, "cannot read %s", path);
    }
    *len = (size_t)n;
    return 0;
}

/* ---- at the dump: the sizes CRIU does not record -------------------- */

/* fd's open flags, from /proc/PID/fdinfo/FD; -1 unknown. */
static long fd_flags (const char *pid, const char *fd)
{
    char path[600], line[256];
    long flags = -1;
    FILE *f;

    snprintf (path, sizeof (path), "/proc/%s/fdinfo/%s", pid, fd);
    if (!(f = fopen (path, "re")))
        return -1;
    while (fgets (line, sizeof (line), f))
        if (sscanf (line, "flags: %lo", &flags) == 1)
            break;
    fclose (f);
    return flags;
}

static void record_pid (const char *pid, json_object *files)
{
    char path[600], target[4096];
    struct dirent *e;
    struct stat sb;
    ssize_t n;
    DIR *d;

    snprintf (path, sizeof (path), "/proc/%s/fd", pid);
    if (!(d = opendir (path)))
        return; /* gone, or not ours to look at */
    while ((e = readdir (d))) {
        long flags;
        if (e->d_name[0] == '.')
            continue;
        snprintf (path, sizeof (path), "/proc/%s/fd/%s", pid, e->d_name);
        if (stat (path, &sb) < 0 || !S_ISREG (sb.st_mode)
            || (n = readlink (path, target, sizeof (target) - 1)) <= 0)
            continue;
        target[n] = '\0';
        flags = fd_flags (pid, e->d_name);
        if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY || target[0] != '/')
            continue;
        json_object *o = json_object_new_object ();
        json_object_object_add (o, "path", json_object_new_string (target));
        json_object_object_add (o, "size", json_object_new_int64 ((int64_t)sb.st_size));
        json_object_array_add (files, o);
    }
    closedir (d);
}

/* pid is root or below it (its parents, read from /proc). */
static int in_tree (long pid, long root)
{
    for (int depth = 0; depth < 256 && pid > 1; depth++) {
        char path[64], line[256];
        long ppid = -1;
        FILE *f;

        if (pid == root)
            return 1;
        snprintf (path, sizeof (path), "/proc/%ld/status", pid);
        if (!(f = fopen (path, "re")))
            return 0;
        while (fgets (line, sizeof (line), f))
            if (sscanf (line, "PPid: %ld", &ppid) == 1)
                break;
        fclose (f);
        pid = ppid;
    }
    return pid == root;
}

int imgfiles_record (const char *dir, char *err, size_t errlen)
{
    const char *init = getenv ("CRTOOLS_INIT_PID");
    long top = init ? strtol (init, NULL, 10) : 0;
    char me[32], parent[32], path[4200];
    json_object *root = json_object_new_object (), *files = json_object_new_array ();
    struct dirent *e;
    const char *text;
    int fd, rc = -1;
    DIR *d;

    json_object_object_add (root, "files", files);
    snprintf (me, sizeof (me), "%ld", (long)getpid ());
    snprintf (parent, sizeof (parent), "%ld", (long)getppid ());
    if (!(d = opendir ("/proc"))) {
        errprintf (err, errlen, "cannot read /proc: %s", strerror (errno));
        goto out;
    }
    while ((e = readdir (d)))
        /* The dumped tree only: not CRIU (its own image files), nor us. */
        if (e->d_name[0] >= '1' && e->d_name[0] <= '9' && strcmp (e->d_name, me)
            && strcmp (e->d_name, parent) && (top <= 0 || in_tree (atol (e->d_name), top)))
            record_pid (e->d_name, files);
    closedir (d);
    snprintf (path, sizeof (path), "%s/%s", dir, IMGFILES_RECORD);
    text = json_object_to_json_string_ext (root, JSON_C_TO_STRING_PLAIN);
    if ((fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
        errprintf (err, errlen, "cannot create %s: %s", path, strerror (errno));
        goto out;
    }
    if (write (fd, text, strlen (text)) != (ssize_t)strlen (text)) {
        errnprintf (err, errlen, EIO, "cannot write %s", path);
        close (fd);
        goto out;
    }
    rc = close (fd) == 0 ? 0
                         : errprintf (err, errlen, "cannot write %s: %s", path, strerror (errno));
out:
    json_object_put (root);
    return rc;
}

int imgfiles_action (void)
{
    const char *action = getenv ("CRTOOLS_SCRIPT_ACTION"), *dir = getenv ("CRTOOLS_IMAGE_DIR");
    char err[1024];

    if (!action)
        return -1;
    if (strcmp (action, "post-dump") || !dir)
        return 0;
    if (imgfiles_record (dir, err, sizeof (err)) < 0)
        fprintf (stderr,
                 "Warning (ibcr): the sizes of the files open for writing are not "
                 "recorded (no rollback of them at a restore): %s\n",
                 err);
    return 0;
}

/* ---- at the restore ---------------------------------------------------- */

/* The size IMGFILES_RECORD gives path (json: the record); 0 when none. */
static int recorded_size (json_object *rec, const char *path, uint64_t *size)
{
    json_object *files, *o, *v;
    int found = 0;

    if (!rec || !json_object_object_get_ex (rec, "files", &files)
        || !json_object_is_type (files, json_type_array))
        return 0;
    for (size_t i = 0; i < json_object_array_length (files); i++) {
        o = json_object_array_get_idx (files, i);
        if (!json_object_object_get_ex (o, "path", &v) || !json_object_is_type (v, json_type_string)
            || strcmp (json_object_get_string (v), path)
            || !json_object_object_get_ex (o, "size", &v) || !json_object_is_type (v, json_type_int)
            || json_object_get_int64 (v) < 0)
            continue;
        /* Several fds on one file: all saw the same size. */
        if (!found || (uint64_t)json_object_get_int64 (v) > *size)
            *size = (uint64_t)json_object_get_int64 (v);
        found = 1;
    }
    return found;
}

/* One file: cut back to size when it grew. */
static int rollback_one (const struct regfile *r, char *note, size_t notelen, char *err,
                         size_t errlen)
{
    struct stat sb;
    int fd;

    /* Not a FIFO to block on, nor a terminal to take. */
    if ((fd = open (r->name, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        /* A file the user may not write (another user's, or a link to
         * one: CRIU records paths resolved, never a link) was not theirs
         * at the dump either: the image is forged.  Gone: CRIU says. */
        if (errno == EACCES || errno == EPERM || errno == ELOOP)
            return errnprintf (err, errlen, errno,
                               "%s, open for writing in the image, is not the task's user's to "
                               "write (%s): not cut back, and not restored",
                               r->name, strerror (errno));
        return 0;
    }
    if (fstat (fd, &sb) < 0 || !S_ISREG (sb.st_mode) || (uint64_t)sb.st_size == r->size) {
        close (fd);
        return 0;
    }
    if ((uint64_t)sb.st_size < r->size) {
        close (fd);
        return errnprintf (err, errlen, EINVAL,
                           "%s is shorter than at the dump (%jd bytes, "
                           "%" PRIu64 " then): it was cut or replaced since, and the restored "
                           "program would write after a hole",
                           r->name, (intmax_t)sb.st_size, r->size);
    }
    if (ftruncate (fd, (off_t)r->size) < 0) {
        errprintf (err, errlen, "cannot cut %s back to its %" PRIu64 " bytes of the dump: %s",
                   r->name, r->size, strerror (errno));
        close (fd);
        return -1;
    }
    close (fd);
    size_t used = strlen (note);
    snprintf (note + used, notelen - used, "%s%s from %jd to %" PRIu64 " bytes", used ? "; " : "",
              r->name, (intmax_t)sb.st_size, r->size);
    return 0;
}

int imgfiles_rollback (const char *dir, const char *const *skip, int nskip, char *note,
                       size_t notelen, char *err, size_t errlen)
{
    char path[4200];
    uint8_t *buf;
    size_t len;
    struct pb b;
    uint32_t magic[2];

    json_object *rec = NULL;

    if (notelen)
        note[0] = '\0';
    snprintf (path, sizeof (path), "%s/files.img", dir);
    if (read_all (path, &buf, &len, err, errlen) < 0)
        return -1;
    if (!buf)
        return 0;
    /* The user's too: read with the same care (a damaged one is none). */
    {
        char rpath[4200], why[256];
        uint8_t *rbuf;
        size_t rlen;
        snprintf (rpath, sizeof (rpath), "%s/%s", dir, IMGFILES_RECORD);
        if (read_all (rpath, &rbuf, &rlen, why, sizeof (why)) == 0 && rbuf) {
            json_tokener *tok = json_tokener_new ();
            if (tok) {
                rec = json_tokener_parse_ex (tok, (const char *)rbuf, (int)rlen);
                json_tokener_free (tok);
            }
            free (rbuf);
        }
    }
    if (len < sizeof (magic)) {
        free (buf);
        return errnprintf (err, errlen, EINVAL, "%s: not a CRIU image", path);
    }
    memcpy (magic, buf, sizeof (magic));
    if (magic[0] != IMG_COMMON_MAGIC || magic[1] != IMG_FILES_MAGIC) {
        free (buf);
        return errnprintf (err, errlen, EINVAL, "%s: not CRIU's files image", path);
    }
    b.p = buf + sizeof (magic);
    b.end = buf + len;
    while (b.p < b.end) {
        struct pb entry, sub, reg = { NULL, NULL };
        struct regfile r;
        uint32_t n, num;
        uint64_t v, type = 0;
        int rc;

        if (b.end - b.p < 4)
            goto bad;
        memcpy (&n, b.p, 4);
        b.p += 4;
        if (n > (size_t)(b.end - b.p))
            goto bad;
        entry.p = b.p;
        entry.end = b.p + n;
        b.p += n;
        while ((rc = pb_next (&entry, &num, &v, &sub)) == 1) {
            if (num == 1)
                type = v;
            else if (num == 3)
                reg = sub;
        }
        if (rc < 0)
            goto bad;
        if (type != FD_TYPE_REG || !reg.p)
            continue;
        if (reg_parse (reg, &r) < 0)
            goto bad;
        /* Written to, opened by path at the restore, its size known. */
        if ((r.flags & O_ACCMODE) == O_RDONLY || r.ext || r.name[0] != '/')
            continue;
        int skipped = 0;
        for (int k = 0; k < nskip; k++)
            skipped |= skip[k] && !strcmp (skip[k], r.name);
        if (skipped)
            continue;
        if (!r.has_size)
            r.has_size = recorded_size (rec, r.name, &r.size);
        if (!r.has_size)
            continue;
        if (rollback_one (&r, note, notelen, err, errlen) < 0) {
            free (buf);
            json_object_put (rec);
            return -1;
        }
    }
    free (buf);
    json_object_put (rec);
    return 0;
bad:
    free (buf);
    json_object_put (rec);
    return errnprintf (err, errlen, EINVAL, "%s: a malformed record", path);
}
