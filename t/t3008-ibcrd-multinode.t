#!/bin/sh

test_description='one job on several hosts, without Slurm

Three network-namespace hosts, one real ibcrd each (MUNGE between them),
one storage shared by all.  "ibcr run --job --rank --size --leader" starts
a two-rank job (a pattern program per rank) on hosts 1 and 2; rank 1'"'"'s
ibcrd joins the leader (rank 0'"'"'s).  A checkpoint commits both ranks in
one generation; when CRIU fails on one node the generation aborts on both
and neither program stops; both ranks restart on other hosts from the
committed generation.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT CRIU NETNS

ibcrd_use_build
unset IBCR_SOCKET

# t8_last_gen_is HOST JOB N: HOST's ibcrd says JOB's last committed
# generation is N.
t8_last_gen_is() {
	test "$(t8_ibcr $1 status $2 --json 2>/dev/null | ibcrd_json_job last_gen)" = "$3"
}

# t8_err_like HOST JOB PATTERN: JOB's last_error on HOST matches PATTERN.
t8_err_like() {
	t8_ibcr $1 status $2 --json 2>/dev/null | ibcrd_json_job last_error | grep -q "$3"
}

# t8_ibcr I ARGS: ibcr against host I's ibcrd, inside host I.
t8_ibcr() {
	t8_h=$1
	shift
	IBCR_SOCKET=$(ibcrd_sock h$t8_h) netns_exec $t8_h "$IBCR" "$@"
}

# t8_field I JOB KEY [RANK]: ibcrd_field on host I.
t8_field() {
	t8_ibcr $1 status $2 --json 2>/dev/null | ibcrd_json_task "$3" "${4:-}"
}

# t8_joins JOB N: node n2 joined the leader (host 1) N times, says the
# leader's status.
t8_joins() {
	t8_ibcr 1 status $1 --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
try:
    ms = json.load(sys.stdin)["job"].get("members", [])
except (ValueError, KeyError):
    sys.exit(1)
sys.exit(0 if any(m["node"] == "n2" and m.get("joins", 0) >= int(sys.argv[1])
                  for m in ms) else 1)
' "$2"
}

# t8_rank JOB RANK HOST [PRE]: start one rank of a 2-rank job on HOST.
t8_rank() {
	{ IBCR_SOCKET=$(ibcrd_sock h$3) netns_exec $3 "$IBCR" run --job $1 --rank $2 --size 2 \
		--leader "n1@$(netns_ip 1)" -- bash -c "${4:-true}; exec \"$PATTERN\" --mib ${PATTERN_MIB:-8}" \
		>$1.$2.out 2>$1.$2.err & } &&
	ibcr_track $! &&
	ibcrd_wait_for t8_ibcr $3 status $1 &&
	ibcrd_wait_for grep -q "^start" $1.$2.out &&
	app=$(t8_field $3 $1 app_pid $2) && ibcr_track $app $(t8_field $3 $1 pid $2) &&
	echo $app >$1.$2.app
}

test_expect_success 'setup: three hosts, munged, one ibcrd per host, shared storage' '
	netns_create 3 &&
	ibcrd_munged_start m &&
	MSOCK=$(ibcrd_munge_sock m) &&
	ibcrd_host_start 1 "$MSOCK" && ibcrd_host_start 2 "$MSOCK" && ibcrd_host_start 3 "$MSOCK"
'

test_expect_success 'a two-rank job on hosts 1 and 2; rank 1 joins the leader' '
	t8_rank mj 0 1 &&
	t8_rank mj 1 2 &&
	ibcrd_wait_for ibcrd_joined h1 mj n2 1 &&
	t8_ibcr 1 status mj --json | grep "\"size\":2"
'

test_expect_success 'a checkpoint on the leader commits both ranks in one generation' '
	t8_ibcr 1 checkpoint mj --wait >ck.out 2>ck.err &&
	cat ck.out &&
	grep "generation 1 committed" ck.out &&
	t8_ibcr 1 list mj >list &&
	cat list &&
	grep "^1 .* 2 " list &&
	test -d shared/local/mj/gen-1/task-0 &&
	test -d shared/local/mj/gen-1/task-1 &&
	grep "\"nodes\"" shared/local/mj/gen-1/manifest.json &&
	t8_ibcr 1 verify mj &&
	test "$(t8_ibcr 1 status mj --json | ibcrd_json_job last_gen)" = 1 &&
	# the member took part: its own worker reports the generation committed
	ibcrd_wait_for t8_last_gen_is 2 mj 1 &&
	ibcrd_report mj.0.out $(cat mj.0.app) | grep pattern=ok &&
	ibcrd_report mj.1.out $(cat mj.1.app) | grep pattern=ok
'

test_expect_success 'a checkpoint asked of a member node is refused, naming the leader' '
	test_expect_code 2 t8_ibcr 2 checkpoint mj --wait 2>err &&
	grep "job mj is led by n1@" err
'

test_expect_success 'CRIU fails on one node: the generation aborts on both, both run on' '
	t8_rank bad 0 1 &&
	t8_rank bad 1 2 "exec 3<>/dev/tcp/$(netns_ip 2)/7195" &&
	ibcrd_wait_for ibcrd_joined h1 bad n2 1 &&
	test_expect_code 1 t8_ibcr 1 checkpoint bad --wait 2>err &&
	cat err &&
	grep "generation 1 aborted in dump: node n2: dump: rank 1 (pid [0-9]*): criu dump failed.*TCP" err &&
	# each node keeps the most specific cause: the leader names the node,
	# the member its own rank
	t8_ibcr 1 status bad --json | ibcrd_json_job last_error >e1 && cat e1 &&
	grep "^generation 1: dump: node n2: dump: rank 1 (pid [0-9]*): criu dump failed" e1 &&
	ibcrd_wait_for t8_err_like 2 bad "^generation 1: dump: rank 1 (pid [0-9]*): criu dump failed" &&
	test "$(t8_ibcr 2 status bad --json | ibcrd_json_job last_gen)" = 0 &&
	! t8_ibcr 1 list bad 2>/dev/null | grep "^1 " &&
	! test -e shared/local/bad/gen-1 &&
	! test -e h1/staging/bad/gen-1 && ! test -e h2/staging/bad/gen-1 &&
	ibcrd_report bad.0.out $(cat bad.0.app) | grep pattern=ok &&
	ibcrd_report bad.1.out $(cat bad.1.app) | grep pattern=ok
'

test_expect_success 'a member ibcrd killed during the dump: aborted on both nodes, both run on' '
	t8_rank kd 0 1 &&
	PATTERN_MIB=384 t8_rank kd 1 2 &&
	ibcrd_wait_for ibcrd_joined h1 kd n2 1 &&
	{ t8_ibcr 1 checkpoint kd --wait >kd.ck.out 2>kd.ck.err & } &&
	ck=$! &&
	ibcrd_wait_for test -e h2/staging/kd/dump-gen-1-rank-1.log &&
	kill -9 $(cat h2/run/ibcrd.pid) &&
	test_expect_code 1 wait $ck &&
	cat kd.ck.err &&
	grep "generation 1 aborted in dump: node n2: dump: ibcrd (pid [0-9]*) died during the dump" kd.ck.err &&
	! test -e shared/local/kd/gen-1 &&
	ibcrd_report kd.0.out $(cat kd.0.app) | grep pattern=ok &&
	ibcrd_report kd.1.out $(cat kd.1.app) | grep pattern=ok
'

test_expect_success 'ibcrd back on host 2: rank 1 registers and joins again, the next generation commits' '
	ibcrd_host_start 2 "$MSOCK" &&
	ibcrd_wait_for grep -q "registered again with ibcrd" kd.1.err &&
	ibcrd_wait_for t8_joins kd 2 &&
	t8_ibcr 1 checkpoint kd --wait >ck.out &&
	# the aborted number 1 is not given again
	grep "generation 2 committed" ck.out &&
	test -d shared/local/kd/gen-2/task-1 &&
	kill -9 $(cat kd.0.app) $(cat kd.1.app)
'

test_expect_success 'both ranks restart on other hosts from the committed generation' '
	ibcr_kill 9 $(cat mj.0.app) $(cat mj.1.app) &&
	ibcrd_wait_gone $(cat mj.0.app) && ibcrd_wait_gone $(cat mj.1.app) &&
	run0=$(sed -n "s/^start run=\([0-9a-f]*\).*/\1/p" mj.0.out) &&
	run1=$(sed -n "s/^start run=\([0-9a-f]*\).*/\1/p" mj.1.out) &&
	test "$run0" != "$run1" &&
	# exec: $! is then ibcr itself (nsenter execs it), which SIGTERM reaches.
	{ IBCR_SOCKET=$(ibcrd_sock h3) exec nsenter --net=/run/netns/$(netns_name 3) \
		"$IBCR" restart mj --rank 0 >r0.out 2>r0.err & } &&
	ibcr_track $! && echo $! >r0.pid &&
	{ IBCR_SOCKET=$(ibcrd_sock h1) exec nsenter --net=/run/netns/$(netns_name 1) \
		"$IBCR" restart mj --rank 1 >r1.out 2>r1.err & } &&
	ibcr_track $! && echo $! >r1.pid &&
	ibcrd_wait_for grep -q "restored from generation 1" r0.err &&
	ibcrd_wait_for grep -q "restored from generation 1" r1.err &&
	a0=$(t8_field 3 mj app_pid 0) && a1=$(t8_field 1 mj app_pid 1) && ibcr_track $a0 $a1 &&
	ibcrd_report r0.out $a0 | grep "run=$run0 .*pattern=ok" &&
	ibcrd_report r1.out $a1 | grep "run=$run1 .*pattern=ok" &&
	kill -TERM $(cat r0.pid) $(cat r1.pid) &&
	wait $(cat r0.pid) && wait $(cat r1.pid) &&
	grep "^final" r0.out && grep "^final" r1.out
'

test_done
