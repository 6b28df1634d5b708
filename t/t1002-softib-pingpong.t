#!/bin/sh
test_description='softib: Debian'"'"'s ibv_*_pingpong with validation

ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong and ibv_srq_pingpong,
unmodified, run with -c (the receiver checks every buffer) between two
processes on one host and between two network-namespace hosts, polling
and with completion events, with the classic and the ibv_wr_* send API,
addressed by LID and by GID.'

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

for where in "0 0" "1 2"; do
	set -- $where
	if test "$1" = 0; then place="one host"; else place="two netns hosts"; fi
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

test_expect_success 'the two hosts had distinct LIDs' '
	l1=$(netns_exec 1 ibv_devinfo | sed -n "s/.*port_lid:[[:space:]]*//p") &&
	l2=$(netns_exec 2 ibv_devinfo | sed -n "s/.*port_lid:[[:space:]]*//p") &&
	test -n "$l1" && test -n "$l2" && test "$l1" != "$l2"
'

test_done
