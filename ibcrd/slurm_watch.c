/* slurm_watch.c - see slurm_watch.h.
 *
 * Invariants kept here:
 * - One event per cause: TIMELIMIT once per (job start, end time) - an
 *   extended limit re-arms it; PREEMPT once per job start; DRAIN once per
 *   job per drain of the node (cleared when the node is resumed).
 * - A job Slurm answers "invalid job id" for is reported GONE and dropped;
 *   any other failure keeps it and retries.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "common/errbuf.h"
#include "slurm_watch.h"

/* Where Debian's libslurm looks without SLURM_CONF. */
#ifndef SLURM_WATCH_CONF_DEFAULT
#define SLURM_WATCH_CONF_DEFAULT "/etc/slurm/slurm.conf"
#endif

struct sw_job {
    uint32_t id;
    uint32_t state;    /* last seen job_state, 0 before the first look */
    int seen;          /* looked at once at least */
    time_t start_time; /* of the run the flags below are about */
    time_t fired_end;  /* end time TIMELIMIT was reported for, 0 none */
    int fired_preempt;
    int fired_drain;
    double ckpt_s; /* last measured checkpoint duration */
    struct sw_job *next;
};

struct slurm_watch {
    char *node;
    node_info_msg_t *all; /* every node, this poll, when a watched job
                               spans several nodes; else NULL */
    struct slurm_watch_policy pol;
    slurm_watch_f cb;
    void *arg;
    struct sw_job *jobs;
    struct timespec next; /* CLOCK_MONOTONIC of the next poll */
    int draining;
    char drain_reason[160];
    char error[256]; /* why the last poll failed, "" */
};

static const char *sw_action_names[] = { "nothing", "checkpoint", "requeue" };
static const char *sw_kind_names[] = { "timelimit", "drain", "preempt", "state", "gone" };

void slurm_watch_policy_defaults (struct slurm_watch_policy *p)
{
    p->on_timelimit = SLURM_WATCH_CHECKPOINT_REQUEUE;
    p->on_drain = SLURM_WATCH_CHECKPOINT_REQUEUE;
    /* Slurm itself requeues a job preempted with PreemptMode=REQUEUE. */
    p->on_preempt = SLURM_WATCH_CHECKPOINT;
    p->margin_s = 60;
    p->poll_ms = 1000;
}

int slurm_watch_action_parse (const char *s)
{
    for (int i = 0; i < 3; i++)
        if (s && !strcmp (s, sw_action_names[i]))
            return i;
    return -1;
}

const char *slurm_watch_action_name (enum slurm_watch_action a)
{
    return (unsigned)a < 3 ? sw_action_names[a] : "?";
}

const char *slurm_watch_kind_name (enum slurm_watch_kind k)
{
    return (unsigned)k < 5 ? sw_kind_names[k] : "?";
}

/* Slurm's own job_state_string() is exported but not in its headers:
 * name the states ourselves, base state then the flags that matter here. */
const char *slurm_watch_state_name (uint32_t state, char *buf, size_t len)
{
    static const char *base[] = { "PENDING",   "RUNNING",   "SUSPENDED", "COMPLETED",
                                  "CANCELLED", "FAILED",    "TIMEOUT",   "NODE_FAIL",
                                  "PREEMPTED", "BOOT_FAIL", "DEADLINE",  "OUT_OF_MEMORY" };
    uint32_t b = state & JOB_STATE_BASE;

    snprintf (buf, len, "%s%s%s%s", b < sizeof (base) / sizeof (base[0]) ? base[b] : "?",
              state & JOB_COMPLETING ? "+COMPLETING" : "", state & JOB_REQUEUE ? "+REQUEUE" : "",
              state & JOB_CONFIGURING ? "+CONFIGURING" : "");
    return buf;
}

static void sw_now (struct timespec *ts)
{
    clock_gettime (CLOCK_MONOTONIC, ts);
}

static void sw_schedule (struct slurm_watch *w, unsigned ms)
{
    sw_now (&w->next);
    w->next.tv_sec += ms / 1000;
    w->next.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (w->next.tv_nsec >= 1000000000L) {
        w->next.tv_sec++;
        w->next.tv_nsec -= 1000000000L;
    }
}

