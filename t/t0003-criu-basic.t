#!/bin/sh

test_description='CRIU checkpoints a task under ibcr-init and restores it

A multi-threaded program holding a 64 MiB pattern runs in its own PID
namespace under ibcr-init (PID 1, its own session).  Real CRIU dumps the
namespace with --leave-running; the original is killed; CRIU restores it
into a new PID namespace as the child of "ibcr-init --restored", twice
(the second copy next to the first, writing to a new output file).  The
restored program must be the dumped one (same run id, report sequence
resuming after the dump), its pattern intact, its counters resuming from
their dumped values and still rising.'

. "$(dirname "$0")"/sharness.sh

INIT="$IBCR_BUILDDIR/init/ibcr-init"
PATTERN="$IBCR_BUILDDIR/t/criu/pattern"
# The trees dumped here start in a session of their own with no descriptor
# above stderr, as under ibcr run (see t/criu/detach.c): a CI runner's
# socket inherited down here would lead out of the tree, and CRIU would
# refuse the dump.
DETACH="$IBCR_BUILDDIR/t/criu/detach"
# The pattern's threads count one tick per 10 ms at most (nanosleep).
TICK_MS=10

# A missing prerequisite is a skip, or a failure under CI=true; CRIU
# sets IBCR_CRIU ($IBCR_CRIU, /usr/local/sbin/criu or criu in PATH).
ibcr_require ROOT CRIU
CRIU=$IBCR_CRIU

if ! test -x "$INIT" || ! test -x "$PATTERN" || ! test -x "$DETACH"; then
	error "build first: $INIT, $PATTERN or $DETACH is missing (run make check in the top build folder)"
fi

TRASH=$(pwd)

# --- helpers ------------------------------------------------------------

# t3_show_log FILE: CRIU's log (its errors first) when a step failed.
t3_show_log() {
	{
		echo "--- errors in $1:"
		grep -E 'Error|Warn' "$1" 2>/dev/null | head -n 20
		echo "--- last lines of $1:"
		tail -n 30 "$1" 2>/dev/null
	} | ibcr_diag
}

# A restore fails with "File exists" while the old pid is still there,
# even as a zombie (TESTBED.md): wait until /proc/PID is really gone.
t3_gone() {
	! test -e "/proc/$1"
}

t3_lines() {
	grep -c "^$2 " "$1" 2>/dev/null
}

t3_has_lines() {
	test "$(t3_lines "$1" "$2")" -ge "$3"
}

# t3_field LINE NAME: the value of NAME=... in a report line.
t3_field() {
	printf '%s\n' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"
}

t3_now_ms() {
	echo $(($(date +%s%N) / 1000000))
}

# t3_state PID: the state letter of PID (R, S, T, Z...).
t3_state() {
	sed "s/^.*) //" "/proc/$1/stat" 2>/dev/null | cut -c1
}

t3_child_of() {
	set -- "$1" "$2" $(sed "s/^.*) //" "/proc/$1/stat" 2>/dev/null)
	test "$4" = "$2"
}

# Host pid of the only child of PID (the application under an init).
t3_child() {
	cat "/proc/$1/task/$1/children" 2>/dev/null | tr -d ' '
}

# t3_restore N IMAGES FILE OUT [CRIU-OPTIONS]: restore IMAGES with real
# CRIU under "ibcr-init --restored", as issue 5's driver will: detached,
# the restored init adopted by ibcr-init (a subreaper), the task's stdout
# FILE (which grew after the dump and would fail CRIU's size check) handed
# back as fd 3 opened on OUT.  Files: launcherN.pid, restoredN.pid,
# IMAGES/restoreN.log.
t3_restore() {
	t3_n=$1 t3_img=$2 t3_file=$3 t3_out=$4
	shift 4
	"$INIT" --restored "$TRASH/restored$t3_n.pid" -- \
		"$CRIU" restore -D "$t3_img" -o "restore$t3_n.log" --restore-detached \
		--pidfile "$TRASH/restored$t3_n.pid" \
		--inherit-fd "fd[3]:${TRASH#/}/$t3_file" "$@" \
		3>>"$t3_out" >"launcher$t3_n.out" 2>&1 </dev/null &
	echo $! >"launcher$t3_n.pid"
	ibcr_track $!
	ibcr_wait_for 20 t3_restore_ended "$t3_n"
	if ! test -s "restored$t3_n.pid" || ! ibcr_alive "$(cat "restored$t3_n.pid")"; then
		echo "restore failed; ibcr-init said:" | ibcr_diag
		ibcr_diag <"launcher$t3_n.out"
		t3_show_log "$t3_img/restore$t3_n.log"
		return 1
	fi
	ibcr_track "$(cat "restored$t3_n.pid")"
}
t3_restore_ended() {
	test -s "restored$1.pid" || ! ibcr_alive "$(cat "launcher$1.pid")"
}


