#!/bin/sh
test_description='spank: a compressed generation restores after a requeue

With compression = yes in ibcrd.conf every image file is stored as
NAME.zst.  The requeue path (the SPANK restorer) decompresses them for
CRIU, as `ibcr restart` does: the job of an ordinary user is checkpointed
compressed, requeued, and goes on counting from the checkpoint, not from
1; the decompressed copy is gone once the task runs.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/spank/lib.sh"
ibcr_require ROOT SLURM CRIU USERS

plugin=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so
preload=$plugin
IBCR=$IBCR_BUILDDIR/cli/ibcr
conf=$IBCRD_RUN/ibcrd/n1/ibcrd.conf

spank_write_counter

test_expect_success 'start a 1-node cluster and its ibcrd, compressing' '
	ibcr_atexit ibcrd_stop_all &&
	IBCRD_CONF_EXTRA="compression = yes" ibcrd_start_node n1 &&
	spank_plugstack "$plugin" "$preload" &&
	SLURM_PLUGSTACK=plugstack.conf slurm_start 1
'

test_expect_success 'a job of ibcr-user1 is checkpointed with every image file compressed' '
	jobid=$(sbatch --parsable -N1 -o job.out \
		--wrap "srun --checkpoint-ib -o app.out -e app.err ./counter.sh 100") &&
	spank_wait_lines app.out 10 &&
	spank_checkpoint $jobid &&
	g=$IBCRD_RUN/ibcrd/n1/storage/local/$jobid/gen-1/task-0 &&
	ls "$g" >files &&
	grep "^core-.*\.img\.zst$" files &&
	! grep "\.img$" files
'

test_expect_success 'the job'"'"'s user restores its Slurm generation outside Slurm, stopped, for a debugger; user 2 may not' '
	{ setpriv --reuid=$IBCR_UID1 --regid=$IBCR_GID1 --init-groups -- "$IBCR" -c "$conf" \
		--socket "$IBCRD_RUN/ibcrd/n1/ibcrd.sock" restart $jobid --rank 0 --stopped \
		>rs.out 2>rs.err & } &&
	echo $! >rs.pid && ibcr_track $! &&
	ibcr_wait_for 30 grep -q "stopped: init" rs.out &&
	cat rs.out rs.err &&
	sed -n "s/.* stopped: init \([0-9]*\) application \([0-9]*\)$/\1 \2/p" rs.out >pids &&
	read INIT APP <pids && ibcr_track $INIT $APP &&
	grep "^Uid:.$IBCR_UID1.$IBCR_UID1.$IBCR_UID1.$IBCR_UID1$" /proc/$APP/status &&
	grep "^State:.T" /proc/$APP/status &&
	grep "job $jobid is a Slurm job: restored outside Slurm, not registered" rs.err &&
	ibcr_kill 9 $INIT $APP $(cat rs.pid) &&
	test_expect_code 6 setpriv --reuid=$IBCR_UID2 --regid=$IBCR_GID2 --init-groups -- "$IBCR" \
		-c "$conf" --socket "$IBCRD_RUN/ibcrd/n1/ibcrd.sock" restart $jobid 2>err2 &&
	grep "job $jobid generation 1 belongs to another user" err2
'

test_expect_success 'requeued, it restores from the compressed generation' '
	spank_requeue $jobid &&
	spank_wait_lines app.out 5 &&
	test "$(head -n 1 app.out)" -gt 10 &&
	grep "ibcr: job $jobid step 0 task 0 on n1: restored from generation 1" app.err &&
	! ls "$IBCRD_RUN/ibcrd/n1/staging/restore/" | grep "\.img$" &&
	slurm_wait_job $jobid COMPLETED 60 &&
	test "$(tail -n 1 app.out)" = 100
'

test_expect_success 'slurm_stop' '
	slurm_stop
'

test_done
