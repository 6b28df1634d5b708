#!/bin/sh
test_description='softib: Debian'"'"'s ibv_*_pingpong with validation

ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong and ibv_srq_pingpong,
unmodified, run with -c (the receiver checks every buffer) between two
processes on one host (through shared-memory rings, and again over TCP
with SOFTIB_SHM=0) and between two network-namespace hosts, polling and
with completion events, with the classic and the ibv_wr_* send API,
addressed by LID and by GID, with and without membarrier (on one host:
the rings'"'"' wake-ups and biased locks; also one side with and one
without).  While an rc_pingpong runs on one host,
both processes map softib'"'"'s rings and open no TCP connection to
each other'"'"'s softib endpoint; with SOFTIB_SHM=0 they do the opposite.'

. $(dirname $0)/sharness.sh
ibcr_require ROOT NETNS IBVUTILS

LD_LIBRARY_PATH=$IBCR_BUILDDIR/lib/softib/.libs
export LD_LIBRARY_PATH

on() { h=$1; shift; if test "$h" = 0; then "$@"; else netns_exec "$h" "$@"; fi; }

# pp_listening HOST PORT: the server on HOST listens on TCP PORT.
pp_listening() {
	on "$1" ss -Hltn "sport = :$2" | grep -q LISTEN
}

# pp_run SRVHOST CLIHOST TOOL ARGS...: server on SRVHOST, client on CLIHOST
# (0 = this namespace, otherwise a netns host).  Both must succeed and
# report their iterations.
pp_run() {
	srv=$1 cli=$2 tool=$3
	shift 3
	port=$(( 30000 + ($$ + ${pp_n:=0}) % 2000 ))
	pp_n=$((pp_n + 1))
	if test "$srv" = 0; then addr=127.0.0.1; else addr=$(netns_ip "$srv"); fi
	on "$srv" timeout 30 "$tool" -p $port "$@" >srv.out 2>srv.err &
	spid=$!
	ibcr_wait_for 10 pp_listening "$srv" $port || { kill $spid; return 1; }
	on "$cli" timeout 30 "$tool" -p $port "$@" "$addr" >cli.out 2>cli.err
	crc=$?
	wait $spid
	src=$?
	cat srv.out cli.out srv.err cli.err
	if test $crc = 0 && test $src = 0 &&
	   grep -q "iters in" srv.out && grep -q "iters in" cli.out &&
	   ! grep -qi "fail\|error\|mismatch" srv.err cli.err; then
		return 0
	fi
	# into the TAP log even without -v, so a rare failure explains itself
	for f in srv.out srv.err cli.out cli.err; do
		sed "s|^|$tool $f: |" $f
	done | ibcr_diag
	echo "$tool: client exit $crc, server exit $src" | ibcr_diag
	return 1
}

test_expect_success 'set up two network-namespace hosts' '
	netns_create 2
'

for where in "0 0" "0 0 tcp" "0 0 fence" "1 2"; do
	set -- $where
	if test "$1" = 0; then place="one host"; else place="two netns hosts"; fi
	unset SOFTIB_SHM SOFTIB_SHM_MEMBARRIER SOFTIB_LOCK_BIAS
	if test "$3" = tcp; then
		place="one host, TCP with SOFTIB_SHM=0"
		SOFTIB_SHM=0
		export SOFTIB_SHM
	elif test "$3" = fence; then
		# the rings' wake-ups with a fence per message and every
		# lock an exchange, instead of membarrier (softib(7),
		# TRANSPORT)
		place="one host, SOFTIB_SHM_MEMBARRIER=0 SOFTIB_LOCK_BIAS=0"
		SOFTIB_SHM_MEMBARRIER=0 SOFTIB_LOCK_BIAS=0
		export SOFTIB_SHM_MEMBARRIER SOFTIB_LOCK_BIAS
	fi
	test_expect_success "rc_pingpong -c, polling ($place)" "
		pp_run $1 $2 ibv_rc_pingpong -c -n 300
	"
	test_expect_success "rc_pingpong -c -e, completion events ($place)" "
		pp_run $1 $2 ibv_rc_pingpong -c -e -n 300
	"
	test_expect_success "rc_pingpong -c -N, ibv_wr_* API ($place)" "
		pp_run $1 $2 ibv_rc_pingpong -c -N -n 300
	"
	test_expect_success "rc_pingpong -c -g 0 -t, GRH and timestamps ($place)" "
		pp_run $1 $2 ibv_rc_pingpong -c -g 0 -t -n 100
	"
	test_expect_success "rc_pingpong -c, 1 MiB messages ($place)" "
		pp_run $1 $2 ibv_rc_pingpong -c -s 1048576 -n 20
	"
	test_expect_success "uc_pingpong -c ($place)" "
		pp_run $1 $2 ibv_uc_pingpong -c -n 300
	"
	test_expect_success "ud_pingpong -c ($place)" "
		pp_run $1 $2 ibv_ud_pingpong -c -n 300
	"
	test_expect_success "ud_pingpong -c -g 0 -e, GRH and events ($place)" "
		pp_run $1 $2 ibv_ud_pingpong -c -g 0 -e -n 300
	"
	test_expect_success "srq_pingpong -c, 16 QPs on one SRQ ($place)" "
		pp_run $1 $2 ibv_srq_pingpong -c -n 100
	"
	test_expect_success "srq_pingpong -c -e -q 4 ($place)" "
		pp_run $1 $2 ibv_srq_pingpong -c -e -q 4 -n 100
	"
