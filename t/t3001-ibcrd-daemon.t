#!/bin/sh

test_description='ibcrd: config, start-up, lock, stale socket, signals, bad messages'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"
ibcr_want ROOT

# status_of NAME: the status reply of daemon NAME (one line).
status_of() {
	"$RAWMSG" "$(ibcrd_sock $1)" "{\"version\":1,\"type\":\"status\"}"
}

# reloads_are NAME N: daemon NAME has handled N SIGHUPs.
reloads_are() {
	status_of $1 | grep -q "\"reloads\":$2[,}]"
}

# job_gone NAME JOB: daemon NAME has no task of JOB.
job_gone() {
	"$RAWMSG" "$(ibcrd_sock $1)" "{\"version\":1,\"type\":\"status\",\"job\":\"$2\"}" |
		grep -q "ENOENT.*job $2 has no task registered"
}

test_expect_success 'an unknown key is refused with file, line and key' '
	ibcrd_setup bad "retention = 2" "colour = blue" &&
	test_expect_code 2 "$IBCRD" -F -c bad/ibcrd.conf 2>err &&
	grep "bad/ibcrd.conf:5: unknown key .colour." err
'

test_expect_success 'a bad value is refused naming the key' '
	ibcrd_setup bad2 "retention = lots" &&
	test_expect_code 2 "$IBCRD" -F -c bad2/ibcrd.conf 2>err &&
	grep ":4: retention = lots: not a positive integer" err
'

test_expect_success 'a missing -c file is an error naming it' '
	test_expect_code 2 "$IBCRD" -F -c nowhere.conf 2>err &&
	grep "cannot open configuration nowhere.conf" err
'

test_expect_success 'a stray argument is a usage error' '
	test_expect_code 2 "$IBCRD" -F extra 2>err &&
	grep "unexpected argument .extra." err
'

test_expect_success 'ibcrd -F -c FILE with only socket/storage/staging starts' '
	ibcrd_setup a &&
	test $(wc -l <a/ibcrd.conf) -eq 3 &&
	ibcrd_start a &&
	test -S a/run/ibcrd.sock &&
	test "$(cat a/run/ibcrd.pid)" = "$(ibcrd_pid a)" &&
	"$RAWMSG" "$(ibcrd_sock a)" "{\"version\":1,\"type\":\"ping\"}" >out &&
	grep "\"request\":\"ping\"" out
'

test_expect_success 'socket is 0666 in a 0755 folder owned by the daemon' '
	test "$(stat -c %a a/run/ibcrd.sock)" = 666 &&
	test "$(stat -L -c %a a/run)" = 755 &&
	test "$(stat -L -c %u a/run)" = "$(id -u)"
'

test_expect_success 'status answers with the daemon configuration' '
	"$RAWMSG" "$(ibcrd_sock a)" "{\"version\":1,\"type\":\"status\"}" >out &&
	grep "\"type\":\"ok\"" out &&
	grep "\"storage\":\"$(ibcrd_storage a | sed "s,/,\\\\\\\\/,g")\"" out &&
	grep "\"jobs\":\[\]" out
'

