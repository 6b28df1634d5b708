/* server.c - see server.h.  One request type = one handler function in
 * the table at the bottom; a reply is sent for every request received. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <syslog.h>
#include <unistd.h>

#include "common/log.h"
#include "common/proto.h"
#include "common/usock.h"
#include "peer.h"
#include "server.h"
#include "worker.h"

#define SERVER_MAX_CLIENTS 1024

struct client {
    int fd;
    int id;
    uid_t uid;
    gid_t gid;
    pid_t pid;
    pid_t lent;             /* a generation's worker owns this connection */
    int handed;             /* a worker answers it: close our copy now */
    int attach_rank;        /* ctl-attach: the restored task's rank, or -1 */
    char attach_job[IDENT_MAX + 1];
    struct proto_reader rd;
    struct client *next;
};

struct server {
    struct conf *conf;
    struct jobs *jobs;
    int lfd;
    int next_id;
    int nclients;
    int peer_port;
    struct peerauth *pa;
    time_t started;
    struct client *clients;
};

/* Returned by a handler that must not answer (libibcr's hello: libibcr
 * only answers requests, it does not read replies). */
static char no_reply_marker;
#define NO_REPLY ((json_object *)(void *)&no_reply_marker)

typedef json_object *(*handler_f) (struct server *s, struct client *c, json_object *req);

struct server *server_create (struct conf *conf, struct jobs *jobs)
{
    struct server *s = calloc (1, sizeof (*s));

    if (!s)
        return NULL;
    s->conf = conf;
    s->jobs = jobs;
    s->started = time (NULL);
    s->next_id = 1;
    if ((s->lfd = usock_listen (conf->socket, 128)) < 0) {
        int saved = errno;
        free (s);
        errno = saved;
        return NULL;
    }
    fcntl (s->lfd, F_SETFL, fcntl (s->lfd, F_GETFL) | O_NONBLOCK);
    return s;
}

static void client_close (struct server *s, struct client *c)
{
    struct client **cp;

    for (cp = &s->clients; *cp; cp = &(*cp)->next)
        if (*cp == c) {
            *cp = c->next;
            break;
        }
    jobs_drop_conn (s->jobs, c->id);
    proto_reader_fini (&c->rd);
    close (c->fd);
    s->nclients--;
    free (c);
}

void server_destroy (struct server *s)
{
    if (!s)
        return;
    while (s->clients)
        client_close (s, s->clients);
    if (s->lfd >= 0) {
        close (s->lfd);
        unlink (s->conf->socket);
    }
    free (s);
}

void server_set_conf (struct server *s, struct conf *conf)
{
    s->conf = conf;
}

void server_set_peerauth (struct server *s, struct peerauth *pa)
{
    s->pa = pa;
}

void server_set_peer_port (struct server *s, int port)
{
    s->peer_port = port;
}

int server_nclients (struct server *s)
{
    return s->nclients;
}

int server_pollfds (struct server *s, struct pollfd *pfd, int max)
{
    int n = 0;

    if (n < max && s->nclients < SERVER_MAX_CLIENTS)
        pfd[n++] = (struct pollfd){ .fd = s->lfd, .events = POLLIN };
    /* A lent connection is the worker's: reading it here would steal
     * libibcr's replies. */
    for (struct client *c = s->clients; c && n < max; c = c->next)
        if (!c->lent)
            pfd[n++] = (struct pollfd){ .fd = c->fd, .events = POLLIN };
    return n;
}

static void reply (struct server *s, struct client *c, json_object *req, json_object *rep)
{
    json_object *seq;

    if (!rep)
        rep = proto_error ("ibcrd", ENOMEM, "ibcrd is out of memory");
    if (!rep)
        return;
    /* Echo a client's sequence number so it can match replies. */
    if (req && json_object_object_get_ex (req, "seq", &seq))
        json_object_object_add (rep, "seq", json_object_get (seq));
    if (proto_send (c->fd, rep) < 0)
        log_msg (LOG_WARNING, "client pid %ld uid %u: cannot send reply: %s",
                 (long)c->pid, (unsigned)c->uid, strerror (errno));
    json_object_put (rep);
}

static json_object *ok_reply (const char *request)
{
    json_object *o = proto_new ("ok");
    if (o)
        proto_set_str (o, "request", request);
    return o;
}

