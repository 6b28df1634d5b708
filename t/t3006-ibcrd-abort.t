#!/bin/sh

test_description='a failed generation aborts cleanly

Each way a generation can fail, with real CRIU and a real ibcrd: CRIU
refuses to dump (the task holds an established TCP connection), the
storage fills up during the copy (a small tmpfs), ibcrd is killed with
SIGKILL during the dump.  Each time the asker hears what failed, the
program runs on with its pattern intact, no partial generation is listed
or left on disk, and the last committed generation stays restorable.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT CRIU

PATTERN=$IBCR_BUILDDIR/t/criu/pattern
IBCR_INIT=$IBCR_BUILDDIR/ibcrd/ibcr-init
IBCR_LIBIBCR=$IBCR_BUILDDIR/lib/ibcr/.libs/libibcr.so
export IBCR_INIT IBCR_LIBIBCR

t6_pids=
t6_track() { t6_pids="$t6_pids $*"; }
t6_cleanup() {
	for p in $t6_pids; do
		ibcrd_alive "$p" && kill -9 "$p" 2>/dev/null
	done
	for p in $t6_pids; do
		ibcrd_wait_gone "$p" 50
	done
	t6_pids=
	return 0
}
ibcr_atexit t6_cleanup

t6_umount() {
	if mountpoint -q "$PWD/small"; then umount "$PWD/small"; fi
	return 0
}

t6_wait_for() {
	i=0
	until "$@"; do
		i=$((i + 1)); test $i -lt 400 || return 1
		sleep 0.05
	done
}

t6_field() {
	"$IBCR" status "$1" --json 2>/dev/null | sed -n "s/.*\"$2\":\([0-9]*\).*/\1/p"
}

t6_report() {
	n=$(grep -c "^report " "$1")
	kill -USR1 "$2" || return 1
	i=0
	until test "$(grep -c "^report " "$1")" -gt "$n"; do
		i=$((i + 1)); test $i -lt 400 || return 1
		sleep 0.05
	done
	tail -n 1 "$1"
}

t6_gens() {
	"$IBCR" list "$1" --json | grep -o "\"generation\":[0-9]*" | sed "s/.*://" | tr "\n" " "
}

# t6_start JOB MIB [PRE]: ibcr run JOB (PRE is a shell snippet run before
# the pattern, in the task); sets APP.
t6_start() {
	{ "$IBCR" run --name "$1" -- bash -c "${3:-true}; exec \"$PATTERN\" --mib $2" \
		>"$1.out" 2>"$1.err" & } &&
	echo $! >"$1.run" && t6_track $! &&
	t6_wait_for "$IBCR" status "$1" >/dev/null 2>&1 &&
	t6_wait_for grep -q "^start" "$1.out" &&
	APP=$(t6_field "$1" app_pid) && t6_track "$APP" "$(t6_field "$1" pid)"
}

test_expect_success 'setup: ibcrd with a peer port (a TCP listener to connect to)' '
	ibcrd_setup d "criu = $IBCR_CRIU" "peer_port = any" &&
	ibcrd_start d &&
	IBCR_SOCKET=$(ibcrd_sock d) && export IBCR_SOCKET &&
	PORT=$(ibcrd_peer_port d) && test -n "$PORT"
'

test_expect_success 'CRIU fails (established TCP connection): clear error, nothing committed, program runs on' '
	t6_start tcp 8 "exec 3<>/dev/tcp/127.0.0.1/$PORT" &&
	test_expect_code 1 "$IBCR" checkpoint tcp --wait 2>err &&
	cat err &&
	grep "generation 1 aborted in dump: rank 0 (pid [0-9]*): criu dump failed" err &&
	grep -i "tcp" err &&
	log=$(sed -n "s/.*log: \(.*dump-gen-1-rank-0.log\).*/\1/p" err) &&
	test -s "$log" &&
	grep "last committed generation stays" err &&
	test "$(t6_gens tcp)" = "" &&
	! test -e d/storage/local/tcp/gen-1 &&
	! test -e d/staging/tcp/gen-1 &&
	t6_report tcp.out $APP | grep "pattern=ok" &&
	grep "job tcp gen 1: aborted: dump" d/ibcrd.log
'

test_expect_success 'storage fills up during the copy: ENOSPC aborts, the older generation stays' '
	mkdir small && mount -t tmpfs -o size=24m ibcrtest small &&
	ibcr_atexit t6_umount &&
	ibcrd_setup f "criu = $IBCR_CRIU" "peer_port = 0" "storage = $PWD/small" \
		"socket = $PWD/f/run/ibcrd.sock" &&
	sed -i "1,3{/^socket\|^storage/d}" f/ibcrd.conf &&
	ibcrd_start f &&
	IBCR_SOCKET=$(ibcrd_sock f) &&
	t6_start full 16 &&
	"$IBCR" checkpoint full --wait &&
	test_expect_code 1 "$IBCR" checkpoint full --wait 2>err &&
	cat err &&
	grep "generation 2 aborted in commit: cannot copy .*No space left on device (the checkpoint storage is full" err &&
	test "$(t6_gens full)" = "1 " &&
	! test -e small/local/full/gen-2 &&
	! test -e f/staging/full/gen-2 &&
	"$IBCR" verify full &&
	t6_report full.out $APP | grep "pattern=ok" &&
	IBCR_SOCKET=$(ibcrd_sock d)
'

test_expect_success 'ibcrd killed during the dump: the asker is told, no partial generation, job runs on' '
	t6_start big 384 &&
	echo $APP >big.app &&
	"$IBCR" checkpoint big --wait &&
	{ "$IBCR" checkpoint big --wait >ck.out 2>ck.err & } &&
	ck=$! &&
	t6_wait_for test -e d/staging/big/dump-gen-2-rank-0.log &&
	kill -9 $(ibcrd_pid d) &&
	test_expect_code 1 wait $ck &&
	cat ck.err &&
	grep "generation 2 aborted in dump: ibcrd (pid [0-9]*) died during the dump; the generation is void" ck.err &&
	t6_report big.out $(cat big.app) | grep "pattern=ok" &&
	ibcrd_start d &&
	test "$(t6_gens big)" = "1 " &&
	! test -e d/storage/local/big/gen-2 &&
	! test -e d/staging/big/gen-2
'

test_expect_success 'ibcr run registers the task again with the restarted ibcrd' '
	t6_wait_for grep -q "registered again with ibcrd" big.err &&
	"$IBCR" checkpoint big --wait | grep "generation 2 committed" &&
	test "$(t6_gens big)" = "1 2 "
'

test_expect_success 'and the last good generation restores' '
	kill -9 $(cat big.run) $(cat big.app) &&
	ibcrd_wait_gone $(cat big.app) &&
	{ "$IBCR" restart big >rs.out 2>rs.err & } &&
	t6_track $! && echo $! >rs.pid &&
	t6_wait_for grep -q "restored from generation 2" rs.err &&
	APP=$(t6_field big app_pid) && t6_track $APP &&
	t6_report rs.out $APP | grep "pattern=ok" &&
	kill -TERM $(cat rs.pid) && wait $(cat rs.pid)
'

test_done
