/* gen.c - see gen.h.  The phases, in protocol order, then gen_run() which
 * strings them together and is the only place that decides to abort. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#include "ibcr/drain.h"
#include "imgcopy.h"
#include "libctl.h"
#include "sockdiag.h"

#define DRAIN_MAX_ROUNDS 100000

static double now_ms (void)
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
static void append (char *dst, size_t len, size_t *off, const char *s)
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

static int fail (struct gen *g, const char *phase, const char *why)
{
    char tmp[sizeof (g->err)];
    size_t off = 0;

    append (tmp, sizeof (tmp), &off, phase);
    append (tmp, sizeof (tmp), &off, ": ");
    append (tmp, sizeof (tmp), &off, why);
    memcpy (g->err, tmp, off + 1);
    return -1;
}

/* --- phases -------------------------------------------------------- */

/* The daemon that owns the job's registrations died (kill -9, crash): its
 * successor knows nothing of this generation, so it must not commit. */
static int daemon_gone (struct gen *g, const char *phase)
{
    char why[256];

    if (!g->daemon || getppid () == g->daemon)
        return 0;
    snprintf (why, sizeof (why), "ibcrd (pid %ld) died during the %s; the generation is "
              "void (restart ibcrd; the job runs on)", (long)g->daemon, phase);
    return fail (g, phase, why);
}


/* 2. Quiesce: application threads stop at libibcr's gate. */
static int gen_quiesce (struct gen *g)
{
    int fds[g->ntasks], ranks[g->ntasks], n = ctl_list (g, fds, ranks);
    char err[1024];
    double t0 = now_ms ();

    if (n && libctl_round (fds, ranks, n, CKPT_QUIESCE, NULL, g->gen, CKPT_QUIESCED, NULL,
                           (int)g->conf->timeout_quiesce, err, sizeof (err)) < 0)
        return fail (g, "quiesce", err);
    g->quiesced = 1;
    g->t_quiesce = now_ms () - t0;
    return 0;
}

/* 3. Drain: rounds of reports until every connection is drained exactly
 * (lib/ibcr/drain.h: delivered == acknowledged, no RDMA in flight). */
static int gen_drain (struct gen *g)
{
    int fds[g->ntasks], ranks[g->ntasks], n = ctl_list (g, fds, ranks);
    double t0 = now_ms (), deadline = t0 + g->conf->timeout_drain;
    char err[1024], why[512] = "";

    for (int round = 0; n; round++) {
        json_object *rep[n], *x = json_object_new_object ();
        int done;

        json_object_object_add (x, "round", json_object_new_int (round));
        if (libctl_round (fds, ranks, n, CKPT_DRAIN, x, g->gen, CKPT_DRAIN_REPORT, rep,
                          (int)g->conf->timeout_drain, err, sizeof (err)) < 0) {
            json_object_put (x);
            return fail (g, "drain", err);
        }
        json_object_put (x);
        done = drain_done (rep, n, why, sizeof (why));
        for (int i = 0; i < n; i++)
            json_object_put (rep[i]);
        if (done < 0)
            return fail (g, "drain", "malformed drain report from libibcr");
        g->drain_rounds = round + 1;
        if (done)
            break;
        if (now_ms () > deadline || round >= DRAIN_MAX_ROUNDS) {
            snprintf (err, sizeof (err), "not drained after %d rounds (%s); raise "
                      "timeout_drain if the job's messages are very large", round + 1, why);
            return fail (g, "drain", err);
        }
        usleep (round < 10 ? 100 : 1000);
    }
    g->t_drain = now_ms () - t0;
    return 0;
}

/* 4. Release: libibcr destroys every real verbs object and closes the
 * device, so CRIU sees a process that never used one. */
