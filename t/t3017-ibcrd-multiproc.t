#!/bin/sh

test_description='a task with several verbs processes (issue 14): every
process of the tree that uses verbs has its own libibcr control
connection, identified by the kernel, and each is quiesced, drained,
released, dumped with its socket external, rebuilt and resumed; a restart
hands each its own fresh connection back.

Two shapes, both run by an ordinary user with "ibcr run", in one task:
verbs_stream -F (the program forks its server before its first verbs
call: fork without exec), and a shell that starts a verbs_stream server
and a verbs_stream client (fork+exec of two verbs programs).  Each moves
sequence-numbered, checksummed messages between its two processes
through two checkpoints, a kill and a restart; both processes must count
every message exactly once and agree on the checksum.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

# About root and a user: "$IBCR" stays root's (ibcrd_use_build).
IBCR_JOB_USER=
ibcr_require ROOT USERS CRIU SOFTIB LIBIBCR

SOFTIB_LIBDIR=$IBCR_BUILDDIR/lib/softib/.libs
VS=$IBCR_BUILDDIR/t/softib/verbs_stream
test -x "$VS" || error "t/softib/verbs_stream is not built"
ibcrd_use_build
unset IBCR_SOCKET

AS1="setpriv --reuid=$IBCR_UID1 --regid=$IBCR_GID1 --clear-groups"
as1() {
	$AS1 "$@"
}

# Two QPs, paced so that the stream (about 20 s unhindered) outlasts two
# checkpoints and a restart; the watchdog (-T) outlasts them all.
VS_N=20000 VS_RATE=1000 VS_QPS=2
VS_MSGS=$((VS_N * VS_QPS))
VS_OPTS="-C -T 600 -n $VS_N -q $VS_QPS -r $VS_RATE"

# mp_run NAME CMD...: user 1 runs CMD as the one task of job NAME,
# softib as its device; NAME.out, NAME.err, NAME.rc when it ends.
mp_run() {
	mp_n=$1
	shift
	{ ( $AS1 env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" "$IBCR" run --name $mp_n -- "$@" \
		>$mp_n.out 2>$mp_n.err
	    echo $? >$mp_n.rc ) & } &&
	ibcr_track $!
}

# mp_restart NAME: user 1 restarts job NAME from its newest generation.
mp_restart() {
	{ ( $AS1 env LD_LIBRARY_PATH="$SOFTIB_LIBDIR" "$IBCR" restart $1 \
		>$1.out 2>$1.err
	    echo $? >$1.rc ) & } &&
	ibcr_track $!
}

mp_done() {
	test -s $1.rc
}

# mp_procs NAME: the pids of the task's verbs processes, as status says.
mp_procs() {
	as1 "$IBCR" status $1 --json >$1.status &&
	/usr/bin/python3 - $1.status <<-\PY
	import json, sys
	s = json.load(open(sys.argv[1]))
	for t in s["job"]["tasks"]:
	    for p in t.get("verbs_pids", []):
	        print(p)
	PY
}

# mp_nprocs NAME N: status lists N verbs processes in the task.
mp_nprocs() {
	test "$(mp_procs $1 | wc -l)" -eq "$2"
}

# mp_vs_ok NAME: the run ended with 0 and both processes printed the
# same totals, every message of every QP counted exactly once.
mp_vs_ok() {
	cat $1.out $1.err &&
	test "$(cat $1.rc)" = 0 &&
	s=$(sed -n "s/^\(OK msgs=[0-9]* bytes=[0-9]* checksum=[0-9a-f]*\) .*role=server$/\1/p" $1.out) &&
	c=$(sed -n "s/^\(OK msgs=[0-9]* bytes=[0-9]* checksum=[0-9a-f]*\) .*role=client$/\1/p" $1.out) &&
	test -n "$s" && test "$s" = "$c" &&
	echo "$s" | grep "^OK msgs=$VS_MSGS bytes=$((VS_MSGS * 4096)) "
}

# mp_case NAME CMD...: two checkpoints while CMD streams, the task killed,
# restarted from generation 2, and the stream finished and verified.
mp_case() {
	n=$1
	shift
	mp_run $n "$@" &&
	ibcrd_wait_for grep -q "server: checkpointable" $n.err &&
	ibcrd_wait_for grep -q "client: checkpointable" $n.err &&
	ibcrd_wait_for mp_nprocs $n 2 &&
	as1 "$IBCR" checkpoint $n --wait &&
	mp_procs $n >$n.procs &&
	test $(wc -l <$n.procs) -eq 2 &&
	for p in $(cat $n.procs); do
		grep "^Uid:.$IBCR_UID1.$IBCR_UID1" /proc/$p/status &&
		tr "\0" " " </proc/$p/cmdline | grep "verbs_stream" || return 1
	done &&
	as1 "$IBCR" checkpoint $n --wait &&
	! mp_done $n &&
	/usr/bin/python3 - d/storage/local/$n/gen-2/manifest.json <<-\PY &&
	import json, sys
	t = json.load(open(sys.argv[1]))["tasks"]
	assert len(t) == 1, t
	assert len(t[0]["ctl_inos"]) == 2, t[0]
	assert len(set(t[0]["ctl_inos"])) == 2, t[0]
	PY
	INIT=$(ibcrd_field $n pid) &&
	ibcr_track $INIT $(cat $n.procs) &&
	kill -9 $INIT &&
	for p in $(cat $n.procs); do
		ibcrd_wait_gone $p || return 1
	done &&
	ibcr_wait_for 30 mp_done $n &&
	! grep "^OK" $n.out &&
	mkdir $n-first && mv $n.* $n-first/ &&
	mp_restart $n &&
	ibcrd_wait_for grep -q "restored from generation 2" $n.err &&
	ibcrd_wait_for mp_nprocs $n 2 &&
	mp_procs $n >$n.procs2 &&
	ibcr_track $(cat $n.procs2) &&
	ibcr_wait_for 120 mp_done $n &&
	mp_vs_ok $n
}

test_expect_success 'setup: an ibcrd with real CRIU' '
	ibcrd_setup d "criu = $IBCR_CRIU" "peer_port = 0" &&
	ibcrd_start d &&
	IBCR_SOCKET=$(ibcrd_sock d) && export IBCR_SOCKET &&
	mkdir -m 1777 u
'

test_expect_success 'fork without exec (verbs_stream -F): both processes checkpointed twice, restarted, every message verified once' '
	mp_case fk "$VS" -F $VS_OPTS
'

test_expect_success 'a shell starting two verbs programs: the same' '
	# (the shell waits for its server'"'"'s port: 30 s at most, and not
	# once the server is gone; dash reaps it at the next sleep, so
	# kill -0 then fails)
	mp_case sh sh -c "\"$VS\" -C -T 600 -p 0 -P u/sh.port & s=\$!
		t=0
		until test -s u/sh.port; do
			kill -0 \$s 2>/dev/null || { echo \"sh: the server ended without a port\" >&2; exit 1; }
			t=\$((t + 1))
			test \$t -le 1500 || { echo \"sh: no server port after 30 s\" >&2; exit 1; }
			sleep 0.02
		done
		\"$VS\" $VS_OPTS -p \$(cat u/sh.port) 127.0.0.1 || exit 1
		wait \$s"
'

test_done