static json_object *daemon_info (struct server *s, uid_t uid)
{
    json_object *o = json_object_new_object ();

    if (!o)
        return NULL;
    proto_set_str (o, "version", PACKAGE_VERSION);
    proto_set_int (o, "protocol", PROTO_VERSION);
    proto_set_int (o, "pid", getpid ());
    proto_set_str (o, "node", s->conf->node);
    proto_set_str (o, "cluster", s->conf->cluster);
    proto_set_str (o, "storage", s->conf->storage);
    proto_set_str (o, "staging", s->conf->staging);
    proto_set_int (o, "retention", s->conf->retention);
    proto_set_int (o, "peer_port", s->peer_port);
    proto_set_int (o, "uptime", time (NULL) - s->started);
    (void)uid;
    return o;
}

static json_object *h_ping (struct server *s, struct client *c, json_object *req)
{
    json_object *o = ok_reply ("ping");
    if (o) {
        proto_set_int (o, "uid", c->uid);
        proto_set_int (o, "pid", c->pid);
    }
    return o;
}

/* A member node tells the job's leader (rank 0's ibcrd) that it holds a
 * rank, so that the leader's generations include it.  In a short-lived
 * child, retried while the leader has not registered rank 0 yet, so the
 * ranks of a job may start in any order. */
static void join_leader (struct server *s, struct job *job, int rank)
{
    char node[IDENT_MAX + 1], host[256], err[1024];
    int port = job->leader_port ? job->leader_port : 7195;
    const char *at = strchr (job->leader, '@');
    pid_t pid;

    if (!s->pa) {
        log_msg (LOG_ERR, "job %s: rank %d cannot join leader %s: this ibcrd has no peer "
                 "listener (set peer_port)", job->id, rank, job->leader);
        return;
    }
    if (at) {
        snprintf (node, sizeof (node), "%.*s", (int)(at - job->leader), job->leader);
        snprintf (host, sizeof (host), "%s", at + 1);
    } else {
        snprintf (node, sizeof (node), "%.*s", IDENT_MAX, job->leader);
        snprintf (host, sizeof (host), "%s", job->leader);
    }
    if ((pid = fork ()) != 0) {
        if (pid < 0)
            log_err (errno, "job %s: cannot fork to join the leader", job->id);
        return;
    }
    close_range (3, ~0U, 0);
    for (int attempt = 0; attempt < 300; attempt++) {
        json_object *m = proto_new ("join"), *rep = NULL;
        proto_set_str (m, "from", s->conf->node);
        proto_set_str (m, "job", job->id);
        proto_set_int (m, "rank", rank);
        proto_set_int (m, "uid", job->uid);
        proto_set_int (m, "port", s->peer_port);
        int rc = peer_request (s->pa, host, port, node, m, (int)s->conf->timeout_request, &rep,
                               err, sizeof (err));
        json_object_put (m);
        if (rc == 0 && !strcmp (proto_type (rep), "ok")) {
            log_msg (LOG_INFO, "job %s: rank %d joined leader %s (%s:%d)", job->id, rank, node,
                     host, port);
            _exit (0);
        }
        if (rc == 0) {
            snprintf (err, sizeof (err), "%s", proto_get_str (rep, "message", "?"));
            if (proto_get_int (rep, "errno", 0) != ENOENT)
                attempt = 1000;     /* refused for good */
        }
        json_object_put (rep);
        usleep (200000);
    }
    log_msg (LOG_ERR, "job %s: rank %d could not join leader %s (%s:%d): %s; its generations "
             "will not include this node", job->id, rank, node, host, port, err);
    _exit (1);
}

