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
#include <signal.h>
#include <sys/wait.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/criu.h"
#include "common/log.h"
#include "common/pmi.h"
#include "common/proto.h"
#include "common/safedir.h"
#include "common/store.h"
#include "common/taskns.h"
#include "gen.h"
#include "ibcr/ckpt_proto.h"
#include "imgcopy.h"
#include "libctl.h"
#include "sockdiag.h"

/* Every process of this node's tasks that uses verbs: its libibcr
 * control connection, its task's rank and its pid.  A task may have
 * several (a forked second rank, a script starting two verbs programs),
 * and each takes part in every phase. */
struct ctl_set {
    int n;
    int *fds;
    int *ranks;
    pid_t *pids;
    json_object **rep;      /* a reply per process, for the rounds that gather */
};

static void ctl_set_free (struct ctl_set *cs)
{
    free (cs->fds);
    free (cs->ranks);
    free (cs->pids);
    free (cs->rep);
}

/* 0, or -1 with g->err (out of memory) naming phase. */
static int ctl_set_get (struct gen *g, struct ctl_set *cs, enum gen_phase phase)
{
    int max = 1;

    memset (cs, 0, sizeof (*cs));
    for (int i = 0; i < g->ntasks; i++)
        max += g->tasks[i].nctl;
    cs->fds = calloc ((size_t)max, sizeof (*cs->fds));
    cs->ranks = calloc ((size_t)max, sizeof (*cs->ranks));
    cs->pids = calloc ((size_t)max, sizeof (*cs->pids));
    cs->rep = calloc ((size_t)max, sizeof (*cs->rep));
    if (!cs->fds || !cs->ranks || !cs->pids || !cs->rep) {
        ctl_set_free (cs);
        return gen_fail (g, phase, "ibcrd's worker is out of memory");
    }
    for (int i = 0; i < g->ntasks; i++)
        for (int k = 0; k < g->tasks[i].nctl; k++) {
            cs->fds[cs->n] = g->tasks[i].ctl_fd[k];
            cs->ranks[cs->n] = g->tasks[i].rank;
            cs->pids[cs->n++] = g->tasks[i].ctl_pid[k];
        }
    return 0;
}

/* One request to every process, replies into cs->rep when gather. */
static int ctl_round (struct gen *g, enum gen_phase phase, struct ctl_set *cs, const char *type,
                      json_object *extra, const char *want, int gather, uint64_t timeout_ms)
{
    char err[1024];

    if (cs->n && libctl_round (cs->fds, cs->ranks, cs->pids, cs->n, type, extra, g->gen, want,
                               gather ? cs->rep : NULL, (int)timeout_ms, err,
                               sizeof (err)) < 0)
        return gen_fail (g, phase, err);
    return 0;
}

/* A phase that asks every process one thing and gathers nothing. */
static int ctl_phase (struct gen *g, enum gen_phase phase, const char *type, json_object *extra,
                      const char *want, uint64_t timeout_ms)
{
    struct ctl_set cs;
    int rc;

    if (ctl_set_get (g, &cs, phase) < 0)
        return -1;
    rc = ctl_round (g, phase, &cs, type, extra, want, 0, timeout_ms);
    ctl_set_free (&cs);
    return rc;
}

