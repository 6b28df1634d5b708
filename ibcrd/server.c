/* server.c - see server.h.  One request type = one handler function in
 * the table at the bottom; a reply is sent for every request received.
 *
 * Limits kept here (ibcrd.conf): max_conns_per_uid at accept; on EMFILE or
 * ENFILE the listener rests for ACCEPT_PAUSE_MS (munged's habit) instead
 * of spinning on a listener that stays readable.  Registration limits are
 * jobs.c's.  Every limit hit is answered, logged (at most once a second
 * for floods) and the daemon serves on. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <syslog.h>
#include <unistd.h>

#include "common/log.h"
#include "common/ident.h"
#include "common/proc.h"
#include "common/proto.h"
#include "common/store.h"
#include "common/usock.h"
#include "server.h"
#include "sockdiag.h"
#include "request.h"
#include "tasks.h"

char server_no_reply_marker;

#define ACCEPT_PAUSE_MS 1000

/* Floods (EMFILE, connection limit) log once a second, with a count of
 * the lines left out since, so a flood cannot fill the disk.  1: log now
 * (*quiet: lines left out before this one). */
static int flood_log_ok (struct server *s, int *quiet)
{
    long now = mono_ms ();

    if (s->accept_log_at && now - s->accept_log_at < 1000) {
        s->accept_log_quiet++;
        return 0;
    }
    s->accept_log_at = now;
    *quiet = s->accept_log_quiet;
    s->accept_log_quiet = 0;
    return 1;
}

static json_object *h_ping (struct server *s, struct client *c, json_object *req);
static json_object *h_register (struct server *s, struct client *c, json_object *req);
static json_object *h_hello (struct server *s, struct client *c, json_object *req);
static json_object *h_status (struct server *s, struct client *c, json_object *req);
static json_object *h_prune (struct server *s, struct client *c, json_object *req);

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
    server_add_handler (s, "ibcr-hello", h_hello);
    server_add_handler (s, "ping", h_ping);
    server_add_handler (s, "prune", h_prune);
    server_add_handler (s, "register", h_register);
    server_add_handler (s, "status", h_status);
    return s;
}

void client_close (struct server *s, struct client *c)
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
    free (s->reload_error);
    free (s);
}

void server_set_conf (struct server *s, struct conf *conf)
{
    s->conf = conf;
}

void server_reloaded (struct server *s, const char *err)
{
    free (s->reload_error);
    s->reload_error = err ? strdup (err) : NULL;
    s->reloads++;
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

    /* The workers' reports first: one that answered its asker has told
     * the daemon its end before, and a "status" the asker sends next must
     * see it (server_dispatch keeps this order). */
    if (n < max && s->nclients < SERVER_MAX_CLIENTS && mono_ms () >= s->accept_paused_until)
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
        log_msg (LOG_WARNING, "client pid %ld uid %u: cannot send reply: %s", (long)c->pid,
                 (unsigned)c->uid, strerror (errno));
    json_object_put (rep);
}

json_object *ok_reply (const char *request)
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
    proto_set_int (o, "reloads", s->reloads);
    if (s->reload_error)
        proto_set_str (o, "reload_error", s->reload_error);
    for (int i = 0; i < s->ninfo; i++) {
        json_object *v = s->info[i].fn (uid);
        if (v)
            json_object_object_add (o, s->info[i].key, v);
    }
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

/* A requeued job whose plugin found no checkpoint (it sends where it
 * looked): ibcrd is the authority on where a job's generations live.  If
 * its own storage holds committed ones, the two configurations differ,
 * and a fresh start would lose the work (and its retention delete it):
 * refused with EEXIST, which the plugin never runs unprotected past.
 * NULL when the registration may go on. */
