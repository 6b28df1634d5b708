/* mpi.h - the MPI calls during which a checkpoint is refused (mpi.c).
 *
 * libibcr defines MPI_Init, MPI_Init_thread and MPI_Finalize (and their
 * PMPI_ names), each calling the MPI library's own after counting the
 * calling thread in.  The control thread asks mpi_busy() after closing
 * the gate: the two sides order their store before their load, so either
 * the quiesce sees the thread inside, or the thread waits for the gate
 * to open before it enters the MPI library.
 */
#ifndef IBCR_MPI_H
#define IBCR_MPI_H

/* The call a thread of this process is inside of (the latest entered), or
 * NULL when none is. */
const char *mpi_busy (void);

#endif
