/* tasktree.c - run a Slurm task under its own PID-namespace init.
 *
 * slurmstepd forks each task and, in that child, runs the SPANK task
 * hooks and then execs the user's command itself.  A PID namespace only
 * applies to children of the process that made it, so the task is split
 * in three (see spank_ibcr.c's top comment for the measured behaviour):
 *
 *   waiter  the process slurmstepd forked (the "task pid" Slurm tracks,
 *           signals and waits for).  It made the namespace while still
 *           root, forks the init, forwards every signal it gets to it, and
 *           exits with the application's exact status.  Outside the
 *           namespace, so never part of a checkpoint.
 *   init    PID 1 of the new namespace, session leader (setsid), as the
 *           user.  Forwards signals to the application, reaps orphans,
 *           reports the application's wait status to the waiter.  The root
 *           of the tree ibcrd checkpoints.
 *   app     PID 2, the init's child.  Returns into slurmstepd, which
 *           finishes its own set-up (task prolog, limits, PATH) and execs
 *           the user's command, exactly as without ibcr.
 *
 * All three are forked after slurmstepd put the task in the step's
 * cgroups, so they stay there.
 */
#ifndef IBCR_COMMON_TASKTREE_H
#define IBCR_COMMON_TASKTREE_H

#include <stddef.h>
#include <sys/types.h>

/* As root, in task_init_privileged: the task's next children start in a
 * new PID namespace.  0, or -1 with a message in err. */
int tasktree_prepare (char *err, size_t errlen);

/* Called in the waiter once both processes exist, before the application
 * may run.  Returns 0 to let it run, -1 to kill the namespace (the
 * callback has said why) and fail the task. */
typedef int (*tasktree_started_f) (pid_t init_pid, pid_t app_pid, void *arg);

/* As the user, in task_init, after tasktree_prepare: split the task.
 * Returns 0 only in the application process, once 'started' allowed it.
 * The waiter never returns (it exits with the application's status).
 * -1 with a message in err when nothing could be started (no fork
 * happened, or the init died at once); the caller fails the task.
 * fds in keep[] stay open in the waiter (e.g. its ibcrd connection); every
 * other close-on-exec fd is closed there, as an exec would have done. */
int tasktree_start (tasktree_started_f started, void *arg, const int *keep, int nkeep, char *err,
                    size_t errlen);

/* The waiter's half alone, for a restored task (sp_restore.h): 'init' is
 * already our child (re-parented to us as a subreaper).  Forward signals
 * to it and exit with its status; fds in keep[] stay open (its ibcrd
 * connection), other close-on-exec ones are closed.  Never returns. */
/* Called by the waiter when SIGTERM arrives, before passing it on: it
 * may hold the signal (a preempted job is checkpointed first, while its
 * tasks still run).  Set before tasktree_start() or tasktree_adopt(). */
typedef void (*tasktree_term_f) (void *arg);
void tasktree_on_term (tasktree_term_f f, void *arg);

void tasktree_adopt (pid_t init, const int *keep, int nkeep) __attribute__ ((noreturn));

/* In a PID namespace's PID 1 (a restore's holder): forward signals to
 * child, reap orphans, exit with child's exit code.  Never returns. */
void tasktree_hold (pid_t child) __attribute__ ((noreturn));

/* The program the task's init execs (ibcr-init --adopt): set before
 * tasktree_start. */
void tasktree_set_init (const char *path);

#endif