struct slurm_watch *slurm_watch_create (const char *node, const struct slurm_watch_policy *p,
                                        slurm_watch_f cb, void *arg, char *err, size_t len)
{
    struct slurm_watch *w;
    const char *conf;

    if (!node || !*node || !cb) {
        errnprintf (err, len, EINVAL,
                    "slurm_watch: a node name and an event callback are required");
        return NULL;
    }
    if (p && p->poll_ms == 0) {
        errnprintf (err, len, EINVAL,
                    "slurm_watch: a poll period of 0 ms would never let the "
                    "daemon wait; give at least 100 ms");
        return NULL;
    }
    /* libslurm retries a missing slurm.conf for a minute and then exits
     * the whole process: look first, and refuse with a reason instead. */
    conf = getenv ("SLURM_CONF");
    if (!conf || !*conf)
        conf = SLURM_WATCH_CONF_DEFAULT;
    if (access (conf, R_OK) < 0) {
        errprintf (err, len,
                   "slurm_watch: cannot read Slurm's configuration %s: %s (set "
                   "SLURM_CONF for ibcrd, or run it where Slurm is configured)",
                   conf, strerror (errno));
        return NULL;
    }
    if (!(w = calloc (1, sizeof (*w))) || !(w->node = strdup (node))) {
        free (w);
        errnprintf (err, len, ENOMEM, "slurm_watch: %s", strerror (ENOMEM));
        return NULL;
    }
    if (p)
        w->pol = *p;
    else
        slurm_watch_policy_defaults (&w->pol);
    w->cb = cb;
    w->arg = arg;
    slurm_init (NULL);
    sw_schedule (w, 0);
    return w;
}

void slurm_watch_destroy (struct slurm_watch *w)
{
    struct sw_job *j, *n;

    if (!w)
        return;
    for (j = w->jobs; j; j = n) {
        n = j->next;
        free (j);
    }
    if (w->all)
        slurm_free_node_info_msg (w->all);
    free (w->node);
    free (w);
}

static struct sw_job *sw_find (struct slurm_watch *w, uint32_t id)
{
    for (struct sw_job *j = w->jobs; j; j = j->next)
        if (j->id == id)
            return j;
    return NULL;
}

int slurm_watch_add (struct slurm_watch *w, uint32_t job)
{
    struct sw_job *j;

    if (!sw_find (w, job)) {
        if (!(j = calloc (1, sizeof (*j)))) {
            errno = ENOMEM;
            return -1;
        }
        j->id = job;
        j->next = w->jobs;
        w->jobs = j;
    }
    sw_schedule (w, 0);
    return 0;
}

int slurm_watch_remove (struct slurm_watch *w, uint32_t job)
{
    for (struct sw_job **pp = &w->jobs; *pp; pp = &(*pp)->next) {
        if ((*pp)->id == job) {
            struct sw_job *j = *pp;
            *pp = j->next;
            free (j);
            return 0;
        }
    }
    errno = ENOENT;
    return -1;
}

void slurm_watch_set_ckpt_seconds (struct slurm_watch *w, uint32_t job, double seconds)
{
    struct sw_job *j = sw_find (w, job);

    if (j && seconds >= 0)
        j->ckpt_s = seconds;
}

int slurm_watch_due_ms (const struct slurm_watch *w)
{
    struct timespec now;
    long long ms;

    if (!w->jobs)
        return -1;
    sw_now (&now);
    ms =
        (long long)(w->next.tv_sec - now.tv_sec) * 1000 + (w->next.tv_nsec - now.tv_nsec) / 1000000;
    return ms <= 0 ? 0 : ms > 3600000 ? 3600000 : (int)ms;
}

int slurm_watch_node_draining (const struct slurm_watch *w)
{
    return w->draining;
}

static void sw_emit (struct slurm_watch *w, enum slurm_watch_kind kind, struct sw_job *j,
                     enum slurm_watch_action action, const slurm_job_info_t *ji, uint32_t old_state,
                     const char *fmt, ...) __attribute__ ((format (printf, 7, 8)));

static void sw_emit (struct slurm_watch *w, enum slurm_watch_kind kind, struct sw_job *j,
                     enum slurm_watch_action action, const slurm_job_info_t *ji, uint32_t old_state,
                     const char *fmt, ...)
{
    struct slurm_watch_event ev;
    va_list ap;

    memset (&ev, 0, sizeof (ev));
    ev.kind = kind;
    ev.job = j->id;
    ev.action = action;
    ev.old_state = old_state;
    if (ji) {
        ev.end_time = ji->end_time;
        ev.seconds_left = ji->end_time ? (long)(ji->end_time - time (NULL)) : 0;
        ev.new_state = ji->job_state;
        ev.restarts = ji->restart_cnt;
    }
    va_start (ap, fmt);
    (void)vsnprintf (ev.text, sizeof (ev.text), fmt, ap);
    va_end (ap);
    w->cb (&ev, w->arg);
}

