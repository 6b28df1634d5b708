/* schedule.c - the scheduling of generations on this node (schedule.h):
 * the requests that start them ("checkpoint", "resume-restored"), the
 * restored tasks' control sockets ("ctl-attach"), the periodic timer,
 * Slurm's triggers (sched_start_trigger), restore deadlines, a member's
 * part of a leader's generation, and the workers' reports and ends. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/errbuf.h"
#include "common/fds.h"
#include "common/log.h"
#include "common/proto.h"
#include "gen.h"
#include "peer.h"
#include "phase.h"
#include "request.h"
#include "schedule.h"
#include "tasks.h"
#include "worker.h"

static sched_started_f observe_started;
static sched_done_f observe_done;

void sched_set_observer (sched_started_f started, sched_done_f done)
{
    observe_started = started;
    observe_done = done;
}

int sched_pollfds (struct server *s, struct pollfd *pfd, int max)
{
    int n = 0;

    for (struct job *job = jobs_first (s->jobs); job && n < max; job = job->next)
        if (job->report_fd >= 0)
            pfd[n++] = (struct pollfd){ .fd = job->report_fd, .events = POLLIN };
    return n;
}

void sched_dispatch (struct server *s, const struct pollfd *pfd, int n)
{
    for (int i = 0; i < n; i++) {
        if (!pfd[i].revents)
            continue;
        for (struct job *job = jobs_first (s->jobs); job; job = job->next)
            if (job->report_fd == pfd[i].fd) {
                sched_worker_report (s, job);
                break;
            }
    }
}

void sched_registered (struct server *s, struct job *job, json_object *req)
{
    (void)req;
    sched_try_resume (s, job);
}
/* Whether job's worker still runs.  A worker answers its asker (or the
 * leader's "end") just before it exits, so the next request can arrive
 * before SIGCHLD is handled: reap it here then, rather than answer
 * EBUSY for a generation that has ended. */
static int worker_busy (struct server *s, struct job *job)
{
    int status;
    pid_t w;

    if (!job->worker)
        return 0;
    /* Reaping first is not enough either: the asker may read the reply
     * and ask again while the worker is still on its way out.  It sent
     * its "worker-end" before the reply, so the end is there to read;
     * then its exit is a matter of moments: wait for it, a bounded time. */
    sched_worker_report (s, job);
    for (int ms = 0;; ms += 5) {
        struct timespec ts = { 0, 5000000L };
        if ((w = waitpid (job->worker, &status, WNOHANG)) != 0 || !job->reported_end || ms >= 1000)
            break;
        (void)nanosleep (&ts, NULL);
    }
    if (w == job->worker)
        sched_worker_done (s, job->worker,
                           WIFEXITED (status)
                               ? WEXITSTATUS (status)
                               : 128 + (WIFSIGNALED (status) ? WTERMSIG (status) : 0));
    return job->worker != 0;
}

/* The job named by req's "job" (string or integer) that client c may act
 * on, or NULL with *err set to the error reply. */
static struct job *job_for (struct server *s, struct client *c, json_object *req, const char *what,
                            json_object **err)
{
    const char *id = proto_get_str (req, "job", NULL);
    json_object *v;
    char num[32];
    struct job *job;

    if (!id && json_object_object_get_ex (req, "job", &v)
        && json_object_is_type (v, json_type_int)) {
        snprintf (num, sizeof (num), "%lld", (long long)json_object_get_int64 (v));
        id = num;
    }
    if (!id || !ident_ok (id)) {
        *err = proto_error (what, EINVAL, "\"job\" is missing or not a job id");
        return NULL;
    }
    if (!(job = jobs_find (s->jobs, id, c->uid))) {
        *err = proto_error (what, ENOENT,
                            "job %s has no task registered on node %s (is it "
                            "running? see 'ibcr status')",
                            id, s->conf->node);
        return NULL;
    }
    if (!jobs_may_act (c->uid, job->uid)) {
        log_msg (LOG_NOTICE, "job %s: %s refused to uid %u (owner uid %u)", id, what,
                 (unsigned)c->uid, (unsigned)job->uid);
        *err = proto_error (what, EPERM, "job %s belongs to another user", id);
        return NULL;
    }
    if (worker_busy (s, job)) {
        *err = proto_error (what, EBUSY,
                            "job %s: a generation is in progress (worker pid "
                            "%ld); try again when it ends",
                            id, (long)job->worker);
        return NULL;
    }
    return job;
}

