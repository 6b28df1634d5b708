#!/bin/sh

test_description='progress of checkpoint --wait and restart on a terminal

"ibcr checkpoint JOB --wait" and "ibcr restart JOB" draw one updating
line on stderr when it is a terminal (a pty from util-linux script):
the phases of the generation as ibcrd'"'"'s worker reports them, and
bytes done of the total with a rate for the copy and the restore.
Without a terminal their output is exactly as before: no progress at
all.  The program (t/criu/pattern, 128 MiB) is checked intact after the
restart.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT CRIU SCRIPT

PATTERN=$IBCR_BUILDDIR/t/criu/pattern
ibcrd_use_build
ibcrd_wait_secs=30

# the restored application has registered: its pid is known
app_known() {
	test -n "$(ibcrd_field pg app_pid)"
}

# t12_counters FILE: the counters of the pattern program's last report
# in FILE (a terminal's output: lines end in \r\n).
t12_counters() {
	tr -d "\r" <"$1" | sed -n "s/.*report [0-9]* run=.*counters=//p" | tail -n 1
}

# t12_reported FILE: FILE holds a report of the pattern program.
t12_reported() {
	test -n "$(t12_counters "$1")"
}

# t12_counted_past FILE COUNTERS APP: ask APP for a report (SIGUSR1); its
# last one in FILE shows every counter above COUNTERS.
t12_counted_past() {
	kill -USR1 "$3" || return 1
	t12_now=$(t12_counters "$1")
	test -n "$t12_now" &&
	awk -v a="$2" -v b="$t12_now" "BEGIN {
		n = split(a, x, \",\"); split(b, y, \",\")
		for (i = 1; i <= n; i++) if (y[i] + 0 <= x[i] + 0) exit 1
	}"
}

# t12_tty OUT CMD: run CMD with a pty as stdin/stdout/stderr; all it
# wrote to the terminal lands in OUT.
t12_tty() {
	t12_o=$1
	shift
	# Each word quoted: paths here hold spaces ("trash directory").
	t12_c=
	for t12_a in "$@"; do
		t12_c="$t12_c '$t12_a'"
	done
	script -qfec "$t12_c" /dev/null </dev/null >"$t12_o"
}

test_expect_success 'setup: ibcrd, a 128 MiB pattern under ibcr run' '
	ibcrd_setup d "criu = $IBCR_CRIU" "peer_port = 0" &&
	ibcrd_start d &&
	IBCR_SOCKET=$(ibcrd_sock d) && export IBCR_SOCKET &&
	{ "$IBCR" run --name pg -- "$PATTERN" --mib 128 >pg.out 2>pg.err & } &&
	ibcr_track $! &&
	ibcrd_wait_for sh -c "\"$IBCR\" status pg >/dev/null 2>&1" &&
	ibcrd_wait_for grep -q "^start " pg.out
'

test_expect_success 'checkpoint --wait on a terminal: phases, bytes and rate' '
	t12_tty ck.tty "$IBCR" checkpoint pg --wait &&
	cat -A ck.tty &&
	for ph in quiesce release dump rebuild resume copy commit; do
		grep -q "job pg gen 1: $ph " ck.tty || { echo "no phase $ph"; return 1; }
	done &&
	grep -q "job pg gen 1: copy  *[0-9.]* [KMG]*i*B of 1[0-9][0-9]\.[0-9] MiB" ck.tty &&
	grep -q "job pg gen 1: commit  *1[0-9][0-9]\.[0-9] MiB of 1[0-9][0-9]\.[0-9] MiB (100%" ck.tty &&
	grep -q "job pg: generation 1 committed" ck.tty
'

test_expect_success 'checkpoint --wait without a terminal: the one line, no progress' '
	"$IBCR" checkpoint pg --wait >ck.out 2>ck.err &&
	cat ck.out ck.err &&
	test "$(wc -l <ck.out)" -eq 1 &&
	grep "^job pg: generation 2 committed (.*, dump [0-9]* ms, copy [0-9]* ms)$" ck.out &&
	! test -s ck.err &&
	test "$(tr -d "\\r\\033" <ck.out | wc -c)" = "$(wc -c <ck.out)"
'

test_expect_success 'restart on a terminal: restore with bytes, verify; the pattern is intact' '
	app=$(ibcrd_field pg app_pid) && init=$(ibcrd_field pg pid) &&
	ibcr_track $app $init &&
	kill -9 $init && ibcrd_wait_gone $app && ibcrd_wait_gone $init &&
	ibcrd_wait_for sh -c "! \"$IBCR\" status pg >/dev/null 2>&1" &&
	{ t12_tty rs.tty "$IBCR" restart pg & } &&
	ibcr_track $! &&
	ibcrd_wait_for grep -q "restored from generation 2" rs.tty &&
	ibcrd_wait_for app_known &&
	app=$(ibcrd_field pg app_pid) && ibcr_track $app &&
	# (the restored program counts on before it is stopped, so its final
	# line checks counting done after the restore, not just the image: a
	# first report, then one with every counter higher)
	kill -USR1 $app &&
	ibcrd_wait_for t12_reported rs.tty &&
	c1=$(t12_counters rs.tty) &&
	ibcrd_wait_for t12_counted_past rs.tty "$c1" $app &&
	kill -TERM $app &&
	ibcrd_wait_for grep -q "final" rs.tty &&
	cat -A rs.tty &&
	grep -q "job pg gen 2 rank 0: restore  *0 B of 1[0-9][0-9]\.[0-9] MiB" rs.tty &&
	grep -q "job pg gen 2 rank 0: restore  *1[0-9][0-9]\.[0-9] MiB of 1[0-9][0-9]\.[0-9] MiB (100%" rs.tty &&
	grep "final .*pattern=ok bad=0" rs.tty
'

test_expect_success 'restart without a terminal: no progress' '
	ibcrd_wait_gone $app &&
	ibcrd_wait_for sh -c "! \"$IBCR\" status pg >/dev/null 2>&1" &&
	{ "$IBCR" restart pg >rs2.out 2>rs2.err & } &&
	ibcr_track $! &&
	ibcrd_wait_for grep -q "restored from generation 2" rs2.err &&
	ibcrd_wait_for app_known &&
	app=$(ibcrd_field pg app_pid) && ibcr_track $app &&
	kill -TERM $app &&
	ibcrd_wait_for grep -q "final" rs2.out &&
	cat rs2.err &&
	! grep -q " rebuild" rs2.err &&
	test "$(tr -d "\\r\\033" <rs2.err | wc -c)" = "$(wc -c <rs2.err)" &&
	grep "final .*pattern=ok bad=0" rs2.out
'

test_done
