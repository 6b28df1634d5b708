/* manifest.c - see manifest.h. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef HAVE_XXHASH
#error "image checksums need libxxhash (Debian: libxxhash-dev); re-run configure"
#endif
#include <xxhash.h>

#include "manifest.h"
#include "errbuf.h"

#define HASH_BUF (1024 * 1024)

int manifest_hash_file (int dirfd, const char *path, uint64_t *hash, uint64_t *size)
{
    XXH3_state_t *st = NULL;
    char *buf = NULL;
    uint64_t total = 0;
    int fd, saved;
    struct stat sb;

    if ((fd = openat (dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return -1;
    if (fstat (fd, &sb) < 0)
        goto error;
    if (!S_ISREG (sb.st_mode)) {
        errno = EINVAL;
        goto error;
    }
    if (!(buf = malloc (HASH_BUF)) || !(st = XXH3_createState ())) {
        errno = ENOMEM;
        goto error;
    }
    XXH3_64bits_reset (st);
    for (;;) {
        ssize_t n = read (fd, buf, HASH_BUF);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            goto error;
        }
        if (n == 0)
            break;
        XXH3_64bits_update (st, buf, n);
        total += n;
    }
    *hash = XXH3_64bits_digest (st);
    *size = total;
    XXH3_freeState (st);
    free (buf);
    close (fd);
    return 0;
error:
    saved = errno;
    if (st)
        XXH3_freeState (st);
    free (buf);
    close (fd);
    errno = saved;
    return -1;
}

static int is_manifest (const char *name)
{
    return !strncmp (name, MANIFEST_NAME, strlen (MANIFEST_NAME));
}

/* "criu restore" writes its statistics into the images folder it reads,
 * and has no option not to: a restart of a committed generation adds this
 * file, which is not part of the image and must not make it "damaged". */
static int is_restore_stats (const char *name)
{
    return !strcmp (name, "stats-restore");
}

/* Root's record that a restore found the generation damaged (and the
 * temporary name it is written under): not part of the image. */
static int is_damage_mark (const char *name)
{
    size_t n = strlen (MANIFEST_DAMAGE_NAME);
    return !strncmp (name, MANIFEST_DAMAGE_NAME, n) && (!name[n] || name[n] == '.');
}

/* Is a path of the generation (or a top-level folder name) part of what
 * the restore of one rank reads?  Its own task folder, and whatever is
 * outside every task folder; 'only' is that task folder's name (NULL: every
 * path is). */
static int in_scope (const char *path, const char *only)
{
    const char *slash;
    size_t n;

    if (!only)
        return 1;
    slash = strchr (path, '/');
    n = slash ? (size_t)(slash - path) : strlen (path);
    if (n == strlen (only) && !strncmp (path, only, n))
        return 1;
    return strncmp (path, "task-", 5) != 0;
}

static int cmp_path (const void *a, const void *b)
{
    json_object *const *x = a, *const *y = b;
    json_object *px, *py;
    json_object_object_get_ex (*x, "path", &px);
    json_object_object_get_ex (*y, "path", &py);
    return strcmp (json_object_get_string (px), json_object_get_string (py));
}

/* Depth-first walk of dir (relative path rel, "" at the top), hashing every
 * regular file into arr; 'only' (NULL: all): the top-level folders walked
 * are those in_scope of it. */