static json_object *h_register (struct server *s, struct client *c, json_object *req)
{
    char err[256];
    struct job *job;
    json_object *o;

    job = jobs_register (s->jobs, c->uid, c->pid, c->id, req, s->conf->node, err,
                         sizeof (err));
    if (!job) {
        log_msg (LOG_WARNING, "register from pid %ld uid %u refused: %s", (long)c->pid,
                 (unsigned)c->uid, err);
        return proto_error ("register", errno, "%s", err);
    }
    /* A restored task's libibcr speaks over the connection its restarter
     * attached beforehand (ctl-attach), handed into the tree by CRIU. */
    if (proto_get_bool (req, "restored", 0)) {
        struct task *t = jobs_task (job, (int)proto_get_int (req, "rank", -1));
        for (struct client *a = s->clients; t && a; a = a->next)
            if (a->attach_rank == t->rank && !strcmp (a->attach_job, job->id)
                && jobs_may_act (a->uid, job->uid)) {
                t->ctl_conn = a->id;
                a->attach_rank = -1;
                log_msg (LOG_INFO, "job %s step %s: rank %d pid %ld: restored, libibcr "
                         "control connection handed back", job->id, t->step, t->rank,
                         (long)t->pid);
                break;
            }
    }
    if (job->leader[0] && !jobs_task (job, 0))
        join_leader (s, job, (int)proto_get_int (req, "rank", -1));
    if ((o = ok_reply ("register"))) {
        proto_set_str (o, "job", job->id);
        proto_set_str (o, "node", s->conf->node);
        proto_set_int (o, "ntasks", job->ntasks);
    }
    return o;
}

/* Value of NAME in /proc/PID/environ (root can read any), or NULL. */
static char *proc_env (pid_t pid, const char *name, char *buf, size_t len)
{
    char path[64], env[65536];
    size_t nlen = strlen (name);
    ssize_t n;
    int fd;

    snprintf (path, sizeof (path), "/proc/%ld/environ", (long)pid);
    if ((fd = open (path, O_RDONLY | O_CLOEXEC)) < 0)
        return NULL;
    n = read (fd, env, sizeof (env) - 1);
    close (fd);
    if (n <= 0)
        return NULL;
    env[n] = '\0';
    for (char *p = env; p < env + n; p += strlen (p) + 1)
        if (!strncmp (p, name, nlen) && p[nlen] == '=') {
            snprintf (buf, len, "%s", p + nlen + 1);
            return buf;
        }
    return NULL;
}

/* "ibcr-hello" from libibcr (lib/ibcr/ckpt_proto.h): this connection is
 * the control channel of the task whose pid the kernel gives.  Bind it to
 * the task registered for that pid (ibcr run and the SPANK plugin register
 * first); else register it from the task's IBCR_JOB, or SLURM_JOB_ID and
 * SLURM_STEP_ID.  Never replied to: libibcr reads only requests.
 * TODO (Slurm): check with slurmctld that a SLURM_JOB_ID belongs to the
 * client's uid before trusting it, or a user could claim another's job id
 * before its first task registers. */
static json_object *h_hello (struct server *s, struct client *c, json_object *req)
{
    struct job *job = NULL;
    struct task *t = jobs_find_tree (s->jobs, c->pid, &job);
    int64_t rank = proto_get_int (req, "rank", -1);
    char jobid[128], step[128], err[256];

    if (!t) {
        json_object *r;
        if (!proc_env (c->pid, "IBCR_JOB", jobid, sizeof (jobid))
            && !proc_env (c->pid, "SLURM_JOB_ID", jobid, sizeof (jobid))) {
            log_msg (LOG_WARNING, "libibcr pid %ld uid %u rank %lld connected without a "
                     "registration, IBCR_JOB or SLURM_JOB_ID: it cannot be checkpointed",
                     (long)c->pid, (unsigned)c->uid, (long long)rank);
            return NO_REPLY;
        }
        if (!proc_env (c->pid, "SLURM_STEP_ID", step, sizeof (step)))
            snprintf (step, sizeof (step), "0");
        if (!(r = proto_new ("register")))
            return NO_REPLY;
        proto_set_str (r, "job", jobid);
        proto_set_str (r, "step", step);
        proto_set_int (r, "rank", rank < 0 ? 0 : rank);
        job = jobs_register (s->jobs, c->uid, c->pid, c->id, r, s->conf->node, err,
                             sizeof (err));
        json_object_put (r);
        if (!job) {
            log_msg (LOG_WARNING, "libibcr pid %ld uid %u job %s: not registered: %s",
                     (long)c->pid, (unsigned)c->uid, jobid, err);
            return NO_REPLY;
        }
        t = jobs_find_tree (s->jobs, c->pid, &job);
    }
    if (t) {
        t->ctl_conn = c->id;
        log_msg (LOG_INFO, "job %s step %s: rank %d pid %ld: libibcr control connection",
                 job->id, t->step, t->rank, (long)t->pid);
    }
    return NO_REPLY;
}

