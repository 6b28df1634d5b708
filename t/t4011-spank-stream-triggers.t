#!/bin/sh
test_description='spank: a sequence-checked verbs stream survives preemption, its time limit and a drain

Issue 6 scenarios 2, 3 and 4 with the project'"'"'s own two-rank stream
(t/softib/verbs_stream -C, "srun -N2 -n2"): rank 0 receives and verifies
sequence-numbered, checksummed RC SENDs on 2 QPs, rank 1 sends them at a
fixed pace.  Rank 0 prints a progress line every STEP messages a QP has
verified; its output is appended across runs, and the batch script marks
each run.  On a real 3-node Slurm cluster (one network namespace and one
ibcrd per node, shared storage):
- P, on n1 and n2, is preempted by a job of a higher-priority partition
  on n1 (PreemptMode=REQUEUE, GraceTime=30): checkpointed within the
  grace time, requeued, restored;
- T, on n2 and n3 with "-t 2" and about 4 minutes of work: checkpointed
  and requeued before each limit, it completes on a later run, never
  TIMEOUT;
- D, on n1 and n3, sees n1 drained: checkpointed, requeued, restored on
  n2 and n3 (rank 0 at another address).
For each: every run after the first goes on from a checkpoint (its first
progress line is neither the first one again nor past where the previous
run got), each run counts on by one step, both ranks end with the same
totals and checksum, and the out-of-band connection was made only once.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/spank/lib.sh"
ibcr_require ROOT SLURM CRIU NETNS BUILT

spank_verbs_setup
# Below the ephemeral range and softib's endpoint ports (24576-).
PORT=$(( 12000 + ($$ + 11) % 12000 ))
RATE=200	# messages per second and QP
STEP=200	# a progress line every second of the stream
# P and D: 2 x 6000 messages, 30 s of stream; T: 2 x 48000, 4 minutes.
SHORT=6000
LONG=48000

# vs.sh PORT MSGS: the two-rank stream (see spank/lib.sh); rank 0 prints
# progress every STEP messages.  Both block on completion channels
# (-w event): three jobs share 2 cores.
spank_write_vs 1800 "-L $STEP" '-n "$2" -r '$RATE' -w event'

# submit NAME PORT MSGS SBATCH-OPTIONS...: the stream as a 2-node job with
# a bare --checkpoint-ib (no periodic checkpoints: every generation is a
# trigger's).  Each run writes "run RESTARTS" to both ranks' outputs.
submit() {
	sm_name=$1 sm_port=$2 sm_msgs=$3
	shift 3
	sbatch --parsable -N2 --checkpoint-ib --open-mode=append -o $sm_name.job \
		--export=ALL,LD_LIBRARY_PATH=$SOFTIB_LIBDIR "$@" \
		--wrap "for r in 0 1; do echo run \${SLURM_RESTART_COUNT:-0} >>$sm_name.\$r.out; done; srun -N2 -n2 --open-mode=append -o $sm_name.%t.out -e $sm_name.%t.err ./vs.sh $sm_port $sm_msgs"
}

# progress FILE MSGS: check rank 0's output over every run.  Within a run
# each QP counts on by STEP; a later run goes on from a checkpoint: its
# first line for a QP is past the first STEP (not afresh) and at most one
# STEP past where the previous run got; each QP ends at MSGS.  Prints the
# number of runs.
progress() {
	awk -v step=$STEP -v n="$2" '
		function fail(why) { print FILENAME ": line " NR ": " why > "/dev/stderr"; bad = 1; exit 1 }
		/^run / { if (NR > 1 && $2 == 0) fail("run 0 twice"); r = $2; nruns++
			  for (q in prev) fresh[q] = 1; next }
		/^progress qp / {
			q = $3; m = $5
			if (fresh[q] && r > 0) {
				if (m <= step || m > prev[q] + step)
					fail("run " r " qp " q " goes on at " m " after " prev[q])
				fresh[q] = 0; prev[q] = m; resumed++; next
			}
			if (m != prev[q] + step) fail("qp " q ": " m " after " prev[q])
			prev[q] = m; next
		}
		/^OK / { ok++; next }
		{ fail("unexpected line: " $0) }
		END {
			if (bad) exit 1
			for (q = 0; q < 2; q++)
				if (prev[q] != n) { print FILENAME ": qp " q " ends at " prev[q] ", not " n > "/dev/stderr"; exit 1 }
			if (ok != 1) { print FILENAME ": " ok + 0 " OK lines, not 1" > "/dev/stderr"; exit 1 }
			if (resumed != 2 * (nruns - 1)) { print FILENAME ": " resumed " QPs resumed in " nruns " runs" > "/dev/stderr"; exit 1 }
			print nruns
		}' "$1"
}