static json_object *requeue_check (struct server *s, struct client *c, json_object *req)
{
    const char *looked = proto_get_str (req, "requeued_fresh", NULL);
    const char *job = proto_get_str (req, "job", "");
    struct store st = { .root = s->conf->storage, .cluster = s->conf->cluster };
    json_object *gens = NULL, *last;
    char err[512];
    int n, newest;

    /* Only the plugin (root, in slurmstepd) sends it: a user's answer
     * would tell them of jobs that are not theirs. */
    if (!looked || c->uid != 0 || !ident_ok (job)
        || store_list (&st, job, 0, &gens, err, sizeof (err)) < 0)
        return NULL;
    n = (int)json_object_array_length (gens);
    last = n ? json_object_array_get_idx (gens, n - 1) : NULL;
    newest = last ? (int)proto_get_int (last, "generation", 0) : 0;
    json_object_put (gens);
    if (n == 0)
        return NULL;
    log_msg (LOG_ERR,
             "job %s: requeued, and the SPANK plugin found no checkpoint in %s, "
             "but %d committed generation%s (newest %d) are in %s/%s: refused",
             job, looked, n, n == 1 ? "" : "s", newest, s->conf->storage, s->conf->cluster);
    return proto_error ("register", EEXIST,
                        "job %s was requeued and has %d committed "
                        "generation%s (newest %d) in %s/%s, but the SPANK plugin looked in "
                        "%s and found none: its configuration (plugstack.conf conf=, or the "
                        "default) and this ibcrd's differ; the job is not started afresh, "
                        "so that no checkpointed work is lost; make conf= name ibcrd's "
                        "configuration, or remove the job's generations with 'ibcr prune'",
                        job, n, n == 1 ? "" : "s", newest, s->conf->storage, s->conf->cluster,
                        looked);
}

/* The process of t's tree that holds the other end of our connection
 * fd (a restored process's, handed in by CRIU), as the kernel says; 0
 * when none does. */
static pid_t ctl_owner (const struct task *t, int fd)
{
    char target[64];
    uint64_t ino;

    if (sockdiag_unix_peer (fd, &ino) < 0)
        return 0;
    snprintf (target, sizeof (target), "socket:[%llu]", (unsigned long long)ino);
    return proc_tree_find_fd (t->pid, target);
}

