/* pmi.h - the launcher's PMI connection of an MPI task, across a
 * checkpoint.
 *
 * Under "srun --mpi=pmi2" slurmstepd gives every task one end of a unix
 * socket pair, its number in PMI_FD; the MPI library talks the PMI text
 * protocol on it (MPICH 4: PMI-1.1) at MPI_Init and again at
 * MPI_Finalize.  Its other end is slurmstepd's, outside the dumped tree:
 *   - at the dump, ibcrd names the task's end external (CRIU
 *     --external unix[INO]) and records its fd and inode in the manifest
 *     (pmi_find);
 *   - at a restore, the new step's slurmstepd has a fresh pair for the
 *     task, which only answers once it was greeted with the PMI init line
 *     (Slurm's mpi/pmi2 reads it as the first message of every task):
 *     the plugin says it (pmi_greet) and hands the socket to CRIU in place
 *     of the dumped one (--inherit-fd fd[N]:socket:[INO]).  The restored
 *     rank never notices: what it said at MPI_Init is done, and its next
 *     words (barrier, finalize) go to the new step.
 */
#ifndef IBCR_COMMON_PMI_H
#define IBCR_COMMON_PMI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The init line a PMI-1.1 client (MPICH's simple PMI) starts with. */
#define PMI_INIT_LINE "cmd=init pmi_version=1 pmi_subversion=1\n"

/* In the tree under root (a task's init; root itself is skipped, it holds
 * none of slurmstepd's fds), the first process whose environment names
 * PMI_FD=N and whose fd N is a socket: N and the socket's inode.  0, or
 * -1 (no such process: not an MPI task of pmi2). */
int pmi_find (pid_t root, int *fd, uint64_t *ino);

/* Greet the PMI server on fd as the task's MPI library did at MPI_Init,
 * and read its answer, which must say rc=0; within timeout_ms.  0, or -1
 * with err. */
int pmi_greet (int fd, int timeout_ms, char *err, size_t len);

#endif
