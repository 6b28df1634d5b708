#!/bin/sh
test_description='spank: a requeued job restores its image instead of starting afresh

A batch job runs "srun --checkpoint-ib counter.sh" on a real Slurm cluster
with a real ibcrd; "ibcr checkpoint" commits a generation with real CRIU;
"scontrol requeue" ends the job and queues it again.  Its next run restores
the image in the new step: the count goes on from the dumped value (not
from 1), the restored processes live in the new step'"'"'s cgroup, and the
step'"'"'s exit status is the program'"'"'s.  A damaged newest generation
falls back to the previous one, saying so in the job'"'"'s output; a step
with another number of tasks is refused with the reason, never started
afresh.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/spank/lib.sh"
ibcr_require ROOT SLURM CRIU

plugin=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so
# Not libibcr: this program uses no verbs, and a preload that does nothing
# keeps the test about the restore alone (as t4004 does).
preload=$plugin

spank_write_counter

# requeue_now JOB: requeue it and have it running again at once.
requeue_now() {
	spank_requeue "$1" && slurm_wait_job "$1" RUNNING 60
}

test_expect_success 'start a 1-node cluster and its ibcrd' '
	ibcr_atexit ibcrd_stop_all &&
	ibcrd_start_node n1 &&
	spank_plugstack "$plugin" "$preload" &&
	SLURM_PLUGSTACK=plugstack.conf slurm_start 1
'

test_expect_success 'a first run is checkpointed, then requeued' '
	echo 1 >ntasks &&
	cat >job.sh <<-\EOF &&
	#!/bin/sh
	srun -n $(cat ntasks) --checkpoint-ib -o app.out -e app.err ./counter.sh 100 7
	echo "rc=$? restarts=${SLURM_RESTART_COUNT:-0}" >>rc.out
	EOF
	jobid=$(sbatch --parsable -N1 -o job.out job.sh) &&
	spank_wait_lines app.out 10 &&
	spank_checkpoint $jobid &&
	k=$(tail -n 1 app.out) &&
	echo "checkpointed at about $k" | ibcr_diag &&
	test -d "$IBCRD_RUN/ibcrd/n1/storage/local/$jobid/gen-1/task-0" &&
	requeue_now $jobid
'

test_expect_success 'the next run restores it: the count goes on, not from 1' '
	spank_wait_lines app.out 5 &&
	first=$(head -n 1 app.out) &&
	echo "restored run starts at $first" | ibcr_diag &&
	test "$first" -gt 10 &&
	grep "ibcr: job $jobid step 0 task 0 on n1: restored from generation 1" app.err
'

test_expect_success 'the restored processes are in the new step'"'"'s cgroups' '
	step=/sys/fs/cgroup/freezer$IBCR_CGROUP_PREFIX/slurm_n1/uid_$IBCR_JOB_UID/job_$jobid/step_0 &&
	pids=$(find "$step" -name cgroup.procs -exec cat {} +) &&
	found_init= && found_app= && found_task= &&
	for p in $pids; do
		case "$(cat /proc/$p/comm 2>/dev/null)" in
		ibcr-init) found_init=$p ;;
		counter.sh) found_app=$p ;;
		ibcr-task) found_task=$p ;;
		esac
	done &&
	test -n "$found_init" && test -n "$found_app" && test -n "$found_task" &&
	grep ":freezer:.*/job_$jobid/step_0" /proc/$found_app/cgroup &&
	# Every hierarchy: where Slurm put the task process itself.
	test_cmp /proc/$found_task/cgroup /proc/$found_init/cgroup &&
	test_cmp /proc/$found_task/cgroup /proc/$found_app/cgroup &&
	# The task process holds the namespace through a fresh holder (never
	# dumped); the restored init is the holder'"'"'s child.
	holder=$(cut -d" " -f4 /proc/$found_init/stat) &&
	test "$(cat /proc/$holder/comm)" = ibcr-holder &&
	test "$(cut -d" " -f4 /proc/$holder/stat)" = "$found_task" &&
	# Restored into its own PID namespace, with the pids it had.
	grep "^NSpid:.*[[:space:]]101$" /proc/$found_init/status &&
	grep "^NSpid:.*[[:space:]]102$" /proc/$found_app/status
'

test_expect_success 'the step ends with the program'"'"'s exit status, the count complete' '
	slurm_wait_job $jobid COMPLETED 60 &&
	tail -n 1 rc.out >rc.last &&
	echo "rc=7 restarts=1" >rc.expect &&
	test_cmp rc.expect rc.last &&
	seq $first 100 >expect &&
	test_cmp expect app.out
'

test_expect_success 'a damaged newest generation: the previous one is restored, saying so' '
	rm -f app.out app.err rc.out &&
	jobid=$(sbatch --parsable -N1 -o job.out job.sh) &&
	spank_wait_lines app.out 10 &&
	spank_checkpoint $jobid &&
	k1=$(tail -n 1 app.out) &&
	spank_wait_lines app.out $((k1 + 20)) &&
	spank_checkpoint $jobid &&
	g2=$IBCRD_RUN/ibcrd/n1/storage/local/$jobid/gen-2 &&
	img=$(ls $g2/task-0/pages-*.img | head -n 1) &&
	printf "XXXXXXXX" | dd of="$img" bs=1 seek=100 conv=notrunc 2>/dev/null &&
	requeue_now $jobid &&
	spank_wait_lines app.out 5 &&
	first=$(head -n 1 app.out) &&
	echo "gen 1 near $k1, restored run starts at $first" | ibcr_diag &&
	test "$first" -le $((k1 + 15)) &&
	grep "ibcr: job $jobid step 0 task 0 on n1: generation 2 is damaged (task-0/pages-.*checksum mismatch), falling back to the previous one" app.err &&
	grep "restored from generation 1" app.err &&
	slurm_wait_job $jobid COMPLETED 60 &&
	seq $first 100 >expect &&
	test_cmp expect app.out
'

test_expect_success 'another number of tasks: refused with the reason, not started afresh' '
	rm -f app.out app.err rc.out &&
	jobid=$(sbatch --parsable -N1 -n2 -o job.out job.sh) &&
	spank_wait_lines app.out 10 &&
	spank_checkpoint $jobid &&
	echo 2 >ntasks &&
	requeue_now $jobid &&
	slurm_wait_job $jobid COMPLETED 60 &&
	cat app.err | ibcr_diag &&
	grep "ibcr: job $jobid step 0 task [01] on n1: job $jobid generation 1 holds 1 tasks and step 0 now has 2: a checkpoint restores only into the same number of tasks" app.err &&
	! test -s app.out &&
	grep "restarts=1" rc.out &&
	! grep "rc=0" rc.out
'

test_expect_success 'slurm_stop' '
	slurm_stop
'

test_done
