/* slurm_watch.h - what ibcrd learns from Slurm about the jobs it protects:
 * a time limit coming close, its node set to DRAIN, a preemption, a job
 * changing state or vanishing; and the one thing it asks of Slurm: requeue
 * a job after its final checkpoint.
 *
 * Slurm sends no signal for a drain, and the time-limit signal
 * (--signal) is the user's to choose, so the watcher polls slurmctld with
 * libslurm: one slurm_load_node_single() for this node and one
 * slurm_load_job() per watched job, every poll_ms, and, when a watched
 * job spans several nodes, one slurm_load_node() for the drain of its
 * other nodes (a multi-node job is checkpointed by rank 0's node, which
 * must see a drain of any of them).  Each event is reported
 * once per cause (per job start for time limit and preemption, per drain
 * of the node for DRAIN), together with the admin's action for it.  The
 * watcher never checkpoints or requeues by itself: the daemon's loop
 * decides, so that one code path runs the protocol.
 *
 * Use from a main loop:
 *
 *   w = slurm_watch_create ("n1", &policy, on_event, arg, err, sizeof err);
 *   slurm_watch_add (w, jobid);              when a job's first task registers
 *   ...
 *   timeout = min (timeout, slurm_watch_due_ms (w));
 *   ppoll (...);
 *   if (slurm_watch_due_ms (w) == 0)
 *       slurm_watch_poll (w);                calls on_event for each event
 *   ...
 *   on_event(TIMELIMIT, action CHECKPOINT_REQUEUE):
 *       final checkpoint (tasks left stopped, so the batch script never
 *       sees its step end first), then slurm_watch_requeue (w, job, ...);
 *       slurm_watch_set_ckpt_seconds (w, job, measured) after every
 *       checkpoint, so the next time-limit event comes early enough.
 *   slurm_watch_remove (w, jobid);           when its last task is gone
 *
 * Every libslurm call blocks for at most Slurm's MessageTimeout (10 s by
 * default) when slurmctld does not answer; a failed poll returns -1 with
 * the reason in slurm_watch_error() and is retried at the next period,
 * never fatal.
 *
 * Must never: requeue a job on its own; report one cause twice; keep a
 * job that Slurm no longer knows.
 */
#ifndef IBCRD_SLURM_WATCH_H
#define IBCRD_SLURM_WATCH_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* What the admin wants done on a trigger (ibcrd.conf on_timelimit=,
 * on_drain=, on_preempt=). */
enum slurm_watch_action {
    SLURM_WATCH_NOTHING = 0,        /* only log it */
    SLURM_WATCH_CHECKPOINT,         /* a final checkpoint; Slurm decides the rest */
    SLURM_WATCH_CHECKPOINT_REQUEUE, /* a final checkpoint, then requeue the job */
};

enum slurm_watch_kind {
    SLURM_WATCH_TIMELIMIT, /* end_time - margin - last checkpoint time reached */
    SLURM_WATCH_DRAIN,     /* this node, or another of the job's, is DRAIN */
    SLURM_WATCH_PREEMPT,   /* Slurm preempts the job (its grace time runs) */
    SLURM_WATCH_STATE,     /* the job's state changed (incl. the first look) */
    SLURM_WATCH_GONE,      /* Slurm no longer knows the job; it is dropped */
};

struct slurm_watch_policy {
    enum slurm_watch_action on_timelimit; /* default CHECKPOINT_REQUEUE */
    enum slurm_watch_action on_drain;     /* default CHECKPOINT_REQUEUE */
    enum slurm_watch_action on_preempt;   /* default CHECKPOINT: Slurm requeues */
    unsigned margin_s;                    /* time-limit margin before the measured
                               checkpoint time (default 60) */
    unsigned poll_ms;                     /* period of the polls (default 1000) */
};

struct slurm_watch_event {
    enum slurm_watch_kind kind;
    uint32_t job;
    enum slurm_watch_action action; /* the policy's, NOTHING for STATE/GONE */
    time_t end_time;                /* the job's end time as Slurm has it, 0 unknown */
    long seconds_left;              /* end_time - now at the event */
    uint32_t old_state;             /* STATE: Slurm job_state before (0 on first look) */
    uint32_t new_state;             /*        and now (base state | flags) */
    unsigned restarts;              /* the job's restart count (SLURM_RESTART_COUNT) */
    char text[256];                 /* one line for the log: the drain reason, the
                               state names, ... */
};

typedef void (*slurm_watch_f) (const struct slurm_watch_event *ev, void *arg);

struct slurm_watch;

/* Defaults listed in struct slurm_watch_policy. */
void slurm_watch_policy_defaults (struct slurm_watch_policy *p);

/* "requeue" (checkpoint then requeue), "checkpoint", "nothing": the
 * action, or -1 when s is none of them. */
int slurm_watch_action_parse (const char *s);
const char *slurm_watch_action_name (enum slurm_watch_action a);
const char *slurm_watch_kind_name (enum slurm_watch_kind k);
/* A Slurm job_state's name ("RUNNING", "PENDING+REQUEUE"...) in buf;
 * no libslurm call, so any thread may use it. */
const char *slurm_watch_state_name (uint32_t state, char *buf, size_t len);

/* Watch Slurm node 'node' (this ibcrd's -N name) with policy p, calling
 * cb for every event from slurm_watch_poll().  Initializes libslurm
 * (slurm_init: SLURM_CONF or /etc/slurm/slurm.conf); NULL with errno and
 * a message in err when that file cannot be read (libslurm itself would
 * retry for a minute, then exit the process). */
struct slurm_watch *slurm_watch_create (const char *node, const struct slurm_watch_policy *p,
                                        slurm_watch_f cb, void *arg, char *err, size_t len);
void slurm_watch_destroy (struct slurm_watch *w);

/* Start / stop watching a job.  Adding a job already watched is a no-op;
 * its next poll is made due at once.  0, or -1 with errno (ENOMEM, ENOENT
 * for remove of an unknown job). */
int slurm_watch_add (struct slurm_watch *w, uint32_t job);
int slurm_watch_remove (struct slurm_watch *w, uint32_t job);

/* The last measured checkpoint duration of job, added to the margin. */
void slurm_watch_set_ckpt_seconds (struct slurm_watch *w, uint32_t job, double seconds);

/* Milliseconds until the next poll is due (0: now), -1 when nothing is
 * watched and the node need not be either. */
int slurm_watch_due_ms (const struct slurm_watch *w);

/* Ask slurmctld about the node and every watched job, report events.
 * 0, or -1 with errno when slurmctld could not be asked (the events that
 * could be computed were still reported). */
int slurm_watch_poll (struct slurm_watch *w);

/* Requeue job (after its final checkpoint): Slurm ends the job's steps
 * and queues it again under the same id, with SLURM_RESTART_COUNT + 1.
 * 0, or -1 with a message in err (Slurm's reason and what to do). */
int slurm_watch_requeue (struct slurm_watch *w, uint32_t job, char *err, size_t len);

/* Why the last poll or requeue failed ("" when it did not). */
const char *slurm_watch_error (const struct slurm_watch *w);

/* Is this node DRAIN as of the last poll? */
int slurm_watch_node_draining (const struct slurm_watch *w);

#endif