# finished NAME MSGS RUNS: both ranks verified 2 x MSGS messages with the
# same totals, connected once, and every later run was restored.
finished() {
	cat $1.0.err $1.1.err | ibcr_diag &&
	n=$(progress $1.0.out $2) &&
	echo "$1: $n runs: $(grep -A2 "^run" $1.0.out | tr "\n" " ")" | ibcr_diag &&
	test "$n" -ge "$3" &&
	grep "^OK msgs=$((2 * $2)) " $1.0.out | sed "s/ secs=.*//" >$1.tot0 &&
	grep "^OK msgs=$((2 * $2)) " $1.1.out | sed "s/ secs=.*//" >$1.tot1 &&
	test -s $1.tot0 && test_cmp $1.tot0 $1.tot1 &&
	test $(grep -c "out-of-band connection closed" $1.0.err) -eq 1 &&
	test $(grep -c "out-of-band connection closed" $1.1.err) -eq 1 &&
	test $(grep -c ": restored from generation" $1.0.err) -eq $((n - 1)) &&
	test $(grep -c ": restored from generation" $1.1.err) -eq $((n - 1))
}

# at NAME STEPS: until rank 0 printed progress STEPS times (60 s).
progressed() {
	# (no file yet: no line yet)
	test "$(cat $1.0.out 2>/dev/null | grep -c "^progress")" -ge "$2"
}
at() {
	ibcr_wait_for 60 progressed "$1" "$2" || { cat $1.*.err >&2; return 1; }
}

test_expect_success BUILT 'start a 3-node netns cluster with preemption, an ibcrd per node' '
	ibcr_atexit ibcrd_stop_all &&
	ibcr_atexit spank_hurry_stop &&
	mkdir -p "$IBCRD_STORAGE" &&
	spank_plugstack "$plugin" "$libibcr" &&
	SLURM_NODE_CORES=4 spank_start_preempt_cluster 3 &&
	IBCRD_CONF_EXTRA="criu = $IBCR_CRIU
munge_socket = $IBCR_MUNGE_SOCKET
timelimit_margin = 30s
slurm_poll = 500ms" &&
	spank_start_ibcrds 3 &&
	spank_hurry_start
'

test_expect_success BUILT 'time limit: T, -t 2 and 4 minutes of stream, starts on n2 and n3' '
	T=$(submit T $PORT $LONG -w n2,n3 -t 2) &&
	slurm_wait_job $T RUNNING 30
'

test_expect_success BUILT 'preempted: P checkpointed on both nodes within the grace time, requeued' '
	P=$(submit P $((PORT + 1)) $SHORT -w n1,n2) &&
	slurm_wait_job $P RUNNING 30 &&
	at P 5 &&
	t0=$(date +%s) &&
	H=$(sbatch --parsable -p high -w n1 -c 4 -o /dev/null --wrap "sleep 3") &&
	spank_restarts_at_least $P 1 40 &&
	took=$(( $(date +%s) - t0 )) &&
	echo "P preempted, checkpointed and requeued after $took s (GraceTime 30 s)" | ibcr_diag &&
	test $took -lt 30 &&
	test "$(spank_gens $P)" = 1 &&
	test "$(ibcrd_gen_trigger $P 1)" = preempt &&
	# (the member node held its SIGTERM: a decision only its log records)
	grep "job $P rank 1: SIGTERM held" $IBCRD_RUN/ibcrd/n2/ibcrd.log
'

test_expect_success BUILT 'P comes back from that checkpoint and completes: every message once, in order' '
	slurm_wait_job $P COMPLETED 180 &&
	grep "task 0 on n1: restored from generation 1 " P.0.err &&
	grep "task 1 on n2: restored from generation 1 " P.1.err &&
	finished P $SHORT 2
'

test_expect_success BUILT 'drain: D on n1 and n3, n1 drained: checkpointed, requeued, restored on n2 and n3' '
	# n2 full (T holds a core of it) so that D goes to n1 and n3
	filler=$(sbatch --parsable -w n2 -c 3 -o /dev/null --wrap "sleep 600") &&
	slurm_wait_job $filler RUNNING 30 &&
	D=$(submit D $((PORT + 2)) $SHORT) &&
	slurm_wait_job $D RUNNING 30 &&
	test "$(spank_field $D NodeList)" = "n[1,3]" &&
	scancel $filler &&
	at D 5 &&
	scontrol update nodename=n1 state=drain reason=ibcr-t4011 &&
	spank_restarts_at_least $D 1 30 &&
	test "$(ibcrd_gen_trigger $D 1)" = drain &&
	slurm_wait_job $D COMPLETED 180 &&
	scontrol update nodename=n1 state=resume &&
	test "$(spank_field $D NodeList)" = "n[2-3]" &&
	grep "task 0 on n2: restored from generation 1 " D.0.err &&
	grep "task 1 on n3: restored from generation 1 " D.1.err &&
	finished D $SHORT 2
'

test_expect_success BUILT 'time limit: T checkpointed and requeued before each limit, completes, never TIMEOUT' '
	slurm_wait_job $T COMPLETED 600 &&
	finished T $LONG 3 &&
	test "$(spank_field $T Restarts)" -ge 2 &&
	for g in $(ls -d "$store/$T"/gen-* | sed "s/.*gen-//"); do
		ibcrd_gen_trigger $T $g
	done >T.triggers &&
	grep -x timelimit T.triggers &&
	! grep "Time limit exhausted for JobId=$T\$" "$IBCR_SLURM_DIR/log/slurmctld.log"
'

test_expect_success 'stop the cluster' '
	spank_hurry_stop &&
	slurm_stop
'

test_done
