#!/bin/sh

test_description='periodic generations, retention, restart --stopped under gdb

"ibcr run --interval 1s" makes ibcrd take generations by itself while the
program runs; retention keeps the newest K.  "ibcr restart --stopped"
leaves the restored program stopped and prints its pids; gdb attaches to
it and detaches; after SIGCONT the program goes on and finishes correctly.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT CRIU
ibcr_want GDB

ibcrd_use_build

# Highest committed generation (0 when none).
t7_last() {
	set -- $(ibcrd_gens "$1" 2>/dev/null)
	eval "echo \${$#:-0}"
}

# t7_committed_at_least JOB N: JOB's newest committed generation is N or more.
t7_committed_at_least() {
	test "$(t7_last "$1")" -ge "$2"
}

# t7_restart_stopped: "ibcr restart --stopped" printed the stopped pids.
t7_restart_stopped() {
	grep -q "stopped: init" rs.out
}

# t7_running PID: PID is neither stopped (T) nor traced (t).
t7_running() {
	test "$(ibcrd_state "$1")" != T && test "$(ibcrd_state "$1")" != t
}

# t7_end_job: teardown.  A restored tree runs detached from "ibcr restart"
# (tracked): when a test fails before its pids are known, only ibcrd
# knows them, so ask it before it stops (ibcr_atexit runs this first).
t7_end_job() {
	for t7_p in $(ibcrd_task_fields per pid 2>/dev/null) $(ibcrd_task_fields per app_pid 2>/dev/null); do
		kill -KILL "$t7_p" 2>/dev/null
	done
	return 0
}

test_expect_success 'setup: ibcrd, retention 2' '
	ibcrd_setup d "criu = $IBCR_CRIU" "peer_port = 0" "retention = 2" &&
	ibcrd_start d &&
	ibcr_atexit t7_end_job &&
	IBCR_SOCKET=$(ibcrd_sock d) && export IBCR_SOCKET
'

test_expect_success '--interval 1s: generations come by themselves; retention keeps 2' '
	{ "$IBCR" run --name per --interval 1s -- "$PATTERN" --mib 8 >per.out 2>per.err & } &&
	echo $! >per.run && ibcr_track $! &&
	{ ibcr_wait_for 60 t7_committed_at_least per 4 || { ibcrd_gens per; false; }; } &&
	gens=$(ibcrd_gens per) && echo "$gens" &&
	test $(echo $gens | wc -w) -eq 2 &&
	"$IBCR" list per | grep -c periodic >n && test "$(cat n)" -eq 2 &&
	"$IBCR" status per --json | grep "\"interval_ms\":1000" &&
	"$IBCR" verify per &&
	APP=$(ibcrd_field per app_pid) && ibcr_track $APP $(ibcrd_field per pid) &&
	ibcrd_report per.out $APP | grep "pattern=ok" &&
	lg=$(ibcrd_job_field per last_gen) && echo "last_gen $lg" &&
	test "$lg" -ge 4
'

test_expect_success 'restart --stopped prints pids; the program is stopped' '
	INIT=$(ibcrd_field per pid) && APP=$(ibcrd_field per app_pid) &&
	ibcr_kill 9 $(cat per.run) $INIT &&
	ibcrd_wait_gone $APP &&
	last=$(t7_last per) &&
	{ "$IBCR" restart per --stopped >rs.out 2>rs.err & } &&
	echo $! >rs.pid && ibcr_track $! &&
	{ ibcr_wait_for 60 t7_restart_stopped || { cat rs.out rs.err; false; }; } &&
	cat rs.out &&
	grep "restored from generation $last" rs.err &&
	sed -n "s/.* stopped: init \([0-9]*\) application \([0-9]*\)$/\1 \2/p" rs.out >pids &&
	read INIT2 APP2 <pids &&
	ibcr_track $INIT2 $APP2 &&
	test "$(ibcrd_state $APP2)" = T &&
	test "$(ibcrd_state $INIT2)" = T &&
	grep "gdb -p $APP2" rs.out
'

test_expect_success GDB 'gdb attaches to the stopped program and detaches' '
	read INIT2 APP2 <pids &&
	gdb -p $APP2 -batch -ex "info threads" -ex detach >gdb.out 2>&1 &&
	cat gdb.out &&
	grep -c "Thread " gdb.out >nthreads &&
	test "$(cat nthreads)" -ge 4 &&
	grep "pattern" gdb.out
'

test_expect_success 'after SIGCONT the program goes on and finishes correctly' '
	read INIT2 APP2 <pids &&
	kill -CONT $APP2 &&
	ibcr_wait_for 10 t7_running $APP2 &&
	ibcrd_report rs.out $APP2 | grep "pattern=ok bad=0" &&
	kill -TERM $(cat rs.pid) &&
	wait $(cat rs.pid) &&
	grep "^final .*pattern=ok" rs.out
'

test_done