/* The node's DRAIN flag and reason.  0, or -1 when slurmctld did not say. */
static int sw_poll_node (struct slurm_watch *w)
{
    node_info_msg_t *ni = NULL;
    int draining;

    if (slurm_load_node_single (&ni, w->node, SHOW_ALL) != SLURM_SUCCESS || !ni
        || ni->record_count < 1) {
        int e = slurm_get_errno ();
        int none = ni != NULL;
        if (ni)
            slurm_free_node_info_msg (ni);
        /* An unknown name is answered with success and no record. */
        return errnprintf (w->error, sizeof (w->error), EAGAIN,
                           "cannot read node %s from slurmctld: %s%s", w->node,
                           none ? "Slurm has no such node" : slurm_strerror (e),
                           none || e == ESLURM_INVALID_NODE_NAME
                               ? " (ibcrd's node name, -N or node=, must be the Slurm node name)"
                               : "");
    }
    draining = !!(ni->node_array[0].node_state & NODE_STATE_DRAIN);
    if (draining && !w->draining)
        snprintf (w->drain_reason, sizeof (w->drain_reason), "%s",
                  ni->node_array[0].reason ? ni->node_array[0].reason : "no reason given");
    if (!draining && w->draining) {
        /* Resumed: a later drain is a new cause for every job. */
        for (struct sw_job *j = w->jobs; j; j = j->next)
            j->fired_drain = 0;
    }
    w->draining = draining;
    slurm_free_node_info_msg (ni);
    return 0;
}

static int sw_running (uint32_t state)
{
    return (state & JOB_STATE_BASE) == JOB_RUNNING && !(state & JOB_COMPLETING);
}

/* Is another node of the job DRAIN?  Its name and reason into buf, 1; or
 * 0.  A drain of any node of a multi-node job concerns all of its nodes:
 * its leader (rank 0's node) must take the checkpoint. */
static int sw_other_drain (struct slurm_watch *w, const slurm_job_info_t *ji, char *buf, size_t len)
{
    hostlist_t hl;
    char *name;
    int found = 0;

    if (!ji->nodes || !(hl = slurm_hostlist_create (ji->nodes)))
        return 0;
    if (!w->all && slurm_load_node (0, &w->all, SHOW_ALL) != SLURM_SUCCESS)
        w->all = NULL;
    while (!found && w->all && (name = slurm_hostlist_shift (hl))) {
        for (uint32_t i = 0; i < w->all->record_count; i++) {
            node_info_t *n = &w->all->node_array[i];
            if (!n->name || strcmp (n->name, name) || !strcmp (name, w->node)
                || !(n->node_state & NODE_STATE_DRAIN))
                continue;
            snprintf (buf, len, "node %s is DRAIN (%s)", name,
                      n->reason ? n->reason : "no reason given");
            found = 1;
            break;
        }
        free (name);
    }
    slurm_hostlist_destroy (hl);
    return found;
}

