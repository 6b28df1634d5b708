#!/bin/sh

test_description='a second real uid cannot see, verify, prune or read the first uid'"'"'s jobs and images, nor act on them through ibcrd'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

# About root and two users: "$IBCR" stays root's (ibcrd_use_build).
IBCR_JOB_USER=
ibcr_require ROOT OTHERS

UA=ibcra$$
UB=ibcrb$$

# Remove only the two users this test made (by their unique names).
remove_users() {
	for u in $UA $UB; do
		id "$u" >/dev/null 2>&1 && userdel "$u" >/dev/null 2>&1
	done
	return 0
}

as() {
	u=$1
	shift
	setpriv --reuid="$(id -u $u)" --regid="$(id -g $u)" --clear-groups "$@"
}

test_expect_success 'setup: two real users, an ibcrd, generations of a job of user A' '
	ibcr_atexit remove_users &&
	useradd -r -M -d /nonexistent -s /usr/sbin/nologin -U $UA &&
	useradd -r -M -d /nonexistent -s /usr/sbin/nologin -U $UB &&
	A=$(id -u $UA) && B=$(id -u $UB) && test "$A" != "$B" &&
	ibcrd_use_build &&
	ibcrd_setup a &&
	ibcrd_start a &&
	ST=$(ibcrd_storage a) &&
	test "$("$MKGEN" "$ST" jobA --uid $A --gid $(id -g $UA))" = 1 &&
	test "$("$MKGEN" "$ST" jobA --uid $A --gid $(id -g $UA))" = 2 &&
	test "$(stat -c %u:%g "$ST/local/jobA")" = 0:$(id -g $UA) &&
	test "$(stat -c %u:%g "$ST/local/jobA/gen-1/task-0/pages-1.img")" = 0:$(id -g $UA)
'

test_expect_success 'user A lists and verifies its own job' '
	as $UA "$IBCR" --socket "$(ibcrd_sock a)" list jobA >out &&
	test $(wc -l <out) -eq 3 &&
	as $UA "$IBCR" --socket "$(ibcrd_sock a)" verify jobA
'

test_expect_success 'user B cannot list, verify or prune it (exit 6, says why)' '
	test_expect_code 6 as $UB "$IBCR" --socket "$(ibcrd_sock a)" list jobA 2>err &&
	grep "job jobA: permission denied: its checkpoints belong to another user" err &&
	test_expect_code 6 as $UB "$IBCR" --socket "$(ibcrd_sock a)" verify jobA 2>err &&
	grep "permission denied" err &&
	test_expect_code 6 as $UB "$IBCR" --socket "$(ibcrd_sock a)" prune jobA --keep 0 2>err &&
	grep "job jobA belongs to another user" err &&
	test -d "$ST/local/jobA/gen-1" && test -d "$ST/local/jobA/gen-2"
'

test_expect_success 'user A reads its images but cannot alter them' '
	as $UA cat "$ST/local/jobA/gen-1/task-0/pages-1.img" >/dev/null &&
	test_must_fail as $UA sh -c "echo x >>\"$ST/local/jobA/gen-1/task-0/core-1.img\"" &&
	test_must_fail as $UA sh -c "echo x >\"$ST/local/jobA/gen-1/evil\"" &&
	! test -e "$ST/local/jobA/gen-1/evil"
'

test_expect_success 'user B cannot read, list or alter the image files' '
	test_must_fail as $UB cat "$ST/local/jobA/gen-1/task-0/pages-1.img" >/dev/null 2>err &&
	grep "Permission denied" err &&
	test_must_fail as $UB ls "$ST/local/jobA" 2>err &&
	test_must_fail as $UB sh -c "echo x >\"$ST/local/jobA/gen-1/evil\"" 2>err &&
	test_must_fail as $UB mkdir "$ST/local/jobB-squat" 2>err &&
	! test -e "$ST/local/jobA/gen-1/evil"
'

# sa_registered: root's status shows job sa of user A, with one task.
sa_registered() {
	"$IBCR" --socket "$(ibcrd_sock a)" status sa 2>/dev/null |
		grep -q "^job sa  uid $A  tasks 1"
}

test_expect_success 'user A registers a task of job sa with ibcrd' '
	as $UA "$RAWMSG" "$(ibcrd_sock a)" \
		"{\"version\":1,\"type\":\"register\",\"job\":\"sa\",\"rank\":0}" \
		"@sleep:8000" >regA.out &
	echo $! >regA.pid &&
	ibcrd_wait_for sa_registered
'

# Job names outside Slurm are per user: for B, "sa" is a job B does not have.
test_expect_success 'user B cannot see job sa in status, nor query it' '
	as $UB "$IBCR" --socket "$(ibcrd_sock a)" status >out &&
	grep "no job registered" out &&
	test_expect_code 4 as $UB "$IBCR" --socket "$(ibcrd_sock a)" status sa 2>err &&
	grep "job sa has no task registered" err
'

test_expect_success 'user A and root see it' '
	as $UA "$IBCR" --socket "$(ibcrd_sock a)" status sa >out &&
	grep "^job sa  uid $A  tasks 1" out &&
	"$IBCR" --socket "$(ibcrd_sock a)" status >out &&
	grep "^job sa  uid $A" out
'

