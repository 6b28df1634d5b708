#!/bin/sh
test_description='spank: preemption, time limit and drain checkpoint and requeue a job

Issue 6 scenarios 2 and 4 with a counting program on a real 3-node
Slurm cluster (one network namespace per node) with a real ibcrd per
node, inside that node'"'"'s namespaces, all sharing one storage:
- preempted by a job of a higher-priority partition (partition_prio,
  PreemptMode=REQUEUE, GraceTime=30): the task'"'"'s SIGTERM is held
  while ibcrd commits a final checkpoint, well within the grace time;
  the job is requeued and its next run goes on from that checkpoint;
- its node drained: checkpointed, requeued, restored on another node (at
  another address), completes;
- drained while checkpoints are due every second and the task ignores
  SIGTERM (it lives 5 s past the requeue): no periodic generation follows
  the final one, and the next run comes back from the drain'"'"'s;
- scancel, with on_cancel = checkpoint: a final checkpoint, no requeue.
Every run appends to the output; the check splits it into runs: each run
counts on by one, each later run starts where a checkpoint was (never at
1 again, never past where the previous run got), the last ends at N.
The time limit (scenario 3) is t4011'"'"'s, with a two-rank verbs stream.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/spank/lib.sh"
ibcr_require ROOT SLURM CRIU NETNS

plugin=$IBCR_BUILDDIR/spank/.libs/spank_ibcr.so
# The program uses no verbs: a preload that does nothing (as t4004).
preload=$plugin
IBCRD_STORAGE=$IBCRD_RUN/storage
store=$IBCRD_STORAGE/local

spank_write_counter

# runs FILE N: check FILE, the output of every run of a job; the batch
# script writes "run $SLURM_RESTART_COUNT" before each srun.  Within a run
# the count goes on by one; a later run goes on from a checkpoint: above
# 1 (not afresh) and at most one past where the previous run got; the
# last run ends at N.  Prints the number of runs.
runs() {
	awk -v n="$2" '
		function fail(why) { print FILENAME ": line " NR ": " why > "/dev/stderr"; bad = 1; exit 1 }
		/^run / { if (NR > 1 && $2 == 0) fail("run 0 twice"); r = $2; fresh = 1; nruns++; next }
		fresh && r > 0 {
			if ($1 <= 1 || $1 > prev + 1) fail("run " r " starts at " $1 " after " prev)
			fresh = 0; prev = $1; next
		}
		{ if ($1 != prev + 1) fail($1 " after " prev); fresh = 0; prev = $1 }
		END {
			if (bad) exit 1
			if (prev != n) { print FILENAME ": ends at " prev ", not " n > "/dev/stderr"; exit 1 }
			print nruns
		}' "$1"
}

# submit NAME N SBATCH-OPTIONS...: a job counting to N with the option
# (with $prog, ./counter.sh unless set, as the task).
submit() {
	sm_name=$1 sm_n=$2
	shift 2
	sbatch --parsable --checkpoint-ib --open-mode=append -o $sm_name.job "$@" \
		--wrap "echo run \${SLURM_RESTART_COUNT:-0} >>$sm_name.out; srun --open-mode=append -o $sm_name.out -e $sm_name.err ${prog:-./counter.sh} $sm_n"
}

# stubborn.sh N: counter.sh with SIGTERM ignored, as an application that
# takes its time on SIGTERM: it runs on until Slurm'"'"'s SIGKILL, KillWait
# (5 s) after the SIGTERM of a requeue.
printf '#!/bin/sh\ntrap "" TERM\nexec ./counter.sh "$@"\n' >stubborn.sh &&
chmod +x stubborn.sh

test_expect_success 'ibcrd.conf: a bad trigger policy is refused, naming the key and the choices' '
	printf "on_preempt = later\n" >bad1.conf &&
	test_expect_code 2 "$IBCRD" -F -c "$(pwd)/bad1.conf" 2>err1 &&
	grep "bad1.conf:1: on_preempt = later: give requeue (checkpoint, then requeue the job), checkpoint (checkpoint only) or nothing" err1 &&
	printf "on_cancel = requeue\n" >bad2.conf &&
	test_expect_code 2 "$IBCRD" -F -c "$(pwd)/bad2.conf" 2>err2 &&
	grep "bad2.conf:1: on_cancel = requeue: a cancelled job is never requeued; give checkpoint or nothing" err2 &&
	printf "timelimit_margin = soon\n" >bad3.conf &&
	test_expect_code 2 "$IBCRD" -F -c "$(pwd)/bad3.conf" 2>err3 &&
	grep "bad3.conf:1: timelimit_margin = soon: not a duration" err3
'

test_expect_success 'start a 3-node netns cluster with preemption, an ibcrd per node' '
	ibcr_atexit ibcrd_stop_all &&
	ibcr_atexit spank_hurry_stop &&
	mkdir -p "$IBCRD_STORAGE" &&
	spank_plugstack "$plugin" "$preload" &&
	spank_start_preempt_cluster 3 &&
	IBCRD_CONF_EXTRA="timelimit_margin = 30s
slurm_poll = 500ms
on_cancel = checkpoint
retention = 1000" &&
	spank_start_ibcrds 3 &&
	spank_hurry_start
'

