/* spank_ibcr.c - the ibcr SPANK plugin (spank_ibcr.so): entry points.
 *
 * What it does, per Slurm context (one file each, as pyxis does):
 *   srun, sbatch, salloc   --checkpoint-ib[=INTERVAL] (sp_opt.c): a bad
 *                          interval is refused before anything is queued.
 *   slurmstepd             each task of a step with the option (not the
 *                          batch script unless batch_step=yes) runs under
 *                          its own PID-namespace init, with libibcr
 *                          preloaded and IBCR_SOCKET set, registered with
 *                          the node's ibcrd (sp_stepd.c, tasktree.c,
 *                          sp_reg.c).  Steps without the option are not
 *                          touched at all.  When the job was requeued
 *                          (SLURM_RESTART_COUNT > 0) and has a committed
 *                          generation, each task restores its image in
 *                          its slot of the new step instead of executing
 *                          the program (sp_restore.c, cgjoin.c).
 * plugstack.conf arguments: sp_args.h.
 *
 * How a task gets its PID namespace.  slurmstepd forks the task, runs
 * task_init_privileged in it as root, puts it in the step's cgroups,
 * makes it the user, runs task_init and execs the command itself; a
 * plugin cannot exec anything else without skipping what slurmstepd does
 * after task_init (task prolog, user limits, PATH lookup).  And
 * unshare(CLONE_NEWPID) only moves the caller's future children.  So:
 *   1. task_init_privileged: ask ibcrd whether it is there (ping), and
 *      only then unshare(CLONE_NEWPID), while still root;
 *   2. task_init (the user, in the step's cgroups by now): fork.  The
 *      child is PID 1 of the new namespace; it calls setsid() and forks
 *      the application (PID 2), which waits for a word from the original
 *      process, then returns into slurmstepd and is exec'd as the
 *      command.  The original process, the pid Slurm knows as the task,
 *      registers the task with ibcrd (init pid and application pid),
 *      gives the word, forwards every signal it receives to the init
 *      (which forwards them to the application), and exits with the
 *      application's exact wait status.
 * Measured on Slurm 22.05 with proctrack/cgroup (t/t4002-spank-task.t):
 * Slurm signals only its own children (the task pid) except for SIGKILL,
 * which reaches every process of the cgroup; so forwarding delivers
 * scancel -s SIG exactly once to the application; scancel, exit codes and
 * deaths by signal are reported as without ibcr; the three processes
 * stay in the step's cgroups; a task start costs about 1 ms more.  CRIU
 * dumps the tree from the init with --leave-running and the task runs on
 * (t/t4004-spank-criu.t).
 *
 * Must never: change a step without the option; hang a task start on a
 * stuck ibcrd (every exchange has a deadline, plugstack timeout=); export
 * anything but slurm_spank_* and plugin_* (spank_ibcr.map).
 */
#include "config.h"

#include <stdio.h>

#include <slurm/spank.h>

#include "sp_args.h"
#include "sp_opt.h"
#include "sp_stepd.h"

SPANK_PLUGIN (ibcr, 1);

static struct sp_args sp_args_v;

int slurm_spank_init (spank_t sp, int ac, char **av)
{
    spank_context_t ctx = spank_context ();
    char err[1024];

    sp_args_defaults (&sp_args_v);
    if (sp_args_parse (&sp_args_v, ac, av, err, sizeof (err)) < 0) {
        /* On the submitting side the user reads stderr; elsewhere the
         * admin reads the daemon's log. */
        if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR)
            fprintf (stderr, "%s\n", err);
        else
            slurm_error ("%s", err);
        return -1;
    }
    if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR || ctx == S_CTX_REMOTE) {
        if (sp_opt_register (sp) < 0) {
            slurm_error ("ibcr: cannot register the --checkpoint-ib option");
            return -1;
        }
    }
    return 0;
}

int slurm_spank_task_init_privileged (spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!spank_remote (sp))
        return 0;
    return sp_stepd_privileged (sp, &sp_args_v);
}

int slurm_spank_task_init (spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!spank_remote (sp))
        return 0;
    return sp_stepd_task (sp, &sp_args_v);
}
