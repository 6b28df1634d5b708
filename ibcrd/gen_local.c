/* gen_local.c - the phases of a generation on this node's tasks only:
 * what the leader does for its own tasks and what a member's worker does
 * when the leader asks (gen_member.c).  No decision to abort is taken
 * here: each function reports and the leader decides (gen.c). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/criu.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/store.h"
#include "gen.h"
#include "ibcr/ckpt_proto.h"
#include "imgcopy.h"
#include "libctl.h"
#include "sockdiag.h"

double gen_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The tasks that have a libibcr control connection (used verbs). */
static int ctl_list (const struct gen *g, int *fds, int *ranks)
{
    int n = 0;
    for (int i = 0; i < g->ntasks; i++)
        if (g->tasks[i].ctl_fd >= 0) {
            fds[n] = g->tasks[i].ctl_fd;
            ranks[n++] = g->tasks[i].rank;
        }
    return n;
}

/* Append s to dst (size len, holding *off bytes), cutting it to fit. */
void gen_append (char *dst, size_t len, size_t *off, const char *s)
{
    size_t n = strlen (s);
    if (*off + 1 >= len)
        return;
    if (n > len - 1 - *off)
        n = len - 1 - *off;
    memmove (dst + *off, s, n);
    *off += n;
    dst[*off] = '\0';
}

int gen_fail (struct gen *g, const char *phase, const char *why)
{
    char tmp[sizeof (g->err)];
    size_t off = 0;

    gen_append (tmp, sizeof (tmp), &off, phase);
    gen_append (tmp, sizeof (tmp), &off, ": ");
    gen_append (tmp, sizeof (tmp), &off, why);
    memcpy (g->err, tmp, off + 1);
    return -1;
}

/* The daemon that owns the job's registrations died (kill -9, crash): its
 * successor knows nothing of this generation, so it must not commit. */
void gen_progress (struct gen *g, const char *phase, uint64_t done, uint64_t total, int force)
{
    double now = gen_now_ms ();
    json_object *o;

    if (g->progress_fd < 0 || (!force && now - g->progress_last < 200))
        return;
    g->progress_last = now;
    if (!(o = proto_new ("progress")))
        return;
    proto_set_str (o, "job", g->job);
    proto_set_int (o, "generation", g->gen);
    proto_set_str (o, "phase", phase);
    proto_set_int (o, "done", (int64_t)done);
    proto_set_int (o, "total", (int64_t)total);
    /* A client that left or stopped reading only loses its progress. */
    if (proto_send (g->progress_fd, o) < 0)
        g->progress_fd = -1;
    json_object_put (o);
}

int gen_daemon_gone (struct gen *g, const char *phase)
{
    char why[256];

    if (!g->daemon || getppid () == g->daemon)
        return 0;
    snprintf (why, sizeof (why), "ibcrd (pid %ld) died during the %s; the generation is "
              "void (restart ibcrd; the job runs on)", (long)g->daemon, phase);
    return gen_fail (g, phase, why);
}

/* Quiesce: application threads stop at libibcr's gate. */
int genl_quiesce (struct gen *g)
{
    int fds[g->ntasks + 1], ranks[g->ntasks + 1], n = ctl_list (g, fds, ranks);
    char err[1024];

    if (n && libctl_round (fds, ranks, n, CKPT_QUIESCE, NULL, g->gen, CKPT_QUIESCED, NULL,
                           (int)g->conf->timeout_quiesce, err, sizeof (err)) < 0)
        return gen_fail (g, "quiesce", err);
    g->quiesced = 1;
    return 0;
}

/* One drain round: every task's report appended to reports. */
int genl_drain_round (struct gen *g, int round, json_object *reports)
{
    int fds[g->ntasks + 1], ranks[g->ntasks + 1], n = ctl_list (g, fds, ranks);
    json_object *rep[g->ntasks + 1], *x;
    char err[1024];

    if (!n)
        return 0;
    x = json_object_new_object ();
    json_object_object_add (x, "round", json_object_new_int (round));
    int rc = libctl_round (fds, ranks, n, CKPT_DRAIN, x, g->gen, CKPT_DRAIN_REPORT, rep,
                           (int)g->conf->timeout_drain, err, sizeof (err));
    json_object_put (x);
    if (rc < 0)
        return gen_fail (g, "drain", err);
    for (int i = 0; i < n; i++)
        json_object_array_add (reports, rep[i]);
    return 0;
}

