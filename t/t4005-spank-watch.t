#!/bin/sh
test_description='spank: ibcrd'"'"'s Slurm watcher against a real slurmctld

ibcrd/slurm_watch.c, driven by its test program ibcr-slurm-watch, on a
2-node cluster: a job with -t 2 gets one time-limit event when the end
time minus the margin and the last checkpoint time is reached, and is
requeued (never TIMEOUT) by slurm_requeue; a drain of the job'"'"'s node is
reported once per drain, within a poll period, with the admin'"'"'s reason,
and a drain of another node is not; a wrong node name is an error that
says what to fix.'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/spank/lib.sh"
ibcr_require ROOT SLURM WATCH

watch=$IBCR_BUILDDIR/t/spank/ibcr-slurm-watch
watch_pid=

stop_watch() {
	if test -n "$watch_pid"; then
		kill -TERM "$watch_pid" 2>/dev/null
		wait "$watch_pid" 2>/dev/null
	fi
	watch_pid=
	return 0
}

# start_watch OUT ARGS...: the driver in the background, output to OUT.
start_watch() {
	out=$1
	shift
	"$watch" "$@" >"$out" 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
	watch_pid=$!
}

# has_line FILE PATTERN: a line of FILE matches PATTERN.
has_line() {
	grep -q "$2" "$1" 2>/dev/null
}

# looks FILE: how many times the watcher (started with -L) has looked at
# Slurm so far; has_looked FILE N: N times or more.
looks() {
	sed -n "s/^[0-9]* looked \([0-9]*\)$/\1/p" "$1" | tail -n 1 | grep . || echo 0
}
has_looked() {
	test "$(looks "$1")" -ge "$2"
}

# wait_line FILE PATTERN [SECONDS]: until a line of FILE matches PATTERN
# (default 30 s); else FILE is shown.
wait_line() {
	ibcr_wait_for ${3:-30} has_line "$1" "$2" || { cat "$1" >&2; return 1; }
}

test_expect_success WATCH 'start a 2-node cluster' '
	ibcr_atexit stop_watch &&
	slurm_start 2
'

test_expect_success WATCH 'time limit: one event at end - margin - checkpoint time, then requeued' '
	jobid=$(sbatch --parsable -N1 -w n1 -t 2 -o /dev/null --wrap "sleep 300") &&
	slurm_wait_job $jobid RUNNING 30 &&
	start_watch tl.out -N n1 -m 105 -c 5 -p 250 -t requeue -R -T 60 $jobid &&
	wait_line tl.out "^[0-9]* requeued job=$jobid" 30 &&
	wait_line tl.out "state job=$jobid .*-> PENDING, restarts 1" 30 &&
	stop_watch &&
	cat tl.out | ibcr_diag &&
	test $(grep -c " timelimit job=$jobid " tl.out) = 1 &&
	left=$(sed -n "s/.* timelimit job=$jobid action=requeue left=\([0-9]*\) .*/\1/p" tl.out) &&
	echo "event with $left s left (limit 120 s, margin 105 + 5)" | ibcr_diag &&
	test "$left" -le 110 && test "$left" -ge 108 &&
	grep " timelimit job=$jobid .*margin 105 s + last checkpoint 5.0 s" tl.out &&
	slurm_wait_job $jobid PENDING 10 &&
	spank_restarts_at_least $jobid 1 10 &&
	scontrol -o show job $jobid >job.txt &&
	grep -q "Restarts=1" job.txt &&
	! grep -q TIMEOUT job.txt &&
	scancel $jobid
'

test_expect_success WATCH 'state changes are reported, first look included' '
	grep "state job=$jobid .*(first look) -> RUNNING, restarts 0" tl.out &&
	grep "state job=$jobid .*RUNNING -> .*restarts" tl.out &&
	grep "state job=$jobid .*-> PENDING, restarts 1" tl.out
'

