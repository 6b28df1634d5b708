#!/bin/sh

test_description='whole-job checkpoints of a verbs job (libibcr on softib)

Debian'"'"'s ibv_rc_pingpong with buffer validation (-c), server and client
as ranks 0 and 1 of one job under "ibcr run", with libibcr preloaded and
softib as the device.  ibcrd checkpoints the job twice while it runs:
libibcr quiesces, drains exactly, releases every verbs object, CRIU dumps
both ranks with libibcr'"'"'s control socket external, libibcr rebuilds with
new real ids that are exchanged between the ranks, and the pingpong goes
on and finishes, every buffer validated.  First with both ranks on one
host, then on two network-namespace hosts with one ibcrd each (the leader
drives the member node'"'"'s phases over MUNGE).  Then the project'"'"'s own
sequence-checked stream (verbs_stream -C: RC SEND and RDMA WRITE_WITH_IMM,
every message checked for sequence number and content, totals compared
between the ranks) is checkpointed twice on two hosts, killed, and
restarted from generation 2 on the same hosts and on two others.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT CRIU NETNS IBVUTILS

SOFTIB_LIBDIR=$IBCR_BUILDDIR/lib/softib/.libs
test -e "$SOFTIB_LIBDIR/libibverbs.so.1" || error "softib is not built"
IBCR_INIT=$IBCR_BUILDDIR/ibcrd/ibcr-init
IBCR_LIBIBCR=$IBCR_BUILDDIR/lib/ibcr/.libs/libibcr.so
export IBCR_INIT IBCR_LIBIBCR
unset IBCR_SOCKET

t9_pids=
t9_track() { t9_pids="$t9_pids $*"; }
t9_cleanup() {
	for p in $t9_pids; do
		ibcrd_alive "$p" && kill -9 "$p" 2>/dev/null
	done
	for p in $t9_pids; do
		ibcrd_wait_gone "$p" 50
	done
	t9_pids=
	return 0
}
ibcr_atexit t9_cleanup

t9_wait_for() {
	i=0
	until "$@"; do
		i=$((i + 1)); test $i -lt 400 || return 1
		sleep 0.05
	done
}

# A port for the pingpong's own TCP exchange: from our pid, skipping
# ports something (another test) listens on or holds.
t9_port() {
	# Below the ephemeral range (32768-) and softib's endpoints (24576-):
	# the port is checked free here, but used inside a namespace host.
	p=$(( 12000 + ($$ * 13 + ${1:-0} * 101) % 12000 ))
	while ss -Htan "( sport = :$p )" | grep -q .; do
		p=$((p + 1))
	done
	echo $p
}
PORT=$(t9_port 0)
ITERS=150000

# t9_pp NAME RANK [ibcr-run options] -- pingpong args: one rank, in the
# background (inside $T9_ON, e.g. a host's network namespace: the whole
# task then lives there, as CRIU and that host's ibcrd do); its exit
# status lands in NAME.RANK.rc.
T9_ON=
t9_pp() {
	t9_n=$1 t9_r=$2
	shift 2
	{ ( $T9_ON env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" "$IBCR" run "$@" \
		>$t9_n.$t9_r.out 2>$t9_n.$t9_r.err; echo $? >$t9_n.$t9_r.rc ) & } &&
	t9_track $!
}

# t9_ctl N JOB LOG: N ranks of JOB have their libibcr control connection.
t9_ctl() {
	test "$(grep -c "job $2 step 0: rank [0-9]* pid [0-9]*: libibcr control connection$" "$3")" -ge "$1"
}

t9_done() {
	test -s $1.0.rc && test -s $1.1.rc
}

# Until both ranks of NAME ended, at most 120 s (the pingpong runs ~20 s).
t9_wait_done() {
	i=0
	until t9_done $1; do
		i=$((i + 1)); test $i -lt 1200 || return 1
		sleep 0.1
	done
}

test_expect_success 'setup: ibcrd' '
	ibcrd_setup d "criu = $IBCR_CRIU" "peer_port = 0" &&
	ibcrd_start d &&
	IBCR_SOCKET=$(ibcrd_sock d) && export IBCR_SOCKET
'

test_expect_success 'one host: two checkpoints while rc_pingpong -c runs' '
	t9_pp pp 0 --job pp --rank 0 --size 2 -- ibv_rc_pingpong -c -n $ITERS -p $PORT &&
	sleep 0.3 &&
	t9_pp pp 1 --job pp --rank 1 --size 2 -- ibv_rc_pingpong -c -n $ITERS -p $PORT 127.0.0.1 &&
	t9_wait_for t9_ctl 2 pp d/ibcrd.log &&
	sleep 0.5 &&
	"$IBCR" checkpoint pp --wait &&
	sleep 0.5 &&
	"$IBCR" checkpoint pp --wait &&
	! t9_done pp &&
	grep -c "ctl_ino" d/storage/local/pp/gen-2/manifest.json >n && test "$(cat n)" -eq 2 &&
	grep "job pp gen 2: dumped and resumed .*drain .* in [1-9][0-9]* rounds" d/ibcrd.log &&
	grep "job pp gen 2: rank 0: criu dump .*(libibcr control socket external)" d/ibcrd.log &&
	t9_wait_done pp &&
	cat pp.0.out pp.1.out pp.0.err pp.1.err &&
	test "$(cat pp.0.rc)" = 0 && test "$(cat pp.1.rc)" = 0 &&
	grep "^$ITERS iters in" pp.0.out && grep "^$ITERS iters in" pp.1.out &&
	"$IBCR" verify pp
'

# t9_restart NAME RANK ARGS: ibcr restart in the background, status to
# NAME.RANK.rc.
t9_restart() {
	t9_n=$1 t9_r=$2
	shift 2
	{ ( $T9_ON env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" "$IBCR" restart "$@" \
		>$t9_n.$t9_r.out 2>$t9_n.$t9_r.err; echo $? >$t9_n.$t9_r.rc ) & } &&
	t9_track $!
}

# t9_status_field JOB KEY: KEY of every task of JOB (not the daemon's).
t9_status_field() {
	"$IBCR" status "$1" --json | sed "s/.*\"tasks\"://" | grep -o "\"$2\":[0-9]*" |
		sed "s/.*://"
}

test_expect_success 'one host: checkpoint twice, kill both ranks, restart both from generation 2' '
	P=$(t9_port 1) &&
	t9_pp rs 0 --job rs --rank 0 --size 2 -- ibv_rc_pingpong -c -n $ITERS -p $P &&
	sleep 0.3 &&
	t9_pp rs 1 --job rs --rank 1 --size 2 -- ibv_rc_pingpong -c -n $ITERS -p $P 127.0.0.1 &&
	t9_wait_for t9_ctl 2 rs d/ibcrd.log &&
	sleep 0.5 &&
	"$IBCR" checkpoint rs --wait &&
	sleep 0.5 &&
	"$IBCR" checkpoint rs --wait &&
	pids=$(t9_status_field rs pid) && apps=$(t9_status_field rs app_pid) &&
	t9_track $pids $apps &&
	kill -9 $pids &&
	for p in $apps; do ibcrd_wait_gone $p || return 1; done &&
	t9_wait_done rs &&
	mkdir first && mv rs.* first/ &&
	t9_restart rs 0 rs --rank 0 &&
	t9_restart rs 1 rs --rank 1 &&
	t9_wait_for grep -q "restored from generation 2" rs.0.err &&
	t9_wait_for grep -q "restored from generation 2" rs.1.err &&
	t9_wait_for grep -q "job rs: restored tasks rebuilt and resumed" d/ibcrd.log &&
	t9_wait_done rs &&
	cat rs.0.out rs.1.out rs.0.err rs.1.err &&
	test "$(cat rs.0.rc)" = 0 && test "$(cat rs.1.rc)" = 0 &&
	grep "^$ITERS iters in" rs.0.out && grep "^$ITERS iters in" rs.1.out
'

# --- two hosts ---------------------------------------------------------

t9_ibcrd() {
	ibcrd_setup h$1 "node = n$1" "peer_port = 7195" "munge_socket = $MSOCK" \
		"criu = $IBCR_CRIU" "storage = $PWD/shared" &&
	sed -i "/^storage = .*h$1\/storage$/d" h$1/ibcrd.conf &&
	{ netns_exec $1 "$IBCRD" -F -c "$PWD/h$1/ibcrd.conf" -v 2>>h$1/ibcrd.log & } &&
	echo $! >h$1/launch.pid &&
	ibcr_atexit ibcrd_stop h$1 &&
	t9_wait_for test -S h$1/run/ibcrd.sock
}

test_expect_success 'setup: four hosts, munged, one ibcrd each' '
	netns_create 4 &&
	ibcrd_munged_start m &&
	MSOCK=$PWD/m/sock/munge.socket &&
	mkdir shared &&
	t9_ibcrd 1 && t9_ibcrd 2 && t9_ibcrd 3 && t9_ibcrd 4
'

test_expect_success 'two hosts: two checkpoints led by rank 0'"'"'s ibcrd while rc_pingpong -c runs' '
	L="n1@$(netns_ip 1)" &&
	T9_ON="nsenter --net=/run/netns/$(netns_name 1)" IBCR_SOCKET=$(ibcrd_sock h1) \
		t9_pp mh 0 --job mh --rank 0 --size 2 --leader $L -- \
		ibv_rc_pingpong -c -n $ITERS -p $PORT &&
	sleep 0.3 &&
	T9_ON="nsenter --net=/run/netns/$(netns_name 2)" IBCR_SOCKET=$(ibcrd_sock h2) \
		t9_pp mh 1 --job mh --rank 1 --size 2 --leader $L -- \
		ibv_rc_pingpong -c -n $ITERS -p $PORT $(netns_ip 1) &&
	t9_wait_for grep -q "job mh: node n2 (.*) joined with rank 1" h1/ibcrd.log &&
	t9_wait_for t9_ctl 1 mh h1/ibcrd.log &&
	t9_wait_for t9_ctl 1 mh h2/ibcrd.log &&
	sleep 0.5 &&
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" checkpoint mh --wait &&
	sleep 0.5 &&
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" checkpoint mh --wait &&
	! t9_done mh &&
	grep "job mh gen 2: dumped and resumed .*drain .* in [1-9][0-9]* rounds" h1/ibcrd.log &&
	grep "job mh gen 2: member worker" h2/ibcrd.log &&
	t9_wait_done mh &&
	cat mh.0.out mh.1.out mh.0.err mh.1.err &&
	test "$(cat mh.0.rc)" = 0 && test "$(cat mh.1.rc)" = 0 &&
	grep "^$ITERS iters in" mh.0.out && grep "^$ITERS iters in" mh.1.out &&
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" verify mh
'

# t9_on I: run in host I's network namespace.
t9_on() {
	echo "nsenter --net=/run/netns/$(netns_name $1)"
}

test_expect_success 'two hosts: checkpoint twice, kill both ranks, restart both on the same hosts' '
	L="n1@$(netns_ip 1)" && P=$(t9_port 2) &&
	T9_ON=$(t9_on 1) IBCR_SOCKET=$(ibcrd_sock h1) \
		t9_pp mr 0 --job mr --rank 0 --size 2 --leader $L -- ibv_rc_pingpong -c -n $ITERS -p $P &&
	sleep 0.3 &&
	T9_ON=$(t9_on 2) IBCR_SOCKET=$(ibcrd_sock h2) \
		t9_pp mr 1 --job mr --rank 1 --size 2 --leader $L -- \
		ibv_rc_pingpong -c -n $ITERS -p $P $(netns_ip 1) &&
	t9_wait_for grep -q "job mr: node n2 (.*) joined with rank 1" h1/ibcrd.log &&
	t9_wait_for t9_ctl 1 mr h1/ibcrd.log && t9_wait_for t9_ctl 1 mr h2/ibcrd.log &&
	sleep 0.5 &&
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" checkpoint mr --wait &&
	sleep 0.5 &&
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" checkpoint mr --wait &&
	k0=$(IBCR_SOCKET=$(ibcrd_sock h1) t9_status_field mr pid) &&
	k1=$(IBCR_SOCKET=$(ibcrd_sock h2) t9_status_field mr pid) &&
	a0=$(IBCR_SOCKET=$(ibcrd_sock h1) t9_status_field mr app_pid) &&
	a1=$(IBCR_SOCKET=$(ibcrd_sock h2) t9_status_field mr app_pid) &&
	t9_track $k0 $k1 $a0 $a1 &&
	kill -9 $k0 $k1 &&
	ibcrd_wait_gone $a0 && ibcrd_wait_gone $a1 &&
	t9_wait_done mr &&
	mkdir mr-first && mv mr.* mr-first/ &&
	T9_ON=$(t9_on 1) IBCR_SOCKET=$(ibcrd_sock h1) t9_restart mr 0 mr --rank 0 --leader $L &&
	T9_ON=$(t9_on 2) IBCR_SOCKET=$(ibcrd_sock h2) t9_restart mr 1 mr --rank 1 --leader $L &&
	t9_wait_for grep -q "restored from generation 2" mr.0.err &&
	t9_wait_for grep -q "restored from generation 2" mr.1.err &&
	t9_wait_done mr &&
	cat mr.0.out mr.1.out mr.0.err mr.1.err &&
	grep "job mr: restored tasks rebuilt and resumed" h1/ibcrd.log &&
	test "$(cat mr.0.rc)" = 0 && test "$(cat mr.1.rc)" = 0 &&
	grep "^$ITERS iters in" mr.0.out && grep "^$ITERS iters in" mr.1.out
'

test_expect_success 'and again from generation 2 on two other hosts (other IPs, LIDs, QPNs)' '
	mkdir mr-same && mv mr.* mr-same/ &&
	L="n3@$(netns_ip 3)" &&
	T9_ON=$(t9_on 3) IBCR_SOCKET=$(ibcrd_sock h3) t9_restart mr 0 mr --rank 0 --gen 2 --leader $L &&
	T9_ON=$(t9_on 4) IBCR_SOCKET=$(ibcrd_sock h4) t9_restart mr 1 mr --rank 1 --gen 2 --leader $L &&
	t9_wait_for grep -q "restored from generation 2" mr.0.err &&
	t9_wait_for grep -q "restored from generation 2" mr.1.err &&
	t9_wait_done mr &&
	cat mr.0.out mr.1.out mr.0.err mr.1.err &&
	grep "job mr: node n4 (.*) joined with rank 1" h3/ibcrd.log &&
	grep "job mr: restored tasks rebuilt and resumed" h3/ibcrd.log &&
	test "$(cat mr.0.rc)" = 0 && test "$(cat mr.1.rc)" = 0 &&
	grep "^$ITERS iters in" mr.0.out && grep "^$ITERS iters in" mr.1.out
'


# --- the sequence-checked stream (verbs_stream -C) ---------------------

VS=$IBCR_BUILDDIR/t/softib/verbs_stream
test -x "$VS" || error "t/softib/verbs_stream is not built"
# Two QPs per rank, paced so that the run (about 30 s unhindered)
# outlasts two checkpoints; the watchdog (-T) must outlast the kill and
# both restarts.
VS_N=30000 VS_RATE=1000 VS_QPS=2
VS_MSGS=$((VS_N * VS_QPS))

# t9_vs_line NAME RANK: the OK totals a rank printed (without timing).
t9_vs_line() {
	sed -n "s/^\(OK msgs=[0-9]* bytes=[0-9]* checksum=[0-9a-f]*\) .*/\1/p" $1.$2.out
}

# t9_vs_ok NAME: both ranks exited 0 and printed the same totals, with
# every message of every QP counted exactly once.
t9_vs_ok() {
	cat $1.0.out $1.1.out $1.0.err $1.1.err &&
	test "$(cat $1.0.rc)" = 0 && test "$(cat $1.1.rc)" = 0 &&
	l0=$(t9_vs_line $1 0) && l1=$(t9_vs_line $1 1) &&
	test -n "$l0" && test "$l0" = "$l1" &&
	echo "$l0" | grep "^OK msgs=$VS_MSGS bytes=$((VS_MSGS * 4096)) " &&
	grep "role=server" $1.0.out && grep "role=client" $1.1.out
}

# t9_vs_restart NAME LEADER-HOST MEMBER-HOST [restart options]: restore
# both ranks of NAME on two namespace hosts, wait until both ended.
t9_vs_restart() {
	t9_vn=$1 t9_l=$2 t9_m=$3
	shift 3
	L="n$t9_l@$(netns_ip $t9_l)" &&
	T9_ON=$(t9_on $t9_l) IBCR_SOCKET=$(ibcrd_sock h$t9_l) \
		t9_restart $t9_vn 0 $t9_vn --rank 0 --leader $L "$@" &&
	T9_ON=$(t9_on $t9_m) IBCR_SOCKET=$(ibcrd_sock h$t9_m) \
		t9_restart $t9_vn 1 $t9_vn --rank 1 --leader $L "$@" &&
	t9_wait_for grep -q "restored from generation 2" $t9_vn.0.err &&
	t9_wait_for grep -q "restored from generation 2" $t9_vn.1.err &&
	t9_wait_done $t9_vn &&
	grep "job $t9_vn: restored tasks rebuilt and resumed" h$t9_l/ibcrd.log
}

# t9_vs_case OP PORTNUM: the whole scenario for one opcode, job vs-OP,
# the stream's start-up exchange on t9_port PORTNUM.
t9_vs_case() {
	op=$1 j=vs-$1 P=$(t9_port $2) &&
	L="n1@$(netns_ip 1)" &&
	T9_ON=$(t9_on 1) IBCR_SOCKET=$(ibcrd_sock h1) \
		t9_pp $j 0 --job $j --rank 0 --size 2 --leader $L -- \
		"$VS" -C -T 900 -p $P &&
	sleep 0.3 &&
	T9_ON=$(t9_on 2) IBCR_SOCKET=$(ibcrd_sock h2) \
		t9_pp $j 1 --job $j --rank 1 --size 2 --leader $L -- \
		"$VS" -C -T 900 -o $op -n $VS_N -q $VS_QPS -r $VS_RATE -p $P $(netns_ip 1) &&
	t9_wait_for grep -q "job $j: node n2 (.*) joined with rank 1" h1/ibcrd.log &&
	t9_wait_for t9_ctl 1 $j h1/ibcrd.log && t9_wait_for t9_ctl 1 $j h2/ibcrd.log &&
	t9_wait_for grep -q "server: checkpointable" $j.0.err &&
	t9_wait_for grep -q "client: checkpointable" $j.1.err &&
	sleep 0.5 &&
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" checkpoint $j --wait &&
	sleep 0.5 &&
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" checkpoint $j --wait &&
	! t9_done $j &&
	grep "job $j gen 2: dumped and resumed .*drain .* in [1-9][0-9]* rounds" h1/ibcrd.log &&
	k0=$(IBCR_SOCKET=$(ibcrd_sock h1) t9_status_field $j pid) &&
	k1=$(IBCR_SOCKET=$(ibcrd_sock h2) t9_status_field $j pid) &&
	a0=$(IBCR_SOCKET=$(ibcrd_sock h1) t9_status_field $j app_pid) &&
	a1=$(IBCR_SOCKET=$(ibcrd_sock h2) t9_status_field $j app_pid) &&
	t9_track $k0 $k1 $a0 $a1 &&
	kill -9 $k0 $k1 &&
	ibcrd_wait_gone $a0 && ibcrd_wait_gone $a1 &&
	t9_wait_done $j &&
	! grep "^OK" $j.0.out $j.1.out &&
	mkdir $j-first && mv $j.* $j-first/ &&
	t9_vs_restart $j 1 2 &&
	t9_vs_ok $j &&
	mkdir $j-same && mv $j.* $j-same/ &&
	t9_vs_restart $j 3 4 --gen 2 &&
	grep "job $j: node n4 (.*) joined with rank 1" h3/ibcrd.log &&
	t9_vs_ok $j &&
	test "$(t9_vs_line $j 0)" = "$(t9_vs_line $j-same/$j 0)"
}

test_expect_success 'verbs_stream -C RC SEND, two hosts: two checkpoints, kill, restart from generation 2 on the same hosts, then on two others: every message verified once' '
	t9_vs_case send 3
'

test_expect_success 'verbs_stream -C RC RDMA WRITE_WITH_IMM: the same' '
	t9_vs_case write_imm 4
'

test_done