static struct client *client_by_id (struct server *s, int id)
{
    for (struct client *c = s->clients; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

_Static_assert(TASK_MAX_PROCS <= GEN_MAX_CTL, "a generation takes every verbs process");

/* Every control connection of task t into gt (its processes that use
 * verbs), and their fds into keep[*nkeep] for the worker. */
static void gen_task_ctls (struct server *s, const struct task *t, struct gen_task *gt, int *keep,
                           int *nkeep)
{
    gt->nctl = 0;
    for (int i = 0; i < t->nprocs; i++) {
        struct client *ctl = client_by_id (s, t->procs[i].conn);
        if (!ctl)
            continue;
        gt->ctl_fd[gt->nctl] = ctl->fd;
        gt->ctl_pid[gt->nctl++] = t->procs[i].pid;
        keep[(*nkeep)++] = ctl->fd;
    }
}

/* The worker pid owns every control connection of job until it ends. */
static void lend_ctls (struct server *s, struct job *job, pid_t pid)
{
    for (struct task *t = job->tasks; t; t = t->next)
        for (int i = 0; i < t->nprocs; i++) {
            struct client *ctl = client_by_id (s, t->procs[i].conn);
            if (ctl)
                ctl->lent = pid;
        }
}

/* The worker's report channel (gen.h): a socket pair, the daemon's end
 * into job, the worker's end into *wfd (closed here once forked).  0, or
 * -1 with errno. */
static int report_open (struct job *job, int *wfd)
{
    int sv[2];

    if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    if (job->report_fd >= 0) { /* a worker's that was never reaped */
        proto_reader_fini (&job->report_rd);
        close (job->report_fd);
    }
    job->report_fd = sv[0];
    proto_reader_init (&job->report_rd, GEN_REPORT_CAP);
    job->phase = -1;
    job->phase_gen = 0;
    job->reported_end = 0;
    *wfd = sv[1];
    return 0;
}

/* The worker did not start: its channel goes. */
static void report_close (struct job *job)
{
    if (job->report_fd >= 0) {
        proto_reader_fini (&job->report_rd);
        close (job->report_fd);
    }
    job->report_fd = -1;
}

/* The primary group of the job's owner: its generations' folders are
 * opened to that group alone.  Without it no generation is taken: a
 * guessed group (the uid's number, say) would open the user's memory
 * images to whoever has that gid, and a restore run as the user could not
 * read them.  0, or -1 with errno ENOENT and why filled. */
static int owner_gid (const struct job *job, const char *node, gid_t *gid, char *why, size_t len)
{
    struct passwd pw, *res = NULL;
    char buf[4096];
    int rc = getpwuid_r (job->uid, &pw, buf, sizeof (buf), &res);

    if (res) {
        *gid = pw.pw_gid;
        return 0;
    }
    snprintf (why, len,
              "job %s: its owner, uid %u, is not in node %s's user database (%s): no "
              "generation is taken without the owner's group; check the node's name "
              "service (passwd, sssd, LDAP)",
              job->id, (unsigned)job->uid, node, rc ? strerror (rc) : "no such user");
    errno = ENOENT;
    return -1;
}

/* Fork the worker of a generation of job; asker (may be NULL) gets the
 * reply from the worker and leaves this loop.  0 or -1 with errno; why in
 * job->last_error when a task is no longer the process that registered
 * (EPERM, ESRCH): a dump or signal must never reach a reused pid. */
static int start_gen (struct server *s, struct job *job, enum gen_kind kind, const char *trigger,
                      int leave_running, struct client *asker, int progress)
{
    struct gen g = { .report_fd = -1 };
    /* On the heap: a job may hold up to max_ranks tasks here. */
    struct gen_task *tasks = calloc ((size_t)job->ntasks + 1, sizeof (*tasks));
    int *keep = calloc ((size_t)job->ntasks * GEN_MAX_CTL + 2, sizeof (*keep)), nkeep = 0;
    int n = 0, wfd = -1;
    struct gen_member *members = calloc ((size_t)job->nmembers + 1, sizeof (*members));
    pid_t pid = -1;
    int saved;

    if (!tasks || !keep || !members) {
        errno = ENOMEM;
        goto done;
    }
    /* A rebuild after a restart writes no folder: no group needed. */
    if (kind == GEN_CHECKPOINT
        && owner_gid (job, s->conf->node, &g.gid, job->last_error, sizeof (job->last_error)) < 0) {
        log_msg (LOG_WARNING, "%s", job->last_error);
        errno = ENOENT;
        goto done;
    }
    /* A rebuild resumes the tasks restored now; one registering while it
     * runs waits for the next. */
    if (kind == GEN_RESTORED)
        for (struct task *t = job->tasks; t; t = t->next)
            t->rebuilding = t->restored;
    for (struct task *t = job->tasks; t; t = t->next) {
        if (kind == GEN_RESTORED && !t->restored)
            continue;
        if (jobs_task_check (job, t, job->last_error, sizeof (job->last_error)) < 0) {
            log_msg (LOG_WARNING, "%s: no %s", job->last_error, trigger); /* keeps errno */
            goto done;
        }
        tasks[n] = (struct gen_task){
            .rank = t->rank, .pid = t->pid, .restored = t->restored, .restored_gen = t->restored_gen
        };
        if (kind == GEN_RESTORED && t->restore_t1 > 0) {
            if (!g.restore_t1 || t->restore_t0 < g.restore_t0)
                g.restore_t0 = t->restore_t0;
            if (t->restore_t1 > g.restore_t1)
                g.restore_t1 = t->restore_t1;
        }
        snprintf (tasks[n].node, sizeof (tasks[n].node), "%s", t->node);
        gen_task_ctls (s, t, &tasks[n], keep, &nkeep);
        n++;
    }
    g.conf = s->conf;
    g.kind = kind;
    snprintf (g.job, sizeof (g.job), "%s", job->id);
    g.uid = job->uid;
    g.slurm = job->slurm;
    g.size = job->size;
    g.trigger = trigger;
    g.leave_running = leave_running;
    g.ntasks = n;
    g.tasks = tasks;
    g.daemon = getpid ();
    g.pa = s->pa;
    g.fanout = s->conf->fanout;
    for (int i = 0; i < job->nmembers; i++) {
        snprintf (members[i].node, sizeof (members[i].node), "%s", job->members[i].node);
        snprintf (members[i].host, sizeof (members[i].host), "%s", job->members[i].host);
        members[i].port = job->members[i].port;
    }
    g.nmembers = job->nmembers;
    g.members = members;
    g.progress_fd = asker && progress ? asker->fd : -1;
    if (report_open (job, &wfd) < 0)
        goto done;
    g.report_fd = keep[nkeep++] = wfd;
    pid = worker_start (&g, asker ? asker->fd : -1, keep, nkeep);
    saved = errno;
    close (wfd);
    errno = saved;
    if (pid < 0) {
        report_close (job);
        errno = saved;
        goto done;
    }
    job->worker = pid;
    job->worker_kind = kind;
    if (observe_started)
        observe_started (job, kind, trigger);
    lend_ctls (s, job, pid);
    log_msg (LOG_INFO, "job %s: %s started (%s, worker pid %ld)", job->id,
             kind == GEN_RESTORED ? "resume of restored tasks" : "generation", trigger, (long)pid);
    if (asker)
        asker->handed = 1; /* the worker answers it; serve_client closes ours */
done:
    saved = errno;
    free (tasks);
    free (keep);
    free (members);
    errno = saved;
    return pid < 0 ? -1 : 0;
}

static int is_leader (struct job *job);

static int ranks_known (struct job *job)
{
    int n = job->ntasks;
    for (int i = 0; i < job->nmembers; i++)
        n += job->members[i].nranks;
    return n;
}

static int all_ranks (struct job *job)
{
    return ranks_known (job) >= job->size;
}

/* "checkpoint" {job, wait, trigger?, end?}: one generation now. */
json_object *h_checkpoint (struct server *s, struct client *c, json_object *req)
{
    json_object *err = NULL, *o;
    struct job *job = job_for (s, c, req, "checkpoint", &err);
    int wait = proto_get_bool (req, "wait", 0);

    if (!job)
        return err;
    if (!is_leader (job))
        return proto_error ("checkpoint", EINVAL,
                            "job %s is led by %s (rank 0's node): ask "
                            "its ibcrd",
                            job->id, job->leader);
    if (!all_ranks (job))
        return proto_error ("checkpoint", EAGAIN,
                            "job %s: %d of its %d ranks registered so "
                            "far; try again when every rank runs",
                            job->id, ranks_known (job), job->size);
    if (start_gen (s, job, GEN_CHECKPOINT, "manual", !proto_get_bool (req, "end", 0),
                   wait ? c : NULL, wait && proto_get_bool (req, "progress", 0))
        < 0) {
        if (errno == EPERM || errno == ESRCH || errno == ENOENT)
            return proto_error ("checkpoint", errno, "%s", job->last_error);
        return proto_error ("checkpoint", errno, "job %s: cannot start the generation: %s", job->id,
                            strerror (errno));
    }
    if (wait)
        return NO_REPLY;
    if ((o = ok_reply ("checkpoint"))) {
        proto_set_str (o, "job", job->id);
        proto_set_bool (o, "started", 1);
    }
    return o;
}

/* "ctl-attach" {job, rank, uid?}: this connection will be the control
 * socket of the task of that rank once restored (ibcr restart and the
 * SPANK restorer hand it into the tree with criu --inherit-fd); bound when
 * the task registers.  From here on the connection acts for the job's
 * user, not for whoever made it (root, usually), and may only serve as
 * that task's libibcr control channel: the restored program holds it. */
json_object *h_ctl_attach (struct server *s, struct client *c, json_object *req)
{
    const char *id = proto_get_str (req, "job", NULL);
    int64_t rank = proto_get_int (req, "rank", -1);
    int64_t owner = proto_get_int (req, "uid", -1);
    struct job *job;

    if (!id || !ident_ok (id) || rank < 0)
        return proto_error ("ctl-attach", EINVAL, "give \"job\" (a job id) and \"rank\"");
    if ((job = jobs_find (s->jobs, id, c->uid)) && !jobs_may_act (c->uid, job->uid))
        return proto_error ("ctl-attach", EPERM, "job %s belongs to another user", id);
    snprintf (c->attach_job, sizeof (c->attach_job), "%s", id);
    c->attach_rank = (int)rank;
    c->attached = 1;
    c->attach_by = c->uid;
    if (job)
        c->uid = job->uid;
    else if (c->uid == 0)
        c->uid = owner >= 0 ? (uid_t)owner : (uid_t)-1; /* bound at registration */
    log_msg (LOG_INFO,
             "job %s rank %d: client %d attached as its libibcr control channel "
             "(acts for uid %d from now on)",
             id, (int)rank, c->id, (int)c->uid);
    /* Answered now, before ibcr restart hands the socket to libibcr,
     * which reads requests only. */
    return ok_reply ("ctl-attach");
}

/* "resume-restored" {job}: rebuild and resume the restored tasks. */
json_object *h_resume_restored (struct server *s, struct client *c, json_object *req)
{
    const char *id = proto_get_str (req, "job", "");
    struct job *job = ident_ok (id) ? jobs_find (s->jobs, id, c->uid) : NULL;
    json_object *o;
    int n = 0, mine_resumed = 0;

    /* Not job_for(): a rebuild already running for the other ranks is the
     * one this caller waits for, not a reason to refuse. */
    if (!job)
        return proto_error ("resume-restored", ENOENT,
                            "job %s has no task registered on "
                            "node %s",
                            id, s->conf->node);
    if (!jobs_may_act (c->uid, job->uid))
        return proto_error ("resume-restored", EPERM, "job %s belongs to another user", id);
    for (struct task *t = job->tasks; t; t = t->next) {
        n += t->restored;
        mine_resumed |= t->conn == c->id && t->resumed;
    }
    /* This caller registered a task that a rebuild has resumed already: the
     * last rank to register completes the job, and a rebuild another rank
     * asked for can start and end between this caller's registration and
     * its request.  What it waits for is done. */
    if (mine_resumed) {
        if ((o = ok_reply ("resume-restored")))
            proto_set_bool (o, "already", 1);
        return o;
    }
    if (!n && !job->worker)
        return proto_error ("resume-restored", ENOENT, "job %s has no restored task waiting",
                            job->id);
    /* On a member node the leader drives the rebuild, once every rank of
     * the job is back: nothing to wait for here.  This comes before the
     * busy check: the leader may already have started the member side of
     * that very rebuild on this node when this rank's restarter asks. */
    if (!is_leader (job)) {
        if ((o = ok_reply ("resume-restored")))
            proto_set_str (o, "resumed_by", job->leader);
        return o;
    }
    if (job->worker && job->worker_kind != GEN_RESTORED)
        return proto_error ("resume-restored", EBUSY,
                            "job %s: a generation is in progress; "
                            "try again when it ends",
                            id);
    snprintf (c->resume_job, sizeof (c->resume_job), "%s", job->id);
    c->resume_deadline = mono_ms () + (long)s->conf->timeout_restore;
    /* A rebuild of the job failed and Slurm is taking it back: this one
     * is answered with the others (sched_worker_done). */
    for (struct client *d = s->clients; d; d = d->next)
        if (d != c && d->resume_held && !strcmp (d->resume_job, job->id)) {
            c->resume_held = 1;
            c->resume_deadline = d->resume_deadline;
            return NO_REPLY;
        }
    sched_try_resume (s, job);
    return NO_REPLY; /* answered when the rebuild ends (sched_worker_done) */
}

void sched_try_resume (struct server *s, struct job *job)
{
    int asked = 0;

    for (struct client *c = s->clients; c; c = c->next)
        if (!strcmp (c->resume_job, job->id)) {
            /* A rebuild failed, and Slurm is taking the job back. */
            if (c->resume_held)
                return;
            asked = 1;
        }
    /* Every rank must be back: their QPs reconnect to each other. */
    if (!asked || job->worker || !is_leader (job) || !all_ranks (job))
        return;
    if (start_gen (s, job, GEN_RESTORED, "restart", 1, NULL, 0) < 0)
        log_err (errno, "job %s: cannot start the rebuild of its restored tasks", job->id);
}

/* job->last_error = "generation N: " (or "restart: " for gen 0) and the
 * text, control characters made '?': it may quote what a task or CRIU
 * wrote, and "ibcr status" prints it on a terminal. */
static void __attribute__ ((format (printf, 3, 4)))
report_error (struct job *job, int gen, const char *fmt, ...)
{
    char *e = job->last_error;
    size_t len = sizeof (job->last_error);
    int off = gen > 0
        ? snprintf (e, len, "generation %d: ", gen)
        : snprintf (e, len, "%s", job->worker_kind == GEN_RESTORED ? "restart: " : "");
    va_list ap;

    va_start (ap, fmt);
    vsnprintf (e + off, len - (size_t)off, fmt, ap);
    va_end (ap);
    errbuf_printable (e);
}

/* One report of job's worker (gen.h).  It is root's own child, but a
 * malformed one is only logged: nothing in it is used unchecked. */
/* The leader's worker's timeline of its generation (or of the restart's
 * rebuild) into the job, for status.  It is saved before the worker
 * reports its end. */
static void load_timeline (struct server *s, struct job *job)
{
    int restore = job->worker_kind == GEN_RESTORED;
    json_object *tl, **to = restore ? &job->last_restore : &job->last_generation;

    if (!is_leader (job) || !(tl = timeline_load (s->conf->staging, job->id, restore)))
        return;
    json_object_put (*to);
    *to = tl;
}

static void worker_report (struct server *s, struct job *job, json_object *m)
{
    const char *type = proto_type (m);
    int64_t gen = proto_get_int (m, "gen", -1);
    int phase = phase_from_name (proto_get_str (m, "phase", NULL));

    if (gen < 0 || gen > INT32_MAX || strcmp (proto_get_str (m, "job", ""), job->id)) {
        log_msg (LOG_WARNING,
                 "job %s: worker %ld: report for another job or generation "
                 "ignored",
                 job->id, (long)job->worker);
        return;
    }
    if (!strcmp (type, "worker-phase") && phase >= 0) {
        job->phase = phase;
        job->phase_gen = (int)gen;
        return;
    }
    if (strcmp (type, "worker-end")) {
        log_msg (LOG_WARNING, "job %s: worker %ld: unknown report \"%.32s\" ignored", job->id,
                 (long)job->worker, type);
        return;
    }
    const char *result = proto_get_str (m, "result", "");
    job->reported_end = 1;
    /* The asker gets its reply right after this report: a "status" it
     * sends next must show this generation's timeline already. */
    load_timeline (s, job);
    /* A restart that failed only because the ranks' next restore will
     * agree (gen.c, restored_from_one): a Slurm job comes back by itself. */
    job->requeue_restart = job->slurm && job->worker_kind == GEN_RESTORED
        && strcmp (result, "resumed") && proto_get_bool (m, "requeue", 0);
    if (!strcmp (result, "committed") || !strcmp (result, "resumed")) {
        if (!strcmp (result, "committed") && gen > 0)
            job->last_gen = (int)gen;
        job->last_error[0] = '\0';
    } else
        report_error (job, (int)gen, "%s", proto_get_str (m, "error", "(no reason given)"));
}

void sched_worker_report (struct server *s, struct job *job)
{
    while (job->report_fd >= 0) {
        json_object *m = NULL;
        int rc = proto_reader_read (&job->report_rd, job->report_fd, &m);

        if (rc == 1) {
            worker_report (s, job, m);
            json_object_put (m);
            continue;
        }
        if (rc == 0)
            return;
        if (errno == EMSGSIZE || errno == EPROTO) {
            log_msg (LOG_WARNING, "job %s: worker %ld: %s report dropped", job->id,
                     (long)job->worker, errno == EMSGSIZE ? "oversized" : "malformed");
            continue;
        }
        /* Its end closed (it exited, or a send timed out): nothing more
         * will come. */
        report_close (job);
    }
}

void sched_resume_reply (struct server *s, const char *id, int ok, int held, const char *why)
{
    for (struct client *c = s->clients; c; c = c->next) {
        if (!c->resume_job[0] || (id && strcmp (c->resume_job, id)) || (held && !c->resume_held))
            continue;
        json_object *o = ok ? ok_reply ("resume-restored")
                            : proto_error ("resume-restored", EIO,
                                           "job %s: the restored tasks could "
                                           "not be rebuilt and resumed: %s",
                                           c->resume_job, why);
        if (o && proto_send (c->fd, o) < 0)
            log_msg (LOG_WARNING, "job %s: restarter left before the reply", c->resume_job);
        json_object_put (o);
        c->resume_job[0] = '\0';
        c->resume_deadline = 0;
        c->resume_held = 0;
    }
}

void sched_worker_done (struct server *s, pid_t pid, int status)
{
    struct job *job;

    if (tasks_relay_done (pid))
        return;
    for (struct client *c = s->clients; c; c = c->next)
        if (c->lent == pid)
            c->lent = 0;
    for (job = jobs_first (s->jobs); job; job = job->next)
        if (job->worker == pid)
            break;
    if (!job)
        return;
    /* It has exited: all it reported is in the channel. */
    sched_worker_report (s, job);
    report_close (job);
    if (!job->reported_end && status != 0) {
        char why[256];
        if (status > 128)
            snprintf (why, sizeof (why), "killed by signal %d", status - 128);
        else
            snprintf (why, sizeof (why), "ended with status %d without a report", status);
        report_error (job, job->phase_gen, "its worker (pid %ld) was %s%s%s", (long)pid, why,
                      job->phase >= 0 ? " in phase " : "",
                      job->phase >= 0 ? phase_name (job->phase) : "");
    }
    job->worker = 0;
    job->phase = -1;
    job->phase_gen = 0;
    /* Also for a worker that ended without its report. */
    if (!job->reported_end)
        load_timeline (s, job);
    if (job->worker_kind == GEN_RESTORED) {
        for (struct task *t = job->tasks; t; t = t->next) {
            if (status == 0 && t->rebuilding) {
                t->resumed = 1;
                t->restored = 0;
            }
            t->rebuilding = 0;
        }
        if (job->requeue_restart) {
            /* Answered once Slurm has the job back (slurm_hook.c): the
             * restarters end their tasks on the answer, which ended
             * before the requeue would end the job, failed.  At the
             * latest at timeout_restore (restore_deadlines). */
            for (struct client *c = s->clients; c; c = c->next)
                if (!strcmp (c->resume_job, job->id)) {
                    c->resume_held = 1;
                    c->resume_deadline = mono_ms () + (long)s->conf->timeout_restore;
                }
        } else
            sched_resume_reply (s, job->id, status == 0, 0,
                                job->last_error[0] ? job->last_error : "see ibcrd's log");
    }
    log_msg (status == 0 ? LOG_INFO : LOG_WARNING, "job %s: worker %ld %s", job->id, (long)pid,
             status == 0 ? "done" : "failed (see its lines above)");
    if (observe_done)
        observe_done (s, job, status);
    jobs_drop_if_done (s->jobs, job);
}

int sched_start_trigger (struct server *s, struct job *job, const char *trigger)
{
    if (!is_leader (job)) {
        errno = EINVAL;
        return -1;
    }
    if (worker_busy (s, job)) {
        errno = EBUSY;
        return -1;
    }
    if (!all_ranks (job)) {
        errno = EAGAIN;
        return -1;
    }
    return start_gen (s, job, GEN_CHECKPOINT, trigger, 1, NULL, 0);
}

static long ts_ms (const struct timespec *t)
{
    return t->tv_sec * 1000L + t->tv_nsec / 1000000L;
}

/* Is this node the job's leader (rank 0's node, or no leader named)? */
static int is_leader (struct job *job)
{
    return !job->leader[0] || jobs_task (job, 0) != NULL;
}

/* The ranks of job no node has registered, as "1, 3" (at most len). */
static void missing_ranks (struct job *job, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (int r = 0; r < job->size && off + 16 < len; r++) {
        int known = jobs_task (job, r) != NULL;
        for (int i = 0; i < job->nmembers && !known; i++)
            for (int k = 0; k < job->members[i].nranks; k++)
                known |= job->members[i].ranks[k] == r;
        if (!known)
            off += (size_t)snprintf (buf + off, len - off, "%s%d", off ? ", " : "", r);
    }
}

/* A restart whose ranks did not all come back within timeout_restore:
 * answer its waiting restarters with the missing ranks, and end the
 * restored tasks here, which would otherwise wait at libibcr's gate for
 * a rebuild that cannot come.  Returns ms until the next deadline, or -1. */
static long restore_deadlines (struct server *s)
{
    long now = mono_ms (), best = -1;

    for (struct client *c = s->clients; c; c = c->next) {
        struct job *job;
        char miss[256], ended[256];
        size_t off = 0;

        if (!c->resume_job[0] || !c->resume_deadline)
            continue;
        job = jobs_find (s->jobs, c->resume_job, c->uid);
        if (c->resume_held) {
            if (c->resume_deadline > now) {
                if (best < 0 || c->resume_deadline - now < best)
                    best = c->resume_deadline - now;
                continue;
            }
            char why[1536], id[IDENT_MAX + 1];
            snprintf (id, sizeof (id), "%s", c->resume_job); /* cleared by the reply */
            snprintf (why, sizeof (why),
                      "%.1000s; Slurm did not confirm the requeue within "
                      "timeout_restore (%.1f s): requeue the job (scontrol requeue)",
                      job && job->last_error[0] ? job->last_error : "see ibcrd's log",
                      s->conf->timeout_restore / 1000.0);
            sched_resume_reply (s, id, 0, 1, why);
            continue;
        }
        /* A rebuild that started is bounded by its own phase timeouts. */
        if (job && job->worker)
            continue;
        if (c->resume_deadline > now) {
            if (best < 0 || c->resume_deadline - now < best)
                best = c->resume_deadline - now;
            continue;
        }
        ended[0] = '\0';
        if (job) {
            missing_ranks (job, miss, sizeof (miss));
            char why[256];
            for (struct task *t = job->tasks; t; t = t->next)
                if (t->restored && t->pid > 0 && jobs_task_check (job, t, why, sizeof (why)) == 0
                    && kill (t->pid, SIGKILL) == 0 && off + 16 < sizeof (ended))
                    off += (size_t)snprintf (ended + off, sizeof (ended) - off, "%s%d",
                                             off ? ", " : "", t->rank);
        } else
            snprintf (miss, sizeof (miss), "?");
        log_msg (LOG_ERR,
                 "job %s: restart failed: rank%s %s not restored within "
                 "timeout_restore (%.1f s); restored rank%s %s on node %s ended",
                 c->resume_job, strchr (miss, ',') ? "s" : "", miss,
                 s->conf->timeout_restore / 1000.0, strchr (ended, ',') ? "s" : "",
                 ended[0] ? ended : "(none)", s->conf->node);
        if (job)
            snprintf (job->last_error, sizeof (job->last_error),
                      "restart: rank%s %s not "
                      "restored within timeout_restore (%.1f s); restored rank%s %s ended",
                      strchr (miss, ',') ? "s" : "", miss, s->conf->timeout_restore / 1000.0,
                      strchr (ended, ',') ? "s" : "", ended[0] ? ended : "(none)");
        json_object *o =
            proto_error ("resume-restored", ETIMEDOUT,
                         "job %s: restart failed: "
                         "rank%s %s of %d did not come back within "
                         "timeout_restore (%.1f s); the restored ranks were "
                         "ended. Restart every rank of the job (ibcr restart "
                         "%s --rank R on each node), or raise timeout_restore "
                         "in ibcrd.conf if ranks start slowly",
                         c->resume_job, strchr (miss, ',') ? "s" : "", miss, job ? job->size : 0,
                         s->conf->timeout_restore / 1000.0, c->resume_job);
        if (o && proto_send (c->fd, o) < 0)
            log_msg (LOG_WARNING, "job %s: restarter left before the reply", c->resume_job);
        json_object_put (o);
        /* Every restarter of this job gets its answer in this same pass. */
        for (struct client *d = c->next; d; d = d->next)
            if (!strcmp (d->resume_job, c->resume_job))
                d->resume_deadline = now;
        c->resume_job[0] = '\0';
        c->resume_deadline = 0;
    }
    return best;
}

int sched_timer (struct server *s)
{
    struct timespec now;
    long best = restore_deadlines (s), paused = s->accept_paused_until - mono_ms ();

    /* The listener rests after EMFILE: wake up to take it back. */
    if (paused > 0 && (best < 0 || paused < best))
        best = paused;

    clock_gettime (CLOCK_MONOTONIC, &now);
    for (struct job *job = jobs_first (s->jobs); job; job = job->next) {
        if (!job->interval_ms || !is_leader (job) || job->ending)
            continue;
        long left = ts_ms (&job->next_due) - ts_ms (&now);
        if (left <= 0 && !job->worker && all_ranks (job)) {
            /* The next one is due an interval after this one starts. */
            job->next_due = now;
            job->next_due.tv_sec += job->interval_ms / 1000;
            job->next_due.tv_nsec += (job->interval_ms % 1000) * 1000000L;
            if (job->next_due.tv_nsec >= 1000000000L) {
                job->next_due.tv_sec++;
                job->next_due.tv_nsec -= 1000000000L;
            }
            if (start_gen (s, job, GEN_CHECKPOINT, "periodic", 1, NULL, 0) < 0)
                log_err (errno, "job %s: periodic checkpoint not started", job->id);
            left = job->interval_ms;
        } else if (left <= 0)
            left = 100; /* a generation runs: look again soon */
        if (best < 0 || left < best)
            best = left;
    }
    return (int)best;
}

/* A TCP listener on our peer address, any port, for a member worker. */
static int member_listener (struct server *s, int *port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t len = sizeof (sa);
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    inet_pton (AF_INET, s->conf->peer_address, &sa.sin_addr);
    if (fd < 0 || bind (fd, (struct sockaddr *)&sa, sizeof (sa)) < 0 || listen (fd, 16) < 0
        || getsockname (fd, (struct sockaddr *)&sa, &len) < 0) {
        if (fd >= 0)
            close (fd);
        return -1;
    }
    *port = ntohs (sa.sin_port);
    return fd;
}

static json_object *gen_begin_member (struct server *s, json_object *m, struct job *job,
                                      struct gen_task *tasks, int *keep,
                                      struct gen_member **members)
{
    const char *id = job->id;
    struct gen g = { .report_fd = -1 };
    int nkeep = 0, n = 0, port;
    static char trigger[64];
    json_object *o;
    pid_t pid;

    if (worker_busy (s, job))
        return proto_error ("gen-begin", EBUSY,
                            "job %s: node %s is busy with another "
                            "generation",
                            id, s->conf->node);
    double r0 = 0, r1 = 0;
    for (struct task *t = job->tasks; t; t = t->next) {
        char why[512];
        if (jobs_task_check (job, t, why, sizeof (why)) < 0) {
            log_msg (LOG_WARNING, "%s: not dumped", why); /* keeps errno */
            return proto_error ("gen-begin", errno, "node %s: %s", s->conf->node, why);
        }
        if (t->restored && t->restore_t1 > 0) {
            if (!r1 || t->restore_t0 < r0)
                r0 = t->restore_t0;
            if (t->restore_t1 > r1)
                r1 = t->restore_t1;
        }
        tasks[n] = (struct gen_task){ .rank = t->rank,
                                      .pid = t->pid,
                                      .restored_gen = t->restored ? t->restored_gen : 0 };
        snprintf (tasks[n].node, sizeof (tasks[n].node), "%s", t->node);
        gen_task_ctls (s, t, &tasks[n], keep, &nkeep);
        n++;
    }
    char why[512];
    if (!proto_get_bool (m, "restored", 0)
        && owner_gid (job, s->conf->node, &g.gid, why, sizeof (why)) < 0) {
        log_msg (LOG_WARNING, "%s", why);
        return proto_error ("gen-begin", ENOENT, "%s", why);
    }
    snprintf (trigger, sizeof (trigger), "%s", proto_get_str (m, "trigger", "manual"));
    g.conf = s->conf;
    /* A restart's rebuild: the nodes it leads are told so too. */
    g.kind = proto_get_bool (m, "restored", 0) ? GEN_RESTORED : GEN_CHECKPOINT;
    snprintf (g.job, sizeof (g.job), "%s", job->id);
    g.uid = job->uid;
    g.size = job->size;
    g.trigger = trigger;
    g.leave_running = proto_get_bool (m, "leave_running", 1);
    g.gen = (int)proto_get_int (m, "gen", 0);
    g.ntasks = n;
    g.tasks = tasks;
    g.pa = s->pa;
    g.daemon = getpid ();
    g.progress_fd = -1; /* the leader's worker reports to its asker */
    /* The nodes this one leads in the tree (fanout.h), from the leader or
     * the node above (root's ibcrd, MUNGE-authenticated): checked all the
     * same, they are where MUNGE credentials go. */
    json_object *sub = NULL;
    g.fanout = (int)proto_get_int (m, "fanout", s->conf->fanout);
    g.levels = (int)proto_get_int (m, "levels", 0);
    if (g.fanout < 1 || g.levels < 0 || g.levels >= s->conf->max_nodes)
        return proto_error ("gen-begin", EINVAL, "node %s: bad \"fanout\" or \"levels\"",
                            s->conf->node);
    if (json_object_object_get_ex (m, "subtree", &sub)) {
        size_t ns = json_object_is_type (sub, json_type_array) ? json_object_array_length (sub) : 0;
        /* The caller frees it (the worker has its copy). */
        if (ns == 0 || ns >= (size_t)s->conf->max_nodes
            || !(*members = g.members = calloc (ns, sizeof (*g.members))))
            return proto_error ("gen-begin", EINVAL, "node %s: bad \"subtree\"", s->conf->node);
        for (size_t i = 0; i < ns; i++) {
            json_object *d = json_object_array_get_idx (sub, i);
            const char *node = proto_get_str (d, "node", ""), *host = proto_get_str (d, "host", "");
            int64_t port = proto_get_int (d, "port", 0);
            struct in_addr a;
            if (!ident_ok (node) || strlen (host) >= sizeof (g.members[i].host)
                || inet_pton (AF_INET, host, &a) != 1 || port < 1 || port > 65535)
                return proto_error ("gen-begin", EINVAL, "node %s: bad \"subtree\" entry %zu",
                                    s->conf->node, i);
            snprintf (g.members[i].node, sizeof (g.members[i].node), "%s", node);
            snprintf (g.members[i].host, sizeof (g.members[i].host), "%s", host);
            g.members[i].port = (int)port;
        }
        g.nmembers = (int)ns;
    }
    /* Generation 0: the rebuild after a restart, nothing is dumped. */
    if (g.gen < 0 || (g.gen == 0 && !proto_get_bool (m, "restored", 0)))
        return proto_error ("gen-begin", EINVAL, "\"gen\" must be a generation number");
    /* The generation's session key came inside the leader's MUNGE
     * credential; the worker alone keeps it. */
    unsigned char key[PEERAUTH_KEY_LEN];
    if (peerauth_key_parse (proto_get_str (m, "session_key", NULL), key) < 0)
        return proto_error ("gen-begin", EPROTO,
                            "node %s: gen-begin without a valid "
                            "\"session_key\" (is the leader's ibcrd older than this one?)",
                            s->conf->node);
    peerauth_session_init (&g.ses, key, 0);
    explicit_bzero (key, sizeof (key));
    if ((g.member_lfd = member_listener (s, &port)) < 0) {
        peerauth_session_wipe (&g.ses);
        return proto_error ("gen-begin", errno, "node %s: cannot listen for the leader: %s",
                            s->conf->node, strerror (errno));
    }
    if (!(o = proto_new ("ok"))) {
        peerauth_session_wipe (&g.ses);
        close (g.member_lfd);
        return NULL;
    }
    proto_set_str (o, "request", "gen-begin");
    proto_set_int (o, "port", port);
    json_object_object_add (o, "tasks", genl_tasks_json (&g));
    if (r1 > 0) {
        /* This node's restore, for the leader's timeline. */
        json_object *r = json_object_new_object ();
        double now = mono_ms_f ();
        json_object_object_add (r, "start_ago_ms", json_object_new_double (now - r0));
        json_object_object_add (r, "end_ago_ms", json_object_new_double (now - r1));
        json_object_object_add (o, "restore", r);
    }
    int wfd = -1;
    pid = report_open (job, &wfd) < 0 ? -1 : 0;
    if (pid == 0) {
        g.report_fd = keep[nkeep++] = wfd;
        pid = worker_start_member (&g, keep, nkeep);
        int e = errno;
        close (wfd);
        if (pid < 0)
            report_close (job);
        errno = e;
    }
    peerauth_session_wipe (&g.ses);
    if (pid < 0) {
        int e = errno;
        json_object_put (o);
        close (g.member_lfd);
        return proto_error ("gen-begin", e, "node %s: cannot start its worker: %s", s->conf->node,
                            strerror (e));
    }
    close (g.member_lfd);
    job->worker = pid;
    job->worker_kind = GEN_CHECKPOINT;
    if (observe_started)
        observe_started (job, GEN_CHECKPOINT, trigger);
    lend_ctls (s, job, pid);
    log_msg (LOG_INFO, "job %s gen %d: member worker pid %ld on port %d", job->id, g.gen, (long)pid,
             port);
    return o;
}

json_object *sched_member_begin (struct server *s, json_object *m, struct job *job)
{
    /* On the heap: a node may hold many tasks of one job. */
    struct gen_task *tasks = calloc ((size_t)job->ntasks + 1, sizeof (*tasks));
    int *keep = calloc ((size_t)job->ntasks * GEN_MAX_CTL + 2, sizeof (*keep));
    struct gen_member *members = NULL;
    json_object *o = NULL;

    if (tasks && keep)
        o = gen_begin_member (s, m, job, tasks, keep, &members);
    else
        o = proto_error ("gen-begin", ENOMEM, "node %s: out of memory", s->conf->node);
    free (tasks);
    free (keep);
    free (members);
    return o;
}

json_object *sched_member_abort (struct server *s, json_object *m, struct job *job)
{
    int64_t gen = proto_get_int (m, "gen", -1);
    json_object *o;

    if (job->worker > 0 && !is_leader (job) && job->report_fd >= 0 && job->phase_gen == gen
        && send (job->report_fd, "A", 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
        log_msg (LOG_WARNING,
                 "job %s gen %lld: the leader lost the node above this one; "
                 "worker %ld told to undo its part",
                 job->id, (long long)gen, (long)job->worker);
    if ((o = proto_new ("ok")))
        proto_set_str (o, "request", "gen-abort");
    (void)s;
    return o;
}