/* Look at one job; 1 when it is gone and was dropped, 0, -1 on failure. */
static int sw_poll_job (struct slurm_watch *w, struct sw_job *j)
{
    job_info_msg_t *jm = NULL;
    slurm_job_info_t *ji;
    enum slurm_watch_action act;
    time_t now = time (NULL), at;

    if (slurm_load_job (&jm, j->id, SHOW_ALL) != SLURM_SUCCESS || !jm || jm->record_count < 1) {
        int e = slurm_get_errno ();
        if (jm)
            slurm_free_job_info_msg (jm);
        if (e == ESLURM_INVALID_JOB_ID) {
            sw_emit (w, SLURM_WATCH_GONE, j, SLURM_WATCH_NOTHING, NULL, j->state,
                     "job %u is no longer known to Slurm", j->id);
            slurm_watch_remove (w, j->id);
            return 1;
        }
        return errnprintf (w->error, sizeof (w->error), EAGAIN,
                           "cannot read job %u from slurmctld: %s", j->id, slurm_strerror (e));
    }
    ji = &jm->job_array[0];

    if (!j->seen || ji->job_state != j->state) {
        char before[80], after[80];
        if (j->seen)
            slurm_watch_state_name (j->state, before, sizeof (before));
        else
            snprintf (before, sizeof (before), "(first look)");
        sw_emit (w, SLURM_WATCH_STATE, j, SLURM_WATCH_NOTHING, ji, j->state,
                 "%s -> %s, restarts %u%s%s", before,
                 slurm_watch_state_name (ji->job_state, after, sizeof (after)),
                 (unsigned)ji->restart_cnt, ji->state_desc ? ": " : "",
                 ji->state_desc ? ji->state_desc : "");
        j->state = ji->job_state;
        j->seen = 1;
    }
    if (ji->start_time != j->start_time) {
        /* A new run of the job (after a requeue): every cause re-arms. */
        j->start_time = ji->start_time;
        j->fired_end = 0;
        j->fired_preempt = 0;
        j->fired_drain = 0;
    }
    if (!sw_running (ji->job_state))
        goto out;

    if (ji->preempt_time && !j->fired_preempt) {
        j->fired_preempt = 1;
        act = w->pol.on_preempt;
        sw_emit (w, SLURM_WATCH_PREEMPT, j, act, ji, j->state,
                 "job %u preempted %ld s ago; %ld s left before Slurm ends it", j->id,
                 (long)(now - ji->preempt_time), ji->end_time ? (long)(ji->end_time - now) : -1L);
    }
    {
        char other[256];
        int elsewhere =
            !w->draining && ji->num_nodes > 1 && sw_other_drain (w, ji, other, sizeof (other));
        if ((w->draining || elsewhere) && !j->fired_drain) {
            j->fired_drain = 1;
            if (w->draining)
                sw_emit (w, SLURM_WATCH_DRAIN, j, w->pol.on_drain, ji, j->state,
                         "node %s is DRAIN (%s)", w->node, w->drain_reason);
            else
                sw_emit (w, SLURM_WATCH_DRAIN, j, w->pol.on_drain, ji, j->state, "%s", other);
        } else if (!w->draining && !elsewhere && ji->num_nodes > 1)
            j->fired_drain = 0; /* resumed: a later drain is a new cause */
    }
    /* INFINITE limits have end_time far away (or 0): never reached. */
    if (ji->time_limit != INFINITE && ji->time_limit != NO_VAL && ji->end_time > 0
        && j->fired_end != ji->end_time) {
        at = ji->end_time - (time_t)w->pol.margin_s - (time_t)(j->ckpt_s + 0.999);
        if (now >= at) {
            j->fired_end = ji->end_time;
            sw_emit (w, SLURM_WATCH_TIMELIMIT, j, w->pol.on_timelimit, ji, j->state,
                     "job %u ends in %ld s (limit %u min; margin %u s + last checkpoint "
                     "%.1f s)",
                     j->id, (long)(ji->end_time - now), ji->time_limit, w->pol.margin_s, j->ckpt_s);
        }
    }
out:
    slurm_free_job_info_msg (jm);
    return 0;
}

int slurm_watch_poll (struct slurm_watch *w)
{
    struct sw_job *j, *next;
    int failed = 0;

    sw_schedule (w, w->pol.poll_ms);
    w->error[0] = '\0';
    if (w->all) {
        slurm_free_node_info_msg (w->all);
        w->all = NULL;
    }
    if (sw_poll_node (w) < 0)
        failed = 1;
    for (j = w->jobs; j; j = next) {
        next = j->next; /* j may be dropped */
        if (sw_poll_job (w, j) < 0)
            failed = 1;
    }
    if (failed) {
        errno = EAGAIN;
        return -1;
    }
    return 0;
}

const char *slurm_watch_error (const struct slurm_watch *w)
{
    return w->error;
}

int slurm_watch_requeue (struct slurm_watch *w, uint32_t job, char *err, size_t len)
{
    int e;

    if (slurm_requeue (job, 0) == SLURM_SUCCESS)
        return 0;
    e = slurm_get_errno ();
    snprintf (err, len, "Slurm refused to requeue job %u: %s%s", job, slurm_strerror (e),
              e == ESLURM_DISABLED            ? " (the job was submitted with --no-requeue, or "
                                                "slurm.conf has JobRequeue=0 and the job lacks --requeue)"
                  : e == ESLURM_ACCESS_DENIED ? " (ibcrd must run as root or SlurmUser)"
                  : e == ESLURM_BATCH_ONLY    ? " (only batch jobs can be requeued)"
                                              : "");
    return errnprintf (w->error, sizeof (w->error), EPERM, "%s", err);
}
