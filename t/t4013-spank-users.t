#!/bin/sh
test_description='spank: what a user sets in a job'"'"'s environment decides nothing for root (issue 10, 3.i)

The restart count comes from slurmctld: a fresh job of an ordinary user
that exports SLURM_RESTART_COUNT=1, with a committed generation under its
job id, starts afresh instead of restoring.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/spank/lib.sh"
ibcr_require ROOT SLURM USERS

plugin=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so
preload=$plugin
MKGEN=$IBCR_BUILDDIR/t/ibcrd/mkgen

spank_write_counter

test_expect_success 'start a 1-node cluster and its ibcrd' '
	ibcr_atexit ibcrd_stop_all &&
	ibcrd_start_node n1 &&
	spank_plugstack "$plugin" "$preload" &&
	SLURM_PLUGSTACK=plugstack.conf slurm_start 1
'

test_expect_success 'i: a fresh job whose environment says SLURM_RESTART_COUNT=1 starts afresh' '
	mkdir -m 0777 u && cp counter.sh u/ &&
	jobid=$(sbatch --parsable --hold --uid=$IBCR_UID1 --gid=$IBCR_GID1 -N1 -D "$(pwd)/u" \
		-o "$(pwd)/u/job.out" --wrap "SLURM_RESTART_COUNT=1 srun -N1 --checkpoint-ib \
		-o app.out -e app.err ./counter.sh 5") &&
	ST=$IBCRD_RUN/ibcrd/n1/storage &&
	test "$("$MKGEN" "$ST" $jobid --uid $IBCR_UID1 --gid $IBCR_GID1)" = 1 &&
	test -d "$ST/local/$jobid/gen-1" &&
	scontrol release $jobid &&
	slurm_wait_job $jobid COMPLETED 60 &&
	cat u/job.out u/app.err &&
	test "$(scontrol -o show job $jobid | sed -n "s/.*Restarts=\([0-9]*\).*/\1/p")" = 0 &&
	test "$(head -n 1 u/app.out)" = 1 &&
	test "$(tail -n 1 u/app.out)" = 5 &&
	! grep "restore" u/app.err
'

test_done
