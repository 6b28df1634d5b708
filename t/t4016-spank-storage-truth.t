#!/bin/sh
test_description='spank: a requeued job never starts afresh past its checkpoints

ibcrd is the one authority on where a job'"'"'s generations live.  When the
plugin'"'"'s view of storage (its plugstack.conf conf=) differs from ibcrd'"'"'s,
a requeued job whose plugin finds no checkpoint would start from zero and
its retention would then delete the generations it missed.  Instead the
plugin tells ibcrd where it looked, ibcrd finds the generations in its own
storage and refuses: the task fails with a message naming both places,
and every generation stays.  With the configurations agreeing, the same
job restores.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/spank/lib.sh"
ibcr_require ROOT SLURM CRIU USERS

plugin=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so
preload=$plugin

spank_write_counter


gens() {
	ls -d "$IBCRD_RUN/ibcrd/n1/storage/local/$1"/gen-* 2>/dev/null | wc -l
}

test_expect_success 'start a 1-node cluster; the plugin reads another ibcrd.conf' '
	ibcr_atexit ibcrd_stop_all &&
	ibcrd_start_node n1 &&
	# The slip: a conf= that names storage somewhere else.
	mkdir -p "$IBCRD_RUN/other" &&
	{
		echo "storage = $IBCRD_RUN/other/storage"
		echo "staging = $IBCRD_RUN/ibcrd/n1/staging"
	} >"$IBCRD_RUN/other/ibcrd.conf" &&
	echo "required $plugin socket=$IBCRD_RUN/ibcrd/%n/ibcrd.sock libibcr=$preload init=$IBCR_BUILDDIR/init/ibcr-init conf=$IBCRD_RUN/other/ibcrd.conf" >plugstack.conf &&
	SLURM_PLUGSTACK=plugstack.conf slurm_start 1
'

test_expect_success 'a job with two committed generations, requeued: refused, not started afresh' '
	jobid=$(sbatch --parsable -N1 -o job.out \
		--wrap "srun --checkpoint-ib -o app.out -e app.err ./counter.sh 200") &&
	spank_wait_lines app.out 10 &&
	spank_checkpoint $jobid &&
	spank_checkpoint $jobid &&
	test $(gens $jobid) = 2 &&
	spank_requeue $jobid &&
	slurm_wait_job $jobid FAILED 60 &&
	cat app.err | ibcr_diag &&
	grep "ibcr: job $jobid step 0 task 0 on n1: ibcrd refused the register request: job $jobid was requeued and has 2 committed generations (newest 2) in $IBCRD_RUN/ibcrd/n1/storage/local, but the SPANK plugin looked in $IBCRD_RUN/other/storage/local and found none" app.err &&
	grep "the task is not started" app.err &&
	! test -s app.out &&
	test $(gens $jobid) = 2
'

test_expect_success 'the configurations agreeing again, the same job restores its newest generation' '
	spank_plugstack "$plugin" "$preload" &&
	# The refused run wholly gone from the node first.
	{ ibcr_wait_for 60 sh -c "sinfo -h -N -o %t | grep -qx idle" ||
		{ sinfo -N -o "%N %t %E" >&2; false; }; } &&
	scontrol requeue $jobid &&
	ibcr_wait_for 30 sh -c "scontrol -o show job $jobid | grep -q JobState=PENDING" &&
	rm -f app.out app.err &&
	# Not "scontrol update StartTime=now": the refused run ended an
	# instant ago, and a run started within that second is killed before
	# it starts ("Job credential revoked", see slurm_start_now).
	slurm_start_now $jobid &&
	{ spank_wait_lines app.out 5 ||
		{ scontrol show job $jobid >&2; cat app.err job.out >&2; false; }; } &&
	test "$(head -n 1 app.out)" -gt 10 &&
	grep "restored from generation 2" app.err &&
	scancel $jobid &&
	slurm_wait_job $jobid CANCELLED 60
'

test_expect_success 'slurm_stop' '
	slurm_stop
'

test_done
