/* slurm_hook.c - see slurm_hook.h.
 *
 * Two sides, one file: the watcher thread (hk_thread and what it calls:
 * the only code here that calls libslurm) and the loop's side (every
 * other function, called from ibcrd's main loop only).  They share the
 * command queue under hk.mu and the event pipe; nothing else.
 *
 * Invariants kept here:
 * - A final generation (time limit, drain, preemption) runs with the job
 *   left running (--leave-running), so the batch script never sees its
 *   step end before the requeue; Slurm ends the tasks after it.
 * - A held SIGTERM is answered exactly once: at its deadline, when the
 *   job's generation ends, or when a look at Slurm that began after it
 *   arrived found nothing to checkpoint for.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/proto.h"
#include "gen.h"
#include "request.h"
#include "schedule.h"
#include "server.h"
#include "slurm_hook.h"
#include "slurm_watch.h"

/* Messages from the thread besides slurm_watch's events. */
enum {
    HK_POLLED = 100, /* a poll ended; looks = look orders it covered */
    HK_LOG,          /* a line for the log at level 'level' */
    HK_DEAD,         /* the watcher cannot run (text says why) */
    HK_REQUEUED,     /* a requeue order was carried out (or failed) */
};

struct hk_msg {
    int kind; /* enum slurm_watch_kind or HK_* */
    int level;
    unsigned looks;
    struct slurm_watch_event ev;
};

enum hk_order { HK_ADD, HK_LOOK, HK_CKPT, HK_REQUEUE, HK_STOP };

struct hk_cmd {
    enum hk_order order;
    uint32_t job;
    double seconds;
    struct hk_cmd *next;
};

/* What the loop remembers of one Slurm job. */
struct hk_job {
    uint32_t id;
    int final_action; /* of the generation running now, CONF_ACT_* */
    char pending[32]; /* a trigger to start when the worker ends, "" */
    int pending_action;
    int running;          /* a generation of this job runs here */
    int requeuing;        /* a requeue order is out */
    int cancel_taken;     /* the scancel's checkpoint was started */
    int kind;             /* its gen kind */
    double t0;            /* its start, ms */
    double expect_until;  /* member: the leader's final generation is
                               expected until then (ms), 0 none */
    uint32_t slurm_state; /* the watcher's last look, 0 before the first */
    struct hk_job *next;
};

/* A task's SIGTERM, held. */
struct hk_held {
    int conn; /* client id of the task process */
    uint32_t job;
    int rank;
    unsigned look;   /* released by a poll covering this look */
    double deadline; /* ms */
    struct hk_held *next;
};

static struct {
    /* Shared with the thread, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct hk_cmd *cmds, **tail;

    /* The thread's own. */
    pthread_t th;
    int wfd;
    unsigned looks_done;

    /* The loop's own. */
    int state;       /* 0 not started, 1 running, -1 dead */
    char error[256]; /* why it is dead, for status */
    double dead_at;  /* when it died (hk_now), to try again later */
    int again;       /* this start follows a failed one */
    int rfd;
    unsigned looks_sent;
    struct slurm_watch_policy pol;
    char node[IDENT_MAX + 1];
    int on_timelimit, on_drain, on_preempt, on_cancel;
    struct hk_job *jobs;
    struct hk_held *held;
} hk = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .wfd = -1,
    .rfd = -1,
};

/* The monotonic clock in ms (lib/common/clock, not a copy of it). */
static double hk_now (void)
{
    return mono_ms_f ();
}

/* ---------------------------------------------------------------- thread */

static void hk_send (const struct hk_msg *m)
{
    const char *p = (const char *)m;
    size_t left = sizeof (*m);
    ssize_t n;

    /* Smaller than PIPE_BUF: written whole or not at all. */
    while (left > 0) {
        if ((n = write (hk.wfd, p, left)) < 0) {
            if (errno == EINTR)
                continue;
            return; /* the loop is gone: nobody to tell */
        }
        p += n;
        left -= (size_t)n;
    }
}

