/* slurm_hook.h - ibcrd's side of Slurm: the watcher (slurm_watch.h) run
 * in a thread of its own, and what the daemon's loop does with its
 * events: final checkpoints before a time limit, on a drain and on a
 * preemption, requeues after them, and a preempted task's SIGTERM held
 * until its checkpoint has committed.
 *
 * Why a thread: every libslurm call may block for Slurm's MessageTimeout
 * (10 s) when slurmctld is slow or down, and the loop must keep serving
 * registrations and generations meanwhile.  The thread alone calls
 * libslurm; it hands events to the loop through a pipe (slurm_hook_pollfd)
 * and takes its orders (watch a job, requeue it) from a queue.
 *
 * The hook is one per daemon (module state); it starts at the first task
 * registered by the SPANK plugin, so an ibcrd without Slurm never touches
 * libslurm.  ibcrd.conf: on_timelimit, on_drain, on_preempt, on_cancel,
 * timelimit_margin, slurm_poll (ibcrd.conf(5)).
 *
 * A held SIGTERM ("term" request from the task process, ibcr-task): the
 * reply comes when ibcrd knows no checkpoint is due for the job (the next
 * look at Slurm shows no preemption, or policy says nothing), or when the
 * generation it triggered has ended (committed or aborted), never later
 * than the request's "wait_ms".
 *
 * Must never: requeue a job whose final checkpoint was not even tried;
 * call libslurm from the loop's thread; keep a task's SIGTERM past its
 * deadline.
 */
#ifndef IBCRD_SLURM_HOOK_H
#define IBCRD_SLURM_HOOK_H

#include <poll.h>
#include <json-c/json.h>

#include "common/conf.h"
#include "jobs.h"

struct server;
struct client;

/* The configuration in force (at start and after every reload). */
void slurm_hook_set_conf (const struct conf *conf);

/* A task of job registered (h_register): a Slurm job (source "spank",
 * numeric id) is watched from now on. */
void slurm_hook_registered (struct server *s, struct job *job, json_object *req);

/* The loop's pollfd for the hook's events: fills pfd, returns 1, or 0
 * when the hook is not running. */
int slurm_hook_pollfd (struct pollfd *pfd);

/* Act on the events that are ready (pfd as filled above, may be NULL),
 * and on held SIGTERMs whose deadline passed. */
void slurm_hook_dispatch (struct server *s, const struct pollfd *pfd);

/* Ms until the hook must be called again without an event (a held
 * SIGTERM's deadline), or -1. */
int slurm_hook_timer (void);

/* A generation of job started (kind as gen.h's), and one ended. */
void slurm_hook_gen_started (struct job *job, int kind, const char *trigger);
void slurm_hook_gen_done (struct server *s, struct job *job, int status);

/* "term" {job, rank, wait_ms}: a task got SIGTERM; answer when it may go
 * on (server.c's table). */
json_object *slurm_hook_term (struct server *s, struct client *c, json_object *req);

/* For status replies ("slurm" in the daemon's object): whether Slurm is
 * watched, as which node, why not when the watcher failed (it is tried
 * again when a job registers), and for root every Slurm job the hook
 * follows with the state of the watcher's last look.  NULL when no Slurm
 * job ever registered. */
json_object *slurm_hook_status (uid_t uid);

/* Stop the thread (daemon shut-down). */
void slurm_hook_shutdown (void);

#endif