static json_object *h_status (struct server *s, struct client *c, json_object *req)
{
    const char *id = proto_get_str (req, "job", NULL);
    json_object *o, *v;
    char num[32];

    /* A numeric job id is accepted as an integer too (Slurm's). */
    if (!id && json_object_object_get_ex (req, "job", &v)) {
        if (!json_object_is_type (v, json_type_int))
            return proto_error ("status", EINVAL, "\"job\" must be a job id string or integer");
        snprintf (num, sizeof (num), "%lld", (long long)json_object_get_int64 (v));
        id = num;
    }
    if (!(o = ok_reply ("status")))
        return NULL;
    json_object_object_add (o, "daemon", daemon_info (s, c->uid));
    if (id) {
        struct job *job;
        if (!ident_ok (id)) {
            json_object_put (o);
            return proto_error ("status", EINVAL, "'%s' is not a job id", id);
        }
        if (!(job = jobs_find (s->jobs, id))) {
            json_object_put (o);
            return proto_error ("status", ENOENT, "job %s has no task registered on node %s",
                                id, s->conf->node);
        }
        if (!jobs_may_act (c->uid, job->uid)) {
            json_object_put (o);
            log_msg (LOG_NOTICE, "job %s: status refused to uid %u (owner uid %u)", id,
                     (unsigned)c->uid, (unsigned)job->uid);
            return proto_error ("status", EPERM, "job %s belongs to another user", id);
        }
        json_object_object_add (o, "job", jobs_job_json (job));
    } else
        json_object_object_add (o, "jobs", jobs_list_json (s->jobs, c->uid));
    return o;
}

/* The job named by req's "job" (string or integer) that client c may act
 * on, or NULL with *err set to the error reply. */
