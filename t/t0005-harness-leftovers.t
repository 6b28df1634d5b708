#!/bin/sh
test_description='harness: the leftovers check finds and ends what a test left

The check t9999 runs over the whole suite (ibcr_leftovers of
t/sharness.d/03-leftovers.sh), here on records made up by this test, with
a tag of its own: planted processes (not children of this shell, as a
test'"'"'s survivors are not), a short folder and, as root, a network
namespace, must each be named, ended or removed; a running test'"'"'s
records are left alone.'

. "$(dirname "$0")"/sharness.sh
ibcr_want ROOT

# lo_plant VAR CMD...: start CMD detached (its parent exits at once, so it
# is nobody's child here), its pid in VAR.
lo_plant() {
	lo_var=$1
	shift
	( "$@" </dev/null >/dev/null 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
	  echo $! >lo.pid )
	eval "$lo_var=\$(cat lo.pid)"
	ibcr_track "$(cat lo.pid)"
}

# A pid that surely runs no test: a finished child of ours.
lo_dead_pid() {
	true &
	lo_dp=$!
	wait $lo_dp
	echo $lo_dp
}

# lo_check: ibcr_leftovers over ./suite with this test's own tag.
lo_check() {
	( IBCR_SUITE_TAG=$PWD/tag; ibcr_leftovers "$PWD/suite" "$@" )
}

test_expect_success 'nothing recorded: nothing found' '
	mkdir suite &&
	lo_check >out &&
	test_must_be_empty out
'

test_expect_success 'a recorded process, a tagged process and a folder are named and ended' '
	tp=$(lo_dead_pid) &&
	lo_plant P1 sleep 300 &&
	lo_plant P2 env IBCR_SUITE_TAG="$PWD/tag" sleep 300 &&
	D=$(mktemp -d /tmp/ibcr.$tp.XXXXXX) &&
	{
		echo "test $tp 1 t0000-fake"
		echo "proc $P1 $(ibcr_starttime_ $P1) fake daemon"
	} >suite/t0000-fake.$tp.rec &&
	test_expect_code 1 lo_check >out &&
	cat out &&
	grep "^process $P1 (fake daemon) started by t0000-fake still runs: sleep 300" out &&
	grep "^process $P2, started by a test of this suite (IBCR_SUITE_TAG in its environment), still runs: sleep 300" out &&
	grep "^$D made by t0000-fake still exists" out &&
	test $(wc -l <out) = 3 &&
	ibcr_dead $P1 && ibcr_dead $P2 && ! test -e "$D" &&
	! test -e suite/t0000-fake.$tp.rec
'

test_expect_success 'a reused pid (other start time) is not taken for a survivor' '
	tp=$(lo_dead_pid) &&
	lo_plant P3 sleep 300 &&
	{
		echo "test $tp 1 t0000-fake"
		echo "proc $P3 $(( $(ibcr_starttime_ $P3) - 1 )) fake daemon"
	} >suite/t0000-fake.$tp.rec &&
	lo_check >out &&
	test_must_be_empty out &&
	ibcr_alive $P3 &&
	kill $P3
'

test_expect_success 'the records of a test still running are left alone' '
	lo_plant T sleep 300 &&
	lo_plant P4 sleep 300 &&
	{
		echo "test $T $(ibcr_starttime_ $T) t0000-running"
		echo "proc $P4 $(ibcr_starttime_ $P4) its daemon"
	} >suite/t0000-running.$T.rec &&
	lo_check >out 2>err &&
	test_must_be_empty out &&
	grep "t0000-running (pid $T) still runs" err &&
	test -e suite/t0000-running.$T.rec &&
	ibcr_alive $P4 &&
	kill $T && ibcr_wait_for 5 ibcr_dead $T &&
	test_expect_code 1 lo_check >out &&
	grep "^process $P4 (its daemon) started by t0000-running still runs" out &&
	ibcr_dead $P4
'

test_expect_success ROOT 'a network namespace and a /run folder named after a test are found and removed' '
	tp=$(lo_dead_pid) &&
	echo "test $tp 1 t0000-fake" >suite/t0000-fake.$tp.rec &&
	ip netns add ib${tp}h1 &&
	mkdir /run/ibcr-x.$tp &&
	test_expect_code 1 lo_check >out &&
	cat out &&
	grep "^network namespace ib${tp}h1 made by t0000-fake still exists" out &&
	grep "^/run/ibcr-x.$tp made by t0000-fake still exists" out &&
	! ip netns list | grep "^ib${tp}h1" &&
	! test -e /run/ibcr-x.$tp
'

test_expect_success 'the test shells themselves are written down' '
	grep "^test $$ $(ibcr_starttime_ $$) t0005-harness-leftovers$" "$IBCR_SUITE_DIR"/t0005-harness-leftovers.$$.rec
'

test_done
