#!/bin/sh

test_description='ibcr run and ibcr restart for ordinary users (issue 10): ibcrd starts
and restores the task with the privileged steps its own, the task itself as
its user in namespaces of its own; another user gets nothing of it'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

# About root and two users: "$IBCR" stays root's (ibcrd_use_build).
IBCR_JOB_USER=
ibcr_require ROOT USERS CRIU

U1=$IBCR_UID1
U2=$IBCR_UID2
# Words, not functions: a backgrounded "$AS1 CMD" is CMD itself ($!).
AS1="setpriv --reuid=$IBCR_UID1 --regid=$IBCR_GID1 --clear-groups"
as1() {
	$AS1 "$@"
}
as2() {
	setpriv --reuid=$IBCR_UID2 --regid=$IBCR_GID2 --clear-groups "$@"
}

# ids PID: "uid gid" if every real/effective/saved/fs id of PID is the same.
ids() {
	u=$(sed -n "s/^Uid:\t\([0-9]*\)\t\1\t\1\t\1$/\1/p" /proc/$1/status) &&
	g=$(sed -n "s/^Gid:\t\([0-9]*\)\t\1\t\1\t\1$/\1/p" /proc/$1/status) &&
	echo "$u $g"
}

# nocaps PID: no capability in any set.
nocaps() {
	for k in CapInh CapPrm CapEff CapBnd CapAmb; do
		test "$k" = CapBnd && continue
		grep -q "^$k:.0000000000000000$" /proc/$1/status || return 1
	done
}

