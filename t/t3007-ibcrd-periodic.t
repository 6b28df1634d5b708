#!/bin/sh

test_description='periodic generations, retention, restart --stopped under gdb

"ibcr run --interval 1s" makes ibcrd take generations by itself while the
program runs; retention keeps the newest K.  "ibcr restart --stopped"
leaves the restored program stopped and prints its pids; gdb attaches to
it and detaches; after SIGCONT the program goes on and finishes correctly.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT CRIU

PATTERN=$IBCR_BUILDDIR/t/criu/pattern
IBCR_INIT=$IBCR_BUILDDIR/ibcrd/ibcr-init
IBCR_LIBIBCR=$IBCR_BUILDDIR/lib/ibcr/.libs/libibcr.so
export IBCR_INIT IBCR_LIBIBCR

if command -v gdb >/dev/null 2>&1; then
	test_set_prereq GDB
fi

t7_pids=
t7_track() { t7_pids="$t7_pids $*"; }
t7_cleanup() {
	for p in $t7_pids; do
		ibcrd_alive "$p" && kill -9 "$p" 2>/dev/null
	done
	for p in $t7_pids; do
		ibcrd_wait_gone "$p" 50
	done
	t7_pids=
	return 0
}
ibcr_atexit t7_cleanup

t7_field() {
	"$IBCR" status "$1" --json 2>/dev/null | sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p"
}

t7_gens() {
	"$IBCR" list "$1" --json 2>/dev/null | grep -o "\"generation\":[0-9]*" | sed "s/.*://" | tr "\n" " "
}

# Highest committed generation (0 when none).
t7_last() {
	set -- $(t7_gens "$1")
	eval "echo \${$#:-0}"
}

t7_report() {
	n=$(grep -c "^report " "$1")
	kill -USR1 "$2" || return 1
	i=0
	until test "$(grep -c "^report " "$1")" -gt "$n"; do
		i=$((i + 1)); test $i -lt 400 || return 1
		sleep 0.05
	done
	tail -n 1 "$1"
}

t7_state() {
	sed "s/^.*) //" "/proc/$1/stat" 2>/dev/null | cut -c1
}

test_expect_success 'setup: ibcrd, retention 2' '
	ibcrd_setup d "criu = $IBCR_CRIU" "peer_port = 0" "retention = 2" &&
	ibcrd_start d &&
	IBCR_SOCKET=$(ibcrd_sock d) && export IBCR_SOCKET
'

test_expect_success '--interval 1s: generations come by themselves; retention keeps 2' '
	{ "$IBCR" run --name per --interval 1s -- "$PATTERN" --mib 8 >per.out 2>per.err & } &&
	echo $! >per.run && t7_track $! &&
	i=0 &&
	until test "$(t7_last per)" -ge 4; do
		i=$((i + 1)); test $i -lt 300 || { t7_gens per; false; }
		sleep 0.1
	done &&
	gens=$(t7_gens per) && echo "$gens" &&
	test $(echo $gens | wc -w) -eq 2 &&
	"$IBCR" list per | grep -c periodic >n && test "$(cat n)" -eq 2 &&
	"$IBCR" status per --json | grep "\"interval_ms\":1000" &&
	"$IBCR" verify per &&
	APP=$(t7_field per app_pid) && t7_track $APP $(t7_field per pid) &&
	t7_report per.out $APP | grep "pattern=ok" &&
	grep "job per gen 4: committed" d/ibcrd.log
'

test_expect_success 'restart --stopped prints pids; the program is stopped' '
	INIT=$(t7_field per pid) && APP=$(t7_field per app_pid) &&
	kill -9 $(cat per.run) $INIT &&
	ibcrd_wait_gone $APP &&
	last=$(t7_last per) &&
	{ "$IBCR" restart per --stopped >rs.out 2>rs.err & } &&
	echo $! >rs.pid && t7_track $! &&
	i=0 &&
	until grep -q "stopped: init" rs.out; do
		i=$((i + 1)); test $i -lt 300 || { cat rs.out rs.err; false; }
		sleep 0.05
	done &&
	cat rs.out &&
	grep "restored from generation $last" rs.err &&
	sed -n "s/.* stopped: init \([0-9]*\) application \([0-9]*\) launcher \([0-9]*\)$/\1 \2 \3/p" rs.out >pids &&
	read INIT2 APP2 LAUNCHER <pids &&
	t7_track $INIT2 $APP2 $LAUNCHER &&
	test "$(t7_state $APP2)" = T &&
	test "$(t7_state $INIT2)" = T &&
	grep "gdb -p $APP2" rs.out
'

test_expect_success GDB 'gdb attaches to the stopped program and detaches' '
	read INIT2 APP2 LAUNCHER <pids &&
	gdb -p $APP2 -batch -ex "info threads" -ex detach >gdb.out 2>&1 &&
	cat gdb.out &&
	grep -c "Thread " gdb.out >nthreads &&
	test "$(cat nthreads)" -ge 4 &&
	grep "pattern" gdb.out
'

test_expect_success 'after SIGCONT the program goes on and finishes correctly' '
	read INIT2 APP2 LAUNCHER <pids &&
	kill -CONT $LAUNCHER &&
	i=0 &&
	until test "$(t7_state $APP2)" != T && test "$(t7_state $APP2)" != t; do
		i=$((i + 1)); test $i -lt 100 || false
		sleep 0.05
	done &&
	t7_report rs.out $APP2 | grep "pattern=ok bad=0" &&
	kill -TERM $(cat rs.pid) &&
	wait $(cat rs.pid) &&
	grep "^final .*pattern=ok" rs.out
'

test_done