done

unset SOFTIB_SHM SOFTIB_SHM_MEMBARRIER SOFTIB_LOCK_BIAS

# one side with membarrier, the other without: both must fence
test_expect_success "rc_pingpong -c, only one side uses membarrier (one host)" '
	port=$(( 34000 + $$ % 2000 )) &&
	{ SOFTIB_SHM_MEMBARRIER=0 timeout 30 ibv_rc_pingpong -c -n 300 -p $port >srv.out 2>&1 & } &&
	spid=$! &&
	ibcr_wait_for 10 pp_listening 0 $port &&
	timeout 30 ibv_rc_pingpong -c -n 300 -p $port 127.0.0.1 >cli.out 2>&1 &&
	wait $spid &&
	cat srv.out cli.out &&
	grep -q "^300 iters in" srv.out && grep -q "^300 iters in" cli.out
'

# pp_child PID: the pid of the tool that timeout PID runs
pp_child() { pgrep -P "$1" | head -n 1; }
# maps_shm PID: the tool under timeout PID maps softib's rings
maps_shm() {
	c=$(pp_child "$1") && test -n "$c" && grep -q "memfd:softib-shm" /proc/$c/maps
}
# softib_tcp PID: the tool under timeout PID has an established TCP
# connection to a softib endpoint (default port base 24576)
softib_tcp() {
	c=$(pp_child "$1") && test -n "$c" &&
	ss -Htnp state established "( dport >= :24577 and dport <= :28671 )" |
		grep -q "pid=$c,"
}
# pp_watch MODE N: an rc_pingpong -c of N iterations (long enough to be
# seen) on one host; while it runs, both ranks use shared memory (MODE
# shm) or TCP (MODE tcp) and not the other
pp_watch() {
	port=$(( 32000 + $$ % 2000 )) n=$2
	timeout 60 ibv_rc_pingpong -c -n $n -p $port >srv.out 2>srv.err &
	spid=$!
	ibcr_wait_for 10 pp_listening 0 $port || { kill $spid; return 1; }
	timeout 60 ibv_rc_pingpong -c -n $n -p $port 127.0.0.1 >cli.out 2>cli.err &
	cpid=$!
	ok=0
	if test $1 = shm; then
		ibcr_wait_for 20 maps_shm $spid && ibcr_wait_for 20 maps_shm $cpid &&
		! softib_tcp $spid && ! softib_tcp $cpid || ok=1
	else
		ibcr_wait_for 20 softib_tcp $cpid &&
		! maps_shm $spid && ! maps_shm $cpid || ok=1
	fi
	wait $cpid || ok=1
	wait $spid || ok=1
	cat srv.out cli.out srv.err cli.err
	test $ok = 0 && grep -q "^$n iters in" srv.out &&
	grep -q "^$n iters in" cli.out
}

test_expect_success 'one host: rc_pingpong traffic goes through shared rings' '
	pp_watch shm 200000
'

test_expect_success 'one host, SOFTIB_SHM=0: rc_pingpong traffic goes over TCP' '
	(SOFTIB_SHM=0 && export SOFTIB_SHM && pp_watch tcp 40000)
'

test_expect_success 'the two hosts had distinct LIDs' '
	l1=$(netns_exec 1 ibv_devinfo | sed -n "s/.*port_lid:[[:space:]]*//p") &&
	l2=$(netns_exec 2 ibv_devinfo | sed -n "s/.*port_lid:[[:space:]]*//p") &&
	test -n "$l1" && test -n "$l2" && test "$l1" != "$l2"
'

test_done
