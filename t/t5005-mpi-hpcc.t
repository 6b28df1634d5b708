#!/bin/sh
test_description='mpi: Debian'"'"'s hpcc (HPC Challenge) checkpointed, requeued, preempted and drained onto other nodes, same result

A real, unmodified MPI application from Debian'"'"'s archive: hpcc
1.5.0, linked with Open MPI, 4 ranks on 2 of 3 network-namespace nodes
under srun --mpi=pmix (pml ucx on softib) in a batch job with
--checkpoint-ib, as an ordinary user, with the environment of t5004.
hpcc checks its own results (HPL'"'"'s scaled residual, PTRANS,
RandomAccess, STREAM, FFT) and appends its report to hpccoutf.txt
(O_APPEND), which rank 0 keeps open while a section computes.  A run
without ibcr gives the reference.  One run is checkpointed while rank 0
has the report open, goes on writing, and is requeued: it comes back on
other nodes from that generation, and what it wrote after the dump is
cut off the report (CRIU records no size for an O_APPEND file: ibcrd
records it at post-dump, the restore rolls the file back), so the
restored run writes it once.  Others are preempted and drained (a final
checkpoint each) and come back on other nodes.  Each must end with the
reference'"'"'s verdicts, residuals and norms, in one complete report,
nothing written twice, nothing lost.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR"/mpi/mpi.sh
. "$SHARNESS_TEST_SRCDIR"/spank/lib.sh
. "$SHARNESS_TEST_SRCDIR"/mpi/ckpt.sh
. "$SHARNESS_TEST_SRCDIR"/mpi/hpcc.sh
ibcr_require ROOT SLURM CRIU NETNS UCX OPENMPI HPCC SOFTIBDEV USERS
mpi_setup
spank_verbs_setup

# HPL's order: the whole run lasts about a minute here (4 ranks on 2 cores)
N=${T5005_N:-1000}

# hpcc_sbatch_ NAME [SBATCH-OPTIONS...]: hpcc in folder NAME, as t5004's
# Open MPI jobs run; prints the job id
hpcc_sbatch_() {
	hpcc_sb_n=$1
	shift
	mpi_with openmpi $(mpi_ckpt_env_ openmpi) sbatch --parsable "$@" \
		-D "$PWD/$hpcc_sb_n" -o job.out -e job.err \
		--wrap "srun --mpi=pmix -o hpcc.out -e hpcc.err hpcc"
}

# hpcc_same_ NAME: NAME/hpccoutf.txt is one complete report with the
# reference's facts
hpcc_same_() {
	cat "$1"/hpcc.out "$1"/hpcc.err | ibcr_diag &&
	hpcc_complete "$1"/hpccoutf.txt &&
	hpcc_facts "$1"/hpccoutf.txt >"$1".facts &&
	test_cmp ref.facts "$1".facts
}

test_expect_success BUILT 'a 3-node netns cluster on softib, an ibcrd per node, one storage' '
	mpi_ckpt_cluster
'

test_expect_success BUILT 'uninterrupted: hpcc without --checkpoint-ib passes its own checks' '
	hpcc_input ref $N &&
	(cd ref && MPI_ITERS= mpi_with openmpi $(mpi_ckpt_env_ openmpi) \
		srun --mpi=pmix -N2 -n4 --ntasks-per-node=2 -t 10 -o hpcc.out -e hpcc.err hpcc) &&
	hpcc_complete ref/hpccoutf.txt &&
	hpcc_facts ref/hpccoutf.txt >ref.facts &&
	grep "^HPL_N=$N$" ref.facts &&
	grep "^MPIRandomAccess_Errors=0$" ref.facts &&
	cat ref.facts
'

# hpcc_past_init_ DIR: every rank is past MPI_Init: the first section,
# all-to-all updates of a table spread over the ranks, is over.  (A
# generation taken while an Open MPI rank is inside MPI_Init cannot be
# restored yet: spank-ibcr(8), LIMITATIONS.)
hpcc_past_init_() {
	grep -q "^End of MPIRandomAccess section.$" "$1"/hpccoutf.txt 2>/dev/null
}

