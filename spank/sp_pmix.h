/* sp_pmix.h - the PMIx relay of a protected task (common/pmi.h).
 *
 * Under "srun --mpi=pmix" the task gets one end of a unix socket pair
 * (IBCR_PMIX_FD) and a child of its waiter, outside the dumped tree,
 * relays what libibcr puts on it to the step's PMIx server over TCP.  A restored task
 * gets a new pair, whose relay first says the rank's recorded connect
 * message to the new step's server.
 */
#ifndef IBCR_SPANK_PMIX_H
#define IBCR_SPANK_PMIX_H

#include <netinet/in.h>
#include <stddef.h>

#include <slurm/spank.h>

struct sp_pmix {
    struct sockaddr_in srv; /* the step's PMIx server */
    int task_end;           /* the task's end (IBCR_PMIX_FD), -1 none */
    int relay_end;          /* the waiter's end, -1 none */
    int srv_fd;             /* connected to srv, -1 not yet */
    int memfd;              /* the recorded connect message, -1 none */
};

#define SP_PMIX_INIT                                                                               \
    {                                                                                              \
        .task_end = -1, .relay_end = -1, .srv_fd = -1, .memfd = -1                                 \
    }

/* In task_init, as the user: when the step has a PMIx server, make the
 * pair and the record and put IBCR_PMIX_FD in the task's environment.
 * 1 done, 0 no PMIx here, -1 with err. */
int sp_pmix_prepare (spank_t sp, struct sp_pmix *px, char *err, size_t errlen);

/* For a restore, as the user: connect to this step's PMIx server, say
 * hello (the rank's recorded connect message) and take its answer, then
 * make the pair and the record.  0, or -1 with err. */
int sp_pmix_reconnect (spank_t sp, struct sp_pmix *px, const unsigned char *hello, size_t len,
                       int timeout_ms, char *err, size_t errlen);

/* In the waiter: close the task's end and relay from now on, in a child
 * process with every signal blocked.  The fds to keep open in the waiter
 * are added to keep[] (up to 3); their count is returned. */
int sp_pmix_start (struct sp_pmix *px, int *keep);

#endif
