#!/bin/sh
test_description='mpi: an Open MPI job checkpointed, requeued, drained, preempted and at its time limit, restored

Debian'"'"'s Open MPI (pml ucx on softib), 4 ranks on 2 of 3
network-namespace nodes under srun --mpi=pmix in a batch job with
--checkpoint-ib, as an ordinary user, with btl self only and PMIx'"'"'s
hash data store (no vader or PMIx shared-memory segments); mpi_verify
checks every message.  A rank'"'"'s PMIx connection, TCP to slurmstepd
on 127.0.0.1, goes through a relay that the task'"'"'s waiter forks,
outside the dumped tree: libibcr hands the rank one end of a unix socket pair in
place of the TCP socket, and the relay records the rank'"'"'s connect
message.  ibcrd dumps that end as external and puts the record in the
manifest; when the job comes back on other nodes, the plugin says the
connect message again to the new step'"'"'s PMIx server and hands CRIU
the end of a new relay.  The restored ranks are checkpointed again and
finish, MPI_Finalize talking PMIx to the new step, with the same result
as an uninterrupted run; so do jobs drained, preempted and at their time
limit (the scenarios of t/mpi/ckpt.sh, which t5003 runs with MPICH).
The plugin sets OMPI_MCA_shmem=mmap in protected tasks: the posix
component leaves every rank of a node an fd on one unlinked /dev/shm
file, which cannot be restored; and OMPI_MCA_mpi_add_procs_cutoff
above any job size: every peer is connected in MPI_Init, since a rank
restored in a new step can no longer look up a peer'"'"'s address (the
preempted job, checkpointed right after MPI_Init, failed so).'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/mpi/mpi.sh
. "$SHARNESS_TEST_SRCDIR"/spank/lib.sh
. "$SHARNESS_TEST_SRCDIR"/mpi/ckpt.sh
ibcr_require ROOT SLURM CRIU NETNS UCX OPENMPI SOFTIBDEV USERS BUILT VERIFY_OPENMPI PYCRIU
mpi_setup
spank_verbs_setup

ITERS=${T5004_ITERS:-250}

# The scenarios are t/mpi/ckpt.sh's, shared with MPICH's t5003.
test_expect_success 'a 3-node netns cluster on softib, an ibcrd per node, one storage' '
	mpi_ckpt_cluster
'

test_expect_success 'uninterrupted: the same job without --checkpoint-ib' '
	mpi_ckpt_ref openmpi
'

test_expect_success 'sbatch --checkpoint-ib=5s on n1, n2: generations hold every rank'"'"'s PMIx relay' '
	mpi_ckpt_periodic openmpi &&
	test "$(grep -c "\"pmix_hello\": \"[0-9a-f]\{64,\}\"" "$store/$J/gen-$newest/manifest.json")" = 4
'

test_expect_success 'scontrol requeue: the 4 ranks come back on n2 and n3' '
	mpi_ckpt_requeue openmpi
'

test_expect_success 'the restored ranks are checkpointed again, PMIx relay and all' '
	mpi_ckpt_again openmpi
'

test_expect_success 'the restored job finishes as the uninterrupted one did, every message verified' '
	mpi_ckpt_finish openmpi
'

test_expect_success 'a drain of n3: checkpointed, requeued, restored on n1 and n2' '
	mpi_ckpt_drain openmpi
'

test_expect_success 'preempted (bare --checkpoint-ib): one final checkpoint, requeued, restored, same result' '
	mpi_ckpt_preempt openmpi
'

test_expect_success 'time limit (-t 1): checkpointed and requeued before each limit, never TIMEOUT, same result' '
	mpi_ckpt_timelimit openmpi
'

test_expect_success 'a checkpoint while ranks are inside MPI_Init is refused, naming it; the job runs on to the same result' '
	mpi_ckpt_in_init openmpi
'

test_expect_success 'slurm_stop' '
	slurm_stop
'

test_done
