#!/bin/sh
test_description='mpi: an MPICH job checkpointed, requeued, drained, preempted and at its time limit, restored

Debian'"'"'s MPICH (ch4:ucx on softib: rc_verbs, no TCP), 4 ranks on 2
of 3 network-namespace nodes under srun --mpi=pmi2 in a batch job with
--checkpoint-ib, as an ordinary user; mpi_verify checks every message
(eager and rendezvous sizes, a ring, collectives).  Each rank holds the
PMI socket slurmstepd gave it (PMI_FD), which leads out of the dumped
tree: ibcrd dumps it as external and records it in the manifest; when
the job comes back (after "scontrol requeue", a drain of one of its
nodes, a preemption, its time limit), on other nodes where it can, the plugin greets the new step'"'"'s
PMI server as MPI_Init did and hands its socket to CRIU in place of the
old one.  The restored ranks are checkpointed again, and finish,
MPI_Finalize talking PMI to the new step, with the same result as an
uninterrupted run.  The plugin sets
MPIR_CVAR_NOLOCAL=1 in protected tasks: MPICH'"'"'s shared-memory
segment, one unlinked file mapped by all ranks of a node, cannot be
restored.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/mpi/mpi.sh
. "$SHARNESS_TEST_SRCDIR"/spank/lib.sh
. "$SHARNESS_TEST_SRCDIR"/mpi/ckpt.sh
ibcr_require ROOT SLURM CRIU NETNS UCX MPICH SOFTIBDEV USERS BUILT VERIFY_MPICH PYCRIU
mpi_setup
spank_verbs_setup

ITERS=${T5003_ITERS:-250}

# The scenarios are t/mpi/ckpt.sh's, shared with Open MPI's t5004.
test_expect_success 'a 3-node netns cluster on softib, an ibcrd per node, one storage' '
	mpi_ckpt_cluster
'

test_expect_success 'uninterrupted: the same job without --checkpoint-ib' '
	mpi_ckpt_ref mpich
'

test_expect_success 'sbatch --checkpoint-ib=5s on n1, n2: generations hold every rank'"'"'s PMI socket' '
	mpi_ckpt_periodic mpich
'

test_expect_success 'scontrol requeue: the 4 ranks come back on n2 and n3' '
	mpi_ckpt_requeue mpich
'

test_expect_success 'the restored ranks are checkpointed again, PMI socket and all' '
	mpi_ckpt_again mpich
'

test_expect_success 'the restored job finishes as the uninterrupted one did, every message verified' '
	mpi_ckpt_finish mpich
'

test_expect_success 'a drain of n3: checkpointed, requeued, restored on n1 and n2' '
	mpi_ckpt_drain mpich
'

test_expect_success 'preempted (bare --checkpoint-ib): one final checkpoint, requeued, restored, same result' '
	mpi_ckpt_preempt mpich
'

test_expect_success 'time limit (-t 1): checkpointed and requeued before each limit, never TIMEOUT, same result' '
	mpi_ckpt_timelimit mpich
'

test_expect_success 'a checkpoint while ranks are inside MPI_Init is refused, naming it; the job runs on to the same result' '
	mpi_ckpt_in_init mpich
'

test_expect_success 'slurm_stop' '
	slurm_stop
'

test_done
