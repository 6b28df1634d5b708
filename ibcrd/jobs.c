/* jobs.c - see jobs.h.  Every log line names the job and step. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/errbuf.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/proto.h"
#include "common/store.h"
#include "jobs.h"
#include "phase.h"

struct jobs {
    struct job *head;
};

struct jobs *jobs_create (void)
{
    return calloc (1, sizeof (struct jobs));
}

static void job_free (struct job *job)
{
    while (job->tasks) {
        struct task *t = job->tasks;
        job->tasks = t->next;
        free (t);
    }
    free (job->members);
    json_object_put (job->last_generation);
    json_object_put (job->last_restore);
    if (job->report_fd >= 0) {
        proto_reader_fini (&job->report_rd);
        close (job->report_fd);
    }
    free (job);
}

void jobs_destroy (struct jobs *j)
{
    if (!j)
        return;
    while (j->head) {
        struct job *job = j->head;
        j->head = job->next;
        job_free (job);
    }
    free (j);
}

int jobs_may_act (uid_t peer, uid_t owner)
{
    return peer == 0 || peer == owner;
}

int jobs_is_slurm_id (const char *id)
{
    return ident_is_slurm_id (id);
}

struct job *jobs_find_owned (struct jobs *j, const char *id, uid_t uid)
{
    for (struct job *job = j->head; job; job = job->next)
        if (!strcmp (job->id, id) && (job->slurm || job->uid == uid))
            return job;
    return NULL;
}

struct job *jobs_find (struct jobs *j, const char *id, uid_t uid)
{
    struct job *job = jobs_find_owned (j, id, uid), *other = NULL;
    int n = 0;

    if (job || uid != 0)
        return job;
    /* Root names another user's job by its name alone when that is
     * unambiguous; "ibcr status" lists them all otherwise. */
    for (job = j->head; job; job = job->next)
        if (!strcmp (job->id, id)) {
            other = job;
            n++;
        }
    return n == 1 ? other : NULL;
}

int jobs_conn_tasks (struct jobs *j, int conn)
{
    int n = 0;

    for (struct job *job = j->head; job; job = job->next)
        for (struct task *t = job->tasks; t; t = t->next)
            n += t->conn == conn;
    return n;
}

int jobs_uid_tasks (struct jobs *j, uid_t uid)
{
    int n = 0;

    for (struct job *job = j->head; job; job = job->next)
        if (job->uid == uid)
            n += job->ntasks;
    return n;
}

struct task *jobs_find_pid (struct jobs *j, pid_t pid, struct job **jobp)
{
    for (struct job *job = j->head; job; job = job->next)
        for (struct task *t = job->tasks; t; t = t->next)
            if (t->pid == pid) {
                if (jobp)
                    *jobp = job;
                return t;
            }
    return NULL;
}

struct job *jobs_first (struct jobs *j)
{
    return j->head;
}

struct task *jobs_task (struct job *job, int rank)
{
    for (struct task *t = job->tasks; t; t = t->next)
        if (t->rank == rank)
            return t;
    return NULL;
}

/* Is pid root itself or one of its descendants? */
static int in_tree (pid_t pid, pid_t root)
{
    for (int depth = 0; pid > 1 && depth < 64; depth++) {
        if (pid == root)
            return 1;
        pid = proc_ppid (pid);
    }
    return 0;
}

struct task *jobs_find_tree (struct jobs *j, pid_t pid, struct job **jobp)
{
    /* A tree is shallow (init, application, its children); 64 levels up is
     * far past any real one and bounds a walk through a changing /proc. */
    for (int depth = 0; pid > 1 && depth < 64; depth++) {
        for (struct job *job = j->head; job; job = job->next)
            for (struct task *t = job->tasks; t; t = t->next)
                if (t->pid == pid || t->app_pid == pid) {
                    if (jobp)
                        *jobp = job;
                    return t;
                }
        pid = proc_ppid (pid);
    }
    return NULL;
}

