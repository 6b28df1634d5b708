#!/bin/sh
test_description='harness: a clone at a long path

A checkout may sit at any depth (a home directory, a CI workspace), but a
unix socket path may not exceed 107 bytes and an ibcrd.conf line 198
characters (libinih'"'"'s INI_MAX_LINE, see ibcrd.conf(5)): a socket in
the trash directory once made ibcrd refuse its configuration, and the
test then hang; storage and staging there made every ibcrd test fail at
its start from a clone deeper than about 140 characters.  Here the test
works from a folder 200 characters below its trash directory, as a deep
clone would, with a criu binary in it as in a build tree: munged and
ibcrd start from it, ibcrd.conf names nothing below it (sockets,
storage, staging and a link to criu are in the short private folder,
ibcr_shortdir), and a program under "ibcr run" is checkpointed and
restored intact.'

. "$(dirname "$0")"/sharness.sh
. "$SHARNESS_TEST_SRCDIR/ibcrd/lib.sh"
ibcr_require ROOT CRIU

ibcrd_use_build
DEEP=$(printf "d%.0s" $(seq 50))/$(printf "e%.0s" $(seq 50))/$(printf "f%.0s" $(seq 50))/$(printf "g%.0s" $(seq 50))
SHORT=$(ibcr_shortdir)

# the restored program has registered: its pid is known
dp_app_known() {
	test -n "$(ibcrd_field dp app_pid)"
}

test_expect_success 'a working folder 200 characters deeper than the trash directory' '
	mkdir -p "$DEEP" &&
	cd "$DEEP" &&
	echo "working in a folder of ${#PWD} characters" | ibcr_diag &&
	test ${#PWD} -gt 250
'

# conf_is_short FILE: no line of FILE names anything in the trash
# directory or the build tree (whose paths grow with the clone's), and
# every line fits in an ibcrd.conf line (198 characters).
conf_is_short() {
	cat "$1" &&
	! grep -F "$SHARNESS_TRASH_DIRECTORY" "$1" &&
	! grep -F "$IBCR_BUILDDIR/" "$1" &&
	test "$(awk "length > 198" "$1" | wc -l)" = 0
}

# manifest_criu FILE: the criu binary a manifest says made its images.
manifest_criu() {
	/usr/bin/python3 -c '
import json, sys
print(json.load(open(sys.argv[1]))["engine"]["criu"])
' "$1"
}

test_expect_success 'a criu in the deep folder, as built in a deep build tree, is named by a link in the short folder' '
	mkdir bin &&
	cp "$(readlink -f "$IBCR_CRIU")" bin/criu &&
	DCRIU=$(ibcr_shortlink "$PWD/bin/criu" criu-deep) &&
	test "$DCRIU" = "$SHORT/criu-deep" &&
	test "$(readlink "$DCRIU")" = "$PWD/bin/criu" &&
	test "$(ibcr_shortlink /usr/bin/true t)" = /usr/bin/true &&
	! test -e "$SHORT/t"
'

test_expect_success 'munged and ibcrd start from there, with nothing in ibcrd.conf below it' '
	ibcrd_munged_start m &&
	test -S "$(ibcrd_munge_sock m)" &&
	ibcrd_setup d "criu = $DCRIU" "peer_port = 0" "munge_socket = $(ibcrd_munge_sock m)" &&
	conf_is_short d/ibcrd.conf &&
	grep "^storage = $(ibcrd_storage d)$" d/ibcrd.conf &&
	grep "^staging = $(ibcrd_staging d)$" d/ibcrd.conf &&
	ibcrd_start d &&
	test -S "$(ibcrd_sock d)" &&
	test -s d/ibcrd.log &&
	test "$(readlink d/storage)" = "$(ibcrd_storage d)" &&
	test "$(stat -c %u:%a "$(ibcrd_storage d)")" = 0:755
'

test_expect_success 'a program under ibcr run is checkpointed there (by the deep criu) and restored intact' '
	IBCR_SOCKET=$(ibcrd_sock d) && export IBCR_SOCKET &&
	{ "$IBCR" run --name dp -- "$PATTERN" --mib 8 >dp.out 2>dp.err & } &&
	ibcr_track $! &&
	ibcrd_wait_for grep -q "^start " dp.out &&
	"$IBCR" checkpoint dp --wait &&
	test -f "$(ibcrd_storage d)/local/dp/gen-1/manifest.json" &&
	test "$(ibcrd_manifest_gen d/storage/local/dp/gen-1/manifest.json)" = 1 &&
	test "$(manifest_criu d/storage/local/dp/gen-1/manifest.json)" = "$DCRIU" &&
	app=$(ibcrd_field dp app_pid) && init=$(ibcrd_field dp pid) &&
	ibcr_track $app $init &&
	kill -9 $init && ibcrd_wait_gone $app && ibcrd_wait_gone $init &&
	ibcrd_wait_for sh -c "! \"$IBCR\" status dp >/dev/null 2>&1" &&
	{ "$IBCR" restart dp >rs.out 2>rs.err & } &&
	ibcr_track $! &&
	ibcrd_wait_for grep -q "restored from generation 1" rs.err &&
	ibcrd_wait_for dp_app_known &&
	app=$(ibcrd_field dp app_pid) && ibcr_track $app &&
	kill -TERM $app &&
	ibcrd_wait_for grep -q "^final " rs.out &&
	cat rs.err rs.out &&
	grep "^final .*pattern=ok bad=0" rs.out &&
	test "$(sed -n "s/^start run=\([0-9a-f]*\) .*/\1/p" dp.out)" = \
		"$(sed -n "s/^final [0-9]* run=\([0-9a-f]*\) .*/\1/p" rs.out)"
'

test_expect_success 'ibcrd_host_start'"'"'s shared storage is in the short folder too' '
	test "$(ibcrd_shared_storage)" = "$SHORT/shared" &&
	test ${#SHORT} -lt 40
'

test_expect_success 'the helpers as every ibcrd test calls them: ibcrd starts from the deep folder' '
	ibcrd_setup e "criu = $IBCR_CRIU" "peer_port = 0" &&
	conf_is_short e/ibcrd.conf &&
	ibcrd_start e &&
	"$RAWMSG" "$(ibcrd_sock e)" "{\"version\":1,\"type\":\"ping\"}" >out &&
	grep "\"request\":\"ping\"" out &&
	test -d e/storage/local && test -d e/staging
'

test_done