static void hk_tlog (int level, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
static void hk_tlog (int level, const char *fmt, ...)
{
    struct hk_msg m = { .kind = HK_LOG, .level = level };
    va_list ap;

    va_start (ap, fmt);
    (void)vsnprintf (m.ev.text, sizeof (m.ev.text), fmt, ap);
    va_end (ap);
    hk_send (&m);
}

static void hk_on_event (const struct slurm_watch_event *ev, void *arg)
{
    struct hk_msg m = { .kind = (int)ev->kind };

    (void)arg;
    m.ev = *ev;
    hk_send (&m);
}

static void *hk_thread (void *arg)
{
    struct slurm_watch *w;
    char err[512], last_err[256] = "";
    struct hk_cmd *c;

    (void)arg;
    if (!(w = slurm_watch_create (hk.node, &hk.pol, hk_on_event, NULL, err, sizeof (err)))) {
        struct hk_msg m = { .kind = HK_DEAD };
        snprintf (m.ev.text, sizeof (m.ev.text), "%.250s", err);
        hk_send (&m);
        return NULL;
    }
    hk_tlog (LOG_INFO,
             "watching Slurm%s as node %s (poll %u ms, time-limit margin %u s; "
             "on_timelimit=%s on_drain=%s on_preempt=%s)",
             hk.again ? " again" : "", hk.node, hk.pol.poll_ms, hk.pol.margin_s,
             slurm_watch_action_name (hk.pol.on_timelimit),
             slurm_watch_action_name (hk.pol.on_drain),
             slurm_watch_action_name (hk.pol.on_preempt));
    pthread_mutex_lock (&hk.mu);
    for (;;) {
        while ((c = hk.cmds)) {
            if (!(hk.cmds = c->next))
                hk.tail = &hk.cmds;
            pthread_mutex_unlock (&hk.mu);
            switch (c->order) {
            case HK_ADD:
                (void)slurm_watch_add (w, c->job);
                break;
            case HK_LOOK:
                /* Adding makes the next poll due at once. */
                (void)slurm_watch_add (w, c->job);
                hk.looks_done++;
                break;
            case HK_CKPT:
                slurm_watch_set_ckpt_seconds (w, c->job, c->seconds);
                break;
            case HK_REQUEUE: {
                struct hk_msg m = { .kind = HK_REQUEUED };
                m.ev.job = c->job;
                if (slurm_watch_requeue (w, c->job, err, sizeof (err)) < 0) {
                    m.level = LOG_ERR;
                    snprintf (m.ev.text, sizeof (m.ev.text), "%.250s", err);
                } else
                    m.level = LOG_NOTICE;
                hk_send (&m);
                break;
            }
            case HK_STOP:
                free (c);
                slurm_watch_destroy (w);
                return NULL;
            }
            free (c);
            pthread_mutex_lock (&hk.mu);
        }
        int due = slurm_watch_due_ms (w);
        if (due != 0) {
            struct timespec until;
            /* Nothing watched: wait for an order, still waking now and
             * then so a lost wake-up costs a second at most. */
            if (due < 0 || due > 1000)
                due = 1000;
            clock_gettime (CLOCK_MONOTONIC, &until);
            until.tv_sec += due / 1000;
            until.tv_nsec += (long)(due % 1000) * 1000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            (void)pthread_cond_timedwait (&hk.cv, &hk.mu, &until);
            continue;
        }
        unsigned looks = hk.looks_done;
        pthread_mutex_unlock (&hk.mu);
        if (slurm_watch_poll (w) < 0) {
            /* Once per distinct failure: slurmctld down would otherwise
             * fill the log every second. */
            if (strcmp (last_err, slurm_watch_error (w))) {
                snprintf (last_err, sizeof (last_err), "%s", slurm_watch_error (w));
                hk_tlog (LOG_WARNING, "Slurm: %s; retrying every poll", last_err);
            }
        } else if (last_err[0]) {
            last_err[0] = '\0';
            hk_tlog (LOG_INFO, "Slurm: slurmctld answers again");
        }
        {
            struct hk_msg m = { .kind = HK_POLLED, .looks = looks };
            hk_send (&m);
        }
        pthread_mutex_lock (&hk.mu);
    }
}

/* ------------------------------------------------------------ loop side */

/* 0, or -1 when the order could not be given (no watcher, no memory). */
static int hk_order (enum hk_order order, uint32_t job, double seconds)
{
    struct hk_cmd *c;

    if (hk.state != 1)
        return -1;
    if (!(c = calloc (1, sizeof (*c)))) {
        log_msg (LOG_ERR, "job %u: out of memory: a Slurm order is lost", job);
        return -1;
    }
    c->order = order;
    c->job = job;
    c->seconds = seconds;
    pthread_mutex_lock (&hk.mu);
    *hk.tail = c;
    hk.tail = &c->next;
    pthread_cond_signal (&hk.cv);
    pthread_mutex_unlock (&hk.mu);
    return 0;
}

void slurm_hook_set_conf (const struct conf *conf)
{
    hk.on_timelimit = conf->on_timelimit;
    hk.on_drain = conf->on_drain;
    hk.on_preempt = conf->on_preempt;
    hk.on_cancel = conf->on_cancel;
    /* The watcher's own copy (margin, period) is taken when it starts. */
    slurm_watch_policy_defaults (&hk.pol);
    hk.pol.on_timelimit = (enum slurm_watch_action)conf->on_timelimit;
    hk.pol.on_drain = (enum slurm_watch_action)conf->on_drain;
    hk.pol.on_preempt = (enum slurm_watch_action)conf->on_preempt;
    hk.pol.margin_s = (unsigned)(conf->timelimit_margin / 1000);
    hk.pol.poll_ms = conf->slurm_poll < 100 ? 100 : (unsigned)conf->slurm_poll;
    snprintf (hk.node, sizeof (hk.node), "%s", conf->node);
}

/* A watcher that could not start (Slurm not configured yet when ibcrd
 * came up, slurmctld's address unknown) is tried again at the next
 * registration once this long has passed, not only at ibcrd's restart. */
#define HK_RETRY_MS 10000.0

static int hk_slurm_id (const char *id, uint32_t *out);
static struct hk_job *hk_job (uint32_t id, int create);

/* Start the watcher thread once; after a failure, again when HK_RETRY_MS
 * has passed, watching every Slurm job then registered.  0 or -1. */
static int hk_start (struct server *s)
{
    pthread_condattr_t ca;
    int p[2], again = 0;

    if (hk.state == -1 && hk.dead_at > 0 && hk_now () - hk.dead_at >= HK_RETRY_MS) {
        struct hk_cmd *c;
        while ((c = hk.cmds)) { /* orders the dead thread never took */
            hk.cmds = c->next;
            free (c);
        }
        pthread_cond_destroy (&hk.cv);
        hk.state = 0;
        hk.dead_at = 0;
        again = 1;
    }
    if (hk.state)
        return hk.state == 1 ? 0 : -1;
    if (pipe2 (p, O_CLOEXEC) < 0) {
        snprintf (hk.error, sizeof (hk.error), "cannot make a pipe: %s", strerror (errno));
        log_err (errno, "Slurm triggers are off: cannot make a pipe");
        hk.state = -1;
        return -1;
    }
    (void)fcntl (p[0], F_SETFL, O_NONBLOCK);
    hk.rfd = p[0];
    hk.wfd = p[1];
    hk.tail = &hk.cmds;
    hk.again = again;
    pthread_condattr_init (&ca);
    pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
    pthread_cond_init (&hk.cv, &ca);
    pthread_condattr_destroy (&ca);
    if ((errno = pthread_create (&hk.th, NULL, hk_thread, NULL)) != 0) {
        snprintf (hk.error, sizeof (hk.error), "cannot start the watcher thread: %s",
                  strerror (errno));
        log_err (errno, "Slurm triggers are off: cannot start the watcher thread");
        close (p[0]);
        close (p[1]);
        hk.state = -1;
        return -1;
    }
    hk.state = 1;
    if (again && s) {
        /* The jobs that registered while Slurm was not watched. */
        uint32_t id;
        for (struct job *job = jobs_first (s->jobs); job; job = job->next)
            if (hk_slurm_id (job->id, &id) && hk_job (id, 1))
                hk_order (HK_ADD, id, 0);
    }
    return 0;
}

static struct hk_job *hk_job (uint32_t id, int create)
{
    struct hk_job *j;

    for (j = hk.jobs; j; j = j->next)
        if (j->id == id)
            return j;
    if (!create || !(j = calloc (1, sizeof (*j))))
        return NULL;
    j->id = id;
    j->next = hk.jobs;
    hk.jobs = j;
    return j;
}

static void hk_job_forget (uint32_t id)
{
    for (struct hk_job **pp = &hk.jobs; *pp; pp = &(*pp)->next)
        if ((*pp)->id == id) {
            struct hk_job *j = *pp;
            *pp = j->next;
            free (j);
            return;
        }
}

/* A Slurm job id from an ibcrd job id: 1 with *id, 0 when not numeric. */
static int hk_slurm_id (const char *s, uint32_t *id)
{
    char *end;
    unsigned long v;

    if (!s || *s < '0' || *s > '9')
        return 0;
    errno = 0;
    v = strtoul (s, &end, 10);
    if (errno || *end || v == 0 || v > 0xfffffffeUL)
        return 0;
    *id = (uint32_t)v;
    return 1;
}

void slurm_hook_registered (struct server *s, struct job *job, json_object *req)
{
    uint32_t id;

    if (strcmp (proto_get_str (req, "source", ""), "spank") || !hk_slurm_id (job->id, &id))
        return;
    if (hk_start (s) < 0)
        return;
    (void)hk_job (id, 1);
    hk_order (HK_ADD, id, 0);
}

int slurm_hook_pollfd (struct pollfd *pfd)
{
    if (hk.state != 1)
        return 0;
    *pfd = (struct pollfd){ .fd = hk.rfd, .events = POLLIN };
    return 1;
}

static struct client *hk_client (struct server *s, int id)
{
    for (struct client *c = s->clients; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

/* Answer one held SIGTERM and forget it. */
static void hk_release (struct server *s, struct hk_held **pp, const char *why)
{
    struct hk_held *h = *pp;
    struct client *c = hk_client (s, h->conn);
    json_object *o;

    if (c && (o = ok_reply ("term"))) {
        proto_set_str (o, "why", why);
        if (proto_send (c->fd, o) < 0)
            log_msg (LOG_WARNING, "job %u rank %d: cannot let the task have its SIGTERM: %s",
                     h->job, h->rank, strerror (errno));
        json_object_put (o);
    }
    log_msg (LOG_INFO, "job %u rank %d: SIGTERM goes to the task (%s)", h->job, h->rank, why);
    *pp = h->next;
    free (h);
}

static void hk_release_job (struct server *s, uint32_t job, const char *why)
{
    for (struct hk_held **pp = &hk.held; *pp;)
        if ((*pp)->job == job)
            hk_release (s, pp, why);
        else
            pp = &(*pp)->next;
}

/* Is a checkpoint of job under way or expected here? */
static int hk_busy (const struct hk_job *j)
{
    return j && (j->running || j->requeuing || j->pending[0] || j->expect_until > hk_now ());
}

static int hk_is_leader (struct job *job)
{
    return !job->leader[0] || jobs_task (job, 0) != NULL;
}

/* Slurm job id's tasks on this node, or NULL. */
static struct job *hk_find (struct server *s, uint32_t id)
{
    char name[32];

    snprintf (name, sizeof (name), "%u", id);
    return jobs_find_owned (s->jobs, name, 0);
}

/* A final generation of Slurm job id for 'trigger', per action. */
static void hk_trigger (struct server *s, uint32_t id, const char *trigger, int action)
{
    struct job *job;
    struct hk_job *j;

    if (action == CONF_ACT_NOTHING) {
        log_msg (LOG_NOTICE, "job %u: %s: policy says nothing (on_%s=nothing)", id, trigger,
                 trigger);
        return;
    }
    if (!(job = hk_find (s, id)) || !(j = hk_job (id, 1)))
        return;
    if (!hk_is_leader (job)) {
        /* Rank 0's ibcrd sees the same in Slurm and runs the generation
         * across every node; hold this node's SIGTERMs for it. */
        j->expect_until = hk_now () + 120000.0;
        log_msg (LOG_INFO, "job %u: %s: the final checkpoint is the leader's to run (%s)", id,
                 trigger, job->leader);
        return;
    }
    if (job->worker) {
        snprintf (j->pending, sizeof (j->pending), "%s", trigger);
        if (action > j->pending_action)
            j->pending_action = action;
        log_msg (LOG_INFO, "job %u: %s: a final checkpoint follows the generation that runs", id,
                 trigger);
        return;
    }
    log_msg (LOG_NOTICE, "job %u: %s: final checkpoint%s", id, trigger,
             action == CONF_ACT_REQUEUE ? ", then requeue" : "");
    if (sched_start_trigger (s, job, trigger) < 0) {
        log_err (errno, "job %u: %s: the final checkpoint cannot start", id, trigger);
        if (action == CONF_ACT_REQUEUE) {
            /* Better back from the last committed generation than lost. */
            log_msg (LOG_WARNING,
                     "job %u: requeued anyway: its next run restores its last "
                     "committed generation, if any",
                     id);
            if (hk_order (HK_REQUEUE, id, 0) == 0) {
                j->requeuing = 1;
                job->ending = 1;
            }
        }
        return;
    }
    j->final_action = action;
}

/* scancel: checkpoint first only if the admin wants it, only while the
 * tasks are held, and once, whichever comes first: the state event or the
 * look that a held SIGTERM asked for. */
static void hk_cancel_checkpoint (struct server *s, uint32_t id)
{
    struct hk_job *j = hk_job (id, 0);

    if (!j || j->cancel_taken || hk.on_cancel == CONF_ACT_NOTHING
        || (j->slurm_state & JOB_STATE_BASE) != JOB_CANCELLED)
        return;
    for (struct hk_held *h = hk.held; h; h = h->next)
        if (h->job == id) {
            j->cancel_taken = 1;
            hk_trigger (s, id, "cancel", CONF_ACT_CHECKPOINT);
            return;
        }
}

static const char *hk_kind_trigger (int kind, int *action)
{
    switch (kind) {
    case SLURM_WATCH_TIMELIMIT:
        *action = hk.on_timelimit;
        return "timelimit";
    case SLURM_WATCH_DRAIN:
        *action = hk.on_drain;
        return "drain";
    case SLURM_WATCH_PREEMPT:
        *action = hk.on_preempt;
        return "preempt";
    default:
        *action = CONF_ACT_NOTHING;
        return NULL;
    }
}

static void hk_handle (struct server *s, const struct hk_msg *m)
{
    const struct slurm_watch_event *ev = &m->ev;
    const char *trigger;
    int action;

    switch (m->kind) {
    case HK_LOG:
        log_msg (m->level, "%s", ev->text);
        return;
    case HK_DEAD:
        snprintf (hk.error, sizeof (hk.error), "%s", ev->text);
        log_msg (LOG_WARNING,
                 "Slurm triggers are off (no time-limit, drain or preemption "
                 "checkpoints): %s; tried again when a job registers, %.0f s from now at "
                 "the earliest",
                 ev->text, HK_RETRY_MS / 1000);
        (void)pthread_join (hk.th, NULL);
        close (hk.rfd);
        close (hk.wfd);
        hk.rfd = hk.wfd = -1;
        hk.state = -1;
        hk.dead_at = hk_now ();
        while (hk.held)
            hk_release (s, &hk.held, "ibcrd cannot watch Slurm");
        /* Requeue orders that will not be carried out now. */
        for (struct hk_job *j = hk.jobs; j; j = j->next)
            j->requeuing = 0;
        sched_resume_reply (s, NULL, 0, 1,
                            "the job's ranks were restored from different generations, and "
                            "ibcrd cannot reach Slurm to requeue it: requeue it (scontrol "
                            "requeue)");
        return;
    case HK_REQUEUED: {
        struct hk_job *j = hk_job (ev->job, 0);
        if (m->level == LOG_ERR)
            log_msg (LOG_ERR,
                     "job %u: %s; it ends as Slurm decides, and its checkpoints "
                     "stay for a manual restart",
                     ev->job, ev->text);
        else
            log_msg (LOG_NOTICE,
                     "job %u: requeued; its next run restores the newest "
                     "checkpoint",
                     ev->job);
        if (j)
            j->requeuing = 0;
        {
            /* Restarters held for this requeue (sched_worker_done). */
            struct job *job = hk_find (s, ev->job);
            char id[16], why[1536];
            snprintf (id, sizeof (id), "%u", ev->job);
            snprintf (why, sizeof (why), "%.1000s%s%.250s",
                      job && job->last_error[0] ? job->last_error : "see ibcrd's log",
                      m->level == LOG_ERR ? "; but the requeue failed: " : "",
                      m->level == LOG_ERR ? ev->text : "");
            sched_resume_reply (s, id, 0, 1, why);
        }
        if (m->level == LOG_ERR) {
            /* The job runs on here (a drained node keeps its jobs):
             * periodic generations go on protecting it. */
            struct job *job = hk_find (s, ev->job);
            if (job)
                job->ending = 0;
        }
        if (!hk_busy (j))
            hk_release_job (s, ev->job, m->level == LOG_ERR ? "the requeue failed" : "requeued");
        return;
    }
    case HK_POLLED:
        /* A job already CANCELLED at an earlier look gives no new state
         * event when its SIGTERM comes: the look that covers the hold
         * decides. */
        for (struct hk_held *h = hk.held; h; h = h->next)
            if ((int)(m->looks - h->look) >= 0)
                hk_cancel_checkpoint (s, h->job);
        for (struct hk_held **pp = &hk.held; *pp;) {
            struct hk_held *h = *pp;
            if ((int)(m->looks - h->look) >= 0 && !hk_busy (hk_job (h->job, 0)))
                hk_release (s, pp, "no checkpoint due");
            else
                pp = &h->next;
        }
        return;
    case SLURM_WATCH_STATE: {
        struct hk_job *j = hk_job (ev->job, 0);
        if (j)
            j->slurm_state = ev->new_state;
        log_msg (LOG_INFO, "job %u: Slurm: %s", ev->job, ev->text);
        hk_cancel_checkpoint (s, ev->job);
        return;
    }
    case SLURM_WATCH_GONE:
        log_msg (LOG_INFO, "job %u: %s", ev->job, ev->text);
        hk_job_forget (ev->job);
        return;
    default:
        if (!(trigger = hk_kind_trigger (m->kind, &action)))
            return;
        log_msg (LOG_NOTICE, "job %u: Slurm: %s", ev->job, ev->text);
        hk_trigger (s, ev->job, trigger, action);
        return;
    }
}

void slurm_hook_dispatch (struct server *s, const struct pollfd *pfd)
{
    struct hk_msg m;
    double now = hk_now ();

    if (hk.state == 1 && (!pfd || pfd->revents)) {
        for (;;) {
            ssize_t n = read (hk.rfd, &m, sizeof (m));
            if (n != (ssize_t)sizeof (m))
                break; /* EAGAIN: all read (writes are whole) */
            hk_handle (s, &m);
            if (hk.state != 1)
                break;
        }
    }
    for (struct hk_held **pp = &hk.held; *pp;)
        if ((*pp)->deadline <= now)
            hk_release (s, pp, "waited long enough");
        else
            pp = &(*pp)->next;
}

int slurm_hook_timer (void)
{
    double best = -1, now = hk_now ();

    for (struct hk_held *h = hk.held; h; h = h->next)
        if (best < 0 || h->deadline - now < best)
            best = h->deadline - now < 0 ? 0 : h->deadline - now;
    return best < 0 ? -1 : (int)best + 1;
}

void slurm_hook_gen_started (struct job *job, int kind, const char *trigger)
{
    uint32_t id;
    struct hk_job *j;

    (void)trigger;
    if (!hk_slurm_id (job->id, &id) || !(j = hk_job (id, hk.state == 1)))
        return;
    j->running = 1;
    j->kind = kind;
    j->t0 = hk_now ();
}

void slurm_hook_gen_done (struct server *s, struct job *job, int status)
{
    uint32_t id;
    struct hk_job *j;
    double secs;
    int action;

    if (!hk_slurm_id (job->id, &id) || !(j = hk_job (id, 0))) {
        if (job->requeue_restart) /* no requeue to wait for */
            sched_resume_reply (s, job->id, 0, 1, job->last_error);
        job->requeue_restart = 0;
        return;
    }
    secs = (hk_now () - j->t0) / 1000.0;
    j->running = 0;
    j->expect_until = 0;
    if (j->kind == GEN_CHECKPOINT && status == 0)
        hk_order (HK_CKPT, id, secs);
    action = j->final_action;
    j->final_action = CONF_ACT_NOTHING;
    if (job->requeue_restart) {
        /* Its ranks came back from different generations, the newer one
         * found damaged by a rank after others had picked it (gen.c): the
         * next run restores every rank from an older one.  The
         * restarters hear of it once the order is carried out. */
        log_msg (LOG_NOTICE,
                 "job %u: its ranks were restored from different generations, the "
                 "newer one damaged: requeued, so that all restore from one",
                 id);
        if (j->requeuing || hk_order (HK_REQUEUE, id, 0) == 0) {
            j->requeuing = 1;
            job->ending = 1;
        } else
            sched_resume_reply (s, job->id, 0, 1, job->last_error);
    }
    job->requeue_restart = 0;
    if (action == CONF_ACT_REQUEUE) {
        if (status != 0)
            log_msg (LOG_WARNING,
                     "job %u: the final checkpoint failed; requeued anyway: its "
                     "next run restores its last committed generation, if any",
                     id);
        /* The tasks keep their SIGTERM until the requeue is done, or the
         * batch script could end the job first.  No periodic generation
         * either: the next run comes back from this one, and a periodic
         * one taken while Slurm requeues would replace it as the newest
         * (and hold the tasks' SIGTERM longer). */
        if (hk_order (HK_REQUEUE, id, 0) == 0) {
            j->requeuing = 1;
            job->ending = 1;
        }
    }
    if (j->pending[0] && j->requeuing) {
        /* A trigger that came during the final checkpoint (a preemption's
         * grace time also shortens the job's end, which looks like its
         * time limit) needs no second one: the job is being requeued
         * from the generation that just committed. */
        log_msg (LOG_INFO, "job %u: %s: no further checkpoint, the job is being requeued", id,
                 j->pending);
        j->pending[0] = '\0';
        j->pending_action = CONF_ACT_NOTHING;
    }
    if (j->pending[0]) {
        char trigger[32];
        snprintf (trigger, sizeof (trigger), "%s", j->pending);
        action = j->pending_action;
        j->pending[0] = '\0';
        j->pending_action = CONF_ACT_NOTHING;
        hk_trigger (s, id, trigger, action);
    }
    if (!hk_busy (j))
        hk_release_job (s, id, status == 0 ? "checkpointed" : "the checkpoint failed");
}

json_object *slurm_hook_term (struct server *s, struct client *c, json_object *req)
{
    const char *id = proto_get_str (req, "job", "");
    int64_t wait_ms = proto_get_int (req, "wait_ms", 60000);
    struct job *job = ident_ok (id) ? jobs_find (s->jobs, id, c->uid) : NULL;
    struct hk_held *h;
    json_object *o;
    uint32_t sid;

    if (!job || !jobs_may_act (c->uid, job->uid) || !hk_slurm_id (id, &sid) || hk.state != 1
        || wait_ms <= 0 || !(h = calloc (1, sizeof (*h)))) {
        /* Nothing to wait for: a task is never held for nobody. */
        if ((o = ok_reply ("term")))
            proto_set_str (o, "why", hk.state == 1 ? "not a watched job" : "Slurm not watched");
        return o;
    }
    if (wait_ms > 600000)
        wait_ms = 600000;
    h->conn = c->id;
    h->job = sid;
    h->rank = (int)proto_get_int (req, "rank", -1);
    h->look = ++hk.looks_sent;
    h->deadline = hk_now () + (double)wait_ms;
    h->next = hk.held;
    hk.held = h;
    (void)hk_job (sid, 1);
    log_msg (LOG_INFO, "job %u rank %d: SIGTERM held while ibcrd asks Slurm why", sid, h->rank);
    hk_order (HK_LOOK, sid, 0);
    return NO_REPLY;
}

json_object *slurm_hook_status (uid_t uid)
{
    json_object *o, *js;
    char name[64];

    if (hk.state == 0)
        return NULL; /* never started: no Slurm job registered */
    if (!(o = json_object_new_object ()))
        return NULL;
    proto_set_bool (o, "watching", hk.state == 1);
    proto_set_str (o, "node", hk.node);
    if (hk.state != 1 && hk.error[0])
        proto_set_str (o, "error", hk.error);
    /* Every Slurm job's state: root's to see, as with squeue and
     * PrivateData=jobs. */
    if (uid == 0 && (js = json_object_new_array ())) {
        for (struct hk_job *j = hk.jobs; j; j = j->next) {
            json_object *jo = json_object_new_object ();
            if (!jo)
                continue;
            proto_set_int (jo, "job", j->id);
            if (j->slurm_state)
                proto_set_str (jo, "state",
                               slurm_watch_state_name (j->slurm_state, name, sizeof (name)));
            json_object_array_add (js, jo);
        }
        json_object_object_add (o, "jobs", js);
    }
    return o;
}

void slurm_hook_shutdown (void)
{
    if (hk.state != 1)
        return;
    hk_order (HK_STOP, 0, 0);
    /* A thread stuck in libslurm (slurmctld down) would hold the exit for
     * MessageTimeout; the daemon is ending: do not wait for it. */
    (void)pthread_detach (hk.th);
    hk.state = 0;
}