# hpcc_at_stop_ DIR: the report as the stopped run left it (DIR.at-requeue)
# is a prefix of the final one: nothing of it written twice, nothing lost
hpcc_at_stop_() {
	cmp -n "$(stat -c %s "$1".at-requeue)" "$1".at-requeue "$1"/hpccoutf.txt &&
	test "$(stat -c %s "$1"/hpccoutf.txt)" -gt "$(stat -c %s "$1".at-requeue)"
}

# hpcc_dumped_ JOB GEN DIR: the size of DIR/hpccoutf.txt when GEN was
# dumped, as ibcrd recorded it (ibcr-files.json of rank 0's images);
# empty when rank 0 did not have it open
hpcc_dumped_() {
	sed 's/},{/\n/g' "$store/$1/gen-$2/task-0/ibcr-files.json" 2>/dev/null |
		sed -n "s|.*\"path\":\"[^\"]*/$3\\\\/hpccoutf.txt\",\"size\":\([0-9]*\).*|\1|p" | sort -n | tail -n 1
}

# hpcc_outgrown_ JOB DIR: the newest generation of JOB has the report
# open, and the report has grown since it was dumped ($newest, $dumped)
hpcc_outgrown_() {
	newest=$(mpi_ckpt_newest_gen $1) &&
	dumped=$(hpcc_dumped_ $1 $newest $2) &&
	test -n "$dumped" &&
	test "$(stat -c %s "$2"/hpccoutf.txt)" -gt "$dumped"
}

test_expect_success BUILT 'sbatch --checkpoint-ib=5s on n1, n2: a generation while rank 0 has hpccoutf.txt open, outgrown since' '
	hpcc_input hr $N &&
	filler=$(sbatch --parsable -w n3 -c 2 -o /dev/null --wrap "sleep 600") &&
	slurm_wait_job $filler RUNNING 30 &&
	J=$(hpcc_sbatch_ hr -N2 --ntasks-per-node=2 --checkpoint-ib=5s) &&
	slurm_wait_job $J RUNNING 30 &&
	test "$(spank_field $J NodeList)" = "n[1-2]" &&
	scancel $filler &&
	ibcr_wait_for 300 hpcc_past_init_ hr &&
	ibcr_wait_for 300 hpcc_outgrown_ $J hr &&
	test "$(mpi_ckpt_connections_ openmpi $J $newest)" = 4
'

test_expect_success BUILT 'scontrol requeue: back on n2, n3 from the newest generation, what was written since rolled back, same result' '
	filler=$(sbatch --parsable -w n1 -c 2 -o /dev/null --wrap "sleep 600") &&
	scontrol requeue $J &&
	slurm_wait_job $J PENDING 30 &&
	slurm_wait_job $filler RUNNING 30 &&
	cp hr/hpccoutf.txt hr.at-requeue &&
	mv hr/hpcc.out hr/hpcc.out.1 && mv hr/hpcc.err hr/hpcc.err.1 &&
	newest=$(mpi_ckpt_newest_gen $J) &&
	dumped=$(hpcc_dumped_ $J $newest hr) &&
	slurm_start_now $J &&
	slurm_wait_job $J COMPLETED 600 &&
	test "$(spank_field $J NodeList)" = "n[2-3]" &&
	mpi_ckpt_restored_on_ hr/hpcc.err $newest n2 0 1 &&
	mpi_ckpt_restored_on_ hr/hpcc.err $newest n3 2 3 &&
	was=$(stat -c %s hr.at-requeue) &&
	if test -n "$dumped" && test "$was" -gt "$dumped"; then
		# the usual case: hpcc_outgrown_ held just before the requeue
		grep -x "ibcr: job $J step 0 task 0 on n2: restored from generation $newest (init pid [0-9]*); output files rolled back to the dump: .*/hr/hpccoutf.txt from $was to $dumped bytes" hr/hpcc.err &&
		test "$(grep -c "rolled back" hr/hpcc.err)" = 1 &&
		cmp -n "$dumped" hr.at-requeue hr/hpccoutf.txt
	else
		# a newer generation came between the check and the requeue
		echo "generation $newest: report not outgrown ($dumped of $was bytes)" &&
		! grep "rolled back" hr/hpcc.err &&
		hpcc_at_stop_ hr
	fi &&
	hpcc_same_ hr