int jobs_count (struct jobs *j)
{
    int n = 0;
    for (struct job *job = j->head; job; job = job->next)
        n++;
    return n;
}

/* A job or step id may arrive as a string or an integer (Slurm's). */
static int get_ident (json_object *req, const char *key, char *out, const char *dflt)
{
    json_object *v;
    const char *s;
    char num[32];

    if (!json_object_object_get_ex (req, key, &v)) {
        if (!dflt)
            return -1;
        s = dflt;
    } else if (json_object_is_type (v, json_type_int)) {
        snprintf (num, sizeof (num), "%lld", (long long)json_object_get_int64 (v));
        s = num;
    } else if (json_object_is_type (v, json_type_string))
        s = json_object_get_string (v);
    else
        return -1;
    if (!ident_ok (s))
        return -1;
    strcpy (out, s);
    return 0;
}

/* pid (the task, or its application) may be registered by a client of
 * uid: all its uids are the client's, or the client is root.  Fills id.
 * 0, or -1 with errno and err. */
static int pid_allowed (uid_t uid, int64_t pid, const char *what, struct proc_ident *id, char *err,
                        size_t len)
{
    if (pid <= 0 || pid > 0x3fffffff || proc_ident ((pid_t)pid, id) < 0)
        return errnprintf (err, len, ESRCH, "%s %lld does not exist", what, (long long)pid);
    if (uid != 0 && !proc_ident_all_uid (id, uid)) {
        return errnprintf (err, len, EPERM,
                           "%s %lld is not yours: its real, effective, saved and "
                           "filesystem uids (%u %u %u %u) must all be %u; a task registers itself "
                           "or a process of its own user",
                           what, (long long)pid, (unsigned)id->uid[0], (unsigned)id->uid[1],
                           (unsigned)id->uid[2], (unsigned)id->uid[3], (unsigned)uid);
    }
    return 0;
}

static int same_process (pid_t pid, const struct proc_ident *was, const char *what, char *err,
                         size_t len)
{
    struct proc_ident now;

    if (proc_ident (pid, &now) < 0)
        return errnprintf (err, len, ESRCH, "%s %ld is gone", what, (long)pid);
    if (now.start != was->start)
        return errnprintf (err, len, EPERM,
                           "%s %ld is no longer the registered process "
                           "(the pid was reused)",
                           what, (long)pid);
    if (memcmp (now.uid, was->uid, sizeof (now.uid)))
        return errnprintf (err, len, EPERM,
                           "%s %ld changed identity since it registered "
                           "(uids %u %u %u %u, were %u %u %u %u)",
                           what, (long)pid, (unsigned)now.uid[0], (unsigned)now.uid[1],
                           (unsigned)now.uid[2], (unsigned)now.uid[3], (unsigned)was->uid[0],
                           (unsigned)was->uid[1], (unsigned)was->uid[2], (unsigned)was->uid[3]);
    return 0;
}

int jobs_task_check (const struct job *job, const struct task *t, char *err, size_t len)
{
    char why[384];

    if (same_process (t->pid, &t->ident, "pid", why, sizeof (why)) < 0
        || (t->app_pid > 0 && t->app_pid != t->pid
            && same_process ((pid_t)t->app_pid, &t->app_ident, "application pid", why, sizeof (why))
                < 0))
        return errprintf (err, len, "job %s step %s rank %d: %s; refused", job->id, t->step,
                          t->rank, why);
    return 0;
}

/* Is leader ("node@host" or "host") on the admin's list of peers (hosts
 * separated by spaces or commas)? */
static int leader_allowed (const char *peers, const char *leader)
{
    const char *at = strchr (leader, '@'), *host = at ? at + 1 : leader;
    size_t hlen = strlen (host);

    for (const char *p = peers; p && *p;) {
        size_t n;
        p += strspn (p, " \t,");
        n = strcspn (p, " \t,");
        if (n && n == hlen && !strncmp (p, host, n))
            return 1;
        p += n;
    }
    return 0;
}