test_expect_success WATCH 'drain: reported once per drain, with the reason; other nodes are not' '
	j2=$(sbatch --parsable -N1 -w n2 -o /dev/null --wrap "sleep 300") &&
	j1=$(sbatch --parsable -N1 -w n1 -o /dev/null --wrap "sleep 300") &&
	slurm_wait_job $j2 RUNNING 30 &&
	slurm_wait_job $j1 RUNNING 30 &&
	start_watch dr.out -N n2 -p 200 -d checkpoint -R -L -T 60 $j2 &&
	wait_line dr.out "state job=$j2 .*first look" &&
	t0=$(date +%s%N) &&
	scontrol update nodename=n2 state=drain reason=ibcr-test-1 &&
	wait_line dr.out " drain job=$j2 action=checkpoint .*DRAIN (ibcr-test-1)" 5 &&
	echo "drain seen after $(( ($(date +%s%N) - t0) / 1000000 )) ms" | ibcr_diag &&
	# (one report per drain: only a while without a second shows that, a
	# while of three more looks at Slurm)
	n=$(looks dr.out) && ibcr_wait_for 10 has_looked dr.out $((n + 3)) &&
	test $(grep -c " drain job=" dr.out) = 1 &&
	scontrol update nodename=n2 state=resume &&
	# (the watcher reports nothing on a resume: it must have looked at
	# least once between resume and the next drain; look n + 1 may have
	# begun before the resume, n + 2 began after it)
	n=$(looks dr.out) && ibcr_wait_for 10 has_looked dr.out $((n + 2)) &&
	scontrol update nodename=n2 state=drain reason=ibcr-test-2 &&
	wait_line dr.out " drain job=$j2 .*(ibcr-test-2)" 5 &&
	test $(grep -c " drain job=" dr.out) = 2 &&
	! grep requeue dr.out &&
	test "$(squeue -h -j $j2 -o %T)" = RUNNING &&
	scontrol update nodename=n2 state=resume &&
	stop_watch &&
	grep -v " looked " dr.out | ibcr_diag &&
	start_watch dr1.out -N n1 -p 200 -L -T 60 $j1 &&
	wait_line dr1.out "state job=$j1 .*first look" &&
	scontrol update nodename=n2 state=drain reason=ibcr-test-3 &&
	# (a watcher of n1 must stay quiet about n2: a while of silence, three
	# looks at Slurm after the drain)
	n=$(looks dr1.out) && ibcr_wait_for 10 has_looked dr1.out $((n + 3)) &&
	stop_watch &&
	! grep " drain " dr1.out &&
	scontrol update nodename=n2 state=resume &&
	scancel $j1 $j2
'

test_expect_success WATCH 'a cancelled job is reported as such' '
	j3=$(sbatch --parsable -N1 -o /dev/null --wrap "sleep 300") &&
	slurm_wait_job $j3 RUNNING 30 &&
	start_watch c.out -N n1 -p 200 -T 60 $j3 &&
	wait_line c.out "state job=$j3 .*first look" &&
	scancel $j3 &&
	wait_line c.out "state job=$j3 .*-> CANCELLED" 5 &&
	stop_watch
'

test_expect_success WATCH 'a node name Slurm does not know is an error saying what to fix' '
	start_watch bad.out -N nosuchnode -p 200 -T 2 $j3 &&
	wait "$watch_pid"; watch_pid= &&
	grep "poll-failed cannot read node nosuchnode from slurmctld: Slurm has no such node .*must be the Slurm node name" bad.out
'

test_expect_success WATCH 'no readable slurm.conf: refused at once, saying which file' '
	! SLURM_CONF=$(pwd)/no-such.conf "$watch" -N n1 -T 1 1 2>nc.err &&
	grep "cannot read Slurm.s configuration .*no-such.conf: No such file" nc.err
'

test_expect_success WATCH 'slurm_stop' '
	slurm_stop
'

test_done
