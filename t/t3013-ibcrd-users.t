#!/bin/sh

test_description='two real users against one ibcrd: job ids, pids, leaders, limits and root-made connections give a user nothing of another user or of root (issue 10, 3.b e f g h)'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT USERS PYTHON3 MUNGE

# The users cannot run root's python (a pyenv under /root, say).
PY=/usr/bin/python3
test -x $PY || PY=python3
U1=$IBCR_UID1
U2=$IBCR_UID2

# Words, not functions: "hold NAME $AS1 CMD" then runs CMD under the pid
# that $! gives (setpriv execs it).
AS1="setpriv --reuid=$IBCR_UID1 --regid=$IBCR_GID1 --clear-groups"
AS2="setpriv --reuid=$IBCR_UID2 --regid=$IBCR_GID2 --clear-groups"
as1() {
	$AS1 "$@"
}
as2() {
	$AS2 "$@"
}

# msg TYPE [JSON-FIELDS]: one request frame.
msg() {
	echo "{\"version\":1,\"type\":\"$1\"${2:+,$2}}"
}

# hold NAME CMD...: run CMD in the background (output NAME.out), tracked;
# its pid in NAME.pid.
hold() {
	hold_n=$1
	shift
	"$@" >$hold_n.out 2>$hold_n.err &
	echo $! >$hold_n.pid
	ibcr_track $!
}

# The pids ibcrd forked (join_leader's children) are ours too: end them.
kill_daemon_children() {
	for kdc_d in a l z; do
		test -f $kdc_d/launch.pid || continue
		for kdc_p in $(cat /proc/$(cat $kdc_d/launch.pid)/task/*/children 2>/dev/null); do
			kill -9 $kdc_p 2>/dev/null
		done
	done
	return 0
}

lines() {
	test -f "$1" && test "$(wc -l <"$1")" -ge "$2"
}

# fds PID N: PID holds at least N file descriptors.
fds() {
	test "$(ls /proc/$1/fd 2>/dev/null | wc -l)" -ge "$2"
}

# uid of job JOB as USER (as1/as2/root) sees it in ibcr status --json.
job_uid() {
	case $1 in
	root) "$IBCR" --socket "$S" status "$2" --json ;;
	*) $1 "$IBCR" --socket "$S" status "$2" --json ;;
	esac 2>/dev/null | sed -n 's/.*"job":{"job":"[^"]*","uid":\([0-9]*\).*/\1/p'
}

# job_uid_is USER JOB UID: for ibcrd_wait_for.
job_uid_is() {
	test "$(job_uid $1 $2)" = "$3"
}

test_expect_success 'setup: munged, an ibcrd with a peer listener, one with small limits' '
	ibcrd_munged_start m &&
	M=$(ibcrd_munge_sock m) &&
	ibcrd_setup a "node = nA" "peer_port = any" "peer_address = 127.0.0.1" "munge_socket = $M" \
		"peer_idle_timeout = 1s" &&
	ibcrd_setup l "peer_port = 0" "max_conns_per_uid = 4" "max_registrations_per_conn = 2" \
		"max_registrations_per_uid = 3" "interval_min = 2s" "interval_max = 1h" \
		"max_ranks = 1000" &&
	ibcrd_start a && ibcrd_start l &&
	ibcr_atexit kill_daemon_children &&
	S=$(ibcrd_sock a) && L=$(ibcrd_sock l) && PA=$(ibcrd_peer_port a) && test "$PA" -gt 0 &&
	mkdir -m 1777 u &&
	hold sleep1 $AS1 sleep 600 && hold sleep2 $AS2 sleep 600 &&
	P1=$(cat sleep1.pid) && P2=$(cat sleep2.pid) &&
	ibcr_wait_for 10 sh -c "grep -q \"^Uid:.$U2\" /proc/$P2/status && grep -q \"^Uid:.$U1\" /proc/$P1/status"
'

# --- e. Slurm job ids belong to Slurm; other names to their user --------------

test_expect_success 'e: user 2 cannot claim a Slurm job id, with "source":"spank" or without' '
	as2 "$RAWMSG" "$S" \
		"$(msg register "\"job\":\"4242001\",\"rank\":0,\"source\":\"spank\"")" \
		"$(msg register "\"job\":\"777\",\"rank\":0")" \
		"$(msg register "\"job\":\"e-own\",\"rank\":0,\"source\":\"spank\"")" \
		"$(msg ping)" >out &&
	cat out &&
	sed -n 1p out | grep "EPERM.*job 4242001: a Slurm job id: only root (the SPANK plugin in slurmstepd) registers" &&
	sed -n 2p out | grep "EPERM.*job 777: a Slurm job id: only root" &&
	sed -n 3p out | grep "EPERM.*job e-own: .*source.*spank.*: only root" &&
	sed -n 4p out | grep "\"request\":\"ping\"" &&
	test_expect_code 4 "$IBCR" --socket "$S" status 4242001 2>err &&
	grep "job 4242001 has no task registered" err
