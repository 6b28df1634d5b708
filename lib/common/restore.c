/* restore.c - see restore.h. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "criu.h"
#include "errbuf.h"
#include "imgfiles.h"
#include "manifest.h"
#include "proc.h"
#include "proto.h"
#include "restore.h"
#include "safedir.h"
#include "store.h"
#include "taskns.h"
#include "tasktree.h"
#include "zimg.h"

/* Exit code of a holder that failed (as env(1) for "cannot run"). */
#define RESTORE_EXIT 125
/* Tries of a restore the kernel refused a pipe's size (0.25 s to 8 s
 * apart, 16 s in all). */
#define RESTORE_PIPE_TRIES 7

static json_object *restore_task_of (json_object *m, uint32_t rank)
{
    json_object *tasks;

    if (!json_object_object_get_ex (m, "tasks", &tasks)
        || !json_object_is_type (tasks, json_type_array))
        return NULL;
    for (size_t i = 0; i < json_object_array_length (tasks); i++) {
        json_object *t = json_object_array_get_idx (tasks, i);
        if (proto_get_int (t, "rank", -1) == (int64_t)rank)
            return t;
    }
    return NULL;
}

/* Append to note, separated by "; ". */
static void restore_note (char *note, size_t len, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
static void restore_note (char *note, size_t len, const char *fmt, ...)
{
    size_t off = strlen (note);
    va_list ap;

    if (off && off + 2 < len) {
        strcpy (note + off, "; ");
        off += 2;
    }
    va_start (ap, fmt);
    (void)vsnprintf (note + off, len - off, fmt, ap);
    va_end (ap);
}

/* Rank's image folder, stdio and control socket in generation g. */
static int restore_task_plan (const char *job, int g, json_object *m, const char *dir,
                              uint32_t rank, struct restore_plan *plan, char *err, size_t errlen)
{
    json_object *task = restore_task_of (m, rank), *stdio, *inos;
    struct stat sb;

    if ((size_t)snprintf (plan->imgdir, sizeof (plan->imgdir), "%s/task-%u", dir, rank)
            >= sizeof (plan->imgdir)
        || !task || lstat (plan->imgdir, &sb) < 0 || !S_ISDIR (sb.st_mode)) {
        return errnprintf (err, errlen, ENOENT,
                           "job %s generation %d has no image of rank %u: the "
                           "checkpoint's layout differs (see 'ibcr list %s')",
                           job, g, rank, job);
    }
    memset (plan->stdio, 0, sizeof (plan->stdio));
    if (json_object_object_get_ex (task, "stdio", &stdio)) {
        for (int fd = 0; fd <= 2; fd++) {
            char key[4];
            snprintf (key, sizeof (key), "%d", fd);
            snprintf (plan->stdio[fd], sizeof (plan->stdio[fd]), "%s",
                      proto_get_str (stdio, key, ""));
        }
    }
    plan->ctl_ino = (long long)proto_get_int (task, "ctl_ino", 0);
    plan->nctl = 0;
    if (json_object_object_get_ex (task, "ctl_inos", &inos)
        && json_object_is_type (inos, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length (inos); i++) {
            json_object *v = json_object_array_get_idx (inos, i);
            if (!json_object_is_type (v, json_type_int) || json_object_get_int64 (v) <= 0
                || plan->nctl >= RESTORE_MAX_CTL) {
                return errnprintf (err, errlen, EINVAL,
                                   "job %s generation %d rank %u: its manifest's "
                                   "ctl_inos is malformed (at most %d positive inodes)",
                                   job, g, rank, RESTORE_MAX_CTL);
            }
            plan->ctl_inos[plan->nctl++] = json_object_get_int64 (v);
        }
    } else if (plan->ctl_ino > 0)
        plan->ctl_inos[plan->nctl++] = plan->ctl_ino; /* written before ctl_inos */
    if (plan->nctl > 0)
        plan->ctl_ino = plan->ctl_inos[0];
    plan->pmi_ino = (long long)proto_get_int (task, "pmi_ino", 0);
    plan->pmix_ino = (long long)proto_get_int (task, "pmix_ino", 0);
    plan->pmix_hello_len = 0;
    {
        const char *hex = proto_get_str (task, "pmix_hello", "");
        size_t n = strlen (hex) / 2;
        unsigned int b;
        if (strlen (hex) % 2 == 0 && n >= 16 && n <= sizeof (plan->pmix_hello)) {
            for (size_t i = 0; i < n && sscanf (hex + 2 * i, "%2x", &b) == 1; i++)
                plan->pmix_hello[plan->pmix_hello_len++] = (unsigned char)b;
            if (plan->pmix_hello_len != n || pmix_hello_size (plan->pmix_hello) != n)
                plan->pmix_hello_len = 0;
        }
    }
    plan->in_ns = proto_get_bool (task, "in_ns", 0);
    plan->gen = g;
    return 0;
}

int restore_pick (const struct store *st, const char *job, int want, uint32_t rank,
                  struct restore_plan *plan, json_object **manifest, char *note, size_t notelen,
                  char *err, size_t errlen)
{
    return restore_pick_for (st, job, want, rank, -1, plan, manifest, note, notelen, err, errlen);
}

int restore_pick_for (const struct store *st, const char *job, int want, uint32_t rank,
                      int64_t owner, struct restore_plan *plan, json_object **manifest, char *note,
                      size_t notelen, char *err, size_t errlen)
{
    json_object *gens = NULL;
    char serr[1024];
    int rc = -1, damaged = 0, seen = 0;

    note[0] = '\0';
    *manifest = NULL;
    snprintf (plan->looked, sizeof (plan->looked), "%.2000s/%.1000s", st->root, st->cluster);
    if (store_list (st, job, 0, &gens, serr, sizeof (serr)) < 0) {
        if (errno == ENOENT && !want)
            return 0;
        if (errno == ENOENT)
            snprintf (err, errlen, "job %s has no committed generation (looked in %s)", job,
                      plan->looked);
        else
            snprintf (err, errlen, "cannot list the checkpoints of job %s: %s", job, serr);
        return -1;
    }
    for (int i = (int)json_object_array_length (gens) - 1; i >= 0; i--) {
        json_object *e = json_object_array_get_idx (gens, i), *m, *problems;
        int g = (int)proto_get_int (e, "generation", 0), n;
        char dir[PATH_MAX - 32];

        if ((want && g != want) || !json_object_object_get_ex (e, "manifest", &m)
            || store_gen_path (st, job, g, dir, sizeof (dir)) < 0)
            continue;
        seen++;
        /* Nothing of another user's generation is read, said or marked
         * for them (the caller refuses it anyway). */
        if (owner >= 0 && proto_get_int (m, "uid", -1) != owner) {
            errnprintf (err, errlen, EPERM,
                        "job %s generation %d belongs to another user: only its owner (or "
                        "root) restores it",
                        job, g);
            goto out;
        }
        /* The same answer for every rank: a generation some rank has no
         * images in is passed by by all, never restored in part. */
        int miss = manifest_missing_rank (m);
        if (miss >= 0) {
            restore_note (note, notelen, "generation %d holds no images of rank %d of its %lld%s",
                          g, miss, (long long)proto_get_int (m, "size", 0),
                          want ? "" : ", falling back to the previous one");
            damaged++;
            continue;
        }
        /* A rank of this restore or of an earlier one found it damaged. */
        const char *mark = proto_get_str (e, "damaged", NULL);
        if (mark) {
            restore_note (note, notelen, "generation %d is damaged (%s)%s", g, mark,
                          want ? "" : ", falling back to the previous one");
            damaged++;
            continue;
        }
        /* This rank's images only: every rank checks its own, and one
         * that finds them damaged marks the generation for the others. */
        problems = json_object_new_array ();
        int transient = 0;
        n = manifest_verify_rank (dir, m, rank, problems, NULL, &transient);
        if (n != 0) {
            json_object *p = json_object_array_get_idx (problems, 0);
            char what[1024], merr[512];
            snprintf (what, sizeof (what), "%s: %s", p ? proto_get_str (p, "path", "?") : "?",
                      p ? proto_get_str (p, "problem", "?") : strerror (errno));
            restore_note (note, notelen, "generation %d is damaged (%s)%s", g, what,
                          want ? "" : ", falling back to the previous one");
            /* A read that failed may pass: only what the bytes showed is
             * recorded for good. */
            if (n > 0 && !transient
                && store_gen_mark_damaged (st, job, g, what, merr, sizeof (merr)) < 0)
                restore_note (note, notelen, "%s", merr);
            json_object_put (problems);
            damaged++;
            continue;
        }
        json_object_put (problems);
        if (restore_task_plan (job, g, m, dir, rank, plan, err, errlen) < 0)
            goto out;
        *manifest = json_object_get (m);
        rc = 1;
        goto out;
    }
    if (!seen && !want) {
        rc = 0;
        goto out;
    }
    if (!seen)
        errnprintf (err, errlen, ENOENT,
                    "job %s has no committed generation %d (see 'ibcr list %s')", job, want, job);
    else if (want)
        errnprintf (err, errlen, EBADMSG,
                    "job %s %s; not restoring it (see 'ibcr verify %s'; leave "
                    "out the generation to fall back to an older one)",
                    job, note, job);
    else
        errnprintf (err, errlen, EBADMSG,
                    "job %s has %d committed generation%s and every one is "
                    "damaged (%s): nothing to restore, and a fresh start would lose the work "
                    "silently; see 'ibcr verify %s'",
                    job, damaged, damaged == 1 ? "" : "s", note, job);
out:
    json_object_put (gens);
    return rc;
}

/* A fresh slot beside criu's log, <workdir>/<log name><suffix>: its name
 * and path, whatever was there removed (by fd, never following a link).
 * The workdir's fd (root's, through trusted folders), or -1 with err. */
static int restore_slot (const struct restore_plan *plan, const char *suffix, char *name,
                         size_t namelen, char *path, size_t len, char *err, size_t errlen)
{
    const char *base = strrchr (plan->log, '/');
    int dfd;

    base = base ? base + 1 : plan->log;
    snprintf (name, namelen, "%.200s%s", base, suffix);
    if ((size_t)snprintf (path, len, "%s/%s", plan->workdir, name) >= len) {
        snprintf (err, errlen, "%.1500s/%s: path too long", plan->workdir, name);
        return -1;
    }
    if ((dfd = safedir_open (plan->workdir, err, errlen)) < 0)
        return -1;
    (void)safedir_rmtreeat (dfd, name);
    return dfd;
}

/* CRIU's work folder for this restore (its stats file; the images are
 * root's and read-only to the job): <workdir>/<log name>.work, made by
 * root through trusted folders and given to the user.  0 or -1. */
static int restore_workdir (const struct restore_plan *plan, uid_t uid, gid_t gid, char *path,
                            size_t len, char *err, size_t errlen)
{
    char name[256];
    int dfd, fd;

    if ((dfd = restore_slot (plan, ".work", name, sizeof (name), path, len, err, errlen)) < 0)
        return -1;
    /* Root's, and only traversable by others: each user's criu reaches
     * its own work folder in it. */
    if (fchmod (dfd, 0711) < 0) {
        snprintf (err, errlen, "cannot set the mode of %.1500s: %s", plan->workdir,
                  strerror (errno));
        close (dfd);
        return -1;
    }
    if ((fd = safedir_mkdirat (dfd, name, 0700, NULL)) < 0 || fchown (fd, uid, gid) < 0) {
        snprintf (err, errlen, "cannot make criu's work folder %.1500s: %s", path,
                  strerror (errno));
        if (fd >= 0)
            close (fd);
        close (dfd);
        return -1;
    }
    close (fd);
    close (dfd);
    return 0;
}

/* A compressed generation (compression = yes): CRIU reads only its own
 * file names, so the task's images are decompressed by root into
 * <workdir>/<log name>.img, given to the user (files first, the folder
 * last: nothing is theirs before root's last write), and read from there.
 * path gets that folder.  0, or -1 with err. */
static int restore_unpack (const struct restore_plan *plan, uid_t uid, gid_t gid, char *path,
                           size_t len, char *err, size_t errlen)
{
    char name[256];
    struct dirent *e;
    int dfd, fd = -1;
    DIR *d;

    if ((dfd = restore_slot (plan, ".img", name, sizeof (name), path, len, err, errlen)) < 0)
        return -1;
    if (zimg_decompress_dir (plan->imgdir, path, err, errlen) < 0)
        goto error;
    if ((fd = safedir_openat (dfd, name)) < 0 || !(d = fdopendir (fd))) {
        snprintf (err, errlen, "cannot open %.1500s: %s", path, strerror (errno));
        goto error;
    }
    while ((e = readdir (d)))
        if (e->d_name[0] != '.'
            && fchownat (dirfd (d), e->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
            snprintf (err, errlen, "cannot give %.1500s to the task's user: %s", path,
                      strerror (errno));
            closedir (d);
            goto error;
        }
    if (fchown (dirfd (d), uid, gid) < 0) {
        snprintf (err, errlen, "cannot give %.1500s to the task's user: %s", path,
                  strerror (errno));
        closedir (d);
        goto error;
    }
    closedir (d);
    close (dfd);
    return 0;
error:
    (void)safedir_rmtreeat (dfd, name);
    close (dfd);
    return -1;
}

/* Output files the images hold open that grew since the dump are cut
 * back to their size then (imgfiles.h), by a child that became the
 * task's user for good: the image is the user's data.  note gets what
 * was cut ("" none).  0, or -1 with err. */
static int restore_rollback (const struct taskns_as *as, const char *dir,
                             const struct restore_plan *plan, char *note, size_t notelen, char *err,
                             size_t errlen)
{
    char msg[2048];
    int p[2], status;
    ssize_t n;
    pid_t pid;

    note[0] = '\0';
    if (pipe2 (p, O_CLOEXEC) < 0)
        return errprintf (err, errlen, "cannot make a pipe: %s", strerror (errno));
    if ((pid = fork ()) < 0) {
        (void)close (p[0]);
        (void)close (p[1]);
        return errprintf (err, errlen, "cannot fork: %s", strerror (errno));
    }
    if (pid == 0) {
        char why[1024], said[1024];
        (void)close (p[0]);
        /* The task's stdio: the restorer hands in what it writes to. */
        const char *stdio[3] = { plan->stdio[0], plan->stdio[1], plan->stdio[2] };
        if (taskns_drop (as, why, sizeof (why)) < 0)
            dprintf (p[1], "Ecannot become the task's user: %s", why);
        else if (imgfiles_rollback (dir, stdio, 3, said, sizeof (said), why, sizeof (why)) < 0)
            dprintf (p[1], "E%s", why);
        else
            dprintf (p[1], "O%s", said);
        _exit (0);
    }
    (void)close (p[1]);
    do
        n = read (p[0], msg, sizeof (msg) - 1);
    while (n < 0 && errno == EINTR);
    (void)close (p[0]);
    while (waitpid (pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (n <= 0)
        return errnprintf (err, errlen, EIO, "the check of its open files ended without a word");
    msg[n] = '\0';
    if (msg[0] != 'O')
        return errnprintf (err, errlen, EINVAL, "%s", msg + 1);
    snprintf (note, notelen, "%s", msg + 1);
    return 0;
}

/* PID 1 of the restored task's new namespaces (taskns.h), root until
 * the tree is checked: mount /proc, run CRIU as the task's user (PID 2),
 * check what it restored, let it run, then hold it.  Writes "O" or
 * "E<why>" on res; never returns. */
static void __attribute__ ((noreturn))
restore_holder (const struct restore_plan *plan, struct taskns_as *as, int flags, int res,
                char *const argv[], const int *fds, int nfds, const char *unpacked)
{
    char err[2048], errs[1500];
    int keep[RESTORE_MAX_CTL + 6], nkeep = 0, status;
    pid_t criu, init = 0;

    (void)prctl (PR_SET_NAME, "ibcr-holder", 0, 0, 0);
    /* The task's ids first: once the namespace's /proc is mounted, this
     * process no longer sees the process they come from. */
    if (taskns_load_ids (as, err, sizeof (err)) < 0
        || taskns_setup_proc (0, err, sizeof (err)) < 0) {
        dprintf (res, "Ecannot set up the restored task's namespace: %s", err);
        _exit (RESTORE_EXIT);
    }
    for (int i = 0; i < nfds; i++)
        if (fds[i] >= 0)
            keep[nkeep++] = fds[i];
    for (int attempt = 1;; attempt++) {
        if ((criu = criu_start_as (argv, plan->log, keep, nkeep, as)) < 0) {
            dprintf (res, "Ecannot fork criu: %s", strerror (errno));
            _exit (RESTORE_EXIT);
        }
        while (waitpid (criu, &status, 0) < 0 && errno == EINTR)
            ;
        if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
            break;
        criu_log_errors (plan->log, 3, errs, sizeof (errs));
        if (WIFEXITED (status) && WEXITSTATUS (status) == 127) {
            dprintf (res, "Ecannot run %s (ibcrd.conf criu=)", plan->criu);
            _exit (RESTORE_EXIT);
        }
        /* Pipe buffers are charged to the user who makes the pipe: while
         * a dump of another task of this user runs (CRIU as the user
         * holds the pages it copies in pipes), the user may be over
         * fs.pipe-user-pages-soft, and then the kernel refuses to give a
         * restored pipe its size back.  That passes when the dump ends:
         * try again, a few times, in a namespace CRIU left empty. */
        if (attempt < RESTORE_PIPE_TRIES && strstr (errs, "Can't restore pipe size")) {
            /* What CRIU had restored must be gone, pids and all: we are
             * PID 1 of the namespace, so kill(-1) reaches exactly that. */
            if (getpid () == 1)
                (void)kill (-1, SIGKILL);
            while (waitpid (-1, NULL, 0) > 0 || errno == EINTR)
                ;
            struct timespec ts = { .tv_sec = attempt >= 3 ? 1L << (attempt - 3) : 0,
                                   .tv_nsec = attempt >= 3 ? 0 : 250000000L * attempt };
            (void)nanosleep (&ts, NULL);
            (void)unlink (plan->log);
            continue;
        }
        dprintf (res, "Ecriu restore of %s failed: %s%s; log: %s", plan->imgdir,
                 errs[0] ? errs : "no error line in its log",
                 attempt > 1
                     ? " (the last of several tries: this user's pipe buffers were "
                       "over fs.pipe-user-pages-soft throughout; see ibcrd(8) SYSTEM SETTINGS)"
                     : "",
                 plan->log);
        _exit (RESTORE_EXIT);
    }
    for (int i = 0; i < nfds; i++)
        if (fds[i] >= 0)
            (void)close (fds[i]);
    /* The images CRIU read are in the restored memory now. */
    if (unpacked[0])
        (void)safedir_rmtree (unpacked, errs, sizeof (errs));
    init = proc_first_child (1);
    if (init <= 0) {
        dprintf (res, "Ecriu restored %s but no process came back", plan->imgdir);
        _exit (RESTORE_EXIT);
    }
    /* An image is the user's data: whatever it asked for, the tree must
     * carry exactly the task's ids and no capability before it runs. */
    if (taskns_check_tree (init, as->uid, as->gid, err, sizeof (err)) < 0) {
        taskns_signal_tree (init, SIGKILL);
        dprintf (res,
                 "Egeneration refused: %s: the image (%s) asks for more than its "
                 "user has, so it was altered during or after the dump; nothing of it ran",
                 err, plan->imgdir);
        _exit (RESTORE_EXIT);
    }
    if (taskns_drop (as, err, sizeof (err)) < 0) {
        taskns_signal_tree (init, SIGKILL);
        dprintf (res, "E%s", err);
        _exit (RESTORE_EXIT);
    }
    if (!(flags & RESTORE_STOPPED))
        taskns_signal_tree (init, SIGCONT);
    (void)write (res, "O", 1);
    (void)close (res);
    tasktree_hold (init);
}

pid_t restore_tree (const struct restore_plan *plan, struct taskns_as *as, const int fds[6],
                    int flags, char *err, size_t errlen)
{
    return restore_tree_ctl (plan, as, fds, &fds[3], fds[3] >= 0 ? 1 : 0, flags, err, errlen);
}

pid_t restore_tree_ctl (const struct restore_plan *plan, struct taskns_as *as, const int fds[6],
                        const int *ctl, int nctl, int flags, char *err, size_t errlen)
{
    static char inherit[RESTORE_MAX_CTL + 6][PATH_MAX + 32];
    char work[PATH_MAX], unpacked[PATH_MAX] = "", note[2048];
    const char *argv[32 + 2 * RESTORE_MAX_CTL];
    int res[2], ninh = 0, ac = 0, all[RESTORE_MAX_CTL + 6], nall = 0;
    pid_t holder;

    if (nctl > RESTORE_MAX_CTL)
        nctl = RESTORE_MAX_CTL;
    err[0] = '\0';
    /* Each process that used verbs needs its own: CRIU would refuse the
     * image, later and less clearly, for the one missing. */
    if (nctl > 0 && nctl < plan->nctl) {
        return errnprintf (err, errlen, EINVAL,
                           "%d processes of %s used verbs at the dump, and only %d "
                           "control connection%s for libibcr %s handed in (a restorer older than "
                           "the generation?)",
                           plan->nctl, plan->imgdir, nctl, nctl == 1 ? "" : "s",
                           nctl == 1 ? "was" : "were");
    }
    if (taskns_load_ids (as, err, errlen) < 0)
        return -1;
    /* Root's folder for criu's log, made or checked like staging. */
    if (safedir_ensure (plan->workdir, 0700, err, errlen) < 0
        || restore_workdir (plan, as->uid, as->gid, work, sizeof (work), err, errlen) < 0)
        return -1;
    if (zimg_dir_compressed (plan->imgdir)) {
        char why[2048];
        if (restore_unpack (plan, as->uid, as->gid, unpacked, sizeof (unpacked), why, sizeof (why))
            < 0) {
            snprintf (err, errlen, "cannot decompress %s: %s", plan->imgdir, why);
            return -1;
        }
    }
    if (restore_rollback (as, unpacked[0] ? unpacked : plan->imgdir, plan, note, sizeof (note), err,
                          errlen)
        < 0)
        goto error;
    (void)unlink (plan->log);
    argv[ac++] = plan->criu;
    argv[ac++] = "restore";
    argv[ac++] = "-D";
    argv[ac++] = unpacked[0] ? unpacked : plan->imgdir;
    argv[ac++] = "-o";
    argv[ac++] = plan->log;
    argv[ac++] = "-W";
    argv[ac++] = work;
    /* CRIU runs as PID 2 of the new namespace (taskns.h): the restored
     * init becomes the holder's child, stopped until it was checked. */
    argv[ac++] = "--restore-detached";
    argv[ac++] = "--restore-sibling";
    argv[ac++] = "--leave-stopped";
    /* Stay in the cgroups the caller is in (a new Slurm step's), instead
     * of going back to the dumped ones. */
    argv[ac++] = "--manage-cgroups=ignore";
    for (int fd = 0; fd <= 2; fd++) {
        const char *k = plan->stdio[fd];
        int dup = 0;
        /* Devices (/dev/null, a terminal) are reopened by path unless
         * they were dumped as external files; a pipe, a socket or a
         * regular file that grew must be handed in. */
        if (!*k || !strncmp (k, "/dev/", 5) || fds[fd] < 0)
            continue;
        for (int j = 0; j < fd; j++)
            dup |= !strcmp (k, plan->stdio[j]);
        if (dup || fcntl (fds[fd], F_SETFD, 0) < 0)
            continue;
        snprintf (inherit[ninh], sizeof (inherit[0]), "fd[%d]:%s", fds[fd],
                  k[0] == '/' ? k + 1 : k);
        argv[ac++] = "--inherit-fd";
        argv[ac++] = inherit[ninh++];
    }
    /* libibcr's control socket of each process that used verbs led out
     * of the tree at the dump (external); a fresh one ibcrd knows as
     * this rank's takes its place. */
    for (int i = 0; i < nctl && i < plan->nctl; i++)
        if (ctl[i] >= 0 && plan->ctl_inos[i] > 0 && fcntl (ctl[i], F_SETFD, 0) == 0) {
            snprintf (inherit[ninh], sizeof (inherit[0]), "fd[%d]:socket:[%lld]", ctl[i],
                      plan->ctl_inos[i]);
            argv[ac++] = "--inherit-fd";
            argv[ac++] = inherit[ninh++];
        }
    /* So did the PMI socket to the dumped step's slurmstepd; the new
     * step's, already greeted (pmi.h), takes its place. */
    if (fds[4] >= 0 && plan->pmi_ino > 0 && fcntl (fds[4], F_SETFD, 0) == 0) {
        snprintf (inherit[ninh], sizeof (inherit[0]), "fd[%d]:socket:[%lld]", fds[4],
                  plan->pmi_ino);
        argv[ac++] = "--inherit-fd";
        argv[ac++] = inherit[ninh++];
    }
    /* And the task's end of the PMIx relay; the new relay already said
     * the rank's connect message to the new step's server (pmi.h). */
    if (fds[5] >= 0 && plan->pmix_ino > 0 && fcntl (fds[5], F_SETFD, 0) == 0) {
        snprintf (inherit[ninh], sizeof (inherit[0]), "fd[%d]:socket:[%lld]", fds[5],
                  plan->pmix_ino);
        argv[ac++] = "--inherit-fd";
        argv[ac++] = inherit[ninh++];
    }
    argv[ac] = NULL;

    if (taskns_unshare_mnt (err, errlen) < 0 || taskns_unshare_pid (err, errlen) < 0)
        goto error;
    if (pipe2 (res, O_CLOEXEC) < 0) {
        snprintf (err, errlen, "cannot make a pipe: %s", strerror (errno));
        goto error;
    }
    if ((holder = fork ()) < 0) {
        snprintf (err, errlen, "cannot fork the task's holder: %s", strerror (errno));
        (void)close (res[0]);
        (void)close (res[1]);
        goto error;
    }
    if (holder == 0) {
        (void)close (res[0]);
        for (int i = 0; i < 6; i++)
            if (i != 3)
                all[nall++] = fds[i];
        for (int i = 0; i < nctl; i++)
            all[nall++] = ctl[i];
        restore_holder (plan, as, flags, res[1], (char *const *)argv, all, nall, unpacked);
    }
    (void)close (res[1]);
    {
        char msg[2048];
        ssize_t n;
        do
            n = read (res[0], msg, sizeof (msg) - 1);
        while (n < 0 && errno == EINTR);
        (void)close (res[0]);
        if (n <= 0) {
            snprintf (err, errlen, "the restore's holder ended without a word");
            (void)waitpid (holder, NULL, 0);
            return -1;
        }
        msg[n] = '\0';
        if (msg[0] != 'O') {
            snprintf (err, errlen, "%s", msg + 1);
            (void)waitpid (holder, NULL, 0);
            return -1;
        }
    }
    if (note[0])
        snprintf (err, errlen, "output files rolled back to the dump: %s", note);
    return holder;
error:
    if (unpacked[0]) {
        char why[256];
        (void)safedir_rmtree (unpacked, why, sizeof (why));
    }
    return -1;
}
