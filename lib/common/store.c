/* store.c - see store.h.  Every path below <root>/<cluster>/<job> may be
 * under the control of the job's user, so nothing here follows a
 * symbolic link, and the job name itself is checked first. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ident.h"
#include "manifest.h"
#include "store.h"

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

/* mkdir that accepts an existing folder but not a symlink or a file. */
static int mkdir_one (const char *path, mode_t mode)
{
    struct stat sb;

    if (mkdir (path, mode) == 0)
        return chmod (path, mode);
    if (errno != EEXIST)
        return -1;
    if (lstat (path, &sb) < 0)
        return -1;
    if (!S_ISDIR (sb.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

static int mkdir_parents (const char *path)
{
    char buf[4096];

    if (strlen (path) >= sizeof (buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy (buf, path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir (buf, 0755) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    if (mkdir (buf, 0755) < 0 && errno != EEXIST)
        return -1;
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

/* Sorted generation numbers found in the job folder (any state). */
static int scan_gens (const char *jobdir, int **out, int *n)
{
    DIR *d = opendir (jobdir);
    struct dirent *e;
    int *v = NULL, cnt = 0, cap = 0;

    if (!d)
        return -1;
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

/* The job folder's record of the highest generation number ever begun,
 * so that an aborted number is never given again: a slow node still
 * writing into an aborted generation must not land in a new one of the
 * same name, and logs never show one number for two generations. */
#define STORE_LAST_GEN ".last-gen"

/* The number recorded in jobdir, or 0 (none, or not a number: the folder
 * names then decide alone). */
static int last_gen_read (const char *jobdir)
{
    char path[4200], buf[32];
    FILE *f;
    long v = 0;

    int fd;
    struct stat sb;

    /* The job folder is the job owner's: never follow a link of theirs. */
    snprintf (path, sizeof (path), "%s/" STORE_LAST_GEN, jobdir);
    if ((fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return 0;
    if (fstat (fd, &sb) < 0 || !S_ISREG (sb.st_mode) || !(f = fdopen (fd, "r"))) {
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

/* Record gen as begun: written aside and renamed, so a crash leaves the
 * old number or the new one.  -1 with errno. */
static int last_gen_write (const char *jobdir, int gen)
{
    char path[4200], tmp[4300];
    FILE *f;
    int saved;

    int fd;

    snprintf (path, sizeof (path), "%s/" STORE_LAST_GEN, jobdir);
    snprintf (tmp, sizeof (tmp), "%s.%ld", path, (long)getpid ());
    /* O_EXCL and O_NOFOLLOW: a name the job owner planted (a link to a
     * file of root's) is removed, never written through. */
    if ((fd = open (tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0
        && errno == EEXIST && unlink (tmp) == 0)
        fd = open (tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    if (!(f = fdopen (fd, "w"))) {
        saved = errno;
        close (fd);
        unlink (tmp);
        errno = saved;
        return -1;
    }
    if (fprintf (f, "%d\n", gen) < 0 || fflush (f) != 0 || fsync (fileno (f)) < 0) {
        saved = errno;
        fclose (f);
        unlink (tmp);
        errno = saved;
        return -1;
    }
    if (fclose (f) != 0 || rename (tmp, path) < 0) {
        saved = errno;
        unlink (tmp);
        errno = saved;
        return -1;
    }
    return 0;
}

int store_gen_begin (const struct store *st, const char *job, uid_t uid, gid_t gid,
                     int *gen, char *dir, size_t dirlen, char *err, size_t len)
{
    char jp[4096], cl[4096];
    int *gens = NULL, n = 0, next, last, saved;

    if (store_job_path (st, job, jp, sizeof (jp)) < 0) {
        snprintf (err, len, "'%s' is not a valid job name", job);
        return -1;
    }
    snprintf (cl, sizeof (cl), "%s/%s", st->root, st->cluster);
    /* Root and cluster folders: reachable by all, writable by us only. */
    if (mkdir_parents (cl) < 0) {
        saved = errno;
        snprintf (err, len, "cannot create %s: %s", cl, strerror (saved));
        errno = saved;
        return -1;
    }
    if (mkdir_one (jp, 0700) < 0 || chown (jp, uid, gid) < 0) {
        saved = errno;
        snprintf (err, len, "cannot create job folder %s: %s", jp, strerror (saved));
        errno = saved;
        return -1;
    }
    if (scan_gens (jp, &gens, &n) < 0) {
        saved = errno;
        snprintf (err, len, "cannot read %s: %s", jp, strerror (saved));
        errno = saved;
        return -1;
    }
    next = n ? gens[n - 1] + 1 : 1;
    free (gens);
    if ((last = last_gen_read (jp)) >= next)
        next = last + 1;
    if ((size_t)snprintf (dir, dirlen, "%s/gen-%d", jp, next) >= dirlen) {
        snprintf (err, len, "path of %s/gen-%d is too long", jp, next);
        errno = ENAMETOOLONG;
        return -1;
    }
    /* mkdir, not mkdir_one: a folder already there means a concurrent
     * begin took this number, and two generations must never share one. */
    if (mkdir (dir, 0700) < 0 || chown (dir, uid, gid) < 0) {
        saved = errno;
        snprintf (err, len, "cannot create %s: %s", dir, strerror (saved));
        errno = saved;
        return -1;
    }
    if (last_gen_write (jp, next) < 0) {
        saved = errno;
        snprintf (err, len, "cannot record generation %d in %s/" STORE_LAST_GEN ": %s", next,
                  jp, strerror (saved));
        (void)store_rmtree (dir);
        errno = saved;
        return -1;
    }
    *gen = next;
    return 0;
}

static uid_t own_uid;
static gid_t own_gid;

static int own_one (const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    if (flag == FTW_SL || flag == FTW_SLN) {
        errno = EINVAL;     /* images never hold links: refuse, do not follow */
        return -1;
    }
    if (lchown (path, own_uid, own_gid) < 0)
        return -1;
    return chmod (path, flag == FTW_D || flag == FTW_DP ? 0700 : 0600);
}

int store_gen_commit (const struct store *st, const char *job, int gen, uid_t uid, gid_t gid,
                      json_object *meta, char *err, size_t len)
{
    char dir[4096];
    json_object *files = NULL, *m = NULL;
    uint64_t bytes = 0;
    int saved;

    if (store_gen_path (st, job, gen, dir, sizeof (dir)) < 0) {
        snprintf (err, len, "'%s' is not a valid job name", job);
        return -1;
    }
    own_uid = uid;
    own_gid = gid;
    if (nftw (dir, own_one, 32, FTW_PHYS) != 0) {
        saved = errno;
        snprintf (err, len, "cannot give %s to uid %u: %s", dir, (unsigned)uid,
                  strerror (saved));
        errno = saved;
        return -1;
    }
    if (!(files = manifest_scan (dir, &bytes, err, len)))
        return -1;
    if (meta)
        json_object_deep_copy (meta, &m, NULL);
    else
        m = json_object_new_object ();
    if (!m) {
        json_object_put (files);
        snprintf (err, len, "out of memory");
        errno = ENOMEM;
        return -1;
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
    if (manifest_write (dir, m, (int)uid, (int)gid, err, len) < 0) {
        saved = errno;
        json_object_put (m);
        errno = saved;
        return -1;
    }
    json_object_put (m);
    return 0;
}

static int rm_one (const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    if (flag == FTW_DP)
        return rmdir (path);
    return unlink (path);
}

int store_rmtree (const char *path)
{
    struct stat sb;

    if (lstat (path, &sb) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR (sb.st_mode))
        return unlink (path);
    return nftw (path, rm_one, 32, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

int store_gen_abort (const struct store *st, const char *job, int gen)
{
    char dir[4096];

    if (store_gen_path (st, job, gen, dir, sizeof (dir)) < 0)
        return -1;
    return store_rmtree (dir);
}

static int job_error (const struct store *st, const char *job, const char *jp, char *err,
                      size_t len)
{
    int saved = errno;

    if (saved == ENOENT)
        snprintf (err, len, "no checkpoint of job %s under %s/%s", job, st->root, st->cluster);
    else if (saved == EACCES)
        snprintf (err, len, "job %s: permission denied: its checkpoints belong to another "
                  "user", job);
    else
        snprintf (err, len, "cannot read %s: %s", jp, strerror (saved));
    errno = saved;
    return -1;
}

int store_list (const struct store *st, const char *job, int with_partial,
                json_object **out, char *err, size_t len)
{
    char jp[4096];
    int *gens = NULL, n = 0;
    json_object *arr;

    *out = NULL;
    if (store_job_path (st, job, jp, sizeof (jp)) < 0) {
        snprintf (err, len, "'%s' is not a job name (letters, digits, '.', '_', '-')", job);
        return -1;
    }
    if (scan_gens (jp, &gens, &n) < 0)
        return job_error (st, job, jp, err, len);
    if (!(arr = json_object_new_array ())) {
        free (gens);
        errno = ENOMEM;
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char dir[4200], why[512];
        json_object *m, *e = json_object_new_object ();

        snprintf (dir, sizeof (dir), "%s/gen-%d", jp, gens[i]);
        m = manifest_read (dir, why, sizeof (why));
        if (m) {
            json_object *g;
            /* A manifest for another job or generation was moved here by
             * hand: not trustworthy, treat as partial. */
            if (!json_object_object_get_ex (m, "generation", &g) || json_object_get_int (g) != gens[i]
                || !json_object_object_get_ex (m, "job", &g) || strcmp (json_object_get_string (g), job)) {
                snprintf (why, sizeof (why), "manifest names another job or generation");
                json_object_put (m);
                m = NULL;
            }
        } else if (errno == ENOENT)
            snprintf (why, sizeof (why), "no manifest (incomplete or in progress)");
        if (!m && !with_partial) {
            json_object_put (e);
            continue;
        }
        json_object_object_add (e, "generation", json_object_new_int (gens[i]));
        json_object_object_add (e, "committed", json_object_new_boolean (m != NULL));
        if (m)
            json_object_object_add (e, "manifest", m);
        else
            json_object_object_add (e, "why", json_object_new_string (why));
        json_object_array_add (arr, e);
    }
    free (gens);
    *out = arr;
    return 0;
}

int store_prune (const struct store *st, const char *job, int keep, json_object *removed,
                 char *err, size_t len)
{
    json_object *gens;
    int ncommitted = 0, newest = 0, seen = 0, count = 0;

    if (keep < 0) {
        snprintf (err, len, "cannot keep a negative number of generations");
        errno = EINVAL;
        return -1;
    }
    if (store_list (st, job, 1, &gens, err, len) < 0)
        return -1;
    for (size_t i = 0; i < json_object_array_length (gens); i++) {
        json_object *e = json_object_array_get_idx (gens, i), *v;
        json_object_object_get_ex (e, "committed", &v);
        if (json_object_get_boolean (v)) {
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
        if (committed)
            drop = seen++ < ncommitted - keep;
        else
            drop = g < newest;
        if (!drop)
            continue;
        if (store_gen_abort (st, job, g) < 0) {
            int saved = errno;
            snprintf (err, len, "cannot remove generation %d of job %s: %s", g, job,
                      strerror (saved));
            json_object_put (gens);
            errno = saved;
            return -1;
        }
        if (removed)
            json_object_array_add (removed, json_object_new_int (g));
        count++;
    }
    json_object_put (gens);
    return count;
}
