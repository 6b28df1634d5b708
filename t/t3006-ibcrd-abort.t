#!/bin/sh

test_description='a failed generation aborts cleanly

Each way a generation can fail, with real CRIU and a real ibcrd: CRIU
refuses to dump (the task holds an established TCP connection), the
storage fills up during the copy (a small tmpfs), ibcrd is killed with
SIGKILL during the dump.  Each time the asker hears what failed, the
program runs on with its pattern intact, no partial generation is listed
or left on disk, and the last committed generation stays restorable.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ibcr_require ROOT CRIU

ibcrd_use_build

# The small storage: a tmpfs in the short folder (an ibcrd.conf line
# holds 198 characters), small/ in the trash directory links to it.
SMALL=$(ibcr_shortdir)/small

t6_umount() {
	if mountpoint -q "$SMALL"; then umount "$SMALL"; fi
	return 0
}

# t6_start JOB MIB [PRE]: ibcr run JOB (PRE is a shell snippet run before
# the pattern, in the task); sets APP.
t6_start() {
	{ "$IBCR" run --name "$1" -- bash -c "${3:-true}; exec \"$PATTERN\" --mib $2" \
		>"$1.out" 2>"$1.err" & } &&
	echo $! >"$1.run" && ibcr_track $! &&
	ibcrd_wait_for "$IBCR" status "$1" >/dev/null 2>&1 &&
	ibcrd_wait_for grep -q "^start" "$1.out" &&
	APP=$(ibcrd_field "$1" app_pid) && ibcr_track "$APP" "$(ibcrd_field "$1" pid)"
}

test_expect_success 'setup: ibcrd with a peer port (a TCP listener to connect to)' '
	ibcrd_setup d "criu = $IBCR_CRIU" "peer_port = any" &&
	ibcrd_start d &&
	IBCR_SOCKET=$(ibcrd_sock d) && export IBCR_SOCKET &&
	PORT=$(ibcrd_peer_port d) && test -n "$PORT"
'

test_expect_success 'CRIU fails (established TCP connection): clear error, nothing committed, program runs on' '
	t6_start tcp 8 "exec 3<>/dev/tcp/127.0.0.1/$PORT" &&
	test_expect_code 1 "$IBCR" checkpoint tcp --wait 2>err &&
	cat err &&
	grep "generation 1 aborted in dump: rank 0 (pid [0-9]*): criu dump failed" err &&
	grep -i "tcp" err &&
	log=$(sed -n "s/.*log: \(.*dump-gen-1-rank-0.log\).*/\1/p" err) &&
	test -s "$log" &&
	grep "last committed generation stays" err &&
	test "$(ibcrd_gens tcp)" = "" &&
	! test -e d/storage/local/tcp/gen-1 &&
	! test -e d/staging/tcp/gen-1 &&
	ibcrd_report tcp.out $APP | grep "pattern=ok" &&
	"$IBCR" status tcp --json >st.json &&
	ibcrd_json_job last_error <st.json >lasterr &&
	cat lasterr &&
	grep "^generation 1: dump: rank 0 (pid [0-9]*): criu dump failed" lasterr &&
	test "$(ibcrd_json_job last_gen <st.json)" = 0 &&
	test -z "$(ibcrd_json_job phase <st.json)" &&
	"$IBCR" status tcp >human &&
	grep "^  last error: generation 1: dump: rank 0 (pid [0-9]*): criu dump failed" human &&
	grep "^  last generation: none" human
'

test_expect_success 'storage fills up during the copy: ENOSPC aborts, the older generation stays' '
	mkdir "$SMALL" && mount -t tmpfs -o size=24m,mode=0755 ibcrtest "$SMALL" &&
	ibcr_atexit t6_umount &&
	ln -s "$SMALL" small &&
	ibcrd_setup f "criu = $IBCR_CRIU" "peer_port = 0" "storage = $SMALL" &&
	ibcrd_start f &&
	IBCR_SOCKET=$(ibcrd_sock f) &&
	t6_start full 16 &&
	"$IBCR" checkpoint full --wait &&
	test "$(ibcrd_job_field full last_gen)" = "$(ibcrd_manifest_gen small/local/full/gen-1/manifest.json)" &&
	test "$(ibcrd_job_field full last_gen)" = 1 &&
	test -z "$(ibcrd_job_field full last_error)" &&
	test_expect_code 1 "$IBCR" checkpoint full --wait 2>err &&
	cat err &&
	grep "generation 2 aborted in copy: cannot copy .*No space left on device (the checkpoint storage is full" err &&
	ibcrd_job_field full last_error >lasterr &&
	cat lasterr &&
	grep "^generation 2: copy: cannot copy .*No space left on device" lasterr &&
	test "$(ibcrd_job_field full last_gen)" = 1 &&
	test "$(ibcrd_gens full)" = "1 " &&
	! test -e small/local/full/gen-2 &&
	! test -e f/staging/full/gen-2 &&
	"$IBCR" verify full &&
	ibcrd_report full.out $APP | grep "pattern=ok" &&
	IBCR_SOCKET=$(ibcrd_sock d)
'

test_expect_success 'ibcrd killed during the dump: the asker is told, no partial generation, job runs on' '
	t6_start big 384 &&
	echo $APP >big.app &&
	"$IBCR" checkpoint big --wait &&
	{ "$IBCR" checkpoint big --wait >ck.out 2>ck.err & } &&
	ck=$! &&
	ibcrd_wait_for test -e d/staging/big/dump-gen-2-rank-0.log &&
	kill -9 $(ibcrd_pid d) &&
	test_expect_code 1 wait $ck &&
	cat ck.err &&
	grep "generation 2 aborted in dump: ibcrd (pid [0-9]*) died during the dump; the generation is void" ck.err &&
	ibcrd_report big.out $(cat big.app) | grep "pattern=ok" &&
	ibcrd_start d &&
	test "$(ibcrd_gens big)" = "1 " &&
	! test -e d/storage/local/big/gen-2 &&
	! test -e d/staging/big/gen-2
'

test_expect_success 'ibcr run registers the task again with the restarted ibcrd' '
	ibcrd_wait_for grep -q "registered again with ibcrd" big.err &&
	# the aborted number 2 is not given again
	"$IBCR" checkpoint big --wait | grep "generation 3 committed" &&
	test "$(ibcrd_gens big)" = "1 3 " &&
	test "$(ibcrd_job_field big last_gen)" = 3 &&
	test -z "$(ibcrd_job_field big last_error)"
'

test_expect_success 'and the last good generation restores' '
	ibcr_kill 9 $(cat big.run) $(cat big.app) &&
	ibcrd_wait_gone $(cat big.app) &&
	{ "$IBCR" restart big >rs.out 2>rs.err & } &&
	ibcr_track $! && echo $! >rs.pid &&
	ibcrd_wait_for grep -q "restored from generation 3" rs.err &&
	APP=$(ibcrd_field big app_pid) && ibcr_track $APP &&
	ibcrd_report rs.out $APP | grep "pattern=ok" &&
	kill -TERM $(cat rs.pid) && wait $(cat rs.pid)
'

test_done