static struct job *job_for (struct server *s, struct client *c, json_object *req,
                            const char *what, json_object **err)
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
    if (!(job = jobs_find (s->jobs, id))) {
        *err = proto_error (what, ENOENT, "job %s has no task registered on node %s (is it "
                            "running? see 'ibcr status')", id, s->conf->node);
        return NULL;
    }
    if (!jobs_may_act (c->uid, job->uid)) {
        log_msg (LOG_NOTICE, "job %s: %s refused to uid %u (owner uid %u)", id, what,
                 (unsigned)c->uid, (unsigned)job->uid);
        *err = proto_error (what, EPERM, "job %s belongs to another user", id);
        return NULL;
    }
    if (job->worker) {
        *err = proto_error (what, EBUSY, "job %s: a generation is in progress (worker pid "
                            "%ld); try again when it ends", id, (long)job->worker);
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

/* Fork the worker of a generation of job; asker (may be NULL) gets the
 * reply from the worker and leaves this loop.  0 or -1 with errno. */
static int start_gen (struct server *s, struct job *job, enum gen_kind kind,
                      const char *trigger, int leave_running, struct client *asker)
{
    struct gen g = { 0 };
    struct gen_task tasks[job->ntasks > 0 ? job->ntasks : 1];
    int keep[job->ntasks > 0 ? job->ntasks : 1], nkeep = 0, n = 0;
    struct passwd *pw = getpwuid (job->uid);
    pid_t pid;

    for (struct task *t = job->tasks; t; t = t->next) {
        struct client *ctl = t->ctl_conn >= 0 ? client_by_id (s, t->ctl_conn) : NULL;
        if (kind == GEN_RESTORED && !t->restored)
            continue;
        tasks[n] = (struct gen_task){ .rank = t->rank, .pid = t->pid,
                                      .ctl_fd = ctl ? ctl->fd : -1, .restored = t->restored };
        snprintf (tasks[n].node, sizeof (tasks[n].node), "%s", t->node);
        if (ctl)
            keep[nkeep++] = ctl->fd;
        n++;
    }
    g.conf = s->conf;
    g.kind = kind;
    snprintf (g.job, sizeof (g.job), "%s", job->id);
    g.uid = job->uid;
    g.gid = pw ? pw->pw_gid : job->uid;
    g.size = job->size;
    g.trigger = trigger;
    g.leave_running = leave_running;
    g.ntasks = n;
    g.tasks = tasks;
    g.daemon = getpid ();
    g.pa = s->pa;
    struct gen_member members[job->nmembers + 1];
    memset (members, 0, sizeof (members));
    for (int i = 0; i < job->nmembers; i++) {
        snprintf (members[i].node, sizeof (members[i].node), "%s", job->members[i].node);
        snprintf (members[i].host, sizeof (members[i].host), "%s", job->members[i].host);
        members[i].port = job->members[i].port;
    }
    g.nmembers = job->nmembers;
    g.members = members;
    if ((pid = worker_start (&g, asker ? asker->fd : -1, keep, nkeep)) < 0)
        return -1;
    job->worker = pid;
    job->worker_kind = kind;
    for (struct task *t = job->tasks; t; t = t->next) {
        struct client *ctl = t->ctl_conn >= 0 ? client_by_id (s, t->ctl_conn) : NULL;
        if (ctl)
            ctl->lent = pid;
    }
    log_msg (LOG_INFO, "job %s: %s started (%s, worker pid %ld)", job->id,
             kind == GEN_RESTORED ? "resume of restored tasks" : "generation", trigger,
             (long)pid);
    if (asker)
        asker->handed = 1;          /* the worker answers it; serve_client closes ours */
    return 0;
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
static json_object *h_checkpoint (struct server *s, struct client *c, json_object *req)
{
    json_object *err = NULL, *o;
    struct job *job = job_for (s, c, req, "checkpoint", &err);
    int wait = proto_get_bool (req, "wait", 0);

    if (!job)
        return err;
    if (!is_leader (job))
        return proto_error ("checkpoint", EINVAL, "job %s is led by %s (rank 0's node): ask "
                            "its ibcrd", job->id, job->leader);
    if (!all_ranks (job))
        return proto_error ("checkpoint", EAGAIN, "job %s: %d of its %d ranks registered so "
                            "far; try again when every rank runs", job->id, ranks_known (job),
                            job->size);
    if (start_gen (s, job, GEN_CHECKPOINT, "manual", !proto_get_bool (req, "end", 0),
                   wait ? c : NULL) < 0)
        return proto_error ("checkpoint", errno, "job %s: cannot start the generation: %s",
                            job->id, strerror (errno));
    if (wait)
        return NO_REPLY;
    if ((o = ok_reply ("checkpoint"))) {
        proto_set_str (o, "job", job->id);
        proto_set_bool (o, "started", 1);
    }
    return o;
}

/* "ctl-attach" {job, rank}: this connection will be the control socket of
 * the task of that rank once restored (ibcr restart hands it into the
 * tree with criu --inherit-fd); bound when the task registers. */
static json_object *h_ctl_attach (struct server *s, struct client *c, json_object *req)
{
    const char *id = proto_get_str (req, "job", NULL);
    int64_t rank = proto_get_int (req, "rank", -1);
    struct job *job;

    if (!id || !ident_ok (id) || rank < 0)
        return proto_error ("ctl-attach", EINVAL, "give \"job\" (a job id) and \"rank\"");
    if ((job = jobs_find (s->jobs, id)) && !jobs_may_act (c->uid, job->uid))
        return proto_error ("ctl-attach", EPERM, "job %s belongs to another user", id);
    snprintf (c->attach_job, sizeof (c->attach_job), "%s", id);
    c->attach_rank = (int)rank;
    /* Answered now, before ibcr restart hands the socket to libibcr,
     * which reads requests only. */
    return ok_reply ("ctl-attach");
}

/* "resume-restored" {job}: rebuild and resume the restored tasks. */
static json_object *h_resume_restored (struct server *s, struct client *c, json_object *req)
{
    json_object *err = NULL;
    struct job *job = job_for (s, c, req, "resume-restored", &err);
    int n = 0;

    if (!job)
        return err;
    for (struct task *t = job->tasks; t; t = t->next)
        n += t->restored;
    if (!n)
        return proto_error ("resume-restored", ENOENT, "job %s has no restored task waiting",
                            job->id);
    if (start_gen (s, job, GEN_RESTORED, "restart", 1, c) < 0)
        return proto_error ("resume-restored", errno, "job %s: cannot start: %s", job->id,
                            strerror (errno));
    return NO_REPLY;
}

void server_worker_done (struct server *s, pid_t pid, int status)
{
    struct job *job;

    for (struct client *c = s->clients; c; c = c->next)
        if (c->lent == pid)
            c->lent = 0;
    for (job = jobs_first (s->jobs); job; job = job->next)
        if (job->worker == pid)
            break;
    if (!job)
        return;
    job->worker = 0;
    if (job->worker_kind == GEN_RESTORED && status == 0)
        for (struct task *t = job->tasks; t; t = t->next)
            t->restored = 0;
    log_msg (status == 0 ? LOG_INFO : LOG_WARNING, "job %s: worker %ld %s", job->id,
             (long)pid, status == 0 ? "done" : "failed (see its lines above)");
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

int server_timer (struct server *s)
{
    struct timespec now;
    long best = -1;

    clock_gettime (CLOCK_MONOTONIC, &now);
    for (struct job *job = jobs_first (s->jobs); job; job = job->next) {
        if (!job->interval_ms || !is_leader (job))
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
            if (start_gen (s, job, GEN_CHECKPOINT, "periodic", 1, NULL) < 0)
                log_err (errno, "job %s: periodic checkpoint not started", job->id);
            left = job->interval_ms;
        } else if (left <= 0)
            left = 100;     /* a generation runs: look again soon */
        if (best < 0 || left < best)
            best = left;
    }
    return (int)best;
}

/* Peer "join" {job, rank, uid, port, from}: a member node holds a rank
 * of a job led here. */
static json_object *p_join (struct server *s, json_object *m, const char *addr)
{
    const char *id = proto_get_str (m, "job", ""), *from = proto_get_str (m, "from", "");
    struct job *job = ident_ok (id) ? jobs_find (s->jobs, id) : NULL;
    struct job_member *mb = NULL;
    json_object *o;

    if (!job || !jobs_task (job, 0))
        return proto_error ("join", ENOENT, "rank 0 of job %s is not registered on node %s "
                            "(yet)", id, s->conf->node);
    if ((int64_t)job->uid != proto_get_int (m, "uid", -1))
        return proto_error ("join", EPERM, "job %s belongs to another user on node %s", id,
                            s->conf->node);
    if (!ident_ok (from))
        return proto_error ("join", EINVAL, "\"from\" is not a node name");
    for (int i = 0; i < job->nmembers; i++)
        if (!strcmp (job->members[i].node, from))
            mb = &job->members[i];
    if (!mb) {
        if (job->nmembers >= JOB_MAX_MEMBERS)
            return proto_error ("join", ENOSPC, "job %s has too many nodes", id);
        mb = &job->members[job->nmembers++];
        memset (mb, 0, sizeof (*mb));
        snprintf (mb->node, sizeof (mb->node), "%s", from);
    }
    /* The address the join came from: identity is MUNGE's, this is only
     * where to reach that node's ibcrd. */
    snprintf (mb->host, sizeof (mb->host), "%.*s", (int)strcspn (addr, ":"), addr);
    mb->port = (int)proto_get_int (m, "port", 7195);
    mb->nranks++;
    log_msg (LOG_INFO, "job %s: node %s (%s:%d) joined with rank %lld", id, from, mb->host,
             mb->port, (long long)proto_get_int (m, "rank", -1));
    if ((o = proto_new ("ok")))
        proto_set_str (o, "request", "join");
    return o;
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

/* Peer "gen-begin" {job, gen, trigger, leave_running}: the leader starts a
 * generation; a worker here will serve its phases. */
static json_object *p_gen_begin (struct server *s, json_object *m)
{
    const char *id = proto_get_str (m, "job", "");
    struct job *job = ident_ok (id) ? jobs_find (s->jobs, id) : NULL;
    struct gen g = { 0 };
    struct gen_task tasks[job && job->ntasks ? job->ntasks : 1];
    int keep[job && job->ntasks ? job->ntasks : 1], nkeep = 0, n = 0, port;
    static char trigger[64];
    json_object *o;
    pid_t pid;

    if (!job)
        return proto_error ("gen-begin", ENOENT, "job %s has no task on node %s", id,
                            s->conf->node);
    if (job->worker)
        return proto_error ("gen-begin", EBUSY, "job %s: node %s is busy with another "
                            "generation", id, s->conf->node);
    for (struct task *t = job->tasks; t; t = t->next) {
        struct client *ctl = t->ctl_conn >= 0 ? client_by_id (s, t->ctl_conn) : NULL;
        tasks[n] = (struct gen_task){ .rank = t->rank, .pid = t->pid,
                                      .ctl_fd = ctl ? ctl->fd : -1 };
        snprintf (tasks[n].node, sizeof (tasks[n].node), "%s", t->node);
        if (ctl)
            keep[nkeep++] = ctl->fd;
        n++;
    }
    snprintf (trigger, sizeof (trigger), "%s", proto_get_str (m, "trigger", "manual"));
    g.conf = s->conf;
    g.kind = GEN_CHECKPOINT;
    snprintf (g.job, sizeof (g.job), "%s", job->id);
    g.uid = job->uid;
    g.size = job->size;
    g.trigger = trigger;
    g.leave_running = proto_get_bool (m, "leave_running", 1);
    g.gen = (int)proto_get_int (m, "gen", 0);
    g.ntasks = n;
    g.tasks = tasks;
    g.pa = s->pa;
    if (g.gen < 1)
        return proto_error ("gen-begin", EINVAL, "\"gen\" must be a generation number");
    if ((g.member_lfd = member_listener (s, &port)) < 0)
        return proto_error ("gen-begin", errno, "node %s: cannot listen for the leader: %s",
                            s->conf->node, strerror (errno));
    if (!(o = proto_new ("ok"))) {
        close (g.member_lfd);
        return NULL;
    }
    proto_set_str (o, "request", "gen-begin");
    proto_set_int (o, "port", port);
    json_object_object_add (o, "tasks", genl_tasks_json (&g));
    if ((pid = worker_start_member (&g, keep, nkeep)) < 0) {
        json_object_put (o);
        close (g.member_lfd);
        return proto_error ("gen-begin", errno, "node %s: cannot fork: %s", s->conf->node,
                            strerror (errno));
    }
    close (g.member_lfd);
    job->worker = pid;
    job->worker_kind = GEN_CHECKPOINT;
    for (struct task *t = job->tasks; t; t = t->next) {
        struct client *ctl = t->ctl_conn >= 0 ? client_by_id (s, t->ctl_conn) : NULL;
        if (ctl)
            ctl->lent = pid;
    }
    log_msg (LOG_INFO, "job %s gen %d: member worker pid %ld on port %d", job->id, g.gen,
             (long)pid, port);
    return o;
}

json_object *server_peer_request (void *arg, json_object *m, const char *addr)
{
    struct server *s = arg;
    const char *type = proto_type (m);

    if (!strcmp (type, "join"))
        return p_join (s, m, addr);
    if (!strcmp (type, "gen-begin"))
        return p_gen_begin (s, m);
    return NULL;
}

static const struct {
    const char *type;
    handler_f fn;
} handlers[] = {
    { "checkpoint", h_checkpoint },
    { "ctl-attach", h_ctl_attach },
    { "ibcr-hello", h_hello },
    { "ping", h_ping },
    { "register", h_register },
    { "resume-restored", h_resume_restored },
    { "status", h_status },
};
#define NHANDLERS (sizeof (handlers) / sizeof (handlers[0]))

static const char *known_types (void)
{
    return "checkpoint, ctl-attach, ibcr-hello, ping, register, resume-restored, status";
}

static void handle (struct server *s, struct client *c, json_object *req)
{
    const char *type = proto_type (req);
    int version = proto_version (req);

    if (version != PROTO_VERSION) {
        log_msg (LOG_WARNING, "client pid %ld uid %u: protocol version %d refused",
                 (long)c->pid, (unsigned)c->uid, version);
        reply (s, c, req, proto_error (type, EPROTONOSUPPORT, "protocol version %d is not "
               "supported: this ibcrd speaks version %d; use ibcr and libibcr of the same "
               "release as ibcrd", version, PROTO_VERSION));
        return;
    }
    /* Never answer a reply: two parties answering each other's "error"
     * would loop forever. */
    if (!strcmp (type, "ok") || !strcmp (type, "error")) {
        log_msg (LOG_WARNING, "client pid %ld uid %u: unexpected '%s' message ignored: %.200s",
                 (long)c->pid, (unsigned)c->uid, type, proto_get_str (req, "message", ""));
        return;
    }
    for (size_t i = 0; i < NHANDLERS; i++)
        if (!strcmp (handlers[i].type, type)) {
            json_object *rep;
            log_msg (LOG_DEBUG, "client pid %ld uid %u: %s", (long)c->pid,
                     (unsigned)c->uid, type);
            if ((rep = handlers[i].fn (s, c, req)) != NO_REPLY)
                reply (s, c, req, rep);
            return;
        }
    log_msg (LOG_WARNING, "client pid %ld uid %u: unknown request type '%.64s'",
             (long)c->pid, (unsigned)c->uid, type);
    reply (s, c, req, proto_error (type, EOPNOTSUPP, "unknown request type '%.64s'; this "
           "ibcrd knows: %s", type, known_types ()));
}

static void accept_clients (struct server *s)
{
    for (;;) {
        int fd = accept4 (s->lfd, NULL, NULL, SOCK_CLOEXEC);
        struct client *c;
        struct timeval tv;

        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                log_err (errno, "accept on %s", s->conf->socket);
            return;
        }
        if (!(c = calloc (1, sizeof (*c)))) {
            close (fd);
            return;
        }
        c->fd = fd;
        c->id = s->next_id++;
        c->attach_rank = -1;
        if (usock_peercred (fd, &c->uid, &c->gid, &c->pid) < 0) {
            log_err (errno, "SO_PEERCRED on a new client");
            close (fd);
            free (c);
            continue;
        }
        /* Replies block at most this long on a client that stopped
         * reading, so one stuck client cannot stall the node's daemon. */
        tv.tv_sec = s->conf->timeout_request / 1000;
        tv.tv_usec = (s->conf->timeout_request % 1000) * 1000;
        setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof (tv));
        proto_reader_init (&c->rd, PROTO_DEFAULT_CAP);
        c->next = s->clients;
        s->clients = c;
        s->nclients++;
        log_msg (LOG_DEBUG, "client pid %ld uid %u connected", (long)c->pid, (unsigned)c->uid);
        if (s->nclients >= SERVER_MAX_CLIENTS)
            return;
    }
}

/* Read and answer what one client sent; 0 to keep it, -1 to close it. */
static int serve_client (struct server *s, struct client *c)
{
    for (int budget = 16; budget > 0; budget--) {
        json_object *req;
        int rc = proto_reader_read (&c->rd, c->fd, &req);

        if (rc == 0)
            return 0;
        if (rc == 1) {
            handle (s, c, req);
            json_object_put (req);
            if (c->handed)
                return -1;
            continue;
        }
        switch (errno) {
        case EPROTO:
            log_msg (LOG_WARNING, "client pid %ld uid %u: malformed message refused",
                     (long)c->pid, (unsigned)c->uid);
            reply (s, c, NULL, proto_error ("message", EPROTO, "malformed message: a "
                   "message must be one JSON object with an integer \"version\" and a "
                   "string \"type\""));
            continue;
        case EMSGSIZE:
            log_msg (LOG_WARNING, "client pid %ld uid %u: message of %u bytes over the "
                     "%zu-byte cap refused", (long)c->pid, (unsigned)c->uid, c->rd.len,
                     c->rd.cap);
            reply (s, c, NULL, proto_error ("message", EMSGSIZE, "message of %u bytes "
                   "is over the %zu-byte limit; it was discarded", c->rd.len, c->rd.cap));
            continue;
        case 0:
            log_msg (LOG_DEBUG, "client pid %ld uid %u closed", (long)c->pid, (unsigned)c->uid);
            return -1;
        default:
            log_msg (LOG_WARNING, "client pid %ld uid %u: %s; closing", (long)c->pid,
                     (unsigned)c->uid, errno == ECONNRESET
                     ? "connection closed in the middle of a message" : strerror (errno));
            return -1;
        }
    }
    return 0;   /* more later: let others be served first */
}

void server_dispatch (struct server *s, struct pollfd *pfd, int n)
{
    for (int i = 0; i < n; i++) {
        if (!pfd[i].revents)
            continue;
        if (pfd[i].fd == s->lfd) {
            accept_clients (s);
            continue;
        }
        for (struct client *c = s->clients; c; c = c->next)
            if (c->fd == pfd[i].fd) {
                if (serve_client (s, c) < 0)
                    client_close (s, c);
                break;
            }
    }
}