# --- ibcr-init on its own -----------------------------------------------

test_expect_success 'ibcr-init runs CMD as pid 2 under init pid 1, in the init'"'"'s session' '
	"$INIT" -- sh -c "echo \$\$ \$PPID" >ids &&
	echo "2 1" >ids.expected &&
	test_cmp ids.expected ids &&
	"$INIT" -- sh -c "read -r l </proc/self/stat; set -- \$l; echo ppid=\$4 sid=\$6" >sess &&
	ppid=$(sed -n "s/^ppid=\([0-9]*\) .*/\1/p" sess) &&
	sid=$(sed -n "s/.*sid=\([0-9]*\)$/\1/p" sess) &&
	test -n "$sid" && test "$sid" = "$ppid"
'

test_expect_success 'ibcr-init exits with CMD'"'"'s exit code, or 128+signal' '
	test_expect_code 7 "$INIT" -- sh -c "exit 7" &&
	test_expect_code 0 "$INIT" -- true &&
	test_expect_code 143 "$INIT" -- sh -c "kill -TERM \$\$"
'

test_expect_success 'ibcr-init forwards SIGTERM to CMD and removes its pid file' '
	"$INIT" --pidfile "$TRASH/fwd.pid" -- \
		sh -c "trap \"echo got-term; exit 9\" TERM; echo ready; while :; do sleep 0.05; done" \
		>fwd.out 2>&1 </dev/null &
	fwd=$! && ibcr_track $fwd &&
	ibcr_wait_for 20 test -s fwd.pid &&
	ibcr_wait_for 20 grep -q ready fwd.out &&
	kill -TERM $(cat fwd.pid) &&
	test_expect_code 9 wait $fwd &&
	grep -q got-term fwd.out &&
	! test -e fwd.pid
'

test_expect_success 'ibcr-init rejects bad input with a clear error' '
	test_expect_code 125 "$INIT" 2>err.none &&
	grep "no command given" err.none &&
	test_expect_code 125 "$INIT" --bogus -- true 2>err.opt &&
	grep "unknown option .--bogus." err.opt &&
	test_expect_code 125 "$INIT" --pidfile 2>err.arg &&
	grep "needs an argument" err.arg &&
	test_expect_code 127 "$INIT" -- ./no-such-program 2>err.cmd &&
	grep "cannot run .\./no-such-program.: No such file" err.cmd &&
	test_expect_code 125 "$INIT" --restored "$TRASH/none.pid" -- false 2>err.rest &&
	grep "nothing was restored" err.rest &&
	test_expect_code 125 "$INIT" --restored rel.pid -- true 2>err.rel &&
	grep "give an absolute path" err.rel
'

# --- dump, kill, restore ----------------------------------------------

# t3_let_count APP: the pattern program APP counts on until every one of
# its counting threads has ticked since the call, so the next report
# shows progress since the last one.  A tick is a nanosleep, so a thread
# that went to sleep twice more (voluntary context switches, in
# /proc/APP/task/TID/status) has counted at least once in between.  The
# main thread, which waits for signals, is left out.
t3_switches() {
	for t3_t in /proc/$1/task/*; do
		test "${t3_t##*/}" = "$1" && continue
		echo "${t3_t##*/} $(sed -n "s/^voluntary_ctxt_switches:[[:space:]]*//p" $t3_t/status)"
	done
}
t3_ticked() {
	t3_switches $1 | awk "NR == FNR { m[\$1] = \$2; n++; next }
		(\$1 in m) && \$2 >= m[\$1] + 2 { k++ }
		END { exit !(n > 0 && k == n) }" ticks.mark -
}
t3_let_count() {
	test -n "$1" && t3_switches $1 >ticks.mark && test -s ticks.mark &&
	ibcr_wait_for 20 t3_ticked $1
}

test_expect_success 'pattern runs under ibcr-init and answers through the init' '
	"$DETACH" "$INIT" --pidfile "$TRASH/init.pid" -- "$PATTERN" --mib 64 --threads 3 \
		>out 2>err </dev/null &
	echo $! >outer.pid && ibcr_track $(cat outer.pid) &&
	ibcr_wait_for 20 test -s init.pid &&
	init=$(cat init.pid) && ibcr_track $init &&
	ibcr_wait_for 20 grep -q "^start " out &&
	t3_let_count $(t3_child $init) &&
	kill -USR1 $init &&
	ibcr_wait_for 20 t3_has_lines out report 1 &&
	grep "^report 1 .*pattern=ok bad=0" out &&
	t3_child $init >app.pid &&
	test -s app.pid