test_expect_success 'preempted: SIGTERM held, checkpointed within the grace time, requeued' '
	L=$(submit L 400 -w n1 -c 2) &&
	slurm_wait_job $L RUNNING 30 &&
	spank_wait_lines L.out 20 &&
	t0=$(date +%s) &&
	H=$(sbatch --parsable -p high -w n1 -c 2 -o /dev/null --wrap "sleep 3") &&
	spank_restarts_at_least $L 1 40 &&
	took=$(( $(date +%s) - t0 )) &&
	echo "preempted, checkpointed and requeued after $took s (GraceTime 30 s)" | ibcr_diag &&
	test $took -lt 30 &&
	test "$(spank_gens $L)" -ge 1 &&
	test "$(ibcrd_gen_trigger $L 1)" = preempt &&
	# The order of the daemon'"'"'s decisions (SIGTERM held, the job
	# requeued, then SIGTERM let through) is a sequence in time that no
	# status shows afterwards: its log is the record of it.
	log=$IBCRD_RUN/ibcrd/n1/ibcrd.log &&
	grep "job $L rank 0: SIGTERM held" $log &&
	grep "job $L rank 0: SIGTERM goes to the task (requeued)" $log &&
	# The order: the task keeps running until the job is requeued.
	sed -n "/SIGTERM held/,/SIGTERM goes/p" $log | grep "job $L: requeued"
'

test_expect_success 'the preempted job comes back from its checkpoint and completes' '
	slurm_wait_job $L COMPLETED 120 &&
	cat L.err | ibcr_diag &&
	grep "restored from generation" L.err &&
	n=$(runs L.out 400) &&
	echo "job $L: $n runs: $(grep -A1 "^run" L.out | tr "\n" " ")" | ibcr_diag &&
	test "$n" = 2
'

test_expect_success 'drain: its node drained, the job is checkpointed, requeued, restored on another node' '
	filler=$(sbatch --parsable -w n1 -c 2 -o /dev/null --wrap "sleep 600") &&
	slurm_wait_job $filler RUNNING 30 &&
	D=$(submit D 300 -x n3 -c 2) &&
	slurm_wait_job $D RUNNING 30 &&
	test "$(spank_field $D NodeList)" = n2 &&
	scancel $filler &&
	spank_wait_lines D.out 20 &&
	scontrol update nodename=n2 state=drain reason=ibcr-t4008 &&
	spank_restarts_at_least $D 1 30 &&
	test "$(ibcrd_gen_trigger $D 1)" = drain &&
	slurm_wait_job $D COMPLETED 120 &&
	scontrol update nodename=n2 state=resume &&
	cat D.err | ibcr_diag &&
	grep "ibcr: job $D step 0 task 0 on n1: restored from generation" D.err &&
	test "$(spank_field $D NodeList)" = n1 &&
	n=$(runs D.out 300) &&
	echo "job $D: $n runs: $(grep -A1 "^run" D.out | tr "\n" " ")" | ibcr_diag &&
	test "$n" = 2
'

test_expect_success 'drain under checkpoints every 1 s of a task slow to end: no periodic one after the final one, the job comes back from it' '
	filler=$(sbatch --parsable -w n1 -c 2 -o /dev/null --wrap "sleep 600") &&
	slurm_wait_job $filler RUNNING 30 &&
	E=$(prog=./stubborn.sh submit E 300 -x n3 -c 2 --checkpoint-ib=1s) &&
	slurm_wait_job $E RUNNING 30 &&
	test "$(spank_field $E NodeList)" = n2 &&
	scancel $filler &&
	spank_wait_gens $E 2 60 &&
	scontrol update nodename=n2 state=drain reason=ibcr-t4008 &&
	spank_restarts_at_least $E 1 30 &&
	slurm_wait_job $E RUNNING 60 &&
	scontrol update nodename=n2 state=resume &&
	slurm_wait_job $E COMPLETED 120 &&
	cat E.err | ibcr_diag &&
	# Periodic generations are due every second, and the task lives on
	# for 5 s after the requeue: the run comes back from the drain'"'"'s
	# generation only if no periodic one followed it.  (The retention of
	# 1000 keeps every generation'"'"'s manifest for this.)
	g=$(sed -n "s/.*restored from generation \([0-9]*\).*/\1/p" E.err | head -n 1) &&
	test -n "$g" &&
	echo "job $E restored from generation $g: trigger $(ibcrd_gen_trigger $E $g)" | ibcr_diag &&
	test "$(ibcrd_gen_trigger $E $g)" = drain &&
	n=$(runs E.out 300) &&
	test "$n" = 2
'

test_expect_success 'scancel with on_cancel = checkpoint: a final checkpoint, then the job ends CANCELLED' '
	C=$(submit C 3000 -w n2 -c 2) &&
	slurm_wait_job $C RUNNING 30 &&
	spank_wait_lines C.out 20 &&
	scancel $C &&
	slurm_wait_job $C CANCELLED 60 &&
	# (SIGTERM held, then let through: the sequence is in the log only)
	log=$IBCRD_RUN/ibcrd/n2/ibcrd.log &&
	ibcr_wait_for 30 grep -q "job $C rank 0: SIGTERM goes to the task" $log &&
	grep "job $C rank 0: SIGTERM held" $log &&
	test "$(spank_gens $C)" = 1 &&
	test "$(ibcrd_gen_trigger $C 1)" = cancel &&
	test "$(spank_field $C Restarts)" = 0 &&
	# the checkpoint holds where the counter was when it was cancelled
	test -s "$store/$C/gen-1/manifest.json"
'

test_expect_success 'slurm_stop' '
	spank_hurry_stop &&
	slurm_stop
'

test_done
