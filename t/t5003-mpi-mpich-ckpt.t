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
ibcr_require ROOT SLURM CRIU NETNS UCX MPICH SOFTIBDEV USERS
mpi_setup
spank_verbs_setup

ITERS=${T5003_ITERS:-250}

test_expect_success BUILT,VERIFY_MPICH 'a 3-node netns cluster on softib, an ibcrd per node, one storage' '
	ibcr_atexit ibcrd_stop_all &&
	mkdir -p "$IBCRD_STORAGE" &&
	spank_plugstack "$plugin" "$libibcr" &&
	SLURM_PLUGSTACK=plugstack.conf \
	SLURM_PARTITION_OPTS="PriorityTier=1 PreemptMode=REQUEUE GraceTime=30" \
	SLURM_CONF_EXTRA="PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
JobRequeue=1
PartitionName=high Nodes=ALL PriorityTier=2 PreemptMode=OFF MaxTime=INFINITE State=UP" \
		slurm_start 3 --netns --devns &&
	IBCRD_CONF_EXTRA="criu = $IBCR_CRIU
munge_socket = $IBCR_MUNGE_SOCKET
timelimit_margin = 30s" &&
	spank_start_ibcrds 3
'

test_expect_success BUILT,VERIFY_MPICH 'uninterrupted: the same job without --checkpoint-ib' '
	MPI_ITERS=$ITERS mpi_srun mpich ref &&
	grep "^mpi_verify: OK " ref.out >ref.ok
'

test_expect_success BUILT,VERIFY_MPICH 'sbatch --checkpoint-ib=5s on n1, n2: generations hold every rank'"'"'s PMI socket' '
	filler=$(sbatch --parsable -w n3 -c 2 -o /dev/null --wrap "sleep 600") &&
	slurm_wait_job $filler RUNNING 30 &&
	J=$(mpi_with mpich sbatch --parsable -N2 --ntasks-per-node=2 \
		--checkpoint-ib=5s -o job.out -e job.err \
		--wrap "srun --mpi=pmi2 -o mv.out -e mv.err $MPI_VERIFY_MPICH -n $ITERS") &&
	slurm_wait_job $J RUNNING 30 &&
	test "$(spank_field $J NodeList)" = "n[1-2]" &&
	scancel $filler &&
	spank_wait_gens $J 2 90 &&
	for p in $(pgrep -u "$IBCR_JOB_USER" -f "^$MPI_VERIFY_MPICH"); do
		tr "\0" "\n" </proc/$p/environ | grep -x MPIR_CVAR_NOLOCAL=1
	done >nolocal &&
	test "$(wc -l <nolocal)" = 4 &&
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

# newest_gen JOB: the highest generation number committed (0: none);
# gen_after JOB N: JOB has committed a generation after N
newest_gen() {
	ls -d "$store/$1"/gen-*/manifest.json 2>/dev/null | sed "s|.*/gen-\([0-9]*\)/manifest.json|\1|" |
		sort -n | tail -n 1 | grep . || echo 0
}
gen_after() {
	test "$(newest_gen "$1")" -gt "$2"
}

test_expect_success BUILT,VERIFY_MPICH 'the restored ranks are checkpointed again, PMI socket and all' '
	ibcr_wait_for 90 gen_after $J $newest &&
	again=$(newest_gen $J) &&
	test "$(grep -c "\"pmi_ino\": [1-9]" "$store/$J/gen-$again/manifest.json")" = 4 &&
	grep "\"node\": \"n3\"" "$store/$J/gen-$again/manifest.json"
'

test_expect_success BUILT,VERIFY_MPICH 'the restored job finishes as the uninterrupted one did, every message verified' '
	slurm_wait_job $J COMPLETED 300 &&
	cat mv.out mv.err | ibcr_diag &&
	mpi_check_out mv.out 4 $ITERS 2 &&
	grep "^mpi_verify: OK " mv.out >mv.ok &&
	test_cmp ref.ok mv.ok
'