static int scan_dir (int dfd, const char *rel, json_object *arr, uint64_t *bytes, int hash,
                     const char *only, char *err, size_t len)
{
    DIR *d;
    struct dirent *e;
    int rc = 0;

    if (!(d = fdopendir (dfd))) {
        snprintf (err, len, "%s: %s", *rel ? rel : ".", strerror (errno));
        close (dfd);
        return -1;
    }
    while (rc == 0 && (e = readdir (d))) {
        char path[4096];
        struct stat sb;

        if (!strcmp (e->d_name, ".") || !strcmp (e->d_name, ".."))
            continue;
        if ((!*rel && (is_manifest (e->d_name) || is_damage_mark (e->d_name)))
            || is_restore_stats (e->d_name))
            continue;
        snprintf (path, sizeof (path), "%s%s%s", rel, *rel ? "/" : "", e->d_name);
        if (fstatat (dirfd (d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
            snprintf (err, len, "%s: %s", path, strerror (errno));
            rc = -1;
        } else if (S_ISDIR (sb.st_mode) && !*rel && !in_scope (e->d_name, only)) {
            continue; /* another rank's folder */
        } else if (S_ISDIR (sb.st_mode)) {
            int sub =
                openat (dirfd (d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                errprintf (err, len, "%s: %s", path, strerror (errno));
                rc = -1;
            } else
                rc = scan_dir (sub, path, arr, bytes, hash, NULL, err, len);
        } else if (S_ISREG (sb.st_mode)) {
            uint64_t h = 0, sz = sb.st_size;
            char hex[17];
            json_object *f;
            if (hash && manifest_hash_file (dirfd (d), e->d_name, &h, &sz) < 0) {
                errprintf (err, len, "%s: %s", path, strerror (errno));
                rc = -1;
                continue;
            }
            snprintf (hex, sizeof (hex), "%016" PRIx64, h);
            if (!(f = json_object_new_object ())) {
                errno = ENOMEM;
                rc = -1;
                continue;
            }
            json_object_object_add (f, "path", json_object_new_string (path));
            json_object_object_add (f, "size", json_object_new_int64 ((int64_t)sz));
            json_object_object_add (f, "xxh3", json_object_new_string (hex));
            json_object_array_add (arr, f);
            *bytes += sz;
        } else {
            rc = errnprintf (err, len, EINVAL,
                             "%s: not a regular file or folder (symbolic links and "
                             "devices are never part of an image)",
                             path);
        }
    }
    closedir (d);
    return rc;
}

/* Walk the folder dfd (not closed; gendir names it in messages). */
static json_object *scan_at (int dfd, const char *gendir, uint64_t *bytes, int hash,
                             const char *only, char *err, size_t len)
{
    json_object *arr = json_object_new_array ();
    int fd, saved;
    uint64_t total = 0;

    if (!arr) {
        errnprintf (err, len, ENOMEM, "out of memory");
        return NULL;
    }
    /* Reopened, not dup'ed: scan_dir reads the folder from its start. */
    if ((fd = openat (dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        saved = errno;
        json_object_put (arr);
        errnprintf (err, len, saved, "%s: %s", gendir, strerror (saved));
        return NULL;
    }
    if (scan_dir (fd, "", arr, &total, hash, only, err, len) < 0) {
        saved = errno;
        json_object_put (arr);
        errno = saved;
        return NULL;
    }
    json_object_array_sort (arr, cmp_path);
    if (bytes)
        *bytes = total;
    return arr;
}

static json_object *scan (const char *gendir, uint64_t *bytes, int hash, const char *only,
                          char *err, size_t len)
{
    json_object *arr;
    int dfd, saved;

    if ((dfd = open (gendir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        errprintf (err, len, "%s: %s", gendir, strerror (errno));
        return NULL;
    }
    arr = scan_at (dfd, gendir, bytes, hash, only, err, len);
    saved = errno;
    close (dfd);
    errno = saved;
    return arr;
}

json_object *manifest_scan (const char *gendir, uint64_t *bytes, char *err, size_t len)
{
    return scan (gendir, bytes, 1, NULL, err, len);
}

json_object *manifest_scan_at (int dfd, const char *gendir, uint64_t *bytes, char *err, size_t len)
{
    return scan_at (dfd, gendir, bytes, 1, NULL, err, len);
}

size_t manifest_max_bytes = MANIFEST_MAX_BYTES;

int manifest_tasks_missing_rank (json_object *tasks, int64_t size)
{
    unsigned char *seen;
    int missing = -1;

    if (size <= 0)
        return -1;
    if (size > INT32_MAX || !(seen = calloc ((size_t)size, 1)))
        return 0;
    /* Ranks are 0..size-1 when the job declared its size; a job that did
     * not (ibcr run --rank R alone) has its size from its task count, and
     * any ranks. */
    int64_t have = 0;
    if (json_object_is_type (tasks, json_type_array))
        for (size_t i = 0; i < json_object_array_length (tasks); i++) {
            json_object *r, *t = json_object_array_get_idx (tasks, i);
            if (!json_object_object_get_ex (t, "rank", &r)
                || !json_object_is_type (r, json_type_int))
                continue;
            int64_t k = json_object_get_int64 (r);
            if (k < 0 || k >= size)
                have++;
            else if (!seen[k]) {
                seen[k] = 1;
                have++;
            }
        }
    for (int64_t r = 0; r < size && missing < 0 && have < size; r++)
        if (!seen[r])
            missing = (int)r;
    free (seen);
    return missing;
}

int manifest_missing_rank (json_object *m)
{
    json_object *tasks = NULL, *v;
    int64_t size = -1;

    if (json_object_object_get_ex (m, "size", &v) && json_object_is_type (v, json_type_int))
        size = json_object_get_int64 (v);
    json_object_object_get_ex (m, "tasks", &tasks);
    return manifest_tasks_missing_rank (tasks, size);
}

int manifest_write_at (int dfd, const char *gendir, json_object *m, int uid, int gid, mode_t mode,
                       char *err, size_t len)
{
    const char *tmp = MANIFEST_NAME ".tmp", *s;
    int fd, saved;
    size_t n;

    s = json_object_to_json_string_ext (m, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED);
    if (!s) {
        errno = ENOMEM;
        goto error;
    }
    n = strlen (s);
    if (n + 1 > manifest_max_bytes) {
        json_object *f = NULL;
        json_object_object_get_ex (m, "files", &f);
        return errnprintf (err, len, EFBIG,
                           "cannot write %s/%s: it would be %zu bytes (%zu files), over the "
                           "limit of %zu that every reader keeps to: not committed",
                           gendir, MANIFEST_NAME, n + 1,
                           f ? json_object_array_length (f) : (size_t)0, manifest_max_bytes);
    }
    /* O_EXCL|O_NOFOLLOW: a name left there is removed, never written
     * through. */
    if ((fd = openat (dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0
        && errno == EEXIST && unlinkat (dfd, tmp, 0) == 0)
        fd = openat (dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        goto error;
    errno = 0;
    if (write (fd, s, n) != (ssize_t)n || write (fd, "\n", 1) != 1
        || (uid >= 0 && fchown (fd, uid, gid) < 0) || fchmod (fd, mode) < 0 || fsync (fd) < 0) {
        saved = errno;
        close (fd);
        unlinkat (dfd, tmp, 0);
        errno = saved ? saved : EIO;
        goto error;
    }
    if (close (fd) < 0 || renameat (dfd, tmp, dfd, MANIFEST_NAME) < 0) {
        saved = errno;
        unlinkat (dfd, tmp, 0);
        errno = saved;
        goto error;
    }
    /* The rename is what commits: make it durable before reporting it. */
    if (fsync (dfd) < 0)
        goto error;
    return 0;
error:
    return errprintf (err, len, "cannot write %s/%s: %s", gendir, MANIFEST_NAME, strerror (errno));
}

int manifest_write (const char *gendir, json_object *m, int uid, int gid, char *err, size_t len)
{
    int dfd, rc, saved;

    if ((dfd = open (gendir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        return errprintf (err, len, "cannot write %s/%s: %s", gendir, MANIFEST_NAME,
                          strerror (errno));
    }
    rc = manifest_write_at (dfd, gendir, m, uid, gid, 0600, err, len);
    saved = errno;
    close (dfd);
    errno = saved;
    return rc;
}

json_object *manifest_read_at (int dfd, const char *gendir, struct stat *stp, char *err, size_t len)
{
    char path[4096];
    struct stat sb;
    json_object *m, *v;
    char *buf;
    int fd;
    ssize_t n;

    snprintf (path, sizeof (path), "%s/%s", gendir, MANIFEST_NAME);
    if ((fd = openat (dfd, MANIFEST_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        errprintf (err, len, "%s: %s", path, strerror (errno));
        return NULL;
    }
    /* errno tells a reader (store_list, prune) a manifest that is bad
     * (EBADMSG) from one that could not be read just now (the system
     * call's errno, ENOMEM). */
    if (fstat (fd, &sb) < 0) {
        int saved = errno;
        close (fd);
        errnprintf (err, len, saved, "%s: %s", path, strerror (saved));
        return NULL;
    }
    if (!S_ISREG (sb.st_mode)) {
        close (fd);
        errnprintf (err, len, EBADMSG, "%s: not a readable manifest", path);
        return NULL;
    }
    if ((uint64_t)sb.st_size > manifest_max_bytes) {
        close (fd);
        errnprintf (err, len, EBADMSG, "%s: not a readable manifest (%lld bytes; the limit is %zu)",
                    path, (long long)sb.st_size, manifest_max_bytes);
        return NULL;
    }
    if (!(buf = malloc (sb.st_size + 1))) {
        close (fd);
        errnprintf (err, len, ENOMEM, "%s: out of memory for its %lld bytes", path,
                    (long long)sb.st_size);
        return NULL;
    }
    if (stp)
        *stp = sb;
    n = read (fd, buf, sb.st_size);
    int rerr = n < 0 ? errno : 0;
    close (fd);
    if (n != sb.st_size) {
        free (buf);
        if (rerr)
            errnprintf (err, len, rerr, "%s: %s", path, strerror (rerr));
        else
            errnprintf (err, len, EBADMSG, "%s: short read", path);
        return NULL;
    }
    buf[n] = '\0';
    m = json_tokener_parse (buf);
    free (buf);
    if (!m || !json_object_is_type (m, json_type_object)
        || !json_object_object_get_ex (m, "format", &v)
        || json_object_get_int (v) != MANIFEST_FORMAT || !json_object_object_get_ex (m, "job", &v)
        || !json_object_is_type (v, json_type_string)
        || !json_object_object_get_ex (m, "generation", &v)
        || !json_object_is_type (v, json_type_int) || !json_object_object_get_ex (m, "files", &v)
        || !json_object_is_type (v, json_type_array)) {
        json_object_put (m);
        errnprintf (err, len, EBADMSG, "%s: not a valid ibcr manifest (format %d)", path,
                    MANIFEST_FORMAT);
        return NULL;
    }
    return m;
}

json_object *manifest_read (const char *gendir, char *err, size_t len)
{
    json_object *m;
    int dfd, saved;

    if ((dfd = open (gendir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        errprintf (err, len, "%s/%s: %s", gendir, MANIFEST_NAME, strerror (errno));
        return NULL;
    }
    m = manifest_read_at (dfd, gendir, NULL, err, len);
    saved = errno;
    close (dfd);
    errno = saved;
    return m;
}

static int add_problem (json_object *problems, const char *path, const char *what)
{
    if (problems) {
        json_object *p = json_object_new_object ();
        json_object_object_add (p, "path", json_object_new_string (path));
        json_object_object_add (p, "problem", json_object_new_string (what));
        json_object_array_add (problems, p);
    }
    return 1;
}

/* Does a failure to open or read a file (errno e) show the generation
 * damaged (missing, or a link, folder or device where a file was), not a
 * moment's trouble (I/O, memory, a network filesystem)? */
static int definitive (int e)
{
    return e == ENOENT || e == EINVAL || e == ELOOP || e == ENOTDIR || e == EISDIR;
}

/* manifest_verify of the paths in_scope of 'only'. */
static int verify (const char *gendir, json_object *m, const char *only, json_object *problems,
                   uint64_t *bytes_checked, int *transient)
{
    json_object *files, *now, *listed;
    char err[512];
    int nprob = 0, dfd;
    uint64_t total = 0;

    if (transient)
        *transient = 0;
    if (!json_object_object_get_ex (m, "files", &files)
        || !json_object_is_type (files, json_type_array)) {
        errno = EBADMSG;
        return -1;
    }
    /* The listed paths by name: a generation of many ranks lists many
     * files, and each file found is looked up. */
    if (!(listed = json_object_new_object ())) {
        errno = ENOMEM;
        return -1;
    }
    if ((dfd = open (gendir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        int saved = errno;
        json_object_put (listed);
        errno = saved;
        return -1;
    }
    for (size_t i = 0; i < json_object_array_length (files); i++) {
        json_object *f = json_object_array_get_idx (files, i), *v;
        const char *path, *want;
        uint64_t h, sz;
        char hex[17], what[128];

        if (!json_object_object_get_ex (f, "path", &v) || !(path = json_object_get_string (v))
            || strstr (path, "..") || path[0] == '/') {
            nprob += add_problem (problems, "?", "manifest entry without a safe path");
            continue;
        }
        if (json_object_object_add (listed, path, NULL) != 0) {
            if (transient) /* says nothing of the generation */
                *transient = 1;
            nprob += add_problem (problems, path, "out of memory");
            continue;
        }
        if (!in_scope (path, only))
            continue;
        json_object_object_get_ex (f, "xxh3", &v);
        want = v ? json_object_get_string (v) : "";
        if (manifest_hash_file (dfd, path, &h, &sz) < 0) {
            int e = errno;
            snprintf (what, sizeof (what), "%s",
                      e == ENOENT       ? "missing"
                          : e == EINVAL ? "not a regular file"
                                        : strerror (e));
            if (!definitive (e) && transient)
                *transient = 1; /* a read that failed says nothing of the bytes */
            nprob += add_problem (problems, path, what);
            continue;
        }
        total += sz;
        snprintf (hex, sizeof (hex), "%016" PRIx64, h);
        json_object_object_get_ex (f, "size", &v);
        if (!v || (uint64_t)json_object_get_int64 (v) != sz) {
            snprintf (what, sizeof (what), "size %" PRIu64 ", manifest says %lld", sz,
                      v ? (long long)json_object_get_int64 (v) : -1LL);
            nprob += add_problem (problems, path, what);
        } else if (strcmp (hex, want))
            nprob += add_problem (problems, path, "checksum mismatch");
    }
    close (dfd);
    /* Files nobody listed: something wrote into a committed generation. */
    if ((now = scan (gendir, NULL, 0, only, err, sizeof (err)))) {
        for (size_t i = 0; i < json_object_array_length (now); i++) {
            json_object *f = json_object_array_get_idx (now, i), *v;
            const char *p;
            json_object_object_get_ex (f, "path", &v);
            if (!(p = json_object_get_string (v))) {
                if (transient)
                    *transient = 1;
                nprob += add_problem (problems, "?", "out of memory");
            } else if (!json_object_object_get_ex (listed, p, NULL))
                nprob += add_problem (problems, p, "not in manifest");
        }
        json_object_put (now);
    } else {
        /* Something that is no file or folder (a link, a device) is
         * damage; a folder that could not be read may not be. */
        int e = errno;
        if (!definitive (e) && transient)
            *transient = 1;
        nprob += add_problem (problems, "?", err);
    }
    json_object_put (listed);
    if (bytes_checked)
        *bytes_checked = total;
    return nprob;
}

int manifest_verify (const char *gendir, json_object *m, json_object *problems,
                     uint64_t *bytes_checked)
{
    return verify (gendir, m, NULL, problems, bytes_checked, NULL);
}

int manifest_verify_rank (const char *gendir, json_object *m, uint32_t rank, json_object *problems,
                          uint64_t *bytes_checked, int *transient)
{
    char only[32];

    snprintf (only, sizeof (only), "task-%u", rank);
    return verify (gendir, m, only, problems, bytes_checked, transient);
}
