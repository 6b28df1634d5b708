#!/bin/sh

test_description='root never acts by path in a folder a user can write (issue 10 c, d)

Two real users: ibcr-user1 owns the jobs, ibcr-user2 is another user.
- Commit: a process of the job'"'"'s user races the commit, swapping task
  folders for links to a root-owned copy of image files; those keep their
  owner, mode and bytes.  What root later believes (manifest, .last-gen)
  cannot be rewritten by the user; the user still reads, lists and
  verifies their own generations.
- Staging, storage and the folders above them: made first by another
  user, or writable by others, ibcrd refuses to start and names the folder
  and the fix; a dump log planted there as a link is never written
  through.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"

# About root and two users: "$IBCR" stays root's (ibcrd_use_build).
IBCR_JOB_USER=
ibcr_require ROOT USERS
ibcr_want CRIU

as() {
	as_u=$1
	shift
	setpriv --reuid="$(id -u "$as_u")" --regid="$(id -g "$as_u")" --clear-groups "$@"
}

SWAPPER=$IBCR_BUILDDIR/t/ibcrd/swapper
U1=$IBCR_USER1
U2=$IBCR_USER2
# What ibcrd.conf names lives in the short folder, not the trash
# directory: an ibcrd.conf line holds 198 characters, and the trash
# directory's path grows with the clone's.
SHORT=$(ibcr_shortdir)
ST=$SHORT/st
PUB=$SHORT/pub

