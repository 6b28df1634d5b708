/* cgjoin.c - put the calling process into the cgroups of another one.
 *
 * The restorer (sp_restore.h) is forked before slurmstepd places the task
 * in the step's cgroups; before it runs criu it moves itself next to the
 * task, so that every restored process is born in the step's cgroups and
 * Slurm tracks, signals, accounts and finally kills it.  Works for
 * cgroup v1 (one line per hierarchy), v2 and hybrid set-ups: each line of
 * /proc/PID/cgroup is matched to a mount of that hierarchy in
 * /proc/self/mountinfo whose root is a prefix of the path, so bind mounts
 * of sub-cgroups (as the test clusters use) are found too.
 */
#ifndef IBCR_COMMON_CGJOIN_H
#define IBCR_COMMON_CGJOIN_H

#include <stddef.h>
#include <sys/types.h>

/* As root: join every cgroup 'pid' is in.  Hierarchies without
 * controllers (name=systemd) and the v2 one are joined when possible;
 * failing to join a v1 hierarchy with controllers (freezer, cpuset, ...)
 * is an error.  0, or -1 with a message in err. */
int cgjoin_join (pid_t pid, char *err, size_t errlen);

/* 1 when process a is in exactly the v1/v2 cgroups of process b, 0 when
 * not, -1 when either cannot be read. */
int cgjoin_same (pid_t a, pid_t b);

#endif
