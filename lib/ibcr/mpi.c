/* mpi.c - the MPI calls no checkpoint may fall inside (mpi.h).
 *
 * MPI_Init and MPI_Finalize talk to the step's PMI server in collective
 * exchanges (the modex, the fence).  A rank dumped in the middle of one
 * would, once restored under a new step, wait on a server that never saw
 * the exchange begin, or look up its peers' addresses there ("Failed to
 * receive UCX worker address: Not found" in Open MPI's add_procs).  So
 * libibcr stands in for these calls, counts the threads inside them, and
 * refuses a quiesce while one is (ctl.c): the generation is aborted before
 * anything was touched, the job runs on, and the next one is taken.
 *
 * Both names of each call are covered, since one MPI implements MPI_X on
 * top of PMPI_X and the other the reverse: a call that goes through both
 * is simply counted twice.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "gate.h"
#include "ibcr.h"
#include "mpi.h"

/* Threads inside one of the calls below, and the call the latest of
 * them entered (for the refusal's message). */
static atomic_int mpi_inside;
static _Atomic (const char *) mpi_last;

/* Count this thread in; a checkpoint already under way (the gate closed)
 * goes first, with this thread counted out until it is over. */
static void mpi_enter (const char *name)
{
    atomic_store (&mpi_last, name);
    atomic_fetch_add (&mpi_inside, 1);
    while (atomic_load (&gate_closed)) {
        atomic_fetch_sub (&mpi_inside, 1);
        gate_wait_open ();
        atomic_fetch_add (&mpi_inside, 1);
    }
}

static void mpi_leave (void)
{
    atomic_fetch_sub (&mpi_inside, 1);
}

const char *mpi_busy (void)
{
    return atomic_load (&mpi_inside) > 0 ? atomic_load (&mpi_last) : NULL;
}

/* The MPI library's own function: the next definition after libibcr. */
static void *mpi_next (const char *name)
{
    void *f = dlsym (RTLD_NEXT, name);
    if (!f) {
        ibcr_log ("%s called, but no MPI library after libibcr defines it", name);
        abort ();
    }
    return f;
}

#define MPI_STANDIN(name, params, args)                                                            \
    __attribute__ ((visibility ("default"))) int name params                                       \
    {                                                                                              \
        static int (*real) params;                                                                 \
        if (!real)                                                                                 \
            real = (int (*) params)mpi_next (#name);                                               \
        mpi_enter (#name);                                                                         \
        int rc = real args;                                                                        \
        mpi_leave ();                                                                              \
        return rc;                                                                                 \
    }

MPI_STANDIN (MPI_Init, (int *argc, char ***argv), (argc, argv))
MPI_STANDIN (PMPI_Init, (int *argc, char ***argv), (argc, argv))
MPI_STANDIN (MPI_Init_thread, (int *argc, char ***argv, int required, int *provided),
             (argc, argv, required, provided))
MPI_STANDIN (PMPI_Init_thread, (int *argc, char ***argv, int required, int *provided),
             (argc, argv, required, provided))
MPI_STANDIN (MPI_Finalize, (void), ())
MPI_STANDIN (PMPI_Finalize, (void), ())