'

test_expect_success BUILT 'sbatch --checkpoint-ib on n2, n3, preempted while rank 0 writes its report: restored on n1, n3, same result' '
	hpcc_input hp $N &&
	P=$(hpcc_sbatch_ hp -N2 --ntasks-per-node=2 --checkpoint-ib) &&
	slurm_wait_job $P RUNNING 30 &&
	test "$(spank_field $P NodeList)" = "n[2-3]" &&
	ibcr_wait_for 300 hpcc_past_init_ hp &&
	ibcr_wait_for 120 hpcc_writing &&
	H=$(sbatch --parsable -p high -w n2 -c 2 -o /dev/null --wrap "sleep 600") &&
	spank_restarts_at_least $P 1 90 &&
	grep "job $P: preempt: final checkpoint, then requeue" $IBCRD_RUN/ibcrd/n2/ibcrd.log &&
	slurm_wait_job $P PENDING 60 &&
	newest=$(mpi_ckpt_newest_gen $P) &&
	test "$(mpi_ckpt_connections_ openmpi $P $newest)" = 4 &&
	cp hp/hpccoutf.txt hp.at-requeue &&
	mv hp/hpcc.out hp/hpcc.out.1 && mv hp/hpcc.err hp/hpcc.err.1 &&
	scancel $filler &&
	slurm_start_now $P &&
	slurm_wait_job $P COMPLETED 600 &&
	test "$(spank_field $P NodeList)" = "n[1,3]" &&
	mpi_ckpt_restored_on_ hp/hpcc.err $newest n1 0 1 &&
	mpi_ckpt_restored_on_ hp/hpcc.err $newest n3 2 3 &&
	hpcc_at_stop_ hp &&
	hpcc_same_ hp
'

test_expect_success BUILT 'a drain of n3 under hpcc on n1, n3: final checkpoint, restored on n1, n2, same result' '
	hpcc_input hd $N &&
	D=$(hpcc_sbatch_ hd -N2 --ntasks-per-node=2 --checkpoint-ib) &&
	slurm_wait_job $D RUNNING 30 &&
	test "$(spank_field $D NodeList)" = "n[1,3]" &&
	scancel $H &&
	ibcr_wait_for 300 hpcc_past_init_ hd &&
	ibcr_wait_for 120 hpcc_writing &&
	scontrol update nodename=n3 state=drain reason=ibcr-hpcc &&
	slurm_wait_job $D PENDING 60 &&
	grep "job $D: drain: final checkpoint, then requeue" $IBCRD_RUN/ibcrd/n1/ibcrd.log &&
	newest=$(mpi_ckpt_newest_gen $D) &&
	cp hd/hpccoutf.txt hd.at-requeue &&
	mv hd/hpcc.out hd/hpcc.out.1 && mv hd/hpcc.err hd/hpcc.err.1 &&
	slurm_start_now $D &&
	slurm_wait_job $D COMPLETED 600 &&
	test "$(spank_field $D NodeList)" = "n[1-2]" &&
	mpi_ckpt_restored_on_ hd/hpcc.err $newest n1 0 1 &&
	mpi_ckpt_restored_on_ hd/hpcc.err $newest n2 2 3 &&
	hpcc_at_stop_ hd &&
	hpcc_same_ hd &&
	scontrol update nodename=n3 state=resume
'

# No job left in the queue, none completing: slurmd then shuts down at
# once (one still sending its epilog result retries for seconds).
hpcc_idle_() {
	test -z "$(squeue -h -o %A 2>/dev/null)"
}

test_expect_success 'slurm_stop' '
	ibcr_wait_for 60 hpcc_idle_;
	slurm_stop
'

test_done
