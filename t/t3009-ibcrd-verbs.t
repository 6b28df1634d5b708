#!/bin/sh

test_description='whole-job checkpoints of a verbs job (libibcr on softib)

Debian'"'"'s ibv_rc_pingpong with buffer validation (-c), server and client
as ranks 0 and 1 of one job under "ibcr run", with libibcr preloaded and
softib as the device.  ibcrd checkpoints the job twice while it runs:
libibcr quiesces, drains exactly, releases every verbs object, CRIU dumps
both ranks with libibcr'"'"'s control socket external, libibcr rebuilds with
new real ids that are exchanged between the ranks, and the pingpong goes
on and finishes, every buffer validated.  First with both ranks on one
host (where softib carries the pingpong through shared-memory rings,
checked before the checkpoints, after them and after a restart: the
dumps hold none of it, the rebuilt QPs map new rings), then on two network-namespace hosts with one ibcrd each (the leader
drives the member node'"'"'s phases over MUNGE).  Then the project'"'"'s own
sequence-checked stream (verbs_stream -C: RC SEND and RDMA WRITE_WITH_IMM,
every message checked for sequence number and content, totals compared
between the ranks) is checkpointed twice on two hosts, killed, and
restarted from generation 2 on the same hosts and on two others.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT CRIU NETNS IBVUTILS PYTHON3

SOFTIB_LIBDIR=$IBCR_BUILDDIR/lib/softib/.libs
test -e "$SOFTIB_LIBDIR/libibverbs.so.1" || error "softib is not built"
ibcrd_use_build
unset IBCR_SOCKET

PORT=$(ibcrd_free_port 0)
ITERS=150000
# On one host softib goes through shared memory, about 1.3 us per
# iteration here (0.2 s for ITERS): enough to run through two checkpoints
# on a fast machine, and to end within t9_wait_done under load.
ONE_ITERS=8000000

# t9_last_gen_is DAEMON JOB N: that ibcrd says JOB's last committed
# generation (its part of it) is N.
t9_last_gen_is() {
	test "$(IBCR_SOCKET=$(ibcrd_sock $1) "$IBCR" status $2 --json 2>/dev/null |
		ibcrd_json_job last_gen)" = "$3"
}

# t9_drained DAEMON JOB GEN: that ibcrd (the job's leader) says JOB's
# last generation is GEN, committed, its own drain taking at least one
# round (the timeline counts the rounds it answered).
t9_drained() {
	IBCR_SOCKET=$(ibcrd_sock $1) "$IBCR" status $2 --json | /usr/bin/python3 -c '
import json, sys
lg = json.load(sys.stdin)["job"]["last_generation"]
assert lg["generation"] == int(sys.argv[1]) and lg["result"] == "committed", lg
me = [n for n in lg["timeline"]["nodes"] if n["leader"]][0]
print("drain rounds:", me["phases"]["drain"]["count"])
assert me["phases"]["drain"]["count"] >= 1, me
' $3
}

t9_done() {
	test -s $1.0.rc && test -s $1.1.rc
}

# t9_pp_ok NAME: both pingpong ranks of NAME exited 0 after all $ITERS
# iterations (every buffer validated: -c); their output goes to the log.
t9_pp_ok() {
	cat $1.0.out $1.1.out $1.0.err $1.1.err &&
	test "$(cat $1.0.rc)" = 0 && test "$(cat $1.1.rc)" = 0 &&
	grep "^${2:-$ITERS} iters in" $1.0.out && grep "^${2:-$ITERS} iters in" $1.1.out
}

# t9_let_run: the pingpong goes on for half a second before (and between)
# checkpoints.  A fixed time on purpose: the point is to checkpoint in the
# middle of the traffic, and nothing outside the ranks marks that middle.
t9_let_run() {
	sleep 0.5
}

# t9_resumed JOB N: N tasks of JOB, none of them still held as restored
# (the rebuild resumed them), and no generation running.
t9_resumed() {
	t9_st=$("$IBCR" status $1 --json 2>/dev/null) &&
	test "$(echo "$t9_st" | grep -o "\"restored\":false" | wc -l)" = "$2" &&
	echo "$t9_st" | grep -q "\"checkpointing\":false"
}