'

test_expect_success 'criu dump --leave-running of the namespace init' '
	init=$(cat init.pid) &&
	mkdir images &&
	start=$(t3_now_ms) &&
	{ "$CRIU" dump -t $init -D images -o dump.log --leave-running ||
		{ t3_show_log images/dump.log; false; }; } &&
	echo "dump of 64 MiB + 3 threads: $(($(t3_now_ms) - start)) ms" | ibcr_diag &&
	ibcr_alive $init && ibcr_alive $(cat app.pid)
'

test_expect_success 'the original keeps running and counting after the dump' '
	t3_let_count $(cat app.pid) &&
	kill -USR1 $(cat init.pid) &&
	ibcr_wait_for 20 t3_has_lines out report 2 &&
	grep "^report 2 .*pattern=ok bad=0" out
'

test_expect_success 'kill the original: its outer ibcr-init reports 128+9' '
	init=$(cat init.pid) && app=$(cat app.pid) &&
	kill -9 $init &&
	test_expect_code 137 wait $(cat outer.pid) &&
	ibcr_wait_for 20 t3_gone $init &&
	ibcr_wait_for 20 t3_gone $app
'

test_expect_success 'criu restore into a new PID namespace under ibcr-init --restored' '
	t3_now_ms >restore_start &&
	t3_restore "" images out out &&
	echo "restore: $(($(t3_now_ms) - $(cat restore_start))) ms" | ibcr_diag &&
	rinit=$(cat restored.pid) &&
	# Adopted: the restored init is the child of ibcr-init --restored.
	ibcr_wait_for 20 t3_child_of $rinit $(cat launcher.pid) &&
	ibcr_wait_for 20 test -n "$(t3_child $rinit)"
'

test_expect_success 'the restored program is the dumped one, its pattern intact' '
	kill -USR1 $(cat launcher.pid) &&
	ibcr_wait_for 20 t3_has_lines out report 3 &&
	elapsed=$(($(t3_now_ms) - $(cat restore_start))) &&
	before=$(grep "^report 1 " out) &&
	after_dump=$(grep "^report 2 " out | head -n 1) &&
	restored=$(grep "^report " out | sed -n 3p) &&
	printf "%s\n" "before dump:   $before" "original:      $after_dump" \
		"restored:      $restored" | ibcr_diag &&
	test "$(t3_field "$restored" run)" = "$(t3_field "$before" run)" &&
	test "$(t3_field "$restored" pid)" = 2 &&
	test "$(t3_field "$restored" pattern)" = ok &&
	test "$(t3_field "$restored" bad)" = 0 &&
	# The sequence resumes after the last report before the dump.
	case "$restored" in "report 2 "*) true ;; *) false ;; esac &&
	# Each counter resumes from its dumped value (D): at least the value
	# before the dump, at most the original after the dump plus the ticks
	# that fit in the time since the restore began (and a little slack
	# for ticks shortened by the restore).
	a=$(t3_field "$before" counters | tr , " ") &&
	b=$(t3_field "$after_dump" counters | tr , " ") &&
	c=$(t3_field "$restored" counters | tr , " ") &&
	max_ticks=$((elapsed / TICK_MS + 20)) &&
	set -- $a && a0=$1 a1=$2 a2=$3 &&
	set -- $b && b0=$1 b1=$2 b2=$3 &&
	set -- $c && c0=$1 c1=$2 c2=$3 &&
	test $a0 -gt 0 && test $a1 -gt 0 && test $a2 -gt 0 &&
	test $c0 -ge $a0 && test $c1 -ge $a1 && test $c2 -ge $a2 &&
	test $c0 -le $((b0 + max_ticks)) &&
	test $c1 -le $((b1 + max_ticks)) &&
	test $c2 -le $((b2 + max_ticks))
'

test_expect_success 'the restored program keeps counting' '
	restored=$(grep "^report " out | sed -n 3p) &&
	t3_let_count $(t3_child $(cat restored.pid)) &&
	kill -USR1 $(cat launcher.pid) &&
	ibcr_wait_for 20 t3_has_lines out report 4 &&
	later=$(grep "^report " out | sed -n 4p) &&
	echo "restored later: $later" | ibcr_diag &&
	case "$later" in "report 3 "*"pattern=ok bad=0"*) true ;; *) false ;; esac &&
	set -- $(t3_field "$restored" counters | tr , " ") && c0=$1 c1=$2 c2=$3 &&
	set -- $(t3_field "$later" counters | tr , " ") &&
	test $1 -gt $c0 && test $2 -gt $c1 && test $3 -gt $c2
