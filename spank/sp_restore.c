/* sp_restore.c - see sp_restore.h.
 *
 * The restorer is a child of the task process, forked while it is still
 * root; slurmstepd then makes the task the user for good (setuid), so the
 * restorer is the only way back to root once the task is in its cgroups
 * and has its stdio.  It is not a subreaper: when criu (its child) exits,
 * the restored init goes to the task process, which is.
 *
 * Wire between task and restorer (a SOCK_SEQPACKET pair):
 *   task -> restorer   "go": the task's pid and a mask of what follows
 *                      (1: libibcr's new control socket, 2: the new step's
 *                      PMI socket), with fds 0, 1, 2 attached, then those
 *                      in that order
 *   restorer -> task   "O<pid>" the restored init, or "E<why>"
 * A restorer whose task closes the socket without "go" exits at once.
 */
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/manifest.h"
#include "common/proto.h"
#include "common/proc.h"
#include "common/safedir.h"
#include "common/store.h"
#include "common/taskns.h"
#include "common/zimg.h"
#include "common/criu.h"
#include "sp_cgroup.h"
#include "sp_ns.h"
#include "sp_restore.h"

/* Exit code of a restorer that failed (as env(1) for "cannot run"). */
#define SP_RESTORE_EXIT 125

static json_object *sp_restore_task_of (json_object *m, uint32_t rank)
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
static void sp_restore_note (char *note, size_t len, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
static void sp_restore_note (char *note, size_t len, const char *fmt, ...)
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

/* Check generation g's layout against this step; fill plan.  0, or -1
 * with err. */
static int sp_restore_layout (const struct sp_restore_in *in, int g, json_object *m,
                              const char *dir, struct sp_restore_plan *plan, char *err,
                              size_t errlen)
{
    const char *step = proto_get_str (m, "step", NULL);
    int64_t size = proto_get_int (m, "size", -1);
    json_object *task, *stdio;
    struct stat sb;

    if (step && strcmp (step, in->step)) {
        snprintf (err, errlen, "job %s generation %d is a checkpoint of step %s, and this "
                  "is step %s: not restoring it, not starting afresh either; run the "
                  "checkpointed step first (or remove the job's checkpoints with "
                  "'ibcr prune')", in->job, g, step, in->step);
        return -1;
    }
    if (size >= 0 && size != (int64_t)in->ntasks) {
        snprintf (err, errlen, "job %s generation %d holds %lld tasks and step %s now has "
                  "%u: a checkpoint restores only into the same number of tasks; requeue "
                  "with -n %lld (or remove the job's checkpoints with 'ibcr prune')",
                  in->job, g, (long long)size, in->step, in->ntasks, (long long)size);
        return -1;
    }
    if ((size_t)snprintf (plan->imgdir, sizeof (plan->imgdir), "%s/task-%u", dir, in->rank)
        >= sizeof (plan->imgdir) || stat (plan->imgdir, &sb) < 0 || !S_ISDIR (sb.st_mode)) {
        snprintf (err, errlen, "job %s generation %d has no image for task %u (%s): the "
                  "step's layout differs from the checkpoint's", in->job, g, in->rank,
                  plan->imgdir);
        return -1;
    }
    memset (plan->stdio, 0, sizeof (plan->stdio));
    if ((task = sp_restore_task_of (m, in->rank))
        && json_object_object_get_ex (task, "stdio", &stdio)) {
        for (int fd = 0; fd <= 2; fd++) {
            char key[4];
            snprintf (key, sizeof (key), "%d", fd);
            snprintf (plan->stdio[fd], sizeof (plan->stdio[fd]), "%s",
                      proto_get_str (stdio, key, ""));
        }
    }
    plan->ctl_ino = task ? (long long)proto_get_int (task, "ctl_ino", 0) : 0;
    plan->pmi_ino = task ? (long long)proto_get_int (task, "pmi_ino", 0) : 0;
    plan->gen = g;
    return 0;
}

int sp_restore_pick (const struct sp_restore_in *in, struct sp_restore_plan *plan,
                     char *note, size_t notelen, char *err, size_t errlen)
{
    struct conf *c;
    json_object *gens = NULL;
    char cerr[1024];
    int rc = -1, damaged = 0;

    note[0] = '\0';
    memset (plan, 0, sizeof (*plan));
    c = conf_load (in->conf, in->node, cerr, sizeof (cerr));
    /* As ibcrd does: no file at the default place, the built-in values. */
    if (!c && errno == ENOENT && !in->conf_given)
        c = conf_create (in->node);
    if (!c) {
        snprintf (err, errlen, "cannot read ibcrd's configuration to find the job's "
                  "checkpoints: %s (plugstack.conf conf=)", cerr);
        return -1;
    }
    struct store st = { .root = c->storage, .cluster = c->cluster };
    snprintf (plan->looked, sizeof (plan->looked), "%.2000s/%.1000s", c->storage, c->cluster);
    if (store_list (&st, in->job, 0, &gens, cerr, sizeof (cerr)) < 0) {
        if (errno == ENOENT) {
            rc = 0;
            goto out;
        }
        snprintf (err, errlen, "cannot list the checkpoints of job %s: %s", in->job, cerr);
        goto out;
    }
    if (json_object_array_length (gens) == 0) {
        rc = 0;
        goto out;
    }
    for (int i = (int)json_object_array_length (gens) - 1; i >= 0; i--) {
        json_object *e = json_object_array_get_idx (gens, i), *m, *problems;
        int g = (int)proto_get_int (e, "generation", 0), n;
        char dir[PATH_MAX];

        if (!json_object_object_get_ex (e, "manifest", &m)
            || store_gen_path (&st, in->job, g, dir, sizeof (dir)) < 0)
            continue;
        problems = json_object_new_array ();
        n = manifest_verify (dir, m, problems, NULL);
        if (n != 0) {
            json_object *p = json_object_array_get_idx (problems, 0);
            sp_restore_note (note, notelen, "generation %d is damaged (%s: %s), falling "
                             "back to the previous one", g,
                             p ? proto_get_str (p, "path", "?") : "?",
                             p ? proto_get_str (p, "problem", "?") : strerror (errno));
            json_object_put (problems);
            damaged++;
            continue;
        }
        json_object_put (problems);
        if (sp_restore_layout (in, g, m, dir, plan, err, errlen) < 0)
            goto out;
        snprintf (plan->criu, sizeof (plan->criu), "%s", c->criu);
        snprintf (plan->workdir, sizeof (plan->workdir), "%s/restore", c->staging);
        if ((size_t)snprintf (plan->log, sizeof (plan->log), "%.3900s/%.40s.%.40s.%u.log",
                              plan->workdir, in->job, in->step, in->rank)
            >= sizeof (plan->log)) {
            snprintf (err, errlen, "ibcrd.conf staging= is too long a path");
            goto out;
        }
        rc = 1;
        goto out;
    }
    snprintf (err, errlen, "job %s has %d committed generation%s and every one is damaged "
              "(%s): nothing to restore, and a fresh start would lose the work silently; "
              "see 'ibcr verify %s'", in->job, damaged, damaged == 1 ? "" : "s", note,
              in->job);
out:
    json_object_put (gens);
    conf_destroy (c);
    return rc;
}

/* The first lines of criu's log that say "Error", joined. */

static void sp_restore_reply (int sock, char kind, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));
static void sp_restore_reply (int sock, char kind, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    int n;

    buf[0] = kind;
    va_start (ap, fmt);
    n = vsnprintf (buf + 1, sizeof (buf) - 1, fmt, ap);
    va_end (ap);
    if (n < 0)
        n = 0;
    if (n > (int)sizeof (buf) - 2)
        n = (int)sizeof (buf) - 2;
    (void)send (sock, buf, (size_t)n + 1, MSG_NOSIGNAL);
}