/* Job-wide facts: the first registration says them, later ones may only
 * add what was missing (ranks on other nodes repeat them). */
static void job_facts (struct job *job, int64_t size, int64_t interval, const char *leader,
                       json_object *req)
{
    if (size > job->size)
        job->size = (int)size;
    if (interval > 0 && !job->interval_ms) {
        job->interval_ms = (uint64_t)interval;
        clock_gettime (CLOCK_MONOTONIC, &job->next_due);
        job->next_due.tv_sec += interval / 1000;
        job->next_due.tv_nsec += (interval % 1000) * 1000000L;
        if (job->next_due.tv_nsec >= 1000000000L) {
            job->next_due.tv_sec++;
            job->next_due.tv_nsec -= 1000000000L;
        }
    }
    if (*leader && !job->leader[0]) {
        strcpy (job->leader, leader);
        job->leader_port = (int)proto_get_int (req, "leader_port", 0);
    }
}

/* Is job name id another user's than owner: a job of theirs registered
 * here, or committed generations whose manifest names another uid? */
static int name_taken (struct jobs *j, const struct conf *conf, const char *id, uid_t owner)
{
    struct store st = { .root = conf->storage, .cluster = conf->cluster };
    json_object *gens = NULL;
    char serr[256];
    int taken = 0;

    for (struct job *o = j->head; o; o = o->next)
        if (!strcmp (o->id, id) && o->uid != owner)
            return 1;
    if (store_list (&st, id, 0, &gens, serr, sizeof (serr)) == 0) {
        size_t n = json_object_array_length (gens);
        json_object *m;
        if (n > 0
            && json_object_object_get_ex (json_object_array_get_idx (gens, n - 1), "manifest", &m))
            taken = proto_get_int (m, "uid", -1) != (int64_t)owner;
    }
    json_object_put (gens);
    return taken;
}