'

test_expect_success 'e: root registers a Slurm job for user 1; neither user may add a task to it' '
	hold slurmreg "$RAWMSG" "$S" \
		"$(msg register "\"job\":\"4242002\",\"rank\":0,\"uid\":$U1,\"pid\":$P1,\"source\":\"spank\"")" \
		@sleep:600000 &&
	ibcrd_wait_for job_uid_is root 4242002 $U1 &&
	as2 "$RAWMSG" "$S" "$(msg register "\"job\":\"4242002\",\"rank\":1,\"source\":\"spank\"")" >out &&
	as1 "$RAWMSG" "$S" "$(msg register "\"job\":4242002,\"rank\":1")" >>out &&
	cat out &&
	sed -n 1p out | grep "EPERM.*a Slurm job id: only root" &&
	sed -n 2p out | grep "EPERM.*a Slurm job id: only root" &&
	test "$("$IBCR" --socket "$S" status 4242002 --json | grep -o "\"rank\":" | wc -l)" = 1
'

test_expect_success 'e: a job name user 1 runs is not user 2s to take (storage keeps one folder per name)' '
	hold sim1 $AS1 "$RAWMSG" "$S" "$(msg register "\"job\":\"sim\",\"rank\":0")" @sleep:600000 &&
	ibcrd_wait_for lines sim1.out 1 &&
	hold sim2 $AS2 "$RAWMSG" "$S" "$(msg register "\"job\":\"sim\",\"rank\":0")" @sleep:600000 &&
	ibcrd_wait_for lines sim2.out 1 &&
	cat sim1.out sim2.out &&
	grep "\"request\":\"register\",\"job\":\"sim\"" sim1.out &&
	grep "EPERM.*job name sim belongs to another user" sim2.out &&
	test "$(job_uid as1 sim)" = $U1 &&
	test -z "$(job_uid as2 sim)"
'

# --- f. pids are checked on all uids, app_pid too, and again at use -----------

test_expect_success 'f: a pid whose real uid is user 1 but effective and saved uid root is refused' '
	hold half setpriv --ruid=$U1 sleep 600 &&
	PH=$(cat half.pid) &&
	ibcr_wait_for 10 grep -q "^Uid:.$U1.0.0.0" /proc/$PH/status &&
	as1 "$RAWMSG" "$S" "$(msg register "\"job\":\"f1\",\"rank\":0,\"pid\":$PH")" >out &&
	cat out &&
	grep "EPERM.*pid $PH is not yours: its real, effective, saved and filesystem uids ($U1 0 0 0) must all be $U1" out
'

