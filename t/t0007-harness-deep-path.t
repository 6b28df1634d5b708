#!/bin/sh
test_description='harness: a clone at a long path

A checkout may sit at any depth (a home directory, a CI workspace), but a
unix socket path may not exceed 107 bytes: a socket in the trash
directory once made ibcrd refuse its configuration, and the test then
hang.  Here the test works from a folder 200 characters below its trash
directory, as a deep clone would: munged and ibcrd start from it, with
their sockets in the short private folder (ibcr_shortdir), and a program
under "ibcr run" is checkpointed and restored intact.

Known breakage: ibcrd.conf lines may hold 198 characters (libinih'"'"'s
INI_MAX_LINE, see ibcrd.conf(5)), and ibcrd_setup writes storage and
staging as paths in the test'"'"'s folder, so from a clone deeper than
about 140 characters every ibcrd test fails at its start.  Here they go
to the short folder instead; the last test keeps them in the deep one.'

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

test_expect_success 'munged and ibcrd start from there (storage and staging in the short folder)' '
	ibcrd_munged_start m &&
	test -S "$(ibcrd_munge_sock m)" &&
	ibcrd_setup d "criu = $IBCR_CRIU" "peer_port = 0" "munge_socket = $(ibcrd_munge_sock m)" &&
	sed -i -e "s|^storage = .*|storage = $SHORT/d-storage|" \
		-e "s|^staging = .*|staging = $SHORT/d-staging|" d/ibcrd.conf &&
	ibcrd_start d &&
	test -S "$(ibcrd_sock d)" &&
	test -s d/ibcrd.log
'

test_expect_success 'a program under ibcr run is checkpointed there and restored intact' '
	IBCR_SOCKET=$(ibcrd_sock d) && export IBCR_SOCKET &&
	{ "$IBCR" run --name dp -- "$PATTERN" --mib 8 >dp.out 2>dp.err & } &&
	ibcr_track $! &&
	ibcrd_wait_for grep -q "^start " dp.out &&
	"$IBCR" checkpoint dp --wait &&
	test -f "$SHORT/d-storage/local/dp/gen-1/manifest.json" &&
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

test_expect_failure 'ibcrd starts with its storage and staging in the deep folder (ibcrd_setup as is)' '
	ibcrd_setup e "peer_port = 0" &&
	ibcrd_start e
'

test_done
