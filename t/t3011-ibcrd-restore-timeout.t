#!/bin/sh

test_description='a restart where one rank never comes back fails in time

A two-rank verbs job (ibv_rc_pingpong -c under libibcr on softib) is
checkpointed, both ranks are killed, and only rank 0 is restarted.  The
leader ibcrd waits for every rank before it rebuilds their verbs objects;
with timeout_restore = 3s the restart must fail within that time (plus
the restore itself) with an error naming rank 1, and the restored rank 0
must be ended rather than left held at libibcr'"'"'s gate.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT CRIU IBVUTILS

SOFTIB_LIBDIR=$IBCR_BUILDDIR/lib/softib/.libs
test -e "$SOFTIB_LIBDIR/libibverbs.so.1" || error "softib is not built"
ibcrd_use_build
unset IBCR_SOCKET

# This test has always given its waits 30 s (600 polls), not 20.
ibcrd_wait_secs=30
PORT=$(ibcrd_free_port 0)
ITERS=400000

# t11_connected JOB: both ranks of JOB map softib's same-host rings: their
# queue pairs are connected and the traffic flows.
t11_connected() {
	t11_apps=$(ibcrd_task_fields $1 app_pid) &&
	test "$(echo $t11_apps | wc -w)" = 2 &&
	for p in $t11_apps; do
		grep -q "memfd:softib-shm" /proc/$p/maps || return 1
	done
}

test_expect_success 'a bad timeout_restore is refused, naming the key' '
	ibcrd_setup bad "timeout_restore = soon" &&
	test_must_fail "$IBCRD" -F -c "$PWD/bad/ibcrd.conf" 2>bad.err &&
	cat bad.err &&
	grep "timeout_restore" bad.err
'

test_expect_success 'setup: ibcrd with timeout_restore = 3s' '
	ibcrd_setup d "criu = $IBCR_CRIU" "peer_port = 0" "timeout_restore = 3s" &&
	ibcrd_start d &&
	IBCR_SOCKET=$(ibcrd_sock d) && export IBCR_SOCKET
'

test_expect_success 'checkpoint a two-rank pingpong, then kill both ranks' '
	ibcrd_pingpong pp to $PORT $ITERS &&
	# (a checkpoint in the middle of the traffic)
	ibcrd_wait_for t11_connected to &&
	"$IBCR" checkpoint to --wait &&
	pids=$(ibcrd_task_fields to pid) && apps=$(ibcrd_task_fields to app_pid) &&
	ibcr_track $pids $apps &&
	kill -9 $pids &&
	for p in $apps; do ibcrd_wait_gone $p || return 1; done &&
	ibcrd_wait_for test -s pp.0.rc && ibcrd_wait_for test -s pp.1.rc
'

test_expect_success 'restart of rank 0 alone fails within timeout_restore, naming rank 1' '
	start=$(date +%s) &&
	{ ( env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" "$IBCR" restart to --rank 0 \
		>rs.out 2>rs.err; echo $? >rs.rc ) & } &&
	ibcr_track $! &&
	ibcrd_wait_for grep -q "restored from generation 1" rs.err &&
	restored=$(date +%s) &&
	{ ibcr_wait_for 30 test -s rs.rc || { cat rs.err; false; }; } &&
	end=$(date +%s) &&
	cat rs.err &&
	test "$(cat rs.rc)" -ne 0 &&
	echo "restore took $((restored - start)) s, failed $((end - restored)) s after it" &&
	test $((end - restored)) -ge 2 && test $((end - restored)) -le 8 &&
	grep "rank 1 of 2 did not come back within timeout_restore (3.0 s)" rs.err
'

test_expect_success 'nothing of the restored rank is left running' '
	line=$(grep "restored from generation 1" rs.err) &&
	init=$(echo "$line" | sed "s/.*init pid \([0-9]*\).*/\1/") &&
	app=$(echo "$line" | sed "s/.*application pid \([0-9]*\).*/\1/") &&
	echo "init $init app $app" &&
	ibcrd_wait_gone $init 10 && ibcrd_wait_gone $app 10 &&
	ibcrd_wait_for sh -c "! \"$IBCR\" status to >/dev/null 2>&1"
'

test_done