test_expect_success 'f: app_pid must be the user'"'"'s too (root'"'"'s or user 2'"'"'s is refused)' '
	as1 "$RAWMSG" "$S" \
		"$(msg register "\"job\":\"f2\",\"rank\":0,\"app_pid\":$(ibcrd_pid a)")" \
		"$(msg register "\"job\":\"f2\",\"rank\":0,\"pid\":$P1,\"app_pid\":$P2")" >out &&
	cat out &&
	sed -n 1p out | grep "EPERM.*app_pid $(ibcrd_pid a) is not yours" &&
	sed -n 2p out | grep "EPERM.*app_pid $P2 is not yours" &&
	test_expect_code 4 as1 "$IBCR" --socket "$S" status f2
'

test_expect_success 'f: a task that changed identity after it registered is not checkpointed' '
	cat >flip.py <<-EOF &&
	import os, signal
	signal.signal(signal.SIGUSR1, lambda *a: os.setresuid(0, 0, 0))
	os.setresuid($U1, $U1, 0)
	while True:
	    signal.pause()
	EOF
	hold flip $PY flip.py &&
	PF=$(cat flip.pid) &&
	ibcr_wait_for 10 grep -q "^Uid:.$U1.$U1.0" /proc/$PF/status &&
	hold flipreg "$RAWMSG" "$S" \
		"$(msg register "\"job\":\"f3\",\"rank\":0,\"pid\":$PF,\"uid\":$U1")" @sleep:600000 &&
	ibcrd_wait_for job_uid_is as1 f3 $U1 &&
	kill -USR1 $PF &&
	ibcr_wait_for 10 grep -q "^Uid:.0.0.0" /proc/$PF/status &&
	as1 "$RAWMSG" "$S" "$(msg checkpoint "\"job\":\"f3\"")" "$(msg ping)" >out &&
	cat out &&
	sed -n 1p out | grep "EPERM.*job f3 step 0 rank 0: pid $PF changed identity since it registered" &&
	sed -n 2p out | grep "\"request\":\"ping\"" &&
	test "$("$IBCR" --socket "$S" status f3 --json | grep -o "\"checkpointing\":[a-z]*")" = "\"checkpointing\":false" &&
	kill -9 $PF
'

# --- b. a root-made connection handed to a user's program -----------------------

test_expect_success 'b: a control connection root attached acts for the job'"'"'s user, only as its channel' '
	hold vict $AS2 "$RAWMSG" "$S" "$(msg register "\"job\":\"vict\",\"rank\":0")" @sleep:600000 &&
	ibcrd_wait_for lines vict.out 1 &&
	hold own $AS1 "$RAWMSG" "$S" "$(msg register "\"job\":\"mine\",\"rank\":1,\"size\":2")" @sleep:600000 &&
	ibcrd_wait_for lines own.out 1 &&
	"$RAWMSG" "$S" "$(msg ctl-attach "\"job\":\"mine\",\"rank\":0")" @drop:$U1:$IBCR_GID1 \
		"$(msg ping)" \
		"$(msg register "\"job\":\"b1\",\"rank\":0,\"pid\":$P2")" \
		"$(msg register "\"job\":\"b2\",\"rank\":0,\"uid\":0")" \
		"$(msg checkpoint "\"job\":\"vict\"")" \
		"$(msg status)" >out &&
	cat out &&
	sed -n 1p out | grep "\"request\":\"ctl-attach\"" &&
	sed -n 2p out | grep "\"request\":\"ping\",\"uid\":$U1," &&
	sed -n 3p out | grep "EPERM.*this connection is the libibcr control channel of job mine: it may not send .register." &&
	sed -n 4p out | grep "EPERM.*control channel of job mine" &&
	sed -n 5p out | grep "EPERM.*it may not send .checkpoint." &&
	sed -n 6p out | grep "EPERM.*it may not send .status." &&
	test_expect_code 4 "$IBCR" --socket "$S" status b1 &&
	test_expect_code 4 "$IBCR" --socket "$S" status b2 &&
	test "$("$IBCR" --socket "$S" status vict --json | grep -o "\"checkpointing\":[a-z]*")" = "\"checkpointing\":false"
'

# --- g. where root's credentials may go -----------------------------------------

