#!/bin/sh
test_description='spank: sbatch --checkpoint-ib=INTERVAL, scontrol requeue, restored

Issue 6 scenarios 1, 5 and 6 with a counting program on a real Slurm
cluster with a real ibcrd: "sbatch --checkpoint-ib=3s" makes ibcrd commit
generations periodically while the job runs; "scontrol requeue" ends it
and its next run restores the newest generation (the count goes on from
there), is checkpointed again, and completes with every number once.  A
job without the option is not touched: no preload, no PID namespace, no
ibcr message.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/spank/lib.sh"
ibcr_require ROOT SLURM CRIU

plugin=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so
# A preload that does nothing: the program uses no verbs (see t4004).
preload=$plugin
store=$IBCRD_RUN/ibcrd/n1/storage/local

spank_write_counter

test_expect_success 'start a 1-node cluster and its ibcrd' '
	ibcr_atexit ibcrd_stop_all &&
	ibcrd_start_node n1 &&
	spank_plugstack "$plugin" "$preload" &&
	SLURM_PLUGSTACK=plugstack.conf slurm_start 1
'

test_expect_success 'sbatch --checkpoint-ib=3s: generations appear while it runs' '
	jobid=$(sbatch --parsable -N1 --checkpoint-ib=3s -o job.out \
		--wrap "srun -o app.out -e app.err ./counter.sh 200") &&
	slurm_wait_job $jobid RUNNING 30 &&
	t0=$(date +%s) &&
	spank_wait_gens $jobid 2 &&
	echo "2 generations after $(( $(date +%s) - t0 )) s" | ibcr_diag &&
	test "$(spank_lines app.out)" -lt 200
'

test_expect_success 'scontrol requeue: the next run restores the newest generation' '
	newest=$(ls -d "$store/$jobid"/gen-* | sed "s/.*gen-//" | sort -n | tail -n 1) &&
	scontrol requeue $jobid &&
	slurm_wait_job $jobid PENDING 30 &&
	# The first run'"'"'s files, out of the way of the next run'"'"'s (a
	# process still ending writes on into the renamed file).
	mv app.out app.out.1 && mv app.err app.err.1 &&
	slurm_start_now $jobid &&
	slurm_wait_job $jobid RUNNING 60 &&
	spank_wait_lines app.out 3 &&
	cat app.err | ibcr_diag &&
	grep "ibcr: job $jobid step 0 task 0 on n1: restored from generation $newest " app.err &&
	first=$(head -n 1 app.out) &&
	echo "generation $newest: the count resumes at $first" | ibcr_diag &&
	test "$first" -gt 1
'

test_expect_success 'the restored task is checkpointed again' '
	before=$(spank_gens $jobid) &&
	spank_wait_gens $jobid $((before + 1))
'

test_expect_success 'it completes with every number once' '
	slurm_wait_job $jobid COMPLETED 60 &&
	seq $first 200 >expect &&
	test_cmp expect app.out
'

test_expect_success 'a job without the option: no preload, no namespace, no message' '
	cat >probe.sh <<-\EOF &&
	#!/bin/sh
	grep "^NSpid:" /proc/self/status
	echo "preload=${LD_PRELOAD-none}"
	EOF
	chmod +x probe.sh &&
	j=$(sbatch --parsable -N1 -o plain.out --wrap "srun ./probe.sh") &&
	slurm_wait_job $j COMPLETED 30 &&
	cat plain.out &&
	test "$(grep -c "^NSpid:" plain.out)" = 1 &&
	test "$(grep "^NSpid:" plain.out | wc -w)" = 2 &&
	grep "^preload=none$" plain.out &&
	! grep ibcr plain.out &&
	! test -e "$store/$j"
'

test_expect_success 'slurm_stop' '
	slurm_stop
'

test_done
