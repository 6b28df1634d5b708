#!/bin/sh
test_description='softib: peers vanish while the application polls; ibv_srq_pingpong again and again

The srq_pingpong server or client on softib once died with SIGSEGV after
its peer had finished (about 1 run in 600 with four pairs at once):
polling a CQ, the application thread found the peer gone and killed the
connection under the QP lock while the progress thread freed it
(lib/softib/progress.c, reap).  Another ended by SIGPIPE: a send to a
peer already gone.

softib-verbs/conn_death makes that moment happen hundreds of times a
second: 32 RC pairs of one process exchange a message each way, then a
thread destroys one side of every pair while the main thread busy-polls
the other side, and so meets the ends of stream itself.  On the old
reap it crashed or wrote through a freed connection (softib: "wake fd:
Bad file descriptor") in most runs of 20 rounds; it must pass every
check and softib must have nothing to complain about.

Then each round runs two srq_pingpong pairs at once between two
network-namespace hosts (16 QPs on one SRQ, polling; 4 QPs with
completion events) and checks both sides of both: exit 0, every
iteration done, every buffer validated (-c), no error.  That loop is the
reported case; it meets the race only rarely.  The same rounds run again
with both pairs on one host, where softib carries the traffic through
shared-memory rings.

SRQ_ROUNDS=N runs N srq_pingpong rounds instead of 20 and SV_ROUNDS=N N
conn_death rounds instead of 40; SOFTIB_ASAN=1 runs both on softib built
with AddressSanitizer (make -C lib/softib asan), whose reports fail the
test.'

. "$(dirname "$0")"/sharness.sh
ibcr_require SOFTIB
ibcr_want ROOT NETNS IBVUTILS

LD_LIBRARY_PATH=$IBCR_BUILDDIR/lib/softib/.libs
ROUNDS=${SRQ_ROUNDS:-20}
# SRQ_ENV: what env(1) adds for ibv_srq_pingpong (ASan's runtime).
SRQ_ENV=
if test -n "$SOFTIB_ASAN"; then
	LD_LIBRARY_PATH=$IBCR_BUILDDIR/lib/softib/asan
	SRQ_ENV="LD_PRELOAD=$(gcc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0"
	if ! test -e "$LD_LIBRARY_PATH/libibverbs.so.1"; then
		echo "Bail out! SOFTIB_ASAN=1: no $LD_LIBRARY_PATH/libibverbs.so.1 (make -C lib/softib asan)"
		exit 1
	fi
fi
export LD_LIBRARY_PATH

# srq_listening PORT: host 1 listens on TCP PORT (the pingpong exchange).
srq_listening() {
	netns_exec 1 ss -Hltn "sport = :$1" | grep -q LISTEN
}

# srq_start NAME PORT ARGS...: server on host 1, then client on host
# $SRQ_CLI (2, or 1 for one host), both in the background; exit statuses
# in NAME.srv.rc and NAME.cli.rc.
SRQ_CLI=2
srq_start() {
	sq_name=$1 sq_port=$2
	shift 2
	rm -f $sq_name.*
	{ netns_exec 1 env $SRQ_ENV timeout 60 ibv_srq_pingpong -p $sq_port "$@" \
		>$sq_name.srv.out 2>$sq_name.srv.err; echo $? >$sq_name.srv.rc; } &
	ibcr_wait_for 10 srq_listening $sq_port || return 1
	{ netns_exec $SRQ_CLI env $SRQ_ENV timeout 60 ibv_srq_pingpong -p $sq_port "$@" "$(netns_ip 1)" \
		>$sq_name.cli.out 2>$sq_name.cli.err; echo $? >$sq_name.cli.rc; } &
}

srq_ended() {
	test -s $1.srv.rc && test -s $1.cli.rc
}

# srq_check NAME ROUND: both sides of NAME ended well; otherwise their
# output goes to the TAP log.
srq_check() {
	if ibcr_wait_for 70 srq_ended $1 &&
	   test "$(cat $1.srv.rc)" = 0 && test "$(cat $1.cli.rc)" = 0 &&
	   grep -q "iters in" $1.srv.out && grep -q "iters in" $1.cli.out &&
	   ! grep -qi "fail\|error\|mismatch\|invalid" $1.srv.err $1.cli.err; then
		return 0
	fi
	for f in $1.srv.rc $1.cli.rc $1.srv.out $1.srv.err $1.cli.out $1.cli.err; do
		test -f $f && sed "s|^|round $2 $f: |" $f
	done | ibcr_diag
	return 1
}

test_expect_success 'peers vanish under a polling thread: 40 rounds of 32 RC pairs, nothing freed under it' '
	env $SRQ_ENV SOFTIB_ADDR=127.0.0.1 SV_ROUNDS=${SV_ROUNDS:-40} \
		timeout 120 "$IBCR_BUILDDIR/t/softib-verbs/conn_death" \
		>conn_death.tap 2>conn_death.err
	rc=$?
	cat conn_death.tap
	sed "s/^/stderr: /" conn_death.err | ibcr_diag
	test $rc -eq 0 &&
	grep -q "^1\.\.2" conn_death.tap &&
	test $(grep -c "^ok" conn_death.tap) -eq 2 &&
	! test -s conn_death.err
'

test_expect_success ROOT,NETNS,IBVUTILS 'set up two network-namespace hosts' '
	netns_create 2
'

for SRQ_CLI in 2 1; do
if test $SRQ_CLI = 1; then where="one host"; else where="two hosts"; fi
test_expect_success ROOT,NETNS,IBVUTILS "$ROUNDS rounds of two srq_pingpong pairs at once, every one verified ($where)" '
	r=1 &&
	while test $r -le $ROUNDS; do
		srq_start a 18515 -c -n 100 &&
		srq_start b 18516 -c -e -q 4 -n 100 &&
		srq_check a $r && srq_check b $r || break
		r=$((r + 1))
	done &&
	wait &&
	test $r -gt $ROUNDS
'
done

test_done