/* Receive "go": the task's pid and its fds 0..2 into fds[], the control
 * socket into fds[3] and the PMI socket into fds[4] (-1 when none).  0,
 * or -1. */
static int sp_restore_recv_go (int sock, pid_t *task, int fds[5])
{
    char cbuf[CMSG_SPACE (5 * sizeof (int))];
    struct msghdr mh = { 0 };
    struct cmsghdr *cm;
    struct iovec iov;
    int32_t word[2];
    int got[5], n_fds, want = 3;
    ssize_t n;

    iov.iov_base = word;
    iov.iov_len = sizeof (word);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = sizeof (cbuf);
    do
        n = recvmsg (sock, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof (word) || !(cm = CMSG_FIRSTHDR (&mh))
        || cm->cmsg_type != SCM_RIGHTS || (word[1] & ~3))
        return -1;
    want += (word[1] & 1) + ((word[1] >> 1) & 1);
    n_fds = (int)((cm->cmsg_len - CMSG_LEN (0)) / sizeof (int));
    if (n_fds != want)
        return -1;
    memcpy (got, CMSG_DATA (cm), (size_t)n_fds * sizeof (int));
    memcpy (fds, got, 3 * sizeof (int));
    fds[3] = fds[4] = -1;
    n_fds = 3;
    if (word[1] & 1)
        fds[3] = got[n_fds++];
    if (word[1] & 2)
        fds[4] = got[n_fds++];
    *task = (pid_t)word[0];
    return 0;
}

