/* store.c - see store.h.  Everything below <root>/<cluster> is reached
 * through directory fds with O_NOFOLLOW: no path walk, no link followed,
 * no chown, chmod or removal by name; and what root believes (generation
 * folders, manifests, .last-gen) is checked to be root's through the fd
 * it is read from. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ident.h"
#include "manifest.h"
#include "safedir.h"
#include "store.h"
#include "errbuf.h"

int store_job_path (const struct store *st, const char *job, char *buf, size_t len)
{
    if (!ident_ok (job) || !ident_ok (st->cluster) || !st->root || st->root[0] != '/') {
        errno = EINVAL;
        return -1;
    }
    if ((size_t)snprintf (buf, len, "%s/%s/%s", st->root, st->cluster, job) >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int store_gen_path (const struct store *st, const char *job, int gen, char *buf, size_t len)
{
    char jp[4096];

    if (store_job_path (st, job, jp, sizeof (jp)) < 0)
        return -1;
    if ((size_t)snprintf (buf, len, "%s/gen-%d", jp, gen) >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

/* Parse "gen-N" (N > 0, no leading zeros); -1 if the name is something else. */
static int gen_number (const char *name)
{
    char *end;
    long n;

    if (strncmp (name, "gen-", 4) || name[4] < '1' || name[4] > '9')
        return -1;
    n = strtol (name + 4, &end, 10);
    return *end || n > 100000000 ? -1 : (int)n;
}

