/* schedule.h - the scheduling of generations on this node: when a
 * generation starts (asked for, periodic, a Slurm trigger, the rebuild of
 * a restarted job, a member's part of a leader's generation), its worker
 * (worker.h) runs it, and what the daemon learns from the worker.
 *
 * Contract:
 * - At most one worker per job at a time; a request meeting one that runs
 *   gets EBUSY, never a second worker.
 * - The tasks' libibcr connections are lent to the worker while it runs
 *   and read by the request layer again only after its end.
 * - Every generation's phase and outcome reach the job's status (jobs.h:
 *   phase, last_gen, last_error) from the worker's reports, also when it
 *   is killed.
 * - A restarted job's rebuild starts only once every rank is back and
 *   someone asked for it; its waiters get an answer by timeout_restore.
 * - Layers: uses the request layer (request.h), jobs, gen and worker; it
 *   calls nothing above it.  Who must hear of a generation's start and
 *   end (the Slurm policy) registers with sched_set_observer.
 */
#ifndef IBCRD_SCHEDULE_H
#define IBCRD_SCHEDULE_H

#include <poll.h>
#include <sys/types.h>
#include <json-c/json.h>

#include "jobs.h"

struct server;
struct client;

/* Requests of the local socket (added to the server by ibcrd.c). */
json_object *h_checkpoint (struct server *s, struct client *c, json_object *req);
json_object *h_ctl_attach (struct server *s, struct client *c, json_object *req);
json_object *h_resume_restored (struct server *s, struct client *c, json_object *req);

/* After a registration: start the rebuild of a restarted job once every
 * rank is back and someone asked. */
void sched_registered (struct server *s, struct job *job, json_object *req);
void sched_try_resume (struct server *s, struct job *job);

/* A final generation of job for a Slurm trigger ("timelimit", "drain",
 * "preempt", "cancel"), the job left running.  0, or -1 with errno:
 * EINVAL not the job's leader, EBUSY a generation runs, EAGAIN not every
 * rank registered yet. */
int sched_start_trigger (struct server *s, struct job *job, const char *trigger);

/* A member's part of the leader's generation ("gen-begin", member.c):
 * the reply to send the leader. */
json_object *sched_member_begin (struct server *s, json_object *m, struct job *job);

/* Peer "gen-abort" {job, gen}: the leader lost the node above this one in
 * the generation's tree (fanout.h), so nothing reaches this node's worker
 * any more: it is told to undo its part (one byte on its report channel,
 * which it watches).  An answer for the leader. */
json_object *sched_member_abort (struct server *s, json_object *m, struct job *job);

/* The workers' report channels: pollfds (filled first in the loop, so a
 * worker's end is known before its asker's next request), and reading
 * what is ready. */
int sched_pollfds (struct server *s, struct pollfd *pfd, int max);
void sched_dispatch (struct server *s, const struct pollfd *pfd, int n);
void sched_worker_report (struct server *s, struct job *job);

/* Answer every restarter waiting for the rebuild of job id (NULL: of any
 * job; held: only those held for a requeue): resumed, or not, for 'why'. */
void sched_resume_reply (struct server *s, const char *id, int ok, int held, const char *why);

/* A worker ended (status 0: committed or resumed). */
void sched_worker_done (struct server *s, pid_t pid, int status);

/* Start the periodic generations that are due and end restore waits
 * past their deadline; ms until the next is due, or -1. */
int sched_timer (struct server *s);

/* Who hears of each generation's start (kind as gen.h's) and end. */
typedef void (*sched_started_f) (struct job *job, int kind, const char *trigger);
typedef void (*sched_done_f) (struct server *s, struct job *job, int status);
void sched_set_observer (sched_started_f started, sched_done_f done);

#endif