/* The real uid and gid of the task process, which is the job's user by
 * now (slurmstepd made it so); -1 when it is gone. */
static int sp_restore_ids (pid_t task, uid_t *uid, gid_t *gid)
{
    char path[64], line[256];
    FILE *f;

    *uid = (uid_t)-1;
    *gid = (gid_t)-1;
    snprintf (path, sizeof (path), "/proc/%ld/status", (long)task);
    if (!(f = fopen (path, "re")))
        return -1;
    while (fgets (line, sizeof (line), f)) {
        unsigned long v;
        if (sscanf (line, "Uid: %lu", &v) == 1)
            *uid = (uid_t)v;
        else if (sscanf (line, "Gid: %lu", &v) == 1)
            *gid = (gid_t)v;
    }
    fclose (f);
    return *uid == (uid_t)-1 || *gid == (gid_t)-1 ? -1 : 0;
}

/* A fresh slot beside criu's log, <workdir>/<log name><suffix>: its name
 * and path, whatever was there removed (by fd, never following a link).
 * The workdir's fd (root's, through trusted folders), or -1 with err. */
static int sp_restore_slot (const struct sp_restore_plan *plan, const char *suffix, char *name,
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
static int sp_restore_workdir (const struct sp_restore_plan *plan, uid_t uid, gid_t gid,
                               char *path, size_t len, char *err, size_t errlen)
{
    char name[256];
    int dfd, fd;

    if ((dfd = sp_restore_slot (plan, ".work", name, sizeof (name), path, len, err,
                                errlen)) < 0)
        return -1;
    /* Root's, and only traversable by others: each user's criu reaches
     * its own work folder in it. */
    if (fchmod (dfd, 0711) < 0) {
        snprintf (err, errlen, "cannot set the mode of %.1500s: %s", plan->workdir, strerror (errno));
        close (dfd);
        return -1;
    }
    if ((fd = safedir_mkdirat (dfd, name, 0700, NULL)) < 0 || fchown (fd, uid, gid) < 0) {
        snprintf (err, errlen, "cannot make criu's work folder %.1500s: %s", path, strerror (errno));
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
static int sp_restore_unpack (const struct sp_restore_plan *plan, uid_t uid, gid_t gid,
                              char *path, size_t len, char *err, size_t errlen)
{
    char name[256];
    struct dirent *e;
    int dfd, fd = -1;
    DIR *d;

    if ((dfd = sp_restore_slot (plan, ".img", name, sizeof (name), path, len, err,
                                errlen)) < 0)
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
            snprintf (err, errlen, "cannot give %.1500s to the job's user: %s", path,
                      strerror (errno));
            closedir (d);
            goto error;
        }
    if (fchown (dirfd (d), uid, gid) < 0) {
        snprintf (err, errlen, "cannot give %.1500s to the job's user: %s", path,
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

/* PID 1 of the restored task's new namespaces (taskns.h), root until
 * the tree is checked: mount /proc, run CRIU as the task's user (PID 2),
 * check what it restored, let it run, then hold it as sp_ns's holder
 * does.  Writes "O" or "E<why>" on res; never returns. */
static void __attribute__ ((noreturn))
sp_restore_holder (const struct sp_restore_plan *plan, pid_t task, uid_t uid, gid_t gid,
                   int res, char *const argv[], const int fds[5], const char *unpacked)
{
    struct taskns_as as = { .cred_pid = task };
    char err[2048], errs[1500];
    int keep[5], nkeep = 0, status;
    pid_t criu, init = 0;

    (void)prctl (PR_SET_NAME, "ibcr-holder", 0, 0, 0);
    as.uid = uid;
    /* The task's ids first: once the namespace's /proc is mounted, this
     * process no longer sees the task process in it. */
    if (taskns_load_ids (&as, err, sizeof (err)) < 0 || taskns_setup_proc (0, err, sizeof (err)) < 0) {
        dprintf (res, "Ecannot set up the restored task's namespace: %s",
                 err);
        _exit (SP_RESTORE_EXIT);
    }
    for (int i = 0; i < 5; i++)
        if (fds[i] >= 0)
            keep[nkeep++] = fds[i];
    if ((criu = criu_start_as (argv, plan->log, keep, nkeep, &as)) < 0) {
        dprintf (res, "Ecannot fork criu: %s", strerror (errno));
        _exit (SP_RESTORE_EXIT);
    }
    for (int i = 0; i < 5; i++)
        if (fds[i] >= 0)
            (void)close (fds[i]);
    while (waitpid (criu, &status, 0) < 0 && errno == EINTR)
        ;
    /* The images CRIU read are in the restored memory now. */
    if (unpacked[0])
        (void)safedir_rmtree (unpacked, errs, sizeof (errs));
    if (!WIFEXITED (status) || WEXITSTATUS (status) != 0) {
        criu_log_errors (plan->log, 3, errs, sizeof (errs));
        if (WIFEXITED (status) && WEXITSTATUS (status) == 127)
            dprintf (res, "Ecannot run %s (ibcrd.conf criu=)", plan->criu);
        else
            dprintf (res, "Ecriu restore of %s failed: %s; log: %s", plan->imgdir,
                     errs[0] ? errs : "no error line in its log", plan->log);
        _exit (SP_RESTORE_EXIT);
    }
    init = proc_first_child (1);
    if (init <= 0) {
        dprintf (res, "Ecriu restored %s but no process came back", plan->imgdir);
        _exit (SP_RESTORE_EXIT);
    }
    /* An image is the user's data: whatever it asked for, the tree must
     * carry exactly the job's ids and no capability before it runs. */
    if (taskns_check_tree (init, uid, gid, err, sizeof (err)) < 0) {
        taskns_signal_tree (init, SIGKILL);
        dprintf (res, "Egeneration refused: %s: the image (%s) asks for more than its "
                 "user has, so it was altered during or after the dump; nothing of it ran",
                 err, plan->imgdir);
        _exit (SP_RESTORE_EXIT);
    }
    if (taskns_drop (&as, err, sizeof (err)) < 0) {
        taskns_signal_tree (init, SIGKILL);
        dprintf (res, "E%s", err);
        _exit (SP_RESTORE_EXIT);
    }
    taskns_signal_tree (init, SIGCONT);
    (void)write (res, "O", 1);
    (void)close (res);
    sp_ns_hold (init);
}

/* The restorer, as root: never returns. */
static void __attribute__ ((noreturn))
sp_restore_restorer (const struct sp_restore_plan *plan, int sock)
{
    char inherit[5][PATH_MAX + 32], err[2048] = "", work[PATH_MAX], unpacked[PATH_MAX] = "";
    const char *argv[32];
    int fds[5], res[2], ninh = 0, ac = 0, nul, fd;
    pid_t task, holder;
    uid_t uid;
    gid_t gid;

    (void)prctl (PR_SET_NAME, "ibcr-restorer", 0, 0, 0);
    (void)prctl (PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
    /* Nothing of slurmstepd's stays open here, and 0..2 are taken so the
     * task's fds arrive above them. */
    if ((nul = open ("/dev/null", O_RDWR)) < 0)
        _exit (SP_RESTORE_EXIT);
    for (fd = 0; fd <= 2; fd++)
        if (fd != nul)
            (void)dup2 (nul, fd);
    if (nul > 2)
        (void)close (nul);
    {
        DIR *d = opendir ("/proc/self/fd");
        struct dirent *e;
        if (d) {
            while ((e = readdir (d))) {
                fd = atoi (e->d_name);
                if (fd > 2 && fd != sock && fd != dirfd (d))
                    (void)close (fd);
            }
            closedir (d);
        }
    }
    for (int i = 1; i < NSIG; i++)
        (void)signal (i, SIG_DFL);
    {
        sigset_t none;
        sigemptyset (&none);
        (void)sigprocmask (SIG_SETMASK, &none, NULL);
    }
    if (sp_restore_recv_go (sock, &task, fds) < 0)
        _exit (0);      /* the task did not ask: nothing to do */
    if (sp_cgroup_join (task, err, sizeof (err)) < 0) {
        sp_restore_reply (sock, 'E', "cannot put the restore into the step's cgroups: %s",
                          err);
        _exit (SP_RESTORE_EXIT);
    }
    if (sp_restore_ids (task, &uid, &gid) < 0) {
        sp_restore_reply (sock, 'E', "the task process %ld is gone", (long)task);
        _exit (SP_RESTORE_EXIT);
    }
    /* Root's folder for criu's log, made or checked like staging. */
    if (safedir_ensure (plan->workdir, 0700, err, sizeof (err)) < 0
        || sp_restore_workdir (plan, uid, gid, work, sizeof (work), err, sizeof (err)) < 0) {
        sp_restore_reply (sock, 'E', "%s", err);
        _exit (SP_RESTORE_EXIT);
    }
    if (zimg_dir_compressed (plan->imgdir)) {
        if (sp_restore_unpack (plan, uid, gid, unpacked, sizeof (unpacked), err,
                               sizeof (err)) < 0) {
            sp_restore_reply (sock, 'E', "cannot decompress %s: %s", plan->imgdir, err);
            _exit (SP_RESTORE_EXIT);
        }
    }
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
    /* Stay in the cgroups just joined, the new step's, instead of going
     * back to the dumped step's. */
    argv[ac++] = "--manage-cgroups=ignore";
    for (fd = 0; fd <= 2; fd++) {
        const char *k = plan->stdio[fd];
        int dup = 0;
        /* Devices (/dev/null, a terminal) are reopened by path unless
         * they were dumped as external files; a pipe, a socket or a
         * regular file that grew must be handed in. */
        if (!*k || (!strncmp (k, "/dev/", 5)))
            continue;
        for (int j = 0; j < fd; j++)
            dup |= !strcmp (k, plan->stdio[j]);
        if (dup)
            continue;
        if (fcntl (fds[fd], F_SETFD, 0) < 0)
            continue;
        snprintf (inherit[ninh], sizeof (inherit[0]), "fd[%d]:%s", fds[fd],
                  k[0] == '/' ? k + 1 : k);
        argv[ac++] = "--inherit-fd";
        argv[ac++] = inherit[ninh++];
    }
    /* libibcr's control socket led out of the tree at the dump (external);
     * a fresh one ibcrd knows as this rank's takes its place. */
    if (fds[3] >= 0 && plan->ctl_ino > 0 && fcntl (fds[3], F_SETFD, 0) == 0) {
        snprintf (inherit[ninh], sizeof (inherit[0]), "fd[%d]:socket:[%lld]", fds[3],
                  plan->ctl_ino);
        argv[ac++] = "--inherit-fd";
        argv[ac++] = inherit[ninh++];
    }
    /* So did the PMI socket to the dumped step's slurmstepd; the new
     * step's, already greeted (common/pmi.h), takes its place. */
    if (fds[4] >= 0 && plan->pmi_ino > 0 && fcntl (fds[4], F_SETFD, 0) == 0) {
        snprintf (inherit[ninh], sizeof (inherit[0]), "fd[%d]:socket:[%lld]", fds[4],
                  plan->pmi_ino);
        argv[ac++] = "--inherit-fd";
        argv[ac++] = inherit[ninh++];
    }
    argv[ac] = NULL;

    if (taskns_unshare_mnt (err, sizeof (err)) < 0 || taskns_unshare_pid (err, sizeof (err)) < 0
        || pipe2 (res, O_CLOEXEC) < 0) {
        sp_restore_reply (sock, 'E', "%s", err[0] ? err : strerror (errno));
        _exit (SP_RESTORE_EXIT);
    }
    if ((holder = fork ()) < 0) {
        sp_restore_reply (sock, 'E', "cannot fork the task's holder: %s", strerror (errno));
        _exit (SP_RESTORE_EXIT);
    }
    if (holder == 0) {
        (void)close (sock);
        (void)close (res[0]);
        sp_restore_holder (plan, task, uid, gid, res[1], (char *const *)argv, fds, unpacked);
    }
    for (fd = 0; fd <= 4; fd++)
        if (fds[fd] >= 0)
            (void)close (fds[fd]);
    (void)close (res[1]);
    {
        char msg[2048];
        ssize_t n;
        do
            n = read (res[0], msg, sizeof (msg) - 1);
        while (n < 0 && errno == EINTR);
        if (n <= 0) {
            sp_restore_reply (sock, 'E', "the restore's holder ended without a word");
            _exit (SP_RESTORE_EXIT);
        }
        msg[n] = '\0';
        if (msg[0] != 'O') {
            sp_restore_reply (sock, 'E', "%s", msg + 1);
            _exit (SP_RESTORE_EXIT);
        }
    }
    sp_restore_reply (sock, 'O', "%ld", (long)holder);
    _exit (0);
}

int sp_restore_prepare (const struct sp_restore_plan *plan, char *err, size_t errlen)
{
    int sv[2];
    pid_t pid;

    if (socketpair (AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        snprintf (err, errlen, "cannot make a socket pair: %s", strerror (errno));
        return -1;
    }
    if ((pid = fork ()) < 0) {
        snprintf (err, errlen, "cannot fork the restorer: %s", strerror (errno));
        (void)close (sv[0]);
        (void)close (sv[1]);
        return -1;
    }
    if (pid == 0) {
        (void)close (sv[0]);
        sp_restore_restorer (plan, sv[1]);
    }
    (void)close (sv[1]);
    return sv[0];
}

pid_t sp_restore_run (int fd, const struct sp_restore_plan *plan, int ctl_fd, int pmi_fd,
                      char *err, size_t errlen)
{
    char cbuf[CMSG_SPACE (5 * sizeof (int))], buf[4096];
    struct msghdr mh = { 0 };
    struct cmsghdr *cm;
    struct iovec iov;
    int32_t word[2] = { (int32_t)getpid (), 0 };
    int fds[5] = { 0, 1, 2 };
    size_t nfds = 3;
    ssize_t n;
    long pid;

    (void)plan;
    if (ctl_fd >= 0) {
        fds[nfds++] = ctl_fd;
        word[1] |= 1;
    }
    if (pmi_fd >= 0) {
        fds[nfds++] = pmi_fd;
        word[1] |= 2;
    }
    /* The restored init must become our child, and stay a zombie until we
     * wait for it. */
    (void)signal (SIGCHLD, SIG_DFL);
    if (prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
        snprintf (err, errlen, "cannot become a child subreaper: %s", strerror (errno));
        goto error;
    }
    iov.iov_base = word;
    iov.iov_len = sizeof (word);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf;
    mh.msg_controllen = CMSG_SPACE (nfds * sizeof (int));
    cm = CMSG_FIRSTHDR (&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN (nfds * sizeof (int));
    memcpy (CMSG_DATA (cm), fds, nfds * sizeof (int));
    if (sendmsg (fd, &mh, MSG_NOSIGNAL) < 0) {
        snprintf (err, errlen, "the restorer is gone before the restore: %s",
                  strerror (errno));
        goto error;
    }
    do
        n = recv (fd, buf, sizeof (buf) - 1, 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
        snprintf (err, errlen, "the restorer ended without a word: %s",
                  n < 0 ? strerror (errno) : "closed");
        goto error;
    }
    buf[n] = '\0';
    (void)close (fd);
    if (buf[0] != 'O' || sscanf (buf + 1, "%ld", &pid) != 1 || pid <= 0) {
        snprintf (err, errlen, "%s", buf[0] == 'E' ? buf + 1 : "the restorer said nonsense");
        return -1;
    }
    return (pid_t)pid;
error:
    (void)close (fd);
    return -1;
}
