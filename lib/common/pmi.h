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

/* Open MPI under "srun --mpi=pmix" talks to slurmstepd's PMIx server over
 * TCP (127.0.0.1, the address in PMIX_SERVER_URI*), which CRIU cannot
 * carry to a new step.  So the rank's PMIx connection goes through a
 * relay outside the dumped tree:
 *   - the plugin gives a protected task one end of a unix socket pair, its
 *     number in IBCR_PMIX_FD; the relay, a child of the task's waiter
 *     (tasktree.h) and so outside the dumped tree, holds the other end;
 *   - libibcr, when the application connect()s a TCP socket to the PMIx
 *     server's address, puts that end in its place (dup3) and says it
 *     connected;
 *   - the relay reads the client's first message (its connect message:
 *     security module, credential, nspace, rank, versions), keeps a copy
 *     in a memfd named PMIX_HELLO_NAME that the waiter holds too, connects to the server, and copies
 *     bytes both ways;
 *   - at the dump, ibcrd names the task's end external (pmix_find) and
 *     puts the copy of the connect message in the manifest
 *     (pmix_hello_read);
 *   - at a restore, the plugin connects to the new step's server, says
 *     the recorded connect message again, takes the server's answer
 *     (status, then the client's index; the restored client already has
 *     one) and hands CRIU its end of a new pair, relayed the same way.
 *     Slurm names the nspace after job and step ("slurm.pmix.J.S"), so a
 *     requeued job's step 0 has the same one; Slurm's PMIx uses psec
 *     native, whose credential (uid, gid) a relay running as the user
 *     satisfies. */
#define PMIX_RELAY_ENV "IBCR_PMIX_FD"
#define PMIX_HELLO_NAME "ibcr-pmix-hello"
#define PMIX_HELLO_MAX 4096

struct sockaddr_in;

/* The server's address in a PMIx URI ("NSPACE.RANK;tcp4://A.B.C.D:PORT").
 * 0, or -1. */
int pmix_uri_addr (const char *uri, struct sockaddr_in *sa);

/* The URI variables Slurm's PMIx plugin sets, newest first. */
extern const char *const pmix_uri_vars[];

/* Size of the PMIx connect message whose 16-byte header is hdr (the
 * body's length is host-endian, as the client writes it), or 0 when out
 * of bounds. */
size_t pmix_hello_size (const unsigned char *hdr);

/* As pmi_find, for the task end of the PMIx relay (PMIX_RELAY_ENV). */
int pmix_find (pid_t root, int *fd, uint64_t *ino);

/* The recorded connect message of the task whose init is root: from the
 * memfd PMIX_HELLO_NAME of its nearest ancestor (the waiter) that holds
 * one and runs as uid.  Its length, 0 when none, -1 on error. */
ssize_t pmix_hello_read (pid_t root, uid_t uid, unsigned char *buf, size_t len);

/* On fd, a new connection to a PMIx server: say hello, a recorded
 * connect message, and read the server's answer (status, must be 0, then
 * the client's index), within timeout_ms.  0, or -1 with err. */
int pmix_replay (int fd, const unsigned char *hello, size_t len, int timeout_ms, char *err,
                 size_t errlen);

#endif
