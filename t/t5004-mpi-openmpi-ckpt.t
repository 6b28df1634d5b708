#!/bin/sh
test_description='mpi: an Open MPI job checkpointed, requeued, restored on other nodes

Debian'"'"'s Open MPI (pml ucx on softib), 4 ranks on 2 of 3
network-namespace nodes under srun --mpi=pmix in a batch job with
--checkpoint-ib, as an ordinary user, with btl self only and PMIx'"'"'s
hash data store (no vader or PMIx shared-memory segments); mpi_verify
checks every message.  A rank'"'"'s PMIx connection, TCP to slurmstepd
on 127.0.0.1, goes through a relay in the task'"'"'s waiter, outside
the dumped tree: libibcr hands the rank one end of a unix socket pair in
place of the TCP socket, and the relay records the rank'"'"'s connect
message.  ibcrd dumps that end as external and puts the record in the
manifest; when the job comes back on other nodes, the plugin says the
connect message again to the new step'"'"'s PMIx server and hands CRIU
the end of a new relay.  The restored ranks are checkpointed again and
finish, MPI_Finalize talking PMIx to the new step, with the same result
as an uninterrupted run.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/mpi/mpi.sh
. "$SHARNESS_TEST_SRCDIR"/spank/lib.sh
ibcr_require ROOT SLURM CRIU NETNS UCX OPENMPI SOFTIBDEV USERS
mpi_setup
spank_verbs_setup

ITERS=${T5004_ITERS:-250}
OMPI_CKPT_ENV="OMPI_MCA_btl=self PMIX_MCA_gds=hash"

test_expect_success BUILT,VERIFY_OPENMPI 'a 3-node netns cluster on softib, an ibcrd per node, one storage' '
	ibcr_atexit ibcrd_stop_all &&
	mkdir -p "$IBCRD_STORAGE" &&
	spank_plugstack "$plugin" "$libibcr" &&
	SLURM_PLUGSTACK=plugstack.conf slurm_start 3 --netns --devns &&
	IBCRD_CONF_EXTRA="criu = $IBCR_CRIU
munge_socket = $IBCR_MUNGE_SOCKET" &&
	spank_start_ibcrds 3
'

test_expect_success BUILT,VERIFY_OPENMPI 'uninterrupted: the same job without --checkpoint-ib' '
	MPI_ITERS=$ITERS mpi_srun openmpi ref $OMPI_CKPT_ENV &&
	grep "^mpi_verify: OK " ref.out >ref.ok
'

test_expect_success BUILT,VERIFY_OPENMPI 'sbatch --checkpoint-ib=5s on n1, n2: generations hold every rank'"'"'s PMIx relay' '
	filler=$(sbatch --parsable -w n3 -c 2 -o /dev/null --wrap "sleep 600") &&
	slurm_wait_job $filler RUNNING 30 &&
	J=$(mpi_with openmpi $OMPI_CKPT_ENV sbatch --parsable -N2 --ntasks-per-node=2 \
		--checkpoint-ib=5s -o job.out -e job.err \
		--wrap "srun --mpi=pmix -o mv.out -e mv.err $MPI_VERIFY_OPENMPI -n $ITERS") &&
	slurm_wait_job $J RUNNING 30 &&
	test "$(spank_field $J NodeList)" = "n[1-2]" &&
	scancel $filler &&
	spank_wait_gens $J 2 90 &&
	newest=$(ls -d "$store/$J"/gen-* | sed "s/.*gen-//" | sort -n | tail -n 1) &&
	test "$(grep -c "\"pmix_ino\": [1-9]" "$store/$J/gen-$newest/manifest.json")" = 4 &&
	test "$(grep -c "\"pmix_hello\": \"[0-9a-f]*\"" "$store/$J/gen-$newest/manifest.json")" = 4
'

test_expect_success BUILT,VERIFY_OPENMPI 'scontrol requeue: the 4 ranks come back on n2 and n3' '
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

test_expect_success BUILT,VERIFY_OPENMPI 'the restored job finishes as the uninterrupted one did, every message verified' '
	slurm_wait_job $J COMPLETED 300 &&
	cat mv.out mv.err | ibcr_diag &&
	mpi_check_out mv.out 4 $ITERS 2 &&
	grep "^mpi_verify: OK " mv.out >mv.ok &&
	test_cmp ref.ok mv.ok
'

test_expect_success 'slurm_stop' '
	slurm_stop
'

test_done