static int gen_release (struct gen *g)
{
    int fds[g->ntasks], ranks[g->ntasks], n = ctl_list (g, fds, ranks);
    char err[1024];
    double t0 = now_ms ();

    if (!n)
        return 0;
    /* From here on the objects are gone even if some task failed: the
     * abort path must rebuild. */
    g->released = 1;
    if (libctl_round (fds, ranks, n, CKPT_RELEASE, NULL, g->gen, CKPT_RELEASED, NULL,
                      (int)g->conf->timeout_quiesce, err, sizeof (err)) < 0)
        return fail (g, "release", err);
    g->t_release = now_ms () - t0;
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

/* 5. Dump: CRIU on each task's init, to node-local staging.  libibcr's
 * control socket leads out of the tree: CRIU is told it is external, and
 * a restart hands a fresh one back in its place. */
static int gen_dump (struct gen *g)
{
    double t0 = now_ms ();
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
            append (err, sizeof (err), &off, "cannot create staging folder ");
            append (err, sizeof (err), &off, dir);
            append (err, sizeof (err), &off, ": ");
            append (err, sizeof (err), &off, strerror (errno));
            return fail (g, "dump", err);
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
                return fail (g, "dump", err);
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
            return fail (g, "dump", msg);
        }
    }
    g->dumped = 1;
    g->t_dump = now_ms () - t0;
    return 0;
}

/* 6. Rebuild: each libibcr reopens a device and recreates its objects;
 * the ids of all are gathered and handed to all; QPs reconnect. */
static int gen_rebuild (struct gen *g)
{
    int fds[g->ntasks], ranks[g->ntasks], n = ctl_list (g, fds, ranks);
    json_object *ids[g->ntasks > 0 ? g->ntasks : 1], *procs, *x;
    char err[1024];
    double t0 = now_ms ();

    if (!n)
        return 0;
    if (libctl_round (fds, ranks, n, CKPT_REBUILD, NULL, g->gen, CKPT_IDS, ids,
                      (int)g->conf->timeout_rebuild, err, sizeof (err)) < 0)
        return fail (g, "rebuild", err);
    procs = json_object_new_array ();
    for (int i = 0; i < n; i++)
        json_object_array_add (procs, ids[i]);
    x = json_object_new_object ();
    json_object_object_add (x, "procs", procs);
    int rc = libctl_round (fds, ranks, n, CKPT_CONNECT, x, g->gen, CKPT_CONNECTED, NULL,
                           (int)g->conf->timeout_rebuild, err, sizeof (err));
    json_object_put (x);
    if (rc < 0)
        return fail (g, "rebuild (connect)", err);
    g->released = 0;
    g->t_rebuild = now_ms () - t0;
    return 0;
}