struct job *jobs_register (struct jobs *j, uid_t uid, pid_t pid, int conn, json_object *req,
                           const struct conf *conf, char *err, size_t len)
{
    const char *node = conf->node;
    struct proc_ident ident, app_ident = { 0 };
    int64_t app_pid = proto_get_int (req, "app_pid", -1);
    char id[IDENT_MAX + 1], step[IDENT_MAX + 1], tnode[IDENT_MAX + 1];
    int64_t rank = proto_get_int (req, "rank", -1);
    int64_t claimed = proto_get_int (req, "pid", -1);
    int64_t owner = proto_get_int (req, "uid", -1);
    /* Job size: "size" from ibcr run, "ntasks" (the step's) from SPANK. */
    int64_t size = proto_get_int (req, "size", proto_get_int (req, "ntasks", 0));
    int64_t interval = proto_get_int (req, "interval_ms", 0);
    const char *leader = proto_get_str (req, "leader", "");
    struct job *job;
    struct task *t;

    if (get_ident (req, "job", id, NULL) < 0) {
        snprintf (err, len,
                  "\"job\" is missing or not a job id (1-%d characters of "
                  "letters, digits, '.', '_', '-')",
                  IDENT_MAX);
        goto inval;
    }
    if (get_ident (req, "step", step, "0") < 0 || get_ident (req, "node", tnode, node) < 0) {
        snprintf (err, len,
                  "\"step\" or \"node\" is not a valid name (letters, digits, "
                  "'.', '_', '-')");
        goto inval;
    }
    if (rank < 0 || rank >= conf->max_ranks) {
        snprintf (err, len,
                  "\"rank\" is missing or not an integer from 0 to %d (a job has "
                  "at most max_ranks = %d ranks in ibcrd.conf)",
                  conf->max_ranks - 1, conf->max_ranks);
        goto inval;
    }
    if (size < 0 || size > conf->max_ranks || (size && rank >= size)) {
        snprintf (err, len,
                  "\"size\" %lld: give the number of ranks of the job, more "
                  "than rank %lld and at most max_ranks = %d (ibcrd.conf)",
                  (long long)size, (long long)rank, conf->max_ranks);
        goto inval;
    }
    if (interval < 0
        || (interval > 0
            && ((uint64_t)interval < conf->interval_min
                || (uint64_t)interval > conf->interval_max))) {
        snprintf (err, len,
                  "\"interval_ms\" %lld is outside the bounds of this node: give 0 "
                  "(no periodic checkpoints) or from interval_min = %llu ms to interval_max "
                  "= %llu ms (ibcrd.conf)",
                  (long long)interval, (unsigned long long)conf->interval_min,
                  (unsigned long long)conf->interval_max);
        goto inval;
    }
    if (strlen (leader) >= sizeof (job->leader)) {
        snprintf (err, len, "\"leader\" is too long for a host name");
        goto inval;
    }
    /* A member sends MUNGE credentials to its leader: a user may name
     * only a host the admin allowed (Slurm jobs get theirs from root). */
    if (uid != 0 && *leader && !leader_allowed (conf->peers, leader)) {
        log_msg (LOG_WARNING, "job %s step %s: uid %u named leader %s, not in peers: refused", id,
                 step, (unsigned)uid, leader);
        errnprintf (err, len, EPERM,
                    "leader %s refused: a job outside Slurm may name as its leader "
                    "only a host listed in 'peers' of this node's ibcrd.conf (%s); run "
                    "multi-node jobs under Slurm, or ask the admin to list the host",
                    leader, conf->peers ? conf->peers : "none listed");
        return NULL;
    }
    /* Slurm job ids are Slurm's: only root (slurmstepd, with the owner
     * from Slurm) registers their tasks. */
    if (uid != 0
        && (jobs_is_slurm_id (id) || !strcmp (proto_get_str (req, "source", ""), "spank"))) {
        snprintf (err, len,
                  "job %s: %s only root (the SPANK plugin in slurmstepd) registers "
                  "the tasks of a Slurm job; run it with srun --checkpoint-ib, or give a job "
                  "name that is not all digits",
                  id,
                  jobs_is_slurm_id (id) ? "a Slurm job "
                                          "id:"
                                        : "\"source\":\"spank\":");
        log_msg (LOG_WARNING,
                 "job %s step %s: uid %u tried to register rank %lld of a Slurm "
                 "job: refused",
                 id, step, (unsigned)uid, (long long)rank);
        errno = EPERM;
        return NULL;
    }
    if (conf->max_registrations_per_conn > 0
        && jobs_conn_tasks (j, conn) >= conf->max_registrations_per_conn) {
        errnprintf (err, len, EUSERS,
                    "limit reached: %d tasks are registered over this connection "
                    "(max_registrations_per_conn in ibcrd.conf); register each task over its "
                    "own connection",
                    conf->max_registrations_per_conn);
        return NULL;
    }
    if (uid != 0 && conf->max_registrations_per_uid > 0
        && jobs_uid_tasks (j, uid) >= conf->max_registrations_per_uid) {
        errnprintf (err, len, EUSERS,
                    "limit reached: uid %u has %d tasks registered on this node "
                    "(max_registrations_per_uid in ibcrd.conf)",
                    (unsigned)uid, conf->max_registrations_per_uid);
        return NULL;
    }
    /* The task is the client itself unless it names another pid: then that
     * process must be the client's user's (ibcr run registering its
     * child), or the client must be root (slurmstepd).  So must the
     * application under it, which libibcr's hello is matched against. */
    if (claimed > 0)
        pid = (pid_t)claimed;
    if (pid_allowed (uid, pid, "pid", &ident, err, len) < 0)
        return NULL;
    if (app_pid >= 0 && app_pid != pid
        && pid_allowed (uid, app_pid, "app_pid", &app_ident, err, len) < 0)
        return NULL;
    /* Only root may register on behalf of another user. */
    if (owner >= 0 && (uid_t)owner != uid && uid != 0) {
        errnprintf (err, len, EPERM, "only root may register a task for another uid (%lld)",
                    (long long)owner);
        return NULL;
    }
    if (owner < 0)
        owner = uid;
    /* Storage keeps one folder per job name: a name another user runs,
     * or holds checkpoints under, is theirs (its retention would remove
     * their generations, its restart would find theirs). */
    if (!jobs_is_slurm_id (id) && name_taken (j, conf, id, (uid_t)owner)) {
        log_msg (LOG_WARNING,
                 "job %s step %s: uid %u asked for a name of another user: "
                 "refused",
                 id, step, (unsigned)uid);
        errnprintf (err, len, EPERM,
                    "job name %s belongs to another user (their job runs, or keeps "
                    "checkpoints, under it): choose another name",
                    id);
        return NULL;
    }

    if ((job = jobs_find_owned (j, id, (uid_t)owner))) {
        if (!jobs_may_act (uid, job->uid) || (uid_t)owner != job->uid) {
            log_msg (LOG_WARNING,
                     "job %s step %s: uid %u tried to register rank %lld into "
                     "a job of uid %u: refused",
                     id, step, (unsigned)uid, (long long)rank, (unsigned)job->uid);
            errnprintf (err, len, EPERM, "job %s belongs to another user", id);
            return NULL;
        }
        for (struct task **tp = &job->tasks; (t = *tp);) {
            char why[512];
            /* A rank whose process has ended stays registered until its
             * launcher's connection closes; a restore of that rank may
             * come first (the restarted task registers at once).  The
             * ended registration gives way; a live one never does. */
            if (t->rank == rank && !strcmp (t->step, step) && t->conn != conn
                && jobs_task_check (job, t, why, sizeof (why)) < 0) {
                log_msg (LOG_INFO, "%s: the new registration (pid %ld) takes its place", why,
                         (long)pid);
                *tp = t->next;
                free (t);
                job->ntasks--;
                continue;
            }
            tp = &t->next;
        }
        for (t = job->tasks; t; t = t->next)
            if (t->rank == rank && !strcmp (t->step, step)) {
                /* libibcr may say hello (and so register its process from
                 * IBCR_JOB) before its launcher registers the task's init:
                 * the launcher's registration takes that task over. */
                if (jobs_task_has_conn (t, t->conn) && t->pid != pid && in_tree (t->pid, pid)) {
                    log_msg (LOG_INFO,
                             "job %s step %s: rank %d: pid %ld is the "
                             "application of init %ld",
                             id, step, t->rank, (long)t->pid, (long)pid);
                    t->app_pid = app_pid >= 0 ? app_pid : t->pid;
                    t->app_ident = app_pid >= 0 && app_pid != pid ? app_ident : t->ident;
                    t->pid = pid;
                    t->ident = ident;
                    t->ns_pid = proto_get_int (req, "ns_pid", -1);
                    t->conn = conn;
                    job_facts (job, size, interval, leader, req);
                    return job;
                }
                errnprintf (err, len, EEXIST,
                            "job %s step %s rank %lld is already registered "
                            "(pid %ld)",
                            id, step, (long long)rank, (long)t->pid);
                return NULL;
            }
    } else {
        if (!(job = calloc (1, sizeof (*job))))
            goto nomem;
        strcpy (job->id, id);
        job->uid = (uid_t)owner;
        job->slurm = jobs_is_slurm_id (id);
        job->since = time (NULL);
        job->report_fd = -1;
        job->phase = -1;
        job->next = j->head;
        j->head = job;
    }
    job_facts (job, size, interval, leader, req);
    if (!(t = calloc (1, sizeof (*t))))
        goto nomem;
    t->pid = pid;
    t->ns_pid = proto_get_int (req, "ns_pid", -1);
    t->ident = ident;
    t->app_pid = app_pid;
    t->app_ident = app_pid >= 0 && app_pid != pid ? app_ident : ident;
    t->restored = proto_get_bool (req, "restored", 0);
    int64_t rg = proto_get_int (req, "restored_gen", 0);
    t->restored_gen = rg > 0 && rg <= INT32_MAX ? (int)rg : 0;
    if (t->restored) {
        /* How long its restore took, as its restarter (the user's) says:
         * for the timeline only, so only kept within a day. */
        int64_t ms = proto_get_int (req, "restore_ms", -1);
        if (ms >= 0 && ms <= 86400000) {
            t->restore_t1 = mono_ms_f ();
            t->restore_t0 = t->restore_t1 - (double)ms;
        }
    }
    t->rank = (int)rank;
    strcpy (t->step, step);
    strcpy (t->node, tnode);
    t->conn = conn;
    t->nprocs = 0;
    t->since = time (NULL);
    t->next = job->tasks;
    job->tasks = t;
    job->ntasks++;
    if (job->size < job->ntasks)
        job->size = job->ntasks;
    log_msg (LOG_INFO, "job %s step %s: registered rank %d pid %ld uid %u node %s", id, step,
             t->rank, (long)pid, (unsigned)job->uid, tnode);
    return job;
nomem:
    errnprintf (err, len, ENOMEM, "ibcrd is out of memory");
    return NULL;
inval:
    errno = EINVAL;
    return NULL;
}

