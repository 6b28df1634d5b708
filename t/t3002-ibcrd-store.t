#!/bin/sh

test_description='ibcr status, list, verify, prune on real files and a real ibcrd'

. $(dirname $0)/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

ST=$(ibcrd_storage a)

test_expect_success 'setup: an ibcrd and three committed generations and a partial one' '
	ibcrd_setup a &&
	ibcrd_start a &&
	test "$("$MKGEN" "$ST" 42)" = 1 &&
	test "$("$MKGEN" "$ST" 42 --trigger periodic --bytes 300000)" = 2 &&
	test "$("$MKGEN" "$ST" 42 --partial)" = 3 &&
	test "$("$MKGEN" "$ST" 42 --tasks 3)" = 4
'

test_expect_success 'layout: owned by root, job folder and generations 0750, files 0640, manifest last' '
	test "$(stat -c %a "$ST")" = 755 &&
	test "$(stat -c %a "$ST/local")" = 755 &&
	test "$(stat -c %a "$ST/local/42")" = 750 &&
	test "$(stat -c %a "$ST/local/42/gen-1")" = 750 &&
	test "$(stat -c %a "$ST/local/42/gen-1/task-0")" = 750 &&
	test "$(stat -c %a "$ST/local/42/gen-1/task-0/pages-1.img")" = 640 &&
	test "$(stat -c %a "$ST/local/42/gen-1/manifest.json")" = 640 &&
	test "$(stat -c %a "$ST/local/42/gen-3")" = 700 &&
	test "$(stat -c %u "$ST/local/42/gen-1/task-0/pages-1.img")" = 0 &&
	! test -e "$ST/local/42/gen-3/manifest.json" &&
	! ls "$ST/local/42/gen-1" | grep tmp
'

test_expect_success 'list finds the storage through ibcrd (IBCR_SOCKET) and skips the partial generation' '
	IBCR_SOCKET="$(ibcrd_sock a)" "$IBCR" list 42 >out &&
	cat out &&
	test $(wc -l <out) -eq 4 &&
	grep "^1 .* 2 .*manual" out &&
	grep "^2 .*periodic" out &&
	grep "^4 .* 3 " out &&
	! grep "^3 " out
'

test_expect_success 'list --json, with --socket' '
	"$IBCR" --socket "$(ibcrd_sock a)" list 42 --json >out.json &&
	grep "\"job\":\"42\"" out.json &&
	grep -o "\"generation\":[0-9]*" out.json | tr "\n" " " >gens &&
	test "$(cat gens)" = "\"generation\":1 \"generation\":2 \"generation\":4 " &&
	grep "\"bytes\":602468" out.json &&
	grep "\"checksum\":\"xxh3-64\"" out.json &&
	grep "\"engine\":{\"ibcr\":" out.json
'

test_expect_success 'list without ibcrd uses --storage' '
	"$IBCR" --socket /nonexistent.sock --storage "$ST" list 42 >out &&
	test $(wc -l <out) -eq 4
'

test_expect_success 'list of an unknown job exits 4, a bad job name exits 2' '
	test_expect_code 4 "$IBCR" --storage "$ST" list 404 2>err &&
	grep "no checkpoint of job 404 under $ST/local" err &&
	test_expect_code 2 "$IBCR" --storage "$ST" list ../local 2>err &&
	grep "is not a job name" err
'

test_expect_success 'verify: every committed generation is intact' '
	"$IBCR" --storage "$ST" verify 42 >out &&
	cat out &&
	grep "gen-1: ok (4 files" out &&
	grep "gen-2: ok (4 files, 588.3 KiB)" out &&
	grep "gen-4: ok (6 files" out
'

test_expect_success 'verify detects a flipped byte and names the file' '
	f="$ST/local/42/gen-2/task-1/pages-1.img" &&
	cp "$f" saved.img &&
	b=$(od -An -tu1 -j 1000 -N1 "$f" | tr -d " ") &&
	printf "\\$(printf %o $(( (b + 1) % 256 )))" |
		dd of="$f" bs=1 seek=1000 conv=notrunc 2>/dev/null &&
	! cmp -s "$f" saved.img &&
	test_expect_code 5 "$IBCR" --storage "$ST" verify 42 >out 2>err &&
	cat out err &&
	grep "gen-1: ok" out &&
	grep "gen-2: DAMAGED" out &&
	grep "task-1/pages-1.img: checksum mismatch" out &&
	grep "gen-4: ok" out &&
	grep "1 damaged generation" err &&
	test_expect_code 5 "$IBCR" --storage "$ST" verify 42 --gen 2 &&
	"$IBCR" --storage "$ST" verify 42 --gen 1 &&
	cp saved.img "$f" &&
	"$IBCR" --storage "$ST" verify 42 --gen 2
'

test_expect_success 'verify detects a truncated, a missing and an extra file' '
	d="$ST/local/42/gen-4" &&
	cp "$d/task-0/pages-1.img" saved0 && cp "$d/task-1/core-1.img" saved1 &&
	truncate -s 5000 "$d/task-0/pages-1.img" &&
	rm "$d/task-1/core-1.img" &&
	echo intruder >"$d/task-2/extra.img" &&
	test_expect_code 5 "$IBCR" --storage "$ST" verify 42 --gen 4 >out &&
	cat out &&
	grep "task-0/pages-1.img: size 5000, manifest says 100000" out &&
	grep "task-1/core-1.img: missing" out &&
	grep "task-2/extra.img: not in manifest" out &&
	cp saved0 "$d/task-0/pages-1.img" && cp saved1 "$d/task-1/core-1.img" &&
	chmod 640 "$d/task-0/pages-1.img" "$d/task-1/core-1.img" &&
	rm "$d/task-2/extra.img" &&
	"$IBCR" --storage "$ST" verify 42 --gen 4