# A root-owned copy of image files, what the attacker aims root at.
make_victim() {
	mkdir -p victim &&
	for f in pages-1.img core-1.img manifest.json; do
		echo precious >victim/$f || return 1
	done &&
	chown -R 0:0 victim && chmod 0755 victim && chmod 0644 victim/*
}

gens_of() {
	"$IBCR" --storage "$ST" list "$1" --json | grep -o "\"generation\":[0-9]*" |
		sed "s/.*://" | tr "\n" " "
}

victim_intact() {
	for f in pages-1.img core-1.img manifest.json; do
		test "$(stat -c %u:%g:%a victim/$f)" = 0:0:644 &&
		test "$(cat victim/$f)" = precious || {
			echo "victim/$f changed: $(stat -c %u:%g:%a victim/$f) $(head -c 40 victim/$f)" >&2
			return 1
		}
	done
}

test_expect_success 'setup: the trash folder is reachable by the test users' '
	chmod 0755 . &&
	make_victim &&
	victim_intact
'

test_expect_success 'a process of the job user racing commits cannot make root chown, chmod or write files elsewhere' '
	test "$("$MKGEN" "$ST" race --uid $IBCR_UID1 --gid $IBCR_GID1 --tasks 2)" = 1 &&
	rm -f stop &&
	{ as $U1 "$SWAPPER" "$ST/local/race" "$PWD/victim" "$PWD/stop" 60 >swaps & } &&
	ibcr_track $! &&
	for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
		"$MKGEN" "$ST" race --uid $IBCR_UID1 --gid $IBCR_GID1 --tasks 30 \
			--bytes 200000 >/dev/null 2>>mkgen.err || echo "round $i failed" >>mkgen.err
	done &&
	touch stop &&
	cat mkgen.err &&
	ibcr_wait_for 10 test -s swaps &&
	echo "the job user made $(cat swaps) exchanges" &&
	victim_intact
'

test_expect_success 'every generation of the race committed, root-owned, read-only to the job group' '
	test "$(gens_of race)" = "1 2 3 4 5 6 7 8 9 10 11 12 13 " &&
	test "$(stat -c %u:%g:%a "$ST/local/race")" = 0:$IBCR_GID1:750 &&
	test "$(stat -c %u:%g:%a "$ST/local/race/gen-2")" = 0:$IBCR_GID1:750 &&
	test "$(stat -c %u:%g:%a "$ST/local/race/gen-2/task-0/pages-1.img")" = 0:$IBCR_GID1:640 &&
	test "$(stat -c %u:%g:%a "$ST/local/race/gen-2/manifest.json")" = 0:$IBCR_GID1:640
'

test_expect_success 'the job user cannot rewrite what root later believes (manifest, .last-gen)' '
	m="$ST/local/race/gen-1/manifest.json" &&
	cp "$m" manifest.before &&
	as $U1 sh -c "echo {} >\"$m\"" 2>err; cat err &&
	as $U1 sh -c "echo 99999990 >\"$ST/local/race/.last-gen\"" 2>>err;
	as $U1 sh -c "rm -f \"$ST/local/race/.last-gen\" &&
		echo 99999990 >\"$ST/local/race/.last-gen\"" 2>>err;
	as $U1 sh -c "mv \"$ST/local/race/gen-1\" \"$ST/local/race/gen-1.x\"" 2>>err;
	cmp "$m" manifest.before &&
	test "$("$MKGEN" "$ST" race --uid $IBCR_UID1 --gid $IBCR_GID1)" = 14 &&
	"$IBCR" --storage "$ST" verify race --gen 1
'

test_expect_success 'the job user reads, lists and verifies their own images; user2 cannot' '
	as $U1 cat "$ST/local/race/gen-2/task-0/pages-1.img" >/dev/null &&
	as $U1 "$IBCR" --storage "$ST" list race >out &&
	test $(wc -l <out) -eq 15 &&
	as $U1 "$IBCR" --storage "$ST" verify race --gen 2 &&
	test_must_fail as $U2 cat "$ST/local/race/gen-2/task-0/pages-1.img" 2>/dev/null &&
	test_expect_code 6 as $U2 "$IBCR" --storage "$ST" list race 2>err &&
	grep "permission denied" err
'

# ibcrd_refuses NAME: ibcrd -F on NAME/ibcrd.conf must exit 1 at once
# (an old ibcrd serving instead is ended by timeout), with its error in
# NAME/start.err and no socket left behind.
ibcrd_refuses() {
	timeout -k 2 10 "$IBCRD" -F -c "$PWD/$1/ibcrd.conf" 2>"$1/start.err"
	ibcrd_rf_rc=$?
	cat "$1/start.err"
	test $ibcrd_rf_rc = 1 && ! test -S "$1/run/ibcrd.sock"
}

# set_conf NAME KEY VALUE: replace KEY's line in NAME/ibcrd.conf.
set_conf() {
	sed -i "/^$2 = /d" "$1/ibcrd.conf" && echo "$2 = $3" >>"$1/ibcrd.conf"
}

test_expect_success 'a staging folder made first by another user: ibcrd refuses to start, naming it and the fix' '
	mkdir -m 1777 "$PUB" &&
	as $U2 mkdir -p "$PUB/ibcr/staging" &&
	ibcrd_setup s1 &&
	set_conf s1 staging "$PUB/ibcr/staging" &&
	ibcrd_refuses s1 &&
	grep "staging $PUB/ibcr/staging: folder $PUB/ibcr is owned by uid $IBCR_UID2, not by root" s1/start.err &&
	grep "remove it (or, if it is meant to be there, chown root:root $PUB/ibcr" s1/start.err
'

test_expect_success 'a staging link of another user, or a staging writable by others, is refused too' '
	as $U2 mkdir "$PUB/elsewhere" &&
	as $U2 ln -s "$PUB/elsewhere" "$PUB/stg" &&
	set_conf s1 staging "$PUB/stg" &&
	ibcrd_refuses s1 &&
	grep "$PUB/stg is a symbolic link owned by uid $IBCR_UID2" s1/start.err &&
	mkdir -m 0777 "$SHORT/s1/open" &&
	chmod 0777 "$SHORT/s1/open" &&
	set_conf s1 staging "$SHORT/s1/open" &&
	ibcrd_refuses s1 &&
	grep "folder $SHORT/s1/open is writable by group or others (mode 0777): run chmod go-w" s1/start.err
'

test_expect_success 'storage or its cluster folder made by another user: refused' '
	ibcrd_setup s2 &&
	S2=$(ibcrd_storage s2) &&
	mkdir -p "$S2/local" && chown $IBCR_UID2:$IBCR_GID2 "$S2/local" &&
	ibcrd_refuses s2 &&
	grep "storage cluster folder $S2/local: folder $S2/local is owned by uid $IBCR_UID2" s2/start.err &&
	chown 0:0 "$S2/local" &&
	chown $IBCR_UID2 "$S2" &&
	ibcrd_refuses s2 &&
	grep "storage $S2: folder $S2 is owned by uid $IBCR_UID2" s2/start.err
'

test_expect_success 'good folders that already exist are kept; missing ones are made root-owned 0755' '
	chown 0:0 "$S2" &&
	chmod 0700 "$S2/local" &&
	ibcrd_start s2 &&
	test "$(stat -c %u:%a "$S2/local")" = 0:700 &&
	test "$(stat -c %u:%a "$(ibcrd_staging s2)")" = 0:755 &&
	ibcrd_stop s2
'

test_expect_success CRIU 'a dump log planted as a link in a staging folder of another user is never written through' '
	as $U2 mkdir -p "$PUB/ibcr/staging/dl" &&
	as $U2 ln -s "$PWD/victim/core-1.img" "$PUB/ibcr/staging/dl/dump-gen-1-rank-0.log" &&
	ibcrd_use_build &&
	ibcrd_setup s3 "criu = $IBCR_CRIU" "peer_port = 0" "staging = $PUB/ibcr/staging" &&
	if ibcrd_start s3 2>/dev/null; then
		# An ibcrd that accepts the folder: checkpoint a job of root there.
		IBCR_SOCKET=$(ibcrd_sock s3) && export IBCR_SOCKET &&
		{ "$IBCR" run --name dl -- sleep 120 >dl.out 2>&1 & } &&
		ibcr_track $! &&
		ibcrd_wait_for "$IBCR" status dl >/dev/null 2>&1 &&
		ibcr_track $(ibcrd_field dl pid) $(ibcrd_field dl app_pid) &&
		"$IBCR" checkpoint dl --wait
		ibcrd_stop s3
		false
	fi &&
	# Refused at start: exit 1, the reason on its stderr.
	test_expect_code 1 "$IBCRD" -F -c s3/ibcrd.conf 2>s3.err &&
	grep "staging $PUB/ibcr/staging: folder $PUB/ibcr is owned by uid $IBCR_UID2" s3.err
'

test_expect_success 'the root-owned copy is intact after every attempt' '
	victim_intact
'

test_expect_success 'removal through ibcrd: another user is refused, the job'"'"'s user prunes their own' '
	ibcrd_setup pr "storage = $ST" &&
	ibcrd_start pr &&
	before=$(gens_of race) &&
	test_expect_code 6 as $U2 "$IBCR" --socket "$(ibcrd_sock pr)" prune race --keep 1 2>err &&
	cat err &&
	grep "job race belongs to another user" err &&
	test "$(gens_of race)" = "$before" &&
	as $U1 "$IBCR" --socket "$(ibcrd_sock pr)" prune race --keep 2 >out &&
	cat out &&
	grep "^removed gen-1$" out &&
	test "$(gens_of race)" = "13 14 " &&
	ibcrd_stop pr
'

# A prune reads every manifest and removes whole generations, and waits
# (up to 30 s) for any other prune of the job: in a child of ibcrd, never
# in its loop, which would serve no other user meanwhile.  The test holds
# the job'"'"'s prune lock (root'"'"'s, 0600: no user can) so that the user'"'"'s
# prune waits for it; ibcrd has no other child here.
prune_waits() {
	pgrep -P "$(cat pr/launch.pid)" >/dev/null
}

test_expect_success 'a user'"'"'s prune waits for the job'"'"'s prune lock in a child: ibcrd answers another user meanwhile, and the prune ends when the lock is free' '
	ibcrd_start pr &&
	lock=$ST/local/race/.prune-lock &&
	test "$(stat -c %u:%a "$lock")" = 0:600 &&
	test_must_fail as $U1 flock -n "$lock" true &&
	exec 8<"$lock" && flock 8 &&
	{ as $U1 "$IBCR" --socket "$(ibcrd_sock pr)" prune race --keep 1 >out 2>err & } &&
	pr=$! && ibcr_track $pr &&
	ibcrd_wait_for prune_waits &&
	as $U2 timeout 30 "$IBCR" --socket "$(ibcrd_sock pr)" status >st.out &&
	test "$(gens_of race)" = "13 14 " &&
	flock -u 8 && exec 8<&- &&
	wait $pr && cat out err &&
	grep "^removed gen-13$" out &&
	test "$(gens_of race)" = "14 " &&
	ibcrd_stop pr
'

test_done
