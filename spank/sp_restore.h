/* sp_restore.h - a requeued task comes back from its image instead of
 * executing the program.
 *
 * When the job restarts (SLURM_RESTART_COUNT > 0) and a committed
 * generation exists for its job and step, each task of the step restores
 * its own image (gen-N/task-<rank>) in its own slot of the new step:
 *
 *   task_init_privileged (root, not yet in the step's cgroups, no stdio):
 *     sp_restore_pick() chooses the newest intact generation (a damaged
 *     newest one is skipped for the previous, saying so) and checks that
 *     the step and its number of tasks match; sp_restore_prepare() forks
 *     the restorer, a root helper that waits.
 *   task_init (the user, in the step's cgroups, stdio set up):
 *     sp_restore_run() makes the task process a child subreaper and sends
 *     the restorer its stdin/stdout/stderr.  The restorer joins the task's
 *     cgroups (every hierarchy of /proc/<task>/cgroup), then runs
 *     "criu restore --restore-detached --manage-cgroups=ignore" with the
 *     task's stdio handed in for the dumped ones (--inherit-fd), and a
 *     fresh connection to ibcrd for libibcr's control socket (ctl-attach,
 *     made as root in task_init_privileged), so every
 *     restored process is born in the new step's cgroups; when criu exits,
 *     the restored init is re-parented to the task process (the nearest
 *     subreaper), which then forwards signals to it and exits with its
 *     status, exactly as a freshly started task does (tasktree_adopt()).
 *
 * Measured with CRIU 4.2.1 and Slurm 22.05 (t/t4006-spank-restore.t).
 *
 * Must never start the program afresh when an image should have been
 * restored (a layout mismatch or an unrestorable image is an error that
 * fails the task with the reason), nor write into the generation's folder
 * (criu's log and pid file go to the node's staging area).
 */
#ifndef IBCR_SPANK_RESTORE_H
#define IBCR_SPANK_RESTORE_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/restore.h"

struct sp_restore_in {
    const char *conf; /* ibcrd.conf, expanded for this node */
    int conf_given;   /* named in plugstack.conf: it must exist;
                               else a missing default means the defaults */
    const char *node; /* Slurm node name */
    const char *job;  /* Slurm job id */
    const char *step; /* step id ("0", "batch") */
    uint32_t rank;    /* global task id */
    uint32_t ntasks;  /* tasks in the step now */
};

/* Find what task 'in->rank' restores.  Returns 1 with *plan filled, 0 when
 * the job has no committed generation (a fresh start is right: the job
 * was requeued before its first checkpoint), -1 with the reason in err
 * (layout differs, every generation damaged, configuration unreadable).
 * Notes for the job's stderr (a damaged generation skipped) go into note,
 * "" when none. */
int sp_restore_pick (const struct sp_restore_in *in, struct restore_plan *plan, char *note,
                     size_t notelen, char *err, size_t errlen);

/* As root, in task_init_privileged: fork the restorer for plan.  The fd
 * the task talks to it over, or -1 with err. */
int sp_restore_prepare (const struct restore_plan *plan, char *err, size_t errlen);

/* As the user, in task_init: have the restorer restore the image into
 * this task's slot, with ctl_fds (nctl new control sockets for libibcr,
 * one per process that used verbs: plan->nctl), pmi_fd (the new step's
 * PMI socket, already greeted; -1: none) and pmix_fd (the task's end of
 * a new PMIx relay, common/pmi.h; -1: none) in place of the dumped ones.
 * Returns the restored init's pid (now our child) and closes fd, with
 * what the restore changed in err ("" nothing: restore.h), or -1 with err
 * (criu's first errors and its log's path); then nothing of the image
 * runs. */
pid_t sp_restore_run (int fd, const struct restore_plan *plan, const int *ctl_fds, int nctl,
                      int pmi_fd, int pmix_fd, char *err, size_t errlen);

#endif