/* Application threads go on. */
static int gen_resume (struct gen *g)
{
    int fds[g->ntasks], ranks[g->ntasks], n = ctl_list (g, fds, ranks);
    char err[1024];
    double t0 = now_ms ();

    if (n && libctl_round (fds, ranks, n, CKPT_RESUME, NULL, g->gen, CKPT_RESUMED, NULL,
                           (int)g->conf->timeout_quiesce, err, sizeof (err)) < 0)
        return fail (g, "resume", err);
    g->quiesced = 0;
    g->t_resume = now_ms () - t0;
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

static json_object *manifest_meta (struct gen *g, json_object *tasks)
{
    json_object *m = json_object_new_object (), *times = json_object_new_object ();
    json_object *engine = json_object_new_object ();

    json_object_object_add (m, "trigger", json_object_new_string (g->trigger));
    json_object_object_add (m, "size", json_object_new_int (g->size));
    json_object_object_add (m, "leave_running", json_object_new_boolean (g->leave_running));
    json_object_object_add (m, "tasks", tasks);
    json_object_object_add (engine, "ibcr", json_object_new_string (PACKAGE_VERSION));
    json_object_object_add (engine, "criu", json_object_new_string (g->conf->criu));
    json_object_object_add (m, "engine", engine);
    json_object_object_add (times, "quiesce_ms", json_object_new_double (g->t_quiesce));
    json_object_object_add (times, "drain_ms", json_object_new_double (g->t_drain));
    json_object_object_add (times, "release_ms", json_object_new_double (g->t_release));
    json_object_object_add (times, "dump_ms", json_object_new_double (g->t_dump));
    json_object_object_add (times, "rebuild_ms", json_object_new_double (g->t_rebuild));
    json_object_object_add (times, "resume_ms", json_object_new_double (g->t_resume));
    json_object_object_add (times, "copy_ms", json_object_new_double (g->t_commit));
    json_object_object_add (m, "times", times);
    return m;
}

/* 7. Commit: copy every task's images to storage, durably; then the
 * manifest, renamed into place last; then retention. */
static int gen_commit (struct gen *g, json_object *tasks)
{
    struct store st = { .root = g->conf->storage, .cluster = g->conf->cluster };
    char gdir[PATH_MAX], err[1536];
    double t0 = now_ms ();
    json_object *meta;
    int rc;

    if (store_gen_path (&st, g->job, g->gen, gdir, sizeof (gdir)) < 0)
        return fail (g, "commit", "bad job name");
    for (int i = 0; i < g->ntasks; i++) {
        char src[PATH_MAX + 32], dst[PATH_MAX + 32];
        uint64_t bytes;

        snprintf (src, sizeof (src), "%s/task-%d", g->staging, g->tasks[i].rank);
        snprintf (dst, sizeof (dst), "%s/task-%d", gdir, g->tasks[i].rank);
        if (imgcopy_dir (src, dst, &bytes, err, sizeof (err)) < 0)
            return fail (g, "commit", err);
        g->bytes += bytes;
    }
    g->t_commit = now_ms () - t0;
    if (daemon_gone (g, "copy to storage"))
        return -1;
    meta = manifest_meta (g, json_object_get (tasks));
    rc = store_gen_commit (&st, g->job, g->gen, g->uid, g->gid, meta, err, sizeof (err));
    json_object_put (meta);
    if (rc < 0)
        return fail (g, "commit", err);
    g->t_commit = now_ms () - t0;
    json_object *removed = json_object_new_array ();
    if (store_prune (&st, g->job, g->conf->retention, removed, err, sizeof (err)) < 0)
        log_msg (LOG_WARNING, "job %s gen %d: retention: %s", g->job, g->gen, err);
    for (size_t i = 0; i < json_object_array_length (removed); i++)
        log_msg (LOG_INFO, "job %s: retention %d: removed generation %d", g->job,
                 g->conf->retention, json_object_get_int (json_object_array_get_idx (removed, i)));
    json_object_put (removed);
    return 0;
}

/* --- the generation ------------------------------------------------- */


/* Undo whatever was done, leaving the job running as before and nothing
 * of this generation on disk.  Errors here are logged: the first error
 * (in g->err) is what the asker hears. */
static void gen_abort (struct gen *g)
{
    struct store st = { .root = g->conf->storage, .cluster = g->conf->cluster };
    char first[sizeof (g->err)];

    memcpy (first, g->err, sizeof (first));
    if (g->released && gen_rebuild (g) < 0)
        log_msg (LOG_ERR, "job %s gen %d: abort: %s", g->job, g->gen, g->err);
    if (g->quiesced && gen_resume (g) < 0)
        log_msg (LOG_ERR, "job %s gen %d: abort: %s", g->job, g->gen, g->err);
    memcpy (g->err, first, sizeof (first));
    if (g->staging[0])
        store_rmtree (g->staging);
    if (g->gen > 0 && store_gen_abort (&st, g->job, g->gen) < 0)
        log_msg (LOG_ERR, "job %s gen %d: abort: cannot remove the partial generation: %s",
                 g->job, g->gen, strerror (errno));
}

static int gen_restored (struct gen *g)
{
    /* The restored libibcr waits where the dump left it: released, its
     * application threads at the gate. */
    g->released = 1;
    g->quiesced = 1;
    if (gen_rebuild (g) < 0 || gen_resume (g) < 0) {
        log_msg (LOG_ERR, "job %s: restored tasks not resumed: %s", g->job, g->err);
        return -1;
    }
    log_msg (LOG_INFO, "job %s: restored tasks rebuilt and resumed (rebuild %.1f ms)", g->job,
             g->t_rebuild);
    return 0;
}

int gen_run (struct gen *g)
{
    struct store st = { .root = g->conf->storage, .cluster = g->conf->cluster };
    char dir[PATH_MAX], err[1024];
    json_object *tasks = NULL;
    double t0 = now_ms ();

    if (g->kind == GEN_RESTORED)
        return gen_restored (g);
    if (store_gen_begin (&st, g->job, g->uid, g->gid, &g->gen, dir, sizeof (dir), err,
                         sizeof (err)) < 0) {
        fail (g, "begin", err);
        goto abort;
    }
    snprintf (g->staging, sizeof (g->staging), "%s/%s/gen-%d", g->conf->staging, g->job,
              g->gen);
    store_rmtree (g->staging);  /* a leftover of a killed daemon */
    log_msg (LOG_INFO, "job %s gen %d: begin (%s, %d task%s on this node)", g->job, g->gen,
             g->trigger, g->ntasks, g->ntasks == 1 ? "" : "s");
    /* Recorded before the dump: what a restart must hand back fresh. */
    tasks = json_object_new_array ();
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
    if (gen_quiesce (g) < 0 || gen_drain (g) < 0 || gen_release (g) < 0 || gen_dump (g) < 0
        || daemon_gone (g, "dump"))
        goto abort;
    if (g->leave_running && (gen_rebuild (g) < 0 || gen_resume (g) < 0))
        goto abort;
    log_msg (LOG_INFO, "job %s gen %d: dumped and resumed in %.1f ms (quiesce %.1f, drain "
             "%.1f in %d rounds, release %.1f, dump %.1f, rebuild %.1f, resume %.1f)",
             g->job, g->gen, now_ms () - t0, g->t_quiesce, g->t_drain, g->drain_rounds,
             g->t_release, g->t_dump, g->t_rebuild, g->t_resume);
    if (gen_commit (g, tasks) < 0)
        goto abort;
    store_rmtree (g->staging);
    for (int i = 0; i < g->ntasks; i++) {
        snprintf (dir, sizeof (dir), "%s/%s/dump-gen-%d-rank-%d.log", g->conf->staging,
                  g->job, g->gen, g->tasks[i].rank);
        unlink (dir);
    }
    log_msg (LOG_INFO, "job %s gen %d: committed, %llu bytes, copy %.1f ms", g->job, g->gen,
             (unsigned long long)g->bytes, g->t_commit);
    json_object_put (tasks);
    return 0;
abort:
    log_msg (LOG_ERR, "job %s gen %d: aborted: %s", g->job, g->gen, g->err);
    gen_abort (g);
    json_object_put (tasks);
    return -1;
}

json_object *gen_reply (const struct gen *g, int rc)
{
    json_object *o;

    if (rc < 0) {
        if (g->kind == GEN_RESTORED)
            return proto_error ("restore", EIO, "job %s: the restored tasks could not be "
                                "resumed: %s", g->job, g->err);
        return proto_error ("checkpoint", EIO, "job %s: generation %d aborted in %s; the job "
                            "runs on and its last committed generation stays", g->job,
                            g->gen, g->err);
    }
    if (!(o = proto_new ("ok")))
        return NULL;
    proto_set_str (o, "request", g->kind == GEN_RESTORED ? "resume-restored" : "checkpoint");
    proto_set_str (o, "job", g->job);
    if (g->kind == GEN_CHECKPOINT) {
        proto_set_int (o, "generation", g->gen);
        proto_set_int (o, "bytes", (int64_t)g->bytes);
        json_object_object_add (o, "dump_ms", json_object_new_double (g->t_dump));
        json_object_object_add (o, "copy_ms", json_object_new_double (g->t_commit));
        proto_set_int (o, "drain_rounds", g->drain_rounds);
    }
    json_object_object_add (o, "rebuild_ms", json_object_new_double (g->t_rebuild));
    return o;
}
