/* sp_stepd.h - what the plugin does inside slurmstepd, per task.
 *
 * task_init_privileged (root, before the task joins the step's cgroups):
 * decide whether this task is protected, reach ibcrd, make the PID
 * namespace.  task_init (the user, just before slurmstepd execs the
 * command): report what was decided on the job's stderr, set the task's
 * environment, split the task (tasktree.c) and register it.
 */
#ifndef IBCR_SPANK_STEPD_H
#define IBCR_SPANK_STEPD_H

#include <slurm/spank.h>

#include "sp_args.h"

int sp_stepd_privileged (spank_t sp, const struct sp_args *a);
int sp_stepd_task (spank_t sp, const struct sp_args *a);

#endif