test_expect_success BUILT,VERIFY_MPICH 'a drain of n3: checkpointed, requeued, restored on n1 and n2' '
	D=$(mpi_with mpich sbatch --parsable -N2 --ntasks-per-node=2 \
		--checkpoint-ib=5s -o jobd.out -e jobd.err \
		--wrap "srun --mpi=pmi2 -o md.out -e md.err $MPI_VERIFY_MPICH -n $ITERS") &&
	slurm_wait_job $D RUNNING 30 &&
	test "$(spank_field $D NodeList)" = "n[2-3]" &&
	scancel $filler &&
	spank_wait_gens $D 2 90 &&
	scontrol update nodename=n3 state=drain reason=ibcr-t5003 &&
	slurm_wait_job $D PENDING 60 &&
	grep "job $D: drain: final checkpoint, then requeue" $IBCRD_RUN/ibcrd/n2/ibcrd.log &&
	newest=$(ls -d "$store/$D"/gen-* | sed "s/.*gen-//" | sort -n | tail -n 1) &&
	mv md.out md.out.1 && mv md.err md.err.1 &&
	scontrol update jobid=$D StartTime=now &&
	slurm_wait_job $D RUNNING 60 &&
	test "$(spank_field $D NodeList)" = "n[1-2]" &&
	slurm_wait_job $D COMPLETED 300 &&
	cat md.out md.err | ibcr_diag &&
	for r in 0 1; do
		grep "task $r on n1: restored from generation $newest " md.err || return 1
	done &&
	for r in 2 3; do
		grep "task $r on n2: restored from generation $newest " md.err || return 1
	done &&
	mpi_check_out md.out 4 $ITERS 2 &&
	grep "^mpi_verify: OK " md.out >md.ok &&
	test_cmp ref.ok md.ok &&
	scontrol update nodename=n3 state=resume
'

test_expect_success BUILT,VERIFY_MPICH 'preempted (bare --checkpoint-ib): one final checkpoint, requeued, restored, same result' '
	rm -f mp.out mp.err &&
	P=$(mpi_with mpich sbatch --parsable -N2 -w n1,n2 --ntasks-per-node=2 \
		--checkpoint-ib -o jobp.out -e jobp.err \
		--wrap "srun --mpi=pmi2 -o mp.out -e mp.err $MPI_VERIFY_MPICH -n $ITERS") &&
	slurm_wait_job $P RUNNING 30 &&
	for n in n1 n2; do
		ibcr_wait_for 60 sh -c "test \$(grep -c \"job $P step 0: rank .* libibcr control connection\$\" $IBCRD_RUN/ibcrd/$n/ibcrd.log) = 2" ||
			return 1
	done &&
	H=$(sbatch --parsable -p high -w n1 -c 2 -o /dev/null --wrap "sleep 3") &&
	spank_restarts_at_least $P 1 60 &&
	test "$(spank_gens $P)" = 1 &&
	grep "job $P: preempt: final checkpoint, then requeue" $IBCRD_RUN/ibcrd/n1/ibcrd.log &&
	slurm_wait_job $P PENDING 30 &&
	mv mp.out mp.out.1 && mv mp.err mp.err.1 &&
	scontrol update jobid=$P StartTime=now &&
	slurm_wait_job $P COMPLETED 300 &&
	cat mp.out mp.err | ibcr_diag &&
	test "$(grep -c "restored from generation 1 " mp.err)" = 4 &&
	mpi_check_out mp.out 4 $ITERS 2 &&
	grep "^mpi_verify: OK " mp.out >mp.ok &&
	test_cmp ref.ok mp.ok
'

test_expect_success BUILT,VERIFY_MPICH 'time limit (-t 1): checkpointed and requeued before each limit, never TIMEOUT, same result' '
	rm -f mt.out mt.err &&
	ibcr_atexit spank_hurry_stop &&
	spank_hurry_start &&
	T=$(mpi_with mpich sbatch --parsable -N2 --ntasks-per-node=2 -t 1 \
		--checkpoint-ib --open-mode=append -o jobt.out -e jobt.err \
		--wrap "srun --mpi=pmi2 --open-mode=append -o mt.out -e mt.err $MPI_VERIFY_MPICH -n $ITERS") &&
	slurm_wait_job $T COMPLETED 600 &&
	spank_hurry_stop &&
	cat mt.err | ibcr_diag &&
	spank_restarts_at_least $T 1 1 &&
	cat $IBCRD_RUN/ibcrd/n*/ibcrd.log | grep "job $T: timelimit: final checkpoint, then requeue" &&
	test "$(grep -c "restored from generation" mt.err)" -ge 4 &&
	mpi_check_out mt.out 4 $ITERS 2 &&
	grep "^mpi_verify: OK " mt.out >mt.ok &&
	test_cmp ref.ok mt.ok
'

test_expect_success 'slurm_stop' '
	slurm_stop
'

test_done