int jobs_task_has_conn (const struct task *t, int conn)
{
    for (int i = 0; i < t->nprocs; i++)
        if (t->procs[i].conn == conn)
            return 1;
    return 0;
}

int jobs_task_add_proc (struct job *job, struct task *t, int conn, pid_t pid, char *err, size_t len)
{
    for (int i = 0; i < t->nprocs; i++)
        if (t->procs[i].conn == conn) {
            t->procs[i].pid = pid;
            return 0;
        }
    if (t->nprocs >= TASK_MAX_PROCS)
        return errnprintf (err, len, EUSERS,
                           "job %s rank %d has %d processes that use verbs "
                           "already (at most %d per task): this one cannot be checkpointed",
                           job->id, t->rank, t->nprocs, TASK_MAX_PROCS);
    t->procs[t->nprocs].conn = conn;
    t->procs[t->nprocs].pid = pid;
    t->nprocs++;
    return 0;
}

void jobs_drop_conn (struct jobs *j, int conn)
{
    struct job **jp = &j->head;

    while (*jp) {
        struct job *job = *jp;
        struct task **tp = &job->tasks;
        while (*tp) {
            struct task *t = *tp;
            for (int i = 0; i < t->nprocs; i++)
                if (t->procs[i].conn == conn) {
                    log_msg (LOG_INFO,
                             "job %s step %s: rank %d pid %ld: libibcr control "
                             "connection of pid %ld closed (%d left)",
                             job->id, t->step, t->rank, (long)t->pid, (long)t->procs[i].pid,
                             t->nprocs - 1);
                    memmove (&t->procs[i], &t->procs[i + 1],
                             (size_t)(t->nprocs - i - 1) * sizeof (t->procs[0]));
                    t->nprocs--;
                    i--;
                }
            if (t->conn == conn) {
                log_msg (LOG_INFO, "job %s step %s: rank %d pid %ld disconnected", job->id, t->step,
                         t->rank, (long)t->pid);
                *tp = t->next;
                free (t);
                job->ntasks--;
            } else
                tp = &t->next;
        }
        if (!job->tasks && !job->worker) {
            log_msg (LOG_INFO, "job %s: no task left on this node", job->id);
            *jp = job->next;
            job_free (job);
        } else
            jp = &job->next; /* a generation still copying keeps it */
    }
}