static int cmp_int (const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* Sorted generation numbers found in the job folder jfd (any state). */
static int scan_gens (int jfd, int **out, int *n)
{
    DIR *d;
    struct dirent *e;
    int *v = NULL, cnt = 0, cap = 0, fd;

    if ((fd = openat (jfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return -1;
    if (!(d = fdopendir (fd))) {
        int saved = errno;
        close (fd);
        errno = saved;
        return -1;
    }
    while ((e = readdir (d))) {
        int g = gen_number (e->d_name);
        if (g < 0)
            continue;
        if (cnt == cap) {
            int *nv = realloc (v, (cap = cap ? cap * 2 : 16) * sizeof (int));
            if (!nv) {
                free (v);
                closedir (d);
                errno = ENOMEM;
                return -1;
            }
            v = nv;
        }
        v[cnt++] = g;
    }
    closedir (d);
    qsort (v, cnt, sizeof (int), cmp_int);
    *out = v;
    *n = cnt;
    return 0;
}

/* Written by us (root, or the uid this runs as) and changeable by nobody
 * else: what root may believe.  A link count above one would be a hard
 * link someone else made to our file. */
static int ours (const struct stat *sb)
{
    return (sb->st_uid == 0 || sb->st_uid == geteuid ()) && !(sb->st_mode & (S_IWGRP | S_IWOTH))
        && (S_ISDIR (sb->st_mode) || sb->st_nlink == 1);
}

/* Owner root (when we are root), group gid, mode exactly: by fd. */
static int give (int fd, gid_t gid, mode_t mode)
{
    if (geteuid () == 0 && fchown (fd, 0, gid) < 0)
        return -1;
    return fchmod (fd, mode);
}

/* <root>/<cluster>, every folder on the way trusted (safedir.h); with
 * create, made 0755 where missing.  Its fd, or -1 with errno and err. */
static int cluster_open (const struct store *st, int create, char *err, size_t len)
{
    char cl[4096];

    if (!ident_ok (st->cluster) || !st->root || st->root[0] != '/') {
        return errnprintf (err, len, EINVAL, "bad storage %s or cluster name %s",
                           st->root ? st->root : "(none)", st->cluster ? st->cluster : "(none)");
    }
    if ((size_t)snprintf (cl, sizeof (cl), "%s/%s", st->root, st->cluster) >= sizeof (cl)) {
        return errnprintf (err, len, ENAMETOOLONG, "storage path %s is too long", st->root);
    }
    if (create
        && (safedir_ensure (st->root, 0755, err, len) < 0
            || safedir_ensure (cl, 0755, err, len) < 0))
        return -1;
    return safedir_open (cl, err, len);
}

/* The job folder's fd, or -1 with errno. */
static int job_open (const struct store *st, const char *job, char *err, size_t len)
{
    int cfd, jfd, saved;

    if (!ident_ok (job)) {
        return errnprintf (err, len, EINVAL, "'%s' is not a valid job name", job);
    }
    if ((cfd = cluster_open (st, 0, err, len)) < 0)
        return -1;
    jfd = safedir_openat (cfd, job);
    saved = errno;
    close (cfd);
    errno = saved;
    return jfd;
}

/* The job folder's record of the highest generation number ever begun,
 * so that an aborted number is never given again: a slow node still
 * writing into an aborted generation must not land in a new one of the
 * same name, and logs never show one number for two generations. */
#define STORE_LAST_GEN ".last-gen"
/* The job folder's lock of prunes (store_prune). */
#define STORE_PRUNE_LOCK ".prune-lock"

/* The number recorded in the job folder jfd, or 0 (none, not a number,
 * or not a file of ours: the folder names then decide alone). */
static int last_gen_read (int jfd)
{
    char buf[32];
    struct stat sb;
    long v = 0;
    FILE *f;
    int fd;

    if ((fd = openat (jfd, STORE_LAST_GEN, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0)
        return 0;
    if (fstat (fd, &sb) < 0 || !S_ISREG (sb.st_mode) || !ours (&sb) || !(f = fdopen (fd, "r"))) {
        close (fd);
        return 0;
    }
    if (fgets (buf, sizeof (buf), f)) {
        char *end;
        v = strtol (buf, &end, 10);
        if (end == buf || (*end && *end != '\n') || v < 0 || v > 100000000)
            v = 0;
    }
    fclose (f);
    return (int)v;
}

/* Record gen as begun in jfd: written aside and renamed, so a crash
 * leaves the old number or the new one.  -1 with errno. */
static int last_gen_write (int jfd, int gen)
{
    char tmp[64];
    FILE *f;
    int fd, saved;

    snprintf (tmp, sizeof (tmp), STORE_LAST_GEN ".%ld", (long)getpid ());
    /* O_EXCL and O_NOFOLLOW: a name left there is removed, never written
     * through. */
    if ((fd = openat (jfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0
        && errno == EEXIST && unlinkat (jfd, tmp, 0) == 0)
        fd = openat (jfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    if (!(f = fdopen (fd, "w"))) {
        saved = errno;
        close (fd);
        unlinkat (jfd, tmp, 0);
        errno = saved;
        return -1;
    }
    if (fprintf (f, "%d\n", gen) < 0 || fflush (f) != 0 || fsync (fileno (f)) < 0) {
        saved = errno;
        fclose (f);
        unlinkat (jfd, tmp, 0);
        errno = saved;
        return -1;
    }
    if (fclose (f) != 0 || renameat (jfd, tmp, jfd, STORE_LAST_GEN) < 0) {
        saved = errno;
        unlinkat (jfd, tmp, 0);
        errno = saved;
        return -1;
    }
    return 0;
}

/* The job folder in cfd, made or taken back: ours, group gid, 0750.  A
 * folder an older ibcr gave to the job's user is taken back through its
 * fd (it cannot be swapped: the cluster folder is ours), so that nobody
 * but root writes where root writes.  Its fd, or -1 with errno. */
static int job_folder (int cfd, const char *job, gid_t gid)
{
    int jfd, saved;

    if (mkdirat (cfd, job, 0750) < 0 && errno != EEXIST)
        return -1;
    if ((jfd = safedir_openat (cfd, job)) < 0)
        return -1;
    if (give (jfd, gid, 0750) < 0) {
        saved = errno;
        close (jfd);
        errno = saved;
        return -1;
    }
    return jfd;
}

int store_gen_begin (const struct store *st, const char *job, uid_t uid, gid_t gid, int *gen,
                     char *dir, size_t dirlen, char *err, size_t len)
{
    char jp[4096], name[32];
    int *gens = NULL, n = 0, next, last, saved, cfd = -1, jfd = -1, gfd = -1;

    (void)uid; /* the job's user reads through the group; root owns */
    if (store_job_path (st, job, jp, sizeof (jp)) < 0) {
        errprintf (err, len, "'%s' is not a valid job name", job);
        return -1;
    }
    if ((cfd = cluster_open (st, 1, err, len)) < 0)
        return -1;
    if ((jfd = job_folder (cfd, job, gid)) < 0) {
        saved = errno;
        errprintf (err, len, "cannot create job folder %s: %s", jp, strerror (saved));
        goto error;
    }
    if (scan_gens (jfd, &gens, &n) < 0) {
        saved = errno;
        errprintf (err, len, "cannot read %s: %s", jp, strerror (saved));
        goto error;
    }
    next = n ? gens[n - 1] + 1 : 1;
    free (gens);
    if ((last = last_gen_read (jfd)) >= next)
        next = last + 1;
    snprintf (name, sizeof (name), "gen-%d", next);
    if ((size_t)snprintf (dir, dirlen, "%s/%s", jp, name) >= dirlen) {
        saved = ENAMETOOLONG;
        errprintf (err, len, "path of %s/%s is too long", jp, name);
        goto error;
    }
    /* mkdirat, not an existing folder: one already there means a
     * concurrent begin took this number, and two generations must never
     * share one.  Root's and 0700 until its last write (commit). */
    if (mkdirat (jfd, name, 0700) < 0 || (gfd = safedir_openat (jfd, name)) < 0
        || give (gfd, 0, 0700) < 0) {
        saved = errno;
        errprintf (err, len, "cannot create %s: %s", dir, strerror (saved));
        goto error;
    }
    if (last_gen_write (jfd, next) < 0) {
        saved = errno;
        errprintf (err, len, "cannot record generation %d in %s/" STORE_LAST_GEN ": %s", next, jp,
                   strerror (saved));
        (void)safedir_rmtreeat (jfd, name);
        goto error;
    }
    close (gfd);
    close (jfd);
    close (cfd);
    *gen = next;
    return 0;
error:
    if (gfd >= 0)
        close (gfd);
    if (jfd >= 0)
        close (jfd);
    close (cfd);
    errno = saved;
    return -1;
}

/* Give everything in folder fd (rel names it) to root:gid, folders 0750
 * and files 0640, through fds; a link or a device fails the commit. */
static int own_tree (int fd, const char *rel, gid_t gid, int depth, char *err, size_t len)
{
    DIR *d;
    struct dirent *e;
    int dfd, rc = 0;

    if (depth > 16) {
        return errnprintf (err, len, ELOOP, "%s: folders nested too deep for an image", rel);
    }
    if ((dfd = openat (fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0
        || !(d = fdopendir (dfd))) {
        errprintf (err, len, "%s: %s", rel, strerror (errno));
        if (dfd >= 0)
            close (dfd);
        return -1;
    }
    while (rc == 0 && (e = readdir (d))) {
        char path[4096];
        struct stat sb;
        int sub = -1;

        if (!strcmp (e->d_name, ".") || !strcmp (e->d_name, ".."))
            continue;
        snprintf (path, sizeof (path), "%s/%s", rel, e->d_name);
        if (fstatat (fd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
            rc = -1;
        else if (S_ISDIR (sb.st_mode)) {
            if ((sub = safedir_openat (fd, e->d_name)) < 0
                || own_tree (sub, path, gid, depth + 1, err, len) < 0)
                rc = -2;
            else if (give (sub, gid, 0750) < 0)
                rc = -1;
        } else if (S_ISREG (sb.st_mode)) {
            /* O_NONBLOCK: were it swapped for a FIFO, the open must not
             * hang; the fstat below refuses it. */
            if ((sub = openat (fd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0
                || fstat (sub, &sb) < 0)
                rc = -1;
            else if (!S_ISREG (sb.st_mode) || sb.st_nlink != 1) {
                errprintf (err, len, "%s: not a plain file of its own (links %lu)", path,
                           (unsigned long)sb.st_nlink);
                errno = EINVAL;
                rc = -2;
            } else if (give (sub, gid, 0640) < 0)
                rc = -1;
        } else {
            errprintf (err, len,
                       "%s: not a regular file or folder (symbolic links and devices "
                       "are never part of an image)",
                       path);
            errno = EINVAL;
            rc = -2;
        }
        if (rc == -1)
            errprintf (err, len, "%s: %s", path, strerror (errno));
        if (sub >= 0) {
            int saved = errno;
            close (sub);
            errno = saved;
        }
    }
    {
        int saved = errno;
        closedir (d);
        errno = saved;
    }
    return rc < 0 ? -1 : 0;
}

int store_gen_commit (const struct store *st, const char *job, int gen, uid_t uid, gid_t gid,
                      json_object *meta, char *err, size_t len)
{
    char dir[4096], name[32], why[1024];
    json_object *files = NULL, *m = NULL;
    uint64_t bytes = 0;
    int saved, jfd = -1, gfd = -1;
    struct stat sb;

    if (store_gen_path (st, job, gen, dir, sizeof (dir)) < 0) {
        errprintf (err, len, "'%s' is not a valid job name", job);
        return -1;
    }
    snprintf (name, sizeof (name), "gen-%d", gen);
    if ((jfd = job_open (st, job, why, sizeof (why))) < 0 || (gfd = safedir_openat (jfd, name)) < 0
        || fstat (gfd, &sb) < 0) {
        saved = errno;
        errprintf (err, len, "cannot open %s: %s", dir, jfd < 0 ? why : strerror (saved));
        goto error;
    }
    /* Ours and closed to everyone since store_gen_begin: nobody else can
     * have put anything in it, and nothing in it moves while we walk. */
    if (!ours (&sb) || (sb.st_mode & 077)) {
        errprintf (err, len, "%s is not ibcrd's own (owner uid %u, mode %04o): not committed", dir,
                   (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777));
        saved = EPERM;
        goto error;
    }
    if (own_tree (gfd, dir, gid, 0, why, sizeof (why)) < 0) {
        saved = errno;
        errprintf (err, len, "cannot hand %s to group %u: %s", dir, (unsigned)gid, why);
        goto error;
    }
    if (!(files = manifest_scan_at (gfd, dir, &bytes, err, len))) {
        saved = errno;
        goto error;
    }
    if (meta)
        json_object_deep_copy (meta, &m, NULL);
    else
        m = json_object_new_object ();
    if (!m) {
        json_object_put (files);
        errprintf (err, len, "out of memory");
        saved = ENOMEM;
        goto error;
    }
    if (!json_object_object_get_ex (m, "engine", NULL)) {
        json_object *e = json_object_new_object ();
        json_object_object_add (e, "ibcr", json_object_new_string (PACKAGE_VERSION));
        json_object_object_add (m, "engine", e);
    }
    json_object_object_add (m, "format", json_object_new_int (MANIFEST_FORMAT));
    json_object_object_add (m, "job", json_object_new_string (job));
    json_object_object_add (m, "generation", json_object_new_int (gen));
    json_object_object_add (m, "cluster", json_object_new_string (st->cluster));
    json_object_object_add (m, "uid", json_object_new_int64 (uid));
    json_object_object_add (m, "committed", json_object_new_int64 (time (NULL)));
    json_object_object_add (m, "bytes", json_object_new_int64 ((int64_t)bytes));
    json_object_object_add (m, "checksum", json_object_new_string ("xxh3-64"));
    json_object_object_add (m, "files", files);
    if (manifest_write_at (gfd, dir, m, geteuid () == 0 ? 0 : -1, (int)gid, 0640, err, len) < 0) {
        saved = errno;
        json_object_put (m);
        goto error;
    }
    json_object_put (m);
    /* Root's last write is done: only now may the job's group read it;
     * durably, as the rename was: a restore runs as the user. */
    if (give (gfd, gid, 0750) < 0 || fsync (gfd) < 0) {
        saved = errno;
        errprintf (err, len, "cannot open %s to group %u: %s", dir, (unsigned)gid,
                   strerror (saved));
        goto error;
    }
    close (gfd);
    close (jfd);
    return 0;
error:
    if (gfd >= 0)
        close (gfd);
    if (jfd >= 0)
        close (jfd);
    errno = saved;
    return -1;
}

int store_rmtree (const char *path)
{
    return safedir_rmtree (path, NULL, 0);
}

int store_gen_abort (const struct store *st, const char *job, int gen)
{
    char name[32], why[512];
    int jfd, rc, saved;

    if (!ident_ok (job)) {
        errno = EINVAL;
        return -1;
    }
    if ((jfd = job_open (st, job, why, sizeof (why))) < 0)
        return errno == ENOENT ? 0 : -1;
    snprintf (name, sizeof (name), "gen-%d", gen);
    rc = safedir_rmtreeat (jfd, name);
    saved = errno;
    close (jfd);
    errno = saved;
    return rc;
}

static int job_error (const struct store *st, const char *job, const char *jp, char *err,
                      size_t len)
{
    if (errno == ENOENT)
        return errprintf (err, len, "no checkpoint of job %s under %s/%s", job, st->root,
                          st->cluster);
    if (errno == EACCES)
        return errprintf (err, len,
                          "job %s: permission denied: its checkpoints belong to another "
                          "user",
                          job);
    return errprintf (err, len, "cannot read %s: %s", jp, strerror (errno));
}

/* The damage record of the generation folder gfd (store_gen_mark_damaged)
 * into buf: 1 if there is one of ours, else 0 (buf ""). */
static int damage_read (int gfd, char *buf, size_t len)
{
    struct stat sb;
    ssize_t n;
    int fd;

    buf[0] = '\0';
    if ((fd = openat (gfd, MANIFEST_DAMAGE_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC))
        < 0)
        return 0;
    if (fstat (fd, &sb) < 0 || !S_ISREG (sb.st_mode) || !ours (&sb)) {
        close (fd);
        return 0;
    }
    n = read (fd, buf, len - 1);
    close (fd);
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn (buf, "\n")] = '\0';
    if (!buf[0])
        snprintf (buf, len, "found by a restore");
    return 1;
}

/* Generation gen's folder, believed only if ours (see ours()): its fd
 * and stat, or -1 with errno and err. */
static int gen_open (const struct store *st, const char *job, int gen, struct stat *sb, char *err,
                     size_t len)
{
    char name[32];
    int jfd, gfd, saved;

    if ((jfd = job_open (st, job, err, len)) < 0)
        return -1;
    snprintf (name, sizeof (name), "gen-%d", gen);
    gfd = safedir_openat (jfd, name);
    saved = errno;
    close (jfd);
    if (gfd < 0)
        return errnprintf (err, len, saved, "cannot open generation %d of job %s: %s", gen, job,
                           strerror (saved));
    if (fstat (gfd, sb) < 0 || !ours (sb)) {
        close (gfd);
        return errnprintf (err, len, EPERM, "generation %d of job %s is not ibcrd's", gen, job);
    }
    return gfd;
}

int store_gen_damaged (const struct store *st, const char *job, int gen, char *what, size_t len)
{
    char err[256];
    struct stat sb;
    int gfd, rc;

    what[0] = '\0';
    if ((gfd = gen_open (st, job, gen, &sb, err, sizeof (err))) < 0)
        return 0;
    rc = damage_read (gfd, what, len);
    close (gfd);
    return rc;
}

int store_gen_mark_damaged (const struct store *st, const char *job, int gen, const char *what,
                            char *err, size_t len)
{
    char tmp[128];
    struct stat sb;
    int gfd, fd, saved;
    size_t n;

    if ((gfd = gen_open (st, job, gen, &sb, err, len)) < 0)
        return -1;
    /* Whole or not at all: written under another name, then renamed.
     * The storage may be shared by nodes: the name is this node's,
     * process's and call's, and never removed before it is made. */
    static _Atomic unsigned seq;
    char host[64] = "";
    (void)gethostname (host, sizeof (host) - 1);
    host[strcspn (host, "/.")] = '\0';
    snprintf (tmp, sizeof (tmp), "%s.%.40s.%ld.%u", MANIFEST_DAMAGE_NAME, host, (long)getpid (),
              seq++);
    /* The text quotes file names the job's user chose (CRIU's images of
     * its files): no control characters for a terminal that prints it. */
    char text[1024];
    snprintf (text, sizeof (text), "%s", what);
    what = errbuf_printable (text);
    n = strlen (text);
    fd = openat (gfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write (fd, what, n) != (ssize_t)n || write (fd, "\n", 1) != 1
        || give (fd, sb.st_gid, 0640) < 0 || fsync (fd) < 0
        || renameat (gfd, tmp, gfd, MANIFEST_DAMAGE_NAME) < 0) {
        saved = errno;
        if (fd >= 0) {
            close (fd);
            (void)unlinkat (gfd, tmp, 0);
        }
        close (gfd);
        return errnprintf (err, len, saved, "cannot mark generation %d of job %s damaged: %s", gen,
                           job, strerror (saved));
    }
    close (fd);
    (void)fsync (gfd); /* the mark is there either way; this makes it last */
    close (gfd);
    return 0;
}

/* Generation name in jfd, read and believed only if ours (see ours()):
 * the manifest, or NULL with the reason in why; its damage record (if
 * any) into damage. */
static json_object *gen_manifest (int jfd, const char *jp, int g, char *why, size_t len,
                                  char *damage, size_t dlen)
{
    char name[32], dir[4200];
    struct stat sb;
    json_object *m;
    int gfd, saved;

    snprintf (name, sizeof (name), "gen-%d", g);
    snprintf (dir, sizeof (dir), "%s/%s", jp, name);
    if ((gfd = safedir_openat (jfd, name)) < 0 || fstat (gfd, &sb) < 0) {
        saved = errno;
        if (gfd >= 0)
            close (gfd);
        if (saved == EACCES) /* root's, 0700: still being written */
            errnprintf (why, len, saved, "no manifest (incomplete or in progress)");
        else
            errnprintf (why, len, saved, "%s: %s", dir, strerror (saved));
        return NULL;
    }
    if (!ours (&sb)) {
        close (gfd);
        errnprintf (why, len, EPERM, "%s is not ibcrd's (owner uid %u, mode %04o): not trusted",
                    dir, (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777));
        return NULL;
    }
    m = manifest_read_at (gfd, dir, &sb, why, len);
    saved = errno;
    if (m)
        (void)damage_read (gfd, damage, dlen);
    close (gfd);
    if (m && !ours (&sb)) {
        json_object_put (m);
        errnprintf (why, len, EPERM,
                    "%s/" MANIFEST_NAME " is not ibcrd's (owner uid %u, mode %04o): "
                    "not trusted",
                    dir, (unsigned)sb.st_uid, (unsigned)(sb.st_mode & 07777));
        return NULL;
    }
    if (!m && saved == ENOENT)
        errnprintf (why, len, saved, "no manifest (incomplete or in progress)");
    errno = saved;
    return m;
}

int store_list (const struct store *st, const char *job, int with_partial, json_object **out,
                char *err, size_t len)
{
    char jp[4096], why[1024], damage[512];
    int *gens = NULL, n = 0, jfd;
    json_object *arr;

    *out = NULL;
    if (store_job_path (st, job, jp, sizeof (jp)) < 0) {
        errprintf (err, len, "'%s' is not a job name (letters, digits, '.', '_', '-')", job);
        return -1;
    }
    if ((jfd = job_open (st, job, why, sizeof (why))) < 0) {
        if (errno == EPERM) { /* an untrusted folder on the way: why says which */
            errprintf (err, len, "%s", why);
            return -1;
        }
        return job_error (st, job, jp, err, len);
    }
    if (scan_gens (jfd, &gens, &n) < 0) {
        int saved = errno;
        close (jfd);
        errno = saved;
        return job_error (st, job, jp, err, len);
    }
    if (!(arr = json_object_new_array ())) {
        free (gens);
        close (jfd);
        errno = ENOMEM;
        return -1;
    }
    for (int i = 0; i < n; i++) {
        json_object *m, *e;
        int transient;

        damage[0] = '\0';
        m = gen_manifest (jfd, jp, gens[i], why, sizeof (why), damage, sizeof (damage));
        /* A manifest that could not be read for a moment (memory, a
         * network filesystem's ESTALE, an I/O error) may be a committed
         * generation's: said so, and never pruned for it. */
        transient = !m
            && (errno == ENOMEM || errno == ESTALE || errno == EIO || errno == EAGAIN
                || errno == EINTR || errno == ETIMEDOUT || errno == ENFILE || errno == EMFILE);
        if (m) {
            json_object *g;
            /* A manifest for another job or generation was moved here by
             * hand: not trustworthy, treat as partial. */
            if (!json_object_object_get_ex (m, "generation", &g)
                || json_object_get_int (g) != gens[i] || !json_object_object_get_ex (m, "job", &g)
                || strcmp (json_object_get_string (g), job)) {
                errprintf (why, sizeof (why), "manifest names another job or generation");
                json_object_put (m);
                m = NULL;
            }
        }
        if (!m && !with_partial)
            continue;
        e = json_object_new_object ();
        json_object_object_add (e, "generation", json_object_new_int (gens[i]));
        json_object_object_add (e, "committed", json_object_new_boolean (m != NULL));
        if (m)
            json_object_object_add (e, "manifest", m);
        else
            json_object_object_add (e, "why", json_object_new_string (why));
        if (transient)
            json_object_object_add (e, "unreadable", json_object_new_boolean (1));
        if (m && damage[0])
            json_object_object_add (e, "damaged", json_object_new_string (damage));
        json_object_array_add (arr, e);
    }
    free (gens);
    close (jfd);
    *out = arr;
    return 0;
}

static int prune_locked (const struct store *st, const char *job, int keep, json_object *removed,
                         char *err, size_t len);

/* The job folder's prune lock, root's file .prune-lock (no user can open
 * it, so none can hold it), taken within wait_ms (0: only if free now):
 * its fd; -1 with EBUSY when another prune held it all that time, or
 * with another errno when there is none to take (no job folder, or not
 * ours to write: the prune then fails on its own, or runs unlocked where
 * the filesystem has no flock). */
static int prune_lock (const struct store *st, const char *job, int wait_ms)
{
    char why[512];
    struct stat sb;
    int jfd, fd;

    if ((jfd = job_open (st, job, why, sizeof (why))) < 0)
        return -1;
    fd = openat (jfd, STORE_PRUNE_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    close (jfd);
    if (fd < 0)
        return -1;
    if (fstat (fd, &sb) < 0 || !S_ISREG (sb.st_mode) || !ours (&sb) || (sb.st_mode & 077)) {
        close (fd);
        errno = EPERM;
        return -1;
    }
    /* Polled, not waited in the kernel: a prune stuck elsewhere (a
     * stopped 'ibcr prune' of root's) never holds up another for long. */
    for (int waited = 0; flock (fd, LOCK_EX | LOCK_NB) < 0; waited += 50) {
        if (errno == EINTR)
            continue;
        if (errno != EWOULDBLOCK || waited >= wait_ms) {
            int saved = errno == EWOULDBLOCK ? EBUSY : errno;
            close (fd);
            errno = saved;
            return -1;
        }
        nanosleep (&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
    }
    return fd;
}

int store_prune (const struct store *st, const char *job, int keep, json_object *removed, char *err,
                 size_t len)
{
    return store_prune_wait (st, job, keep, STORE_PRUNE_WAIT_MS, removed, err, len);
}

int store_prune_wait (const struct store *st, const char *job, int keep, int wait_ms,
                      json_object *removed, char *err, size_t len)
{
    int lfd = -1, rc;

    if (keep < 0) {
        return errnprintf (err, len, EINVAL, "cannot keep a negative number of generations");
    }
    /* One prune of a job at a time (ibcrd's retention after each commit,
     * a user's 'ibcr prune'): two would remove the same generation under
     * each other, and one would fail. */
    if (ident_ok (job) && (lfd = prune_lock (st, job, wait_ms)) < 0 && errno == EBUSY)
        return errnprintf (err, len, EBUSY,
                           "another prune of job %s is running (retention after a "
                           "checkpoint, or an 'ibcr prune'): try again when it ends",
                           job);
    rc = prune_locked (st, job, keep, removed, err, len);
    if (lfd >= 0) {
        int saved = errno;
        close (lfd);
        errno = saved;
    }
    return rc;
}

static int prune_locked (const struct store *st, const char *job, int keep, json_object *removed,
                         char *err, size_t len)
{
    json_object *gens;
    int ncommitted = 0, newest = 0, seen = 0, count = 0;

    if (store_list (st, job, 1, &gens, err, len) < 0)
        return -1;
    for (size_t i = 0; i < json_object_array_length (gens); i++) {
        json_object *e = json_object_array_get_idx (gens, i), *v;
        json_object_object_get_ex (e, "committed", &v);
        if (json_object_get_boolean (v)) {
            /* A generation a restore found damaged is never restored: it
             * does not count as one kept. */
            if (!json_object_object_get_ex (e, "damaged", NULL))
                ncommitted++;
            json_object_object_get_ex (e, "generation", &v);
            newest = json_object_get_int (v);
        }
    }
    for (size_t i = 0; i < json_object_array_length (gens); i++) {
        json_object *e = json_object_array_get_idx (gens, i), *v;
        int g, committed, drop;

        json_object_object_get_ex (e, "generation", &v);
        g = json_object_get_int (v);
        json_object_object_get_ex (e, "committed", &v);
        committed = json_object_get_boolean (v);
        if (committed && json_object_object_get_ex (e, "damaged", NULL))
            drop = g < newest || keep == 0; /* the newest is kept for its mark */
        else if (committed)
            drop = seen++ < ncommitted - keep;
        else /* partial, unless its manifest could not be read just now */
            drop = g < newest && !json_object_object_get_ex (e, "unreadable", NULL);
        if (!drop)
            continue;
        if (store_gen_abort (st, job, g) < 0) {
            int saved = errno;
            json_object_put (gens);
            return errnprintf (err, len, saved, "cannot remove generation %d of job %s: %s%s", g,
                               job, strerror (saved),
                               (saved == EACCES || saved == EPERM) && geteuid () != 0
                                   ? " (generations belong to root: ibcrd's retention removes "
                                     "them, or root runs ibcr prune)"
                                   : "");
        }
        if (removed)
            json_object_array_add (removed, json_object_new_int (g));
        count++;
    }
    json_object_put (gens);
    return count;
}