'

test_expect_success 'a second restore runs beside the first, writing to a new file' '
	t3_restore 2 images out out2 &&
	ibcr_alive $(cat restored.pid) &&
	kill -USR1 $(cat launcher2.pid) &&
	ibcr_wait_for 20 t3_has_lines out2 report 1 &&
	second=$(grep "^report " out2) &&
	echo "second copy:   $second" | ibcr_diag &&
	case "$second" in "report 2 "*"pattern=ok bad=0"*) true ;; *) false ;; esac &&
	test "$(t3_field "$second" run)" = "$(t3_field "$(grep "^report 1 " out)" run)" &&
	test $(t3_lines out report) = 4
'

test_expect_success 'SIGTERM to ibcr-init --restored ends the restored tree cleanly' '
	for n in "" 2; do
		kill -TERM $(cat launcher$n.pid) &&
		test_expect_code 0 wait $(cat launcher$n.pid) &&
		ibcr_wait_for 20 t3_gone $(cat restored$n.pid) || return 1
	done &&
	grep "^final 4 .*pattern=ok bad=0" out &&
	grep "^final 3 .*pattern=ok bad=0" out2
'

test_expect_success 'ibcr-init --restored kills a restored tree it cannot identify' '
	test_expect_code 125 "$INIT" --restored "$TRASH/wrong.pid" -- \
		"$CRIU" restore -D images -o restore-bad.log --restore-detached \
		--pidfile "$TRASH/other.pid" --inherit-fd "fd[3]:${TRASH#/}/out" \
		3>>out-bad 2>bad.err </dev/null &&
	cat bad.err &&
	grep "left no valid pid in $TRASH/wrong.pid" bad.err &&
	grep "killing restored process $(cat other.pid)" bad.err &&
	! ibcr_alive $(cat other.pid)
'

test_expect_success 'a dump without --leave-running ends the task' '
	"$DETACH" "$INIT" --pidfile "$TRASH/init3.pid" -- "$PATTERN" --mib 16 \
		>out3 2>err3 </dev/null &
	echo $! >outer3.pid && ibcr_track $(cat outer3.pid) &&
	ibcr_wait_for 20 test -s init3.pid &&
	init=$(cat init3.pid) && ibcr_track $init &&
	ibcr_wait_for 20 grep -q "^start " out3 &&
	t3_let_count $(t3_child $init) &&
	kill -USR1 $init &&
	ibcr_wait_for 20 t3_has_lines out3 report 1 &&
	mkdir images3 &&
	{ "$CRIU" dump -t $init -D images3 -o dump.log ||
		{ t3_show_log images3/dump.log; false; }; } &&
	test_expect_code 137 wait $(cat outer3.pid) &&
	ibcr_wait_for 20 t3_gone $init
'

test_expect_success 'restore --leave-stopped; SIGCONT to ibcr-init --restored resumes it' '
	t3_restore 3 images3 out3 out3 --leave-stopped &&
	rinit=$(cat restored3.pid) &&
	ibcr_wait_for 20 t3_child_of $rinit $(cat launcher3.pid) &&
	app=$(t3_child $rinit) &&
	test "$(t3_state $rinit)" = T && test "$(t3_state $app)" = T &&
	kill -USR1 $(cat launcher3.pid) &&
	# (a stopped tree must not answer: only waiting a while shows that)
	sleep 0.3 &&
	test $(t3_lines out3 report) = 1 &&
	kill -CONT $(cat launcher3.pid) &&
	ibcr_wait_for 20 t3_has_lines out3 report 2 &&
	resumed=$(grep "^report 2 " out3) &&
	echo "resumed:       $resumed" | ibcr_diag &&
	case "$resumed" in *"pattern=ok bad=0"*) true ;; *) false ;; esac &&
	test "$(t3_field "$resumed" run)" = "$(t3_field "$(grep "^report 1 " out3)" run)" &&
	kill -TERM $(cat launcher3.pid) &&
	test_expect_code 0 wait $(cat launcher3.pid) &&
	grep "^final 3 .*pattern=ok bad=0" out3
'

test_expect_success 'no process of this test is left' '
	for p in $ibcr_tracked; do
		! ibcr_same_proc_ "${p%%:*}" "${p#*:}" || { echo "pid ${p%%:*} still runs" >&2; return 1; }
	done
'

test_done