void jobs_drop_if_done (struct jobs *j, struct job *job)
{
    for (struct job **jp = &j->head; *jp; jp = &(*jp)->next) {
        if (*jp != job)
            continue;
        if (!job->tasks && !job->worker) {
            log_msg (LOG_INFO, "job %s: no task left on this node, its generation ended", job->id);
            *jp = job->next;
            job_free (job);
        }
        return;
    }
}

json_object *jobs_job_json (const struct job *job)
{
    json_object *o = json_object_new_object ();
    json_object *tasks = json_object_new_array ();

    if (!o || !tasks) {
        json_object_put (o);
        json_object_put (tasks);
        return NULL;
    }
    proto_set_str (o, "job", job->id);
    proto_set_int (o, "uid", job->uid);
    proto_set_int (o, "since", job->since);
    proto_set_int (o, "ntasks", job->ntasks);
    proto_set_int (o, "size", job->size);
    proto_set_int (o, "interval_ms", (int64_t)job->interval_ms);
    proto_set_int (o, "last_gen", job->last_gen);
    proto_set_bool (o, "checkpointing", job->worker != 0);
    if (job->ending)
        proto_set_bool (o, "ending", 1);
    /* Only while a generation runs: where its worker is now. */
    if (job->worker && job->phase >= 0) {
        proto_set_str (o, "phase", phase_name (job->phase));
        if (job->phase_gen > 0)
            proto_set_int (o, "running_gen", job->phase_gen);
    }
    if (job->last_error[0])
        proto_set_str (o, "last_error", job->last_error);
    if (job->leader[0])
        proto_set_str (o, "leader", job->leader);
    if (job->nmembers > 0) {
        /* Leader: the other nodes that joined, with their ranks. */
        json_object *ms = json_object_new_array ();
        for (int i = 0; ms && i < job->nmembers; i++) {
            json_object *mo = json_object_new_object (), *rs = json_object_new_array ();
            for (int k = 0; rs && k < job->members[i].nranks; k++)
                json_object_array_add (rs, json_object_new_int (job->members[i].ranks[k]));
            proto_set_str (mo, "node", job->members[i].node);
            json_object_object_add (mo, "ranks", rs);
            proto_set_int (mo, "joins", job->members[i].joins);
            json_object_array_add (ms, mo);
        }
        json_object_object_add (o, "members", ms);
    }
    if (job->last_generation)
        json_object_object_add (o, "last_generation", json_object_get (job->last_generation));
    if (job->last_restore)
        json_object_object_add (o, "last_restore", json_object_get (job->last_restore));
    for (const struct task *t = job->tasks; t; t = t->next) {
        json_object *to = json_object_new_object ();
        if (!to)
            continue;
        proto_set_int (to, "rank", t->rank);
        proto_set_str (to, "step", t->step);
        proto_set_str (to, "node", t->node);
        proto_set_int (to, "pid", t->pid);
        proto_set_bool (to, "control", t->nprocs > 0);
        /* Back from an image, held at libibcr's gate until every rank
         * is back and the rebuild resumed them. */
        proto_set_bool (to, "restored", t->restored != 0);
        /* The processes that use verbs, each with its own control
         * connection (0: a restored one not found yet).  A flat list: a
         * second "pid" key in a task would shadow the task's own for
         * readers that look for the key. */
        json_object *ps = json_object_new_array ();
        for (int i = 0; ps && i < t->nprocs; i++)
            json_object_array_add (ps, json_object_new_int64 (t->procs[i].pid));
        if (ps)
            json_object_object_add (to, "verbs_pids", ps);
        if (t->ns_pid >= 0)
            proto_set_int (to, "ns_pid", t->ns_pid);
        if (t->app_pid >= 0)
            proto_set_int (to, "app_pid", t->app_pid);
        json_object_array_add (tasks, to);
    }
    json_object_object_add (o, "tasks", tasks);
    return o;
}

json_object *jobs_list_json (struct jobs *j, uid_t uid)
{
    json_object *a = json_object_new_array ();

    if (!a)
        return NULL;
    for (struct job *job = j->head; job; job = job->next)
        if (jobs_may_act (uid, job->uid)) {
            json_object *o = jobs_job_json (job);
            if (o)
                json_object_array_add (a, o);
        }
    return a;
}