# sys_field NAME KEY: KEY of daemon NAME's "system" status (ibcr status --json),
# or, for KEY advice, its advice one a line.
sys_field() {
	IBCR_SOCKET=$(ibcrd_sock $1) "$IBCR" status --json |
		python3 -c "import json, sys
v = json.load(sys.stdin)[\"daemon\"][\"system\"][sys.argv[1]]
print(\"\n\".join(v) if isinstance(v, list) else v)" "$2"
}

# The kernel settings of ibcrd(8) SYSTEM SETTINGS are read at each status,
# and one that is off comes with advice naming it (here fs.pipe-max-size,
# set for the test and put back).
test_expect_success ROOT 'status reports fs.pipe-max-size, with advice while it is below 8 MiB' '
	old=$(cat /proc/sys/fs/pipe-max-size) &&
	ibcr_atexit "echo $old >/proc/sys/fs/pipe-max-size" &&
	echo 1048576 >/proc/sys/fs/pipe-max-size &&
	test "$(sys_field a pipe_max_size)" = 1048576 &&
	test "$(sys_field a pipe_user_pages_soft)" = "$(cat /proc/sys/fs/pipe-user-pages-soft)" &&
	sys_field a advice >adv &&
	grep "^fs.pipe-max-size is 1024 KiB: .* set it to 8388608" adv &&
	IBCR_SOCKET=$(ibcrd_sock a) "$IBCR" status >human &&
	grep "^system setting: fs.pipe-max-size is 1024 KiB" human &&
	echo 8388608 >/proc/sys/fs/pipe-max-size &&
	test "$(sys_field a pipe_max_size)" = 8388608 &&
	sys_field a advice >adv &&
	! grep pipe-max-size adv &&
	IBCR_SOCKET=$(ibcrd_sock a) "$IBCR" status >human &&
	! grep "^system setting: fs.pipe-max-size" human &&
	echo $old >/proc/sys/fs/pipe-max-size
'

test_expect_success 'register names the client by SO_PEERCRED, status shows it; its task goes with its connection' '
	"$RAWMSG" "$(ibcrd_sock a)" \
		"{\"version\":1,\"type\":\"register\",\"job\":17,\"step\":\"0\",\"rank\":3,\"node\":\"nA\"}" \
		"{\"version\":1,\"type\":\"status\",\"job\":\"17\",\"seq\":9}" >out &&
	sed -n 1p out | grep "\"request\":\"register\".*\"ntasks\":1" &&
	sed -n 2p out | grep "\"rank\":3,\"step\":\"0\",\"node\":\"nA\",\"pid\":[1-9]" &&
	sed -n 2p out | grep "\"seq\":9" &&
	ibcrd_wait_for job_gone a 17
'

test_expect_success 'register with bad fields gets a clear error' '
	"$RAWMSG" "$(ibcrd_sock a)" \
		"{\"version\":1,\"type\":\"register\",\"job\":\"../etc\",\"rank\":0}" \
		"{\"version\":1,\"type\":\"register\",\"job\":\"5\"}" \
		"{\"version\":1,\"type\":\"register\",\"job\":\"5\",\"rank\":0,\"pid\":999999999}" \
		"{\"version\":1,\"type\":\"status\",\"job\":\"404\"}" >out &&
	sed -n 1p out | grep "EINVAL.*not a job id" &&
	sed -n 2p out | grep "EINVAL.*rank" &&
	sed -n 3p out | grep "ESRCH.*does not exist" &&
	sed -n 4p out | grep "ENOENT.*job 404 has no task registered"
'

test_expect_success 'malformed, oversized, unknown-version and unknown-type messages get errors; daemon serves on' '
	"$RAWMSG" "$(ibcrd_sock a)" \
		"@raw:{\"version\":1,\"type\"" \
		"@raw:[1,2]" \
		"@big:2000000" \
		"{\"version\":2,\"type\":\"status\"}" \
		"{\"version\":1,\"type\":\"frobnicate\"}" \
		"{\"version\":1,\"type\":\"ping\"}" >out &&
	sed -n 1p out | grep "\"errname\":\"EPROTO\".*malformed" &&
	sed -n 2p out | grep "\"errname\":\"EPROTO\"" &&
	sed -n 3p out | grep "\"errname\":\"EMSGSIZE\".*2000000 bytes is over" &&
	sed -n 4p out | grep "\"errname\":\"EPROTONOSUPPORT\".*version 2" &&
	sed -n 5p out | grep "unknown request type .frobnicate.; this ibcrd knows: checkpoint, ctl-attach, ibcr-hello, ping, prune, register, restore, resume-restored, spawn, status" &&
	sed -n 6p out | grep "\"type\":\"ok\",\"request\":\"ping\""
'

test_expect_success 'a client dying mid-frame does not disturb the daemon' '
	"$RAWMSG" "$(ibcrd_sock a)" "@half:{\"version\":1,\"type\":\"status\"}" &&
	"$RAWMSG" "$(ibcrd_sock a)" "{\"version\":1,\"type\":\"ping\"}" >out &&
	grep "\"request\":\"ping\"" out
'

test_expect_success 'many clients at once are all answered' '
	pids= &&
	for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		"$RAWMSG" "$(ibcrd_sock a)" \
			"{\"version\":1,\"type\":\"register\",\"job\":\"m$i\",\"rank\":0}" \
			"@sleep:300" "{\"version\":1,\"type\":\"status\"}" >many.$i &
		pids="$pids $!"
	done &&
	for p in $pids; do wait $p || return 1; done &&
	for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		sed -n 2p many.$i | grep "\"job\":\"m$i\"" || return 1
	done
'

test_expect_success 'a message of type error or ok is never answered (no reply loops)' '
	"$RAWMSG" "$(ibcrd_sock a)" \
		"@noreply:{\"version\":1,\"type\":\"error\",\"message\":\"boom\"}" \
		"@noreply:{\"version\":1,\"type\":\"ok\"}" \
		"{\"version\":1,\"type\":\"ping\",\"seq\":1}" >out &&
	test $(wc -l <out) -eq 1 &&
	grep "\"request\":\"ping\".*\"seq\":1" out
'

test_expect_success 'libibcr hello (no reply) binds to the task registered for its pid' '
	"$RAWMSG" "$(ibcrd_sock a)" \
		"{\"version\":1,\"type\":\"register\",\"job\":\"h1\",\"rank\":4}" \
		"@noreply:{\"version\":1,\"type\":\"ibcr-hello\",\"pid\":1,\"rank\":4}" \
		"{\"version\":1,\"type\":\"status\",\"job\":\"h1\"}" >out &&
	test $(wc -l <out) -eq 2 &&
	sed -n 2p out | grep "\"rank\":4,.*\"control\":true"
'

test_expect_success 'libibcr hello without registration registers from IBCR_JOB' '
	IBCR_JOB=h2 "$RAWMSG" "$(ibcrd_sock a)" \
		"@noreply:{\"version\":1,\"type\":\"ibcr-hello\",\"pid\":1,\"rank\":2}" \
		"{\"version\":1,\"type\":\"status\",\"job\":\"h2\"}" >out &&
	grep "\"job\":\"h2\".*\"rank\":2,.*\"control\":true" out &&
	# Without either, nothing is registered: the jobs before and after
	# the hello, on its own connection, are the same.
	env -u IBCR_JOB -u SLURM_JOB_ID "$RAWMSG" "$(ibcrd_sock a)" \
		"{\"version\":1,\"type\":\"status\"}" \
		"@noreply:{\"version\":1,\"type\":\"ibcr-hello\",\"pid\":1,\"rank\":0}" \
		"{\"version\":1,\"type\":\"status\"}" >out &&
	test $(wc -l <out) -eq 2 &&
	sed -n 1p out | sed "s/.*\"jobs\"://" >before &&
	sed -n 2p out | sed "s/.*\"jobs\"://" >after &&
	test_cmp before after
'

test_expect_success 'a second ibcrd on the same socket is refused, naming the first' '
	test_expect_code 1 "$IBCRD" -F -c a/ibcrd.conf 2>err &&
	grep "another ibcrd (pid $(ibcrd_pid a)) is already serving" err &&
	test -S a/run/ibcrd.sock &&
	"$RAWMSG" "$(ibcrd_sock a)" "{\"version\":1,\"type\":\"ping\"}"
'

test_expect_success 'SIGHUP reloads the configuration' '
	reloads_are a 0 &&
	echo "retention = 7" >>a/ibcrd.conf &&
	kill -HUP $(ibcrd_pid a) &&
	ibcrd_wait_for reloads_are a 1 &&
	status_of a >out &&
	grep "\"retention\":7" out &&
	! grep reload_error out
'

test_expect_success 'SIGHUP with a broken file keeps the running configuration' '
	echo "retention = -1" >>a/ibcrd.conf &&
	kill -HUP $(ibcrd_pid a) &&
	ibcrd_wait_for reloads_are a 2 &&
	status_of a >out &&
	grep "\"reload_error\":\".*ibcrd.conf:5: .*retention" out &&
	grep "\"retention\":7" out
'

test_expect_success 'SIGTERM exits 0 and removes socket and pid file' '
	pid=$(ibcrd_pid a) &&
	kill -TERM $pid &&
	wait $pid &&
	! test -e a/run/ibcrd.sock &&
	! test -e a/run/ibcrd.pid &&
	rm -f a/launch.pid
'

test_expect_success 'a stale socket left by a killed ibcrd is removed at start' '
	ibcrd_setup b &&
	ibcrd_start b &&
	pid=$(ibcrd_pid b) &&
	kill -KILL $pid && wait $pid; rm -f b/launch.pid &&
	test -S b/run/ibcrd.sock &&
	ibcrd_start b &&
	"$RAWMSG" "$(ibcrd_sock b)" "{\"version\":1,\"type\":\"ping\"}" &&
	ibcrd_stop b
'

test_expect_success 'a group-writable socket folder is refused' '
	ibcrd_setup c &&
	mkdir -p "$(ibcrd_rundir c)" && chmod 0775 c/run &&
	test_expect_code 1 "$IBCRD" -F -c c/ibcrd.conf 2>err &&
	grep "socket folder .*/c/run: folder .*/c/run is writable by group or others (mode 0775): run chmod go-w" err &&
	! test -e c/run/ibcrd.sock
'

test_expect_success ROOT 'a socket folder owned by another user is refused' '
	ibcrd_setup d &&
	mkdir -p "$(ibcrd_rundir d)" && chown 65534 d/run &&
	test_expect_code 1 "$IBCRD" -F -c d/ibcrd.conf 2>err &&
	grep "socket folder .*/d/run: folder .*/d/run is owned by uid 65534, not by root: its owner could choose where root writes" err
'

test_expect_success 'service mode detaches, writes the pid file, stops on SIGTERM' '
	ibcrd_setup e &&
	ibcr_atexit ibcrd_stop_service e &&
	"$IBCRD" -c e/ibcrd.conf 2>err &&
	test -s e/run/ibcrd.pid &&
	pid=$(cat e/run/ibcrd.pid) &&
	ibcr_alive $pid &&
	test "$(sed "s/.*) . \([0-9]*\).*/\1/" /proc/$pid/stat)" != $$ &&
	test "$(readlink /proc/$pid/cwd)" = / &&
	"$RAWMSG" "$(ibcrd_sock e)" "{\"version\":1,\"type\":\"ping\"}" &&
	kill -TERM $pid &&
	ibcrd_wait_gone $pid &&
	! test -e e/run/ibcrd.sock
'

test_expect_success 'service mode reports a start-up error on the terminal' '
	ibcrd_setup f &&
	mkdir -p "$(ibcrd_rundir f)" && chmod 0777 f/run &&
	test_expect_code 1 "$IBCRD" -c f/ibcrd.conf 2>err &&
	grep "ibcrd: error: socket folder .*: folder .* is writable by group or others" err
'

test_done