# catch PORTFILE CAPFILE: listen on a free port (written to PORTFILE), keep
# the first frame a client sends in CAPFILE.
cat >catch.py <<'EOF'
import socket, struct, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(8)
open(sys.argv[1] + ".tmp", "w").write("%d\n" % s.getsockname()[1])
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
c, _ = s.accept()
buf = b""
while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
    d = c.recv(65536)
    if not d:
        break
    buf += d
open(sys.argv[2] + ".tmp", "wb").write(buf[4:])
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
EOF

test_expect_success 'g: user 1 may not name a leader host outside ibcrd.conf peers' '
	as1 "$RAWMSG" "$S" \
		"$(msg register "\"job\":\"g1\",\"rank\":1,\"size\":2,\"leader\":\"evil@127.0.0.1\",\"leader_port\":1")" \
		"$(msg ping)" >out &&
	cat out &&
	sed -n 1p out | grep "EPERM.*leader evil@127.0.0.1 refused: a job outside Slurm may name as its leader only a host listed in .peers. of this node.s ibcrd.conf (none listed)" &&
	sed -n 2p out | grep "\"request\":\"ping\"" &&
	test_expect_code 4 as1 "$IBCR" --socket "$S" status g1 2>err &&
	grep "job g1 has no task registered" err
'

test_expect_success 'g: a credential root sends to a leader decodes for root only, not for a user listening there' '
	hold catch $AS1 $PY catch.py u/port u/cap &&
	ibcrd_wait_for test -s u/port &&
	hold greg "$RAWMSG" "$S" \
		"$(msg register "\"job\":\"g2\",\"rank\":1,\"size\":2,\"uid\":$U1,\"leader\":\"nX@127.0.0.1\",\"leader_port\":$(cat u/port)")" \
		@sleep:600000 &&
	ibcrd_wait_for test -s u/cap &&
	sed -n "s/.*\"cred\":\"\([^\"]*\)\".*/\1/p" u/cap | tr -d "\\\\" >cred &&
	test -s cred &&
	test_must_fail as1 unmunge --socket "$M" --input cred >dec.out 2>dec.err &&
	cat dec.err &&
	grep -i "unauthorized" dec.err &&
	unmunge --socket "$M" --input cred >dec.out 2>&1 && grep "\"type\":\"join\"" dec.out ||
	{ grep -i "replayed" dec.out; }
'

# --- h. limits -------------------------------------------------------------------

test_expect_success 'h: registrations are bounded per connection and per uid, and said so' '
	hold r1 $AS1 "$RAWMSG" "$L" \
		"$(msg register "\"job\":\"h1\",\"rank\":0,\"size\":9")" \
		"$(msg register "\"job\":\"h1\",\"rank\":1")" \
		"$(msg register "\"job\":\"h1\",\"rank\":2")" @sleep:600000 &&
	ibcrd_wait_for lines r1.out 3 &&
	cat r1.out &&
	sed -n 3p r1.out | grep "EUSERS.*limit reached: 2 tasks are registered over this connection (max_registrations_per_conn in ibcrd.conf)" &&
	as1 "$RAWMSG" "$L" \
		"$(msg register "\"job\":\"h2\",\"rank\":0")" \
		"$(msg register "\"job\":\"h2\",\"rank\":1")" >out &&
	cat out &&
	sed -n 1p out | grep "\"request\":\"register\"" &&
	sed -n 2p out | grep "EUSERS.*limit reached: uid $U1 has 3 tasks registered on this node (max_registrations_per_uid in ibcrd.conf)" &&
	as2 "$RAWMSG" "$L" "$(msg register "\"job\":\"h3\",\"rank\":0")" | grep "\"request\":\"register\"" &&
	as1 "$RAWMSG" "$L" "$(msg ping)"
'