# has_zombie PID: a child of PID has exited and is not yet waited for.
has_zombie() {
	for c in $(cat /proc/$1/task/*/children); do
		grep -q "^State:.Z" /proc/$c/status && return 0
	done
	return 1
}

test_expect_success 'setup: an ibcrd with real CRIU and compressed images' '
	ibcrd_use_build &&
	ibcrd_setup d "criu = $IBCR_CRIU" "peer_port = 0" "compression = yes" &&
	ibcrd_start d &&
	IBCR_SOCKET=$(ibcrd_sock d) && export IBCR_SOCKET &&
	mkdir -m 1777 u
'

test_expect_success 'user 1 runs a program: ibcrd starts it as user 1, in its own namespaces, without capabilities or any fd of the daemon' '
	{ $AS1 "$IBCR" run --name u1 -- "$PATTERN" --mib 16 >u1.out 2>u1.err & } &&
	echo $! >u1.pid && ibcr_track $! &&
	ibcrd_wait_for grep -q "^start run=" u1.out &&
	INIT=$(ibcrd_field u1 pid) && APP=$(ibcrd_field u1 app_pid) && ibcr_track $INIT $APP &&
	echo "$INIT $APP" >pids &&
	test "$(ids $APP)" = "$U1 $IBCR_GID1" &&
	test "$(ids $INIT)" = "$U1 $IBCR_GID1" &&
	nocaps $APP && nocaps $INIT &&
	grep "^NSpid:.$APP.102$" /proc/$APP/status &&
	test "$(readlink /proc/$APP/ns/pid)" != "$(readlink /proc/self/ns/pid)" &&
	test "$(readlink /proc/$APP/ns/mnt)" != "$(readlink /proc/self/ns/mnt)" &&
	ls -l /proc/$INIT/fd/ >initfds &&
	cat initfds &&
	! grep "ibcrd\|\.log" initfds &&
	readlink /proc/$INIT/fd/1 | grep "^pipe:" &&
	"$IBCR" status u1 --json | grep "\"uid\":$U1" &&
	ibcrd_report u1.out $APP | grep "pattern=ok"
'

test_expect_success 'user 1 checkpoints it: the generation is root-owned, readable by the job group' '
	as1 "$IBCR" checkpoint u1 --wait >ck.out &&
	cat ck.out &&
	grep "generation 1 committed" ck.out &&
	test "$(stat -c "%u %g %a" d/storage/local/u1/gen-1)" = "0 $IBCR_GID1 750" &&
	as1 "$IBCR" list u1 | grep "^ *1 " &&
	read INIT APP <pids &&
	ibcrd_report u1.out $APP >before
'

test_expect_success 'user 2 cannot restore user 1s generation (root would decompress it for them)' '
	test_expect_code 6 as2 "$IBCR" restart u1 >r2.out 2>r2.err &&
	cat r2.err &&
	grep "job u1 generation 1 belongs to another user: only its owner (or root) restores it" r2.err &&
	! ls d/staging/restore 2>/dev/null | grep "\.img$" &&
	test_must_fail pgrep -u $U2 -f "$PATTERN"
'

test_expect_success 'a task ibcrd refuses to register never runs (user 2 names a leader not in peers)' '
	test_expect_code 6 as2 "$IBCR" run --name lead --leader 192.0.2.1 -- sh -c "touch u/ran-by-2" \
		2>run2.err &&
	cat run2.err &&
	grep "leader 192.0.2.1 refused" run2.err &&
	test ! -e u/ran-by-2
'

test_expect_success 'user 2 cannot run a job under the name of user 1s checkpoints (its retention would remove them)' '
	test_expect_code 6 as2 "$IBCR" run --name u1 -- sh -c "touch u/ran-by-2" 2>run4.err &&
	cat run4.err &&
	grep "job name u1 belongs to another user" run4.err &&
	test ! -e u/ran-by-2 &&
	test "$(ibcrd_gens u1)" = "1 "
'

test_expect_success 'a Slurm job id is not a name a user may run under' '
	test_expect_code 6 as2 "$IBCR" run --name 4242777 -- true 2>run3.err &&
	grep "a name of digits only is a Slurm job id" run3.err
'

# spawn_raw DIR: as user 2, a spawn request sent by hand (not ibcr) with
# an O_PATH fd of DIR as the working folder; prints the relay's answers.
spawn_raw() {
	as2 /usr/bin/python3 - "$IBCR_SOCKET" "$1" <<-\PY
	import json, os, socket, struct, sys
	def send(s, o):
	    b = json.dumps(o).encode()
	    s.sendall(struct.pack(">I", len(b)) + b)
	def recv(s):
	    n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
	    return json.loads(s.recv(n, socket.MSG_WAITALL))
	s = socket.socket(socket.AF_UNIX)
	s.connect(sys.argv[1])
	send(s, {"version": 1, "type": "spawn", "job": "raw", "rank": 0,
	         "argv": ["sh", "-c", "ls >/dev/null && echo listed"], "env": ["PATH=/usr/bin:/bin"],
	         "init": os.environ["IBCR_INIT"]})
	print(json.dumps(recv(s)))
	d = os.open(sys.argv[2], os.O_PATH | os.O_DIRECTORY)
	r, w = os.pipe()
	socket.send_fds(s, [b"f"], [d, w, w])
	print(json.dumps(recv(s)))
	PY
}

test_expect_success 'a working folder user 2 may not enter is not entered for them (an O_PATH fd of a 0700 folder of user 1)' '
	mkdir u/private1 && chown $U1:$IBCR_GID1 u/private1 && chmod 0700 u/private1 &&
	spawn_raw u/private1 >raw.out &&
	cat raw.out &&
	sed -n 1p raw.out | grep "\"type\": \"spawn-ready\"" &&
	sed -n 2p raw.out | grep "cannot enter the working folder: Permission denied" &&
	spawn_raw u >raw2.out &&
	cat raw2.out &&
	sed -n 2p raw2.out | grep "\"type\": \"spawned\""
'

test_expect_success 'user 1 restarts it: the same process comes back as user 1, without capabilities, and goes on' '
	read INIT APP <pids &&
	ibcr_kill 9 $(cat u1.pid) $INIT &&
	ibcrd_wait_gone $APP &&
	run=$(sed -n "s/^start run=\([0-9a-f]*\).*/\1/p" u1.out) &&
	{ $AS1 "$IBCR" restart u1 >rs.out 2>rs.err & } &&
	echo $! >rs.pid && ibcr_track $! &&
	ibcrd_wait_for grep -q "restored from generation 1" rs.err &&
	INIT2=$(ibcrd_field u1 pid) && APP2=$(ibcrd_field u1 app_pid) && ibcr_track $INIT2 $APP2 &&
	test "$(ids $APP2)" = "$U1 $IBCR_GID1" &&
	test "$(ids $INIT2)" = "$U1 $IBCR_GID1" &&
	nocaps $APP2 &&
	ibcrd_report rs.out $APP2 >after &&
	cat before after &&
	grep "run=$run .*pattern=ok bad=0" after &&
	test "$(sed "s/^report \([0-9]*\).*/\1/" after)" -eq "$(sed "s/^report \([0-9]*\).*/\1/" before)" &&
	! ls d/staging/restore | grep "\.img$"
'

test_expect_success 'SIGTERM to the user s ibcr restart ends the program; its exit status comes back' '
	kill -TERM $(cat rs.pid) &&
	wait $(cat rs.pid) &&
	grep "^final .*pattern=ok" rs.out
'

test_expect_success 'a task with a zombie child at the dump is restored: CRIU gives the zombie its own credentials, and a zombie runs nothing' '
	# sleep never waits for the child sh left it: a zombie until the end.
	{ $AS1 "$IBCR" run --name zz -- sh -c "true & exec sleep 100000" >zz.out 2>zz.err & } &&
	echo $! >zz.pid && ibcr_track $! &&
	ibcrd_wait_for "$IBCR" status zz &&
	ZI=$(ibcrd_field zz pid) && ZA=$(ibcrd_field zz app_pid) && ibcr_track $ZI $ZA &&
	ibcrd_wait_for has_zombie $ZA &&
	as1 "$IBCR" checkpoint zz --wait &&
	ibcr_kill 9 $(cat zz.pid) $ZI &&
	ibcrd_wait_gone $ZA &&
	{ $AS1 "$IBCR" restart zz >zr.out 2>zr.err & } &&
	echo $! >zr.pid && ibcr_track $! &&
	{ ibcrd_wait_for grep -q "restored from generation 1" zr.err ||
		{ cat zr.err >&2; false; }; } &&
	ZI2=$(ibcrd_field zz pid) && ZA2=$(ibcrd_field zz app_pid) && ibcr_track $ZI2 $ZA2 &&
	test "$(ids $ZA2)" = "$U1 $IBCR_GID1" &&
	nocaps $ZA2 && nocaps $ZI2 &&
	has_zombie $ZA2 &&
	kill -TERM $(cat zr.pid) &&
	{ wait $(cat zr.pid) || true; }
'

test_expect_success 'two ranks of user 1s job on one node are dumped at once: their dump intervals overlap' '
	{ $AS1 "$IBCR" run --job par --rank 0 --size 2 -- "$PATTERN" --mib 160 >par0.out 2>par0.err & } &&
	echo $! >par0.pid && ibcr_track $! &&
	{ $AS1 "$IBCR" run --job par --rank 1 --size 2 -- "$PATTERN" --mib 160 >par1.out 2>par1.err & } &&
	echo $! >par1.pid && ibcr_track $! &&
	ibcrd_wait_for grep -q "^start run=" par0.out &&
	ibcrd_wait_for grep -q "^start run=" par1.out &&
	as1 "$IBCR" checkpoint par --wait >par.ck &&
	cat par.ck &&
	/usr/bin/python3 - d/storage/local/par/gen-1/manifest.json <<-\PY
	import json, sys
	t = json.load(open(sys.argv[1]))["tasks"]
	d = [x["dump"] for x in t]
	print(d)
	assert len(d) == 2 and all(x["end_ms"] > x["start_ms"] for x in d)
	assert all(0 < x["cpu_ms"] for x in d), "no CPU time of CRIU"
	assert max(x["start_ms"] for x in d) < min(x["end_ms"] for x in d), "dumps one after another"
	PY
	kill $(ibcrd_task_fields par pid) &&
	wait $(cat par0.pid) $(cat par1.pid); true
'

# The relay puts the task into the cgroups of the process that asked,
# found by its pid; once that process is gone, the pid may be another's.
# User 2 connects, hands the connection to a child and exits; root makes
# a process with the freed pid (ns_last_pid); the child then asks.
test_expect_success 'a spawn asked on the connection of an exited process is refused, not placed by its reused pid' '
	rm -f u/go u/asker.pid &&
	{ as2 /usr/bin/python3 - "$IBCR_SOCKET" u >reuse.out 2>reuse.err <<-\PY &
	import json, os, socket, struct, sys, time
	def send(s, o):
	    b = json.dumps(o).encode()
	    s.sendall(struct.pack(">I", len(b)) + b)
	def recv(s):
	    n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
	    return json.loads(s.recv(n, socket.MSG_WAITALL))
	s = socket.socket(socket.AF_UNIX)
	s.connect(sys.argv[1])
	if os.fork():
	    with open(sys.argv[2] + "/asker.pid", "w") as f:
	        f.write("%d\n" % os.getpid())
	    os._exit(0)
	# (the child is known by no pid: it ends on its own if the test
	# never lets it go)
	end = time.time() + 120
	while not os.path.exists(sys.argv[2] + "/go"):
	    if time.time() > end:
	        sys.exit("asker: no go after 120 s")
	    time.sleep(0.05)
	send(s, {"version": 1, "type": "spawn", "job": "reuse", "rank": 0,
	         "argv": ["true"], "env": ["PATH=/usr/bin:/bin"], "init": os.environ["IBCR_INIT"]})
	r = recv(s)
	print(json.dumps(r))
	if r.get("type") == "spawn-ready":
	    d = os.open(sys.argv[2], os.O_PATH | os.O_DIRECTORY)
	    rd, w = os.pipe()
	    socket.send_fds(s, [b"f"], [d, w, w])
	    print(json.dumps(recv(s)))
	PY
	} &&
	ibcrd_wait_for test -s u/asker.pid &&
	P=$(cat u/asker.pid) &&
	ibcrd_wait_gone $P &&
	for i in $(seq 50); do
		echo $((P - 1)) >/proc/sys/kernel/ns_last_pid &&
		{ sleep 1000 & } &&
		V=$! && ibcr_track $V &&
		test $V = $P && break
		kill $V
	done &&
	test "$V" = "$P" &&
	touch u/go &&
	ibcrd_wait_for sh -c "test \$(wc -l <reuse.out) -ge 2" &&
	cat reuse.out &&
	sed -n 2p reuse.out | grep "the process that asked (pid $P) has exited" &&
	! grep "\"type\": \"spawned\"" reuse.out &&
	kill $V
'

# A dump of another task of the user (CRIU, as the user, holds the pages
# it copies in pipes) can take the user over fs.pipe-user-pages-soft; a
# restore cannot give a pipe of the task its size back until that ends.
# User 2's job (no other test dumps as user 2 meanwhile), with the kernel's
# default soft limit for the time of the test (contrib/deps.sh lifts it).
AS2="setpriv --reuid=$IBCR_UID2 --regid=$IBCR_GID2 --clear-groups"
test_expect_success 'a restore while the user is over fs.pipe-user-pages-soft waits until it is not' '
	soft=$(cat /proc/sys/fs/pipe-user-pages-soft) &&
	ibcr_atexit "echo $soft >/proc/sys/fs/pipe-user-pages-soft" &&
	echo 16384 >/proc/sys/fs/pipe-user-pages-soft &&
	{ $AS2 "$IBCR" run --name pp -- sh -c "sleep 100000 | sleep 100000" >pp.out 2>pp.err & } &&
	echo $! >pp.pid && ibcr_track $! &&
	ibcrd_wait_for "$IBCR" status pp &&
	PPI=$(ibcrd_field pp pid) && PPA=$(ibcrd_field pp app_pid) && ibcr_track $PPI $PPA &&
	as2 "$IBCR" checkpoint pp --wait &&
	ibcr_kill 9 $(cat pp.pid) $PPI &&
	ibcrd_wait_gone $PPA &&
	{ $AS2 /usr/bin/python3 "$SHARNESS_TEST_SRCDIR/ibcrd/pipehog.py" 3 >u/hog.out & } &&
	ibcr_track $! &&
	ibcrd_wait_for grep -q "^over" u/hog.out &&
	{ $AS2 "$IBCR" restart pp >pr.out 2>pr.err & } &&
	echo $! >pr.pid && ibcr_track $! &&
	ibcr_wait_for 30 grep -q "restored from generation 1" pr.err &&
	cat pr.err u/hog.out &&
	grep -q "^released" u/hog.out &&
	PPA2=$(ibcrd_field pp app_pid) && ibcr_track $PPA2 &&
	test "$(ids $PPA2)" = "$U2 $IBCR_GID2" &&
	echo $soft >/proc/sys/fs/pipe-user-pages-soft &&
	kill -TERM $(cat pr.pid) &&
	{ wait $(cat pr.pid) || true; }
'

test_done