/* Release: libibcr destroys every real verbs object and closes the
 * device, so CRIU sees a process that never used one. */
int genl_release (struct gen *g)
{
    int fds[g->ntasks + 1], ranks[g->ntasks + 1], n = ctl_list (g, fds, ranks);
    char err[1024];

    if (!n)
        return 0;
    /* From here on the objects are gone even if some task failed: the
     * abort path must rebuild. */
    g->released = 1;
    if (libctl_round (fds, ranks, n, CKPT_RELEASE, NULL, g->gen, CKPT_RELEASED, NULL,
                      (int)g->conf->timeout_quiesce, err, sizeof (err)) < 0)
        return gen_fail (g, "release", err);
    return 0;
}

static int mkdir_p (const char *path, mode_t mode)
{
    char buf[PATH_MAX];

    if (snprintf (buf, sizeof (buf), "%s", path) >= (int)sizeof (buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir (buf, 0755) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir (buf, mode) < 0 && errno != EEXIST ? -1 : 0;
}

/* One CRIU dump at a time on this node, whatever the job: two dumps of
 * two jobs' inits at once (a drain checkpoints every job of the node)
 * were seen to fail one of them inside CRIU ("Can't create a directory
 * (-17) | can't get /proc fd").  An flock on a file of the staging
 * folder, which every worker of this daemon shares; it goes with the
 * worker if that dies.  The fd, or -1 (then the dump runs unserialised,
 * as before, and the log says why). */
static int dump_lock (struct gen *g)
{
    char path[PATH_MAX + 32];
    int fd;

    snprintf (path, sizeof (path), "%s/.criu-dump.lock", g->conf->staging);
    /* The node's first dump may come before staging exists (the task
     * folders below are made with their parents, as here). */
    fd = open (path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == ENOENT && mkdir_p (g->conf->staging, 0755) == 0)
        fd = open (path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        log_err (errno, "job %s gen %d: cannot open %s; dumps of this node's jobs may "
                 "overlap", g->job, g->gen, path);
        return -1;
    }
    while (flock (fd, LOCK_EX) < 0) {
        if (errno != EINTR) {
            log_err (errno, "job %s gen %d: cannot lock %s; dumps of this node's jobs may "
                     "overlap", g->job, g->gen, path);
            close (fd);
            return -1;
        }
    }
    return fd;
}

/* CRIU on each task's init, to node-local staging.  libibcr's control
 * socket leads out of the tree: CRIU is told it is external, and a
 * restart hands a fresh one back in its place. */
static int dump_tasks (struct gen *g)
{
    double t0 = gen_now_ms ();
    char err[1536];

    for (int i = 0; i < g->ntasks; i++) {
        struct gen_task *t = &g->tasks[i];
        char dir[PATH_MAX + 32], log[PATH_MAX + 64], pid[32], ext[64];
        char *argv[16];
        int ac = 0;

        snprintf (dir, sizeof (dir), "%s/task-%d", g->staging, t->rank);
        /* Beside the images, not among them: a failed dump's log must
         * outlive the abort that removes the images, for the user. */
        snprintf (log, sizeof (log), "%s/%s/dump-gen-%d-rank-%d.log", g->conf->staging,
                  g->job, g->gen, t->rank);
        snprintf (pid, sizeof (pid), "%ld", (long)t->pid);
        if (mkdir_p (dir, 0700) < 0) {
            size_t off = 0;
            gen_append (err, sizeof (err), &off, "cannot create staging folder ");
            gen_append (err, sizeof (err), &off, dir);
            gen_append (err, sizeof (err), &off, ": ");
            gen_append (err, sizeof (err), &off, strerror (errno));
            return gen_fail (g, "dump", err);
        }
        argv[ac++] = g->conf->criu;
        argv[ac++] = "dump";
        argv[ac++] = "-t";
        argv[ac++] = pid;
        argv[ac++] = "-D";
        argv[ac++] = dir;
        argv[ac++] = "-o";
        argv[ac++] = log;
        if (g->leave_running)
            argv[ac++] = "--leave-running";
        if (t->ctl_fd >= 0) {
            uint64_t ino;
            if (sockdiag_unix_peer (t->ctl_fd, &ino) < 0) {
                snprintf (err, sizeof (err), "rank %d: cannot find libibcr's end of the "
                          "control socket: %s", t->rank, strerror (errno));
                return gen_fail (g, "dump", err);
            }
            snprintf (ext, sizeof (ext), "unix[%llu]", (unsigned long long)ino);
            argv[ac++] = "--external";
            argv[ac++] = ext;
        }
        argv[ac] = NULL;
        log_msg (LOG_INFO, "job %s gen %d: rank %d: criu dump -t %s%s%s", g->job, g->gen,
                 t->rank, pid, g->leave_running ? " --leave-running" : "",
                 t->ctl_fd >= 0 ? " (libibcr control socket external)" : "");
        if (criu_run (argv, log, NULL, 0, (int)g->conf->timeout_dump, err, sizeof (err)) < 0) {
            char msg[2048];
            snprintf (msg, sizeof (msg), "rank %d (pid %ld): %s", t->rank, (long)t->pid, err);
            return gen_fail (g, "dump", msg);
        }
    }
    g->dumped = 1;
    g->t_dump = gen_now_ms () - t0;
    return 0;
}

/* 5. Dump, one node-wide dump at a time (dump_lock). */
int genl_dump (struct gen *g)
{
    int lock = dump_lock (g), rc = dump_tasks (g);

    if (lock >= 0)
        close (lock);
    return rc;
}

/* Rebuild: every libibcr reopens a device, recreates its objects and
 * answers its new real ids, appended to ids. */
int genl_rebuild_ids (struct gen *g, json_object *ids)
{
    int fds[g->ntasks + 1], ranks[g->ntasks + 1], n = ctl_list (g, fds, ranks);
    json_object *rep[g->ntasks + 1];
    char err[1024];

    if (!n)
        return 0;
    if (libctl_round (fds, ranks, n, CKPT_REBUILD, NULL, g->gen, CKPT_IDS, rep,
                      (int)g->conf->timeout_rebuild, err, sizeof (err)) < 0)
        return gen_fail (g, "rebuild", err);
    for (int i = 0; i < n; i++)
        json_object_array_add (ids, rep[i]);
    return 0;
}

/* Connect: every QP to its prior state with translated peers (procs:
 * the ids of every process of the job). */
int genl_connect (struct gen *g, json_object *procs)
{
    int fds[g->ntasks + 1], ranks[g->ntasks + 1], n = ctl_list (g, fds, ranks);
    json_object *x;
    char err[1024];
    int rc;

    if (!n)
        return 0;
    x = json_object_new_object ();
    json_object_object_add (x, "procs", json_object_get (procs));
    rc = libctl_round (fds, ranks, n, CKPT_CONNECT, x, g->gen, CKPT_CONNECTED, NULL,
                       (int)g->conf->timeout_rebuild, err, sizeof (err));
    json_object_put (x);
    if (rc < 0)
        return gen_fail (g, "rebuild (connect)", err);
    g->released = 0;
    return 0;
}

/* Resume: application threads go on. */
int genl_resume (struct gen *g)
{
    int fds[g->ntasks + 1], ranks[g->ntasks + 1], n = ctl_list (g, fds, ranks);
    char err[1024];

    if (n && libctl_round (fds, ranks, n, CKPT_RESUME, NULL, g->gen, CKPT_RESUMED, NULL,
                           (int)g->conf->timeout_quiesce, err, sizeof (err)) < 0)
        return gen_fail (g, "resume", err);
    g->quiesced = 0;
    return 0;
}

/* What a restart must hand back for each standard fd of the task's init:
 * "pipe:[INO]", "socket:[INO]" or a path. */
static json_object *task_stdio (pid_t pid)
{
    json_object *o = json_object_new_object ();

    for (int fd = 0; fd <= 2; fd++) {
        char path[64], target[PATH_MAX], key[4];
        ssize_t n;

        snprintf (path, sizeof (path), "/proc/%ld/fd/%d", (long)pid, fd);
        if ((n = readlink (path, target, sizeof (target) - 1)) < 0)
            continue;
        target[n] = '\0';
        snprintf (key, sizeof (key), "%d", fd);
        json_object_object_add (o, key, json_object_new_string (target));
    }
    return o;
}

/* Manifest entries of this node's tasks, taken before the dump: what a
 * restart must hand back fresh (libibcr's socket, stdout, stderr). */
json_object *genl_tasks_json (struct gen *g)
{
    json_object *tasks = json_object_new_array ();

    for (int i = 0; i < g->ntasks; i++) {
        json_object *t = json_object_new_object ();
        uint64_t ino = 0;
        proto_set_int (t, "rank", g->tasks[i].rank);
        proto_set_str (t, "node", g->tasks[i].node);
        proto_set_int (t, "pid", g->tasks[i].pid);
        if (g->tasks[i].ctl_fd >= 0 && sockdiag_unix_peer (g->tasks[i].ctl_fd, &ino) == 0)
            proto_set_int (t, "ctl_ino", (int64_t)ino);
        json_object_object_add (t, "stdio", task_stdio (g->tasks[i].pid));
        json_object_array_add (tasks, t);
    }
    return tasks;
}

/* Copy: this node's images into the generation's storage folder (which
 * the leader created), durably. */
static void copy_progress (void *arg, uint64_t more)
{
    struct gen *g = arg;

    g->copy_done += more;
    gen_progress (g, "copy", g->copy_done, g->copy_total, 0);
}

int genl_copy (struct gen *g)
{
    struct store st = { .root = g->conf->storage, .cluster = g->conf->cluster };
    char gdir[PATH_MAX], err[1536];
    double t0 = gen_now_ms ();

    if (store_gen_path (&st, g->job, g->gen, gdir, sizeof (gdir)) < 0)
        return gen_fail (g, "commit", "bad job name");
    g->copy_done = g->copy_total = 0;
    for (int i = 0; i < g->ntasks && g->progress_fd >= 0; i++) {
        char src[PATH_MAX + 32];
        snprintf (src, sizeof (src), "%s/task-%d", g->staging, g->tasks[i].rank);
        g->copy_total += imgcopy_dir_size (src);
    }
    gen_progress (g, "copy", 0, g->copy_total, 1);
    for (int i = 0; i < g->ntasks; i++) {
        char src[PATH_MAX + 32], dst[PATH_MAX + 32];
        uint64_t bytes;

        snprintf (src, sizeof (src), "%s/task-%d", g->staging, g->tasks[i].rank);
        snprintf (dst, sizeof (dst), "%s/task-%d", gdir, g->tasks[i].rank);
        if (imgcopy_dir (src, dst, g->conf->compression, &bytes, err, sizeof (err),
                         copy_progress, g) < 0)
            return gen_fail (g, "commit", err);
        g->bytes += bytes;
    }
    g->t_commit = gen_now_ms () - t0;
    return 0;
}

/* Staging of this generation and the dump logs: removed after a commit;
 * after an abort the logs stay (the error names them). */
void genl_cleanup (struct gen *g, int committed)
{
    char path[PATH_MAX + 64];

    if (g->staging[0])
        store_rmtree (g->staging);
    for (int i = 0; committed && i < g->ntasks; i++) {
        snprintf (path, sizeof (path), "%s/%s/dump-gen-%d-rank-%d.log", g->conf->staging,
                  g->job, g->gen, g->tasks[i].rank);
        unlink (path);
    }
}

/* Undo this node's part: rebuild if released, resume if quiesced. */
void genl_undo (struct gen *g)
{
    char first[sizeof (g->err)];

    memcpy (first, g->err, sizeof (first));
    if (g->released) {
        json_object *ids = json_object_new_array ();
        if (genl_rebuild_ids (g, ids) < 0 || genl_connect (g, ids) < 0)
            log_msg (LOG_ERR, "job %s gen %d: undo: %s", g->job, g->gen, g->err);
        json_object_put (ids);
    }
    if (g->quiesced && genl_resume (g) < 0)
        log_msg (LOG_ERR, "job %s gen %d: undo: %s", g->job, g->gen, g->err);
    memcpy (g->err, first, sizeof (first));
}