# t9_shm JOB: every rank of JOB maps softib's same-host rings (the
# pingpong on one host goes through shared memory, also after a rebuild)
t9_shm() {
	t9_apps=$("$IBCR" status $1 --json | /usr/bin/python3 -c '
import json, sys
tasks = json.load(sys.stdin)["job"]["tasks"]
print(" ".join(str(p) for t in tasks for p in t.get("verbs_pids", [t["app_pid"]])))
') && test -n "$t9_apps" &&
	for p in $t9_apps; do
		grep -q "memfd:softib-shm" /proc/$p/maps || return 1
	done
}

# t9_kill_ranks NAME DIR: kill both ranks of the one-host job NAME (their
# inits, so the whole task) and wait until they and their launchers are
# gone; their launchers' output goes to DIR, for the restart's own.
t9_kill_ranks() {
	t9_kr_pids=$(ibcrd_task_fields $1 pid) && t9_kr_apps=$(ibcrd_task_fields $1 app_pid) &&
	ibcr_track $t9_kr_pids $t9_kr_apps &&
	kill -9 $t9_kr_pids &&
	for p in $t9_kr_apps; do ibcrd_wait_gone $p || return 1; done &&
	t9_wait_done $1 &&
	mkdir $2 && mv $1.* $2/
}

# Until both ranks of NAME ended, at most 600 s: ONE_ITERS takes about
# 10 s on a quiet machine, and 20 times that was seen with other test
# suites sharing its 2 cores (a wait on the condition: the bound only
# matters when the ranks hang).
t9_wait_done() {
	ibcr_wait_for 600 t9_done "$1" ||
		{ echo "pingpong $1: the ranks did not both end within 600 s" >&2; return 1; }
}

test_expect_success 'setup: ibcrd' '
	ibcrd_setup d "criu = $IBCR_CRIU" "peer_port = 0" &&
	ibcrd_start d &&
	IBCR_SOCKET=$(ibcrd_sock d) && export IBCR_SOCKET
'

test_expect_success 'one host: two checkpoints while rc_pingpong -c runs' '
	ibcrd_pingpong pp pp $PORT $ONE_ITERS &&
	t9_let_run &&
	ibcrd_wait_for t9_shm pp &&
	"$IBCR" checkpoint pp --wait &&
	t9_let_run &&
	"$IBCR" checkpoint pp --wait &&
	ibcrd_wait_for t9_shm pp &&
	! t9_done pp &&
	grep -c "\"ctl_ino\"" d/storage/local/pp/gen-2/manifest.json >n && test "$(cat n)" -eq 2 &&
	t9_drained d pp 2 &&
	t9_wait_done pp &&
	t9_pp_ok pp $ONE_ITERS &&
	"$IBCR" verify pp
'

test_expect_success 'one host: checkpoint twice, kill both ranks, restart both from generation 2' '
	P=$(ibcrd_free_port 1) &&
	ibcrd_pingpong rs rs $P $ONE_ITERS &&
	t9_let_run &&
	"$IBCR" checkpoint rs --wait &&
	t9_let_run &&
	"$IBCR" checkpoint rs --wait &&
	t9_kill_ranks rs first &&
	ibcrd_bg rs 0 restart rs --rank 0 &&
	ibcrd_bg rs 1 restart rs --rank 1 &&
	ibcrd_wait_for grep -q "restored from generation 2" rs.0.err &&
	ibcrd_wait_for grep -q "restored from generation 2" rs.1.err &&
	ibcrd_wait_for t9_resumed rs 2 &&
	ibcrd_wait_for t9_shm rs &&
	t9_wait_done rs &&
	t9_pp_ok rs $ONE_ITERS
'

# Each rank picks its generation (the newest intact one, or --gen): ranks
# that picked different ones (a commit landing between two ranks'
# restores, a generation one rank could not read for a moment) must not
# run on together.
test_expect_success 'one host: ranks restored from different generations are not resumed, and said so' '
	P=$(ibcrd_free_port 3) &&
	ibcrd_pingpong mx mx $P $ONE_ITERS &&
	t9_let_run &&
	"$IBCR" checkpoint mx --wait &&
	t9_let_run &&
	"$IBCR" checkpoint mx --wait &&
	t9_kill_ranks mx mx-first &&
	ibcrd_bg mx 0 restart mx --rank 0 --gen 2 &&
	ibcrd_bg mx 1 restart mx --rank 1 --gen 1 &&
	t9_wait_done mx &&
	cat mx.0.err mx.1.err &&
	test "$(cat mx.0.rc)" != 0 && test "$(cat mx.1.rc)" != 0 &&
	grep "ranks were restored from different generations: rank [01] from generation [12], rank [01] from generation [12]" mx.0.err mx.1.err &&
	pids=$(sed -n "s/.*restored from generation [12] (init pid \([0-9]*\), application pid \([0-9]*\))$/\1 \2/p" mx.0.err mx.1.err) &&
	test $(echo $pids | wc -w) = 4 && ibcr_track $pids &&
	for p in $pids; do ibcrd_wait_gone $p || return 1; done
'

# t9_settled NAME: both ranks ended, or rank 1's restart failed
t9_settled() {
	t9_done $1 || { test -s $1.1.rc && test "$(cat $1.1.rc)" != 0; }
}

# Slurm's restarter and ibcr restart register a restored task, then ask for
# its rebuild.  The last rank to register completes the job, so another
# rank's request can start the rebuild, and it can end, between the two:
# that late request is answered (its task is resumed), not refused.  Here
# rank 1's restarter (--stopped) is held between the two while rank 0's
# request rebuilds both ranks.
# Each rank checks its own images only (a restore of R ranks reads the
# generation once, not R times): one that finds its images of the newest
# generation damaged after the other rank picked it falls back alone.  The
# two are not resumed, told why, and the generation is marked: the next
# restart of both passes it by, and the pingpong ends validated.
test_expect_success 'one host: rank 1 finds its newest images damaged after rank 0 picked them: not resumed, marked, and a second restart resumes both from the older generation' '
	P=$(ibcrd_free_port 4) &&
	ibcrd_pingpong md md $P $ONE_ITERS &&
	t9_let_run &&
	"$IBCR" checkpoint md --wait &&
	t9_let_run &&
	"$IBCR" checkpoint md --wait &&
	t9_kill_ranks md md-first &&
	f=$(ls -S d/storage/local/md/gen-2/task-1/pages-*.img | head -n 1) &&
	b=$(od -An -tu1 -j 4096 -N1 "$f" | tr -d " ") &&
	printf "\\$(printf %o $(( (b + 1) % 256 )))" |
		dd of="$f" bs=1 seek=4096 conv=notrunc 2>/dev/null &&
	ibcrd_bg md 0 restart md --rank 0 &&
	ibcrd_wait_for grep -q "restored from generation 2" md.0.err &&
	ibcrd_bg md 1 restart md --rank 1 &&
	t9_wait_done md &&
	cat md.0.err md.1.err &&
	test "$(cat md.0.rc)" != 0 && test "$(cat md.1.rc)" != 0 &&
	grep "generation 2 is damaged (task-1/pages-.*: checksum mismatch), falling back" md.1.err &&
	grep "restored from generation 1" md.1.err &&
	grep "rank [01] from generation [12], rank [01] from generation [12], as generation 2 was found damaged (task-1/pages-.*: checksum mismatch) after some ranks had picked it; not resumed, restart it" md.0.err md.1.err &&
	"$IBCR" list md >list.out && cat list.out &&
	grep "^2 .*DAMAGED (task-1/pages-.*: checksum mismatch): never restored" list.out &&
	test_expect_code 5 "$IBCR" verify md --gen 2 >v.out && cat v.out &&
	grep "^  (marked by a restore: task-1/pages-.*: checksum mismatch)" v.out &&
	pids=$(sed -n "s/.*restored from generation [12] (init pid \([0-9]*\), application pid \([0-9]*\))$/\1 \2/p" md.0.err md.1.err) &&
	test $(echo $pids | wc -w) = 4 && ibcr_track $pids &&
	for p in $pids; do ibcrd_wait_gone $p || return 1; done &&
	mkdir md-second && mv md.* md-second/ &&
	ibcrd_bg md 0 restart md --rank 0 &&
	ibcrd_bg md 1 restart md --rank 1 &&
	ibcrd_wait_for grep -q "restored from generation 1" md.0.err &&
	ibcrd_wait_for grep -q "restored from generation 1" md.1.err &&
	grep "generation 2 is damaged (task-1/pages-.*: checksum mismatch), falling back" md.0.err &&
	ibcrd_wait_for t9_resumed md 2 &&
	t9_wait_done md &&
	t9_pp_ok md $ONE_ITERS
'

test_expect_success 'one host: a restored rank that asks for its rebuild after it ended runs on' '
	P=$(ibcrd_free_port 2) &&
	ibcrd_pingpong lr lr $P 3000000 &&
	t9_let_run &&
	"$IBCR" checkpoint lr --wait &&
	t9_kill_ranks lr lr-first &&
	ibcrd_bg lr 1 restart lr --rank 1 --stopped &&
	bg1=$! &&
	ibcrd_wait_for grep -q "stopped: init" lr.1.out &&
	init1=$(sed -n "s/.*stopped: init \([0-9]*\) application [0-9]*$/\1/p" lr.1.out) &&
	app1=$(sed -n "s/.*stopped: init [0-9]* application \([0-9]*\)$/\1/p" lr.1.out) &&
	test -n "$init1" && test -n "$app1" && ibcr_track $init1 $app1 &&
	cli1=$(pgrep -P $bg1 -x ibcr) && test -n "$cli1" && ibcr_track $cli1 &&
	kill -STOP $cli1 &&
	ibcrd_bg lr 0 restart lr --rank 0 &&
	ibcrd_wait_for grep -q "restored from generation 1" lr.0.err &&
	tree0=$(sed -n "s/.*restored from generation 1 (init pid \([0-9]*\), application pid \([0-9]*\))$/\1 \2/p" lr.0.err) &&
	test -n "$tree0" && ibcr_track $tree0 &&
	kill -CONT $app1 &&
	ibcrd_wait_for t9_resumed lr 2 &&
	kill -CONT $cli1 &&
	ibcr_wait_for 600 t9_settled lr &&
	t9_pp_ok lr 3000000
'

# --- two hosts ---------------------------------------------------------

test_expect_success 'setup: four hosts, munged, one ibcrd each' '
	netns_create 4 &&
	ibcrd_munged_start m &&
	MSOCK=$(ibcrd_munge_sock m) &&
	ibcrd_host_start 1 "$MSOCK" && ibcrd_host_start 2 "$MSOCK" &&
	ibcrd_host_start 3 "$MSOCK" && ibcrd_host_start 4 "$MSOCK"
'

test_expect_success 'two hosts: two checkpoints led by rank 0'"'"'s ibcrd while rc_pingpong -c runs' '
	L="n1@$(netns_ip 1)" &&
	IBCRD_ON=$(ibcrd_on 1) IBCR_SOCKET=$(ibcrd_sock h1) \
		ibcrd_bg mh 0 run --job mh --rank 0 --size 2 --leader $L -- \
		ibv_rc_pingpong -c -n $ITERS -p $PORT &&
	ibcrd_wait_for ibcrd_listening $PORT 1 &&
	IBCRD_ON=$(ibcrd_on 2) IBCR_SOCKET=$(ibcrd_sock h2) \
		ibcrd_bg mh 1 run --job mh --rank 1 --size 2 --leader $L -- \
		ibv_rc_pingpong -c -n $ITERS -p $PORT $(netns_ip 1) &&
	ibcrd_wait_for ibcrd_joined h1 mh n2 1 &&
	ibcrd_wait_for ibcrd_ctl 1 mh h1 &&
	ibcrd_wait_for ibcrd_ctl 1 mh h2 &&
	t9_let_run &&
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" checkpoint mh --wait &&
	t9_let_run &&
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" checkpoint mh --wait &&
	! t9_done mh &&
	t9_drained h1 mh 2 &&
	ibcrd_wait_for t9_last_gen_is h2 mh 2 &&
	t9_wait_done mh &&
	t9_pp_ok mh &&
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" verify mh
'

test_expect_success 'two hosts: checkpoint twice, kill both ranks, restart both on the same hosts' '
	L="n1@$(netns_ip 1)" && P=$(ibcrd_free_port 2) &&
	IBCRD_ON=$(ibcrd_on 1) IBCR_SOCKET=$(ibcrd_sock h1) \
		ibcrd_bg mr 0 run --job mr --rank 0 --size 2 --leader $L -- ibv_rc_pingpong -c -n $ITERS -p $P &&
	ibcrd_wait_for ibcrd_listening $P 1 &&
	IBCRD_ON=$(ibcrd_on 2) IBCR_SOCKET=$(ibcrd_sock h2) \
		ibcrd_bg mr 1 run --job mr --rank 1 --size 2 --leader $L -- \
		ibv_rc_pingpong -c -n $ITERS -p $P $(netns_ip 1) &&
	ibcrd_wait_for ibcrd_joined h1 mr n2 1 &&
	ibcrd_wait_for ibcrd_ctl 1 mr h1 && ibcrd_wait_for ibcrd_ctl 1 mr h2 &&
	t9_let_run &&
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" checkpoint mr --wait &&
	t9_let_run &&
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" checkpoint mr --wait &&
	k0=$(IBCR_SOCKET=$(ibcrd_sock h1) ibcrd_task_fields mr pid) &&
	k1=$(IBCR_SOCKET=$(ibcrd_sock h2) ibcrd_task_fields mr pid) &&
	a0=$(IBCR_SOCKET=$(ibcrd_sock h1) ibcrd_task_fields mr app_pid) &&
	a1=$(IBCR_SOCKET=$(ibcrd_sock h2) ibcrd_task_fields mr app_pid) &&
	ibcr_track $k0 $k1 $a0 $a1 &&
	ibcr_kill 9 $k0 $k1 &&
	ibcrd_wait_gone $a0 && ibcrd_wait_gone $a1 &&
	t9_wait_done mr &&
	mkdir mr-first && mv mr.* mr-first/ &&
	IBCRD_ON=$(ibcrd_on 1) IBCR_SOCKET=$(ibcrd_sock h1) ibcrd_bg mr 0 restart mr --rank 0 --leader $L &&
	IBCRD_ON=$(ibcrd_on 2) IBCR_SOCKET=$(ibcrd_sock h2) ibcrd_bg mr 1 restart mr --rank 1 --leader $L &&
	ibcrd_wait_for grep -q "restored from generation 2" mr.0.err &&
	ibcrd_wait_for grep -q "restored from generation 2" mr.1.err &&
	t9_wait_done mr &&
	t9_pp_ok mr
'

test_expect_success 'and again from generation 2 on two other hosts (other IPs, LIDs, QPNs)' '
	mkdir mr-same && mv mr.* mr-same/ &&
	L="n3@$(netns_ip 3)" &&
	IBCRD_ON=$(ibcrd_on 3) IBCR_SOCKET=$(ibcrd_sock h3) ibcrd_bg mr 0 restart mr --rank 0 --gen 2 --leader $L &&
	IBCRD_ON=$(ibcrd_on 4) IBCR_SOCKET=$(ibcrd_sock h4) ibcrd_bg mr 1 restart mr --rank 1 --gen 2 --leader $L &&
	ibcrd_wait_for grep -q "restored from generation 2" mr.0.err &&
	ibcrd_wait_for grep -q "restored from generation 2" mr.1.err &&
	t9_wait_done mr &&
	t9_pp_ok mr
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
	IBCRD_ON=$(ibcrd_on $t9_l) IBCR_SOCKET=$(ibcrd_sock h$t9_l) \
		ibcrd_bg $t9_vn 0 restart $t9_vn --rank 0 --leader $L "$@" &&
	IBCRD_ON=$(ibcrd_on $t9_m) IBCR_SOCKET=$(ibcrd_sock h$t9_m) \
		ibcrd_bg $t9_vn 1 restart $t9_vn --rank 1 --leader $L "$@" &&
	ibcrd_wait_for grep -q "restored from generation 2" $t9_vn.0.err &&
	ibcrd_wait_for grep -q "restored from generation 2" $t9_vn.1.err &&
	t9_wait_done $t9_vn
}