static json_object *h_register (struct server *s, struct client *c, json_object *req)
{
    char err[256];
    struct job *job;
    json_object *o;

    if ((o = requeue_check (s, c, req)))
        return o;
    job = jobs_register (s->jobs, c->uid, c->pid, c->id, req, s->conf, err, sizeof (err));
    if (!job) {
        log_msg (LOG_WARNING, "register from pid %ld uid %u refused: %s", (long)c->pid,
                 (unsigned)c->uid, err);
        return proto_error ("register", errno, "%s", err);
    }
    /* A restored task's libibcr speaks over the connection its restarter
     * attached beforehand (ctl-attach), handed into the tree by CRIU. */
    if (proto_get_bool (req, "restored", 0)) {
        struct task *t = jobs_task (job, (int)proto_get_int (req, "rank", -1));
        /* One per process of the task that used verbs at the dump. */
        for (struct client *a = s->clients; t && a; a = a->next)
            if (a->attach_rank == t->rank && !strcmp (a->attach_job, job->id)
                && jobs_may_act (a->attach_by, job->uid)) {
                /* The process is the one of the task's tree that holds
                 * the other end, as the kernel says; not whoever made it. */
                pid_t owner = ctl_owner (t, a->fd);
                if (jobs_task_add_proc (job, t, a->id, owner, err, sizeof (err)) < 0) {
                    log_msg (LOG_WARNING, "job %s step %s: rank %d: %s", job->id, t->step, t->rank,
                             err);
                    continue;
                }
                a->attach_rank = -1;
                /* From now on it speaks for the task's user, not for the
                 * root that may have connected it. */
                a->uid = job->uid;
                a->pid = owner > 0 ? owner : t->app_pid > 0 ? (pid_t)t->app_pid : t->pid;
                log_msg (LOG_INFO,
                         "job %s step %s: rank %d pid %ld: restored, libibcr "
                         "control connection of pid %ld handed back",
                         job->id, t->step, t->rank, (long)t->pid, (long)owner);
            }
    }
    for (int i = 0; i < s->non_register; i++)
        s->on_register[i](s, job, req);
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
 * A user's SLURM_JOB_ID never creates a job: jobs_register refuses Slurm
 * job ids from anyone but root, so a Slurm task is bound here only to the
 * registration slurmstepd made for it.  An attached connection (c->pid
 * is the restarter's, not the task's) is bound at registration only. */
static json_object *h_hello (struct server *s, struct client *c, json_object *req)
{
    struct job *job = NULL;
    struct task *t = jobs_find_tree (s->jobs, c->pid, &job);
    int64_t rank = proto_get_int (req, "rank", -1);
    char jobid[128], step[128], err[256];

    if (c->attached) {
        /* c->pid is whoever attached it (root's restarter): only the task
         * it was bound to may speak here. */
        for (job = jobs_first (s->jobs); job; job = job->next)
            for (struct task *bt = job->tasks; bt; bt = bt->next)
                if (jobs_task_has_conn (bt, c->id))
                    return NO_REPLY;
        log_msg (LOG_WARNING,
                 "client %d (attached for job %s rank %d): hello before its "
                 "task registered: ignored",
                 c->id, c->attach_job, c->attach_rank);
        return NO_REPLY;
    }
    if (!t) {
        json_object *r;
        if (!proc_env (c->pid, "IBCR_JOB", jobid, sizeof (jobid))
            && !proc_env (c->pid, "SLURM_JOB_ID", jobid, sizeof (jobid))) {
            log_msg (LOG_WARNING,
                     "libibcr pid %ld uid %u rank %lld connected without a "
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
        job = jobs_register (s->jobs, c->uid, c->pid, c->id, r, s->conf, err, sizeof (err));
        json_object_put (r);
        if (!job) {
            log_msg (LOG_WARNING, "libibcr pid %ld uid %u job %s: not registered: %s", (long)c->pid,
                     (unsigned)c->uid, jobid, err);
            return NO_REPLY;
        }
        t = jobs_find_tree (s->jobs, c->pid, &job);
    }
    /* Every process of the tree that uses verbs: its own connection, its
     * pid from SO_PEERCRED (the payload's "pid" is never believed). */
    if (t && jobs_task_add_proc (job, t, c->id, c->pid, err, sizeof (err)) < 0)
        log_msg (LOG_WARNING, "libibcr pid %ld uid %u: %s", (long)c->pid, (unsigned)c->uid, err);
    else if (t && t->nprocs == 1)
        log_msg (LOG_INFO, "job %s step %s: rank %d pid %ld: libibcr control connection", job->id,
                 t->step, t->rank, (long)t->pid);
    else if (t)
        log_msg (LOG_INFO,
                 "job %s step %s: rank %d pid %ld: libibcr control connection "
                 "of pid %ld (%d processes of the task use verbs)",
                 job->id, t->step, t->rank, (long)t->pid, (long)c->pid, t->nprocs);
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
        if (!(job = jobs_find (s->jobs, id, c->uid))) {
            json_object_put (o);
            return proto_error ("status", ENOENT, "job %s has no task registered on node %s", id,
                                s->conf->node);
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

/* "prune": {job, keep} - remove a job's older generations for its owner
 * (storage is root's: a user removes their images through ibcrd).  The
 * owner is the "uid" that root wrote into each committed manifest.
 * Replies {"removed":[N...]}.  It reads every manifest and removes whole
 * generations: in a child (tasks_in_child), not in the daemon's loop,
 * which would serve nobody else meanwhile. */
static json_object *prune_now (struct server *s, struct client *c, json_object *req)
{
    const char *id = proto_get_str (req, "job", "");
    int64_t keep = proto_get_int (req, "keep", -1);
    struct store st = { .root = s->conf->storage, .cluster = s->conf->cluster };
    json_object *gens = NULL, *removed, *o;
    char err[1024];
    int n;

    if (store_list (&st, id, 0, &gens, err, sizeof (err)) < 0)
        return proto_error ("prune", errno, "%s", err);
    n = (int)json_object_array_length (gens);
    for (int i = 0; c->uid != 0 && i < n; i++) {
        json_object *m = NULL;
        json_object_object_get_ex (json_object_array_get_idx (gens, i), "manifest", &m);
        if (proto_get_int (m, "uid", -1) != (int64_t)c->uid) {
            json_object_put (gens);
            log_msg (LOG_NOTICE, "job %s: prune refused to uid %u: not the job's owner", id,
                     (unsigned)c->uid);
            return proto_error ("prune", EPERM, "job %s belongs to another user", id);
        }
    }
    json_object_put (gens);
    if (n == 0 && c->uid != 0)
        return proto_error ("prune", ENOENT, "job %s has no committed generation in %s/%s", id,
                            s->conf->storage, s->conf->cluster);
    removed = json_object_new_array ();
    if (store_prune (&st, id, (int)keep, removed, err, sizeof (err)) < 0) {
        int e = errno;
        json_object_put (removed);
        return proto_error ("prune", e, "%s", err);
    }
    log_msg (LOG_INFO, "job %s: pruned to %lld generation(s) for uid %u (%zu removed)", id,
             (long long)keep, (unsigned)c->uid, json_object_array_length (removed));
    if (!(o = ok_reply ("prune"))) {
        json_object_put (removed);
        return NULL;
    }
    json_object_object_add (o, "removed", removed);
    return o;
}

static json_object *h_prune (struct server *s, struct client *c, json_object *req)
{
    const char *id = proto_get_str (req, "job", "");
    int64_t keep = proto_get_int (req, "keep", -1);

    if (!ident_ok (id) || keep < 0 || keep > INT32_MAX)
        return proto_error ("prune", EINVAL,
                            "give \"job\" (a job id) and \"keep\" (0 or "
                            "more generations)");
    return tasks_in_child (s, c, req, prune_now);
}

int server_add_handler (struct server *s, const char *type, handler_f fn)
{
    for (int i = 0; i < s->nhandlers; i++)
        if (!strcmp (s->handlers[i].type, type)) {
            errno = EEXIST;
            return -1;
        }
    if (s->nhandlers == SERVER_MAX_HANDLERS) {
        errno = ENOSPC;
        return -1;
    }
    s->handlers[s->nhandlers].type = type;
    s->handlers[s->nhandlers++].fn = fn;
    return 0;
}

int server_on_register (struct server *s, on_register_f fn)
{
    if (s->non_register == SERVER_MAX_ON_REGISTER) {
        errno = ENOSPC;
        return -1;
    }
    s->on_register[s->non_register++] = fn;
    return 0;
}

int server_add_info (struct server *s, const char *key, info_f fn)
{
    if (s->ninfo == SERVER_MAX_INFO) {
        errno = ENOSPC;
        return -1;
    }
    s->info[s->ninfo].key = key;
    s->info[s->ninfo++].fn = fn;
    return 0;
}

static int cmp_str (const void *a, const void *b)
{
    return strcmp (*(const char *const *)a, *(const char *const *)b);
}

/* "a, b, c": the request types served, sorted, for an error reply. */
static const char *known_types (struct server *s, char *buf, size_t len)
{
    const char *types[SERVER_MAX_HANDLERS];
    size_t off = 0;

    for (int i = 0; i < s->nhandlers; i++)
        types[i] = s->handlers[i].type;
    qsort (types, (size_t)s->nhandlers, sizeof (types[0]), cmp_str);
    buf[0] = '\0';
    for (int i = 0; i < s->nhandlers && off < len; i++)
        off += (size_t)snprintf (buf + off, len - off, "%s%s", i ? ", " : "", types[i]);
    return buf;
}

static void handle (struct server *s, struct client *c, json_object *req)
{
    const char *type = proto_type (req);
    int version = proto_version (req);

    if (version != PROTO_VERSION) {
        log_msg (LOG_WARNING, "client pid %ld uid %u: protocol version %d refused", (long)c->pid,
                 (unsigned)c->uid, version);
        reply (s, c, req,
               proto_error (
                   type, EPROTONOSUPPORT,
                   "protocol version %d is not "
                   "supported: this ibcrd speaks version %d; use ibcr and libibcr of the same "
                   "release as ibcrd",
                   version, PROTO_VERSION));
        return;
    }
    /* Never answer a reply: two parties answering each other's "error"
     * would loop forever. */
    if (!strcmp (type, "ok") || !strcmp (type, "error")) {
        log_msg (LOG_WARNING, "client pid %ld uid %u: unexpected '%s' message ignored: %.200s",
                 (long)c->pid, (unsigned)c->uid, type, proto_get_str (req, "message", ""));
        return;
    }
    if (c->attached && strcmp (type, "ibcr-hello") && strcmp (type, "ping")) {
        log_msg (LOG_WARNING,
                 "client %d (libibcr control channel of job %s, uid %d): '%.64s' "
                 "refused",
                 c->id, c->attach_job, (int)c->uid, type);
        reply (s, c, req,
               proto_error (
                   type, EPERM,
                   "this connection is the libibcr control "
                   "channel of job %s: it may not send '%.64s' requests; open a connection of "
                   "your own",
                   c->attach_job, type));
        return;
    }
    for (int i = 0; i < s->nhandlers; i++)
        if (!strcmp (s->handlers[i].type, type)) {
            json_object *rep;
            log_msg (LOG_DEBUG, "client pid %ld uid %u: %s", (long)c->pid, (unsigned)c->uid, type);
            if ((rep = s->handlers[i].fn (s, c, req)) != NO_REPLY)
                reply (s, c, req, rep);
            return;
        }
    log_msg (LOG_WARNING, "client pid %ld uid %u: unknown request type '%.64s'", (long)c->pid,
             (unsigned)c->uid, type);
    char known[512];
    reply (s, c, req,
           proto_error (type, EOPNOTSUPP,
                        "unknown request type '%.64s'; this "
                        "ibcrd knows: %s",
                        type, known_types (s, known, sizeof (known))));
}

static int uid_conns (struct server *s, uid_t uid)
{
    int n = 0;

    for (struct client *c = s->clients; c; c = c->next)
        n += c->uid == uid;
    return n;
}

/* Answer a client refused at accept, and close it. */
static void refuse_client (struct server *s, int fd, uid_t uid, pid_t pid)
{
    json_object *o;
    int quiet;

    if (flood_log_ok (s, &quiet))
        log_msg (LOG_WARNING,
                 "client pid %ld uid %u refused: uid %u has %d connections open "
                 "(max_conns_per_uid) (%d similar lines left out)",
                 (long)pid, (unsigned)uid, (unsigned)uid, s->conf->max_conns_per_uid, quiet);
    if ((o = proto_error ("connect", EUSERS,
                          "limit reached: uid %u has %d connections open "
                          "to ibcrd (max_conns_per_uid in ibcrd.conf); close some and try "
                          "again",
                          (unsigned)uid, s->conf->max_conns_per_uid))) {
        struct timeval tv = { .tv_sec = 0, .tv_usec = 100000 };
        setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof (tv));
        (void)proto_send (fd, o);
        json_object_put (o);
    }
    close (fd);
}

static void accept_clients (struct server *s)
{
    for (;;) {
        int fd = accept4 (s->lfd, NULL, NULL, SOCK_CLOEXEC);
        struct client *c;
        struct timeval tv;
        uid_t uid;
        gid_t gid;
        pid_t pid;

        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* The connection stays in the backlog and the listener
                 * stays readable: rest it, or the loop spins. */
                int quiet, saved = errno;
                s->accept_paused_until = mono_ms () + ACCEPT_PAUSE_MS;
                if (flood_log_ok (s, &quiet))
                    log_msg (LOG_ERR,
                             "accept on %s: %s; not accepting for %d ms (%d similar "
                             "lines left out)",
                             s->conf->socket, strerror (saved), ACCEPT_PAUSE_MS, quiet);
            } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                log_err (errno, "accept on %s", s->conf->socket);
            return;
        }
        if (usock_peercred (fd, &uid, &gid, &pid) < 0) {
            log_err (errno, "SO_PEERCRED on a new client");
            close (fd);
            continue;
        }
        if (uid != 0 && uid_conns (s, uid) >= s->conf->max_conns_per_uid) {
            refuse_client (s, fd, uid, pid);
            continue;
        }
        if (!(c = calloc (1, sizeof (*c)))) {
            close (fd);
            return;
        }
        c->fd = fd;
        c->id = s->next_id++;
        c->attach_rank = -1;
        c->uid = uid;
        c->gid = gid;
        c->pid = pid;
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
            log_msg (LOG_WARNING, "client pid %ld uid %u: malformed message refused", (long)c->pid,
                     (unsigned)c->uid);
            reply (s, c, NULL,
                   proto_error ("message", EPROTO,
                                "malformed message: a "
                                "message must be one JSON object with an integer \"version\" and a "
                                "string \"type\""));
            continue;
        case EMSGSIZE:
            log_msg (LOG_WARNING,
                     "client pid %ld uid %u: message of %u bytes over the "
                     "%zu-byte cap refused",
                     (long)c->pid, (unsigned)c->uid, c->rd.len, c->rd.cap);
            reply (s, c, NULL,
                   proto_error ("message", EMSGSIZE,
                                "message of %u bytes "
                                "is over the %zu-byte limit; it was discarded",
                                c->rd.len, c->rd.cap));
            continue;
        case 0:
            log_msg (LOG_DEBUG, "client pid %ld uid %u closed", (long)c->pid, (unsigned)c->uid);
            return -1;
        default:
            log_msg (LOG_WARNING, "client pid %ld uid %u: %s; closing", (long)c->pid,
                     (unsigned)c->uid,
                     errno == ECONNRESET ? "connection closed in the middle of a message"
                                         : strerror (errno));
            return -1;
        }
    }
    return 0; /* more later: let others be served first */
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