'

test_expect_success 'verify --gen of a partial or absent generation exits 4' '
	test_expect_code 4 "$IBCR" --storage "$ST" verify 42 --gen 3 >out &&
	grep "gen-3: not committed: no manifest" out &&
	test_expect_code 4 "$IBCR" --storage "$ST" verify 42 --gen 9 2>err &&
	grep "job 42 has no generation 9" err &&
	test_expect_code 2 "$IBCR" --storage "$ST" verify 42 --gen x
'

test_expect_success 'a manifest moved from another generation is not trusted' '
	mkdir "$ST/local/42/gen-7" &&
	cp "$ST/local/42/gen-1/manifest.json" "$ST/local/42/gen-7/" &&
	"$IBCR" --storage "$ST" list 42 >out &&
	! grep "^7 " out &&
	rm -r "$ST/local/42/gen-7"
'

test_expect_success 'prune --keep 2 removes the oldest and the stale partial one' '
	test "$("$MKGEN" "$ST" 42 --partial)" = 5 &&
	"$IBCR" --storage "$ST" prune 42 --keep 2 >out &&
	cat out &&
	grep "removed gen-1" out &&
	grep "removed gen-3" out &&
	! grep "gen-2\|gen-4\|gen-5" out &&
	test -d "$ST/local/42/gen-2" && test -d "$ST/local/42/gen-4" &&
	test -d "$ST/local/42/gen-5" &&
	! test -e "$ST/local/42/gen-1" && ! test -e "$ST/local/42/gen-3" &&
	"$IBCR" --storage "$ST" prune 42 --keep 2 >out &&
	grep "nothing to remove" out
'

test_expect_success 'a new generation numbers after the highest, partial included' '
	test "$("$MKGEN" "$ST" 42)" = 6
'

test_expect_success 'prune never follows a symbolic link' '
	mkdir victim && echo precious >victim/file &&
	test "$("$MKGEN" "$ST" 42 --partial)" = 7 &&
	ln -s "$PWD/victim" "$ST/local/42/gen-7/task-0/link" &&
	test "$("$MKGEN" "$ST" 42)" = 8 &&
	"$IBCR" --storage "$ST" prune 42 --keep 1 >out &&
	grep "removed gen-7" out &&
	! test -e "$ST/local/42/gen-7" &&
	test "$(cat victim/file)" = precious
'

test_expect_success 'prune usage errors' '
	test_expect_code 2 "$IBCR" --storage "$ST" prune 42 &&
	test_expect_code 2 "$IBCR" --storage "$ST" prune 42 --keep -1 &&
	test_expect_code 2 "$IBCR" --storage "$ST" prune --keep 1
'

# job_registered JOB: daemon a has a task of JOB.
job_registered() {
	IBCR_SOCKET="$(ibcrd_sock a)" "$IBCR" status "$1" >/dev/null 2>&1
}

test_expect_success 'status lists registered jobs; status JOB --json shows its tasks' '
	"$RAWMSG" "$(ibcrd_sock a)" \
		"{\"version\":1,\"type\":\"register\",\"job\":\"77\",\"rank\":0,\"node\":\"nX\"}" \
		"@sleep:2000" >/dev/null &
	rp=$! &&
	ibcrd_wait_for job_registered 77 &&
	IBCR_SOCKET="$(ibcrd_sock a)" "$IBCR" status >out &&
	cat out &&
	grep "^node .* storage $ST/local" out &&
	grep "^job 77  uid $(id -u)  tasks 1" out &&
	IBCR_SOCKET="$(ibcrd_sock a)" "$IBCR" status 77 --json >out &&
	grep "\"job\":{\"job\":\"77\".*\"rank\":0,.*\"node\":\"nX\"" out &&
	test_expect_code 4 env IBCR_SOCKET="$(ibcrd_sock a)" "$IBCR" status 78 2>err &&
	grep "job 78 has no task registered" err &&
	wait $rp
'

test_expect_success 'an unreachable ibcrd exits 3 naming the socket' '
	test_expect_code 3 "$IBCR" --socket "$(ibcr_shortdir)/none.sock" status 2>err &&
	grep "cannot reach ibcrd at $(ibcr_shortdir)/none.sock" err
'

test_expect_success 'unknown command exits 2; run/checkpoint/restart check their usage' '
	test_expect_code 2 "$IBCR" frob 2>err &&
	grep "unknown command .frob." err &&
	test_expect_code 2 "$IBCR" checkpoint 2>err &&
	grep "usage: ibcr checkpoint JOB" err &&
	test_expect_code 2 "$IBCR" run 2>err &&
	grep "no command to run" err &&
	test_expect_code 2 "$IBCR" restart 42 --gen 0 2>err &&
	grep "give a number" err &&
	test_expect_code 2 "$IBCR"
'

test_done
