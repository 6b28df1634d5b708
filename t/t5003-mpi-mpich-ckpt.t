#!/bin/sh
test_description='mpi: an MPICH job checkpointed, requeued and restored on other nodes

Debian'"'"'s MPICH (ch4:ucx on softib: rc_verbs, no TCP or shared
memory), 4 ranks on 2 of 3 network-namespace nodes under
srun --mpi=pmi2 in a batch job with --checkpoint-ib, as an ordinary
user; mpi_verify checks every message (eager and rendezvous sizes, a
ring, collectives).  Each rank holds the PMI socket slurmstepd gave it
(PMI_FD), which leads out of the dumped tree: ibcrd dumps it as
external and records it in the manifest; after "scontrol requeue" the
job starts on two other nodes, where the plugin greets the new step'"'"'s
PMI server as MPI_Init did and hands its socket to CRIU in place of the
old one.  The restored ranks finish, MPI_Finalize talking PMI to the new
step, with the same result as an uninterrupted run.  MPIR_CVAR_NOLOCAL=1
keeps MPICH off its shared-memory segment, which CRIU cannot carry.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/mpi/mpi.sh
. "$SHARNESS_TEST_SRCDIR"/spank/lib.sh
ibcr_require ROOT SLURM CRIU NETNS UCX MPICH SOFTIBDEV USERS
mpi_setup
spank_verbs_setup

ITERS=${T5003_ITERS:-250}

test_expect_success BUILT,VERIFY_MPICH 'a 3-node netns cluster on softib, an ibcrd per node, one storage' '
	ibcr_atexit ibcrd_stop_all &&
	mkdir -p "$IBCRD_STORAGE" &&
	spank_plugstack "$plugin" "$libibcr" &&
	SLURM_PLUGSTACK=plugstack.conf SLURM_CONF_EXTRA="JobRequeue=1" \
		slurm_start 3 --netns --devns &&
	IBCRD_CONF_EXTRA="criu = $IBCR_CRIU
munge_socket = $IBCR_MUNGE_SOCKET" &&
	spank_start_ibcrds 3
'

test_expect_success BUILT,VERIFY_MPICH 'uninterrupted: the same job without --checkpoint-ib' '
	MPI_ITERS=$ITERS mpi_srun mpich ref MPIR_CVAR_NOLOCAL=1 &&
	grep "^mpi_verify: OK " ref.out >ref.ok
'

test_expect_success BUILT,VERIFY_MPICH 'sbatch --checkpoint-ib=5s on n1, n2: generations hold every rank'"'"'s PMI socket' '
	filler=$(sbatch --parsable -w n3 -c 2 -o /dev/null --wrap "sleep 600") &&
	slurm_wait_job $filler RUNNING 30 &&
	J=$(mpi_with mpich MPIR_CVAR_NOLOCAL=1 sbatch --parsable -N2 --ntasks-per-node=2 \
		--checkpoint-ib=5s -o job.out -e job.err \
		--wrap "srun --mpi=pmi2 -o mv.out -e mv.err $MPI_VERIFY_MPICH -n $ITERS") &&
	slurm_wait_job $J RUNNING 30 &&
	test "$(spank_field $J NodeList)" = "n[1-2]" &&
	scancel $filler &&
	spank_wait_gens $J 2 90 &&
	newest=$(ls -d "$store/$J"/gen-* | sed "s/.*gen-//" | sort -n | tail -n 1) &&
	test "$(grep -c "\"pmi_ino\": [1-9]" "$store/$J/gen-$newest/manifest.json")" = 4
'

test_expect_success BUILT,VERIFY_MPICH 'scontrol requeue: the 4 ranks come back on n2 and n3' '
	filler=$(sbatch --parsable -w n1 -c 2 -o /dev/null --wrap "sleep 600") &&
	scontrol requeue $J &&
	slurm_wait_job $J PENDING 30 &&
	slurm_wait_job $filler RUNNING 30 &&
	newest=$(ls -d "$store/$J"/gen-* | sed "s/.*gen-//" | sort -n | tail -n 1) &&
	mv mv.out mv.out.1 && mv mv.err mv.err.1 &&
	scontrol update jobid=$J StartTime=now &&
	slurm_wait_job $J RUNNING 60 &&
	test "$(spank_field $J NodeList)" = "n[2-3]" &&
	ibcr_wait_for 60 sh -c "test \$(grep -c \"restored from generation\" mv.err) = 4" &&
	cat mv.err | ibcr_diag &&
	for r in 0 1; do
		grep "task $r on n2: restored from generation $newest " mv.err || return 1
	done &&
	for r in 2 3; do
		grep "task $r on n3: restored from generation $newest " mv.err || return 1
	done
'

test_expect_success BUILT,VERIFY_MPICH 'the restored job finishes as the uninterrupted one did, every message verified' '
	slurm_wait_job $J COMPLETED 300 &&
	cat mv.out mv.err | ibcr_diag &&
	mpi_check_out mv.out 4 $ITERS 2 &&
	grep "^mpi_verify: OK " mv.out >mv.ok &&
	test_cmp ref.ok mv.ok &&
	scancel $filler
'

test_expect_success 'slurm_stop' '
	slurm_stop
'

test_done
