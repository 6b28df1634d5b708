#!/bin/sh
test_description='harness: a real 3-node Slurm cluster on loopback

munged, slurmctld and three slurmd (multiple-slurmd, one port each) with all
state in the trash directory; jobs run, and teardown leaves nothing behind.'

. $(dirname $0)/sharness.sh
ibcr_require ROOT SLURM

# test_pids_gone PID...: none of these processes exists, or say which does.
test_pids_gone() {
	for p; do
		if test -e /proc/$p; then
			echo "pid $p still exists: $(ps -o args= -p $p)"
			return 1
		fi
	done
}

# test_file_not_empty_both A B: both files exist and are not empty.
test_file_not_empty_both() {
	test -s "$1" && test -s "$2"
}

test_expect_success 'slurm_start 3 brings up three idle nodes' '
	SLURM_CONF_EXTRA="PartitionName=high Nodes=n2,n3 PriorityTier=2" \
	SLURM_PARTITION_OPTS="PriorityTier=1" \
		slurm_start 3 &&
	sinfo -h -N -o "%N %t" | sort -u >nodes &&
	printf "n1 idle\nn2 idle\nn3 idle\n" >expect &&
	test_cmp expect nodes
'

test_expect_success 'SLURM_CONF_EXTRA and SLURM_PARTITION_OPTS reach slurm.conf' '
	scontrol show partition high | grep "Nodes=n\[2-3\]" &&
	scontrol show partition high | grep "PriorityTier=2" &&
	scontrol show partition debug | grep "PriorityTier=1" &&
	scontrol show partition debug | grep "Default=YES"
'

test_expect_success 'srun -N3 runs one task on each of three nodes' '
	srun -N3 sh -c "echo \$SLURMD_NODENAME" | sort >ran &&
	printf "n1\nn2\nn3\n" >expect &&
	test_cmp expect ran
'

test_expect_success 'tasks live in this cluster own cgroups, not the shared slurm_nX' '
	srun -N3 sh -c "grep :freezer: /proc/self/cgroup" | sort >cg &&
	cat cg &&
	test $(grep -c ":freezer:$IBCR_CGROUP_PREFIX/slurm_n[123]/uid_$IBCR_JOB_UID/job_[0-9]*/step_0\$" cg) -eq 3
'

test_expect_success 'an sbatch job completes and its output is all there' '
	cat >job.sh <<-\EOF &&
	#!/bin/sh
	echo "begin $SLURM_JOB_ID"
	srun -N2 sh -c "seq 1 5000 | cksum" | sort -u
	echo "end $SLURM_JOB_ID"
	EOF
	jobid=$(sbatch --parsable -N2 -o job.out job.sh) &&
	slurm_wait_job "$jobid" COMPLETED 30 &&
	{
		echo "begin $jobid" &&
		seq 1 5000 | cksum &&
		echo "end $jobid"
	} >expect &&
	test_cmp expect job.out
'

test_expect_success 'slurm_wait_job fails fast when a job ends in another state' '
	# COMPLETED, not RUNNING: a loaded machine may catch the job while
	# it runs for an instant, but it can never complete.
	jobid=$(sbatch --parsable -o /dev/null --wrap "exit 3") &&
	start=$(date +%s) &&
	test_must_fail slurm_wait_job "$jobid" COMPLETED 30 2>err &&
	test $(( $(date +%s) - start )) -lt 25 &&
	grep "ended FAILED, expected COMPLETED" err
'

test_expect_success 'a job still running when the test ends' '
	jobid=$(sbatch --parsable -N2 -o /dev/null \
		--wrap "srun -N2 sh -c \"echo \\\$\\\$ >task.\\\$SLURMD_NODENAME; exec sleep 600\"") &&
	slurm_wait_job "$jobid" RUNNING 30 &&
	ibcr_wait_for 10 test_file_not_empty_both task.n1 task.n2 &&
	kill -0 $(cat task.n1) $(cat task.n2)
'

test_expect_success 'slurm_stop leaves no process, cgroup, mount or link behind' '
	pids="$(slurm_pids) $(cat task.n1) $(cat task.n2)" &&
	test $(echo $pids | wc -w) -eq 7 &&
	dir=$IBCR_SLURM_DIR &&
	slurm_stop &&
	test_pids_gone $pids &&
	! ps -eo args= | grep -F "$dir" | grep -v "^grep " &&
	test -z "$(ls -d /sys/fs/cgroup/*$IBCR_CGROUP_PREFIX 2>/dev/null)" &&
	test -z "$(grep -F "${dir%/slurm}" /proc/self/mountinfo)" &&
	test ! -e "$dir" &&
	test -s slurm/log/slurmctld.log
'

test_expect_success 'slurm_stop is idempotent' '
	slurm_stop
'

# A job cancelled just before slurm_stop is COMPLETING, neither running nor
# gone: slurm_stop must end and wait for it too, or its slurmd, telling a
# stopped slurmctld that the job ended, outlives the shutdown wait and
# slurm_stop fails.
test_expect_success 'slurm_stop also ends a job cancelled just before (COMPLETING)' '
	slurm_start 1 &&
	jobid=$(sbatch --parsable -o /dev/null \
		--wrap "trap \"\" TERM; echo \$\$ >task.c; exec sleep 600") &&
	slurm_wait_job "$jobid" RUNNING 30 &&
	ibcr_wait_for 10 test -s task.c &&
	pids="$(slurm_pids) $(cat task.c)" &&
	scancel "$jobid" &&
	ibcr_wait_for 10 sh -c "squeue -h -t completing -o %A | grep -qx $jobid" &&
	slurm_stop &&
	test_pids_gone $pids
'

test_done