test_expect_success 'user B cannot checkpoint job sa or resume it: for B there is no such job' '
	test_expect_code 4 as $UB "$IBCR" --socket "$(ibcrd_sock a)" checkpoint sa --wait 2>err &&
	grep "job sa has no task registered" err &&
	as $UB "$RAWMSG" "$(ibcrd_sock a)" \
		"{\"version\":1,\"type\":\"resume-restored\",\"job\":\"sa\"}" >out &&
	cat out &&
	sed -n 1p out | grep "ENOENT.*job sa has no task registered" &&
	test "$("$IBCR" --socket "$(ibcrd_sock a)" status sa --json | grep -o "\"checkpointing\":[a-z]*")" = "\"checkpointing\":false"
'

test_expect_success 'ibcr run as a user: ibcrd runs the program as that user, not as root' '
	as $UA "$IBCR" --socket "$(ibcrd_sock a)" run --name ids -- sh -c "id -u; id -g" >out 2>err &&
	cat out err &&
	test "$(sed -n 1p out)" = "$A" &&
	test_expect_code 4 as $UA "$IBCR" --socket "$(ibcrd_sock a)" restart nosuch 2>err &&
	grep "no checkpoint of job nosuch" err &&
	test_expect_code 6 as $UB "$IBCR" --socket "$(ibcrd_sock a)" restart jobA 2>err &&
	grep "job jobA generation 2 belongs to another user: only its owner (or root) restores it" err
'

test_expect_success 'user B cannot join job sa (A runs it), claim a process of A, or register for uid A' '
	apid=$(sed -n "s/.*job sa step 0: registered rank 0 pid \([0-9]*\).*/\1/p" a/ibcrd.log | head -1) &&
	as $UB "$RAWMSG" "$(ibcrd_sock a)" \
		"{\"version\":1,\"type\":\"register\",\"job\":\"sa\",\"rank\":1}" \
		"{\"version\":1,\"type\":\"register\",\"job\":\"sb\",\"rank\":0,\"pid\":$apid}" \
		"{\"version\":1,\"type\":\"register\",\"job\":\"sc\",\"rank\":0,\"uid\":$A}" >out &&
	cat out &&
	sed -n 1p out | grep "EPERM.*job name sa belongs to another user" &&
	sed -n 2p out | grep "EPERM.*pid $apid is not yours" &&
	sed -n 3p out | grep "EPERM.*only root may register a task for another uid" &&
	as $UA "$IBCR" --socket "$(ibcrd_sock a)" status sa >out &&
	grep "^job sa  uid $A  tasks 1" out
'

test_expect_success 'root may register on behalf of user A (as slurmstepd will)' '
	"$RAWMSG" "$(ibcrd_sock a)" \
		"{\"version\":1,\"type\":\"register\",\"job\":\"sa\",\"rank\":1,\"uid\":$A}" >out &&
	grep "\"request\":\"register\".*\"ntasks\":2" out &&
	wait $(cat regA.pid)
'

test_expect_success 'a rank whose process ended gives way to a new registration; a live one never does' '
	# Two processes of user A (setpriv execs sleep: $! is the sleep)
	ua="--reuid=$(id -u $UA) --regid=$(id -g $UA) --clear-groups" &&
	{ setpriv $ua sleep 600 & } && p1=$! && ibcr_track $p1 &&
	{ setpriv $ua sleep 600 & } && p2=$! && ibcr_track $p2 &&
	ibcrd_wait_for sh -c "grep -qx sleep /proc/$p1/comm && grep -qx sleep /proc/$p2/comm" &&
	{ as $UA "$RAWMSG" "$(ibcrd_sock a)" \
		"{\"version\":1,\"type\":\"register\",\"job\":\"sg\",\"rank\":0,\"pid\":$p1}" \
		"@sleep:20000" >reg1.out & } &&
	echo $! >reg1.pid && ibcr_track $! &&
	ibcrd_wait_for grep -q "\"request\":\"register\"" reg1.out &&
	"$IBCR" --socket "$(ibcrd_sock a)" status sg --json >st &&
	test "$(ibcrd_json_task pid <st)" = $p1 &&
	as $UA "$RAWMSG" "$(ibcrd_sock a)" \
		"{\"version\":1,\"type\":\"register\",\"job\":\"sg\",\"rank\":0,\"pid\":$p2}" >out &&
	grep "EEXIST.*job sg step 0 rank 0 is already registered (pid $p1)" out &&
	kill $p1 && ibcrd_wait_gone $p1 &&
	{ as $UA "$RAWMSG" "$(ibcrd_sock a)" \
		"{\"version\":1,\"type\":\"register\",\"job\":\"sg\",\"rank\":0,\"pid\":$p2}" \
		"@sleep:20000" >reg2.out & } &&
	echo $! >reg2.pid && ibcr_track $! &&
	ibcrd_wait_for grep -q "\"request\":\"register\"" reg2.out &&
	cat reg2.out &&
	grep "\"ntasks\":1" reg2.out &&
	"$IBCR" --socket "$(ibcrd_sock a)" status sg --json >st &&
	cat st &&
	test "$(ibcrd_json_task pid <st)" = $p2 &&
	grep "\"ntasks\":1," st &&
	kill $p2 $(cat reg1.pid) $(cat reg2.pid)
'

test_done
