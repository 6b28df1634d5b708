/* phase_dump.c - the dump phase: CRIU dumps every task of the job to
 * node-local staging.  The leader asks every node at once and takes a
 * dump as done only if its ibcrd outlived it (gen_dump); each node runs
 * CRIU on its own tasks (genl_dump), all at once for tasks in namespaces
 * of their own, one at a time for the others. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/file.h>
#include <syslog.h>
#include <unistd.h>

#include "common/criu.h"
#include "common/log.h"
#include "common/pmi.h"
#include "common/safedir.h"
#include "common/taskns.h"
#include "gen_int.h"
#include "sockdiag.h"

/* This node's dump counts only if the ibcrd that asked for it outlived it. */
static int gen_dump_here (struct gen *g)
{
    return genl_dump (g) < 0 || gen_daemon_gone (g, PHASE_DUMP) ? -1 : 0;
}

int gen_dump (struct gen *g)
{
    return gen_step (g, PHASE_DUMP, gen_dump_here, g->conf->timeout_dump, &g->t_dump);
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
    pid_t end; /* a task ended by this dump: the init to kill once dumped */
    char log[PATH_MAX + 64];
};

/* Start CRIU on one task's init, to node-local staging.  libibcr's
 * control socket leads out of the tree: CRIU is told it is external, and
 * a restart hands a fresh one back in its place; so are the task's
 * stdio files, opened outside its mount namespace. */
static int dump_start (struct gen *g, const struct gen_task *t, struct dump_run *r, char *err,
                       size_t errlen)
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
    snprintf (r->log, sizeof (r->log), "%s/%s/dump-gen-%d-rank-%d.log", g->conf->staging, g->job,
              g->gen, t->rank);
    /* Outside the task's namespaces criu runs as root: only for root's
     * own tasks (ibcr run's), never on an image of a user's process. */
    if (!in_ns && g->uid != 0) {
        snprintf (err, errlen,
                  "it belongs to uid %lu and has no namespaces of "
                  "its own: ibcr checkpoints an ordinary user's task only when the SPANK "
                  "plugin started it (srun/sbatch --checkpoint-ib)",
                  (unsigned long)g->uid);
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
            snprintf (err, errlen,
                      "rank %d: cannot find libibcr's end of the control "
                      "socket of pid %ld: %s",
                      t->rank, (long)t->ctl_pid[k], strerror (errno));
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
    log_msg (LOG_INFO, "job %s gen %d: rank %d: criu dump -t %s%s%s%s%s%s", g->job, g->gen, t->rank,
             pid, g->leave_running ? " --leave-running" : "",
             t->nctl == 1      ? " (libibcr control socket external)"
                 : t->nctl > 1 ? " (libibcr control sockets external)"
                               : "",
             pmi_fd >= 0 ? " (PMI socket external)" : "",
             pmix_fd >= 0 ? " (PMIx relay external)" : "",
             in_ns ? " (in the task's namespaces, as its user)" : "");
    if (access (argv[0], X_OK) < 0) {
        snprintf (err, errlen, "cannot run criu '%s': %s (set criu = PATH in ibcrd.conf)", argv[0],
                  strerror (errno));
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
static void dump_wait (struct gen *g, struct dump_run *run, int only, double deadline, char *msg,
                       size_t msglen, int *failed)
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
            struct rusage ru;
            pid_t w = wait4 (run[i].criu, &run[i].status, expired ? 0 : WNOHANG, &ru);
            if (w == 0 || (w < 0 && errno == EINTR))
                continue;
            /* CRIU's CPU time against its wall time tells a dump that
             * waited for a CPU from one that worked (doc/ckpt-stall.md);
             * the pages the parasite moves count to the task, not here. */
            g->tasks[i].dump_cpu_ms = w == run[i].criu
                ? (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3
                    + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3
                : -1;
            int ok =
                w == run[i].criu && WIFEXITED (run[i].status) && WEXITSTATUS (run[i].status) == 0;
            run[i].criu = 0;
            left--;
            g->tasks[i].dump_t1 = mono_ms_f ();
            if (ok && run[i].end > 0)
                (void)kill (run[i].end, SIGKILL);
            if (ok || *failed >= 0)
                continue;
            criu_log_errors (run[i].log, 3, errs, sizeof (errs));
            if (expired)
                snprintf (msg, msglen,
                          "rank %d (pid %ld): criu dump did not finish "
                          "within %d ms and was killed%s%s; log: %s (raise timeout_dump in "
                          "ibcrd.conf if the job is large)",
                          g->tasks[i].rank, (long)g->tasks[i].pid, (int)g->conf->timeout_dump,
                          errs[0] ? ": " : "", errs, run[i].log);
            else
                snprintf (msg, msglen,
                          "rank %d (pid %ld): criu dump failed (%s %d): "
                          "%s; log: %s",
                          g->tasks[i].rank, (long)g->tasks[i].pid,
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
        log_err (errno,
                 "job %s gen %d: cannot lock %s/.criu-dump.lock; dumps of this node's "
                 "jobs may overlap",
                 g->job, g->gen, g->conf->staging);
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
            g->tasks[i].dump_cpu_ms = -1;
            if (dump_start (g, &g->tasks[i], &run[i], err, sizeof (err)) < 0) {
                snprintf (msg, sizeof (msg), "rank %d (pid %ld): %s", g->tasks[i].rank,
                          (long)g->tasks[i].pid, err);
                failed = i;
            } else if (!in_ns)
                for (int attempt = 1;; attempt++) {
                    dump_wait (g, run, i, deadline, msg, sizeof (msg), &failed);
                    if (failed != i || attempt >= 8 || !proc_dir_clash (run[i].log))
                        break;
                    log_msg (LOG_INFO,
                             "job %s gen %d: rank %d: another dump used the task's "
                             "working folder at the same time; trying again",
                             g->job, g->gen, g->tasks[i].rank);
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
            json_object_object_add (
                d, "start_ms", json_object_new_int64 ((int64_t)(g->tasks[i].dump_t0 - t0 + 0.5)));
            json_object_object_add (
                d, "end_ms", json_object_new_int64 ((int64_t)(g->tasks[i].dump_t1 - t0 + 0.5)));
            if (g->tasks[i].dump_cpu_ms >= 0)
                json_object_object_add (
                    d, "cpu_ms", json_object_new_int64 ((int64_t)(g->tasks[i].dump_cpu_ms + 0.5)));
            json_object_object_add (g->tasks[i].entry, "dump", d);
        }
    g->dumped = 1;
    g->t_dump = mono_ms_f () - t0;
    return 0;
}
