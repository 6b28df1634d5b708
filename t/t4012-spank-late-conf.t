#!/bin/sh
test_description='spank: ibcrd that came up before Slurm was configured watches it later

On a node, ibcrd may start before slurm.conf is in place (a boot order,
a configuration pushed later).  Its Slurm watcher then cannot start: the
jobs run, but no time limit, drain or preemption would checkpoint them.
ibcrd says so in its log and its status, and tries again when a job registers, 10 s
after the failure at the earliest; it then watches every job already
registered too.  Here a job registers while the configuration is missing;
once it appears and a second job registers, the first job is watched: a
drain of its node checkpoints and requeues it, and it comes back from
that checkpoint.  A second job on the node is checkpointed by the same
drain: both dumps commit.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/spank/lib.sh"
ibcr_require ROOT SLURM CRIU

plugin=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so
IBCRD_STORAGE=$IBCRD_RUN/storage
store=$IBCRD_STORAGE/local

spank_write_counter

# What n1's ibcrd says of its Slurm watcher, in its status:
#   slurm_off WHY       not watching, because of WHY (a pattern)
#   slurm_watching      watching, as node n1
#   slurm_sees JOB STATE
#                       the watcher's last look found JOB in STATE
slurm_off() {
	ibcrd_node_status n1 |
		grep -q "\"slurm\":{\"watching\":false,\"node\":\"n1\",\"error\":\"[^\"]*$1"
}
slurm_watching() {
	ibcrd_node_status n1 | grep -q "\"slurm\":{\"watching\":true,\"node\":\"n1\""
}
slurm_sees() {
	ibcrd_node_status n1 | grep -q "{\"job\":$1,\"state\":\"$2\"}"
}
# gen_by JOB GEN TRIGGER: generation GEN of JOB committed, started by TRIGGER
gen_by() {
	test "$(ibcrd_gen_trigger $1 $2 2>/dev/null)" = "$3"
}

test_expect_success 'a 1-node cluster; ibcrd starts where slurm.conf is not yet' '
	ibcr_atexit ibcrd_stop_all &&
	mkdir -p "$IBCRD_STORAGE" &&
	spank_plugstack "$plugin" "$plugin" &&
	SLURM_PLUGSTACK=plugstack.conf SLURM_CONF_EXTRA="JobRequeue=1" slurm_start 1 &&
	real_conf=$SLURM_CONF &&
	SLURM_CONF=$(pwd)/late.conf &&
	IBCRD_CONF_EXTRA="criu = $IBCR_CRIU
slurm_poll = 500ms" &&
	ibcrd_start_node n1
	rc=$?
	SLURM_CONF=$real_conf
	return $rc
'

test_expect_success 'a job registers: ibcrd says its Slurm triggers are off, and why' '
	A=$(sbatch --parsable --checkpoint-ib -o A.job --open-mode=append \
		--wrap "srun --open-mode=append -o A.out -e A.err ./counter.sh 600") &&
	slurm_wait_job $A RUNNING 30 &&
	ibcr_wait_for 30 ibcrd_node_has_rank n1 $A 0 &&
	ibcr_wait_for 30 slurm_off "late.conf: No such file" &&
	ibcr_now_cs >off.cs &&
	! slurm_watching
'

test_expect_success 'slurm.conf appears; the next registration starts the watcher, for both jobs' '
	ln -s "$SLURM_CONF" late.conf &&
	# ibcrd tries the watcher again 10 s after it failed at the earliest
	# (its log says so): a rule of time, so wait out what is left of it.
	left=$(( $(cat off.cs) + 1050 - $(ibcr_now_cs) )) &&
	{ test $left -le 0 || sleep $(printf "%d.%02d" $((left / 100)) $((left % 100))); } &&
	B=$(sbatch --parsable --checkpoint-ib -o /dev/null --wrap "srun sleep 60") &&
	ibcr_wait_for 30 ibcrd_node_has_rank n1 $B 0 &&
	ibcr_wait_for 30 slurm_watching &&
	ibcr_wait_for 30 slurm_sees $A RUNNING &&
	ibcr_wait_for 30 slurm_sees $B RUNNING
'

test_expect_success 'the first job is now protected: drained, it is checkpointed, requeued, restored' '
	spank_wait_lines A.out 20 &&
	scontrol update nodename=n1 state=drain reason=ibcr-t4012 &&
	ibcr_wait_for 30 gen_by $A 1 drain &&
	# B, still running on n1, is checkpointed by the same drain: two
	# dumps on one node at once, one after the other (ibcrd serialises
	# them; two concurrent CRIU dumps were seen to fail one: an aborted
	# generation 1 would leave no gen-1, its number is not given again)
	ibcr_wait_for 30 gen_by $B 1 drain &&
	spank_restarts_at_least $A 1 30 &&
	slurm_wait_job $A PENDING 30 &&
	scontrol update nodename=n1 state=resume &&
	slurm_start_now $A &&
	slurm_wait_job $A COMPLETED 120 &&
	cat A.err | ibcr_diag &&
	grep "ibcr: job $A step 0 task 0 on n1: restored from generation 1" A.err &&
	# the count went on from the checkpoint: 600 at the end, and the
	# second run did not start at 1 again
	test "$(tail -n 1 A.out)" = 600 &&
	test $(grep -cx 1 A.out) = 1
'

test_expect_success 'stop the cluster' '
	slurm_stop
'

test_done