test_expect_success 'h: the checkpoint interval and the job size are bounded by ibcrd.conf' '
	as2 "$RAWMSG" "$L" \
		"$(msg register "\"job\":\"iv\",\"rank\":0,\"interval_ms\":10")" \
		"$(msg register "\"job\":\"iv\",\"rank\":0,\"interval_ms\":86400000000")" \
		"$(msg register "\"job\":\"iv\",\"rank\":0,\"size\":100000")" \
		"$(msg register "\"job\":\"iv\",\"rank\":5000")" \
		"$(msg ping)" >out &&
	cat out &&
	sed -n 1p out | grep "EINVAL.*interval_ms.. 10 is outside the bounds of this node: give 0 (no periodic checkpoints) or from interval_min = 2000 ms to interval_max = 3600000 ms (ibcrd.conf)" &&
	sed -n 2p out | grep "EINVAL.*interval_ms.* 86400000000 is outside the bounds" &&
	sed -n 3p out | grep "EINVAL.*at most max_ranks = 1000 (ibcrd.conf)" &&
	sed -n 4p out | grep "EINVAL.*max_ranks = 1000" &&
	sed -n 5p out | grep "\"request\":\"ping\""
'

test_expect_success 'h: connections are bounded per uid; another uid and root still get in' '
	for i in 1 2 3; do
		hold c$i $AS1 "$RAWMSG" "$L" "$(msg ping)" @sleep:600000 || return 1
	done &&
	for i in 1 2 3; do
		ibcrd_wait_for lines c$i.out 1 || return 1
	done &&
	as1 "$RAWMSG" "$L" @read >out &&
	cat out &&
	grep "EUSERS.*limit reached: uid $U1 has 4 connections open to ibcrd (max_conns_per_uid in ibcrd.conf)" out &&
	as2 "$RAWMSG" "$L" "$(msg ping)" &&
	"$RAWMSG" "$L" "$(msg ping)" &&
	for i in 1 2 3; do kill $(cat c$i.pid); done &&
	ibcrd_wait_for as1 "$RAWMSG" "$L" "$(msg ping)"
'

test_expect_success 'h: idle peer connections time out: 256 of them do not shut the peer listener' '
	cat >idle.py <<-EOF &&
	import socket, time, select
	socks = []
	for i in range(300):
	    s = socket.socket()
	    s.settimeout(5)
	    try:
	        s.connect(("127.0.0.1", $PA))
	    except OSError:
	        break
	    socks.append(s)
	print("open", len(socks), flush=True)
	deadline = time.time() + 20
	while socks and time.time() < deadline:
	    r, _, _ = select.select(socks, [], [], 1)
	    for s in r:
	        if not s.recv(1):
	            socks.remove(s)
	            s.close()
	print("left", len(socks), flush=True)
	EOF
	as1 $PY idle.py >idle.out &&
	cat idle.out &&
	grep "^left 0$" idle.out &&
	"$IBCRD" -c a/ibcrd.conf --ping-peer "nA@127.0.0.1:$PA" >out &&
	grep "\"request\":\"ping\"" out
'

cpu_ticks() {
	awk "{ print \$14 + \$15 }" /proc/$1/stat
}

test_expect_success 'h: out of file descriptors, the listener rests instead of spinning' '
	ibcrd_setup z "peer_port = 0" &&
	ibcrd_start z &&
	Z=$(ibcrd_pid z) &&
	prlimit --pid $Z --nofile=24:24 &&
	cat >flood.py <<-EOF &&
	import socket, os, time
	socks = []
	for i in range(60):
	    s = socket.socket(socket.AF_UNIX)
	    s.connect("$(ibcrd_sock z)")
	    socks.append(s)
	open("flood.ready", "w").close()
	while not os.path.exists("flood.stop"):
	    time.sleep(0.05)
	EOF
	hold flood $PY flood.py &&
	ibcrd_wait_for test -f flood.ready &&
	ibcrd_wait_for fds $Z 24 &&
	# (a CPU-time measurement over a fixed 2 s: the sleep is the period)
	t0=$(cpu_ticks $Z) && sleep 2 && t1=$(cpu_ticks $Z) &&
	echo "ibcrd used $((t1 - t0)) ticks in 2 s" &&
	test $((t1 - t0)) -lt 40 &&
	# The log is checked here because how much it says is part of the
	# behaviour (a resting listener must not flood it), and because while
	# the descriptors are out no status request can get in to ask.
	test "$(grep -c "accept on .*: Too many open files" z/ibcrd.log)" -le 4 &&
	touch flood.stop &&
	ibcrd_wait_for ibcr_dead $(cat flood.pid) &&
	ibcrd_wait_for "$RAWMSG" "$(ibcrd_sock z)" "$(msg ping)" &&
	grep "accept on .*: Too many open files; not accepting for 1000 ms" z/ibcrd.log