/* A phase whose replies are appended to out. */
static int ctl_gather (struct gen *g, enum gen_phase phase, const char *type, json_object *extra,
                       const char *want, uint64_t timeout_ms, json_object *out)
{
    struct ctl_set cs;
    int rc;

    if (ctl_set_get (g, &cs, phase) < 0)
        return -1;
    rc = ctl_round (g, phase, &cs, type, extra, want, 1, timeout_ms);
    for (int i = 0; rc == 0 && i < cs.n; i++)
        json_object_array_add (out, cs.rep[i]);
    ctl_set_free (&cs);
    return rc;
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

int gen_fail (struct gen *g, enum gen_phase phase, const char *why)
{
    char tmp[sizeof (g->err)];
    size_t off = 0;

    g->err_phase = phase;
    gen_append (tmp, sizeof (tmp), &off, phase_name (phase));
    gen_append (tmp, sizeof (tmp), &off, ": ");
    gen_append (tmp, sizeof (tmp), &off, why);
    memcpy (g->err, tmp, off + 1);
    return -1;
}

void gen_enter (struct gen *g, enum gen_phase phase)
{
    json_object *o;

    if (g->phase == (int)phase)
        return;
    g->phase = phase;
    if (g->report_fd < 0 || !(o = proto_new ("worker-phase")))
        return;
    proto_set_str (o, "job", g->job);
    proto_set_int (o, "gen", g->gen);
    proto_set_str (o, "phase", phase_name (phase));
    /* A daemon gone only stops hearing from us: the generation goes on. */
    if (proto_send (g->report_fd, o) < 0)
        g->report_fd = -1;
    json_object_put (o);
}

void gen_progress (struct gen *g, enum gen_phase phase, uint64_t done, uint64_t total,
                   int force)
{
    double now = mono_ms_f ();
    json_object *o;

    if (g->progress_fd < 0 || (!force && now - g->progress_last < 200))
        return;
    g->progress_last = now;
    if (!(o = proto_new ("progress")))
        return;
    proto_set_str (o, "job", g->job);
    proto_set_int (o, "generation", g->gen);
    proto_set_str (o, "phase", phase_name (phase));
    proto_set_int (o, "done", (int64_t)done);
    proto_set_int (o, "total", (int64_t)total);
    /* A client that left or stopped reading only loses its progress. */
    if (proto_send (g->progress_fd, o) < 0)
        g->progress_fd = -1;
    json_object_put (o);
}

/* The daemon that owns the job's registrations died (kill -9, crash): its
 * successor knows nothing of this generation, so it must not commit. */
int gen_daemon_gone (struct gen *g, enum gen_phase phase)
{
    char why[256];

    if (!g->daemon || getppid () == g->daemon)
        return 0;
    snprintf (why, sizeof (why), "ibcrd (pid %ld) died during the %s; the generation is "
              "void (restart ibcrd; the job runs on)", (long)g->daemon, phase_name (phase));
    return gen_fail (g, phase, why);
}

/* Quiesce: application threads stop at libibcr's gate. */
int genl_quiesce (struct gen *g)
{
    if (ctl_phase (g, PHASE_QUIESCE, CKPT_QUIESCE, NULL, CKPT_QUIESCED,
                   g->conf->timeout_quiesce) < 0)
        return -1;
    g->quiesced = 1;
    return 0;
}

/* One drain round: every process's report appended to reports. */
int genl_drain_round (struct gen *g, int round, json_object *reports)
{
    json_object *x = json_object_new_object ();
    int rc;

    json_object_object_add (x, "round", json_object_new_int (round));
    rc = ctl_gather (g, PHASE_DRAIN, CKPT_DRAIN, x, CKPT_DRAIN_REPORT, g->conf->timeout_drain,
                     reports);
    json_object_put (x);
    return rc;
}

/* Release: libibcr destroys every real verbs object and closes the
 * device, so CRIU sees a process that never used one. */
int genl_release (struct gen *g)
{
    /* From here on the objects are gone even if some process failed:
     * the abort path must rebuild. */
    for (int i = 0; i < g->ntasks; i++)
        if (g->tasks[i].nctl > 0)
            g->released = 1;
    return ctl_phase (g, PHASE_RELEASE, CKPT_RELEASE, NULL, CKPT_RELEASED,
                      g->conf->timeout_quiesce);
}

/* "file[MNT:INO]", CRIU's name for an open file it must leave out of the
 * image (--external) and take back from the restorer (--inherit-fd), for
 * fd of pid when that is a file or a device; 0, or -1 (a pipe, a socket). */
static int stdio_file_key (pid_t pid, int fd, char *buf, size_t len)
{
    char path[64], line[256];
    unsigned long mnt = 0;
    struct stat sb;
    FILE *f;
    int have = 0;

    snprintf (path, sizeof (path), "/proc/%ld/fd/%d", (long)pid, fd);
    if (stat (path, &sb) < 0 || !(S_ISREG (sb.st_mode) || S_ISCHR (sb.st_mode)))
        return -1;
    snprintf (path, sizeof (path), "/proc/%ld/fdinfo/%d", (long)pid, fd);
    if (!(f = fopen (path, "re")))
        return -1;
    while (fgets (line, sizeof (line), f))
        if (sscanf (line, "mnt_id: %lu", &mnt) == 1)
            have = 1;
    fclose (f);
    if (!have)
        return -1;
    snprintf (buf, len, "file[%lx:%llx]", mnt, (unsigned long long)sb.st_ino);
    return 0;
}

/* A task in a mount namespace of its own (taskns.h) is dumped from
 * inside it, as its user; 1 when so. */
static int task_in_ns (const struct gen_task *t)
{
    return taskns_own_mnt (t->pid) == 1;
}

/* The image folder of one task, made by root and given to the user whose
 * criu writes into it; never following a link. */
static int task_dir (struct gen *g, const struct gen_task *t, char *err, size_t len)
{
    char name[32], why[1024];
    int gfd, fd, saved;

    /* <staging>/<job>/gen-N: root's on every component (safedir.h);
     * 0711, so the user's criu reaches its own task folder in it, and
     * nothing else. */
    if (safedir_ensure (g->staging, 0711, why, sizeof (why)) < 0
        || (gfd = safedir_open (g->staging, why, sizeof (why))) < 0) {
        snprintf (err, len, "cannot create staging folder: %s", why);
        return -1;
    }
    snprintf (name, sizeof (name), "task-%d", t->rank);
    fd = safedir_mkdirat (gfd, name, 0700, NULL);
    saved = errno;
    close (gfd);
    if (fd < 0 || (task_in_ns (t) && fchown (fd, g->uid, g->gid) < 0)) {
        if (fd >= 0)
            saved = errno;
        snprintf (err, len, "cannot create staging folder %.1200s/%s: %s", g->staging, name,
                  strerror (saved));
        if (fd >= 0)
            close (fd);
        return -1;
    }
    close (fd);
    return 0;
}

struct dump_run {
    pid_t criu;
    int status;
    pid_t end;      /* a task ended by this dump: the init to kill once dumped */
    char log[PATH_MAX + 64];
};

/* Start CRIU on one task's init, to node-local staging.  libibcr's
 * control socket leads out of the tree: CRIU is told it is external, and
 * a restart hands a fresh one back in its place; so are the task's
 * stdio files, opened outside its mount namespace. */
static int dump_start (struct gen *g, const struct gen_task *t, struct dump_run *r,
                       char *err, size_t errlen)
{
    char dir[PATH_MAX + 32], pid[32], ext[GEN_MAX_CTL + 5][64];
    struct taskns_as as = { .ns_pid = t->pid, .cred_pid = t->pid, .uid = g->uid };
    int in_ns = task_in_ns (t), next = 0, pmi_fd = -1, pmix_fd = -1;
    uint64_t pmi_ino = 0, pmix_ino = 0;
    char *argv[32 + 2 * GEN_MAX_CTL];
    int ac = 0;

    snprintf (dir, sizeof (dir), "%s/task-%d", g->staging, t->rank);
    /* Beside the images, not among them: a failed dump's log must
     * outlive the abort that removes the images, for the user. */
    snprintf (r->log, sizeof (r->log), "%s/%s/dump-gen-%d-rank-%d.log", g->conf->staging,
              g->job, g->gen, t->rank);
    /* Outside the task's namespaces criu runs as root: only for root's
     * own tasks (ibcr run's), never on an image of a user's process. */
    if (!in_ns && g->uid != 0) {
        snprintf (err, errlen, "it belongs to uid %lu and has no namespaces of "
                  "its own: ibcr checkpoints an ordinary user's task only when the SPANK "
                  "plugin started it (srun/sbatch --checkpoint-ib)", (unsigned long)g->uid);
        return -1;
    }
    snprintf (pid, sizeof (pid), "%ld", (long)(in_ns ? taskns_nspid (t->pid) : t->pid));
    if (task_dir (g, t, err, errlen) < 0)
        return -1;
    argv[ac++] = g->conf->criu;
    argv[ac++] = "dump";
    argv[ac++] = "-t";
    argv[ac++] = pid;
    argv[ac++] = "-D";
    argv[ac++] = dir;
    argv[ac++] = "-o";
    argv[ac++] = r->log;
    if (g->leave_running)
        argv[ac++] = "--leave-running";
    else if (in_ns) {
        /* CRIU runs inside the task's PID namespace: the tree it kills
         * after the dump takes the namespace, and CRIU with it, before
         * CRIU is done.  It leaves the tree stopped instead (so nothing
         * runs after the image), and we kill it once the dump ended. */
        argv[ac++] = "--leave-stopped";
        r->end = t->pid;
    }
    /* Every verbs process's own connection leads out of the tree. */
    for (int k = 0; k < t->nctl; k++) {
        uint64_t ino;
        if (sockdiag_unix_peer (t->ctl_fd[k], &ino) < 0) {
            snprintf (err, errlen, "rank %d: cannot find libibcr's end of the control "
                      "socket of pid %ld: %s", t->rank, (long)t->ctl_pid[k],
                      strerror (errno));
            return -1;
        }
        snprintf (ext[next], sizeof (ext[0]), "unix[%llu]", (unsigned long long)ino);
        argv[ac++] = "--external";
        argv[ac++] = ext[next++];
    }
    for (int fd = 0; in_ns && fd <= 2; fd++)
        if (stdio_file_key (t->pid, fd, ext[next], sizeof (ext[0])) == 0) {
            argv[ac++] = "--external";
            argv[ac++] = ext[next++];
        }
    /* An MPI rank's PMI socket leads to slurmstepd (pmi.h): a restore
     * hands the new step's in its place. */
    if (in_ns && pmi_find (t->pid, &pmi_fd, &pmi_ino) == 0) {
        snprintf (ext[next], sizeof (ext[0]), "unix[%llu]", (unsigned long long)pmi_ino);
        argv[ac++] = "--external";
        argv[ac++] = ext[next++];
    }
    /* So does the task's end of its PMIx relay (pmi.h). */
    if (in_ns && pmix_find (t->pid, &pmix_fd, &pmix_ino) == 0) {
        snprintf (ext[next], sizeof (ext[0]), "unix[%llu]", (unsigned long long)pmix_ino);
        argv[ac++] = "--external";
        argv[ac++] = ext[next++];
    }
    argv[ac] = NULL;
    log_msg (LOG_INFO, "job %s gen %d: rank %d: criu dump -t %s%s%s%s%s%s", g->job, g->gen,
             t->rank, pid, g->leave_running ? " --leave-running" : "",
             t->nctl == 1 ? " (libibcr control socket external)"
             : t->nctl > 1 ? " (libibcr control sockets external)" : "",
             pmi_fd >= 0 ? " (PMI socket external)" : "",
             pmix_fd >= 0 ? " (PMIx relay external)" : "",
             in_ns ? " (in the task's namespaces, as its user)" : "");
    if (access (argv[0], X_OK) < 0) {
        snprintf (err, errlen, "cannot run criu '%s': %s (set criu = PATH in ibcrd.conf)",
                  argv[0], strerror (errno));
        return -1;
    }
    if ((r->criu = criu_start_as (argv, r->log, NULL, 0, in_ns ? &as : NULL)) < 0) {
        snprintf (err, errlen, "cannot fork criu: %s", strerror (errno));
        return -1;
    }
    return 0;
}

/* Wait for the dumps started in run[] (only run[only] when only >= 0)
 * until they end or the deadline passes (then they are killed).  The
 * first failure is described in msg and its index left in *failed. */
static void dump_wait (struct gen *g, struct dump_run *run, int only, double deadline,
                       char *msg, size_t msglen, int *failed)
{
    char errs[1024];
    int left = 0;

    for (int i = 0; i < g->ntasks; i++)
        left += run[i].criu > 0 && (only < 0 || only == i);
    for (long sleep_us = 1000; left > 0;) {
        int expired = mono_ms_f () > deadline;
        for (int i = 0; i < g->ntasks; i++) {
            if (run[i].criu <= 0 || (only >= 0 && only != i))
                continue;
            if (expired)
                kill (run[i].criu, SIGKILL);
            pid_t w = waitpid (run[i].criu, &run[i].status, expired ? 0 : WNOHANG);
            if (w == 0 || (w < 0 && errno == EINTR))
                continue;
            int ok = w == run[i].criu && WIFEXITED (run[i].status)
                     && WEXITSTATUS (run[i].status) == 0;
            run[i].criu = 0;
            left--;
            g->tasks[i].dump_t1 = mono_ms_f ();
            if (ok && run[i].end > 0)
                (void)kill (run[i].end, SIGKILL);
            if (ok || *failed >= 0)
                continue;
            criu_log_errors (run[i].log, 3, errs, sizeof (errs));
            if (expired)
                snprintf (msg, msglen, "rank %d (pid %ld): criu dump did not finish "
                          "within %d ms and was killed%s%s; log: %s (raise timeout_dump in "
                          "ibcrd.conf if the job is large)", g->tasks[i].rank,
                          (long)g->tasks[i].pid, (int)g->conf->timeout_dump,
                          errs[0] ? ": " : "", errs, run[i].log);
            else
                snprintf (msg, msglen, "rank %d (pid %ld): criu dump failed (%s %d): "
                          "%s; log: %s", g->tasks[i].rank, (long)g->tasks[i].pid,
                          WIFEXITED (run[i].status) ? "exit code" : "signal",
                          WIFEXITED (run[i].status) ? WEXITSTATUS (run[i].status)
                          : WTERMSIG (run[i].status),
                          errs[0] ? errs : "no error line in its log", run[i].log);
            *failed = i;
        }
        if (left > 0) {
            usleep (sleep_us);
            if (sleep_us < 20000)
                sleep_us *= 2;
        }
    }
}

/* A task without a mount namespace of its own (ibcr run's) shares the
 * host's /proc: CRIU's parasite then mounts a /proc of its own in one
 * fixed folder, and two such dumps at once on a node fail ("Can't create
 * a directory (-17)").  Those are dumped one at a time, under an flock
 * in staging that every worker of this daemon shares; -1 when it cannot
 * be had (then they run unserialised, and the log says why). */
static int legacy_lock (struct gen *g)
{
    char why[1024];
    int dfd, fd;

    if ((dfd = safedir_open (g->conf->staging, why, sizeof (why))) < 0) {
        log_msg (LOG_ERR, "job %s gen %d: %s; dumps of this node's jobs may overlap", g->job,
                 g->gen, why);
        return -1;
    }
    fd = openat (dfd, ".criu-dump.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    close (dfd);
    while (fd >= 0 && flock (fd, LOCK_EX) < 0 && errno == EINTR)
        ;
    if (fd < 0)
        log_err (errno, "job %s gen %d: cannot lock %s/.criu-dump.lock; dumps of this node's "
                 "jobs may overlap", g->job, g->gen, g->conf->staging);
    return fd;
}

/* CRIU's parasite, in a task without a /proc of its own, mounts one for
 * a moment on "proc.crtools" in the task's working folder.  Two such
 * dumps on different nodes whose tasks share that folder (nodes on one
 * machine, a job started in a shared file system) can meet there; the
 * loser fails with "Can't create a directory (-17)" having dumped
 * nothing, and is worth another try. */
static int proc_dir_clash (const char *log)
{
    char errs[1024];

    criu_log_errors (log, 3, errs, sizeof (errs));
    return strstr (errs, "Can't create a directory (-17)") != NULL;
}

/* 5. Dump.  Tasks in namespaces of their own (taskns.h): every one at
 * once, each CRIU stopping only its own tree, so the phase lasts as long
 * as the slowest.  Others: one at a time (legacy_lock). */
int genl_dump (struct gen *g)
{
    struct dump_run run[g->ntasks + 1];
    double t0 = mono_ms_f (), deadline = t0 + (double)g->conf->timeout_dump;
    char err[1536], msg[2048];
    int failed = -1, lock = -1;

    for (int i = 0; i < g->ntasks; i++)
        run[i].criu = -1, run[i].end = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < g->ntasks && failed < 0; i++) {
            int in_ns = task_in_ns (&g->tasks[i]);
            if (in_ns != (pass == 0))
                continue;
            if (!in_ns && lock < 0)
                lock = legacy_lock (g);
            g->tasks[i].dump_t0 = mono_ms_f ();
            if (dump_start (g, &g->tasks[i], &run[i], err, sizeof (err)) < 0) {
                snprintf (msg, sizeof (msg), "rank %d (pid %ld): %s", g->tasks[i].rank,
                          (long)g->tasks[i].pid, err);
                failed = i;
            } else if (!in_ns)
                for (int attempt = 1;; attempt++) {
                    dump_wait (g, run, i, deadline, msg, sizeof (msg), &failed);
                    if (failed != i || attempt >= 8 || !proc_dir_clash (run[i].log))
                        break;
                    log_msg (LOG_INFO, "job %s gen %d: rank %d: another dump used the task's "
                             "working folder at the same time; trying again", g->job, g->gen,
                             g->tasks[i].rank);
                    /* Workers of other nodes back off differently. */
                    if (attempt == 1)
                        srandom ((unsigned)getpid () ^ (unsigned)mono_ms_f ());
                    usleep (5000 + (useconds_t)(random () % (20000 * attempt)));
                    failed = -1;
                    if (dump_start (g, &g->tasks[i], &run[i], err, sizeof (err)) < 0) {
                        snprintf (msg, sizeof (msg), "rank %d (pid %ld): %s", g->tasks[i].rank,
                                  (long)g->tasks[i].pid, err);
                        failed = i;
                        break;
                    }
                }
        }
    dump_wait (g, run, -1, deadline, msg, sizeof (msg), &failed);
    if (lock >= 0)
        close (lock);
    if (failed >= 0)
        return gen_fail (g, PHASE_DUMP, msg);
    /* Each task's dump in its manifest entry, in ms from this node's dump
     * phase: the dumps of tasks in namespaces of their own overlap. */
    for (int i = 0; i < g->ntasks; i++)
        if (g->tasks[i].entry && g->tasks[i].dump_t1 >= g->tasks[i].dump_t0
            && g->tasks[i].dump_t0 >= t0) {
            json_object *d = json_object_new_object ();
            json_object_object_add (d, "start_ms", json_object_new_int64 (
                (int64_t)(g->tasks[i].dump_t0 - t0 + 0.5)));
            json_object_object_add (d, "end_ms", json_object_new_int64 (
                (int64_t)(g->tasks[i].dump_t1 - t0 + 0.5)));
            json_object_object_add (g->tasks[i].entry, "dump", d);
        }
    g->dumped = 1;
    g->t_dump = mono_ms_f () - t0;
    return 0;
}

/* Rebuild: every libibcr reopens a device, recreates its objects and
 * answers its new real ids, appended to ids. */
int genl_rebuild_ids (struct gen *g, json_object *ids)
{
    return ctl_gather (g, PHASE_REBUILD, CKPT_REBUILD, NULL, CKPT_IDS, g->conf->timeout_rebuild,
                       ids);
}

/* Connect: every QP to its prior state with translated peers (procs:
 * the ids of every process of the job). */
int genl_connect (struct gen *g, json_object *procs)
{
    json_object *x = json_object_new_object ();
    int rc;

    json_object_object_add (x, "procs", json_object_get (procs));
    rc = ctl_phase (g, PHASE_CONNECT, CKPT_CONNECT, x, CKPT_CONNECTED,
                    g->conf->timeout_rebuild);
    json_object_put (x);
    if (rc == 0)
        g->released = 0;
    return rc;
}

/* Resume: application threads go on. */
int genl_resume (struct gen *g)
{
    if (ctl_phase (g, PHASE_RESUME, CKPT_RESUME, NULL, CKPT_RESUMED,
                   g->conf->timeout_quiesce) < 0)
        return -1;
    g->quiesced = 0;
    return 0;
}

/* What a restart must hand back for each standard fd of the task's init:
 * "pipe:[INO]", "socket:[INO]" or a path. */
static json_object *task_stdio (pid_t pid, int in_ns)
{
    json_object *o = json_object_new_object ();

    for (int fd = 0; fd <= 2; fd++) {
        char path[64], target[PATH_MAX], key[4];
        ssize_t n;

        snprintf (key, sizeof (key), "%d", fd);
        /* Dumped as external (dump_start): always handed back. */
        if (in_ns && stdio_file_key (pid, fd, target, sizeof (target)) == 0) {
            json_object_object_add (o, key, json_object_new_string (target));
            continue;
        }
        snprintf (path, sizeof (path), "/proc/%ld/fd/%d", (long)pid, fd);
        if ((n = readlink (path, target, sizeof (target) - 1)) < 0)
            continue;
        target[n] = '\0';
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
        /* One per verbs process: a restart hands each a fresh connection
         * (restore.h).  "ctl_ino", the first, for readers of one. */
        json_object *inos = json_object_new_array ();
        for (int k = 0; k < g->tasks[i].nctl; k++)
            if (sockdiag_unix_peer (g->tasks[i].ctl_fd[k], &ino) == 0) {
                if (json_object_array_length (inos) == 0)
                    proto_set_int (t, "ctl_ino", (int64_t)ino);
                json_object_array_add (inos, json_object_new_int64 ((int64_t)ino));
            }
        if (json_object_array_length (inos) > 0)
            json_object_object_add (t, "ctl_inos", inos);
        else
            json_object_put (inos);
        int in_ns = task_in_ns (&g->tasks[i]), pmi_fd;
        json_object_object_add (t, "stdio", task_stdio (g->tasks[i].pid, in_ns));
        /* Dumped as external (dump_start): a restore hands the new
         * step's PMI socket in at that fd (pmi.h). */
        if (in_ns && pmi_find (g->tasks[i].pid, &pmi_fd, &ino) == 0) {
            proto_set_int (t, "pmi_fd", pmi_fd);
            proto_set_int (t, "pmi_ino", (int64_t)ino);
        }
        /* So is the task's end of its PMIx relay; the rank's connect
         * message, recorded by the relay, is said again to the new
         * step's server at a restore (pmi.h). */
        if (in_ns && pmix_find (g->tasks[i].pid, &pmi_fd, &ino) == 0) {
            unsigned char hello[PMIX_HELLO_MAX];
            char hex[2 * PMIX_HELLO_MAX + 1];
            ssize_t n = pmix_hello_read (g->tasks[i].pid, g->uid, hello, sizeof (hello));
            proto_set_int (t, "pmix_fd", pmi_fd);
            proto_set_int (t, "pmix_ino", (int64_t)ino);
            for (ssize_t k = 0; k < n; k++)
                snprintf (hex + 2 * k, 3, "%02x", hello[k]);
            if (n > 0)
                proto_set_str (t, "pmix_hello", hex);
        }
        /* How a restore must bring it back (taskns.h). */
        json_object_object_add (t, "in_ns", json_object_new_boolean (in_ns));
        json_object_array_add (tasks, t);
        /* The dump adds its interval to it (genl_dump). */
        json_object_put (g->tasks[i].entry);
        g->tasks[i].entry = json_object_get (t);
    }
    return tasks;
}

/* Copy: this node's images into the generation's storage folder (which
 * the leader created), durably. */
static void copy_progress (void *arg, uint64_t more)
{
    struct gen *g = arg;

    g->copy_done += more;
    gen_progress (g, PHASE_COPY, g->copy_done, g->copy_total, 0);
}

int genl_copy (struct gen *g)
{
    struct store st = { .root = g->conf->storage, .cluster = g->conf->cluster };
    char gdir[PATH_MAX], err[1536];
    double t0 = mono_ms_f ();

    if (store_gen_path (&st, g->job, g->gen, gdir, sizeof (gdir)) < 0)
        return gen_fail (g, PHASE_COPY, "bad job name");
    g->copy_done = g->copy_total = 0;
    for (int i = 0; i < g->ntasks && g->progress_fd >= 0; i++) {
        char src[PATH_MAX + 32];
        snprintf (src, sizeof (src), "%s/task-%d", g->staging, g->tasks[i].rank);
        g->copy_total += imgcopy_dir_size (src);
    }
    gen_progress (g, PHASE_COPY, 0, g->copy_total, 1);
    for (int i = 0; i < g->ntasks; i++) {
        char src[PATH_MAX + 32], dst[PATH_MAX + 32];
        uint64_t bytes;

        snprintf (src, sizeof (src), "%s/task-%d", g->staging, g->tasks[i].rank);
        snprintf (dst, sizeof (dst), "%s/task-%d", gdir, g->tasks[i].rank);
        if (imgcopy_dir (src, dst, g->conf->compression, &bytes, err, sizeof (err),
                         copy_progress, g) < 0)
            return gen_fail (g, PHASE_COPY, err);
        g->bytes += bytes;
    }
    g->t_commit = mono_ms_f () - t0;
    return 0;
}

/* Staging of this generation and the dump logs: removed after a commit;
 * after an abort the logs stay (the error names them). */
void genl_cleanup (struct gen *g, int committed)
{
    char path[PATH_MAX + 64];

    for (int i = 0; i < g->ntasks; i++) {
        json_object_put (g->tasks[i].entry);
        g->tasks[i].entry = NULL;
    }

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