# t9_vs_case OP PORTNUM [NAME VS-OPTIONS...]: the whole scenario for one
# opcode, job vs-OP (or vs-NAME), the stream's start-up exchange on
# ibcrd_free_port PORTNUM, both ends with VS-OPTIONS.
t9_vs_case() {
	op=$1 j=vs-${3:-$1} P=$(ibcrd_free_port $2) &&
	shift 2 && { test $# = 0 || shift; } &&
	L="n1@$(netns_ip 1)" &&
	IBCRD_ON=$(ibcrd_on 1) IBCR_SOCKET=$(ibcrd_sock h1) \
		ibcrd_bg $j 0 run --job $j --rank 0 --size 2 --leader $L -- \
		"$VS" -C -T 900 "$@" -p $P &&
	ibcrd_wait_for ibcrd_listening $P 1 &&
	IBCRD_ON=$(ibcrd_on 2) IBCR_SOCKET=$(ibcrd_sock h2) \
		ibcrd_bg $j 1 run --job $j --rank 1 --size 2 --leader $L -- \
		"$VS" -C -T 900 "$@" -o $op -n $VS_N -q $VS_QPS -r $VS_RATE -p $P $(netns_ip 1) &&
	ibcrd_wait_for ibcrd_joined h1 $j n2 1 &&
	ibcrd_wait_for ibcrd_ctl 1 $j h1 && ibcrd_wait_for ibcrd_ctl 1 $j h2 &&
	ibcrd_wait_for grep -q "server: checkpointable" $j.0.err &&
	ibcrd_wait_for grep -q "client: checkpointable" $j.1.err &&
	t9_let_run &&
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" checkpoint $j --wait &&
	t9_let_run &&
	IBCR_SOCKET=$(ibcrd_sock h1) "$IBCR" checkpoint $j --wait &&
	! t9_done $j &&
	t9_drained h1 $j 2 &&
	k0=$(IBCR_SOCKET=$(ibcrd_sock h1) ibcrd_task_fields $j pid) &&
	k1=$(IBCR_SOCKET=$(ibcrd_sock h2) ibcrd_task_fields $j pid) &&
	a0=$(IBCR_SOCKET=$(ibcrd_sock h1) ibcrd_task_fields $j app_pid) &&
	a1=$(IBCR_SOCKET=$(ibcrd_sock h2) ibcrd_task_fields $j app_pid) &&
	ibcr_track $k0 $k1 $a0 $a1 &&
	ibcr_kill 9 $k0 $k1 &&
	ibcrd_wait_gone $a0 && ibcrd_wait_gone $a1 &&
	t9_wait_done $j &&
	! grep "^OK" $j.0.out $j.1.out &&
	mkdir $j-first && mv $j.* $j-first/ &&
	t9_vs_restart $j 1 2 &&
	t9_vs_ok $j &&
	mkdir $j-same && mv $j.* $j-same/ &&
	t9_vs_restart $j 3 4 --gen 2 &&
	t9_vs_ok $j &&
	test "$(t9_vs_line $j 0)" = "$(t9_vs_line $j-same/$j 0)"
}

test_expect_success 'verbs_stream -C RC SEND, two hosts: two checkpoints, kill, restart from generation 2 on the same hosts, then on two others: every message verified once' '
	t9_vs_case send 3
'

test_expect_success 'verbs_stream -C RC RDMA WRITE_WITH_IMM: the same' '
	t9_vs_case write_imm 4
'

# -x 0: the QPs are addressed by GID (a GRH, as on RoCE); softib routes by
# the GID, which names the host, so the restart on two other hosts works
# only if libibcr translates the peers' GIDs.
test_expect_success 'verbs_stream -C RC SEND addressed by GID (-x 0): the same, GIDs translated' '
	t9_vs_case send 5 grh -x 0 -v &&
	grep "client: qp 0 remote .* usegid=1 " vs-grh-first/vs-grh.1.err
'

# UD with a GRH: the client's AH names the server by GID; the server
# answers with an AH made from the first message's GRH (before the
# checkpoints), which must follow the client to its new host too.
test_expect_success 'verbs_stream -C UD SEND addressed by GID (-U -x 0): the same' '
	t9_vs_case send 6 udgrh -U -x 0 -v &&
	grep "client: qp 0 remote .* usegid=1 " vs-udgrh-first/vs-udgrh.1.err
'

# A failure to take the lock is no failure of the generation (the dump
# goes on, unserialised): the daemon's warning is the one trace of it.
test_expect_success 'every dump took the node dump lock (no ibcrd logged a lock failure)' '
	ls */ibcrd.log >logs &&
	test $(wc -l <logs) -ge 5 &&
	! grep "dumps of this node.s jobs may overlap" $(cat logs)
'

test_done