'

# --- CRIU is never run where the user arranges what it finds --------------------

test_expect_success 'a user task with no namespaces of its own is not dumped by root'"'"'s criu' '
	hold leg $AS1 "$RAWMSG" "$S" "$(msg register "\"job\":\"legacy\",\"rank\":0,\"pid\":$P1")" \
		@sleep:600000 &&
	ibcrd_wait_for job_uid_is as1 legacy $U1 &&
	test_must_fail as1 "$IBCR" --socket "$S" checkpoint legacy --wait 2>err &&
	cat err &&
	grep "it belongs to uid $U1 and has no namespaces of its own: ibcr checkpoints an ordinary user.s task only when the SPANK plugin started it" err &&
	kill $(cat leg.pid)
'

test_expect_success 'a task inside a user namespace: criu is not run there (the user decides what its path is)' '
	cat >u/fakecriu <<-EOF &&
	#!/bin/sh
	grep "^Cap" /proc/self/status >"$PWD/u/criu-ran"
	exit 1
	EOF
	chmod 0755 u/fakecriu &&
	criu=$(sed -n "s/^criu = //p" a/ibcrd.conf) && criu=${criu:-$IBCR_CRIU} &&
	test -x "$criu" &&
	hold userns $AS1 unshare -Urm sh -c "mount --bind \"$PWD/u/fakecriu\" \"$criu\" && exec sleep 600" &&
	PU=$(cat userns.pid) &&
	ibcrd_wait_for sh -c "test \"\$(cat /proc/$PU/comm)\" = sleep" &&
	hold esc $AS1 "$RAWMSG" "$S" "$(msg register "\"job\":\"esc\",\"rank\":0,\"pid\":$PU")" \
		@sleep:600000 &&
	ibcrd_wait_for job_uid_is as1 esc $U1 &&
	test_must_fail as1 "$IBCR" --socket "$S" checkpoint esc --wait 2>err &&
	cat err &&
	grep "process $PU is in a user namespace (made by its user, or it left the task.s namespaces): refusing to run criu inside it" err &&
	! test -e u/criu-ran &&
	kill $(cat esc.pid) $PU
'

test_expect_success 'a job whose owner is not in the user database is not checkpointed: its folders would get no group' '
	NU=3999999 &&
	! getent passwd $NU &&
	ASN="setpriv --reuid=$NU --regid=$NU --clear-groups" &&
	hold nouser $ASN sleep 600 &&
	PN=$(cat nouser.pid) &&
	ibcr_wait_for 10 grep -q "^Uid:.$NU" /proc/$PN/status &&
	hold nureg $ASN "$RAWMSG" "$S" "$(msg register "\"job\":\"nu\",\"rank\":0,\"pid\":$PN")" \
		@sleep:600000 &&
	ibcrd_wait_for job_uid_is root nu $NU &&
	$ASN "$RAWMSG" "$S" "$(msg checkpoint "\"job\":\"nu\"")" >out &&
	cat out &&
	grep "ENOENT.*job nu: its owner, uid $NU, is not in node nA.s user database" out &&
	kill $(cat nureg.pid) $PN
'

test_expect_success 'the daemon served through it all' '
	ibcr_alive $(ibcrd_pid a) &&
	as1 "$IBCR" --socket "$S" status sim --json | grep "\"uid\":$U1"
'

test_done
